//! The vocabulary of coordination: resources, directions, overlay properties,
//! overlays, arbitration policies and the knobs of a unit.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::CoordError;
use crate::spec::SchedPolicy;
use crate::{CpuSet, Name};

/// A resource an overlay may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// Whole CPUs of an island's cpuset: moved between islands by borrow and
    /// release.
    Cores,
    /// CPU time inside an island: weight or cap on a `fair` (or `batch`)
    /// island, runtime budget and priority on a `realtime` one.
    CpuTime,
    /// A unit's memory limit (`memory.high`).
    Memory,
    /// A unit's share of a network island's link (its HTB class rate);
    /// served by the network island's coordinator
    /// ([`NetCoordinator`](crate::netisland::NetCoordinator)), never by a
    /// CPU island.
    Bandwidth,
}

impl Resource {
    /// Every resource, in index order.
    pub const ALL: [Resource; 4] = [
        Resource::Cores,
        Resource::CpuTime,
        Resource::Memory,
        Resource::Bandwidth,
    ];

    /// A dense index (0..4) for per-resource counters.
    pub(crate) fn index(self) -> usize {
        match self {
            Self::Cores => 0,
            Self::CpuTime => 1,
            Self::Memory => 2,
            Self::Bandwidth => 3,
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cores => "cores",
            Self::CpuTime => "CPU time",
            Self::Memory => "memory",
            Self::Bandwidth => "bandwidth",
        })
    }
}

/// Which way a tune goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// More of the resource.
    Up,
    /// Less of the resource.
    Down,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Up => "up",
            Self::Down => "down",
        })
    }
}

/// The property an overlay maintains. Overlay monitors (outside this module)
/// watch it and send messages; only [`Property::PlatformCpuCap`] changes what
/// the platform manager itself does.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Property {
    /// Keep the `percentile`th response time at or below `bound_us`.
    LatencyPercentile {
        /// The percentile, in (0, 100].
        percentile: f64,
        /// The bound, µs (> 0).
        bound_us: u64,
    },
    /// Keep throughput at or above `per_s` operations per second.
    ThroughputFloor {
        /// Operations per second (> 0).
        per_s: f64,
    },
    /// Keep the machine's CPU use at or below `cpus`: the sum of per-island
    /// caps, rebalanced by [`PlatformManager::rebalance`](super::PlatformManager::rebalance).
    PlatformCpuCap {
        /// CPUs (> 0).
        cpus: f64,
    },
    /// Keep the machine's measured power (RAPL) at or below `watts`:
    /// held by the daemon's power cap ([`crate::power::PowerCap`]) through
    /// island frequency limits and CPU caps, not by the platform manager.
    PlatformPowerCap {
        /// Watts (> 0).
        watts: f64,
    },
}

impl Property {
    /// Checks the numbers; `overlay` names the owner in the error.
    pub fn validate(&self, overlay: &Name) -> Result<(), CoordError> {
        let bad = |field: &'static str, value: f64| CoordError::BadProperty {
            overlay: overlay.clone(),
            field,
            value,
        };
        match *self {
            Self::LatencyPercentile {
                percentile,
                bound_us,
            } => {
                if !(percentile > 0.0 && percentile <= 100.0) {
                    return Err(bad("percentile", percentile));
                }
                if bound_us == 0 {
                    return Err(bad("bound_us", 0.0));
                }
            }
            Self::ThroughputFloor { per_s } => {
                if !(per_s.is_finite() && per_s > 0.0) {
                    return Err(bad("per_s", per_s));
                }
            }
            Self::PlatformCpuCap { cpus } => {
                if !(cpus.is_finite() && cpus > 0.0) {
                    return Err(bad("cpus", cpus));
                }
            }
            Self::PlatformPowerCap { watts } => {
                if !(watts.is_finite() && watts > 0.0) {
                    return Err(bad("watts", watts));
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LatencyPercentile {
                percentile,
                bound_us,
            } => write!(f, "p{percentile} latency within {bound_us} us"),
            Self::ThroughputFloor { per_s } => write!(f, "at least {per_s} operations per second"),
            Self::PlatformCpuCap { cpus } => write!(f, "platform CPU cap of {cpus} CPUs"),
            Self::PlatformPowerCap { watts } => write!(f, "platform power cap of {watts} W"),
        }
    }
}

/// A management overlay: a property and the units (each in one island) it
/// spans. A higher `priority` is more important.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverlaySpec {
    /// Overlay name, unique on the platform.
    pub name: Name,
    /// Priority for arbitration and escalation; higher wins.
    pub priority: u8,
    /// Its units as `(island, unit)`. May be empty for a platform-wide
    /// overlay such as a CPU cap.
    pub units: Vec<(Name, Name)>,
    /// What it maintains.
    pub property: Property,
}

impl OverlaySpec {
    /// Checks the property and that no unit is listed twice.
    pub fn validate(&self) -> Result<(), CoordError> {
        self.property.validate(&self.name)?;
        for (i, (_, u)) in self.units.iter().enumerate() {
            if self.units[..i].iter().any(|(_, v)| v == u) {
                return Err(CoordError::DuplicateUnit { unit: u.clone() });
            }
        }
        Ok(())
    }
}

/// How an island's coordinator orders competing requests of one round.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArbitrationPolicy {
    /// The overlay served least recently goes first.
    #[default]
    RoundRobin,
    /// Higher overlay priority goes first; ties go round-robin.
    Priority,
}

impl fmt::Display for ArbitrationPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::RoundRobin => "round-robin",
            Self::Priority => "priority",
        })
    }
}

/// The scheduler knobs of one unit. Which ones matter depends on the island's
/// policy: `weight` and `cap` on `fair`/`batch` islands, `rt_priority` and
/// `rt_runtime_us` on `realtime` ones; `memory_high` everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitKnobs {
    /// `cpu.weight`, 1..=10000.
    pub weight: u32,
    /// `cpu.max` in CPUs; `None` for no cap.
    pub cap: Option<f64>,
    /// Realtime priority of its tasks.
    pub rt_priority: u8,
    /// Realtime runtime per period of the island, µs.
    pub rt_runtime_us: u64,
    /// `memory.high`, bytes; `None` for no limit below the island's memory.
    pub memory_high: Option<u64>,
}

impl Default for UnitKnobs {
    fn default() -> Self {
        Self {
            weight: crate::weight::DEFAULT_WEIGHT,
            cap: None,
            rt_priority: 1,
            rt_runtime_us: 0,
            memory_high: None,
        }
    }
}

/// A unit as its island's coordinator starts with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitSetup {
    /// The unit.
    pub name: Name,
    /// Its configured knobs: the *base* that escalation and deregistration
    /// return to.
    pub knobs: UnitKnobs,
}

/// An island as its coordinator starts with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IslandSetup {
    /// The island.
    pub name: Name,
    /// Its own CPUs (its *home*; it may lend them and borrow others).
    pub cpus: CpuSet,
    /// Its scheduler policy.
    pub policy: SchedPolicy,
    /// How it orders competing requests.
    pub arbitration: ArbitrationPolicy,
    /// Memory of its nodes, bytes (0: unknown, memory is not tuned).
    pub memory_bytes: u64,
    /// Its units.
    pub units: Vec<UnitSetup>,
}

/// What an island could lend now, as answered to an idle-capacity query.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Idle {
    /// Whole CPUs it leaves idle: `floor(cpus − usage)`; 0 before the first
    /// usage sample.
    pub idle_cores: u32,
    /// CPUs it may lend now: idle, not damped, and never its last own CPU.
    pub lendable: u32,
    /// The earliest-free damped CPU that would otherwise be lendable, and
    /// when it may move.
    pub damped: Option<(u32, std::time::Duration)>,
}
