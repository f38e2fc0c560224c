//! The simulator's rules and CPU model, through its public API.

mod cpu;
mod groups;
mod procs;

use std::time::Duration;

use atoll_core::backend::{Actuator, BackendError};
use atoll_core::clock::ManualClock;
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings, Partition};
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

pub fn g(s: &str) -> GroupPath {
    GroupPath::from_relative(s)
}

pub fn cpus(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

pub fn with_cpus(s: &str) -> GroupSettings {
    GroupSettings {
        cpus: Some(cpus(s)),
        ..Default::default()
    }
}

pub fn partition(s: &str) -> GroupSettings {
    GroupSettings {
        partition: Some(Partition::Root),
        ..with_cpus(s)
    }
}

pub fn weight(w: u32) -> GroupSettings {
    GroupSettings {
        cpu_weight: Some(w),
        ..Default::default()
    }
}

pub fn cap(quota_us: u64, period_us: u64) -> GroupSettings {
    GroupSettings {
        cpu_max: Some(CpuMax {
            quota_us,
            period_us,
        }),
        ..Default::default()
    }
}

/// Applies `settings` at `path`, expecting no fallbacks.
pub fn ok(sim: &mut SimPlatform, path: &str, settings: GroupSettings) {
    let fb = sim.apply(&g(path), &settings).unwrap();
    assert!(fb.is_empty(), "{path}: {fb:?}");
}

/// The OS error kind and message of an `Io` error.
pub fn io_parts(e: &BackendError) -> (std::io::ErrorKind, String) {
    match e {
        BackendError::Io { source, .. } => (source.kind(), e.to_string()),
        other => panic!("expected an Io error, got {other:?}"),
    }
}

pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// `a` and `b` within 1 µs.
pub fn near(a: Duration, b: Duration) -> bool {
    a.abs_diff(b) <= Duration::from_micros(1)
}
