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

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::plan::{island_rt_budget, GroupPath, TaskPolicy};
use atoll_core::spec::SchedPolicy;

use crate::coord::Coordination;
use crate::placement::Placement;
use crate::registry::Registry;

/// One unit's current RT window.
#[derive(Clone, Copy, Debug)]
struct RtWindow {
    start: Duration,
    base_us: u64,
    throttled: bool,
}

/// A realtime unit: its group, policy, budget per period.
#[derive(Clone, Debug)]
pub struct RtUnit {
    name: String,
    group: GroupPath,
    policy: TaskPolicy,
    runtime_us: u64,
    period_us: u64,
}

/// The realtime units of the platform with their budgets (a coordination
/// tune moves a unit's budget).
pub fn rt_units(reg: &Registry, coord: &Coordination) -> Vec<RtUnit> {
    let spec = reg.spec();
    spec.islands
        .iter()
        .filter(|i| matches!(i.policy, SchedPolicy::Realtime(_)))
        .flat_map(|island| {
            let members: Vec<_> = reg.units_of(&island.name).collect();
            let budget = island_rt_budget(island);
            let n = members.len().max(1) as u64;
            members.into_iter().filter_map(move |u| {
                let b = budget?;
                let tuned = coord.tuned_rt_budget(island, &u.name);
                Some(RtUnit {
                    name: u.name.to_string(),
                    group: GroupPath::unit(&island.name, &u.name),
                    policy: atoll_core::plan::task_policy(island, Some(u)),
                    runtime_us: tuned.map_or(b.runtime_us / n, |t| t.runtime_us),
                    period_us: b.period_us,
                })
            })
        })
        .collect()
}

/// The RT guard's state: each realtime unit's window.
#[derive(Debug, Default)]
pub struct RtGuard {
    windows: BTreeMap<GroupPath, RtWindow>,
}

impl RtGuard {
    /// Enforces the RT budgets of `units` (see the module docs). Call only
    /// where the backend has no RT group scheduling.
    pub fn guard(&mut self, units: &[RtUnit], p: &mut Placement<'_>) {
        let now = p.now;
        for u in units {
            let Some(used) = p.backend.stats(&u.group).ok().and_then(|s| s.cpu_usage_us) else {
                continue;
            };
            let w = *self.windows.entry(u.group.clone()).or_insert(RtWindow {
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
                self.windows.insert(
                    u.group.clone(),
                    RtWindow {
                        start: now,
                        base_us: used,
                        throttled: false,
                    },
                );
                if w.throttled {
                    p.set_group_policy(&u.group, u.policy, why(false), false);
                }
            } else if in_window > u.runtime_us {
                p.set_group_policy(&u.group, TaskPolicy::Other, why(true), w.throttled);
                if let Some(w) = self.windows.get_mut(&u.group) {
                    w.throttled = true;
                }
            }
        }
        self.windows
            .retain(|g, _| units.iter().any(|u| &u.group == g));
    }
}
