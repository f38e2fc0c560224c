//! Number conversions that say what happens at the edges.
//!
//! A numeric `as` cast drops bits, a sign or a fraction without a word, so
//! the workspace warns on the ones that can (`clippy::cast_possible_truncation`
//! and `clippy::cast_sign_loss`, denied in CI). Where a value may not fit
//! its target, the code converts through one of these named functions
//! instead:
//!
//! - a float (CPUs, shares, seconds) becomes an integer count by first
//!   rounding it the way the caller means (`round`, `ceil`, `floor`) and
//!   then *saturating*: NaN and anything below the range give the range's
//!   least value, anything above gives its greatest, and the fraction that
//!   is left is dropped toward zero;
//! - a [`Duration`] becomes whole milli-, micro- or nanoseconds in a `u64`,
//!   saturating at `u64::MAX` (585 years of nanoseconds).
//!
//! These are the semantics Rust's float-to-integer `as` has had since 1.45;
//! the functions make them visible and keep them in one tested place.

use std::time::Duration;

/// `x` as a `u64`, truncated toward zero: NaN and values at or below 0
/// give 0, values at or above 2^64 give `u64::MAX`.
///
/// Round first (`x.round()`, `x.ceil()`) when the caller means to.
#[inline]
#[must_use]
// reason: the branches before the cast leave 0 < x < 2^64, so the cast
// only drops the fraction, which is what this function is for.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn saturating_u64(x: f64) -> u64 {
    // 2^64, exactly representable; every f64 below it fits in a u64.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    if x.is_nan() || x <= 0.0 {
        0
    } else if x >= LIMIT {
        u64::MAX
    } else {
        x as u64
    }
}

/// `x` as a `u32`, truncated toward zero and saturating like
/// [`saturating_u64`]: NaN and negatives give 0, values past `u32::MAX`
/// give `u32::MAX`.
#[inline]
#[must_use]
pub fn saturating_u32(x: f64) -> u32 {
    u32::try_from(saturating_u64(x)).unwrap_or(u32::MAX)
}

/// `x` as a `usize` (an index or a count), truncated toward zero and
/// saturating like [`saturating_u64`].
#[inline]
#[must_use]
pub fn saturating_usize(x: f64) -> usize {
    usize::try_from(saturating_u64(x)).unwrap_or(usize::MAX)
}

/// `x` as an `i64`, truncated toward zero: NaN gives 0, values at or
/// below -2^63 give `i64::MIN`, values at or above 2^63 give `i64::MAX`.
#[inline]
#[must_use]
// reason: the branches before the cast leave -2^63 < x < 2^63, so the
// cast only drops the fraction.
#[allow(clippy::cast_possible_truncation)]
pub fn saturating_i64(x: f64) -> i64 {
    // 2^63, exactly representable.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() {
        0
    } else if x <= -LIMIT {
        i64::MIN
    } else if x >= LIMIT {
        i64::MAX
    } else {
        x as i64
    }
}

/// `x` as a `usize`: lossless on the 64-bit targets atoll is built for,
/// saturating at `usize::MAX` on a narrower one (where a count that large
/// could not be held in memory anyway).
#[inline]
#[must_use]
pub fn u64_to_usize(x: u64) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

/// Whole milliseconds in `d`, saturating at `u64::MAX`.
#[inline]
#[must_use]
pub fn millis_u64(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whole microseconds in `d`, saturating at `u64::MAX`.
#[inline]
#[must_use]
pub fn micros_u64(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Whole nanoseconds in `d`, saturating at `u64::MAX`.
#[inline]
#[must_use]
pub fn nanos_u64(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_truncates_toward_zero_inside_the_range() {
        assert_eq!(saturating_u64(0.0), 0);
        assert_eq!(saturating_u64(0.999), 0);
        assert_eq!(saturating_u64(1.0), 1);
        assert_eq!(saturating_u64(2.5), 2);
        assert_eq!(saturating_u64(1e15 + 0.5), 1_000_000_000_000_000);
        // The largest f64 below 2^64.
        assert_eq!(
            saturating_u64(18_446_744_073_709_549_568.0),
            18_446_744_073_709_549_568
        );
    }

    #[test]
    fn u64_saturates_outside_the_range() {
        assert_eq!(saturating_u64(f64::NAN), 0);
        assert_eq!(saturating_u64(-0.0), 0);
        assert_eq!(saturating_u64(-0.5), 0);
        assert_eq!(saturating_u64(-1e300), 0);
        assert_eq!(saturating_u64(f64::NEG_INFINITY), 0);
        assert_eq!(saturating_u64(18_446_744_073_709_551_616.0), u64::MAX);
        assert_eq!(saturating_u64(1e300), u64::MAX);
        assert_eq!(saturating_u64(f64::INFINITY), u64::MAX);
    }

    #[test]
    fn u32_and_usize_saturate_at_their_own_range() {
        assert_eq!(saturating_u32(4_294_967_294.9), 4_294_967_294);
        assert_eq!(saturating_u32(4_294_967_295.0), u32::MAX);
        assert_eq!(saturating_u32(4_294_967_296.0), u32::MAX);
        assert_eq!(saturating_u32(1e20), u32::MAX);
        assert_eq!(saturating_u32(f64::NAN), 0);
        assert_eq!(saturating_u32(-3.0), 0);
        assert_eq!(saturating_u32(99.99), 99);
        assert_eq!(saturating_usize(7.9), 7);
        assert_eq!(saturating_usize(-7.9), 0);
        assert_eq!(saturating_usize(f64::INFINITY), usize::MAX);
    }

    #[test]
    fn i64_saturates_at_both_ends() {
        assert_eq!(saturating_i64(f64::NAN), 0);
        assert_eq!(saturating_i64(-2.7), -2);
        assert_eq!(saturating_i64(2.7), 2);
        assert_eq!(saturating_i64(-9_223_372_036_854_775_808.0), i64::MIN);
        assert_eq!(saturating_i64(f64::NEG_INFINITY), i64::MIN);
        assert_eq!(saturating_i64(9_223_372_036_854_775_808.0), i64::MAX);
        assert_eq!(saturating_i64(f64::INFINITY), i64::MAX);
    }

    #[test]
    fn the_helpers_agree_with_the_as_casts_they_replace() {
        // Behaviour must not change: `as` from a float saturates the same
        // way. Checked here on values around every edge.
        let edges = [
            f64::NAN,
            f64::NEG_INFINITY,
            -1e19,
            -1.5,
            -0.0,
            0.0,
            0.4,
            1.6,
            4_294_967_295.5,
            9.3e18,
            1.9e19,
            f64::INFINITY,
        ];
        for x in edges {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            // reason: the casts under test.
            let (u, w, i) = (x as u64, x as u32, x as i64);
            assert_eq!(saturating_u64(x), u, "{x}");
            assert_eq!(saturating_u32(x), w, "{x}");
            assert_eq!(saturating_i64(x), i, "{x}");
        }
    }

    #[test]
    fn u64_to_usize_is_lossless_on_64_bit() {
        assert_eq!(u64_to_usize(0), 0);
        assert_eq!(u64_to_usize(1 << 40), 1 << 40);
        assert_eq!(u64_to_usize(u64::MAX), usize::MAX);
    }

    #[test]
    fn durations_in_whole_units() {
        let d = Duration::new(3, 456_789_012);
        assert_eq!(millis_u64(d), 3_456);
        assert_eq!(micros_u64(d), 3_456_789);
        assert_eq!(nanos_u64(d), 3_456_789_012);
        assert_eq!(nanos_u64(Duration::MAX), u64::MAX);
        assert_eq!(micros_u64(Duration::MAX), u64::MAX);
        assert_eq!(millis_u64(Duration::MAX), u64::MAX);
    }
}
