//! The kernel as seen by policies: an [`Actuator`] writes it, a [`Monitor`]
//! reads it.
//!
//! Backends (`cgroup2`, `cgroup1`, `sim`) implement both over the hierarchy
//! atoll owns, rooted at a name they were given; no call reaches outside it
//! except [`Actuator::restore_process`], which returns a process to the
//! cgroups it came from. Errors carry the path and value that failed.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::plan::{GroupPath, GroupSettings};
use crate::process::CgroupMembership;

/// Which backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The unified hierarchy.
    Cgroup2,
    /// The legacy per-controller hierarchies.
    Cgroup1,
    /// The simulated platform.
    Sim,
}

impl BackendKind {
    /// The name used on the command line and in status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cgroup2 => "cgroup2",
            Self::Cgroup1 => "cgroup1",
            Self::Sim => "sim",
        }
    }
}

/// What a backend can enforce here. A knob it cannot enforce is reported as a
/// [`Fallback`] when a plan asks for it, never silently dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// cpuset control.
    pub cpuset: bool,
    /// CPU weights and caps.
    pub cpu: bool,
    /// cpuset partitions (v2) or cpu_exclusive (v1).
    pub partitions: bool,
    /// `cpu.idle`.
    pub cpu_idle: bool,
    /// RT group budgets.
    pub rt_groups: bool,
    /// Memory protection and limits.
    pub memory: bool,
    /// IO weights and limits.
    pub io: bool,
    /// Per-group pressure (PSI).
    pub psi: bool,
    /// The cgroup freezer (`GroupSettings::frozen`): v2 `cgroup.freeze`,
    /// v1 a writable `freezer` hierarchy.
    #[serde(default)]
    pub freezer: bool,
}

/// A knob the kernel refused or the backend cannot set, and what it did
/// instead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fallback {
    /// The group.
    pub path: GroupPath,
    /// The knob (a cgroup file name).
    pub knob: String,
    /// The value atoll wanted.
    pub wanted: String,
    /// The value in force now.
    pub got: String,
    /// Why.
    pub reason: String,
}

/// One PSI line: `some` or `full`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiLine {
    /// Share of time stalled over 10 s, percent.
    pub avg10: f64,
    /// Over 60 s.
    pub avg60: f64,
    /// Over 300 s.
    pub avg300: f64,
    /// Total stall time, µs.
    pub total_us: u64,
}

/// A `*.pressure` file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Psi {
    /// Some tasks stalled.
    pub some: PsiLine,
    /// All non-idle tasks stalled (absent for CPU on older kernels).
    pub full: Option<PsiLine>,
}

/// What a monitor reads of one group. `None` where the backend cannot tell.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupStats {
    /// CPU time used, µs.
    pub cpu_usage_us: Option<u64>,
    /// Enforcement periods elapsed.
    pub nr_periods: Option<u64>,
    /// Periods in which the group was throttled.
    pub nr_throttled: Option<u64>,
    /// Time throttled, µs.
    pub throttled_us: Option<u64>,
    /// Memory in use, bytes.
    pub memory_current: Option<u64>,
    /// Bytes read from block devices.
    pub io_read_bytes: Option<u64>,
    /// Bytes written to block devices.
    pub io_write_bytes: Option<u64>,
    /// Block devices the group has done IO on (to throttle it there).
    #[serde(default)]
    pub io_devices: Vec<crate::spec::DeviceId>,
    /// CPU pressure.
    pub cpu_pressure: Option<Psi>,
    /// Memory pressure.
    pub memory_pressure: Option<Psi>,
    /// IO pressure.
    pub io_pressure: Option<Psi>,
}

/// Where the cgroup freezer has a group's tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FreezeState {
    /// Running (not frozen, or thawed).
    Thawed,
    /// A freeze was asked for and some tasks are not stopped yet.
    Freezing,
    /// Every task is stopped (the group's own freeze or an ancestor's).
    Frozen,
}

/// Which parts of [`GroupStats`] to read: each part costs file reads, and
/// the control loop needs CPU figures every epoch but memory and IO ones
/// only now and then.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatSelect {
    /// CPU time used (`cpu_usage_us`).
    pub cpu_usage: bool,
    /// Bandwidth periods and throttling.
    pub cpu_throttling: bool,
    /// Memory in use.
    pub memory: bool,
    /// Bytes moved and the devices.
    pub io: bool,
    /// The `*.pressure` files of the parts selected above (CPU pressure
    /// with either CPU part).
    pub pressure: bool,
}

impl StatSelect {
    /// Everything.
    pub const ALL: Self = Self {
        cpu_usage: true,
        cpu_throttling: true,
        memory: true,
        io: true,
        pressure: true,
    };
    /// CPU time used and CPU pressure.
    pub const CPU: Self = Self {
        cpu_usage: true,
        cpu_throttling: false,
        memory: false,
        io: false,
        pressure: true,
    };

    /// Whether CPU pressure is read.
    pub fn cpu_pressure(&self) -> bool {
        self.pressure && (self.cpu_usage || self.cpu_throttling)
    }

    /// Whether memory pressure is read.
    pub fn memory_pressure(&self) -> bool {
        self.pressure && self.memory
    }

    /// Whether IO pressure is read.
    pub fn io_pressure(&self) -> bool {
        self.pressure && self.io
    }
}

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// A file operation failed.
    #[error("{op} {path}{}: {source}", value.as_ref().map(|v| format!(" (value {v:?})")).unwrap_or_default())]
    Io {
        /// What was attempted: `read`, `write`, `mkdir`, `rmdir`.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The value written, if any.
        value: Option<String>,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file held something unexpected.
    #[error("parse {path}: {value:?}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What it held.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// The group does not exist.
    #[error("no group {0} in atoll's hierarchy")]
    NoGroup(GroupPath),
    /// The process does not exist (any more).
    #[error("process {0} does not exist")]
    NoProcess(u32),
    /// Nothing of the requested kind can be done with this backend here.
    #[error("{what} is not available: {why}")]
    Unavailable {
        /// The feature.
        what: String,
        /// Why, and what to do instead.
        why: String,
    },
    /// A group that exists in several hierarchies (cgroup v1) could not be
    /// removed from more than one of them: every directory left behind,
    /// each with its OS error. (One directory left is [`Self::Io`].)
    #[error("group {group} was not removed: {}", not_removed(.failed))]
    NotRemoved {
        /// The group.
        group: GroupPath,
        /// Each directory that is still there, and why.
        failed: Vec<(PathBuf, std::io::Error)>,
    },
}

fn not_removed(failed: &[(PathBuf, std::io::Error)]) -> String {
    failed
        .iter()
        .map(|(p, e)| format!("rmdir {}: {e}", p.display()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `EBUSY`: a group that still has tasks or children.
const EBUSY: i32 = 16;

impl BackendError {
    /// Whether the error means the process is gone (so it can be forgotten).
    pub fn is_gone(&self) -> bool {
        match self {
            Self::NoProcess(_) => true,
            Self::Io { source, .. } => source.raw_os_error() == Some(3), // ESRCH
            _ => false,
        }
    }

    /// Whether a group could not be removed only because it is busy
    /// (`EBUSY`: tasks or child groups left), so trying again later may
    /// succeed.
    pub fn is_busy(&self) -> bool {
        match self {
            Self::Io { source, .. } => source.raw_os_error() == Some(EBUSY),
            Self::NotRemoved { failed, .. } => {
                failed.iter().all(|(_, e)| e.raw_os_error() == Some(EBUSY))
            }
            _ => false,
        }
    }
}

/// Writes the kernel (or the simulator).
pub trait Actuator: Send {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;
    /// What it can enforce.
    fn capabilities(&self) -> Capabilities;
    /// The name of atoll's root group (e.g. `atoll`), or its path below the
    /// hierarchy's mount (`system.slice/atoll.service/managed`).
    fn root_name(&self) -> &str;
    /// Where atoll's root is, for people: its directory and, when it is
    /// there, how it got there (e.g. delegated by systemd). Default: the
    /// root name.
    fn root_location(&self) -> String {
        self.root_name().to_string()
    }
    /// Whether the backend may make atoll's root itself exclusive (cgroup
    /// v1 with `--v1-exclusive`), which takes all of atoll's CPUs from the
    /// cpusets outside it as soon as an island is exclusive.
    fn exclusive_root(&self) -> bool {
        false
    }
    /// Creates the group if missing (its parent must exist) and makes its
    /// knobs match `settings`. Returns the knobs it could not set as asked.
    fn apply(
        &mut self,
        path: &GroupPath,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError>;
    /// Removes an empty group (and the root, when `path` is the root).
    fn remove(&mut self, path: &GroupPath) -> Result<(), BackendError>;
    /// Moves a whole process (all its threads) into a leaf group.
    fn move_process(&mut self, pid: u32, to: &GroupPath) -> Result<(), BackendError>;
    /// Moves a process back to the cgroups it came from; a cgroup that no
    /// longer exists is replaced by its nearest existing ancestor.
    fn restore_process(&mut self, pid: u32, origin: &CgroupMembership) -> Result<(), BackendError>;
    /// Undoes what the backend changed outside atoll's root (e.g. controllers
    /// it enabled in the parent's `cgroup.subtree_control`), after the root
    /// is removed. Returns a line per change undone.
    fn release(&mut self) -> Result<Vec<String>, BackendError> {
        Ok(Vec::new())
    }
    /// What the backend changed outside atoll's root, for the state file, so
    /// a restarted daemon can still [`release`](Self::release) it.
    fn outside_changes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Gives back the record of [`outside_changes`](Self::outside_changes)
    /// after a restart.
    fn set_outside_changes(&mut self, _changes: Vec<String>) {}
}

/// Reads the kernel (or the simulator).
pub trait Monitor: Send {
    /// Whether the group exists.
    fn exists(&self, path: &GroupPath) -> bool;
    /// Names of the group's child groups.
    fn children(&self, path: &GroupPath) -> Result<Vec<String>, BackendError>;
    /// Pids of the processes in the group (not its children).
    fn processes(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError>;
    /// Usage, throttling, memory, IO and pressure of the group.
    fn stats(&self, path: &GroupPath) -> Result<GroupStats, BackendError> {
        self.stats_of(path, StatSelect::ALL)
    }
    /// Only the parts of the stats in `select` (the others are `None`);
    /// backends that read everything at once may return more.
    fn stats_of(&self, path: &GroupPath, select: StatSelect) -> Result<GroupStats, BackendError>;
    /// Where the freezer has the group's tasks; `None` where the backend has
    /// no freezer for it (the default for backends that do not model one).
    fn freeze_state(&self, path: &GroupPath) -> Result<Option<FreezeState>, BackendError> {
        let _ = path;
        Ok(None)
    }
}

/// A full backend.
pub trait Backend: Actuator + Monitor {}
impl<T: Actuator + Monitor> Backend for T {}
