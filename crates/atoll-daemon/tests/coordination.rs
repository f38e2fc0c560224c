//! Coordination between islands in the control loop, on the simulated
//! backend: config overlays, the API's messages and their effects on the
//! groups, boosts that expire, borrowed CPUs, the platform CPU cap, the
//! reactive and proactive policies, permissions, and how coordination
//! composes with the periodic reconcile and the isolation model.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::coord::{CoordConfig, Direction, Message, Property, Reply as CoordReply, Resource};
use atoll_core::plan::GroupPath;
use atoll_core::spec::{
    IsolationMode, OverlayConfig, PlatformSpec, ReactPolicy, SchedPolicy, DEFAULT_EPOCH,
};
use atoll_daemon::command::Caller;
use atoll_daemon::controller::Controller;
use atoll_daemon::coord::RecvQueues;
use atoll_proto::coord::{OverlayOrigin, OverlayStatus};
use atoll_proto::{ErrorCode, Reply, Request};
use atoll_sim::SimPlatform;
use common::sim::{ask, controller, n, reply, set, topo8 as topo, user, web_and_batch, ROOT};

fn overlay(name: &str, units: &[&str], property: Property) -> OverlayConfig {
    OverlayConfig {
        name: n(name),
        priority: 5,
        units: units.iter().map(|u| n(u)).collect(),
        property,
        slo: Default::default(),
        cap_timing: Default::default(),
        react: ReactPolicy::default(),
    }
}

const LATENCY: Property = Property::LatencyPercentile {
    percentile: 99.0,
    bound_us: 1000,
};

/// Host CPU 0; fair islands web (1-3: api, front) and batch (4-7: db,
/// crunch); overlay `shop` over api and db.
fn spec() -> PlatformSpec {
    web_and_batch(
        &[
            ("api", "web"),
            ("front", "web"),
            ("db", "batch"),
            ("crunch", "batch"),
        ],
        vec![overlay("shop", &["api", "db"], LATENCY)],
    )
}

struct Rig {
    sim: SimPlatform,
}

impl Rig {
    fn new() -> Self {
        Self {
            sim: SimPlatform::new(topo(), "atoll-c", ManualClock::new()),
        }
    }

    fn start(&self, spec: PlatformSpec) -> Controller {
        let mut c = controller(&self.sim, spec, topo());
        c.start().unwrap();
        c
    }

    fn epochs(&self, c: &mut Controller, k: usize) {
        for _ in 0..k {
            self.sim.advance(DEFAULT_EPOCH);
            c.epoch();
        }
    }

    fn settings(&self, path: &str) -> atoll_core::plan::GroupSettings {
        self.sim
            .settings(&GroupPath::from_relative(path))
            .unwrap_or_else(|| panic!("no group {path}"))
    }

    fn weight(&self, path: &str) -> Option<u32> {
        self.settings(path).cpu_weight
    }

    fn cpus(&self, path: &str) -> String {
        self.settings(path)
            .cpus
            .map(|c| c.to_string())
            .unwrap_or_default()
    }

    /// `k` busy processes named `comm` (adopted by the unit of that name at
    /// the next epoch), owned by `uid`.
    fn busy(&self, comm: &str, uid: u32, k: usize) -> Vec<u32> {
        (0..k)
            .map(|_| {
                let p = self.sim.spawn(comm, uid, None);
                self.sim.set_busy(p, true).unwrap();
                p
            })
            .collect()
    }
}

/// Sends `msg` as `caller`; returns the coordinator's reply and its text.
fn coordinate(
    c: &mut Controller,
    caller: Caller,
    from: Option<&str>,
    msg: Message,
) -> (CoordReply, String) {
    let r = ask(
        c,
        caller,
        Request::Coordinate {
            from: from.map(Into::into),
            message: msg,
        },
    );
    match reply(r) {
        Reply::Coordinated { reply, text } => (reply, text),
        other => panic!("expected Coordinated, got {other:?}"),
    }
}

fn tune(unit: &str, dir: Direction) -> Message {
    Message::Tune {
        resource: Resource::CpuTime,
        dir,
        overlay: n("shop"),
        unit: n(unit),
    }
}

fn trigger(unit: &str) -> Message {
    Message::Trigger {
        resource: Resource::CpuTime,
        overlay: n("shop"),
        unit: n(unit),
    }
}

fn overlays(c: &mut Controller) -> Vec<OverlayStatus> {
    match reply(ask(c, ROOT, Request::Overlays {})) {
        Reply::Overlays { overlays } => overlays,
        other => panic!("expected Overlays, got {other:?}"),
    }
}

fn why(c: &Controller, subject: &str) -> Vec<String> {
    c.decisions()
        .query(Some(subject), 1000)
        .iter()
        .map(|d| d.to_string())
        .collect()
}

#[test]
fn config_overlays_are_registered_and_listed() {
    let rig = Rig::new();
    let mut s = spec();
    s.overlays.push(overlay(
        "power",
        &[],
        Property::PlatformCpuCap { cpus: 3.0 },
    ));
    let mut c = rig.start(s);
    let list = overlays(&mut c);
    let names: Vec<&str> = list.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["power", "shop"]);
    let shop = &list[1];
    assert_eq!(shop.origin, OverlayOrigin::Config);
    assert_eq!(shop.units, ["web/api", "batch/db"]);
    assert_eq!(shop.priority, 5);
    assert_eq!(shop.property, LATENCY);
    assert!(shop.loans.is_empty());
    assert_eq!(shop.acked, 1, "the registration");
}

#[test]
fn a_tune_through_the_api_changes_the_weight_and_the_reconcile_keeps_it() {
    let rig = Rig::new();
    let mut c = rig.start(spec());
    assert_eq!(rig.weight("web/api"), None, "kernel default before");
    let (r, text) = coordinate(&mut c, ROOT, None, tune("api", Direction::Up));
    assert!(r.is_ack(), "{text}");
    assert_eq!(rig.weight("web/api"), Some(125));
    let d = why(&c, "api");
    assert!(
        d.iter().any(|d| d.contains(
            "set web/api: cpu.weight=125 [plan + coordination], because overlay shop: tune CPU time up (asked by uid 0)"
        )),
        "{d:#?}"
    );
    // More than a second of epochs: the periodic reconcile runs and keeps it.
    rig.epochs(&mut c, 40);
    assert_eq!(rig.weight("web/api"), Some(125));
    let (r, _) = coordinate(&mut c, ROOT, None, tune("api", Direction::Down));
    assert!(r.is_ack());
    assert_eq!(rig.weight("web/api"), None, "back to the configured value");
    rig.epochs(&mut c, 40);
    assert_eq!(rig.weight("web/api"), None);
    let shop = &overlays(&mut c)[0];
    assert_eq!((shop.acked, shop.nacked), (3, 0));
}

#[test]
fn a_refused_message_is_an_answer_with_a_nack() {
    let rig = Rig::new();
    let mut c = rig.start(spec());
    let release = Message::Release {
        resource: Resource::Cores,
        overlay: n("shop"),
        island: n("batch"),
    };
    let (r, text) = coordinate(&mut c, ROOT, Some("web"), release);
    assert!(!r.is_ack());
    assert!(text.starts_with("nack: "), "{text}");
    let (r, text) = coordinate(&mut c, ROOT, None, tune("front", Direction::Up));
    assert!(!r.is_ack(), "front is not shop's: {text}");
    let shop = &overlays(&mut c)[0];
    assert_eq!(shop.nacked, 2);
    // A sender that is no island is a nack too, not an error.
    let (r, _) = coordinate(&mut c, ROOT, Some("nowhere"), tune("api", Direction::Up));
    assert!(!r.is_ack());
}

#[test]
fn a_trigger_boosts_until_its_length_ends() {
    let rig = Rig::new();
    let mut c = rig.start(spec());
    let (r, text) = coordinate(&mut c, ROOT, None, trigger("db"));
    assert!(r.is_ack(), "{text}");
    assert_eq!(rig.weight("batch/db"), Some(10_000));
    let (again, _) = coordinate(&mut c, ROOT, None, trigger("db"));
    assert!(!again.is_ack(), "boosted already");
    // The boost lasts 30 ms: one epoch later it has ended.
    rig.epochs(&mut c, 1);
    assert_eq!(rig.weight("batch/db"), None);
    let d = why(&c, "db");
    assert!(
        d.iter().any(|d| d.contains(
            "set batch/db: cpu.weight=default [plan], because overlay shop: the boost ended"
        )),
        "{d:#?}"
    );
}

#[test]
fn a_trigger_is_answered_when_served_and_a_tune_once_saved() {
    let rig = Rig::new();
    let mut c = rig.start(spec());
    let send = |c: &mut Controller, message: Message| {
        let (tx, rx) = std::sync::mpsc::channel();
        c.take(atoll_daemon::command::Command::Api {
            caller: ROOT,
            id: 1,
            request: Request::Coordinate {
                from: None,
                message,
            },
            reply: tx,
        });
        rx
    };
    // The boost is in the kernel and the reply out before any save: the
    // loop has nothing to commit for it (its state is saved at the next
    // epoch).
    let rx = send(&mut c, trigger("db"));
    let r = rx.try_recv().expect("a trigger is answered when served");
    assert!(r.ok.is_some(), "{r:?}");
    assert_eq!(rig.weight("batch/db"), Some(10_000));
    assert!(!c.uncommitted());
    // A tune's reply waits for the commit that saves it.
    let rx = send(&mut c, tune("api", Direction::Up));
    assert!(rx.try_recv().is_err(), "a tune waits for the save");
    assert!(c.uncommitted());
    c.commit();
    // Sent by the saver thread once the state file holds it.
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("answered once saved");
    assert!(r.ok.is_some(), "{r:?}");
}

#[test]
fn borrowed_cpus_move_between_island_cpusets_and_come_back() {
    let rig = Rig::new();
    let mut c = rig.start(spec());
    let borrow = Message::BorrowPreferred {
        resource: Resource::Cores,
        overlay: n("shop"),
        island: n("batch"),
        amount: 1,
    };
    // Before the first usage sample no island knows what it leaves idle.
    let (r, _) = coordinate(&mut c, ROOT, Some("web"), borrow.clone());
    assert!(!r.is_ack());
    rig.epochs(&mut c, 3);
    let (r, text) = coordinate(&mut c, ROOT, Some("web"), borrow);
    assert!(r.is_ack(), "{text}");
    // batch keeps its lowest CPU and lends the next one.
    assert_eq!(rig.cpus("web"), "1-3,5");
    // The giver shrank before the receiver grew: no island ever lost its
    // partition on the way.
    let fallbacks: Vec<String> = why(&c, "web")
        .into_iter()
        .chain(why(&c, "batch"))
        .filter(|d| d.starts_with("fallback"))
        .collect();
    assert!(fallbacks.is_empty(), "{fallbacks:#?}");
    assert_eq!(rig.cpus("batch"), "4,6-7");
    for island in ["web", "batch"] {
        assert_eq!(
            rig.sim.partition_valid(&GroupPath::from_relative(island)),
            Some(true),
            "{island}"
        );
    }
    assert_eq!(
        rig.sim
            .effective_cpus(&GroupPath::from_relative("web/api"))
            .unwrap(),
        set("1-3,5")
    );
    let shop = &overlays(&mut c)[0];
    assert_eq!(shop.loans.len(), 1);
    assert_eq!(
        (shop.loans[0].cpu, shop.loans[0].lender.as_str()),
        (5, "batch")
    );
    // The periodic reconcile does not give it back.
    rig.epochs(&mut c, 40);
    assert_eq!(rig.cpus("web"), "1-3,5");
    let status = c.status();
    assert_eq!(status.islands[0].cpus, set("1-3,5"));
    let release = Message::Release {
        resource: Resource::Cores,
        overlay: n("shop"),
        island: n("batch"),
    };
    let (r, text) = coordinate(&mut c, ROOT, Some("web"), release);
    assert!(r.is_ack(), "{text}");
    assert_eq!(rig.cpus("web"), "1-3");
    assert_eq!(rig.cpus("batch"), "4-7");
    let d = why(&c, "web");
    assert!(
        d.iter().any(|d| d.contains(
            "set web: cpuset.cpus=1-3,5 [plan + coordination], because overlay shop: borrow cores"
        )),
        "{d:#?}"
    );
}

#[test]
fn isolation_lays_out_home_cpus_again_when_an_island_gains_a_cpu() {
    let rig = Rig::new();
    let mut s = spec();
    s.isolation.mode = IsolationMode::Quota;
    let mut c = rig.start(s);
    rig.epochs(&mut c, 3);
    let web_units = |rig: &Rig| set(&rig.cpus("web/api")).union(&set(&rig.cpus("web/front")));
    assert_eq!(web_units(&rig), set("1-3"));
    let borrow = Message::BorrowPreferred {
        resource: Resource::Cores,
        overlay: n("shop"),
        island: n("batch"),
        amount: 1,
    };
    let (r, text) = coordinate(&mut c, ROOT, Some("web"), borrow);
    assert!(r.is_ack(), "{text}");
    rig.epochs(&mut c, 1);
    assert_eq!(
        web_units(&rig),
        set("1-3,5"),
        "the new CPU is someone's home"
    );
    let batch_units = set(&rig.cpus("batch/db")).union(&set(&rig.cpus("batch/crunch")));
    assert_eq!(batch_units, set("4,6-7"));
}

#[test]
fn the_platform_cpu_cap_is_split_and_its_sum_kept_while_it_moves() {
    let rig = Rig::new();
    let mut s = spec();
    s.overlays.push(overlay(
        "power",
        &[],
        Property::PlatformCpuCap { cpus: 3.0 },
    ));
    let mut c = rig.start(s);
    let quota = |rig: &Rig, island: &str| rig.settings(island).cpu_max.map(|m| m.quota_us);
    // Over the islands' cap period (`cap_period`); a quota of `cpus`.
    let period = u64::try_from(CoordConfig::default().cap_period.as_micros()).unwrap();
    let q = |cpus: u64| cpus * period / 10;
    assert_eq!(
        rig.settings("web").cpu_max.map(|m| m.period_us),
        Some(period)
    );
    // 0.1 each, the other 2.8 in proportion to 3 and 4 CPUs.
    assert_eq!(quota(&rig, "web"), Some(q(13)));
    assert_eq!(quota(&rig, "batch"), Some(q(17)));
    rig.busy("api", 0, 3);
    for _ in 0..20 {
        rig.epochs(&mut c, 1);
        let sum = quota(&rig, "web").unwrap() + quota(&rig, "batch").unwrap();
        assert_eq!(sum, q(30));
    }
    assert!(
        quota(&rig, "web").unwrap() >= q(25),
        "the throttled island received cap: {:?}",
        quota(&rig, "web")
    );
    let d = why(&c, "web");
    assert!(
        d.iter()
            .any(|d| d.contains("because overlay power: throttled at its cap")),
        "{d:#?}"
    );
}

#[test]
fn the_islands_caps_take_the_configured_period_and_a_reload_changes_it() {
    let rig = Rig::new();
    let mut s = spec();
    let mut power = overlay("power", &[], Property::PlatformCpuCap { cpus: 3.0 });
    power.cap_timing.period = Some(Duration::from_millis(50));
    s.overlays.push(power);
    let mut c = rig.start(s.clone());
    let max = |rig: &Rig, island: &str| {
        rig.settings(island)
            .cpu_max
            .map(|m| (m.quota_us, m.period_us))
    };
    // 1.3 and 1.7 CPUs (0.1 each, the rest by 3 and 4 CPUs) over 50 ms.
    assert_eq!(max(&rig, "web"), Some((65_000, 50_000)));
    assert_eq!(max(&rig, "batch"), Some((85_000, 50_000)));
    rig.epochs(&mut c, 3);
    assert_eq!(max(&rig, "web"), Some((65_000, 50_000)));
    // A reload with another period writes the caps over it.
    s.overlays[1].cap_timing.period = Some(Duration::from_millis(100));
    c.reload(s.clone()).unwrap();
    assert_eq!(max(&rig, "web"), Some((130_000, 100_000)));
    assert_eq!(max(&rig, "batch"), Some((170_000, 100_000)));
    // And one without: the default.
    s.overlays[1].cap_timing = Default::default();
    c.reload(s).unwrap();
    let period = u64::try_from(CoordConfig::default().cap_period.as_micros()).unwrap();
    assert_eq!(max(&rig, "web"), Some((13 * period / 10, period)));
}

#[test]
fn reactive_pressure_tunes_a_pressured_unit_up_and_back_down() {
    let rig = Rig::new();
    let mut s = spec();
    s.overlays[0].react.pressure = Some(20.0);
    let mut c = rig.start(s);
    let busy = rig.busy("api", 0, 4);
    rig.epochs(&mut c, 20);
    let w = rig.weight("web/api").expect("tuned up");
    assert!(w > 150, "{w}");
    let d = why(&c, "api");
    assert!(
        d.iter()
            .any(|d| d.contains("tune CPU time up (CPU pressure of api")),
        "{d:#?}"
    );
    for p in busy {
        rig.sim.set_busy(p, false).unwrap();
    }
    rig.epochs(&mut c, 60);
    assert_eq!(rig.weight("web/api"), None, "given back");
}

#[test]
fn reactive_utilization_borrows_a_cpu_and_releases_it() {
    let rig = Rig::new();
    let mut s = spec();
    s.overlays[0].react.utilization = Some(0.8);
    let mut c = rig.start(s);
    rig.epochs(&mut c, 2);
    assert_eq!(rig.cpus("web"), "1-3");
    let busy = rig.busy("api", 0, 4);
    rig.epochs(&mut c, 5);
    assert_eq!(rig.cpus("web"), "1-3,5", "borrowed from idle batch");
    assert_eq!(rig.cpus("batch"), "4,6-7");
    for p in busy {
        rig.sim.set_busy(p, false).unwrap();
    }
    rig.epochs(&mut c, 5);
    assert_eq!(rig.cpus("web"), "1-3", "released");
    assert_eq!(rig.cpus("batch"), "4-7");
}

struct FakeQueues(Arc<AtomicU64>);

impl RecvQueues for FakeQueues {
    fn queued_bytes(&mut self, _pids: &[u32]) -> Option<u64> {
        Some(self.0.load(Ordering::Relaxed))
    }
}

#[test]
fn a_full_receive_queue_triggers_its_unit() {
    let rig = Rig::new();
    let mut s = spec();
    s.overlays[0].react.recv_queue = Some(128 << 10);
    let mut c = rig.start(s);
    let queued = Arc::new(AtomicU64::new(4096));
    c.set_recv_queues(Box::new(FakeQueues(queued.clone())));
    rig.sim.spawn("db", 0, None);
    rig.epochs(&mut c, 2);
    assert_eq!(rig.weight("batch/db"), None);
    queued.store(200 << 10, Ordering::Relaxed);
    rig.sim.advance(DEFAULT_EPOCH);
    c.epoch();
    assert_eq!(rig.weight("batch/db"), Some(10_000), "boosted");
    let d = why(&c, "db");
    assert!(
        d.iter()
            .any(|d| d.contains("trigger (receive queue of db 204800 bytes > 131072 bytes)")),
        "{d:#?}"
    );
}

#[test]
fn reports_run_the_proactive_policy() {
    let rig = Rig::new();
    let mut c = rig.start(spec());
    let report = |c: &mut Controller, value: f64| match reply(ask(
        c,
        ROOT,
        Request::Report {
            overlay: "shop".into(),
            value,
        },
    )) {
        Reply::Reported { holds, action, .. } => (holds, action),
        other => panic!("expected Reported, got {other:?}"),
    };
    let (holds, action) = report(&mut c, 1500.0);
    assert!(!holds);
    let action = action.expect("an action");
    assert!(action.starts_with("tune CPU time up"), "{action}");
    let tuned: Vec<Option<u32>> = [rig.weight("web/api"), rig.weight("batch/db")].into();
    assert!(tuned.contains(&Some(125)), "{tuned:?}");
    // Far off: a trigger and a lasting step. With nothing measured, api
    // and db tie for the most pressure: the other one's turn.
    let (holds, action) = report(&mut c, 2500.0);
    assert!(!holds);
    let action = action.unwrap();
    assert!(action.starts_with("trigger CPU time"), "{action}");
    assert!(action.contains("; then tune CPU time up"), "{action}");
    let (holds, action) = report(&mut c, 700.0);
    assert!(holds);
    assert_eq!(action, None, "within the bound: nothing to do");
    rig.epochs(&mut c, 1);
    assert_eq!(rig.weight("web/api"), Some(125), "both were tuned once");
    assert_eq!(rig.weight("batch/db"), Some(125), "both were tuned once");
    for _ in 0..2 {
        let (_, action) = report(&mut c, 300.0);
        assert!(action.unwrap().starts_with("tune CPU time down"));
    }
    assert_eq!(rig.weight("web/api"), None);
    assert_eq!(rig.weight("batch/db"), None);
    let shop = &overlays(&mut c)[0];
    assert_eq!((shop.value, shop.holds), (Some(300.0), Some(true)));
    let d = why(&c, "shop");
    assert!(d.is_empty() || d.iter().all(|d| !d.is_empty()));
    let all: Vec<String> = why(&c, "api").into_iter().chain(why(&c, "db")).collect();
    assert!(
        all.iter()
            .any(|d| d.contains("tune CPU time up (p99 1500 us > 1000 us)")),
        "{all:#?}"
    );
}

#[test]
fn the_owner_of_an_overlay_may_tune_it_and_only_root_may_move_cpus() {
    let rig = Rig::new();
    let mut c = rig.start(spec());
    rig.sim.spawn("api", 1000, None);
    rig.sim.spawn("db", 1000, None);
    rig.epochs(&mut c, 2);
    let (r, text) = coordinate(&mut c, user(1000), None, tune("api", Direction::Up));
    assert!(r.is_ack(), "{text}");
    let e = ask(
        &mut c,
        user(1001),
        Request::Coordinate {
            from: None,
            message: tune("api", Direction::Up),
        },
    )
    .err
    .expect("an error");
    assert_eq!(e.code, ErrorCode::PermissionDenied, "{}", e.message);
    let e = ask(
        &mut c,
        user(1000),
        Request::Coordinate {
            from: Some("web".into()),
            message: Message::BorrowAny {
                resource: Resource::Cores,
                overlay: n("shop"),
                amount: 1,
            },
        },
    )
    .err
    .expect("an error");
    assert_eq!(e.code, ErrorCode::PermissionDenied, "{}", e.message);
    // Another uid's process in the overlay takes ownership away.
    rig.sim.spawn("db", 1001, None);
    rig.epochs(&mut c, 2);
    let e = ask(
        &mut c,
        user(1000),
        Request::Report {
            overlay: "shop".into(),
            value: 5.0,
        },
    )
    .err
    .expect("an error");
    assert_eq!(e.code, ErrorCode::PermissionDenied, "{}", e.message);
}

#[test]
fn overlays_registered_through_the_api_come_and_go() {
    let rig = Rig::new();
    let mut c = rig.start(spec());
    let register = Message::Register {
        overlay: atoll_core::coord::OverlaySpec {
            name: n("nightly"),
            priority: 1,
            units: vec![(n("batch"), n("crunch"))],
            property: Property::ThroughputFloor { per_s: 10.0 },
        },
    };
    let e = ask(
        &mut c,
        user(1000),
        Request::Coordinate {
            from: None,
            message: register.clone(),
        },
    )
    .err
    .expect("an error");
    assert_eq!(e.code, ErrorCode::PermissionDenied);
    let (r, text) = coordinate(&mut c, ROOT, None, register);
    assert!(r.is_ack(), "{text}");
    let (r, _) = coordinate(
        &mut c,
        ROOT,
        None,
        Message::Tune {
            resource: Resource::CpuTime,
            dir: Direction::Up,
            overlay: n("nightly"),
            unit: n("crunch"),
        },
    );
    assert!(r.is_ack());
    assert_eq!(rig.weight("batch/crunch"), Some(125));
    let list = overlays(&mut c);
    assert_eq!(list[0].name, "nightly");
    assert_eq!(list[0].origin, OverlayOrigin::Api);
    let (r, _) = coordinate(
        &mut c,
        ROOT,
        None,
        Message::Deregister {
            overlay: n("nightly"),
        },
    );
    assert!(r.is_ack());
    assert_eq!(rig.weight("batch/crunch"), None, "its knobs go back");
    assert_eq!(overlays(&mut c).len(), 1);
}

#[test]
fn coordination_wins_over_isolation_on_a_knob_both_set_and_hands_it_back() {
    let rig = Rig::new();
    let mut s = spec();
    s.isolation.mode = IsolationMode::Quota;
    s.units[0].entitlement.cpus = Some(1.5);
    s.units[0].entitlement.cpu_cap = Some(2.0);
    let mut c = rig.start(s);
    rig.epochs(&mut c, 3);
    let quota = |rig: &Rig| rig.settings("web/api").cpu_max.map(|m| m.quota_us);
    let isolated = quota(&rig);
    assert_eq!(
        isolated,
        Some(150_000),
        "quota mode holds api to its 1.5 CPUs"
    );
    let (r, text) = coordinate(&mut c, ROOT, None, tune("api", Direction::Up));
    assert!(r.is_ack(), "{text}");
    assert_eq!(quota(&rig), Some(250_000), "the tuned cap");
    rig.epochs(&mut c, 40);
    assert_eq!(
        quota(&rig),
        Some(250_000),
        "isolation and the reconcile keep it"
    );
    let (r, _) = coordinate(&mut c, ROOT, None, tune("api", Direction::Down));
    assert!(r.is_ack());
    rig.epochs(&mut c, 2);
    assert_eq!(quota(&rig), isolated, "back to isolation's value");
}

#[test]
fn on_a_realtime_island_tunes_move_rt_budgets_and_triggers_raise_priorities() {
    use atoll_core::plan::TaskPolicy;
    use atoll_core::process::TaskControl;
    use atoll_core::spec::{RealtimePolicy, RtClass};
    let rig = Rig::new();
    let mut s = spec();
    s.islands[1].policy = SchedPolicy::Realtime(RealtimePolicy {
        class: RtClass::Fifo,
        priority_min: 10,
        priority_max: 40,
        runtime_us: 300_000,
        period_us: 1_000_000,
    });
    s.units[2].rt_priority = Some(20);
    s.overlays[0].units = vec![n("api"), n("db"), n("crunch")];
    let mut c = rig.start(s);
    let db = rig.sim.spawn("db", 0, None);
    rig.epochs(&mut c, 2);
    assert_eq!(rig.sim.policy(db).unwrap(), TaskPolicy::Fifo(20));
    let budget = |rig: &Rig, g: &str| rig.settings(g).rt_budget.map(|b| b.runtime_us);
    assert_eq!(budget(&rig, "batch/db"), Some(150_000));
    // The island's budget is handed out: more for db needs less for crunch.
    let (r, _) = coordinate(&mut c, ROOT, None, tune("db", Direction::Up));
    assert!(!r.is_ack());
    let (r, text) = coordinate(&mut c, ROOT, None, tune("crunch", Direction::Down));
    assert!(r.is_ack(), "{text}");
    rig.epochs(&mut c, 20);
    let (r, text) = coordinate(&mut c, ROOT, None, tune("db", Direction::Up));
    assert!(r.is_ack(), "{text}");
    assert_eq!(budget(&rig, "batch/crunch"), Some(100_000));
    assert_eq!(budget(&rig, "batch/db"), Some(200_000));
    let (r, text) = coordinate(&mut c, ROOT, None, trigger("db"));
    assert!(r.is_ack(), "{text}");
    assert_eq!(rig.sim.policy(db).unwrap(), TaskPolicy::Fifo(40), "boosted");
    rig.epochs(&mut c, 1);
    assert_eq!(rig.sim.policy(db).unwrap(), TaskPolicy::Fifo(20), "back");
}
