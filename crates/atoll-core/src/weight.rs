//! Conversions between cgroup v1 and v2 CPU and IO weights.
//!
//! v2 `cpu.weight` runs 1..=10000 with a default of 100; v1 `cpu.shares` runs
//! 2..=262144 with a default of 1024. The old linear map
//! `1 + (shares - 2) * 9999 / 262142` sent the v1 default 1024 to weight 39,
//! so a container moved between versions lost most of its share. Since 2025
//! runc and crun use a quadratic curve through the three anchor points
//! (2 → 1, 1024 → 100, 262144 → 10000), in log space:
//!
//! `weight = 10^((l^2 + 125 l) / 612 - 7/34)`, with `l = log2(shares)`,
//! rounded to the nearest integer.
//!
//! atoll uses that curve and its inverse so the default maps to the default.

use crate::num::{saturating_u32, saturating_u64};

/// Default v2 CPU weight.
pub const DEFAULT_WEIGHT: u32 = 100;
/// Default v1 CPU shares.
pub const DEFAULT_SHARES: u64 = 1024;

/// The v2 `cpu.weight` of a unit entitled to `cpus` CPUs: 100 (the
/// default weight) per CPU, rounded to the nearest integer and clamped to
/// 1..=10000. NaN and negative entitlements get the least weight.
pub fn cpus_to_weight(cpus: f64) -> u32 {
    saturating_u32((cpus * f64::from(DEFAULT_WEIGHT)).round()).clamp(1, 10_000)
}

/// v1 `cpu.shares` to v2 `cpu.weight`, clamped to 1..=10000.
pub fn shares_to_weight(shares: u64) -> u32 {
    let shares = shares.clamp(2, 262_144) as f64;
    let l = shares.log2();
    let exponent = (l * l + 125.0 * l) / 612.0 - 7.0 / 34.0;
    let w = 10f64.powf(exponent).round();
    saturating_u32(w).clamp(1, 10_000)
}

/// v2 `cpu.weight` to v1 `cpu.shares`, the inverse of [`shares_to_weight`],
/// clamped to 2..=262144.
pub fn weight_to_shares(weight: u32) -> u64 {
    let w = f64::from(weight.clamp(1, 10_000));
    // Solve l^2 + 125 l - 612 (log10 w + 7/34) = 0 for l >= 0.
    let c = 612.0 * (w.log10() + 7.0 / 34.0);
    let l = (-125.0 + (125.0f64 * 125.0 + 4.0 * c).sqrt()) / 2.0;
    let shares = 2f64.powf(l).round();
    saturating_u64(shares).clamp(2, 262_144)
}

/// v2 `io.weight` (1..=10000) to v1 `blkio.weight` (10..=1000).
pub fn io_weight_to_blkio(weight: u32) -> u32 {
    // Linear between the two defaults' ranges: 100 -> 500 is blkio's default.
    let w = weight.clamp(1, 10_000);
    if w <= 100 {
        10 + (w - 1) * (500 - 10) / 99
    } else {
        500 + (w - 100) * (1000 - 500) / 9900
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchor_points_map_exactly() {
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 100);
        assert_eq!(shares_to_weight(262_144), 10_000);
        assert_eq!(weight_to_shares(100), 1024);
        assert_eq!(weight_to_shares(1), 2);
        assert_eq!(weight_to_shares(10_000), 262_144);
    }

    #[test]
    fn not_the_old_linear_map() {
        // The old map sent 1024 to 39.
        assert_ne!(shares_to_weight(1024), 39);
        assert!(shares_to_weight(512) > 40 && shares_to_weight(512) < 100);
    }

    #[test]
    fn roundtrip_is_close_and_monotonic() {
        let mut last = 0;
        for w in 1..=10_000u32 {
            let s = weight_to_shares(w);
            assert!(s >= last, "not monotonic at {w}");
            last = s;
            let back = shares_to_weight(s);
            let err = (f64::from(back) - f64::from(w)).abs() / f64::from(w);
            assert!(err < 0.02 || back.abs_diff(w) <= 1, "{w} -> {s} -> {back}");
        }
    }

    #[test]
    fn cpus_map_to_100_per_cpu_within_the_range() {
        assert_eq!(cpus_to_weight(1.0), 100);
        assert_eq!(cpus_to_weight(2.5), 250);
        assert_eq!(cpus_to_weight(0.126), 13);
        assert_eq!(cpus_to_weight(0.004), 1);
        assert_eq!(cpus_to_weight(100.0), 10_000);
        assert_eq!(cpus_to_weight(1e12), 10_000);
        assert_eq!(cpus_to_weight(-1.0), 1);
        assert_eq!(cpus_to_weight(f64::NAN), 1);
        assert_eq!(cpus_to_weight(f64::INFINITY), 10_000);
    }

    #[test]
    fn io_weight_maps_defaults() {
        assert_eq!(io_weight_to_blkio(100), 500);
        assert_eq!(io_weight_to_blkio(1), 10);
        assert_eq!(io_weight_to_blkio(10_000), 1000);
    }
}
