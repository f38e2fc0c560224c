//! RT budgets where the kernel cannot enforce them.
//!
//! A realtime island promises its tasks SCHED_FIFO/RR within a budget
//! (`rt_runtime_us` per `rt_period_us`). With cgroup v1 the kernel enforces
//! it per group (`cpu.rt_runtime_us`); most cgroup v2 kernels (Debian's
//! among them) are built without RT group scheduling, so the backend reports
//! a fallback and atoll enforces the budget itself:
//!
//! - each unit of a realtime island has a window of one RT period;
//! - every epoch the unit's CPU time in the window is read from its group;
//! - once it exceeds the unit's share of the island budget, the unit's
//!   threads are demoted to SCHED_OTHER for the rest of the window (and any
//!   that join while it is throttled are demoted too);
//! - when the window ends, they get their RT policy back.
//!
//! The granularity is one epoch (30 ms by default), so a unit may overrun
//! its budget by up to an epoch's worth of CPU per CPU it runs on; the
//! kernel's own RT throttling (`sched_rt_runtime_us`, 95% by default) still
//! bounds the whole machine. Every demotion and restoration is a decision
//! with its reason.

use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::plan::{island_rt_budget, GroupPath, TaskPolicy};
use atoll_core::spec::SchedPolicy;

use crate::controller::Controller;

/// One unit's current RT window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RtWindow {
    start: Duration,
    base_us: u64,
    throttled: bool,
}

/// A realtime unit: its group, policy, budget per period.
struct RtUnit {
    name: String,
    group: GroupPath,
    policy: TaskPolicy,
    runtime_us: u64,
    period_us: u64,
}

impl Controller {
    fn rt_units(&self) -> Vec<RtUnit> {
        let spec = self.reg.spec();
        spec.islands
            .iter()
            .filter(|i| matches!(i.policy, SchedPolicy::Realtime(_)))
            .flat_map(|island| {
                let members: Vec<_> = self
                    .reg
                    .units()
                    .filter(|(u, _)| u.island == island.name)
                    .map(|(u, _)| u)
                    .collect();
                let budget = island_rt_budget(island);
                let n = members.len().max(1) as u64;
                members.into_iter().filter_map(move |u| {
                    let b = budget?;
                    let group = GroupPath::unit(&island.name, &u.name);
                    // A coordination tune moves the unit's budget.
                    let tuned = self
                        .coord
                        .merge_unit(island, &u.name, Default::default())
                        .rt_budget;
                    Some(RtUnit {
                        name: u.name.to_string(),
                        group,
                        policy: atoll_core::plan::task_policy(island, Some(u)),
                        runtime_us: tuned.map_or(b.runtime_us / n, |t| t.runtime_us),
                        period_us: b.period_us,
                    })
                })
            })
            .collect()
    }

    /// Enforces RT budgets in user space when the backend cannot.
    pub(crate) fn guard_rt_budgets(&mut self) {
        if self.env.backend.capabilities().rt_groups {
            return;
        }
        let now = self.now();
        for u in self.rt_units() {
            let Some(used) = self
                .env
                .backend
                .stats(&u.group)
                .ok()
                .and_then(|s| s.cpu_usage_us)
            else {
                continue;
            };
            let w = *self.rt_windows.entry(u.group.clone()).or_insert(RtWindow {
                start: now,
                base_us: used,
                throttled: false,
            });
            let in_window = used.saturating_sub(w.base_us);
            let why = |exhausted| Reason::RtBudget {
                unit: u.name.clone(),
                used_us: in_window,
                runtime_us: u.runtime_us,
                period_us: u.period_us,
                exhausted,
            };
            if now.saturating_sub(w.start) >= Duration::from_micros(u.period_us) {
                self.rt_windows.insert(
                    u.group.clone(),
                    RtWindow {
                        start: now,
                        base_us: used,
                        throttled: false,
                    },
                );
                if w.throttled {
                    self.set_group_policy(&u.group, u.policy, why(false), false);
                }
            } else if in_window > u.runtime_us {
                self.set_group_policy(&u.group, TaskPolicy::Other, why(true), w.throttled);
                if let Some(w) = self.rt_windows.get_mut(&u.group) {
                    w.throttled = true;
                }
            }
        }
    }

    /// Sets `policy` on every process of `group`; with `only_changed`, only
    /// on those not already under it (cheap to repeat every epoch).
    fn set_group_policy(
        &mut self,
        group: &GroupPath,
        policy: TaskPolicy,
        why: Reason,
        only_changed: bool,
    ) {
        for pid in self.env.backend.processes(group).unwrap_or_default() {
            if only_changed && self.env.tasks.policy(pid).ok() == Some(policy) {
                continue;
            }
            self.set_policy(pid, policy, why.clone());
        }
    }
}
