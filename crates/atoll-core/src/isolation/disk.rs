//! Disk bandwidth: hold back units that ran ahead of the others.
//!
//! The paper counts the sectors each SPU transferred to a disk, halves the
//! counts every 500 ms so that they approximate a rate, and skips an SPU's
//! requests while its count exceeds the average of the SPUs with pending
//! requests by more than a *BW difference threshold*. A threshold of 0 is
//! round robin; a very large one leaves the disk's own order alone.
//! [`DiskFairness`] keeps the same counts per unit (one instance per device)
//! and says which units are *held*; the daemon enforces a hold, e.g. with the
//! lowest `io.weight` or an `io.max` throttle, until the unit is released.
//!
//! # Rules
//!
//! 1. **Count.** Each unit's count decays continuously with half-life
//!    `io_decay` (`count × 2^(−Δt / io_decay)`) and grows by the bytes it
//!    transferred since the last update.
//! 2. **Shares.** Units with different IO weights are compared by their
//!    *normalized* count, `count × mean weight / weight`. (The paper suggests
//!    decaying counts at a rate proportional to the share instead; in steady
//!    state both give the same comparison, but normalizing keeps `io_decay`
//!    one number with one meaning for every unit, and a weight change takes
//!    effect at once rather than over several half-lives.) The threshold is
//!    in bytes of a unit of average weight.
//! 3. **Active units.** A unit is active if it transferred anything within
//!    the last half-life, or is held (a held unit is presumed to still have
//!    requests waiting). The paper's "SPUs with pending requests".
//! 4. **Hold.** A unit with sharing `lend` is held while its normalized
//!    count exceeds the average over the *active* units by more than
//!    `io_threshold_bytes`: alone on the disk it is never held. A unit with
//!    sharing `none` is compared with the average over *all* units, idle ones
//!    included, so it cannot run ahead of units that are not using the disk:
//!    it keeps to its share even when the others are idle. (An absolute
//!    bandwidth quota is the unit's `io_limits`; this rule is the relative
//!    part.) In `quota` mode every unit follows the `none` rule; in `smp`
//!    mode nobody is held.
//!
//! The comparison is strict, so units with equal counts are never held, and
//! a unit is released as soon as it is back within the threshold.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::IsolationError;
use crate::spec::{IsolationMode, IsolationSpec, SharePolicy};
use crate::weight::DEFAULT_WEIGHT;
use crate::Name;

/// What one unit transferred to the device since the last update.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskSample {
    /// The unit.
    pub unit: Name,
    /// Bytes read and written since the last update (`io.stat` deltas).
    pub bytes: u64,
    /// Its IO weight (1..=10000; `None` in the spec means 100).
    pub weight: u32,
    /// Its disk sharing policy.
    pub sharing: SharePolicy,
}

impl DiskSample {
    /// A sample with the default weight and sharing `lend`.
    pub fn new(unit: Name, bytes: u64) -> Self {
        Self {
            unit,
            bytes,
            weight: DEFAULT_WEIGHT,
            sharing: SharePolicy::Lend,
        }
    }
}

/// A unit's standing on the device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiskStatus {
    /// Decayed count, bytes.
    pub count: f64,
    /// Count normalized by weight, bytes of an average-weight unit.
    pub normalized: f64,
    /// The IO weight used.
    pub weight: u32,
    /// Whether it counts as active.
    pub active: bool,
    /// When it was held, if it is.
    pub held_since: Option<Duration>,
    /// Times it was held.
    pub holds: u64,
}

/// A unit held or released.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum DiskEvent {
    /// `unit` ran ahead: its normalized count is above `average + threshold`.
    Hold {
        /// The unit.
        unit: Name,
        /// Its normalized count, bytes.
        count: f64,
        /// The average it was compared with, bytes.
        average: f64,
        /// The threshold, bytes.
        threshold: u64,
    },
    /// `unit` is back within the threshold (or holds are off).
    Release {
        /// The unit.
        unit: Name,
        /// Its normalized count, bytes.
        count: f64,
        /// The average it was compared with, bytes.
        average: f64,
    },
}

impl fmt::Display for DiskEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Hold {
                unit,
                count,
                average,
                threshold,
            } => write!(
                f,
                "hold unit {unit}: {count:.0} bytes transferred (decayed) against an average of {average:.0} + {threshold}"
            ),
            Self::Release {
                unit,
                count,
                average,
            } => write!(
                f,
                "release unit {unit}: {count:.0} bytes transferred (decayed), average {average:.0}"
            ),
        }
    }
}

#[derive(Clone, Debug)]
struct Track {
    count: f64,
    weight: u32,
    sharing: SharePolicy,
    last_io: Option<Duration>,
    held_since: Option<Duration>,
    holds: u64,
}

/// Decaying per-unit byte counts of one device, and who is held.
#[derive(Clone, Debug)]
pub struct DiskFairness {
    mode: IsolationMode,
    threshold: u64,
    half_life: Duration,
    units: BTreeMap<Name, Track>,
    last: Option<Duration>,
}

impl DiskFairness {
    /// Counts with half-life `half_life` (above 0), holding units more than
    /// `threshold` bytes above the average.
    pub fn new(
        mode: IsolationMode,
        threshold: u64,
        half_life: Duration,
    ) -> Result<Self, IsolationError> {
        if half_life.is_zero() {
            return Err(IsolationError::BadConfig {
                field: "isolation.io_decay_ms",
                value: 0.0,
                range: "above 0",
            });
        }
        Ok(Self {
            mode,
            threshold,
            half_life,
            units: BTreeMap::new(),
            last: None,
        })
    }

    /// From the machine's isolation parameters.
    pub fn from_spec(spec: &IsolationSpec) -> Result<Self, IsolationError> {
        Self::new(spec.mode, spec.io_threshold_bytes, spec.io_decay)
    }

    /// Switches the mode; holds are re-evaluated at the next update.
    pub fn set_mode(&mut self, mode: IsolationMode) {
        self.mode = mode;
    }

    /// Forgets a unit.
    pub fn remove(&mut self, unit: &Name) {
        self.units.remove(unit);
    }

    /// Decays every count to `now`, adds what each unit transferred and
    /// re-evaluates the holds. Pass every unit of the device each time (0
    /// bytes when idle): units never passed do not count in averages.
    pub fn update(
        &mut self,
        now: Duration,
        samples: &[DiskSample],
    ) -> Result<Vec<DiskEvent>, IsolationError> {
        if let Some(last) = self.last {
            if now < last {
                return Err(IsolationError::TimeWentBack { last, now });
            }
        }
        let mut seen = BTreeSet::new();
        for s in samples {
            if !seen.insert(&s.unit) {
                return Err(IsolationError::DuplicateUnit {
                    unit: s.unit.clone(),
                });
            }
        }
        let elapsed = self.last.map_or(Duration::ZERO, |l| now - l);
        self.last = Some(now);
        let decay = 0.5f64.powf(elapsed.as_secs_f64() / self.half_life.as_secs_f64());
        for t in self.units.values_mut() {
            t.count *= decay;
        }
        for s in samples {
            let t = self.units.entry(s.unit.clone()).or_insert(Track {
                count: 0.0,
                weight: DEFAULT_WEIGHT,
                sharing: SharePolicy::Lend,
                last_io: None,
                held_since: None,
                holds: 0,
            });
            t.count += s.bytes as f64;
            t.weight = s.weight.clamp(1, 10_000);
            t.sharing = s.sharing;
            if s.bytes > 0 {
                t.last_io = Some(now);
            }
        }

        let norm = self.normalized();
        let active: BTreeMap<&Name, bool> = self
            .units
            .iter()
            .map(|(u, t)| (u, self.is_active(t, now)))
            .collect();
        let mean = |pick: &dyn Fn(&Name) -> bool| {
            let v: Vec<f64> = norm
                .iter()
                .filter(|(u, _)| pick(u))
                .map(|(_, c)| *c)
                .collect();
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let avg_active = mean(&|u| active[u]);
        let avg_all = mean(&|_| true);
        let threshold = self.threshold as f64;
        let mut events = Vec::new();
        for (u, t) in &mut self.units {
            let quota = self.mode == IsolationMode::Quota || t.sharing == SharePolicy::None;
            let average = if quota { avg_all } else { avg_active };
            let count = norm[u];
            let hold = self.mode != IsolationMode::Smp && count > average + threshold;
            match (hold, t.held_since) {
                (true, None) => {
                    t.held_since = Some(now);
                    t.holds += 1;
                    events.push(DiskEvent::Hold {
                        unit: u.clone(),
                        count,
                        average,
                        threshold: self.threshold,
                    });
                }
                (false, Some(_)) => {
                    t.held_since = None;
                    events.push(DiskEvent::Release {
                        unit: u.clone(),
                        count,
                        average,
                    });
                }
                _ => {}
            }
        }
        Ok(events)
    }

    /// The units held back now.
    pub fn held(&self) -> BTreeSet<Name> {
        self.units
            .iter()
            .filter(|(_, t)| t.held_since.is_some())
            .map(|(u, _)| u.clone())
            .collect()
    }

    /// A unit's decayed count, bytes.
    pub fn count(&self, unit: &Name) -> Option<f64> {
        self.units.get(unit).map(|t| t.count)
    }

    /// Every known unit's standing, as of the last update.
    pub fn status(&self) -> BTreeMap<Name, DiskStatus> {
        let now = self.last.unwrap_or_default();
        let norm = self.normalized();
        self.units
            .iter()
            .map(|(u, t)| {
                let s = DiskStatus {
                    count: t.count,
                    normalized: norm[u],
                    weight: t.weight,
                    active: self.is_active(t, now),
                    held_since: t.held_since,
                    holds: t.holds,
                };
                (u.clone(), s)
            })
            .collect()
    }

    fn normalized(&self) -> BTreeMap<Name, f64> {
        let n = self.units.len().max(1) as f64;
        let mean_w = self
            .units
            .values()
            .map(|t| f64::from(t.weight))
            .sum::<f64>()
            / n;
        self.units
            .iter()
            .map(|(u, t)| (u.clone(), t.count * mean_w / f64::from(t.weight)))
            .collect()
    }

    fn is_active(&self, t: &Track, now: Duration) -> bool {
        t.held_since.is_some()
            || t.last_io
                .is_some_and(|l| now.saturating_sub(l) <= self.half_life)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::cpu::tests::n;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn d(unit: &str, bytes: u64) -> DiskSample {
        DiskSample::new(n(unit), bytes)
    }

    fn names(set: &BTreeSet<Name>) -> String {
        set.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(",")
    }

    #[test]
    fn counts_halve_every_half_life() {
        let mut f = DiskFairness::new(IsolationMode::Isolate, 0, ms(500)).unwrap();
        f.update(ms(1000), &[d("a", 1024)]).unwrap();
        for (t, want) in [
            (1000, 1024.0),
            (1500, 512.0),
            (2500, 128.0),
            (2750, 128.0 / 2f64.sqrt()),
        ] {
            f.update(ms(t), &[]).unwrap();
            let got = f.count(&n("a")).unwrap();
            assert!((got - want).abs() < 1e-9, "t={t}: {got} != {want}");
        }
        f.update(ms(3250), &[d("a", 10)]).unwrap();
        let got = f.count(&n("a")).unwrap();
        assert!((got - (64.0 / 2f64.sqrt() + 10.0)).abs() < 1e-9, "{got}");
        assert_eq!(f.count(&n("zz")), None);
    }

    /// Two units that always have work: each epoch a unit not held
    /// transfers its chunk (a's, b's); a held one transfers nothing.
    fn contend(threshold: u64, chunks: (u64, u64), epochs: usize) -> Vec<String> {
        let mut f = DiskFairness::new(IsolationMode::Isolate, threshold, ms(500)).unwrap();
        let mut out = Vec::new();
        let mut held = BTreeSet::new();
        for e in 0..epochs {
            let bytes = |u: &str, chunk: u64| if held.contains(&n(u)) { 0 } else { chunk };
            let samples = [d("a", bytes("a", chunks.0)), d("b", bytes("b", chunks.1))];
            f.update(ms(100 * e as u64), &samples).unwrap();
            held = f.held();
            out.push(names(&held));
        }
        out
    }

    #[test]
    fn threshold_zero_is_round_robin() {
        let held = contend(0, (1000, 900), 10);
        assert_eq!(held, ["a", "b", "a", "b", "a", "b", "a", "b", "a", "b"]);
    }

    #[test]
    fn a_threshold_lets_a_unit_run_ahead_for_a_while() {
        // a transfers 5x what b does: held once it is 1500 above the
        // average (a 3000 lead over b), after a few epochs.
        let held = contend(1500, (1000, 200), 10);
        assert!(held[..2].iter().all(|h| h.is_empty()), "{held:?}");
        assert!(held.iter().any(|h| !h.is_empty()), "{held:?}");
        assert!(held.iter().all(|h| h.len() <= 1), "{held:?}");
        assert!(contend(u64::MAX, (1000, 200), 10)
            .iter()
            .all(|h| h.is_empty()));
    }

    #[test]
    fn a_lend_unit_alone_is_never_held_a_none_unit_is() {
        #[rustfmt::skip]
        let cases: &[(IsolationMode, SharePolicy, &[&str])] = &[
            // mode, a's sharing, held after each epoch of a streaming alone
            (IsolationMode::Isolate, SharePolicy::Lend, &["", "", "", ""]),
            // Against the average over a and idle b: held once a's count
            // exceeds 2 x 1500 = 3000.
            (IsolationMode::Isolate, SharePolicy::None, &["", "", "a", "a"]),
            (IsolationMode::Quota,   SharePolicy::Lend, &["", "", "a", "a"]),
            (IsolationMode::Smp,     SharePolicy::None, &["", "", "", ""]),
        ];
        for (mode, sharing, want) in cases {
            let mut f = DiskFairness::new(*mode, 1500, ms(500)).unwrap();
            let mut got = Vec::new();
            for e in 0..4u64 {
                let a = DiskSample {
                    sharing: *sharing,
                    ..d("a", 1200)
                };
                f.update(ms(10 * e), &[a, d("b", 0)]).unwrap();
                got.push(names(&f.held()));
            }
            assert_eq!(got, *want, "{mode:?} {sharing:?}");
        }
    }

    #[test]
    fn shares_are_compared_by_weight() {
        #[rustfmt::skip]
        let cases: &[(u32, u32, u64, u64, &str)] = &[
            // weights, bytes per epoch, held (threshold 0)
            (200, 100, 2000, 1000, ""),   // 2:1 for 2:1: fair
            (200, 100, 1000, 1000, "b"),  // 1:1 for 2:1: b is ahead
            (100, 100, 1000, 1000, ""),
            (100, 300, 1000, 2000, "a"),  // b may do 3x
        ];
        for (wa, wb, ba, bb, want) in cases {
            let mut f = DiskFairness::new(IsolationMode::Isolate, 0, ms(500)).unwrap();
            let a = DiskSample {
                weight: *wa,
                ..d("a", *ba)
            };
            let b = DiskSample {
                weight: *wb,
                ..d("b", *bb)
            };
            f.update(ms(0), &[a, b]).unwrap();
            assert_eq!(names(&f.held()), *want, "{wa}:{wb} {ba}:{bb}");
        }
    }

    #[test]
    fn events_and_status() {
        let mut f = DiskFairness::new(IsolationMode::Isolate, 100, ms(500)).unwrap();
        let ev = f.update(ms(0), &[d("a", 1000), d("b", 0)]).unwrap();
        // b is not active, so a is alone: not held.
        assert!(ev.is_empty());
        let ev = f.update(ms(10), &[d("a", 1000), d("b", 10)]).unwrap();
        assert_eq!(ev.len(), 1);
        assert!(matches!(&ev[0], DiskEvent::Hold { unit, threshold: 100, .. } if unit == &n("a")));
        assert!(ev[0].to_string().starts_with("hold unit a: "), "{}", ev[0]);
        let st = f.status();
        assert!(st[&n("a")].active && st[&n("a")].held_since == Some(ms(10)));
        assert_eq!(st[&n("a")].holds, 1);
        // Long idle: counts decay to nothing, a is released.
        let ev = f.update(ms(10_000), &[d("a", 0), d("b", 0)]).unwrap();
        assert!(matches!(&ev[0], DiskEvent::Release { unit, .. } if unit == &n("a")));
        assert!(f.held().is_empty());
        // Holds end at once in smp mode.
        f.update(ms(10_010), &[d("a", 5000), d("b", 10)]).unwrap();
        assert_eq!(names(&f.held()), "a");
        f.set_mode(IsolationMode::Smp);
        f.update(ms(10_020), &[d("a", 5000), d("b", 10)]).unwrap();
        assert!(f.held().is_empty());
        f.remove(&n("a"));
        assert_eq!(f.status().len(), 1);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(matches!(
            DiskFairness::new(IsolationMode::Isolate, 0, Duration::ZERO),
            Err(IsolationError::BadConfig {
                field: "isolation.io_decay_ms",
                ..
            })
        ));
        let mut f = DiskFairness::from_spec(&IsolationSpec::default()).unwrap();
        assert_eq!(
            f.update(ms(0), &[d("a", 1), d("a", 2)]),
            Err(IsolationError::DuplicateUnit { unit: n("a") })
        );
        f.update(ms(20), &[]).unwrap();
        assert_eq!(
            f.update(ms(10), &[]),
            Err(IsolationError::TimeWentBack {
                last: ms(20),
                now: ms(10)
            })
        );
    }
}
