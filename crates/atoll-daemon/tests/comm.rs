//! Communication-aware scheduling in the control loop, on the simulated
//! backend with a scripted network monitor: which units are boosted, how
//! each mechanism carries a boost out and takes it back, the reservation
//! bound, the decisions and the status.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::comm::{CommSpec, Mechanism, NetError, NetMonitor, UnitNetSample};
use atoll_core::decision::Action;
use atoll_core::plan::GroupPath;
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandSpec, PlatformSpec, SchedPolicy, UnitSpec,
    DEFAULT_EPOCH,
};
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::{CpuSet, Name};
use atoll_daemon::controller::Controller;
use atoll_sim::SimPlatform;
use common::sim::{controller, n};

fn topo() -> Topology {
    Topology::synthetic(SyntheticShape {
        packages: 1,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: 4,
        threads_per_core: 1,
        memory_per_node: 4 << 30,
    })
}

fn unit(name: &str, cpus: Option<f64>) -> UnitSpec {
    UnitSpec {
        name: n(name),
        island: n("web"),
        entitlement: Entitlement {
            cpus,
            ..Entitlement::default()
        },
        adopt: vec![AdoptRule::Comm(name.into())],
        rt_priority: None,
    }
}

/// Host CPU 0; island web (1-3) with front, back and hog.
fn spec(comm: Option<CommSpec>, hog_cpus: Option<f64>) -> PlatformSpec {
    PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::parse("0").unwrap(),
            mems: Default::default(),
            adopt_all: false,
        },
        islands: vec![IslandSpec {
            name: n("web"),
            cpus: CpuSet::parse("1-3").unwrap(),
            mems: Default::default(),
            policy: SchedPolicy::Fair,
            arbitration: Default::default(),
            exclusive: false,
            access: Default::default(),
        }],
        units: vec![
            unit("front", None),
            unit("back", None),
            unit("hog", hog_cpus),
        ],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

fn comm(mechanism: Mechanism) -> CommSpec {
    CommSpec {
        recipient: true,
        mechanism,
        units: Some(vec![n("front"), n("back")]),
        max_boosted: 1,
        ..CommSpec::default()
    }
}

/// The pids of each unit, as the monitor was asked.
type Asked = BTreeMap<Name, Vec<u32>>;

/// A network monitor that reports what the test scripts.
#[derive(Clone, Default)]
struct Scripted {
    samples: Arc<Mutex<BTreeMap<Name, UnitNetSample>>>,
    asked: Arc<Mutex<Vec<Asked>>>,
    fail: Arc<Mutex<bool>>,
}

impl Scripted {
    fn set(&self, unit: &str, recv_queued: u64, bytes_received: u64) {
        self.samples.lock().unwrap().insert(
            n(unit),
            UnitNetSample {
                recv_queued,
                bytes_received,
                sockets: 1,
                ..Default::default()
            },
        );
    }
}

impl NetMonitor for Scripted {
    fn sample(
        &mut self,
        units: &BTreeMap<Name, Vec<u32>>,
    ) -> Result<BTreeMap<Name, UnitNetSample>, NetError> {
        self.asked.lock().unwrap().push(units.clone());
        if *self.fail.lock().unwrap() {
            return Err(NetError::Io {
                what: "sock_diag".into(),
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            });
        }
        let s = self.samples.lock().unwrap();
        Ok(units
            .keys()
            .map(|u| (u.clone(), s.get(u).copied().unwrap_or_default()))
            .collect())
    }
}

struct Rig {
    sim: SimPlatform,
    net: Scripted,
}

impl Rig {
    fn new() -> Self {
        Self {
            sim: SimPlatform::new(topo(), "atoll-comm", ManualClock::new()),
            net: Scripted::default(),
        }
    }

    fn start(&self, spec: PlatformSpec) -> Controller {
        let mut c = controller(&self.sim, spec, topo());
        c.set_net_monitor(Box::new(self.net.clone()), "scripted");
        c.start().unwrap();
        c
    }

    fn epochs(&self, c: &mut Controller, k: usize) {
        for _ in 0..k {
            self.sim.advance(DEFAULT_EPOCH);
            c.epoch();
        }
    }

    /// A busy process for unit `hog`: the island is contended, so its
    /// sockets are read (an idle island's are not).
    fn busy_hog(&self) -> u32 {
        let hog = self.sim.spawn("hog", 0, None);
        self.sim.set_busy(hog, true).unwrap();
        hog
    }

    fn settings(&self, unit: &str) -> atoll_core::plan::GroupSettings {
        self.sim
            .settings(&GroupPath::from_relative(&format!("web/{unit}")))
            .unwrap()
    }
}

fn boosts(c: &Controller, unit: &str) -> Vec<bool> {
    c.decisions()
        .query(Some(unit), 100)
        .into_iter()
        .filter_map(|d| match d.action {
            Action::Boost { start, .. } => Some(start),
            _ => None,
        })
        .collect()
}

#[test]
fn a_recipient_gets_the_boost_slice_and_loses_it_when_quiet() {
    let rig = Rig::new();
    let front = rig.sim.spawn("front", 0, None);
    let worker = rig.sim.spawn_thread(front).unwrap();
    let back = rig.sim.spawn("back", 0, None);
    rig.busy_hog();
    let mut c = rig.start(spec(Some(comm(Mechanism::Slice)), None));
    rig.epochs(&mut c, 2);
    assert_eq!(rig.sim.slice(front), None, "nothing received yet");
    // The monitor is asked about the watched units only, with their pids.
    let asked = rig.net.asked.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        asked.keys().cloned().collect::<Vec<_>>(),
        vec![n("back"), n("front")]
    );
    assert_eq!(asked[&n("front")], vec![front]);

    rig.net.set("front", 4096, 0);
    rig.epochs(&mut c, 1);
    let slice = Some(Duration::from_micros(100));
    assert_eq!(rig.sim.slice(front), slice);
    assert_eq!(rig.sim.slice(worker), slice);
    assert_eq!(rig.sim.slice(back), None, "max_boosted = 1, back is quiet");
    // A thread started while the boost lasts gets it at the next epoch.
    let late = rig.sim.spawn_thread(front).unwrap();
    rig.epochs(&mut c, 1);
    assert_eq!(rig.sim.slice(late), slice);

    let status = c.status();
    let cs = status.comm.expect("comm status");
    assert_eq!(cs.mechanism, "slice");
    assert_eq!(cs.source, "scripted");
    assert_eq!(cs.boosted, vec!["front".to_string()]);
    let uf = status.units.iter().find(|u| u.name == "front").unwrap();
    let uc = uf.comm.clone().expect("front is watched");
    assert!(uc.boosted);
    assert_eq!(uc.boosts, 1);
    assert_eq!(uc.recipient, 1);
    assert_eq!(uc.recv_queued, 4096);
    let hog = status.units.iter().find(|u| u.name == "hog").unwrap();
    assert!(hog.comm.is_none(), "hog is not watched");

    // Read and quiet: the boost ends and the default slice comes back.
    rig.net.set("front", 0, 4096);
    rig.epochs(&mut c, 1);
    rig.epochs(&mut c, 1);
    assert_eq!(rig.sim.slice(front), None);
    assert_eq!(rig.sim.slice(late), None);
    assert_eq!(boosts(&c, "front"), vec![true, false]);
    let why = c.decisions().query(Some("front"), 100);
    let start = why
        .iter()
        .find(|d| matches!(d.action, Action::Boost { start: true, .. }))
        .unwrap();
    let text = start.to_string();
    assert!(text.contains("4096 bytes wait"), "{text}");
    assert!(text.contains("on 2 threads"), "{text}");
}

#[test]
fn the_weight_mechanism_multiplies_and_survives_the_reconcile() {
    let rig = Rig::new();
    rig.sim.spawn("front", 0, None);
    rig.busy_hog();
    let mut c = rig.start(spec(Some(comm(Mechanism::Weight)), None));
    rig.epochs(&mut c, 1);
    let base = rig.settings("front").cpu_weight.unwrap_or(100);
    rig.net.set("front", 1000, 0);
    rig.epochs(&mut c, 1);
    assert_eq!(rig.settings("front").cpu_weight, Some(base * 8));
    // Keep it busy receiving past a periodic reconcile (1 s).
    for i in 0..40 {
        rig.net.set("front", 1000, 1000 * (i + 1));
        rig.epochs(&mut c, 1);
    }
    assert_eq!(rig.settings("front").cpu_weight, Some(base * 8));
    rig.net.set("front", 0, 41_000);
    rig.epochs(&mut c, 2);
    assert_eq!(rig.settings("front").cpu_weight.unwrap_or(100), base);
}

#[test]
fn idle_others_idles_the_rest_of_the_island_only_while_a_boost_lasts() {
    let rig = Rig::new();
    rig.sim.spawn("front", 0, None);
    rig.busy_hog();
    let mut c = rig.start(spec(Some(comm(Mechanism::IdleOthers)), None));
    rig.epochs(&mut c, 1);
    assert!(!rig.settings("hog").cpu_idle);
    rig.net.set("front", 1000, 0);
    rig.epochs(&mut c, 1);
    assert!(
        rig.settings("hog").cpu_idle,
        "hog idle while front is boosted"
    );
    assert!(rig.settings("back").cpu_idle, "back is not boosted either");
    assert!(!rig.settings("front").cpu_idle);
    rig.net.set("front", 0, 1000);
    rig.epochs(&mut c, 2);
    assert!(!rig.settings("hog").cpu_idle);
    assert!(!rig.settings("back").cpu_idle);
}

#[test]
fn a_unit_that_used_its_slice_is_not_boosted_until_the_next_period() {
    let rig = Rig::new();
    let front = rig.sim.spawn("front", 0, None);
    rig.sim.set_busy(front, true).unwrap();
    // hog holds 2.9 of the 3 CPUs: front and back share 0.1, a slice of
    // 5 ms per 100 ms period; busy, front uses 30 ms per epoch.
    let mut c = rig.start(spec(Some(comm(Mechanism::Slice)), Some(2.9)));
    rig.epochs(&mut c, 1);
    rig.net.set("front", 1000, 0);
    rig.epochs(&mut c, 6);
    let status = c.status();
    let uc = status
        .units
        .iter()
        .find(|u| u.name == "front")
        .and_then(|u| u.comm.clone())
        .unwrap();
    assert!(uc.over_reservation > 0, "{uc:?}");
    assert!((uc.reservation_cpus - 0.05).abs() < 1e-9, "{uc:?}");
    // Boosted at most one epoch per period: 180 ms ran, two periods.
    assert!(uc.boosted_us <= 2 * 30_000 + 30_000, "{uc:?}");
}

#[test]
fn without_a_comm_section_or_with_a_failing_monitor_nothing_is_boosted() {
    let rig = Rig::new();
    let front = rig.sim.spawn("front", 0, None);
    rig.net.set("front", 1000, 0);
    let mut c = rig.start(spec(None, None));
    rig.epochs(&mut c, 3);
    assert!(rig.net.asked.lock().unwrap().is_empty());
    assert!(c.status().comm.is_none());
    assert_eq!(rig.sim.slice(front), None);

    let rig = Rig::new();
    let front = rig.sim.spawn("front", 0, None);
    rig.busy_hog();
    rig.net.set("front", 1000, 0);
    *rig.net.fail.lock().unwrap() = true;
    let mut c = rig.start(spec(Some(comm(Mechanism::Slice)), None));
    rig.epochs(&mut c, 3);
    assert_eq!(rig.sim.slice(front), None);
    assert_eq!(c.status().comm.unwrap().sample_errors, 3);
}

#[test]
fn teardown_gives_the_default_slice_back() {
    let rig = Rig::new();
    let front = rig.sim.spawn("front", 0, None);
    let mut c = rig.start(spec(Some(comm(Mechanism::Slice)), None));
    rig.net.set("front", 1000, 0);
    rig.epochs(&mut c, 2);
    assert_eq!(rig.sim.slice(front), Some(Duration::from_micros(100)));
    c.teardown().unwrap();
    assert_eq!(rig.sim.slice(front), None);
}

#[test]
fn an_idle_island_is_not_read_until_it_is_busy_again() {
    let rig = Rig::new();
    rig.sim.spawn("front", 0, None);
    let mut c = rig.start(spec(Some(comm(Mechanism::Weight)), None));
    // The first epoch has no load yet: the island is read once.
    rig.epochs(&mut c, 5);
    let asked = rig.net.asked.lock().unwrap().len();
    assert_eq!(asked, 1, "only before the island was known to be idle");
    // Busy again: read every epoch.
    let hog = rig.busy_hog();
    rig.epochs(&mut c, 3);
    assert!(rig.net.asked.lock().unwrap().len() >= asked + 2);
    rig.sim.set_busy(hog, false).unwrap();
    rig.epochs(&mut c, 5);
    let quiet = rig.net.asked.lock().unwrap().len();
    rig.epochs(&mut c, 5);
    assert_eq!(
        rig.net.asked.lock().unwrap().len(),
        quiet,
        "idle again: not read"
    );
}
