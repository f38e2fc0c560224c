//! Latency-critical beside best-effort (Heracles, see
//! `shared/research/colocation.md`): from the slack of a latency SLO, how
//! much an overlay's best-effort units get.
//!
//! The best-effort share is a level from 0 (the floor: the least weight, a
//! small CPU quota, a tight `memory.high`) to `steps` (the units' configured
//! settings). Each decision, with the slack `s` of the latest measurement:
//!
//! - `s < 0`, the SLO is missed: to the floor at once;
//! - `s < cut_below`: cut back at once, to half the level (rounded down);
//! - `s > grow_above`: one step up;
//! - otherwise, or nothing measured: hold.
//!
//! Growing is slow and cutting fast, as Heracles does: the latency-critical
//! work pays for a wrong growth for one decision at most.

use serde::{Deserialize, Serialize};

/// The controller's thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeConfig {
    /// Levels above the floor; the top one is the units' configured share.
    pub steps: u32,
    /// Slack above which the best-effort units grow a step.
    pub grow_above: f64,
    /// Slack below which they are cut back.
    pub cut_below: f64,
    /// The floor's CPU quota, CPUs.
    pub floor_cpus: f64,
    /// The floor's `cpu.weight`.
    pub floor_weight: u32,
}

impl Default for BeConfig {
    fn default() -> Self {
        Self {
            steps: 8,
            grow_above: 0.3,
            cut_below: 0.1,
            floor_cpus: 0.1,
            floor_weight: 1,
        }
    }
}

impl BeConfig {
    /// Whether it is [`BeConfig::default`].
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// What is wrong with it, as `(key, problem)` of the overlay keys
    /// `be_steps`, `be_grow_above`, `be_cut_below`.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !(1..=MAX_STEPS).contains(&self.steps) {
            out.push((
                "be_steps",
                format!("{} steps: 1 to {MAX_STEPS}", self.steps),
            ));
        }
        if !(self.cut_below >= 0.0 && self.cut_below < 1.0) {
            out.push((
                "be_cut_below",
                format!(
                    "{} is not a slack in [0, 1) (below 0 the SLO is missed, which floors the units anyway)",
                    self.cut_below
                ),
            ));
        }
        if !(self.grow_above > self.cut_below && self.grow_above < 1.0) {
            out.push((
                "be_grow_above",
                format!(
                    "{} is not a slack above be_cut_below ({}) and below 1",
                    self.grow_above, self.cut_below
                ),
            ));
        }
        out
    }
}

/// Most levels a best-effort controller may have.
pub const MAX_STEPS: u32 = 100;

/// What one decision did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BeMove {
    /// One step up.
    Grow,
    /// Cut back (halved).
    Cut,
    /// To the floor: the SLO is missed.
    Floor,
    /// Unchanged.
    Hold,
}

/// A decision: the new level and the move.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeStep {
    /// The level after it.
    pub level: u32,
    /// What it did.
    pub movement: BeMove,
}

impl BeConfig {
    /// Decides from `slack` (`None`: nothing measured) at `level`.
    pub fn decide(&self, level: u32, slack: Option<f64>) -> BeStep {
        let level = level.min(self.steps);
        let (to, movement) = match slack {
            None => (level, BeMove::Hold),
            Some(s) if s.is_nan() => (level, BeMove::Hold),
            Some(s) if s < 0.0 => (0, BeMove::Floor),
            Some(s) if s < self.cut_below => (level / 2, BeMove::Cut),
            Some(s) if s > self.grow_above => ((level + 1).min(self.steps), BeMove::Grow),
            Some(_) => (level, BeMove::Hold),
        };
        let movement = if to == level && movement != BeMove::Hold {
            BeMove::Hold
        } else {
            movement
        };
        BeStep {
            level: to,
            movement,
        }
    }

    /// A best-effort unit's knobs at `level`, between the floor and `top`
    /// (its configured share).
    pub fn knobs(&self, level: u32, top: &BeKnobs) -> BeKnobs {
        let level = level.min(self.steps);
        let f = if self.steps == 0 {
            1.0
        } else {
            f64::from(level) / f64::from(self.steps)
        };
        let between = |lo: f64, hi: f64| lo + (hi - lo).max(0.0) * f;
        let floor_weight = self.floor_weight.min(top.weight);
        BeKnobs {
            weight: crate::num::saturating_u32(
                between(f64::from(floor_weight), f64::from(top.weight)).round(),
            ),
            cpus: between(self.floor_cpus.min(top.cpus), top.cpus),
            memory_high: top
                .memory_high
                .map(|m| crate::num::saturating_u64(between(m as f64 / 8.0, m as f64))),
        }
    }
}

/// What a best-effort unit gets.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeKnobs {
    /// `cpu.weight`.
    pub weight: u32,
    /// CPU quota, CPUs.
    pub cpus: f64,
    /// `memory.high`, bytes (`None`: left alone).
    pub memory_high: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_slowly_cuts_fast_floors_on_a_miss() {
        let c = BeConfig::default();
        let mut level = 0;
        for want in 1..=8 {
            let s = c.decide(level, Some(0.5));
            assert_eq!((s.level, s.movement), (want, BeMove::Grow));
            level = s.level;
        }
        assert_eq!(c.decide(8, Some(0.9)).movement, BeMove::Hold, "at the top");
        assert_eq!(c.decide(8, Some(0.2)).movement, BeMove::Hold);
        assert_eq!(c.decide(8, None).movement, BeMove::Hold);
        let cut = c.decide(8, Some(0.05));
        assert_eq!((cut.level, cut.movement), (4, BeMove::Cut));
        let floor = c.decide(6, Some(-0.1));
        assert_eq!((floor.level, floor.movement), (0, BeMove::Floor));
        assert_eq!(c.decide(0, Some(-0.1)).movement, BeMove::Hold);
    }

    #[test]
    fn thresholds_are_checked() {
        assert!(BeConfig::default().problems().is_empty());
        let bad = BeConfig {
            steps: 0,
            grow_above: 0.1,
            cut_below: 0.2,
            ..BeConfig::default()
        };
        let keys: Vec<_> = bad.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["be_steps", "be_grow_above"]);
        let nan = BeConfig {
            cut_below: f64::NAN,
            ..BeConfig::default()
        };
        let keys: Vec<_> = nan.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["be_cut_below", "be_grow_above"]);
        let custom = BeConfig {
            steps: 4,
            grow_above: 0.5,
            cut_below: 0.2,
            ..BeConfig::default()
        };
        assert!(custom.problems().is_empty());
        assert_eq!(custom.decide(0, Some(0.4)).movement, BeMove::Hold);
        assert_eq!(custom.decide(0, Some(0.6)).level, 1);
        assert_eq!(
            custom.decide(4, Some(0.6)).movement,
            BeMove::Hold,
            "4 is the top"
        );
        assert_eq!(custom.decide(4, Some(0.15)).level, 2);
    }

    #[test]
    fn knobs_run_from_the_floor_to_the_configured_share() {
        let c = BeConfig::default();
        let top = BeKnobs {
            weight: 100,
            cpus: 2.0,
            memory_high: Some(800),
        };
        let floor = c.knobs(0, &top);
        assert_eq!(floor.weight, 1);
        assert!((floor.cpus - 0.1).abs() < 1e-9);
        assert_eq!(floor.memory_high, Some(100));
        assert_eq!(c.knobs(8, &top), top);
        let mid = c.knobs(4, &top);
        assert!(mid.weight > 1 && mid.weight < 100 && mid.cpus > 0.1 && mid.cpus < 2.0);
    }
}
