//! Coordination state across a daemon restart on this machine's real cgroup
//! v1 hierarchies: knobs an overlay tuned are still in force after a crash
//! and a restart, the restart says so, and the islands' cpusets are read
//! back from the kernel for the check of the loans.
//!
//! Runs only as root with writable v1 `cpuset` and `cpu` hierarchies and at
//! least two CPUs; prints "skipped: ..." otherwise. Everything happens under
//! a root group named `atoll-test-<pid>-<nanos>`; no process is moved (the
//! units stay empty), and a drop guard removes the groups even if an
//! assertion fails. With two CPUs no island can lend one (each keeps its
//! lowest), so a loan across a restart is tested on the simulator
//! (`coord_restart.rs`).

mod common;

use std::path::Path;
use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::coord::{Direction, Message, Property, Resource};
use atoll_core::plan::GroupPath;
use atoll_core::spec::{
    Entitlement, HostSpec, IslandSpec, OverlayConfig, PlatformSpec, SchedPolicy, UnitSpec,
    DEFAULT_EPOCH,
};
use atoll_core::{CpuSet, Name};
use atoll_daemon::command::{Caller, Command};
use atoll_daemon::controller::Controller;
use atoll_proto::{Reply, Request};

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
        .trim()
        .to_string()
}

fn coordinate(c: &mut Controller, msg: Message) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    c.handle(Command::Api {
        caller: Caller {
            uid: 0,
            gid: 0,
            pid: 1,
        },
        id: 1,
        request: Request::Coordinate {
            from: None,
            message: msg,
        },
        reply: tx,
    });
    match rx.recv_timeout(Duration::from_secs(5)).unwrap().ok {
        Some(Reply::Coordinated { reply, text }) => {
            println!("{text}");
            reply.is_ack()
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn tuned_knobs_survive_a_restart_on_the_real_cgroup1_kernel() {
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let (topo, root, paths) = (real.topo.clone(), real.root.clone(), real.paths().clone());
    let online = topo.online();
    let first = online.first().unwrap();
    let a_cpus = CpuSet::range(first, first);
    let b_cpus = online.difference(&a_cpus);
    let mems = topo.all_nodes();
    let island = |name: &str, cpus: &CpuSet| IslandSpec {
        name: n(name),
        cpus: cpus.clone(),
        mems: mems.clone(),
        policy: SchedPolicy::Fair,
        arbitration: Default::default(),
        exclusive: false,
        access: Default::default(),
    };
    let unit = |name: &str, island: &str| UnitSpec {
        name: n(name),
        island: n(island),
        entitlement: Entitlement::default(),
        adopt: vec![],
        rt_priority: None,
    };
    let spec = PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::new(),
            mems: mems.clone(),
            adopt_all: false,
        },
        islands: vec![island("a", &a_cpus), island("b", &b_cpus)],
        units: vec![unit("u1", "a"), unit("u2", "a"), unit("u3", "b")],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: vec![OverlayConfig {
            name: n("shop"),
            priority: 1,
            units: vec![n("u1")],
            property: Property::LatencyPercentile {
                percentile: 99.0,
                bound_us: 1000,
            },
            slo: Default::default(),
            react: Default::default(),
        }],
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    };
    let state = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let shares = || read(&paths.cpu.join(&root).join("a/u1").join("cpu.shares"));
    let before;
    {
        let mut c = real.start_with_state(spec.clone(), &clock, Some(state.path().into()));
        before = shares();
        let tune = Message::Tune {
            resource: Resource::CpuTime,
            dir: Direction::Up,
            overlay: n("shop"),
            unit: n("u1"),
        };
        assert!(coordinate(&mut c, tune.clone()));
        clock.advance(Duration::from_millis(50));
        assert!(coordinate(&mut c, tune));
        // Crash: no teardown; the groups stay as they are.
    }
    let tuned = shares();
    assert_ne!(tuned, before, "the tunes changed cpu.shares");
    // The islands' CPUs as a restarted daemon reads them back.
    let backend = real.backend();
    assert_eq!(
        backend.cpuset(&GroupPath::island(&n("a"))).unwrap(),
        Some(a_cpus.clone())
    );
    assert_eq!(
        backend.cpuset(&GroupPath::island(&n("b"))).unwrap(),
        Some(b_cpus.clone())
    );
    drop(backend);

    let mut c = real.start_with_state(spec, &clock, Some(state.path().into()));
    assert_eq!(shares(), tuned, "the restart kept the tuned shares");
    assert_eq!(
        c.status().coord_restored.as_deref(),
        Some("restored from state: 1 tuned unit")
    );
    let why: Vec<String> = c
        .decisions()
        .query(Some("shop"), 100)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert!(
        why.iter()
            .any(|d| d.contains("tuned knobs of unit u1 kept")),
        "{why:#?}"
    );
    // A tune down goes on from the restored value.
    let down = Message::Tune {
        resource: Resource::CpuTime,
        dir: Direction::Down,
        overlay: n("shop"),
        unit: n("u1"),
    };
    assert!(coordinate(&mut c, down));
    let after: u64 = shares().parse().unwrap();
    assert!(after < tuned.parse::<u64>().unwrap(), "{after} < {tuned}");
    c.teardown().unwrap();
    assert!(!paths.cpu.join(&root).exists(), "teardown left {root}");
}
