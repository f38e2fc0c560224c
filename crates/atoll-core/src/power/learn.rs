//! Watts per working mode, learned from RAPL (issue 17): the figure the
//! working-mode policy's power term uses for a mode whose recipe gives no
//! `power_watts`.
//!
//! # The model
//!
//! Over an interval of `seconds`, the package used `joules` (RAPL) while
//! the CPUs were busy for `busy_cpu_seconds` in all (everything the
//! caller can account for). Each unit that ran `cpu_seconds` of it is
//! charged the same share of the energy:
//!
//! `E_u = joules · cpu_seconds / busy_cpu_seconds`, its power
//! `P_u = E_u / seconds`,
//!
//! and a mode's figure is the exponentially weighted mean of `P_u` over
//! the intervals in which a unit ran in that mode (weight `alpha` for the
//! newest). The machine's watts per busy CPU, `joules / busy_cpu_seconds`,
//! is learned the same way, for modes never seen running.
//!
//! # Limits
//!
//! - Idle and uncore power is shared out with the busy time: a machine with
//!   high idle power charges every mode more, in proportion to its CPU
//!   time; only the ratios between a recipe's modes reach the policy, so a
//!   common offset shrinks the differences between modes instead of
//!   shifting them.
//! - A CPU-second costs the same whatever the frequency, the core type and
//!   what ran on it (a vector-heavy mode is charged like a spinning one).
//! - When `busy_cpu_seconds` misses work that ran outside the caller's
//!   view, those joules are charged to the units seen.
//! - RAPL package zones only: DRAM and devices are not counted.

use std::collections::BTreeMap;

/// Weight of the newest interval in the means.
pub const DEFAULT_ALPHA: f64 = 0.2;

/// One unit's CPU time in an interval, and the mode it ran in.
#[derive(Clone, Debug, PartialEq)]
pub struct ModeShare {
    /// The recipe.
    pub recipe: String,
    /// The working mode's id.
    pub mode: u32,
    /// CPU time in the interval, s.
    pub cpu_seconds: f64,
}

/// What was measured over one interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// Its length, s.
    pub seconds: f64,
    /// Package energy in it (RAPL), J.
    pub joules: f64,
    /// CPU time of everything accounted for, s (at least the units').
    pub busy_cpu_seconds: f64,
    /// The units' shares.
    pub units: Vec<ModeShare>,
}

/// The learned figures.
#[derive(Clone, Debug, PartialEq)]
pub struct WattsLearner {
    alpha: f64,
    per_mode: BTreeMap<(String, u32), f64>,
    per_cpu: Option<f64>,
}

impl Default for WattsLearner {
    fn default() -> Self {
        Self::new(DEFAULT_ALPHA)
    }
}

fn mean(old: Option<f64>, new: f64, alpha: f64) -> f64 {
    old.map_or(new, |o| o + alpha * (new - o))
}

impl WattsLearner {
    /// A learner with weight `alpha` (clamped to (0, 1]) for the newest
    /// interval.
    pub fn new(alpha: f64) -> Self {
        let alpha = if alpha.is_finite() {
            alpha.clamp(f64::MIN_POSITIVE, 1.0)
        } else {
            DEFAULT_ALPHA
        };
        Self {
            alpha,
            per_mode: BTreeMap::new(),
            per_cpu: None,
        }
    }

    /// Learns from one interval. An interval without time, energy or busy
    /// CPU time, or with a figure that is not a finite number, teaches
    /// nothing; units that did not run are not charged.
    pub fn learn(&mut self, i: &Interval) {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        if !(ok(i.seconds) && ok(i.joules)) {
            return;
        }
        let seen: f64 = i
            .units
            .iter()
            .map(|u| u.cpu_seconds)
            .filter(|c| ok(*c))
            .sum();
        let busy = if i.busy_cpu_seconds.is_finite() {
            i.busy_cpu_seconds.max(seen)
        } else {
            seen
        };
        if !ok(busy) {
            return;
        }
        let per_cpu_s = i.joules / busy;
        self.per_cpu = Some(mean(self.per_cpu, per_cpu_s, self.alpha));
        // Units in the same mode in this interval: one figure per mode, the
        // mean of theirs.
        let mut now: BTreeMap<(String, u32), (f64, u32)> = BTreeMap::new();
        for u in i.units.iter().filter(|u| ok(u.cpu_seconds)) {
            let watts = per_cpu_s * u.cpu_seconds / i.seconds;
            let e = now.entry((u.recipe.clone(), u.mode)).or_insert((0.0, 0));
            e.0 += watts;
            e.1 += 1;
        }
        for (key, (sum, n)) in now {
            let w = sum / f64::from(n);
            let old = self.per_mode.get(&key).copied();
            self.per_mode.insert(key, mean(old, w, self.alpha));
        }
    }

    /// The learned power of `recipe`'s mode `mode`, W.
    pub fn mode_watts(&self, recipe: &str, mode: u32) -> Option<f64> {
        self.per_mode.get(&(recipe.to_string(), mode)).copied()
    }

    /// The learned watts per busy CPU.
    pub fn watts_per_cpu(&self) -> Option<f64> {
        self.per_cpu
    }

    /// How many modes have a figure.
    pub fn modes_learned(&self) -> usize {
        self.per_mode.len()
    }

    /// Every learned figure: recipe, mode, W.
    pub fn learned_modes(&self) -> impl Iterator<Item = (&str, u32, f64)> + '_ {
        self.per_mode.iter().map(|((r, m), w)| (r.as_str(), *m, *w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(recipe: &str, mode: u32, cpu_seconds: f64) -> ModeShare {
        ModeShare {
            recipe: recipe.into(),
            mode,
            cpu_seconds,
        }
    }

    #[test]
    fn energy_is_shared_by_cpu_time() {
        let mut l = WattsLearner::new(1.0);
        // 2 s, 100 J, 4 CPU-s busy: 25 J per CPU-s. A unit with 3 CPU-s
        // (1.5 CPUs) draws 37.5 W, one with 0.5 CPU-s 6.25 W.
        l.learn(&Interval {
            seconds: 2.0,
            joules: 100.0,
            busy_cpu_seconds: 4.0,
            units: vec![share("x", 2, 3.0), share("x", 0, 0.5)],
        });
        assert_eq!(l.watts_per_cpu(), Some(25.0));
        assert_eq!(l.mode_watts("x", 2), Some(37.5));
        assert_eq!(l.mode_watts("x", 0), Some(6.25));
        assert_eq!(l.mode_watts("x", 1), None);
        assert_eq!(l.mode_watts("y", 2), None);
        assert_eq!(l.modes_learned(), 2);
    }

    #[test]
    fn means_follow_the_newest_by_alpha_and_units_of_a_mode_average() {
        let mut l = WattsLearner::new(0.5);
        let at = |cpu: f64| Interval {
            seconds: 1.0,
            joules: 10.0,
            busy_cpu_seconds: 1.0,
            units: vec![share("x", 1, cpu)],
        };
        l.learn(&at(1.0));
        assert_eq!(l.mode_watts("x", 1), Some(10.0));
        l.learn(&at(0.5));
        // Half the CPU time of the same 10 J per CPU-s: 5 W now.
        assert_eq!(l.mode_watts("x", 1), Some(7.5));
        let mut two = WattsLearner::new(1.0);
        two.learn(&Interval {
            seconds: 1.0,
            joules: 8.0,
            busy_cpu_seconds: 4.0,
            units: vec![share("x", 1, 1.0), share("x", 1, 3.0)],
        });
        assert_eq!(two.mode_watts("x", 1), Some(4.0));
    }

    #[test]
    fn busy_time_below_the_units_is_raised_and_bad_intervals_teach_nothing() {
        let mut l = WattsLearner::default();
        // The caller saw less busy time than the units ran: all the energy
        // goes to the units, never more.
        l.learn(&Interval {
            seconds: 1.0,
            joules: 30.0,
            busy_cpu_seconds: 1.0,
            units: vec![share("x", 0, 2.0), share("y", 0, 1.0)],
        });
        let total = l.mode_watts("x", 0).unwrap() + l.mode_watts("y", 0).unwrap();
        assert!((total - 30.0).abs() < 1e-9, "{total}");
        let before = l.clone();
        for bad in [
            Interval {
                seconds: 0.0,
                joules: 1.0,
                busy_cpu_seconds: 1.0,
                units: vec![share("x", 0, 1.0)],
            },
            Interval {
                seconds: 1.0,
                joules: f64::NAN,
                busy_cpu_seconds: 1.0,
                units: vec![share("x", 0, 1.0)],
            },
            Interval {
                seconds: 1.0,
                joules: 5.0,
                busy_cpu_seconds: 0.0,
                units: vec![share("x", 0, 0.0)],
            },
        ] {
            l.learn(&bad);
        }
        assert_eq!(l, before);
    }
}
