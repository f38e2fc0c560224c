//! A lender taking its CPUs back (rule 6 of the [module docs](super), revoke) and
//! an overlay's units boosted together (rule 3, overlay trigger).

use std::time::Duration;

use super::effect::{Change, Effect, Why};
use super::message::{NackReason, Op};
use super::platform::PlatformManager;
use super::types::Resource;
use crate::{CpuSet, Name};

impl PlatformManager {
    /// Takes back to `lender` the CPUs it lent to `borrower` for
    /// `overlay`: its own at once, those it lent onward once their damping
    /// window is over (`force`: at once too, after an escalation).
    pub(crate) fn revoke(
        &mut self,
        now: Duration,
        lender: usize,
        borrower: usize,
        overlay: &Name,
        force: bool,
    ) -> Result<Vec<Effect>, NackReason> {
        let damping = self.config.damping;
        let mut cpus = CpuSet::new();
        let mut damped: Option<(u32, Duration)> = None;
        for (cpu, stack) in &self.loans {
            let Some(top) = stack.last() else { continue };
            if top.lender != lender || top.borrower != borrower || &top.overlay != overlay {
                continue;
            }
            let owned = stack.len() == 1;
            let until = top.at + damping;
            if owned || force || until <= now {
                cpus.insert(*cpu);
            } else if damped.is_none_or(|(_, u)| until < u) {
                damped = Some((*cpu, until));
            }
        }
        if cpus.is_empty() {
            return Err(match damped {
                Some((cpu, until)) => NackReason::Damped {
                    island: self.islands[borrower].name().clone(),
                    cpu,
                    until,
                },
                None => NackReason::NothingLent {
                    island: self.islands[borrower].name().clone(),
                    overlay: overlay.clone(),
                },
            });
        }
        let mut out = vec![Effect::new(
            Change::MoveCores {
                from_island: self.islands[borrower].name().clone(),
                to_island: self.islands[lender].name().clone(),
                cpus: cpus.clone(),
            },
            Why::Revoke {
                overlay: overlay.clone(),
                lender: self.islands[lender].name().clone(),
            },
        )];
        for cpu in cpus.iter() {
            self.pop_loan(now, cpu, &mut out);
        }
        Ok(out)
    }

    /// Boosts every unit of `overlay` for the same time, or none: the first
    /// refusal leaves every island as it was.
    pub(crate) fn trigger_overlay(
        &mut self,
        now: Duration,
        overlay: &Name,
        resource: Resource,
    ) -> Result<Vec<Effect>, NackReason> {
        let rec = self.rec(overlay)?;
        let units: Vec<(usize, Name)> = rec
            .spec
            .units
            .iter()
            .zip(&rec.unit_islands)
            .map(|((_, u), i)| (*i, u.clone()))
            .collect();
        if units.is_empty() {
            // An overlay without units (a platform CPU cap) has nothing
            // to boost.
            return Err(NackReason::Unsupported {
                resource,
                op: Op::Trigger,
            });
        }
        let mut touched: Vec<usize> = units.iter().map(|(i, _)| *i).collect();
        touched.sort_unstable();
        touched.dedup();
        let saved: Vec<_> = touched
            .iter()
            .map(|i| (*i, self.islands[*i].clone()))
            .collect();
        let mut out = Vec::with_capacity(units.len());
        for (i, unit) in &units {
            match self.islands[*i].trigger_with(now, overlay, unit, resource, true) {
                Ok(e) => out.push(e),
                Err(r) => {
                    for (k, c) in saved {
                        self.islands[k] = c;
                    }
                    return Err(r);
                }
            }
        }
        Ok(out)
    }
}
