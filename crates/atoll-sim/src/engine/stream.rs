//! Streaming, after seed 003's streaming experiment: a server sends each
//! client a stream at a constant rate; a client plays it from a buffer.
//!
//! - Every instance of the client app is one stream, served by server
//!   instance `k mod servers`. The stream is `ceil(duration / interval)`
//!   chunks, `interval = chunk / rate`; chunk `n` is *due* at
//!   `start + n · interval` (the server app's start): a timer puts a
//!   produce job in the server instance's queue, a server thread spends
//!   `cpu_us` on it and sends the chunk. A starved server falls behind;
//!   its jobs queue up (nothing is dropped).
//! - The client's threads read each chunk from the socket and spend
//!   `cpu_us` on it; then it enters the playback buffer (bytes of media).
//! - Playback starts once the buffer holds `prefill_ms` of media (or the
//!   last chunk is in) and drains at the stream rate. If it runs dry before
//!   the last chunk is in, that is an *under-run*: playback stops until
//!   the buffer is refilled to the prefill, and the stall is timed. The
//!   initial fill is the start-up delay, not an under-run. The client
//!   finishes when the last chunk has played.

use atoll_core::num::saturating_u64;

use super::net::Dest;
use super::{Engine, Ev, Job, Next};
use crate::state::SimState;
use crate::workload::Program;

/// One stream, at its server.
#[derive(Clone, Debug)]
pub(super) struct Stream {
    pub client_app: usize,
    pub client_inst: usize,
    pub server_inst: usize,
    pub total: u64,
    pub next: u64,
    pub sent: u64,
    pub start: u64,
    pub interval_ns: f64,
    pub chunk_bytes: u64,
}

/// A client's playback buffer.
#[derive(Clone, Debug, Default)]
pub(super) struct Playback {
    /// Media rate, bytes per ns.
    pub rate: f64,
    /// Bytes needed to (re)start.
    pub prefill: f64,
    /// Bytes buffered as of `t0`.
    pub level: f64,
    pub t0: u64,
    pub playing: bool,
    pub version: u64,
    pub chunks: u64,
    pub total: u64,
    pub underruns: u64,
    /// When the current stall (or the start-up) began.
    pub stall_since: Option<u64>,
    pub stalled_ns: u64,
    pub started_at: Option<u64>,
    pub created: u64,
}

impl Playback {
    fn fold(&mut self, now: u64) {
        if self.playing {
            self.level = (self.level - self.rate * now.saturating_sub(self.t0) as f64).max(0.0);
        }
        self.t0 = now;
    }

    /// Adds a chunk; returns when the buffer runs dry if playing.
    fn add(&mut self, now: u64, bytes: u64) -> Option<u64> {
        self.fold(now);
        self.level += bytes as f64;
        self.chunks += 1;
        let all_in = self.chunks >= self.total;
        if !self.playing && (self.level >= self.prefill || all_in) {
            self.playing = true;
            if self.started_at.is_none() {
                self.started_at = Some(now);
            } else if let Some(s) = self.stall_since {
                self.stalled_ns += now.saturating_sub(s);
            }
            self.stall_since = None;
        }
        self.version += 1;
        self.playing
            .then(|| now + saturating_u64((self.level / self.rate).ceil()))
    }
}

/// Rate (bytes/ns), chunk bytes, interval (ns) and chunk count of a
/// stream server's program.
fn params(p: &Program) -> Option<(f64, u64, f64, u64)> {
    let Program::StreamServer {
        rate_kbps,
        chunk_kb,
        duration_ms,
        ..
    } = p
    else {
        return None;
    };
    let rate = rate_kbps * 1000.0 / 8.0 / 1e9;
    let chunk = (chunk_kb * 1024.0).round().max(1.0);
    let interval = chunk / rate;
    let total = saturating_u64(((duration_ms * 1e6) / interval).ceil()).max(1);
    Some((rate, saturating_u64(chunk), interval, total))
}

impl Engine {
    fn server_of(&self, client_app: usize) -> Option<usize> {
        let name = &self.spec.apps[client_app].name;
        self.spec.apps.iter().position(
            |a| matches!(&a.program, Program::StreamServer { clients, .. } if clients == name),
        )
    }

    /// A client instance's empty buffer.
    pub(super) fn playback_for(&self, client_app: usize) -> Option<Playback> {
        let server = self.server_of(client_app)?;
        let Program::StreamClient { prefill_ms, .. } = self.spec.apps[client_app].program else {
            return None;
        };
        let (rate, _, _, total) = params(&self.spec.apps[server].program)?;
        Some(Playback {
            rate,
            prefill: rate * prefill_ms * 1e6,
            total,
            t0: self.now,
            stall_since: Some(self.now),
            created: self.now,
            ..Playback::default()
        })
    }

    /// A server app starts its streams.
    pub(super) fn start_streams(&mut self, app: usize) {
        let Program::StreamServer { clients, .. } = &self.spec.apps[app].program else {
            return;
        };
        let Some(client_app) = self.spec.apps.iter().position(|a| &a.name == clients) else {
            return;
        };
        let Some((_, chunk, interval, total)) = params(&self.spec.apps[app].program) else {
            return;
        };
        let clients = self.spec.apps[client_app].instances as usize;
        let servers = self.apps[app].insts.len().max(1);
        for k in 0..clients {
            self.apps[app].streams.push(Stream {
                client_app,
                client_inst: k,
                server_inst: k % servers,
                total,
                next: 0,
                sent: 0,
                start: self.now,
                interval_ns: interval,
                chunk_bytes: chunk,
            });
            self.at(self.now, Ev::Tick(app, k));
        }
    }

    /// Chunk `next` of a stream is due: queue its production.
    pub(super) fn tick(&mut self, st: &mut SimState, app: usize, s: usize) {
        let stream = &mut self.apps[app].streams[s];
        let n = stream.next;
        stream.next += 1;
        let more = stream.next.lt(&stream.total).then(|| {
            stream.start + saturating_u64((stream.next as f64 * stream.interval_ns).round())
        });
        let server_inst = stream.server_inst;
        let i = &mut self.apps[app].insts[server_inst];
        if !i.alive {
            return;
        }
        i.queue.push_back((Job::Produce { stream: s, n }, 0));
        if let Some(t) = i.idle.pop() {
            self.wake(st, t, Next::Pick);
        }
        if let Some(at) = more {
            self.at(at, Ev::Tick(app, s));
        }
    }

    pub(super) fn produced(&mut self, st: &mut SimState, th: usize, s: usize, n: u64) {
        let (app, inst) = (self.threads[th].app, self.threads[th].inst);
        let stream = &mut self.apps[app].streams[s];
        stream.sent += 1;
        let (to, bytes) = (
            Dest::Inst(stream.client_app, stream.client_inst),
            stream.chunk_bytes,
        );
        let last = n + 1 >= stream.total;
        let from = self.pid_of(th);
        self.send(st, from, to, bytes, Job::Chunk { n, last });
        let all_sent = self.apps[app]
            .streams
            .iter()
            .filter(|x| x.server_inst == inst)
            .all(|x| x.sent >= x.total);
        if all_sent {
            self.finish_inst(st, app, inst);
        } else {
            self.step(st, th, Next::Pick);
        }
    }

    pub(super) fn consumed(&mut self, st: &mut SimState, th: usize, bytes: u64, _last: bool) {
        let (app, inst) = (self.threads[th].app, self.threads[th].inst);
        let now = self.now;
        let dry = self.apps[app].insts[inst]
            .play
            .as_mut()
            .and_then(|p| p.add(now, bytes).map(|t| (t, p.version)));
        if let Some((at, version)) = dry {
            self.at(at, Ev::Underrun(app, inst, version));
        }
        self.step(st, th, Next::Pick);
    }

    /// A client's buffer may have run dry.
    pub(super) fn underrun(&mut self, st: &mut SimState, app: usize, inst: usize, version: u64) {
        let now = self.now;
        let Some(p) = self.apps[app].insts[inst].play.as_mut() else {
            return;
        };
        if p.version != version || !p.playing {
            return;
        }
        p.fold(now);
        p.level = 0.0;
        if p.chunks >= p.total {
            self.finish_inst(st, app, inst);
            return;
        }
        p.underruns += 1;
        p.playing = false;
        p.stall_since = Some(now);
    }
}
