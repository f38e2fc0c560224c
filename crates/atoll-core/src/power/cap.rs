//! The platform power cap: a power budget held across islands through
//! their frequency limits (where the machine has cpufreq) and their CPU
//! caps (where it has not), like the platform CPU cap of
//! [`coord`](crate::coord) but driven by measured watts.
//!
//! One [`PowerCap::step`] per measurement: above the budget every island
//! is slowed by the ratio budget ÷ measured (busy power is taken as
//! proportional to frequency and to CPU time, the linear model of
//! `atoll_sim::power`, so one step lands near the budget when the model
//! holds); below the budget by more than the hysteresis, islands get back
//! the same ratio, up to their hardware maximum and their full CPUs, where
//! the limit is lifted. Every move carries the measured power and the
//! budget, for the decision log.

use serde::{Deserialize, Serialize};

use crate::Name;

/// Lowest CPU cap the power cap sets on an island, CPUs.
pub const MIN_CAP_CPUS: f64 = 0.1;

/// The default hysteresis (10 % below the budget).
pub const DEFAULT_HYSTERESIS: f64 = 0.1;

/// The largest budget a configuration may give, W (a sanity bound: a
/// typo of a few orders of magnitude is refused).
pub const MAX_BUDGET_WATTS: f64 = 1e6;

/// The budget and how hard to hold it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerCap {
    /// The budget, W (finite, above 0).
    pub budget_watts: f64,
    /// Below `budget · (1 − hysteresis)` limits are relaxed; between that
    /// and the budget nothing moves.
    #[serde(default = "default_hysteresis")]
    pub hysteresis: f64,
}

fn default_hysteresis() -> f64 {
    DEFAULT_HYSTERESIS
}

/// One island's knobs as they are now.
#[derive(Clone, Debug, PartialEq)]
pub struct IslandKnobs {
    /// The island.
    pub name: Name,
    /// Its CPUs.
    pub cpus: f64,
    /// Its cpufreq range (`cpuinfo_min_freq`, `cpuinfo_max_freq`), kHz;
    /// `None` without cpufreq.
    pub freq_range_khz: Option<(u64, u64)>,
    /// The frequency limit the power cap set, kHz (`None`: none).
    pub max_khz: Option<u64>,
    /// The CPU cap the power cap set, CPUs (`None`: none).
    pub cap_cpus: Option<f64>,
}

/// What to change on one island.
#[derive(Clone, Debug, PartialEq)]
pub enum Knob {
    /// Its CPUs' `scaling_max_freq` (`None`: back to the hardware maximum).
    MaxFrequency(Option<u64>),
    /// Its CPU cap (`None`: lifted).
    CpuCap(Option<f64>),
}

/// One move of the power cap.
#[derive(Clone, Debug, PartialEq)]
pub struct PowerMove {
    /// The island.
    pub island: Name,
    /// The change.
    pub knob: Knob,
    /// Power measured, W.
    pub measured_watts: f64,
    /// The budget, W.
    pub budget_watts: f64,
}

impl PowerMove {
    /// The reason, for the decision log.
    pub fn reason(&self) -> String {
        let what = match &self.knob {
            Knob::MaxFrequency(Some(k)) => format!("max frequency {k} kHz"),
            Knob::MaxFrequency(None) => "max frequency lifted".to_string(),
            Knob::CpuCap(Some(c)) => format!("CPU cap {c:.2} CPUs"),
            Knob::CpuCap(None) => "CPU cap lifted".to_string(),
        };
        format!(
            "power cap: {:.1} W measured, budget {:.1} W: {what}",
            self.measured_watts, self.budget_watts
        )
    }
}

/// A budget that cannot be held.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PowerCapError {
    /// Budget not finite or not above 0.
    #[error("power cap: budget_watts = {0}: must be a finite number of watts above 0")]
    Budget(f64),
    /// Hysteresis outside `[0, 1)`.
    #[error("power cap: hysteresis = {0}: must be in [0, 1)")]
    Hysteresis(f64),
}

impl PowerCap {
    /// Checks the budget and the hysteresis.
    pub fn validate(&self) -> Result<(), PowerCapError> {
        if !self.budget_watts.is_finite() || self.budget_watts <= 0.0 {
            return Err(PowerCapError::Budget(self.budget_watts));
        }
        if !(0.0..1.0).contains(&self.hysteresis) {
            return Err(PowerCapError::Hysteresis(self.hysteresis));
        }
        Ok(())
    }

    /// The moves for a measurement of `watts` with the islands as they are.
    /// Nothing moves on a measurement that is not a finite positive number.
    pub fn step(&self, watts: f64, islands: &[IslandKnobs]) -> Vec<PowerMove> {
        if !watts.is_finite() || watts <= 0.0 {
            return Vec::new();
        }
        let over = watts > self.budget_watts;
        let under = watts < self.budget_watts * (1.0 - self.hysteresis);
        if !over && !under {
            return Vec::new();
        }
        let ratio = self.budget_watts / watts;
        let mv = |island: &Name, knob| PowerMove {
            island: island.clone(),
            knob,
            measured_watts: watts,
            budget_watts: self.budget_watts,
        };
        let mut out = Vec::new();
        for i in islands {
            let knob = match i.freq_range_khz {
                Some((lo, hi)) => {
                    let now = i.max_khz.unwrap_or(hi);
                    if under && i.max_khz.is_none() {
                        continue;
                    }
                    let want = crate::num::saturating_u64(now as f64 * ratio).clamp(lo, hi);
                    let next = (want < hi).then_some(want);
                    if next == i.max_khz {
                        continue;
                    }
                    Knob::MaxFrequency(next)
                }
                None => {
                    let now = i.cap_cpus.unwrap_or(i.cpus);
                    if under && i.cap_cpus.is_none() {
                        continue;
                    }
                    let want = (now * ratio).clamp(MIN_CAP_CPUS.min(i.cpus), i.cpus);
                    let next = (want < i.cpus).then_some(want);
                    if next == i.cap_cpus {
                        continue;
                    }
                    Knob::CpuCap(next)
                }
            };
            out.push(mv(&i.name, knob));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    fn islands() -> Vec<IslandKnobs> {
        vec![
            IslandKnobs {
                name: n("fast"),
                cpus: 8.0,
                freq_range_khz: Some((800_000, 3_600_000)),
                max_khz: None,
                cap_cpus: None,
            },
            IslandKnobs {
                name: n("vm"),
                cpus: 4.0,
                freq_range_khz: None,
                max_khz: None,
                cap_cpus: None,
            },
        ]
    }

    /// Applies moves to the knobs.
    fn apply(is: &mut [IslandKnobs], moves: &[PowerMove]) {
        for m in moves {
            let i = is.iter_mut().find(|i| i.name == m.island).unwrap();
            match m.knob {
                Knob::MaxFrequency(k) => i.max_khz = k,
                Knob::CpuCap(c) => i.cap_cpus = c,
            }
        }
    }

    const CAP: PowerCap = PowerCap {
        budget_watts: 100.0,
        hysteresis: 0.1,
    };

    #[test]
    fn over_budget_slows_every_island_by_the_ratio() {
        let mut is = islands();
        let moves = CAP.step(125.0, &is);
        assert_eq!(moves.len(), 2);
        assert_eq!(moves[0].knob, Knob::MaxFrequency(Some(2_880_000)));
        assert_eq!(moves[1].knob, Knob::CpuCap(Some(3.2)));
        assert!(moves[0]
            .reason()
            .contains("125.0 W measured, budget 100.0 W"));
        apply(&mut is, &moves);
        // Far over: clamped at the hardware minimum and the least cap.
        let moves = CAP.step(10_000.0, &is);
        apply(&mut is, &moves);
        assert_eq!(is[0].max_khz, Some(800_000));
        assert_eq!(is[1].cap_cpus, Some(MIN_CAP_CPUS));
        // Already there: nothing more to do.
        assert!(CAP.step(10_000.0, &is).is_empty());
    }

    #[test]
    fn within_the_band_nothing_moves_and_under_it_limits_are_lifted() {
        let mut is = islands();
        let moves = CAP.step(200.0, &is);
        apply(&mut is, &moves);
        assert!(CAP.step(95.0, &is).is_empty());
        assert!(CAP.step(f64::NAN, &is).is_empty());
        // Well under: relaxed by the ratio until lifted.
        let mut rounds = 0;
        while is[0].max_khz.is_some() || is[1].cap_cpus.is_some() {
            let moves = CAP.step(50.0, &is);
            assert!(!moves.is_empty());
            apply(&mut is, &moves);
            rounds += 1;
            assert!(rounds < 10);
        }
        // Never limited and under budget: nothing to lift.
        assert!(CAP.step(50.0, &islands()).is_empty());
    }

    #[test]
    fn budget_is_validated() {
        assert!(CAP.validate().is_ok());
        let bad = PowerCap {
            budget_watts: 0.0,
            ..CAP
        };
        assert_eq!(bad.validate(), Err(PowerCapError::Budget(0.0)));
        let bad = PowerCap {
            hysteresis: 1.0,
            ..CAP
        };
        assert!(bad.validate().is_err());
        assert!(toml::from_str::<PowerCap>("budget_watts = 50\nhysteresis = 0.2").is_ok());
        assert!(toml::from_str::<PowerCap>("budget_wats = 50").is_err());
    }
}
