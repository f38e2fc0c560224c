//! Per-unit figures of communication-aware scheduling (seed 003), for units
//! a `[comm]` section watches.

use super::{COUNTER, GAUGE};

/// Reads one figure of a watched unit.
pub(super) type CommGet = fn(&atoll_proto::UnitComm) -> String;

/// `(name, kind, help, get)` of each family.
pub(super) const COMM: &[(&str, &str, &str, CommGet)] = &[
    (
        "atoll_unit_comm_boosted",
        GAUGE,
        "1 while the unit is boosted for its communication.",
        |c| u8::from(c.boosted).to_string(),
    ),
    (
        "atoll_unit_comm_boosts_total",
        COUNTER,
        "Boosts started for the unit.",
        |c| c.boosts.to_string(),
    ),
    (
        "atoll_unit_comm_boosted_seconds_total",
        COUNTER,
        "Time the unit spent boosted.",
        |c| format!("{}", c.boosted_us as f64 / 1e6),
    ),
    (
        "atoll_unit_comm_over_reservation_total",
        COUNTER,
        "Epochs the unit ranked for a boost but had used its slice of the period.",
        |c| c.over_reservation.to_string(),
    ),
    (
        "atoll_unit_comm_reservation_cpus",
        GAUGE,
        "The unit's reservation: CPUs' worth of time per period.",
        |c| format!("{}", c.reservation_cpus),
    ),
    (
        "atoll_unit_comm_recv_queued_bytes",
        GAUGE,
        "Bytes waiting in the unit's socket receive queues at the last sample.",
        |c| c.recv_queued.to_string(),
    ),
    (
        "atoll_unit_comm_received_bytes_total",
        COUNTER,
        "Bytes the unit read from its sockets alive now.",
        |c| c.bytes_received.to_string(),
    ),
    (
        "atoll_unit_comm_sent_bytes_total",
        COUNTER,
        "Bytes the unit sent on its sockets alive now.",
        |c| c.bytes_sent.to_string(),
    ),
];
