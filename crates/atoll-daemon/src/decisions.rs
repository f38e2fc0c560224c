//! The decision log: a bounded ring of recent decisions, each also logged.
//!
//! The control loop records; the API threads answer `atoll why` from the
//! same ring through a [`DecisionReader`], without waiting for the loop.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use atoll_core::decision::{Action, Decision, Reason};

/// How many decisions are kept for `atoll why`.
pub const KEPT: usize = 4096;

type Ring = Arc<RwLock<VecDeque<Decision>>>;

/// Recent decisions, oldest first, and how many of each kind were made.
/// Only the control loop records.
#[derive(Debug, Default)]
pub struct DecisionLog {
    ring: Ring,
    /// Every decision recorded, by (action, reason) kind.
    counts: BTreeMap<(&'static str, &'static str), u64>,
}

/// Reads the decision log from another thread.
#[derive(Clone, Debug)]
pub struct DecisionReader {
    ring: Ring,
}

impl DecisionReader {
    /// The newest `limit` decisions matching `subject` (all if `None`),
    /// oldest first.
    pub fn query(&self, subject: Option<&str>, limit: usize) -> Vec<Decision> {
        query(&read(&self.ring), subject, limit)
    }
}

fn read(ring: &Ring) -> RwLockReadGuard<'_, VecDeque<Decision>> {
    // A panic while recording leaves a ring that is still a ring.
    ring.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(ring: &Ring) -> RwLockWriteGuard<'_, VecDeque<Decision>> {
    ring.write().unwrap_or_else(PoisonError::into_inner)
}

fn query(ring: &VecDeque<Decision>, subject: Option<&str>, limit: usize) -> Vec<Decision> {
    let mut out: Vec<Decision> = ring
        .iter()
        .rev()
        .filter(|d| subject.is_none_or(|s| matches_subject(d, s)))
        .take(limit)
        .cloned()
        .collect();
    out.reverse();
    out
}

impl DecisionLog {
    /// A reader of this log for other threads.
    pub fn reader(&self) -> DecisionReader {
        DecisionReader {
            ring: Arc::clone(&self.ring),
        }
    }

    /// Records and logs a decision.
    pub fn record(&mut self, d: Decision) {
        match &d.action {
            Action::Fallback(_) => tracing::warn!(target: "atoll::decision", "{d}"),
            // Boosts come and go every few epochs (see `crate::comm`).
            Action::Boost { .. } => tracing::debug!(target: "atoll::decision", "{d}"),
            _ if matches!(d.why, Reason::Comm { .. }) => {
                tracing::debug!(target: "atoll::decision", "{d}")
            }
            _ => tracing::info!(target: "atoll::decision", "{d}"),
        }
        *self
            .counts
            .entry((d.action.kind(), d.why.kind()))
            .or_default() += 1;
        let mut ring = write(&self.ring);
        if ring.len() == KEPT {
            ring.pop_front();
        }
        ring.push_back(d);
    }

    /// The newest `limit` decisions matching `subject` (all if `None`),
    /// oldest first.
    pub fn query(&self, subject: Option<&str>, limit: usize) -> Vec<Decision> {
        query(&read(&self.ring), subject, limit)
    }

    /// Decisions recorded since start (not only those kept), by action and
    /// reason.
    pub fn counts(&self) -> Vec<(&'static str, &'static str, u64)> {
        self.counts.iter().map(|((a, r), n)| (*a, *r, *n)).collect()
    }

    /// Number of decisions kept.
    pub fn len(&self) -> usize {
        read(&self.ring).len()
    }

    /// Whether none are kept.
    pub fn is_empty(&self) -> bool {
        read(&self.ring).is_empty()
    }
}

/// Whether `d` is about `subject`: a group path (`web/api`), a unit or
/// island name (`api`), or a process (`pid 42` or `42`).
pub fn matches_subject(d: &Decision, subject: &str) -> bool {
    let subject = subject.trim();
    if let Ok(pid) = subject.trim_start_matches("pid").trim().parse::<u32>() {
        return d.subject() == format!("pid {pid}");
    }
    let path_matches = |p: &str| p == subject || p.split('/').any(|c| c == subject);
    match &d.action {
        Action::ApplyGroup { path, .. } | Action::RemoveGroup { path } => {
            path_matches(path.as_str())
        }
        Action::Fallback(f) => path_matches(f.path.as_str()),
        Action::MoveProcess { to, .. } => path_matches(to.as_str()),
        Action::CreateUnit { unit, island } => unit == subject || island == subject,
        Action::RemoveUnit { unit } | Action::Boost { unit, .. } | Action::SetUnit { unit, .. } => {
            unit == subject
        }
        Action::SetOverlay { overlay, change } => {
            overlay == subject || change.split([' ', ',']).any(|w| w == subject)
        }
        Action::SetNetwork {
            island, interface, ..
        } => island == subject || interface == subject,
        Action::SetFrequency { island, .. } => island == subject,
        Action::RestoreProcess { .. } | Action::SetPolicy { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use atoll_core::decision::Reason;
    use atoll_core::plan::GroupPath;

    use super::*;

    fn mv(pid: u32, to: &str) -> Decision {
        Decision {
            at: Duration::ZERO,
            action: Action::MoveProcess {
                pid,
                comm: "x".into(),
                to: GroupPath::from_relative(to),
            },
            why: Reason::Config,
        }
    }

    #[test]
    fn query_filters_by_subject_and_keeps_the_newest() {
        let mut log = DecisionLog::default();
        for i in 0..10 {
            log.record(mv(
                i,
                if i % 2 == 0 {
                    "web/api"
                } else {
                    "batch/crunch"
                },
            ));
        }
        let api: Vec<u32> = log
            .query(Some("api"), 3)
            .iter()
            .map(|d| match d.action {
                Action::MoveProcess { pid, .. } => pid,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(api, [4, 6, 8]);
        assert_eq!(log.query(Some("batch"), 100).len(), 5);
        assert_eq!(log.query(Some("pid 3"), 100).len(), 1);
        assert_eq!(log.query(Some("7"), 100).len(), 1);
        assert_eq!(log.query(None, 4).len(), 4);
        assert!(log.query(Some("nothing"), 100).is_empty());
    }

    #[test]
    fn ring_is_bounded() {
        let mut log = DecisionLog::default();
        for i in 0..(u32::try_from(KEPT).unwrap() + 10) {
            log.record(mv(i, "host"));
        }
        assert_eq!(log.len(), KEPT);
        assert_eq!(log.query(None, 1).len(), 1);
        // The counts go on past the ring.
        assert_eq!(log.counts(), [("move_process", "config", KEPT as u64 + 10)]);
    }
}
