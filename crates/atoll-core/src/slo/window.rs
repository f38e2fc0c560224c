//! A sliding window of latency samples: the last `span` of time, at most
//! `max` samples, and its percentiles by nearest rank.

use std::collections::VecDeque;
use std::time::Duration;

/// Latency samples (µs) with the time each was taken, oldest first.
#[derive(Clone, Debug)]
pub struct LatencyWindow {
    span: Duration,
    max: usize,
    samples: VecDeque<(Duration, u64)>,
    /// Samples pushed since the window was made (also those gone since).
    total: u64,
    /// When the newest sample was taken (kept once it has left the window).
    newest: Option<Duration>,
}

impl LatencyWindow {
    /// A window over the last `span`, holding at most `max` samples (at
    /// least 1); the oldest go first when it is full.
    pub fn new(span: Duration, max: usize) -> Self {
        Self {
            span,
            max: max.max(1),
            samples: VecDeque::new(),
            total: 0,
            newest: None,
        }
    }

    /// Adds a sample taken at `at` and drops what fell out of the window.
    /// Samples are expected in time order; one older than the newest is
    /// kept as if taken with it.
    pub fn push(&mut self, at: Duration, latency_us: u64) {
        let at = self.samples.back().map_or(at, |&(last, _)| at.max(last));
        self.samples.push_back((at, latency_us));
        self.total += 1;
        self.newest = Some(at);
        while self.samples.len() > self.max {
            self.samples.pop_front();
        }
        self.expire(at);
    }

    /// Drops samples taken more than `span` before `now`.
    pub fn expire(&mut self, now: Duration) {
        while let Some(&(t, _)) = self.samples.front() {
            if now.saturating_sub(t) > self.span {
                self.samples.pop_front();
            } else {
                break;
            }
        }
    }

    /// Samples in the window.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the window holds no sample.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Samples pushed in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Its span.
    pub fn span(&self) -> Duration {
        self.span
    }

    /// How long before `now` the newest sample was taken, whether or not it
    /// is still in the window; `None` before the first sample.
    pub fn age(&self, now: Duration) -> Option<Duration> {
        self.newest.map(|t| now.saturating_sub(t))
    }

    /// The `p`th percentile (0 < p <= 100) by nearest rank: the smallest
    /// sample with at least `p`% of the samples at or below it. `None` when
    /// the window is empty or `p` is out of range.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.samples.is_empty() || !(p > 0.0 && p <= 100.0) {
            return None;
        }
        let mut v: Vec<u64> = self.samples.iter().map(|&(_, l)| l).collect();
        let n = v.len();
        let rank = nearest_rank(p, n);
        let (_, x, _) = v.select_nth_unstable(rank - 1);
        Some(*x)
    }
}

/// The 1-based nearest rank of percentile `p` among `n` samples: the
/// smallest `k` with `k / n >= p / 100` (a hair of slack for floats).
fn nearest_rank(p: f64, n: usize) -> usize {
    let want = p * n as f64 - 1e-6;
    let k = (want / 100.0).ceil();
    if k <= 1.0 {
        1
    } else if k >= n as f64 {
        n
    } else {
        crate::num::saturating_usize(k)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut w = LatencyWindow::new(S * 10, 100);
        for (i, l) in (1..=10).enumerate() {
            w.push(Duration::from_millis(i as u64), l * 100);
        }
        assert_eq!(w.percentile(50.0), Some(500));
        assert_eq!(w.percentile(90.0), Some(900));
        assert_eq!(w.percentile(99.0), Some(1000));
        assert_eq!(w.percentile(100.0), Some(1000));
        assert_eq!(w.percentile(1.0), Some(100));
        assert_eq!(w.percentile(0.0), None);
        assert_eq!(LatencyWindow::new(S, 1).percentile(99.0), None);
    }

    #[test]
    fn old_samples_leave_by_time_and_by_count() {
        let mut w = LatencyWindow::new(S, 3);
        w.push(Duration::ZERO, 9000);
        w.push(S / 2, 10);
        assert_eq!(w.percentile(100.0), Some(9000));
        w.push(S + S / 4, 20);
        assert_eq!(w.len(), 2, "the first is more than 1 s old");
        assert_eq!(w.percentile(100.0), Some(20));
        w.push(S + S / 3, 30);
        w.push(S + S / 2, 40);
        assert_eq!(w.len(), 3, "at most 3");
        assert_eq!(w.percentile(1.0), Some(20));
        assert_eq!(w.total(), 5);
        assert_eq!(w.age(S * 2), Some(S / 2), "the newest was taken at 1.5 s");
        w.expire(S * 5);
        assert!(w.is_empty());
        assert_eq!(w.age(S * 5), Some(S * 7 / 2), "still known once it left");
        assert_eq!(LatencyWindow::new(S, 1).age(S), None);
    }

    proptest! {
        #[test]
        fn matches_a_sorted_reference(
            samples in prop::collection::vec((0u64..50, 0u64..100_000), 1..200),
            span_ms in 1u64..500,
            max in 1usize..100,
            p in 0.1f64..=100.0,
        ) {
            let span = Duration::from_millis(span_ms);
            let mut w = LatencyWindow::new(span, max);
            let mut t = Duration::ZERO;
            let mut all: Vec<(Duration, u64)> = Vec::new();
            for (dt, l) in samples {
                t += Duration::from_millis(dt);
                w.push(t, l);
                all.push((t, l));
            }
            // The reference: the last `max` samples, those within `span` of
            // the newest, sorted; the nearest rank by its definition.
            let start = all.len().saturating_sub(max);
            let mut kept: Vec<u64> = all[start..]
                .iter()
                .filter(|(at, _)| t.saturating_sub(*at) <= span)
                .map(|&(_, l)| l)
                .collect();
            kept.sort_unstable();
            prop_assert_eq!(w.len(), kept.len());
            let want = kept
                .iter()
                .enumerate()
                .find(|(i, _)| (*i + 1) as f64 * 100.0 >= p * kept.len() as f64 - 1e-6)
                .map(|(_, &l)| l);
            prop_assert_eq!(w.percentile(p), want);
        }
    }
}
