//! The platform CPU cap: a machine-wide cap kept as the sum of per-island
//! caps and rebalanced from islands that leave theirs unused to islands
//! throttled at theirs (rule 10 of the [module docs](super)).
//!
//! Caps are kept in thousandths of a CPU so that moves add up exactly: the
//! sum of the island caps equals the platform cap after every step.

use std::cmp::Reverse;
use std::time::Duration;

use super::effect::{Change, Effect, Why};
use super::platform::PlatformManager;
use super::CoordError;
use crate::num::saturating_u64;
use crate::Name;

/// The platform cap in force.
#[derive(Clone, Debug)]
pub(crate) struct CapState {
    pub total_milli: u64,
    /// The overlay that set it, if any.
    pub set_by: Option<Name>,
}

fn milli(cpus: f64) -> u64 {
    saturating_u64((cpus * 1000.0).round())
}

fn cpus(milli: u64) -> f64 {
    milli as f64 / 1000.0
}

impl PlatformManager {
    /// Sets a platform CPU cap of `cpus`, split among islands in proportion
    /// to their own CPUs; returns the writes.
    pub fn set_cpu_cap(&mut self, cpus: f64) -> Result<Vec<Effect>, CoordError> {
        let split = self.split_cap(cpus)?;
        Ok(self.install_cap(split, cpus, None))
    }

    /// Removes the platform CPU cap; returns the writes.
    pub fn clear_cpu_cap(&mut self) -> Vec<Effect> {
        let Some(cap) = self.cap.take() else {
            return Vec::new();
        };
        self.islands
            .iter_mut()
            .map(|c| {
                c.set_cap_milli(None);
                Effect::new(
                    Change::SetIslandCap {
                        island: c.name().clone(),
                        cpus: None,
                    },
                    Why::CapSet {
                        overlay: cap.set_by.clone(),
                        total: 0.0,
                    },
                )
            })
            .collect()
    }

    /// The platform CPU cap, CPUs.
    pub fn cpu_cap(&self) -> Option<f64> {
        self.cap.as_ref().map(|c| cpus(c.total_milli))
    }

    /// Each island's share of the platform CPU cap.
    pub fn island_caps(&self) -> Vec<(Name, Option<f64>)> {
        self.islands
            .iter()
            .map(|c| (c.name().clone(), c.cap()))
            .collect()
    }

    /// Splits `cpus` among the islands: `cap_min` each, the rest in
    /// proportion to their own CPUs, the rounding remainder to the first.
    pub(crate) fn split_cap(&self, cpus: f64) -> Result<Vec<u64>, CoordError> {
        let n = self.islands.len();
        let min = milli(self.config.cap_min);
        let total = milli(cpus);
        if !(cpus.is_finite() && cpus > 0.0) || n == 0 || total < min * n as u64 {
            return Err(CoordError::BadCap {
                cpus,
                islands: n,
                min: self.config.cap_min,
            });
        }
        let rest = total - min * n as u64;
        let weights: Vec<u64> = self.islands.iter().map(|c| c.home().len() as u64).collect();
        let sum: u64 = weights.iter().sum::<u64>().max(1);
        let mut split: Vec<u64> = weights.iter().map(|w| min + rest * w / sum).collect();
        // Each floor loses less than one thousandth: fewer than n are left.
        let left = total - split.iter().sum::<u64>();
        for s in split.iter_mut().take(crate::num::u64_to_usize(left)) {
            *s += 1;
        }
        Ok(split)
    }

    pub(crate) fn install_cap(
        &mut self,
        split: Vec<u64>,
        total: f64,
        overlay: Option<Name>,
    ) -> Vec<Effect> {
        let out = self
            .islands
            .iter_mut()
            .zip(&split)
            .map(|(c, m)| {
                c.set_cap_milli(Some(*m));
                Effect::new(
                    Change::SetIslandCap {
                        island: c.name().clone(),
                        cpus: Some(cpus(*m)),
                    },
                    Why::CapSet {
                        overlay: overlay.clone(),
                        total,
                    },
                )
            })
            .collect();
        self.cap = Some(CapState {
            total_milli: split.iter().sum(),
            set_by: overlay,
        });
        out
    }

    /// One rebalancing step of the platform CPU cap from each island's
    /// `(island, used_cpus, throttled)` over the last epoch; returns the
    /// writes. Islands without a sample neither give nor receive. Without a
    /// cap there is nothing to do.
    pub fn rebalance(
        &mut self,
        now: Duration,
        usage: &[(Name, f64, bool)],
    ) -> Result<Vec<Effect>, CoordError> {
        self.advance(now);
        let n = self.islands.len();
        let mut sample: Vec<Option<(f64, bool)>> = vec![None; n];
        for (island, used, throttled) in usage {
            let i = self
                .index_of(island)
                .ok_or_else(|| CoordError::UnknownIsland {
                    island: island.clone(),
                })?;
            if !(used.is_finite() && *used >= 0.0) {
                return Err(CoordError::BadUsage {
                    island: island.clone(),
                    value: *used,
                });
            }
            if sample[i].replace((*used, *throttled)).is_some() {
                return Err(CoordError::DuplicateSample {
                    island: island.clone(),
                });
            }
        }
        if self.cap.is_none() {
            return Ok(Vec::new());
        }
        let cfg = self.config;
        let before: Vec<u64> = self
            .islands
            .iter()
            .map(|c| c.cap_milli().unwrap_or(0))
            .collect();
        let mut caps = before.clone();
        let min = milli(cfg.cap_min);
        // What each giver may give, and what each receiver wants.
        let mut slack = vec![0u64; n];
        let mut want = vec![0u64; n];
        for i in 0..n {
            let Some((used, throttled)) = sample[i] else {
                continue;
            };
            if throttled {
                let room = (self.islands[i].cpus().len() as u64 * 1000).saturating_sub(caps[i]);
                want[i] = room.min(milli(cfg.cap_move));
            } else {
                let keep = milli(used + cfg.cap_headroom).max(min);
                slack[i] = caps[i].saturating_sub(keep);
            }
        }
        // The most constrained receivers first.
        let mut receivers: Vec<usize> = (0..n).filter(|i| want[*i] > 0).collect();
        receivers.sort_by_key(|i| (caps[*i], *i));
        for r in receivers {
            while want[r] > 0 {
                let Some(g) = (0..n)
                    .filter(|g| slack[*g] > 0)
                    .max_by_key(|g| (slack[*g], Reverse(*g)))
                else {
                    break;
                };
                let take = want[r].min(slack[g]);
                slack[g] -= take;
                want[r] -= take;
                caps[g] -= take;
                caps[r] += take;
            }
        }
        let mut out = Vec::new();
        for i in 0..n {
            if caps[i] == before[i] {
                continue;
            }
            let (used, throttled) = sample[i].unwrap_or((0.0, false));
            self.islands[i].set_cap_milli(Some(caps[i]));
            out.push(Effect::new(
                Change::SetIslandCap {
                    island: self.islands[i].name().clone(),
                    cpus: Some(cpus(caps[i])),
                },
                Why::CapRebalance {
                    usage: used,
                    throttled,
                    delta: (caps[i] as f64 - before[i] as f64) / 1000.0,
                },
            ));
        }
        Ok(out)
    }
}
