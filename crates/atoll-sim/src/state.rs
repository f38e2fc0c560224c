//! The simulated machine's state: groups, processes, threads and time.
//!
//! Groups are keyed by their [`GroupPath`] relative to atoll's root. A
//! process is either *outside* atoll (somewhere in the rest of the machine's
//! cgroups, recorded as a [`CgroupMembership`]) or in one of atoll's groups.
//! Threads belong to a process and carry their own scheduling policy.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use atoll_core::backend::{BackendError, Capabilities};
use atoll_core::clock::{Clock, ManualClock};
use atoll_core::comm::UnitNetSample;
use atoll_core::plan::{GroupPath, GroupSettings, TaskPolicy};
use atoll_core::process::CgroupMembership;
use atoll_core::topology::Topology;
use atoll_core::{CpuSet, NodeSet};

use crate::model::{Model, ThreadAcct};

/// Clock ticks per second of `start_ticks` (the kernel's `USER_HZ`).
pub const USER_HZ: u64 = 100;
/// Pids wrap around above this (the kernel's default `pid_max` on 64-bit).
pub const PID_MAX: u32 = 4_194_304;
/// First pid used after a wrap (the kernel's `RESERVED_PIDS`).
const PID_WRAP_TO: u32 = 300;
/// First pid handed out by `spawn` on a fresh machine.
const FIRST_USER_PID: u32 = 1000;
/// Load weight of a nice-0 task, and of a group with `cpu.weight` 100.
pub const NICE_0_LOAD: f64 = 1024.0;
/// Load weight of a `SCHED_IDLE` task and of a group with `cpu.idle` set.
pub const IDLE_LOAD: f64 = 3.0;
/// `cpu.weight` of the rest of the machine, which competes with atoll's root
/// for CPUs as one sibling group.
pub const OUTSIDE_WEIGHT: u32 = 100;
/// The fraction of each RT period the machine grants atoll's root at most
/// (the kernel's default `sched_rt_runtime_us` / `sched_rt_period_us`).
pub(crate) const RT_MACHINE_RATIO: f64 = 0.95;

/// What the simulator enforces. IO weights order the simulated disk's
/// weighted queue (see the engine's disk model); IO limits are recorded but
/// not enforced. CPU pressure (`some`) is modelled and reported, though the
/// capability says no PSI (other pressure files are absent).
pub const SIM_CAPABILITIES: Capabilities = Capabilities {
    cpuset: true,
    cpu: true,
    partitions: true,
    cpu_idle: true,
    rt_groups: true,
    memory: true,
    io: true,
    psi: false,
    freezer: true,
    service_manager: false,
};

/// Where a process is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// Outside atoll's hierarchy, in these cgroups.
    Outside(CgroupMembership),
    /// In one of atoll's groups.
    Group(GroupPath),
}

/// What a group's CPU figures grow by, per ns, since `t0` (set at each
/// rate recomputation; see `model`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Seg {
    /// Start of the segment, ns.
    pub t0: u64,
    /// CPUs used (fair and RT) in the group and below.
    pub rate: f64,
    /// Of those, fair-class CPUs (what `cpu.max` limits).
    pub fair: f64,
    /// Fair demand without the group's own cap, CPUs.
    pub uncapped: f64,
    /// The cap, CPUs.
    pub cap: Option<f64>,
    /// The `cpu.max` period, ns (0: none).
    pub period_ns: u64,
    /// Some runnable thread below gets less than a CPU.
    pub stalled: bool,
}

/// CPU accounting of one group.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CpuCounters {
    /// CPU time used by the group and its descendants, ns.
    pub usage_ns: f64,
    /// Enforcement periods elapsed while the group had runnable tasks.
    pub nr_periods: u64,
    /// Of those, periods in which it ran out of quota.
    pub nr_throttled: u64,
    /// CPU time denied by the quota, summed over CPUs, ns.
    pub throttled_ns: f64,
    /// Time since the current enforcement period began, ns.
    pub period_phase_ns: u64,
    /// Time some busy thread of the group or its descendants got less than
    /// a whole CPU, ns: `cpu.pressure`'s `some total`.
    pub pressure_ns: f64,
    /// The rates in force since the last fold.
    pub seg: Seg,
}

/// One of atoll's groups.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Group {
    /// The settings last applied.
    pub settings: GroupSettings,
    /// CPUs its tasks may run on.
    pub effective_cpus: CpuSet,
    /// Nodes its tasks may allocate from.
    pub effective_mems: NodeSet,
    /// Whether a requested `Partition::Root` is in force.
    pub partition_valid: bool,
    /// Pids of the processes in it (not in its children).
    pub procs: BTreeSet<u32>,
    /// CPU accounting.
    pub cpu: CpuCounters,
    /// Bytes read and written by processes while in it (not its children).
    pub io_read: u64,
    pub io_write: u64,
}

/// One process.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Process {
    pub ppid: u32,
    pub uid: u32,
    pub comm: String,
    pub exe: Option<PathBuf>,
    pub start_ticks: u64,
    pub kernel_thread: bool,
    pub location: Location,
    /// Whether new threads start runnable (`set_busy` sets all threads).
    pub busy: bool,
    /// Memory charged to its group, bytes.
    pub memory: u64,
    /// Its sockets' figures (the simulated network path).
    pub net: UnitNetSample,
    /// Thread ids, the main thread (tid = pid) included.
    pub threads: BTreeSet<u32>,
}

/// One thread.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Thread {
    /// The process it belongs to.
    pub pid: u32,
    /// Its scheduling policy.
    pub policy: TaskPolicy,
    /// Its custom slice (fair class only; `None`: the default).
    pub slice: Option<std::time::Duration>,
    /// Its cache penalty (0: none; see `model`).
    pub cache_penalty: f64,
    /// Its class, runnable state, CPU time and work in the model.
    pub acct: ThreadAcct,
}

/// The whole simulated machine.
#[derive(Debug)]
pub(crate) struct SimState {
    pub topology: Topology,
    pub online: CpuSet,
    pub clock: ManualClock,
    pub root: String,
    pub groups: BTreeMap<GroupPath, Group>,
    /// Each group's children, kept with `groups`.
    pub kids: HashMap<GroupPath, BTreeSet<GroupPath>>,
    pub procs: BTreeMap<u32, Process>,
    pub threads: TidMap<Thread>,
    /// Next pid to try.
    pub next_pid: u32,
    /// How far the CPU model has run.
    pub modeled_until: Duration,
    /// Whether the kernel has RT group scheduling (`CONFIG_RT_GROUP_SCHED`).
    /// Without it (as on Debian's kernels with cgroup v2) RT budgets cannot
    /// be set on groups and RT tasks may run in any group.
    pub rt_groups: bool,
    /// Whether groups name a CPU pressure file (for tests that arm a fake
    /// pressure watch on it; the simulated machine has no real one).
    pub pressure_files: bool,
    /// Group → how many times its CPU pressure was read.
    pub pressure_reads: BTreeMap<GroupPath, u64>,
    /// Reads of each group's CPU time counter (`stats_of` selecting it).
    pub cpu_usage_reads: BTreeMap<GroupPath, u64>,
    /// The CPU model's classes, tree and completion heap.
    pub model: Model,
}

impl SimState {
    /// A machine with `init` (pid 1) and `kthreadd` (pid 2), no atoll groups,
    /// the model caught up with `clock`.
    pub fn new(topology: Topology, root: &str, clock: ManualClock) -> Self {
        let online = topology.online();
        let modeled_until = clock.now();
        let model = Model::new(online.len());
        let mut s = Self {
            topology,
            online,
            clock,
            root: root.trim_matches('/').to_string(),
            groups: BTreeMap::new(),
            kids: HashMap::new(),
            procs: BTreeMap::new(),
            threads: TidMap::default(),
            next_pid: FIRST_USER_PID,
            modeled_until,
            rt_groups: true,
            pressure_files: false,
            pressure_reads: BTreeMap::new(),
            cpu_usage_reads: BTreeMap::new(),
            model,
        };
        s.insert_process(
            1,
            0,
            "init",
            Some("/sbin/init".into()),
            false,
            "/init.scope",
        );
        s.insert_process(2, 0, "kthreadd", None, true, "/");
        s
    }

    /// Brings the CPU model up to the clock's current time: changes made
    /// since the last call took effect at the time they were made (the
    /// last call's time), the rates they lead to hold until now.
    pub fn sync(&mut self) {
        let now = self.clock.now();
        if now > self.modeled_until {
            self.refresh();
            self.modeled_until = now;
        }
    }

    /// `start_ticks` for a process started now.
    pub fn ticks_now(&self) -> u64 {
        let nanos_per_tick = 1_000_000_000 / u128::from(USER_HZ);
        u64::try_from(self.clock.now().as_nanos() / nanos_per_tick).unwrap_or(u64::MAX)
    }

    /// The next free pid, as the kernel hands them out: increasing, wrapping
    /// at [`PID_MAX`], skipping ids in use.
    pub fn alloc_pid(&mut self) -> u32 {
        loop {
            let pid = self.next_pid;
            self.next_pid = if pid + 1 >= PID_MAX {
                PID_WRAP_TO
            } else {
                pid + 1
            };
            if !self.threads.contains_key(&pid) && !self.procs.contains_key(&pid) {
                return pid;
            }
        }
    }

    /// Adds a process with one thread (tid = pid), outside atoll in the
    /// unified-hierarchy cgroup `cgroup`.
    pub fn insert_process(
        &mut self,
        pid: u32,
        uid: u32,
        comm: &str,
        exe: Option<PathBuf>,
        kernel_thread: bool,
        cgroup: &str,
    ) {
        let mut membership = CgroupMembership::default();
        membership.entries.insert(String::new(), cgroup.to_string());
        let ppid = match pid {
            1 | 2 => 0,
            _ if kernel_thread => 2,
            _ => 1,
        };
        self.procs.insert(
            pid,
            Process {
                ppid,
                uid,
                comm: comm.to_string(),
                exe,
                start_ticks: self.ticks_now(),
                kernel_thread,
                location: Location::Outside(membership),
                busy: false,
                memory: 0,
                net: UnitNetSample::default(),
                threads: BTreeSet::from([pid]),
            },
        );
        self.add_thread(pid, pid, TaskPolicy::Other);
    }

    /// The pseudo-path of a group's knob file, for errors:
    /// `/sim/<root>/<group>/<knob>`.
    pub fn knob_path(&self, group: &GroupPath, knob: &str) -> PathBuf {
        let mut p = PathBuf::from("/sim");
        p.push(&self.root);
        if !group.is_root() {
            p.push(group.as_str());
        }
        if !knob.is_empty() {
            p.push(knob);
        }
        p
    }

    /// The unified-hierarchy path of a group as `/proc/PID/cgroup` would
    /// show it: `/<root>/<group>`.
    pub fn cgroup_path(&self, group: &GroupPath) -> String {
        if group.is_root() {
            format!("/{}", self.root)
        } else {
            format!("/{}/{}", self.root, group.as_str())
        }
    }

    /// Effective CPUs and mems of `path`'s parent: the machine for the root.
    pub fn parent_effective(&self, path: &GroupPath) -> Option<(CpuSet, NodeSet)> {
        match path.parent() {
            None => Some((self.online.clone(), self.topology.all_nodes())),
            Some(p) => self
                .groups
                .get(&p)
                .map(|g| (g.effective_cpus.clone(), g.effective_mems.clone())),
        }
    }

    /// Paths of the direct children of `path`.
    pub fn children_of(&self, path: &GroupPath) -> Vec<GroupPath> {
        self.kids
            .get(path)
            .map(|k| k.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether `path` has child groups.
    pub fn has_children(&self, path: &GroupPath) -> bool {
        self.kids.get(path).is_some_and(|k| !k.is_empty())
    }

    /// Whether thread policies of process `pid` include an RT one.
    pub fn has_rt_threads(&self, pid: u32) -> bool {
        self.procs.get(&pid).is_some_and(|p| {
            p.threads
                .iter()
                .filter_map(|t| self.threads.get(t))
                .any(|t| is_rt(t.policy))
        })
    }

    /// Moves process `pid` (known to exist) to `to`, keeping the groups'
    /// process sets in step.
    pub fn place(&mut self, pid: u32, to: Location) {
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        if let Location::Group(old) = &p.location {
            if let Some(g) = self.groups.get_mut(old) {
                g.procs.remove(&pid);
            }
        }
        if let Location::Group(new) = &to {
            if let Some(g) = self.groups.get_mut(new) {
                g.procs.insert(pid);
            }
        }
        p.location = to;
        let tids: Vec<u32> = p.threads.iter().copied().collect();
        for tid in tids {
            self.reclass(tid);
        }
    }
}

/// A hasher for small integer keys (pids, tids): one multiply, no
/// per-process random state (runs are reproducible anyway; the keys are
/// not adversarial).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A map keyed by thread or process id.
pub(crate) type TidMap<V> = HashMap<u32, V, std::hash::BuildHasherDefault<IdHasher>>;

/// Whether `policy` is a realtime one.
pub(crate) fn is_rt(policy: TaskPolicy) -> bool {
    matches!(policy, TaskPolicy::Fifo(_) | TaskPolicy::Rr(_))
}

/// A refused write, the way the kernel refuses it: `EINVAL`-like
/// (`InvalidInput`) with the reason spelled out.
pub(crate) fn invalid(path: PathBuf, value: String, reason: String) -> BackendError {
    BackendError::Io {
        op: "write",
        path,
        value: Some(value),
        source: io::Error::new(io::ErrorKind::InvalidInput, reason),
    }
}

/// A write refused because something is in use: `EBUSY`-like
/// (`ResourceBusy`) with the reason spelled out.
pub(crate) fn busy(
    op: &'static str,
    path: PathBuf,
    value: Option<String>,
    reason: String,
) -> BackendError {
    BackendError::Io {
        op,
        path,
        value,
        source: io::Error::new(io::ErrorKind::ResourceBusy, reason),
    }
}
