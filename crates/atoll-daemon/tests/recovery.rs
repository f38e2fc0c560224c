//! Recovery on the simulated backend: a damaged state file, no state file
//! at all, a change the state file cannot hold, a restart after a crash,
//! a root that is not atoll's, a plan the kernel refuses, and a daemon
//! restarted from inside its own hierarchy.

use std::sync::Arc;

use atoll_core::backend::{Actuator, Monitor};
use atoll_core::plan::GroupPath;
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{PlatformSpec, SchedPolicy};
use atoll_core::CpuSet;
use atoll_daemon::controller::{Controller, ControllerError, Env, Options};
use atoll_proto::ErrorCode;

mod common;

use common::rig::{adopt, ask, spec, Rig, ROOT_CALLER};
use common::sim::topo8;

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
        topology: topo8(),
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
        topology: topo8(),
    };
    let mut c = Controller::new(env, spec(true), opts);
    c.start().unwrap();
    c.teardown().unwrap();
    assert!(!rig.sim.exists(&GroupPath::root()));
    assert_eq!(rig.group_of(forked).as_deref(), Some("/"));
}
