//! When to plan: batching bursts of events into one run, and turning the
//! runtime library's reports into a goal gap.
//!
//! Pure helpers for the daemon: time is an argument (a [`Duration`] since
//! any fixed origin, as [`Clock::now`](crate::clock::Clock::now) returns).

use std::time::Duration;

/// Batches bursts of events (application starts and exits, goal gaps) into
/// one planning run: a run is due once no event has come for `quiet`, or
/// `max_delay` after the first pending event, whichever is first. A burst
/// of a hundred starts within a few milliseconds gives one plan, and a
/// steady trickle of events cannot postpone planning forever.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanBatcher {
    quiet: Duration,
    max_delay: Duration,
    first: Option<Duration>,
    last: Duration,
}

impl Default for PlanBatcher {
    /// 20 ms quiet, 100 ms at most.
    fn default() -> Self {
        Self::new(Duration::from_millis(20), Duration::from_millis(100))
    }
}

impl PlanBatcher {
    /// A batcher with nothing pending. `max_delay` below `quiet` is raised
    /// to `quiet`.
    pub fn new(quiet: Duration, max_delay: Duration) -> Self {
        Self {
            quiet,
            max_delay: max_delay.max(quiet),
            first: None,
            last: Duration::ZERO,
        }
    }

    /// Something changed at `now`.
    pub fn event(&mut self, now: Duration) {
        if self.first.is_none() {
            self.first = Some(now);
        }
        self.last = self.last.max(now);
    }

    /// Whether events wait for a plan.
    pub fn pending(&self) -> bool {
        self.first.is_some()
    }

    /// When the pending events are due to be planned, if any.
    pub fn deadline(&self) -> Option<Duration> {
        let first = self.first?;
        Some((self.last + self.quiet).min(first + self.max_delay))
    }

    /// Whether a run is due at `now`.
    pub fn due(&self, now: Duration) -> bool {
        self.deadline().is_some_and(|d| now >= d)
    }

    /// A run was made: nothing is pending any more.
    pub fn planned(&mut self) {
        self.first = None;
    }
}

/// Largest goal gap [`goal_gap`] returns (an application that made no
/// progress at all).
pub const MAX_GAP: f64 = 10.0;

/// The goal gap of an application that ran `cycles` cycles in `elapsed`
/// against a goal of `goal_cps` cycles per second: `goal / rate − 1`, the
/// fraction of extra resources it needs if it scales linearly (0.25: 25 %
/// more; −0.5: it could do with half). `None` without a goal or without
/// elapsed time; [`MAX_GAP`] if it made no progress.
pub fn goal_gap(cycles: u64, elapsed: Duration, goal_cps: f64) -> Option<f64> {
    if !goal_cps.is_finite() || goal_cps <= 0.0 || elapsed.is_zero() {
        return None;
    }
    let rate = cycles as f64 / elapsed.as_secs_f64();
    if rate <= 0.0 {
        return Some(MAX_GAP);
    }
    Some((goal_cps / rate - 1.0).min(MAX_GAP))
}

/// Whether a reported gap asks for a new plan: outside `±deadband` (a gap
/// of exactly 0, or a small one, does not).
pub fn gap_needs_replan(gap: f64, deadband: f64) -> bool {
    gap.is_finite() && gap.abs() > deadband
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_burst_gives_one_run_after_the_quiet_time() {
        let mut b = PlanBatcher::new(ms(20), ms(100));
        assert!(!b.pending() && !b.due(ms(1000)));
        for t in [0, 3, 5, 9] {
            b.event(ms(t));
        }
        assert!(!b.due(ms(28)));
        assert_eq!(b.deadline(), Some(ms(29)));
        assert!(b.due(ms(29)));
        b.planned();
        assert!(!b.pending() && !b.due(ms(30)));
    }

    #[test]
    fn a_trickle_cannot_postpone_forever() {
        let mut b = PlanBatcher::new(ms(20), ms(100));
        let mut t = 0;
        while !b.due(ms(t)) {
            b.event(ms(t));
            t += 10;
            assert!(t <= 200, "never due");
        }
        assert_eq!(t, 100);
        // max_delay below quiet is raised to quiet.
        let mut b = PlanBatcher::new(ms(20), ms(5));
        b.event(ms(0));
        assert_eq!(b.deadline(), Some(ms(20)));
    }

    #[test]
    fn goal_gap_is_the_extra_fraction_needed() {
        let s = Duration::from_secs(1);
        assert_eq!(goal_gap(80, s, 100.0), Some(0.25));
        assert_eq!(goal_gap(200, s, 100.0), Some(-0.5));
        assert_eq!(goal_gap(100, s, 100.0), Some(0.0));
        assert_eq!(goal_gap(0, s, 100.0), Some(MAX_GAP));
        assert_eq!(goal_gap(1, s, 1e9), Some(MAX_GAP));
        assert_eq!(goal_gap(80, Duration::ZERO, 100.0), None);
        assert_eq!(goal_gap(80, s, 0.0), None);
        assert!(gap_needs_replan(0.25, 0.05));
        assert!(gap_needs_replan(-0.25, 0.05));
        assert!(!gap_needs_replan(0.0, 0.0));
        assert!(!gap_needs_replan(0.03, 0.05));
        assert!(!gap_needs_replan(f64::NAN, 0.05));
    }
}
