//! Malleable apps: a data-parallel loop whose thread count changes between
//! rounds, and the handle a runtime library (the lab's, for simulated
//! reconfigurable applications) uses to drive it.
//!
//! Each instance keeps the count it *wants* (set by
//! [`Engine::set_threads`], all its threads at start) and the count in
//! force for the current round (`cur`). A round starts with the first
//! `want` threads: those still running (the last to arrive, spinners) go
//! on at once, blocked ones are woken (with the model's wakeup delay), and
//! the rest are parked (blocked). Each active thread computes
//! `work_ms / cur` (with jitter), then arrives: all but the last spin for
//! `spin_us` of CPU time and then block. With `want = 0` the instance
//! pauses at the round boundary until a count above 0 is set.
//!
//! Spinning is CPU time, not wall time (a spin count, as OpenMP's): a
//! spinner that shares its CPU with others spins longer in wall time and
//! takes CPU from threads that have not arrived yet, which is the cost of
//! running more threads than CPUs that the fluid shares alone do not have.

use super::{Engine, Next, TState};
use crate::state::SimState;
use crate::workload::Program;

/// A malleable instance as its runtime sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MalleableState {
    /// Its app's name.
    pub app: String,
    /// Threads it has (the most it can use).
    pub max_threads: u32,
    /// Threads it wants from the next round on.
    pub threads: u32,
    /// Rounds completed.
    pub rounds_done: u32,
    /// Paused (no active thread) at a round boundary.
    pub paused: bool,
    /// Its process is still alive (not finished).
    pub alive: bool,
}

impl Engine {
    /// The instance of a malleable app whose process is `pid`.
    fn malleable_inst(&self, pid: u32) -> Option<(usize, usize)> {
        self.apps.iter().enumerate().find_map(|(a, rt)| {
            if !matches!(self.spec.apps[a].program, Program::Malleable { .. }) {
                return None;
            }
            rt.insts.iter().position(|i| i.pid == pid).map(|i| (a, i))
        })
    }

    /// The state of the malleable instance whose process is `pid` (`None`
    /// if `pid` is not one).
    pub fn malleable(&self, pid: u32) -> Option<MalleableState> {
        let (a, i) = self.malleable_inst(pid)?;
        let inst = &self.apps[a].insts[i];
        Some(MalleableState {
            app: self.spec.apps[a].name.clone(),
            max_threads: inst.thread_count(),
            threads: inst.want,
            rounds_done: inst.round,
            paused: inst.paused,
            alive: inst.alive,
        })
    }

    /// Sets how many threads the malleable instance whose process is `pid`
    /// uses from its next round on (clamped to its threads; 0 pauses it at
    /// the next round boundary). A paused instance starts a round at once
    /// when given threads. Returns whether `pid` is a live malleable
    /// instance.
    pub fn set_threads(&mut self, pid: u32, n: u32) -> bool {
        let Some((a, i)) = self.malleable_inst(pid) else {
            return false;
        };
        if !self.apps[a].insts[i].alive {
            return false;
        }
        let inst = &mut self.apps[a].insts[i];
        inst.want = n.min(inst.thread_count());
        if inst.paused && inst.want > 0 {
            let sim = self.sim.clone();
            let mut st = sim.lock();
            st.sync();
            self.start_round(&mut st, a, i);
        }
        true
    }

    /// Starts a round of instance `i` of malleable app `app` with the
    /// thread count it wants (see the module docs).
    pub(super) fn start_round(&mut self, st: &mut SimState, app: usize, i: usize) {
        let inst = &mut self.apps[app].insts[i];
        let n = inst.want.min(inst.thread_count());
        inst.cur = n;
        inst.arrived = 0;
        inst.paused = n == 0;
        let ths = inst.threads.clone();
        for (k, th) in ths.into_iter().enumerate() {
            let state = self.threads[th].state;
            if k < n as usize {
                match state {
                    TState::Running(_) => self.step(st, th, Next::Compute),
                    TState::Blocked => self.wake(st, th, Next::Compute),
                    TState::Waking { .. } | TState::Done => {}
                }
            } else if matches!(state, TState::Running(_) | TState::Waking { .. }) {
                self.block(st, th);
            }
        }
    }

    /// A thread of a malleable instance has done its share of the round.
    pub(super) fn malleable_arrive(&mut self, st: &mut SimState, th: usize) {
        let (app, i) = (self.threads[th].app, self.threads[th].inst);
        let Program::Malleable {
            rounds, spin_us, ..
        } = self.spec.apps[app].program
        else {
            return;
        };
        let inst = &mut self.apps[app].insts[i];
        inst.arrived += 1;
        if inst.arrived < inst.cur {
            if spin_us > 0.0 {
                self.compute(st, th, spin_us * 1e3, Next::SpinOut);
            } else {
                self.block(st, th);
            }
            return;
        }
        inst.round += 1;
        if inst.round >= rounds {
            self.finish_inst(st, app, i);
            return;
        }
        self.start_round(st, app, i);
    }

    /// The latencies app `app` (index in the spec) recorded so far, ns, in
    /// the order they were recorded (empty for an unknown index).
    pub fn latencies(&self, app: usize) -> &[u64] {
        self.apps.get(app).map_or(&[], |a| &a.latencies)
    }
}
