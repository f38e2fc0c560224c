//! Coordination state across a restart and a reload.
//!
//! The platform manager's state ([`CoordSnapshot`]: loans, tuned knobs,
//! cool-downs, backoff, escalation counts) is staged with the state file
//! every epoch and written when what it holds changes (see
//! [`crate::persist::Persist::stage_coord`]). It is put back
//!
//! - at a **restart**, after the overlays are registered and before the
//!   first write of the groups, checked against the kernel: a loan is kept
//!   only if its CPU is in the borrower island's cpuset as the backend
//!   reads it back, and in no other island's;
//! - at a **reload**, for the overlays, islands and units that are still
//!   there, checked against the CPUs the islands held before it.
//!
//! Every part put back or left out is a decision (`atoll why OVERLAY`):
//! a loan left out gives its CPU back to the island that owns it when the
//! groups are written next. [`Coordination::restored`] says what was put
//! back, for the status.

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_core::coord::{CoordSnapshot, Restored};
use atoll_core::decision::{Action, Decision, Reason};
use atoll_core::plan::GroupPath;
use atoll_core::{CpuSet, Name};

use super::apply::unless_base;
use super::{Coordination, UnitCoord};
use crate::compose::Composer;
use crate::decisions::DecisionLog;

/// Where a restored state comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The state file, at a restart.
    Restart,
    /// The coordination before a reload.
    Reload,
}

/// A saved coordination state to put back.
pub(crate) struct ToRestore<'a> {
    /// The state.
    pub snap: &'a CoordSnapshot,
    /// The time since it was taken.
    pub elapsed: Duration,
    /// The CPUs each island holds now.
    pub holding: &'a BTreeMap<Name, CpuSet>,
    /// Where it comes from.
    pub origin: Origin,
}

impl Origin {
    fn reason(self, detail: String) -> Reason {
        match self {
            Self::Restart => Reason::Recover { detail },
            Self::Reload => Reason::Reload { detail },
        }
    }

    fn words(self) -> &'static str {
        match self {
            Self::Restart => "restored from state",
            Self::Reload => "kept across reload",
        }
    }
}

impl Coordination {
    /// The coordination state to save at `now` (empty when coordination is
    /// off).
    pub fn snapshot(&self, now: Duration) -> CoordSnapshot {
        self.manager().map(|m| m.snapshot(now)).unwrap_or_default()
    }

    /// What coordination state the last start or reload put back, in words.
    pub fn restored(&self) -> Option<&str> {
        self.restored.as_deref()
    }

    /// Says that the saved coordination state is not restored, and why
    /// (a decision and a warning): coordination starts clean.
    pub(crate) fn not_restored(&mut self, why: &str, now: Duration, log: &mut DecisionLog) {
        tracing::warn!("coordination starts clean: {why}");
        log.record(Decision {
            at: now,
            action: Action::SetOverlay {
                overlay: "platform".into(),
                change: "coordination state not restored".into(),
            },
            why: Reason::Recover {
                detail: format!("{why}; coordination starts clean"),
            },
        });
        self.restored = Some(format!("not restored ({why}): started clean"));
    }

    /// Puts back what of `saved` still holds (see the module docs) on a
    /// coordination whose overlays are registered and that lent nothing.
    /// Each part is a decision; the groups it changes are touched for the
    /// composer.
    pub(crate) fn restore(
        &mut self,
        saved: ToRestore<'_>,
        now: Duration,
        log: &mut DecisionLog,
        compose: &mut Composer,
    ) -> Option<Restored> {
        let ToRestore {
            snap,
            elapsed,
            holding,
            origin,
        } = saved;
        if snap.is_empty() {
            return None;
        }
        let Ok(m) = self.manager.as_mut() else {
            self.not_restored("coordination is off", now, log);
            return None;
        };
        let r = m.restore(snap, now, elapsed, holding);
        let words = origin.words();
        let mut record = |overlay: &Name, change: String, detail: String| {
            log.record(Decision {
                at: now,
                action: Action::SetOverlay {
                    overlay: overlay.to_string(),
                    change,
                },
                why: origin.reason(detail),
            });
        };
        for l in &r.loans {
            record(
                &l.overlay,
                format!(
                    "loan of CPU {} ({} -> {}) kept",
                    l.cpu, l.lender, l.borrower
                ),
                format!(
                    "{words}: CPU {} is in island {}'s cpuset",
                    l.cpu, l.borrower
                ),
            );
        }
        for (o, level) in &r.overlays {
            record(
                o,
                format!("escalation level {level} and backoff kept"),
                words.to_string(),
            );
        }
        let platform = Name::new("platform").expect("a valid name");
        for d in &r.dropped {
            tracing::warn!("coordination: {d}");
            record(
                d.overlay.as_ref().unwrap_or(&platform),
                format!("{} dropped", d.what),
                d.why.clone(),
            );
        }
        // The layer follows the manager: the islands' CPUs, the units'
        // tuned knobs.
        let cpus: Vec<(Name, CpuSet)> = m
            .islands()
            .iter()
            .map(|c| (c.name().clone(), c.cpus().clone()))
            .collect();
        for (island, set) in cpus {
            if self.island_cpus.get(&island) != Some(&set) {
                self.island_cpus.insert(island.clone(), set);
                compose.touch(
                    GroupPath::island(&island),
                    origin.reason(format!("{words}: CPUs on loan")),
                );
            }
        }
        for unit in &r.units {
            let (Some(m), Some((island, base))) = (self.manager(), self.base.get(unit)) else {
                continue;
            };
            let Some(k) = m.island(island).and_then(|c| c.knobs(unit)).copied() else {
                continue;
            };
            let (island, base) = (island.clone(), *base);
            let c = UnitCoord {
                weight: unless_base(k.weight, Some(base.weight)),
                cap: unless_base(k.cap, Some(base.cap)),
                rt_runtime_us: unless_base(k.rt_runtime_us, Some(base.rt_runtime_us)),
                memory_high: unless_base(k.memory_high, Some(base.memory_high)),
                ..UnitCoord::default()
            };
            let overlay = m
                .island(&island)
                .and_then(|i| i.overlay_of(unit))
                .cloned()
                .unwrap_or_else(|| platform.clone());
            log.record(Decision {
                at: now,
                action: Action::SetOverlay {
                    overlay: overlay.to_string(),
                    change: format!("tuned knobs of unit {unit} kept (weight {})", k.weight),
                },
                why: origin.reason(words.to_string()),
            });
            self.units.insert(unit.clone(), c);
            compose.touch(
                GroupPath::unit(&island, unit),
                origin.reason(format!("{words}: knobs tuned by an overlay")),
            );
        }
        let mut summary = format!("{words}: {}", r.summary());
        if !r.dropped.is_empty() {
            summary.push_str(&format!(
                "; {} dropped ({}), see atoll why",
                r.dropped.len(),
                r.dropped
                    .iter()
                    .map(|d| d.what.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        tracing::info!("coordination: {summary}");
        self.restored = Some(summary);
        Some(r)
    }

    /// Takes over from the coordination before a reload the reports, counts
    /// and reactive retry times of the overlays registered again.
    pub(crate) fn keep_overlay_states(&mut self, old: Coordination) {
        for (name, st) in old.overlays {
            if let Some(new) = self.overlays.get_mut(&name) {
                new.value = st.value;
                new.holds = st.holds;
                new.acked = st.acked;
                new.nacked = st.nacked;
                new.report_turn = st.report_turn;
            }
        }
        for ((o, what), at) in old.next {
            if self.overlays.contains_key(&o) {
                self.next.insert((o, what), at);
            }
        }
    }
}
