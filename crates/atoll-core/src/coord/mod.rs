//! Coordination between islands (inTune, seeds 000 and 001).
//!
//! Each island has a [`Coordinator`] that knows its CPUs, its scheduler
//! policy, its units' knobs and the overlays registered with it. The
//! [`PlatformManager`] owns every coordinator, routes messages, keeps the
//! ledger of borrowed CPUs, arbitrates competing requests round by round,
//! resolves escalations and keeps the platform CPU cap. Everything is pure:
//! time comes in as `now` (time since an arbitrary origin), usage comes in as
//! samples, and the answer is a [`Reply`] whose [`Effect`]s the daemon turns
//! into cgroup writes and logs with their [`Why`].
//!
//! # Messages
//!
//! [`Message::Tune`], [`Message::Trigger`], [`Message::BorrowPreferred`],
//! [`Message::BorrowAny`], [`Message::Release`], [`Message::Register`] and
//! [`Message::Deregister`], plus [`Message::Null`] for measuring the fixed
//! cost. Tune ups, triggers and borrows are *demands*: only they are
//! arbitrated, backed off and escalated.
//!
//! # Rules
//!
//! With the [`CoordConfig`] constants (defaults in parentheses):
//!
//! 0. **Overlays.** A unit belongs to at most one overlay. Registration
//!    checks every `(island, unit)` before it changes anything.
//!    Deregistration returns the overlay's loans (a loan stacked under
//!    another overlay's goes home when that one is released), ends its
//!    boosts and puts its units' knobs back to their configured values.
//! 1. **Tune, fair and batch islands.** A unit with a cap is tuned through
//!    its cap: up adds `cap_step` (0.5 CPU) and lifts the cap once it reaches
//!    the island's CPUs (or the island's own cap); down removes `cap_step`,
//!    never below `cap_step`. A unit without a cap is tuned through its
//!    weight: up multiplies by `weight_step` (1.25, at least +1) up to
//!    10000, down divides (at least −1) down to 1. Nacks: *at capacity*
//!    (weight 10000, or the unit is alone on the island), *at minimum*.
//! 2. **Tune, realtime islands.** Tunes move the unit's runtime budget by
//!    `rt_step` (5 %) of the island's period, keeping the sum of the units'
//!    budgets within the island's RT budget (*at capacity* when it is handed
//!    out); down stops at one step or less (*at minimum*). `idle` islands cannot be
//!    tuned. Memory tunes move `memory.high` by `memory_step` (64 MiB)
//!    within the island's memory. Cores are not tuned: they are borrowed.
//! 3. **Trigger.** An immediate boost of `boost_len` (30 ms): weight
//!    `boost_weight` (10000) on fair islands, the island's top priority on
//!    realtime ones. It is bounded three ways: a unit is not boosted twice at
//!    once, a unit's next boost starts no sooner than `trigger_cooldown` (90
//!    ms) after its last one ends (so a unit is boosted at most
//!    `boost_len / (boost_len + trigger_cooldown)` of the time), and an
//!    island boosts at most `max_boosts` (1) units at once.
//!    [`PlatformManager::tick`] ends expired boosts. A tune of a boosted
//!    unit's weight changes the value restored at the end of the boost.
//!
//!    **Overlay trigger.** `trigger_overlay` boosts every unit of the
//!    overlay at the same time for the same `boost_len` (coscheduling), or
//!    none when one of them is refused (with that refusal). The units of
//!    one `trigger_overlay` on an island share one of its `max_boosts`
//!    slots; any other boost takes a slot of its own.
//! 4. **Idle capacity.** An island's idle CPUs are `floor(cpus − usage)`
//!    from its last usage sample (none before the first sample). It may lend
//!    idle CPUs that did not move within `damping` (300 ms): its own CPUs
//!    before borrowed ones, lowest id first, but never its lowest own CPU,
//!    so it always keeps one CPU it owns and holds without a loan.
//! 5. **Borrow.** `borrow_preferred` asks the named island; `borrow_any`
//!    asks the overlay's own islands first (the one with the most idle CPUs
//!    first), then the island with the most idle CPUs (ties: configuration
//!    order). Up to `amount` CPUs are granted, from one island. Every move is a loan
//!    `(lender, borrower, overlay)`; a borrowed CPU may be lent onward, so a
//!    CPU carries a stack of loans.
//! 6. **Release and damping.** `release` returns the CPUs the sender holds
//!    from the named lender for the overlay. A CPU that moved (by borrow,
//!    release or escalation) cannot leave its new island within `damping`,
//!    neither back nor onward, except by a release of its borrower. So a CPU
//!    cannot ping-pong faster than the damping window.
//!
//!    **Revoke.** A lender whose own load rose sends `revoke` naming the
//!    borrower: the CPUs it lent there for the overlay come back. CPUs the
//!    lender owns come back at once, whatever their damping (the owner's
//!    claim comes first); CPUs it had borrowed and lent onward only after
//!    their damping window (*damped* until then). A revoke is a demand:
//!    refusals back off and escalate, and an escalated revoke is carried
//!    out whatever the damping.
//! 7. **Arbitration.** [`PlatformManager::submit`] queues messages for a
//!    round, [`PlatformManager::arbitrate`] runs it: first everything that is
//!    not a demand (registrations, releases, tune downs) in arrival order,
//!    then each island's demands (a `borrow_any` counts at the island it
//!    would pick now) in its [`ArbitrationPolicy`] order: `RoundRobin` puts
//!    the overlay served least recently first, `Priority` the highest
//!    priority first with round-robin among equals; among equals, an
//!    overlay's second request comes after every overlay's first. A demand refused for a
//!    shortage after another overlay's demand for the same resource on the
//!    same island was granted this round is nacked *lost arbitration to* the
//!    winner. [`PlatformManager::handle`] does the same for one message at
//!    once.
//! 8. **Backoff.** Each refused demand doubles the sender's backoff for
//!    `(island, overlay, resource)`: `backoff_base` (30 ms), then 2×, 4×, …
//!    up to `backoff_max` (960 ms). A demand arriving earlier is nacked at
//!    once with the time it may retry, and changes nothing. An ack resets it.
//! 9. **Escalation.** Shortage nacks (capacity, idle capacity, last core,
//!    damping, boost slots, lost arbitration) count per `(overlay, resource)`;
//!    an ack resets the count. The `escalate_after`th (5th) successive one is
//!    not sent: the platform manager decides instead, taking from the
//!    lowest-priority overlay strictly below the requester (ties: name
//!    order) that holds what is asked:
//!    - cores: the victim's most recently borrowed CPU that is not on the
//!      requester's island moves to the requester's island; the loan
//!      becomes the requester's (the lender stays);
//!    - CPU time or memory on a tune: the victim's unit on the same island
//!      whose knob is above its configured value goes back to it, then the
//!      tune is retried;
//!    - a trigger refused for busy boost slots: the victim's boost on that
//!      island ends, then the trigger is retried.
//!
//!    Damping does not hold the platform manager back. With no victim the
//!    reply is *platform refused*. Either way the count starts again.
//! 10. **Platform CPU cap.** A cap of `C` CPUs (from an overlay with
//!     [`Property::PlatformCpuCap`] or [`PlatformManager::set_cpu_cap`]) is
//!     split among islands: `cap_min` each, the rest in proportion to their
//!     own CPUs, in thousandths of a CPU so the sum is exact.
//!     The islands' `cpu.max` use a CFS period of `cap_period` (20 ms),
//!     so no span of time sees a group run more than one quota above its
//!     cap. [`PlatformManager::rebalance`] gathers each island's usage and
//!     whether it was throttled over a window of `cap_interval` (200 ms),
//!     then splits the cap again by demand. The window ends at once
//!     (grant on demand) when an island is throttled in an epoch, the
//!     window spans at least two periods (so a group throttled early in a
//!     period is not taken for idle later in it) and the last move is at
//!     least `cap_interval` old (so moves cannot follow each other every
//!     epoch). The split by demand:
//!     an island that was not throttled keeps its mean usage plus
//!     `cap_headroom` (0.1), at least `cap_min` and at most its cap; the
//!     rest goes to the throttled islands in proportion to their CPUs, none
//!     above its CPUs (what is left over goes back to the others). With no
//!     island throttled, or no island's share moving by `cap_deadband` (0.1
//!     CPU) or more, nothing is written: every write of `cpu.max` refills
//!     the group's runtime to a whole quota, so each write lets the kernel
//!     hand out more than the cap in that period. The writes of one move
//!     list the cuts before the raises, so the caps in force never sum
//!     above the platform cap at any step. The sum of island caps always
//!     equals the platform cap.
//!
//! Time never runs back: a `now` earlier than one seen before counts as the
//! latest seen. `handle` allocates little: names are compared, not copied, on the way in;
//! an ack allocates its effect vector and the names in it, a nack the names
//! in its reason. [`bench::BenchRig`] times it.

pub mod bench;
mod cap;
mod cap_split;
mod coordinator;
pub mod effect;
mod escalate;
pub mod message;
mod overlays;
mod platform;
mod revoke;
mod round;
mod sched;
pub mod snapshot;
pub mod types;

use std::time::Duration;

pub use coordinator::Coordinator;
pub use effect::{BoostKind, Change, Effect, Why};
pub use message::{Limit, Message, NackReason, Op, Reply};
pub use platform::{Loan, PlatformManager};
pub use round::{Answer, Ticket};
use serde::{Deserialize, Serialize};
pub use snapshot::{CoordSnapshot, Dropped, Restored};
pub use types::{
    ArbitrationPolicy, Direction, Idle, IslandSetup, OverlaySpec, Property, Resource, UnitKnobs,
    UnitSetup,
};

use crate::{CpuSet, Name};

/// Lowest `cpu.weight`.
pub const MIN_WEIGHT: u32 = 1;
/// Highest `cpu.weight`.
pub const MAX_WEIGHT: u32 = 10_000;

/// Constants of the coordination rules (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoordConfig {
    /// Factor of a weight tune (1.01..=10).
    pub weight_step: f64,
    /// CPUs of a cap tune (0.01..=64).
    pub cap_step: f64,
    /// Share of the island's RT period of a budget tune (0.001..=1).
    pub rt_step: f64,
    /// Bytes of a memory tune (at least 1 MiB).
    pub memory_step: u64,
    /// How long a trigger boosts (1 ms..=10 s).
    pub boost_len: Duration,
    /// Weight of a boosted unit on fair islands (1..=10000).
    pub boost_weight: u32,
    /// Least time between the end of a unit's boost and its next one
    /// (at most 1 h).
    pub trigger_cooldown: Duration,
    /// Units an island boosts at once (1..=1024).
    pub max_boosts: u32,
    /// How long a moved CPU stays on its new island (at most 1 h).
    pub damping: Duration,
    /// First backoff after a nack (1 ms..=60 s).
    pub backoff_base: Duration,
    /// Longest backoff (at least `backoff_base`, at most 1 h).
    pub backoff_max: Duration,
    /// Successive shortage nacks of one `(overlay, resource)` after which
    /// the platform manager decides (1..=1000).
    pub escalate_after: u32,
    /// Window over which the platform cap's split is decided, and so the
    /// least time between two moves (1 ms..=60 s; the config's
    /// `cap_interval_ms` of a `cpu_cap` overlay).
    pub cap_interval: Duration,
    /// Least change of some island's share that moves the platform cap,
    /// CPUs (0..=64).
    pub cap_deadband: f64,
    /// Least cap an island keeps, CPUs (0.001..=64).
    pub cap_min: f64,
    /// CPUs a cap giver keeps above its usage (0..=8).
    pub cap_headroom: f64,
    /// CFS period of the islands' caps (1 ms..=1 s, the kernel's bounds).
    /// Within any span of time a group can run at most one quota above
    /// its cap (the period it started in), so a short period bounds what
    /// a 1 s window can see above the cap: 4 CPUs over 20 ms periods let
    /// a 1 s window see at most 4.08. The config's `cap_period_ms` of a
    /// `cpu_cap` overlay (10 ms..=1 s there, see
    /// [`crate::spec::CAP_PERIOD_MIN`]).
    pub cap_period: Duration,
}

impl Default for CoordConfig {
    fn default() -> Self {
        Self {
            weight_step: 1.25,
            cap_step: 0.5,
            rt_step: 0.05,
            memory_step: 64 << 20,
            boost_len: Duration::from_millis(30),
            boost_weight: MAX_WEIGHT,
            trigger_cooldown: Duration::from_millis(90),
            max_boosts: 1,
            damping: Duration::from_millis(300),
            backoff_base: Duration::from_millis(30),
            backoff_max: Duration::from_millis(960),
            escalate_after: 5,
            cap_interval: Duration::from_millis(200),
            cap_deadband: 0.1,
            cap_min: 0.1,
            cap_headroom: 0.1,
            cap_period: Duration::from_millis(20),
        }
    }
}

fn check(
    field: &'static str,
    value: f64,
    lo: f64,
    hi: f64,
    range: &'static str,
) -> Result<(), CoordError> {
    if value.is_finite() && value >= lo && value <= hi {
        Ok(())
    } else {
        Err(CoordError::BadConfig {
            field,
            value,
            range,
        })
    }
}

impl CoordConfig {
    /// Checks every constant against its range.
    pub fn validate(&self) -> Result<(), CoordError> {
        let secs = |d: Duration| d.as_secs_f64();
        check("weight_step", self.weight_step, 1.01, 10.0, "1.01..=10")?;
        check("cap_step", self.cap_step, 0.01, 64.0, "0.01..=64 CPUs")?;
        check("rt_step", self.rt_step, 0.001, 1.0, "0.001..=1")?;
        check(
            "memory_step",
            self.memory_step as f64,
            (1u64 << 20) as f64,
            f64::MAX,
            "at least 1 MiB",
        )?;
        check(
            "boost_len",
            secs(self.boost_len),
            0.001,
            10.0,
            "1 ms..=10 s",
        )?;
        check(
            "boost_weight",
            f64::from(self.boost_weight),
            1.0,
            f64::from(MAX_WEIGHT),
            "1..=10000",
        )?;
        check(
            "trigger_cooldown",
            secs(self.trigger_cooldown),
            0.0,
            3600.0,
            "at most 1 h",
        )?;
        check(
            "max_boosts",
            f64::from(self.max_boosts),
            1.0,
            1024.0,
            "1..=1024",
        )?;
        check("damping", secs(self.damping), 0.0, 3600.0, "at most 1 h")?;
        check(
            "backoff_base",
            secs(self.backoff_base),
            0.001,
            60.0,
            "1 ms..=60 s",
        )?;
        check(
            "backoff_max",
            secs(self.backoff_max),
            secs(self.backoff_base),
            3600.0,
            "backoff_base..=1 h",
        )?;
        check(
            "escalate_after",
            f64::from(self.escalate_after),
            1.0,
            1000.0,
            "1..=1000",
        )?;
        check(
            "cap_interval",
            secs(self.cap_interval),
            0.001,
            60.0,
            "1 ms..=60 s",
        )?;
        check("cap_deadband", self.cap_deadband, 0.0, 64.0, "0..=64 CPUs")?;
        check("cap_min", self.cap_min, 0.001, 64.0, "0.001..=64 CPUs")?;
        check("cap_headroom", self.cap_headroom, 0.0, 8.0, "0..=8 CPUs")?;
        check(
            "cap_period",
            secs(self.cap_period),
            0.001,
            1.0,
            "1 ms..=1 s",
        )?;
        Ok(())
    }
}

/// Why a coordinator or the platform manager could not be built or fed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoordError {
    /// A constant outside its range.
    #[error("coord.{field} = {value} is outside {range}")]
    BadConfig {
        /// The field.
        field: &'static str,
        /// Its value (durations in seconds).
        value: f64,
        /// The allowed range.
        range: &'static str,
    },
    /// An island without CPUs.
    #[error("island {island} has no CPUs")]
    EmptyIsland {
        /// The island.
        island: Name,
    },
    /// Two islands of one name.
    #[error("island {island} is listed twice")]
    DuplicateIsland {
        /// The island.
        island: Name,
    },
    /// Two units of one name (on the platform, or in one overlay).
    #[error("unit {unit} is listed twice")]
    DuplicateUnit {
        /// The unit.
        unit: Name,
    },
    /// Two islands share CPUs.
    #[error("islands {a} and {b} share CPUs {cpus}")]
    OverlappingIslands {
        /// One island.
        a: Name,
        /// The other.
        b: Name,
        /// The shared CPUs.
        cpus: CpuSet,
    },
    /// A unit knob outside its range.
    #[error("unit {unit}: {field} = {value} is outside {range}")]
    BadKnob {
        /// The unit.
        unit: Name,
        /// The knob.
        field: &'static str,
        /// Its value.
        value: f64,
        /// The allowed range.
        range: String,
    },
    /// A name that is no unit of the platform.
    #[error("no unit {unit}")]
    UnknownUnit {
        /// The name.
        unit: Name,
    },
    /// A unit an overlay holds cannot leave.
    #[error("unit {unit} belongs to overlay {overlay}: remove it from the overlay first")]
    UnitInOverlay {
        /// The unit.
        unit: Name,
        /// The overlay.
        overlay: Name,
    },
    /// A name that is no island.
    #[error("no island {island}")]
    UnknownIsland {
        /// The name.
        island: Name,
    },
    /// A usage sample that is negative or not finite.
    #[error("island {island}: usage {value} CPUs is not a finite number >= 0")]
    BadUsage {
        /// The island.
        island: Name,
        /// The value.
        value: f64,
    },
    /// The same island twice in one set of samples.
    #[error("island {island} has two usage samples")]
    DuplicateSample {
        /// The island.
        island: Name,
    },
    /// An overlay property outside its range.
    #[error("overlay {overlay}: {field} = {value} is out of range")]
    BadProperty {
        /// The overlay.
        overlay: Name,
        /// The field.
        field: &'static str,
        /// Its value.
        value: f64,
    },
    /// A platform CPU cap that cannot give every island its minimum.
    #[error("a platform CPU cap of {cpus} CPUs cannot give {islands} islands {min} CPUs each")]
    BadCap {
        /// The cap asked.
        cpus: f64,
        /// Islands.
        islands: usize,
        /// The per-island minimum (`cap_min`).
        min: f64,
    },
}

#[cfg(test)]
#[path = "test_util.rs"]
mod test_util;

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod coordinator_tests;

#[cfg(test)]
#[path = "trigger_tests.rs"]
mod trigger_tests;

#[cfg(test)]
#[path = "platform_tests.rs"]
mod platform_tests;

#[cfg(test)]
#[path = "round_tests.rs"]
mod round_tests;

#[cfg(test)]
#[path = "cap_tests.rs"]
mod cap_tests;

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod snapshot_tests;

#[cfg(test)]
#[path = "revoke_tests.rs"]
mod revoke_tests;
