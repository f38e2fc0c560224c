//! Sampling and the reactive policies of the epoch step.
//!
//! Islands are sampled every epoch (CPU time, throttled periods when a cap
//! is in force, CPU pressure: two or three reads per island); units only
//! when an overlay watches their pressure (and then, where PSI triggers
//! serve, only after a trigger fired or while tuned up: see
//! [`pressure`](super::pressure)) or their receive queues. The
//! reactive messages of one epoch are submitted together and arbitrated as
//! one round, so overlays competing for the same island are ordered by its
//! arbitration policy (see [`policy`](super::policy) for the rules).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use atoll_core::backend::StatSelect;
use atoll_core::coord::{Direction, Message, Resource, Ticket};
use atoll_core::plan::GroupPath;
use atoll_core::Name;

use super::policy::{self, UtilWant, REACT_INTERVAL};
use super::pressure::Step;
use super::{retry_at, Coordination, Counters, Inputs};
use crate::compose::Composer;
use crate::load::IslandLoad;

/// A reactive message and what led to it.
struct Planned {
    overlay: Name,
    from: Name,
    msg: Message,
    /// Why, in words, for the decisions: ` (CPU pressure 35% > 20%)`.
    context: String,
    /// What it is about, for the retry time.
    key: String,
}

impl Coordination {
    /// Records the islands' loads over the last epoch and feeds the
    /// manager.
    pub(super) fn observe(&mut self, inp: &Inputs<'_>) -> Vec<(Name, IslandLoad)> {
        let mut out = Vec::new();
        for (island, load) in inp.loads {
            if let Ok(m) = self.manager.as_mut() {
                if let Err(e) = m.observe(island, load.used) {
                    tracing::warn!("coordination: {e}");
                }
            }
            self.loads.insert(island.clone(), *load);
            out.push((island.clone(), *load));
        }
        out
    }

    /// CPU pressure (%) of a unit since its last sample: the kernel's
    /// per-group figure, else its threads' run-queue waits.
    fn sample_unit_pressure(
        &mut self,
        inp: &Inputs<'_>,
        island: &Name,
        unit: &Name,
    ) -> Option<f64> {
        let now = inp.now;
        let group = GroupPath::unit(island, unit);
        let st = inp.mon.stats_of(&group, StatSelect::CPU).ok()?;
        let cur = Counters {
            at: now,
            cpu_us: st.cpu_usage_us.unwrap_or(0),
            psi_us: st.cpu_pressure.map(|p| p.some.total_us),
        };
        let last = self
            .counters
            .insert(group.clone(), cur)
            .filter(|l| now > l.at)?;
        let window = (now - last.at).as_micros() as f64;
        let p = match (cur.psi_us, last.psi_us) {
            (Some(a), Some(b)) => (a.saturating_sub(b) as f64 * 100.0 / window).min(100.0),
            _ => {
                let used = cur.cpu_us.saturating_sub(last.cpu_us) as f64 / window;
                let allowed = self.island_cpus.get(island).map_or(0, |c| c.len());
                self.waits
                    .pressure(&group, now, used, allowed, inp.mon, inp.procs)?
            }
        };
        self.unit_pressure.insert(unit.clone(), p);
        Some(p)
    }

    /// The CPU pressure (%) this epoch of every unit an overlay watches
    /// with `react_pressure`: read where it must be (see
    /// [`pressure`](super::pressure)), once per unit however many overlays
    /// watch it.
    fn unit_pressures(
        &mut self,
        inp: &Inputs<'_>,
        watched: &[(Name, atoll_core::spec::ReactPolicy)],
    ) -> BTreeMap<Name, f64> {
        // (island, unit) → the lowest threshold watching it.
        let mut wanted: BTreeMap<(Name, Name), f64> = BTreeMap::new();
        for (overlay, react) in watched {
            let Some(p) = react.pressure else { continue };
            let Some(spec) = self.manager().and_then(|m| m.overlay(overlay)) else {
                continue;
            };
            for (island, unit) in &spec.units {
                let t = wanted.entry((island.clone(), unit.clone())).or_insert(p);
                *t = t.min(p);
            }
        }
        for g in self.psi.begin(inp.mon) {
            self.counters.remove(&g);
        }
        let groups: BTreeSet<GroupPath> =
            wanted.keys().map(|(i, u)| GroupPath::unit(i, u)).collect();
        self.psi.retain(&groups);
        let mut out = BTreeMap::new();
        for ((island, unit), threshold) in wanted {
            let group = GroupPath::unit(&island, &unit);
            let above = self.cpu_above_base(&unit);
            match self
                .psi
                .before_read(&group, inp.now, threshold, above, inp.mon)
            {
                Step::Wait => continue,
                Step::Armed => {
                    self.counters.remove(&group);
                    continue;
                }
                Step::Read => {}
            }
            let p = self.sample_unit_pressure(inp, &island, &unit);
            if let Some(p) = p {
                out.insert(unit.clone(), p);
            }
            let step = self
                .psi
                .after_read(&group, inp.now, p, threshold, above, inp.mon);
            if step == Step::Armed {
                self.counters.remove(&group);
            }
        }
        out
    }

    /// The overlays' reactive messages for this epoch, arbitrated as one
    /// round, and their effects applied.
    pub(super) fn react(&mut self, inp: &Inputs<'_>, compose: &mut Composer) {
        let now = inp.now;
        let mut planned = Vec::new();
        let watched: Vec<(Name, atoll_core::spec::ReactPolicy)> = self
            .overlays
            .iter()
            .filter(|(_, s)| !s.react.is_empty())
            .map(|(n, s)| (n.clone(), s.react))
            .collect();
        let pressures = self.unit_pressures(inp, &watched);
        for (overlay, react) in watched {
            let Some(units) = self
                .manager()
                .and_then(|m| m.overlay(&overlay))
                .map(|s| s.units.clone())
            else {
                continue;
            };
            for (island, unit) in &units {
                if let Some(threshold) = react.pressure {
                    if let Some(&p) = pressures.get(unit) {
                        let above = self.cpu_above_base(unit);
                        if let Some(dir) = policy::pressure_step(p, threshold, above) {
                            let cmp = if dir == Direction::Up { ">" } else { "<" };
                            planned.push(Planned {
                                overlay: overlay.clone(),
                                from: island.clone(),
                                msg: Message::Tune {
                                    resource: Resource::CpuTime,
                                    dir,
                                    overlay: overlay.clone(),
                                    unit: unit.clone(),
                                },
                                context: format!(
                                    " (CPU pressure of {unit} {p:.0}% {cmp} {})",
                                    if dir == Direction::Up {
                                        format!("{threshold}%")
                                    } else {
                                        format!("{}%", threshold * policy::RELAX_BELOW)
                                    }
                                ),
                                key: format!("tune {unit}"),
                            });
                        }
                    }
                }
                if let Some(threshold) = react.recv_queue {
                    let group = GroupPath::unit(island, unit);
                    let pids = inp.mon.processes(&group).unwrap_or_default();
                    let bytes = match self.recv.as_mut() {
                        Some(r) if !pids.is_empty() => r.queued_bytes(&pids),
                        _ => None,
                    };
                    if let Some(b) = bytes.filter(|b| policy::recv_queue_step(*b, threshold)) {
                        planned.push(Planned {
                            overlay: overlay.clone(),
                            from: island.clone(),
                            msg: Message::Trigger {
                                resource: Resource::CpuTime,
                                overlay: overlay.clone(),
                                unit: unit.clone(),
                            },
                            context: format!(
                                " (receive queue of {unit} {b} bytes > {threshold} bytes)"
                            ),
                            key: format!("trigger {unit}"),
                        });
                    }
                }
            }
            if let Some(threshold) = react.utilization {
                let mut islands: Vec<&Name> = units.iter().map(|(i, _)| i).collect();
                islands.sort();
                islands.dedup();
                let loans = self.manager().map(|m| m.loans()).unwrap_or_default();
                planned.extend(self.revokes(&overlay, &loans));
                for island in islands {
                    let Some(load) = self.loads.get(island).copied() else {
                        continue;
                    };
                    let mut from: Vec<(String, usize)> = Vec::new();
                    for l in loans
                        .iter()
                        .filter(|l| &l.borrower == island && l.overlay == overlay)
                    {
                        match from.iter_mut().find(|(n, _)| n == l.lender.as_str()) {
                            Some((_, k)) => *k += 1,
                            None => from.push((l.lender.to_string(), 1)),
                        }
                    }
                    let util = load.utilization();
                    let (msg, context) = match policy::utilization_step(
                        load.used, load.cpus, threshold, &from,
                    ) {
                        Some(UtilWant::Borrow) => (
                            Message::BorrowAny {
                                resource: Resource::Cores,
                                overlay: overlay.clone(),
                                amount: 1,
                            },
                            format!(" (island {island} utilization {util:.2} > {threshold})"),
                        ),
                        Some(UtilWant::Release(lender)) => {
                            let Ok(lender) = Name::new(&lender) else {
                                continue;
                            };
                            (
                                    Message::Release {
                                        resource: Resource::Cores,
                                        overlay: overlay.clone(),
                                        island: lender,
                                    },
                                    format!(
                                        " (island {island} utilization {util:.2} would stay below {:.2} without them)",
                                        threshold * policy::RELEASE_BELOW
                                    ),
                                )
                        }
                        None => continue,
                    };
                    planned.push(Planned {
                        overlay: overlay.clone(),
                        from: island.clone(),
                        msg,
                        context,
                        key: format!("cores {island}"),
                    });
                }
            }
        }
        self.run_round(now, planned, compose);
    }

    /// A `revoke` from each lender of the overlay's loans whose own use
    /// now fills the CPUs it still holds (see [`policy::revoke_step`]).
    fn revokes(&self, overlay: &Name, loans: &[atoll_core::coord::Loan]) -> Vec<Planned> {
        let mut pairs: Vec<(&Name, &Name)> = loans
            .iter()
            .filter(|l| &l.overlay == overlay)
            .map(|l| (&l.lender, &l.borrower))
            .collect();
        pairs.sort();
        pairs.dedup();
        pairs
            .into_iter()
            .filter_map(|(lender, borrower)| {
                let load = self.loads.get(lender)?;
                if !policy::revoke_step(load.used, load.cpus) {
                    return None;
                }
                Some(Planned {
                    overlay: overlay.clone(),
                    from: lender.clone(),
                    msg: Message::Revoke {
                        resource: Resource::Cores,
                        overlay: overlay.clone(),
                        island: borrower.clone(),
                    },
                    context: format!(
                        " (island {lender} uses {:.2} of the {} CPUs it holds)",
                        load.used, load.cpus
                    ),
                    key: format!("revoke {lender} {borrower}"),
                })
            })
            .collect()
    }

    /// Submits the planned messages that are due, arbitrates, applies.
    fn run_round(&mut self, now: Duration, planned: Vec<Planned>, compose: &mut Composer) {
        let mut sent: Vec<(Ticket, Planned)> = Vec::new();
        for p in planned {
            let key = (p.overlay.clone(), p.key.clone());
            if self.next.get(&key).is_some_and(|t| *t > now) {
                continue;
            }
            let Ok(m) = self.manager.as_mut() else {
                return;
            };
            let backoff = p
                .msg
                .resource()
                .and_then(|r| m.backoff_until(&p.from, &p.overlay, r));
            if p.msg.is_demand() && backoff.is_some_and(|t| t > now) {
                continue;
            }
            match m.submit(now, &p.from, p.msg.clone()) {
                Ok(t) => sent.push((t, p)),
                Err(reason) => {
                    let until = retry_at(&reason).unwrap_or(now).max(now + REACT_INTERVAL);
                    self.next.insert(key, until);
                    self.count(Some(&p.overlay), false);
                }
            }
        }
        if sent.is_empty() {
            return;
        }
        let answers = match self.manager.as_mut() {
            Ok(m) => m.arbitrate(now),
            Err(_) => return,
        };
        for a in answers {
            let Some(i) = sent.iter().position(|(t, _)| *t == a.ticket) else {
                continue;
            };
            let (_, p) = sent.swap_remove(i);
            let key = (p.overlay.clone(), p.key.clone());
            self.count(Some(&p.overlay), a.reply.is_ack());
            let until = match a.reply.reason() {
                None => {
                    let effects = a.reply.effects().to_vec();
                    self.apply_coord(&effects, &p.context, compose);
                    now + REACT_INTERVAL
                }
                Some(r) => {
                    tracing::debug!("coordination: {} refused: {r}", p.msg);
                    retry_at(r).unwrap_or(now).max(now + REACT_INTERVAL)
                }
            };
            self.next.insert(key, until);
        }
    }
}
