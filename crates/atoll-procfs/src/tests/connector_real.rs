//! The proc connector against the running kernel. Other processes on the
//! machine produce events too: every assertion is about processes and
//! threads this test started itself. The tests skip (with a printed reason)
//! when not root or outside the initial namespaces, and when the kernel
//! lacks the connector, unless `/proc/net/connector` says it has it.

use std::collections::HashSet;
use std::process::Command;
use std::time::{Duration, Instant};

use atoll_core::events::{IdChange, ProcEvent, ProcEventSource};

use super::is_root;
use crate::connector::{ConnectorOptions, ProcConnector, Unavailable};

/// Whether `/proc/net/connector` lists `cn_proc` (`None`: unreadable).
fn kernel_has_proc_events() -> Option<bool> {
    let t = std::fs::read_to_string("/proc/net/connector").ok()?;
    Some(t.lines().any(|l| l.starts_with("cn_proc ")))
}

/// A subscribed connector, or `None` (with the reason printed) where this
/// machine cannot have one.
fn open(opts: ConnectorOptions) -> Option<ProcConnector> {
    if !is_root() {
        eprintln!("skipped: not root");
        return None;
    }
    match ProcConnector::open(&opts) {
        Ok(c) => Some(c),
        Err(e) if e.reason() == Unavailable::Namespaced => {
            eprintln!("skipped: {e}");
            None
        }
        Err(e)
            if kernel_has_proc_events() != Some(true)
                && matches!(
                    e.reason(),
                    Unavailable::NoKernelSupport | Unavailable::NoAnswer
                ) =>
        {
            eprintln!("skipped: {e}");
            None
        }
        Err(e) => panic!("root, initial namespaces, cn_proc registered, and still: {e}"),
    }
}

/// Reads batches until `done` holds for everything read so far or
/// `within` passes; returns the events and whether any batch overflowed.
fn read_until(
    c: &mut ProcConnector,
    within: Duration,
    mut done: impl FnMut(&[ProcEvent]) -> bool,
) -> (Vec<ProcEvent>, bool) {
    let deadline = Instant::now() + within;
    let (mut events, mut overflowed) = (Vec::new(), false);
    while !done(&events) && Instant::now() < deadline {
        let b = c
            .next_batch(Duration::from_millis(200))
            .expect("next_batch");
        overflowed |= b.overflowed;
        events.extend(b.events);
    }
    (events, overflowed)
}

fn about(events: &[ProcEvent], pid: u32) -> Vec<ProcEvent> {
    events.iter().filter(|e| e.pid() == pid).cloned().collect()
}

fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    u32::try_from(tid).unwrap()
}

#[test]
fn sees_fork_exec_comm_and_exit_of_a_child() {
    let Some(mut c) = open(ConnectorOptions::default()) else {
        return;
    };
    let me = std::process::id();
    // The shell renames itself through /proc/self/comm (a builtin and a
    // redirection: no further exec).
    let mut child = Command::new("sh")
        .args(["-c", "printf atoll-cn-comm > /proc/self/comm"])
        .spawn()
        .expect("spawn sh");
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    let exit = ProcEvent::Exit { pid };
    let (events, overflowed) = read_until(&mut c, Duration::from_secs(20), |ev| ev.contains(&exit));
    assert!(!overflowed, "lost events; stats {:?}", c.stats());
    assert_eq!(
        about(&events, pid),
        vec![
            ProcEvent::Fork {
                parent: me,
                child: pid
            },
            ProcEvent::Exec { pid },
            ProcEvent::Comm {
                pid,
                comm: "atoll-cn-comm".into()
            },
            exit,
        ]
    );
}

#[test]
fn sees_gid_and_uid_changes_of_a_child() {
    use std::os::unix::process::CommandExt;
    let Some(mut c) = open(ConnectorOptions::default()) else {
        return;
    };
    let mut child = Command::new("true")
        .uid(65534)
        .gid(65534)
        .spawn()
        .expect("spawn true as 65534");
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    let exit = ProcEvent::Exit { pid };
    let (events, overflowed) = read_until(&mut c, Duration::from_secs(20), |ev| ev.contains(&exit));
    assert!(!overflowed, "lost events; stats {:?}", c.stats());
    let ids: Vec<IdChange> = about(&events, pid)
        .into_iter()
        .filter_map(|e| match e {
            ProcEvent::Id { change, .. } => Some(change),
            _ => None,
        })
        .collect();
    // std sets the group first, then the user, then execs.
    assert_eq!(
        ids,
        vec![
            IdChange::Gid {
                real: 65534,
                effective: 65534
            },
            IdChange::Uid {
                real: 65534,
                effective: 65534
            }
        ]
    );
    let mine = about(&events, pid);
    let exec_at = mine.iter().position(|e| *e == ProcEvent::Exec { pid });
    let uid_at = mine.iter().position(|e| {
        matches!(
            e,
            ProcEvent::Id {
                change: IdChange::Uid { .. },
                ..
            }
        )
    });
    assert!(uid_at < exec_at && exec_at.is_some(), "{mine:?}");
}

#[test]
fn threads_are_not_processes() {
    let Some(mut c) = open(ConnectorOptions::default()) else {
        return;
    };
    let me = std::process::id();
    let before = c.stats().thread_events;
    // A thread that is created, renames itself (prctl PR_SET_NAME, through
    // std) and exits.
    let t = std::thread::Builder::new()
        .name("atoll-cn-thrd".into())
        .spawn(gettid)
        .unwrap();
    let tid = t.join().unwrap();
    assert_ne!(tid, me);
    // A child process afterwards: once its exit is read, the thread's
    // events have been read too (same CPU or not, they were sent before).
    let mut marker = Command::new("true").spawn().expect("spawn true");
    let pid = marker.id();
    marker.wait().unwrap();
    let exit = ProcEvent::Exit { pid };
    let (events, overflowed) = read_until(&mut c, Duration::from_secs(20), |ev| ev.contains(&exit));
    assert!(!overflowed, "lost events; stats {:?}", c.stats());
    assert!(events.contains(&ProcEvent::Fork {
        parent: me,
        child: pid
    }));
    assert_eq!(
        about(&events, tid),
        vec![],
        "the thread showed up as a process"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProcEvent::Comm { comm, .. } if comm == "atoll-cn-thrd")),
        "a thread's rename showed up as the process's"
    );
    // Its creation, rename and exit were seen, and dropped.
    assert!(
        c.stats().thread_events >= before + 3,
        "{} thread events before, {:?} now",
        before,
        c.stats()
    );
}

/// Spawns `n` children of `true` one after the other, reaping each;
/// returns their pids.
fn spawn_burst(n: usize) -> HashSet<u32> {
    (0..n)
        .map(|_| {
            let mut ch = Command::new("true").spawn().expect("spawn true");
            let pid = ch.id();
            ch.wait().unwrap();
            pid
        })
        .collect()
}

/// Reads until a batch comes back empty after `quiet`: everything the
/// kernel queued so far has been read.
fn drain(c: &mut ProcConnector, quiet: Duration) -> (Vec<ProcEvent>, bool, usize) {
    let (mut events, mut overflowed, mut batches) = (Vec::new(), false, 0);
    loop {
        let b = c.next_batch(quiet).expect("next_batch");
        if b.is_empty() {
            return (events, overflowed, batches);
        }
        batches += 1;
        overflowed |= b.overflowed;
        events.extend(b.events);
    }
}

#[test]
fn a_burst_is_seen_whole_or_flagged() {
    let Some(mut c) = open(ConnectorOptions::default()) else {
        return;
    };
    // Nothing is read while the 2000 children come and go: their events
    // (and those of everything else on the machine) queue in the socket.
    let pids = spawn_burst(2000);
    let (events, overflowed, batches) = drain(&mut c, Duration::from_millis(500));
    let forks: HashSet<u32> = events
        .iter()
        .filter_map(|e| match e {
            ProcEvent::Fork { child, .. } if pids.contains(child) => Some(*child),
            _ => None,
        })
        .collect();
    let seen = |want: fn(u32) -> ProcEvent| -> usize {
        pids.iter().filter(|p| events.contains(&want(**p))).count()
    };
    let (execs, exits) = (
        seen(|pid| ProcEvent::Exec { pid }),
        seen(|pid| ProcEvent::Exit { pid }),
    );
    eprintln!(
        "burst of {}: {} forks, {} execs, {} exits seen in {} batches; overflowed: {}; {:?}",
        pids.len(),
        forks.len(),
        execs,
        exits,
        batches,
        overflowed,
        c.stats()
    );
    let whole = forks.len() == pids.len() && execs == pids.len() && exits == pids.len();
    assert!(whole || overflowed, "events lost without the overflow flag");
}

#[test]
fn a_small_buffer_overflows_says_so_and_recovers() {
    // The smallest buffer the kernel grants holds a handful of events.
    let opts = ConnectorOptions {
        recv_buffer: 1,
        ..ConnectorOptions::default()
    };
    let Some(mut c) = open(opts) else {
        return;
    };
    let granted = c.stats().recv_buffer;
    spawn_burst(300);
    let (_, overflowed, _) = drain(&mut c, Duration::from_millis(500));
    eprintln!("{granted}-byte buffer after 300 children: {:?}", c.stats());
    assert!(overflowed, "900 events fit in {granted} bytes?");
    assert!(c.stats().enobufs > 0 || c.stats().seq_gaps > 0);
    // The socket keeps working after the loss. The buffer holds two or
    // three events, so other processes' events may push out some of a
    // child's: up to five children, until one is seen.
    let mut seen = Vec::new();
    for _ in 0..5 {
        let mut ch = Command::new("true").spawn().expect("spawn true");
        let pid = ch.id();
        ch.wait().unwrap();
        let exit = ProcEvent::Exit { pid };
        let (events, _) = read_until(&mut c, Duration::from_secs(2), |ev| ev.contains(&exit));
        seen = about(&events, pid);
        if !seen.is_empty() {
            break;
        }
    }
    assert!(
        !seen.is_empty(),
        "nothing after the overflow; {:?}",
        c.stats()
    );
}

#[test]
fn batches_stop_at_max_batch() {
    let opts = ConnectorOptions {
        max_batch: 5,
        ..ConnectorOptions::default()
    };
    let Some(mut c) = open(opts) else {
        return;
    };
    let pids = spawn_burst(10);
    let mut exits = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while exits.len() < pids.len() && Instant::now() < deadline {
        let b = c.next_batch(Duration::from_millis(200)).unwrap();
        assert!(
            b.events.len() <= 5,
            "{} events in one batch",
            b.events.len()
        );
        assert!(!b.overflowed, "{:?}", c.stats());
        exits.extend(b.events.iter().filter_map(|e| match e {
            ProcEvent::Exit { pid } if pids.contains(pid) => Some(*pid),
            _ => None,
        }));
    }
    assert_eq!(exits, pids);
}

#[test]
fn other_listeners_coming_and_going_are_not_losses() {
    let Some(mut c) = open(ConnectorOptions::default()) else {
        return;
    };
    let _ = c.next_batch(Duration::ZERO);
    let before = c.stats();
    for _ in 0..5 {
        let other = ProcConnector::open(&ConnectorOptions::default()).unwrap();
        drop(other);
    }
    let mut ch = Command::new("true").spawn().expect("spawn true");
    let pid = ch.id();
    ch.wait().unwrap();
    let exit = ProcEvent::Exit { pid };
    let (_, overflowed) = read_until(&mut c, Duration::from_secs(20), |ev| ev.contains(&exit));
    let after = c.stats();
    eprintln!("before {before:?}\nafter  {after:?}");
    assert!(!overflowed, "{after:?}");
}
