//! The platform CPU cap: a machine-wide cap kept as the sum of per-island
//! caps and rebalanced from islands that leave theirs unused to islands
//! throttled at theirs (rule 10 of the [module docs](super)).
//!
//! Caps are kept in thousandths of a CPU so that moves add up exactly: the
//! sum of the island caps equals the platform cap after every step, and
//! the writes of one move list the cuts first, so the caps in force never
//! sum above it in between.

use std::time::Duration;

use super::cap_split::{split_by_demand, Demand};
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
    /// The samples of the window being gathered.
    pub window: Window,
    /// When the cap last moved (set or rebalanced).
    pub last_move: Option<Duration>,
}

/// Each island's samples since the window began.
#[derive(Clone, Debug, Default)]
pub(crate) struct Window {
    /// When the first sample of the window came.
    pub since: Option<Duration>,
    /// Per island (in the manager's order): usage summed, samples, and
    /// whether any sample was throttled.
    pub acc: Vec<(f64, u32, bool)>,
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
            window: Window::default(),
            last_move: Some(self.last_now),
        });
        out
    }

    /// One rebalancing step of the platform CPU cap from each island's
    /// `(island, used_cpus, throttled)` over the last epoch; returns the
    /// writes, cuts first. Samples gather over `cap_interval`; at its end
    /// the cap is split again by demand (rule 10 of the
    /// [module docs](super)). Islands without a sample in the window keep
    /// their cap. Without a cap there is nothing to do.
    pub fn rebalance(
        &mut self,
        now: Duration,
        usage: &[(Name, f64, bool)],
    ) -> Result<Vec<Effect>, CoordError> {
        let now = self.advance(now);
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
        let cfg = self.config;
        let Some(cap) = self.cap.as_mut() else {
            return Ok(Vec::new());
        };
        let w = &mut cap.window;
        w.acc.resize(n, (0.0, 0, false));
        for (acc, s) in w.acc.iter_mut().zip(&sample) {
            if let Some((used, throttled)) = s {
                acc.0 += used;
                acc.1 += 1;
                acc.2 |= throttled;
            }
        }
        let since = *w.since.get_or_insert(now);
        let span = now.saturating_sub(since);
        // Grant on demand: an island throttled now ends the window at once,
        // once it spans two periods and the last move is a window old.
        let throttled_now = sample.iter().flatten().any(|(_, t)| *t);
        let settled = cap
            .last_move
            .is_none_or(|t| now.saturating_sub(t) >= cfg.cap_interval);
        let early = throttled_now && settled && span >= 2 * cfg.cap_period;
        if span < cfg.cap_interval && !early {
            return Ok(Vec::new());
        }
        let window = std::mem::take(w);
        let demand: Vec<Demand> = self
            .islands
            .iter()
            .zip(&window.acc)
            .map(|(c, (sum, count, throttled))| Demand {
                cap: c.cap_milli().unwrap_or(0),
                cpus: c.cpus().len() as u64 * 1000,
                used: (*count > 0).then(|| sum / f64::from(*count)),
                throttled: *throttled,
            })
            .collect();
        let Some(caps) = split_by_demand(&demand, milli(cfg.cap_min), cfg.cap_headroom) else {
            return Ok(Vec::new());
        };
        let moved = demand
            .iter()
            .zip(&caps)
            .map(|(d, c)| d.cap.abs_diff(*c))
            .max()
            .unwrap_or(0);
        if moved == 0 || moved < milli(cfg.cap_deadband) {
            return Ok(Vec::new());
        }
        if let Some(cap) = self.cap.as_mut() {
            cap.last_move = Some(now);
        }
        // Cuts first: the caps in force never sum above the platform cap.
        let mut order: Vec<usize> = (0..n).filter(|i| caps[*i] != demand[*i].cap).collect();
        order.sort_by_key(|i| (caps[*i] > demand[*i].cap, *i));
        let mut out = Vec::new();
        for i in order {
            let d = demand[i];
            self.islands[i].set_cap_milli(Some(caps[i]));
            out.push(Effect::new(
                Change::SetIslandCap {
                    island: self.islands[i].name().clone(),
                    cpus: Some(cpus(caps[i])),
                },
                Why::CapRebalance {
                    usage: d.used.unwrap_or(0.0),
                    throttled: d.throttled,
                    delta: (caps[i] as f64 - d.cap as f64) / 1000.0,
                },
            ));
        }
        Ok(out)
    }
}
