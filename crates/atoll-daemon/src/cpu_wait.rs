//! CPU pressure per unit where the kernel has none per group (cgroup v1).
//!
//! The lending policy tells a unit that needs more CPUs (its tasks wait for
//! one) from a unit that merely uses all it has (one thread on one CPU) by
//! CPU pressure. cgroup v2 gives it per group (`cpu.pressure`); cgroup v1
//! does not. There, atoll sums the run-queue wait of the unit's threads
//! (`/proc/<tid>/schedstat`, through [`ProcessTable::run_delay_ns`]) over
//! the epoch: `waited ÷ epoch` is the average number of waiting threads,
//! and `100 ×` that, at most 100, stands in for PSI's `some` percentage (it
//! is an upper bound of it: two threads waiting at once count twice).
//!
//! Reading every thread of every unit every epoch would cost what the rest
//! of the epoch costs, so only *busy* units are tracked: those using at
//! least [`TRACK_SHARE`] of the CPUs they may run on. A unit seen busy for
//! the first time has no baseline: its wait counts from this epoch on, and
//! the estimate for the first window is 0 (it is not yet known to wait).
//! Threads that started since the last epoch count from the next one.

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_core::backend::Monitor;
use atoll_core::plan::GroupPath;
use atoll_core::process::ProcessTable;

/// Share of its allowed CPUs a unit must use for its threads' waits to be
/// read.
pub const TRACK_SHARE: f64 = 0.25;

/// A unit's threads' wait counters as of the last epoch.
#[derive(Debug)]
struct Baseline {
    at: Duration,
    /// Thread id → run-queue wait so far, ns.
    waits: BTreeMap<u32, u64>,
}

/// Estimates CPU pressure of busy units from their threads' waits.
#[derive(Debug, Default)]
pub struct WaitTracker {
    units: BTreeMap<GroupPath, Baseline>,
}

impl WaitTracker {
    /// The estimated CPU pressure (%) of the unit at `group` over the time
    /// since the last call, or `None` if it is not busy (`usage_cpus` below
    /// [`TRACK_SHARE`] of `allowed_cpus`) or the system gives no thread
    /// waits. Forgets the unit's baseline when it is not busy.
    pub fn pressure(
        &mut self,
        group: &GroupPath,
        now: Duration,
        usage_cpus: f64,
        allowed_cpus: usize,
        monitor: &dyn Monitor,
        procs: &dyn ProcessTable,
    ) -> Option<f64> {
        if allowed_cpus == 0 || usage_cpus < TRACK_SHARE * allowed_cpus as f64 {
            self.units.remove(group);
            return None;
        }
        let Some(waits) = read_waits(group, monitor, procs) else {
            self.units.remove(group);
            return None;
        };
        let before = self
            .units
            .insert(group.clone(), Baseline { at: now, waits });
        let after = &self.units[group];
        let Some(before) = before.filter(|b| now > b.at) else {
            return Some(0.0);
        };
        let waited: u64 = after
            .waits
            .iter()
            .filter_map(|(tid, w)| before.waits.get(tid).map(|b| w.saturating_sub(*b)))
            .sum();
        let window = (now - before.at).as_nanos() as f64;
        Some((waited as f64 / window * 100.0).min(100.0))
    }

    /// Drops the baseline of the unit at `group` (its waits are not being
    /// followed for now).
    pub fn forget(&mut self, group: &GroupPath) {
        self.units.remove(group);
    }

    /// Drops every unit not in `keep` (units that went away).
    pub fn retain(&mut self, keep: impl Fn(&GroupPath) -> bool) {
        self.units.retain(|g, _| keep(g));
    }
}

/// Every thread's wait in `group`, or `None` if the system tells none.
/// Processes and threads that exit while being read are skipped.
fn read_waits(
    group: &GroupPath,
    monitor: &dyn Monitor,
    procs: &dyn ProcessTable,
) -> Option<BTreeMap<u32, u64>> {
    let pids = monitor.processes(group).ok()?;
    let mut waits = BTreeMap::new();
    let mut told = false;
    for pid in pids {
        let Ok(tids) = procs.threads(pid) else {
            continue;
        };
        for tid in tids {
            match procs.run_delay_ns(tid) {
                Ok(Some(w)) => {
                    told = true;
                    waits.insert(tid, w);
                }
                Ok(None) => return None,
                Err(_) => {}
            }
        }
    }
    // An empty group waits for nothing; a group whose threads all went away
    // between the reads too.
    Some(waits).filter(|w| told || w.is_empty())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use atoll_core::backend::{BackendError, GroupStats, StatSelect};
    use atoll_core::process::{ProcessError, ProcessInfo};

    use super::*;

    /// One group with a fixed set of threads whose waits the test sets.
    #[derive(Default)]
    struct Fake {
        /// pid → tids.
        procs: BTreeMap<u32, Vec<u32>>,
        waits: Mutex<BTreeMap<u32, u64>>,
        no_schedstat: bool,
    }

    impl Monitor for Fake {
        fn exists(&self, _: &GroupPath) -> bool {
            true
        }
        fn children(&self, _: &GroupPath) -> Result<Vec<String>, BackendError> {
            Ok(vec![])
        }
        fn processes(&self, _: &GroupPath) -> Result<Vec<u32>, BackendError> {
            Ok(self.procs.keys().copied().collect())
        }
        fn stats_of(&self, _: &GroupPath, _: StatSelect) -> Result<GroupStats, BackendError> {
            Ok(GroupStats::default())
        }
    }

    impl ProcessTable for Fake {
        fn pids(&self) -> Result<Vec<u32>, ProcessError> {
            Ok(self.procs.keys().copied().collect())
        }
        fn info(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
            Err(ProcessError::Gone(pid))
        }
        fn threads(&self, pid: u32) -> Result<Vec<u32>, ProcessError> {
            self.procs.get(&pid).cloned().ok_or(ProcessError::Gone(pid))
        }
        fn run_delay_ns(&self, tid: u32) -> Result<Option<u64>, ProcessError> {
            if self.no_schedstat {
                return Ok(None);
            }
            let w = self.waits.lock().unwrap();
            w.get(&tid).map(|v| Some(*v)).ok_or(ProcessError::Gone(tid))
        }
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn waits_over_the_window_become_a_percentage() {
        let g = GroupPath::from_relative("isl/u");
        let f = Fake {
            procs: [(10, vec![10, 11]), (20, vec![20])].into(),
            waits: Mutex::new([(10, 0), (11, 0), (20, 5_000_000)].into()),
            ..Default::default()
        };
        let mut w = WaitTracker::default();
        // First busy epoch: no baseline yet.
        assert_eq!(w.pressure(&g, ms(100), 1.0, 1, &f, &f), Some(0.0));
        // Over 100 ms thread 10 waited 30 ms and thread 20 20 ms: 0.5
        // threads on average.
        f.waits
            .lock()
            .unwrap()
            .extend([(10, 30_000_000), (20, 25_000_000)]);
        let p = w.pressure(&g, ms(200), 1.0, 1, &f, &f).unwrap();
        assert!((p - 50.0).abs() < 1e-9, "{p}");
        // Three threads waiting the whole window: capped at 100.
        f.waits
            .lock()
            .unwrap()
            .extend([(10, 130_000_000), (11, 100_000_000), (20, 125_000_000)]);
        assert_eq!(w.pressure(&g, ms(300), 1.0, 1, &f, &f), Some(100.0));
        // Nothing waited.
        assert_eq!(w.pressure(&g, ms(400), 1.0, 1, &f, &f), Some(0.0));
    }

    #[test]
    fn idle_units_are_not_read_and_lose_their_baseline() {
        let g = GroupPath::from_relative("isl/u");
        let f = Fake {
            procs: [(10, vec![10])].into(),
            waits: Mutex::new([(10, 0)].into()),
            ..Default::default()
        };
        let mut w = WaitTracker::default();
        assert_eq!(w.pressure(&g, ms(100), 1.0, 2, &f, &f), Some(0.0));
        // Below a quarter of its 2 CPUs: not tracked.
        assert_eq!(w.pressure(&g, ms(200), 0.4, 2, &f, &f), None);
        // Busy again: the old baseline is gone, so the wait accumulated
        // while idle does not count.
        f.waits.lock().unwrap().insert(10, 90_000_000);
        assert_eq!(w.pressure(&g, ms(300), 1.0, 2, &f, &f), Some(0.0));
        assert_eq!(w.pressure(&g, ms(300), 1.0, 0, &f, &f), None);
    }

    #[test]
    fn new_threads_count_from_the_next_epoch_and_no_schedstat_is_none() {
        let g = GroupPath::from_relative("isl/u");
        let mut f = Fake {
            procs: [(10, vec![10])].into(),
            waits: Mutex::new([(10, 0)].into()),
            ..Default::default()
        };
        let mut w = WaitTracker::default();
        w.pressure(&g, ms(100), 1.0, 1, &f, &f);
        // A thread that lived (and waited) long before it joined.
        f.procs.insert(30, vec![30]);
        f.waits.lock().unwrap().insert(30, 999_000_000);
        assert_eq!(w.pressure(&g, ms(200), 1.0, 1, &f, &f), Some(0.0));
        f.no_schedstat = true;
        assert_eq!(w.pressure(&g, ms(300), 1.0, 1, &f, &f), None);
    }
}
