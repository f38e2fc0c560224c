//! The controller tests' rig: the two-island platform (`web` fair and
//! exclusive, `rt` realtime), a simulated machine with a state directory
//! that outlives controllers, and API round trips that also return the
//! loop's [`Flow`].

use std::sync::mpsc;
use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandSpec, PlatformSpec, RealtimePolicy, RtClass,
    SchedPolicy, UnitSpec, DEFAULT_EPOCH,
};
use atoll_daemon::command::{Caller, Command};
use atoll_daemon::controller::{Controller, Flow};
use atoll_proto::{Request, ResponseEnvelope};
use atoll_sim::SimPlatform;

use super::sim::{controller_saving, n, set, topo8};

/// The cgroup root of these tests.
pub const ROOT: &str = "atoll-t";
/// Root on the API socket.
pub const ROOT_CALLER: Caller = super::sim::ROOT;

/// Host CPU 0; `web` (1-3, fair, exclusive: unit `api` adopting nginx)
/// and `rt` (4-7, FIFO: unit `ctl` adopting ctl).
pub fn spec(adopt_all: bool) -> PlatformSpec {
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all,
        },
        islands: vec![
            IslandSpec {
                name: n("web"),
                cpus: set("1-3"),
                mems: set("0"),
                policy: SchedPolicy::Fair,
                arbitration: Default::default(),
                exclusive: true,
                access: Default::default(),
            },
            IslandSpec {
                name: n("rt"),
                cpus: set("4-7"),
                mems: set("1"),
                policy: SchedPolicy::Realtime(RealtimePolicy {
                    class: RtClass::Fifo,
                    priority_min: 10,
                    priority_max: 40,
                    runtime_us: 300_000,
                    period_us: 1_000_000,
                }),
                arbitration: Default::default(),
                exclusive: false,
                access: Default::default(),
            },
        ],
        units: vec![
            UnitSpec {
                name: n("api"),
                island: n("web"),
                entitlement: Entitlement {
                    cpus: Some(1.5),
                    cpu_cap: Some(2.0),
                    ..Default::default()
                },
                adopt: vec![AdoptRule::Comm("nginx".into())],
                rt_priority: None,
            },
            UnitSpec {
                name: n("ctl"),
                island: n("rt"),
                entitlement: Entitlement::default(),
                adopt: vec![AdoptRule::Comm("ctl".into())],
                rt_priority: Some(20),
            },
        ],
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

/// A simulated machine and a state directory that outlives controllers
/// (restarts read what the last one saved).
pub struct Rig {
    pub sim: SimPlatform,
    pub state: tempfile::TempDir,
}

impl Rig {
    pub fn new() -> Self {
        Self {
            sim: SimPlatform::new(topo8(), ROOT, ManualClock::new()),
            state: tempfile::tempdir().unwrap(),
        }
    }

    pub fn controller(&self, spec: PlatformSpec) -> Controller {
        controller_saving(
            &self.sim,
            spec,
            topo8(),
            Some(self.state.path().to_path_buf()),
        )
    }

    pub fn epochs(&self, c: &mut Controller, n: usize) {
        for _ in 0..n {
            self.sim.advance(DEFAULT_EPOCH);
            c.epoch();
        }
    }

    pub fn group_of(&self, pid: u32) -> Option<String> {
        let info = atoll_core::process::ProcessTable::info(&self.sim, pid).ok()?;
        info.cgroups.unified().map(str::to_string)
    }
}

/// One API request as `caller`, with the loop's answer to it.
pub fn ask(c: &mut Controller, caller: Caller, request: Request) -> (ResponseEnvelope, Flow) {
    let (tx, rx) = mpsc::channel();
    let flow = c.handle(Command::Api {
        caller,
        id: 9,
        request,
        reply: tx,
    });
    (rx.recv_timeout(Duration::from_secs(1)).unwrap(), flow)
}

/// An `adopt` request.
pub fn adopt(unit: &str, pid: u32, island: Option<&str>) -> Request {
    Request::Adopt {
        unit: unit.into(),
        pid,
        island: island.map(Into::into),
        network: None,
    }
}
