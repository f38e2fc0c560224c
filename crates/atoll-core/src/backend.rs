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
use crate::CpuSet;

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
    /// A service manager (systemd) whose units groups can be bound to
    /// ([`Actuator::bind`]).
    #[serde(default)]
    pub service_manager: bool,
}

/// What a group of atoll's plan can be bound to instead of a cgroup in
/// atoll's hierarchy: a cgroup a service manager owns, whose properties it
/// sets on atoll's behalf.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum External {
    /// An existing systemd unit (`nginx.service`, `web.slice`): its
    /// properties are set, and put back when the binding ends.
    SystemdUnit(String),
    /// A transient systemd scope of this name, started in atoll's slice for
    /// the first process moved into the group (`atoll run` on a systemd
    /// host); it ends with its last process.
    Scope(String),
}

impl std::fmt::Display for External {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SystemdUnit(n) => write!(f, "systemd unit {n}"),
            Self::Scope(n) => write!(f, "scope {n}"),
        }
    }
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

/// A knob the backend found different from what it writes and rewrote:
/// when the settings asked for did not change, someone changed the group
/// behind atoll's back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rewrite {
    /// The group.
    pub path: GroupPath,
    /// The knob (a cgroup file name).
    pub knob: String,
    /// The value found.
    pub found: String,
    /// The value written.
    pub wrote: String,
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
    /// The service manager refused properties of a bound group; none of
    /// them was applied.
    #[error(transparent)]
    Refused(Box<Refusal>),
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

/// Properties a service manager refused for a bound group.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{manager} refused {properties} for {unit} (group {group}): {reason}")]
pub struct Refusal {
    /// Who refused (`systemd 252`).
    pub manager: String,
    /// The group.
    pub group: GroupPath,
    /// The manager's unit.
    pub unit: String,
    /// The properties asked for, as `Name=value` separated by spaces.
    pub properties: String,
    /// What the manager said.
    pub reason: String,
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
    /// The directory of `path` in the cgroup v1 `net_prio` hierarchy, where
    /// the backend keeps its groups there (a network island writes the
    /// group's `net_prio.ifpriomap`); `None` otherwise (the default).
    fn net_prio_dir(&self, path: &GroupPath) -> Option<std::path::PathBuf> {
        let _ = path;
        None
    }
    /// Where `path` is in a cgroup v2 hierarchy, where the backend keeps
    /// its groups there: the hierarchy's mount and the group's directory
    /// below it (a network island gives the group's sockets its class with
    /// an nftables `socket cgroupv2` rule); `None` otherwise (the default).
    fn cgroup2_dir(&self, path: &GroupPath) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
        let _ = path;
        None
    }
    /// The service manager groups can be bound to, for people (`systemd
    /// 252`), when [`Capabilities::service_manager`] is true.
    fn service_manager(&self) -> Option<String> {
        None
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
    /// Makes the knobs of `path` match `settings` where they differ from
    /// `before`, the settings last given to [`apply`](Self::apply) or to
    /// this method for `path` and taken: a backend may leave the knobs whose
    /// wanted value did not change unread and unwritten (what someone else
    /// changed there is drift, found by a later `apply`), and reports the
    /// fallbacks of those as its last apply did. The daemon's writes go
    /// through here, so a one-knob change (a `trigger`'s boost) costs the
    /// knobs of that change, not the group's every file. By default the
    /// same as `apply`.
    fn apply_changed(
        &mut self,
        path: &GroupPath,
        before: &GroupSettings,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        let _ = before;
        self.apply(path, settings)
    }
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
    /// The knobs [`apply`](Self::apply) found different and rewrote since
    /// the last call (backends that cannot tell report none).
    fn take_rewrites(&mut self) -> Vec<Rewrite> {
        Vec::new()
    }
    /// Whether the backend learns of writes by others to its groups' files
    /// as they happen (inotify), so that [`written_behind`](Self::written_behind)
    /// names every group someone wrote: then a full check of every group is
    /// needed only for changes the kernel makes itself, and can be rare.
    fn watches_writes(&self) -> bool {
        false
    }
    /// The groups whose settings files someone other than the backend wrote
    /// since the last call (backends that do not watch report none).
    fn written_behind(&mut self) -> Vec<GroupPath> {
        Vec::new()
    }
    /// Binds the group `path` to a cgroup a service manager owns. From then
    /// on [`apply`](Self::apply) sets the external unit's properties through
    /// its manager (all or none of them), the monitor reads the external
    /// cgroup (its processes at any depth), and
    /// [`move_process`](Self::move_process) into `path` asks the manager to
    /// move the process ([`External::Scope`] only). Binding a bound group
    /// again to the same target does nothing. Backends without a service
    /// manager answer [`BackendError::Unavailable`].
    fn bind(&mut self, path: &GroupPath, to: &External) -> Result<(), BackendError> {
        let _ = path;
        Err(BackendError::Unavailable {
            what: to.to_string(),
            why: format!(
                "the {} backend has no service manager: bind systemd units on a cgroup v2 host that runs systemd",
                self.kind().as_str()
            ),
        })
    }
    /// Ends the binding of `path` (if any): puts back every property
    /// [`apply`](Self::apply) changed on the external unit. Returns a line
    /// per property put back. [`remove`](Self::remove) of a bound group
    /// does the same; [`release`](Self::release) ends every binding.
    fn unbind(&mut self, path: &GroupPath) -> Result<Vec<String>, BackendError> {
        let _ = path;
        Ok(Vec::new())
    }
    /// The groups bound now, and to what.
    fn bindings(&self) -> Vec<(GroupPath, External)> {
        Vec::new()
    }
    /// The group of atoll's a process whose cgroups are `m` is in: a bound
    /// group when `m` is in its external cgroup (at any depth), else the
    /// group below atoll's root that `m` names ([`group_in_root`]). `None`:
    /// the process is in none of atoll's groups.
    fn group_of(&self, m: &CgroupMembership) -> Option<GroupPath> {
        group_in_root(self.root_name(), m)
    }
}

/// The group below the root named `root` where `m` places a process (the
/// unified path, else the v1 `cpuset` or `cpu` hierarchy's), if it does.
pub fn group_in_root(root: &str, m: &CgroupMembership) -> Option<GroupPath> {
    let root = format!("/{}", root.trim_matches('/'));
    let path = m
        .unified()
        .filter(|p| p.starts_with(&root))
        .or_else(|| m.controller("cpuset"))
        .or_else(|| m.controller("cpu"))?;
    let rest = path.strip_prefix(&root)?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    Some(GroupPath::from_relative(rest))
}

/// Reads the kernel (or the simulator).
pub trait Monitor: Send {
    /// Whether the group exists.
    fn exists(&self, path: &GroupPath) -> bool;
    /// Names of the group's child groups.
    fn children(&self, path: &GroupPath) -> Result<Vec<String>, BackendError>;
    /// Pids of the processes in the group (not its children).
    fn processes(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError>;
    /// Pids of the processes in the group wherever the backend keeps the
    /// group more than once (cgroup v1: in any hierarchy, for a process
    /// someone moved in some hierarchies only); what teardown gives back.
    fn processes_anywhere(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        self.processes(path)
    }
    /// Usage, throttling, memory, IO and pressure of the group.
    fn stats(&self, path: &GroupPath) -> Result<GroupStats, BackendError> {
        self.stats_of(path, StatSelect::ALL)
    }
    /// Only the parts of the stats in `select` (the others are `None`);
    /// backends that read everything at once may return more.
    fn stats_of(&self, path: &GroupPath, select: StatSelect) -> Result<GroupStats, BackendError>;
    /// The group's CPU pressure file (PSI: `cpu.pressure`), on which a
    /// [`PressureWatch`](crate::pressure::PressureWatch) can arm a trigger;
    /// `None` where the backend has none for it: the group does not exist,
    /// the kernel shows no per-group pressure (cgroup v1 without the
    /// `cgroup1 psi` boot option, no PSI), or the backend is not a kernel
    /// (the default).
    fn cpu_pressure_file(&self, path: &GroupPath) -> Option<PathBuf> {
        let _ = path;
        None
    }
    /// Where the freezer has the group's tasks; `None` where the backend has
    /// no freezer for it (the default for backends that do not model one).
    fn freeze_state(&self, path: &GroupPath) -> Result<Option<FreezeState>, BackendError> {
        let _ = path;
        Ok(None)
    }
    /// The CPUs the group's cpuset lists as written (`cpuset.cpus`), read
    /// back from the kernel; `None` where the backend cannot tell (the
    /// default), or the group has no CPU list of its own. A restarted
    /// daemon checks its saved ledger of borrowed CPUs against it.
    fn cpuset(&self, path: &GroupPath) -> Result<Option<CpuSet>, BackendError> {
        let _ = path;
        Ok(None)
    }
}

/// A full backend.
pub trait Backend: Actuator + Monitor {}
impl<T: Actuator + Monitor> Backend for T {}
