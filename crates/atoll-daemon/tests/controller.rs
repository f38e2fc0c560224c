//! The control loop driven step by step on the simulated backend: building
//! the hierarchy, adoption by rules and by the API, permissions, teardown,
//! the RT guard, and the loop under load (recovery is in `recovery.rs`, the
//! isolation modes in `isolation_modes.rs`).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use atoll_core::backend::Monitor;
use atoll_core::plan::{GroupPath, TaskPolicy};
use atoll_core::process::{CgroupMembership, TaskControl};
use atoll_daemon::command::{Caller, Command};
use atoll_daemon::controller::{Controller, ControllerError, Env, Flow, Options};
use atoll_proto::{ErrorCode, Reply, Request};

mod common;

use common::rig::{adopt, ask, spec, Rig, ROOT_CALLER};
use common::sim::topo8;

#[test]
fn start_builds_the_planned_hierarchy() {
    let rig = Rig::new();
    let mut c = rig.controller(spec(false));
    c.start().unwrap();
    for g in ["", "host", "web", "web/api", "rt", "rt/ctl"] {
        assert!(rig.sim.exists(&GroupPath::from_relative(g)), "{g} missing");
    }
    let api = rig
        .sim
        .settings(&GroupPath::from_relative("web/api"))
        .unwrap();
    assert_eq!(api.cpu_weight, Some(150));
    assert_eq!(api.cpu_max.map(|m| m.quota_us), Some(200_000));
    assert_eq!(
        rig.sim.partition_valid(&GroupPath::from_relative("web")),
        Some(true)
    );
    let rt = rig
        .sim
        .settings(&GroupPath::from_relative("rt/ctl"))
        .unwrap();
    assert_eq!(rt.rt_budget.map(|b| b.runtime_us), Some(300_000));
    let applied: Vec<String> = c
        .decisions()
        .query(None, 100)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert!(
        applied
            .iter()
            .any(|d| d.starts_with("set web/api: cpu.weight=150 cpu.max=200000 100000")),
        "{applied:#?}"
    );
    assert!(rig.state.path().join("state.json").exists());
}

#[test]
fn rules_adopt_matching_processes_and_apply_the_island_policy() {
    let rig = Rig::new();
    let nginx = rig.sim.spawn("nginx", 33, Some("/usr/sbin/nginx"));
    let other = rig.sim.spawn("bash", 1000, None);
    let mut c = rig.controller(spec(false));
    c.start().unwrap();
    assert_eq!(rig.group_of(nginx).as_deref(), Some("/atoll-t/web/api"));
    assert_eq!(
        rig.group_of(other).as_deref(),
        Some("/user.slice"),
        "unmatched process moved"
    );
    // A process that execs into a rule's program after it was first seen.
    let late = rig.sim.spawn("sh", 0, None);
    rig.epochs(&mut c, 2);
    assert_eq!(rig.group_of(late).as_deref(), Some("/user.slice"));
    // Forked, then exec'd into nginx a few epochs later: still adopted.
    let forked = rig.sim.spawn("bash", 0, None);
    rig.epochs(&mut c, 3);
    assert_eq!(rig.group_of(forked).as_deref(), Some("/user.slice"));
    rig.sim
        .exec(forked, "nginx", Some("/usr/sbin/nginx"))
        .unwrap();
    rig.epochs(&mut c, 8);
    assert_eq!(rig.group_of(forked).as_deref(), Some("/atoll-t/web/api"));
    // After a second, a process is settled: a late exec is not followed.
    let settled = rig.sim.spawn("bash", 0, None);
    rig.epochs(&mut c, 40);
    rig.sim.exec(settled, "nginx", None).unwrap();
    rig.epochs(&mut c, 40);
    assert_eq!(rig.group_of(settled).as_deref(), Some("/user.slice"));
    let ctl = rig.sim.spawn("ctl", 0, None);
    rig.epochs(&mut c, 1);
    assert_eq!(rig.group_of(ctl).as_deref(), Some("/atoll-t/rt/ctl"));
    assert_eq!(rig.sim.policy(ctl).unwrap(), TaskPolicy::Fifo(20));
    let why = c.decisions().query(Some("api"), 10);
    assert!(
        why.iter()
            .any(|d| d.to_string().contains("adoption rule Comm(\"nginx\")")),
        "{why:#?}"
    );
}

#[test]
fn adopt_all_sends_unmanaged_tasks_to_the_host_but_not_kernel_threads() {
    let rig = Rig::new();
    let user = rig.sim.spawn("bash", 1000, None);
    let kt = rig.sim.spawn_kernel_thread("kworker/0:1");
    let nginx = rig.sim.spawn("nginx", 33, None);
    let mut c = rig.controller(spec(true));
    c.start().unwrap();
    assert_eq!(rig.group_of(user).as_deref(), Some("/atoll-t/host"));
    assert_eq!(rig.group_of(nginx).as_deref(), Some("/atoll-t/web/api"));
    assert_ne!(rig.group_of(kt).as_deref(), Some("/atoll-t/host"));
    c.teardown().unwrap();
    assert_eq!(rig.group_of(user).as_deref(), Some("/user.slice"));
    assert_eq!(rig.group_of(nginx).as_deref(), Some("/user.slice"));
}

#[test]
fn api_adopt_creates_units_checks_permissions_and_changes_nothing_on_error() {
    let rig = Rig::new();
    let mine = rig.sim.spawn("job", 1000, None);
    let theirs = rig.sim.spawn("job", 1001, None);
    let mut s = spec(false);
    s.islands[0].access.user_units = true;
    let mut c = rig.controller(s);
    c.start().unwrap();
    let user = Caller {
        uid: 1000,
        gid: 1000,
        pid: 5,
    };

    let (r, _) = ask(&mut c, user, adopt("batch1", mine, None));
    assert_eq!(
        r.into_result().unwrap(),
        Reply::Adopted {
            unit: "batch1".into(),
            island: "web".into(),
            created: true
        }
    );
    assert_eq!(rig.group_of(mine).as_deref(), Some("/atoll-t/web/batch1"));

    // Another user's process: refused, nothing created.
    let (r, _) = ask(&mut c, user, adopt("batch2", theirs, None));
    assert_eq!(
        r.into_result().unwrap_err().code,
        ErrorCode::PermissionDenied
    );
    assert!(!rig.sim.exists(&GroupPath::from_relative("web/batch2")));

    // Root puts uid 1001's process into batch1; now uid 1000 may not act on it.
    let (r, _) = ask(&mut c, ROOT_CALLER, adopt("batch1", theirs, None));
    r.into_result().unwrap();
    let again = rig.sim.spawn("job", 1000, None);
    let (r, _) = ask(&mut c, user, adopt("batch1", again, None));
    let e = r.into_result().unwrap_err();
    assert_eq!(e.code, ErrorCode::PermissionDenied, "{e:?}");

    // Bad input: unknown island, bad name, island mismatch, no such pid.
    for (req, code) in [
        (adopt("x", again, Some("nope")), ErrorCode::NotFound),
        (adopt("bad/name", again, None), ErrorCode::BadRequest),
        (adopt("api", again, Some("rt")), ErrorCode::BadRequest),
        (adopt("y", 99_999, None), ErrorCode::NotFound),
        (adopt("host", again, None), ErrorCode::BadRequest),
    ] {
        let (r, _) = ask(&mut c, ROOT_CALLER, req.clone());
        assert_eq!(r.into_result().unwrap_err().code, code, "{req:?}");
    }
    assert!(!rig.sim.exists(&GroupPath::from_relative("web/x")));
    assert!(!rig.sim.exists(&GroupPath::from_relative("web/y")));

    // Only root may stop.
    let (r, flow) = ask(&mut c, user, Request::Stop { wait: false });
    assert_eq!(
        r.into_result().unwrap_err().code,
        ErrorCode::PermissionDenied
    );
    assert_eq!(flow, Flow::Continue);
    let (r, flow) = ask(&mut c, ROOT_CALLER, Request::Stop { wait: false });
    assert_eq!(r.into_result().unwrap(), Reply::Stopping);
    assert_eq!(flow, Flow::Stop);
}

#[test]
fn status_lists_units_and_their_processes() {
    let rig = Rig::new();
    let nginx = rig.sim.spawn("nginx", 33, None);
    let mut c = rig.controller(spec(false));
    c.start().unwrap();
    rig.sim.set_busy(nginx, true).unwrap();
    rig.epochs(&mut c, 10);
    let (r, _) = ask(
        &mut c,
        Caller {
            uid: 4242,
            gid: 0,
            pid: 3,
        },
        Request::Status {},
    );
    let Reply::Status(s) = r.into_result().unwrap() else {
        panic!()
    };
    assert_eq!(s.backend, "sim");
    assert_eq!(s.islands.len(), 2);
    let api = s.units.iter().find(|u| u.name == "api").unwrap();
    assert_eq!(api.pids, vec![nginx]);
    assert!(api.stats.cpu_usage_us.unwrap() > 0, "{:?}", api.stats);
    assert_eq!(s.epochs, 10);
}

#[test]
fn teardown_returns_every_process_and_removes_every_group() {
    let rig = Rig::new();
    let nginx = rig.sim.spawn("nginx", 33, None);
    let mut c = rig.controller(spec(false));
    c.start().unwrap();
    let child = rig.sim.spawn_child(nginx).unwrap(); // forked inside the unit
    let job = rig.sim.spawn("job", 0, None);
    let (r, _) = ask(&mut c, ROOT_CALLER, adopt("ctl", job, None));
    r.into_result().unwrap();
    assert_eq!(rig.sim.policy(job).unwrap(), TaskPolicy::Fifo(20));
    c.teardown().unwrap();
    assert!(!rig.sim.exists(&GroupPath::root()));
    for pid in [nginx, child, job] {
        assert_eq!(
            rig.group_of(pid).as_deref(),
            Some("/user.slice"),
            "pid {pid}"
        );
    }
    assert_eq!(rig.sim.policy(job).unwrap(), TaskPolicy::Other);
    assert!(!rig.state.path().join("state.json").exists());
}

#[test]
fn a_stop_that_waits_is_answered_after_teardown_with_what_it_left() {
    let rig = Rig::new();
    let mut c = rig.controller(spec(false));
    c.start().unwrap();
    let (tx, rx) = mpsc::channel();
    let flow = c.handle(Command::Api {
        caller: ROOT_CALLER,
        id: 11,
        request: Request::Stop { wait: true },
        reply: tx,
    });
    assert_eq!(flow, Flow::Stop);
    assert!(rx.try_recv().is_err(), "no answer before teardown");
    let result = c.teardown();
    c.finish_stop(&result);
    let r = rx.recv_timeout(Duration::from_secs(1)).unwrap();
    assert_eq!(r.id, 11);
    assert_eq!(r.ok, Some(Reply::Stopped { left: vec![] }));
    // Something left: it is named.
    let (tx, rx) = mpsc::channel();
    let mut c = rig.controller(spec(false));
    c.start().unwrap();
    c.handle(Command::Api {
        caller: ROOT_CALLER,
        id: 12,
        request: Request::Stop { wait: true },
        reply: tx,
    });
    c.finish_stop(&Err(ControllerError::Leftover(vec![
        "web/api (busy)".into()
    ])));
    let r = rx.recv_timeout(Duration::from_secs(1)).unwrap();
    assert_eq!(
        r.ok,
        Some(Reply::Stopped {
            left: vec!["web/api (busy)".into()]
        })
    );
    c.teardown().unwrap();
}

#[test]
fn without_rt_group_scheduling_atoll_enforces_the_rt_budget_itself() {
    let rig = Rig::new();
    rig.sim.set_rt_groups(false);
    let ctl = rig.sim.spawn("ctl", 0, None);
    let mut c = rig.controller(spec(false));
    c.start().unwrap();
    assert!(
        c.fallbacks().any(|f| f.knob == "cpu.rt_runtime_us"),
        "the kernel's missing RT budget must show as a fallback"
    );
    assert_eq!(rig.sim.policy(ctl).unwrap(), TaskPolicy::Fifo(20));
    rig.sim.set_busy(ctl, true).unwrap();
    // The island's 300 ms/s budget goes to its only unit; one busy thread
    // burns it in about ten 30 ms epochs.
    let mut demoted_after = None;
    for i in 1..=30 {
        rig.epochs(&mut c, 1);
        if rig.sim.policy(ctl).unwrap() == TaskPolicy::Other {
            demoted_after = Some(i);
            break;
        }
    }
    let n = demoted_after.expect("never demoted");
    assert!((10..=12).contains(&n), "demoted after {n} epochs");
    // Throttled for the rest of the period, then RT again.
    rig.epochs(&mut c, 33 - n - 1);
    assert_eq!(rig.sim.policy(ctl).unwrap(), TaskPolicy::Other);
    // The window opened at the first epoch, so it ends after epoch 34.
    rig.epochs(&mut c, 3);
    assert_eq!(rig.sim.policy(ctl).unwrap(), TaskPolicy::Fifo(20));
    let all: Vec<String> = c
        .decisions()
        .query(None, 1000)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert!(
        all.iter()
            .any(|d| d.contains("of its RT budget of 300000 us per 1000000 us")),
        "{all:#?}"
    );
    assert!(
        all.iter()
            .any(|d| d.contains("a new RT period began for unit ctl")),
        "{all:#?}"
    );
}

/// A clock on which every epoch overruns: each reading is two epochs later.
struct SlowClock(std::sync::atomic::AtomicU64);

impl atoll_core::clock::Clock for SlowClock {
    fn now(&self) -> Duration {
        let ms = self.0.fetch_add(60, std::sync::atomic::Ordering::SeqCst);
        Duration::from_millis(ms)
    }
}

#[test]
fn overrunning_epochs_do_not_starve_the_api() {
    let rig = Rig::new();
    let env = Env {
        backend: Box::new(rig.sim.clone()),
        procs: Box::new(rig.sim.clone()),
        tasks: Box::new(rig.sim.clone()),
        system: Box::new(rig.sim.clone()),
        clock: Arc::new(SlowClock(Default::default())),
    };
    let opts = Options {
        state_dir: None,
        self_origin: CgroupMembership::default(),
        self_pid: 1,
        topology: topo8(),
    };
    let mut c = Controller::new(env, spec(false), opts);
    c.start().unwrap();
    let (tx, rx) = mpsc::channel();
    let (rtx, rrx) = mpsc::channel();
    for request in [Request::Status {}, Request::Stop { wait: false }] {
        tx.send(Command::Api {
            caller: ROOT_CALLER,
            id: 1,
            request,
            reply: rtx.clone(),
        })
        .unwrap();
    }
    let done = std::thread::spawn(move || atoll_daemon::run::drive(&mut c, &rx, None));
    for _ in 0..2 {
        rrx.recv_timeout(Duration::from_secs(10))
            .expect("a request starved behind overdue epochs");
    }
    done.join().unwrap();
    drop(tx);
}

#[test]
fn changes_queued_together_are_saved_once_each_answered_after_the_save() {
    let rig = Rig::new();
    let mut c = rig.controller(spec(false));
    c.start().unwrap();
    let jobs: Vec<u32> = (0..10)
        .map(|i| rig.sim.spawn(&format!("job{i}"), 1000, None))
        .collect();
    let (tx, rx) = mpsc::channel();
    let (rtx, rrx) = mpsc::channel();
    for (i, pid) in jobs.iter().enumerate() {
        tx.send(Command::Api {
            caller: ROOT_CALLER,
            id: i as u64,
            request: adopt(&format!("u{i}"), *pid, Some("web")),
            reply: rtx.clone(),
        })
        .unwrap();
    }
    // A read in the batch is answered at once, not after the save.
    tx.send(Command::Api {
        caller: ROOT_CALLER,
        id: 100,
        request: Request::Status {},
        reply: rtx.clone(),
    })
    .unwrap();
    tx.send(Command::Api {
        caller: ROOT_CALLER,
        id: 101,
        request: Request::Stop { wait: false },
        reply: rtx,
    })
    .unwrap();
    let before = c.state_saves();
    let state = rig.state.path().join("state.json");
    let done = std::thread::spawn(move || {
        atoll_daemon::run::drive(&mut c, &rx, None);
        c
    });
    let mut ids = Vec::new();
    for _ in 0..12 {
        let r = rrx.recv_timeout(Duration::from_secs(10)).expect("a reply");
        assert!(r.ok.is_some(), "{r:?}");
        // Every change answered is in the state file already.
        if r.id < 10 {
            let saved = std::fs::read_to_string(&state).unwrap();
            assert!(
                saved.contains(&format!("\"u{}\"", r.id)),
                "u{} not saved: {saved}",
                r.id
            );
        }
        ids.push(r.id);
    }
    assert_eq!(ids[0], 100, "the read waited for the save: {ids:?}");
    let mut c = done.join().unwrap();
    drop(tx);
    assert_eq!(c.state_saves() - before, 1, "one save for the batch");
    assert_eq!(c.registry().runtime_units().len(), 10);
    c.teardown().unwrap();
}

#[test]
fn reads_and_refused_changes_leave_the_status_current() {
    let rig = Rig::new();
    let mut c = rig.controller(spec(false));
    c.start().unwrap();
    let job = rig.sim.spawn("job", 1000, None);
    let board = atoll_daemon::publish::Board::new(c.decisions().reader());
    let (tx, rx) = mpsc::channel();
    let loop_board = board.clone();
    let done = std::thread::spawn(move || {
        atoll_daemon::run::drive(&mut c, &rx, Some(&loop_board));
        c
    });
    let wake = {
        let tx = tx.clone();
        move || {
            let _ = tx.send(Command::Refresh);
        }
    };
    let ask = |caller: Caller, request: Request| {
        let (rtx, rrx) = mpsc::channel();
        tx.send(Command::Api {
            caller,
            id: 1,
            request,
            reply: rtx,
        })
        .unwrap();
        rrx.recv_timeout(Duration::from_secs(10)).unwrap()
    };
    let first = board.status(&wake).expect("a status");
    assert!(ask(ROOT_CALLER, Request::Status {}).ok.is_some());
    let user = Caller {
        uid: 1000,
        gid: 1000,
        pid: 5,
    };
    // A user may not put a process into a unit of the config.
    assert!(ask(user, adopt("api", job, None)).err.is_some());
    let again = board.status(&wake).unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "a read or a refused change made the status old"
    );
    assert!(ask(ROOT_CALLER, adopt("api", job, None)).ok.is_some());
    let after = board.status(&wake).unwrap();
    assert!(
        !Arc::ptr_eq(&first, &after),
        "a change left the status current"
    );
    assert!(after.units.iter().any(|u| u.pids.contains(&job)));
    tx.send(Command::Shutdown).unwrap();
    let mut c = done.join().unwrap();
    c.teardown().unwrap();
}
