//! The workload engine on the simulated machine: results checked against
//! what the fluid model computes, and the effects policies rely on.

mod barrier;
mod classes;
mod io;
mod malleable;
mod requests;

use std::time::Duration;

use atoll_core::backend::Actuator;
use atoll_core::plan::GroupSettings;
use atoll_sim::engine::{AppReport, WorkloadReport};
use atoll_sim::{Engine, SimPlatform, WorkloadSpec};

#[path = "../common/mod.rs"]
mod common;
pub use common::{cpus, g, machine};

/// Applies `settings` at `path`, expecting no fallbacks.
pub fn ok(sim: &mut SimPlatform, path: &str, settings: GroupSettings) {
    let fb = sim.apply(&g(path), &settings).unwrap();
    assert!(fb.is_empty(), "{path}: {fb:?}");
}

pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

pub fn engine(sim: &SimPlatform, toml: &str, seed: u64) -> Engine {
    let spec = WorkloadSpec::from_toml(toml).unwrap();
    Engine::new(sim.clone(), spec, seed).unwrap()
}

/// Runs until every finite app is done (or `limit` seconds pass).
pub fn finish(e: &mut Engine, limit: f64) -> WorkloadReport {
    let step = 0.01;
    let mut t = e.sim().now().as_secs_f64();
    while !e.done() && t < limit {
        t += step;
        e.run_until(secs(t));
    }
    e.report()
}

pub fn app<'a>(r: &'a WorkloadReport, name: &str) -> &'a AppReport {
    r.apps.iter().find(|a| a.name == name).unwrap()
}

/// `a` and `b` within `tol`.
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}
