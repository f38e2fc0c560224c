//! Coordination messages and their replies.
//!
//! The messages are inTune's: *tune* and *trigger* adjust a unit inside its
//! island, *borrow* and *release* move whole CPUs between islands,
//! *register* and *deregister* bring overlays in and out. A reply is an
//! [`Reply::Ack`] with the [`Effect`]s to write, or a [`Reply::Nack`] with a
//! [`NackReason`]. Reasons are enums holding the values that decided, and are
//! formatted only when displayed.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::effect::{Effect, Secs};
use super::types::{Direction, OverlaySpec, Resource};
use crate::Name;

/// A coordination message. The sender is passed alongside (the island whose
/// coordinator relays the overlay monitor's request).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum Message {
    /// Does nothing; acknowledged at once (for measuring the fixed cost).
    Null,
    /// Adjust a unit's share of `resource`, one step, in its island.
    Tune {
        /// The resource.
        resource: Resource,
        /// Which way.
        dir: Direction,
        /// The overlay asking.
        overlay: Name,
        /// The unit.
        unit: Name,
    },
    /// Boost a unit at once, for a bounded time.
    Trigger {
        /// The resource (only [`Resource::CpuTime`] can be triggered).
        resource: Resource,
        /// The overlay asking.
        overlay: Name,
        /// The unit.
        unit: Name,
    },
    /// Borrow up to `amount` CPUs from `island` into the sender's island.
    BorrowPreferred {
        /// The resource (only [`Resource::Cores`] moves between islands).
        resource: Resource,
        /// The overlay asking.
        overlay: Name,
        /// The island to borrow from.
        island: Name,
        /// How many CPUs, at least 1; fewer may be granted.
        amount: u32,
    },
    /// Borrow up to `amount` CPUs from whichever island can lend: the
    /// overlay's own islands first, then the one with the most idle CPUs.
    BorrowAny {
        /// The resource (only [`Resource::Cores`]).
        resource: Resource,
        /// The overlay asking.
        overlay: Name,
        /// How many CPUs, at least 1; fewer may be granted.
        amount: u32,
    },
    /// Give back to `island` the CPUs the sender borrowed from it for the
    /// overlay.
    Release {
        /// The resource (only [`Resource::Cores`]).
        resource: Resource,
        /// The overlay that borrowed them.
        overlay: Name,
        /// The lender.
        island: Name,
    },
    /// The sender (a lender) takes back the CPUs it lent to `island` for
    /// the overlay, because its own load rose. CPUs the sender owns come
    /// back at once; CPUs it had borrowed itself and lent onward stay
    /// within the damping window.
    Revoke {
        /// The resource (only [`Resource::Cores`]).
        resource: Resource,
        /// The overlay they were lent for.
        overlay: Name,
        /// The borrower.
        island: Name,
    },
    /// Boost every unit of the overlay at once, for the same bounded time
    /// (coscheduling): all of them or none. An overlay's units boosted
    /// together take one boost slot of their island.
    TriggerOverlay {
        /// The resource (only [`Resource::CpuTime`] can be triggered).
        resource: Resource,
        /// The overlay.
        overlay: Name,
    },
    /// Bring an overlay in.
    Register {
        /// The overlay.
        overlay: OverlaySpec,
    },
    /// Take an overlay out: its loans and boosts end, its units' knobs return
    /// to their configured values.
    Deregister {
        /// The overlay.
        overlay: Name,
    },
}

impl Message {
    /// The overlay the message is about, if any.
    pub fn overlay(&self) -> Option<&Name> {
        match self {
            Self::Null => None,
            Self::Tune { overlay, .. }
            | Self::Trigger { overlay, .. }
            | Self::BorrowPreferred { overlay, .. }
            | Self::BorrowAny { overlay, .. }
            | Self::Release { overlay, .. }
            | Self::Revoke { overlay, .. }
            | Self::TriggerOverlay { overlay, .. }
            | Self::Deregister { overlay } => Some(overlay),
            Self::Register { overlay } => Some(&overlay.name),
        }
    }

    /// The resource the message is about, if any.
    pub fn resource(&self) -> Option<Resource> {
        match self {
            Self::Tune { resource, .. }
            | Self::Trigger { resource, .. }
            | Self::BorrowPreferred { resource, .. }
            | Self::BorrowAny { resource, .. }
            | Self::Release { resource, .. }
            | Self::Revoke { resource, .. }
            | Self::TriggerOverlay { resource, .. } => Some(*resource),
            _ => None,
        }
    }

    /// Whether it asks for more: a tune up, a trigger, a borrow or a
    /// lender's revoke. Only these
    /// are arbitrated, backed off and escalated; everything else gives
    /// something back or changes membership and always goes through.
    pub fn is_demand(&self) -> bool {
        matches!(
            self,
            Self::Tune {
                dir: Direction::Up,
                ..
            } | Self::Trigger { .. }
                | Self::TriggerOverlay { .. }
                | Self::BorrowPreferred { .. }
                | Self::BorrowAny { .. }
                | Self::Revoke { .. }
        )
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Null => f.write_str("null"),
            Self::Tune {
                resource,
                dir,
                overlay,
                unit,
            } => write!(
                f,
                "tune {resource} {dir} for unit {unit} of overlay {overlay}"
            ),
            Self::Trigger {
                resource,
                overlay,
                unit,
            } => write!(f, "trigger {resource} for unit {unit} of overlay {overlay}"),
            Self::BorrowPreferred {
                resource,
                overlay,
                island,
                amount,
            } => write!(
                f,
                "borrow {amount} {resource} from island {island} for overlay {overlay}"
            ),
            Self::BorrowAny {
                resource,
                overlay,
                amount,
            } => write!(
                f,
                "borrow {amount} {resource} from any island for overlay {overlay}"
            ),
            Self::Release {
                resource,
                overlay,
                island,
            } => write!(
                f,
                "release {resource} of overlay {overlay} to island {island}"
            ),
            Self::Revoke {
                resource,
                overlay,
                island,
            } => write!(
                f,
                "revoke {resource} lent to island {island} for overlay {overlay}"
            ),
            Self::TriggerOverlay { resource, overlay } => {
                write!(f, "trigger {resource} for every unit of overlay {overlay}")
            }
            Self::Register { overlay } => write!(
                f,
                "register overlay {} (priority {}, {})",
                overlay.name, overlay.priority, overlay.property
            ),
            Self::Deregister { overlay } => write!(f, "deregister overlay {overlay}"),
        }
    }
}

/// The answer to a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// Done; write these effects (possibly none).
    Ack {
        /// What to write, each with its reason.
        effects: Vec<Effect>,
    },
    /// Refused.
    Nack {
        /// Why.
        reason: NackReason,
    },
}

impl Reply {
    /// A refusal.
    pub fn nack(reason: NackReason) -> Self {
        Self::Nack { reason }
    }

    /// Whether the message was acknowledged.
    pub fn is_ack(&self) -> bool {
        matches!(self, Self::Ack { .. })
    }

    /// The effects of an ack (empty for a nack).
    pub fn effects(&self) -> &[Effect] {
        match self {
            Self::Ack { effects } => effects,
            Self::Nack { .. } => &[],
        }
    }

    /// The reason of a nack.
    pub fn reason(&self) -> Option<&NackReason> {
        match self {
            Self::Ack { .. } => None,
            Self::Nack { reason } => Some(reason),
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ack { effects } if effects.is_empty() => f.write_str("ack"),
            Self::Ack { effects } => {
                f.write_str("ack: ")?;
                for (i, e) in effects.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            Self::Nack { reason } => write!(f, "nack: {reason}"),
        }
    }
}

/// Which limit a tune ran into.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "limit", rename_all = "snake_case")]
pub enum Limit {
    /// The unit's weight is at the maximum.
    MaxWeight {
        /// The maximum.
        weight: u32,
    },
    /// The unit is alone on its island: it has all the island gives.
    WholeIsland {
        /// The island's CPUs.
        cpus: u32,
    },
    /// The island's realtime budget is all handed out.
    RtBudget {
        /// The island's budget, µs per period.
        runtime_us: u64,
    },
    /// The unit may already use all of the island's memory.
    IslandMemory {
        /// The island's memory, bytes.
        bytes: u64,
    },
}

impl Limit {
    /// Whether other units' shares make up the limit, so that another request
    /// of the same round may have taken what this one wanted.
    pub fn is_shared(&self) -> bool {
        matches!(self, Self::RtBudget { .. })
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MaxWeight { weight } => write!(f, "its weight is at the maximum {weight}"),
            Self::WholeIsland { cpus } => {
                write!(f, "it is alone on the island and has all {cpus} CPUs")
            }
            Self::RtBudget { runtime_us } => {
                write!(f, "the island's RT budget of {runtime_us} us is handed out")
            }
            Self::IslandMemory { bytes } => {
                write!(f, "it may already use all {bytes} bytes of the island")
            }
        }
    }
}

/// What was asked that an island does not support.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Tune.
    Tune,
    /// Trigger.
    Trigger,
    /// Borrow or release.
    Borrow,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Tune => "tune",
            Self::Trigger => "trigger",
            Self::Borrow => "borrow or release",
        })
    }
}

/// Why a message was refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "nack", rename_all = "snake_case")]
pub enum NackReason {
    /// Tuning up ran into a limit.
    AtCapacity {
        /// The island.
        island: Name,
        /// The unit.
        unit: Name,
        /// The resource.
        resource: Resource,
        /// The limit.
        limit: Limit,
    },
    /// Tuning down is at the floor.
    AtMinimum {
        /// The unit.
        unit: Name,
        /// The resource.
        resource: Resource,
    },
    /// No island (or not this one) has an idle CPU.
    NoIdleCapacity {
        /// The island asked; `None` for all of them.
        island: Option<Name>,
    },
    /// The island would have to lend its last own CPU.
    LastCore {
        /// The island.
        island: Name,
    },
    /// The CPUs the island could lend moved recently (history damping).
    Damped {
        /// The island.
        island: Name,
        /// The earliest CPU to be free to move again.
        cpu: u32,
        /// When it may move.
        until: Duration,
    },
    /// The sender was refused recently and backs off.
    BackingOff {
        /// When it may send again.
        until: Duration,
    },
    /// The unit was boosted recently (per-unit trigger budget).
    CoolingDown {
        /// The unit.
        unit: Name,
        /// When it may be triggered again.
        until: Duration,
    },
    /// The unit is boosted already.
    AlreadyBoosted {
        /// The unit.
        unit: Name,
        /// When its boost ends.
        until: Duration,
    },
    /// The island boosts as many units at once as it may.
    BoostSlotsBusy {
        /// The island.
        island: Name,
        /// When the first slot frees.
        until: Duration,
    },
    /// The overlay is not registered (here).
    NotRegistered {
        /// The overlay.
        overlay: Name,
    },
    /// An overlay of that name is registered already.
    AlreadyRegistered {
        /// The overlay.
        overlay: Name,
    },
    /// The unit is not one of the overlay's, or not on the island named.
    UnknownUnit {
        /// The overlay.
        overlay: Name,
        /// The unit.
        unit: Name,
    },
    /// No island of that name.
    UnknownIsland {
        /// The island.
        island: Name,
    },
    /// The unit belongs to another overlay.
    UnitTaken {
        /// The unit.
        unit: Name,
        /// Its overlay.
        overlay: Name,
    },
    /// The overlay's description is invalid.
    InvalidOverlay {
        /// The overlay.
        overlay: Name,
        /// The field.
        field: String,
        /// Its value.
        value: f64,
    },
    /// A borrow of zero CPUs.
    ZeroAmount,
    /// Another overlay's request won this round's arbitration.
    LostArbitration {
        /// The winner.
        winner: Name,
    },
    /// The resource cannot be handled that way on this island.
    Unsupported {
        /// The resource.
        resource: Resource,
        /// What was asked.
        op: Op,
    },
    /// An island cannot borrow from itself.
    SelfBorrow {
        /// The island.
        island: Name,
    },
    /// The sender holds no CPUs borrowed from that island for that overlay.
    NothingToRelease {
        /// The lender named.
        island: Name,
        /// The overlay.
        overlay: Name,
    },
    /// The sender lent nothing to that island for that overlay.
    NothingLent {
        /// The borrower named.
        island: Name,
        /// The overlay.
        overlay: Name,
    },
    /// One island cannot decide this message alone; the platform manager
    /// routes it.
    NotForIsland {
        /// The island asked.
        island: Name,
    },
    /// Escalated to the platform manager, which found nothing to take: no
    /// lower-priority overlay holds what was asked.
    PlatformRefused {
        /// The overlay.
        overlay: Name,
        /// The resource.
        resource: Resource,
        /// Successive refusals that led to the escalation.
        nacks: u32,
    },
}

impl NackReason {
    /// Whether the refusal is a shortage that another request could have
    /// caused: another request of the same round that was granted the same
    /// resource on the same island then wins the arbitration.
    pub fn is_contended(&self) -> bool {
        match self {
            Self::AtCapacity { limit, .. } => limit.is_shared(),
            Self::NoIdleCapacity { .. }
            | Self::LastCore { .. }
            | Self::Damped { .. }
            | Self::BoostSlotsBusy { .. } => true,
            _ => false,
        }
    }

    /// Whether it counts toward escalation: a shortage (including a lost
    /// arbitration) that the platform manager might resolve by taking from a
    /// lower-priority overlay. Client errors, floors, cool-downs and backoff
    /// do not count.
    pub fn is_shortage(&self) -> bool {
        self.is_contended()
            || matches!(self, Self::AtCapacity { .. } | Self::LostArbitration { .. })
    }
}

impl fmt::Display for NackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AtCapacity {
                island,
                unit,
                resource,
                limit,
            } => write!(
                f,
                "at capacity: unit {unit} on island {island} cannot get more {resource}: {limit}"
            ),
            Self::AtMinimum { unit, resource } => {
                write!(f, "unit {unit} is already at its minimum {resource}")
            }
            Self::NoIdleCapacity { island: Some(i) } => {
                write!(f, "no idle capacity on island {i}")
            }
            Self::NoIdleCapacity { island: None } => f.write_str("no idle capacity anywhere"),
            Self::LastCore { island } => {
                write!(f, "island {island} never lends its last own CPU")
            }
            Self::Damped { island, cpu, until } => write!(
                f,
                "damped: CPU {cpu} moved to island {island} recently and may move again at t={}",
                Secs(*until)
            ),
            Self::BackingOff { until } => {
                write!(f, "backing off until t={}", Secs(*until))
            }
            Self::CoolingDown { unit, until } => write!(
                f,
                "unit {unit} was boosted recently; it may be triggered again at t={}",
                Secs(*until)
            ),
            Self::AlreadyBoosted { unit, until } => {
                write!(f, "unit {unit} is boosted until t={}", Secs(*until))
            }
            Self::BoostSlotsBusy { island, until } => write!(
                f,
                "island {island} boosts as many units as it may; a slot frees at t={}",
                Secs(*until)
            ),
            Self::NotRegistered { overlay } => write!(f, "overlay {overlay} is not registered"),
            Self::AlreadyRegistered { overlay } => {
                write!(f, "overlay {overlay} is registered already")
            }
            Self::UnknownUnit { overlay, unit } => {
                write!(f, "unit {unit} is not a unit of overlay {overlay} there")
            }
            Self::UnknownIsland { island } => write!(f, "no island {island}"),
            Self::UnitTaken { unit, overlay } => {
                write!(f, "unit {unit} belongs to overlay {overlay}")
            }
            Self::InvalidOverlay {
                overlay,
                field,
                value,
            } => write!(f, "overlay {overlay}: {field} = {value} is out of range"),
            Self::ZeroAmount => f.write_str("a borrow must ask for at least one CPU"),
            Self::LostArbitration { winner } => {
                write!(f, "lost arbitration to overlay {winner}")
            }
            Self::Unsupported { resource, op } => {
                write!(f, "cannot {op} {resource} here")
            }
            Self::SelfBorrow { island } => write!(f, "island {island} cannot borrow from itself"),
            Self::NothingToRelease { island, overlay } => write!(
                f,
                "nothing borrowed from island {island} for overlay {overlay} to release"
            ),
            Self::NothingLent { island, overlay } => write!(
                f,
                "nothing lent to island {island} for overlay {overlay} to revoke"
            ),
            Self::NotForIsland { island } => write!(
                f,
                "island {island} cannot decide this alone; send it to the platform manager"
            ),
            Self::PlatformRefused {
                overlay,
                resource,
                nacks,
            } => write!(
                f,
                "escalated after {nacks} refusals: no lower-priority overlay than {overlay} \
                 holds {resource} to give up"
            ),
        }
    }
}
