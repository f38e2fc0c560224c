//! Latency-critical beside best-effort (Heracles) in the control loop, on
//! the simulated backend: an overlay's best-effort units start at the
//! floor, grow a step at a time while the SLO has slack, are cut back
//! within one epoch when the slack runs low, go to the floor when the SLO
//! is missed, and get their configured settings back when the overlay
//! goes. Each move is a decision naming the slack.

mod common;

use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::coord::Property;
use atoll_core::decision::Reason;
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings};
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandSpec, OverlayConfig, PlatformSpec, ReactPolicy,
    SchedPolicy, UnitSpec, DEFAULT_EPOCH,
};
use atoll_daemon::controller::Controller;
use atoll_proto::slo::SloStatus;
use atoll_proto::{Reply, Request};
use atoll_sim::SimPlatform;
use common::sim::{ask, controller, n, reply, set, topo8 as topo, ROOT};

fn unit(name: &str, island: &str, weight: Option<f64>) -> UnitSpec {
    let mut entitlement = Entitlement::default();
    if let Some(w) = weight {
        entitlement.cpus = Some(w);
    }
    UnitSpec {
        name: n(name),
        island: n(island),
        entitlement,
        adopt: vec![AdoptRule::Comm(name.into())],
        rt_priority: None,
    }
}

/// Fair island web (1-3: api, batch); overlay shop over api, p99 within
/// 1000 us, with `batch` as its best effort.
fn spec(best_effort: bool) -> PlatformSpec {
    let mut shop = OverlayConfig {
        name: n("shop"),
        priority: 0,
        units: vec![n("api")],
        property: Property::LatencyPercentile {
            percentile: 99.0,
            bound_us: 1000,
        },
        slo: Default::default(),
        cap_timing: Default::default(),
        react: ReactPolicy::default(),
    };
    if best_effort {
        shop.slo.best_effort = vec![n("batch")];
    }
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![IslandSpec {
            name: n("web"),
            cpus: set("1-3"),
            mems: set("0"),
            policy: SchedPolicy::Fair,
            arbitration: Default::default(),
            exclusive: true,
            access: Default::default(),
        }],
        units: vec![unit("api", "web", None), unit("batch", "web", Some(2.0))],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: vec![shop],
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

struct Rig {
    sim: SimPlatform,
}

impl Rig {
    fn new() -> Self {
        Self {
            sim: SimPlatform::new(topo(), "atoll-lcbe", ManualClock::new()),
        }
    }

    fn epochs(&self, c: &mut Controller, k: usize) {
        for _ in 0..k {
            self.sim.advance(DEFAULT_EPOCH);
            c.epoch();
        }
    }

    /// Epochs for a little over `d`.
    fn run_for(&self, c: &mut Controller, d: Duration) {
        let k = d.as_millis() / DEFAULT_EPOCH.as_millis() + 1;
        self.epochs(c, usize::try_from(k).unwrap());
    }

    fn batch(&self) -> GroupSettings {
        self.sim
            .settings(&GroupPath::from_relative("web/batch"))
            .expect("web/batch")
    }
}

fn report(c: &mut Controller, value: f64) {
    match reply(ask(
        c,
        ROOT,
        Request::Report {
            overlay: "shop".into(),
            value,
        },
    )) {
        Reply::Reported { .. } => {}
        other => panic!("expected Reported, got {other:?}"),
    }
}

fn show(c: &mut Controller) -> SloStatus {
    match reply(ask(
        c,
        ROOT,
        Request::OverlayShow {
            overlay: "shop".into(),
        },
    )) {
        Reply::OverlayShown(s) => *s,
        other => panic!("expected OverlayShown, got {other:?}"),
    }
}

fn why(c: &Controller) -> Vec<String> {
    c.decisions()
        .query(Some("batch"), 1000)
        .iter()
        .map(|d| d.to_string())
        .collect()
}

/// The SLO reasons of `batch`'s decisions (also those combined with other
/// steps' reasons), as `(slack, measured µs, detail)`.
fn slo_reasons(c: &Controller) -> Vec<(Option<f64>, Option<u64>, String)> {
    fn flat(r: &Reason, out: &mut Vec<(Option<f64>, Option<u64>, String)>) {
        match r {
            Reason::Slo {
                slack,
                measured_us,
                detail,
                ..
            } => out.push((*slack, *measured_us, detail.clone())),
            Reason::Combined { causes } => causes.iter().for_each(|c| flat(c, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for d in c.decisions().query(Some("batch"), 1000) {
        flat(&d.why, &mut out);
    }
    out
}

fn level(c: &mut Controller) -> Option<u32> {
    show(c).be_level
}

fn quota(s: &GroupSettings) -> Option<u64> {
    s.cpu_max.map(|m: CpuMax| m.quota_us)
}

#[test]
fn best_effort_grows_with_slack_is_cut_fast_and_floored_on_a_miss() {
    let rig = Rig::new();
    let mut c = controller(&rig.sim, spec(true), topo());
    c.start().unwrap();
    rig.epochs(&mut c, 1);
    let configured_weight = Some(200);
    // Nothing measured yet: the floor.
    let floor = rig.batch();
    assert_eq!(floor.cpu_weight, Some(1), "{floor:?}");
    assert_eq!(quota(&floor), Some(10_000), "0.1 CPU of 100 ms");
    let s = show(&mut c);
    assert_eq!(
        (s.source.as_str(), s.be_level, s.be_steps),
        ("report", Some(0), 8)
    );
    assert_eq!(s.measured_us, None);

    // Slack 0.7: a step a second, up to the configured settings.
    report(&mut c, 300.0);
    rig.run_for(&mut c, Duration::from_millis(1100));
    let one = rig.batch();
    assert!(
        one.cpu_weight > Some(1) && one.cpu_weight < configured_weight,
        "{one:?}"
    );
    assert!(quota(&one) > Some(10_000), "{one:?}");
    assert_eq!(show(&mut c).be_level, Some(1));
    let s = show(&mut c);
    assert_eq!(s.measured_us, Some(300.0));
    assert!((s.slack.unwrap() - 0.7).abs() < 1e-9, "{s:?}");
    rig.run_for(&mut c, Duration::from_secs(8));
    assert_eq!(show(&mut c).be_level, Some(8));
    let top = rig.batch();
    assert_eq!(
        top.cpu_weight, configured_weight,
        "the configured share: {top:?}"
    );
    assert_eq!(top.cpu_max, None, "no quota at the top: {top:?}");

    // Slack 0.05: cut to half within one epoch.
    report(&mut c, 950.0);
    rig.epochs(&mut c, 1);
    assert_eq!(show(&mut c).be_level, Some(4));
    let cut = rig.batch();
    assert!(
        cut.cpu_weight < configured_weight && cut.cpu_weight > Some(1),
        "{cut:?}"
    );
    assert!(
        why(&c)
            .iter()
            .any(|d| d.contains("best effort cut 8 -> 4/8: slack 0.05")),
        "{:#?}",
        why(&c)
    );
    // The decision's reason carries the slack and the latency that caused it.
    let cut_reason = slo_reasons(&c)
        .into_iter()
        .find(|(_, _, d)| d.starts_with("best effort cut 8 -> 4/8"))
        .expect("an slo reason for the cut");
    assert!(
        (cut_reason.0.unwrap() - 0.05).abs() < 1e-9,
        "{cut_reason:?}"
    );
    assert_eq!(cut_reason.1, Some(950));
    assert!(
        why(&c)
            .iter()
            .any(|d| d.contains("overlay shop (latency SLO): best effort cut")),
        "{:#?}",
        why(&c)
    );

    // Missed: the floor at once.
    report(&mut c, 1500.0);
    rig.epochs(&mut c, 1);
    assert_eq!(show(&mut c).be_level, Some(0));
    assert_eq!(rig.batch().cpu_weight, Some(1));
    assert_eq!(quota(&rig.batch()), Some(10_000));
    assert!(
        why(&c)
            .iter()
            .any(|d| d.contains("best effort floor 4 -> 0/8: slack -0.50")),
        "{:#?}",
        why(&c)
    );
}

#[test]
fn removing_the_overlays_best_effort_restores_the_configured_settings() {
    let rig = Rig::new();
    let mut c = controller(&rig.sim, spec(true), topo());
    c.start().unwrap();
    rig.epochs(&mut c, 1);
    assert_eq!(rig.batch().cpu_weight, Some(1));
    let mut without = spec(false);
    c.reload(without.clone()).unwrap();
    rig.epochs(&mut c, 2);
    let back = rig.batch();
    assert_eq!(back.cpu_weight, Some(200), "{back:?}");
    assert_eq!(back.cpu_max, None, "{back:?}");
    // And with the overlay gone altogether.
    c.reload(spec(true)).unwrap();
    rig.epochs(&mut c, 2);
    assert_eq!(rig.batch().cpu_weight, Some(1));
    without.overlays.clear();
    c.reload(without).unwrap();
    rig.epochs(&mut c, 2);
    assert_eq!(rig.batch().cpu_weight, Some(200));
    assert_eq!(rig.batch().cpu_max, None);
}

#[test]
fn overlay_show_names_what_it_cannot_show() {
    let rig = Rig::new();
    let mut s = spec(false);
    s.overlays[0].property = Property::ThroughputFloor { per_s: 10.0 };
    let mut c = controller(&rig.sim, s, topo());
    c.start().unwrap();
    let r = ask(
        &mut c,
        ROOT,
        Request::OverlayShow {
            overlay: "shop".into(),
        },
    );
    assert!(format!("{r:?}").contains("no latency property"), "{r:?}");
    let r = ask(
        &mut c,
        ROOT,
        Request::OverlayShow {
            overlay: "nope".into(),
        },
    );
    assert!(format!("{r:?}").contains("no overlay nope"), "{r:?}");
}

#[test]
fn a_probed_latency_is_measured_and_reported_to_the_overlay() {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut b = [0u8; 64];
            if s.read(&mut b).is_ok() {
                let _ = s.write_all(b"pong\n");
            }
        }
    });
    let rig = Rig::new();
    let mut s = spec(false);
    s.overlays[0].slo.source = atoll_core::slo::LatencySource::Probe(atoll_core::slo::ProbeSpec {
        target: atoll_core::slo::ProbeTarget::parse(&format!("tcp://{addr}"), None).unwrap(),
        every: Duration::from_millis(5),
        timeout: Duration::from_secs(30),
    });
    let mut c = controller(&rig.sim, s, topo());
    c.start().unwrap();
    // The probe thread runs on the real clock; the loop on the simulated
    // one. Wait (bounded) for a few samples to come in.
    let mut tries = 0;
    while show(&mut c).samples_total < 3 {
        tries += 1;
        assert!(
            tries < 6000,
            "no samples from the probe: {:?}",
            show(&mut c)
        );
        std::thread::sleep(Duration::from_millis(10));
        rig.epochs(&mut c, 1);
    }
    let s = show(&mut c);
    assert_eq!(
        (s.source.as_str(), s.timeouts, s.error.clone()),
        ("probe", 0, None)
    );
    assert!(s.measured_us.is_some() && s.slack.is_some(), "{s:?}");
    // Once a second the percentile goes to coordination as a report.
    rig.run_for(&mut c, Duration::from_millis(1100));
    let reported = match reply(ask(&mut c, ROOT, Request::Overlays {})) {
        Reply::Overlays { overlays } => overlays[0].value,
        other => panic!("{other:?}"),
    };
    assert!(reported.is_some(), "the measured percentile was reported");
}

#[test]
fn the_thresholds_are_the_overlays_own() {
    let rig = Rig::new();
    let mut s = spec(true);
    s.overlays[0].slo.be = atoll_core::slo::BeConfig {
        steps: 4,
        grow_above: 0.5,
        cut_below: 0.2,
        ..Default::default()
    };
    let mut c = controller(&rig.sim, s, topo());
    c.start().unwrap();
    rig.epochs(&mut c, 1);
    assert_eq!(show(&mut c).be_steps, 4);
    // Slack 0.4: the default (grow above 0.3) would grow; 0.5 holds.
    report(&mut c, 600.0);
    rig.run_for(&mut c, Duration::from_millis(2100));
    assert_eq!(level(&mut c), Some(0));
    // Slack 0.6: a step a second, to the top at 4.
    report(&mut c, 400.0);
    rig.run_for(&mut c, Duration::from_secs(5));
    assert_eq!(level(&mut c), Some(4));
    assert_eq!(
        rig.batch().cpu_weight,
        Some(200),
        "4/4 is the configured share"
    );
    // Slack 0.15: the default (cut below 0.1) would hold; 0.2 cuts.
    report(&mut c, 850.0);
    rig.epochs(&mut c, 1);
    assert_eq!(level(&mut c), Some(2));
    assert!(
        why(&c)
            .iter()
            .any(|d| d.contains("best effort cut 4 -> 2/4: slack 0.15 < 0.2")),
        "{:#?}",
        why(&c)
    );
    // Changing the thresholds starts the units again from the floor.
    let mut again = spec(true);
    again.overlays[0].slo.be.steps = 6;
    c.reload(again).unwrap();
    rig.epochs(&mut c, 2);
    let s = show(&mut c);
    assert_eq!((s.be_level, s.be_steps), (Some(0), 6));
}

/// A TCP server that answers `pong` at once, or, while `hold` is set,
/// holds each connection unanswered until it is cleared.
struct Server {
    addr: String,
    hold: std::sync::Arc<std::sync::atomic::AtomicBool>,
    held: std::sync::Arc<std::sync::atomic::AtomicU64>,
    answered: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Server {
    fn start() -> Self {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;

        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let hold = Arc::new(AtomicBool::new(false));
        let held = Arc::new(AtomicU64::new(0));
        let answered = Arc::new(AtomicU64::new(0));
        let (h, n, a) = (Arc::clone(&hold), Arc::clone(&held), Arc::clone(&answered));
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let mut b = [0u8; 64];
                if s.read(&mut b).is_err() {
                    continue;
                }
                if h.load(Ordering::SeqCst) {
                    n.fetch_add(1, Ordering::SeqCst);
                    while h.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
                let _ = s.write_all(b"pong\n");
                a.fetch_add(1, Ordering::SeqCst);
            }
        });
        Self {
            addr,
            hold,
            held,
            answered,
        }
    }
}

#[test]
fn a_stale_window_is_unknown_latency_not_a_met_slo() {
    use std::sync::atomic::Ordering;

    let server = Server::start();
    let rig = Rig::new();
    let mut s = spec(true);
    // p99 within 5 s: a local answer is far inside it (slack near 1).
    s.overlays[0].property = Property::LatencyPercentile {
        percentile: 99.0,
        bound_us: 5_000_000,
    };
    s.overlays[0].slo.source = atoll_core::slo::LatencySource::Probe(atoll_core::slo::ProbeSpec {
        target: atoll_core::slo::ProbeTarget::parse(&format!("tcp://{}", server.addr), None)
            .unwrap(),
        every: Duration::from_millis(5),
        timeout: Duration::from_secs(10),
    });
    s.overlays[0].slo.stale_after = Some(Duration::from_secs(1));
    let mut c = controller(&rig.sim, s, topo());
    c.start().unwrap();
    // The probe runs on the real clock, the loop on the simulated one: each
    // epoch waits (bounded) for the server to answer a new probe, so the
    // window never goes a simulated second without a sample.
    let fresh_epochs = |c: &mut Controller, k: usize| {
        for _ in 0..k {
            let before = server.answered.load(Ordering::SeqCst);
            let mut tries = 0;
            while server.answered.load(Ordering::SeqCst) == before {
                tries += 1;
                assert!(tries < 6000, "the probe stopped: {:?}", show(c));
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(1));
            rig.epochs(c, 1);
        }
    };
    rig.epochs(&mut c, 1);
    fresh_epochs(&mut c, 80);
    let fresh = show(&mut c);
    assert!(!fresh.stale && fresh.measured_us.is_some(), "{fresh:?}");
    let grown = fresh.be_level.unwrap();
    assert!(grown >= 1, "slack near 1 grows the best effort: {fresh:?}");

    // The server stops answering: once the probe waits on it, no sample
    // comes. An application report of 4 s (within the SLO, no policy
    // action) marks what coordination holds.
    server.hold.store(true, Ordering::SeqCst);
    let mut tries = 0;
    while server.held.load(Ordering::SeqCst) == 0 {
        tries += 1;
        assert!(tries < 6000, "the probe never reached the held server");
        std::thread::sleep(Duration::from_millis(2));
    }
    rig.epochs(&mut c, 1);
    let total = show(&mut c).samples_total;
    // A second on, the window is stale (it may have grown a step before).
    rig.run_for(&mut c, Duration::from_millis(1100));
    let grown = level(&mut c).unwrap();
    assert!(show(&mut c).stale, "{:?}", show(&mut c));
    report(&mut c, 4_000_000.0);
    rig.run_for(&mut c, Duration::from_millis(2500));
    let stale = show(&mut c);
    assert_eq!(stale.samples_total, total, "no sample while held");
    assert!(stale.stale, "{stale:?}");
    assert!(
        stale.samples > 0,
        "the window still holds samples: {stale:?}"
    );
    assert_eq!((stale.measured_us, stale.slack), (None, None), "{stale:?}");
    assert!(stale.sample_age_ms.unwrap() > 1000, "{stale:?}");
    assert_eq!(stale.stale_after_ms, Some(1000));
    assert_eq!(
        stale.be_level,
        Some(grown),
        "unknown latency holds the best effort (slack near 1 would grow it)"
    );
    let value = |c: &mut Controller| match reply(ask(c, ROOT, Request::Overlays {})) {
        Reply::Overlays { overlays } => overlays[0].value,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        value(&mut c),
        Some(4_000_000.0),
        "a stale window's percentile is not reported"
    );

    // Answers again: fresh, measured, reported.
    server.hold.store(false, Ordering::SeqCst);
    fresh_epochs(&mut c, 40);
    let back = show(&mut c);
    assert!(!back.stale && back.measured_us.is_some(), "{back:?}");
    assert_ne!(value(&mut c), Some(4_000_000.0), "reported again");
}
