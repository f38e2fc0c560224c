//! Communication-aware CPU scheduling (seed 003, "Xen and Co."): give units
//! that talk to each other CPU at the right time, without breaking anyone's
//! reservation.
//!
//! This module holds the figures a network monitor reports per unit
//! ([`UnitNetSample`]), the trait through which they come in
//! ([`NetMonitor`]: sock_diag on Linux, the simulator's network path in
//! `sim`), and the pure policy that turns them into short, accounted boosts.
//! Nothing here reads a socket or a clock: time comes in as an argument.
//!
//! # From the paper to atoll
//!
//! Govindan et al. build on Xen's SEDF scheduler, where each domain holds a
//! reservation `(slice, period)`, and change which runnable domain is
//! dispatched: the one whose network activity is most intense, provided it
//! has received less than its slice in the current period. atoll cannot
//! pick the next thread to run; it decides once per epoch (default 30 ms)
//! which units are *boosted* for the next epoch, and the daemon applies a
//! [`Mechanism`] for that epoch (a short EEVDF slice, a weight multiplier,
//! or `cpu.idle` for everyone else).
//!
//! | paper (Xen, SEDF)                                         | atoll ([`CommPolicy`])                                                         |
//! |-----------------------------------------------------------|--------------------------------------------------------------------------------|
//! | domain                                                    | unit                                                                           |
//! | SEDF `(slice, period)`                                    | `reservation_cpus × period` of CPU time per aligned window of [`CommSpec::period`] |
//! | scheduler invoked at each dispatch                        | [`CommPolicy::step`] once per epoch; a boost lasts one epoch                   |
//! | book-keeping pages, filled by netfront/netback            | [`UnitNetSample`] per epoch (sock_diag), turned into per-epoch deltas          |
//! | network-reception-intensity (pages flipped, not consumed) | bytes in receive queues + bytes read since the last sample                     |
//! | actual-network-transmit-intensity                         | bytes sent since the last sample                                               |
//! | anticipated-network-transmit-intensity                    | [`SenderPredictor`]: last burst's size, due at `T + Δ`                          |
//! | Domain0 (reception + the guests' pending transmissions)   | [`CommSpec::netpath`] units: own reception + the other watched units' bytes sent |
//! | "variables adjusted after scheduling: no history"         | intensities are recomputed every epoch from that epoch's deltas and queues     |
//! | greedy pick: respect reservations, then most packets      | gate each unit on its slice, then boost the `max_boosted` most intense         |
//!
//! # Intensities
//!
//! For a watched unit, each epoch: with [`CommSpec::recipient`] on, its
//! reception `recv_queued + Δbytes_received`; plus, with
//! [`CommSpec::anticipate`] on and the predictor anticipating it for the
//! coming epoch, the predicted burst size. For a [`CommSpec::netpath`] unit
//! (whatever the other two switches), its own reception plus the bytes the
//! other watched units (not on the path) sent in the last epoch. A counter
//! that drops (a socket closed) is re-based: that epoch counts 0 for it.
//! With all three features off every intensity is 0 and nothing is boosted.
//!
//! # Bounded unfairness
//!
//! Periods are aligned windows `[k·period, (k+1)·period)`. A unit's *use*
//! in a period is the growth of its cumulative CPU time over the sample
//! intervals that end in that period; since the interval that straddles the
//! period's start is charged whole, the use over-approximates the CPU it
//! really had since the period began. Its *slice* is `reservation × period`
//! (CPU time). There is one gate, the paper's rule: a unit is boosted for
//! the epoch starting at `now` only if, at `now`, its use in the current
//! period is below its slice.
//!
//! Guarantees, given the inputs are true:
//!
//! - A unit is never boosted for an epoch that starts with its period use
//!   at or above its slice; a reservation of 0 is never boosted.
//! - The gate is checked at the start of each epoch and the decision holds
//!   for one epoch, so the overshoot is at most one epoch: when a unit's
//!   last boost of a period begins, its use is below its slice, so in each
//!   period the CPU it gets preferentially is at most its slice plus what
//!   it can use in one epoch (at most epoch × the CPUs it may run on).
//! - Boosting changes only *when* a unit runs within a period, never the
//!   reservations themselves (those are cgroup settings the policy does not
//!   touch). With reservations that fit the island, the others still get
//!   their slices in every period, apart from that one-epoch overshoot.
//! - Refusals are counted ([`CommAccount::over_reservation`]) only when
//!   the unit ranked among the `max_boosted` most intense, i.e. when the
//!   gate actually cost it a boost.
//! - At most [`CommSpec::max_boosted`] units are boosted at once, and only
//!   units with an intensity above 0. A unit's boosted wall time in a
//!   period ([`CommAccount::period_boosted_us`], reported, not gated) is
//!   never more than the period: boosted time is split exactly at period
//!   boundaries.
//!
//! There is no budget of boosted *wall* time per period. The slice rule
//! alone bounds what a boost can take from the others, whatever the
//! [`Mechanism`]: a unit stops being boosted once it has used its slice,
//! so the CPU it gets while boosted is at most its slice plus one epoch's
//! overshoot per period, whether it runs with a short slice, a larger
//! weight, or against others set to `cpu.idle` (idle groups still run
//! whenever the boosted unit does not). A wall-time budget such as
//! `period × (1 − others' reservations / capacity)` adds nothing to that
//! bound; it only cuts boosts that cost nobody anything, those of units
//! that use little CPU on a mostly idle island: with 3 units of 1 CPU on
//! 3 CPUs it allows 33 ms of boost per 100 ms, and a receiver using 1 % of
//! a CPU flaps on and off every period. Without it, such a unit stays
//! boosted for as long as it receives.
//!
//! Every start and end comes with a typed reason carrying the figures
//! ([`BoostReason`], [`EndReason`], [`Limit`]), and [`CommAccount`] keeps
//! per-unit counts for status and metrics.

pub mod policy;
pub mod predict;
pub mod spec;

#[cfg(test)]
mod policy_tests;

use std::collections::BTreeMap;

pub use policy::{
    Boost, BoostReason, CommAccount, CommDecision, CommError, CommPolicy, EndReason, Limit,
    ReasonCounts, ReasonKind, Refusal, UnitInput,
};
pub use predict::{Anticipation, Burst, Prediction, SenderPredictor};
use serde::{Deserialize, Serialize};
pub use spec::{reservations, CommSpec, CommSpecError, Mechanism};

use crate::Name;

/// What one unit's sockets show at one instant: queues now, counters since
/// the monitor first saw each socket. Counters only grow while a socket
/// lives; a socket that closes takes its counts with it, so consumers take
/// differences with `saturating_sub` and treat a drop as a restart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitNetSample {
    /// Bytes received and not yet read by the unit (receive queues).
    pub recv_queued: u64,
    /// Bytes written by the unit and not yet sent or acknowledged (send
    /// queues).
    pub send_queued: u64,
    /// Bytes the unit has read from its sockets, summed over the sockets
    /// alive now.
    pub bytes_received: u64,
    /// Bytes the unit has sent, summed over the sockets alive now.
    pub bytes_sent: u64,
    /// Sockets counted.
    pub sockets: u32,
}

impl UnitNetSample {
    /// Adds another socket's (or process's) figures.
    pub fn add(&mut self, other: &UnitNetSample) {
        self.recv_queued += other.recv_queued;
        self.send_queued += other.send_queued;
        self.bytes_received += other.bytes_received;
        self.bytes_sent += other.bytes_sent;
        self.sockets += other.sockets;
    }
}

/// Why the network figures could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A file or socket could not be opened or read.
    #[error("{what}: {source}")]
    Io {
        /// What was being read (a path, or `sock_diag`).
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The kernel answered something unexpected.
    #[error("{what}: {value}: {reason}")]
    Parse {
        /// What was being read.
        what: String,
        /// What it held.
        value: String,
        /// What was expected.
        reason: String,
    },
}

/// Reads the network figures of units, given each unit's processes.
pub trait NetMonitor: Send {
    /// One sample per unit of `units` (unit → its pids). A unit whose
    /// processes hold no sockets gets a zero sample; pids that exited
    /// meanwhile are skipped.
    fn sample(
        &mut self,
        units: &BTreeMap<Name, Vec<u32>>,
    ) -> Result<BTreeMap<Name, UnitNetSample>, NetError>;
}
