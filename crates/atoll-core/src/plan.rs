//! From a spec to the cgroup hierarchy atoll owns.
//!
//! ```text
//! <root>/                 every CPU and node atoll manages
//! ├── host/               the host partition (unmanaged tasks, if adopted;
//! │                       absent when the host partition has no CPUs)
//! ├── <island>/           cpuset partition (v2 root/isolated, v1 cpu_exclusive)
//! │   ├── <unit>/         a leaf: the unit's processes, weights, caps, limits
//! │   └── <unit>/
//! └── <island>/ ...
//! ```
//!
//! Processes live only in leaves (`host` and units), which satisfies cgroup
//! v2's no-internal-process rule. [`plan`] is pure: it says what each group
//! should look like; a backend's actuator makes the kernel agree and reports
//! where it had to fall back.
//!
//! How entitlements become knobs:
//! - `weight` wins; otherwise `cpus = N` gives weight `100 * N` (one CPU's
//!   worth is the default weight), clamped to 1..=10000.
//! - `cpu_cap = C` gives `cpu.max = C * 100000 100000`.
//! - RT budgets (v1 RT group scheduling: a group with `cpu.rt_runtime_us` 0
//!   admits no SCHED_FIFO/RR task), all at a common 1 s period
//!   ([`rt_budgets`]): a realtime island has its configured budget; a
//!   `fair`, `batch` or `idle` island, and the host partition, a small
//!   default ([`RT_DEFAULT_RUNTIME_US`], 5 % of the period) so that the
//!   SCHED_FIFO programs people run there (`cyclictest`, audio, watchdogs)
//!   keep working; each island's budget is split evenly among its units; the
//!   root's is the sum of its children's, at most [`RT_ROOT_MAX_US`], the
//!   kernel's default global limit. The defaults take only what the
//!   realtime islands leave of that, so every child fits in its parent.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::num::saturating_u64;
use crate::spec::{
    IoLimit, IslandSpec, MemoryEntitlement, PlatformSpec, RtClass, SchedPolicy, UnitSpec,
    DEFAULT_CPU_PERIOD_US,
};
use crate::weight::cpus_to_weight;
use crate::{CpuSet, NodeSet};

/// Name of the host partition's group.
pub const HOST_GROUP: &str = "host";
/// Common RT period for the root and island groups, µs.
pub const RT_PERIOD_US: u64 = 1_000_000;
/// Most of the RT period atoll's root may take (the kernel's default global
/// limit is 950000 of 1000000).
pub const RT_ROOT_MAX_US: u64 = 950_000;
/// RT runtime per [`RT_PERIOD_US`] of a group whose policy is not realtime
/// (a `fair`, `batch` or `idle` island, the host partition), split among an
/// island's units: 5 % of the period. Enough for the short bursts of the
/// SCHED_FIFO programs people run anywhere (latency probes, audio threads,
/// watchdogs) and, since a v1 budget is per CPU, little enough that a
/// runaway SCHED_FIFO task there cannot take more than 5 % of any CPU from
/// the island's other tasks.
pub const RT_DEFAULT_RUNTIME_US: u64 = 50_000;

/// A group's path relative to atoll's root: `""` (the root), `"host"`,
/// `"web"`, `"web/api"`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GroupPath(String);

impl GroupPath {
    /// atoll's root group.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// The host partition.
    pub fn host() -> Self {
        Self(HOST_GROUP.into())
    }

    /// An island's group.
    pub fn island(name: &crate::Name) -> Self {
        Self(name.as_str().into())
    }

    /// A unit's leaf group.
    pub fn unit(island: &crate::Name, unit: &crate::Name) -> Self {
        Self(format!("{island}/{unit}"))
    }

    /// From a relative path already known to be valid (e.g. read back from
    /// a state file); components are not re-checked.
    pub fn from_relative(s: &str) -> Self {
        Self(s.trim_matches('/').to_string())
    }

    /// The path as a relative string (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is atoll's root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// Nesting depth: 0 for the root.
    pub fn depth(&self) -> usize {
        if self.0.is_empty() {
            0
        } else {
            self.0.matches('/').count() + 1
        }
    }

    /// The parent group, `None` for the root.
    pub fn parent(&self) -> Option<Self> {
        if self.is_root() {
            return None;
        }
        Some(match self.0.rsplit_once('/') {
            Some((p, _)) => Self(p.to_string()),
            None => Self::root(),
        })
    }
}

impl fmt::Display for GroupPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("/")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// `cpu.max` (v2) or `cfs_quota_us`/`cfs_period_us` (v1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuMax {
    /// Quota per period, µs.
    pub quota_us: u64,
    /// Period, µs.
    pub period_us: u64,
}

impl CpuMax {
    /// The kernel's least quota, µs (1 ms).
    pub const MIN_QUOTA_US: u64 = 1000;

    /// A cap of `cpus` CPUs over the default period (100 ms): the quota is
    /// rounded to the nearest µs and at least [`Self::MIN_QUOTA_US`]; NaN
    /// and negative caps give that least quota, absurdly large ones
    /// saturate at `u64::MAX`.
    pub fn for_cpus(cpus: f64) -> Self {
        Self::for_cpus_over(cpus, DEFAULT_CPU_PERIOD_US)
    }

    /// A cap of `cpus` CPUs over a period of `period_us` (the caller keeps
    /// it within the kernel's 1 ms..=1 s), the quota as in
    /// [`Self::for_cpus`].
    pub fn for_cpus_over(cpus: f64, period_us: u64) -> Self {
        let quota = saturating_u64((cpus * period_us as f64).round());
        CpuMax {
            quota_us: quota.max(Self::MIN_QUOTA_US),
            period_us,
        }
    }
}

/// RT budget of a group (v1 `cpu.rt_runtime_us` / `cpu.rt_period_us`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtBudget {
    /// Runtime per period, µs.
    pub runtime_us: u64,
    /// Period, µs.
    pub period_us: u64,
}

/// How a group's CPUs are set apart from its siblings'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Partition {
    /// Shares CPUs with no exclusivity.
    Member,
    /// Exclusive CPUs with load balancing (v2 `root`, v1 `cpu_exclusive`).
    Root,
}

/// What one group should look like. `None` leaves the kernel's default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupSettings {
    /// `cpuset.cpus`.
    pub cpus: Option<CpuSet>,
    /// `cpuset.mems`.
    pub mems: Option<NodeSet>,
    /// Exclusivity of the CPUs; `None` = member.
    pub partition: Option<Partition>,
    /// `cpu.weight` (v1: converted to `cpu.shares`).
    pub cpu_weight: Option<u32>,
    /// `cpu.max`.
    pub cpu_max: Option<CpuMax>,
    /// `cpu.idle`.
    pub cpu_idle: bool,
    /// RT budget (v1 only; v2 has no RT group scheduling on common kernels).
    pub rt_budget: Option<RtBudget>,
    /// The RT budget is room for SCHED_FIFO/RR programs in a group whose
    /// policy is not realtime (see [`RT_DEFAULT_RUNTIME_US`]), not one the
    /// platform description promises: where the kernel has no RT group
    /// scheduling, RT tasks need no group budget, so its absence is no
    /// fallback there.
    #[serde(default)]
    pub rt_budget_optional: bool,
    /// Memory protection and limits.
    pub memory: MemoryEntitlement,
    /// `io.weight` (v1: converted to `blkio.weight`).
    pub io_weight: Option<u32>,
    /// `io.max` (v1: `blkio.throttle.*`).
    pub io_max: Vec<IoLimit>,
    /// Tasks of the group are stopped (cgroup freezer) while true: v2
    /// `cgroup.freeze`, v1 `freezer.state`. Used to suspend a unit and resume
    /// it later; `false` (the default) leaves them running.
    #[serde(default)]
    pub frozen: bool,
}

/// The per-task scheduling policy atoll applies to tasks in a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy", content = "priority", rename_all = "lowercase")]
pub enum TaskPolicy {
    /// SCHED_OTHER.
    Other,
    /// SCHED_BATCH.
    Batch,
    /// SCHED_IDLE.
    Idle,
    /// SCHED_FIFO at this priority.
    Fifo(u8),
    /// SCHED_RR at this priority.
    Rr(u8),
}

/// One group of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedGroup {
    /// Where.
    pub path: GroupPath,
    /// What.
    pub settings: GroupSettings,
    /// Policy for tasks placed in it; `None` for interior groups.
    pub task_policy: Option<TaskPolicy>,
}

/// The whole hierarchy, parents before children.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupPlan {
    /// Groups in creation order.
    pub groups: Vec<PlannedGroup>,
}

impl GroupPlan {
    /// The planned group at `path`.
    pub fn get(&self, path: &GroupPath) -> Option<&PlannedGroup> {
        self.groups.iter().find(|g| &g.path == path)
    }
}

/// The task policy for a unit's tasks in `island`.
pub fn task_policy(island: &IslandSpec, unit: Option<&UnitSpec>) -> TaskPolicy {
    match &island.policy {
        SchedPolicy::Fair => TaskPolicy::Other,
        SchedPolicy::Batch => TaskPolicy::Batch,
        SchedPolicy::Idle => TaskPolicy::Idle,
        SchedPolicy::Realtime(rt) => {
            let p = unit
                .and_then(|u| u.rt_priority)
                .unwrap_or(rt.priority_min)
                .clamp(rt.priority_min, rt.priority_max);
            match rt.class {
                RtClass::Fifo => TaskPolicy::Fifo(p),
                RtClass::Rr => TaskPolicy::Rr(p),
            }
        }
    }
}

/// The settings of a unit's leaf group in `island`, given how many units the
/// island has and the island's RT budget (from [`rt_budgets`]), which is
/// split evenly among them.
pub fn unit_settings(
    island: &IslandSpec,
    unit: &UnitSpec,
    units_in_island: usize,
    island_rt: Option<RtBudget>,
) -> GroupSettings {
    let e = &unit.entitlement;
    let cpu_weight = e.weight.or_else(|| e.cpus.map(cpus_to_weight));
    let cpu_max = e.cpu_cap.map(CpuMax::for_cpus);
    let rt_budget = island_rt
        .map(|b| RtBudget {
            runtime_us: b.runtime_us / units_in_island.max(1) as u64,
            period_us: b.period_us,
        })
        .filter(|b| b.runtime_us > 0);
    GroupSettings {
        cpu_weight,
        cpu_max,
        cpu_idle: matches!(island.policy, SchedPolicy::Idle),
        rt_budget,
        rt_budget_optional: !is_realtime(island),
        memory: e.memory.clone(),
        io_weight: e.io.weight,
        io_max: e.io.limits.clone(),
        ..Default::default()
    }
}

/// A realtime island's configured RT budget at the common period (`None`
/// for other policies; their default is in [`rt_budgets`]).
pub fn island_rt_budget(island: &IslandSpec) -> Option<RtBudget> {
    match &island.policy {
        SchedPolicy::Realtime(rt) => Some(RtBudget {
            runtime_us: rt.runtime_us * RT_PERIOD_US / rt.period_us.max(1),
            period_us: RT_PERIOD_US,
        }),
        _ => None,
    }
}

fn is_realtime(island: &IslandSpec) -> bool {
    matches!(island.policy, SchedPolicy::Realtime(_))
}

/// The RT budgets of atoll's groups below the root's parent, all at
/// [`RT_PERIOD_US`]: `None` where a group gets none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtBudgets {
    /// atoll's root: the sum of the others, at most [`RT_ROOT_MAX_US`].
    pub root: Option<RtBudget>,
    /// The host partition (when it has CPUs): the default.
    pub host: Option<RtBudget>,
    /// Each island, in the spec's order: its configured budget if realtime,
    /// else the default.
    pub islands: Vec<Option<RtBudget>>,
}

/// The RT budget of every island and of the host partition, and the root's.
///
/// Realtime islands get what they are configured with. The others, and the
/// host partition, get [`RT_DEFAULT_RUNTIME_US`] each, or an equal share of
/// what the realtime islands leave of [`RT_ROOT_MAX_US`] when that is less
/// (none when they leave nothing). The root gets the sum, at most
/// [`RT_ROOT_MAX_US`]; realtime islands asking for more than that together
/// are refused by the kernel, which the backend reports.
pub fn rt_budgets(spec: &PlatformSpec) -> RtBudgets {
    let at_period = |runtime_us: u64| RtBudget {
        runtime_us,
        period_us: RT_PERIOD_US,
    };
    let configured: Vec<Option<RtBudget>> = spec.islands.iter().map(island_rt_budget).collect();
    let rt_sum: u64 = configured.iter().flatten().map(|b| b.runtime_us).sum();
    let host = !spec.host.cpus.is_empty();
    let defaults = spec.islands.iter().filter(|i| !is_realtime(i)).count() + usize::from(host);
    let room = RT_ROOT_MAX_US.saturating_sub(rt_sum);
    let each = if defaults == 0 {
        0
    } else {
        RT_DEFAULT_RUNTIME_US.min(room / defaults as u64)
    };
    let default = (each > 0).then(|| at_period(each));
    let islands: Vec<Option<RtBudget>> = configured
        .into_iter()
        .zip(&spec.islands)
        .map(|(c, i)| if is_realtime(i) { c } else { default })
        .collect();
    let host = if host { default } else { None };
    let total: u64 = islands
        .iter()
        .chain([&host])
        .flatten()
        .map(|b| b.runtime_us)
        .sum();
    RtBudgets {
        root: (total > 0).then(|| at_period(total.min(RT_ROOT_MAX_US))),
        host,
        islands,
    }
}

/// Plans the hierarchy for `spec` and its units (config units first, then
/// `runtime_units`, created through the API). Units whose island is unknown
/// are skipped: validation reports them.
pub fn plan(spec: &PlatformSpec, runtime_units: &[UnitSpec]) -> GroupPlan {
    let all_cpus = spec
        .islands
        .iter()
        .fold(spec.host.cpus.clone(), |acc, i| acc.union(&i.cpus));
    let all_mems = spec
        .islands
        .iter()
        .fold(spec.host.mems.clone(), |acc, i| acc.union(&i.mems));
    let rt = rt_budgets(spec);
    let mut groups = vec![PlannedGroup {
        path: GroupPath::root(),
        settings: GroupSettings {
            cpus: Some(all_cpus),
            mems: Some(all_mems),
            rt_budget: rt.root,
            rt_budget_optional: !spec.islands.iter().any(is_realtime),
            ..Default::default()
        },
        task_policy: None,
    }];
    if !spec.host.cpus.is_empty() {
        groups.push(PlannedGroup {
            path: GroupPath::host(),
            settings: GroupSettings {
                cpus: Some(spec.host.cpus.clone()),
                mems: Some(spec.host.mems.clone()),
                rt_budget: rt.host,
                rt_budget_optional: true,
                ..Default::default()
            },
            task_policy: Some(TaskPolicy::Other),
        });
    }
    let units: Vec<&UnitSpec> = spec.units.iter().chain(runtime_units).collect();
    for (island, island_rt) in spec.islands.iter().zip(rt.islands) {
        groups.push(PlannedGroup {
            path: GroupPath::island(&island.name),
            settings: GroupSettings {
                cpus: Some(island.cpus.clone()),
                mems: Some(island.mems.clone()),
                // A partition takes the CPUs from everything else: only
                // when the island asks for it.
                partition: island.exclusive.then_some(Partition::Root),
                cpu_idle: matches!(island.policy, SchedPolicy::Idle),
                rt_budget: island_rt,
                rt_budget_optional: !is_realtime(island),
                ..Default::default()
            },
            task_policy: None,
        });
        let members: Vec<&&UnitSpec> = units.iter().filter(|u| u.island == island.name).collect();
        for unit in &members {
            groups.push(PlannedGroup {
                path: GroupPath::unit(&island.name, &unit.name),
                settings: unit_settings(island, unit, members.len(), island_rt),
                task_policy: Some(task_policy(island, Some(unit))),
            });
        }
    }
    GroupPlan { groups }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::{n, set, spec16};
    use crate::spec::{Entitlement, UnitSpec};

    #[test]
    fn group_paths() {
        let p = GroupPath::unit(&n("web"), &n("api"));
        assert_eq!(p.as_str(), "web/api");
        assert_eq!(p.depth(), 2);
        assert_eq!(p.parent(), Some(GroupPath::island(&n("web"))));
        assert_eq!(p.parent().unwrap().parent(), Some(GroupPath::root()));
        assert_eq!(GroupPath::root().parent(), None);
        assert_eq!(GroupPath::root().to_string(), "/");
        assert_eq!(GroupPath::from_relative("/web/api/"), p);
    }

    #[test]
    fn plans_root_host_islands_and_units_in_order() {
        let extra = UnitSpec {
            name: n("batch1"),
            island: n("rt"),
            entitlement: Entitlement {
                weight: Some(300),
                ..Default::default()
            },
            adopt: vec![],
            rt_priority: Some(20),
        };
        let plan = plan(&spec16(), std::slice::from_ref(&extra));
        let paths: Vec<_> = plan.groups.iter().map(|g| g.path.as_str()).collect();
        assert_eq!(paths, ["", "host", "web", "web/api", "rt", "rt/batch1"]);
        let root = &plan.groups[0].settings;
        assert_eq!(root.cpus, Some(set("0-15")));
        assert_eq!(root.mems, Some(set("0-1")));
        // The realtime island's 500 ms, and 50 ms each for web and host.
        assert_eq!(root.rt_budget.unwrap().runtime_us, 600_000);
        let api = plan.get(&GroupPath::from_relative("web/api")).unwrap();
        assert_eq!(api.settings.cpu_weight, Some(200));
        assert_eq!(
            api.settings.cpu_max,
            Some(CpuMax {
                quota_us: 400_000,
                period_us: 100_000
            })
        );
        assert_eq!(api.task_policy, Some(TaskPolicy::Other));
        let b = plan.get(&GroupPath::from_relative("rt/batch1")).unwrap();
        assert_eq!(b.settings.cpu_weight, Some(300));
        assert_eq!(b.task_policy, Some(TaskPolicy::Fifo(20)));
        assert_eq!(b.settings.rt_budget.unwrap().runtime_us, 500_000);
        // Islands share their CPUs unless they ask for them alone.
        assert_eq!(plan.groups[2].settings.partition, None);
        let mut s = spec16();
        s.islands[0].exclusive = true;
        let plan = super::plan(&s, &[]);
        assert_eq!(plan.groups[2].settings.partition, Some(Partition::Root));
        assert_eq!(plan.groups[4].settings.partition, None);
    }

    #[test]
    fn frozen_is_off_by_default_and_may_be_absent_when_read() {
        assert!(!GroupSettings::default().frozen);
        let s = GroupSettings {
            frozen: true,
            cpu_weight: Some(300),
            ..Default::default()
        };
        let mut v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["frozen"], true);
        v.as_object_mut().unwrap().remove("frozen");
        let back: GroupSettings = serde_json::from_value(v).unwrap();
        assert_eq!(back, GroupSettings { frozen: false, ..s });
    }

    #[test]
    fn an_empty_host_partition_has_no_group() {
        let mut spec = spec16();
        spec.host.cpus = CpuSet::new();
        spec.host.mems = CpuSet::new();
        let plan = plan(&spec, &[]);
        assert!(plan.get(&GroupPath::host()).is_none());
        assert_eq!(plan.groups[0].settings.cpus, Some(set("1-7,9-15")));
    }

    #[test]
    fn rt_budget_is_split_among_units_and_rescaled_to_the_common_period() {
        let mut spec = spec16();
        if let SchedPolicy::Realtime(rt) = &mut spec.islands[1].policy {
            rt.runtime_us = 20_000;
            rt.period_us = 100_000;
        }
        let mk = |name: &str| UnitSpec {
            name: n(name),
            island: n("rt"),
            entitlement: Entitlement::default(),
            adopt: vec![],
            rt_priority: None,
        };
        let plan = plan(&spec, &[mk("a"), mk("b")]);
        let island = plan.get(&GroupPath::from_relative("rt")).unwrap();
        assert_eq!(island.settings.rt_budget.unwrap().runtime_us, 200_000);
        let a = plan.get(&GroupPath::from_relative("rt/a")).unwrap();
        assert_eq!(a.settings.rt_budget.unwrap().runtime_us, 100_000);
        assert_eq!(a.task_policy, Some(TaskPolicy::Fifo(10)));
        assert!(!island.settings.rt_budget_optional && !a.settings.rt_budget_optional);
    }

    fn budget(plan: &GroupPlan, path: &str) -> Option<u64> {
        let g = plan.get(&GroupPath::from_relative(path)).unwrap();
        g.settings.rt_budget.map(|b| {
            assert_eq!(b.period_us, RT_PERIOD_US, "{path}");
            b.runtime_us
        })
    }

    fn optional(plan: &GroupPlan, path: &str) -> bool {
        plan.get(&GroupPath::from_relative(path))
            .unwrap()
            .settings
            .rt_budget_optional
    }

    fn fair_unit(name: &str, island: &str) -> UnitSpec {
        UnitSpec {
            name: n(name),
            island: n(island),
            entitlement: Entitlement::default(),
            adopt: vec![],
            rt_priority: None,
        }
    }

    #[test]
    fn fair_batch_and_idle_islands_and_the_host_get_a_default_rt_budget() {
        let mut spec = spec16();
        spec.islands[1].policy = SchedPolicy::Batch;
        let mut idle = spec.islands[1].clone();
        idle.name = n("slow");
        idle.policy = SchedPolicy::Idle;
        idle.cpus = set("15");
        spec.islands[1].cpus = set("4-7,12-14");
        spec.islands.push(idle);
        let runtime = [fair_unit("probe", "web"), fair_unit("b1", "rt")];
        let plan = plan(&spec, &runtime);
        // web: api and probe share 50 ms; rt (batch) and slow (idle) 50 ms.
        assert_eq!(budget(&plan, "web"), Some(RT_DEFAULT_RUNTIME_US));
        assert_eq!(budget(&plan, "web/api"), Some(25_000));
        assert_eq!(budget(&plan, "web/probe"), Some(25_000));
        assert_eq!(budget(&plan, "rt"), Some(50_000));
        assert_eq!(budget(&plan, "rt/b1"), Some(50_000));
        assert_eq!(budget(&plan, "slow"), Some(50_000));
        assert_eq!(budget(&plan, "host"), Some(50_000));
        assert_eq!(budget(&plan, ""), Some(4 * 50_000), "the root has the sum");
        // None of these is a promise: no fallback without RT group scheduling.
        for g in ["", "host", "web", "web/api", "rt", "rt/b1", "slow"] {
            assert!(optional(&plan, g), "{g}");
        }
        // Every parent covers its children.
        for g in &plan.groups {
            let Some(parent) = g.path.parent() else {
                continue;
            };
            let kids: u64 = plan
                .groups
                .iter()
                .filter(|c| c.path.parent().as_ref() == Some(&parent))
                .filter_map(|c| c.settings.rt_budget)
                .map(|b| b.runtime_us)
                .sum();
            let have = budget(&plan, parent.as_str()).unwrap_or(0);
            assert!(kids <= have, "children of {parent} take {kids} of {have}");
        }
    }

    #[test]
    fn defaults_take_only_what_the_realtime_islands_leave() {
        let mut spec = spec16();
        let set_rt = |spec: &mut PlatformSpec, runtime_us| {
            if let SchedPolicy::Realtime(rt) = &mut spec.islands[1].policy {
                rt.runtime_us = runtime_us;
            }
        };
        // 900 ms realtime leaves 50 ms for web and host: 25 ms each.
        set_rt(&mut spec, 900_000);
        let p = plan(&spec, &[]);
        assert_eq!(budget(&p, "rt"), Some(900_000));
        assert_eq!(budget(&p, "web"), Some(25_000));
        assert_eq!(budget(&p, "host"), Some(25_000));
        assert_eq!(budget(&p, ""), Some(RT_ROOT_MAX_US));
        assert!(!optional(&p, ""), "a realtime island's budget is a promise");
        // Nothing left: no default budget at all, and the root is capped.
        set_rt(&mut spec, 990_000);
        let p = plan(&spec, &[]);
        assert_eq!(budget(&p, "web"), None);
        assert_eq!(budget(&p, "web/api"), None);
        assert_eq!(budget(&p, "host"), None);
        assert_eq!(budget(&p, ""), Some(RT_ROOT_MAX_US));
        let b = rt_budgets(&spec);
        assert_eq!(
            b.islands,
            [None, Some(p.groups[4].settings.rt_budget.unwrap())]
        );
    }

    #[test]
    fn a_split_too_small_to_use_is_no_budget() {
        let mut spec = spec16();
        spec.host.cpus = CpuSet::new();
        spec.host.mems = CpuSet::new();
        spec.islands.truncate(1);
        let many: Vec<UnitSpec> = (0..50_001)
            .map(|i| fair_unit(&format!("u{i}"), "web"))
            .collect();
        let p = plan(&spec, &many);
        assert_eq!(budget(&p, ""), Some(RT_DEFAULT_RUNTIME_US));
        assert_eq!(budget(&p, "web/u0"), None, "0 us is no budget");
        assert!(rt_budgets(&spec).host.is_none());
    }
}
