//! Starting apps, and the thread primitives every program is built from:
//! compute, block, wake (with the model's wakeup delay), finish.

use std::path::PathBuf;

use atoll_core::num::saturating_u64;

use super::{AppRt, Engine, Ev, Inst, Next, TState, ThreadRt};
use crate::state::SimState;
use crate::workload::{parse_policy, Program};

impl Engine {
    pub(super) fn start_app(&mut self, st: &mut SimState, app: usize) {
        let spec = self.spec.apps[app].clone();
        let policy = spec.policy.as_deref().and_then(parse_policy);
        let cache_penalty = match spec.program {
            Program::Malleable { cache_penalty, .. } => cache_penalty,
            _ => 0.0,
        };
        let networked = matches!(
            spec.program,
            Program::Client { .. }
                | Program::Service { .. }
                | Program::StreamServer { .. }
                | Program::StreamClient { .. }
        );
        let exe = PathBuf::from(format!("/usr/bin/{}", spec.unit));
        let mut insts = Vec::new();
        for _ in 0..spec.instances {
            let pid = st.spawn(&spec.unit, spec.uid, Some(exe.clone()));
            if let Some(p) = st.procs.get_mut(&pid) {
                p.memory = saturating_u64((spec.memory_mb * 1024.0 * 1024.0).round());
                p.net.sockets = u32::from(networked);
            }
            let mut tids = vec![pid];
            for _ in 1..spec.threads {
                if let Ok(t) = st.spawn_thread(pid) {
                    tids.push(t);
                }
            }
            let mut inst = Inst {
                pid,
                alive: true,
                ..Inst::default()
            };
            let inst_idx = insts.len();
            for tid in tids {
                if let Some(p) = policy {
                    // Outside atoll any policy is allowed; a refusal leaves
                    // the default.
                    let _ = st.set_policy(tid, p);
                }
                if cache_penalty > 0.0 {
                    st.set_thread_cache_penalty(tid, cache_penalty);
                }
                let th = self.threads.len();
                self.threads.push(ThreadRt {
                    tid,
                    app,
                    inst: inst_idx,
                    state: TState::Blocked,
                    seq: 0,
                    pos: 0,
                    count: 0,
                    inbox: 0,
                });
                self.by_tid.insert(tid, th);
                inst.threads.push(th);
            }
            insts.push(inst);
        }
        let rt: &mut AppRt = &mut self.apps[app];
        rt.insts = insts;
        rt.started = Some(self.now);
        self.start_program(st, app);
        self.resend_pending(st, app);
    }

    fn start_program(&mut self, st: &mut SimState, app: usize) {
        let program = self.program(app).clone();
        let ninst = self.apps[app].insts.len();
        for i in 0..ninst {
            let ths = self.apps[app].insts[i].threads.clone();
            match &program {
                Program::Barrier { .. } => {
                    for &th in &ths {
                        self.set_running(st, th);
                        self.step(st, th, Next::Compute);
                    }
                }
                Program::Malleable { .. } => {
                    let inst = &mut self.apps[app].insts[i];
                    inst.want = inst.thread_count();
                    self.start_round(st, app, i);
                }
                Program::Hog { cpu_ms } => {
                    for &th in &ths {
                        self.set_running(st, th);
                        if let Some(ms) = cpu_ms {
                            self.compute(st, th, ms * 1e6, Next::HogDone);
                        }
                    }
                }
                Program::Client {
                    rate_per_s: None, ..
                } => {
                    for &th in &ths {
                        self.set_running(st, th);
                        self.step(st, th, Next::Issue);
                    }
                }
                Program::Client {
                    rate_per_s: Some(_),
                    ..
                } => {
                    self.apps[app].insts[i].idle = ths.iter().rev().copied().collect();
                    self.at(self.now, Ev::Generate(app, i));
                }
                Program::Service { .. } | Program::StreamServer { .. } => {
                    self.apps[app].insts[i].idle = ths.iter().rev().copied().collect();
                }
                Program::StreamClient { .. } => {
                    self.apps[app].insts[i].idle = ths.iter().rev().copied().collect();
                    self.apps[app].insts[i].play = self.playback_for(app);
                }
                Program::Disk { .. } => {
                    for &th in &ths {
                        self.disk_thread_start(th, app);
                        self.set_running(st, th);
                        self.step(st, th, Next::DiskIssue);
                    }
                }
            }
        }
        if let Program::StreamServer { .. } = program {
            self.start_streams(app);
        }
    }

    /// Makes a (new or blocked) thread runnable at once, no delay.
    pub(super) fn set_running(&mut self, st: &mut SimState, th: usize) {
        let t = &mut self.threads[th];
        st.set_thread_runnable(t.tid, true);
        t.state = TState::Running(None);
    }

    /// Gives a running thread `cpu_ns` of CPU work, then `next`.
    pub(super) fn compute(&mut self, st: &mut SimState, th: usize, cpu_ns: f64, next: Next) {
        let t = &mut self.threads[th];
        t.state = TState::Running(Some(next));
        if cpu_ns > 0.0 {
            if next == Next::SpinOut {
                // Spinning is plain CPU time, never slowed by the cache.
                st.set_thread_cpu_work(t.tid, cpu_ns);
            } else {
                st.set_thread_work(t.tid, cpu_ns);
            }
        } else {
            st.clear_thread_work(t.tid);
            t.seq += 1;
            let seq = t.seq;
            self.at(self.now, Ev::Ready(th, seq));
        }
    }

    /// Blocks a thread.
    pub(super) fn block(&mut self, st: &mut SimState, th: usize) {
        let t = &mut self.threads[th];
        st.set_thread_runnable(t.tid, false);
        st.clear_thread_work(t.tid);
        t.seq += 1;
        t.state = TState::Blocked;
    }

    /// Blocks a thread until `at`, then wakes it to `next`.
    pub(super) fn sleep_until(&mut self, st: &mut SimState, th: usize, at: u64) {
        self.block(st, th);
        let seq = self.threads[th].seq;
        self.at(at, Ev::Think(th, seq));
    }

    /// Wakes a blocked thread: after the wakeup delay it runs `next` (at
    /// once, within this event, if there is no delay).
    pub(super) fn wake(&mut self, st: &mut SimState, th: usize, next: Next) {
        let t = &mut self.threads[th];
        if t.state == TState::Done {
            return;
        }
        let delay = super::ns(st.wake_delay(t.tid));
        t.seq += 1;
        t.state = TState::Waking {
            next,
            since: self.now,
        };
        if delay == 0 {
            // A CPU is free: it runs now.
            self.join(st, th);
            return;
        }
        let seq = t.seq;
        self.at(self.now + delay, Ev::Join(th, seq));
    }

    /// The wakeup delay is over: the thread runs.
    pub(super) fn join(&mut self, st: &mut SimState, th: usize) {
        let t = &mut self.threads[th];
        let TState::Waking { next, since } = t.state else {
            return;
        };
        st.add_wait(t.tid, self.now.saturating_sub(since) as f64);
        st.set_thread_runnable(t.tid, true);
        t.state = TState::Running(None);
        self.step(st, th, next);
    }

    /// A compute phase ended.
    pub(super) fn phase_done(&mut self, st: &mut SimState, th: usize) {
        if let TState::Running(Some(next)) = self.threads[th].state {
            self.threads[th].state = TState::Running(None);
            self.step(st, th, next);
        }
    }

    /// The thread has nothing more to do.
    pub(super) fn finish_thread(&mut self, st: &mut SimState, th: usize) {
        if self.threads[th].state == TState::Done {
            return;
        }
        self.block(st, th);
        self.threads[th].state = TState::Done;
        let (app, inst) = (self.threads[th].app, self.threads[th].inst);
        let i = &mut self.apps[app].insts[inst];
        i.done_threads += 1;
        if i.done_threads as usize == i.threads.len() {
            self.finish_inst(st, app, inst);
        }
    }

    /// The instance is done: its threads stop and its process exits.
    pub(super) fn finish_inst(&mut self, st: &mut SimState, app: usize, inst: usize) {
        if self.apps[app].insts[inst].finished.is_some() {
            return;
        }
        for th in self.apps[app].insts[inst].threads.clone() {
            if self.threads[th].state != TState::Done {
                self.block(st, th);
                self.threads[th].state = TState::Done;
            }
        }
        st.sync();
        let i = &mut self.apps[app].insts[inst];
        i.finished = Some(self.now);
        i.alive = false;
        i.idle.clear();
        let pid = i.pid;
        let cpu: f64 = i
            .threads
            .iter()
            .filter_map(|&th| st.threads.get(&self.threads[th].tid))
            .map(|t| st.cpu_ns_of(t))
            .sum();
        for &th in &i.threads {
            self.by_tid.remove(&self.threads[th].tid);
        }
        let _ = st.exit(pid);
        let rt = &mut self.apps[app];
        rt.cpu_exited_ns += cpu;
        rt.finished_insts += 1;
        if rt.finished_insts as usize == rt.insts.len() {
            rt.finished = Some(self.now);
        }
    }

    /// The next instance of `app` to send to (round robin over live ones).
    pub(super) fn pick_inst(&mut self, app: usize) -> Option<usize> {
        let rt = &mut self.apps[app];
        let n = rt.insts.len();
        for _ in 0..n {
            let i = rt.next_inst % n;
            rt.next_inst = rt.next_inst.wrapping_add(1);
            if rt.insts[i].alive {
                return Some(i);
            }
        }
        None
    }
}
