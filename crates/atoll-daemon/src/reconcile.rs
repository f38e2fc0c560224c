//! Making the hierarchy match the plan.
//!
//! Groups are applied parents first (the plan's order). The backend writes
//! only knobs whose value differs, so re-applying every second is cheap and
//! repairs drift (someone editing a knob by hand). A change of settings, a
//! new group and every new fallback become decisions.

use atoll_core::backend::{BackendError, Fallback};
use atoll_core::decision::{Action, Reason};
use atoll_core::plan::{GroupPath, GroupSettings, Partition};

use crate::controller::Controller;

impl Controller {
    /// Applies the whole plan. The first error stops it (parents must exist
    /// before children); fallbacks are recorded, not errors.
    pub(crate) fn reconcile(&mut self, why: Reason) -> Result<(), BackendError> {
        let mut plan = self.reg.plan();
        // The isolation model's settings replace the plan's for unit groups
        // (with the plan's changes to anything it does not manage), and
        // coordination's go over both.
        for g in &mut plan.groups {
            if let Some(o) = self.iso.overlay.get(&g.path) {
                let mut merged = g.settings.clone();
                merged.cpus = o.cpus.clone();
                merged.cpu_idle = o.cpu_idle;
                merged.cpu_max = o.cpu_max.or(merged.cpu_max);
                merged.memory.high = o.memory.high;
                merged.memory.low = o.memory.low;
                merged.memory.max = o.memory.max;
                merged.io_max = o.io_max.clone();
                g.settings = merged;
            }
            // Coordination's knobs go over both (see `crate::coord`).
            if let Some(unit) = self.reg.unit_at(&g.path) {
                if let Some(island) = self.reg.spec().island(&unit.island) {
                    g.settings = self
                        .coord
                        .merge_unit(island, &unit.name, g.settings.clone());
                    g.settings = self.comm.merge_unit(
                        self.reg.spec().comm.as_ref(),
                        &unit.name,
                        g.settings.clone(),
                    );
                    // An application's suspension and pinned CPUs (see
                    // `crate::apps`).
                    g.settings = self.merge_app_unit(&g.path, g.settings.clone());
                }
            } else if g.path.depth() == 1 && g.path != GroupPath::host() {
                let island = atoll_core::Name::new(g.path.as_str());
                if let Ok(island) = island {
                    g.settings = self.coord.merge_island(&island, g.settings.clone());
                }
            }
        }
        for g in &plan.groups {
            let fallbacks = match self.env.backend.apply(&g.path, &g.settings) {
                Ok(f) => f,
                Err(e) => {
                    self.decide(
                        Action::ApplyGroup {
                            path: g.path.clone(),
                            knobs: knob_diff(None, &g.settings),
                        },
                        Reason::KernelRefused {
                            error: e.to_string(),
                        },
                    );
                    return Err(e);
                }
            };
            let before = self.applied.get(&g.path);
            if before != Some(&g.settings) {
                let knobs = knob_diff(before, &g.settings);
                self.decide(
                    Action::ApplyGroup {
                        path: g.path.clone(),
                        knobs,
                    },
                    why.clone(),
                );
                self.applied.insert(g.path.clone(), g.settings.clone());
            }
            self.note_fallbacks(&g.path, fallbacks);
        }
        Ok(())
    }

    /// Records the fallbacks an apply of `path` reported: each new one is a
    /// decision, and those of `path` it no longer reports are over.
    pub(crate) fn note_fallbacks(&mut self, path: &GroupPath, fallbacks: Vec<Fallback>) {
        let mut now_in_force = Vec::new();
        for fb in fallbacks {
            let key = (fb.path.clone(), fb.knob.clone());
            now_in_force.push(key.clone());
            if self.fallbacks.get(&key) != Some(&fb) {
                self.fallbacks.insert(key, fb.clone());
                let error = fb.reason.clone();
                self.decide(Action::Fallback(fb), Reason::KernelRefused { error });
            }
        }
        self.fallbacks
            .retain(|(p, k), _| p != path || now_in_force.iter().any(|(_, nk)| nk == k));
    }

    /// Removes groups under atoll's root that the plan no longer has, after
    /// giving their processes back. Used after recovery.
    pub(crate) fn remove_strays(&mut self) {
        let plan = self.reg.plan();
        let mut strays = Vec::new();
        let root = GroupPath::root();
        for island in self.env.backend.children(&root).unwrap_or_default() {
            let ip = GroupPath::from_relative(&island);
            if plan.get(&ip).is_none() {
                for unit in self.env.backend.children(&ip).unwrap_or_default() {
                    strays.push(GroupPath::from_relative(&format!("{island}/{unit}")));
                }
                strays.push(ip);
                continue;
            }
            for unit in self.env.backend.children(&ip).unwrap_or_default() {
                let up = GroupPath::from_relative(&format!("{island}/{unit}"));
                if plan.get(&up).is_none() {
                    strays.push(up);
                }
            }
        }
        for path in strays {
            self.release_group(
                &path,
                Reason::Recover {
                    detail: format!("group {path} is no longer in the platform description"),
                },
            );
            match self.env.backend.remove(&path) {
                Ok(()) => self.decide(
                    Action::RemoveGroup { path: path.clone() },
                    Reason::Recover {
                        detail: "stale group".into(),
                    },
                ),
                Err(e) => tracing::warn!("removing stale group {path}: {e}"),
            }
        }
    }
}

/// The knobs of `new` that differ from `old`, as `file=value` strings in
/// cgroup v2 names (the backend translates for v1).
pub fn knob_diff(old: Option<&GroupSettings>, new: &GroupSettings) -> Vec<String> {
    let d = GroupSettings::default();
    let old = old.unwrap_or(&d);
    let mut out = Vec::new();
    let mut push = |changed: bool, k: &str, v: String| {
        if changed {
            out.push(format!("{k}={v}"));
        }
    };
    let opt = |v: Option<String>| v.unwrap_or_else(|| "default".into());
    push(
        old.cpus != new.cpus,
        "cpuset.cpus",
        opt(new.cpus.as_ref().map(|c| c.to_string())),
    );
    push(
        old.mems != new.mems,
        "cpuset.mems",
        opt(new.mems.as_ref().map(|c| c.to_string())),
    );
    push(
        old.partition != new.partition,
        "cpuset.cpus.partition",
        match new.partition {
            Some(Partition::Root) => "root".into(),
            _ => "member".into(),
        },
    );
    push(
        old.cpu_weight != new.cpu_weight,
        "cpu.weight",
        opt(new.cpu_weight.map(|w| w.to_string())),
    );
    push(
        old.cpu_max != new.cpu_max,
        "cpu.max",
        match new.cpu_max {
            Some(m) => format!("{} {}", m.quota_us, m.period_us),
            None => "max".into(),
        },
    );
    push(
        old.cpu_idle != new.cpu_idle,
        "cpu.idle",
        u8::from(new.cpu_idle).to_string(),
    );
    push(
        old.rt_budget != new.rt_budget,
        "cpu.rt_runtime_us",
        opt(new
            .rt_budget
            .map(|b| format!("{}/{}", b.runtime_us, b.period_us))),
    );
    let bytes = |v: Option<u64>| v.map(|b| b.to_string()).unwrap_or_else(|| "default".into());
    let (om, nm) = (&old.memory, &new.memory);
    push(om.min != nm.min, "memory.min", bytes(nm.min));
    push(om.low != nm.low, "memory.low", bytes(nm.low));
    push(om.high != nm.high, "memory.high", bytes(nm.high));
    push(om.max != nm.max, "memory.max", bytes(nm.max));
    push(
        old.io_weight != new.io_weight,
        "io.weight",
        opt(new.io_weight.map(|w| w.to_string())),
    );
    push(
        old.io_max != new.io_max,
        "io.max",
        format!("{} devices", new.io_max.len()),
    );
    push(
        old.frozen != new.frozen,
        "cgroup.freeze",
        if new.frozen { "frozen" } else { "thawed" }.into(),
    );
    out
}

#[cfg(test)]
mod tests {
    use atoll_core::plan::CpuMax;
    use atoll_core::CpuSet;

    use super::*;

    #[test]
    fn diff_names_only_changed_knobs() {
        let a = GroupSettings {
            cpus: Some(CpuSet::parse("1-3").unwrap()),
            cpu_weight: Some(150),
            ..Default::default()
        };
        let mut b = a.clone();
        b.cpu_weight = Some(200);
        b.cpu_max = Some(CpuMax {
            quota_us: 50_000,
            period_us: 100_000,
        });
        assert_eq!(
            knob_diff(Some(&a), &b),
            ["cpu.weight=200", "cpu.max=50000 100000"]
        );
        assert_eq!(knob_diff(Some(&a), &a), Vec::<String>::new());
        assert_eq!(knob_diff(None, &a), ["cpuset.cpus=1-3", "cpu.weight=150"]);
    }
}
