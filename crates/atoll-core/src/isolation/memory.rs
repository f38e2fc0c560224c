//! Memory: limits at the entitlement, idle memory lent beyond a reserve.
//!
//! The paper caps each SPU's pages at its allocation and, periodically,
//! raises the allocation of SPUs under memory pressure with the idle pages of
//! others, less a *reserve threshold* (8 % of memory) kept free to hide the
//! cost of revocation: giving pages back may mean writing them out first.
//! [`MemoryPolicy`] does the same with cgroup limits, once per epoch.
//!
//! # Rules
//!
//! With total memory `T`, reserve `R = reserve × T`, and per unit its
//! entitlement `E`, usage `U`, what it borrowed last epoch `b` and the
//! [`MemConfig`] constants (`pressure` 10 %, `full` 0.95, `release` 0.85,
//! `min_change` 1 % of `T`):
//!
//! 1. **Limits.** A unit may use `E + b` (`limit`, for `memory.high`) and is
//!    protected up to `E` (`protected`, for `memory.low`; scaled down when
//!    the entitlements add up to more than `T − R`). A lender's limit stays
//!    at `E`: lending never lowers it, so a lender that grows again sees no
//!    limit below its entitlement, as goal 1 requires.
//! 2. **Pressure.** A unit is under pressure when `U >= full × (E + b)` and,
//!    where the kernel reports memory PSI, its `some` pressure is at least
//!    `pressure`. With PSI, a unit whose page cache merely fills its limit
//!    (no task stalls) is not under pressure.
//! 3. **The pool.** Idle memory is what lending units leave unused,
//!    `Σ max(0, E − U)`, plus memory entitled to nobody; the pool is that,
//!    at most what is physically free when every unit's use above its
//!    entitlement is counted as lent (`T − Σ min(U, E)`), less the reserve.
//! 4. **Borrowing.** Units under pressure share the pool in proportion to
//!    their entitlement (weighted water-fill); a borrower no longer under
//!    pressure keeps what it needs for its usage to sit at `release` of its
//!    limit and returns the rest. So `Σ b ≤ pool` at all times, hence
//!    `Σ min(U, E) + Σ b ≤ T − R`: when every borrower fills its limit,
//!    the reserve is still free.
//! 5. **Revocation.** When lenders grow the pool shrinks with them, and the
//!    borrowers' limits go down the same epoch (the kernel then reclaims,
//!    starting with the unprotected borrowed part); the reserve absorbs the
//!    lender's growth meanwhile. The revocation is proportional to the
//!    lender's growth rather than all-or-nothing.
//! 6. **Hysteresis.** A borrower's limit grows only by steps of at least
//!    `min_change`, and drops by less than that only when the pool requires
//!    it, so a lender whose usage wavers causes at most one small revocation
//!    rather than a limit that goes up and down every epoch.
//!
//! `quota` mode sets every limit to the entitlement and lends nothing; a unit
//! with sharing `none` is treated that way in `isolate` mode. `smp` mode sets
//! no limit and no protection.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{check_range, check_sample, water_fill, Claim, IsolationError};
use crate::num::saturating_u64;
use crate::spec::{IsolationMode, SharePolicy};
use crate::Name;

/// Constants of the memory rules.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemConfig {
    /// Memory pressure (PSI `some`, %) at which a unit near its limit is
    /// under pressure (0..=100).
    pub pressure: f64,
    /// Share of its limit a unit must use to be under pressure (0.5..=1).
    pub full: f64,
    /// Share of its limit a borrower's usage is brought to when it returns
    /// memory (0.5..=`full`).
    pub release: f64,
    /// Smallest change of a borrower's limit, as a share of total memory
    /// (0..=0.25).
    pub min_change: f64,
}

impl Default for MemConfig {
    fn default() -> Self {
        Self {
            pressure: 10.0,
            full: 0.95,
            release: 0.85,
            min_change: 0.01,
        }
    }
}

impl MemConfig {
    /// Checks every constant against its range.
    pub fn validate(&self) -> Result<(), IsolationError> {
        check_range("memory.pressure", self.pressure, 0.0, 100.0, "0..=100 %")?;
        check_range("memory.full", self.full, 0.5, 1.0, "0.5..=1")?;
        check_range("memory.release", self.release, 0.5, self.full, "0.5..=full")?;
        check_range("memory.min_change", self.min_change, 0.0, 0.25, "0..=0.25")
    }
}

/// What was measured of one unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemSample {
    /// The unit.
    pub unit: Name,
    /// Its entitlement, bytes (see [`memory_entitlements`]).
    pub entitled: u64,
    /// Memory it uses now (`memory.current`), bytes.
    pub used: u64,
    /// Memory pressure, % of time some task stalled on memory (the epoch's
    /// delta of `memory.pressure`'s `total`, else `avg10`); `None` where
    /// the kernel gives none.
    pub pressure_some: Option<f64>,
    /// Its memory sharing policy.
    pub sharing: SharePolicy,
}

/// One unit's memory for the next epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemGrant {
    /// What it may use, bytes (`memory.high`); `None` in `smp` mode.
    pub limit: Option<u64>,
    /// What is protected from reclaim, bytes (`memory.low`).
    pub protected: u64,
    /// Its share of the memory borrowed by others, bytes (an estimate:
    /// borrowed memory comes from a common pool).
    pub lent: u64,
    /// What it borrowed beyond its entitlement, bytes.
    pub borrowed: u64,
    /// Whether it was under pressure this epoch.
    pub pressured: bool,
    /// Times borrowed memory was taken back from it.
    pub revocations: u64,
}

/// Why a borrower's limit went down.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum MemRevokeReason {
    /// Lenders grew: the pool is now `pool` bytes.
    PoolShrank {
        /// The pool, bytes.
        pool: u64,
    },
    /// Another unit under pressure gets its share.
    Rebalanced,
    /// The borrower uses less and keeps what it needs.
    Released {
        /// Its usage, bytes.
        used: u64,
    },
    /// The borrower no longer borrows: sharing `none` or another mode.
    Stopped,
}

impl MemRevokeReason {
    /// Whether memory the borrower still wanted was taken back.
    pub fn is_revocation(&self) -> bool {
        matches!(self, Self::PoolShrank { .. } | Self::Rebalanced)
    }
}

impl fmt::Display for MemRevokeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PoolShrank { pool } => {
                write!(f, "lenders grew, {pool} bytes are left to lend")
            }
            Self::Rebalanced => f.write_str("another unit under pressure gets its share"),
            Self::Released { used } => write!(f, "it uses only {used} bytes"),
            Self::Stopped => f.write_str("it no longer borrows"),
        }
    }
}

/// A change of a unit's limit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum MemEvent {
    /// `unit` may use `bytes` more, up to `limit`.
    Borrow {
        /// The unit.
        unit: Name,
        /// Increase, bytes.
        bytes: u64,
        /// The new limit, bytes.
        limit: u64,
    },
    /// `unit`'s limit went down by `bytes`, to `limit`.
    Revoke {
        /// The unit.
        unit: Name,
        /// Decrease, bytes.
        bytes: u64,
        /// The new limit, bytes.
        limit: u64,
        /// Why.
        reason: MemRevokeReason,
    },
}

impl fmt::Display for MemEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Borrow { unit, bytes, limit } => write!(
                f,
                "unit {unit} borrows {bytes} bytes of idle memory, limit {limit}"
            ),
            Self::Revoke {
                unit,
                bytes,
                limit,
                reason,
            } => write!(
                f,
                "unit {unit} gives back {bytes} bytes, limit {limit}: {reason}"
            ),
        }
    }
}

/// Every unit's memory for the next epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemPlan {
    /// Every unit sampled.
    pub units: BTreeMap<Name, MemGrant>,
    /// Memory that could be lent this epoch, bytes.
    pub pool: u64,
    /// The reserve kept free, bytes.
    pub reserve: u64,
    /// What changed, in unit order.
    pub events: Vec<MemEvent>,
}

/// Lends idle memory to units under pressure (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct MemoryPolicy {
    config: MemConfig,
    borrowed: BTreeMap<Name, u64>,
    revocations: BTreeMap<Name, u64>,
}

/// Entitlements from the units' `memory_max` (`None` for an equal share of
/// `total`).
pub fn memory_entitlements(total: u64, max: &[Option<u64>]) -> Vec<u64> {
    let equal = total / (max.len().max(1) as u64);
    max.iter().map(|m| m.unwrap_or(equal)).collect()
}

impl MemoryPolicy {
    /// A policy with nothing borrowed yet.
    pub fn new(config: MemConfig) -> Result<Self, IsolationError> {
        config.validate()?;
        Ok(Self {
            config,
            borrowed: BTreeMap::new(),
            revocations: BTreeMap::new(),
        })
    }

    /// Plans the next epoch for the units sharing `total` bytes, with
    /// `reserve` (a share of `total`) kept free. Units not sampled are
    /// forgotten.
    pub fn plan(
        &mut self,
        total: u64,
        reserve: f64,
        mode: IsolationMode,
        units: &[MemSample],
    ) -> Result<MemPlan, IsolationError> {
        if !(0.0..1.0).contains(&reserve) {
            return Err(IsolationError::BadConfig {
                field: "isolation.memory_reserve",
                value: reserve,
                range: "[0, 1)",
            });
        }
        let mut seen = BTreeSet::new();
        for u in units {
            if !seen.insert(&u.unit) {
                return Err(IsolationError::DuplicateUnit {
                    unit: u.unit.clone(),
                });
            }
            if let Some(p) = u.pressure_some {
                check_sample(&u.unit, "pressure_some", p)?;
            }
        }
        let cfg = self.config;
        let r = saturating_u64(total as f64 * reserve);
        self.borrowed.retain(|u, _| seen.contains(u));
        self.revocations.retain(|u, _| seen.contains(u));
        if mode == IsolationMode::Smp {
            self.borrowed.clear();
            let units = units
                .iter()
                .map(|u| {
                    let g = MemGrant {
                        limit: None,
                        protected: 0,
                        lent: 0,
                        borrowed: 0,
                        pressured: false,
                        revocations: self.revocations.get(&u.unit).copied().unwrap_or(0),
                    };
                    (u.unit.clone(), g)
                })
                .collect();
            return Ok(MemPlan {
                units,
                pool: 0,
                reserve: r,
                events: Vec::new(),
            });
        }
        let isolate = mode == IsolationMode::Isolate;
        let lends = |u: &MemSample| isolate && u.sharing == SharePolicy::Lend;
        let prev: Vec<u64> = units
            .iter()
            .map(|u| self.borrowed.get(&u.unit).copied().unwrap_or(0))
            .collect();

        let mut pressured = vec![false; units.len()];
        let mut idle = vec![0u64; units.len()];
        let mut demand = vec![0u64; units.len()];
        for (i, u) in units.iter().enumerate() {
            if !lends(u) {
                continue;
            }
            let limit = u.entitled.saturating_add(prev[i]);
            let near_full = u.used as f64 >= cfg.full * limit as f64;
            pressured[i] = near_full && u.pressure_some.is_none_or(|p| p >= cfg.pressure);
            if pressured[i] {
                demand[i] = u64::MAX;
            } else {
                idle[i] = u.entitled.saturating_sub(u.used);
                let needed = saturating_u64((u.used as f64 / cfg.release).ceil());
                demand[i] = needed.saturating_sub(u.entitled).min(prev[i]);
            }
        }
        let entitled: u128 = units.iter().map(|u| u128::from(u.entitled)).sum();
        let slack = u128::from(total).saturating_sub(entitled);
        let idle_total = slack + idle.iter().map(|&i| u128::from(i)).sum::<u128>();
        let in_use: u128 = units
            .iter()
            .map(|u| u128::from(u.used.min(u.entitled)))
            .sum();
        let physical = u128::from(total).saturating_sub(in_use);
        let pool = if isolate {
            u64::try_from(idle_total.min(physical).saturating_sub(u128::from(r)))
                .unwrap_or(u64::MAX)
        } else {
            0
        };
        let claims: Vec<Claim> = units
            .iter()
            .zip(&demand)
            .map(|(u, &d)| Claim {
                weight: u.entitled,
                demand: d,
            })
            .collect();
        let mut next = water_fill(pool, &claims);

        // Hysteresis: no small steps up; small steps down only if needed.
        let step = saturating_u64(total as f64 * cfg.min_change);
        for (n, &p) in next.iter_mut().zip(&prev) {
            if *n > p && *n - p < step {
                *n = p;
            }
        }
        let mut sum: u64 = next.iter().sum();
        for (i, u) in units.iter().enumerate() {
            let (n, p) = (next[i], prev[i]);
            if lends(u) && n < p && p - n < step && sum + (p - n) <= pool {
                sum += p - n;
                next[i] = p;
            }
        }

        // Events, counters and grants.
        let shrank = prev.iter().sum::<u64>() > pool;
        let lent_total: u128 = next.iter().map(|&b| u128::from(b)).sum();
        let scale = u128::from(total.saturating_sub(r));
        let mut events = Vec::new();
        let mut grants = BTreeMap::new();
        for (i, u) in units.iter().enumerate() {
            let (b, p) = (next[i], prev[i]);
            let limit = u.entitled.saturating_add(b);
            if b > p {
                events.push(MemEvent::Borrow {
                    unit: u.unit.clone(),
                    bytes: b - p,
                    limit,
                });
            } else if b < p {
                let reason = if !lends(u) {
                    MemRevokeReason::Stopped
                } else if b < demand[i] {
                    if shrank {
                        MemRevokeReason::PoolShrank { pool }
                    } else {
                        MemRevokeReason::Rebalanced
                    }
                } else {
                    MemRevokeReason::Released { used: u.used }
                };
                if reason.is_revocation() {
                    *self.revocations.entry(u.unit.clone()).or_default() += 1;
                }
                events.push(MemEvent::Revoke {
                    unit: u.unit.clone(),
                    bytes: p - b,
                    limit,
                    reason,
                });
            }
            if b > 0 {
                self.borrowed.insert(u.unit.clone(), b);
            } else {
                self.borrowed.remove(&u.unit);
            }
            let protected = if entitled > scale {
                u64::try_from(u128::from(u.entitled) * scale / entitled).unwrap_or(u64::MAX)
            } else {
                u.entitled
            };
            let lent = (lent_total * u128::from(idle[i]))
                .checked_div(idle_total)
                .map_or(0, |l| u64::try_from(l).unwrap_or(u64::MAX));
            grants.insert(
                u.unit.clone(),
                MemGrant {
                    limit: Some(limit),
                    protected,
                    lent,
                    borrowed: b,
                    pressured: pressured[i],
                    revocations: self.revocations.get(&u.unit).copied().unwrap_or(0),
                },
            );
        }
        Ok(MemPlan {
            units: grants,
            pool,
            reserve: r,
            events,
        })
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
