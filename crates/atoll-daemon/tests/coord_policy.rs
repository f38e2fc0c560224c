//! The overlay policies that move CPUs, on the simulated backend: the
//! proactive policy escalating from `tune` to `borrow_preferred` and
//! `borrow_any` and back, borrowed CPUs serving the overlay's own units,
//! and a lender revoking its CPUs when its own load rises.

mod common;

use atoll_core::clock::ManualClock;
use atoll_core::coord::Property;
use atoll_core::plan::GroupPath;
use atoll_core::spec::{OverlayConfig, PlatformSpec, ReactPolicy};
use atoll_daemon::controller::Controller;
use atoll_proto::coord::OverlayStatus;
use atoll_proto::{Reply, Request};
use atoll_sim::SimPlatform;
use common::sim::{ask, controller, epochs, n, reply, topo8 as topo, web_and_batch, ROOT};

const LATENCY: Property = Property::LatencyPercentile {
    percentile: 99.0,
    bound_us: 1000,
};

/// Host CPU 0; fair islands `web` (1-3) and `batch` (4-7) with `units`
/// (name, island); overlay `shop` over `members`.
fn spec(units: &[(&str, &str)], members: &[&str]) -> PlatformSpec {
    web_and_batch(
        units,
        vec![OverlayConfig {
            name: n("shop"),
            priority: 5,
            units: members.iter().map(|u| n(u)).collect(),
            property: LATENCY,
            slo: Default::default(),
            cap_timing: Default::default(),
            react: ReactPolicy::default(),
        }],
    )
}

struct Rig {
    sim: SimPlatform,
    c: Controller,
}

impl Rig {
    fn start(spec: PlatformSpec) -> Self {
        let sim = SimPlatform::new(topo(), "atoll-p", ManualClock::new());
        let mut c = controller(&sim, spec, topo());
        c.start().unwrap();
        Self { sim, c }
    }

    fn epochs(&mut self, k: usize) {
        epochs(&self.sim, &mut self.c, k);
    }

    fn cpus(&self, path: &str) -> String {
        self.sim
            .settings(&GroupPath::from_relative(path))
            .and_then(|s| s.cpus)
            .map(|c| c.to_string())
            .unwrap_or_default()
    }

    /// `k` busy processes named `comm`, adopted by that unit at the next
    /// epoch.
    fn busy(&self, comm: &str, k: usize) -> Vec<u32> {
        (0..k)
            .map(|_| {
                let p = self.sim.spawn(comm, 0, None);
                self.sim.set_busy(p, true).unwrap();
                p
            })
            .collect()
    }

    fn report(&mut self, value: f64) -> String {
        match reply(ask(
            &mut self.c,
            ROOT,
            Request::Report {
                overlay: "shop".into(),
                value,
            },
        )) {
            Reply::Reported { action, .. } => action.unwrap_or_default(),
            other => panic!("expected Reported, got {other:?}"),
        }
    }

    fn shop(&mut self) -> OverlayStatus {
        match reply(ask(&mut self.c, ROOT, Request::Overlays {})) {
            Reply::Overlays { overlays } => overlays.into_iter().next().unwrap(),
            other => panic!("expected Overlays, got {other:?}"),
        }
    }

    fn why(&self, subject: &str) -> Vec<String> {
        self.c
            .decisions()
            .query(Some(subject), 1000)
            .iter()
            .map(|d| d.to_string())
            .collect()
    }
}

#[test]
fn tuning_at_capacity_escalates_to_borrowing_and_relaxes_back() {
    // api and db are alone on their islands: a tune is at capacity at once.
    let mut rig = Rig::start(spec(&[("api", "web"), ("db", "batch")], &["api", "db"]));
    let _busy = rig.busy("api", 4);
    rig.epochs(3);
    let action = rig.report(1500.0);
    assert!(action.contains("tune CPU time up"), "{action}");
    assert!(
        action.contains("tune -> borrow_preferred: every unit's tune was refused"),
        "{action}"
    );
    assert!(
        action.contains("borrow 1 cores from island batch for overlay shop: ack"),
        "{action}"
    );
    assert_eq!(rig.cpus("web"), "1-3,5", "written before the answer");
    // Still above: the stage holds, one more CPU from batch.
    let action = rig.report(1500.0);
    assert!(!action.contains("tune CPU time up"), "{action}");
    assert!(action.contains("from island batch"), "{action}");
    assert_eq!(rig.cpus("web"), "1-3,5-6");
    assert_eq!(rig.shop().loans.len(), 2);
    let d = rig.why("web");
    assert!(
        d.iter().any(|d| d.contains(
            "borrow cores (p99 1500 us > 1000 us; borrow_preferred after tuning reached the island's capacity)"
        )),
        "{d:#?}"
    );
    // Within the bound: nothing moves.
    assert_eq!(rig.report(800.0), "");
    assert_eq!(rig.shop().loans.len(), 2);
    // Room to spare: the CPUs go back, the latest first, then a tune down.
    let action = rig.report(300.0);
    assert!(
        action.starts_with("release cores of overlay shop to island batch: ack"),
        "{action}"
    );
    assert!(action.contains("borrow_preferred -> tune"), "{action}");
    assert_eq!(rig.cpus("web"), "1-3");
    assert!(rig.shop().loans.is_empty());
    let action = rig.report(300.0);
    assert!(!action.contains("release"), "{action}");
}

#[test]
fn an_overlay_with_one_island_borrows_from_any() {
    let mut rig = Rig::start(spec(&[("api", "web"), ("db", "batch")], &["api"]));
    let _busy = rig.busy("api", 4);
    rig.epochs(3);
    let action = rig.report(1500.0);
    assert!(
        action.contains("borrow_preferred -> borrow_any: no other island of the overlay"),
        "{action}"
    );
    assert!(
        action.contains("borrow 1 cores from any island for overlay shop: ack"),
        "{action}"
    );
    assert_eq!(rig.cpus("web"), "1-3,5");
    assert_eq!(rig.cpus("batch"), "4,6-7");
    let action = rig.report(200.0);
    assert!(
        action.contains("borrow_any -> borrow_preferred"),
        "{action}"
    );
    assert_eq!(rig.cpus("web"), "1-3");
}

#[test]
fn a_borrowed_cpu_serves_the_overlays_units_not_the_hog_beside_them() {
    let mut s = spec(
        &[("api", "web"), ("hog", "web"), ("db", "batch")],
        &["api", "db"],
    );
    s.overlays[0].react.utilization = Some(0.8);
    let mut rig = Rig::start(s);
    let busy: Vec<u32> = rig
        .busy("api", 2)
        .into_iter()
        .chain(rig.busy("hog", 2))
        .collect();
    rig.epochs(5);
    assert_eq!(rig.cpus("web"), "1-3,5", "borrowed from idle batch");
    assert_eq!(rig.cpus("web/api"), "1-3,5", "the overlay's unit has it");
    assert_eq!(rig.cpus("web/hog"), "1-3", "the hog beside it does not");
    let sim = rig.sim.clone();
    let eff = |p: &str| {
        sim.effective_cpus(&GroupPath::from_relative(p))
            .unwrap()
            .to_string()
    };
    assert_eq!(eff("web/hog"), "1-3");
    assert_eq!(eff("web/api"), "1-3,5");
    let d = rig.why("hog");
    assert!(
        d.iter().any(|d| d.contains("web/hog: cpuset.cpus=1-3")),
        "{d:#?}"
    );
    for p in busy {
        rig.sim.set_busy(p, false).unwrap();
    }
    rig.epochs(5);
    assert_eq!(rig.cpus("web"), "1-3", "released");
    assert_eq!(eff("web/api"), "1-3");
    assert_eq!(eff("web/hog"), "1-3");
}

#[test]
fn a_lender_whose_own_load_rises_revokes_its_cpus() {
    let mut s = spec(&[("api", "web"), ("db", "batch")], &["api"]);
    s.overlays[0].react.utilization = Some(0.8);
    let mut rig = Rig::start(s);
    let _api = rig.busy("api", 4);
    rig.epochs(5);
    assert_eq!(rig.cpus("web"), "1-3,5", "borrowed from idle batch");
    assert_eq!(rig.cpus("batch"), "4,6-7");
    // batch's own unit gets busy: once its load is seen, the CPU goes home
    // (adopted at the next epoch, seen at the one after, revoked in it).
    let _db = rig.busy("db", 4);
    rig.epochs(2);
    assert_eq!(rig.cpus("batch"), "4-7", "revoked");
    assert_eq!(rig.cpus("web"), "1-3");
    assert!(rig.shop().loans.is_empty());
    let d = rig.why("batch");
    assert!(
        d.iter().any(|d| d.contains(
            "because overlay shop: island batch revoked the cores it lent (island batch uses"
        )),
        "{d:#?}"
    );
    // web stays busy, but no island has a CPU to lend now.
    rig.epochs(10);
    assert_eq!(rig.cpus("web"), "1-3");
}

#[test]
fn a_trigger_naming_an_overlay_boosts_all_its_units_when_the_request_is_handled() {
    let mut rig = Rig::start(spec(
        &[("api", "web"), ("front", "web"), ("db", "batch")],
        &["api", "front", "db"],
    ));
    rig.epochs(1);
    let msg = atoll_core::coord::Message::TriggerOverlay {
        resource: atoll_core::coord::Resource::CpuTime,
        overlay: n("shop"),
    };
    let r = reply(ask(
        &mut rig.c,
        ROOT,
        Request::Coordinate {
            from: None,
            message: msg.clone(),
        },
    ));
    let Reply::Coordinated { reply: r, text } = r else {
        panic!("expected Coordinated, got {r:?}");
    };
    assert!(r.is_ack(), "{text}");
    let sim = rig.sim.clone();
    let weight = |p: &str| {
        sim.settings(&GroupPath::from_relative(p))
            .and_then(|s| s.cpu_weight)
    };
    // Written while the request was handled, no epoch in between: two
    // units of web in one boost slot, and db.
    for u in ["web/api", "web/front", "batch/db"] {
        assert_eq!(weight(u), Some(10_000), "{u}");
    }
    let d = rig.why("front");
    assert!(
        d.iter()
            .any(|d| d.contains("because overlay shop: trigger (asked by uid 0)")),
        "{d:#?}"
    );
    // All end together.
    rig.epochs(2);
    for u in ["web/api", "web/front", "batch/db"] {
        assert_eq!(weight(u), None, "{u}");
    }
    // Too soon again: all cool down, none is boosted.
    let r = reply(ask(
        &mut rig.c,
        ROOT,
        Request::Coordinate {
            from: None,
            message: msg,
        },
    ));
    let Reply::Coordinated { reply: r, text } = r else {
        panic!("expected Coordinated, got {r:?}");
    };
    assert!(!r.is_ack(), "{text}");
    for u in ["web/api", "web/front", "batch/db"] {
        assert_eq!(weight(u), None, "{u}");
    }
}
