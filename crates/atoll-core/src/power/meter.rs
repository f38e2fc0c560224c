//! Energy counters to watts and joules.

use std::time::Duration;

/// The energy between two readings of a counter that wraps at
/// `max_range_uj` (RAPL's `max_energy_range_uj`): `now - prev`, or, when
/// the counter went back (it wrapped), `max_range_uj - prev + now`.
///
/// A reading above the range (a bad file) or a zero range gives `None`:
/// the difference would be a guess.
pub fn energy_delta_uj(prev: u64, now: u64, max_range_uj: u64) -> Option<u64> {
    if max_range_uj == 0 || prev > max_range_uj || now > max_range_uj {
        return None;
    }
    if now >= prev {
        Some(now - prev)
    } else {
        Some(max_range_uj - prev + now)
    }
}

/// One reading of an energy counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When it was read (the daemon's monotonic clock).
    pub at: Duration,
    /// The counter, µJ.
    pub energy_uj: u64,
}

/// Accumulates the samples of one energy counter: the total energy seen
/// since the first sample and the mean power between the last two.
///
/// The counter is assumed to wrap at most once between two samples (RAPL
/// package counters wrap after minutes at full power; the daemon samples
/// every epoch).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meter {
    max_range_uj: u64,
    last: Option<Sample>,
    total_uj: u128,
    watts: Option<f64>,
}

impl Meter {
    /// A meter for a counter that wraps at `max_range_uj`.
    pub fn new(max_range_uj: u64) -> Self {
        Self {
            max_range_uj,
            ..Self::default()
        }
    }

    /// Adds a sample. A sample not later than the previous one, or whose
    /// difference cannot be computed, restarts the power measure (the
    /// total keeps what it had).
    pub fn push(&mut self, s: Sample) {
        if let Some(prev) = self.last {
            let dt = s.at.saturating_sub(prev.at);
            match energy_delta_uj(prev.energy_uj, s.energy_uj, self.max_range_uj) {
                Some(d) if !dt.is_zero() => {
                    self.total_uj += u128::from(d);
                    #[allow(clippy::cast_precision_loss)]
                    // reason: µJ per interval are far below 2^52.
                    let joules = d as f64 / 1e6;
                    self.watts = Some(joules / dt.as_secs_f64());
                }
                _ => self.watts = None,
            }
        }
        self.last = Some(s);
    }

    /// Mean power between the last two samples, W (`None` before two).
    pub fn watts(&self) -> Option<f64> {
        self.watts
    }

    /// Energy since the first sample, J.
    pub fn joules_total(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        // reason: a counter total in µJ; precision loss only past 2^52 µJ
        // (142 years at 1 kW), and then only in the last digits.
        let uj = self.total_uj as f64;
        uj / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_wraps_at_the_range() {
        assert_eq!(energy_delta_uj(10, 25, 100), Some(15));
        assert_eq!(energy_delta_uj(90, 5, 100), Some(15));
        assert_eq!(energy_delta_uj(7, 7, 100), Some(0));
        assert_eq!(energy_delta_uj(0, 101, 100), None);
        assert_eq!(energy_delta_uj(0, 1, 0), None);
    }

    #[test]
    fn meter_gives_watts_and_keeps_the_total_across_a_wrap() {
        let mut m = Meter::new(1_000_000_000);
        assert_eq!(m.watts(), None);
        m.push(Sample {
            at: Duration::from_secs(1),
            energy_uj: 999_000_000,
        });
        assert_eq!(m.watts(), None);
        // 12 J in 2 s across the wrap: 1 J before it, 11 after.
        m.push(Sample {
            at: Duration::from_secs(3),
            energy_uj: 11_000_000,
        });
        assert!((m.watts().unwrap() - 6.0).abs() < 1e-9);
        assert!((m.joules_total() - 12.0).abs() < 1e-9);
        // Same instant: no power, total unchanged.
        m.push(Sample {
            at: Duration::from_secs(3),
            energy_uj: 12_000_000,
        });
        assert_eq!(m.watts(), None);
        assert!((m.joules_total() - 12.0).abs() < 1e-9);
    }
}
