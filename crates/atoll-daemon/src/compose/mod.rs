//! The one place a group's effective settings are computed and written.
//!
//! A group's settings come from an ordered list of **layers**, each a
//! source of settings laid over the ones before it (see [`Layer`]):
//!
//! 1. `plan`: the platform description and the runtime units
//!    (`atoll_core::plan`), the base;
//! 2. `isolation`: home, lent and borrowed CPUs, idle priority for
//!    borrowers, caps of pool members, memory grants, disk holds
//!    ([`crate::isolation`]);
//! 3. `coordination`: what overlays tuned (weight, cap, RT budget,
//!    `memory.high`, boosts) and the CPUs and cap share of each island
//!    ([`crate::coord`]); then `power`: the platform power cap's CPU cap
//!    on islands without cpufreq ([`crate::powercap`]);
//! 4. `slo`: best-effort units held below their configured settings while
//!    a latency SLO lacks slack ([`crate::slo`]);
//! 5. `comm`: the communication boosts ([`crate::comm`]);
//! 6. `apps`: an application unit's suspension and CPUs of its own
//!    ([`crate::apps`]).
//!
//! The [`Composer`] owns what was written to every group. Steps update
//! their own state and [`touch`](Composer::touch) the groups whose settings
//! they changed, with the reason; at the end of the epoch (or of an API
//! request) [`flush`](Composer::flush) computes each touched group once,
//! writes it if it differs from what was written, and records one decision
//! naming the layers that shaped it and every reason that touched it.
//!
//! # Invariants kept here
//!
//! - A unit's `cpuset.cpus` lies within its island's effective CPUs: a
//!   layer's CPUs that fall outside are cut to the island's (or replaced by
//!   them when nothing is left), so coordination may move CPUs between
//!   islands without the unit layers knowing.
//! - CPUs move in a safe order: groups whose CPUs shrink are written first,
//!   deepest first, through the CPUs they keep; then every changed group,
//!   parents first. So a child's cpuset stays within its parent's and two
//!   exclusive islands never claim a CPU at once, at every step.
//! - CPU caps that go down are written before any that go up (and RT
//!   budgets likewise), so when coordination moves the platform CPU cap
//!   between islands the caps in force never sum above it at any step.
//! - When an island's CPUs change, its units are written again, so those
//!   that inherit the island's CPUs (cgroup v1 copies them only at
//!   creation) follow.

mod knobs;
mod order;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use atoll_core::backend::{Backend, BackendError, Fallback};
use atoll_core::decision::{Action, Decision, Reason};
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings, Partition, RtBudget};
use atoll_core::spec::{IslandSpec, PlatformSpec, UnitSpec};
use atoll_core::CpuSet;
pub use knobs::knob_diff;

use crate::decisions::DecisionLog;
use crate::registry::Registry;

/// One source of settings, laid over the layers before it.
pub trait Layer {
    /// Its name in decisions (`isolation`, `coordination`, ...).
    fn name(&self) -> &'static str;
    /// Lays this layer's settings for the group `at` over `s`. A layer
    /// changes only the knobs it owns and leaves the rest as it found them.
    fn lay(&self, at: &At<'_>, s: &mut GroupSettings);
}

/// The group a layer is laying, with what the composer knows of it.
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    /// The group.
    pub path: &'a GroupPath,
    /// The platform description.
    pub spec: &'a PlatformSpec,
    /// The unit, when the group is a unit's leaf.
    pub unit: Option<&'a UnitSpec>,
    /// The island of the group (an island's group, or a unit's island).
    pub island: Option<&'a IslandSpec>,
    /// The parent's effective settings (computed first).
    pub parent: Option<&'a GroupSettings>,
}

/// The layers in the order they are laid over the plan. Built in one
/// place, [`crate::controller::Controller`]'s `stack`.
pub struct Stack<'a> {
    /// The plan (the base) and what the groups are.
    pub reg: &'a Registry,
    /// The layers over it, in order.
    pub layers: Vec<&'a dyn Layer>,
}

/// A group's effective settings and the layers that shaped them.
#[derive(Clone, Debug, PartialEq)]
pub struct Effective {
    /// The settings.
    pub settings: GroupSettings,
    /// `plan` and every layer whose [`Layer::lay`] changed something.
    pub layers: Vec<&'static str>,
}

impl Stack<'_> {
    /// The effective settings of `path` (`None`: not a planned group),
    /// given its parent's.
    fn compute_one(&self, path: &GroupPath, parent: Option<&GroupSettings>) -> Option<Effective> {
        let planned = self.reg.planned(path)?;
        let unit = self.reg.unit_at(path);
        let island = match unit {
            Some(u) => self.reg.island(&u.island),
            None => self.reg.island_at(path),
        };
        let at = At {
            path,
            spec: self.reg.spec(),
            unit,
            island,
            parent,
        };
        let mut s = planned.settings.clone();
        let mut layers = vec!["plan"];
        for layer in &self.layers {
            let before = s.clone();
            layer.lay(&at, &mut s);
            if s != before {
                layers.push(layer.name());
            }
        }
        if unit.is_some() {
            if let (Some(cpus), Some(within)) = (&s.cpus, parent.and_then(|p| p.cpus.as_ref())) {
                if !cpus.is_subset(within) {
                    let fit = cpus.intersection(within);
                    s.cpus = Some(if fit.is_empty() { within.clone() } else { fit });
                }
            }
        }
        Some(Effective {
            settings: s,
            layers,
        })
    }

    /// The effective settings of `path` and of its ancestors, computed
    /// into `memo` (each once).
    fn compute_into(&self, path: &GroupPath, memo: &mut BTreeMap<GroupPath, Effective>) {
        if memo.contains_key(path) {
            return;
        }
        let parent = path.parent();
        if let Some(p) = &parent {
            self.compute_into(p, memo);
        }
        let parent_settings = parent
            .and_then(|p| memo.get(&p))
            .map(|e| e.settings.clone());
        if let Some(e) = self.compute_one(path, parent_settings.as_ref()) {
            memo.insert(path.clone(), e);
        }
    }

    /// The effective settings of `path`.
    pub fn compute(&self, path: &GroupPath) -> Option<Effective> {
        let mut memo = BTreeMap::new();
        self.compute_into(path, &mut memo);
        memo.remove(path)
    }
}

/// A group the kernel refused.
#[derive(Debug, thiserror::Error)]
#[error("writing group {path}: {source}")]
pub struct ComposeError {
    /// The group.
    pub path: GroupPath,
    /// What the backend said.
    #[source]
    pub source: BackendError,
}

/// What was written to every group, and what is to be written.
#[derive(Debug, Default)]
pub struct Composer {
    /// Settings last written per group.
    applied: BTreeMap<GroupPath, GroupSettings>,
    /// Fallbacks in force, per group and knob.
    fallbacks: BTreeMap<(GroupPath, String), Fallback>,
    /// Groups whose settings a step changed, with its reasons.
    touched: BTreeMap<GroupPath, Vec<Reason>>,
    /// Every planned group is to be computed again, for this reason.
    all: Option<Reason>,
    /// Where [`repair_next`](Self::repair_next) goes on.
    repair_cursor: usize,
    /// Groups whose last write a service manager refused (a bound group:
    /// none of the settings was made), with its words.
    refused: BTreeMap<GroupPath, String>,
}

impl ComposeError {
    /// Whether a service manager refused the settings of a bound group
    /// (nothing of them was made; the group keeps what it had).
    pub fn is_refusal(&self) -> bool {
        matches!(self.source, BackendError::Refused(_))
    }
}

/// A knob the composer lowers before it writes anything else: how to read
/// and set it, whether a value is lower than the one applied (`None`: not
/// set), and how a refused write names it.
struct Lowered<T> {
    get: fn(&GroupSettings) -> Option<T>,
    set: fn(&mut GroupSettings, T),
    lower: fn(&T, Option<&T>) -> bool,
    name: fn(&T) -> String,
}

/// RT budgets: the kernel refuses a budget that, with its siblings',
/// exceeds the parent's, so a unit that joins an island (splitting the
/// island's budget again) finds room only once the others have given
/// theirs up, and a parent may shrink only below children that already
/// did. A group without a budget is left to the main pass.
const RT_BUDGET: Lowered<RtBudget> = Lowered {
    get: |s| s.rt_budget,
    set: |s, v| s.rt_budget = Some(v),
    // runtime/period compared without rounding.
    lower: |new, old| {
        old.is_some_and(|old| {
            u128::from(new.runtime_us) * u128::from(old.period_us)
                < u128::from(old.runtime_us) * u128::from(new.period_us)
        })
    },
    name: |v| format!("cpu.rt_runtime_us={}/{}", v.runtime_us, v.period_us),
};

/// CPU caps (`cpu.max`): a cap moved from one group to another is cut where
/// it leaves before it is raised where it arrives, so the caps in force
/// never sum above what they summed to before and after. No cap is the
/// highest.
const CPU_MAX: Lowered<CpuMax> = Lowered {
    get: |s| s.cpu_max,
    set: |s, v| s.cpu_max = Some(v),
    // quota/period compared without rounding.
    lower: |new, old| {
        old.is_none_or(|old| {
            u128::from(new.quota_us) * u128::from(old.period_us)
                < u128::from(old.quota_us) * u128::from(new.period_us)
        })
    },
    name: |v| format!("cpu.max={} {}", v.quota_us, v.period_us),
};

impl Composer {
    /// A step changed what its layer says of `group`, for `why`.
    pub fn touch(&mut self, group: GroupPath, why: Reason) {
        self.touched.entry(group).or_default().push(why);
    }

    /// Every planned group is to be computed again (a changed plan, a
    /// restart), for `why`.
    pub fn touch_all(&mut self, why: Reason) {
        self.all = Some(why);
    }

    /// Why every group is to be written at the next flush, if it is.
    pub fn all_reason(&self) -> Option<&Reason> {
        self.all.as_ref()
    }

    /// Whether anything waits for a [`flush`](Self::flush).
    pub fn pending(&self) -> bool {
        self.all.is_some() || !self.touched.is_empty()
    }

    /// Settings last written to `group`.
    pub fn applied(&self, group: &GroupPath) -> Option<&GroupSettings> {
        self.applied.get(group)
    }

    /// Fallbacks in force.
    pub fn fallbacks(&self) -> impl Iterator<Item = &Fallback> {
        self.fallbacks.values()
    }

    /// Why a service manager refused the last write of `group`, if it did
    /// (until a write of it succeeds).
    pub fn refused(&self, group: &GroupPath) -> Option<&str> {
        self.refused.get(group).map(String::as_str)
    }

    /// `group` was removed: forget what was written to it.
    pub fn forget(&mut self, group: &GroupPath) {
        self.refused.remove(group);
        self.applied.remove(group);
        self.touched.remove(group);
        self.fallbacks.retain(|(p, _), _| p != group);
    }

    /// Writes every touched group whose effective settings differ from
    /// what was written (each once, in the safe order of the module docs),
    /// and records one decision per group written. A group the kernel
    /// refuses is a decision too; its descendants are not written. Returns
    /// the first refusal, one of the kernel's before one of a service
    /// manager's (see [`ComposeError::is_refusal`]).
    pub fn flush(
        &mut self,
        stack: &Stack<'_>,
        backend: &mut dyn Backend,
        log: &mut DecisionLog,
        now: Duration,
    ) -> Result<(), ComposeError> {
        let touched = std::mem::take(&mut self.touched);
        let all = self.all.take();
        let mut memo: BTreeMap<GroupPath, Effective> = BTreeMap::new();
        let mut want: BTreeSet<GroupPath> = touched.keys().cloned().collect();
        if all.is_some() {
            want.extend(stack.reg.plan().groups.iter().map(|g| g.path.clone()));
        }
        for g in &want {
            stack.compute_into(g, &mut memo);
        }
        // An island whose CPUs change takes its units along.
        let mut forced = BTreeSet::new();
        let moved: Vec<GroupPath> = want
            .iter()
            .filter(|g| stack.reg.island_at(g).is_some())
            .filter(|g| {
                memo.get(*g).map(|e| &e.settings.cpus) != self.applied.get(*g).map(|s| &s.cpus)
            })
            .cloned()
            .collect();
        for island in moved {
            if let Some(spec) = stack.reg.island_at(&island) {
                for u in stack.reg.units_of(&spec.name) {
                    let g = GroupPath::unit(&u.island, &u.name);
                    stack.compute_into(&g, &mut memo);
                    forced.insert(g.clone());
                    want.insert(g);
                }
            }
        }
        let changed: Vec<GroupPath> = want
            .into_iter()
            .filter(|g| memo.contains_key(g))
            .filter(|g| {
                forced.contains(g) || self.applied.get(g) != memo.get(g).map(|e| &e.settings)
            })
            .collect();
        let order = order::Order::new(stack.reg, changed);
        let before: BTreeMap<GroupPath, GroupSettings> = order
            .parents_first()
            .filter_map(|g| Some((g.clone(), self.applied.get(g)?.clone())))
            .collect();
        self.shrink_first(&order, &memo, backend, log, now);
        self.lower_first(&RT_BUDGET, &order, &memo, backend, log, now);
        self.lower_first(&CPU_MAX, &order, &memo, backend, log, now);
        let mut first_err: Option<ComposeError> = None;
        let mut failed: Vec<GroupPath> = Vec::new();
        for g in order.parents_first() {
            if failed.iter().any(|f| is_within(g, f)) {
                continue;
            }
            let Some(eff) = memo.get(g) else { continue };
            let before = before.get(g);
            let knobs = knob_diff(before, &eff.settings);
            let causes = touched.get(g).cloned().unwrap_or_default();
            let why = Reason::combine(causes)
                .or_else(|| all.clone())
                .unwrap_or(Reason::Config);
            // What was taken last is in the kernel (drift is repair's):
            // only what changed since is written. A group moved with its
            // island inherits CPUs its settings do not name, so it is
            // written whole.
            let applied = match before.filter(|_| !forced.contains(g)) {
                Some(b) => backend.apply_changed(g, b, &eff.settings),
                None => backend.apply(g, &eff.settings),
            };
            match applied {
                Ok(fallbacks) => {
                    self.refused.remove(g);
                    if before != Some(&eff.settings) {
                        self.applied.insert(g.clone(), eff.settings.clone());
                        log.record(Decision {
                            at: now,
                            action: Action::ApplyGroup {
                                path: g.clone(),
                                knobs,
                                layers: eff.layers.iter().map(|l| l.to_string()).collect(),
                            },
                            why,
                        });
                    }
                    self.note_fallbacks(g, fallbacks, log, now);
                }
                Err(source) => {
                    log.record(Decision {
                        at: now,
                        action: Action::ApplyGroup {
                            path: g.clone(),
                            knobs,
                            layers: eff.layers.iter().map(|l| l.to_string()).collect(),
                        },
                        why: Reason::KernelRefused {
                            error: source.to_string(),
                        },
                    });
                    failed.push(g.clone());
                    if let BackendError::Refused(r) = &source {
                        self.refused.insert(g.clone(), r.to_string());
                    }
                    let e = ComposeError {
                        path: g.clone(),
                        source,
                    };
                    let replace = match &first_err {
                        None => true,
                        Some(first) => first.is_refusal() && !e.is_refusal(),
                    };
                    if replace {
                        first_err = Some(e);
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Writes the CPUs of groups whose CPUs shrink or move, deepest first,
    /// through the CPUs they keep (see the module docs); nothing else of
    /// them changes yet. A group that names no CPUs holds its parent's.
    fn shrink_first(
        &mut self,
        order: &order::Order,
        memo: &BTreeMap<GroupPath, Effective>,
        backend: &mut dyn Backend,
        log: &mut DecisionLog,
        now: Duration,
    ) {
        // The CPUs a group holds in the kernel now, and will hold.
        fn held(at: &GroupPath, of: &dyn Fn(&GroupPath) -> Option<CpuSet>) -> Option<CpuSet> {
            let mut g = Some(at.clone());
            while let Some(p) = g {
                if let Some(c) = of(&p) {
                    return Some(c);
                }
                g = p.parent();
            }
            None
        }
        let mut narrowed = 0;
        for g in order.deepest_first() {
            let Some(old) = self.applied.get(g).cloned() else {
                continue;
            };
            let applied = &self.applied;
            let old_of = |p: &GroupPath| applied.get(p).and_then(|s| s.cpus.clone());
            let new_of = |p: &GroupPath| match memo.get(p) {
                Some(e) => e.settings.cpus.clone(),
                None => old_of(p),
            };
            let (Some(old_cpus), Some(new)) = (held(g, &old_of), held(g, &new_of)) else {
                continue;
            };
            if old_cpus.is_subset(&new) {
                continue; // it only grows: parents first is safe
            }
            let within_parent = g
                .parent()
                .and_then(|p| Some(held(&p, &old_of)?.intersection(&held(&p, &new_of)?)));
            // Only a group that would be in the way needs a step of its
            // own: its parent keeps less than it holds, or it is exclusive
            // and a sibling takes CPUs it gives up.
            let parent_narrows = within_parent
                .as_ref()
                .is_some_and(|wp| !old_cpus.is_subset(wp));
            let given_up = old_cpus.difference(&new);
            let sibling_takes = old.partition == Some(Partition::Root)
                && memo.iter().any(|(other, e)| {
                    other != g
                        && other.parent() == g.parent()
                        && e.settings.partition == Some(Partition::Root)
                        && e.settings
                            .cpus
                            .as_ref()
                            .is_some_and(|c| !c.intersection(&given_up).is_empty())
                });
            if !parent_narrows && !sibling_takes {
                continue;
            }
            let mut step = old_cpus.intersection(&new);
            if let Some(wp) = &within_parent {
                if step.is_empty() {
                    step = new.intersection(wp);
                }
                if step.is_empty() {
                    step = wp.clone();
                }
            }
            if step.is_empty() || step == old_cpus {
                continue;
            }
            let mut s = old;
            s.cpus = Some(step.clone());
            match backend.apply(g, &s) {
                Ok(_) => {
                    self.applied.insert(g.clone(), s);
                    narrowed += 1;
                }
                Err(e) => refused_step(log, now, g, format!("cpuset.cpus={step}"), &e),
            }
        }
        tracing::trace!("cpusets narrowed first: {narrowed}");
    }

    /// Writes the values of one knob that go down, deepest first, before
    /// anything else is written (see [`RT_BUDGET`] and [`CPU_MAX`] for why
    /// each needs it).
    fn lower_first<T: Copy>(
        &mut self,
        knob: &Lowered<T>,
        order: &order::Order,
        memo: &BTreeMap<GroupPath, Effective>,
        backend: &mut dyn Backend,
        log: &mut DecisionLog,
        now: Duration,
    ) {
        for g in order.deepest_first() {
            let Some(old) = self.applied.get(g) else {
                continue;
            };
            let Some(will) = memo.get(g).and_then(|e| (knob.get)(&e.settings)) else {
                continue;
            };
            if !(knob.lower)(&will, (knob.get)(old).as_ref()) {
                continue;
            }
            let mut s = old.clone();
            (knob.set)(&mut s, will);
            match backend.apply(g, &s) {
                Ok(_) => {
                    self.applied.insert(g.clone(), s);
                }
                Err(e) => refused_step(log, now, g, (knob.name)(&will), &e),
            }
        }
    }

    /// Writes the next `count` planned groups again (in plan order, from
    /// where the last call stopped, around and around), so the backend
    /// repairs what someone changed behind atoll's back: it rewrites only
    /// knobs that differ from what atoll wrote, and each it rewrites is a
    /// decision with the value found. A group never written (the kernel
    /// refused it) is touched instead, for the next flush. Returns the
    /// groups looked at.
    pub fn repair_next(
        &mut self,
        reg: &Registry,
        backend: &mut dyn Backend,
        log: &mut DecisionLog,
        now: Duration,
        count: usize,
    ) -> Vec<GroupPath> {
        let groups = &reg.plan().groups;
        let mut seen = Vec::new();
        if groups.is_empty() {
            return seen;
        }
        for _ in 0..count.min(groups.len()) {
            self.repair_cursor %= groups.len();
            seen.push(groups[self.repair_cursor].path.clone());
            self.repair_cursor += 1;
        }
        self.repair(&seen, backend, log, now);
        seen
    }

    /// Checks `groups` for drift (see [`Self::repair_next`]), out of turn:
    /// the groups someone was seen writing.
    pub fn repair(
        &mut self,
        groups: &[GroupPath],
        backend: &mut dyn Backend,
        log: &mut DecisionLog,
        now: Duration,
    ) {
        // Rewrites from earlier writes were expected: not drift.
        drop(backend.take_rewrites());
        for g in groups {
            match self.applied.get(g).cloned() {
                Some(s) => match backend.apply(g, &s) {
                    Ok(fallbacks) => self.note_fallbacks(g, fallbacks, log, now),
                    Err(e) => tracing::warn!("repairing {g}: {e}"),
                },
                None => self.touch(g.clone(), Reason::Config),
            }
            for r in backend.take_rewrites() {
                log.record(Decision {
                    at: now,
                    action: Action::ApplyGroup {
                        path: r.path.clone(),
                        knobs: vec![format!("{}={}", r.knob, r.wrote)],
                        layers: Vec::new(),
                    },
                    why: Reason::Housekeeping {
                        detail: format!(
                            "{} {} was {:?}, changed behind atoll's back; put back to {:?}",
                            r.path, r.knob, r.found, r.wrote
                        ),
                    },
                });
            }
        }
    }

    /// Thaws `group` if it was written frozen, before its tasks leave it
    /// (a group no longer planned, which no flush computes).
    pub fn thaw(
        &mut self,
        group: &GroupPath,
        backend: &mut dyn Backend,
        log: &mut DecisionLog,
        now: Duration,
        why: Reason,
    ) {
        let Some(old) = self.applied.get(group).filter(|s| s.frozen) else {
            return;
        };
        let s = GroupSettings {
            frozen: false,
            ..old.clone()
        };
        let knobs = knob_diff(Some(old), &s);
        match backend.apply(group, &s) {
            Ok(_) => {
                self.applied.insert(group.clone(), s);
                log.record(Decision {
                    at: now,
                    action: Action::ApplyGroup {
                        path: group.clone(),
                        knobs,
                        layers: Vec::new(),
                    },
                    why,
                });
            }
            Err(e) => tracing::warn!("thawing {group}: {e}"),
        }
    }

    /// Removes an empty group of atoll's (a decision) and forgets what was
    /// written to it.
    pub fn remove(
        &mut self,
        group: &GroupPath,
        backend: &mut dyn Backend,
        log: &mut DecisionLog,
        now: Duration,
        why: Reason,
    ) -> Result<(), BackendError> {
        backend.remove(group)?;
        self.forget(group);
        log.record(Decision {
            at: now,
            action: Action::RemoveGroup {
                path: group.clone(),
            },
            why,
        });
        Ok(())
    }

    /// Records the fallbacks an apply of `path` reported: each new one is a
    /// decision, and those of `path` it no longer reports are over.
    fn note_fallbacks(
        &mut self,
        path: &GroupPath,
        fallbacks: Vec<Fallback>,
        log: &mut DecisionLog,
        now: Duration,
    ) {
        let mut now_in_force = Vec::new();
        for fb in fallbacks {
            let key = (fb.path.clone(), fb.knob.clone());
            now_in_force.push(key.clone());
            if self.fallbacks.get(&key) != Some(&fb) {
                self.fallbacks.insert(key, fb.clone());
                let error = fb.reason.clone();
                log.record(Decision {
                    at: now,
                    action: Action::Fallback(fb),
                    why: Reason::KernelRefused { error },
                });
            }
        }
        self.fallbacks
            .retain(|(p, k), _| p != path || now_in_force.iter().any(|(_, nk)| nk == k));
    }
}

/// Whether `g` is `ancestor` or below it.
fn is_within(g: &GroupPath, ancestor: &GroupPath) -> bool {
    if ancestor.is_root() {
        return true;
    }
    let (g, a) = (g.as_str(), ancestor.as_str());
    g == a || g.strip_prefix(a).is_some_and(|rest| rest.starts_with('/'))
}

/// Records that the kernel refused a step written ahead of the others (a
/// cpuset narrowed first, an RT budget lowered first).
fn refused_step(
    log: &mut DecisionLog,
    now: Duration,
    g: &GroupPath,
    knob: String,
    e: &BackendError,
) {
    log.record(Decision {
        at: now,
        action: Action::ApplyGroup {
            path: g.clone(),
            knobs: vec![knob],
            layers: Vec::new(),
        },
        why: Reason::KernelRefused {
            error: e.to_string(),
        },
    });
}

#[cfg(test)]
mod tests;
