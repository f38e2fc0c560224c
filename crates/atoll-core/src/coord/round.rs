//! Rounds of requests: arbitration, backoff and the hand-off to escalation
//! (rules 7–9 of the [module docs](super)).

use std::cmp::Reverse;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::effect::Effect;
use super::message::{Message, NackReason, Reply};
use super::platform::{OverlayRec, PlatformManager};
use super::types::{ArbitrationPolicy, Resource};
use crate::Name;

/// Identifies a submitted message in the answers of its round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ticket(pub u64);

impl fmt::Display for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// The reply to a submitted message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Which message.
    pub ticket: Ticket,
    /// Its sender.
    pub from: Name,
    /// The reply.
    pub reply: Reply,
}

/// A queued message.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    pub ticket: Ticket,
    pub from: usize,
    pub msg: Message,
}

/// A sender's backoff for one overlay and resource.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Backoff {
    /// Sending island.
    pub from: usize,
    pub resource: Resource,
    /// Successive nacks.
    pub nacks: u32,
    /// No demand before this.
    pub until: Duration,
}

/// Sort key of a demand in its island's round: priority (under `Priority`),
/// the overlay's request count so far this round, the round in which the
/// overlay was last served there, arrival.
type OrderKey = (Reverse<u8>, u32, Option<u64>, Ticket);

/// The overlay and resource of a demand.
fn demand_key(msg: &Message) -> Option<(&Name, Resource)> {
    if !msg.is_demand() {
        return None;
    }
    Some((msg.overlay()?, msg.resource()?))
}

fn reset_backoff(rec: &mut OverlayRec, from: usize, resource: Resource) {
    rec.backoff
        .retain(|b| !(b.from == from && b.resource == resource));
    rec.nacks[resource.index()] = 0;
}

impl PlatformManager {
    /// Queues a message for the next [`arbitrate`](Self::arbitrate). A demand
    /// from a sender that backs off is refused at once, as is a sender that
    /// is no island.
    pub fn submit(
        &mut self,
        now: Duration,
        from: &Name,
        msg: Message,
    ) -> Result<Ticket, NackReason> {
        let now = self.advance(now);
        let f = self
            .index_of(from)
            .ok_or_else(|| NackReason::UnknownIsland {
                island: from.clone(),
            })?;
        self.gate(now, f, &msg)?;
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        self.queue.push(Pending {
            ticket,
            from: f,
            msg,
        });
        Ok(ticket)
    }

    /// Messages queued for the next round.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Runs a round (rule 7): everything that is not a demand in arrival
    /// order, then each island's demands in its arbitration order. Returns
    /// one answer per queued message, in ticket order.
    pub fn arbitrate(&mut self, now: Duration) -> Vec<Answer> {
        let now = self.advance(now);
        self.round += 1;
        let round = self.round;
        let queue = std::mem::take(&mut self.queue);
        let mut answers = Vec::with_capacity(queue.len());
        let mut demands = Vec::new();
        for p in queue {
            if p.msg.is_demand() {
                demands.push(p);
            } else {
                let out = self.exec(now, p.from, &p.msg);
                let reply = self.settle(now, p.from, &p.msg, out);
                answers.push(self.answer(p.ticket, p.from, reply));
            }
        }
        let groups: Vec<usize> = demands
            .iter()
            .map(|p| self.group_of(now, p.from, &p.msg))
            .collect();
        for g in 0..self.islands.len() {
            let batch: Vec<&Pending> = demands
                .iter()
                .zip(&groups)
                .filter(|(_, gi)| **gi == g)
                .map(|(p, _)| p)
                .collect();
            if batch.is_empty() {
                continue;
            }
            let order = self.order(g, &batch);
            let mut winners: [Option<Name>; Resource::ALL.len()] = Default::default();
            for k in order {
                let p = batch[k];
                let (overlay, resource) = demand_key(&p.msg).unwrap_or_else(|| unreachable!());
                let mut out = self.exec(now, p.from, &p.msg);
                match &out {
                    Ok(_) => {
                        self.islands[g].mark_served(overlay, round);
                        winners[resource.index()] = Some(overlay.clone());
                    }
                    Err(r) if r.is_contended() => {
                        if let Some(w) = &winners[resource.index()] {
                            out = Err(NackReason::LostArbitration { winner: w.clone() });
                        }
                    }
                    Err(_) => {}
                }
                let reply = self.settle(now, p.from, &p.msg, out);
                answers.push(self.answer(p.ticket, p.from, reply));
            }
        }
        answers.sort_by_key(|a| a.ticket);
        answers
    }

    fn answer(&self, ticket: Ticket, from: usize, reply: Reply) -> Answer {
        Answer {
            ticket,
            from: self.islands[from].name().clone(),
            reply,
        }
    }

    /// The island at which a demand competes: the unit's, the lender's, or
    /// for `borrow_any` the one it would borrow from now (else the sender's).
    fn group_of(&self, now: Duration, from: usize, msg: &Message) -> usize {
        let g = match msg {
            Message::Tune { overlay, unit, .. } | Message::Trigger { overlay, unit, .. } => {
                self.unit_island(overlay, unit).ok()
            }
            Message::BorrowPreferred { island, .. } | Message::Revoke { island, .. } => {
                self.index_of(island)
            }
            Message::BorrowAny { overlay, .. } => self
                .overlays
                .get(overlay)
                .and_then(|rec| self.choose_lender(now, from, rec).ok()),
            _ => None,
        };
        g.unwrap_or(from)
    }

    /// Execution order of one island's demands, as indices into `batch`.
    fn order(&self, g: usize, batch: &[&Pending]) -> Vec<usize> {
        let island = &self.islands[g];
        let policy = island.arbitration();
        let mut keys: Vec<(OrderKey, usize)> = batch
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let overlay = p.msg.overlay();
                // An overlay's n-th request of the round comes after every
                // overlay's (n-1)-th.
                let rank = batch[..k]
                    .iter()
                    .filter(|q| q.msg.overlay() == overlay)
                    .count();
                // Saturating: a rank past u32::MAX still sorts last.
                let rank = u32::try_from(rank).unwrap_or(u32::MAX);
                let prio = match policy {
                    ArbitrationPolicy::Priority => overlay
                        .and_then(|o| self.overlays.get(o))
                        .map_or(0, |r| r.spec.priority),
                    ArbitrationPolicy::RoundRobin => 0,
                };
                let served = overlay.and_then(|o| island.served(o));
                ((Reverse(prio), rank, served, p.ticket), k)
            })
            .collect();
        keys.sort();
        keys.into_iter().map(|k| k.1).collect()
    }

    /// Refuses a demand from a sender that backs off (rule 8).
    pub(crate) fn gate(&self, now: Duration, from: usize, msg: &Message) -> Result<(), NackReason> {
        let Some((overlay, resource)) = demand_key(msg) else {
            return Ok(());
        };
        let Some(rec) = self.overlays.get(overlay) else {
            return Ok(());
        };
        match rec
            .backoff
            .iter()
            .find(|b| b.from == from && b.resource == resource)
        {
            Some(b) if now < b.until => Err(NackReason::BackingOff { until: b.until }),
            _ => Ok(()),
        }
    }

    /// Turns the outcome of a message into its reply: resets or grows the
    /// sender's backoff, counts shortage nacks and escalates (rules 8–9).
    pub(crate) fn settle(
        &mut self,
        now: Duration,
        from: usize,
        msg: &Message,
        out: Result<Vec<Effect>, NackReason>,
    ) -> Reply {
        let Some((overlay, resource)) = demand_key(msg) else {
            return match out {
                Ok(effects) => Reply::Ack { effects },
                Err(reason) => Reply::nack(reason),
            };
        };
        let escalate_after = self.config.escalate_after;
        let Some(rec) = self.overlays.get_mut(overlay) else {
            return match out {
                Ok(effects) => Reply::Ack { effects },
                Err(reason) => Reply::nack(reason),
            };
        };
        let out = match out {
            Ok(effects) => Ok(effects),
            Err(reason) if reason.is_shortage() => {
                let n = &mut rec.nacks[resource.index()];
                *n += 1;
                if *n >= escalate_after {
                    let nacks = *n;
                    *n = 0;
                    self.escalate(now, from, msg, nacks)
                } else {
                    Err(reason)
                }
            }
            Err(reason) => Err(reason),
        };
        let (base, max) = (self.config.backoff_base, self.config.backoff_max);
        let Some(rec) = self.overlays.get_mut(overlay) else {
            return match out {
                Ok(effects) => Reply::Ack { effects },
                Err(reason) => Reply::nack(reason),
            };
        };
        match out {
            Ok(effects) => {
                reset_backoff(rec, from, resource);
                Reply::Ack { effects }
            }
            Err(reason) => {
                let b = match rec
                    .backoff
                    .iter()
                    .position(|b| b.from == from && b.resource == resource)
                {
                    Some(k) => &mut rec.backoff[k],
                    None => {
                        rec.backoff.push(Backoff {
                            from,
                            resource,
                            nacks: 0,
                            until: now,
                        });
                        rec.backoff.last_mut().unwrap_or_else(|| unreachable!())
                    }
                };
                b.nacks = b.nacks.saturating_add(1);
                let doublings = (b.nacks - 1).min(31);
                b.until = now + base.saturating_mul(1u32 << doublings).min(max);
                Reply::nack(reason)
            }
        }
    }
}
