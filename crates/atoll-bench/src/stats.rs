//! Percentiles and summaries of samples.
//!
//! Percentiles use the nearest-rank method: the p-th percentile of `n` sorted
//! samples is the sample at rank `ceil(p / 100 * n)` (1-based), so every
//! reported value is a sample that was actually observed, and p100 is the
//! maximum. NaN samples are dropped before anything is computed.

use serde::{Deserialize, Serialize};

/// The nearest-rank `p`-th percentile (0..=100) of `sorted`, which must be
/// sorted ascending. `None` for no samples.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    let rank = atoll_core::num::saturating_usize(((p / 100.0) * sorted.len() as f64).ceil());
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// A summary of a set of samples, in the samples' unit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// How many samples.
    pub count: usize,
    /// Smallest.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Summary {
    /// Summarizes `samples` (any order); `None` when there is no number
    /// among them.
    pub fn of(samples: &[f64]) -> Option<Self> {
        let mut s: Vec<f64> = samples.iter().copied().filter(|v| !v.is_nan()).collect();
        if s.is_empty() {
            return None;
        }
        s.sort_by(f64::total_cmp);
        let mean = s.iter().sum::<f64>() / s.len() as f64;
        Some(Self {
            count: s.len(),
            min: s[0],
            mean,
            p50: percentile(&s, 50.0)?,
            p90: percentile(&s, 90.0)?,
            p99: percentile(&s, 99.0)?,
            max: s[s.len() - 1],
        })
    }
}

/// `a / b`, or `None` when either is missing or `b` is not a positive
/// number.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
        _ => None,
    }
}

/// Rounds to `digits` decimals, for JSON meant to be read by people.
pub fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&s, 50.0), Some(50.0));
        assert_eq!(percentile(&s, 99.0), Some(99.0));
        assert_eq!(percentile(&s, 100.0), Some(100.0));
        assert_eq!(percentile(&s, 0.0), Some(1.0));
        let small = [10.0, 20.0, 30.0];
        assert_eq!(percentile(&small, 50.0), Some(20.0));
        assert_eq!(percentile(&small, 99.0), Some(30.0));
        assert_eq!(percentile(&small, 34.0), Some(20.0));
        assert_eq!(percentile(&small, 33.0), Some(10.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn summary_sorts_and_drops_nan() {
        let s = Summary::of(&[5.0, f64::NAN, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(s.count, 5);
        assert_eq!((s.min, s.p50, s.max), (1.0, 3.0, 5.0));
        assert_eq!(s.mean, 3.0);
        assert_eq!(s.p99, 5.0);
        assert!(Summary::of(&[f64::NAN]).is_none());
    }

    #[test]
    fn ratios_refuse_missing_or_zero_denominators() {
        assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
        assert_eq!(ratio(Some(3.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(2.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
        assert_eq!(round(1.23456, 2), 1.23);
    }
}
