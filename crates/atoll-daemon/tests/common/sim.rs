//! What the simulator-driven tests share: callers, names, the 8-CPU
//! machine, a controller started on a `SimPlatform`, and API round trips.

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use atoll_core::process::CgroupMembership;
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandSpec, OverlayConfig, PlatformSpec, SchedPolicy,
    UnitSpec, DEFAULT_EPOCH,
};
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::{CpuSet, Name};
use atoll_daemon::command::{Caller, Command};
use atoll_daemon::controller::{Controller, Env, Options};
use atoll_proto::{Reply, Request, ResponseEnvelope};
use atoll_sim::SimPlatform;

/// Root on the API socket.
pub const ROOT: Caller = Caller {
    uid: 0,
    gid: 0,
    pid: 1,
};

/// An ordinary user on the API socket.
pub fn user(uid: u32) -> Caller {
    Caller {
        uid,
        gid: uid,
        pid: 2,
    }
}

/// A name that must be valid.
pub fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

/// A CPU list that must be valid.
pub fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

/// Two packages of four cores, one NUMA node each.
pub fn topo8() -> Topology {
    Topology::synthetic(SyntheticShape {
        packages: 2,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: 4,
        threads_per_core: 1,
        memory_per_node: 4 << 30,
    })
}

/// A controller on `sim` (backend, processes, tasks, clock), not started.
pub fn controller(sim: &SimPlatform, spec: PlatformSpec, topo: Topology) -> Controller {
    controller_saving(sim, spec, topo, None)
}

/// [`controller`] keeping its state file in `state_dir`, if any.
pub fn controller_saving(
    sim: &SimPlatform,
    spec: PlatformSpec,
    topo: Topology,
    state_dir: Option<PathBuf>,
) -> Controller {
    let env = Env {
        backend: Box::new(sim.clone()),
        procs: Box::new(sim.clone()),
        tasks: Box::new(sim.clone()),
        system: Box::new(sim.clone()),
        clock: Arc::new(sim.clock()),
    };
    let opts = Options {
        state_dir,
        self_origin: CgroupMembership::parse("0::/daemon.slice\n").unwrap(),
        self_pid: 1,
        topology: topo,
    };
    Controller::new(env, spec, opts)
}

/// Moves the simulated clock one epoch at a time, running the loop.
pub fn epochs(sim: &SimPlatform, c: &mut Controller, k: usize) {
    for _ in 0..k {
        sim.advance(c.epoch_len());
        c.epoch();
    }
}

/// One API request as `caller`.
pub fn ask(c: &mut Controller, caller: Caller, request: Request) -> ResponseEnvelope {
    let (tx, rx) = mpsc::channel();
    c.handle(Command::Api {
        caller,
        id: 7,
        request,
        reply: tx,
    });
    rx.recv_timeout(Duration::from_secs(1)).unwrap()
}

/// The reply of a request that must succeed.
pub fn reply(r: ResponseEnvelope) -> Reply {
    match (r.ok, r.err) {
        (Some(reply), _) => reply,
        (None, e) => panic!("expected a reply, got {e:?}"),
    }
}

/// A unit `name` in `island` with the default entitlement, adopting
/// processes whose command is its name.
pub fn unit(name: &str, island: &str) -> UnitSpec {
    UnitSpec {
        name: n(name),
        island: n(island),
        entitlement: Entitlement::default(),
        adopt: vec![AdoptRule::Comm(name.into())],
        rt_priority: None,
    }
}

/// Host CPU 0; exclusive fair islands `web` (CPUs 1-3, node 0) and `batch`
/// (4-7, node 1) with `units` ([`unit`], as name and island) and
/// `overlays`.
pub fn web_and_batch(units: &[(&str, &str)], overlays: Vec<OverlayConfig>) -> PlatformSpec {
    let island = |name: &str, cpus: &str, mems: &str| IslandSpec {
        name: n(name),
        cpus: set(cpus),
        mems: set(mems),
        policy: SchedPolicy::Fair,
        arbitration: Default::default(),
        exclusive: true,
        access: Default::default(),
    };
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![island("web", "1-3", "0"), island("batch", "4-7", "1")],
        units: units.iter().map(|(u, i)| unit(u, i)).collect(),
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays,
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

/// Island `pool` (fair, CPUs 0-3, no host CPUs) with units `light` and
/// `heavy` (2 CPUs each, adopting processes by that name) under isolation
/// `mode`.
pub fn pool_of_two(mode: atoll_core::spec::IsolationMode) -> PlatformSpec {
    let unit = |name: &str| UnitSpec {
        name: n(name),
        island: n("pool"),
        entitlement: Entitlement {
            cpus: Some(2.0),
            ..Default::default()
        },
        adopt: vec![AdoptRule::Comm(name.into())],
        rt_priority: None,
    };
    PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::new(),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![IslandSpec {
            name: n("pool"),
            cpus: set("0-3"),
            mems: set("0"),
            policy: SchedPolicy::Fair,
            arbitration: Default::default(),
            exclusive: false,
            access: Default::default(),
        }],
        units: vec![unit("light"), unit("heavy")],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: atoll_core::spec::IsolationSpec {
            mode,
            ..Default::default()
        },
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}
