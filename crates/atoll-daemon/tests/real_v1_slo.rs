//! A latency overlay's best-effort unit on this machine's real cgroup v1
//! hierarchies: as the reported latency's slack changes, the unit's
//! `cpu.shares` and CFS quota are grown, cut and floored in the kernel.
//!
//! Runs only as root with writable v1 `cpuset` and `cpu` hierarchies and at
//! least two CPUs; prints "skipped: ..." otherwise. Everything happens under
//! a root group named `atoll-test-<pid>-<nanos>`; no process is moved (the
//! units stay empty), and a drop guard removes the groups even if an
//! assertion fails. Time is a manual clock: nothing here waits.

mod common;

use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::coord::Property;
use atoll_core::spec::{OverlayConfig, DEFAULT_EPOCH};
use atoll_core::weight::weight_to_shares;
use atoll_daemon::command::Command;
use atoll_daemon::controller::Controller;
use atoll_proto::{Reply, Request};
use common::real_coord::read;
use common::sim::{n, ROOT};

fn report(c: &mut Controller, value: f64) {
    let (tx, rx) = std::sync::mpsc::channel();
    c.handle(Command::Api {
        caller: ROOT,
        id: 1,
        request: Request::Report {
            overlay: "shop".into(),
            value,
        },
        reply: tx,
    });
    match rx.recv_timeout(Duration::from_secs(5)).unwrap().ok {
        Some(Reply::Reported { .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn best_effort_knobs_follow_the_slack_in_the_real_cgroup1_kernel() {
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let (topo, root, paths) = (real.topo.clone(), real.root.clone(), real.paths().clone());
    // Overlay shop over u1 (island a), p99 within 1000 us, with u3 (island
    // b) as its best effort.
    let mut shop = OverlayConfig {
        name: n("shop"),
        priority: 0,
        units: vec![n("u1")],
        property: Property::LatencyPercentile {
            percentile: 99.0,
            bound_us: 1000,
        },
        slo: Default::default(),
        cap_timing: Default::default(),
        react: Default::default(),
    };
    shop.slo.best_effort = vec![n("u3")];
    let spec = common::real_coord::two_islands(&topo, vec![shop]);
    let clock = ManualClock::new();
    let mut c = real.start(spec, &clock);
    let epochs = |c: &mut Controller, d: Duration| {
        for _ in 0..(d.as_millis() / DEFAULT_EPOCH.as_millis()).max(1) {
            clock.advance(DEFAULT_EPOCH);
            c.epoch();
        }
    };
    let cpu = |f: &str| read(&paths.cpu.join(&root).join("b/u3").join(f));
    let shares = || cpu("cpu.shares").parse::<u64>().unwrap();
    let quota = || cpu("cpu.cfs_quota_us").parse::<i64>().unwrap();
    let configured = weight_to_shares(atoll_core::weight::DEFAULT_WEIGHT);
    let floor = weight_to_shares(1);

    // Nothing measured: the floor, 0.1 CPU of a 100 ms period.
    epochs(&mut c, DEFAULT_EPOCH);
    assert_eq!((shares(), quota()), (floor, 10_000));
    assert_eq!(cpu("cpu.cfs_period_us"), "100000");

    // Slack 0.7: a step a second.
    report(&mut c, 300.0);
    epochs(&mut c, Duration::from_millis(1100));
    let (s1, q1) = (shares(), quota());
    assert!(s1 > floor && s1 < configured, "{s1}");
    assert!(q1 > 10_000, "{q1}");
    epochs(&mut c, Duration::from_secs(8));
    assert_eq!(
        (shares(), quota()),
        (configured, -1),
        "the top: as configured, no quota"
    );

    // Slack 0.05: cut to half within one epoch.
    report(&mut c, 950.0);
    epochs(&mut c, DEFAULT_EPOCH);
    let (s4, q4) = (shares(), quota());
    assert!(s4 > s1 && s4 < configured, "{s4}");
    assert!(q4 > q1, "{q4}");

    // Missed: the floor.
    report(&mut c, 1500.0);
    epochs(&mut c, DEFAULT_EPOCH);
    assert_eq!((shares(), quota()), (floor, 10_000));
    let why: Vec<String> = c
        .decisions()
        .query(Some("u3"), 1000)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert!(
        why.iter().any(|d| d.contains(
            "overlay shop (latency SLO): best effort floor 4 -> 0/8: slack -0.50 < 0, the SLO is missed (p99 1500 us"
        )),
        "{why:#?}"
    );
    c.teardown().unwrap();
    assert!(!paths.cpu.join(&root).exists());
}
