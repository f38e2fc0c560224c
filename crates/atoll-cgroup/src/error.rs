//! Errors of the cgroup backends.
//!
//! Every variant that comes from a file carries the operation, the path and
//! (for writes) the value, so a log line says exactly what the kernel refused.
//! [`CgroupError`] converts into [`BackendError`] for the `Actuator`/`Monitor`
//! traits.

use std::io;
use std::path::PathBuf;

use atoll_core::backend::BackendError;
use atoll_core::plan::GroupPath;

/// Why a cgroup operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A file or directory operation failed.
    #[error("{op} {}{}: {source}", path.display(), value.as_ref().map(|v| format!(" (value {v:?})")).unwrap_or_default())]
    Io {
        /// `read`, `write`, `mkdir`, `rmdir`, `list`.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The value written, if any.
        value: Option<String>,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A file held something unexpected.
    #[error("parse {}: {value:?}: {reason}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What it held (the offending line or value).
        value: String,
        /// What was expected.
        reason: String,
    },
    /// A line of `/proc/self/mountinfo` could not be understood.
    #[error("{}:{line}: {value:?}: {reason}", path.display())]
    Mountinfo {
        /// The mountinfo file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The line.
        value: String,
        /// What was wrong.
        reason: String,
    },
    /// No cgroup backend can be used as requested.
    #[error("cannot use the {requested} backend: {}; use `--backend sim` for a simulated platform", reasons.join("; "))]
    Unusable {
        /// `auto`, `cgroup2` or `cgroup1`.
        requested: &'static str,
        /// One reason per candidate that was rejected.
        reasons: Vec<String>,
    },
    /// The group does not exist.
    #[error("no group {0} in atoll's hierarchy")]
    NoGroup(GroupPath),
    /// The process does not exist (any more).
    #[error("process {0} does not exist")]
    NoProcess(u32),
    /// The backend was given a root name it cannot use.
    #[error("root name {0:?} must be a relative path of plain components")]
    BadRootName(String),
    /// A group could not be removed from several of the hierarchies it is
    /// in (cgroup v1): each directory left, with its OS error.
    #[error("group {group} was not removed: {}", failed.iter().map(|(p, e)| format!("rmdir {}: {e}", p.display())).collect::<Vec<_>>().join("; "))]
    NotRemoved {
        /// The group.
        group: GroupPath,
        /// Each directory still there, and why.
        failed: Vec<(PathBuf, io::Error)>,
    },
}

impl CgroupError {
    /// A failed file operation.
    pub fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
        value: Option<&str>,
        source: io::Error,
    ) -> Self {
        Self::Io {
            op,
            path: path.into(),
            value: value.map(str::to_string),
            source,
        }
    }

    /// A file that held something unexpected.
    pub fn parse(path: impl Into<PathBuf>, value: &str, reason: impl Into<String>) -> Self {
        Self::Parse {
            path: path.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    /// The OS error number, if this is a file error.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

impl From<CgroupError> for BackendError {
    fn from(e: CgroupError) -> Self {
        match e {
            CgroupError::Io {
                op,
                path,
                value,
                source,
            } => BackendError::Io {
                op,
                path,
                value,
                source,
            },
            CgroupError::Parse {
                path,
                value,
                reason,
            } => BackendError::Parse {
                path,
                value,
                reason,
            },
            CgroupError::Mountinfo {
                path,
                line,
                value,
                reason,
            } => BackendError::Parse {
                path,
                value,
                reason: format!("line {line}: {reason}"),
            },
            CgroupError::NoGroup(p) => BackendError::NoGroup(p),
            CgroupError::NoProcess(pid) => BackendError::NoProcess(pid),
            e @ CgroupError::Unusable { .. } => BackendError::Unavailable {
                what: "cgroup backend".into(),
                why: e.to_string(),
            },
            e @ CgroupError::BadRootName(_) => BackendError::Unavailable {
                what: "cgroup backend".into(),
                why: e.to_string(),
            },
            CgroupError::NotRemoved { group, failed } => BackendError::NotRemoved { group, failed },
        }
    }
}

/// A value a parser rejected, before the caller adds the file it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadValue {
    /// The offending text (a line or a token).
    pub value: String,
    /// What was expected.
    pub reason: String,
}

impl BadValue {
    /// A rejected value.
    pub fn new(value: &str, reason: impl Into<String>) -> Self {
        Self {
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    /// The error for the file at `path`.
    pub fn at(self, path: impl Into<PathBuf>) -> CgroupError {
        CgroupError::Parse {
            path: path.into(),
            value: self.value,
            reason: self.reason,
        }
    }
}

/// A short name for an OS error number, for fallback reasons.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EINVAL => "EINVAL",
        libc::EBUSY => "EBUSY",
        libc::ENOENT => "ENOENT",
        libc::ENOSPC => "ENOSPC",
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ESRCH => "ESRCH",
        libc::ERANGE => "ERANGE",
        libc::EEXIST => "EEXIST",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENODEV => "ENODEV",
        _ => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_error_names_op_path_and_value() {
        let e = CgroupError::io(
            "write",
            "/sys/fs/cgroup/atoll/cpu.max",
            Some("50000 100000"),
            io::Error::from_raw_os_error(libc::EINVAL),
        );
        let s = e.to_string();
        assert!(s.starts_with("write /sys/fs/cgroup/atoll/cpu.max"), "{s}");
        assert!(s.contains("\"50000 100000\""), "{s}");
        assert_eq!(e.errno(), Some(libc::EINVAL));
        match BackendError::from(e) {
            BackendError::Io { op, value, .. } => {
                assert_eq!(op, "write");
                assert_eq!(value.as_deref(), Some("50000 100000"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unusable_mentions_sim_and_every_reason() {
        let e = CgroupError::Unusable {
            requested: "auto",
            reasons: vec!["a".into(), "b".into()],
        };
        let s = e.to_string();
        assert!(s.contains("a; b") && s.contains("--backend sim"), "{s}");
        assert!(matches!(
            BackendError::from(e),
            BackendError::Unavailable { .. }
        ));
        assert!(matches!(
            BackendError::from(CgroupError::NoProcess(7)),
            BackendError::NoProcess(7)
        ));
    }
}
