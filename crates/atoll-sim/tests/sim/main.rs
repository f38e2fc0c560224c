//! The simulator's rules and CPU model, through its public API.

mod cpu;
mod groups;
mod procs;

use std::time::Duration;

use atoll_core::backend::{Actuator, BackendError};
use atoll_core::plan::{CpuMax, GroupSettings, Partition};
use atoll_sim::SimPlatform;

#[path = "../common/mod.rs"]
mod common;
pub use common::{cpus, g, machine};

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
