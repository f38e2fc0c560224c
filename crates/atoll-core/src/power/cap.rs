//! The platform power cap: a power budget held across islands through
//! their frequency limits (where the machine has cpufreq) and their CPU
//! caps (where it has not), like the platform CPU cap of
//! [`coord`](crate::coord) but driven by measured watts.
//!
//! One [`PowerCap::step`] per measurement: above the budget the islands
//! shed the excess, lowest overlay priority first and each in proportion
//! to its draw (its share of the busy CPU time; busy power is taken as
//! proportional to frequency and to CPU time, the linear model of
//! `atoll_sim::power`, so one step lands near the budget when the model
//! holds; see [`super::split`]); below the budget by more than the
//! hysteresis, the headroom is given back highest priority first, up to
//! the islands' hardware maximum and their full CPUs, where the limit is
//! lifted. With one tier and no share measured this is the same ratio,
//! budget ÷ measured, for every island. Every move carries the measured power and the
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
    /// Its CPU time in the last epoch, CPU-seconds (`None`: not measured);
    /// its share of the busy time is its share of the draw
    /// ([`super::split`]).
    pub busy_cpu_seconds: Option<f64>,
    /// The highest priority of the overlays with units in it (0: none):
    /// higher tiers are slowed last and given back first.
    pub priority: u8,
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
    /// The island's share of the measured power (of the busy CPU time).
    pub share: f64,
    /// Its priority tier.
    pub priority: u8,
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
            "power cap: {:.1} W measured, budget {:.1} W; island draws {:.0} % (its share of the busy CPU time), priority {}: {what}",
            self.measured_watts,
            self.budget_watts,
            self.share * 100.0,
            self.priority
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
        // Each island's speed now, its floor and its ceiling (kHz or CPUs).
        let speeds: Vec<(f64, f64, f64, bool)> = islands
            .iter()
            .map(|i| match i.freq_range_khz {
                Some((lo, hi)) => (
                    i.max_khz.unwrap_or(hi) as f64,
                    lo as f64,
                    hi as f64,
                    i.max_khz.is_some(),
                ),
                None => (
                    i.cap_cpus.unwrap_or(i.cpus),
                    MIN_CAP_CPUS.min(i.cpus),
                    i.cpus,
                    i.cap_cpus.is_some(),
                ),
            })
            .collect();
        let draws: Vec<Option<f64>> = islands.iter().map(|i| i.busy_cpu_seconds).collect();
        let cpus: Vec<f64> = islands.iter().map(|i| i.cpus).collect();
        let shares = super::split::shares(&draws, &cpus);
        let slots: Vec<super::split::Slot> = islands
            .iter()
            .zip(&speeds)
            .zip(&shares)
            .map(|((i, &(now, floor, ceiling, limited)), &share)| {
                let rel = |v: f64| if now > 0.0 { v / now } else { 1.0 };
                super::split::Slot {
                    share,
                    priority: i.priority,
                    floor: rel(floor).min(1.0),
                    ceiling: rel(ceiling).max(1.0),
                    limited,
                }
            })
            .collect();
        let ratios = super::split::ratios(watts, self.budget_watts, &slots);
        let mut out = Vec::new();
        for (((i, &(now, ..)), ratio), share) in islands.iter().zip(&speeds).zip(ratios).zip(shares)
        {
            if (ratio - 1.0).abs() < 1e-9 {
                continue;
            }
            let knob = match i.freq_range_khz {
                Some((lo, hi)) => {
                    let want = crate::num::saturating_u64((now * ratio).round()).clamp(lo, hi);
                    let next = (want < hi).then_some(want);
                    if next == i.max_khz {
                        continue;
                    }
                    Knob::MaxFrequency(next)
                }
                None => {
                    // To a thousandth of a CPU: the shares' float noise
                    // (0.9999999999999998 for 1) is no new cap.
                    let want = ((now * ratio * 1000.0).round() / 1000.0)
                        .clamp(MIN_CAP_CPUS.min(i.cpus), i.cpus);
                    // Within float noise of its CPUs: lifted.
                    let next = (want < i.cpus * (1.0 - 1e-9)).then_some(want);
                    if next == i.cap_cpus {
                        continue;
                    }
                    Knob::CpuCap(next)
                }
            };
            out.push(PowerMove {
                island: i.name.clone(),
                knob,
                measured_watts: watts,
                share,
                priority: i.priority,
                budget_watts: self.budget_watts,
            });
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
                busy_cpu_seconds: None,
                priority: 0,
            },
            IslandKnobs {
                name: n("vm"),
                cpus: 4.0,
                freq_range_khz: None,
                max_khz: None,
                cap_cpus: None,
                busy_cpu_seconds: None,
                priority: 0,
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
            assert!(!moves.is_empty(), "{is:?}");
            apply(&mut is, &moves);
            rounds += 1;
            assert!(rounds < 10);
        }
        // Never limited and under budget: nothing to lift.
        assert!(CAP.step(50.0, &islands()).is_empty());
    }

    #[test]
    fn the_cut_falls_on_the_low_priority_island_by_its_draw() {
        let mut is = islands();
        // fast (priority 0) ran 1 CPU-s, vm (priority 3) 3: fast draws
        // 25 % of 125 W = 31.25 W and must shed the 25 W; at its floor
        // (800 of 3600 MHz) it sheds 24.3 W and vm the rest.
        is[0].busy_cpu_seconds = Some(1.0);
        is[1].busy_cpu_seconds = Some(3.0);
        is[1].priority = 3;
        let moves = CAP.step(125.0, &is);
        assert_eq!(moves[0].knob, Knob::MaxFrequency(Some(800_000)));
        let Knob::CpuCap(Some(vm)) = moves[1].knob else {
            panic!("{moves:?}");
        };
        let shed_fast = 31.25 * (1.0 - 800.0 / 3600.0);
        let want = 4.0 * (1.0 - (25.0 - shed_fast) / 93.75);
        // Caps are kept to a thousandth of a CPU.
        assert!((vm - want).abs() <= 0.0005, "{vm} {want}");
        assert!(vm > 3.9, "{vm}");
        assert!(
            moves[0].reason().contains(
                "island draws 25 % (its share of the busy CPU time), priority 0: max frequency 800000 kHz"
            ),
            "{}",
            moves[0].reason()
        );
        // An island that ran nothing is not slowed.
        is[0].busy_cpu_seconds = Some(0.0);
        let moves = CAP.step(125.0, &is);
        assert_eq!(moves.len(), 1);
        assert_eq!(moves[0].island, n("vm"));
        assert_eq!(moves[0].knob, Knob::CpuCap(Some(3.2)));
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
