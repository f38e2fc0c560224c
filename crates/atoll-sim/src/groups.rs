//! atoll's groups in the simulator, under kernel-like rules.
//!
//! - A group's parent must exist (atoll's root's parent is the machine).
//! - `cpuset.cpus` must be online and within the parent's effective CPUs;
//!   an empty or unset list inherits the parent's (cgroup v2).
//! - `Partition::Root` is granted when the group's own CPUs are non-empty,
//!   within the parent's, and disjoint from every sibling's configured CPUs
//!   (and, for atoll's root, leave the rest of the machine at least one CPU).
//!   A granted partition's CPUs leave its member siblings' effective CPUs. A
//!   partition that cannot be granted, now or after a later change elsewhere,
//!   is reported as a [`Fallback`] (`root invalid`), never as an error.
//! - Only leaves hold processes: a child cannot be added under a group with
//!   processes (`EBUSY` on `cgroup.subtree_control`).
//! - Weights, caps and RT budgets are range-checked as the kernel does; RT
//!   budgets (v1 RT group scheduling) must fit: children's ratios sum to at
//!   most the group's, siblings' to at most the parent's (the machine grants
//!   atoll's root 95%), and a group with RT tasks keeps a non-zero budget.
//! - A group with processes or children cannot be removed (`EBUSY`).

use std::collections::{BTreeMap, HashMap};
use std::io;

use atoll_core::backend::{BackendError, Fallback};
use atoll_core::plan::{GroupPath, GroupSettings, Partition, RtBudget};
use atoll_core::{CpuSet, NodeSet};

use crate::state::{busy, invalid, CpuCounters, Group, Seg, SimState, RT_MACHINE_RATIO};

/// Slack for comparing RT ratios.
const EPS: f64 = 1e-9;

fn rt_ratio(b: Option<RtBudget>) -> f64 {
    match b {
        Some(b) if b.period_us > 0 => b.runtime_us as f64 / b.period_us as f64,
        _ => 0.0,
    }
}

fn non_empty(s: &Option<CpuSet>) -> Option<&CpuSet> {
    s.as_ref().filter(|c| !c.is_empty())
}

impl SimState {
    /// Creates or updates a group. See the module docs for the rules.
    pub fn apply(
        &mut self,
        path: &GroupPath,
        s: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        self.sync();
        let Some((pcpus, pmems)) = self.parent_effective(path) else {
            return Err(BackendError::NoGroup(
                path.parent().unwrap_or_else(GroupPath::root),
            ));
        };
        if !self.groups.contains_key(path) {
            if let Some(parent) = path
                .parent()
                .and_then(|p| self.groups.get(&p).map(|g| (p, g)))
            {
                if !parent.1.procs.is_empty() {
                    return Err(busy(
                        "write",
                        self.knob_path(&parent.0, "cgroup.subtree_control"),
                        Some("+cpuset +cpu +memory +io".into()),
                        format!(
                            "group {} holds processes, so it cannot have children",
                            parent.0
                        ),
                    ));
                }
            }
        }
        let mut s = s.clone();
        let mut fallbacks = Vec::new();
        if !self.rt_groups {
            // An optional budget (room for RT programs in a non-realtime
            // group) is not needed without RT group scheduling.
            if let Some(b) = s.rt_budget.take().filter(|_| !s.rt_budget_optional) {
                fallbacks.push(Fallback {
                    path: path.clone(),
                    knob: "cpu.rt_runtime_us".into(),
                    wanted: format!("{}/{}", b.runtime_us, b.period_us),
                    got: "none".into(),
                    reason: "the kernel has no RT group scheduling".into(),
                });
            }
        }
        let s = &s;
        self.validate(path, s, &pcpus, &pmems)?;
        let before: BTreeMap<GroupPath, bool> = self
            .groups
            .iter()
            .map(|(p, g)| (p.clone(), g.partition_valid))
            .collect();
        let now = self.now_ns();
        let unchanged = self.groups.get(path).is_some_and(|g| &g.settings == s);
        if !self.groups.contains_key(path) {
            if let Some(parent) = path.parent() {
                self.kids.entry(parent).or_default().insert(path.clone());
            }
        }
        let g = self.groups.entry(path.clone()).or_insert_with(|| Group {
            settings: GroupSettings::default(),
            effective_cpus: pcpus.clone(),
            effective_mems: pmems.clone(),
            partition_valid: false,
            procs: Default::default(),
            cpu: CpuCounters {
                seg: Seg {
                    t0: now,
                    ..Seg::default()
                },
                ..CpuCounters::default()
            },
            io_read: 0,
            io_write: 0,
        });
        g.cpu.fold(now);
        if g.settings.cpu_max != s.cpu_max {
            g.cpu.period_phase_ns = 0;
        }
        g.settings = s.clone();
        if !unchanged {
            self.recompute_sets();
            self.model.tree = None;
        }
        for (p, g) in &self.groups {
            let asked = g.settings.partition == Some(Partition::Root);
            let lost = before.get(p) == Some(&true) && !g.partition_valid;
            if asked && !g.partition_valid && (p == path || lost) {
                fallbacks.push(Fallback {
                    path: p.clone(),
                    knob: "cpuset.cpus.partition".into(),
                    wanted: "root".into(),
                    got: "root invalid".into(),
                    reason: self.partition_problem(p).unwrap_or_default(),
                });
            }
        }
        Ok(fallbacks)
    }

    /// Removes an empty group.
    pub fn remove(&mut self, path: &GroupPath) -> Result<(), BackendError> {
        self.sync();
        let g = self
            .groups
            .get(path)
            .ok_or_else(|| BackendError::NoGroup(path.clone()))?;
        if !g.procs.is_empty() || self.has_children(path) {
            return Err(BackendError::Io {
                op: "rmdir",
                path: self.knob_path(path, ""),
                value: None,
                source: io::Error::from_raw_os_error(libc::EBUSY),
            });
        }
        self.groups.remove(path);
        if let Some(parent) = path.parent() {
            if let Some(k) = self.kids.get_mut(&parent) {
                k.remove(path);
            }
        }
        self.kids.remove(path);
        self.recompute_sets();
        self.model.tree = None;
        Ok(())
    }

    fn validate(
        &self,
        path: &GroupPath,
        s: &GroupSettings,
        pcpus: &CpuSet,
        pmems: &NodeSet,
    ) -> Result<(), BackendError> {
        if let Some(c) = &s.cpus {
            let knob = self.knob_path(path, "cpuset.cpus");
            let offline = c.difference(&self.online);
            if !offline.is_empty() {
                return Err(invalid(
                    knob,
                    c.to_string(),
                    format!("cpus {offline} are not online (online: {})", self.online),
                ));
            }
            if !c.is_subset(pcpus) {
                return Err(invalid(
                    knob,
                    c.to_string(),
                    format!(
                        "cpus {} are outside the parent's effective cpus {pcpus}",
                        c.difference(pcpus)
                    ),
                ));
            }
        }
        if let Some(m) = &s.mems {
            if !m.is_subset(pmems) {
                return Err(invalid(
                    self.knob_path(path, "cpuset.mems"),
                    m.to_string(),
                    format!(
                        "nodes {} are outside the parent's effective mems {pmems}",
                        m.difference(pmems)
                    ),
                ));
            }
        }
        for (knob, w) in [("cpu.weight", s.cpu_weight), ("io.weight", s.io_weight)] {
            if let Some(w) = w.filter(|w| !(1..=10_000).contains(w)) {
                return Err(invalid(
                    self.knob_path(path, knob),
                    w.to_string(),
                    "weight must be 1..=10000".into(),
                ));
            }
        }
        if let Some(m) = s.cpu_max {
            if m.quota_us < 1000 || !(1000..=1_000_000).contains(&m.period_us) {
                return Err(invalid(
                    self.knob_path(path, "cpu.max"),
                    format!("{} {}", m.quota_us, m.period_us),
                    "quota must be at least 1000us and the period 1000..=1000000us".into(),
                ));
            }
        }
        self.validate_rt(path, s.rt_budget)
    }

    fn validate_rt(&self, path: &GroupPath, b: Option<RtBudget>) -> Result<(), BackendError> {
        let knob = self.knob_path(path, "cpu.rt_runtime_us");
        let value = b
            .map(|b| format!("{} {}", b.runtime_us, b.period_us))
            .unwrap_or_else(|| "0".into());
        if let Some(b) = b {
            if b.period_us == 0 || b.runtime_us > b.period_us {
                return Err(invalid(
                    knob,
                    value,
                    "runtime must not exceed a non-zero period".into(),
                ));
            }
        }
        let ratio = rt_ratio(b);
        let children: f64 = self
            .children_of(path)
            .iter()
            .map(|c| rt_ratio(self.groups[c].settings.rt_budget))
            .sum();
        if children > ratio + EPS {
            return Err(busy(
                "write",
                knob,
                Some(value),
                format!("children's RT budgets ({children:.3} of a CPU) exceed it"),
            ));
        }
        let parent_ratio = match path.parent() {
            None => RT_MACHINE_RATIO,
            Some(p) => rt_ratio(self.groups.get(&p).and_then(|g| g.settings.rt_budget)),
        };
        let siblings: f64 = path
            .parent()
            .map(|p| self.children_of(&p))
            .unwrap_or_default()
            .iter()
            .filter(|c| *c != path)
            .map(|c| rt_ratio(self.groups[c].settings.rt_budget))
            .sum();
        if ratio + siblings > parent_ratio + EPS {
            return Err(busy(
                "write",
                knob,
                Some(value),
                format!(
                    "with its siblings' ({siblings:.3}) it exceeds the parent's RT budget ({parent_ratio:.3})"
                ),
            ));
        }
        if ratio <= 0.0 && self.group_has_rt(path) {
            return Err(busy(
                "write",
                knob,
                Some(value),
                "the group has RT tasks, which need a budget".into(),
            ));
        }
        Ok(())
    }

    /// Why a requested partition of `path` cannot be granted; `None` if it
    /// can, or was not requested.
    pub fn partition_problem(&self, path: &GroupPath) -> Option<String> {
        let g = self.groups.get(path)?;
        if g.settings.partition != Some(Partition::Root) {
            return None;
        }
        let Some(cpus) = non_empty(&g.settings.cpus) else {
            return Some("no cpus of its own (cpuset.cpus is empty)".into());
        };
        let (pcpus, _) = self.parent_effective(path)?;
        if !cpus.is_subset(&pcpus) {
            return Some(format!(
                "cpus {} are not within the parent's effective cpus {pcpus}",
                cpus.difference(&pcpus)
            ));
        }
        if path.is_root() && self.online.is_subset(cpus) {
            return Some("it would leave the rest of the machine no cpus".into());
        }
        let parent = path.parent()?;
        for sib in self
            .kids
            .get(&parent)
            .into_iter()
            .flatten()
            .filter(|s| *s != path)
        {
            if let Some(theirs) = non_empty(&self.groups[sib].settings.cpus) {
                let shared = cpus.intersection(theirs);
                if !shared.is_empty() {
                    let name = sib.as_str().rsplit('/').next().unwrap_or_default();
                    return Some(format!("cpus {shared} are shared with sibling {name}"));
                }
            }
        }
        None
    }

    /// Recomputes partition validity and effective CPUs and mems, parents
    /// before children.
    pub fn recompute_sets(&mut self) {
        let mut by_depth: BTreeMap<usize, Vec<GroupPath>> = BTreeMap::new();
        for p in self.groups.keys() {
            by_depth.entry(p.depth()).or_default().push(p.clone());
        }
        for level in by_depth.values() {
            for p in level {
                let wanted = self.groups[p].settings.partition == Some(Partition::Root);
                let valid = wanted && self.partition_problem(p).is_none();
                if let Some(g) = self.groups.get_mut(p) {
                    g.partition_valid = valid;
                }
            }
            // CPUs taken by valid partitions, per parent.
            let mut taken: HashMap<Option<GroupPath>, CpuSet> = HashMap::new();
            for p in level {
                let g = &self.groups[p];
                let t = taken.entry(p.parent()).or_default();
                if g.partition_valid {
                    if let Some(c) = &g.settings.cpus {
                        *t = t.union(c);
                    }
                }
            }
            for p in level {
                let (cpus, mems) = self.effective_of(p, &taken[&p.parent()]);
                if let Some(g) = self.groups.get_mut(p) {
                    g.effective_cpus = cpus;
                    g.effective_mems = mems;
                }
            }
        }
    }

    /// Effective CPUs and mems of `p`, given its parent's and its siblings'
    /// partition validity.
    fn effective_of(&self, p: &GroupPath, taken: &CpuSet) -> (CpuSet, NodeSet) {
        let (pcpus, pmems) = self
            .parent_effective(p)
            .unwrap_or_else(|| (self.online.clone(), self.topology.all_nodes()));
        let g = &self.groups[p];
        let mems = match g.settings.mems.as_ref().map(|m| m.intersection(&pmems)) {
            Some(m) if !m.is_empty() => m,
            _ => pmems,
        };
        if g.partition_valid {
            let cpus = g.settings.cpus.clone().unwrap_or_default();
            return (cpus, mems);
        }
        // `p` is not a valid partition, so what valid siblings hold is taken.
        let base = match non_empty(&g.settings.cpus) {
            Some(c) => c.intersection(&pcpus),
            None => pcpus.clone(),
        };
        let cpus = [base.difference(taken), pcpus.difference(taken)]
            .into_iter()
            .find(|c| !c.is_empty())
            .unwrap_or(pcpus);
        (cpus, mems)
    }

    /// Whether any thread in group `path` runs an RT policy.
    pub fn group_has_rt(&self, path: &GroupPath) -> bool {
        self.groups
            .get(path)
            .is_some_and(|g| g.procs.iter().any(|&pid| self.has_rt_threads(pid)))
    }
}

/// Whether a group's budget admits RT tasks (any group does on a kernel
/// without RT group scheduling).
pub(crate) fn admits_rt(rt_groups: bool, g: &Group) -> bool {
    !rt_groups || rt_ratio(g.settings.rt_budget) > 0.0
}
