//! Helpers both test binaries of the simulator use (`tests/sim`, the
//! platform; `tests/engine`, the workload engine).

#![allow(dead_code)]

use atoll_core::clock::ManualClock;
use atoll_core::plan::GroupPath;
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::CpuSet;
use atoll_sim::SimPlatform;

/// A machine with `n` single-threaded cores on one node.
pub fn machine(n: u32) -> SimPlatform {
    let topo = Topology::synthetic(SyntheticShape {
        packages: 1,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: n,
        threads_per_core: 1,
        memory_per_node: 8 << 30,
    });
    SimPlatform::new(topo, "atoll", ManualClock::new())
}

/// A group path from its relative text.
pub fn g(s: &str) -> GroupPath {
    GroupPath::from_relative(s)
}

/// A CPU set from its list text.
pub fn cpus(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}
