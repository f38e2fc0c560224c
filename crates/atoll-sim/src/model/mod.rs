//! The CPU model: hierarchical weighted max-min fair sharing with cpusets,
//! caps, a realtime class and an idle weight, at rates that stay constant
//! between events, with exact accounting between them.
//!
//! # Shares
//!
//! The machine is a tree. At the top, the rest of the machine (every
//! runnable thread outside atoll, as one group of weight
//! [`OUTSIDE_WEIGHT`](crate::OUTSIDE_WEIGHT)) and atoll's root compete for
//! the online CPUs. Below, each group's entities are its runnable threads
//! (each can use one CPU; weight 1024, or 3 for `SCHED_IDLE`: the kernel's
//! load weights) and its child groups (weight `cpu.weight * 1024 / 100`, or
//! 3 with `cpu.idle`).
//!
//! A group's *demand* is what it could use: the sum over its components
//! capped by the fair capacity of its CPUs and by `cpu.max`
//! (`quota / period` CPUs). Its allocation is split among its entities by
//! weighted max-min fairness (water-filling), recursively. Entities whose
//! CPU sets overlap (transitively) form a *component* and share CPUs;
//! disjoint components do not. This is exact for siblings with identical
//! or disjoint CPU sets and an approximation for partial overlaps.
//!
//! # Realtime
//!
//! `SCHED_FIFO`/`SCHED_RR` threads are served before fair ones: classes in
//! descending priority take CPU from their CPU set first (FIFO and RR at
//! one priority share equally), each thread at most one CPU, each CPU at
//! most 95 % (the kernel's `sched_rt_runtime_us / sched_rt_period_us`),
//! and with RT group scheduling each group at most its budget ratio times
//! its effective CPU count (per-CPU `rt_runtime_us`, as the kernel does),
//! ancestors' budgets included, pooled over the group's CPUs (the
//! kernel's runtime sharing between CPUs). RT load is spread over a
//! class's CPUs in proportion to what is free on each (an approximation:
//! the kernel places each RT thread on one CPU); fair threads then share
//! the capacity RT left on their CPUs. `cpu.max` does not limit RT
//! threads.
//!
//! # Idle
//!
//! Shares follow the kernel's rule exactly: `SCHED_IDLE` threads and
//! `cpu.idle` groups weigh 3 against their siblings' 1024 (so a busy idle
//! entity next to a busy normal one gets 3/1027 of a CPU, not nothing: the
//! weight-3 rule is the kernel's own, closer to it than "leftovers only").
//! What the kernel adds for them, immediate wakeup preemption by non-idle
//! threads, is modelled in the wakeup delay (`wake`): idle threads never
//! delay a waking one. `SCHED_BATCH` is treated as `SCHED_OTHER`.
//!
//! # Freezer
//!
//! Threads of a frozen group (`GroupSettings::frozen`, here or above) get
//! no CPU and count no pressure until it is thawed; freezing is immediate
//! (no `Freezing` state).
//!
//! # Time and accounting
//!
//! Threads with the same location (a group, or outside) and the same policy
//! kind (fair, idle, RT priority *p*) form a *class*; they get the same
//! rate, so the model keeps rates per class and a per-class *service*
//! clock (CPU time one runnable member has received since the class
//! began, a linear function of time between events). A thread's CPU time is
//! its service at leaving minus at joining, summed; nothing is done per
//! thread when time advances. Rates are recomputed only when something
//! changed (a thread became runnable or blocked, a group or policy
//! changed), once per instant however many changes came, and only where
//! the change leads (see `alloc`).
//!
//! A thread may carry *work* (CPU time still to run, for the workload
//! engine): its phase ends when its class's service reaches a target.
//! Each class keeps a heap of targets and the model a heap of the times at
//! which each class's first target is reached, re-pushed when a class's
//! rate changes; stale entries are dropped lazily.
//!
//! # Cache penalty
//!
//! Threads with a cache penalty make less progress per CPU time when
//! threads share their CPUs: their targets are on a *work* clock; see
//! `cache`.
//!
//! Group usage, `cpu.max` periods and throttling, and PSI `some` (a group
//! stalls while a runnable thread in it or below gets less than a whole
//! CPU) are folded from per-group segments at rate changes and at reads,
//! with the same rules as `cpu.stat` (see [`CpuCounters`]).
//!
//! Not modelled: SMT (each logical CPU is one CPU), NUMA distances,
//! migration costs, cache effects other than the penalty above.

mod alloc;
mod cache;
#[cfg(test)]
mod tests;
mod tree;
mod wake;

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use atoll_core::num::saturating_u64;
use atoll_core::plan::{GroupPath, TaskPolicy};
pub(crate) use tree::Tree;

use crate::state::{CpuCounters, Location, SimState, Thread, TidMap};

/// Slack for floating-point comparisons, in CPUs.
pub(crate) const EPS: f64 = 1e-9;

/// Index of a class in [`Model::classes`].
pub(crate) type ClassId = usize;

/// Which scheduling class a policy is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum PolicyKind {
    /// `SCHED_OTHER` and `SCHED_BATCH`.
    Fair,
    /// `SCHED_IDLE`.
    Idle,
    /// `SCHED_FIFO` or `SCHED_RR` at this priority.
    Rt(u8),
}

impl PolicyKind {
    pub(crate) fn of(p: TaskPolicy) -> Self {
        match p {
            TaskPolicy::Other | TaskPolicy::Batch => Self::Fair,
            TaskPolicy::Idle => Self::Idle,
            TaskPolicy::Fifo(x) | TaskPolicy::Rr(x) => Self::Rt(x),
        }
    }
}

/// A thread's remaining CPU work, as a service target in its class.
#[derive(Clone, Copy, Debug)]
struct WorkEntry {
    target: f64,
    tid: u32,
    seq: u64,
}

impl PartialEq for WorkEntry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for WorkEntry {}
impl PartialOrd for WorkEntry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for WorkEntry {
    fn cmp(&self, o: &Self) -> Ordering {
        self.target.total_cmp(&o.target).then(self.seq.cmp(&o.seq))
    }
}

/// Threads of one location and policy kind: they all get the same rate.
#[derive(Debug)]
pub(crate) struct Class {
    pub loc: Option<GroupPath>,
    pub kind: PolicyKind,
    /// Threads in the class, runnable or not.
    pub threads: u32,
    /// Of those, runnable ones.
    pub runnable: u32,
    /// CPUs each runnable member gets.
    pub rate: f64,
    /// Cache penalty of its threads (0: none).
    pub penalty: f64,
    /// Work per CPU time now (`1 − penalty·(1 − 1/k)`; 1 without penalty).
    pub eff: f64,
    t0: u64,
    service0: f64,
    work0: f64,
    wait0: f64,
    version: u64,
    work: BinaryHeap<Reverse<WorkEntry>>,
    /// Its node in the tree (`None`: detached, rate 0).
    pub node: Option<usize>,
    /// The CPU set index of its node.
    pub set: usize,
    /// Whether it delays waking threads (not idle-like).
    pub counts_busy: bool,
    /// Its runnable count changed since the last allocation.
    pub dirty: bool,
}

impl Class {
    fn service_at(&self, t: u64) -> f64 {
        self.service0 + self.rate * t.saturating_sub(self.t0) as f64
    }

    /// The work clock: service weighted by `eff`.
    fn work_at(&self, t: u64) -> f64 {
        self.work0 + self.rate * self.eff * t.saturating_sub(self.t0) as f64
    }

    fn wait_at(&self, t: u64) -> f64 {
        self.wait0 + (1.0 - self.rate).max(0.0) * t.saturating_sub(self.t0) as f64
    }

    /// When the work clock reaches `target`, ns (rounded up).
    fn time_of(&self, target: f64) -> Option<u64> {
        let speed = self.rate * self.eff;
        if self.rate <= EPS || speed <= 0.0 {
            return None;
        }
        let dt = ((target - self.work0) / speed).max(0.0).ceil();
        Some(self.t0.saturating_add(saturating_u64(dt.min(1e18))))
    }
}

/// A thread's CPU accounting and work.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ThreadAcct {
    pub class: ClassId,
    pub runnable: bool,
    cpu_base: f64,
    wait_base: f64,
    joined_service: f64,
    joined_wait: f64,
    work: Work,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Work {
    None,
    /// Runnable: done when the class's work clock reaches `target`.
    Target {
        target: f64,
        seq: u64,
    },
    /// Not runnable: work still to do.
    Remaining(f64),
}

/// Classes, the tree and the completion heap.
#[derive(Debug)]
pub(crate) struct Model {
    pub classes: Vec<Class>,
    index: HashMap<(Option<GroupPath>, PolicyKind, u64), ClassId>,
    /// Classes with a cache penalty.
    penalised: Vec<ClassId>,
    /// The compiled group tree; `None` when it must be rebuilt.
    pub tree: Option<Tree>,
    /// Rates must be recomputed.
    pub dirty: bool,
    /// All of them (else only where `dirty_classes` lead).
    pub full: bool,
    /// Classes whose runnable count changed.
    pub dirty_classes: Vec<ClassId>,
    heap: BinaryHeap<Reverse<(u64, ClassId, u64)>>,
    next_seq: u64,
    /// The kernel's default slice here, ns.
    pub base_slice_ns: u64,
    /// Work done so far.
    pub stats: ModelStats,
}

/// What the CPU model has done so far (for performance reports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelStats {
    /// Rate allocations (one per instant at which something changed).
    pub recomputes: u64,
    /// Of those, over the whole tree.
    pub full_recomputes: u64,
    /// Tree compilations (group, placement or policy changes).
    pub tree_builds: u64,
    /// Classes whose rate changed, summed over allocations.
    pub rebases: u64,
}

impl Model {
    pub(crate) fn new(cpus: usize) -> Self {
        // sysctl_sched_base_slice: 0.75 ms scaled by 1 + ilog2(min(cpus, 8)).
        let factor = 1 + u64::from(cpus.clamp(1, 8).ilog2());
        Self {
            classes: Vec::new(),
            index: HashMap::new(),
            penalised: Vec::new(),
            tree: None,
            dirty: true,
            full: true,
            dirty_classes: Vec::new(),
            heap: BinaryHeap::new(),
            next_seq: 0,
            base_slice_ns: 750_000 * factor,
            stats: ModelStats::default(),
        }
    }

    fn class_for(
        &mut self,
        loc: Option<&GroupPath>,
        kind: PolicyKind,
        penalty: f64,
        now: u64,
    ) -> ClassId {
        let key = (loc.cloned(), kind, penalty.to_bits());
        if let Some(&c) = self.index.get(&key) {
            return c;
        }
        let id = self.classes.len();
        self.classes.push(Class {
            loc: key.0.clone(),
            kind,
            threads: 0,
            runnable: 0,
            rate: 0.0,
            penalty,
            eff: 1.0,
            t0: now,
            service0: 0.0,
            work0: 0.0,
            wait0: 0.0,
            version: 0,
            work: BinaryHeap::new(),
            node: None,
            set: 0,
            counts_busy: false,
            dirty: false,
        });
        self.index.insert(key, id);
        if penalty > 0.0 {
            self.penalised.push(id);
        }
        id
    }

    /// Notes that class `c`'s runnable count changed.
    fn touch(&mut self, c: ClassId) {
        let class = &mut self.classes[c];
        if matches!(class.kind, PolicyKind::Rt(_)) {
            self.full = true;
        }
        if !class.dirty {
            class.dirty = true;
            self.dirty_classes.push(c);
        }
        self.dirty = true;
    }

    fn push_time(&mut self, c: ClassId, target: f64) {
        let class = &self.classes[c];
        if let Some(t) = class.time_of(target) {
            self.heap.push(Reverse((t, c, class.version)));
        }
    }

    fn join(&mut self, a: &mut ThreadAcct, tid: u32, now: u64) {
        let c = &mut self.classes[a.class];
        c.runnable += 1;
        a.joined_service = c.service_at(now);
        a.joined_wait = c.wait_at(now);
        a.runnable = true;
        if c.counts_busy {
            if let Some(t) = self.tree.as_mut() {
                t.set_busy[c.set] += 1.0;
            }
        }
        if let Work::Remaining(left) = a.work {
            self.start_work(a, tid, left, now);
        }
        self.touch(a.class);
    }

    fn leave(&mut self, a: &mut ThreadAcct, now: u64) {
        let c = &mut self.classes[a.class];
        let service = c.service_at(now);
        let work = c.work_at(now);
        a.cpu_base += service - a.joined_service;
        a.wait_base += c.wait_at(now) - a.joined_wait;
        c.runnable -= 1;
        if c.counts_busy {
            if let Some(t) = self.tree.as_mut() {
                t.set_busy[c.set] -= 1.0;
            }
        }
        if let Work::Target { target, .. } = a.work {
            a.work = Work::Remaining((target - work).max(0.0));
        }
        a.runnable = false;
        self.touch(a.class);
    }

    fn start_work(&mut self, a: &mut ThreadAcct, tid: u32, ns: f64, now: u64) {
        let c = &mut self.classes[a.class];
        let target = c.work_at(now) + ns.max(0.0);
        self.next_seq += 1;
        let seq = self.next_seq;
        c.work.push(Reverse(WorkEntry { target, tid, seq }));
        a.work = Work::Target { target, seq };
        self.push_time(a.class, target);
    }

    /// Puts a thread in class `c` (its runnable state and work kept).
    fn attach(&mut self, a: &mut ThreadAcct, tid: u32, c: ClassId, now: u64) {
        a.class = c;
        let class = &mut self.classes[c];
        class.threads += 1;
        if class.node.is_none() {
            self.tree = None;
        }
        if a.runnable {
            a.runnable = false;
            self.join(a, tid, now);
        }
        self.dirty = true;
    }

    /// Takes a thread out of its class; returns whether it was runnable.
    fn detach(&mut self, a: &mut ThreadAcct, now: u64) -> bool {
        let was = a.runnable;
        if was {
            self.leave(a, now);
        }
        self.classes[a.class].threads -= 1;
        a.runnable = was;
        self.dirty = true;
        was
    }

    /// Whether work entry `e` of class `c` is still a thread's current work.
    fn valid(threads: &TidMap<Thread>, c: ClassId, e: &WorkEntry) -> bool {
        threads.get(&e.tid).is_some_and(|t| {
            t.acct.class == c
                && t.acct.runnable
                && matches!(t.acct.work, Work::Target { seq, .. } if seq == e.seq)
        })
    }

    /// When class `c`'s first valid target is reached (dropping stale ones).
    fn class_next(&mut self, threads: &TidMap<Thread>, c: ClassId) -> Option<u64> {
        let class = &mut self.classes[c];
        while let Some(Reverse(e)) = class.work.peek() {
            if Self::valid(threads, c, e) {
                return class.time_of(e.target);
            }
            class.work.pop();
        }
        None
    }

    /// The earliest time a thread's work completes, given fresh rates.
    fn next_completion(&mut self, threads: &TidMap<Thread>) -> Option<u64> {
        while let Some(&Reverse((t, c, v))) = self.heap.peek() {
            if self.classes[c].version != v {
                self.heap.pop();
                continue;
            }
            match self.class_next(threads, c) {
                Some(actual) if actual == t => return Some(t),
                Some(actual) if actual > t => {
                    self.heap.pop();
                    self.heap.push(Reverse((actual, c, v)));
                }
                _ => {
                    self.heap.pop();
                }
            }
        }
        None
    }

    /// Rebases class `c` at `at` with a new rate; re-pushes its next target.
    fn rebase(&mut self, c: ClassId, at: u64, rate: f64) {
        let eff = self.classes[c].eff;
        self.rebase_with(c, at, rate, eff);
    }

    /// Rebases class `c` at `at` with a new rate and work efficiency (the
    /// clocks are folded with the old ones); re-pushes its next target.
    fn rebase_with(&mut self, c: ClassId, at: u64, rate: f64, eff: f64) {
        let class = &mut self.classes[c];
        class.service0 = class.service_at(at);
        class.work0 = class.work_at(at);
        class.wait0 = class.wait_at(at);
        class.t0 = at;
        class.rate = rate;
        class.eff = eff;
        class.version += 1;
        self.stats.rebases += 1;
        if let Some(Reverse(e)) = class.work.peek() {
            let target = e.target;
            self.push_time(c, target);
        }
    }
}

impl ThreadAcct {
    fn new(class: ClassId) -> Self {
        Self {
            class,
            runnable: false,
            cpu_base: 0.0,
            wait_base: 0.0,
            joined_service: 0.0,
            joined_wait: 0.0,
            work: Work::None,
        }
    }
}

impl SimState {
    /// The modelled time, ns.
    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.modeled_until.as_nanos()).unwrap_or(u64::MAX)
    }

    fn location_of(&self, pid: u32) -> Option<GroupPath> {
        match self.procs.get(&pid).map(|p| &p.location) {
            Some(Location::Group(g)) => Some(g.clone()),
            _ => None,
        }
    }

    /// Adds thread `tid` of process `pid` (whose entry exists) to the
    /// model, runnable if the process is busy.
    pub(crate) fn add_thread(&mut self, tid: u32, pid: u32, policy: TaskPolicy) {
        let now = self.now_ns();
        let loc = self.location_of(pid);
        let busy = self.procs.get(&pid).is_some_and(|p| p.busy);
        let c = self
            .model
            .class_for(loc.as_ref(), PolicyKind::of(policy), 0.0, now);
        let mut acct = ThreadAcct::new(c);
        acct.runnable = busy;
        self.model.attach(&mut acct, tid, c, now);
        self.threads.insert(
            tid,
            Thread {
                pid,
                policy,
                slice: None,
                cache_penalty: 0.0,
                acct,
            },
        );
    }

    /// Takes thread `tid` out of the model (it is being removed).
    pub(crate) fn drop_thread(&mut self, tid: u32) {
        let now = self.now_ns();
        if let Some(t) = self.threads.get_mut(&tid) {
            self.model.detach(&mut t.acct, now);
        }
    }

    /// Re-files thread `tid` after its process moved or its policy changed.
    pub(crate) fn reclass(&mut self, tid: u32) {
        let now = self.now_ns();
        let Some((pid, policy, penalty)) = self
            .threads
            .get(&tid)
            .map(|t| (t.pid, t.policy, t.cache_penalty))
        else {
            return;
        };
        let loc = self.location_of(pid);
        let c = self
            .model
            .class_for(loc.as_ref(), PolicyKind::of(policy), penalty, now);
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        if t.acct.class == c {
            return;
        }
        self.model.detach(&mut t.acct, now);
        self.model.attach(&mut t.acct, tid, c, now);
    }

    /// Marks thread `tid` runnable or blocked from now on.
    pub(crate) fn set_thread_runnable(&mut self, tid: u32, on: bool) {
        let now = self.now_ns();
        if let Some(t) = self.threads.get_mut(&tid) {
            match (t.acct.runnable, on) {
                (false, true) => self.model.join(&mut t.acct, tid, now),
                (true, false) => self.model.leave(&mut t.acct, now),
                _ => {}
            }
        }
    }

    /// Gives thread `tid` `ns` of work (replacing any left): CPU time,
    /// slowed by its cache penalty if it has one.
    pub(crate) fn set_thread_work(&mut self, tid: u32, ns: f64) {
        let now = self.now_ns();
        if let Some(t) = self.threads.get_mut(&tid) {
            if t.acct.runnable {
                self.model.start_work(&mut t.acct, tid, ns, now);
            } else {
                t.acct.work = Work::Remaining(ns.max(0.0));
            }
        }
    }

    /// Drops thread `tid`'s work.
    pub(crate) fn clear_thread_work(&mut self, tid: u32) {
        if let Some(t) = self.threads.get_mut(&tid) {
            t.acct.work = Work::None;
        }
    }

    /// CPU time thread `t` has used up to the modelled time, ns.
    pub(crate) fn cpu_ns_of(&self, t: &Thread) -> f64 {
        let a = &t.acct;
        if a.runnable {
            let c = &self.model.classes[a.class];
            a.cpu_base + c.service_at(self.now_ns()) - a.joined_service
        } else {
            a.cpu_base
        }
    }

    /// Time thread `t` was runnable without a CPU, ns.
    pub(crate) fn wait_ns_of(&self, t: &Thread) -> f64 {
        let a = &t.acct;
        if a.runnable {
            let c = &self.model.classes[a.class];
            a.wait_base + c.wait_at(self.now_ns()) - a.joined_wait
        } else {
            a.wait_base
        }
    }

    /// Adds time a thread spent waking up (runnable, not yet running).
    pub(crate) fn add_wait(&mut self, tid: u32, ns: f64) {
        if let Some(t) = self.threads.get_mut(&tid) {
            t.acct.wait_base += ns;
        }
    }

    /// The CPUs thread `t` gets now (0 if blocked). Rates must be fresh.
    pub(crate) fn rate_of(&self, t: &Thread) -> f64 {
        if t.acct.runnable {
            self.model.classes[t.acct.class].rate
        } else {
            0.0
        }
    }

    /// Rebuilds the tree and recomputes rates if needed, as of the
    /// modelled time.
    pub(crate) fn refresh(&mut self) {
        if self.model.tree.is_none() {
            self.build_tree();
            self.model.dirty = true;
            self.model.full = true;
        }
        if self.model.dirty {
            let at = self.now_ns();
            let full = self.model.full;
            self.recompute(at, full);
            self.model.update_cache_eff(at);
            for c in std::mem::take(&mut self.model.dirty_classes) {
                self.model.classes[c].dirty = false;
            }
            self.model.dirty = false;
            self.model.full = false;
            self.model.stats.recomputes += 1;
            self.model.stats.full_recomputes += u64::from(full);
        }
    }

    /// The earliest time, ns, a thread's work completes at current rates.
    pub(crate) fn next_completion(&mut self) -> Option<u64> {
        self.refresh();
        self.model.next_completion(&self.threads)
    }

    /// Threads whose work completed by the modelled time (rates fresh),
    /// appended to `out`; their work is cleared.
    pub(crate) fn take_completed(&mut self, out: &mut Vec<u32>) {
        let now = self.now_ns();
        self.refresh();
        while let Some(t) = self.model.next_completion(&self.threads) {
            if t > now {
                break;
            }
            let Some(Reverse((_, c, _))) = self.model.heap.pop() else {
                break;
            };
            let work = self.model.classes[c].work_at(now);
            let tol = 1e-6 * (1.0 + work.abs() * 1e-9);
            while let Some(Reverse(e)) = self.model.classes[c].work.peek().copied() {
                if !Model::valid(&self.threads, c, &e) {
                    self.model.classes[c].work.pop();
                    continue;
                }
                let due = e.target <= work + tol
                    || self.model.classes[c]
                        .time_of(e.target)
                        .is_some_and(|t| t <= now);
                if !due {
                    break;
                }
                self.model.classes[c].work.pop();
                if let Some(th) = self.threads.get_mut(&e.tid) {
                    th.acct.work = Work::None;
                }
                out.push(e.tid);
            }
            if let Some(Reverse(e)) = self.model.classes[c].work.peek().copied() {
                self.model.push_time(c, e.target);
            }
        }
    }

    /// Folds one group's counters up to the modelled time.
    pub(crate) fn fold_group(&mut self, path: &GroupPath) {
        let now = self.now_ns();
        if let Some(g) = self.groups.get_mut(path) {
            g.cpu.fold(now);
        }
    }

    /// The wakeup delay of thread `tid` now (see `wake`).
    pub(crate) fn wake_delay(&mut self, tid: u32) -> Duration {
        if self.model.tree.is_none() {
            self.build_tree();
            self.model.dirty = true;
        }
        let Some(t) = self.threads.get(&tid) else {
            return Duration::ZERO;
        };
        Duration::from_nanos(self.model.wake_delay_ns(t.acct.class, t.slice))
    }
}

impl CpuCounters {
    /// Adds the current segment's figures up to `now` and restarts it.
    pub(crate) fn fold(&mut self, now: u64) {
        let seg = self.seg;
        let dt = now.saturating_sub(seg.t0);
        if dt == 0 {
            return;
        }
        let dt_f = dt as f64;
        self.usage_ns += seg.rate * dt_f;
        if seg.stalled {
            self.pressure_ns += dt_f;
        }
        if let (Some(cap), true) = (seg.cap, seg.period_ns > 0) {
            let elapsed = self.period_phase_ns.saturating_add(dt);
            let crossed = elapsed / seg.period_ns;
            self.period_phase_ns = elapsed % seg.period_ns;
            if seg.uncapped > EPS {
                self.nr_periods += crossed;
            }
            if seg.uncapped > cap + EPS && seg.fair >= cap - EPS {
                self.nr_throttled += crossed;
                self.throttled_ns += (seg.uncapped - cap) * dt_f;
            }
        }
        self.seg.t0 = now;
    }
}
