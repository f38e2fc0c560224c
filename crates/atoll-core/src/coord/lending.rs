//! What an island may lend (rule 4 of the [module docs](super::super)):
//! idle-capacity queries, lending, and CPUs arriving and leaving.

use std::time::Duration;

use super::super::message::NackReason;
use super::super::sched::EPS;
use super::super::types::Idle;
use super::Coordinator;
use crate::num::saturating_u32;
use crate::CpuSet;

impl Coordinator {
    /// Answers an idle-capacity query (rule 4).
    pub fn idle(&self, now: Duration) -> Idle {
        let idle_cores = self.idle_cores();
        let mut lendable = 0u32;
        let mut damped: Option<(u32, Duration)> = None;
        for cpu in self.lend_order() {
            if lendable >= idle_cores {
                break;
            }
            match self.damped_until(cpu, now) {
                Some(until) => {
                    if damped.is_none_or(|(_, u)| until < u) {
                        damped = Some((cpu, until));
                    }
                }
                None => lendable += 1,
            }
        }
        Idle {
            idle_cores,
            lendable,
            damped,
        }
    }

    fn idle_cores(&self) -> u32 {
        self.usage.map_or(0, |u| {
            saturating_u32(((self.cpus.len() as f64 - u) + EPS).floor())
        })
    }

    /// CPUs in the order it lends them: own CPUs but the first, then
    /// borrowed ones, lowest id first.
    fn lend_order(&self) -> impl Iterator<Item = u32> + '_ {
        self.cpus
            .iter()
            .filter(|c| !self.borrowed.contains(*c))
            .skip(1)
            .chain(self.borrowed.iter())
    }

    /// When `cpu` may leave, if it arrived too recently.
    pub(crate) fn damped_until(&self, cpu: u32, now: Duration) -> Option<Duration> {
        self.arrived
            .get(&cpu)
            .map(|t| *t + self.config.damping)
            .filter(|u| *u > now)
    }

    /// Takes up to `amount` lendable CPUs out of the island (rule 4).
    pub(crate) fn lend(&mut self, now: Duration, amount: u32) -> Result<CpuSet, NackReason> {
        if amount == 0 {
            return Err(NackReason::ZeroAmount);
        }
        let idle = self.idle_cores();
        if idle == 0 {
            return Err(NackReason::NoIdleCapacity {
                island: Some(self.name.clone()),
            });
        }
        let want = amount.min(idle) as usize;
        let mut out = CpuSet::new();
        let mut damped: Option<(u32, Duration)> = None;
        for cpu in self.lend_order() {
            if out.len() >= want {
                break;
            }
            match self.damped_until(cpu, now) {
                Some(until) => {
                    if damped.is_none_or(|(_, u)| until < u) {
                        damped = Some((cpu, until));
                    }
                }
                None => {
                    out.insert(cpu);
                }
            }
        }
        if out.is_empty() {
            return Err(match damped {
                Some((cpu, until)) => NackReason::Damped {
                    island: self.name.clone(),
                    cpu,
                    until,
                },
                None => NackReason::LastCore {
                    island: self.name.clone(),
                },
            });
        }
        for cpu in out.iter() {
            self.give_up(cpu);
        }
        Ok(out)
    }

    /// Adds a CPU that arrived at `now`; `loaned`: it is held on loan.
    pub(crate) fn accept(&mut self, now: Duration, cpu: u32, loaned: bool) {
        self.cpus.insert(cpu);
        if loaned {
            self.borrowed.insert(cpu);
        } else {
            self.borrowed.remove(cpu);
        }
        self.arrived.insert(cpu, now);
    }

    /// Removes a CPU that leaves.
    pub(crate) fn give_up(&mut self, cpu: u32) {
        self.cpus.remove(cpu);
        self.borrowed.remove(cpu);
        self.arrived.remove(&cpu);
    }
}
