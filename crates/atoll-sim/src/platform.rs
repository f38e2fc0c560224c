//! [`SimPlatform`]: the handle through which atoll and tests use a simulated
//! machine.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use atoll_core::backend::{
    Actuator, BackendError, BackendKind, Capabilities, Fallback, GroupStats, Monitor, Psi, PsiLine,
    StatSelect,
};
use atoll_core::clock::{Clock, ManualClock};
use atoll_core::plan::{GroupPath, GroupSettings, TaskPolicy};
use atoll_core::process::{CgroupMembership, ProcessError, ProcessInfo, ProcessTable, TaskControl};
use atoll_core::topology::Topology;
use atoll_core::CpuSet;

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

    fn lock(&self) -> MutexGuard<'_, SimState> {
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
        self.lock().rt_groups = on;
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

    /// Marks all threads of `pid` runnable (`true`) or sleeping.
    pub fn set_busy(&self, pid: u32, busy: bool) -> Result<(), ProcessError> {
        self.lock().process_mut(pid)?.busy = busy;
        Ok(())
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

    /// CPU time used by all threads of `pid` so far.
    pub fn cpu_time(&self, pid: u32) -> Option<Duration> {
        let mut s = self.lock();
        s.sync();
        let p = s.procs.get(&pid)?;
        let ns: f64 = p
            .threads
            .iter()
            .filter_map(|t| s.threads.get(t))
            .map(|t| t.cpu_ns)
            .sum();
        Some(Duration::from_nanos(ns.round() as u64))
    }

    /// CPU time used by thread `tid` so far.
    pub fn thread_cpu_time(&self, tid: u32) -> Option<Duration> {
        let mut s = self.lock();
        s.sync();
        s.threads
            .get(&tid)
            .map(|t| Duration::from_nanos(t.cpu_ns.round() as u64))
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

    fn processes(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        let s = self.lock();
        let g = s
            .groups
            .get(path)
            .ok_or_else(|| BackendError::NoGroup(path.clone()))?;
        Ok(g.procs.iter().copied().collect())
    }

    /// The simulator has every figure at hand and returns them all.
    fn stats_of(&self, path: &GroupPath, _: StatSelect) -> Result<GroupStats, BackendError> {
        let mut s = self.lock();
        s.sync();
        let g = s
            .groups
            .get(path)
            .ok_or_else(|| BackendError::NoGroup(path.clone()))?;
        let prefix = format!("{}/", path.as_str());
        let memory: u64 = s
            .procs
            .values()
            .filter(|p| match &p.location {
                Location::Group(at) => {
                    path.is_root() || at == path || at.as_str().starts_with(&prefix)
                }
                Location::Outside(_) => false,
            })
            .map(|p| p.memory)
            .sum();
        Ok(GroupStats {
            cpu_usage_us: Some((g.cpu.usage_ns / 1000.0).floor() as u64),
            nr_periods: Some(g.cpu.nr_periods),
            nr_throttled: Some(g.cpu.nr_throttled),
            throttled_us: Some((g.cpu.throttled_ns / 1000.0).floor() as u64),
            memory_current: Some(memory),
            cpu_pressure: Some(Psi {
                some: PsiLine {
                    total_us: (g.cpu.pressure_ns / 1000.0).floor() as u64,
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
