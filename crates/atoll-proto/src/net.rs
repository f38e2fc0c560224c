//! The network islands in the `status` reply (`docs/netisland.md`).

use serde::{Deserialize, Serialize};

/// One network island and its interface.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetIslandStatus {
    /// The network island.
    pub island: String,
    /// Its interface.
    pub interface: String,
    /// Whether the daemon holds the interface (its HTB tree is on it).
    pub managed: bool,
    /// The link rate, bit/s.
    pub rate_bps: u64,
    /// How units' traffic reaches their classes, or why it does not.
    #[serde(default)]
    pub classification: String,
    /// Each class: the default one (no unit) first.
    pub classes: Vec<NetClassStatus>,
}

/// One HTB class and its leaf's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetClassStatus {
    /// `1:10`.
    pub class: String,
    /// The unit, `None` for the default class.
    #[serde(default)]
    pub unit: Option<String>,
    /// Its share now.
    pub share: u32,
    /// Guaranteed rate, bit/s.
    pub rate_bps: u64,
    /// Ceiling, bit/s.
    pub ceil_bps: u64,
    /// The leaf's figures, when they could be read.
    #[serde(default)]
    pub stats: Option<NetClassStats>,
}

/// A class leaf's counters, as last read (each epoch).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetClassStats {
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped.
    pub drops: u64,
    /// Bytes waiting.
    pub backlog_bytes: u64,
    /// Packets waiting.
    pub backlog_packets: u64,
}
