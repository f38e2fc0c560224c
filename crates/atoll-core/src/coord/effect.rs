//! Effects: what the daemon must write to the kernel, each with its reason.
//!
//! An [`Effect`] is a [`Change`] (a knob or cpuset to write) and a [`Why`].
//! Both are plain enums; nothing is formatted until the daemon displays an
//! effect to log it, so producing one costs a few name clones at most.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::types::{Direction, Resource};
use crate::{CpuSet, Name};

/// What a boost changes, or restores when it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BoostKind {
    /// `cpu.weight` (fair and batch islands).
    Weight {
        /// The weight to write.
        weight: u32,
    },
    /// Realtime priority of the unit's tasks (realtime islands).
    RtPriority {
        /// The priority to set.
        priority: u8,
    },
}

impl fmt::Display for BoostKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Weight { weight } => write!(f, "weight {weight}"),
            Self::RtPriority { priority } => write!(f, "realtime priority {priority}"),
        }
    }
}

/// A change to write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// Write `cpu.weight` of a unit.
    SetWeight {
        /// Its island.
        island: Name,
        /// The unit.
        unit: Name,
        /// The weight.
        weight: u32,
    },
    /// Write `cpu.max` of a unit.
    SetCap {
        /// Its island.
        island: Name,
        /// The unit.
        unit: Name,
        /// CPUs; `None` lifts the cap.
        cpus: Option<f64>,
    },
    /// Write the realtime runtime budget of a unit.
    SetRtBudget {
        /// Its island.
        island: Name,
        /// The unit.
        unit: Name,
        /// Runtime per island period, µs.
        runtime_us: u64,
    },
    /// Write `memory.high` of a unit.
    SetMemoryHigh {
        /// Its island.
        island: Name,
        /// The unit.
        unit: Name,
        /// Bytes; `None` for no limit.
        bytes: Option<u64>,
    },
    /// Boost a unit until `until` (a trigger).
    Boost {
        /// Its island.
        island: Name,
        /// The unit.
        unit: Name,
        /// What to write for the boost.
        kind: BoostKind,
        /// When it ends; [`PlatformManager::tick`](super::PlatformManager::tick)
        /// then emits the matching [`Change::Unboost`].
        until: Duration,
    },
    /// End a unit's boost: write its steady value back.
    Unboost {
        /// Its island.
        island: Name,
        /// The unit.
        unit: Name,
        /// The steady value to write.
        restore: BoostKind,
    },
    /// Move CPUs from one island's cpuset to another's.
    MoveCores {
        /// The island that gives them up.
        from_island: Name,
        /// The island that gets them.
        to_island: Name,
        /// The CPUs.
        cpus: CpuSet,
    },
    /// Write an island's CPU cap (its share of the platform CPU cap).
    SetIslandCap {
        /// The island.
        island: Name,
        /// CPUs; `None` lifts the cap.
        cpus: Option<f64>,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SetWeight {
                island,
                unit,
                weight,
            } => write!(f, "set weight of {island}/{unit} to {weight}"),
            Self::SetCap { island, unit, cpus } => match cpus {
                Some(c) => write!(f, "cap {island}/{unit} at {c} CPUs"),
                None => write!(f, "lift the CPU cap of {island}/{unit}"),
            },
            Self::SetRtBudget {
                island,
                unit,
                runtime_us,
            } => write!(f, "set the RT budget of {island}/{unit} to {runtime_us} us"),
            Self::SetMemoryHigh {
                island,
                unit,
                bytes,
            } => match bytes {
                Some(b) => write!(f, "set memory.high of {island}/{unit} to {b} bytes"),
                None => write!(f, "lift memory.high of {island}/{unit}"),
            },
            Self::Boost {
                island,
                unit,
                kind,
                until,
            } => write!(
                f,
                "boost {island}/{unit} to {kind} until t={}",
                Secs(*until)
            ),
            Self::Unboost {
                island,
                unit,
                restore,
            } => write!(f, "end the boost of {island}/{unit}: back to {restore}"),
            Self::MoveCores {
                from_island,
                to_island,
                cpus,
            } => write!(
                f,
                "move CPUs {cpus} from island {from_island} to island {to_island}"
            ),
            Self::SetIslandCap { island, cpus } => match cpus {
                Some(c) => write!(f, "cap island {island} at {c} CPUs"),
                None => write!(f, "lift the CPU cap of island {island}"),
            },
        }
    }
}

/// Why a change is made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Why {
    /// An overlay asked to tune a unit.
    Tune {
        /// The overlay.
        overlay: Name,
        /// The resource.
        resource: Resource,
        /// Which way.
        dir: Direction,
    },
    /// An overlay triggered a unit.
    Trigger {
        /// The overlay.
        overlay: Name,
    },
    /// A boost reached its end.
    BoostExpired,
    /// An overlay borrowed cores.
    Borrow {
        /// The overlay.
        overlay: Name,
    },
    /// An overlay's borrower released cores to their lender.
    Release {
        /// The overlay.
        overlay: Name,
    },
    /// A lender took back the cores it had lent for an overlay.
    Revoke {
        /// The overlay they were lent for.
        overlay: Name,
        /// The lender.
        lender: Name,
    },
    /// An overlay left: its loans end, its boosts end, its units' knobs go
    /// back to their configured values.
    Deregistered {
        /// The overlay.
        overlay: Name,
    },
    /// The platform manager took from a lower-priority overlay after
    /// `nacks` successive refusals of `winner`'s requests.
    Escalation {
        /// The overlay the platform manager served.
        winner: Name,
        /// The overlay it took from.
        victim: Name,
        /// Successive refusals that led here.
        nacks: u32,
        /// What was taken.
        resource: Resource,
    },
    /// An overlay with a platform CPU cap split it among the islands.
    CapSet {
        /// The overlay, if the cap came from one.
        overlay: Option<Name>,
        /// The platform cap, CPUs.
        total: f64,
    },
    /// The platform CPU cap moved between islands.
    CapRebalance {
        /// The island's usage, CPUs.
        usage: f64,
        /// Whether it was throttled at its cap.
        throttled: bool,
        /// Cap change, CPUs (positive: it received).
        delta: f64,
    },
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tune {
                overlay,
                resource,
                dir,
            } => write!(f, "overlay {overlay} asked to tune {resource} {dir}"),
            Self::Trigger { overlay } => write!(f, "overlay {overlay} triggered it"),
            Self::BoostExpired => f.write_str("the boost expired"),
            Self::Borrow { overlay } => write!(f, "overlay {overlay} borrowed them"),
            Self::Release { overlay } => write!(f, "overlay {overlay} released them"),
            Self::Revoke { overlay, lender } => {
                write!(f, "island {lender} revoked them from overlay {overlay}")
            }
            Self::Deregistered { overlay } => write!(f, "overlay {overlay} deregistered"),
            Self::Escalation {
                winner,
                victim,
                nacks,
                resource,
            } => write!(
                f,
                "platform manager: overlay {winner} was refused {resource} {nacks} times in a row, \
                 taken from lower-priority overlay {victim}"
            ),
            Self::CapSet { overlay, total } => match overlay {
                Some(o) => write!(f, "overlay {o} set a platform CPU cap of {total} CPUs"),
                None => write!(f, "platform CPU cap of {total} CPUs"),
            },
            Self::CapRebalance {
                usage,
                throttled,
                delta,
            } => match (*throttled, *delta >= 0.0) {
                (true, true) => write!(
                    f,
                    "throttled at its cap using {usage:.2} CPUs: received {delta:.3} CPUs"
                ),
                (true, false) => write!(
                    f,
                    "throttled at its cap using {usage:.2} CPUs: gave {:.3} CPUs to the other \
                     throttled islands (their share by CPUs)",
                    -delta
                ),
                (false, false) => write!(
                    f,
                    "used only {usage:.2} CPUs: gave {:.3} CPUs to throttled islands",
                    -delta
                ),
                (false, true) => write!(
                    f,
                    "used {usage:.2} CPUs: received {delta:.3} CPUs the throttled islands \
                     could not use"
                ),
            },
        }
    }
}

/// A change and its reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// What to write.
    pub change: Change,
    /// Why.
    pub why: Why,
}

impl Effect {
    /// Pairs a change with its reason.
    pub fn new(change: Change, why: Why) -> Self {
        Self { change, why }
    }
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.change, self.why)
    }
}

/// Displays a time since the origin as seconds with millisecond precision.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Secs(pub Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}s", self.0.as_secs_f64())
    }
}
