//! Tests on this machine's kernel, with sockets of the test process (no
//! root needed, except for the namespace test, which skips without it).
//!
//! The tests hold a lock so that the test process's sockets are only those
//! of the running test: the unit "me" (this process) then shows exactly what
//! the test wrote and read. There are no timing assertions: loopback data
//! is polled for until it shows, and only the values are checked.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use atoll_core::comm::{NetMonitor, UnitNetSample};
use atoll_core::Name;
use atoll_netdiag::{DiagMonitor, MonitorOptions, OwnerMap, SourceKind};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn me() -> BTreeMap<Name, Vec<u32>> {
    let mut u = BTreeMap::new();
    u.insert(Name::new("me").unwrap(), vec![std::process::id()]);
    u
}

/// Samples until `done` holds for unit `name` (at most ~2 s), returning the
/// last sample.
fn sample_until(
    m: &mut dyn NetMonitor,
    units: &BTreeMap<Name, Vec<u32>>,
    name: &str,
    done: impl Fn(&UnitNetSample) -> bool,
) -> UnitNetSample {
    let key = Name::new(name).unwrap();
    let mut last = UnitNetSample::default();
    for _ in 0..400 {
        last = m.sample(units).unwrap()[&key];
        if done(&last) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    last
}

fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    (a, b)
}

#[test]
fn sock_diag_sees_queued_then_read_bytes_of_this_process() {
    let _g = lock();
    const N: usize = 5000;
    let mut m = DiagMonitor::new(MonitorOptions::default());
    assert_eq!(
        m.source_kind(),
        SourceKind::SockDiag,
        "fell back: {:?}",
        m.fallback_reason()
    );
    let units = me();
    let base = m.sample(&units).unwrap()[&Name::new("me").unwrap()];

    let (mut a, mut b) = tcp_pair();
    let (mut u1, mut u2) = UnixStream::pair().unwrap();
    a.write_all(&[1u8; N]).unwrap();
    u1.write_all(&[2u8; N]).unwrap();
    let s = sample_until(&mut m, &units, "me", |s| {
        s.recv_queued >= base.recv_queued + 2 * N as u64
    });
    assert!(s.recv_queued >= 2 * N as u64, "{s:?}");
    assert!(s.sockets >= base.sockets + 4, "{s:?} vs {base:?}");
    assert_eq!(
        s.bytes_received, base.bytes_received,
        "nothing was read yet: {s:?}"
    );

    let mut got = vec![0u8; N];
    b.read_exact(&mut got).unwrap();
    u2.read_exact(&mut got).unwrap();
    let s2 = sample_until(&mut m, &units, "me", |x| {
        x.bytes_received >= s.bytes_received + N as u64
    });
    assert_eq!(s2.bytes_received - s.bytes_received, N as u64, "{s2:?}");
    assert_eq!(s2.recv_queued + 2 * N as u64, s.recv_queued, "{s2:?}");
    // What `a` wrote shows as sent once acknowledged; more TCP sent by
    // nobody else in this process.
    let s3 = sample_until(&mut m, &units, "me", |x| {
        x.bytes_sent >= base.bytes_sent + N as u64
    });
    assert!(s3.bytes_sent >= base.bytes_sent + N as u64, "{s3:?}");
}

#[test]
fn units_only_count_their_own_processes() {
    let _g = lock();
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let (mut a, _b) = tcp_pair();
    a.write_all(&[0u8; 100]).unwrap();
    let mut units = me();
    units.insert(Name::new("sleeper").unwrap(), vec![child.id()]);
    units.insert(Name::new("ghost").unwrap(), vec![u32::MAX - 1]);
    let mut m = DiagMonitor::new(MonitorOptions::default());
    let s = sample_until(&mut m, &units, "me", |s| s.recv_queued >= 100);
    let all = m.sample(&units).unwrap();
    assert!(s.recv_queued >= 100);
    assert_eq!(
        all[&Name::new("sleeper").unwrap()],
        UnitNetSample::default()
    );
    assert_eq!(all[&Name::new("ghost").unwrap()], UnitNetSample::default());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn proc_net_fallback_sees_tcp_queues() {
    let _g = lock();
    const N: usize = 3000;
    let mut m = DiagMonitor::proc_net(MonitorOptions::default());
    assert_eq!(m.source_kind(), SourceKind::ProcNet);
    let (mut a, _b) = tcp_pair();
    let (_u1, _u2) = UnixStream::pair().unwrap();
    a.write_all(&[1u8; N]).unwrap();
    let s = sample_until(&mut m, &me(), "me", |s| s.recv_queued >= N as u64);
    assert!(s.recv_queued >= N as u64, "{s:?}");
    assert!(s.sockets >= 4, "{s:?}");
    assert_eq!(
        (s.bytes_received, s.bytes_sent),
        (0, 0),
        "no counters in /proc/net"
    );
}

/// Linux 6.2+ reports a process's fd count as the size of `/proc/<pid>/fd`:
/// new sockets are then found by one `stat` of each pid and a rescan of
/// only the pids whose count changed.
#[test]
fn fd_counts_limit_rescans() {
    let _g = lock();
    let pid = std::process::id();
    let mut m = OwnerMap::new("/proc", 0);
    m.begin(&[pid]);
    if !m.counts_fds(pid) {
        eprintln!("procfs does not report fd counts here: skipped");
        return;
    }
    let inode_of = |fd: &dyn AsRawFd| {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        let s = link.to_str().unwrap().to_string();
        s.trim_start_matches("socket:[")
            .trim_end_matches(']')
            .parse::<u64>()
            .unwrap()
    };
    let (a, b) = tcp_pair();
    let inodes = [inode_of(&a), inode_of(&b)];
    let before = *m.stats();
    m.begin(&[pid]);
    assert_eq!(m.reconcile(inodes), 1);
    for i in inodes {
        assert!(m.inodes(pid).contains(&i));
    }
    assert_eq!(m.stats().size_checks, before.size_checks + 1);
    // Nothing new: no stat, no scan.
    m.begin(&[pid]);
    assert_eq!(m.reconcile(inodes), 0);
    // A socket nobody here holds (it is new but the fd count is unchanged):
    // one stat, no scan.
    let scans = m.stats().fd_scans;
    m.begin(&[pid]);
    assert_eq!(m.reconcile([inodes[0], inodes[1], u64::MAX]), 0);
    assert_eq!(m.stats().fd_scans, scans);

    // Churn at a level fd count: one connection closes, another opens.
    // Not seen by the count; seen by the blind rescan within
    // `churn_rescan_every` (4) epochs.
    drop(a);
    let (c, _d) = tcp_pair();
    drop(_d);
    let churned = [inode_of(&b), inode_of(&c)];
    let mut epochs = 0;
    while !m.inodes(pid).contains(&churned[1]) {
        m.begin(&[pid]);
        m.reconcile(churned.iter().copied().chain([u64::MAX - 1 - epochs]));
        epochs += 1;
        assert!(epochs <= 8, "churned socket not found");
    }
    assert!(
        m.stats().blind_rescans >= 1 || epochs == 1,
        "{:?}",
        m.stats()
    );
}

/// A process in another network namespace: its sockets are only in that
/// namespace's dump. Needs root (for `unshare -n` and `setns`); skipped
/// otherwise.
#[test]
fn sockets_of_another_network_namespace() {
    if std::env::var_os("ATOLL_NETDIAG_CHILD").is_some() {
        return namespace_child();
    }
    let _g = lock();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: skipped");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let spawned = Command::new("unshare")
        .arg("-n")
        .arg(&exe)
        .args([
            "--exact",
            "sockets_of_another_network_namespace",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ATOLL_NETDIAG_CHILD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = spawned else {
        eprintln!("unshare not available: skipped");
        return;
    };
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ready = false;
    let mut line = String::new();
    while out.read_line(&mut line).unwrap_or(0) > 0 {
        if line.contains("netdiag-child-ready") {
            ready = true;
            break;
        }
        line.clear();
    }
    if !ready {
        let _ = child.kill();
        let _ = child.wait();
        eprintln!("unshare -n failed (no permission for namespaces?): skipped");
        return;
    }
    let mut units = BTreeMap::new();
    units.insert(Name::new("jail").unwrap(), vec![child.id()]);
    let mut m = DiagMonitor::new(MonitorOptions::default());
    let s = sample_until(&mut m, &units, "jail", |s| s.recv_queued >= 700);
    let stats = m.stats();
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(stats.namespaces_skipped, 0, "{:?}", stats.last_skip);
    assert!(s.recv_queued >= 700, "{s:?}");
    assert_eq!(s.sockets, 2, "{s:?}");
}

/// The child side: a Unix pair with 700 bytes queued, then wait for stdin
/// to close.
fn namespace_child() {
    let (mut a, _b) = UnixStream::pair().unwrap();
    a.write_all(&[9u8; 700]).unwrap();
    println!("netdiag-child-ready");
    std::io::stdout().flush().unwrap();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}
