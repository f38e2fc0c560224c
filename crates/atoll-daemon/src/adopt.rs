//! Moving processes into units and the host partition.
//!
//! Three ways in:
//! - adoption rules in the config, matched against processes the scan finds
//!   (a new process keeps being matched for [`YOUNG_FOR`], since it may still
//!   `exec` into the program a rule names);
//! - `[host] adopt_all`, which sends every other user-space task to the host
//!   partition;
//! - the API (`adopt`, and `atoll run`, which starts its command paused and
//!   adopts it before it runs).
//!
//! The scan lists `/proc` every epoch but reads details only of pids it has
//! not settled yet, so its cost follows the rate of new processes, not their
//! number. A young process is looked at again after 1, 2, 4, ... epochs,
//! with one small read (`comm`), and matched again only if it `exec`ed. Without rules and without `adopt_all` it only prunes exited
//! processes, once a second.

use atoll_core::decision::{Action, Reason};
use atoll_core::plan::{GroupPath, TaskPolicy};
use atoll_core::process::{match_rule, CgroupMembership, ProcessInfo};
use atoll_core::Name;
use atoll_proto::{ErrorCode, Reply};

use crate::command::Caller;
use crate::controller::{Controller, Seen, YOUNG_FOR};
use crate::registry::Managed;

/// An API error: code and message.
pub(crate) type ApiFailure = (ErrorCode, String);

impl Controller {
    /// Process `pid` for an API request of `caller`: it must exist, not be
    /// a kernel thread, and belong to the caller (root may name any).
    pub(crate) fn process_of(
        &self,
        caller: Caller,
        pid: u32,
    ) -> Result<atoll_core::process::ProcessInfo, ApiFailure> {
        let info = self
            .env
            .procs
            .info(pid)
            .map_err(|e| (ErrorCode::NotFound, format!("pid {pid}: {e}")))?;
        if info.kernel_thread {
            return Err((
                ErrorCode::BadRequest,
                format!("pid {pid} ({}) is a kernel thread", info.comm),
            ));
        }
        if !caller.is_root() && info.uid != caller.uid {
            return Err((
                ErrorCode::PermissionDenied,
                format!(
                    "pid {pid} ({}) belongs to uid {}, not to the caller (uid {})",
                    info.comm, info.uid, caller.uid
                ),
            ));
        }
        Ok(info)
    }

    fn has_rules(&self) -> bool {
        self.reg.spec().host.adopt_all || self.reg.units().any(|(u, _)| !u.adopt.is_empty())
    }

    /// Whether a membership places the process inside atoll's root.
    pub(crate) fn in_atoll(&self, m: &CgroupMembership) -> Option<GroupPath> {
        let root = format!("/{}", self.env.backend.root_name());
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

    /// Finds processes to adopt and forgets exited ones. `prune` forces a
    /// listing even when there is nothing to adopt.
    pub(crate) fn scan(&mut self, prune: bool) {
        let rules = self.has_rules();
        if !rules && !prune {
            return;
        }
        let pids = match self.env.procs.pids() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("listing processes: {e}");
                return;
            }
        };
        let live: std::collections::HashSet<u32> = pids.iter().copied().collect();
        self.seen.retain(|p, _| live.contains(p));
        let gone: Vec<u32> = self
            .reg
            .all_managed()
            .filter(|(p, _)| !live.contains(p))
            .map(|(p, _)| p)
            .collect();
        for pid in gone {
            self.reg.forget(pid);
            self.dirty = true;
        }
        if !rules {
            return;
        }
        let now = self.now();
        let epoch = self.epoch_len();
        for pid in pids {
            let seen = self.seen.entry(pid).or_insert(Seen {
                first: now,
                settled: false,
                comm: None,
                next: now,
            });
            if seen.settled || now < seen.next {
                continue;
            }
            seen.next =
                (now + now.saturating_sub(seen.first).max(epoch)).min(seen.first + YOUNG_FOR);
            let old = now.saturating_sub(seen.first) >= YOUNG_FOR;
            let last_comm = seen.comm.clone();
            // A young process seen before is matched again only if it
            // exec'd since: one small read instead of four.
            let comm = match self.env.procs.comm(pid) {
                Ok(c) => c,
                Err(_) => {
                    self.seen.remove(&pid);
                    continue;
                }
            };
            let settled = if last_comm.as_ref() == Some(&comm) {
                old
            } else {
                self.consider(pid) || old
            };
            if let Some(s) = self.seen.get_mut(&pid) {
                s.settled = settled;
                s.comm = Some(comm);
            }
        }
    }

    /// Matches one process against the rules; returns whether it is settled
    /// (placed in a unit, gone, or not to be touched).
    fn consider(&mut self, pid: u32) -> bool {
        if pid == self.opts.self_pid && !self.reg.spec().host.adopt_all {
            return true;
        }
        let Ok(info) = self.env.procs.info(pid) else {
            return true;
        };
        if info.kernel_thread {
            return true;
        }
        let current = self.in_atoll(&info.cgroups);
        if current.as_ref().is_some_and(|g| g != &GroupPath::host()) {
            return true; // already in a unit: rules never move it again
        }
        let units: Vec<(Name, Vec<atoll_core::spec::AdoptRule>)> = self
            .reg
            .units()
            .map(|(u, _)| (u.name.clone(), u.adopt.clone()))
            .collect();
        let matched = match_rule(units.iter().map(|(n, r)| (n, r.as_slice())), &info)
            .map(|(n, r)| (n.clone(), r.clone()));
        if let Some((unit, rule)) = matched {
            let Some(group) = self.reg.unit_group(unit.as_str()) else {
                return true;
            };
            let why = Reason::Rule {
                unit: unit.to_string(),
                rule,
            };
            let _ = self.move_into(&info, &group, why);
            return true;
        }
        if self.reg.spec().host.adopt_all && current.is_none() {
            let _ = self.move_into(&info, &GroupPath::host(), Reason::HostAdoptAll);
        }
        false
    }

    /// Moves a process into `group`, applies the group's task policy, and
    /// records it. The origin kept is where it was before atoll first moved
    /// it.
    pub(crate) fn move_into(
        &mut self,
        info: &ProcessInfo,
        group: &GroupPath,
        why: Reason,
    ) -> Result<(), atoll_core::backend::BackendError> {
        if let Err(e) = self.env.backend.move_process(info.pid, group) {
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
        let policy = self.group_policy(group);
        let current_policy = self.env.tasks.policy(info.pid).ok();
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
            },
        );
        self.dirty = true;
        Ok(())
    }

    /// The scheduling policy of tasks in `group` (the host partition and
    /// unknown groups: SCHED_OTHER).
    pub(crate) fn group_policy(&self, group: &GroupPath) -> TaskPolicy {
        self.reg
            .unit_at(group)
            .and_then(|u| {
                let island = self.reg.spec().island(&u.island)?;
                Some(atoll_core::plan::task_policy(island, Some(u)))
            })
            .unwrap_or(TaskPolicy::Other)
    }

    /// Sets `policy` on every thread of `pid`.
    pub(crate) fn set_policy(&mut self, pid: u32, policy: TaskPolicy, why: Reason) {
        let threads = self.env.procs.threads(pid).unwrap_or_else(|_| vec![pid]);
        let mut changed = 0;
        for tid in threads {
            match self.env.tasks.set_policy(tid, policy) {
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

    /// The API's `adopt`: checks the caller may, creates the unit if needed,
    /// moves the process. On failure nothing is left changed.
    pub(crate) fn api_adopt(
        &mut self,
        caller: Caller,
        summary: &str,
        unit: &str,
        pid: u32,
        island: Option<&str>,
    ) -> Result<Reply, ApiFailure> {
        let bad = |m: String| (ErrorCode::BadRequest, m);
        let unit_name = Name::new(unit).map_err(|e| bad(e.to_string()))?;
        if unit_name.is_reserved() {
            return Err(bad(format!("{unit:?} is reserved")));
        }
        let info = self.process_of(caller, pid)?;
        let (island_name, created) = match self.reg.unit(unit) {
            Some((u, _)) => {
                if let Some(i) = island.filter(|i| *i != u.island.as_str()) {
                    return Err(bad(format!(
                        "unit {unit} is in island {}, not {i}",
                        u.island
                    )));
                }
                (u.island.clone(), false)
            }
            None => {
                let island = match island {
                    Some(i) => self
                        .reg
                        .spec()
                        .island(&Name::new(i).map_err(|e| bad(e.to_string()))?),
                    None => self.reg.spec().default_island(),
                }
                .ok_or_else(|| {
                    (
                        ErrorCode::NotFound,
                        format!("no island {:?}", island.unwrap_or("(default)")),
                    )
                })?;
                (island.name.clone(), true)
            }
        };
        let group = GroupPath::unit(&island_name, &unit_name);
        if !caller.is_root() && !created {
            self.check_unit_owner(caller, unit, &group)?;
        }
        let why = Reason::Api {
            uid: caller.uid,
            request: summary.to_string(),
        };
        if created {
            self.reg
                .add_runtime_unit(unit_name.clone(), island_name.clone());
            self.decide(
                Action::CreateUnit {
                    unit: unit.to_string(),
                    island: island_name.to_string(),
                },
                why.clone(),
            );
            if let Err(e) = self.reconcile(why.clone()) {
                self.undo_unit(unit, &group, &why);
                return Err((ErrorCode::Backend, format!("creating unit {unit}: {e}")));
            }
        }
        let why_undo = why.clone();
        if let Err(e) = self.move_into(&info, &group, why) {
            if created {
                self.undo_unit(unit, &group, &why_undo);
            }
            let code = if e.is_gone() {
                ErrorCode::NotFound
            } else {
                ErrorCode::Backend
            };
            return Err((code, format!("moving pid {pid} into {group}: {e}")));
        }
        if let Some(s) = self.seen.get_mut(&pid) {
            s.settled = true;
        }
        Ok(Reply::Adopted {
            unit: unit.to_string(),
            island: island_name.to_string(),
            created,
        })
    }

    /// Removes a unit this request created, when the request fails.
    fn undo_unit(&mut self, unit: &str, group: &GroupPath, why: &Reason) {
        self.reg.remove_runtime_unit(unit);
        if self.env.backend.remove(group).is_ok() {
            self.decide(
                Action::RemoveGroup {
                    path: group.clone(),
                },
                why.clone(),
            );
        }
        self.decide(
            Action::RemoveUnit {
                unit: unit.to_string(),
            },
            why.clone(),
        );
        self.applied.remove(group);
        if let Err(e) = self.reconcile(Reason::Config) {
            tracing::warn!("re-applying after a failed request: {e}");
        }
    }

    fn check_unit_owner(
        &self,
        caller: Caller,
        unit: &str,
        group: &GroupPath,
    ) -> Result<(), ApiFailure> {
        for p in self.env.backend.processes(group).unwrap_or_default() {
            if let Ok(i) = self.env.procs.info(p) {
                if i.uid != caller.uid {
                    return Err((
                        ErrorCode::PermissionDenied,
                        format!(
                            "unit {unit} holds pid {p} ({}) of uid {}; uid {} may act only on units whose processes it owns",
                            i.comm, i.uid, caller.uid
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
