//! What the simulator-driven tests share: callers, names, the 8-CPU
//! machine, a controller started on a `SimPlatform`, and API round trips.

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use atoll_core::process::CgroupMembership;
use atoll_core::spec::PlatformSpec;
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
