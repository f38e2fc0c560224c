//! `[comm]`: communication-aware scheduling (seed 003), from the table as
//! written to a [`CommSpec`].
//!
//! Times are written in the file's units (`period_ms`, `boost_slice_us`);
//! what a key leaves out takes [`CommSpec::default`]. Ranges and the units
//! named are checked by
//! [`PlatformSpec::validate`](atoll_core::spec::PlatformSpec::validate), so
//! a problem is reported at its key like every other.

use std::time::Duration;

use atoll_core::comm::{CommSpec, Mechanism};
use atoll_core::Name;
use serde::Deserialize;

/// `[comm]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [comm] table")]
pub(crate) struct RawComm {
    /// Prefer units with received data waiting.
    pub recipient: Option<bool>,
    /// Prefer units predicted to send soon.
    pub anticipate: Option<bool>,
    /// Units on the others' network path (the paper's Domain0).
    pub netpath: Option<Vec<Name>>,
    /// `slice`, `weight` or `idle_others`.
    pub mechanism: Option<Mechanism>,
    /// The reservation period, ms.
    pub period_ms: Option<u64>,
    /// The custom slice of a boosted unit's threads, µs.
    pub boost_slice_us: Option<u64>,
    /// The weight multiplier of a boosted unit.
    pub boost_weight: Option<u32>,
    /// Most units boosted at once.
    pub max_boosted: Option<usize>,
    /// Units that may be boosted (default: all).
    pub units: Option<Vec<Name>>,
}

/// The spec `[comm]` asks for.
pub(crate) fn resolve(raw: RawComm) -> CommSpec {
    let d = CommSpec::default();
    CommSpec {
        recipient: raw.recipient.unwrap_or(d.recipient),
        anticipate: raw.anticipate.unwrap_or(d.anticipate),
        netpath: raw.netpath.unwrap_or(d.netpath),
        period: raw.period_ms.map_or(d.period, Duration::from_millis),
        mechanism: raw.mechanism.unwrap_or(d.mechanism),
        boost_slice: raw
            .boost_slice_us
            .map_or(d.boost_slice, Duration::from_micros),
        boost_weight: raw.boost_weight.unwrap_or(d.boost_weight),
        units: raw.units.or(d.units),
        max_boosted: raw.max_boosted.unwrap_or(d.max_boosted),
    }
}
