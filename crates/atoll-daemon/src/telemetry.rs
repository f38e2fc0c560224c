//! What the daemon measures about itself, for the metrics endpoint: what
//! epochs and their steps cost ([`epoch`]), API requests by operation and
//! result ([`requests`]), decisions by action and reason (counted by the
//! decision log), and the standard process figures ([`process`]).
//!
//! The loop owns its figures and times its steps on its own thread (a
//! clock read per step, no lock); a copy, a [`Telemetry`], is published
//! with each status it builds (see [`crate::publish`]). The API threads
//! count replies in atomics the metrics thread reads.

pub mod epoch;
pub mod histogram;
pub mod process;
pub mod requests;

use std::path::PathBuf;
use std::sync::Arc;

use atoll_core::clock::Clock;

use self::epoch::{EpochStats, Step, Stopwatch};
use self::process::{ProcessStats, SelfReader};

/// Why a figure could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A file could not be read.
    #[error("read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file did not hold what was expected.
    #[error("parse {path}: {what}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
}

/// A copy of the daemon's own figures, as the metrics render them.
#[derive(Clone, Debug, Default)]
pub struct Telemetry {
    /// What epochs and their steps cost (none before the first epoch).
    pub epochs: Option<EpochStats>,
    /// Decisions by (action, reason), with their count.
    pub decisions: Vec<(&'static str, &'static str, u64)>,
    /// API replies by (operation, result), with their count.
    pub requests: Vec<(&'static str, &'static str, u64)>,
    /// The daemon process, when it could be read.
    pub process: Option<ProcessStats>,
}

/// The loop's side: the stopwatch clock, the epoch figures, and the reader
/// of its own process.
pub struct Meter {
    clock: Arc<dyn Clock>,
    stats: EpochStats,
    /// The epoch being timed.
    watch: Stopwatch,
    process: Option<SelfReader>,
}

impl Meter {
    /// A meter timing with `clock`, reading no process figures.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            stats: EpochStats::default(),
            watch: Stopwatch::default(),
            process: None,
        }
    }

    /// Times with `clock` from now on.
    pub fn set_clock(&mut self, clock: Arc<dyn Clock>) {
        self.clock = clock;
    }

    /// Reads the process figures with `reader` from now on.
    pub fn set_process(&mut self, reader: SelfReader) {
        self.process = Some(reader);
    }

    /// Starts timing an epoch.
    pub fn start_epoch(&mut self) {
        self.watch = Stopwatch::start(self.clock.now());
    }

    /// Charges the time since the last lap (or the start) to `step`.
    pub fn lap(&mut self, step: Step) {
        self.watch.lap(self.clock.now(), step);
    }

    /// Records the epoch timed since [`start_epoch`](Self::start_epoch).
    pub fn end_epoch(&mut self) {
        self.stats.record(&self.watch);
    }

    /// The figures so far (the process read now), with `decisions`.
    pub fn telemetry(&self, decisions: Vec<(&'static str, &'static str, u64)>) -> Telemetry {
        let process = self.process.as_ref().and_then(|r| {
            r.read()
                .map_err(|e| tracing::debug!("process figures: {e}"))
                .ok()
        });
        Telemetry {
            epochs: (self.stats.epoch.count() > 0).then(|| self.stats.clone()),
            decisions,
            requests: Vec::new(),
            process,
        }
    }
}
