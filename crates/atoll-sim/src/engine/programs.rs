//! The programs' steps: barrier phases, hogs, and request chains (closed
//! and open-loop clients, services calling a next tier).
//!
//! A service instance keeps one FIFO queue of requests (and a stack of idle
//! threads): an arriving request wakes an idle thread if there is one; a
//! thread that finishes a request takes the next one without sleeping. A
//! service thread calling the next tier blocks until the reply comes (one
//! thread per request in flight, as a blocking RPC server). Latency is
//! recorded for clients (issue to the reply read and processed) and for
//! services (arrival at the instance to reply sent).

use atoll_core::num::saturating_u64;

use super::net::Dest;
use super::{Engine, Job, Next, Origin, Req};
use crate::state::SimState;
use crate::workload::Program;

impl Engine {
    /// Runs continuation `next` of a running thread.
    pub(super) fn step(&mut self, st: &mut SimState, th: usize, next: Next) {
        match next {
            Next::Compute => {
                let work = self.barrier_phase(th);
                self.compute(st, th, work, Next::Arrive);
            }
            Next::Arrive => self.arrive(st, th),
            Next::SpinOut => self.block(st, th),
            Next::HogDone => self.finish_thread(st, th),
            Next::Pick => self.pick(st, th),
            Next::Served(r) => self.served(st, th, r),
            Next::GotReply(r) => self.got_reply(st, th, r),
            Next::Issue => self.issue(st, th),
            Next::Send => self.send_request(st, th),
            Next::Recorded(r) => self.recorded(st, th, r),
            Next::Produced { stream, n } => self.produced(st, th, stream, n),
            Next::Consumed { bytes, last } => self.consumed(st, th, bytes, last),
            Next::DiskIssue => self.disk_issue(st, th),
            Next::DiskDone => self.disk_after(st, th),
        }
    }

    /// The app `app` sends requests to (its `target` or `next`).
    fn target_of(&self, app: usize) -> usize {
        self.apps[app].target
    }

    /// One barrier phase's CPU work, ns.
    fn barrier_phase(&mut self, th: usize) -> f64 {
        let app = self.threads[th].app;
        let (compute_ms, jitter) = match self.spec.apps[app].program {
            Program::Barrier {
                compute_ms, jitter, ..
            } => (compute_ms, jitter),
            Program::Malleable {
                work_ms, jitter, ..
            } => {
                let inst = &self.apps[app].insts[self.threads[th].inst];
                (work_ms / f64::from(inst.cur.max(1)), jitter)
            }
            _ => return 0.0,
        };
        let f = if jitter > 0.0 {
            1.0 + jitter * self.apps[app].rng.uniform(-1.0, 1.0)
        } else {
            1.0
        };
        compute_ms * 1e6 * f
    }

    fn arrive(&mut self, st: &mut SimState, th: usize) {
        let (app, inst) = (self.threads[th].app, self.threads[th].inst);
        let rounds = match self.spec.apps[app].program {
            Program::Barrier { rounds, .. } => rounds,
            Program::Malleable { .. } => return self.malleable_arrive(st, th),
            _ => return,
        };
        let i = &mut self.apps[app].insts[inst];
        i.arrived += 1;
        if (i.arrived as usize) < i.threads.len() {
            i.waiting.push(th);
            self.block(st, th);
            return;
        }
        i.arrived = 0;
        i.round += 1;
        if i.round >= rounds {
            self.finish_inst(st, app, inst);
            return;
        }
        let waiting = std::mem::take(&mut i.waiting);
        for w in waiting {
            self.wake(st, w, Next::Compute);
        }
        self.step(st, th, Next::Compute);
    }

    /// A queue-serving thread takes its instance's next job, or idles.
    fn pick(&mut self, st: &mut SimState, th: usize) {
        let (app, inst) = (self.threads[th].app, self.threads[th].inst);
        let i = &mut self.apps[app].insts[inst];
        let Some((job, bytes)) = i.queue.pop_front() else {
            i.idle.push(th);
            self.block(st, th);
            return;
        };
        let pid = i.pid;
        Self::read(st, pid, bytes);
        let program = &self.spec.apps[app].program;
        match (job, program) {
            (
                Job::Request(r),
                Program::Service {
                    cpu_us,
                    exponential,
                    ..
                },
            ) => {
                let us = if *exponential {
                    self.apps[app].rng.exp(*cpu_us)
                } else {
                    *cpu_us
                };
                self.compute(st, th, us * 1e3, Next::Served(r));
            }
            (Job::Reply(r), Program::Client { cpu_us, .. }) => {
                let cpu = cpu_us * 1e3;
                self.compute(st, th, cpu, Next::Recorded(r));
            }
            (Job::Produce { stream, n }, Program::StreamServer { cpu_us, .. }) => {
                let cpu = cpu_us * 1e3;
                self.compute(st, th, cpu, Next::Produced { stream, n });
            }
            (Job::Chunk { last, .. }, Program::StreamClient { cpu_us, .. }) => {
                let cpu = cpu_us * 1e3;
                self.compute(st, th, cpu, Next::Consumed { bytes, last });
            }
            _ => self.step(st, th, Next::Pick),
        }
    }

    fn served(&mut self, st: &mut SimState, th: usize, r: usize) {
        let app = self.threads[th].app;
        let Program::Service { next, .. } = &self.spec.apps[app].program else {
            return;
        };
        match next {
            Some(_) => {
                let target = self.target_of(app);
                let Some(parent) = self.reqs.get(r).copied().flatten() else {
                    self.step(st, th, Next::Pick);
                    return;
                };
                let child = self.new_req(Req {
                    origin: Origin::Thread(th),
                    app,
                    issued: self.now,
                    arrived: 0,
                    parent: Some(r),
                    bytes: parent.bytes,
                });
                let from = self.pid_of(th);
                self.block(st, th);
                self.send_to_app(st, from, target, parent.bytes, Job::Request(child));
            }
            None => {
                self.reply(st, th, r);
                self.step(st, th, Next::Pick);
            }
        }
    }

    /// Thread `th` of a service replies to request `r`.
    fn reply(&mut self, st: &mut SimState, th: usize, r: usize) {
        let app = self.threads[th].app;
        let Some(req) = self.reqs.get(r).copied().flatten() else {
            return;
        };
        let bytes = match self.spec.apps[app].program {
            Program::Service { response_bytes, .. } => response_bytes,
            _ => 0,
        };
        self.apps[app]
            .latencies
            .push(self.now.saturating_sub(req.arrived));
        let to = match req.origin {
            Origin::Thread(t) => Dest::Thread(t),
            Origin::Inst(a, i) => Dest::Inst(a, i),
        };
        let from = self.pid_of(th);
        self.send(st, from, to, bytes, Job::Reply(r));
    }

    fn got_reply(&mut self, st: &mut SimState, th: usize, r: usize) {
        let pid = self.pid_of(th);
        let inbox = std::mem::take(&mut self.threads[th].inbox);
        Self::read(st, pid, inbox);
        let app = self.threads[th].app;
        let Some(req) = self.take_req(r) else {
            return;
        };
        match self.spec.apps[app].program {
            Program::Service { .. } => {
                if let Some(parent) = req.parent {
                    self.reply(st, th, parent);
                }
                self.step(st, th, Next::Pick);
            }
            Program::Client { think_ms, .. } => {
                let latency = self.now.saturating_sub(req.issued);
                self.apps[req.app].latencies.push(latency);
                let inst = self.threads[th].inst;
                self.apps[app].insts[inst].answered += 1;
                if think_ms > 0.0 {
                    let until = self.now + saturating_u64((think_ms * 1e6).round());
                    self.sleep_until(st, th, until);
                } else {
                    self.step(st, th, Next::Issue);
                }
            }
            _ => {}
        }
    }

    /// A closed-loop client thread issues its next request, or finishes.
    fn issue(&mut self, st: &mut SimState, th: usize) {
        let (app, inst) = (self.threads[th].app, self.threads[th].inst);
        let Program::Client {
            requests, cpu_us, ..
        } = self.spec.apps[app].program
        else {
            return;
        };
        let i = &mut self.apps[app].insts[inst];
        if requests.is_some_and(|n| i.issued >= n) {
            self.finish_thread(st, th);
            return;
        }
        i.issued += 1;
        self.compute(st, th, cpu_us * 1e3, Next::Send);
    }

    fn send_request(&mut self, st: &mut SimState, th: usize) {
        let app = self.threads[th].app;
        let Program::Client { request_bytes, .. } = self.spec.apps[app].program else {
            return;
        };
        let (target, bytes) = (self.target_of(app), request_bytes);
        let r = self.new_req(Req {
            origin: Origin::Thread(th),
            app,
            issued: self.now,
            arrived: 0,
            parent: None,
            bytes,
        });
        let from = self.pid_of(th);
        self.block(st, th);
        self.send_to_app(st, from, target, bytes, Job::Request(r));
    }

    /// An open-loop client instance issues a request and plans the next.
    pub(super) fn generate(&mut self, st: &mut SimState, app: usize, inst: usize) {
        let Program::Client {
            rate_per_s: Some(rate),
            poisson,
            requests,
            request_bytes,
            ..
        } = &self.spec.apps[app].program
        else {
            return;
        };
        let (rate, poisson, requests, bytes) = (*rate, *poisson, *requests, *request_bytes);
        let target = self.target_of(app);
        let i = &mut self.apps[app].insts[inst];
        if !i.alive || requests.is_some_and(|n| i.issued >= n) {
            return;
        }
        i.issued += 1;
        let more = requests.is_none_or(|n| i.issued < n);
        let pid = i.pid;
        let r = self.new_req(Req {
            origin: Origin::Inst(app, inst),
            app,
            issued: self.now,
            arrived: 0,
            parent: None,
            bytes,
        });
        self.send_to_app(st, pid, target, bytes, Job::Request(r));
        if more {
            let gap_s = if poisson {
                self.apps[app].rng.exp(1.0 / rate)
            } else {
                1.0 / rate
            };
            let at = self.now + saturating_u64((gap_s * 1e9).round()).max(1);
            self.at(at, super::Ev::Generate(app, inst));
        }
    }

    fn recorded(&mut self, st: &mut SimState, th: usize, r: usize) {
        let (app, inst) = (self.threads[th].app, self.threads[th].inst);
        if let Some(req) = self.take_req(r) {
            let latency = self.now.saturating_sub(req.issued);
            self.apps[app].latencies.push(latency);
        }
        let Program::Client { requests, .. } = self.spec.apps[app].program else {
            return;
        };
        let i = &mut self.apps[app].insts[inst];
        i.answered += 1;
        if requests.is_some_and(|n| i.answered >= n) {
            self.finish_inst(st, app, inst);
        } else {
            self.step(st, th, Next::Pick);
        }
    }

    pub(super) fn pid_of(&self, th: usize) -> u32 {
        let t = &self.threads[th];
        self.apps[t.app].insts[t.inst].pid
    }
}
