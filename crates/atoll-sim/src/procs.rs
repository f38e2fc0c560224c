//! Simulated processes and threads: life cycle, placement and policies.
//!
//! Processes start outside atoll (`/user.slice`; kernel threads in `/`), are
//! moved into atoll's leaves by [`move_process`](SimState::move_process) and
//! back out by [`restore_process`](SimState::restore_process). A child
//! inherits its parent's group and its main thread's policy, as after
//! `fork(2)`. `comm` is cut to 15 bytes as the kernel does. Exiting the main
//! thread exits the whole process.

use std::io;
use std::path::PathBuf;

use atoll_core::backend::BackendError;
use atoll_core::plan::{GroupPath, TaskPolicy};
use atoll_core::process::{CgroupMembership, ProcessError, ProcessInfo};

use crate::groups::admits_rt;
use crate::state::{busy, invalid, Location, Process, SimState};

/// The kernel's `TASK_COMM_LEN` minus the terminating NUL.
const COMM_MAX: usize = 15;

fn truncate_comm(comm: &str) -> &str {
    let mut end = comm.len().min(COMM_MAX);
    while !comm.is_char_boundary(end) {
        end -= 1;
    }
    &comm[..end]
}

fn describe(policy: TaskPolicy) -> String {
    match policy {
        TaskPolicy::Other => "SCHED_OTHER".into(),
        TaskPolicy::Batch => "SCHED_BATCH".into(),
        TaskPolicy::Idle => "SCHED_IDLE".into(),
        TaskPolicy::Fifo(p) => format!("SCHED_FIFO priority {p}"),
        TaskPolicy::Rr(p) => format!("SCHED_RR priority {p}"),
    }
}

impl SimState {
    /// Starts a user process outside atoll; returns its pid.
    pub fn spawn(&mut self, comm: &str, uid: u32, exe: Option<PathBuf>) -> u32 {
        self.sync();
        let pid = self.alloc_pid();
        self.insert_process(pid, uid, truncate_comm(comm), exe, false, "/user.slice");
        pid
    }

    /// Starts a kernel thread (child of kthreadd, root cgroup, no exe).
    pub fn spawn_kernel_thread(&mut self, comm: &str) -> u32 {
        self.sync();
        let pid = self.alloc_pid();
        self.insert_process(pid, 0, truncate_comm(comm), None, true, "/");
        pid
    }

    /// Forks `parent`: same comm, uid, exe, group and main-thread policy.
    pub fn spawn_child(&mut self, parent: u32) -> Result<u32, ProcessError> {
        self.sync();
        let p = self
            .procs
            .get(&parent)
            .ok_or(ProcessError::Gone(parent))?
            .clone();
        let policy = self
            .threads
            .get(&parent)
            .map_or(TaskPolicy::Other, |t| t.policy);
        let pid = self.alloc_pid();
        let child = Process {
            ppid: parent,
            start_ticks: self.ticks_now(),
            busy: false,
            memory: 0,
            net: Default::default(),
            threads: [pid].into(),
            location: Location::Outside(CgroupMembership::default()),
            ..p
        };
        self.procs.insert(pid, child);
        self.add_thread(pid, pid, policy);
        self.place(pid, p.location);
        Ok(pid)
    }

    /// `execve` in process `pid`: a new `comm` and `exe`, same pid, group
    /// and start time.
    pub fn exec(&mut self, pid: u32, comm: &str, exe: Option<PathBuf>) -> Result<(), ProcessError> {
        let p = self.procs.get_mut(&pid).ok_or(ProcessError::Gone(pid))?;
        p.comm = truncate_comm(comm).to_string();
        p.exe = exe;
        Ok(())
    }

    /// Adds a thread to process `pid`, with the main thread's policy.
    pub fn spawn_thread(&mut self, pid: u32) -> Result<u32, ProcessError> {
        self.sync();
        if !self.procs.contains_key(&pid) {
            return Err(ProcessError::Gone(pid));
        }
        let policy = self
            .threads
            .get(&pid)
            .map_or(TaskPolicy::Other, |t| t.policy);
        let tid = self.alloc_pid();
        self.add_thread(tid, pid, policy);
        if let Some(p) = self.procs.get_mut(&pid) {
            p.threads.insert(tid);
        }
        Ok(tid)
    }

    /// Ends process `pid` and all its threads; its children are reparented
    /// to init.
    pub fn exit(&mut self, pid: u32) -> Result<(), ProcessError> {
        self.sync();
        let p = self.procs.remove(&pid).ok_or(ProcessError::Gone(pid))?;
        if let Location::Group(g) = &p.location {
            if let Some(g) = self.groups.get_mut(g) {
                g.procs.remove(&pid);
            }
        }
        for tid in &p.threads {
            self.drop_thread(*tid);
            self.threads.remove(tid);
        }
        for child in self.procs.values_mut().filter(|c| c.ppid == pid) {
            child.ppid = 1;
        }
        Ok(())
    }

    /// Ends one thread; ending the main thread ends the process.
    pub fn exit_thread(&mut self, tid: u32) -> Result<(), ProcessError> {
        self.sync();
        let pid = self.threads.get(&tid).ok_or(ProcessError::Gone(tid))?.pid;
        if pid == tid {
            return self.exit(pid);
        }
        self.drop_thread(tid);
        self.threads.remove(&tid);
        if let Some(p) = self.procs.get_mut(&pid) {
            p.threads.remove(&tid);
        }
        Ok(())
    }

    /// The process, mutably, after bringing the model up to date.
    pub fn process_mut(&mut self, pid: u32) -> Result<&mut Process, ProcessError> {
        self.sync();
        self.procs.get_mut(&pid).ok_or(ProcessError::Gone(pid))
    }

    /// Moves a whole process into a leaf group.
    pub fn move_process(&mut self, pid: u32, to: &GroupPath) -> Result<(), BackendError> {
        self.sync();
        let group = self
            .groups
            .get(to)
            .ok_or_else(|| BackendError::NoGroup(to.clone()))?;
        let p = self.procs.get(&pid).ok_or(BackendError::NoProcess(pid))?;
        let knob = self.knob_path(to, "cgroup.procs");
        if p.kernel_thread {
            return Err(invalid(
                knob,
                pid.to_string(),
                "kernel threads cannot be moved".into(),
            ));
        }
        if self.has_children(to) {
            return Err(busy(
                "write",
                knob,
                Some(pid.to_string()),
                format!("group {to} has child groups; only leaves hold processes"),
            ));
        }
        if self.has_rt_threads(pid) && !admits_rt(self.rt_groups, group) {
            return Err(invalid(
                knob,
                pid.to_string(),
                "the process has RT threads and the group has no RT budget".into(),
            ));
        }
        self.place(pid, Location::Group(to.clone()));
        Ok(())
    }

    /// Puts a process back where `origin` says. An origin inside atoll's
    /// hierarchy is resolved to its nearest existing group if that is a leaf,
    /// else to the machine's root cgroup.
    pub fn restore_process(
        &mut self,
        pid: u32,
        origin: &CgroupMembership,
    ) -> Result<(), BackendError> {
        self.sync();
        if !self.procs.contains_key(&pid) {
            return Err(BackendError::NoProcess(pid));
        }
        let machine_root = || {
            let mut m = CgroupMembership::default();
            m.entries.insert(String::new(), "/".into());
            Location::Outside(m)
        };
        let prefix = format!("/{}", self.root);
        let inside = origin.unified().and_then(|u| {
            let rest = u.strip_prefix(&prefix)?;
            (rest.is_empty() || rest.starts_with('/')).then(|| GroupPath::from_relative(rest))
        });
        let to = match inside {
            Some(mut g) => loop {
                if self.groups.contains_key(&g) {
                    break if !self.has_children(&g) {
                        Location::Group(g)
                    } else {
                        machine_root()
                    };
                }
                match g.parent() {
                    Some(p) => g = p,
                    None => break machine_root(),
                }
            },
            None if origin.entries.is_empty() => machine_root(),
            None => Location::Outside(origin.clone()),
        };
        self.place(pid, to);
        Ok(())
    }

    /// Moves a process out of atoll into `membership`, as another tool
    /// would.
    pub fn move_outside(
        &mut self,
        pid: u32,
        membership: CgroupMembership,
    ) -> Result<(), ProcessError> {
        self.sync();
        if !self.procs.contains_key(&pid) {
            return Err(ProcessError::Gone(pid));
        }
        self.place(pid, Location::Outside(membership));
        Ok(())
    }

    /// The cgroups of `p` as `/proc/PID/cgroup` would show them.
    pub fn membership(&self, p: &Process) -> CgroupMembership {
        match &p.location {
            Location::Outside(m) => m.clone(),
            Location::Group(g) => {
                let mut m = CgroupMembership::default();
                m.entries.insert(String::new(), self.cgroup_path(g));
                m
            }
        }
    }

    /// What `/proc` would say of `pid`.
    pub fn info(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        let p = self.procs.get(&pid).ok_or(ProcessError::Gone(pid))?;
        Ok(ProcessInfo {
            pid,
            ppid: p.ppid,
            uid: p.uid,
            comm: p.comm.clone(),
            exe: p.exe.clone(),
            start_ticks: p.start_ticks,
            kernel_thread: p.kernel_thread,
            cgroups: self.membership(p),
        })
    }

    /// Sets a fair-class thread's custom slice under the kernel's rules:
    /// zero (the default again) or 100 µs..=100 ms, fair policies only.
    pub fn set_slice(&mut self, tid: u32, slice: std::time::Duration) -> Result<(), ProcessError> {
        self.sync();
        let sys = |errno: i32| ProcessError::Sys {
            call: "sched_setattr",
            tid,
            value: format!("slice {}us", slice.as_micros()),
            source: io::Error::from_raw_os_error(errno),
        };
        let range = std::time::Duration::from_micros(100)..=std::time::Duration::from_millis(100);
        if tid == 0 || (!slice.is_zero() && !range.contains(&slice)) {
            return Err(sys(libc::EINVAL));
        }
        let t = self.threads.get_mut(&tid).ok_or(ProcessError::Gone(tid))?;
        if !matches!(t.policy, TaskPolicy::Other | TaskPolicy::Batch) {
            return Err(sys(libc::EINVAL));
        }
        t.slice = (!slice.is_zero()).then_some(slice);
        Ok(())
    }

    /// A thread's custom slice (`None`: the default).
    pub fn slice(&self, tid: u32) -> Option<std::time::Duration> {
        self.threads.get(&tid).and_then(|t| t.slice)
    }

    /// Sets a thread's policy under the kernel's rules: RT priorities
    /// 1..=99, and RT only in groups with an RT budget (`EPERM`).
    pub fn set_policy(&mut self, tid: u32, policy: TaskPolicy) -> Result<(), ProcessError> {
        self.sync();
        let sys = |errno: i32| ProcessError::Sys {
            call: "sched_setscheduler",
            tid,
            value: describe(policy),
            source: io::Error::from_raw_os_error(errno),
        };
        if tid == 0 {
            return Err(sys(libc::EINVAL));
        }
        let pid = self.threads.get(&tid).ok_or(ProcessError::Gone(tid))?.pid;
        if let TaskPolicy::Fifo(p) | TaskPolicy::Rr(p) = policy {
            if !(1..=99).contains(&p) {
                return Err(sys(libc::EINVAL));
            }
            if let Some(Location::Group(g)) = self.procs.get(&pid).map(|p| &p.location) {
                if !self
                    .groups
                    .get(g)
                    .is_some_and(|g| admits_rt(self.rt_groups, g))
                {
                    return Err(sys(libc::EPERM));
                }
            }
        }
        if let Some(t) = self.threads.get_mut(&tid) {
            t.policy = policy;
        }
        self.reclass(tid);
        Ok(())
    }

    /// A thread's policy.
    pub fn policy(&self, tid: u32) -> Result<TaskPolicy, ProcessError> {
        self.threads
            .get(&tid)
            .map(|t| t.policy)
            .ok_or(ProcessError::Gone(tid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_is_cut_to_fifteen_bytes_on_a_char_boundary() {
        assert_eq!(truncate_comm("short"), "short");
        assert_eq!(truncate_comm("a-very-long-process-name"), "a-very-long-pro");
        assert_eq!(truncate_comm("ééééééééé"), "ééééééé");
        assert!(crate::state::is_rt(TaskPolicy::Rr(1)) && !crate::state::is_rt(TaskPolicy::Batch));
    }
}
