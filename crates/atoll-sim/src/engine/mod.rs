//! The discrete-event engine: runs a [`WorkloadSpec`] on a [`SimPlatform`]
//! on the simulated clock.
//!
//! # Loop
//!
//! Two sources of events: the engine's own queue (app starts, wakeups,
//! timers, network deliveries, disk completions), a binary heap ordered by
//! time then insertion; and the CPU model's completion heap (the instant a
//! thread's compute phase has received its CPU time at the rates in force).
//! [`Engine::run_until`] repeatedly takes the earlier of the two, moves the
//! simulated clock there, and handles *everything* due at that instant
//! before the model recomputes rates once for the instant. Changes the
//! daemon makes between calls (`apply`, moves, policies, slices) are
//! picked up at the next step: the model recomputes rates from the time
//! they were made and re-times every running phase.
//!
//! # Threads
//!
//! Each simulated thread is runnable (computing, with or without a work
//! target) or blocked (at a barrier, waiting for a request, a reply, the
//! disk, a timer). A blocked thread that is woken is not runnable at once:
//! it waits the wakeup delay of the model (see `model::wake`: contention on
//! its CPUs and its slice), counted as run-queue delay, and then continues.
//! A thread that is still running when it needs to continue (the last to
//! reach a barrier, a server thread with a queue) goes on without delay.
//!
//! # Network path
//!
//! Messages (requests, replies, stream chunks) go from a process to a
//! process: the sender's socket holds them (`send_queued`) until they
//! arrive; each receiving process has one link (FIFO) that carries
//! `bytes / bandwidth`, then `latency` passes; on arrival they sit in the
//! receiver's socket (`recv_queued`) until one of its threads reads them,
//! when `bytes_received` grows (`bytes_sent` grows on arrival). The
//! simulated sockets are read through [`NetMonitor`](atoll_core::comm::NetMonitor)
//! on the [`SimPlatform`].
//!
//! The disk model is in `disk`, the stream model in `stream`, malleable
//! apps (thread counts that change between rounds) in `malleable`.

mod disk;
mod malleable;
mod net;
mod programs;
mod report;
mod stream;
mod threads;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use atoll_core::num::saturating_u64;
use disk::Disk;
pub use malleable::MalleableState;
use net::Net;
pub use report::{
    AppReport, AppSample, DiskReport, LatencyReport, Sample, StreamReport, WorkloadReport,
};
use stream::{Playback, Stream};

use crate::platform::SimPlatform;
use crate::state::{SimState, TidMap};
use crate::workload::{Program, Rng, WorkloadError, WorkloadSpec};

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What a thread does when it next runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Next {
    /// Barrier: start a compute phase.
    Compute,
    /// Barrier: the phase is done; arrive.
    Arrive,
    /// Malleable: spun at the barrier for the spin budget; block.
    SpinOut,
    /// Hog: done.
    HogDone,
    /// Queue servers: take the next job.
    Pick,
    /// Service: CPU for a request spent.
    Served(usize),
    /// Service or closed client: a reply to request `.0` is here.
    GotReply(usize),
    /// Closed client: issue the next request.
    Issue,
    /// Closed client: CPU spent; send.
    Send,
    /// Open client: CPU spent on a reply; record it.
    Recorded(usize),
    /// Stream server: chunk `n` of stream `s` produced.
    Produced { stream: usize, n: u64 },
    /// Stream client: a chunk of `bytes` processed.
    Consumed { bytes: u64, last: bool },
    /// Disk: issue the next request.
    DiskIssue,
    /// Disk: the request is done.
    DiskDone,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum TState {
    /// Runnable and computing (or, for a hog, just runnable).
    Running(Option<Next>),
    /// Waiting out its wakeup delay.
    Waking { next: Next, since: u64 },
    /// Blocked.
    Blocked,
    /// Finished.
    Done,
}

/// One simulated thread the engine drives.
#[derive(Debug)]
struct ThreadRt {
    tid: u32,
    app: usize,
    inst: usize,
    state: TState,
    /// Invalidates stale timer events.
    seq: u64,
    /// Disk: next sequential offset; requests issued.
    pos: u64,
    count: u64,
    /// Reply bytes delivered to it, not yet read.
    inbox: u64,
}

impl Inst {
    /// How many threads it has. They come from the workload's `threads`,
    /// a `u32`, so the count fits.
    fn thread_count(&self) -> u32 {
        u32::try_from(self.threads.len()).expect("a workload's thread count is a u32")
    }
}

/// A queued job of a queue-serving instance, with its bytes on the socket.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Job {
    Request(usize),
    Reply(usize),
    Produce { stream: usize, n: u64 },
    Chunk { n: u64, last: bool },
}

/// One process of an app.
#[derive(Debug, Default)]
struct Inst {
    pid: u32,
    alive: bool,
    threads: Vec<usize>,
    done_threads: u32,
    finished: Option<u64>,
    queue: VecDeque<(Job, u64)>,
    idle: Vec<usize>,
    // Barrier.
    arrived: u32,
    round: u32,
    waiting: Vec<usize>,
    // Malleable: threads wanted from the next round on, threads in this
    // round, paused (no thread active).
    want: u32,
    cur: u32,
    paused: bool,
    // Clients.
    issued: u64,
    answered: u64,
    // Stream client.
    play: Option<Playback>,
}

/// One app at run time.
#[derive(Debug)]
struct AppRt {
    insts: Vec<Inst>,
    rng: Rng,
    started: Option<u64>,
    finished: Option<u64>,
    finished_insts: u32,
    /// Latencies recorded, ns (clients: end to end; services: arrival at
    /// the instance to reply sent).
    latencies: Vec<u64>,
    cpu_exited_ns: f64,
    next_inst: usize,
    /// Messages for it before it started.
    pending: Vec<net::Msg>,
    /// The app it sends to (client `target`, service `next`), if any.
    target: usize,
    /// Stream server: its streams.
    streams: Vec<Stream>,
    /// Disk: requests done, bytes, summed latency ns.
    io_done: u64,
    io_bytes: u64,
    io_latency_ns: u64,
}

/// A request in flight.
#[derive(Clone, Copy, Debug)]
struct Req {
    /// Who gets the reply: a thread, or an instance's queue.
    origin: Origin,
    /// The app whose latency it is.
    app: usize,
    issued: u64,
    arrived: u64,
    parent: Option<usize>,
    /// Request bytes.
    bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Origin {
    Thread(usize),
    Inst(usize, usize),
}

#[derive(Debug)]
enum Ev {
    Start(usize),
    /// The thread's wakeup delay is over.
    Join(usize, u64),
    /// A zero-CPU phase is over.
    Ready(usize, u64),
    /// A closed client's think time is over.
    Think(usize, u64),
    Generate(usize, usize),
    Deliver(net::Msg),
    Tick(usize, usize),
    Underrun(usize, usize, u64),
    DiskDone,
}

/// A queued event: its time, insertion order, and slot in `Engine::slab`
/// (events are kept out of the heap so that sifting moves 24 bytes).
#[derive(Debug)]
struct Timed {
    t: u64,
    seq: u64,
    slot: usize,
}

impl PartialEq for Timed {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timed {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.t, self.seq).cmp(&(o.t, o.seq))
    }
}

/// Runs a workload on a simulated machine (see the module docs).
#[derive(Debug)]
pub struct Engine {
    sim: SimPlatform,
    spec: WorkloadSpec,
    seed: u64,
    now: u64,
    queue: BinaryHeap<Reverse<Timed>>,
    slab: Vec<Option<Ev>>,
    free_slots: Vec<usize>,
    seq: u64,
    apps: Vec<AppRt>,
    threads: Vec<ThreadRt>,
    by_tid: TidMap<usize>,
    reqs: Vec<Option<Req>>,
    free_reqs: Vec<usize>,
    net: Net,
    disk: Option<Disk>,
    events: u64,
    done_buf: Vec<u32>,
}

impl Engine {
    /// An engine for `workload` on `sim`, with random draws from `seed`.
    /// Apps start at their `start_ms` after the simulated clock's time now.
    pub fn new(sim: SimPlatform, workload: WorkloadSpec, seed: u64) -> Result<Self, WorkloadError> {
        workload.validate()?;
        let now = ns(sim.now());
        let apps = workload
            .apps
            .iter()
            .enumerate()
            .map(|(i, a)| AppRt {
                insts: Vec::new(),
                rng: Rng::stream(seed, i as u64 + 1),
                started: None,
                finished: None,
                finished_insts: 0,
                latencies: Vec::new(),
                cpu_exited_ns: 0.0,
                next_inst: 0,
                pending: Vec::new(),
                target: match &a.program {
                    Program::Client { target, .. }
                    | Program::Service {
                        next: Some(target), ..
                    } => workload
                        .apps
                        .iter()
                        .position(|b| &b.name == target)
                        .unwrap_or(usize::MAX),
                    _ => usize::MAX,
                },
                streams: Vec::new(),
                io_done: 0,
                io_bytes: 0,
                io_latency_ns: 0,
            })
            .collect();
        let mut e = Self {
            net: Net::new(&workload.network),
            disk: workload.disk.clone().map(Disk::new),
            sim,
            seed,
            now,
            queue: BinaryHeap::new(),
            slab: Vec::new(),
            free_slots: Vec::new(),
            seq: 0,
            apps,
            threads: Vec::new(),
            by_tid: TidMap::default(),
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            events: 0,
            done_buf: Vec::new(),
            spec: workload,
        };
        for i in 0..e.spec.apps.len() {
            let at = now.saturating_add(saturating_u64((e.spec.apps[i].start_ms * 1e6).round()));
            e.at(at, Ev::Start(i));
        }
        Ok(e)
    }

    /// The machine it runs on.
    pub fn sim(&self) -> &SimPlatform {
        &self.sim
    }

    /// The workload.
    pub fn spec(&self) -> &WorkloadSpec {
        &self.spec
    }

    /// The pids of app `app`'s live processes (empty before it starts).
    pub fn pids(&self, app: &str) -> Vec<u32> {
        self.spec
            .apps
            .iter()
            .position(|a| a.name == app)
            .map(|a| {
                self.apps[a]
                    .insts
                    .iter()
                    .filter(|i| i.alive)
                    .map(|i| i.pid)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The thread ids of app `app`'s live processes.
    pub fn tids(&self, app: &str) -> Vec<u32> {
        self.spec
            .apps
            .iter()
            .position(|a| a.name == app)
            .map(|a| {
                self.apps[a]
                    .insts
                    .iter()
                    .filter(|i| i.alive)
                    .flat_map(|i| i.threads.iter().map(|&th| self.threads[th].tid))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Events handled so far (queue events and phase completions).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// When the next event is due (a queued event or a compute phase
    /// ending at the current rates), `None` if nothing will happen.
    pub fn next_event(&self) -> Option<Duration> {
        let mut st = self.sim.lock();
        st.sync();
        let model = st.next_completion();
        let queued = self.queue.peek().map(|e| e.0.t);
        let t = match (model, queued) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(Duration::from_nanos(t))
    }

    /// Whether every app that can finish has finished (`false` when none
    /// can: such a workload runs until the caller stops).
    pub fn done(&self) -> bool {
        let mut any = false;
        for (a, rt) in self.spec.apps.iter().zip(&self.apps) {
            if a.program.finite() {
                any = true;
                if rt.finished.is_none() {
                    return false;
                }
            }
        }
        any
    }

    /// Handles every event due up to `t` and leaves the clock at `t` (or
    /// where it already was, if later).
    pub fn run_until(&mut self, t: Duration) {
        let target = ns(t);
        let sim = self.sim.clone();
        let mut st = sim.lock();
        loop {
            st.sync();
            self.now = self.now.max(st.now_ns());
            let model = st.next_completion();
            let queued = self.queue.peek().map(|e| e.0.t);
            let next = match (model, queued) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => break,
            };
            if next > target {
                break;
            }
            if next > self.now {
                st.clock.set(Duration::from_nanos(next));
                st.sync();
                self.now = next;
            }
            let mut done = std::mem::take(&mut self.done_buf);
            done.clear();
            st.take_completed(&mut done);
            for &tid in &done {
                self.events += 1;
                if let Some(&th) = self.by_tid.get(&tid) {
                    self.phase_done(&mut st, th);
                }
            }
            self.done_buf = done;
            while self.queue.peek().is_some_and(|e| e.0.t <= self.now) {
                let Some(Reverse(e)) = self.queue.pop() else {
                    break;
                };
                self.events += 1;
                let ev = self.slab[e.slot].take();
                self.free_slots.push(e.slot);
                if let Some(ev) = ev {
                    self.handle(&mut st, ev);
                }
            }
        }
        if target > self.now {
            st.clock.set(Duration::from_nanos(target));
            st.sync();
            self.now = target;
        }
    }

    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        let slot = match self.free_slots.pop() {
            Some(i) => {
                self.slab[i] = Some(ev);
                i
            }
            None => {
                self.slab.push(Some(ev));
                self.slab.len() - 1
            }
        };
        self.queue.push(Reverse(Timed {
            t,
            seq: self.seq,
            slot,
        }));
    }

    fn handle(&mut self, st: &mut SimState, ev: Ev) {
        match ev {
            Ev::Start(app) => self.start_app(st, app),
            Ev::Join(th, seq) => {
                if self.threads[th].seq == seq {
                    self.join(st, th);
                }
            }
            Ev::Ready(th, seq) => {
                if self.threads[th].seq == seq {
                    self.phase_done(st, th);
                }
            }
            Ev::Think(th, seq) => {
                if self.threads[th].seq == seq {
                    self.wake(st, th, Next::Issue);
                }
            }
            Ev::Generate(app, inst) => self.generate(st, app, inst),
            Ev::Deliver(msg) => self.deliver(st, msg),
            Ev::Tick(app, stream) => self.tick(st, app, stream),
            Ev::Underrun(app, inst, version) => self.underrun(st, app, inst, version),
            Ev::DiskDone => self.disk_done(st),
        }
    }

    fn new_req(&mut self, r: Req) -> usize {
        match self.free_reqs.pop() {
            Some(i) => {
                self.reqs[i] = Some(r);
                i
            }
            None => {
                self.reqs.push(Some(r));
                self.reqs.len() - 1
            }
        }
    }

    fn take_req(&mut self, i: usize) -> Option<Req> {
        let r = self.reqs.get_mut(i)?.take();
        if r.is_some() {
            self.free_reqs.push(i);
        }
        r
    }

    fn program(&self, app: usize) -> &Program {
        &self.spec.apps[app].program
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_ordered_by_time_then_insertion() {
        let mut h = BinaryHeap::new();
        for (t, seq) in [(5, 1), (3, 2), (5, 0), (3, 1)] {
            h.push(Reverse(Timed { t, seq, slot: 0 }));
        }
        let order: Vec<(u64, u64)> =
            std::iter::from_fn(|| h.pop().map(|e| (e.0.t, e.0.seq))).collect();
        assert_eq!(order, [(3, 1), (3, 2), (5, 0), (5, 1)]);
    }
}
