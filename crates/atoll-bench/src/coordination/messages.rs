//! The cost of one coordination message, as inTune measures it (seed 000,
//! table 2: null, tune, trigger, borrow across 2 and 6 islands).
//!
//! Each message is sent to a [`BenchRig`] (the real `PlatformManager` with
//! fair islands, two units per island and one overlay over all of them)
//! and timed alone: a pair of clock reads around the one call, minus the
//! cost of the clock reads themselves (the median of timing nothing,
//! measured in the same run). The rig's `reset` (undoing a tune, releasing
//! a borrowed CPU, moving its clock past boosts and damping) runs between
//! timed calls and is not counted, so every call takes the same path: the
//! one that acknowledges.

use std::hint::black_box;
use std::time::Instant;

use atoll_core::coord::bench::{BenchKind, BenchRig};
use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::stats::Summary;

/// CPUs per island of the rigs.
pub const CPUS_PER_ISLAND: u32 = 4;

/// One message kind's cost, ns per call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageCost {
    /// `null`, `tune`, `trigger`, `borrow_2_islands`, `borrow_6_islands`.
    pub name: String,
    /// Islands on the platform.
    pub islands: usize,
    /// Per call, ns, clock overhead subtracted.
    pub ns: Summary,
    /// What inTune reports for it inside a hypervisor, ns (seed 000).
    pub intune_ns: f64,
}

/// What one run of the message benchmark measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageCosts {
    /// The kinds, in the paper's order.
    pub messages: Vec<MessageCost>,
    /// Median cost of the two clock reads, ns (subtracted above).
    pub clock_overhead_ns: f64,
    /// Calls timed per kind.
    pub calls: usize,
}

/// The paper's rows: name, islands, message, inTune's ns.
const ROWS: [(&str, usize, BenchKind, f64); 5] = [
    ("null", 2, BenchKind::Null, 150.0),
    ("tune", 2, BenchKind::Tune, 212.0),
    ("trigger", 2, BenchKind::Trigger, 293.0),
    ("borrow_2_islands", 2, BenchKind::Borrow, 381.0),
    ("borrow_6_islands", 6, BenchKind::Borrow, 594.0),
];

/// Times `calls` messages of each kind (after `calls / 10` untimed ones to
/// warm caches up).
pub fn measure(calls: usize) -> Result<MessageCosts, BenchError> {
    let calls = calls.max(10);
    let overhead = clock_overhead(calls);
    let mut messages = Vec::with_capacity(ROWS.len());
    for (name, islands, kind, intune_ns) in ROWS {
        let mut rig = BenchRig::new(islands, CPUS_PER_ISLAND).map_err(|e| BenchError::Setup {
            what: format!("coordination rig with {islands} islands"),
            reason: e.to_string(),
        })?;
        for _ in 0..calls / 10 {
            let reply = rig.step(kind);
            check(name, &reply)?;
            rig.reset(kind);
        }
        let mut ns = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            let reply = black_box(rig.step(black_box(kind)));
            let dt = t.elapsed().as_nanos() as f64;
            check(name, &reply)?;
            ns.push((dt - overhead).max(0.0));
            rig.reset(kind);
        }
        let ns = Summary::of(&ns).ok_or_else(|| BenchError::Setup {
            what: format!("{name} timings"),
            reason: "no samples".into(),
        })?;
        messages.push(MessageCost {
            name: name.into(),
            islands,
            ns,
            intune_ns,
        });
    }
    Ok(MessageCosts {
        messages,
        clock_overhead_ns: overhead,
        calls,
    })
}

/// The timed path must be the acknowledging one: a nack would time
/// something else.
fn check(name: &str, reply: &atoll_core::coord::Reply) -> Result<(), BenchError> {
    if reply.is_ack() {
        Ok(())
    } else {
        Err(BenchError::Setup {
            what: format!("{name} message"),
            reason: format!("the rig refused it: {reply}"),
        })
    }
}

/// The median cost of two clock reads around nothing, ns.
fn clock_overhead(calls: usize) -> f64 {
    let mut v: Vec<f64> = (0..calls)
        .map(|_| {
            let t = Instant::now();
            black_box(());
            t.elapsed().as_nanos() as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The table: one row per message with p50, p99 and inTune's figure.
pub fn render(c: &MessageCosts) -> String {
    let mut out = format!(
        "{:<18} {:>7} {:>9} {:>9} {:>9} {:>10}\n",
        "message", "islands", "p50 ns", "p99 ns", "mean ns", "inTune ns"
    );
    for m in &c.messages {
        out.push_str(&format!(
            "{:<18} {:>7} {:>9.0} {:>9.0} {:>9.0} {:>10.0}\n",
            m.name, m.islands, m.ns.p50, m.ns.p99, m.ns.mean, m.intune_ns
        ));
    }
    out.push_str(&format!(
        "({} calls each; clock overhead {:.0} ns subtracted)\n",
        c.calls, c.clock_overhead_ns
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_measured_on_the_acknowledging_path() {
        let c = measure(20).unwrap();
        let names: Vec<&str> = c.messages.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "null",
                "tune",
                "trigger",
                "borrow_2_islands",
                "borrow_6_islands"
            ]
        );
        assert!(c.messages.iter().all(|m| m.ns.count == 20));
        assert_eq!(c.messages[4].islands, 6);
        let table = render(&c);
        assert!(table.contains("borrow_6_islands"), "{table}");
        assert_eq!(table.lines().count(), 7, "{table}");
    }
}
