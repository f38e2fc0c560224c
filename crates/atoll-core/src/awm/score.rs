//! The four contributions of the paper's multi-objective function, each in
//! `[0, 1]` (1: the best choice for that goal), and their weighted sum.
//!
//! `f = a·V + b·R + c·L + d·F + e·E`, with `R` split into a reconfiguration
//! part and a migration part that are weighted separately (`b·R = b_r·R_r +
//! b_m·R_m`, the paper's `b` being `b_r + b_m`), and `E` the power term
//! ([`power`]: the paper's power/energy goal, weight 0 by default so that
//! the policy is the four-term one unless configured). [`Weights::combine`] divides
//! the sum by the sum of the weights, so a total is in `[0, 1]` too and the
//! hysteresis margin is a fraction of the best possible score.

use serde::{Deserialize, Serialize};

/// The weights `a, b_r, b_m, c, d` of the contributions.
///
/// Defaults (value 1.0, reconfig 0.2, migration 0.4, balance 0.5,
/// fairness 0.6): the value of a mode counts most; moving an application
/// to another island costs twice as much as changing its mode (its cache
/// and memory stay behind); balance and fairness together outweigh value, so
/// that on a crowded platform every application gets a middle mode rather
/// than a few the top one (the paper's mixed-workload result).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Weights {
    /// `a`: working mode value `V`.
    pub value: f64,
    /// `b_r`: reconfiguration cost `R_r` (a different mode than now).
    pub reconfig: f64,
    /// `b_m`: migration cost `R_m` (a different island than now).
    pub migration: f64,
    /// `c`: load balance `L` (congestion).
    pub balance: f64,
    /// `d`: fairness `F`.
    pub fairness: f64,
    /// `e`: power `E` (0: power does not count, the default).
    pub power: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            value: 1.0,
            reconfig: 0.2,
            migration: 0.4,
            balance: 0.5,
            fairness: 0.6,
            power: 0.0,
        }
    }
}

/// Shape parameters of the policy.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyParams {
    /// Island CPU usage at which congestion starts (the paper: 70 to 80 %).
    pub knee: f64,
    /// `L` at the knee: `L` falls gently from 1 (empty island) to this at
    /// the knee, then steeply to 0 at a full island.
    pub balance_at_knee: f64,
    /// `F` is 1 up to this multiple of the fair share, then falls linearly
    /// to 0 at twice it.
    pub fair_slack: f64,
    /// Hysteresis: an application keeps its current pair unless another
    /// pair's total is higher by more than this (totals are in `[0, 1]`),
    /// scaled by `1 − min(1, |goal gap|)`.
    pub hysteresis: f64,
    /// Aging: each planning run an application has waited (blocked) adds
    /// this to its ordering key within its priority level.
    pub aging: f64,
    /// Most aging can add.
    pub aging_cap: f64,
    /// Idle capacity: when no application of a run is blocked, a granted
    /// application grows, on its island, into the mode of highest value
    /// that fits in what the others left (see
    /// [`Planner::plan`](super::Planner::plan)).
    pub grow_into_idle: bool,
}

impl Default for PolicyParams {
    fn default() -> Self {
        Self {
            knee: 0.75,
            balance_at_knee: 0.8,
            fair_slack: 1.0,
            hysteresis: 0.05,
            aging: 0.05,
            aging_cap: 1.0,
            grow_into_idle: true,
        }
    }
}

/// A weight or parameter out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// A weight negative or not finite.
    #[error("awm.weights.{field} = {value}: must be a finite number >= 0")]
    Weight {
        /// The field.
        field: &'static str,
        /// The value.
        value: f64,
    },
    /// All weights 0.
    #[error("awm.weights: at least one weight must be above 0")]
    AllZero,
    /// A parameter out of range.
    #[error("awm.params.{field} = {value}: must be in {range}")]
    Param {
        /// The field.
        field: &'static str,
        /// The value.
        value: f64,
        /// The allowed range, for the message.
        range: &'static str,
    },
}

impl Weights {
    /// Checks every weight is finite and `>= 0`, and one is above 0.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let all = [
            ("value", self.value),
            ("reconfig", self.reconfig),
            ("migration", self.migration),
            ("balance", self.balance),
            ("fairness", self.fairness),
            ("power", self.power),
        ];
        for (field, value) in all {
            if !value.is_finite() || value < 0.0 {
                return Err(PolicyError::Weight { field, value });
            }
        }
        if self.sum() <= 0.0 {
            return Err(PolicyError::AllZero);
        }
        Ok(())
    }

    /// Sum of the weights.
    pub fn sum(&self) -> f64 {
        self.value + self.reconfig + self.migration + self.balance + self.fairness + self.power
    }

    /// The normalized total `(a·V + b_r·R_r + b_m·R_m + c·L + d·F + e·E)
    /// / Σw`. With `e = 0` the power term adds exactly 0.0, so totals are
    /// bit for bit those of the four-term policy.
    pub fn combine(&self, s: &Score) -> f64 {
        (self.value * s.value
            + self.reconfig * s.reconfig
            + self.migration * s.migration
            + self.balance * s.balance
            + self.fairness * s.fairness
            + self.power * s.power)
            / self.sum()
    }
}

impl PolicyParams {
    /// Checks every parameter's range.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let checks: [(&'static str, f64, &'static str, bool); 6] = [
            (
                "knee",
                self.knee,
                "(0, 1]",
                self.knee > 0.0 && self.knee <= 1.0,
            ),
            (
                "balance_at_knee",
                self.balance_at_knee,
                "[0, 1]",
                (0.0..=1.0).contains(&self.balance_at_knee),
            ),
            (
                "fair_slack",
                self.fair_slack,
                "(0, 100]",
                self.fair_slack > 0.0 && self.fair_slack <= 100.0,
            ),
            (
                "hysteresis",
                self.hysteresis,
                "[0, 1)",
                (0.0..1.0).contains(&self.hysteresis),
            ),
            (
                "aging",
                self.aging,
                "[0, 1]",
                (0.0..=1.0).contains(&self.aging),
            ),
            (
                "aging_cap",
                self.aging_cap,
                "[0, 10]",
                (0.0..=10.0).contains(&self.aging_cap),
            ),
        ];
        for (field, value, range, ok) in checks {
            if !ok {
                return Err(PolicyError::Param {
                    field,
                    value,
                    range,
                });
            }
        }
        Ok(())
    }
}

/// The contributions of one `(mode, island)` pair and their total.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// Normalized weighted sum, `[0, 1]`.
    pub total: f64,
    /// `V`.
    pub value: f64,
    /// `R_r`.
    pub reconfig: f64,
    /// `R_m`.
    pub migration: f64,
    /// `L`.
    pub balance: f64,
    /// `F`.
    pub fairness: f64,
    /// `E`, the power term.
    #[serde(default)]
    pub power: f64,
    /// Granted by the idle-capacity pass, not by the selection (see
    /// `PolicyParams::grow_into_idle`).
    #[serde(default)]
    pub idle: bool,
}

/// How a goal gap moves the value of the modes (see [`value`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GoalShift {
    /// The gap the application reported: `> 0` it needs more, `< 0` it has
    /// more than it needs (0.5: it runs 50 % below its goal).
    pub gap: f64,
    /// CPU quota of its current mode.
    pub current_quota: f64,
    /// Smallest quota among its modes.
    pub min_quota: f64,
    /// Largest quota among its modes.
    pub max_quota: f64,
}

impl GoalShift {
    /// How much the gap counts, `min(1, |gap|)` (0 for a gap that is not a
    /// number).
    pub fn strength(gap: f64) -> f64 {
        if gap.is_nan() {
            0.0
        } else {
            gap.abs().min(1.0)
        }
    }

    /// The quota the gap asks for: `current · (1 + gap)`, clamped to the
    /// recipe's range.
    pub fn target(&self) -> f64 {
        let gap = if self.gap.is_nan() { 0.0 } else { self.gap };
        (self.current_quota * (1.0 + gap)).clamp(self.min_quota, self.max_quota)
    }
}

/// `V`, the working mode value.
///
/// Without a goal gap (or for an application not running yet) it is the
/// mode's static value. With a gap `g` from the runtime library, the value
/// is blended with how close the mode's quota `q` is to the target
/// `t = q_now · (1 + g)` (clamped to the recipe's quota range), closeness
/// being the ratio of the smaller to the larger (scale-free: half or twice
/// the target both score 0.5):
///
/// `V = (1 − w)·value + w·min(q, t) / max(q, t)`, `w = min(1, |g|)`
///
/// so a positive gap favours modes with more CPU than the current one, a
/// negative gap modes with less, and the larger the gap the more it counts
/// against the static value. The same `w` discounts the reconfiguration
/// cost ([`reconfiguration`]) and the hysteresis margin, so that a clear
/// gap is acted on while a small one stays within the dead band.
pub fn value(mode_value: f64, mode_quota: f64, shift: Option<&GoalShift>) -> f64 {
    let v = mode_value.clamp(0.0, 1.0);
    let Some(s) = shift else { return v };
    let w = GoalShift::strength(s.gap);
    if w == 0.0 {
        return v;
    }
    let t = s.target();
    let (lo, hi) = (mode_quota.min(t), mode_quota.max(t));
    let closeness = if hi > 0.0 {
        (lo / hi).clamp(0.0, 1.0)
    } else {
        1.0
    };
    (1.0 - w) * v + w * closeness
}

/// The power a mode is expected to draw, watts: what the recipe says
/// (`power_watts`), else `watts_per_cpu` (learned from RAPL by the daemon,
/// or 1 when nothing is known) times the CPUs the mode is charged.
pub fn mode_power(declared: Option<f64>, charged_cpus: f64, watts_per_cpu: f64) -> f64 {
    declared.unwrap_or(watts_per_cpu * charged_cpus).max(0.0)
}

/// `E`, the power index of a mode whose expected power is `watts`, among
/// modes of the same recipe drawing at most `max_watts`: `1 − watts /
/// max_watts` (1 for a mode that draws nothing, 0 for the most hungry
/// one); 1 when no mode draws anything.
///
/// Scale-free within a recipe, like `V`: only the modes' ratios count, so
/// a per-CPU estimate needs no calibration, and a weight `e` trades a
/// fraction of value against the same fraction of the recipe's power
/// range.
pub fn power(watts: f64, max_watts: f64) -> f64 {
    if max_watts > 0.0 && watts.is_finite() {
        (1.0 - watts / max_watts).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

/// `R_r`, the reconfiguration index: 1 if the application keeps its mode or
/// is not running yet (`same_mode = None`), otherwise `min(1, |gap|)`.
///
/// A reported goal gap is a request to be reconfigured: its size discounts
/// the cost, so a gap of 100 % or more makes changing mode free, and a gap
/// of 0 gives the full penalty.
pub fn reconfiguration(same_mode: Option<bool>, gap: f64) -> f64 {
    match same_mode {
        None | Some(true) => 1.0,
        Some(false) => GoalShift::strength(gap),
    }
}

/// `R_m`, the migration index: 1 if the application stays on its island or
/// is not running yet (`same_island = None`), 0 if it would move.
pub fn migration(same_island: Option<bool>) -> f64 {
    match same_island {
        None | Some(true) => 1.0,
        Some(false) => 0.0,
    }
}

/// `L`, the load-balance index, from the island's CPU usage *after* the
/// pair is granted (fraction of its capacity, including every grant made
/// earlier in the same run).
///
/// Piecewise linear and decreasing: from 1 on an empty island to
/// `balance_at_knee` at the knee, then to 0 on a full island (and 0 beyond):
/// an emptier island always scores better, and pushing an island past the
/// knee costs much more than filling it up to the knee.
///
/// CPU only: memory is a hard limit (a pair must fit), not a congestion
/// cost. Keeping `L` a function of one usage figure is also what lets the
/// planner find a mode's best island without scanning them all.
pub fn balance(usage_after: f64, p: &PolicyParams) -> f64 {
    let u = if usage_after.is_nan() {
        1.0
    } else {
        usage_after.max(0.0)
    };
    if u <= p.knee {
        1.0 - (1.0 - p.balance_at_knee) * u / p.knee
    } else if p.knee >= 1.0 {
        0.0
    } else {
        (p.balance_at_knee * (1.0 - u) / (1.0 - p.knee)).max(0.0)
    }
}

/// `F`, the fairness index, from `ratio`: the pair's need divided by the
/// application's fair share (see [`fair_ratio`]).
///
/// 1 while the ratio is at most `fair_slack`, then linear down to 0 at
/// twice `fair_slack`: a pair taking twice its fair share scores 0.
pub fn fairness(ratio: f64, p: &PolicyParams) -> f64 {
    let s = p.fair_slack;
    if ratio.is_nan() {
        return 0.0;
    }
    if ratio <= s {
        1.0
    } else {
        (1.0 - (ratio - s) / s).max(0.0)
    }
}

/// A need divided by a fair share: 0 when nothing is needed, infinite when
/// something is needed and the share is 0.
pub fn share_ratio(need: f64, share: f64) -> f64 {
    if need <= 0.0 {
        0.0
    } else if share <= 0.0 {
        f64::INFINITY
    } else {
        need / share
    }
}

/// The fairness ratio of a pair: the larger of its CPU and memory needs,
/// each divided by the fair share of that resource (what is still free on
/// the platform divided by the applications of the priority level that are
/// still to be served, this one included).
pub fn fair_ratio(cpus: f64, memory: f64, share_cpus: f64, share_memory: f64) -> f64 {
    share_ratio(cpus, share_cpus).max(share_ratio(memory, share_memory))
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: PolicyParams = PolicyParams {
        knee: 0.75,
        balance_at_knee: 0.8,
        fair_slack: 1.0,
        hysteresis: 0.05,
        aging: 0.05,
        aging_cap: 1.0,
        grow_into_idle: true,
    };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn value_is_static_without_gap_and_clamped() {
        assert_eq!(value(0.4, 2.0, None), 0.4);
        assert_eq!(value(1.7, 2.0, None), 1.0);
        let s = GoalShift {
            gap: 0.0,
            current_quota: 1.0,
            min_quota: 0.5,
            max_quota: 4.0,
        };
        assert_eq!(value(0.4, 2.0, Some(&s)), 0.4);
    }

    #[test]
    fn positive_gap_prefers_more_cpu_negative_less() {
        // Modes of the paper's Table VIII: 0.5, 1, 2, 4 CPUs.
        let modes = [(0.25, 0.5), (0.5, 1.0), (0.75, 2.0), (1.0, 4.0)];
        let best = |gap: f64| {
            let s = GoalShift {
                gap,
                current_quota: 2.0,
                min_quota: 0.5,
                max_quota: 4.0,
            };
            modes
                .iter()
                .map(|&(v, q)| (q, value(v, q, Some(&s))))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap()
                .0
        };
        assert_eq!(best(1.0), 4.0);
        assert_eq!(best(-0.5), 1.0);
        assert_eq!(best(-0.9), 0.5);
        // The larger the positive gap, the more the biggest mode is worth
        // relative to the current one.
        let s = |gap| GoalShift {
            gap,
            current_quota: 2.0,
            min_quota: 0.5,
            max_quota: 4.0,
        };
        let adv = |gap| value(1.0, 4.0, Some(&s(gap))) - value(0.75, 2.0, Some(&s(gap)));
        assert!(adv(0.8) > adv(0.3));
        // All in [0, 1].
        for g in [-5.0, -1.0, -0.2, 0.3, 2.0, f64::NAN] {
            for &(v, q) in &modes {
                let x = value(v, q, Some(&s(g)));
                assert!((0.0..=1.0).contains(&x), "{g} {q} {x}");
            }
        }
        // NaN gap: no shift.
        assert_eq!(value(0.75, 2.0, Some(&s(f64::NAN))), 0.75);
    }

    #[test]
    fn reconfiguration_and_migration_costs() {
        assert_eq!(reconfiguration(None, 0.0), 1.0);
        assert_eq!(reconfiguration(Some(true), 0.0), 1.0);
        assert_eq!(reconfiguration(Some(false), 0.0), 0.0);
        assert_eq!(reconfiguration(Some(false), -0.3), 0.3);
        assert_eq!(reconfiguration(Some(false), 4.0), 1.0);
        assert_eq!(migration(None), 1.0);
        assert_eq!(migration(Some(true)), 1.0);
        assert_eq!(migration(Some(false)), 0.0);
    }

    #[test]
    fn balance_is_gentle_to_the_knee_then_steep() {
        assert_eq!(balance(0.0, &P), 1.0);
        assert!(close(balance(0.75, &P), 0.8));
        assert!(close(balance(1.0, &P), 0.0));
        assert_eq!(balance(1.3, &P), 0.0);
        assert_eq!(balance(f64::NAN, &P), 0.0);
        // Decreasing everywhere, and steeper past the knee.
        let mut last = 2.0;
        for i in 0..=100 {
            let b = balance(f64::from(i) / 100.0, &P);
            assert!(b < last, "{i}");
            assert!((0.0..=1.0).contains(&b));
            last = b;
        }
        let below = balance(0.5, &P) - balance(0.6, &P);
        let above = balance(0.8, &P) - balance(0.9, &P);
        assert!(above > 3.0 * below, "{below} {above}");
        // A knee at 1 never reaches the steep part.
        let p1 = PolicyParams { knee: 1.0, ..P };
        assert!(close(balance(1.0, &p1), 0.8));
        assert_eq!(balance(1.01, &p1), 0.0);
    }

    #[test]
    fn fairness_is_one_within_share_and_zero_at_twice() {
        assert_eq!(fairness(0.0, &P), 1.0);
        assert_eq!(fairness(1.0, &P), 1.0);
        assert!(close(fairness(1.5, &P), 0.5));
        assert_eq!(fairness(2.0, &P), 0.0);
        assert_eq!(fairness(f64::INFINITY, &P), 0.0);
        assert_eq!(fairness(f64::NAN, &P), 0.0);
        let loose = PolicyParams {
            fair_slack: 1.5,
            ..P
        };
        assert_eq!(fairness(1.5, &loose), 1.0);
        assert!(close(fairness(2.25, &loose), 0.5));
        assert_eq!(share_ratio(0.0, 0.0), 0.0);
        assert_eq!(share_ratio(1.0, 0.0), f64::INFINITY);
        assert_eq!(fair_ratio(2.0, 1.0, 4.0, 1.0), 1.0);
        assert_eq!(fair_ratio(2.0, 0.0, 4.0, 0.0), 0.5);
    }

    #[test]
    fn combine_is_a_normalized_weighted_sum() {
        let w = Weights::default();
        let ones = Score {
            total: 0.0,
            value: 1.0,
            reconfig: 1.0,
            migration: 1.0,
            balance: 1.0,
            fairness: 1.0,
            power: 1.0,
            idle: false,
        };
        assert!(close(w.combine(&ones), 1.0));
        assert_eq!(w.combine(&Score::default()), 0.0);
        let only_v = Weights {
            value: 2.0,
            reconfig: 0.0,
            migration: 0.0,
            balance: 0.0,
            fairness: 0.0,
            power: 0.0,
        };
        let s = Score { value: 0.3, ..ones };
        assert!(close(only_v.combine(&s), 0.3));
    }

    #[test]
    fn power_index_favours_modes_that_draw_less() {
        assert_eq!(power(0.0, 40.0), 1.0);
        assert_eq!(power(40.0, 40.0), 0.0);
        assert!(close(power(10.0, 40.0), 0.75));
        assert_eq!(power(5.0, 0.0), 1.0);
        assert_eq!(power(f64::NAN, 10.0), 1.0);
        assert_eq!(mode_power(Some(12.0), 4.0, 3.0), 12.0);
        assert_eq!(mode_power(None, 4.0, 3.0), 12.0);
        // Weight 0: the power term changes no total.
        let w = Weights::default();
        let s = Score {
            value: 0.7,
            reconfig: 1.0,
            migration: 1.0,
            balance: 0.6,
            fairness: 1.0,
            ..Score::default()
        };
        let lean = Score { power: 1.0, ..s };
        assert_eq!(w.combine(&s).to_bits(), w.combine(&lean).to_bits());
        let e = Weights { power: 1.0, ..w };
        assert!(e.combine(&lean) > e.combine(&s));
        let bad = Weights { power: -1.0, ..w };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("weights.power"));
    }

    #[test]
    fn validation_names_the_field() {
        assert_eq!(Weights::default().validate(), Ok(()));
        assert_eq!(PolicyParams::default().validate(), Ok(()));
        let w = Weights {
            balance: -1.0,
            ..Weights::default()
        };
        let e = w.validate().unwrap_err();
        assert!(e.to_string().contains("weights.balance = -1"), "{e}");
        let zero = Weights {
            value: 0.0,
            reconfig: 0.0,
            migration: 0.0,
            balance: 0.0,
            fairness: 0.0,
            power: 0.0,
        };
        assert_eq!(zero.validate(), Err(PolicyError::AllZero));
        let p = PolicyParams {
            knee: 0.0,
            ..PolicyParams::default()
        };
        assert!(matches!(
            p.validate(),
            Err(PolicyError::Param { field: "knee", .. })
        ));
        let p = PolicyParams {
            hysteresis: 1.0,
            ..PolicyParams::default()
        };
        assert!(p.validate().is_err());
    }

    #[test]
    fn config_rejects_unknown_fields_and_fills_defaults() {
        let w: Weights = serde_json::from_str(r#"{"value": 2.0}"#).unwrap();
        assert_eq!(w.value, 2.0);
        assert_eq!(w.fairness, Weights::default().fairness);
        assert!(serde_json::from_str::<Weights>(r#"{"valeu": 2.0}"#).is_err());
        let p: PolicyParams = toml::from_str("knee = 0.8").unwrap();
        assert_eq!(p.knee, 0.8);
        assert!(toml::from_str::<PolicyParams>("kne = 0.8").is_err());
    }
}
