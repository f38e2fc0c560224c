//! The isolation modes driven through the control loop on the simulated
//! backend: `isolate` lends idle CPUs and takes them back, a unit that
//! uses all it has does not borrow, memory limits hold between the slow
//! steps, teardown lifts isolation first, and `quota` never lends.

mod common;

use atoll_core::clock::ManualClock;
use atoll_core::plan::GroupPath;
use atoll_core::spec::{PlatformSpec, DEFAULT_EPOCH};
use atoll_daemon::controller::Controller;
use atoll_proto::{Reply, Request};
use atoll_sim::SimPlatform;
use common::sim::{ask, pool_of_two, topo8, ROOT};

/// The simulated machine of these tests.
struct Rig {
    sim: SimPlatform,
}

impl Rig {
    fn new() -> Self {
        Self {
            sim: SimPlatform::new(topo8(), "atoll-t", ManualClock::new()),
        }
    }

    fn controller(&self, spec: PlatformSpec) -> Controller {
        common::sim::controller(&self.sim, spec, topo8())
    }

    fn epochs(&self, c: &mut Controller, k: usize) {
        common::sim::epochs(&self.sim, c, k);
    }
}

/// A started controller on `pool_of_two(mode)` with an idle `light` process
/// and `busy` busy `heavy` processes, and light's pid.
fn light_and_heavy(
    rig: &Rig,
    mode: atoll_core::spec::IsolationMode,
    busy: usize,
) -> (Controller, u32) {
    let light = rig.sim.spawn("light", 0, None);
    let heavy: Vec<u32> = (0..busy).map(|_| rig.sim.spawn("heavy", 0, None)).collect();
    let mut c = rig.controller(pool_of_two(mode));
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
    let r = ask(&mut c, ROOT, Request::Status {});
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

/// A unit's isolation figures in the status, if it has any.
fn isolation_of(c: &mut Controller, unit: &str) -> Option<atoll_proto::UnitIsolation> {
    let r = ask(c, ROOT, Request::Status {});
    let Reply::Status(s) = r.into_result().unwrap() else {
        panic!()
    };
    s.units
        .iter()
        .find(|u| u.name == unit)
        .and_then(|u| u.isolation.clone())
}

#[test]
fn a_unit_added_on_an_idle_island_is_isolated_at_the_next_epoch() {
    use atoll_core::spec::IsolationMode;
    let rig = Rig::new();
    // Nothing runs: the island is idle, its lender settles, and the steps
    // that follow are quiet (nothing read, nothing decided).
    let (mut c, _light) = light_and_heavy(&rig, IsolationMode::Isolate, 0);
    rig.epochs(&mut c, 10);
    assert!(isolation_of(&mut c, "light").is_some());
    // A unit made at run time changes the lender's units though the
    // island stays idle: the next epoch is not quiet.
    let add = Request::UnitAdd {
        unit: "job".into(),
        island: Some("pool".into()),
        settings: Default::default(),
    };
    ask(&mut c, ROOT, add).into_result().unwrap();
    rig.epochs(&mut c, 1);
    let job = isolation_of(&mut c, "job").expect("job isolated in the next epoch");
    // A guest (no entitlement) nobody lends to runs on the island's CPUs
    // at idle priority.
    assert!(job.home_cpus.is_empty(), "{job:?}");
    let job_g = GroupPath::from_relative("pool/job");
    let js = rig.sim.settings(&job_g).unwrap();
    assert!(js.cpu_idle, "{js:?}");
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
    let mut c = rig.controller(pool_of_two(IsolationMode::Quota));
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
        let mut spec = pool_of_two(mode);
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
