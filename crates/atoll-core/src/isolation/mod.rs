//! Performance isolation: entitlements, sharing policies and lending (seed 004).
//!
//! # Model
//!
//! Verghese, Gupta and Rosenblum (*Performance Isolation and Resource Sharing
//! on Shared-Memory Multiprocessors*, 1997) split a multiprocessor into
//! *software performance isolation units* (SPUs). An SPU has three parts: a
//! rule for which processes belong to it, a share of each resource, and a
//! sharing policy that says what happens to the part of its share it leaves
//! idle. The model has three goals:
//!
//! 1. a unit that asks for no more than its share sees no slowdown, whatever
//!    the others do;
//! 2. a unit that asks for more may use what others leave idle;
//! 3. isolation itself costs little.
//!
//! In atoll a **unit** is the paper's SPU: its adoption rules are the first
//! part, its [`Entitlement`](crate::spec::Entitlement) the second, and
//! [`Sharing`](crate::spec::Sharing) (one [`SharePolicy`] per resource) the
//! third. The paper's *kernel* and *shared* SPUs become the host partition
//! and the root group.
//!
//! # Modes
//!
//! [`IsolationMode`] picks one of three models for the whole machine, so
//! they can be compared on one workload, as in the paper's figures:
//!
//! | mode      | CPU                                  | memory                          | disk                         |
//! |-----------|--------------------------------------|---------------------------------|------------------------------|
//! | `smp`     | every unit on every CPU of its island | no limit                        | nobody is held back          |
//! | `quota`   | home CPUs (+ pool share, capped)     | limit = entitlement             | held at its share            |
//! | `isolate` | home CPUs + borrowed idle CPUs       | entitlement + borrowed memory   | held only against active units |
//!
//! In `isolate` mode a unit whose policy for a resource is
//! [`SharePolicy::None`] is treated as in `quota` mode for that resource: it
//! neither lends nor borrows. A unit that kept what it does not use but took
//! what others do not use would be a free rider, and "none = a fixed quota for
//! this resource" is one rule for all three resources.
//!
//! # Policies
//!
//! Each resource has a pure policy; none reads a clock or a file. The daemon
//! calls them once per epoch with what it monitored and turns the result into
//! cgroup knobs.
//!
//! - [`cpu`]: [`home_cpus`] partitions an island's CPUs into *homes* (whole
//!   CPUs, whole SMT cores first), a time-shared *pool* for fractional
//!   entitlements and *spare* CPUs nobody is entitled to. [`CpuLender`] then
//!   lends idle home CPUs (and the spare ones) to overloaded units each
//!   epoch and revokes them the epoch after the owner needs them. The daemon
//!   writes each unit's [`CpuGrant::allowed`] as its cpuset, runs borrowed
//!   work so that the owner preempts it at once (the mechanism is chosen by
//!   measurement elsewhere), writes `cpu.max` from [`CpuGrant::cap`] and logs
//!   every [`CpuEvent`].
//! - [`memory`]: [`MemoryPolicy`] gives each unit a limit (entitlement plus
//!   what it borrowed) and a protection; idle memory beyond the reserve
//!   threshold goes to units under pressure, in proportion to their
//!   entitlement, and comes back as soon as lenders grow. The daemon writes
//!   [`MemGrant::limit`] to `memory.high` (reclaim and throttle, no OOM kill)
//!   and [`MemGrant::protected`] to `memory.low`, and logs every
//!   [`MemEvent`].
//! - [`disk`]: [`DiskFairness`] keeps a decaying count of bytes per unit and
//!   device and says which units are *held*: their count is further above
//!   the average than the threshold. The daemon gives held units the lowest
//!   IO weight (or a throttle) until they are released, and logs every
//!   [`DiskEvent`].
//!
//! `docs/isolation.md` describes the rules with their constants.

pub mod cpu;
pub mod disk;
pub mod lend;
pub mod memory;

use std::time::Duration;

pub use cpu::{home_cpus, home_cpus_with_guests, HomeLayout, Oversubscription};
pub use disk::{DiskEvent, DiskFairness, DiskSample, DiskStatus};
pub use lend::{
    CpuEvent, CpuGrant, CpuLendConfig, CpuLender, CpuOwner, CpuPlan, CpuSample, RevokeReason,
};
pub use memory::{
    memory_entitlements, MemConfig, MemEvent, MemGrant, MemPlan, MemRevokeReason, MemSample,
    MemoryPolicy,
};

pub use crate::spec::{IsolationMode, SharePolicy};
use crate::Name;

/// Why a policy could not run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum IsolationError {
    /// An island without CPUs cannot be partitioned.
    #[error("the island has no CPUs to partition")]
    EmptyIsland,
    /// The same unit appears twice in one call.
    #[error("unit {unit} is listed twice")]
    DuplicateUnit {
        /// The unit.
        unit: Name,
    },
    /// A CPU entitlement that is not a positive, finite number.
    #[error("unit {unit}: an entitlement of {cpus} CPUs is not a positive finite number")]
    BadEntitlement {
        /// The unit.
        unit: Name,
        /// The value.
        cpus: f64,
    },
    /// A sample names a unit the layout does not know.
    #[error("unit {unit} has no home in this layout (recompute the layout when units change)")]
    UnknownUnit {
        /// The unit.
        unit: Name,
    },
    /// A monitored value that is negative or not finite.
    #[error("unit {unit}: {field} = {value} is not a finite number >= 0")]
    BadSample {
        /// The unit.
        unit: Name,
        /// Which field of the sample.
        field: &'static str,
        /// The value.
        value: f64,
    },
    /// A configuration value outside its range.
    #[error("{field} = {value} is outside {range}")]
    BadConfig {
        /// The parameter, as in the config file where there is one.
        field: &'static str,
        /// Its value.
        value: f64,
        /// The accepted range.
        range: &'static str,
    },
    /// A policy was stepped with a time earlier than the previous step.
    #[error("time went back from {last:?} to {now:?}")]
    TimeWentBack {
        /// The previous step's time.
        last: Duration,
        /// This step's time.
        now: Duration,
    },
}

/// Checks that a sample value is finite and not negative.
pub(crate) fn check_sample(
    unit: &Name,
    field: &'static str,
    value: f64,
) -> Result<(), IsolationError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(IsolationError::BadSample {
            unit: unit.clone(),
            field,
            value,
        })
    }
}

/// Checks that a configuration value lies in `lo..=hi`.
pub(crate) fn check_range(
    field: &'static str,
    value: f64,
    lo: f64,
    hi: f64,
    range: &'static str,
) -> Result<(), IsolationError> {
    if value.is_finite() && value >= lo && value <= hi {
        Ok(())
    } else {
        Err(IsolationError::BadConfig {
            field,
            value,
            range,
        })
    }
}

/// One claimant of a [`water_fill`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Claim {
    /// Relative share; 0 gets nothing.
    pub weight: u64,
    /// Most it can use; `u64::MAX` for "as much as there is".
    pub demand: u64,
}

/// Divides `supply` indivisible units among `claims` in proportion to their
/// weights, never giving a claim more than its demand (max-min fairness
/// weighted by share, the classic water-fill).
///
/// Claims are served in order of demand per weight: a claim whose demand is
/// below its proportional share of what is left gets its demand, and the
/// rest is shared again among the others. What remains after every claim is
/// either satisfied or at its share is split in proportion to the weights,
/// rounded down, and the units lost to rounding go one each to the claims
/// with the largest fractional parts (ties by position). The result never
/// exceeds `supply` in total and is deterministic.
pub(crate) fn water_fill(supply: u64, claims: &[Claim]) -> Vec<u64> {
    let mut alloc = vec![0u64; claims.len()];
    let mut open: Vec<usize> = (0..claims.len())
        .filter(|&i| claims[i].weight > 0 && claims[i].demand > 0)
        .collect();
    // Ascending demand / weight, by cross-multiplication.
    open.sort_by(|&a, &b| {
        let (ca, cb) = (claims[a], claims[b]);
        (u128::from(ca.demand) * u128::from(cb.weight))
            .cmp(&(u128::from(cb.demand) * u128::from(ca.weight)))
            .then(a.cmp(&b))
    });
    let mut left = u128::from(supply);
    let mut weight: u128 = open.iter().map(|&i| u128::from(claims[i].weight)).sum();
    let mut rest = open.as_slice();
    while let Some((&i, tail)) = rest.split_first() {
        let c = claims[i];
        // demand <= left * w / W  <=>  demand * W <= left * w
        if u128::from(c.demand) * weight <= left * u128::from(c.weight) {
            alloc[i] = c.demand;
            left -= u128::from(c.demand);
            weight -= u128::from(c.weight);
            rest = tail;
        } else {
            break;
        }
    }
    if rest.is_empty() || weight == 0 {
        return alloc;
    }
    let mut given = 0u128;
    let mut fractions: Vec<(u128, usize)> = Vec::with_capacity(rest.len());
    for &i in rest {
        let exact = left * u128::from(claims[i].weight);
        let share = exact / weight;
        // share < demand here: every remaining claim wanted more than its share.
        alloc[i] = u64::try_from(share).unwrap_or(u64::MAX);
        given += share;
        fractions.push((exact % weight, i));
    }
    fractions.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut leftover = left - given;
    for (_, i) in fractions {
        if leftover == 0 {
            break;
        }
        if alloc[i] < claims[i].demand {
            alloc[i] += 1;
            leftover -= 1;
        }
    }
    alloc
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn c(weight: u64, demand: u64) -> Claim {
        Claim { weight, demand }
    }

    #[test]
    fn water_fill_table() {
        const INF: u64 = u64::MAX;
        #[rustfmt::skip]
        let cases: &[(u64, &[Claim], &[u64])] = &[
            // supply, claims,                          allocation
            (0,  &[c(1, INF), c(1, INF)],               &[0, 0]),
            (10, &[],                                   &[]),
            (10, &[c(1, INF), c(1, INF)],               &[5, 5]),
            (9,  &[c(2, INF), c(1, INF)],               &[6, 3]),
            (10, &[c(2, INF), c(1, INF)],               &[7, 3]),   // 6.67 / 3.33: the larger fraction wins
            (10, &[c(1, 2), c(1, INF), c(1, INF)],      &[2, 4, 4]), // a small demand frees the rest
            (10, &[c(1, 2), c(1, 3), c(1, 1)],          &[2, 3, 1]), // all satisfied, 4 left over
            (3,  &[c(1, INF), c(1, INF), c(1, INF), c(1, INF)], &[1, 1, 1, 0]), // ties by position
            (10, &[c(0, INF), c(1, INF)],               &[0, 10]),  // weight 0 gets nothing
            (10, &[c(5, 0), c(1, INF)],                 &[0, 10]),  // demand 0 gets nothing
            (7,  &[c(3, 1), c(1, INF), c(1, INF)],      &[1, 3, 3]),
        ];
        for (supply, claims, want) in cases {
            assert_eq!(
                water_fill(*supply, claims),
                *want,
                "supply {supply}, {claims:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn water_fill_is_bounded_and_fair(
            supply in 0u64..10_000,
            claims in proptest::collection::vec((0u64..50, 0u64..5_000), 0..8),
        ) {
            let claims: Vec<Claim> = claims.into_iter().map(|(w, d)| c(w, d)).collect();
            let alloc = water_fill(supply, &claims);
            let total: u64 = alloc.iter().sum();
            prop_assert!(total <= supply);
            for (a, cl) in alloc.iter().zip(&claims) {
                prop_assert!(*a <= cl.demand);
                if cl.weight == 0 { prop_assert_eq!(*a, 0); }
            }
            let wanted: u64 = claims.iter().filter(|c| c.weight > 0).map(|c| c.demand).sum();
            // Work-conserving: everything is given out unless every demand is met.
            prop_assert_eq!(total, supply.min(wanted));
            // No claim below its demand is more than one unit behind another
            // claim per weight (max-min fairness up to rounding).
            for (i, ci) in claims.iter().enumerate() {
                if ci.weight == 0 || alloc[i] >= ci.demand { continue; }
                for (j, cj) in claims.iter().enumerate() {
                    if cj.weight == 0 || alloc[j] == 0 { continue; }
                    // alloc[j] - 1 <= (alloc[i] + 1) * wj / wi
                    prop_assert!(
                        u128::from(alloc[j] - 1) * u128::from(ci.weight)
                            <= u128::from(alloc[i] + 1) * u128::from(cj.weight),
                        "{i} {j} {alloc:?} {claims:?}"
                    );
                }
            }
        }
    }
}
