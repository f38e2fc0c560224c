//! The platform manager: owns the coordinators, routes messages, keeps the
//! ledger of loans, and handles what no single island can decide.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::cap::CapState;
use super::coordinator::Coordinator;
use super::effect::{Change, Effect, Why};
use super::message::{Message, NackReason, Op, Reply};
use super::round::{Backoff, Pending};
use super::types::{Idle, IslandSetup, OverlaySpec, Resource, UnitKnobs, UnitSetup};
use super::{ArbitrationPolicy, CoordConfig, CoordError};
use crate::spec::{IslandSpec, PlatformSpec, SchedPolicy, UnitSpec};
use crate::topology::Topology;
use crate::{CpuSet, Name};

/// One move of a CPU.
#[derive(Clone, Debug)]
pub(crate) struct Hop {
    pub lender: usize,
    pub borrower: usize,
    pub overlay: Name,
    pub at: Duration,
}

/// A registered overlay and its bookkeeping.
#[derive(Clone, Debug)]
pub(crate) struct OverlayRec {
    pub spec: OverlaySpec,
    /// Island index of each of `spec.units`.
    pub unit_islands: Vec<usize>,
    /// Backoff per (sending island, resource).
    pub backoff: Vec<Backoff>,
    /// Successive shortage nacks per resource.
    pub nacks: [u32; Resource::ALL.len()],
}

/// A CPU on loan, as reported for status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loan {
    /// The CPU.
    pub cpu: u32,
    /// The island it belongs to.
    pub owner: Name,
    /// The island that lent it last.
    pub lender: Name,
    /// The island that holds it.
    pub borrower: Name,
    /// The overlay it was borrowed for.
    pub overlay: Name,
    /// When it moved to the borrower.
    pub since: Duration,
}

/// Owns every island's coordinator and decides across islands (see the
/// [module docs](super) for the rules).
#[derive(Clone, Debug)]
pub struct PlatformManager {
    pub(crate) config: CoordConfig,
    pub(crate) islands: Vec<Coordinator>,
    pub(crate) overlays: BTreeMap<Name, OverlayRec>,
    /// CPU → its loans, oldest first; the last one's borrower holds it.
    pub(crate) loans: BTreeMap<u32, Vec<Hop>>,
    pub(crate) cap: Option<CapState>,
    pub(crate) queue: Vec<Pending>,
    pub(crate) next_ticket: u64,
    pub(crate) round: u64,
    pub(crate) last_now: Duration,
}

impl PlatformManager {
    /// A platform of `islands`, nothing registered or lent.
    pub fn new(config: CoordConfig, islands: Vec<IslandSetup>) -> Result<Self, CoordError> {
        config.validate()?;
        let mut coords: Vec<Coordinator> = Vec::with_capacity(islands.len());
        for setup in islands {
            for c in &coords {
                if c.name() == &setup.name {
                    return Err(CoordError::DuplicateIsland { island: setup.name });
                }
                let shared = c.home().intersection(&setup.cpus);
                if !shared.is_empty() {
                    return Err(CoordError::OverlappingIslands {
                        a: c.name().clone(),
                        b: setup.name,
                        cpus: shared,
                    });
                }
                if let Some(u) = setup.units.iter().find(|u| c.has_unit(&u.name)) {
                    return Err(CoordError::DuplicateUnit {
                        unit: u.name.clone(),
                    });
                }
            }
            coords.push(Coordinator::new(setup, config)?);
        }
        Ok(Self {
            config,
            islands: coords,
            overlays: BTreeMap::new(),
            loans: BTreeMap::new(),
            cap: None,
            queue: Vec::new(),
            next_ticket: 0,
            round: 0,
            last_now: Duration::ZERO,
        })
    }

    /// A platform from a validated spec: knobs as the plan sets them
    /// (weight, cap, `memory.high`; an island's RT budget split evenly), every
    /// island arbitrating by `arbitration`.
    pub fn from_spec(
        spec: &PlatformSpec,
        topo: &Topology,
        arbitration: ArbitrationPolicy,
        config: CoordConfig,
    ) -> Result<Self, CoordError> {
        let islands = spec
            .islands
            .iter()
            .map(|island| {
                let units: Vec<_> = spec
                    .units
                    .iter()
                    .filter(|u| u.island == island.name)
                    .collect();
                let count = units.len();
                let units = units
                    .into_iter()
                    .map(|u| UnitSetup {
                        name: u.name.clone(),
                        knobs: Self::unit_knobs(island, u, count),
                    })
                    .collect();
                IslandSetup {
                    name: island.name.clone(),
                    cpus: island.cpus.clone(),
                    policy: island.policy.clone(),
                    arbitration,
                    memory_bytes: topo.memory_of(&island.mems),
                    units,
                }
            })
            .collect();
        Self::new(config, islands)
    }

    /// A unit's configured knobs as the plan sets them, in an island of
    /// `count` units (weight, cap, `memory.high`; the island's RT budget
    /// split evenly).
    pub fn unit_knobs(island: &IslandSpec, u: &UnitSpec, count: usize) -> UnitKnobs {
        let e = &u.entitlement;
        let mut knobs = UnitKnobs {
            weight: crate::plan::unit_settings(island, u, count, None)
                .cpu_weight
                .unwrap_or(crate::weight::DEFAULT_WEIGHT),
            cap: e.cpu_cap,
            memory_high: e.memory.high,
            ..UnitKnobs::default()
        };
        if let SchedPolicy::Realtime(rt) = &island.policy {
            knobs.rt_priority = u.rt_priority.unwrap_or(rt.priority_min);
            knobs.rt_runtime_us = rt.runtime_us / count.max(1) as u64;
        }
        knobs
    }

    /// Learns a unit added at run time, in `island`.
    pub fn add_unit(&mut self, island: &Name, unit: UnitSetup) -> Result<(), CoordError> {
        if self.islands.iter().any(|c| c.has_unit(&unit.name)) {
            return Err(CoordError::DuplicateUnit { unit: unit.name });
        }
        let i = self.index_or_err(island)?;
        self.islands[i].add_unit(unit)
    }

    /// Forgets a unit that was removed; refused while an overlay holds it.
    /// `Ok(false)`: it did not know the unit.
    pub fn remove_unit(&mut self, unit: &Name) -> Result<bool, CoordError> {
        for c in &mut self.islands {
            match c.unit_overlay(unit) {
                None => continue,
                Some(Some(o)) => {
                    return Err(CoordError::UnitInOverlay {
                        unit: unit.clone(),
                        overlay: o.clone(),
                    })
                }
                Some(None) => return Ok(c.remove_unit(unit)),
            }
        }
        Ok(false)
    }

    /// New configured knobs for a unit whose entitlement changed (its RT
    /// runtime stays); its steady knobs start again from them.
    pub fn set_unit_base(&mut self, unit: &Name, knobs: UnitKnobs) -> Result<(), CoordError> {
        match self.islands.iter_mut().find(|c| c.has_unit(unit)) {
            Some(c) => c.set_base(unit, knobs),
            None => Err(CoordError::UnknownUnit { unit: unit.clone() }),
        }
    }

    /// The constants in force.
    pub fn config(&self) -> &CoordConfig {
        &self.config
    }

    /// Every island's coordinator, in configuration order.
    pub fn islands(&self) -> &[Coordinator] {
        &self.islands
    }

    /// The coordinator of `island`.
    pub fn island(&self, island: &Name) -> Option<&Coordinator> {
        self.islands.iter().find(|c| c.name() == island)
    }

    /// Sets how `island` arbitrates.
    pub fn set_arbitration(
        &mut self,
        island: &Name,
        policy: ArbitrationPolicy,
    ) -> Result<(), CoordError> {
        let i = self.index_or_err(island)?;
        self.islands[i].set_arbitration(policy);
        Ok(())
    }

    /// A registered overlay.
    pub fn overlay(&self, overlay: &Name) -> Option<&OverlaySpec> {
        self.overlays.get(overlay).map(|r| &r.spec)
    }

    /// Every registered overlay.
    pub fn overlay_specs(&self) -> impl Iterator<Item = &OverlaySpec> {
        self.overlays.values().map(|r| &r.spec)
    }

    /// Records `island`'s CPU usage over the last epoch.
    pub fn observe(&mut self, island: &Name, used_cpus: f64) -> Result<(), CoordError> {
        let i = self.index_or_err(island)?;
        self.islands[i].observe(used_cpus)
    }

    /// Asks every island what it could lend now (the query step of
    /// `borrow_any`).
    pub fn query_idle(&self, now: Duration) -> impl Iterator<Item = (&Name, Idle)> {
        self.islands.iter().map(move |c| (c.name(), c.idle(now)))
    }

    /// Every CPU on loan, by CPU.
    pub fn loans(&self) -> Vec<Loan> {
        self.loans
            .iter()
            .filter_map(|(cpu, stack)| {
                let (first, top) = (stack.first()?, stack.last()?);
                Some(Loan {
                    cpu: *cpu,
                    owner: self.islands[first.lender].name().clone(),
                    lender: self.islands[top.lender].name().clone(),
                    borrower: self.islands[top.borrower].name().clone(),
                    overlay: top.overlay.clone(),
                    since: top.at,
                })
            })
            .collect()
    }

    /// Until when `from` backs off sending demands for `overlay` and
    /// `resource`, if it was refused last.
    pub fn backoff_until(
        &self,
        from: &Name,
        overlay: &Name,
        resource: Resource,
    ) -> Option<Duration> {
        let f = self.index_of(from)?;
        self.overlays
            .get(overlay)?
            .backoff
            .iter()
            .find(|b| b.from == f && b.resource == resource)
            .map(|b| b.until)
    }

    /// Successive shortage nacks of `(overlay, resource)` since its last ack
    /// or escalation.
    pub fn nack_count(&self, overlay: &Name, resource: Resource) -> u32 {
        self.overlays
            .get(overlay)
            .map_or(0, |r| r.nacks[resource.index()])
    }

    /// Serves one message at once, as a round of its own: backoff, then the
    /// rules, then escalation. `from` is the sending island. A `now` earlier
    /// than one seen before counts as the latest seen.
    pub fn handle(&mut self, now: Duration, from: &Name, msg: &Message) -> Reply {
        let now = self.advance(now);
        let Some(f) = self.index_of(from) else {
            return Reply::nack(NackReason::UnknownIsland {
                island: from.clone(),
            });
        };
        if let Err(r) = self.gate(now, f, msg) {
            return Reply::nack(r);
        }
        let out = self.exec(now, f, msg);
        self.settle(now, f, msg, out)
    }

    /// Ends boosts that reached their end; returns the writes.
    pub fn tick(&mut self, now: Duration) -> Vec<Effect> {
        let now = self.advance(now);
        let mut out = Vec::new();
        for c in &mut self.islands {
            c.expire(now, &mut out);
        }
        out
    }

    // ----- internals -----

    pub(crate) fn advance(&mut self, now: Duration) -> Duration {
        self.last_now = self.last_now.max(now);
        self.last_now
    }

    pub(crate) fn index_of(&self, island: &Name) -> Option<usize> {
        self.islands.iter().position(|c| c.name() == island)
    }

    fn index_or_err(&self, island: &Name) -> Result<usize, CoordError> {
        self.index_of(island)
            .ok_or_else(|| CoordError::UnknownIsland {
                island: island.clone(),
            })
    }

    pub(crate) fn island_idx(&self, island: &Name) -> Result<usize, NackReason> {
        self.index_of(island)
            .ok_or_else(|| NackReason::UnknownIsland {
                island: island.clone(),
            })
    }

    pub(crate) fn rec(&self, overlay: &Name) -> Result<&OverlayRec, NackReason> {
        self.overlays
            .get(overlay)
            .ok_or_else(|| NackReason::NotRegistered {
                overlay: overlay.clone(),
            })
    }

    /// The island of `overlay`'s `unit`.
    pub(crate) fn unit_island(&self, overlay: &Name, unit: &Name) -> Result<usize, NackReason> {
        let rec = self.rec(overlay)?;
        rec.spec
            .units
            .iter()
            .position(|(_, u)| u == unit)
            .map(|k| rec.unit_islands[k])
            .ok_or_else(|| NackReason::UnknownUnit {
                overlay: overlay.clone(),
                unit: unit.clone(),
            })
    }

    /// Applies one message; no backoff, arbitration or escalation.
    pub(crate) fn exec(
        &mut self,
        now: Duration,
        from: usize,
        msg: &Message,
    ) -> Result<Vec<Effect>, NackReason> {
        let cores_only = |resource: Resource| {
            if resource == Resource::Cores {
                Ok(())
            } else {
                Err(NackReason::Unsupported {
                    resource,
                    op: Op::Borrow,
                })
            }
        };
        match msg {
            Message::Null => Ok(Vec::new()),
            Message::Tune {
                resource,
                dir,
                overlay,
                unit,
            } => {
                let i = self.unit_island(overlay, unit)?;
                let e = self.islands[i].tune(now, overlay, unit, *resource, *dir)?;
                Ok(e.into_iter().collect())
            }
            Message::Trigger {
                resource,
                overlay,
                unit,
            } => {
                let i = self.unit_island(overlay, unit)?;
                Ok(vec![self.islands[i].trigger(now, overlay, unit, *resource)?])
            }
            Message::BorrowPreferred {
                resource,
                overlay,
                island,
                amount,
            } => {
                cores_only(*resource)?;
                self.rec(overlay)?;
                let lender = self.island_idx(island)?;
                if lender == from {
                    return Err(NackReason::SelfBorrow {
                        island: island.clone(),
                    });
                }
                let cpus = self.islands[lender].lend(now, *amount)?;
                Ok(vec![self.record_move(now, lender, from, cpus, overlay)])
            }
            Message::BorrowAny {
                resource,
                overlay,
                amount,
            } => {
                cores_only(*resource)?;
                if *amount == 0 {
                    return Err(NackReason::ZeroAmount);
                }
                let lender = self.choose_lender(now, from, self.rec(overlay)?)?;
                let cpus = self.islands[lender].lend(now, *amount)?;
                Ok(vec![self.record_move(now, lender, from, cpus, overlay)])
            }
            Message::Release {
                resource,
                overlay,
                island,
            } => {
                cores_only(*resource)?;
                let lender = self.island_idx(island)?;
                self.release(now, from, lender, overlay)
            }
            Message::Revoke {
                resource,
                overlay,
                island,
            } => {
                cores_only(*resource)?;
                self.rec(overlay)?;
                let borrower = self.island_idx(island)?;
                if borrower == from {
                    return Err(NackReason::SelfBorrow {
                        island: island.clone(),
                    });
                }
                self.revoke(now, from, borrower, overlay, false)
            }
            Message::TriggerOverlay { resource, overlay } => {
                self.trigger_overlay(now, overlay, *resource)
            }
            Message::Register { overlay } => self.register(overlay),
            Message::Deregister { overlay } => self.deregister(now, overlay),
        }
    }

    /// The island a `borrow_any` from `from` borrows from (rule 5).
    pub(crate) fn choose_lender(
        &self,
        now: Duration,
        from: usize,
        rec: &OverlayRec,
    ) -> Result<usize, NackReason> {
        let mut own: Option<(u32, usize)> = None;
        let mut other: Option<(u32, usize)> = None;
        let mut damped: Option<(usize, u32, Duration)> = None;
        for (i, c) in self.islands.iter().enumerate() {
            if i == from {
                continue;
            }
            let q = c.idle(now);
            if q.lendable == 0 {
                if let Some((cpu, until)) = q.damped {
                    if damped.is_none_or(|(_, _, u)| until < u) {
                        damped = Some((i, cpu, until));
                    }
                }
                continue;
            }
            let slot = if rec.unit_islands.contains(&i) {
                &mut own
            } else {
                &mut other
            };
            if slot.is_none_or(|(idle, _)| q.idle_cores > idle) {
                *slot = Some((q.idle_cores, i));
            }
        }
        if let Some((_, i)) = own.or(other) {
            return Ok(i);
        }
        Err(match damped {
            Some((i, cpu, until)) => NackReason::Damped {
                island: self.islands[i].name().clone(),
                cpu,
                until,
            },
            None => NackReason::NoIdleCapacity { island: None },
        })
    }

    /// Records that `cpus` (already taken out of `lender`) now belong to
    /// `borrower` on loan for `overlay`.
    fn record_move(
        &mut self,
        now: Duration,
        lender: usize,
        borrower: usize,
        cpus: CpuSet,
        overlay: &Name,
    ) -> Effect {
        for cpu in cpus.iter() {
            self.loans.entry(cpu).or_default().push(Hop {
                lender,
                borrower,
                overlay: overlay.clone(),
                at: now,
            });
            self.islands[borrower].accept(now, cpu, true);
        }
        Effect::new(
            Change::MoveCores {
                from_island: self.islands[lender].name().clone(),
                to_island: self.islands[borrower].name().clone(),
                cpus,
            },
            Why::Borrow {
                overlay: overlay.clone(),
            },
        )
    }

    pub(crate) fn release(
        &mut self,
        now: Duration,
        from: usize,
        lender: usize,
        overlay: &Name,
    ) -> Result<Vec<Effect>, NackReason> {
        let cpus: CpuSet = self
            .loans
            .iter()
            .filter(|(_, s)| {
                s.last().is_some_and(|h| {
                    h.lender == lender && h.borrower == from && &h.overlay == overlay
                })
            })
            .map(|(c, _)| *c)
            .collect();
        if cpus.is_empty() {
            return Err(NackReason::NothingToRelease {
                island: self.islands[lender].name().clone(),
                overlay: overlay.clone(),
            });
        }
        let mut out = vec![Effect::new(
            Change::MoveCores {
                from_island: self.islands[from].name().clone(),
                to_island: self.islands[lender].name().clone(),
                cpus: cpus.clone(),
            },
            Why::Release {
                overlay: overlay.clone(),
            },
        )];
        for cpu in cpus.iter() {
            self.pop_loan(now, cpu, &mut out);
        }
        Ok(out)
    }

    /// Returns `cpu` to the lender of its last loan; then, while the loan
    /// under it belongs to an overlay that left, returns it further (each
    /// further step appended to `out`).
    pub(crate) fn pop_loan(&mut self, now: Duration, cpu: u32, out: &mut Vec<Effect>) {
        let mut first = true;
        loop {
            let Some(stack) = self.loans.get_mut(&cpu) else {
                return;
            };
            let Some(hop) = stack.pop() else {
                self.loans.remove(&cpu);
                return;
            };
            let loaned = !stack.is_empty();
            let next_gone = stack
                .last()
                .is_some_and(|h| !self.overlays.contains_key(&h.overlay));
            if !loaned {
                self.loans.remove(&cpu);
            }
            self.islands[hop.borrower].give_up(cpu);
            self.islands[hop.lender].accept(now, cpu, loaned);
            if !first {
                out.push(Effect::new(
                    Change::MoveCores {
                        from_island: self.islands[hop.borrower].name().clone(),
                        to_island: self.islands[hop.lender].name().clone(),
                        cpus: CpuSet::range(cpu, cpu),
                    },
                    Why::Deregistered {
                        overlay: hop.overlay,
                    },
                ));
            }
            first = false;
            if !next_gone {
                return;
            }
        }
    }
}
