//! Coordination effects on this machine's real cgroup v1 hierarchies.
//!
//! Runs only as root with writable v1 `cpuset` and `cpu` hierarchies and at
//! least two CPUs; prints "skipped: ..." otherwise. Everything happens under
//! a root group named `atoll-test-<pid>-<nanos>`; no process is moved (the
//! units stay empty), and a drop guard removes the groups even if an
//! assertion fails. Time is a manual clock: nothing here waits.

mod common;

use std::path::Path;
use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::coord::{CoordConfig, Direction, Message, Property, Resource};
use atoll_core::spec::{
    CapTiming, Entitlement, HostSpec, IslandSpec, OverlayConfig, PlatformSpec, SchedPolicy,
    UnitSpec, DEFAULT_EPOCH,
};
use atoll_core::weight::weight_to_shares;
use atoll_core::CpuSet;
use common::real_coord::{coordinate, read};
use common::sim::n;

#[test]
fn coordination_on_the_real_cgroup1_kernel() {
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let (topo, root, paths) = (real.topo.clone(), real.root.clone(), real.paths().clone());
    let online = topo.online();
    let (_, b_cpus) = common::real_coord::split(&topo);
    let spec = common::real_coord::two_islands(
        &topo,
        vec![
            OverlayConfig {
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
            },
            OverlayConfig {
                name: n("power"),
                priority: 0,
                units: vec![],
                property: Property::PlatformCpuCap { cpus: 1.0 },
                slo: Default::default(),
                // Not the default, so the kernel shows the configured one.
                cap_timing: CapTiming {
                    period: Some(Duration::from_millis(50)),
                    interval: None,
                },
                react: Default::default(),
            },
        ],
    );
    let clock = ManualClock::new();
    let mut c = real.start(spec, &clock);
    let cpu = |g: &str, f: &str| read(&paths.cpu.join(&root).join(g).join(f));
    // The platform cap: 0.1 each, the rest by CPUs.
    let b_share = 0.1 + 0.8 * b_cpus.len() as f64 / online.len() as f64;
    // Over the configured period of the islands' caps (`cap_period_ms`).
    assert_ne!(CoordConfig::default().cap_period, Duration::from_millis(50));
    let period: u64 = 50_000;
    assert_eq!(cpu("a", "cpu.cfs_period_us"), period.to_string());
    assert_eq!(cpu("b", "cpu.cfs_period_us"), period.to_string());
    let a_quota: i64 = cpu("a", "cpu.cfs_quota_us").parse().unwrap();
    let b_quota: i64 = cpu("b", "cpu.cfs_quota_us").parse().unwrap();
    let period = i64::try_from(period).unwrap();
    assert_eq!(a_quota + b_quota, period, "the sum is the cap");
    assert_eq!(
        b_quota,
        atoll_core::num::saturating_i64((b_share * period as f64).round())
    );
    // A tune writes the unit's shares.
    let tune = Message::Tune {
        resource: Resource::CpuTime,
        dir: Direction::Up,
        overlay: n("shop"),
        unit: n("u1"),
    };
    assert!(coordinate(&mut c, tune));
    assert_eq!(cpu("a/u1", "cpu.shares"), weight_to_shares(125).to_string());
    // A trigger boosts it, and the boost ends at the next epoch after 30 ms.
    let trigger = Message::Trigger {
        resource: Resource::CpuTime,
        overlay: n("shop"),
        unit: n("u1"),
    };
    assert!(coordinate(&mut c, trigger));
    assert_eq!(
        cpu("a/u1", "cpu.shares"),
        weight_to_shares(10_000).to_string()
    );
    clock.advance(Duration::from_millis(40));
    c.epoch();
    assert_eq!(cpu("a/u1", "cpu.shares"), weight_to_shares(125).to_string());
    c.teardown().unwrap();
    assert!(!paths.cpuset.join(&root).exists());
}

/// A trigger naming an overlay (no unit) boosts every unit of the overlay
/// at once, across islands, in the real `cpu.shares` files; a unit outside
/// the overlay keeps its shares; all the boosts end together.
#[test]
fn an_overlay_trigger_boosts_all_its_units_on_the_real_cgroup1_kernel() {
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let (topo, root, paths) = (real.topo.clone(), real.root.clone(), real.paths().clone());
    let spec = common::real_coord::two_islands(
        &topo,
        vec![OverlayConfig {
            name: n("shop"),
            priority: 1,
            units: vec![n("u1"), n("u3")],
            property: Property::LatencyPercentile {
                percentile: 99.0,
                bound_us: 1000,
            },
            slo: Default::default(),
            react: Default::default(),
            cap_timing: Default::default(),
        }],
    );
    let clock = ManualClock::new();
    let mut c = real.start(spec, &clock);
    let shares = |g: &str| read(&paths.cpu.join(&root).join(g).join("cpu.shares"));
    let before: Vec<String> = ["a/u1", "a/u2", "b/u3"].map(shares).to_vec();
    let boosted = weight_to_shares(10_000).to_string();
    assert!(before.iter().all(|s| *s != boosted), "{before:?}");
    let trigger = Message::TriggerOverlay {
        resource: Resource::CpuTime,
        overlay: n("shop"),
    };
    assert!(coordinate(&mut c, trigger));
    // Written while the request was handled, before any epoch.
    assert_eq!(shares("a/u1"), boosted);
    assert_eq!(shares("b/u3"), boosted);
    assert_eq!(shares("a/u2"), before[1], "u2 is not in the overlay");
    clock.advance(Duration::from_millis(40));
    c.epoch();
    let after: Vec<String> = ["a/u1", "a/u2", "b/u3"].map(shares).to_vec();
    assert_eq!(after, before, "the boosts end together");
    c.teardown().unwrap();
    assert!(!paths.cpu.join(&root).exists());
}

/// `react_pressure` with the real PSI watch on the real cgroup v1 backend:
/// where the cpu hierarchy shows per-group pressure (`cgroup1 psi` on the
/// kernel command line) the unit waits on a trigger on its `cpu.pressure`;
/// elsewhere every unit is read every epoch and the status says why. Which
/// one comes from the kernel, and each is checked.
#[test]
fn react_pressure_on_the_real_cgroup1_kernel() {
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let Some(watch) = atoll_procfs::psi_watch::PsiGroupWatch::open(Path::new("/proc")) else {
        println!("skipped: no /proc/pressure/cpu (no PSI)");
        return;
    };
    let (topo, root, paths) = (real.topo.clone(), real.root.clone(), real.paths().clone());
    let mems = topo.all_nodes();
    let spec = PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::new(),
            mems: mems.clone(),
            adopt_all: false,
        },
        islands: vec![IslandSpec {
            name: n("a"),
            cpus: topo.online(),
            mems,
            policy: SchedPolicy::Fair,
            arbitration: Default::default(),
            exclusive: false,
            access: Default::default(),
        }],
        units: vec![UnitSpec {
            name: n("u1"),
            island: n("a"),
            entitlement: Entitlement::default(),
            adopt: vec![],
            rt_priority: None,
        }],
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
            cap_timing: Default::default(),
            react: atoll_core::spec::ReactPolicy {
                pressure: Some(20.0),
                ..Default::default()
            },
        }],
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    };
    let clock = ManualClock::new();
    let mut c = real.start(spec, &clock);
    c.set_pressure_watch(Box::new(watch));
    for _ in 0..3 {
        clock.advance(DEFAULT_EPOCH);
        c.epoch();
    }
    let s = c.status().pressure.expect("a pressure source");
    let file = paths.cpu.join(&root).join("a/u1/cpu.pressure");
    println!("{} exists: {}; {s:?}", file.display(), file.exists());
    if file.exists() {
        assert_eq!((s.source.as_str(), s.armed, s.read), ("triggers", 1, 0));
    } else {
        assert_eq!((s.source.as_str(), s.armed, s.read), ("averages", 0, 1));
        let why = s.reason.unwrap_or_default();
        assert!(why.contains("cgroup1 psi"), "{why}");
    }
    c.teardown().unwrap();
    assert!(!paths.cpu.join(&root).exists());
}
