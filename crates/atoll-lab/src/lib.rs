//! atoll's simulation lab: atoll's own policy code evaluated on machines
//! this one lacks.
//!
//! A [`Scenario`] (TOML) names a synthetic machine, a run length, an atoll
//! platform config, a workload for the simulator's engine
//! ([`atoll_sim::workload`]) and variants of the platform config. [`run`]
//! runs one variant: the daemon's `Controller` on a
//! [`SimPlatform`](atoll_sim::SimPlatform) (the same traits as on Linux;
//! no policy code knows it is simulated), the engine stepped epoch by
//! epoch on the simulated clock, time series sampled on the way.
//! [`Summary`] condenses a run, [`svg::plot`] draws it, and [`bench`]
//! measures how the whole loop scales.
//!
//! Layout: `scenario` (format and checks), `run` (the loop and series),
//! `apps` (the runtime library of simulated reconfigurable applications),
//! `summary` (figures and table), `svg` (plots), `bench` (scale runs).

pub mod apps;
pub mod bench;
pub mod run;
pub mod scenario;
pub mod summary;
pub mod svg;

use std::path::PathBuf;

pub use run::{run, RunResult};
pub use scenario::Scenario;
pub use summary::Summary;

/// What can go wrong loading or running a scenario.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// TOML syntax or an unknown/mistyped key (the message has the line
    /// and column).
    #[error("{source_name}: {message}")]
    Parse {
        /// The file.
        source_name: String,
        /// The parser's message.
        message: String,
    },
    /// A value out of range or inconsistent.
    #[error("{source_name}: {message}")]
    Invalid {
        /// The file.
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// A variant's platform config was refused by `atoll_config`.
    #[error("platform config of variant {variant}:\n{message}\n--- the merged config ---\n{text}")]
    Config {
        /// The variant.
        variant: String,
        /// The config checker's message.
        message: String,
        /// The merged config text the lines refer to.
        text: String,
    },
    /// No such variant.
    #[error("scenario {scenario} has no variant {variant:?} (it has {known:?})")]
    NoVariant {
        /// The scenario.
        scenario: String,
        /// The name asked for.
        variant: String,
        /// The names it has.
        known: Vec<String>,
    },
    /// The controller did not start.
    #[error("variant {variant}: the daemon did not start: {message}")]
    Start {
        /// The variant.
        variant: String,
        /// The controller's error.
        message: String,
    },
}
