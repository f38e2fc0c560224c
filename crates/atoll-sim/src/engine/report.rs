//! What the engine reports: a [`WorkloadReport`] at the end (per app:
//! completion, CPU time, latency percentiles, stream under-runs, disk
//! figures) and [`Sample`]s the runner can take at any time for time
//! series (per app: CPU rate now, cumulative CPU, threads by state, queue
//! lengths, bytes waiting in sockets).

use atoll_core::num::saturating_usize;
use serde::{Deserialize, Serialize};

use super::{Engine, TState};
use crate::workload::Program;

/// Latency percentiles (nearest rank), ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    /// Requests counted.
    pub count: u64,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
}

impl LatencyReport {
    /// Percentiles of `ns` (in any order); `None` if empty.
    pub fn of(ns: &[u64]) -> Option<Self> {
        if ns.is_empty() {
            return None;
        }
        let mut v = ns.to_vec();
        v.sort_unstable();
        let rank = |p: f64| {
            let k = saturating_usize((p * v.len() as f64).ceil()).clamp(1, v.len());
            v[k - 1] as f64 / 1e6
        };
        Some(Self {
            count: v.len() as u64,
            mean_ms: v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64 / 1e6,
            p50_ms: rank(0.5),
            p90_ms: rank(0.9),
            p99_ms: rank(0.99),
            max_ms: v[v.len() - 1] as f64 / 1e6,
        })
    }
}

/// A stream client app's playback, summed over its instances.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// Chunks played in.
    pub chunks: u64,
    /// Times a buffer ran dry before its stream's end.
    pub underruns: u64,
    /// Time stalled after under-runs, summed, s.
    pub stalled_s: f64,
    /// Mean start-up delay (start to playback), s.
    pub startup_s: Option<f64>,
}

/// The disk's totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskReport {
    /// Requests served.
    pub requests: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Time busy, s.
    pub busy_s: f64,
    /// Of which seeking, s.
    pub seek_s: f64,
}

/// One app's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppReport {
    /// Its name.
    pub name: String,
    /// Its processes' comm.
    pub unit: String,
    /// Its program (`barrier`, `client`, ...).
    pub kind: String,
    /// When it started, s.
    pub started_s: Option<f64>,
    /// When its last instance finished, s.
    pub finished_s: Option<f64>,
    /// Instances finished.
    pub instances_finished: u32,
    /// CPU time of all its threads, s.
    pub cpu_s: f64,
    /// Barrier: the fewest rounds any instance completed.
    pub rounds: Option<u32>,
    /// Clients: end-to-end latency; services: arrival to reply.
    pub latency: Option<LatencyReport>,
    /// Stream clients.
    pub stream: Option<StreamReport>,
    /// Disk apps: requests done, bytes, mean latency (ms).
    pub io_requests: u64,
    /// Bytes read or written.
    pub io_bytes: u64,
    /// Mean disk request latency, ms.
    pub io_mean_ms: Option<f64>,
}

/// The whole run's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    /// The seed.
    pub seed: u64,
    /// Simulated time now, s.
    pub now_s: f64,
    /// Events handled.
    pub events: u64,
    /// Whether every app that can finish has.
    pub done: bool,
    /// Per app, in spec order.
    pub apps: Vec<AppReport>,
    /// The disk, if any.
    pub disk: Option<DiskReport>,
}

/// One app at one instant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AppSample {
    /// Its name.
    pub name: String,
    /// Its processes' comm.
    pub unit: String,
    /// CPUs its threads get now.
    pub cpu_rate: f64,
    /// CPU time so far, s.
    pub cpu_s: f64,
    /// Threads runnable (running or waiting for a CPU in the fluid model).
    pub runnable: u32,
    /// Threads woken and waiting out their wakeup delay.
    pub waking: u32,
    /// Threads blocked.
    pub blocked: u32,
    /// Jobs waiting in its instances' queues.
    pub queued: u64,
    /// Bytes in its sockets' receive queues.
    pub recv_queued: u64,
    /// Latencies recorded so far.
    pub requests: u64,
    /// Stream under-runs so far.
    pub underruns: u64,
}

/// The workload at one instant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Simulated time, s.
    pub t_s: f64,
    /// Events handled so far.
    pub events: u64,
    /// CPUs the workload's threads get now.
    pub cpu_rate: f64,
    /// Per app, in spec order.
    pub apps: Vec<AppSample>,
}

impl Sample {
    /// The apps' figures summed per unit (apps sharing a `comm`).
    pub fn by_unit(&self) -> std::collections::BTreeMap<String, AppSample> {
        let mut out: std::collections::BTreeMap<String, AppSample> = Default::default();
        for a in &self.apps {
            let u = out.entry(a.unit.clone()).or_insert_with(|| AppSample {
                name: a.unit.clone(),
                unit: a.unit.clone(),
                ..AppSample::default()
            });
            u.cpu_rate += a.cpu_rate;
            u.cpu_s += a.cpu_s;
            u.runnable += a.runnable;
            u.waking += a.waking;
            u.blocked += a.blocked;
            u.queued += a.queued;
            u.recv_queued += a.recv_queued;
            u.requests += a.requests;
            u.underruns += a.underruns;
        }
        out
    }
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl Engine {
    /// The CPU rate now and CPU time so far (ns) of app `app`.
    fn app_cpu(&self, st: &mut crate::state::SimState, app: usize) -> (f64, f64) {
        let mut rate = 0.0;
        let mut cpu = self.apps[app].cpu_exited_ns;
        for i in self.apps[app].insts.iter().filter(|i| i.alive) {
            for &th in &i.threads {
                if let Some(t) = st.threads.get(&self.threads[th].tid) {
                    rate += st.rate_of(t);
                    cpu += st.cpu_ns_of(t);
                }
            }
        }
        (rate, cpu)
    }

    /// The workload now, for time series.
    pub fn sample(&self) -> Sample {
        let mut st = self.sim.lock();
        st.sync();
        st.refresh();
        let mut out = Sample {
            t_s: secs(st.now_ns()),
            events: self.events,
            ..Sample::default()
        };
        for (a, spec) in self.spec.apps.iter().enumerate() {
            let (rate, cpu) = self.app_cpu(&mut st, a);
            let mut s = AppSample {
                name: spec.name.clone(),
                unit: spec.unit.clone(),
                cpu_rate: rate,
                cpu_s: cpu / 1e9,
                requests: self.apps[a].latencies.len() as u64,
                ..AppSample::default()
            };
            for i in self.apps[a].insts.iter().filter(|i| i.alive) {
                s.queued += i.queue.len() as u64;
                s.recv_queued += st.procs.get(&i.pid).map_or(0, |p| p.net.recv_queued);
                s.underruns += i.play.as_ref().map_or(0, |p| p.underruns);
                for &th in &i.threads {
                    match self.threads[th].state {
                        TState::Running(_) => s.runnable += 1,
                        TState::Waking { .. } => s.waking += 1,
                        TState::Blocked => s.blocked += 1,
                        TState::Done => {}
                    }
                }
            }
            for i in self.apps[a].insts.iter().filter(|i| !i.alive) {
                s.underruns += i.play.as_ref().map_or(0, |p| p.underruns);
            }
            out.cpu_rate += rate;
            out.apps.push(s);
        }
        out
    }

    /// The results so far.
    pub fn report(&self) -> WorkloadReport {
        let mut st = self.sim.lock();
        st.sync();
        let mut apps = Vec::new();
        for (a, spec) in self.spec.apps.iter().enumerate() {
            let rt = &self.apps[a];
            let (_, cpu) = self.app_cpu(&mut st, a);
            let rounds = matches!(
                spec.program,
                Program::Barrier { .. } | Program::Malleable { .. }
            )
            .then(|| rt.insts.iter().map(|i| i.round).min().unwrap_or(0));
            let stream = matches!(spec.program, Program::StreamClient { .. }).then(|| {
                let plays: Vec<_> = rt.insts.iter().filter_map(|i| i.play.as_ref()).collect();
                let starts: Vec<f64> = plays
                    .iter()
                    .filter_map(|p| p.started_at.map(|s| secs(s.saturating_sub(p.created))))
                    .collect();
                StreamReport {
                    chunks: plays.iter().map(|p| p.chunks).sum(),
                    underruns: plays.iter().map(|p| p.underruns).sum(),
                    stalled_s: plays.iter().map(|p| secs(p.stalled_ns)).sum(),
                    startup_s: (!starts.is_empty())
                        .then(|| starts.iter().sum::<f64>() / starts.len() as f64),
                }
            });
            apps.push(AppReport {
                name: spec.name.clone(),
                unit: spec.unit.clone(),
                kind: spec.program.kind().into(),
                started_s: rt.started.map(secs),
                finished_s: rt.finished.map(secs),
                instances_finished: rt.finished_insts,
                cpu_s: cpu / 1e9,
                rounds,
                latency: LatencyReport::of(&rt.latencies),
                stream,
                io_requests: rt.io_done,
                io_bytes: rt.io_bytes,
                io_mean_ms: (rt.io_done > 0)
                    .then(|| rt.io_latency_ns as f64 / rt.io_done as f64 / 1e6),
            });
        }
        WorkloadReport {
            seed: self.seed,
            now_s: secs(st.now_ns()),
            events: self.events,
            done: self.done(),
            apps,
            disk: self
                .disk_totals()
                .map(|(requests, bytes, busy, seek)| DiskReport {
                    requests,
                    bytes,
                    busy_s: secs(busy),
                    seek_s: secs(seek),
                }),
        }
    }
}
