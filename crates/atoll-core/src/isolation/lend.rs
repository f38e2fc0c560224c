//! CPU lending: idle home CPUs go to overloaded units, and come back at once.
//!
//! The paper lets an idle CPU run another SPU's process and revokes the loan
//! at the next clock tick once a home process is runnable. atoll decides per
//! epoch which CPUs each unit may run on; the kernel mechanism (borrowed work
//! runs so that the owner preempts it at once) makes the take-back fast. A
//! [`CpuLender`] owns the per-unit history and is stepped once per epoch
//! with a [`CpuSample`] per unit.
//!
//! # Rules (`isolate` mode)
//!
//! With `h` home CPUs, usage `u` (CPU time over the epoch ÷ the epoch) and
//! the [`CpuLendConfig`] constants (`headroom` 0.5 CPU, `overload` 0.9,
//! `pressure` 10 %, `lend_after` 90 ms, `backoff_max` 2 s):
//!
//! 1. **Idle CPUs.** A lending unit keeps `ceil(u + headroom)` of its home
//!    CPUs and may lend the rest, its *target*. A unit whose CPU pressure
//!    (PSI `some`) reaches `pressure` lends nothing; so does a unit with
//!    sharing `none`, without a sample, or in another mode.
//! 2. **Hysteresis.** The CPUs a unit offers grow only to the smallest target
//!    seen over the last `lend_after` (samples spanning at least that long),
//!    and shrink to the target at once. So a unit must stay idle for a while
//!    before it lends, and revocation happens the epoch after the owner's
//!    usage rises into its headroom or its pressure rises.
//! 3. **Backoff.** Each revocation doubles the unit's `lend_after` (up to
//!    `backoff_max`); after `backoff_max` without revocation it halves again.
//!    This is the paper's suggestion of not lending a CPU that keeps being
//!    revoked.
//! 4. **Lend order.** A unit lends CPUs on cores it shares with others first,
//!    then whole cores from its highest CPU down, so it keeps its own whole
//!    cores longest and a borrower tends to get both siblings of a core.
//!    Spare CPUs (nobody's) are offered at once, without hysteresis.
//! 5. **Borrowers.** A unit that lends nothing is *overloaded* when its
//!    tasks wait for a CPU: its pressure reaches `pressure`. Only where there
//!    is no pressure reading does usage decide instead:
//!    `u >= overload × (h + pool share + borrowed)`. Usage is a poor signal:
//!    one thread on one home CPU uses all the unit may, yet another CPU
//!    would not help it. An overloaded unit wants as many CPUs as there are (up to its
//!    `cpu_cap`). A borrower that is no longer overloaded keeps
//!    `ceil(u + borrow_headroom − h − pool share)` of its borrowed CPUs and
//!    returns the others, after `return_after`; if its pressure is known and
//!    below half the threshold it needs no headroom, and keeps
//!    `ceil(u − SETTLED_SLACK − h − pool share)`. Units with sharing `none`
//!    never borrow.
//! 6. **Water-fill.** Offered CPUs are divided among borrowers in proportion
//!    to their entitlements, up to each one's demand (weighted max-min
//!    fairness). A borrower keeps the CPUs it already had where it can, so
//!    cpusets change as little as possible.
//!
//! `smp` mode gives every unit the whole island; `quota` mode gives homes
//! and pool shares only and caps pool members at their entitlement.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::cpu::{lend_order, EPS};
use super::{check_range, check_sample, water_fill, Claim, HomeLayout, IsolationError};
use crate::num::{saturating_u64, saturating_usize};
use crate::spec::{IsolationMode, SharePolicy};
use crate::topology::Topology;
use crate::{CpuSet, Name};

/// Constants of the lending rules.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuLendConfig {
    /// CPUs a lender keeps above its usage (-1..=4). Negative values lend
    /// CPUs the owner uses only partly: right when borrowed CPUs run at idle
    /// priority, so the owner's tasks preempt the borrower at wakeup (the
    /// daemon uses -0.5: a CPU its owner uses less than half of is lent).
    pub headroom: f64,
    /// Share of what a unit may use beyond which it counts as overloaded
    /// (0.1..=1).
    pub overload: f64,
    /// CPU pressure (PSI `some`, %) at which a unit stops lending and counts
    /// as overloaded (0..=100).
    pub pressure: f64,
    /// How long a unit must stay idle before its CPUs are lent.
    pub lend_after: Duration,
    /// Longest `lend_after` grows to after repeated revocations.
    pub backoff_max: Duration,
    /// CPUs a borrower keeps above its usage before it returns borrowed ones
    /// (0..=4; separate from `headroom`, which may be negative for lenders).
    #[serde(default = "default_keep")]
    pub borrow_headroom: f64,
    /// How long a borrower must use less than it has before it returns
    /// borrowed CPUs (a grown cpuset needs time before its tasks spread).
    #[serde(default = "default_return_after")]
    pub return_after: Duration,
}

fn default_keep() -> f64 {
    0.5
}

fn default_return_after() -> Duration {
    Duration::from_millis(150)
}

impl Default for CpuLendConfig {
    fn default() -> Self {
        Self {
            headroom: 0.5,
            overload: 0.9,
            pressure: 10.0,
            lend_after: Duration::from_millis(90),
            backoff_max: Duration::from_secs(2),
            borrow_headroom: default_keep(),
            return_after: default_return_after(),
        }
    }
}

impl CpuLendConfig {
    /// Checks every constant against its range.
    pub fn validate(&self) -> Result<(), IsolationError> {
        check_range("cpu.headroom", self.headroom, -1.0, 4.0, "-1..=4 CPUs")?;
        check_range("cpu.overload", self.overload, 0.1, 1.0, "0.1..=1")?;
        check_range("cpu.pressure", self.pressure, 0.0, 100.0, "0..=100 %")?;
        check_range(
            "cpu.borrow_headroom",
            self.borrow_headroom,
            0.0,
            4.0,
            "0..=4 CPUs",
        )?;
        if self.backoff_max < self.lend_after {
            return Err(IsolationError::BadConfig {
                field: "cpu.backoff_max",
                value: self.backoff_max.as_secs_f64(),
                range: "at least lend_after",
            });
        }
        Ok(())
    }
}

/// What was measured of one unit over the last epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuSample {
    /// The unit.
    pub unit: Name,
    /// CPU time used over the epoch ÷ the epoch's length, in CPUs.
    pub usage_cpus: f64,
    /// CPU pressure, % of time some task waited for a CPU: preferably the
    /// epoch's delta of `cpu.pressure`'s `total`, else `avg10`. Where the
    /// kernel has no per-group pressure (cgroup v1) the daemon estimates it
    /// from its threads' run-queue wait (`schedstat`): `100 ×` waiting
    /// threads on average, at most 100. `None`: unknown.
    pub pressure_some: Option<f64>,
    /// The unit's CPU sharing policy.
    pub sharing: SharePolicy,
    /// The unit's `cpu_cap`, if any: it never borrows beyond it.
    pub cap_cpus: Option<f64>,
}

/// Who a lent CPU belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuOwner {
    /// A home CPU of this unit.
    Unit(Name),
    /// A spare CPU, entitled to nobody.
    Spare,
}

impl fmt::Display for CpuOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unit(n) => write!(f, "unit {n}"),
            Self::Spare => f.write_str("the spare CPUs"),
        }
    }
}

/// One unit's CPUs for the next epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuGrant {
    /// Its home CPUs (empty in `smp` mode).
    pub home: CpuSet,
    /// The shared pool, if it is a member (the whole island in `smp` mode).
    pub pool: CpuSet,
    /// Its share of the pool, CPUs (its whole entitlement in `smp` mode).
    pub pool_share: f64,
    /// Other units' (or spare) CPUs it may run on this epoch.
    pub borrowed: CpuSet,
    /// Its home CPUs that another unit borrowed this epoch.
    pub lent: CpuSet,
    /// CPU time cap in CPUs, for `cpu.max`: set for pool members held to a
    /// fixed quota (`quota` mode, or sharing `none`), whom the cpuset alone
    /// does not limit.
    pub cap: Option<f64>,
    /// Times it took lent CPUs back.
    pub revocations: u64,
    /// Times CPUs it borrowed were taken back by their owner.
    pub lost: u64,
}

impl CpuGrant {
    /// The CPUs it may run on: the cpuset to write.
    pub fn allowed(&self) -> CpuSet {
        self.home.union(&self.pool).union(&self.borrowed)
    }
}

/// Why a borrower lost CPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum RevokeReason {
    /// The owner's usage rose: it now keeps `keeps` of its home CPUs.
    OwnerBusy {
        /// The owner's usage, CPUs.
        usage: f64,
        /// Home CPUs it keeps.
        keeps: usize,
    },
    /// The owner's CPU pressure reached the threshold.
    OwnerPressure {
        /// Its pressure, %.
        pressure: f64,
    },
    /// The owner stopped lending: sharing `none`, another mode, or no sample.
    OwnerStopped,
    /// The borrower needs fewer CPUs and handed these back.
    Returned {
        /// The borrower's usage, CPUs.
        usage: f64,
    },
    /// Given to another borrower to keep shares proportional.
    Rebalanced,
}

impl RevokeReason {
    /// Whether the owner took the CPUs back (rather than the borrower
    /// returning them or a rebalance).
    pub fn is_revocation(&self) -> bool {
        matches!(
            self,
            Self::OwnerBusy { .. } | Self::OwnerPressure { .. } | Self::OwnerStopped
        )
    }

    fn kind(&self) -> u8 {
        match self {
            Self::OwnerBusy { .. } => 0,
            Self::OwnerPressure { .. } => 1,
            Self::OwnerStopped => 2,
            Self::Returned { .. } => 3,
            Self::Rebalanced => 4,
        }
    }
}

impl fmt::Display for RevokeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OwnerBusy { usage, keeps } => write!(
                f,
                "the owner uses {usage:.2} CPUs and keeps {keeps} home CPUs"
            ),
            Self::OwnerPressure { pressure } => {
                write!(f, "the owner's CPU pressure is {pressure:.1}%")
            }
            Self::OwnerStopped => f.write_str("the owner stopped lending"),
            Self::Returned { usage } => {
                write!(f, "the borrower uses only {usage:.2} CPUs")
            }
            Self::Rebalanced => f.write_str("another borrower's share"),
        }
    }
}

/// A change of who runs where.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum CpuEvent {
    /// `to` may now run on `cpus`, which belong to `from`.
    Lend {
        /// Owner of the CPUs.
        from: CpuOwner,
        /// The borrower.
        to: Name,
        /// The CPUs.
        cpus: CpuSet,
    },
    /// `to` may no longer run on `cpus`, which belong to `from`.
    Revoke {
        /// Owner of the CPUs.
        from: CpuOwner,
        /// The former borrower.
        to: Name,
        /// The CPUs.
        cpus: CpuSet,
        /// Why.
        reason: RevokeReason,
    },
}

impl fmt::Display for CpuEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lend { from, to, cpus } => {
                write!(f, "lend CPUs {cpus} of {from} to unit {to}")
            }
            Self::Revoke {
                from,
                to,
                cpus,
                reason,
            } => write!(
                f,
                "take CPUs {cpus} of {from} back from unit {to}: {reason}"
            ),
        }
    }
}

/// The CPUs of every unit of an island for the next epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuPlan {
    /// Every unit of the layout.
    pub units: BTreeMap<Name, CpuGrant>,
    /// The island's spare CPUs (some may be borrowed, see the grants).
    pub spare: CpuSet,
    /// What changed since the last step, revocations first.
    pub events: Vec<CpuEvent>,
}

/// A lender's history.
#[derive(Clone, Debug)]
struct Owner {
    /// Number of CPUs offered: a prefix of the unit's lend order.
    offered: usize,
    /// (time, target) of the recent steps, oldest first.
    history: VecDeque<(Duration, usize)>,
    /// Current `lend_after`, grown by backoff.
    hold: Duration,
    /// Time of the last revocation or backoff decay.
    calm_since: Duration,
    revocations: u64,
}

impl Owner {
    fn new(hold: Duration) -> Self {
        Self {
            offered: 0,
            history: VecDeque::new(),
            hold,
            calm_since: Duration::ZERO,
            revocations: 0,
        }
    }

    /// Records this step's target and moves the offer: down at once, up only
    /// to the smallest target of the last `hold`.
    fn advance(&mut self, now: Duration, target: usize, cfg: &CpuLendConfig) {
        if self.hold > cfg.lend_after && now.saturating_sub(self.calm_since) >= cfg.backoff_max {
            self.hold = (self.hold / 2).max(cfg.lend_after);
            self.calm_since = now;
        }
        self.history.push_back((now, target));
        // Keep one sample at least `hold` old as the window's anchor.
        while self.history.len() >= 2 && now.saturating_sub(self.history[1].0) >= self.hold {
            self.history.pop_front();
        }
        if target < self.offered {
            self.offered = target;
            return;
        }
        let covered = self
            .history
            .front()
            .is_some_and(|(t, _)| now.saturating_sub(*t) >= self.hold);
        if covered {
            let low = self.history.iter().map(|(_, t)| *t).min().unwrap_or(0);
            self.offered = self.offered.max(low);
        }
    }

    fn back_off(&mut self, now: Duration, cfg: &CpuLendConfig) {
        self.hold = (self.hold * 2).min(cfg.backoff_max);
        self.calm_since = now;
    }
}

/// Lends idle CPUs of an island's units to its overloaded units, epoch by
/// epoch (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct CpuLender {
    layout: HomeLayout,
    mode: IsolationMode,
    config: CpuLendConfig,
    island: CpuSet,
    orders: BTreeMap<Name, Vec<u32>>,
    spare_order: Vec<u32>,
    owners: BTreeMap<Name, Owner>,
    /// Borrowed CPU → borrower, as of the last step.
    assigned: BTreeMap<u32, Name>,
    lost: BTreeMap<Name, u64>,
    /// Since when each borrower has used less than it has.
    under_since: BTreeMap<Name, Duration>,
    last: Option<Duration>,
}

impl CpuLender {
    /// A lender for `layout` with nothing lent yet.
    pub fn new(
        layout: HomeLayout,
        topo: &Topology,
        mode: IsolationMode,
        config: CpuLendConfig,
    ) -> Result<Self, IsolationError> {
        config.validate()?;
        let orders = layout
            .homes
            .iter()
            .map(|(u, h)| (u.clone(), lend_order(h, topo)))
            .collect();
        let owners = layout
            .units
            .iter()
            .map(|u| (u.clone(), Owner::new(config.lend_after)))
            .collect();
        Ok(Self {
            island: layout.island(),
            spare_order: lend_order(&layout.spare, topo),
            layout,
            mode,
            config,
            orders,
            owners,
            assigned: BTreeMap::new(),
            lost: BTreeMap::new(),
            under_since: BTreeMap::new(),
            last: None,
        })
    }

    /// Switches to a new layout (units came or went): all loans end, the
    /// counters and backoff of the units that remain are kept.
    pub fn relayout(&mut self, layout: HomeLayout, topo: &Topology) {
        let mut next = Self::new(layout, topo, self.mode, self.config)
            .unwrap_or_else(|_| unreachable!("the config was validated when self was built"));
        for (u, o) in &mut next.owners {
            if let Some(old) = self.owners.get(u) {
                o.revocations = old.revocations;
                o.hold = old.hold;
                o.calm_since = old.calm_since;
            }
        }
        next.lost = std::mem::take(&mut self.lost)
            .into_iter()
            .filter(|(u, _)| next.owners.contains_key(u))
            .collect();
        next.last = self.last;
        *self = next;
    }

    /// Switches the isolation mode; loans end at the next step if it is no
    /// longer `isolate`.
    pub fn set_mode(&mut self, mode: IsolationMode) {
        self.mode = mode;
    }

    /// The layout in force.
    pub fn layout(&self) -> &HomeLayout {
        &self.layout
    }

    /// The mode in force.
    pub fn mode(&self) -> IsolationMode {
        self.mode
    }

    /// Plans the next epoch from the samples of the last one. Units of the
    /// layout without a sample neither lend nor borrow.
    pub fn step(
        &mut self,
        now: Duration,
        samples: &[CpuSample],
    ) -> Result<CpuPlan, IsolationError> {
        if let Some(last) = self.last {
            if now < last {
                return Err(IsolationError::TimeWentBack { last, now });
            }
        }
        let mut by_unit: BTreeMap<&Name, &CpuSample> = BTreeMap::new();
        for s in samples {
            if !self.owners.contains_key(&s.unit) {
                return Err(IsolationError::UnknownUnit {
                    unit: s.unit.clone(),
                });
            }
            check_sample(&s.unit, "usage_cpus", s.usage_cpus)?;
            if let Some(p) = s.pressure_some {
                check_sample(&s.unit, "pressure_some", p)?;
            }
            if let Some(c) = s.cap_cpus {
                check_sample(&s.unit, "cap_cpus", c)?;
            }
            if by_unit.insert(&s.unit, s).is_some() {
                return Err(IsolationError::DuplicateUnit {
                    unit: s.unit.clone(),
                });
            }
        }
        self.last = Some(now);
        let cfg = self.config;
        let isolate = self.mode == IsolationMode::Isolate;
        let lends =
            |s: Option<&CpuSample>| isolate && s.is_some_and(|s| s.sharing == SharePolicy::Lend);

        // 1. What each owner offers, and why it withdraws.
        let mut withdrawn: BTreeMap<Name, RevokeReason> = BTreeMap::new();
        let mut idle: BTreeMap<&Name, usize> = BTreeMap::new();
        for unit in &self.layout.units {
            let h = self.layout.homes[unit].len();
            let s = by_unit.get(unit).copied();
            let (target, why) = match s {
                Some(s) if lends(Some(s)) => match s.pressure_some {
                    Some(p) if p >= cfg.pressure => {
                        (0, RevokeReason::OwnerPressure { pressure: p })
                    }
                    _ => {
                        let keeps = cpus_for(s.usage_cpus + cfg.headroom).min(h);
                        (
                            h - keeps,
                            RevokeReason::OwnerBusy {
                                usage: s.usage_cpus,
                                keeps,
                            },
                        )
                    }
                },
                _ => (0, RevokeReason::OwnerStopped),
            };
            let owner = self.owners.get_mut(unit).unwrap_or_else(|| unreachable!());
            let before = owner.offered;
            owner.advance(now, target, &cfg);
            if owner.offered < before {
                withdrawn.insert(unit.clone(), why);
            }
            idle.insert(unit, target);
        }

        // 2. The supply: offered prefixes of the lend orders, then spare.
        let mut supply: Vec<u32> = Vec::new();
        for unit in &self.layout.units {
            supply.extend(self.orders[unit].iter().take(self.owners[unit].offered));
        }
        if isolate {
            supply.extend(&self.spare_order);
        }
        let offered: BTreeSet<u32> = supply.iter().copied().collect();

        // 3. Borrowers and what they want.
        let mut had: BTreeMap<&Name, usize> = BTreeMap::new();
        for b in self.assigned.values() {
            *had.entry(b).or_default() += 1;
        }
        let mut claims = Vec::with_capacity(self.layout.units.len());
        let mut overloaded: BTreeSet<&Name> = BTreeSet::new();
        for unit in &self.layout.units {
            let s = by_unit.get(unit).copied();
            let e = self.layout.entitled[unit];
            let own = self.layout.homes[unit].len() as f64 + self.layout.pool_share(unit);
            let mut demand = 0u64;
            if let Some(s) = s.filter(|s| lends(Some(s)) && idle[unit] == 0) {
                let prev = had.get(unit).copied().unwrap_or(0);
                let capacity = own + prev as f64;
                let over = match s.pressure_some {
                    Some(p) => p >= cfg.pressure,
                    None => s.usage_cpus >= cfg.overload * capacity,
                };
                let limit = s.cap_cpus.map_or(u64::MAX, |c| cpus_for(c - own) as u64);
                demand = if over {
                    overloaded.insert(unit);
                    self.under_since.remove(unit);
                    u64::MAX
                } else {
                    let settled = s.pressure_some.is_some_and(|p| p < cfg.pressure / 2.0);
                    let extra = if settled {
                        -SETTLED_SLACK
                    } else {
                        cfg.borrow_headroom
                    };
                    let wants = (cpus_for(s.usage_cpus + extra - own) as u64).min(prev as u64);
                    if wants < prev as u64 {
                        // Return borrowed CPUs only after using less for a
                        // while: right after a cpuset grows, the tasks have
                        // not spread over it yet.
                        let since = *self.under_since.entry(unit.clone()).or_insert(now);
                        if now.saturating_sub(since) < cfg.return_after {
                            prev as u64
                        } else {
                            wants
                        }
                    } else {
                        self.under_since.remove(unit);
                        wants
                    }
                }
                .min(limit);
            }
            claims.push(Claim {
                weight: saturating_u64((e * 1000.0).round()).max(1),
                demand,
            });
        }
        let counts = water_fill(supply.len() as u64, &claims);

        // 4. Who gets which CPU: keep what one had, then fill in lend order.
        let mut assigned: BTreeMap<u32, Name> = BTreeMap::new();
        let mut taken = vec![0u64; counts.len()];
        for keep in [true, false] {
            for (i, unit) in self.layout.units.iter().enumerate() {
                for cpu in &supply {
                    if taken[i] >= counts[i] {
                        break;
                    }
                    let mine = self.assigned.get(cpu) == Some(unit);
                    if (mine || !keep) && !assigned.contains_key(cpu) {
                        assigned.insert(*cpu, unit.clone());
                        taken[i] += 1;
                    }
                }
            }
        }

        // 5. Events and counters.
        let mut revokes: BTreeMap<(CpuOwner, Name, u8), (RevokeReason, CpuSet)> = BTreeMap::new();
        let mut lends_ev: BTreeMap<(CpuOwner, Name), CpuSet> = BTreeMap::new();
        for (cpu, to) in &self.assigned {
            if assigned.get(cpu) == Some(to) {
                continue;
            }
            let from = self.owner_of(*cpu);
            let reason = if !offered.contains(cpu) {
                match &from {
                    CpuOwner::Unit(u) => withdrawn
                        .get(u)
                        .cloned()
                        .unwrap_or(RevokeReason::OwnerStopped),
                    CpuOwner::Spare => RevokeReason::OwnerStopped,
                }
            } else if overloaded.contains(to) {
                RevokeReason::Rebalanced
            } else {
                RevokeReason::Returned {
                    usage: by_unit.get(to).map_or(0.0, |s| s.usage_cpus),
                }
            };
            revokes
                .entry((from, to.clone(), reason.kind()))
                .or_insert_with(|| (reason, CpuSet::new()))
                .1
                .insert(*cpu);
        }
        for (cpu, to) in &assigned {
            if self.assigned.get(cpu) != Some(to) {
                lends_ev
                    .entry((self.owner_of(*cpu), to.clone()))
                    .or_default()
                    .insert(*cpu);
            }
        }
        let mut events = Vec::with_capacity(revokes.len() + lends_ev.len());
        let mut revoked_owners = BTreeSet::new();
        let mut losers = BTreeSet::new();
        for ((from, to, _), (reason, cpus)) in revokes {
            if reason.is_revocation() {
                if let CpuOwner::Unit(u) = &from {
                    revoked_owners.insert(u.clone());
                }
                losers.insert(to.clone());
            }
            events.push(CpuEvent::Revoke {
                from,
                to,
                cpus,
                reason,
            });
        }
        for ((from, to), cpus) in lends_ev {
            events.push(CpuEvent::Lend { from, to, cpus });
        }
        for u in revoked_owners {
            if let Some(o) = self.owners.get_mut(&u) {
                o.revocations += 1;
                if matches!(
                    withdrawn.get(&u),
                    Some(RevokeReason::OwnerBusy { .. } | RevokeReason::OwnerPressure { .. })
                ) {
                    o.back_off(now, &cfg);
                }
            }
        }
        for u in losers {
            *self.lost.entry(u).or_default() += 1;
        }
        self.assigned = assigned;

        // 6. Grants.
        let units = self
            .layout
            .units
            .iter()
            .map(|u| (u.clone(), self.grant(u, by_unit.get(u).copied())))
            .collect();
        Ok(CpuPlan {
            units,
            spare: self.layout.spare.clone(),
            events,
        })
    }

    fn owner_of(&self, cpu: u32) -> CpuOwner {
        self.layout
            .homes
            .iter()
            .find(|(_, h)| h.contains(cpu))
            .map_or(CpuOwner::Spare, |(u, _)| CpuOwner::Unit(u.clone()))
    }

    fn grant(&self, unit: &Name, sample: Option<&CpuSample>) -> CpuGrant {
        let e = self.layout.entitled[unit];
        let owner = &self.owners[unit];
        let (revocations, lost) = (owner.revocations, self.lost.get(unit).copied().unwrap_or(0));
        if self.mode == IsolationMode::Smp {
            return CpuGrant {
                home: CpuSet::new(),
                pool: self.island.clone(),
                pool_share: e,
                borrowed: CpuSet::new(),
                lent: CpuSet::new(),
                cap: None,
                revocations,
                lost,
            };
        }
        let home = self.layout.home(unit);
        let share = self.layout.pool_share(unit);
        let fixed = self.mode == IsolationMode::Quota
            || sample.is_some_and(|s| s.sharing == SharePolicy::None);
        CpuGrant {
            borrowed: self
                .assigned
                .iter()
                .filter(|(_, b)| *b == unit)
                .map(|(c, _)| *c)
                .collect(),
            lent: home
                .iter()
                .filter(|c| self.assigned.contains_key(c))
                .collect(),
            pool: if share > 0.0 {
                self.layout.pool.clone()
            } else {
                CpuSet::new()
            },
            home,
            pool_share: share,
            cap: (fixed && share > 0.0).then_some(e),
            revocations,
            lost,
        }
    }
}

/// Whole CPUs needed for `cpus` of demand (0 for none or less).
/// CPUs a borrower whose tasks do not wait may use beyond what it keeps:
/// measurement noise, not demand.
pub const SETTLED_SLACK: f64 = 0.1;

fn cpus_for(cpus: f64) -> usize {
    saturating_usize((cpus - EPS).ceil())
}

#[cfg(test)]
#[path = "lend_tests.rs"]
mod tests;
