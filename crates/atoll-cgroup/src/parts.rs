//! A group's knobs in parts, so that a change writes only its part.
//!
//! The daemon asks for a group's settings again whenever any of them
//! changes: a `trigger` raises one weight. Synced knob by knob (read,
//! compare, write if different), every file of the group would be opened
//! and read for that one weight (19 files of a unit on cgroup v1, some
//! 90 µs of the control loop's time on this VM, before the one write). With what was
//! asked last ([`Actuator::apply_changed`]), a backend syncs only the
//! [`Part`]s whose wanted values changed and reports, for the others, the
//! fallbacks their last sync reported ([`Reported`]). A full `apply` syncs
//! every part, as drift repair does.
//!
//! [`Actuator::apply_changed`]: atoll_core::backend::Actuator::apply_changed

use std::collections::BTreeMap;

use atoll_core::backend::{Fallback, Rewrite};
use atoll_core::plan::{GroupPath, GroupSettings};

use crate::common::Report;
use crate::error::CgroupError;

/// A part of a group's knobs, synced together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// `cpus`, `mems`, `partition`.
    Cpuset,
    /// `cpu_weight`, `cpu_idle`.
    CpuWeight,
    /// `cpu_max`.
    CpuMax,
    /// `rt_budget`, `rt_budget_optional`.
    Rt,
    /// `memory`.
    Memory,
    /// `io_weight`, `io_max`.
    Io,
    /// `frozen`.
    Freezer,
}

/// How many parts there are.
pub(crate) const COUNT: usize = 7;

impl Part {
    /// Every part, in the order a group is synced.
    pub(crate) const ALL: [Part; COUNT] = [
        Part::Cpuset,
        Part::CpuWeight,
        Part::CpuMax,
        Part::Rt,
        Part::Memory,
        Part::Io,
        Part::Freezer,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// Whether `a` and `b` want the same of this part.
    fn same(self, a: &GroupSettings, b: &GroupSettings) -> bool {
        match self {
            Part::Cpuset => a.cpus == b.cpus && a.mems == b.mems && a.partition == b.partition,
            Part::CpuWeight => a.cpu_weight == b.cpu_weight && a.cpu_idle == b.cpu_idle,
            Part::CpuMax => a.cpu_max == b.cpu_max,
            Part::Rt => a.rt_budget == b.rt_budget && a.rt_budget_optional == b.rt_budget_optional,
            Part::Memory => a.memory == b.memory,
            Part::Io => a.io_weight == b.io_weight && a.io_max == b.io_max,
            Part::Freezer => a.frozen == b.frozen,
        }
    }

    /// Copies this part of `from` into `to`.
    fn copy(self, from: &GroupSettings, to: &mut GroupSettings) {
        match self {
            Part::Cpuset => {
                to.cpus.clone_from(&from.cpus);
                to.mems.clone_from(&from.mems);
                to.partition = from.partition;
            }
            Part::CpuWeight => {
                to.cpu_weight = from.cpu_weight;
                to.cpu_idle = from.cpu_idle;
            }
            Part::CpuMax => to.cpu_max = from.cpu_max,
            Part::Rt => {
                to.rt_budget = from.rt_budget;
                to.rt_budget_optional = from.rt_budget_optional;
            }
            Part::Memory => to.memory = from.memory.clone(),
            Part::Io => {
                to.io_weight = from.io_weight;
                to.io_max.clone_from(&from.io_max);
            }
            Part::Freezer => to.frozen = from.frozen,
        }
    }
}

/// A set of parts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Parts(u8);

impl Parts {
    /// Every part.
    pub(crate) const ALL: Parts = Parts((1 << COUNT) - 1);

    /// Whether `p` is in the set.
    pub(crate) fn has(self, p: Part) -> bool {
        self.0 & (1 << p.index()) != 0
    }

    /// Whether any part of `of` is in the set.
    pub(crate) fn any(self, of: &[Part]) -> bool {
        of.iter().any(|p| self.has(*p))
    }

    /// Adds `p`.
    pub(crate) fn insert(&mut self, p: Part) {
        self.0 |= 1 << p.index();
    }

    /// The parts whose wanted values differ between `before` and `after`;
    /// `None` when they differ in something no part holds (a field added
    /// to [`GroupSettings`] and not to a part), which only a full sync
    /// covers.
    pub(crate) fn changed(before: &GroupSettings, after: &GroupSettings) -> Option<Parts> {
        let mut parts = Parts::default();
        let mut seen = before.clone();
        for p in Part::ALL {
            if !p.same(before, after) {
                parts.insert(p);
                p.copy(after, &mut seen);
            }
        }
        (seen == *after).then_some(parts)
    }
}

/// What a group's last syncs left: the fallbacks of each part, and the
/// parts that only a whole sync may write.
#[derive(Debug, Default)]
struct Known {
    out: [Vec<Fallback>; COUNT],
    whole: Parts,
}

/// The fallbacks each part of a group reported at its last sync, for the
/// groups synced whole at least once since they were made or last
/// forgotten. Both cgroup backends decide through [`Reported::plan`] what
/// to sync and end every sync with [`Reported::finish`].
#[derive(Debug, Default)]
pub(crate) struct Reported {
    groups: BTreeMap<GroupPath, Known>,
}

impl Reported {
    /// Whether `path` was synced whole since it was last forgotten.
    #[cfg(test)]
    pub(crate) fn knows(&self, path: &GroupPath) -> bool {
        self.groups.contains_key(path)
    }

    /// The parts to sync for `path`, which took `before` and is asked
    /// `after`: those whose wanted values changed. `None`, a whole sync,
    /// when the group was not synced whole since it was last forgotten,
    /// when a changed setting is in no part, or when a changed part is one
    /// its last whole sync said only a whole sync may write (a cgroup2
    /// controller that was not enabled).
    pub(crate) fn plan(
        &self,
        path: &GroupPath,
        before: &GroupSettings,
        after: &GroupSettings,
    ) -> Option<Parts> {
        let known = self.groups.get(path)?;
        let parts = Parts::changed(before, after)?;
        (parts.0 & known.whole.0 == 0).then_some(parts)
    }

    /// Records what the parts in `parts` reported (`out`, by part) and
    /// returns the fallbacks of the whole group: those just reported and,
    /// for the other parts, those of their last sync. A group not known
    /// is recorded only when `parts` is every part; then `whole` are the
    /// parts only a whole sync may write until the next whole sync.
    pub(crate) fn record(
        &mut self,
        path: &GroupPath,
        parts: Parts,
        whole: Parts,
        out: [Vec<Fallback>; COUNT],
    ) -> Vec<Fallback> {
        if parts != Parts::ALL && !self.groups.contains_key(path) {
            return out.into_iter().flatten().collect();
        }
        let kept = self.groups.entry(path.clone()).or_default();
        if parts == Parts::ALL {
            kept.whole = whole;
        }
        for (p, new) in Part::ALL.into_iter().zip(out) {
            if parts.has(p) {
                kept.out[p.index()] = new;
            }
        }
        kept.out.iter().flatten().cloned().collect()
    }

    /// Ends a sync of the parts in `parts` of `path` (`whole` as in
    /// [`record`](Self::record)): what each part reported is recorded and
    /// its rewrites go to `rewrites`. A sync that failed may have written
    /// some of it: the group is forgotten, so its next sync is whole.
    pub(crate) fn finish(
        &mut self,
        path: &GroupPath,
        parts: Parts,
        whole: Parts,
        synced: Result<[Report<'_>; COUNT], CgroupError>,
        rewrites: &mut Vec<Rewrite>,
    ) -> Result<Vec<Fallback>, CgroupError> {
        let reps = match synced {
            Ok(r) => r,
            Err(e) => {
                self.forget(path);
                return Err(e);
            }
        };
        let mut out: [Vec<Fallback>; COUNT] = std::array::from_fn(|_| Vec::new());
        for (o, rep) in out.iter_mut().zip(reps) {
            *o = rep.out;
            rewrites.extend(rep.rewritten);
        }
        Ok(self.record(path, parts, whole, out))
    }

    /// Forgets `path`: its next sync is whole.
    pub(crate) fn forget(&mut self, path: &GroupPath) {
        self.groups.remove(path);
    }

    /// Forgets every group.
    pub(crate) fn clear(&mut self) {
        self.groups.clear();
    }
}

/// A report for each part of `path`'s knobs.
pub(crate) fn reports(path: &GroupPath) -> [Report<'_>; COUNT] {
    std::array::from_fn(|_| Report::new(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weight_change_is_the_weight_part_only() {
        let before = GroupSettings::default();
        let after = GroupSettings {
            cpu_weight: Some(2500),
            ..GroupSettings::default()
        };
        let parts = Parts::changed(&before, &after).expect("every field is in a part");
        for p in Part::ALL {
            assert_eq!(parts.has(p), p == Part::CpuWeight, "{p:?}");
        }
        assert_eq!(Parts::changed(&after, &after), Some(Parts::default()));
    }

    #[test]
    fn every_part_changed_is_every_part() {
        let before = GroupSettings::default();
        let after = GroupSettings {
            cpus: Some(atoll_core::CpuSet::parse("0-1").unwrap()),
            cpu_weight: Some(50),
            cpu_max: Some(atoll_core::plan::CpuMax {
                quota_us: 50_000,
                period_us: 100_000,
            }),
            rt_budget_optional: true,
            memory: atoll_core::spec::MemoryEntitlement {
                max: Some(1 << 30),
                ..Default::default()
            },
            io_weight: Some(200),
            frozen: true,
            ..GroupSettings::default()
        };
        assert_eq!(Parts::changed(&before, &after), Some(Parts::ALL));
    }

    #[test]
    fn unsynced_parts_keep_the_fallbacks_of_their_last_sync() {
        let path = GroupPath::unit(
            &atoll_core::Name::new("i").unwrap(),
            &atoll_core::Name::new("u").unwrap(),
        );
        let fb = |knob: &str| Fallback {
            path: path.clone(),
            knob: knob.into(),
            wanted: "1".into(),
            got: "n/a".into(),
            reason: "none".into(),
        };
        let mut r = Reported::default();
        let mut weight_only = Parts::default();
        weight_only.insert(Part::CpuWeight);
        // Unknown: a partial sync is not recorded.
        let out: [Vec<Fallback>; COUNT] = std::array::from_fn(|_| Vec::new());
        assert!(r
            .record(&path, weight_only, Parts::default(), out)
            .is_empty());
        assert!(!r.knows(&path));
        let mut out: [Vec<Fallback>; COUNT] = std::array::from_fn(|_| Vec::new());
        out[Part::Memory.index()] = vec![fb("memory.min")];
        out[Part::CpuWeight.index()] = vec![fb("cpu.idle")];
        assert_eq!(r.record(&path, Parts::ALL, Parts::default(), out).len(), 2);
        assert!(r.knows(&path));
        // The weight part synced again, now without a fallback: memory's stays.
        let out: [Vec<Fallback>; COUNT] = std::array::from_fn(|_| Vec::new());
        assert_eq!(
            r.record(&path, weight_only, Parts::default(), out),
            vec![fb("memory.min")]
        );
        r.forget(&path);
        assert!(!r.knows(&path));
    }

    #[test]
    fn a_plan_is_the_changed_parts_of_a_known_group_else_whole() {
        let path = GroupPath::unit(
            &atoll_core::Name::new("i").unwrap(),
            &atoll_core::Name::new("u").unwrap(),
        );
        let before = GroupSettings::default();
        let weight = GroupSettings {
            cpu_weight: Some(400),
            ..GroupSettings::default()
        };
        let memory = GroupSettings {
            memory: atoll_core::spec::MemoryEntitlement {
                max: Some(1 << 30),
                ..Default::default()
            },
            ..GroupSettings::default()
        };
        let mut r = Reported::default();
        assert_eq!(r.plan(&path, &before, &weight), None, "never synced whole");
        let none: [Vec<Fallback>; COUNT] = std::array::from_fn(|_| Vec::new());
        // The memory part could only be written whole (say, its controller
        // was not enabled).
        let mut whole = Parts::default();
        whole.insert(Part::Memory);
        r.record(&path, Parts::ALL, whole, none);
        let mut weight_only = Parts::default();
        weight_only.insert(Part::CpuWeight);
        assert_eq!(r.plan(&path, &before, &weight), Some(weight_only));
        assert_eq!(r.plan(&path, &before, &before), Some(Parts::default()));
        assert_eq!(r.plan(&path, &before, &memory), None);
        // A failed sync forgets the group.
        let failed = Err(CgroupError::parse("f", "v", "bad"));
        let mut rewrites = Vec::new();
        assert!(r
            .finish(&path, weight_only, Parts::default(), failed, &mut rewrites)
            .is_err());
        assert_eq!(r.plan(&path, &before, &weight), None);
    }
}
