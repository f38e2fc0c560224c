//! Adoption driven by the kernel's process events: after the first scan,
//! `/proc` is not listed again unless events were lost; new, `exec`ed and
//! re-credentialed processes are matched as their events arrive, exited
//! ones forgotten. On the simulated backend, with a scripted event source.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use atoll_core::clock::ManualClock;
use atoll_core::events::ProcEvent;
use atoll_core::process::{CgroupMembership, ProcessError, ProcessInfo, ProcessTable};
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandSpec, PlatformSpec, SchedPolicy, UnitSpec,
    DEFAULT_EPOCH,
};
use atoll_daemon::controller::{Controller, Env, Options};
use atoll_procfs::connector::FakeEvents;
use atoll_sim::SimPlatform;
use common::sim::{n, set, topo8};

/// The simulator's process table, counting full listings.
struct Counting {
    sim: SimPlatform,
    listings: Arc<AtomicU64>,
}

impl ProcessTable for Counting {
    fn pids(&self) -> Result<Vec<u32>, ProcessError> {
        self.listings.fetch_add(1, Ordering::SeqCst);
        self.sim.pids()
    }
    fn info(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        self.sim.info(pid)
    }
    fn threads(&self, pid: u32) -> Result<Vec<u32>, ProcessError> {
        self.sim.threads(pid)
    }
    fn comm(&self, pid: u32) -> Result<String, ProcessError> {
        self.sim.comm(pid)
    }
}

fn spec() -> PlatformSpec {
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
            exclusive: false,
            access: Default::default(),
        }],
        units: vec![UnitSpec {
            name: n("api"),
            island: n("web"),
            entitlement: Entitlement::default(),
            adopt: vec![AdoptRule::Comm("nginx".into())],
            rt_priority: None,
        }],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

fn group_of(sim: &SimPlatform, pid: u32) -> String {
    sim.info(pid)
        .ok()
        .and_then(|i| i.cgroups.unified().map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn events_drive_adoption_and_lost_events_bring_one_rescan() {
    let sim = SimPlatform::new(topo8(), "atoll-ev", ManualClock::new());
    let listings = Arc::new(AtomicU64::new(0));
    let env = Env {
        backend: Box::new(sim.clone()),
        procs: Box::new(Counting {
            sim: sim.clone(),
            listings: listings.clone(),
        }),
        tasks: Box::new(sim.clone()),
        system: Box::new(sim.clone()),
        clock: Arc::new(sim.clock()),
    };
    let opts = Options {
        state_dir: None,
        self_origin: CgroupMembership::parse("0::/daemon.slice\n").unwrap(),
        self_pid: 1,
        topology: topo8(),
    };
    let early = sim.spawn("nginx", 33, None);
    let (events, kernel) = FakeEvents::new();
    let mut c = Controller::new(env, spec(), opts);
    c.set_process_events(Box::new(events));
    c.start().unwrap();
    let epochs = |c: &mut Controller, k: usize| {
        for _ in 0..k {
            sim.advance(DEFAULT_EPOCH);
            c.epoch();
        }
    };
    // The first scan finds what ran before the daemon.
    assert_eq!(group_of(&sim, early), "/atoll-ev/web/api");
    assert_eq!(listings.load(Ordering::SeqCst), 1);

    // A fork, then an exec into the rule's program much later: matched when
    // its exec is reported, with no listing of /proc.
    let shell = sim.spawn("sh", 0, None);
    kernel.push(ProcEvent::Fork {
        parent: 1,
        child: shell,
    });
    epochs(&mut c, 40);
    assert_eq!(group_of(&sim, shell), "/user.slice");
    sim.exec(shell, "nginx", None).unwrap();
    kernel.push(ProcEvent::Exec { pid: shell });
    epochs(&mut c, 1);
    assert_eq!(group_of(&sim, shell), "/atoll-ev/web/api");
    assert_eq!(listings.load(Ordering::SeqCst), 1, "no listing of /proc");
    assert!(c.registry().managed(shell).is_some());

    // An exit is forgotten at once.
    sim.exit(shell).unwrap();
    kernel.push(ProcEvent::Exit { pid: shell });
    epochs(&mut c, 1);
    assert!(c.registry().managed(shell).is_none());

    // Lost events: one listing catches up with what was missed.
    let missed = sim.spawn("nginx", 33, None);
    kernel.overflow();
    epochs(&mut c, 1);
    assert_eq!(group_of(&sim, missed), "/atoll-ev/web/api");
    assert_eq!(listings.load(Ordering::SeqCst), 2);
    epochs(&mut c, 40);
    assert_eq!(listings.load(Ordering::SeqCst), 2);

    let d = c.status().discovery.unwrap();
    assert_eq!(d.source, "fake");
    assert_eq!(d.rescans, 2, "{d:?}");
    assert!(d.events >= 3, "{d:?}");

    // A source that fails: back to scanning, and the status says why.
    kernel.fail(std::io::ErrorKind::BrokenPipe);
    epochs(&mut c, 1);
    let d = c.status().discovery.unwrap();
    assert_eq!(d.source, "scan");
    assert!(d.reason.unwrap().contains("failed"));
    let before = listings.load(Ordering::SeqCst);
    let late = sim.spawn("nginx", 33, None);
    epochs(&mut c, 2);
    assert_eq!(group_of(&sim, late), "/atoll-ev/web/api");
    assert!(listings.load(Ordering::SeqCst) > before);
}
