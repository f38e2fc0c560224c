//! The cache penalty: a thread that shares its CPUs loses work.
//!
//! A thread may carry a cache penalty `p` (the workload's
//! `cache_penalty`, 0 for none): sharing CPUs with other runnable threads,
//! it finds its working set evicted for part of its turns, and its work
//! advances at `eff = 1 − p·(1 − 1/k)` of its CPU time, where `k` is the
//! number of runnable threads per CPU on its CPU set: the same count the
//! wakeup delay uses (`busy / |S|`, see `wake`: threads that can delay a
//! waker, those of other sets spread evenly over theirs), at least 1. So
//! `k` counts threads per CPU whatever the shares: a group capped by
//! `cpu.max` on an otherwise idle set has `k = 1` and no penalty. Its CPU
//! time is unchanged; only work slows. Threads with a penalty form
//! classes of their own (the class key holds `p`), each with a second
//! clock, *work*, which advances at `rate · eff`; work targets are on that
//! clock (for classes without penalty `eff` is 1 and it equals the service
//! clock, bit for bit). After each allocation, the classes with a penalty
//! (only those) recompute `k` and are rebased if `eff` changed, so the
//! cost is per penalised class and allocation, none per thread or for
//! workloads without a penalty. `SimState::set_thread_cpu_work` gives
//! work in plain CPU time (spinning), converted at the current `eff`
//! (exact while `k` does not change before it completes).

use super::Model;
use crate::state::SimState;

impl Model {
    /// Recomputes the work efficiency of the classes with a cache penalty
    /// from the runnable threads per CPU on their sets (see the module
    /// docs); rebases those whose efficiency changed. The tree must be
    /// built.
    pub(super) fn update_cache_eff(&mut self, at: u64) {
        let Some(tree) = self.tree.as_ref() else {
            return;
        };
        let mut changed = Vec::new();
        for &c in &self.penalised {
            let class = &self.classes[c];
            let eff = if class.node.is_some() {
                let len = tree.set_len[class.set];
                let k = if len > 0.0 {
                    (tree.busy_in(class.set) / len).max(1.0)
                } else {
                    1.0
                };
                1.0 - class.penalty * (1.0 - 1.0 / k)
            } else {
                1.0
            };
            if eff != class.eff {
                changed.push((c, eff));
            }
        }
        for (c, eff) in changed {
            let rate = self.classes[c].rate;
            self.rebase_with(c, at, rate, eff);
        }
    }
}

impl SimState {
    /// Gives thread `tid` `ns` of plain CPU time to run (replacing any
    /// work left): not slowed by its cache penalty, converted to work at
    /// its class's current efficiency (see the module docs).
    pub(crate) fn set_thread_cpu_work(&mut self, tid: u32, ns: f64) {
        let eff = self
            .threads
            .get(&tid)
            .map_or(1.0, |t| self.model.classes[t.acct.class].eff);
        self.set_thread_work(tid, ns * eff);
    }

    /// Sets thread `tid`'s cache penalty (0 to 1; see the module docs),
    /// moving it to the matching class.
    pub(crate) fn set_thread_cache_penalty(&mut self, tid: u32, penalty: f64) {
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        if t.cache_penalty != penalty {
            t.cache_penalty = penalty;
            self.reclass(tid);
        }
    }
}
