//! What the operator asks of communication-aware scheduling: which
//! features are on, the reservation period, the boost mechanism and its
//! strength, and who may be boosted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Name;

/// Shortest accepted reservation period.
pub const MIN_PERIOD: Duration = Duration::from_millis(10);
/// Longest accepted reservation period.
pub const MAX_PERIOD: Duration = Duration::from_secs(10);
/// Shortest accepted EEVDF boost slice.
pub const MIN_BOOST_SLICE: Duration = Duration::from_micros(100);
/// Longest accepted EEVDF boost slice.
pub const MAX_BOOST_SLICE: Duration = Duration::from_millis(100);
/// Largest accepted weight multiplier.
pub const MAX_BOOST_WEIGHT: u32 = 100;

/// How the daemon carries out a boost for one epoch. The policy does not
/// depend on it; it is here so that one spec describes the whole feature.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// A short EEVDF custom slice (`sched_attr.sched_runtime` =
    /// [`CommSpec::boost_slice`]) on the boosted unit's threads: they are
    /// picked sooner when they wake, without more CPU share.
    #[default]
    Slice,
    /// The boosted unit's `cpu.weight` is multiplied by
    /// [`CommSpec::boost_weight`] for the epoch.
    Weight,
    /// Every watched unit that is *not* boosted gets `cpu.idle = 1` for the
    /// epoch, so boosted units win every wake-up against them.
    IdleOthers,
}

/// Communication-aware scheduling parameters (seed 003). The three features
/// ([`recipient`](Self::recipient), [`anticipate`](Self::anticipate),
/// [`netpath`](Self::netpath)) switch on and off independently; with all
/// three off nothing is ever boosted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommSpec {
    /// Prefer units with received data waiting (paper §3.2).
    pub recipient: bool,
    /// Prefer units predicted to send soon, by a last-value predictor
    /// (paper §3.3).
    pub anticipate: bool,
    /// Units on the other units' network path (proxies, load balancers),
    /// preferred like the paper's Domain0 (§3.4). Empty: feature off. These
    /// units are watched whether or not [`units`](Self::units) lists them.
    pub netpath: Vec<Name>,
    /// The reservation period: each unit is owed `reservation × period` of
    /// CPU time in every aligned window of this length (SEDF's period).
    pub period: Duration,
    /// How a boost is applied.
    pub mechanism: Mechanism,
    /// EEVDF slice given to a boosted unit's threads
    /// ([`Mechanism::Slice`]).
    pub boost_slice: Duration,
    /// Weight multiplier of a boosted unit ([`Mechanism::Weight`]).
    pub boost_weight: u32,
    /// Units that may be boosted; `None`: every unit given to the policy.
    pub units: Option<Vec<Name>>,
    /// Most units boosted at once. Boosting more units than the island
    /// has CPUs only makes them compete among themselves; 2 lets a proxy and
    /// one tier behind it run together.
    pub max_boosted: usize,
}

impl Default for CommSpec {
    /// Every feature off, 100 ms period, weight mechanism (×8; chosen by
    /// `atoll bench comm`, see docs/comm.md), slice 100 µs, all units
    /// watched, at most 2 boosted.
    fn default() -> Self {
        Self {
            recipient: false,
            anticipate: false,
            netpath: Vec::new(),
            period: Duration::from_millis(100),
            mechanism: Mechanism::Weight,
            boost_slice: Duration::from_micros(100),
            boost_weight: 8,
            units: None,
            max_boosted: 2,
        }
    }
}

/// A [`CommSpec`] value out of range. Each variant names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommSpecError {
    /// `period` outside 10 ms..=10 s.
    #[error("period = {value:?} is outside 10ms..=10s")]
    Period {
        /// The value given.
        value: Duration,
    },
    /// `boost_slice` outside 100 µs..=100 ms.
    #[error("boost_slice = {value:?} is outside 100µs..=100ms")]
    BoostSlice {
        /// The value given.
        value: Duration,
    },
    /// `boost_weight` outside 1..=100.
    #[error("boost_weight = {value} is outside 1..=100")]
    BoostWeight {
        /// The value given.
        value: u32,
    },
    /// `max_boosted` is 0.
    #[error("max_boosted = {value} must be at least 1")]
    MaxBoosted {
        /// The value given.
        value: usize,
    },
    /// A unit listed twice in `units` or `netpath`.
    #[error("{field}: unit {unit} is listed twice")]
    Duplicate {
        /// `units` or `netpath`.
        field: &'static str,
        /// The unit.
        unit: Name,
    },
}

impl CommSpecError {
    /// The field at fault, as spelled in [`CommSpec`].
    pub fn field(&self) -> &'static str {
        match self {
            Self::Period { .. } => "period",
            Self::BoostSlice { .. } => "boost_slice",
            Self::BoostWeight { .. } => "boost_weight",
            Self::MaxBoosted { .. } => "max_boosted",
            Self::Duplicate { field, .. } => field,
        }
    }
}

impl CommSpec {
    /// Whether any of the three features is on.
    pub fn any_feature(&self) -> bool {
        self.recipient || self.anticipate || !self.netpath.is_empty()
    }

    /// Checks every range; returns the first problem.
    pub fn validate(&self) -> Result<(), CommSpecError> {
        if self.period < MIN_PERIOD || self.period > MAX_PERIOD {
            return Err(CommSpecError::Period { value: self.period });
        }
        if self.boost_slice < MIN_BOOST_SLICE || self.boost_slice > MAX_BOOST_SLICE {
            return Err(CommSpecError::BoostSlice {
                value: self.boost_slice,
            });
        }
        if !(1..=MAX_BOOST_WEIGHT).contains(&self.boost_weight) {
            return Err(CommSpecError::BoostWeight {
                value: self.boost_weight,
            });
        }
        if self.max_boosted == 0 {
            return Err(CommSpecError::MaxBoosted {
                value: self.max_boosted,
            });
        }
        let lists = [
            ("netpath", Some(&self.netpath)),
            ("units", self.units.as_ref()),
        ];
        for (field, list) in lists {
            let mut seen = BTreeSet::new();
            for unit in list.into_iter().flatten() {
                if !seen.insert(unit) {
                    return Err(CommSpecError::Duplicate {
                        field,
                        unit: unit.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Whether `unit` may be boosted: listed in `units` (or `units` is
    /// `None`), or on the network path.
    pub fn watches(&self, unit: &Name) -> bool {
        self.netpath.contains(unit) || self.units.as_ref().is_none_or(|u| u.contains(unit))
    }
}

/// Each unit's reservation in CPUs, from the island's capacity and the
/// units' explicit entitlements (`None`: no explicit entitlement).
///
/// Explicit entitlements are kept as given; if they add up to more than
/// `capacity_cpus` they are all scaled down by the same factor and the
/// units without one get nothing. Otherwise the units without one share
/// what is left equally. Negative or non-finite entitlements count as 0, as
/// does a non-finite or negative capacity. The result never adds up to more
/// than the capacity (up to rounding).
///
/// A reservation of 0 means the unit is never boosted.
pub fn reservations(capacity_cpus: f64, units: &[(Name, Option<f64>)]) -> BTreeMap<Name, f64> {
    let clean = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
    let capacity = clean(capacity_cpus);
    let explicit: f64 = units.iter().filter_map(|(_, c)| c.map(clean)).sum();
    let rest = units.iter().filter(|(_, c)| c.is_none()).count();
    let (factor, each) = if explicit > capacity {
        (capacity / explicit, 0.0)
    } else if rest > 0 {
        (1.0, (capacity - explicit) / rest as f64)
    } else {
        (1.0, 0.0)
    };
    units
        .iter()
        .map(|(n, c)| (n.clone(), c.map_or(each, |c| clean(c) * factor)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    #[test]
    fn default_is_valid_and_boosts_nothing() {
        let s = CommSpec::default();
        assert_eq!(s.validate(), Ok(()));
        assert!(!s.any_feature());
        assert_eq!(s.max_boosted, 2);
        assert_eq!(s.period, Duration::from_millis(100));
    }

    #[test]
    fn validation_names_field_and_value() {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        let cases: Vec<(CommSpec, &str)> = vec![
            (
                CommSpec {
                    period: ms(9),
                    ..Default::default()
                },
                "period",
            ),
            (
                CommSpec {
                    period: ms(10_001),
                    ..Default::default()
                },
                "period",
            ),
            (
                CommSpec {
                    boost_slice: us(99),
                    ..Default::default()
                },
                "boost_slice",
            ),
            (
                CommSpec {
                    boost_slice: us(100_001),
                    ..Default::default()
                },
                "boost_slice",
            ),
            (
                CommSpec {
                    boost_weight: 0,
                    ..Default::default()
                },
                "boost_weight",
            ),
            (
                CommSpec {
                    boost_weight: 101,
                    ..Default::default()
                },
                "boost_weight",
            ),
            (
                CommSpec {
                    max_boosted: 0,
                    ..Default::default()
                },
                "max_boosted",
            ),
            (
                CommSpec {
                    netpath: vec![n("p"), n("p")],
                    ..Default::default()
                },
                "netpath",
            ),
            (
                CommSpec {
                    units: Some(vec![n("a"), n("a")]),
                    ..Default::default()
                },
                "units",
            ),
        ];
        for (spec, field) in cases {
            let err = spec.validate().unwrap_err();
            assert_eq!(err.field(), field, "{err}");
            assert!(err.to_string().starts_with(field), "{err}");
        }
        // The bounds themselves are accepted.
        for (p, b, w) in [(ms(10), us(100), 1), (ms(10_000), ms(100), 100)] {
            let s = CommSpec {
                period: p,
                boost_slice: b,
                boost_weight: w,
                ..Default::default()
            };
            assert_eq!(s.validate(), Ok(()));
        }
    }

    #[test]
    fn mechanism_names_and_strict_parsing() {
        let names: Vec<String> = [Mechanism::Slice, Mechanism::Weight, Mechanism::IdleOthers]
            .iter()
            .map(|m| serde_json::to_string(m).unwrap())
            .collect();
        assert_eq!(names, ["\"slice\"", "\"weight\"", "\"idle_others\""]);
        let s: CommSpec =
            serde_json::from_str(r#"{"recipient": true, "mechanism": "idle_others"}"#).unwrap();
        assert!(s.recipient && !s.anticipate);
        assert_eq!(s.mechanism, Mechanism::IdleOthers);
        assert_eq!(s.max_boosted, 2);
        assert!(serde_json::from_str::<CommSpec>(r#"{"recipients": true}"#).is_err());
        let full = CommSpec {
            netpath: vec![n("proxy")],
            units: Some(vec![n("web"), n("db")]),
            ..Default::default()
        };
        let back: CommSpec = serde_json::from_str(&serde_json::to_string(&full).unwrap()).unwrap();
        assert_eq!(back, full);
    }

    #[test]
    fn watched_units() {
        let s = CommSpec {
            netpath: vec![n("proxy")],
            units: Some(vec![n("web")]),
            ..Default::default()
        };
        assert!(s.watches(&n("web")) && s.watches(&n("proxy")));
        assert!(!s.watches(&n("batch")));
        assert!(CommSpec::default().watches(&n("batch")));
    }

    #[test]
    fn reservations_split_the_rest_and_scale_overcommit() {
        let r = reservations(2.0, &[(n("a"), Some(0.5)), (n("b"), None), (n("c"), None)]);
        assert_eq!(r[&n("a")], 0.5);
        assert_eq!(r[&n("b")], 0.75);
        assert_eq!(r[&n("c")], 0.75);
        let r = reservations(
            1.0,
            &[(n("a"), Some(1.5)), (n("b"), Some(0.5)), (n("c"), None)],
        );
        assert!((r[&n("a")] - 0.75).abs() < 1e-12);
        assert!((r[&n("b")] - 0.25).abs() < 1e-12);
        assert_eq!(r[&n("c")], 0.0);
        let r = reservations(1.0, &[(n("a"), Some(f64::NAN)), (n("b"), Some(-1.0))]);
        assert_eq!((r[&n("a")], r[&n("b")]), (0.0, 0.0));
        let r = reservations(f64::INFINITY, &[(n("a"), None)]);
        assert_eq!(r[&n("a")], 0.0);
    }
}
