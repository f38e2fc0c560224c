//! The control loop driven step by step on the simulated backend: building
//! the hierarchy, adoption by rules and by the API, permissions, teardown,
//! and recovery after a crash.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use atoll_core::backend::{Actuator, Monitor};
use atoll_core::clock::ManualClock;
use atoll_core::plan::{GroupPath, TaskPolicy};
use atoll_core::process::{CgroupMembership, TaskControl};
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandSpec, PlatformSpec, RealtimePolicy, RtClass,
    SchedPolicy, UnitSpec, DEFAULT_EPOCH,
};
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::{CpuSet, Name};
use atoll_daemon::command::{Caller, Command};
use atoll_daemon::controller::{Controller, ControllerError, Env, Flow, Options};
use atoll_proto::{ErrorCode, Reply, Request, ResponseEnvelope};
use atoll_sim::SimPlatform;

const ROOT: &str = "atoll-t";
const ROOT_CALLER: Caller = Caller {
    uid: 0,
    gid: 0,
    pid: 1,
};

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

fn topo() -> Topology {
    Topology::synthetic(SyntheticShape {
        packages: 2,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: 4,
        threads_per_core: 1,
        memory_per_node: 4 << 30,
    })
}

fn spec(adopt_all: bool) -> PlatformSpec {
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all,
        },
        islands: vec![
            IslandSpec {
                name: n("web"),
                cpus: set("1-3"),
                mems: set("0"),
                policy: SchedPolicy::Fair,
                arbitration: Default::default(),
                exclusive: true,
                access: Default::default(),
            },
            IslandSpec {
                name: n("rt"),
                cpus: set("4-7"),
                mems: set("1"),
                policy: SchedPolicy::Realtime(RealtimePolicy {
                    class: RtClass::Fifo,
                    priority_min: 10,
                    priority_max: 40,
                    runtime_us: 300_000,
                    period_us: 1_000_000,
                }),
                arbitration: Default::default(),
                exclusive: false,
                access: Default::default(),
            },
        ],
        units: vec![
            UnitSpec {
                name: n("api"),
                island: n("web"),
                entitlement: Entitlement {
                    cpus: Some(1.5),
                    cpu_cap: Some(2.0),
                    ..Default::default()
                },
                adopt: vec![AdoptRule::Comm("nginx".into())],
                rt_priority: None,
            },
            UnitSpec {
                name: n("ctl"),
                island: n("rt"),
                entitlement: Entitlement::default(),
                adopt: vec![AdoptRule::Comm("ctl".into())],
                rt_priority: Some(20),
            },
        ],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

struct Rig {
    sim: SimPlatform,
    state: tempfile::TempDir,
}

impl Rig {
    fn new() -> Self {
        Self {
            sim: SimPlatform::new(topo(), ROOT, ManualClock::new()),
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn controller(&self, spec: PlatformSpec) -> Controller {
        let env = Env {
            backend: Box::new(self.sim.clone()),
            procs: Box::new(self.sim.clone()),
            tasks: Box::new(self.sim.clone()),
            system: Box::new(self.sim.clone()),
            clock: Arc::new(self.sim.clock()),
        };
        let opts = Options {
            state_dir: Some(self.state.path().to_path_buf()),
            self_origin: CgroupMembership::parse("0::/daemon.slice\n").unwrap(),
            self_pid: 1,
            topology: topo(),
        };
        Controller::new(env, spec, opts)
    }

    fn epochs(&self, c: &mut Controller, n: usize) {
        for _ in 0..n {
            self.sim.advance(DEFAULT_EPOCH);
            c.epoch();
        }
    }

    fn group_of(&self, pid: u32) -> Option<String> {
        let info = atoll_core::process::ProcessTable::info(&self.sim, pid).ok()?;
        info.cgroups.unified().map(str::to_string)
    }
}

fn ask(c: &mut Controller, caller: Caller, request: Request) -> (ResponseEnvelope, Flow) {
    let (tx, rx) = mpsc::channel();
    let flow = c.handle(Command::Api {
        caller,
        id: 9,
        request,
        reply: tx,
    });
    (rx.recv_timeout(Duration::from_secs(1)).unwrap(), flow)
}

fn adopt(unit: &str, pid: u32, island: Option<&str>) -> Request {
    Request::Adopt {
        unit: unit.into(),
        pid,
        island: island.map(Into::into),
    }
}

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

/// The platform without a host partition (so no `host` group marks the
/// root as atoll's).
fn spec_without_host() -> PlatformSpec {
    let mut s = spec(false);
    s.host.cpus = CpuSet::new();
    s
}

#[test]
fn a_damaged_state_file_is_kept_aside_and_recovered_from_the_one_before() {
    let rig = Rig::new();
    let a = rig.sim.spawn("job", 1000, None);
    let b = rig.sim.spawn("job", 1000, None);
    {
        let mut c = rig.controller(spec_without_host());
        c.start().unwrap();
        for pid in [a, b] {
            let (r, _) = ask(&mut c, ROOT_CALLER, adopt("batch", pid, Some("rt")));
            r.into_result().unwrap();
        }
        // Crash: no teardown.
    }
    // The last save is damaged: cut in the middle.
    let file = rig.state.path().join("state.json");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();

    let mut c = rig.controller(spec_without_host());
    c.start()
        .expect("a damaged state file never stops the daemon");
    let status = c.status();
    assert!(
        status.warnings.iter().any(|w| w.contains("damaged")),
        "{:#?}",
        status.warnings
    );
    let aside: Vec<String> = std::fs::read_dir(rig.state.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("state.json.damaged-"))
        .collect();
    assert_eq!(aside.len(), 1, "the damaged file is kept");
    // The save before it knew `a`; `b` came after, and is still managed.
    for pid in [a, b] {
        assert!(c.registry().managed(pid).is_some(), "pid {pid}");
    }
    assert!(c.registry().managed(a).unwrap().origin.is_some());
    assert!(
        status.warnings.iter().any(|w| w.contains("1 processes")),
        "{:#?}",
        status.warnings
    );
    c.teardown().unwrap();
    assert_eq!(rig.group_of(a).as_deref(), Some("/user.slice"));
    assert!(!rig.sim.exists(&GroupPath::root()));
}

#[test]
fn without_any_state_file_atolls_own_layout_is_taken_over() {
    let rig = Rig::new();
    let job = rig.sim.spawn("job", 1000, None);
    {
        let mut c = rig.controller(spec_without_host());
        c.start().unwrap();
        let (r, _) = ask(&mut c, ROOT_CALLER, adopt("batch", job, Some("rt")));
        r.into_result().unwrap();
    }
    for f in ["state.json", "state.json.1"] {
        let _ = std::fs::remove_file(rig.state.path().join(f));
    }
    let mut c = rig.controller(spec_without_host());
    c.start().expect("atoll's own islands are recognised");
    assert!(c.registry().managed(job).is_some());
    assert!(c.registry().unit("batch").is_some());
    assert!(
        c.status()
            .warnings
            .iter()
            .any(|w| w.contains("without a record")),
        "{:#?}",
        c.status().warnings
    );
    c.teardown().unwrap();
    assert!(!rig.sim.exists(&GroupPath::root()));
}

#[test]
fn a_change_the_state_file_cannot_hold_is_not_acknowledged() {
    let rig = Rig::new();
    let job = rig.sim.spawn("job", 1000, None);
    let env = Env {
        backend: Box::new(rig.sim.clone()),
        procs: Box::new(rig.sim.clone()),
        tasks: Box::new(rig.sim.clone()),
        system: Box::new(rig.sim.clone()),
        clock: Arc::new(rig.sim.clock()),
    };
    // A file where the state directory should be: every save fails.
    let blocked = rig.state.path().join("not-a-dir");
    std::fs::write(&blocked, "x").unwrap();
    let opts = Options {
        state_dir: Some(blocked),
        self_origin: CgroupMembership::parse("0::/daemon.slice\n").unwrap(),
        self_pid: 1,
        topology: topo(),
    };
    let mut c = Controller::new(env, spec(false), opts);
    c.start().unwrap();
    assert!(c
        .status()
        .warnings
        .iter()
        .any(|w| w.contains("cannot be saved")));
    let (r, _) = ask(&mut c, ROOT_CALLER, adopt("batch", job, Some("rt")));
    let e = r.into_result().unwrap_err();
    assert_eq!(e.code, ErrorCode::Backend);
    assert!(e.message.contains("state file"), "{e:?}");
    c.teardown().unwrap_err();
}

#[test]
fn restart_after_a_crash_loses_nothing() {
    let rig = Rig::new();
    let nginx = rig.sim.spawn("nginx", 33, None);
    let job = rig.sim.spawn("job", 1000, None);
    {
        let mut c = rig.controller(spec(false));
        c.start().unwrap();
        let (r, _) = ask(&mut c, ROOT_CALLER, adopt("batch", job, Some("rt")));
        r.into_result().unwrap();
        // Crash: no teardown. A child forks after the last save, and a
        // process is moved into a unit by hand.
    }
    let forked = rig.sim.spawn_child(job).unwrap();
    let exited = rig.sim.spawn("short", 0, None);
    rig.sim
        .clone()
        .move_process(exited, &GroupPath::from_relative("web/api"))
        .unwrap();
    rig.sim.exit(exited).unwrap();

    let mut c = rig.controller(spec(false));
    c.start().unwrap();
    let reg = c.registry();
    assert!(reg.unit("batch").is_some(), "runtime unit lost");
    for pid in [nginx, job, forked] {
        assert!(
            reg.managed(pid).is_some(),
            "pid {pid} not managed after restart"
        );
    }
    assert!(reg.managed(exited).is_none());
    c.teardown().unwrap();
    for pid in [nginx, job, forked] {
        assert_eq!(
            rig.group_of(pid).as_deref(),
            Some("/user.slice"),
            "pid {pid}"
        );
    }
}

#[test]
fn a_root_that_is_not_ours_is_refused_and_left_alone() {
    let rig = Rig::new();
    let mut sim = rig.sim.clone();
    sim.apply(&GroupPath::root(), &Default::default()).unwrap();
    let mut c = rig.controller(spec(false));
    let e = c.start().unwrap_err();
    assert!(matches!(e, ControllerError::NotOurs { .. }), "{e}");
    assert!(rig.sim.exists(&GroupPath::root()));
    assert!(!rig.sim.exists(&GroupPath::host()));
}

#[test]
fn a_plan_the_kernel_refuses_leaves_nothing_behind() {
    let rig = Rig::new();
    let mut bad = spec(false);
    // 95% of RT time for the root is the most the kernel allows.
    if let SchedPolicy::Realtime(rt) = &mut bad.islands[1].policy {
        rt.runtime_us = 990_000;
    }
    let mut c = rig.controller(bad);
    assert!(c.start().is_err());
    assert!(
        !rig.sim.exists(&GroupPath::root()),
        "half-built hierarchy left behind"
    );
}

#[test]
fn a_daemon_restarted_from_inside_atoll_never_returns_processes_into_it() {
    let rig = Rig::new();
    let job = rig.sim.spawn("job", 0, None);
    {
        let mut c = rig.controller(spec(true));
        c.start().unwrap();
    }
    // A process forked inside the host partition after the crash: no record,
    // and its parent is inside atoll too.
    let forked = rig.sim.spawn_child(job).unwrap();
    rig.sim.exit(job).unwrap();
    let env = Env {
        backend: Box::new(rig.sim.clone()),
        procs: Box::new(rig.sim.clone()),
        tasks: Box::new(rig.sim.clone()),
        system: Box::new(rig.sim.clone()),
        clock: Arc::new(rig.sim.clock()),
    };
    let opts = Options {
        state_dir: Some(rig.state.path().to_path_buf()),
        // The new daemon was started from a shell atoll had adopted.
        self_origin: CgroupMembership::parse("0::/atoll-t/host\n").unwrap(),
        self_pid: 1,
        topology: topo(),
    };
    let mut c = Controller::new(env, spec(true), opts);
    c.start().unwrap();
    c.teardown().unwrap();
    assert!(!rig.sim.exists(&GroupPath::root()));
    assert_eq!(rig.group_of(forked).as_deref(), Some("/"));
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

fn iso_spec(mode: atoll_core::spec::IsolationMode) -> PlatformSpec {
    let unit = |name: &str| UnitSpec {
        name: n(name),
        island: n("pool"),
        entitlement: Entitlement {
            cpus: Some(2.0),
            ..Default::default()
        },
        adopt: vec![AdoptRule::Comm(name.into())],
        rt_priority: None,
    };
    PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::new(),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![IslandSpec {
            name: n("pool"),
            cpus: set("0-3"),
            mems: set("0"),
            policy: SchedPolicy::Fair,
            arbitration: Default::default(),
            exclusive: false,
            access: Default::default(),
        }],
        units: vec![unit("light"), unit("heavy")],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: atoll_core::spec::IsolationSpec {
            mode,
            ..Default::default()
        },
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

/// A started controller on `iso_spec(mode)` with an idle `light` process
/// and `busy` busy `heavy` processes, and light's pid.
fn light_and_heavy(
    rig: &Rig,
    mode: atoll_core::spec::IsolationMode,
    busy: usize,
) -> (Controller, u32) {
    let light = rig.sim.spawn("light", 0, None);
    let heavy: Vec<u32> = (0..busy).map(|_| rig.sim.spawn("heavy", 0, None)).collect();
    let mut c = rig.controller(iso_spec(mode));
    c.start().unwrap();
    for &h in &heavy {
        rig.sim.set_busy(h, true).unwrap();
    }
    (c, light)
}

#[test]
fn isolate_lends_idle_cpus_and_takes_them_back_when_the_owner_needs_them() {
    use atoll_core::spec::IsolationMode;
    let rig = Rig::new();
    let (mut c, light) = light_and_heavy(&rig, IsolationMode::Isolate, 4);
    let heavy_g = GroupPath::from_relative("pool/heavy");
    let light_g = GroupPath::from_relative("pool/light");
    rig.epochs(&mut c, 10);
    let hs = rig.sim.settings(&heavy_g).unwrap();
    let ls = rig.sim.settings(&light_g).unwrap();
    let (h_cpus, l_cpus) = (hs.cpus.clone().unwrap(), ls.cpus.clone().unwrap());
    // Borrowers run at idle priority, so an idle owner lends all its CPUs.
    assert_eq!(
        h_cpus.len(),
        4,
        "heavy should borrow light's idle CPUs: {h_cpus}"
    );
    assert!(hs.cpu_idle, "borrowed CPUs run at idle priority");
    assert_eq!(l_cpus.len(), 2, "light keeps its home: {l_cpus}");
    // The owner wakes up: its CPUs come back at the next epochs.
    rig.sim.set_busy(light, true).unwrap();
    let child = rig.sim.spawn_child(light).unwrap();
    rig.sim.set_busy(child, true).unwrap();
    rig.epochs(&mut c, 3);
    let hs = rig.sim.settings(&heavy_g).unwrap();
    assert_eq!(
        hs.cpus.clone().unwrap().len(),
        2,
        "not revoked: {:?}",
        hs.cpus
    );
    assert!(hs.cpus.unwrap().is_disjoint(&l_cpus));
    let all: Vec<String> = c
        .decisions()
        .query(Some("heavy"), 100)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert!(all.iter().any(|d| d.contains("isolation:")), "{all:#?}");
    let (r, _) = ask(&mut c, ROOT_CALLER, Request::Status {});
    let Reply::Status(s) = r.into_result().unwrap() else {
        panic!()
    };
    let h = s.units.iter().find(|u| u.name == "heavy").unwrap();
    let iso = h.isolation.as_ref().expect("isolation figures in status");
    assert!(iso.cpu_lost >= 1, "{iso:?}");
    let l = s.units.iter().find(|u| u.name == "light").unwrap();
    assert!(l.isolation.as_ref().unwrap().cpu_revocations >= 1, "{l:?}");
    assert_eq!(s.isolation_mode, Some(IsolationMode::Isolate));
}

#[test]
fn a_unit_using_all_its_cpus_without_waiting_does_not_borrow() {
    use atoll_core::spec::IsolationMode;
    let rig = Rig::new();
    // As many busy threads as heavy has home CPUs: it uses everything it
    // may, but nothing waits, so borrowing would not help it.
    let (mut c, _light) = light_and_heavy(&rig, IsolationMode::Isolate, 2);
    let heavy_g = GroupPath::from_relative("pool/heavy");
    rig.epochs(&mut c, 10);
    let hs = rig.sim.settings(&heavy_g).unwrap();
    let lends: Vec<String> = c
        .decisions()
        .query(Some("heavy"), 100)
        .iter()
        .map(|d| d.to_string())
        .filter(|d| d.contains("lend CPUs"))
        .collect();
    assert!(lends.is_empty(), "{lends:#?}");
    assert_eq!(hs.cpus.clone().unwrap().len(), 2, "{:?}", hs.cpus);
    assert!(!hs.cpu_idle);
    // A third thread waits: now heavy borrows.
    let third = rig.sim.spawn("heavy", 0, None);
    rig.epochs(&mut c, 1);
    rig.sim.set_busy(third, true).unwrap();
    rig.epochs(&mut c, 10);
    let hs = rig.sim.settings(&heavy_g).unwrap();
    assert!(hs.cpus.clone().unwrap().len() > 2, "{:?}", hs.cpus);
    assert!(hs.cpu_idle);
}

#[test]
fn memory_limits_hold_between_slow_steps() {
    use atoll_core::spec::IsolationMode;
    let rig = Rig::new();
    let _light = rig.sim.spawn("light", 0, None);
    let mut c = rig.controller(iso_spec(IsolationMode::Quota));
    c.start().unwrap();
    let g = GroupPath::from_relative("pool/light");
    // Memory is stepped every SLOW_INTERVAL (10 epochs here); the limit it
    // set stays in force on the epochs in between.
    let every = atoll_daemon::isolation::SLOW_INTERVAL.as_millis() / DEFAULT_EPOCH.as_millis();
    assert!(every > 1);
    let mut highs = Vec::new();
    for _ in 0..(3 * every) {
        rig.epochs(&mut c, 1);
        highs.push(rig.sim.settings(&g).unwrap().memory.high);
    }
    assert!(highs[0].is_some(), "{highs:?}");
    assert!(highs.iter().all(|h| h == &highs[0]), "{highs:?}");
    let sets = c
        .decisions()
        .query(Some("light"), 100)
        .iter()
        .filter(|d| d.to_string().contains("memory.high"))
        .count();
    assert_eq!(sets, 1, "memory.high written once");
}

#[test]
fn a_lending_unit_has_no_hard_memory_max_in_isolate_mode() {
    use atoll_core::spec::IsolationMode;
    for (mode, want) in [
        (IsolationMode::Quota, Some(256 << 20)),
        (IsolationMode::Isolate, None),
    ] {
        let rig = Rig::new();
        let _light = rig.sim.spawn("light", 0, None);
        let mut spec = iso_spec(mode);
        spec.units[0].entitlement.memory.max = Some(256 << 20);
        let mut c = rig.controller(spec);
        c.start().unwrap();
        // Past a periodic reconcile of the whole plan.
        let past =
            atoll_daemon::controller::RECONCILE_EVERY.as_millis() / DEFAULT_EPOCH.as_millis();
        rig.epochs(&mut c, 2 * past as usize);
        let m = rig
            .sim
            .settings(&GroupPath::from_relative("pool/light"))
            .unwrap()
            .memory;
        assert_eq!(m.max, want, "{mode:?}");
        assert_eq!(m.high, Some(256 << 20), "{mode:?}: the entitlement");
    }
}

#[test]
fn teardown_lifts_isolation_before_removing_groups() {
    use atoll_core::spec::IsolationMode;
    let rig = Rig::new();
    let (mut c, _light) = light_and_heavy(&rig, IsolationMode::Isolate, 4);
    rig.epochs(&mut c, 10);
    let g = GroupPath::from_relative("pool/heavy");
    assert!(rig.sim.settings(&g).unwrap().cpu_idle, "heavy borrows");
    c.teardown().unwrap();
    let all: Vec<String> = c
        .decisions()
        .query(Some("heavy"), 100)
        .iter()
        .map(|d| d.to_string())
        .collect();
    let lift = all
        .iter()
        .position(|d| d.contains("cpu.idle=0") && d.contains("shutting down"));
    let remove = all
        .iter()
        .position(|d| d.starts_with("remove group pool/heavy"));
    assert!(lift.is_some() && remove.is_some(), "{all:#?}");
    assert!(lift < remove, "{all:#?}");
}

#[test]
fn quota_never_lends() {
    use atoll_core::spec::IsolationMode;
    let rig = Rig::new();
    let (mut c, _light) = light_and_heavy(&rig, IsolationMode::Quota, 4);
    rig.epochs(&mut c, 20);
    let hs = rig
        .sim
        .settings(&GroupPath::from_relative("pool/heavy"))
        .unwrap();
    assert_eq!(hs.cpus.unwrap().len(), 2);
    assert!(!hs.cpu_idle);
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
        topology: topo(),
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
