//! A histogram of durations with fixed bucket bounds, kept on one thread.

use std::time::Duration;

/// Upper bounds, in µs, of the duration buckets every atoll histogram
/// uses: 10 µs to 1 s (an epoch is 30 ms by default; most steps take a few
/// µs).
pub const DURATION_BOUNDS_US: &[u64] = &[
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    1_000_000,
];

/// Observations counted per bucket, with their sum and count. Recording is
/// a search over a few bounds and three additions; no allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    bounds_us: &'static [u64],
    /// One per bound, then the `+Inf` bucket; not cumulative.
    counts: Vec<u64>,
    sum_ns: u64,
    count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new(DURATION_BOUNDS_US)
    }
}

impl Histogram {
    /// An empty histogram over `bounds_us` (increasing).
    pub fn new(bounds_us: &'static [u64]) -> Self {
        debug_assert!(bounds_us.windows(2).all(|w| w[0] < w[1]));
        Self {
            bounds_us,
            counts: vec![0; bounds_us.len() + 1],
            sum_ns: 0,
            count: 0,
        }
    }

    /// Counts `d` in the first bucket whose bound it does not exceed.
    pub fn observe(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let i = self
            .bounds_us
            .partition_point(|b| b.saturating_mul(1000) < ns);
        self.counts[i] += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.count += 1;
    }

    /// Each bound (µs; `None` for `+Inf`) with the number of observations
    /// at or below it (cumulative, as the exposition format has them).
    pub fn cumulative(&self) -> impl Iterator<Item = (Option<u64>, u64)> + '_ {
        let bounds = self.bounds_us.iter().map(|b| Some(*b)).chain([None]);
        bounds.zip(&self.counts).scan(0u64, |total, (b, n)| {
            *total += n;
            Some((b, *total))
        })
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Their sum.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_they_do_not_exceed() {
        let mut h = Histogram::new(&[10, 100]);
        h.observe(Duration::ZERO);
        h.observe(Duration::from_micros(10)); // on the bound: le="10"
        h.observe(Duration::from_nanos(10_001)); // just over
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_secs(3)); // +Inf only
        let got: Vec<_> = h.cumulative().collect();
        assert_eq!(got, [(Some(10), 2), (Some(100), 4), (None, 5)]);
        assert_eq!(h.count(), 5);
        assert_eq!(
            h.sum(),
            Duration::from_nanos(10_000 + 10_001 + 100_000 + 3_000_000_000)
        );
    }

    #[test]
    fn the_default_bounds_cover_microseconds_to_a_second() {
        let h = Histogram::default();
        let bounds: Vec<_> = h.cumulative().map(|(b, _)| b).collect();
        assert_eq!(bounds.first(), Some(&Some(10)));
        assert_eq!(bounds[bounds.len() - 2], Some(1_000_000));
        assert_eq!(bounds.last(), Some(&None));
        assert!(h.cumulative().all(|(_, n)| n == 0));
    }
}
