//! Giving everything back: processes to the cgroups they came from, groups
//! removed deepest first, then whatever the backend changed outside the
//! root, then the state file.

use std::time::Duration;

use atoll_core::backend::BackendError;
use atoll_core::decision::{Action, Reason};
use atoll_core::plan::{GroupPath, TaskPolicy};
use atoll_core::process::CgroupMembership;

use crate::controller::{Controller, ControllerError};
use crate::state;

/// Rounds of emptying groups before giving up (a process may fork while
/// its parent is being moved).
const ROUNDS: usize = 10;

/// How long teardown waits for groups whose tasks are still exiting.
pub const BUSY_WAIT: Duration = Duration::from_secs(5);
const BUSY_PAUSE: Duration = Duration::from_millis(100);

/// Whether `e` is the kernel's "group still has tasks" (`EBUSY`).
fn is_busy(e: &BackendError) -> bool {
    matches!(e, BackendError::Io { source, .. } if source.raw_os_error() == Some(libc::EBUSY))
}

impl Controller {
    /// Every group under atoll's root that exists in the kernel, deepest
    /// first, the root last.
    pub(crate) fn kernel_groups(&self) -> Vec<GroupPath> {
        let mut out = Vec::new();
        let mut stack = vec![(GroupPath::root(), 0usize)];
        while let Some((g, depth)) = stack.pop() {
            if depth < 4 {
                for child in self.env.backend.children(&g).unwrap_or_default() {
                    let p = if g.is_root() {
                        GroupPath::from_relative(&child)
                    } else {
                        GroupPath::from_relative(&format!("{}/{child}", g.as_str()))
                    };
                    stack.push((p, depth + 1));
                }
            }
            out.push(g);
        }
        out.sort_by_key(|g| std::cmp::Reverse(g.depth()));
        out
    }

    /// Moves every process of `group` back to its origin; returns how many
    /// moved.
    pub(crate) fn release_group(&mut self, group: &GroupPath, why: Reason) -> usize {
        let pids = self.env.backend.processes(group).unwrap_or_default();
        let group_policy = self.group_policy(group);
        let mut moved = 0;
        for pid in pids {
            let origin = self.origin_of(pid);
            let back_to = self
                .reg
                .managed(pid)
                .and_then(|m| m.original_policy)
                .or((group_policy != TaskPolicy::Other).then_some(TaskPolicy::Other));
            if let Some(p) = back_to {
                self.set_policy(pid, p, why.clone());
            }
            match self.env.backend.restore_process(pid, &origin) {
                Ok(()) => {
                    let to = origin
                        .unified()
                        .filter(|p| *p != "/" || origin.entries.len() == 1)
                        .or_else(|| origin.controller("cpu"))
                        .unwrap_or("/")
                        .to_string();
                    self.decide(Action::RestoreProcess { pid, to }, why.clone());
                    moved += 1;
                }
                Err(e) if e.is_gone() => {}
                Err(e) => tracing::warn!("returning pid {pid} from {group}: {e}"),
            }
            self.reg.forget(pid);
            self.dirty = true;
        }
        moved
    }

    /// Where a process goes back to: its own origin if atoll moved it;
    /// else, walking up its parents, the first origin atoll recorded or the
    /// current cgroups of the first ancestor outside atoll; else where the
    /// daemon itself runs.
    pub(crate) fn origin_of(&self, pid: u32) -> CgroupMembership {
        let mut cur = pid;
        for _ in 0..64 {
            if cur <= 1 {
                break;
            }
            if let Some(m) = self.reg.managed(cur) {
                if let Some(o) = &m.origin {
                    return o.clone();
                }
                cur = m.ppid;
                continue;
            }
            match self.env.procs.info(cur) {
                Ok(info) if self.in_atoll(&info.cgroups).is_none() => return info.cgroups,
                Ok(info) => cur = info.ppid,
                Err(_) => break,
            }
        }
        self.outside_atoll(&self.opts.self_origin)
    }

    /// `m` with every path inside atoll's root replaced by the root's parent
    /// (the top of the hierarchy): a process must never be "returned" into a
    /// group that is about to be removed. (A daemon restarted from a shell
    /// that atoll had adopted runs inside atoll's root itself.)
    pub(crate) fn outside_atoll(&self, m: &CgroupMembership) -> CgroupMembership {
        let root = format!("/{}", self.env.backend.root_name());
        let entries = m
            .entries
            .iter()
            .map(|(k, v)| {
                let inside = v
                    .strip_prefix(&root)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
                (k.clone(), if inside { "/".to_string() } else { v.clone() })
            })
            .collect();
        CgroupMembership { entries }
    }

    /// Returns every process and removes every group atoll made.
    ///
    /// The isolation model's throttles (disk holds, idle CPU priority) are
    /// lifted first: a task killed while held on disk finishes its queued
    /// IO before it leaves its group, and at the trickle rate that keeps
    /// the group busy for seconds. A group that is still busy (a task is
    /// exiting) is tried again for up to [`BUSY_WAIT`].
    pub fn teardown(&mut self) -> Result<(), ControllerError> {
        self.lift_isolation();
        self.end_boosts();
        for _ in 0..ROUNDS {
            let groups = self.kernel_groups();
            let moved: usize = groups
                .iter()
                .map(|g| self.release_group(g, Reason::Teardown))
                .sum();
            if moved == 0 {
                break;
            }
        }
        let mut left = Vec::new();
        let tries = (BUSY_WAIT.as_millis() / BUSY_PAUSE.as_millis()).max(1) as usize;
        for attempt in 1..=tries {
            left.clear();
            let mut busy = false;
            for g in self.kernel_groups() {
                match self.env.backend.remove(&g) {
                    Ok(()) => {
                        self.applied.remove(&g);
                        self.decide(Action::RemoveGroup { path: g }, Reason::Teardown);
                    }
                    Err(e) => {
                        busy |= is_busy(&e);
                        left.push(format!("{g} ({e})"));
                    }
                }
            }
            if !busy || attempt == tries {
                break;
            }
            std::thread::sleep(BUSY_PAUSE);
            for g in self.kernel_groups() {
                self.release_group(&g, Reason::Teardown);
            }
        }
        match self.env.backend.release() {
            Ok(lines) => lines.iter().for_each(|l| tracing::info!("teardown: {l}")),
            Err(e) => left.push(format!("backend release ({e})")),
        }
        if left.is_empty() {
            if let Some(dir) = &self.opts.state_dir {
                state::remove(dir)?;
            }
            Ok(())
        } else {
            self.save();
            Err(ControllerError::Leftover(left.join(", ")))
        }
    }
}
