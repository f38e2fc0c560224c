//! The coordination state as data, to keep across a daemon restart or a
//! reload: per overlay its successive shortage nacks (rule 9) and its
//! senders' backoff (rule 8), per unit the knobs an overlay tuned away from
//! their configured values and its trigger cool-down (rules 1 to 3), and the
//! ledger of borrowed CPUs (rules 4 to 6).
//!
//! # Time
//!
//! The platform manager's `now` runs from an arbitrary origin (the daemon's
//! monotonic clock, which starts again with every process), so a snapshot
//! holds no instants: a deadline is kept as the time *left* until it
//! (`left`), a past event as its *age* at the snapshot (`age`). Whoever
//! restores says how much time passed since the snapshot was taken
//! (`elapsed`; the daemon measures it on the wall clock, the only clock
//! that spans a restart, and takes a clock that went back as no time): a
//! backoff that ran out while the daemon was down is over, a loan made
//! before it is as old as the downtime says.
//!
//! Boosts are not kept (they last tens of milliseconds): a restored unit
//! has its steady knobs. Island usage and the platform cap's split are
//! measured and rebalanced again within an epoch.
//!
//! # Checking
//!
//! [`PlatformManager::restore`] trusts nothing in the snapshot: each part
//! is put back only if it still makes sense on this platform, and every
//! part left out is listed with the reason in [`Restored::dropped`]. A loan
//! is kept only if its islands and overlay exist, its chain of hops starts
//! at the island that owns the CPU, and the CPU is where the ledger says:
//! in the borrower's CPUs as the caller reads them now (the kernel's
//! cpusets after a restart) and in no other island's.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::platform::{Hop, Loan, PlatformManager};
use super::round::Backoff;
use super::types::{Resource, UnitKnobs};
use crate::{CpuSet, Name};

/// The coordination state worth keeping (see the [module docs](self)).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoordSnapshot {
    /// Overlays with escalation counts or backoff, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlays: Vec<OverlaySnapshot>,
    /// Units tuned away from their configured knobs, or cooling down.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<UnitSnapshot>,
    /// CPUs on loan, by CPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loans: Vec<LoanSnapshot>,
}

/// An overlay's escalation counts and its senders' backoff.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverlaySnapshot {
    /// The overlay.
    pub name: Name,
    /// Successive shortage nacks per resource (rule 9), those above 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalation: Vec<NackCount>,
    /// Backoff per sending island and resource (rule 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backoff: Vec<BackoffSnapshot>,
}

/// Successive shortage nacks of one resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NackCount {
    /// The resource.
    pub resource: Resource,
    /// The count.
    pub nacks: u32,
}

/// A sender's backoff.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackoffSnapshot {
    /// The sending island.
    pub island: Name,
    /// The resource.
    pub resource: Resource,
    /// Successive nacks (the next one doubles the backoff again).
    pub nacks: u32,
    /// Time left until it may send again.
    pub left: Duration,
}

/// A unit's tuned knobs and cool-down.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitSnapshot {
    /// The unit.
    pub unit: Name,
    /// Its island.
    pub island: Name,
    /// The overlay it belongs to.
    pub overlay: Name,
    /// Its configured knobs when the snapshot was taken: the tuned knobs
    /// are put back only over the same ones.
    pub base: UnitKnobs,
    /// Its steady knobs.
    pub knobs: UnitKnobs,
    /// Time left until it may be triggered again.
    pub cooldown_left: Duration,
}

/// A CPU on loan and the moves that took it where it is, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoanSnapshot {
    /// The CPU.
    pub cpu: u32,
    /// Its loans; the last one's borrower holds it.
    pub hops: Vec<HopSnapshot>,
}

/// One loan of a CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HopSnapshot {
    /// The island that lent it.
    pub lender: Name,
    /// The island that borrowed it.
    pub borrower: Name,
    /// The overlay it was borrowed for.
    pub overlay: Name,
    /// How long before the snapshot it moved.
    pub age: Duration,
}

impl CoordSnapshot {
    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.overlays.is_empty() && self.units.is_empty() && self.loans.is_empty()
    }

    /// The same state without its times (what is worth saving again when it
    /// changes: the times change every epoch).
    pub fn timeless(&self) -> Self {
        let mut s = self.clone();
        for o in &mut s.overlays {
            for b in &mut o.backoff {
                b.left = Duration::ZERO;
            }
        }
        for u in &mut s.units {
            u.cooldown_left = Duration::ZERO;
        }
        for l in &mut s.loans {
            for h in &mut l.hops {
                h.age = Duration::ZERO;
            }
        }
        s
    }
}

/// What [`PlatformManager::restore`] put back, and what it left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Restored {
    /// The loans put back.
    pub loans: Vec<Loan>,
    /// The units whose tuned knobs were put back.
    pub units: Vec<Name>,
    /// Overlays whose escalation counts or backoff were put back, with the
    /// highest escalation count among their resources.
    pub overlays: Vec<(Name, u32)>,
    /// What was left out, and why.
    pub dropped: Vec<Dropped>,
}

/// A part of a snapshot left out of a restore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The overlay it was kept for, when known.
    pub overlay: Option<Name>,
    /// What (`loan of CPU 5 (batch -> web, overlay shop)`).
    pub what: String,
    /// Why.
    pub why: String,
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} dropped: {}", self.what, self.why)
    }
}

impl Restored {
    /// What was put back, in words (`2 loans, 1 tuned unit, escalation
    /// level 1`; `nothing` when empty).
    pub fn summary(&self) -> String {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut parts = Vec::new();
        if !self.loans.is_empty() {
            parts.push(plural(self.loans.len(), "loan", "loans"));
        }
        if !self.units.is_empty() {
            parts.push(plural(self.units.len(), "tuned unit", "tuned units"));
        }
        if let Some(level) = self.overlays.iter().map(|(_, n)| *n).max() {
            parts.push(format!("escalation level {level}"));
        }
        if parts.is_empty() {
            "nothing".to_string()
        } else {
            parts.join(", ")
        }
    }
}

fn dropped(overlay: &Name, what: impl Into<String>, why: impl Into<String>) -> Dropped {
    Dropped {
        overlay: Some(overlay.clone()),
        what: what.into(),
        why: why.into(),
    }
}

impl PlatformManager {
    /// The coordination state at `now` (see the [module docs](self)).
    pub fn snapshot(&self, now: Duration) -> CoordSnapshot {
        let now = self.last_now.max(now);
        let left = |until: Duration| until.saturating_sub(now);
        let overlays = self
            .overlays
            .iter()
            .filter_map(|(name, rec)| {
                let escalation: Vec<NackCount> = Resource::ALL
                    .iter()
                    .filter(|r| rec.nacks[r.index()] > 0)
                    .map(|r| NackCount {
                        resource: *r,
                        nacks: rec.nacks[r.index()],
                    })
                    .collect();
                let backoff: Vec<BackoffSnapshot> = rec
                    .backoff
                    .iter()
                    .map(|b| BackoffSnapshot {
                        island: self.islands[b.from].name().clone(),
                        resource: b.resource,
                        nacks: b.nacks,
                        left: left(b.until),
                    })
                    .collect();
                (!escalation.is_empty() || !backoff.is_empty()).then(|| OverlaySnapshot {
                    name: name.clone(),
                    escalation,
                    backoff,
                })
            })
            .collect();
        let mut units = Vec::new();
        for c in &self.islands {
            for u in c.units_kept() {
                let Some(overlay) = u.overlay else { continue };
                if u.knobs == u.base && u.cooldown_until <= now {
                    continue;
                }
                units.push(UnitSnapshot {
                    unit: u.name.clone(),
                    island: c.name().clone(),
                    overlay: overlay.clone(),
                    base: u.base,
                    knobs: u.knobs,
                    cooldown_left: left(u.cooldown_until),
                });
            }
        }
        let loans = self
            .loans
            .iter()
            .map(|(cpu, stack)| LoanSnapshot {
                cpu: *cpu,
                hops: stack
                    .iter()
                    .map(|h| HopSnapshot {
                        lender: self.islands[h.lender].name().clone(),
                        borrower: self.islands[h.borrower].name().clone(),
                        overlay: h.overlay.clone(),
                        age: now.saturating_sub(h.at),
                    })
                    .collect(),
            })
            .collect();
        CoordSnapshot {
            overlays,
            units,
            loans,
        }
    }

    /// Puts back what of `snap` still makes sense here (see the
    /// [module docs](self)), on a manager with its overlays registered and
    /// nothing lent. `elapsed`: the time since the snapshot was taken.
    /// `holding`: the CPUs each island holds now (an island missing from
    /// it cannot be checked, so no loan involving it is put back).
    pub fn restore(
        &mut self,
        snap: &CoordSnapshot,
        now: Duration,
        elapsed: Duration,
        holding: &BTreeMap<Name, CpuSet>,
    ) -> Restored {
        let now = self.advance(now);
        let left = |l: Duration| now + l.saturating_sub(elapsed);
        let ago = |age: Duration| now.saturating_sub(age.saturating_add(elapsed));
        let mut out = Restored::default();
        for o in &snap.overlays {
            let what = format!("escalation and backoff of overlay {}", o.name);
            if !self.overlays.contains_key(&o.name) {
                out.dropped
                    .push(dropped(&o.name, what, "the overlay is not registered"));
                continue;
            }
            let mut backoff = Vec::new();
            for b in &o.backoff {
                match self.index_of(&b.island) {
                    Some(from) => backoff.push(Backoff {
                        from,
                        resource: b.resource,
                        nacks: b.nacks,
                        until: left(b.left),
                    }),
                    None => out.dropped.push(dropped(
                        &o.name,
                        format!("backoff of island {} for overlay {}", b.island, o.name),
                        format!("island {} is not configured", b.island),
                    )),
                }
            }
            let Some(rec) = self.overlays.get_mut(&o.name) else {
                continue;
            };
            let mut level = 0;
            for n in &o.escalation {
                rec.nacks[n.resource.index()] = n.nacks;
                level = level.max(n.nacks);
            }
            rec.backoff = backoff;
            out.overlays.push((o.name.clone(), level));
        }
        for u in &snap.units {
            let what = format!("tuned knobs of unit {}", u.unit);
            let Some(i) = self.index_of(&u.island) else {
                out.dropped.push(dropped(
                    &u.overlay,
                    what,
                    format!("island {} is not configured", u.island),
                ));
                continue;
            };
            let c = &mut self.islands[i];
            let Some(now_in) = c.units_kept().find(|k| k.name == &u.unit) else {
                out.dropped.push(dropped(
                    &u.overlay,
                    what,
                    format!("island {} has no unit {} now", u.island, u.unit),
                ));
                continue;
            };
            if now_in.overlay != Some(&u.overlay) {
                out.dropped.push(dropped(
                    &u.overlay,
                    what,
                    format!("the unit is not in overlay {} now", u.overlay),
                ));
                continue;
            }
            if now_in.base != u.base {
                out.dropped.push(dropped(
                    &u.overlay,
                    what,
                    "its configured knobs changed: they are the base now",
                ));
                continue;
            }
            match c.restore_unit(&u.unit, u.knobs, left(u.cooldown_left)) {
                Ok(()) => out.units.push(u.unit.clone()),
                Err(why) => out.dropped.push(dropped(&u.overlay, what, why)),
            }
        }
        let mut seen = CpuSet::new();
        for l in &snap.loans {
            let what = match (l.hops.first(), l.hops.last()) {
                (Some(first), Some(top)) => format!(
                    "loan of CPU {} ({} -> {}, overlay {})",
                    l.cpu, first.lender, top.borrower, top.overlay
                ),
                _ => format!("loan of CPU {}", l.cpu),
            };
            let Some(top) = l.hops.last() else {
                out.dropped.push(Dropped {
                    overlay: None,
                    what,
                    why: "it has no hops".into(),
                });
                continue;
            };
            if seen.contains(l.cpu) {
                out.dropped.push(dropped(
                    &top.overlay,
                    what,
                    "the CPU is listed twice in the ledger",
                ));
                continue;
            }
            seen.insert(l.cpu);
            match self.check_loan(l, holding) {
                Ok(hops) => {
                    let hops: Vec<Hop> = hops
                        .into_iter()
                        .map(|(lender, borrower, overlay, age)| Hop {
                            lender,
                            borrower,
                            overlay,
                            at: ago(age),
                        })
                        .collect();
                    let (owner, top) = (hops[0].lender, hops[hops.len() - 1].clone());
                    self.islands[owner].give_up(l.cpu);
                    self.islands[top.borrower].accept(top.at, l.cpu, true);
                    self.loans.insert(l.cpu, hops);
                }
                Err(why) => out.dropped.push(dropped(&top.overlay, what, why)),
            }
        }
        out.loans = self.loans();
        out
    }

    /// A saved loan's hops as island indexes, or why it cannot be put back.
    #[allow(clippy::type_complexity)]
    fn check_loan(
        &self,
        l: &LoanSnapshot,
        holding: &BTreeMap<Name, CpuSet>,
    ) -> Result<Vec<(usize, usize, Name, Duration)>, String> {
        let (Some(first), Some(top)) = (l.hops.first(), l.hops.last()) else {
            return Err("it has no hops".into());
        };
        let mut hops = Vec::with_capacity(l.hops.len());
        for h in &l.hops {
            let idx = |n: &Name| {
                self.index_of(n)
                    .ok_or_else(|| format!("island {n} is not configured"))
            };
            hops.push((idx(&h.lender)?, idx(&h.borrower)?, h.overlay.clone(), h.age));
        }
        if !self.overlays.contains_key(&top.overlay) {
            return Err(format!("overlay {} is not registered", top.overlay));
        }
        for w in hops.windows(2) {
            if w[1].0 != w[0].1 {
                return Err("its hops do not follow each other".into());
            }
        }
        let owner = &self.islands[hops[0].0];
        if !owner.home().contains(l.cpu) {
            return Err(format!(
                "CPU {} is not one of island {}'s own",
                l.cpu, first.lender
            ));
        }
        if owner.home().iter().next() == Some(l.cpu) {
            return Err(format!(
                "CPU {} is island {}'s lowest, which it never lends",
                l.cpu, first.lender
            ));
        }
        if !owner.cpus().contains(l.cpu) {
            return Err(format!("CPU {} is already moved", l.cpu));
        }
        let Some(held) = holding.get(&top.borrower) else {
            return Err(format!(
                "the CPUs of island {} cannot be read back",
                top.borrower
            ));
        };
        if !held.contains(l.cpu) {
            let at: Vec<String> = holding
                .iter()
                .filter(|(_, c)| c.contains(l.cpu))
                .map(|(i, _)| i.to_string())
                .collect();
            return Err(format!(
                "CPU {} is not in island {}'s CPUs ({held}){}",
                l.cpu,
                top.borrower,
                if at.is_empty() {
                    String::new()
                } else {
                    format!(" but in {}'s", at.join(", "))
                }
            ));
        }
        if let Some((other, _)) = holding
            .iter()
            .find(|(i, c)| *i != &top.borrower && c.contains(l.cpu))
        {
            return Err(format!("CPU {} is in island {other}'s CPUs as well", l.cpu));
        }
        Ok(hops)
    }
}
