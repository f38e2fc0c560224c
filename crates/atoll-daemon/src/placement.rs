//! Where processes are: moving them into atoll's groups and back out, and
//! the scheduling policies of their threads.
//!
//! Every step that moves a process or sets a task policy goes through a
//! [`Placement`]: adoption, the applications' units, the RT guard,
//! coordination's RT boosts, recovery and teardown. It borrows the parts
//! of the daemon this takes (the backend, the process table, task control,
//! the registry of moved processes and the decision log) for one step.
//!
//! A process atoll moves is recorded with its *origin* (the cgroups it was
//! in) and the policy it had, so it can be given back exactly.

use std::time::Duration;

use atoll_core::backend::{Backend, BackendError};
use atoll_core::decision::{Action, Decision, Reason};
use atoll_core::plan::{GroupPath, TaskPolicy};
use atoll_core::process::{CgroupMembership, ProcessInfo, ProcessTable, TaskControl};

use crate::decisions::DecisionLog;
use crate::registry::{Managed, Registry};

/// The parts of the daemon that moving processes takes, for one step.
pub struct Placement<'a> {
    /// The kernel's groups.
    pub backend: &'a mut dyn Backend,
    /// Processes.
    pub procs: &'a dyn ProcessTable,
    /// Scheduling policies.
    pub tasks: &'a mut dyn TaskControl,
    /// What atoll manages.
    pub reg: &'a mut Registry,
    /// Decisions.
    pub log: &'a mut DecisionLog,
    /// Now, on the loop's clock.
    pub now: Duration,
    /// Where the daemon itself runs (the origin of last resort).
    pub self_origin: &'a CgroupMembership,
}

impl Placement<'_> {
    /// Records a decision now.
    pub fn decide(&mut self, action: Action, why: Reason) {
        self.log.record(Decision {
            at: self.now,
            action,
            why,
        });
    }

    /// Where a membership places the process inside atoll's root.
    pub fn in_atoll(&self, m: &CgroupMembership) -> Option<GroupPath> {
        self.backend.group_of(m)
    }

    /// The scheduling policy of tasks in `group` (the host partition and
    /// unknown groups: SCHED_OTHER).
    pub fn group_policy(&self, group: &GroupPath) -> TaskPolicy {
        group_policy(self.reg, group)
    }

    /// Moves a process into `group`, applies the group's task policy, and
    /// records it. The origin kept is where it was before atoll first moved
    /// it.
    pub fn move_into(
        &mut self,
        info: &ProcessInfo,
        group: &GroupPath,
        why: Reason,
    ) -> Result<(), BackendError> {
        if let Err(e) = self.backend.move_process(info.pid, group) {
            tracing::debug!("moving pid {} ({}) to {group}: {e}", info.pid, info.comm);
            return Err(e);
        }
        let previous = self.reg.forget(info.pid);
        let origin = match &previous {
            Some(m) => m.origin.clone(),
            None if self.in_atoll(&info.cgroups).is_some() => None,
            None => Some(info.cgroups.clone()),
        };
        let mut original_policy = previous.as_ref().and_then(|m| m.original_policy);
        // Who placed it: a user other than root through the API; anything
        // else (root, a rule of the config, adopt_all, an application's
        // schedule) is root's.
        let placed_by = match &why {
            Reason::Api { uid, .. } if *uid != 0 => Some(*uid),
            _ => None,
        };
        let policy = self.group_policy(group);
        let current_policy = self.tasks.policy(info.pid).ok();
        if current_policy != Some(policy) {
            if original_policy.is_none() {
                original_policy = current_policy;
            }
            self.set_policy(info.pid, policy, why.clone());
        }
        self.decide(
            Action::MoveProcess {
                pid: info.pid,
                comm: info.comm.clone(),
                to: group.clone(),
            },
            why,
        );
        self.reg.manage(
            info.pid,
            Managed {
                start_ticks: info.start_ticks,
                group: group.clone(),
                origin,
                original_policy,
                comm: info.comm.clone(),
                uid: info.uid,
                ppid: info.ppid,
                placed_by,
            },
        );
        Ok(())
    }

    /// Sets `policy` on every thread of `pid`.
    pub fn set_policy(&mut self, pid: u32, policy: TaskPolicy, why: Reason) {
        let threads = self.procs.threads(pid).unwrap_or_else(|_| vec![pid]);
        let mut changed = 0;
        for tid in threads {
            match self.tasks.set_policy(tid, policy) {
                Ok(()) => changed += 1,
                Err(e) => tracing::warn!("setting {policy:?} on thread {tid} of pid {pid}: {e}"),
            }
        }
        if changed > 0 {
            self.decide(
                Action::SetPolicy {
                    pid,
                    policy,
                    threads: changed,
                },
                why,
            );
        }
    }

    /// Sets `policy` on every process of `group`; with `only_changed`, only
    /// on those not already under it (cheap to repeat every epoch).
    pub fn set_group_policy(
        &mut self,
        group: &GroupPath,
        policy: TaskPolicy,
        why: Reason,
        only_changed: bool,
    ) {
        for pid in self.backend.processes(group).unwrap_or_default() {
            if only_changed && self.tasks.policy(pid).ok() == Some(policy) {
                continue;
            }
            self.set_policy(pid, policy, why.clone());
        }
    }

    /// Moves every process of `group` back to its origin; returns how many
    /// moved.
    pub fn release_group(&mut self, group: &GroupPath, why: Reason) -> usize {
        let pids = self.backend.processes_anywhere(group).unwrap_or_default();
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
            match self.backend.restore_process(pid, &origin) {
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
        }
        moved
    }

    /// Where a process goes back to: its own origin if atoll moved it;
    /// else, walking up its parents, the first origin atoll recorded or the
    /// current cgroups of the first ancestor outside atoll; else where the
    /// daemon itself runs.
    pub fn origin_of(&self, pid: u32) -> CgroupMembership {
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
            match self.procs.info(cur) {
                // Still inside atoll's tree in some hierarchy (moved out of
                // the others by someone): those paths are not an origin.
                Ok(info) if self.in_atoll(&info.cgroups).is_none() => {
                    return outside_atoll(self.backend.root_name(), &info.cgroups)
                }
                Ok(info) => cur = info.ppid,
                Err(_) => break,
            }
        }
        outside_atoll(self.backend.root_name(), self.self_origin)
    }
}

/// `m` with every path inside the root named `root` replaced by the
/// root's parent (the top of the hierarchy): a process must never be
/// "returned" into a group that is about to be removed. (A daemon restarted
/// from a shell that atoll had adopted runs inside atoll's root itself.)
pub fn outside_atoll(root: &str, m: &CgroupMembership) -> CgroupMembership {
    let root = format!("/{root}");
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

/// The scheduling policy of tasks in `group` (the host partition and
/// unknown groups: SCHED_OTHER).
pub fn group_policy(reg: &Registry, group: &GroupPath) -> TaskPolicy {
    reg.unit_at(group)
        .and_then(|u| {
            let island = reg.island(&u.island)?;
            Some(atoll_core::plan::task_policy(island, Some(u)))
        })
        .unwrap_or(TaskPolicy::Other)
}
