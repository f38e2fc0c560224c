//! [`SimPlatform`]: the handle through which atoll and tests use a simulated
//! machine.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use atoll_core::backend::{
    Actuator, BackendError, BackendKind, Capabilities, Fallback, FreezeState, GroupStats, Monitor,
    Psi, PsiLine, StatSelect,
};
use atoll_core::clock::{Clock, ManualClock};
use atoll_core::comm::{NetError, NetMonitor, UnitNetSample};
use atoll_core::num::saturating_u64;
use atoll_core::plan::{GroupPath, GroupSettings, TaskPolicy};
use atoll_core::process::{CgroupMembership, ProcessError, ProcessInfo, ProcessTable, TaskControl};
use atoll_core::topology::Topology;
use atoll_core::{CpuSet, Name};

use crate::model::ModelStats;
use crate::state::{Location, SimState, SIM_CAPABILITIES};

/// A simulated machine. Clones share it; every method locks it briefly, so a
/// handle can be given to the daemon (as its backend, process table and task
/// control) while a test keeps another to drive the workload.
#[derive(Clone, Debug)]
pub struct SimPlatform {
    state: Arc<Mutex<SimState>>,
    root: Arc<str>,
}

impl SimPlatform {
    /// A machine of shape `topology` whose clock is `clock`, with atoll's
    /// root group to be called `root` (not created yet: `apply` the root
    /// first). It starts with `init` (pid 1) and `kthreadd` (pid 2).
    pub fn new(topology: Topology, root: &str, clock: ManualClock) -> Self {
        let state = SimState::new(topology, root, clock);
        let root = Arc::from(state.root.as_str());
        Self {
            state: Arc::new(Mutex::new(state)),
            root,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SimState> {
        // A panic while holding the lock leaves consistent-enough state for a
        // simulator; keep going rather than poison every later call.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The simulated clock.
    pub fn clock(&self) -> ManualClock {
        self.lock().clock.clone()
    }

    /// The simulated time.
    pub fn now(&self) -> Duration {
        self.lock().clock.now()
    }

    /// The machine's topology.
    pub fn topology(&self) -> Topology {
        self.lock().topology.clone()
    }

    /// Moves the clock forward by `dt` and runs the CPU model up to it.
    pub fn advance(&self, dt: Duration) {
        let mut s = self.lock();
        s.clock.advance(dt);
        s.sync();
    }

    /// Starts a user process outside atoll (in `/user.slice`); returns its
    /// pid. `comm` is cut to 15 bytes.
    pub fn spawn(&self, comm: &str, uid: u32, exe: Option<&str>) -> u32 {
        self.lock().spawn(comm, uid, exe.map(PathBuf::from))
    }

    /// Simulates a kernel with (`true`, the default) or without RT group
    /// scheduling.
    pub fn set_rt_groups(&self, on: bool) {
        let mut s = self.lock();
        s.sync();
        s.rt_groups = on;
        s.model.tree = None;
    }

    /// Whether groups name a CPU pressure file
    /// ([`Monitor::cpu_pressure_file`]): off by default, as the simulated
    /// machine has no PSI. On, every group names one under `/sim` (no file
    /// is there), so that a test can arm a fake pressure watch on it.
    pub fn set_pressure_files(&self, on: bool) {
        self.lock().pressure_files = on;
    }

    /// How many times `path`'s CPU pressure was read (`stats_of` selecting
    /// it).
    pub fn pressure_reads(&self, path: &GroupPath) -> u64 {
        self.lock().pressure_reads.get(path).copied().unwrap_or(0)
    }

    /// How many times `path`'s CPU time counter was read (`stats_of`
    /// selecting it).
    pub fn cpu_usage_reads(&self, path: &GroupPath) -> u64 {
        self.lock().cpu_usage_reads.get(path).copied().unwrap_or(0)
    }

    /// `execve` in `pid`: a new `comm` (cut to 15 bytes) and `exe`.
    pub fn exec(&self, pid: u32, comm: &str, exe: Option<&str>) -> Result<(), ProcessError> {
        self.lock().exec(pid, comm, exe.map(PathBuf::from))
    }

    /// Forks `parent` (same comm, uid, exe, cgroup and main-thread policy).
    pub fn spawn_child(&self, parent: u32) -> Result<u32, ProcessError> {
        self.lock().spawn_child(parent)
    }

    /// Starts a kernel thread.
    pub fn spawn_kernel_thread(&self, comm: &str) -> u32 {
        self.lock().spawn_kernel_thread(comm)
    }

    /// Adds a thread to `pid`; returns its tid.
    pub fn spawn_thread(&self, pid: u32) -> Result<u32, ProcessError> {
        self.lock().spawn_thread(pid)
    }

    /// Ends process `pid` (children go to init).
    pub fn exit(&self, pid: u32) -> Result<(), ProcessError> {
        self.lock().exit(pid)
    }

    /// Ends thread `tid` (the main thread ends the process).
    pub fn exit_thread(&self, tid: u32) -> Result<(), ProcessError> {
        self.lock().exit_thread(tid)
    }

    /// The pid the next spawn tries first (to make a pid be reused).
    pub fn set_next_pid(&self, pid: u32) {
        self.lock().next_pid = pid.max(1);
    }

    /// Marks all threads of `pid` runnable (`true`) or sleeping; threads
    /// added later start that way too.
    pub fn set_busy(&self, pid: u32, busy: bool) -> Result<(), ProcessError> {
        let mut s = self.lock();
        let p = s.process_mut(pid)?;
        p.busy = busy;
        let tids: Vec<u32> = p.threads.iter().copied().collect();
        for tid in tids {
            s.set_thread_runnable(tid, busy);
        }
        Ok(())
    }

    /// Marks one thread runnable (`true`) or sleeping.
    pub fn set_thread_busy(&self, tid: u32, busy: bool) -> Result<(), ProcessError> {
        let mut s = self.lock();
        s.sync();
        if !s.threads.contains_key(&tid) {
            return Err(ProcessError::Gone(tid));
        }
        s.set_thread_runnable(tid, busy);
        Ok(())
    }

    /// Whether thread `tid` is runnable (`None`: no such thread).
    pub fn thread_busy(&self, tid: u32) -> Option<bool> {
        self.lock().threads.get(&tid).map(|t| t.acct.runnable)
    }

    /// The CPUs thread `tid` gets now under the fluid model (0 when it
    /// sleeps; `None`: no such thread).
    pub fn thread_rate(&self, tid: u32) -> Option<f64> {
        let mut s = self.lock();
        s.sync();
        s.refresh();
        let t = s.threads.get(&tid)?;
        Some(s.rate_of(t))
    }

    /// How long thread `tid` would wait for a CPU if it woke now (see the
    /// wakeup model in `model::wake`).
    pub fn wake_delay(&self, tid: u32) -> Duration {
        let mut s = self.lock();
        s.sync();
        s.wake_delay(tid)
    }

    /// Gives runnable-or-not thread `tid` `cpu` of CPU work (replacing any
    /// left); it is due when the thread has received that much CPU time.
    /// The workload engine drives threads this way.
    pub fn set_thread_work(&self, tid: u32, cpu: Duration) -> Result<(), ProcessError> {
        let mut s = self.lock();
        s.sync();
        if !s.threads.contains_key(&tid) {
            return Err(ProcessError::Gone(tid));
        }
        s.set_thread_work(tid, cpu.as_nanos() as f64);
        Ok(())
    }

    /// When the first thread's work completes at the current rates.
    pub fn next_completion(&self) -> Option<Duration> {
        let mut s = self.lock();
        s.sync();
        s.next_completion().map(Duration::from_nanos)
    }

    /// Threads whose work has completed by now (their work is cleared).
    pub fn take_completed(&self) -> Vec<u32> {
        let mut s = self.lock();
        s.sync();
        let mut out = Vec::new();
        s.take_completed(&mut out);
        out
    }

    /// The kernel's default slice on this machine (EEVDF's base slice).
    pub fn base_slice(&self) -> Duration {
        Duration::from_nanos(self.lock().model.base_slice_ns)
    }

    /// What the CPU model has done so far.
    pub fn model_stats(&self) -> ModelStats {
        self.lock().model.stats
    }

    /// Sets the memory `pid` uses, bytes.
    pub fn set_memory(&self, pid: u32, bytes: u64) -> Result<(), ProcessError> {
        self.lock().process_mut(pid)?.memory = bytes;
        Ok(())
    }

    /// Moves `pid` out of atoll into `membership`, as another tool would.
    pub fn move_outside(&self, pid: u32, membership: CgroupMembership) -> Result<(), ProcessError> {
        self.lock().move_outside(pid, membership)
    }

    /// Where `pid` is, `None` if it does not exist.
    pub fn location(&self, pid: u32) -> Option<Location> {
        self.lock().procs.get(&pid).map(|p| p.location.clone())
    }

    /// Thread `tid`'s custom slice (`None`: the default, or no such thread).
    pub fn slice(&self, tid: u32) -> Option<Duration> {
        self.lock().slice(tid)
    }

    /// CPU time used by all threads of `pid` so far.
    pub fn cpu_time(&self, pid: u32) -> Option<Duration> {
        let mut s = self.lock();
        s.sync();
        let p = s.procs.get(&pid)?;
        let ns: f64 = p
            .threads
            .iter()
            .filter_map(|t| s.threads.get(t))
            .map(|t| s.cpu_ns_of(t))
            .sum();
        Some(Duration::from_nanos(saturating_u64(ns.round())))
    }

    /// CPU time used by thread `tid` so far.
    pub fn thread_cpu_time(&self, tid: u32) -> Option<Duration> {
        let mut s = self.lock();
        s.sync();
        s.threads
            .get(&tid)
            .map(|t| Duration::from_nanos(saturating_u64(s.cpu_ns_of(t).round())))
    }

    /// The settings last applied to a group.
    pub fn settings(&self, path: &GroupPath) -> Option<GroupSettings> {
        self.lock().groups.get(path).map(|g| g.settings.clone())
    }

    /// The CPUs a group's tasks may run on.
    pub fn effective_cpus(&self, path: &GroupPath) -> Option<CpuSet> {
        self.lock()
            .groups
            .get(path)
            .map(|g| g.effective_cpus.clone())
    }

    /// Whether a group's requested partition is in force (`false` also when
    /// none was requested).
    pub fn partition_valid(&self, path: &GroupPath) -> Option<bool> {
        self.lock().groups.get(path).map(|g| g.partition_valid)
    }
}

impl Actuator for SimPlatform {
    fn kind(&self) -> BackendKind {
        BackendKind::Sim
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            rt_groups: self.lock().rt_groups,
            ..SIM_CAPABILITIES
        }
    }

    fn root_name(&self) -> &str {
        &self.root
    }

    fn apply(
        &mut self,
        path: &GroupPath,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        self.lock().apply(path, settings)
    }

    fn remove(&mut self, path: &GroupPath) -> Result<(), BackendError> {
        self.lock().remove(path)
    }

    fn move_process(&mut self, pid: u32, to: &GroupPath) -> Result<(), BackendError> {
        self.lock().move_process(pid, to)
    }

    fn restore_process(&mut self, pid: u32, origin: &CgroupMembership) -> Result<(), BackendError> {
        self.lock().restore_process(pid, origin)
    }
}

impl Monitor for SimPlatform {
    fn exists(&self, path: &GroupPath) -> bool {
        self.lock().groups.contains_key(path)
    }

    /// `None` unless [`SimPlatform::set_pressure_files`] turned them on.
    fn cpu_pressure_file(&self, path: &GroupPath) -> Option<PathBuf> {
        let s = self.lock();
        (s.pressure_files && s.groups.contains_key(path)).then(|| {
            let mut p = PathBuf::from("/sim").join(&s.root);
            if !path.is_root() {
                p.push(path.as_str());
            }
            p.join("cpu.pressure")
        })
    }

    fn children(&self, path: &GroupPath) -> Result<Vec<String>, BackendError> {
        let s = self.lock();
        if !s.groups.contains_key(path) {
            return Err(BackendError::NoGroup(path.clone()));
        }
        Ok(s.children_of(path)
            .iter()
            .map(|c| {
                c.as_str()
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect())
    }

    /// Frozen when the group or an ancestor is (the simulated freezer
    /// stops tasks at once, so there is no `Freezing`).
    fn freeze_state(&self, path: &GroupPath) -> Result<Option<FreezeState>, BackendError> {
        let s = self.lock();
        if !s.groups.contains_key(path) {
            return Err(BackendError::NoGroup(path.clone()));
        }
        let mut at = Some(path.clone());
        while let Some(p) = at {
            if s.groups.get(&p).is_some_and(|g| g.settings.frozen) {
                return Ok(Some(FreezeState::Frozen));
            }
            at = p.parent();
        }
        Ok(Some(FreezeState::Thawed))
    }

    fn cpuset(&self, path: &GroupPath) -> Result<Option<atoll_core::CpuSet>, BackendError> {
        let s = self.lock();
        let g = s
            .groups
            .get(path)
            .ok_or_else(|| BackendError::NoGroup(path.clone()))?;
        Ok(g.settings.cpus.clone())
    }

    fn processes(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        let s = self.lock();
        let g = s
            .groups
            .get(path)
            .ok_or_else(|| BackendError::NoGroup(path.clone()))?;
        Ok(g.procs.iter().copied().collect())
    }

    /// The simulator has every figure at hand; it computes the selected
    /// ones (memory and IO sums cost a pass over processes and groups).
    fn stats_of(&self, path: &GroupPath, select: StatSelect) -> Result<GroupStats, BackendError> {
        let mut s = self.lock();
        s.sync();
        if !s.groups.contains_key(path) {
            return Err(BackendError::NoGroup(path.clone()));
        }
        s.fold_group(path);
        if select.cpu_pressure() {
            *s.pressure_reads.entry(path.clone()).or_default() += 1;
        }
        if select.cpu_usage {
            *s.cpu_usage_reads.entry(path.clone()).or_default() += 1;
        }
        let prefix = format!("{}/", path.as_str());
        let within =
            |at: &GroupPath| path.is_root() || at == path || at.as_str().starts_with(&prefix);
        let memory = select.memory.then(|| {
            s.procs
                .values()
                .filter(|p| match &p.location {
                    Location::Group(at) => within(at),
                    Location::Outside(_) => false,
                })
                .map(|p| p.memory)
                .sum::<u64>()
        });
        let io = select.io.then(|| {
            s.groups
                .iter()
                .filter(|(at, _)| within(at))
                .fold((0, 0), |(r, w), (_, g)| (r + g.io_read, w + g.io_write))
        });
        let g = &s.groups[path];
        Ok(GroupStats {
            cpu_usage_us: Some(saturating_u64((g.cpu.usage_ns / 1000.0).floor())),
            nr_periods: Some(g.cpu.nr_periods),
            nr_throttled: Some(g.cpu.nr_throttled),
            throttled_us: Some(saturating_u64((g.cpu.throttled_ns / 1000.0).floor())),
            memory_current: memory,
            io_read_bytes: io.map(|x| x.0),
            io_write_bytes: io.map(|x| x.1),
            cpu_pressure: Some(Psi {
                some: PsiLine {
                    total_us: saturating_u64((g.cpu.pressure_ns / 1000.0).floor()),
                    ..Default::default()
                },
                full: None,
            }),
            ..Default::default()
        })
    }
}

impl ProcessTable for SimPlatform {
    fn pids(&self) -> Result<Vec<u32>, ProcessError> {
        Ok(self.lock().procs.keys().copied().collect())
    }

    fn info(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        self.lock().info(pid)
    }

    fn threads(&self, pid: u32) -> Result<Vec<u32>, ProcessError> {
        let s = self.lock();
        let p = s.procs.get(&pid).ok_or(ProcessError::Gone(pid))?;
        Ok(p.threads.iter().copied().collect())
    }

    fn comm(&self, pid: u32) -> Result<String, ProcessError> {
        let s = self.lock();
        let p = s.procs.get(&pid).ok_or(ProcessError::Gone(pid))?;
        Ok(p.comm.clone())
    }

    /// Time runnable without a CPU: the fluid model's shortfall (`1 −
    /// rate` per runnable ns) plus wakeup delays.
    fn run_delay_ns(&self, tid: u32) -> Result<Option<u64>, ProcessError> {
        let mut s = self.lock();
        s.sync();
        let t = s.threads.get(&tid).ok_or(ProcessError::Gone(tid))?;
        Ok(Some(saturating_u64(s.wait_ns_of(t).round())))
    }
}

impl NetMonitor for SimPlatform {
    /// Sums the simulated sockets of each unit's processes (the workload
    /// engine's network path fills them).
    fn sample(
        &mut self,
        units: &BTreeMap<Name, Vec<u32>>,
    ) -> Result<BTreeMap<Name, UnitNetSample>, NetError> {
        let s = self.lock();
        Ok(units
            .iter()
            .map(|(unit, pids)| {
                let mut sum = UnitNetSample::default();
                for p in pids.iter().filter_map(|pid| s.procs.get(pid)) {
                    sum.add(&p.net);
                }
                (unit.clone(), sum)
            })
            .collect())
    }
}

impl atoll_core::process::SystemMonitor for SimPlatform {
    /// The simulated machine has no interrupts and no kernel memory model:
    /// the `kernel` account is the CPU time of its kernel threads.
    fn accounts(&self) -> Result<atoll_core::process::SystemAccounts, ProcessError> {
        let s = self.lock();
        let kernel: Vec<u32> = s
            .procs
            .iter()
            .filter(|(_, p)| p.kernel_thread)
            .map(|(pid, _)| *pid)
            .collect();
        drop(s);
        let us: u64 = kernel
            .iter()
            .filter_map(|pid| self.cpu_time(*pid))
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            .sum();
        Ok(atoll_core::process::SystemAccounts {
            kernel_cpu_us: us,
            ..Default::default()
        })
    }
}

impl TaskControl for SimPlatform {
    fn set_policy(&mut self, tid: u32, policy: TaskPolicy) -> Result<(), ProcessError> {
        self.lock().set_policy(tid, policy)
    }

    fn policy(&self, tid: u32) -> Result<TaskPolicy, ProcessError> {
        self.lock().policy(tid)
    }

    fn set_slice(&mut self, tid: u32, slice: Duration) -> Result<(), ProcessError> {
        self.lock().set_slice(tid, slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handle_is_send_and_clones_share_the_machine() {
        fn send<T: Send>() {}
        send::<SimPlatform>();
        let topo = Topology::synthetic(atoll_core::topology::SyntheticShape {
            packages: 1,
            nodes_per_package: 1,
            llcs_per_node: 1,
            cores_per_llc: 2,
            threads_per_core: 1,
            memory_per_node: 1 << 30,
        });
        let a = SimPlatform::new(topo, "atoll", ManualClock::new());
        let b = a.clone();
        let pid = a.spawn("x", 1, None);
        assert!(b.info(pid).is_ok());
        b.advance(Duration::from_millis(5));
        assert_eq!(a.now(), Duration::from_millis(5));
        assert_eq!(a.root_name(), "atoll");
    }
}
