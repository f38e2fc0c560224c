//! What finding new processes costs the daemon on this machine: listing
//! `/proc` every epoch (`ProcessTable::pids`, today's scan) against reading
//! proc connector events. Needs root (or a kernel that lets anyone listen)
//! and a kernel with the proc connector.
//!
//! `cargo run --release -p atoll-procfs --example discovery_cost`
//!
//! Costs are this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), user and
//! kernel. The kernel's work of building and queuing each event is charged
//! to the process that forks, execs or exits, not to the reader, and is not
//! in these figures.

use std::collections::HashSet;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use atoll_core::events::{ProcEvent, ProcEventSource};
use atoll_core::process::ProcessTable;
use atoll_procfs::connector::{ConnectorOptions, ProcConnector};
use atoll_procfs::ProcFs;

/// The daemon's epoch.
const EPOCH: Duration = Duration::from_millis(30);

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(
        u64::try_from(ts.tv_sec).expect("a CPU-time clock is never negative"),
        u32::try_from(ts.tv_nsec).expect("tv_nsec is below 1e9"),
    )
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The receive-queue bytes of the netlink socket with inode `ino`, from
/// `/proc/net/netlink` (`Rmem` column).
fn queued_bytes(ino: u64) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/netlink").ok()?;
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(9)?.parse::<u64>().ok()? == ino).then(|| f.get(4)?.parse().ok())?
    })
}

fn inode_of(fd: i32) -> u64 {
    // SAFETY: stat is plain data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the call and `st` is valid for writes.
    unsafe { libc::fstat(fd, &mut st) };
    st.st_ino
}

fn main() {
    let procs = ProcFs::system();
    let n_pids = procs.pids().expect("list /proc").len();

    // 1. Today: list /proc.
    let rounds = 2000;
    for _ in 0..50 {
        procs.pids().unwrap();
    }
    let cpu0 = thread_cpu();
    for _ in 0..rounds {
        std::hint::black_box(procs.pids().unwrap());
    }
    let list = (thread_cpu() - cpu0) / rounds;

    let mut c = match ProcConnector::open(&ConnectorOptions::default()) {
        Ok(c) => c,
        Err(e) => {
            println!("list /proc ({n_pids} pids): {:.1} us per epoch", us(list));
            println!("proc connector unavailable ({}): {e}", e.reason());
            return;
        }
    };

    // 2. Events, nothing new: one non-blocking check per epoch.
    let checks = 20_000u32;
    let mut stray = 0usize;
    let cpu0 = thread_cpu();
    for _ in 0..checks {
        stray += c.next_batch(Duration::ZERO).unwrap().events.len();
    }
    let idle = (thread_cpu() - cpu0) / checks;

    // 3. Events, per new process: 1000 children come and go unread, then
    //    one drain reads all their events (and anyone else's).
    let _ = c.next_batch(Duration::ZERO);
    let before = c.stats();
    let children = 1000;
    let pids: HashSet<u32> = (0..children)
        .map(|_| {
            let mut ch = Command::new("true").spawn().expect("spawn true");
            let pid = ch.id();
            ch.wait().unwrap();
            pid
        })
        .collect();
    let rmem = queued_bytes(inode_of(c.as_raw_fd()));
    let cpu0 = thread_cpu();
    let mut seen = 0usize;
    let mut overflowed = false;
    loop {
        let b = c.next_batch(Duration::ZERO).unwrap();
        if b.is_empty() {
            break;
        }
        overflowed |= b.overflowed;
        seen += b
            .events
            .iter()
            .filter(|e| matches!(e, ProcEvent::Fork { child, .. } if pids.contains(child)))
            .count();
    }
    let drain = thread_cpu() - cpu0;
    let after = c.stats();
    let datagrams = after.datagrams - before.datagrams;
    let per_datagram = drain / u32::try_from(datagrams.max(1)).unwrap_or(u32::MAX);

    // 4. This machine's own event rate, over 3 s of listening.
    let _ = c.next_batch(Duration::ZERO);
    let (s0, t0) = (c.stats(), Instant::now());
    let mut forks = 0usize;
    while t0.elapsed() < Duration::from_secs(3) {
        let b = c.next_batch(Duration::from_millis(100)).unwrap();
        forks += b
            .events
            .iter()
            .filter(|e| matches!(e, ProcEvent::Fork { .. }))
            .count();
    }
    let secs = t0.elapsed().as_secs_f64();
    let dgram_rate = (c.stats().datagrams - s0.datagrams) as f64 / secs;
    let fork_rate = forks as f64 / secs;

    let epochs = 1.0 / EPOCH.as_secs_f64();
    let list_per_s = us(list) * epochs;
    let events_per_s = us(idle) * epochs + us(per_datagram) * dgram_rate;
    println!("discovering new processes, {n_pids} pids on this machine, {EPOCH:?} epochs");
    println!(
        "  list /proc (ProcessTable::pids):        {:8.2} us per epoch",
        us(list)
    );
    println!(
        "  connector, nothing new (next_batch(0)): {:8.2} us per epoch   ratio {:.0}x",
        us(idle),
        us(list) / us(idle)
    );
    println!(
        "  connector, per datagram read:           {:8.2} us   ({} datagrams for {children} children: {:.1} per child; {seen}/{children} forks seen, overflowed {overflowed})",
        us(per_datagram),
        datagrams,
        datagrams as f64 / children as f64
    );
    if let Some(bytes) = rmem {
        println!(
            "  receive buffer held by the queued burst: {bytes} bytes, {:.0} per datagram",
            bytes as f64 / datagrams.max(1) as f64
        );
    }
    println!(
        "  this machine now: {fork_rate:.1} process forks/s, {dgram_rate:.1} datagrams/s (threads included)"
    );
    println!(
        "  per second of daemon time: list {list_per_s:.0} us, events {events_per_s:.0} us   ratio {:.0}x",
        list_per_s / events_per_s
    );
    println!(
        "  listing stays cheaper only above {:.0} datagrams/s",
        (list_per_s - us(idle) * epochs) / us(per_datagram)
    );
    if stray > 0 {
        println!("  ({stray} events arrived during the idle checks)");
    }
}
