//! The network island's pure policy (issue 17; seed 001, coordinated
//! heterogeneous islands: a network processor with a resource manager of
//! its own, coordinating with the x86 side by `tune` and `trigger`).
//!
//! A network island is an interface's transmit bandwidth: one HTB class
//! per unit plus a default class for everything else. Its policy is
//! weighted shares: a unit's class is guaranteed `rate × share / Σ shares`
//! (the default class's share included), may borrow up to its ceiling (the
//! link rate unless configured), and gets spare bandwidth by its priority
//! ([`class_rates`]).
//!
//! Its [`NetCoordinator`] answers the same [`Message`]s as a CPU island's:
//!
//! - `tune(bandwidth, ±, overlay, unit)` multiplies or divides the unit's
//!   share by the coordination's `weight_step` (at least ±1), within
//!   1..=10000: *at capacity* at 10000, *at minimum* at 1;
//! - `register` / `deregister` bring overlays in and out (an overlay may
//!   hold units of CPU islands and of network islands); deregistering puts
//!   the overlay's units' shares back to their configured values;
//! - `null` is acknowledged; `trigger`, `borrow_*`, `release` and tunes of
//!   other resources are refused as unsupported.
//!
//! The other way, [`NetCoordinator::backlog_triggers`] decides, from each
//! unit's samples, when to send `trigger(cpu time, overlay, unit)` to the
//! unit's CPU island: when data waiting in the unit's sockets (the receive
//! queues: what the unit's CPU has not read yet) or in its class's queue
//! crosses the configured threshold, at most once per cooldown per unit.
//! The daemon hands those messages to the [`PlatformManager`] with the
//! unit's CPU island as sender, so backoff, arbitration and escalation are
//! the CPU islands' own.
//!
//! [`PlatformManager`]: crate::coord::PlatformManager

mod coordinator;
mod rates;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use coordinator::{NetChange, NetCoordinator, NetReply, NetSample, NetTrigger, TriggerCause};
pub use rates::{class_rates, ClassInput, ClassRate, DEFAULT_MINOR, FIRST_UNIT_MINOR};
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use crate::coord::Message;
use crate::coord::{MAX_WEIGHT, MIN_WEIGHT};
use crate::{CpuSet, Name};

/// A unit's class on a network island.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetUnitSetup {
    /// The unit (the same name as in its CPU island).
    pub name: Name,
    /// Its share, 1..=10000.
    pub share: u32,
    /// The most it may use, bits per second; `None`: the link rate.
    pub ceil_bps: Option<u64>,
    /// Its priority for spare bandwidth, 0 (first) to 7.
    pub prio: u8,
}

/// The share of a unit's class (and of the default class) when none is
/// given.
pub const DEFAULT_SHARE: u32 = 100;

/// A unit's class priority for spare bandwidth when none is given.
pub const DEFAULT_PRIO: u8 = 3;

/// When units' backlogs trigger their CPU island.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerConfig {
    /// Bytes waiting in a unit's sockets' receive queues; `None`: never.
    pub socket_backlog_bytes: Option<u64>,
    /// Bytes waiting in a unit's class queue; `None`: never.
    pub class_backlog_bytes: Option<u64>,
    /// The least time between two triggers of one unit.
    pub cooldown: Duration,
}

impl Default for TriggerConfig {
    fn default() -> Self {
        Self {
            socket_backlog_bytes: None,
            class_backlog_bytes: None,
            cooldown: Duration::from_millis(120),
        }
    }
}

/// The leaf qdisc of a network island's classes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Leaf {
    /// fq_codel (per-flow fairness, short queues).
    #[default]
    FqCodel,
    /// pfifo, for kernels without fq_codel.
    Pfifo,
}

/// A network island.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetIslandSetup {
    /// Its name (distinct from every island's).
    pub name: Name,
    /// The interface.
    pub interface: String,
    /// The link rate, bits per second.
    pub rate_bps: u64,
    /// The share of the default class (traffic of no unit), 1..=10000.
    pub default_share: u32,
    /// Its units' classes.
    pub units: Vec<NetUnitSetup>,
    /// When backlogs trigger.
    pub triggers: TriggerConfig,
    /// The leaf qdisc.
    #[serde(default)]
    pub leaf: Leaf,
    /// The CPUs that do receive processing (the NIC's IRQs, or RPS);
    /// `None`: left as found.
    #[serde(default)]
    pub rx_cpus: Option<CpuSet>,
    /// The CPUs whose transmissions use the interface's queues (XPS);
    /// `None`: left as found.
    #[serde(default)]
    pub tx_cpus: Option<CpuSet>,
}

/// What is wrong with a network island.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NetIslandError {
    /// The link rate is zero.
    #[error("network island {island}: rate must be above 0")]
    ZeroRate {
        /// The island.
        island: Name,
    },
    /// A share out of 1..=10000.
    #[error("network island {island}: share {share} of {what} is not within 1..=10000")]
    BadShare {
        /// The island.
        island: Name,
        /// The unit, or `default`.
        what: String,
        /// The share.
        share: u32,
    },
    /// A ceiling of zero or above the link rate.
    #[error(
        "network island {island}: ceil {ceil_bps} of unit {unit} is not within 1..={rate_bps}"
    )]
    BadCeil {
        /// The island.
        island: Name,
        /// The unit.
        unit: Name,
        /// Its ceiling.
        ceil_bps: u64,
        /// The link rate.
        rate_bps: u64,
    },
    /// A priority above 7.
    #[error("network island {island}: prio {prio} of unit {unit} is above 7")]
    BadPrio {
        /// The island.
        island: Name,
        /// The unit.
        unit: Name,
        /// The priority.
        prio: u8,
    },
    /// A unit listed twice.
    #[error("network island {island}: unit {unit} is listed twice")]
    DuplicateUnit {
        /// The island.
        island: Name,
        /// The unit.
        unit: Name,
    },
    /// More units than class minors.
    #[error("network island {island}: no class id left for unit {unit}")]
    NoClassLeft {
        /// The island.
        island: Name,
        /// The unit.
        unit: Name,
    },
}

impl NetIslandSetup {
    /// Checks rates, shares, ceilings, priorities and names.
    pub fn validate(&self) -> Result<(), NetIslandError> {
        let island = || self.name.clone();
        if self.rate_bps == 0 {
            return Err(NetIslandError::ZeroRate { island: island() });
        }
        check_share(&self.name, "the default class", self.default_share)?;
        for (i, u) in self.units.iter().enumerate() {
            if self.units[..i].iter().any(|v| v.name == u.name) {
                return Err(NetIslandError::DuplicateUnit {
                    island: island(),
                    unit: u.name.clone(),
                });
            }
            u.validate(&self.name, self.rate_bps)?;
        }
        Ok(())
    }
}

impl NetUnitSetup {
    /// Checks the unit's share, ceiling and priority against `rate_bps`.
    pub fn validate(&self, island: &Name, rate_bps: u64) -> Result<(), NetIslandError> {
        check_share(island, &format!("unit {}", self.name), self.share)?;
        if let Some(ceil_bps) = self.ceil_bps {
            if ceil_bps == 0 || ceil_bps > rate_bps {
                return Err(NetIslandError::BadCeil {
                    island: island.clone(),
                    unit: self.name.clone(),
                    ceil_bps,
                    rate_bps,
                });
            }
        }
        if self.prio > 7 {
            return Err(NetIslandError::BadPrio {
                island: island.clone(),
                unit: self.name.clone(),
                prio: self.prio,
            });
        }
        Ok(())
    }
}

fn check_share(island: &Name, what: &str, share: u32) -> Result<(), NetIslandError> {
    if (MIN_WEIGHT..=MAX_WEIGHT).contains(&share) {
        Ok(())
    } else {
        Err(NetIslandError::BadShare {
            island: island.clone(),
            what: what.to_string(),
            share,
        })
    }
}
