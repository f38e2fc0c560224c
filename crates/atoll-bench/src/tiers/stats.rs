//! What `atoll bench slo --scenario tiers` reports per configuration:
//! response time (average, p99, standard deviation) of all requests and of
//! the heavy class, throughput, each with its ratio to `linux` (inTune
//! reports its variation cut by 40 %, seed 001 PutBid's time by 60 %).

use serde::{Deserialize, Serialize};

use crate::slo::Config;
use crate::stats::{percentile, ratio, round};

/// Response times of one class of requests, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Times {
    /// Requests completed.
    pub count: usize,
    /// Average.
    pub mean_ms: f64,
    /// 99th percentile (nearest rank).
    pub p99_ms: f64,
    /// Standard deviation (population).
    pub stddev_ms: f64,
}

impl Times {
    /// The summary of `samples` (ms, any order; NaN dropped); `None` for
    /// none.
    pub fn of(samples: &[f64]) -> Option<Self> {
        let mut s: Vec<f64> = samples.iter().copied().filter(|v| !v.is_nan()).collect();
        if s.is_empty() {
            return None;
        }
        s.sort_by(f64::total_cmp);
        let n = s.len() as f64;
        let mean = s.iter().sum::<f64>() / n;
        let var = s.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        Some(Self {
            count: s.len(),
            mean_ms: round(mean, 3),
            p99_ms: round(percentile(&s, 99.0)?, 3),
            stddev_ms: round(var.sqrt(), 3),
        })
    }
}

/// One configuration's measured phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TierRow {
    /// The configuration.
    pub config: Config,
    /// Offered requests per second.
    pub offered_per_s: f64,
    /// Completed requests per second.
    pub throughput_per_s: f64,
    /// Requests that failed (connection errors, non-2xx).
    pub errors: u64,
    /// Requests released in the measured phase but not answered by the
    /// phase's wall-time limit (still queued, or answered later).
    #[serde(default)]
    pub unserved: u64,
    /// The last failure http-load saw, if any.
    #[serde(default)]
    pub last_error: Option<String>,
    /// Every request.
    pub all: Option<Times>,
    /// The heavy class (`putbid`).
    pub heavy: Option<Times>,
    /// Ratios to `linux` (`None` for `linux` itself or when missing).
    pub vs_linux: Option<Ratios>,
}

/// A row's ratios to `linux`'s (below 1 is better for times, above for
/// throughput).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    /// Average response time.
    pub mean: Option<f64>,
    /// p99.
    pub p99: Option<f64>,
    /// Standard deviation.
    pub stddev: Option<f64>,
    /// The heavy class's average.
    pub heavy_mean: Option<f64>,
    /// The heavy class's p99.
    pub heavy_p99: Option<f64>,
    /// Throughput.
    pub throughput: Option<f64>,
}

/// `row`'s ratios to `linux`.
pub fn ratios(row: &TierRow, linux: &TierRow) -> Ratios {
    let r = |a: Option<f64>, b: Option<f64>| ratio(a, b).map(|v| round(v, 3));
    let all = |t: &TierRow, f: fn(&Times) -> f64| t.all.as_ref().map(f);
    let heavy = |t: &TierRow, f: fn(&Times) -> f64| t.heavy.as_ref().map(f);
    Ratios {
        mean: r(all(row, |t| t.mean_ms), all(linux, |t| t.mean_ms)),
        p99: r(all(row, |t| t.p99_ms), all(linux, |t| t.p99_ms)),
        stddev: r(all(row, |t| t.stddev_ms), all(linux, |t| t.stddev_ms)),
        heavy_mean: r(heavy(row, |t| t.mean_ms), heavy(linux, |t| t.mean_ms)),
        heavy_p99: r(heavy(row, |t| t.p99_ms), heavy(linux, |t| t.p99_ms)),
        throughput: r(Some(row.throughput_per_s), Some(linux.throughput_per_s)),
    }
}

/// Fills every non-`linux` row's ratios against the `linux` row, if any.
pub fn fill_ratios(rows: &mut [TierRow]) {
    let Some(linux) = rows.iter().find(|r| r.config == Config::Linux).cloned() else {
        return;
    };
    for r in rows.iter_mut().filter(|r| r.config != Config::Linux) {
        r.vs_linux = Some(ratios(r, &linux));
    }
}

/// The rate offered to the configurations: `share` of the saturated
/// throughput measured first.
pub fn offered(saturated_per_s: f64, share: f64) -> f64 {
    (saturated_per_s * share.clamp(0.0, 1.0)).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(config: Config, all: &[f64], heavy: &[f64], tput: f64) -> TierRow {
        TierRow {
            config,
            offered_per_s: 100.0,
            throughput_per_s: tput,
            errors: 0,
            unserved: 0,
            last_error: None,
            all: Times::of(all),
            heavy: Times::of(heavy),
            vs_linux: None,
        }
    }

    #[test]
    fn times_are_mean_p99_and_population_stddev() {
        let t = Times::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(t.count, 8);
        assert_eq!(t.mean_ms, 5.0);
        assert_eq!(t.stddev_ms, 2.0);
        assert_eq!(t.p99_ms, 9.0);
        assert_eq!(Times::of(&[]), None);
        assert_eq!(Times::of(&[f64::NAN]), None);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(Times::of(&hundred).unwrap().p99_ms, 99.0);
    }

    #[test]
    fn ratios_are_against_linux() {
        let mut rows = vec![
            row(
                Config::Linux,
                &[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0],
                &[10.0],
                100.0,
            ),
            row(Config::Slo, &[3.0, 3.0, 3.0, 3.0], &[4.0], 90.0),
            row(Config::Static, &[1.0], &[], 50.0),
        ];
        fill_ratios(&mut rows);
        assert_eq!(rows[0].vs_linux, None);
        let r = rows[1].vs_linux.unwrap();
        assert_eq!(r.mean, Some(0.6));
        assert_eq!(
            r.stddev,
            Some(0.0),
            "a stddev of 0 against 2 is 0, not missing"
        );
        assert_eq!(r.heavy_mean, Some(0.4));
        assert_eq!(r.throughput, Some(0.9));
        let s = rows[2].vs_linux.unwrap();
        assert_eq!(s.heavy_p99, None);
        assert_eq!(s.throughput, Some(0.5));
        assert_eq!(offered(200.0, 0.8), 160.0);
        assert_eq!(offered(0.0, 0.8), 1.0);
    }

    #[test]
    fn no_linux_row_no_ratios() {
        let mut rows = vec![row(Config::Slo, &[1.0], &[1.0], 1.0)];
        fill_ratios(&mut rows);
        assert_eq!(rows[0].vs_linux, None);
    }
}
