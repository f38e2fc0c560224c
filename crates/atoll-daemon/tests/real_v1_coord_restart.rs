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

use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::coord::{Direction, Message, Property, Resource};
use atoll_core::plan::GroupPath;
use atoll_core::spec::OverlayConfig;
use common::real_coord::{coordinate, read};
use common::sim::n;

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
    let (a_cpus, b_cpus) = common::real_coord::split(&topo);
    let spec = common::real_coord::two_islands(
        &topo,
        vec![OverlayConfig {
            name: n("shop"),
            priority: 1,
            units: vec![n("u1")],
            property: Property::LatencyPercentile {
                percentile: 99.0,
                bound_us: 1000,
            },
            slo: Default::default(),
            cap_timing: Default::default(),
            react: Default::default(),
        }],
    );
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
