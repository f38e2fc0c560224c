//! The overlay policies the daemon runs: pure decisions from figures to the
//! coordination message to send.
//!
//! *Proactive* (the application reports its property's value through the
//! API, [`report_step`]):
//! - a latency percentile above its bound asks for more CPU time for the
//!   overlay's most pressured unit: a tune up (units tied for the most
//!   pressure take turns, and if its coordinator refuses, at capacity, the
//!   next unit is asked), and first a trigger as well when the value is
//!   more than [`FAR_ABOVE`] times the bound; below [`FAR_BELOW`] times the
//!   bound it gives one step back (a tune down of a unit above its
//!   configured knobs);
//! - when every unit's tune is refused at its island's capacity (`at
//!   capacity`, or the escalation that followed refused), the overlay
//!   moves on a [`Stage`]: to `borrow_preferred` (a CPU from another of
//!   its own islands that has one idle), then to `borrow_any`; a report
//!   with room to spare gives the borrowed CPUs back first (`release`, one
//!   lender a report, one stage down each time) and tunes down only once
//!   nothing is borrowed;
//! - a throughput below its floor asks for a tune up (a trigger below half
//!   the floor); above [`FAR_ABOVE`] times the floor it gives a step back;
//! - a platform CPU cap is kept by the platform manager itself: a reported
//!   value (CPUs in use) is only recorded.
//!
//! *Reactive* (the daemon watches, every epoch, [`pressure_step`],
//! [`utilization_step`], [`recv_queue_step`]):
//! - `react_pressure = P`: a unit whose CPU pressure exceeds `P` % is tuned
//!   up; below `P ×` [`RELAX_BELOW`] a unit above its configured knobs is
//!   tuned back down;
//! - `react_utilization = U`: an island of the overlay using more than `U`
//!   of the CPUs it holds borrows one (`borrow_any`); it releases a lender's
//!   CPUs once it would stay below `U ×` [`RELEASE_BELOW`] without them;
//! - with `react_utilization`, a lender of the overlay's loans whose own
//!   use reaches [`REVOKE_ABOVE`] of the CPUs it still holds takes its CPUs
//!   back (`revoke`, sent by the lender, naming the borrower);
//! - `react_recv_queue = B`: a unit whose sockets hold more than `B` bytes
//!   not yet read is triggered (seed 001's buffer monitoring).
//!
//! One overlay sends at most one reactive message per unit (or island) and
//! kind every [`REACT_INTERVAL`], and none before the retry time a refusal
//! named or the backoff the platform manager keeps.

use std::time::Duration;

use atoll_core::coord::{Direction, NackReason, Property};
use serde::{Deserialize, Serialize};

/// A value this many times past its bound is far off: trigger rather than
/// tune (latency above, throughput below its inverse), or give back (a
/// throughput above).
pub const FAR_ABOVE: f64 = 2.0;
/// A latency below this share of its bound leaves room to give back.
pub const FAR_BELOW: f64 = 0.5;
/// Share of `react_pressure` below which a tuned-up unit is tuned down.
pub const RELAX_BELOW: f64 = 0.5;
/// Share of `react_utilization` below which borrowed CPUs go back.
pub const RELEASE_BELOW: f64 = 0.75;
/// Share of the CPUs a lender still holds above which its own use takes
/// its lent CPUs back. Near 1: a lender lends only CPUs it leaves idle
/// (rule 4), so only a load that grew since revokes.
pub const REVOKE_ABOVE: f64 = 0.95;
/// Least time between two reactive messages of one overlay about one unit
/// or island.
pub const REACT_INTERVAL: Duration = Duration::from_millis(100);

/// What a reported value asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportWant {
    /// More CPU time; `urgent`: trigger first.
    More {
        /// Far off its bound.
        urgent: bool,
    },
    /// Room to spare: one step back.
    Less,
}

/// How far an overlay's proactive policy has escalated: what a report
/// asking for more sends. Plain data, so it can be saved with the rest of
/// the coordination state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Tune the most pressured unit up.
    #[default]
    Tune,
    /// Tuning is at the island's capacity: borrow a CPU from another of
    /// the overlay's islands.
    BorrowPreferred,
    /// No island of the overlay lends: borrow from any island.
    BorrowAny,
}

impl Stage {
    /// The message kind in words.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tune => "tune",
            Self::BorrowPreferred => "borrow_preferred",
            Self::BorrowAny => "borrow_any",
        }
    }

    /// The next stage up, after a refusal at this one (`None`: the last).
    pub fn escalated(self) -> Option<Self> {
        match self {
            Self::Tune => Some(Self::BorrowPreferred),
            Self::BorrowPreferred => Some(Self::BorrowAny),
            Self::BorrowAny => None,
        }
    }

    /// One stage down, when the property holds with room to spare.
    pub fn relaxed(self) -> Self {
        match self {
            Self::Tune | Self::BorrowPreferred => Self::Tune,
            Self::BorrowAny => Self::BorrowPreferred,
        }
    }
}

/// Whether a refused tune up means the unit has all its island can give:
/// `at capacity`, or the platform manager found nothing to take for it.
pub fn tune_at_capacity(reason: &NackReason) -> bool {
    matches!(
        reason,
        NackReason::AtCapacity { .. } | NackReason::PlatformRefused { .. }
    )
}

/// Whether `property` holds at `value`, and what to ask for.
pub fn report_step(property: &Property, value: f64) -> (bool, Option<ReportWant>) {
    match *property {
        Property::LatencyPercentile { bound_us, .. } => {
            let bound = bound_us as f64;
            if value > bound {
                let urgent = value > FAR_ABOVE * bound;
                (false, Some(ReportWant::More { urgent }))
            } else if value < FAR_BELOW * bound {
                (true, Some(ReportWant::Less))
            } else {
                (true, None)
            }
        }
        Property::ThroughputFloor { per_s } => {
            if value < per_s {
                let urgent = value * FAR_ABOVE < per_s;
                (false, Some(ReportWant::More { urgent }))
            } else if value > FAR_ABOVE * per_s {
                (true, Some(ReportWant::Less))
            } else {
                (true, None)
            }
        }
        Property::PlatformCpuCap { cpus } => (value <= cpus + 1e-9, None),
        Property::PlatformPowerCap { watts } => (value <= watts + 1e-9, None),
    }
}

/// The value against the property, in words: `p99 2100 us > 1000 us`.
pub fn describe_value(property: &Property, value: f64) -> String {
    let cmp = |above: bool| if above { ">" } else { "<=" };
    match *property {
        Property::LatencyPercentile {
            percentile,
            bound_us,
        } => format!(
            "p{percentile} {value} us {} {bound_us} us",
            cmp(value > bound_us as f64)
        ),
        Property::ThroughputFloor { per_s } => {
            let op = if value < per_s { "<" } else { ">=" };
            format!("{value}/s {op} floor {per_s}/s")
        }
        Property::PlatformCpuCap { cpus } => {
            format!("{value} CPUs {} cap {cpus}", cmp(value > cpus))
        }
        Property::PlatformPowerCap { watts } => {
            format!("{value} W {} budget {watts} W", cmp(value > watts))
        }
    }
}

/// Which way to tune a unit at CPU pressure `pressure` (%) under
/// `react_pressure = threshold`; `above_base`: its knobs are above their
/// configured values.
pub fn pressure_step(pressure: f64, threshold: f64, above_base: bool) -> Option<Direction> {
    if pressure > threshold {
        Some(Direction::Up)
    } else if above_base && pressure < threshold * RELAX_BELOW {
        Some(Direction::Down)
    } else {
        None
    }
}

/// What an island should do about its utilization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UtilWant {
    /// Borrow one CPU.
    Borrow,
    /// Give back what it holds from this lender for the overlay.
    Release(String),
}

/// An island using `used` of the `held` CPUs it holds, under
/// `react_utilization = threshold`; `loans`: per lender, the CPUs it holds
/// from it for the overlay.
pub fn utilization_step(
    used: f64,
    held: usize,
    threshold: f64,
    loans: &[(String, usize)],
) -> Option<UtilWant> {
    if held == 0 {
        return None;
    }
    if used / held as f64 > threshold {
        return Some(UtilWant::Borrow);
    }
    loans.iter().find_map(|(lender, k)| {
        let left = held.saturating_sub(*k);
        (left > 0 && used / (left as f64) < threshold * RELEASE_BELOW)
            .then(|| UtilWant::Release(lender.clone()))
    })
}

/// Whether a lender using `used` of the `held` CPUs it still holds takes
/// back what it lent.
pub fn revoke_step(used: f64, held: usize) -> bool {
    held > 0 && used >= held as f64 * REVOKE_ABOVE
}

/// Whether a unit whose sockets hold `bytes` unread is triggered under
/// `react_recv_queue = threshold`.
pub fn recv_queue_step(bytes: u64, threshold: u64) -> bool {
    bytes > threshold
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAT: Property = Property::LatencyPercentile {
        percentile: 99.0,
        bound_us: 1000,
    };
    const TPUT: Property = Property::ThroughputFloor { per_s: 100.0 };

    #[test]
    fn latency_reports() {
        assert_eq!(
            report_step(&LAT, 1500.0),
            (false, Some(ReportWant::More { urgent: false }))
        );
        assert_eq!(
            report_step(&LAT, 2100.0),
            (false, Some(ReportWant::More { urgent: true }))
        );
        assert_eq!(report_step(&LAT, 1000.0), (true, None));
        assert_eq!(report_step(&LAT, 700.0), (true, None));
        assert_eq!(report_step(&LAT, 400.0), (true, Some(ReportWant::Less)));
        assert_eq!(describe_value(&LAT, 2100.0), "p99 2100 us > 1000 us");
        assert_eq!(describe_value(&LAT, 400.0), "p99 400 us <= 1000 us");
    }

    #[test]
    fn throughput_and_cap_reports() {
        assert_eq!(
            report_step(&TPUT, 80.0),
            (false, Some(ReportWant::More { urgent: false }))
        );
        assert_eq!(
            report_step(&TPUT, 40.0),
            (false, Some(ReportWant::More { urgent: true }))
        );
        assert_eq!(report_step(&TPUT, 150.0), (true, None));
        assert_eq!(report_step(&TPUT, 250.0), (true, Some(ReportWant::Less)));
        assert_eq!(describe_value(&TPUT, 80.0), "80/s < floor 100/s");
        let cap = Property::PlatformCpuCap { cpus: 2.0 };
        assert_eq!(report_step(&cap, 2.5), (false, None));
        assert_eq!(report_step(&cap, 1.5), (true, None));
    }

    #[test]
    fn pressure_has_hysteresis() {
        assert_eq!(pressure_step(30.0, 20.0, false), Some(Direction::Up));
        assert_eq!(pressure_step(15.0, 20.0, true), None);
        assert_eq!(pressure_step(5.0, 20.0, true), Some(Direction::Down));
        assert_eq!(
            pressure_step(5.0, 20.0, false),
            None,
            "nothing to give back"
        );
    }

    #[test]
    fn utilization_borrows_and_releases_with_hysteresis() {
        assert_eq!(utilization_step(2.9, 3, 0.8, &[]), Some(UtilWant::Borrow));
        assert_eq!(utilization_step(2.0, 3, 0.8, &[]), None);
        let loans = [("batch".to_string(), 1)];
        // 4 CPUs held, one borrowed: 2.5 / 3 = 0.83 is not below 0.6.
        assert_eq!(utilization_step(2.5, 4, 0.8, &loans), None);
        assert_eq!(
            utilization_step(1.0, 4, 0.8, &loans),
            Some(UtilWant::Release("batch".into()))
        );
        assert_eq!(utilization_step(1.0, 0, 0.8, &loans), None);
    }

    #[test]
    fn stages_escalate_and_relax_in_order() {
        assert_eq!(Stage::default(), Stage::Tune);
        assert_eq!(Stage::Tune.escalated(), Some(Stage::BorrowPreferred));
        assert_eq!(Stage::BorrowPreferred.escalated(), Some(Stage::BorrowAny));
        assert_eq!(Stage::BorrowAny.escalated(), None);
        assert_eq!(Stage::BorrowAny.relaxed(), Stage::BorrowPreferred);
        assert_eq!(Stage::BorrowPreferred.relaxed(), Stage::Tune);
        assert_eq!(Stage::Tune.relaxed(), Stage::Tune);
        let json = serde_json::to_string(&Stage::BorrowAny).unwrap();
        assert_eq!(json, "\"borrow_any\"");
        assert_eq!(
            serde_json::from_str::<Stage>(&json).unwrap(),
            Stage::BorrowAny
        );
    }

    #[test]
    fn only_capacity_refusals_escalate_a_tune() {
        let n = |s: &str| atoll_core::Name::new(s).unwrap();
        let cap = NackReason::AtCapacity {
            island: n("kv"),
            unit: n("r1"),
            resource: atoll_core::coord::Resource::CpuTime,
            limit: atoll_core::coord::Limit::MaxWeight { weight: 10_000 },
        };
        assert!(tune_at_capacity(&cap));
        let refused = NackReason::PlatformRefused {
            overlay: n("app"),
            resource: atoll_core::coord::Resource::CpuTime,
            nacks: 5,
        };
        assert!(tune_at_capacity(&refused));
        let backoff = NackReason::BackingOff {
            until: Duration::from_millis(30),
        };
        assert!(!tune_at_capacity(&backoff));
    }

    #[test]
    fn a_lender_revokes_only_once_its_own_use_fills_what_it_holds() {
        // Lent one of four at 2.5 CPUs used: 2.5 of 3 is not full.
        assert!(!revoke_step(2.5, 3));
        assert!(revoke_step(2.9, 3));
        assert!(revoke_step(3.0, 3));
        assert!(!revoke_step(0.0, 0));
    }

    #[test]
    fn recv_queue_threshold_is_exclusive() {
        assert!(recv_queue_step(129 << 10, 128 << 10));
        assert!(!recv_queue_step(128 << 10, 128 << 10));
    }
}
