//! Wire types of changes at run time: units with an entitlement
//! (`unit_add`, `unit_set`, `unit_rm`) and overlays over any units
//! (`overlay_add`, `overlay_set`, `overlay_rm`).
//!
//! Their fields are the config file's keys (`[unit.NAME]`,
//! `[overlay.NAME]`) with sizes in bytes, so that what a request sets is
//! what `atoll config dump` then writes. A field left out keeps its value
//! (`*_set`) or takes the config's default (`*_add`).
//!
//! ```text
//! → {"v":1,"id":4,"op":"unit_add","unit":"batch","island":"web",
//!    "settings":{"cpus":1.5,"memory_max":2147483648}}
//! ← {"v":1,"id":4,"ok":{"kind":"unit","unit":"batch","island":"web","entitlement":{...}}}
//! → {"v":1,"id":5,"op":"overlay_add","overlay":"shop",
//!    "settings":{"units":["batch"],"latency_us":1000}}
//! ```

use serde::{Deserialize, Serialize};

/// A unit's entitlement as the config writes it; `None` fields are not
/// given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitSettings {
    /// CPUs' worth of time it is entitled to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// `cpu.weight`, 1..=10000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Hard cap in CPUs (`cpu.max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cap: Option<f64>,
    /// `memory.min`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_min: Option<u64>,
    /// `memory.low`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_low: Option<u64>,
    /// `memory.high`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_high: Option<u64>,
    /// `memory.max`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max: Option<u64>,
    /// `io.weight`, 1..=10000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_weight: Option<u32>,
    /// Its class on a network island, as the config's
    /// `[network.NAME.units.UNIT]` gives it (unset: the island's default
    /// class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetClassSettings>,
    /// `unit_set`: take the unit's network class away (its traffic goes
    /// back to the island's default class). Not with `network`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clear_network: bool,
}

impl NetClassSettings {
    /// `wire share 300 ceil_mbit 50 prio 1`: the keys given.
    pub fn describe(&self) -> String {
        let mut t = self.island.clone();
        for (k, v) in [
            ("share", self.share.map(u64::from)),
            ("ceil_mbit", self.ceil_mbit),
            ("prio", self.prio.map(u64::from)),
        ] {
            if let Some(v) = v {
                t.push_str(&format!(" {k} {v}"));
            }
        }
        t
    }
}

/// A unit's class on a network island: the keys of the config's
/// `[network.ISLAND.units.UNIT]` table, with the island named.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetClassSettings {
    /// The network island (`[network.NAME]`).
    pub island: String,
    /// Its share, 1..=10000 (unset: the config's default, 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<u32>,
    /// The most it may use, Mbit/s (unset: the link rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceil_mbit: Option<u64>,
    /// Its priority for spare bandwidth, 0 (first) to 7 (unset: 3, as in
    /// the config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prio: Option<u8>,
}

impl UnitSettings {
    /// `cpus 1.5, memory_max 2147483648`: the keys given, for summaries.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                parts.push(format!("{k} {v}"));
            }
        };
        put("cpus", self.cpus.map(|v| v.to_string()));
        put("weight", self.weight.map(|v| v.to_string()));
        put("cpu_cap", self.cpu_cap.map(|v| v.to_string()));
        put("memory_min", self.memory_min.map(|v| v.to_string()));
        put("memory_low", self.memory_low.map(|v| v.to_string()));
        put("memory_high", self.memory_high.map(|v| v.to_string()));
        put("memory_max", self.memory_max.map(|v| v.to_string()));
        put("io_weight", self.io_weight.map(|v| v.to_string()));
        put(
            "network",
            self.network.as_ref().map(NetClassSettings::describe),
        );
        if self.clear_network {
            parts.push("network none".into());
        }
        parts.join(", ")
    }
}

/// An overlay as the config writes it; `None` fields are not given. At
/// most one property key (`latency_us` with `percentile`,
/// `throughput_floor`, `cpu_cap`, `power_cap_watts`); `overlay_add` needs
/// one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverlaySettings {
    /// Its units (replaces the list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<Vec<String>>,
    /// Arbitration priority, higher wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// Property: the `percentile`th latency within this many µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<u64>,
    /// With `latency_us` (default 99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
    /// Property: at least this many operations per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_floor: Option<f64>,
    /// Property: a CPU cap for the whole machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cap: Option<f64>,
    /// Property: a power budget for the whole machine, W (needs RAPL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cap_watts: Option<f64>,
    /// Reactive policy: CPU pressure (%) that tunes a unit up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub react_pressure: Option<f64>,
    /// Reactive policy: island utilization (0..1] that borrows a CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub react_utilization: Option<f64>,
    /// Reactive policy: receive-queue bytes that trigger a unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub react_recv_queue: Option<u64>,
    /// A latency overlay's source and best-effort keys (given: they
    /// replace the overlay's as a whole, those not given taking their
    /// defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Box<SloSettings>>,
}

impl OverlaySettings {
    /// Whether it names a property.
    pub fn has_property(&self) -> bool {
        self.latency_us.is_some()
            || self.throughput_floor.is_some()
            || self.cpu_cap.is_some()
            || self.power_cap_watts.is_some()
    }
}

/// The `[overlay.NAME]` keys of a latency source and best-effort units
/// (`docs/config.md`), for `overlay_add` and `overlay_set`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloSettings {
    /// Where the latency comes from: `report`, `probe` or `access_log`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_source: Option<String>,
    /// Span of the percentile window, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<u64>,
    /// Age of the newest sample past which the window is stale, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_after_ms: Option<u64>,
    /// `probe`: `http://host:port/path` or `tcp://host:port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    /// `tcp://` probes: what is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_send: Option<String>,
    /// `probe`: time between two probes, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_every_ms: Option<u64>,
    /// `probe`: a probe's timeout, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_timeout_ms: Option<u64>,
    /// `access_log`: the log file (absolute path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_log: Option<String>,
    /// `access_log`: `nginx` or `haproxy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_format: Option<String>,
    /// `nginx`: the field holding the request time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_field: Option<i32>,
    /// `nginx`: its unit, `s`, `ms` or `us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_unit: Option<String>,
    /// Units run as best effort beside the overlay's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_effort: Option<Vec<String>>,
    /// Levels of the best-effort units above the floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub be_steps: Option<u32>,
    /// Slack above which the best-effort units grow a step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub be_grow_above: Option<f64>,
    /// Slack below which they are cut to half their level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub be_cut_below: Option<f64>,
}
