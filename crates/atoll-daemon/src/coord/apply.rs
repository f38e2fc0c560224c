//! Effects to the kernel.
//!
//! Each [`Effect`] updates the coordination overlay (see the
//! [module docs](super)) and writes the groups it touches, merged the same
//! way the reconcile merges them; every write is an `ApplyGroup` decision
//! with `Reason::Coordination`. Boosts of realtime units set their tasks'
//! priority instead (a `SetPolicy` decision).
//!
//! `MoveCores` keeps every cpuset valid at every step: the giver's units
//! (where the isolation model pins them) shrink first, then the giver
//! island, then the receiver island grows, then its units are written again
//! so that those inheriting their parent's CPUs (cgroup v1 copies them at
//! creation) follow. Two islands never claim a CPU at once, so exclusive
//! partitions stay valid; tasks move with the cpuset.

use atoll_core::coord::{BoostKind, Change, Effect, Why};
use atoll_core::decision::{Action, Reason};
use atoll_core::plan::{GroupPath, GroupSettings, TaskPolicy};
use atoll_core::spec::{RtClass, SchedPolicy};
use atoll_core::{CpuSet, Name};

use crate::controller::Controller;
use crate::reconcile::knob_diff;

/// `Some(v)` unless `v` is the configured value.
fn unless_base<T: PartialEq>(v: T, base: Option<T>) -> Option<T> {
    if base.as_ref() == Some(&v) {
        None
    } else {
        Some(v)
    }
}

impl Controller {
    /// Applies `effects` in order; `context` (e.g. ` (asked by uid 0)`)
    /// says what led to them. Returns what the kernel refused, in words.
    pub(crate) fn apply_coord(&mut self, effects: &[Effect], context: &str) -> Vec<String> {
        let mut refused = Vec::new();
        for e in effects {
            let why = self.coord_reason(e, context);
            if let Err(err) = self.apply_change(&e.change, why) {
                tracing::warn!("coordination: {}: {err}", e.change);
                refused.push(err);
            }
        }
        refused
    }

    /// The decision reason of an effect.
    fn coord_reason(&self, effect: &Effect, context: &str) -> Reason {
        let why = &effect.why;
        let cap_overlay = || {
            self.coord
                .overlays
                .keys()
                .find(|o| {
                    self.coord
                        .manager()
                        .and_then(|m| m.overlay(o))
                        .is_some_and(|s| {
                            matches!(
                                s.property,
                                atoll_core::coord::Property::PlatformCpuCap { .. }
                            )
                        })
                })
                .map_or_else(|| "platform".to_string(), |o| o.to_string())
        };
        let (overlay, detail) = match why {
            Why::Tune {
                overlay,
                resource,
                dir,
            } => (overlay.to_string(), format!("tune {resource} {dir}{context}")),
            Why::Trigger { overlay } => (overlay.to_string(), format!("trigger{context}")),
            Why::BoostExpired => {
                let overlay = match &effect.change {
                    Change::Unboost { island, unit, .. } => self
                        .coord
                        .manager()
                        .and_then(|m| m.island(island)?.overlay_of(unit).cloned()),
                    _ => None,
                };
                (
                    overlay.map_or_else(|| "platform".to_string(), |o| o.to_string()),
                    "the boost ended".to_string(),
                )
            }
            Why::Borrow { overlay } => (overlay.to_string(), format!("borrow cores{context}")),
            Why::Release { overlay } => (overlay.to_string(), format!("release cores{context}")),
            Why::Deregistered { overlay } => (
                overlay.to_string(),
                format!("the overlay left: back to the configured values{context}"),
            ),
            Why::Escalation {
                winner,
                victim,
                nacks,
                resource,
            } => (
                winner.to_string(),
                format!(
                    "escalated after {nacks} refusals of {resource}: taken from lower-priority overlay {victim}{context}"
                ),
            ),
            Why::CapSet { overlay, total } => (
                overlay
                    .as_ref()
                    .map_or_else(|| "platform".to_string(), |o| o.to_string()),
                if *total > 0.0 {
                    format!("platform CPU cap of {total} CPUs split among the islands{context}")
                } else {
                    format!("platform CPU cap lifted{context}")
                },
            ),
            Why::CapRebalance { .. } => (cap_overlay(), format!("{why}{context}")),
        };
        Reason::Coordination { overlay, detail }
    }

    fn apply_change(&mut self, change: &Change, why: Reason) -> Result<(), String> {
        let base = |c: &Self, unit: &Name| c.coord.base.get(unit).map(|(_, k)| *k);
        match change {
            Change::SetWeight {
                island,
                unit,
                weight,
            } => {
                let b = base(self, unit).map(|k| k.weight);
                self.coord.units.entry(unit.clone()).or_default().weight = unless_base(*weight, b);
                self.write_unit(island, unit, why)
            }
            Change::SetCap { island, unit, cpus } => {
                let b = base(self, unit).map(|k| k.cap);
                self.coord.units.entry(unit.clone()).or_default().cap = unless_base(*cpus, b);
                self.write_unit(island, unit, why)
            }
            Change::SetRtBudget {
                island,
                unit,
                runtime_us,
            } => {
                let b = base(self, unit).map(|k| k.rt_runtime_us);
                self.coord
                    .units
                    .entry(unit.clone())
                    .or_default()
                    .rt_runtime_us = unless_base(*runtime_us, b);
                self.write_unit(island, unit, why)
            }
            Change::SetMemoryHigh {
                island,
                unit,
                bytes,
            } => {
                let b = base(self, unit).map(|k| k.memory_high);
                self.coord
                    .units
                    .entry(unit.clone())
                    .or_default()
                    .memory_high = unless_base(*bytes, b);
                self.write_unit(island, unit, why)
            }
            Change::Boost {
                island, unit, kind, ..
            } => match kind {
                BoostKind::Weight { weight } => {
                    self.coord
                        .units
                        .entry(unit.clone())
                        .or_default()
                        .boost_weight = Some(*weight);
                    self.write_unit(island, unit, why)
                }
                BoostKind::RtPriority { priority } => {
                    self.coord.units.entry(unit.clone()).or_default().boost_rt = Some(*priority);
                    self.set_unit_rt_priority(island, unit, Some(*priority), why)
                }
            },
            Change::Unboost {
                island,
                unit,
                restore,
            } => {
                let c = self.coord.units.entry(unit.clone()).or_default();
                c.boost_weight = None;
                c.boost_rt = None;
                match restore {
                    BoostKind::Weight { weight } => {
                        let b = base(self, unit).map(|k| k.weight);
                        self.coord.units.entry(unit.clone()).or_default().weight =
                            unless_base(*weight, b);
                        self.write_unit(island, unit, why)
                    }
                    BoostKind::RtPriority { .. } => {
                        self.set_unit_rt_priority(island, unit, None, why)
                    }
                }
            }
            Change::MoveCores {
                from_island,
                to_island,
                cpus,
            } => self.move_cores(from_island, to_island, cpus, why),
            Change::SetIslandCap { island, cpus } => {
                match cpus {
                    Some(c) => self.coord.island_caps.insert(island.clone(), *c),
                    None => self.coord.island_caps.remove(island),
                };
                self.write_island(island, why)
            }
        }
    }

    /// Writes a unit group: its isolation (or planned) settings with
    /// coordination's knobs over them.
    pub(crate) fn write_unit(
        &mut self,
        island: &Name,
        unit: &Name,
        why: Reason,
    ) -> Result<(), String> {
        let group = GroupPath::unit(island, unit);
        let Some(settings) = self.unit_settings(&group) else {
            return Err(format!("unit {unit} has no group in island {island}"));
        };
        self.write_group(&group, settings, why)
    }

    /// A unit group's settings as every writer merges them.
    pub(crate) fn unit_settings(&self, group: &GroupPath) -> Option<GroupSettings> {
        let unit = self.reg.unit_at(group)?;
        let island = self.reg.spec().island(&unit.island)?;
        let base = match self.iso.overlay.get(group) {
            Some(s) => s.clone(),
            None => self.reg.plan().get(group)?.settings.clone(),
        };
        let s = self.coord.merge_unit(island, &unit.name, base);
        let s = self
            .comm
            .merge_unit(self.reg.spec().comm.as_ref(), &unit.name, s);
        Some(self.merge_app_unit(group, s))
    }

    fn write_island(&mut self, island: &Name, why: Reason) -> Result<(), String> {
        let group = GroupPath::island(island);
        let Some(planned) = self.reg.plan().get(&group).map(|g| g.settings.clone()) else {
            return Err(format!("no island {island}"));
        };
        let settings = self.coord.merge_island(island, planned);
        self.write_group(&group, settings, why)
    }

    /// Writes `settings` to `path` if they differ from what was applied, as
    /// a decision; fallbacks are recorded as the reconcile records them.
    fn write_group(
        &mut self,
        path: &GroupPath,
        settings: GroupSettings,
        why: Reason,
    ) -> Result<(), String> {
        let before = self.applied.get(path);
        if before == Some(&settings) {
            return Ok(());
        }
        let knobs = knob_diff(before, &settings);
        match self.env.backend.apply(path, &settings) {
            Ok(fallbacks) => {
                self.decide(
                    Action::ApplyGroup {
                        path: path.clone(),
                        knobs,
                    },
                    why,
                );
                self.applied.insert(path.clone(), settings);
                self.note_fallbacks(path, fallbacks);
                Ok(())
            }
            Err(e) => {
                self.decide(
                    Action::ApplyGroup {
                        path: path.clone(),
                        knobs,
                    },
                    Reason::KernelRefused {
                        error: e.to_string(),
                    },
                );
                Err(format!("{path}: {e}"))
            }
        }
    }

    /// Moves `cpus` from one island to another in the safe order of the
    /// module docs.
    fn move_cores(
        &mut self,
        from: &Name,
        to: &Name,
        cpus: &CpuSet,
        why: Reason,
    ) -> Result<(), String> {
        let held = |c: &Self, i: &Name| c.coord.island_cpus.get(i).cloned().unwrap_or_default();
        let giver = held(self, from).difference(cpus);
        let receiver = held(self, to).union(cpus);
        let mut errors = Vec::new();
        let units_of = |c: &Self, island: &Name| -> Vec<Name> {
            c.reg
                .units()
                .filter(|(u, _)| &u.island == island)
                .map(|(u, _)| u.name.clone())
                .collect()
        };
        for unit in units_of(self, from) {
            let group = GroupPath::unit(from, &unit);
            if let Some(o) = self.iso.overlay.get_mut(&group) {
                if let Some(c) = &o.cpus {
                    let fit = c.intersection(&giver);
                    o.cpus = Some(if fit.is_empty() { giver.clone() } else { fit });
                }
            }
            if let Err(e) = self.write_unit(from, &unit, why.clone()) {
                errors.push(e);
            }
        }
        self.coord.island_cpus.insert(from.clone(), giver);
        if let Err(e) = self.write_island(from, why.clone()) {
            errors.push(e);
        }
        self.coord.island_cpus.insert(to.clone(), receiver);
        if let Err(e) = self.write_island(to, why) {
            errors.push(e);
        }
        for unit in units_of(self, to) {
            let group = GroupPath::unit(to, &unit);
            if let Some(s) = self.applied.get(&group).cloned() {
                if let Err(e) = self.env.backend.apply(&group, &s) {
                    errors.push(format!("{group}: {e}"));
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Sets the RT priority of a realtime unit's tasks: `priority` for a
    /// boost, `None` for the unit's own.
    fn set_unit_rt_priority(
        &mut self,
        island: &Name,
        unit: &Name,
        priority: Option<u8>,
        why: Reason,
    ) -> Result<(), String> {
        let group = GroupPath::unit(island, unit);
        let Some(own) = self.reg.unit_at(&group).and_then(|u| {
            let i = self.reg.spec().island(island)?;
            Some((atoll_core::plan::task_policy(i, Some(u)), i.policy.clone()))
        }) else {
            return Err(format!("unit {unit} has no group in island {island}"));
        };
        let policy = match (priority, &own.1) {
            (Some(p), SchedPolicy::Realtime(rt)) => match rt.class {
                RtClass::Fifo => TaskPolicy::Fifo(p),
                RtClass::Rr => TaskPolicy::Rr(p),
            },
            _ => own.0,
        };
        for pid in self.env.backend.processes(&group).unwrap_or_default() {
            self.set_policy(pid, policy, why.clone());
        }
        Ok(())
    }
}
