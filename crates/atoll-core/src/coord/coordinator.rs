//! One island's coordinator: its CPUs, policy, units, overlays and the
//! scheduler stub that turns messages into knob changes.

use std::collections::BTreeMap;
use std::time::Duration;

use super::effect::{Change, Effect, Why};
use super::message::{Message, NackReason, Op, Reply};
use super::sched::{self, IslandView, UnitState};
use super::types::{ArbitrationPolicy, Direction, IslandSetup, Resource, UnitKnobs};
use super::{CoordConfig, CoordError, MAX_WEIGHT, MIN_WEIGHT};
use crate::spec::SchedPolicy;
use crate::{CpuSet, Name};

/// An island's coordinator (see the [module docs](super) for the rules).
///
/// Alone, [`Coordinator::handle`] serves what one island can decide:
/// null, tune, trigger, register, deregister, and a `borrow_preferred`
/// addressed to it (as the lender). `borrow_any` and `release` need the
/// ledger of loans and go through the [`PlatformManager`](super::PlatformManager).
#[derive(Clone, Debug)]
pub struct Coordinator {
    name: Name,
    home: CpuSet,
    cpus: CpuSet,
    /// CPUs it holds on loan (a subset of `cpus`).
    borrowed: CpuSet,
    policy: SchedPolicy,
    arbitration: ArbitrationPolicy,
    memory_bytes: u64,
    units: Vec<UnitState>,
    /// Overlays with a unit here, and their priority.
    overlays: Vec<(Name, u8)>,
    usage: Option<f64>,
    /// Its share of the platform CPU cap, thousandths of a CPU.
    cap_milli: Option<u64>,
    /// CPU → when it arrived here (for damping).
    arrived: BTreeMap<u32, Duration>,
    /// Overlay → arbitration round in which it was last served here.
    served: BTreeMap<Name, u64>,
    config: CoordConfig,
}

impl Coordinator {
    /// A coordinator for `setup`, holding its own CPUs and nothing borrowed.
    pub fn new(setup: IslandSetup, config: CoordConfig) -> Result<Self, CoordError> {
        config.validate()?;
        if setup.cpus.is_empty() {
            return Err(CoordError::EmptyIsland { island: setup.name });
        }
        let mut units: Vec<UnitState> = Vec::with_capacity(setup.units.len());
        let mut rt_sum = 0u64;
        for u in setup.units {
            if units.iter().any(|v| v.name == u.name) {
                return Err(CoordError::DuplicateUnit { unit: u.name });
            }
            check_knobs(&u.name, &u.knobs, &setup.policy)?;
            rt_sum += u.knobs.rt_runtime_us;
            units.push(UnitState::new(u.name, u.knobs));
        }
        if let SchedPolicy::Realtime(rt) = &setup.policy {
            if rt_sum > rt.runtime_us {
                return Err(CoordError::BadKnob {
                    unit: units[0].name.clone(),
                    field: "rt_runtime_us (sum over the island)",
                    value: rt_sum as f64,
                    range: format!("at most the island's {} us", rt.runtime_us),
                });
            }
        }
        Ok(Self {
            name: setup.name,
            cpus: setup.cpus.clone(),
            home: setup.cpus,
            borrowed: CpuSet::new(),
            policy: setup.policy,
            arbitration: setup.arbitration,
            memory_bytes: setup.memory_bytes,
            units,
            overlays: Vec::new(),
            usage: None,
            cap_milli: None,
            arrived: BTreeMap::new(),
            served: BTreeMap::new(),
            config,
        })
    }

    /// The island.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The CPUs it holds now: its own, minus lent, plus borrowed.
    pub fn cpus(&self) -> &CpuSet {
        &self.cpus
    }

    /// Its own CPUs, as configured.
    pub fn home(&self) -> &CpuSet {
        &self.home
    }

    /// The CPUs it holds on loan.
    pub fn borrowed(&self) -> &CpuSet {
        &self.borrowed
    }

    /// Its scheduler policy.
    pub fn policy(&self) -> &SchedPolicy {
        &self.policy
    }

    /// How it arbitrates.
    pub fn arbitration(&self) -> ArbitrationPolicy {
        self.arbitration
    }

    /// Changes how it arbitrates (from the next round).
    pub fn set_arbitration(&mut self, policy: ArbitrationPolicy) {
        self.arbitration = policy;
    }

    /// Its last usage sample, CPUs.
    pub fn usage(&self) -> Option<f64> {
        self.usage
    }

    /// Its share of the platform CPU cap, CPUs.
    pub fn cap(&self) -> Option<f64> {
        self.cap_milli.map(|m| m as f64 / 1000.0)
    }

    /// A unit's steady knobs (a boost is on top).
    pub fn knobs(&self, unit: &Name) -> Option<&UnitKnobs> {
        self.units
            .iter()
            .find(|u| &u.name == unit)
            .map(|u| &u.knobs)
    }

    /// When a unit's boost ends, if it is boosted at `now`.
    pub fn boosted_until(&self, unit: &Name, now: Duration) -> Option<Duration> {
        self.units
            .iter()
            .find(|u| &u.name == unit)
            .and_then(|u| u.boosted(now))
    }

    /// Its units and their steady knobs.
    pub fn units(&self) -> impl Iterator<Item = (&Name, &UnitKnobs)> {
        self.units.iter().map(|u| (&u.name, &u.knobs))
    }

    /// The overlays registered here, with their priority.
    pub fn overlays(&self) -> impl Iterator<Item = (&Name, u8)> {
        self.overlays.iter().map(|(n, p)| (n, *p))
    }

    /// The overlay a unit belongs to.
    pub fn overlay_of(&self, unit: &Name) -> Option<&Name> {
        self.units
            .iter()
            .find(|u| &u.name == unit)
            .and_then(|u| u.overlay.as_ref().map(|(o, _)| o))
    }

    /// Records the island's CPU usage over the last epoch, CPUs.
    pub fn observe(&mut self, used_cpus: f64) -> Result<(), CoordError> {
        if !(used_cpus.is_finite() && used_cpus >= 0.0) {
            return Err(CoordError::BadUsage {
                island: self.name.clone(),
                value: used_cpus,
            });
        }
        self.usage = Some(used_cpus);
        Ok(())
    }

    /// Serves a message one island can decide alone (see the type docs);
    /// `from` is the sending island.
    pub fn handle(&mut self, now: Duration, from: &Name, msg: &Message) -> Reply {
        let out = match msg {
            Message::Null => Ok(Vec::new()),
            Message::Tune {
                resource,
                dir,
                overlay,
                unit,
            } => self
                .tune(now, overlay, unit, *resource, *dir)
                .map(|e| e.into_iter().collect()),
            Message::Trigger {
                resource,
                overlay,
                unit,
            } => self.trigger(now, overlay, unit, *resource).map(|e| vec![e]),
            Message::BorrowPreferred {
                resource,
                overlay,
                island,
                amount,
            } if island == &self.name => {
                if *resource != Resource::Cores {
                    Err(NackReason::Unsupported {
                        resource: *resource,
                        op: Op::Borrow,
                    })
                } else if from == &self.name {
                    Err(NackReason::SelfBorrow {
                        island: self.name.clone(),
                    })
                } else {
                    self.lend(now, *amount).map(|cpus| {
                        vec![Effect::new(
                            Change::MoveCores {
                                from_island: self.name.clone(),
                                to_island: from.clone(),
                                cpus,
                            },
                            Why::Borrow {
                                overlay: overlay.clone(),
                            },
                        )]
                    })
                }
            }
            Message::Register { overlay } => {
                let here = &self.name;
                let checked: Result<(), NackReason> = overlay
                    .units
                    .iter()
                    .filter(|(i, _)| i == here)
                    .try_for_each(|(_, unit)| self.check_register(&overlay.name, unit));
                checked.map(|()| {
                    for (island, unit) in &overlay.units {
                        if island == &self.name {
                            self.register_unit(&overlay.name, overlay.priority, unit);
                        }
                    }
                    Vec::new()
                })
            }
            Message::Deregister { overlay } => {
                if self.overlays.iter().any(|(o, _)| o == overlay) {
                    let mut out = Vec::new();
                    self.deregister(now, overlay, &mut out);
                    Ok(out)
                } else {
                    Err(NackReason::NotRegistered {
                        overlay: overlay.clone(),
                    })
                }
            }
            Message::BorrowPreferred { .. }
            | Message::BorrowAny { .. }
            | Message::Release { .. }
            | Message::Revoke { .. }
            | Message::TriggerOverlay { .. } => Err(NackReason::NotForIsland {
                island: self.name.clone(),
            }),
        };
        match out {
            Ok(effects) => Reply::Ack { effects },
            Err(reason) => Reply::nack(reason),
        }
    }

    /// Ends boosts that reached their end, appending the writes to `out`,
    /// and forgets arrivals older than the damping window.
    pub fn expire(&mut self, now: Duration, out: &mut Vec<Effect>) {
        let damping = self.config.damping;
        self.arrived.retain(|_, t| *t + damping > now);
        for i in 0..self.units.len() {
            if self.units[i].boost.is_some_and(|b| b.until <= now) {
                self.end_boost(i, Why::BoostExpired, out);
            }
        }
    }

    // ----- crate-internal operations used by the platform manager -----

    /// The island's view for the scheduler stub, its units to change and
    /// the constants.
    fn view_and_units(&mut self) -> (IslandView<'_>, &mut [UnitState], &CoordConfig) {
        let v = IslandView {
            name: &self.name,
            policy: &self.policy,
            cpus: self.cpu_count(),
            cap: self.cap_milli.map(|m| m as f64 / 1000.0),
            memory_bytes: self.memory_bytes,
        };
        (v, &mut self.units, &self.config)
    }

    fn view(&self) -> IslandView<'_> {
        IslandView {
            name: &self.name,
            policy: &self.policy,
            cpus: self.cpu_count(),
            cap: self.cap(),
            memory_bytes: self.memory_bytes,
        }
    }

    /// How many CPUs the island has now. Saturating, though a real CPU
    /// set has at most 8192 ids (`idset::MAX_ID`).
    fn cpu_count(&self) -> u32 {
        u32::try_from(self.cpus.len()).unwrap_or(u32::MAX)
    }

    /// The unit of `overlay` named `unit`, or why not.
    fn unit_of(&self, overlay: &Name, unit: &Name) -> Result<usize, NackReason> {
        if !self.overlays.iter().any(|(o, _)| o == overlay) {
            return Err(NackReason::NotRegistered {
                overlay: overlay.clone(),
            });
        }
        self.units
            .iter()
            .position(|u| &u.name == unit && u.in_overlay(overlay))
            .ok_or_else(|| NackReason::UnknownUnit {
                overlay: overlay.clone(),
                unit: unit.clone(),
            })
    }

    pub(crate) fn tune(
        &mut self,
        now: Duration,
        overlay: &Name,
        unit: &Name,
        resource: Resource,
        dir: Direction,
    ) -> Result<Option<Effect>, NackReason> {
        let i = self.unit_of(overlay, unit)?;
        let (v, units, cfg) = self.view_and_units();
        let change = sched::tune(&v, units, i, resource, dir, now, cfg)?;
        Ok(change.map(|c| {
            Effect::new(
                c,
                Why::Tune {
                    overlay: overlay.clone(),
                    resource,
                    dir,
                },
            )
        }))
    }

    pub(crate) fn trigger(
        &mut self,
        now: Duration,
        overlay: &Name,
        unit: &Name,
        resource: Resource,
    ) -> Result<Effect, NackReason> {
        self.trigger_with(now, overlay, unit, resource, false)
    }

    /// A trigger; `together`: one of an overlay's units boosted with the
    /// rest (rule 3, overlay trigger).
    pub(crate) fn trigger_with(
        &mut self,
        now: Duration,
        overlay: &Name,
        unit: &Name,
        resource: Resource,
        together: bool,
    ) -> Result<Effect, NackReason> {
        let i = self.unit_of(overlay, unit)?;
        let (v, units, cfg) = self.view_and_units();
        let change = sched::trigger(&v, units, i, resource, now, cfg, together)?;
        Ok(Effect::new(
            change,
            Why::Trigger {
                overlay: overlay.clone(),
            },
        ))
    }

    pub(crate) fn set_cap_milli(&mut self, milli: Option<u64>) {
        self.cap_milli = milli;
    }

    pub(crate) fn cap_milli(&self) -> Option<u64> {
        self.cap_milli
    }

    pub(crate) fn has_unit(&self, unit: &Name) -> bool {
        self.units.iter().any(|u| &u.name == unit)
    }

    pub(crate) fn check_register(&self, overlay: &Name, unit: &Name) -> Result<(), NackReason> {
        let u =
            self.units
                .iter()
                .find(|u| &u.name == unit)
                .ok_or_else(|| NackReason::UnknownUnit {
                    overlay: overlay.clone(),
                    unit: unit.clone(),
                })?;
        match &u.overlay {
            Some((o, _)) => Err(NackReason::UnitTaken {
                unit: unit.clone(),
                overlay: o.clone(),
            }),
            None => Ok(()),
        }
    }

    pub(crate) fn register_unit(&mut self, overlay: &Name, priority: u8, unit: &Name) {
        if let Some(u) = self.units.iter_mut().find(|u| &u.name == unit) {
            u.overlay = Some((overlay.clone(), priority));
        }
        if !self.overlays.iter().any(|(o, _)| o == overlay) {
            self.overlays.push((overlay.clone(), priority));
        }
    }

    /// Takes an overlay out: its units' knobs go back to base and their
    /// boosts end.
    pub(crate) fn deregister(&mut self, now: Duration, overlay: &Name, out: &mut Vec<Effect>) {
        self.overlays.retain(|(o, _)| o != overlay);
        self.served.remove(overlay);
        for i in 0..self.units.len() {
            if !self.units[i].in_overlay(overlay) {
                continue;
            }
            let why = || Why::Deregistered {
                overlay: overlay.clone(),
            };
            self.reset_unit(i, None, now, why(), out);
            if self.units[i].boost.is_some() {
                self.end_boost(i, why(), out);
            }
            self.units[i].overlay = None;
        }
    }

    /// Puts a unit's knobs for `resource` (all for `None`) back to base.
    pub(crate) fn reset_unit(
        &mut self,
        i: usize,
        resource: Option<Resource>,
        now: Duration,
        why: Why,
        out: &mut Vec<Effect>,
    ) {
        let mut changes = Vec::new();
        let v = IslandView {
            name: &self.name,
            policy: &self.policy,
            cpus: 0,
            cap: None,
            memory_bytes: self.memory_bytes,
        };
        sched::reset_to_base(&v, &mut self.units[i], resource, now, &mut changes);
        out.extend(changes.into_iter().map(|c| Effect::new(c, why.clone())));
    }

    /// Ends a unit's boost, writing its steady value back.
    pub(crate) fn end_boost(&mut self, i: usize, why: Why, out: &mut Vec<Effect>) {
        let restore = self.view().restore_kind(&self.units[i].knobs);
        let u = &mut self.units[i];
        u.boost = None;
        out.push(Effect::new(
            Change::Unboost {
                island: self.name.clone(),
                unit: u.name.clone(),
                restore,
            },
            why,
        ));
    }

    /// The unit of the lowest-priority overlay below `below` that `pick`
    /// accepts (ties: overlay name, then unit name).
    pub(crate) fn victim(
        &self,
        below: u8,
        pick: impl Fn(&SchedPolicy, &UnitState) -> bool,
    ) -> Option<(usize, &Name)> {
        self.units
            .iter()
            .enumerate()
            .filter_map(|(i, u)| {
                let (o, p) = u.overlay.as_ref()?;
                (*p < below && pick(&self.policy, u)).then_some((i, o, *p, &u.name))
            })
            .min_by(|a, b| (a.2, a.1, a.3).cmp(&(b.2, b.1, b.3)))
            .map(|(i, o, _, _)| (i, o))
    }

    pub(crate) fn served(&self, overlay: &Name) -> Option<u64> {
        self.served.get(overlay).copied()
    }

    pub(crate) fn mark_served(&mut self, overlay: &Name, round: u64) {
        match self.served.get_mut(overlay) {
            Some(r) => *r = round,
            None => {
                self.served.insert(overlay.clone(), round);
            }
        }
    }
}

#[path = "lending.rs"]
mod lending;

#[path = "unit_changes.rs"]
mod unit_changes;

#[path = "unit_restore.rs"]
mod unit_restore;

fn check_knobs(unit: &Name, k: &UnitKnobs, policy: &SchedPolicy) -> Result<(), CoordError> {
    let bad = |field: &'static str, value: f64, range: String| CoordError::BadKnob {
        unit: unit.clone(),
        field,
        value,
        range,
    };
    if !(MIN_WEIGHT..=MAX_WEIGHT).contains(&k.weight) {
        return Err(bad("weight", f64::from(k.weight), "1..=10000".into()));
    }
    if let Some(c) = k.cap {
        if !(c.is_finite() && c > 0.0) {
            return Err(bad("cap", c, "a finite number of CPUs > 0".into()));
        }
    }
    if k.memory_high == Some(0) {
        return Err(bad("memory_high", 0.0, "> 0 bytes".into()));
    }
    if let SchedPolicy::Realtime(rt) = policy {
        if !(rt.priority_min..=rt.priority_max).contains(&k.rt_priority) {
            return Err(bad(
                "rt_priority",
                f64::from(k.rt_priority),
                format!("{}..={}", rt.priority_min, rt.priority_max),
            ));
        }
    }
    Ok(())
}
