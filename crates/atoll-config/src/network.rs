//! `[network.NAME]`: network islands (issue 17, `docs/netisland.md`), from
//! the tables as written to [`NetIslandSetup`]s.
//!
//! ```toml
//! [network.wire]
//! interface = "eth1"
//! rate_mbit = 1000
//! default_share = 100          # traffic of no unit (default 100)
//! leaf = "fq_codel"            # or "pfifo"
//! rx_cpus = "1"                # receive processing (IRQs or RPS); unset: as found
//! tx_cpus = "0-1"              # XPS; unset: as found
//! socket_backlog_bytes = 65536 # trigger the unit's CPU island above this
//! class_backlog_bytes = 32768
//! trigger_cooldown_ms = 120
//!
//! [network.wire.units.web]
//! share = 300
//! ceil_mbit = 800              # unset: the link rate
//! prio = 0                     # 0..=7 (default 3)
//! ```
//! Units are taken in name order (their class ids follow it). Ranges and
//! names are checked by
//! [`PlatformSpec::validate`](atoll_core::spec::PlatformSpec::validate).

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_core::netisland::{Leaf, NetIslandSetup, NetUnitSetup, TriggerConfig};
use atoll_core::{CpuSet, Name};
use serde::Deserialize;

/// Bits per second in a megabit.
pub(crate) const MBIT: u64 = 1_000_000;

/// The default share of the default class and of a unit, and the default
/// priority of a unit's class (the same as a unit added at run time gets).
pub(crate) use atoll_core::netisland::{DEFAULT_PRIO, DEFAULT_SHARE};

/// `[network.NAME]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [network.NAME] table")]
pub(crate) struct RawNetwork {
    interface: String,
    rate_mbit: u64,
    default_share: Option<u32>,
    leaf: Option<Leaf>,
    rx_cpus: Option<CpuSet>,
    tx_cpus: Option<CpuSet>,
    socket_backlog_bytes: Option<u64>,
    class_backlog_bytes: Option<u64>,
    trigger_cooldown_ms: Option<u64>,
    #[serde(default)]
    units: BTreeMap<Name, RawNetUnit>,
}

/// `[network.NAME.units.UNIT]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [network.NAME.units.UNIT] table")]
pub(crate) struct RawNetUnit {
    share: Option<u32>,
    ceil_mbit: Option<u64>,
    prio: Option<u8>,
}

/// The network island `[network.name]` asks for.
pub(crate) fn resolve(name: Name, raw: RawNetwork) -> NetIslandSetup {
    let d = TriggerConfig::default();
    NetIslandSetup {
        name,
        interface: raw.interface,
        rate_bps: raw.rate_mbit.saturating_mul(MBIT),
        default_share: raw.default_share.unwrap_or(DEFAULT_SHARE),
        units: raw
            .units
            .into_iter()
            .map(|(name, u)| NetUnitSetup {
                name,
                share: u.share.unwrap_or(DEFAULT_SHARE),
                ceil_bps: u.ceil_mbit.map(|m| m.saturating_mul(MBIT)),
                prio: u.prio.unwrap_or(DEFAULT_PRIO),
            })
            .collect(),
        triggers: TriggerConfig {
            socket_backlog_bytes: raw.socket_backlog_bytes,
            class_backlog_bytes: raw.class_backlog_bytes,
            cooldown: raw
                .trigger_cooldown_ms
                .map_or(d.cooldown, Duration::from_millis),
        },
        leaf: raw.leaf.unwrap_or_default(),
        rx_cpus: raw.rx_cpus,
        tx_cpus: raw.tx_cpus,
    }
}
