//! The network path between processes (see the engine's module docs):
//! per-receiver FIFO links with a bandwidth and a latency, and the
//! simulated sockets' queues and counters on each process.

use std::collections::HashMap;

use atoll_core::num::saturating_u64;

use super::{Engine, Ev, Job, Next, TState};
use crate::state::SimState;
use crate::workload::NetworkSpec;

/// Where a message goes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Dest {
    /// An instance's queue (`usize::MAX`: any live instance, chosen when
    /// it can be).
    Inst(usize, usize),
    /// A thread waiting for a reply.
    Thread(usize),
}

/// A message on its way.
#[derive(Clone, Copy, Debug)]
pub(super) struct Msg {
    pub from: u32,
    pub to: Dest,
    pub bytes: u64,
    pub job: Job,
}

/// The links.
#[derive(Debug)]
pub(super) struct Net {
    latency_ns: u64,
    ns_per_byte: f64,
    /// Receiving pid → when its link is free.
    links: HashMap<u32, u64>,
}

impl Net {
    pub(super) fn new(spec: &NetworkSpec) -> Self {
        Self {
            latency_ns: saturating_u64((spec.latency_us * 1e3).round()),
            ns_per_byte: 8.0 / spec.bandwidth_gbps,
            links: HashMap::new(),
        }
    }
}

impl Engine {
    /// A thread of `pid` reads `bytes` from its sockets.
    pub(super) fn read(st: &mut SimState, pid: u32, bytes: u64) {
        if let Some(p) = st.procs.get_mut(&pid) {
            p.net.recv_queued = p.net.recv_queued.saturating_sub(bytes);
            p.net.bytes_received += bytes;
        }
    }

    fn dest_pid(&self, to: Dest) -> Option<u32> {
        match to {
            Dest::Inst(a, i) => self.apps.get(a)?.insts.get(i).map(|x| x.pid),
            Dest::Thread(th) => Some(self.pid_of(th)),
        }
    }

    /// Sends `bytes` from process `from` to `to`.
    pub(super) fn send(&mut self, st: &mut SimState, from: u32, to: Dest, bytes: u64, job: Job) {
        if let Dest::Inst(a, i) = to {
            if self.apps[a].started.is_none() || i == usize::MAX {
                self.send_to_app_inst(st, from, a, i, bytes, job);
                return;
            }
        }
        let Some(to_pid) = self.dest_pid(to) else {
            self.dropped(job);
            return;
        };
        if let Some(p) = st.procs.get_mut(&from) {
            p.net.send_queued += bytes;
        }
        let free = self.net.links.entry(to_pid).or_insert(0);
        let start = (*free).max(self.now);
        let tx = saturating_u64((bytes as f64 * self.net.ns_per_byte).ceil());
        *free = start + tx;
        let arrive = start + tx + self.net.latency_ns;
        self.at(
            arrive,
            Ev::Deliver(Msg {
                from,
                to,
                bytes,
                job,
            }),
        );
    }

    /// Sends to any live instance of `app` (held until it starts).
    pub(super) fn send_to_app(
        &mut self,
        st: &mut SimState,
        from: u32,
        app: usize,
        bytes: u64,
        job: Job,
    ) {
        self.send_to_app_inst(st, from, app, usize::MAX, bytes, job);
    }

    fn send_to_app_inst(
        &mut self,
        st: &mut SimState,
        from: u32,
        app: usize,
        inst: usize,
        bytes: u64,
        job: Job,
    ) {
        if app >= self.apps.len() {
            self.dropped(job);
            return;
        }
        if self.apps[app].started.is_none() {
            self.apps[app].pending.push(Msg {
                from,
                to: Dest::Inst(app, inst),
                bytes,
                job,
            });
            return;
        }
        let inst = if inst == usize::MAX {
            self.pick_inst(app)
        } else {
            Some(inst)
        };
        match inst {
            Some(i) => self.send(st, from, Dest::Inst(app, i), bytes, job),
            None => self.dropped(job),
        }
    }

    /// Sends what waited for `app` to start.
    pub(super) fn resend_pending(&mut self, st: &mut SimState, app: usize) {
        for m in std::mem::take(&mut self.apps[app].pending) {
            if let Dest::Inst(a, i) = m.to {
                self.send_to_app_inst(st, m.from, a, i, m.bytes, m.job);
            }
        }
    }

    /// A message with nowhere to go: its request is forgotten.
    fn dropped(&mut self, job: Job) {
        if let Job::Request(r) | Job::Reply(r) = job {
            self.take_req(r);
        }
    }

    /// A message arrives.
    pub(super) fn deliver(&mut self, st: &mut SimState, m: Msg) {
        if let Some(p) = st.procs.get_mut(&m.from) {
            p.net.send_queued = p.net.send_queued.saturating_sub(m.bytes);
            p.net.bytes_sent += m.bytes;
        }
        match m.to {
            Dest::Inst(app, inst) => {
                let i = &mut self.apps[app].insts[inst];
                if !i.alive {
                    self.dropped(m.job);
                    return;
                }
                if let Some(p) = st.procs.get_mut(&i.pid) {
                    p.net.recv_queued += m.bytes;
                }
                if let Job::Request(r) = m.job {
                    if let Some(Some(req)) = self.reqs.get_mut(r) {
                        req.arrived = self.now;
                    }
                }
                i.queue.push_back((m.job, m.bytes));
                if let Some(t) = i.idle.pop() {
                    self.wake(st, t, Next::Pick);
                }
            }
            Dest::Thread(th) => {
                let pid = self.pid_of(th);
                let t = &mut self.threads[th];
                if t.state != TState::Blocked {
                    self.dropped(m.job);
                    return;
                }
                if let Some(p) = st.procs.get_mut(&pid) {
                    p.net.recv_queued += m.bytes;
                }
                t.inbox += m.bytes;
                if let Job::Reply(r) = m.job {
                    self.wake(st, th, Next::GotReply(r));
                }
            }
        }
    }
}
