//! Why reading or writing powercap/cpufreq failed.

use std::io;
use std::path::PathBuf;

use atoll_core::power::FreqError;

/// A failure on a powercap or cpufreq file; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum PowerError {
    /// A file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A file could not be written.
    #[error("{}: cannot write {value:?}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What was written.
        value: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A file that must exist is absent.
    #[error("{}: required file is missing", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// A file's content is not in the expected format.
    #[error("{}: malformed value {value:?}: {reason}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What it contained (trimmed).
        value: String,
        /// What was expected.
        reason: &'static str,
    },
    /// A frequency policy the CPU cannot follow.
    #[error("{}: {source}", path.display())]
    Policy {
        /// The CPU's cpufreq directory.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: FreqError,
    },
}
