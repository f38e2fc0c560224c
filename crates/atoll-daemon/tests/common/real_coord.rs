//! What the real-kernel coordination tests share: two fair islands over
//! the machine's CPUs (`a` holds the first online CPU, `b` the rest) with
//! units `u1`, `u2` in `a` and `u3` in `b`, and coordination messages sent
//! as root.

use std::path::Path;
use std::time::Duration;

use atoll_core::coord::Message;
use atoll_core::spec::{
    Entitlement, HostSpec, IslandSpec, OverlayConfig, PlatformSpec, SchedPolicy, UnitSpec,
    DEFAULT_EPOCH,
};
use atoll_core::topology::Topology;
use atoll_core::CpuSet;
use atoll_daemon::command::Command;
use atoll_daemon::controller::Controller;
use atoll_proto::{Reply, Request};

use super::sim::{n, ROOT};

/// A kernel file's contents, trimmed.
pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
        .trim()
        .to_string()
}

/// Sends `msg` as root; whether it was acknowledged (the answer's text is
/// printed).
pub fn coordinate(c: &mut Controller, msg: Message) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    c.handle(Command::Api {
        caller: ROOT,
        id: 1,
        request: Request::Coordinate {
            from: None,
            message: msg,
        },
        reply: tx,
    });
    match rx.recv_timeout(Duration::from_secs(5)).unwrap().ok {
        Some(Reply::Coordinated { reply, text }) => {
            println!("{text}");
            reply.is_ack()
        }
        other => panic!("{other:?}"),
    }
}

/// The CPUs of islands `a` (the first online CPU) and `b` (the rest).
pub fn split(topo: &Topology) -> (CpuSet, CpuSet) {
    let online = topo.online();
    let first = online.first().unwrap();
    let a = CpuSet::range(first, first);
    let b = online.difference(&a);
    (a, b)
}

/// The platform: no host partition, islands `a` and `b` of [`split`],
/// units `u1`, `u2` (in `a`) and `u3` (in `b`), and `overlays`.
pub fn two_islands(topo: &Topology, overlays: Vec<OverlayConfig>) -> PlatformSpec {
    let (a_cpus, b_cpus) = split(topo);
    let mems = topo.all_nodes();
    let island = |name: &str, cpus: &CpuSet| IslandSpec {
        name: n(name),
        cpus: cpus.clone(),
        mems: mems.clone(),
        policy: SchedPolicy::Fair,
        arbitration: Default::default(),
        exclusive: false,
        access: Default::default(),
    };
    let unit = |name: &str, island: &str| UnitSpec {
        name: n(name),
        island: n(island),
        entitlement: Entitlement::default(),
        adopt: vec![],
        rt_priority: None,
    };
    PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::new(),
            mems: mems.clone(),
            adopt_all: false,
        },
        islands: vec![island("a", &a_cpus), island("b", &b_cpus)],
        units: vec![unit("u1", "a"), unit("u2", "a"), unit("u3", "b")],
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
