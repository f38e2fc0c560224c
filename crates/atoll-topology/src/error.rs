//! Why reading the topology failed.
//!
//! Every variant names the file (or directory) involved; variants about a
//! value also carry the text that was read, trimmed, so an operator can
//! compare it with what `cat` shows.

use std::io;
use std::path::PathBuf;

/// A failure to read or make sense of the sysfs tree.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A file or directory the reader cannot do without is absent.
    #[error("{}: required file is missing", path.display())]
    Missing {
        /// The absent path.
        path: PathBuf,
    },
    /// A file exists but could not be read (permissions, I/O error).
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A file's content is not in the expected format.
    #[error("{}: malformed value {value:?}: {reason}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What it contained (trimmed).
        value: String,
        /// What was expected.
        reason: String,
    },
    /// Files are well-formed but contradict each other (e.g. a CPU missing
    /// from its own sibling list, or in two NUMA nodes).
    #[error("{}: inconsistent value {value:?}: {reason}", path.display())]
    Inconsistent {
        /// The file whose value does not fit.
        path: PathBuf,
        /// What it contained (trimmed).
        value: String,
        /// What it contradicts.
        reason: String,
    },
}

impl TopologyError {
    /// The path the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            Self::Missing { path }
            | Self::Io { path, .. }
            | Self::Malformed { path, .. }
            | Self::Inconsistent { path, .. } => path,
        }
    }
}
