//! Latencies of `atoll bench api`, in a histogram that processes can send
//! each other and add up.
//!
//! Values are whole microseconds. Below 1024 µs every value has a bucket of
//! its own; above, each power of two is split into 128 buckets, so a bucket
//! is less than 0.8 % wide. A percentile is the lower edge of the bucket
//! that holds the nearest-rank sample (so it is within 0.8 % below that
//! sample); the largest value is kept exactly.

use serde::{Deserialize, Serialize};

/// Values below this have a bucket each.
const LINEAR: u64 = 1024;
/// Buckets per power of two above [`LINEAR`] (a power of two).
const SUB: u64 = 128;
/// log2 of [`LINEAR`].
const LINEAR_BITS: u32 = 10;
/// log2 of [`SUB`].
const SUB_BITS: u32 = 7;

/// The bucket of `v`.
fn bucket(v: u64) -> u64 {
    if v < LINEAR {
        return v;
    }
    let e = 63 - v.leading_zeros(); // >= LINEAR_BITS
    let m = (v >> (e - SUB_BITS)) & (SUB - 1);
    LINEAR + u64::from(e - LINEAR_BITS) * SUB + m
}

/// The smallest value of bucket `b`.
fn lower(b: u64) -> u64 {
    if b < LINEAR {
        return b;
    }
    let e = (b - LINEAR) / SUB + u64::from(LINEAR_BITS);
    let m = (b - LINEAR) % SUB;
    (1 << e) | (m << (e - u64::from(SUB_BITS)))
}

/// A latency histogram, µs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    /// Values recorded.
    pub count: u64,
    /// The largest, exact.
    pub max_us: u64,
    /// Sum of all values (for the mean).
    pub sum_us: u64,
    /// `[lower edge µs, count]` of every bucket that holds values, in
    /// order.
    pub buckets: Vec<(u64, u64)>,
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    fn add(&mut self, edge: u64, n: u64) {
        match self.buckets.binary_search_by_key(&edge, |&(e, _)| e) {
            Ok(i) => self.buckets[i].1 += n,
            Err(i) => self.buckets.insert(i, (edge, n)),
        }
    }

    /// Records one value.
    pub fn record(&mut self, us: u64) {
        self.add(lower(bucket(us)), 1);
        self.count += 1;
        self.max_us = self.max_us.max(us);
        self.sum_us = self.sum_us.saturating_add(us);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for &(edge, n) in &other.buckets {
            // Re-bucketed, in case `other` came from elsewhere.
            self.add(lower(bucket(edge)), n);
        }
        self.count += other.count;
        self.max_us = self.max_us.max(other.max_us);
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
    }

    /// The nearest-rank `p`-th percentile (0..=100), µs: the lower edge of
    /// the bucket holding that sample (p100 is the exact maximum).
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        if p >= 100.0 {
            return Some(self.max_us);
        }
        let rank =
            atoll_core::num::saturating_u64(((p.max(0.0) / 100.0) * self.count as f64).ceil());
        let rank = rank.clamp(1, self.count);
        let mut seen = 0;
        for &(edge, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return Some(edge);
            }
        }
        Some(self.max_us)
    }

    /// The mean, µs.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_us as f64 / self.count as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_below_1024_and_narrow_above() {
        for v in [0, 1, 17, 1023] {
            assert_eq!(lower(bucket(v)), v);
        }
        for v in [1024u64, 1500, 4999, 5000, 123_456, 10_000_000, u64::MAX / 2] {
            let lo = lower(bucket(v));
            assert!(lo <= v, "{v}: {lo}");
            assert!((v - lo) as f64 <= v as f64 / 128.0, "{v}: {lo}");
            assert_eq!(bucket(lo), bucket(v), "{v}");
        }
        // Buckets are ordered like their values.
        assert!(bucket(1023) < bucket(1024));
        assert!(bucket(2047) < bucket(2048));
    }

    #[test]
    fn percentiles_are_nearest_rank_lower_edges() {
        let mut h = Histogram::new();
        assert_eq!(h.percentile(50.0), None);
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.percentile(50.0), Some(50));
        assert_eq!(h.percentile(99.0), Some(99));
        assert_eq!(h.percentile(100.0), Some(100));
        assert_eq!(h.percentile(0.0), Some(1));
        assert_eq!(h.mean(), Some(50.5));
        h.record(5003);
        assert_eq!(h.percentile(100.0), Some(5003));
        let p = h.percentile(99.9).unwrap();
        assert!((4960..=5003).contains(&p), "{p}");
    }

    #[test]
    fn histograms_travel_as_json_and_add_up() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        for v in 0..10 {
            a.record(v * 1000);
            b.record(v);
        }
        let sent: Histogram = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        let mut sum = Histogram::new();
        sum.merge(&sent);
        sum.merge(&b);
        assert_eq!(sum.count, 20);
        assert_eq!(sum.max_us, 9000);
        assert_eq!(sum.percentile(50.0), Some(8));
        assert_eq!(sum.buckets.len(), 19, "0 is in both: {:?}", sum.buckets);
        assert_eq!(sum.sum_us, 45_045);
    }
}
