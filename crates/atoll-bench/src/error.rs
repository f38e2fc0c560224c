//! Why a benchmark could not run or finish.

use std::path::PathBuf;

use atoll_core::backend::BackendError;

/// A benchmark failure. Each variant names what was being done.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The machine cannot run this benchmark (not root, no usable cgroups).
    #[error("cannot run here: {0}")]
    Unusable(String),
    /// A cgroup backend call failed.
    #[error("{what}: {source}")]
    Backend {
        /// What was being done.
        what: String,
        /// The backend's error.
        #[source]
        source: BackendError,
    },
    /// Opening or choosing the cgroup backend failed.
    #[error("cgroup backend: {0}")]
    Cgroup(#[from] atoll_cgroup::CgroupError),
    /// Reading the machine's topology failed.
    #[error("topology: {0}")]
    Topology(#[from] atoll_topology::TopologyError),
    /// A process could not be started or waited for.
    #[error("{what} ({program}): {source}")]
    Spawn {
        /// What the process was for.
        what: String,
        /// The program.
        program: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A worker ended without a usable report.
    #[error("{what}: {reason}{}", if output.is_empty() { String::new() } else { format!("\n{output}") })]
    Worker {
        /// Which worker.
        what: String,
        /// What went wrong.
        reason: String,
        /// What it printed (stdout and stderr).
        output: String,
    },
    /// The daemon did not start or stop as expected.
    #[error("daemon ({mode}): {reason}\n--- daemon log ---\n{log}")]
    Daemon {
        /// The isolation mode it ran.
        mode: String,
        /// What went wrong.
        reason: String,
        /// The end of its log.
        log: String,
    },
    /// A file could not be written or read.
    #[error("{op} {path}: {source}")]
    Io {
        /// `read`, `write`, `create`.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// SIGINT/SIGTERM: stopped early after cleaning up.
    #[error("interrupted")]
    Interrupted,
    /// A benchmark's fixture could not be set up, or misbehaved.
    #[error("{what}: {reason}")]
    Setup {
        /// What was being set up.
        what: String,
        /// Why it failed.
        reason: String,
    },
}

impl BenchError {
    /// A backend error while doing `what`.
    pub fn backend(what: impl Into<String>) -> impl FnOnce(BackendError) -> Self {
        let what = what.into();
        move |source| Self::Backend { what, source }
    }
}
