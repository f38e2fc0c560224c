//! Effects into the coordination layer.
//!
//! Each [`Effect`] updates the coordination layer (see the
//! [module docs](super)) and touches the groups it changed, with
//! `Reason::Coordination`: the composer writes them, each once, with every
//! layer laid. Boosts of realtime units change their tasks' priority
//! instead: they are queued for the loop ([`Coordination::take_priorities`]).
//!
//! `MoveCores` moves CPUs from one island's layer to another's and touches
//! both islands; the composer writes the giver's groups first (its units
//! narrowed to what it keeps) and the receiver's after, so every cpuset
//! stays valid at every step and two islands never claim a CPU at once.

use atoll_core::coord::{BoostKind, Change, Effect, Why};
use atoll_core::decision::Reason;
use atoll_core::plan::{GroupPath, TaskPolicy};
use atoll_core::spec::{RtClass, SchedPolicy};
use atoll_core::Name;

use super::{Coordination, RtBoost};
use crate::compose::Composer;
use crate::registry::Registry;

/// `Some(v)` unless `v` is the configured value.
pub(super) fn unless_base<T: PartialEq>(v: T, base: Option<T>) -> Option<T> {
    if base.as_ref() == Some(&v) {
        None
    } else {
        Some(v)
    }
}

impl Coordination {
    /// Applies `effects` in order; `context` (e.g. ` (asked by uid 0)`)
    /// says what led to them.
    pub(crate) fn apply_coord(
        &mut self,
        effects: &[Effect],
        context: &str,
        compose: &mut Composer,
    ) {
        for e in effects {
            let why = self.coord_reason(e, context);
            self.apply_change(&e.change, why, compose);
        }
        if effects
            .iter()
            .any(|e| matches!(e.change, Change::MoveCores { .. }))
        {
            self.sync_borrowed();
        }
    }

    /// The decision reason of an effect.
    fn coord_reason(&self, effect: &Effect, context: &str) -> Reason {
        let why = &effect.why;
        let cap_overlay = || {
            self.overlays
                .keys()
                .find(|o| {
                    self.manager().and_then(|m| m.overlay(o)).is_some_and(|s| {
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
            Why::Revoke { overlay, lender } => (
                overlay.to_string(),
                format!("island {lender} revoked the cores it lent{context}"),
            ),
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

    fn apply_change(&mut self, change: &Change, why: Reason, compose: &mut Composer) {
        let base = |c: &Self, unit: &Name| c.base.get(unit).map(|(_, k)| *k);
        let touch_unit = |compose: &mut Composer, island: &Name, unit: &Name, why: Reason| {
            compose.touch(GroupPath::unit(island, unit), why);
        };
        match change {
            Change::SetWeight {
                island,
                unit,
                weight,
            } => {
                let b = base(self, unit).map(|k| k.weight);
                self.units.entry(unit.clone()).or_default().weight = unless_base(*weight, b);
                touch_unit(compose, island, unit, why);
            }
            Change::SetCap { island, unit, cpus } => {
                let b = base(self, unit).map(|k| k.cap);
                self.units.entry(unit.clone()).or_default().cap = unless_base(*cpus, b);
                touch_unit(compose, island, unit, why);
            }
            Change::SetRtBudget {
                island,
                unit,
                runtime_us,
            } => {
                let b = base(self, unit).map(|k| k.rt_runtime_us);
                self.units.entry(unit.clone()).or_default().rt_runtime_us =
                    unless_base(*runtime_us, b);
                touch_unit(compose, island, unit, why);
            }
            Change::SetMemoryHigh {
                island,
                unit,
                bytes,
            } => {
                let b = base(self, unit).map(|k| k.memory_high);
                self.units.entry(unit.clone()).or_default().memory_high = unless_base(*bytes, b);
                touch_unit(compose, island, unit, why);
            }
            Change::Boost {
                island, unit, kind, ..
            } => match kind {
                BoostKind::Weight { weight } => {
                    self.units.entry(unit.clone()).or_default().boost_weight = Some(*weight);
                    touch_unit(compose, island, unit, why);
                }
                BoostKind::RtPriority { priority } => {
                    self.units.entry(unit.clone()).or_default().boost_rt = Some(*priority);
                    self.priorities.push(RtBoost {
                        island: island.clone(),
                        unit: unit.clone(),
                        priority: Some(*priority),
                        why,
                    });
                }
            },
            Change::Unboost {
                island,
                unit,
                restore,
            } => {
                let c = self.units.entry(unit.clone()).or_default();
                c.boost_weight = None;
                c.boost_rt = None;
                match restore {
                    BoostKind::Weight { weight } => {
                        let b = base(self, unit).map(|k| k.weight);
                        self.units.entry(unit.clone()).or_default().weight =
                            unless_base(*weight, b);
                        touch_unit(compose, island, unit, why);
                    }
                    BoostKind::RtPriority { .. } => self.priorities.push(RtBoost {
                        island: island.clone(),
                        unit: unit.clone(),
                        priority: None,
                        why,
                    }),
                }
            }
            Change::MoveCores {
                from_island,
                to_island,
                cpus,
            } => {
                let held = |c: &Self, i: &Name| c.island_cpus.get(i).cloned().unwrap_or_default();
                let giver = held(self, from_island).difference(cpus);
                let receiver = held(self, to_island).union(cpus);
                self.island_cpus.insert(from_island.clone(), giver);
                self.island_cpus.insert(to_island.clone(), receiver);
                compose.touch(GroupPath::island(from_island), why.clone());
                compose.touch(GroupPath::island(to_island), why);
            }
            Change::SetIslandCap { island, cpus } => {
                match cpus {
                    Some(c) => self.island_caps.insert(island.clone(), *c),
                    None => self.island_caps.remove(island),
                };
                compose.touch(GroupPath::island(island), why);
            }
        }
    }
}

/// The group and the task policy an RT boost gives its tasks: the boost's
/// priority in the island's RT class, or the unit's own policy when the
/// boost ends. `None` when the unit is gone.
pub fn boost_policy(reg: &Registry, b: &RtBoost) -> Option<(GroupPath, TaskPolicy)> {
    let group = GroupPath::unit(&b.island, &b.unit);
    let unit = reg.unit_at(&group)?;
    let island = reg.island(&b.island)?;
    let own = atoll_core::plan::task_policy(island, Some(unit));
    let policy = match (b.priority, &island.policy) {
        (Some(p), SchedPolicy::Realtime(rt)) => match rt.class {
            RtClass::Fifo => TaskPolicy::Fifo(p),
            RtClass::Rr => TaskPolicy::Rr(p),
        },
        _ => own,
    };
    Some((group, policy))
}
