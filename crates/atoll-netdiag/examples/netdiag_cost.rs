//! What one `NetMonitor::sample` costs, sock_diag against `/proc/net`.
//!
//! ```text
//! cargo run --release -p atoll-netdiag --example netdiag_cost -- \
//!     [--pairs 10,100,1000] [--procs 4] [--samples 300] [--cold 20]
//! ```
//!
//! For each S in `--pairs`, the example opens S connected loopback TCP
//! pairs: the client ends in P child processes (re-executions of this
//! example, one unit each), the server ends in this process (unit
//! `server`); every socket has 100 bytes queued. Then, for each source:
//!
//! - **cold**: the first sample of a new monitor (every pid's fds read),
//!   `--cold` times;
//! - **warm**: `--samples` samples of one monitor (the incremental map warm;
//!   its periodic rescans included: each pid's fds are read once every 33
//!   samples);
//! - **churn**: the same, with one new connection opened in `server` before
//!   each sample and closed after (the new-socket rule: a `stat` per pid and
//!   a rescan of the server's fds).
//!
//! It prints p50 and p99 in microseconds, and the `/proc/net` to sock_diag
//! ratio. Needs nothing but loopback; raises its fd limit to the hard
//! limit.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use atoll_core::comm::NetMonitor;
use atoll_core::Name;
use atoll_netdiag::{DiagMonitor, MonitorOptions, SourceKind};

struct Args {
    pairs: Vec<usize>,
    procs: usize,
    samples: usize,
    cold: usize,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Args {
    let mut a = Args {
        pairs: vec![10, 100, 1000],
        procs: 4,
        samples: 300,
        cold: 20,
    };
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--pairs" => {
                a.pairs = v
                    .split(',')
                    .map(|s| s.parse().expect("--pairs N,N,..."))
                    .collect()
            }
            "--procs" => a.procs = v.parse().expect("--procs N"),
            "--samples" => a.samples = v.parse().expect("--samples N"),
            "--cold" => a.cold = v.parse().expect("--cold N"),
            other => panic!("unknown argument {other}"),
        }
    }
    a.procs = a.procs.max(1);
    a
}

fn raise_fd_limit() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur = r.rlim_max;
        // SAFETY: `r` is a valid rlimit read just above.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    }
}

/// Child mode: `child PORT COUNT`: connect, write 100 bytes on each, say
/// ready, hold until stdin closes.
fn child(port: u16, count: usize) {
    raise_fd_limit();
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.write_all(&[1u8; 100]).expect("write");
        held.push(s);
    }
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(held);
}

struct Rig {
    children: Vec<Child>,
    server_ends: Vec<TcpStream>,
    listener: TcpListener,
    units: BTreeMap<Name, Vec<u32>>,
}

fn setup(pairs: usize, procs: usize) -> Rig {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let exe = std::env::current_exe().unwrap();
    let mut children = Vec::new();
    let mut units = BTreeMap::new();
    units.insert(Name::new("server").unwrap(), vec![std::process::id()]);
    for i in 0..procs {
        let count = pairs / procs + usize::from(i < pairs % procs);
        let c = Command::new(&exe)
            .args(["child", &port.to_string(), &count.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        units.insert(Name::new(&format!("client{i}")).unwrap(), vec![c.id()]);
        children.push(c);
    }
    let mut server_ends = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&[2u8; 100]).unwrap();
        server_ends.push(s);
    }
    for c in &mut children {
        let mut line = String::new();
        BufReader::new(c.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
    }
    Rig {
        children,
        server_ends,
        listener,
        units,
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.server_ends.clear();
        for c in &mut self.children {
            drop(c.stdin.take());
            let _ = c.wait();
        }
    }
}

fn monitor(kind: SourceKind) -> DiagMonitor {
    match kind {
        SourceKind::ProcNet => DiagMonitor::proc_net(MonitorOptions::default()),
        _ => {
            let m = DiagMonitor::new(MonitorOptions::default());
            assert_eq!(
                m.source_kind(),
                SourceKind::SockDiag,
                "{:?}",
                m.fallback_reason()
            );
            m
        }
    }
}

fn pct(v: &mut [Duration]) -> (f64, f64) {
    v.sort();
    let at = |q: usize| v[(v.len() * q / 100).min(v.len() - 1)].as_secs_f64() * 1e6;
    (at(50), at(99))
}

struct Row {
    cold: (f64, f64),
    warm: (f64, f64),
    churn: (f64, f64),
    sockets: u64,
    dump: usize,
    /// fd links read per sample during churn.
    churn_links: f64,
}

fn measure(kind: SourceKind, rig: &Rig, a: &Args) -> Row {
    let mut cold = Vec::new();
    let mut sockets = 0;
    for _ in 0..a.cold {
        let mut m = monitor(kind);
        let t = Instant::now();
        let s = m.sample(&rig.units).unwrap();
        cold.push(t.elapsed());
        sockets = s.values().map(|u| u64::from(u.sockets)).sum();
    }
    let mut m = monitor(kind);
    for _ in 0..5 {
        m.sample(&rig.units).unwrap();
    }
    let mut warm = Vec::new();
    for _ in 0..a.samples {
        let t = Instant::now();
        std::hint::black_box(m.sample(&rig.units).unwrap());
        warm.push(t.elapsed());
    }
    let dump = m.stats().last_sockets;
    let addr = rig.listener.local_addr().unwrap();
    let links_before = m.stats().owners.fd_links;
    let mut churn = Vec::new();
    for _ in 0..a.samples {
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = rig.listener.accept().unwrap();
        let t = Instant::now();
        std::hint::black_box(m.sample(&rig.units).unwrap());
        churn.push(t.elapsed());
        drop((c, s));
    }
    let churn_links = (m.stats().owners.fd_links - links_before) as f64 / a.samples as f64;
    Row {
        cold: pct(&mut cold),
        warm: pct(&mut warm),
        churn: pct(&mut churn),
        sockets,
        dump,
        churn_links,
    }
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let first = argv.next();
    if first.as_deref() == Some("child") {
        let port = argv.next().and_then(|p| p.parse().ok()).expect("port");
        let count = argv.next().and_then(|p| p.parse().ok()).expect("count");
        return child(port, count);
    }
    let a = parse_args(first.into_iter().chain(argv));
    raise_fd_limit();
    println!(
        "samples {} (cold {}), {} client processes; times in µs per sample() call",
        a.samples, a.cold, a.procs
    );
    println!(
        "{:>6} {:>9} {:>9} | {:>17} | {:>17} | {:>17} | {:>6}",
        "pairs", "source", "sockets", "cold p50 / p99", "warm p50 / p99", "churn p50 / p99", "fds"
    );
    for &pairs in &a.pairs {
        let rig = setup(pairs, a.procs.min(pairs.max(1)));
        let nl = measure(SourceKind::SockDiag, &rig, &a);
        let pn = measure(SourceKind::ProcNet, &rig, &a);
        for (name, r) in [("sock_diag", &nl), ("proc_net", &pn)] {
            let sockets = format!("{}/{}", r.sockets, r.dump);
            println!(
                "{pairs:>6} {name:>9} {sockets:>9} | {:>8.0} {:>8.0} | {:>8.0} {:>8.0} | {:>8.0} {:>8.0} | {:>6.0}",
                r.cold.0, r.cold.1, r.warm.0, r.warm.1, r.churn.0, r.churn.1, r.churn_links
            );
        }
        println!(
            "{pairs:>6} {:>9} {:>9} | {:>8.2} {:>8.2} | {:>8.2} {:>8.2} | {:>8.2} {:>8.2} |",
            "ratio",
            "",
            pn.cold.0 / nl.cold.0,
            pn.cold.1 / nl.cold.1,
            pn.warm.0 / nl.warm.0,
            pn.warm.1 / nl.warm.1,
            pn.churn.0 / nl.churn.0,
            pn.churn.1 / nl.churn.1,
        );
    }
    println!("sockets: the units' sockets found / all sockets the dumps returned");
    println!("ratio: proc_net / sock_diag; fds: fd links read per sample during churn");
}
