//! `react_pressure` with pressure triggers, on the simulated backend with a
//! fake watch: a quiet unit waits on a trigger and its pressure is not
//! read; it is read (and the overlay reacts) only once the trigger fired;
//! it waits again once quiet; every failure of the triggers falls back to
//! reading every unit every epoch, as the status says.

mod common;

use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::coord::{Message, Property};
use atoll_core::plan::GroupPath;
use atoll_core::pressure::StallTrigger;
use atoll_core::spec::{OverlayConfig, PlatformSpec, ReactPolicy, DEFAULT_EPOCH};
use atoll_daemon::controller::Controller;
use atoll_daemon::coord::pressure::{AVERAGES, RETRY, TRIGGERS, WINDOW};
use atoll_procfs::psi_watch::{FakePressureHandle, FakePressureWatch};
use atoll_proto::coord::PressureSource;
use atoll_proto::{Reply, Request};
use atoll_sim::SimPlatform;
use common::sim::{ask, controller, n, reply, topo8 as topo, web_and_batch, ROOT};

/// `react_pressure` of overlay shop.
const THRESHOLD: f64 = 20.0;

/// Host CPU 0; islands web (1-3: api, front) and batch (4-7: db); overlay
/// shop over api and db, reacting to CPU pressure above [`THRESHOLD`].
fn spec() -> PlatformSpec {
    web_and_batch(
        &[("api", "web"), ("front", "web"), ("db", "batch")],
        vec![OverlayConfig {
            name: n("shop"),
            priority: 5,
            units: vec![n("api"), n("db")],
            property: Property::LatencyPercentile {
                percentile: 99.0,
                bound_us: 1000,
            },
            slo: Default::default(),
            cap_timing: Default::default(),
            react: ReactPolicy {
                pressure: Some(THRESHOLD),
                ..Default::default()
            },
        }],
    )
}

fn api() -> GroupPath {
    GroupPath::from_relative("web/api")
}

fn db() -> GroupPath {
    GroupPath::from_relative("batch/db")
}

struct Rig {
    sim: SimPlatform,
    psi: FakePressureHandle,
    c: Controller,
}

impl Rig {
    /// A started controller whose units' groups name pressure files
    /// (`files`), with a fake watch set up as `prepare` says before the
    /// start.
    fn new(files: bool, prepare: impl FnOnce(&FakePressureHandle)) -> Self {
        let sim = SimPlatform::new(topo(), "atoll-p", ManualClock::new());
        sim.set_pressure_files(files);
        let (watch, psi) = FakePressureWatch::new(Duration::from_millis(100));
        prepare(&psi);
        let mut c = controller(&sim, spec(), topo());
        c.set_pressure_watch(Box::new(watch));
        c.start().unwrap();
        Self { sim, psi, c }
    }

    fn epochs(&mut self, k: usize) {
        for _ in 0..k {
            self.sim.advance(DEFAULT_EPOCH);
            self.c.epoch();
        }
    }

    /// Four busy processes adopted into api (on its three CPUs).
    fn busy_api(&self) -> Vec<u32> {
        (0..4)
            .map(|_| {
                let p = self.sim.spawn("api", 0, None);
                self.sim.set_busy(p, true).unwrap();
                p
            })
            .collect()
    }

    fn weight(&self, path: &str) -> Option<u32> {
        self.sim
            .settings(&GroupPath::from_relative(path))
            .and_then(|s| s.cpu_weight)
    }

    fn tuned_up(&self, unit: &str) -> bool {
        let needle = format!("tune CPU time up (CPU pressure of {unit}");
        self.c
            .decisions()
            .query(Some(unit), 1000)
            .iter()
            .any(|d| d.to_string().contains(&needle))
    }

    fn pressure(&mut self) -> PressureSource {
        match reply(ask(&mut self.c, ROOT, Request::Status {})) {
            Reply::Status(s) => s.pressure.expect("a pressure source"),
            other => panic!("expected Status, got {other:?}"),
        }
    }
}

/// Epochs in `d` of simulated time (rounded up).
fn epochs_in(d: Duration) -> usize {
    d.as_micros().div_ceil(DEFAULT_EPOCH.as_micros()) as usize
}

#[test]
fn a_pressured_unit_is_read_and_tuned_only_after_its_trigger_fires() {
    let mut r = Rig::new(true, |_| {});
    let busy = r.busy_api();
    r.epochs(2);
    let armed = r.psi.armed();
    let want = StallTrigger::percent_of(THRESHOLD, WINDOW);
    assert_eq!(
        armed.get(&api()),
        Some(&("/sim/atoll-p/web/api/cpu.pressure".into(), want)),
        "{armed:?}"
    );
    assert!(r.psi.is_armed(&db()), "{armed:?}");
    assert!(!r.psi.is_armed(&GroupPath::from_relative("web/front")));

    // Busy, but the trigger has not fired: never read, never tuned.
    let reads = r.sim.pressure_reads(&api());
    r.epochs(30);
    assert_eq!(r.sim.pressure_reads(&api()), reads, "read while armed");
    assert_eq!(r.weight("web/api"), None);
    assert!(!r.tuned_up("api"));
    let s = r.pressure();
    assert_eq!(
        (s.source.as_str(), s.armed, s.read, s.fired),
        (TRIGGERS, 2, 0, 0)
    );
    assert_eq!(s.reason, None);

    // It fires: read from now on, and tuned up.
    r.psi.fire(&api());
    r.epochs(20);
    assert!(r.sim.pressure_reads(&api()) > reads + 10);
    assert!(r.tuned_up("api"), "no reaction after the trigger fired");
    assert!(r.weight("web/api").is_some_and(|w| w > 150));
    assert!(!r.psi.is_armed(&api()), "tuned up: read, not armed");
    assert!(r.psi.is_armed(&db()), "db never fired");
    let s = r.pressure();
    assert_eq!(
        (s.source.as_str(), s.armed, s.read, s.fired),
        (TRIGGERS, 1, 1, 1)
    );

    // Quiet again: tuned back down, then armed again after a quiet window.
    for p in busy {
        r.sim.set_busy(p, false).unwrap();
    }
    r.epochs(60);
    assert_eq!(r.weight("web/api"), None, "given back");
    r.epochs(epochs_in(WINDOW) + 2);
    assert!(r.psi.is_armed(&api()), "not armed again once quiet");
    assert_eq!(r.psi.arms(), 3, "api twice, db once");
    let reads = r.sim.pressure_reads(&api());
    r.epochs(10);
    assert_eq!(r.sim.pressure_reads(&api()), reads, "read while armed");
}

#[test]
fn without_pressure_files_every_unit_is_read_every_epoch() {
    let mut r = Rig::new(false, |_| {});
    r.busy_api();
    r.epochs(20);
    assert_eq!(r.psi.arms(), 0);
    assert!(r.tuned_up("api"), "pressure is read without a trigger");
    let s = r.pressure();
    assert_eq!((s.source.as_str(), s.armed, s.read), (AVERAGES, 0, 2));
    let why = s.reason.unwrap_or_default();
    assert!(why.contains("cpu.pressure"), "{why}");
}

#[test]
fn triggers_the_kernel_refuses_fall_back_to_reading_every_epoch() {
    let mut r = Rig::new(true, |h| h.refuse_all("window too short"));
    r.busy_api();
    r.epochs(20);
    assert!(r.psi.armed().is_empty());
    assert!(r.tuned_up("api"), "pressure is read without a trigger");
    let reads = r.sim.pressure_reads(&db());
    r.epochs(5);
    assert_eq!(
        r.sim.pressure_reads(&db()),
        reads + 5,
        "db read every epoch"
    );
    let s = r.pressure();
    assert_eq!((s.source.as_str(), s.armed, s.read), (AVERAGES, 0, 2));
    let why = s.reason.unwrap_or_default();
    assert!(why.contains("window too short"), "{why}");
}

#[test]
fn a_group_without_a_trigger_is_read_while_the_others_wait() {
    let mut r = Rig::new(true, |h| h.refuse_group(&api(), "too many open files"));
    let busy = r.busy_api();
    r.epochs(20);
    assert!(r.tuned_up("api"), "api is read without a trigger");
    assert!(r.psi.is_armed(&db()));
    let s = r.pressure();
    assert_eq!((s.source.as_str(), s.armed, s.read), (TRIGGERS, 1, 1));
    let why = s.reason.unwrap_or_default();
    assert!(
        why.contains("1 of 2") && why.contains("too many open files"),
        "{why}"
    );

    // Once arming works again and api is quiet, it is tried again.
    r.psi.allow(&api());
    for p in busy {
        r.sim.set_busy(p, false).unwrap();
    }
    r.epochs(epochs_in(RETRY) + 2);
    assert_eq!(r.weight("web/api"), None, "given back");
    assert!(r.psi.is_armed(&api()), "not tried again");
    assert_eq!(r.pressure().reason, None);
}

#[test]
fn a_failed_poll_turns_triggers_off() {
    let mut r = Rig::new(true, |_| {});
    r.epochs(2);
    assert_eq!(r.psi.armed().len(), 2);
    r.psi.fail_poll("EBADF");
    r.busy_api();
    r.epochs(20);
    assert!(r.tuned_up("api"), "pressure is read without a trigger");
    let s = r.pressure();
    assert_eq!((s.source.as_str(), s.armed), (AVERAGES, 0));
    assert!(s.reason.unwrap_or_default().contains("EBADF"));
}

#[test]
fn a_removed_group_starts_over_and_a_removed_overlay_disarms() {
    let mut r = Rig::new(true, |_| {});
    r.epochs(2);
    assert_eq!(r.psi.arms(), 2);
    // The watch saw api's file go: armed again at the next epoch.
    r.psi.remove(&api());
    r.epochs(1);
    assert!(r.psi.is_armed(&api()));
    assert_eq!(r.psi.arms(), 3);
    assert_eq!(r.pressure().fired, 0, "gone is not fired");

    let (msg, _) = match reply(ask(
        &mut r.c,
        ROOT,
        Request::Coordinate {
            from: None,
            message: Message::Deregister { overlay: n("shop") },
        },
    )) {
        Reply::Coordinated { reply, text } => (reply, text),
        other => panic!("expected Coordinated, got {other:?}"),
    };
    assert!(msg.is_ack());
    r.epochs(1);
    assert!(r.psi.armed().is_empty(), "{:?}", r.psi.armed());
    assert_eq!(r.psi.disarms(), 2);
    let s = r.pressure();
    assert_eq!((s.armed, s.read), (0, 0));
}

#[test]
fn a_reload_keeps_the_triggers_of_units_still_watched() {
    let mut r = Rig::new(true, |_| {});
    r.epochs(2);
    assert_eq!(r.psi.armed().len(), 2);
    let mut next = spec();
    next.overlays[0].units = vec![n("api")];
    r.c.reload(next).expect("reload");
    r.epochs(2);
    let s = r.pressure();
    assert_eq!((s.source.as_str(), s.armed, s.read), (TRIGGERS, 1, 0));
    assert!(r.psi.is_armed(&api()), "api is still watched");
    assert!(!r.psi.is_armed(&db()), "db is no longer watched");
    assert_eq!((r.psi.arms(), r.psi.disarms()), (2, 1));
}
