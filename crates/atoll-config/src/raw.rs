//! The config file as written: serde structs that mirror the TOML tables.
//!
//! Every struct refuses unknown keys (`deny_unknown_fields`), adopt rules and
//! layouts accept exactly one key, and leaf types (CPU lists, names, sizes,
//! devices) are checked while deserializing so that their errors carry the
//! span of the offending value. Nothing here knows the machine: defaults
//! that depend on topology are filled in by [`crate::resolve`].

use std::fmt;
use std::path::PathBuf;

use atoll_core::coord::ArbitrationPolicy;
use atoll_core::spec::{DeviceId, RtClass};
use atoll_core::{CpuSet, Name, NodeSet};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::size::Size;

/// Keys allowed at the top level of the document.
pub(crate) const TOP_KEYS: &[&str] = &[
    "epoch_ms",
    "default_island",
    "isolation",
    "host",
    "auto",
    "island",
    "unit",
    "overlay",
    "comm",
    "apps",
    "recipe",
    "network",
];

/// `[isolation]`: the machine-wide isolation model.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an [isolation] table")]
pub(crate) struct RawIsolation {
    /// `smp`, `quota` or `isolate`.
    pub mode: Option<atoll_core::spec::IsolationMode>,
    /// Share of memory never lent, 0..1 (default 0.08).
    pub memory_reserve: Option<f64>,
    /// Disk fairness threshold: bytes above the average decayed count.
    pub io_threshold: Option<Size>,
    /// Half-life of the decayed disk count, ms.
    pub io_decay_ms: Option<u64>,
}

/// `[host]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [host] table")]
pub(crate) struct RawHost {
    /// CPU list or `"auto"`.
    #[serde(default)]
    pub cpus: HostCpus,
    /// Memory nodes; default: the nodes of its CPUs.
    pub mems: Option<NodeSet>,
    /// Move every unmanaged task into the host partition.
    #[serde(default)]
    pub adopt_all: bool,
}

/// The host's CPUs: a kernel list, or `"auto"` for
/// [`atoll_core::layout::default_host`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum HostCpus {
    /// `"auto"` (also the default).
    #[default]
    Auto,
    /// An explicit list.
    List(CpuSet),
}

impl<'de> Deserialize<'de> for HostCpus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim() == "auto" {
            return Ok(Self::Auto);
        }
        CpuSet::parse(&s).map(Self::List).map_err(de::Error::custom)
    }
}

/// Scheduler policy names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PolicyKind {
    /// SCHED_OTHER.
    Fair,
    /// SCHED_BATCH.
    Batch,
    /// SCHED_IDLE.
    Idle,
    /// SCHED_FIFO / SCHED_RR.
    Realtime,
}

/// `rt_class`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawRtClass {
    /// SCHED_FIFO.
    Fifo,
    /// SCHED_RR.
    Rr,
}

impl From<RawRtClass> for RtClass {
    fn from(c: RawRtClass) -> Self {
        match c {
            RawRtClass::Fifo => RtClass::Fifo,
            RawRtClass::Rr => RtClass::Rr,
        }
    }
}

/// The policy keys shared by `[island.*]` and `[auto]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PolicyFields {
    pub policy: Option<PolicyKind>,
    pub rt_class: Option<RawRtClass>,
    pub priority: Option<[u8; 2]>,
    pub rt_runtime_us: Option<u64>,
    pub rt_period_us: Option<u64>,
}

/// `[auto]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an [auto] table")]
pub(crate) struct RawAuto {
    /// How to carve islands; default `"topology"`.
    pub layout: Option<RawLayout>,
    pub policy: Option<PolicyKind>,
    pub rt_class: Option<RawRtClass>,
    pub priority: Option<[u8; 2]>,
    pub rt_runtime_us: Option<u64>,
    pub rt_period_us: Option<u64>,
    /// How each generated island arbitrates coordination requests.
    pub arbitration: Option<ArbitrationPolicy>,
}

impl RawAuto {
    /// Its policy keys.
    pub fn policy_fields(&self) -> PolicyFields {
        PolicyFields {
            policy: self.policy,
            rt_class: self.rt_class,
            priority: self.priority,
            rt_runtime_us: self.rt_runtime_us,
            rt_period_us: self.rt_period_us,
        }
    }
}

/// `layout = "per_node" | "per_llc" | "topology" | { split = N }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawLayout {
    /// One island per NUMA node (`node<N>`).
    PerNode,
    /// One island per LLC group (`llc<I>`).
    PerLlc,
    /// Per node, else per LLC, else one island `main`.
    Topology,
    /// N islands of whole cores (`part<I>`).
    Split(u32),
}

const LAYOUTS: &str = "\"per_node\", \"per_llc\", \"topology\" or { split = N }";

impl<'de> Deserialize<'de> for RawLayout {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawLayout;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a layout: {LAYOUTS}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawLayout, E> {
                match v {
                    "per_node" => Ok(RawLayout::PerNode),
                    "per_llc" => Ok(RawLayout::PerLlc),
                    "topology" => Ok(RawLayout::Topology),
                    "split" => Err(E::custom("\"split\" needs a count: layout = { split = 3 }")),
                    other => Err(E::custom(format!(
                        "unknown layout {other:?}, expected {LAYOUTS}"
                    ))),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawLayout, A::Error> {
                #[derive(Deserialize)]
                #[serde(field_identifier, rename_all = "lowercase")]
                enum Key {
                    Split,
                }
                let Some(Key::Split) = map.next_key::<Key>()? else {
                    return Err(de::Error::custom(format!("expected {LAYOUTS}")));
                };
                let n: u32 = map.next_value()?;
                if map.next_key::<Key>()?.is_some() {
                    return Err(de::Error::custom("`split` given twice"));
                }
                Ok(RawLayout::Split(n))
            }
        }
        d.deserialize_any(V)
    }
}

/// `[island.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an [island.NAME] table")]
pub(crate) struct RawIsland {
    /// Its CPUs (required).
    pub cpus: CpuSet,
    /// Its memory nodes; default: those of its CPUs.
    pub mems: Option<NodeSet>,
    pub policy: Option<PolicyKind>,
    pub rt_class: Option<RawRtClass>,
    pub priority: Option<[u8; 2]>,
    pub rt_runtime_us: Option<u64>,
    pub rt_period_us: Option<u64>,
    /// How it arbitrates coordination requests (default round robin).
    pub arbitration: Option<ArbitrationPolicy>,
    /// Its CPUs are its own (a partition); default false (shared).
    pub exclusive: Option<bool>,
    /// Users may create units in it; default false.
    pub user_units: Option<bool>,
    /// Most units per user; default 4.
    pub user_units_max: Option<u32>,
    /// Users besides root who may place tasks in it (realtime islands).
    pub rt_users: Option<Vec<u32>>,
    /// Its CPUs' cpufreq policy (`[island.NAME.frequency]`); default: as
    /// the machine has it.
    pub frequency: Option<atoll_core::power::FreqPolicy>,
}

impl RawIsland {
    /// Its policy keys.
    pub fn policy_fields(&self) -> PolicyFields {
        PolicyFields {
            policy: self.policy,
            rt_class: self.rt_class,
            priority: self.priority,
            rt_runtime_us: self.rt_runtime_us,
            rt_period_us: self.rt_period_us,
        }
    }
}

/// `[unit.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [unit.NAME] table")]
pub(crate) struct RawUnit {
    /// Its island; default: `default_island`, else the first island.
    pub island: Option<Name>,
    pub cpus: Option<f64>,
    pub weight: Option<u32>,
    pub cpu_cap: Option<f64>,
    pub memory_min: Option<Size>,
    pub memory_low: Option<Size>,
    pub memory_high: Option<Size>,
    pub memory_max: Option<Size>,
    pub io_weight: Option<u32>,
    #[serde(default)]
    pub io_limits: Vec<RawIoLimit>,
    pub rt_priority: Option<u8>,
    /// `none` or `lend` (default), per resource.
    pub share_cpu: Option<atoll_core::spec::SharePolicy>,
    pub share_memory: Option<atoll_core::spec::SharePolicy>,
    pub share_io: Option<atoll_core::spec::SharePolicy>,
    #[serde(default)]
    pub adopt: Vec<RawAdopt>,
}

/// `[overlay.NAME]`: a management overlay. Exactly one property key
/// (`latency_us`, `throughput_floor`, `cpu_cap`, `power_cap_watts`) is checked in
/// [`crate::resolve`], where the key of a second one can be named.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an [overlay.NAME] table")]
pub(crate) struct RawOverlay {
    /// Arbitration priority, 0..=255 (default 0).
    pub priority: Option<u8>,
    /// Unit names; each unit's island is the unit's.
    #[serde(default)]
    pub units: Vec<Name>,
    /// Latency bound, µs (property `latency`).
    pub latency_us: Option<u64>,
    /// Percentile of `latency_us` (default 99).
    pub percentile: Option<f64>,
    /// Operations per second (property `throughput`).
    pub throughput_floor: Option<f64>,
    /// Platform CPU cap, CPUs (property `cpu_cap`).
    pub cpu_cap: Option<f64>,
    /// CFS period of the islands' caps, ms (with `cpu_cap`).
    pub cap_period_ms: Option<u64>,
    /// Window over which the cap's split is decided, ms (with `cpu_cap`).
    pub cap_interval_ms: Option<u64>,
    /// Platform power cap, W (property `power_cap_watts`).
    pub power_cap_watts: Option<f64>,
    /// CPU pressure (%) of a unit that tunes it up.
    pub react_pressure: Option<f64>,
    /// Island utilization (0..1) above which it borrows a CPU.
    pub react_utilization: Option<f64>,
    /// Receive-queue bytes of a unit's sockets that trigger it.
    pub react_recv_queue: Option<Size>,
    /// `report` (default), `probe` or `access_log`.
    pub latency_source: Option<String>,
    /// Span of the percentile window, ms.
    pub window_ms: Option<u64>,
    /// `http://host:port/path` or `tcp://host:port` (source `probe`).
    pub probe: Option<String>,
    /// What a TCP probe sends.
    pub probe_send: Option<String>,
    /// Time between two probes, ms.
    pub probe_every_ms: Option<u64>,
    /// A probe's timeout, ms.
    pub probe_timeout_ms: Option<u64>,
    /// The log file (source `access_log`).
    pub access_log: Option<PathBuf>,
    /// `nginx` (default) or `haproxy`.
    pub log_format: Option<String>,
    /// Whitespace-separated field holding the request time (1-based, or
    /// negative from the end), for `nginx`.
    pub log_field: Option<i32>,
    /// `s` (default), `ms` or `us`, for `nginx`.
    pub log_unit: Option<String>,
    /// Units run as best effort beside the overlay's.
    #[serde(default)]
    pub best_effort: Vec<Name>,
    /// Age of the newest sample past which a measured window is stale, ms.
    pub stale_after_ms: Option<u64>,
    /// Levels of the best-effort units above the floor.
    pub be_steps: Option<u32>,
    /// Slack above which the best-effort units grow a step.
    pub be_grow_above: Option<f64>,
    /// Slack below which they are cut to half their level.
    pub be_cut_below: Option<f64>,
}

/// One entry of `io_limits`.
#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an io limit table like { device = \"8:0\", rbps = \"100M\" }"
)]
pub(crate) struct RawIoLimit {
    pub device: Device,
    pub rbps: Option<Size>,
    pub wbps: Option<Size>,
    pub riops: Option<u64>,
    pub wiops: Option<u64>,
}

/// A block device written `"MAJOR:MINOR"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Device(pub DeviceId);

impl<'de> Deserialize<'de> for Device {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_device(&s).map(Device).ok_or_else(|| {
            de::Error::custom(format!(
                "{s:?} is not a device: use \"MAJOR:MINOR\" as in /proc/partitions (\"8:0\")"
            ))
        })
    }
}

fn parse_device(s: &str) -> Option<DeviceId> {
    let (major, minor) = s.split_once(':')?;
    let num = |p: &str| {
        (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse().ok())
            .flatten()
    };
    Some(DeviceId {
        major: num(major)?,
        minor: num(minor)?,
    })
}

/// One adopt rule: a table with exactly one of `comm`, `exe`, `uid`,
/// `cgroup`, `pid`, `systemd_unit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RawAdopt {
    Comm(String),
    Exe(PathBuf),
    Uid(u32),
    Cgroup(String),
    Pid(u32),
    SystemdUnit(String),
}

impl<'de> Deserialize<'de> for RawAdopt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(field_identifier, rename_all = "lowercase")]
        enum Key {
            Comm,
            Exe,
            Uid,
            Cgroup,
            Pid,
            #[serde(rename = "systemd_unit")]
            SystemdUnit,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawAdopt;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "an adopt rule with one key: { comm = ... }, { exe = ... }, { uid = ... }, { cgroup = ... }, { pid = ... } or { systemd_unit = ... }",
                )
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawAdopt, A::Error> {
                let Some(key) = map.next_key::<Key>()? else {
                    return Err(de::Error::custom(
                        "an adopt rule needs one of `comm`, `exe`, `uid`, `cgroup`, `pid`, `systemd_unit`",
                    ));
                };
                let rule = match key {
                    Key::Comm => RawAdopt::Comm(map.next_value()?),
                    Key::Exe => RawAdopt::Exe(map.next_value()?),
                    Key::Uid => RawAdopt::Uid(map.next_value()?),
                    Key::Cgroup => RawAdopt::Cgroup(map.next_value()?),
                    Key::Pid => RawAdopt::Pid(map.next_value()?),
                    Key::SystemdUnit => RawAdopt::SystemdUnit(map.next_value()?),
                };
                if map.next_key::<Key>()?.is_some() {
                    return Err(de::Error::custom(
                        "an adopt rule has exactly one key; write one rule per match (rules are OR-ed)",
                    ));
                }
                Ok(rule)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices() {
        assert_eq!(parse_device("8:0"), Some(DeviceId { major: 8, minor: 0 }));
        assert_eq!(
            parse_device("259:12"),
            Some(DeviceId {
                major: 259,
                minor: 12
            })
        );
        for bad in ["8", "8:", ":0", "8:0:1", "a:b", "-1:0", " 8:0", "8:+1"] {
            assert_eq!(parse_device(bad), None, "{bad:?}");
        }
    }
}
