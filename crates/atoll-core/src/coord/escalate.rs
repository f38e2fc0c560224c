//! What the platform manager decides when a request escalates (rule 9 of
//! the [module docs](super)): it takes from the lowest-priority overlay
//! strictly below the requester that holds what is asked.

use std::cmp::Reverse;
use std::time::Duration;

use super::effect::{Change, Effect, Why};
use super::message::{Message, NackReason};
use super::platform::PlatformManager;
use super::sched;
use super::types::{Direction, Resource};
use crate::{CpuSet, Name};

impl PlatformManager {
    /// Decides an escalated request of `from`; `nacks` is the count that led
    /// here. `Err` is the refusal to send.
    pub(crate) fn escalate(
        &mut self,
        now: Duration,
        from: usize,
        msg: &Message,
        nacks: u32,
    ) -> Result<Vec<Effect>, NackReason> {
        let (Some(overlay), Some(resource)) = (msg.overlay(), msg.resource()) else {
            return Err(NackReason::NotForIsland {
                island: self.islands[from].name().clone(),
            });
        };
        let refused = || NackReason::PlatformRefused {
            overlay: overlay.clone(),
            resource,
            nacks,
        };
        let Some(prio) = self.overlays.get(overlay).map(|r| r.spec.priority) else {
            return Err(refused());
        };
        let taken = match msg {
            Message::BorrowPreferred { .. } | Message::BorrowAny { .. }
                if resource == Resource::Cores =>
            {
                self.take_core(now, from, overlay, prio, nacks)
            }
            Message::Tune { unit, .. } if resource != Resource::Cores => {
                self.take_knob(now, overlay, unit, resource, prio, nacks)
            }
            Message::Trigger { unit, .. } => self.take_boost(now, overlay, unit, prio, nacks),
            // The lender's claim: carried out whatever the damping.
            Message::Revoke { island, .. } => self
                .index_of(island)
                .and_then(|b| self.revoke(now, from, b, overlay, true).ok()),
            _ => None,
        };
        taken.ok_or_else(refused)
    }

    /// Moves the victim's most recently borrowed CPU (not on `to`) to `to`.
    fn take_core(
        &mut self,
        now: Duration,
        to: usize,
        winner: &Name,
        prio: u8,
        nacks: u32,
    ) -> Option<Vec<Effect>> {
        let (_, _, _, cpu) = self
            .loans
            .iter()
            .filter_map(|(cpu, stack)| {
                let top = stack.last()?;
                let p = self.overlays.get(&top.overlay)?.spec.priority;
                (top.borrower != to && p < prio).then_some((p, &top.overlay, Reverse(top.at), *cpu))
            })
            .min()?;
        let stack = self.loans.get_mut(&cpu)?;
        let top = stack.last_mut()?;
        let (holder, lender) = (top.borrower, top.lender);
        let victim = top.overlay.clone();
        let loaned = if lender == to {
            stack.pop();
            !stack.is_empty()
        } else {
            top.borrower = to;
            top.overlay = winner.clone();
            top.at = now;
            true
        };
        if !loaned {
            self.loans.remove(&cpu);
        }
        self.islands[holder].give_up(cpu);
        self.islands[to].accept(now, cpu, loaned);
        Some(vec![Effect::new(
            Change::MoveCores {
                from_island: self.islands[holder].name().clone(),
                to_island: self.islands[to].name().clone(),
                cpus: CpuSet::range(cpu, cpu),
            },
            Why::Escalation {
                winner: winner.clone(),
                victim,
                nacks,
                resource: Resource::Cores,
            },
        )])
    }

    /// Puts the victim unit's knob back to its configured value, then
    /// retries the tune.
    fn take_knob(
        &mut self,
        now: Duration,
        winner: &Name,
        unit: &Name,
        resource: Resource,
        prio: u8,
        nacks: u32,
    ) -> Option<Vec<Effect>> {
        let i = self.unit_island(winner, unit).ok()?;
        let c = &mut self.islands[i];
        let (v, victim) = c
            .victim(prio, |policy, u| sched::above_base(policy, u, resource))
            .map(|(v, o)| (v, o.clone()))?;
        let why = Why::Escalation {
            winner: winner.clone(),
            victim,
            nacks,
            resource,
        };
        let mut out = Vec::new();
        c.reset_unit(v, Some(resource), now, why, &mut out);
        if let Ok(Some(e)) = c.tune(now, winner, unit, resource, Direction::Up) {
            out.push(e);
        }
        Some(out)
    }

    /// Ends the victim's boost on the unit's island, then retries the
    /// trigger.
    fn take_boost(
        &mut self,
        now: Duration,
        winner: &Name,
        unit: &Name,
        prio: u8,
        nacks: u32,
    ) -> Option<Vec<Effect>> {
        let i = self.unit_island(winner, unit).ok()?;
        let c = &mut self.islands[i];
        let (v, victim) = c
            .victim(prio, |_, u| u.boosted(now).is_some())
            .map(|(v, o)| (v, o.clone()))?;
        let why = Why::Escalation {
            winner: winner.clone(),
            victim,
            nacks,
            resource: Resource::CpuTime,
        };
        let mut out = Vec::new();
        c.end_boost(v, why, &mut out);
        if let Ok(e) = c.trigger(now, winner, unit, Resource::CpuTime) {
            out.push(e);
        }
        Some(out)
    }
}
