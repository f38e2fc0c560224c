//! Running one variant of a scenario: the simulated machine, the daemon's
//! controller on it (the same `Controller` as on Linux, with the sim as
//! backend, process table, task control, system monitor, network monitor
//! and clock), and the engine, stepped epoch by epoch:
//!
//! ```text
//! t += epoch; engine.run_until(t); controller.epoch();
//! ```
//!
//! Every `sample_ms` the runner records, per island, the CPUs it may use
//! (its cpuset, or its `cpu.max` when lower) and the CPUs it used over the
//! window; per app, its CPU rate, queued jobs, socket bytes waiting, and
//! the 99th percentile and the mean latency of the requests completed in
//! the window (the engine keeps every latency in order; the sampler keeps
//! the index of the last one it consumed per app and sorts only the
//! window's slice).
//!
//! In a variant with `managed = true`, the runner also plays the runtime
//! library for the scenario's `[managed]` apps ([`crate::apps`]) after
//! every epoch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_core::plan::GroupPath;
use atoll_core::process::CgroupMembership;
use atoll_daemon::controller::{Controller, Env, Options};
use atoll_sim::engine::WorkloadReport;
use atoll_sim::{Engine, SimPlatform};
use serde::{Deserialize, Serialize};

use crate::scenario::Scenario;
use crate::LabError;

/// One island at one sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IslandPoint {
    /// The island.
    pub name: String,
    /// CPUs it may use: its cpuset's size, or its `cpu.max` when lower.
    pub cpus: f64,
    /// CPUs its groups used over the window.
    pub used: f64,
}

/// One app at one sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AppPoint {
    /// The app.
    pub name: String,
    /// CPUs its threads get now.
    pub cpu_rate: f64,
    /// Jobs waiting in its queues.
    pub queued: u64,
    /// Bytes waiting in its sockets.
    pub recv_queued: u64,
    /// 99th percentile (nearest rank) of the latencies of the requests it
    /// completed in the window, ms.
    pub latency_p99_ms: Option<f64>,
    /// Mean latency of the requests it completed in the window, ms.
    pub latency_mean_ms: Option<f64>,
}

/// The machine at one sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Simulated time, s.
    pub t_s: f64,
    /// Per island, in config order.
    pub islands: Vec<IslandPoint>,
    /// Per app, in workload order.
    pub apps: Vec<AppPoint>,
}

/// What one run gives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The scenario.
    pub scenario: String,
    /// The variant.
    pub variant: String,
    /// CPUs of the machine.
    pub cpus: u32,
    /// Threads the workload starts.
    pub threads: u64,
    /// The engine's report at the end.
    pub report: WorkloadReport,
    /// The time series.
    pub series: Vec<Point>,
    /// Control-loop epochs run.
    pub epochs: u64,
    /// Decisions the daemon logged.
    pub decisions: usize,
    /// Engine events handled.
    pub events: u64,
    /// Wall time of the run, s.
    pub wall_s: f64,
    /// CPU time of this process during the run, s (user + system).
    pub cpu_s: f64,
    /// The runtime library's figures, in a managed variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<crate::apps::RuntimeStats>,
}

/// CPU time of this process so far, s (0 if unknown).
pub fn process_cpu_s() -> f64 {
    // /proc/self/stat fields 14 and 15: utime and stime in clock ticks.
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / atoll_sim::USER_HZ as f64
}

/// The 99th percentile (nearest rank) and the mean of `ns`, ms; sorts
/// `ns` in place. `None` if empty.
pub fn window_latency(ns: &mut [u64]) -> Option<(f64, f64)> {
    if ns.is_empty() {
        return None;
    }
    let k = atoll_core::num::saturating_usize((0.99 * ns.len() as f64).ceil()).clamp(1, ns.len());
    let (_, p99, _) = ns.select_nth_unstable(k - 1);
    let p99 = *p99 as f64 / 1e6;
    let mean = ns.iter().map(|&x| x as f64).sum::<f64>() / ns.len() as f64 / 1e6;
    Some((p99, mean))
}

/// Runs `variant` of `scenario`; `progress(sim_s, end_s)` is called after
/// every epoch.
pub fn run(
    scenario: &Scenario,
    variant: &str,
    progress: &mut dyn FnMut(f64, f64),
) -> Result<RunResult, LabError> {
    let spec = scenario.platform_spec(variant)?;
    let topo = scenario.machine.topology();
    let sim = SimPlatform::new(
        topo.clone(),
        "atoll-lab",
        atoll_core::clock::ManualClock::new(),
    );
    let env = Env {
        backend: Box::new(sim.clone()),
        procs: Box::new(sim.clone()),
        tasks: Box::new(sim.clone()),
        system: Box::new(sim.clone()),
        clock: Arc::new(sim.clock()),
    };
    let opts = Options {
        state_dir: None,
        self_origin: CgroupMembership::parse("0::/atoll-lab.slice\n").ok_or_else(|| {
            LabError::Start {
                variant: variant.into(),
                message: "bad self cgroup".into(),
            }
        })?,
        self_pid: 1,
        topology: topo,
    };
    let islands: Vec<String> = spec.islands.iter().map(|i| i.name.to_string()).collect();
    let epoch = spec.epoch;
    let mut runtime = scenario
        .is_managed(variant)
        .then(|| crate::apps::Runtime::new(&scenario.managed));
    let mut c = Controller::new(env, spec, opts);
    c.set_net_monitor(Box::new(sim.clone()), "sim");
    c.start().map_err(|e| LabError::Start {
        variant: variant.into(),
        message: e.to_string(),
    })?;
    let wall = Instant::now();
    let cpu0 = process_cpu_s();
    let threads = scenario
        .workload
        .apps
        .iter()
        .map(|a| u64::from(a.threads) * u64::from(a.instances))
        .sum();
    let mut e =
        Engine::new(sim.clone(), scenario.workload.clone(), scenario.run.seed).map_err(|err| {
            LabError::Invalid {
                source_name: scenario.name.clone(),
                message: format!("[workload]: {err}"),
            }
        })?;
    e.run_until(Duration::ZERO);
    c.epoch();
    if let Some(rt) = runtime.as_mut() {
        rt.step(&mut c, &mut e);
    }
    let end = Duration::from_secs_f64(scenario.run.seconds);
    let sample = Duration::from_millis(scenario.run.sample_ms);
    let mut series = Vec::new();
    let mut sampler = Sampler::new(&islands, &scenario.workload);
    if !sample.is_zero() {
        series.push(sampler.point(&c, &sim, &e, 0.0));
    }
    let mut next_sample = sample;
    let mut t = Duration::ZERO;
    let mut epochs = 0;
    while t < end && !e.done() {
        t = (t + epoch).min(end);
        e.run_until(t);
        c.epoch();
        if let Some(rt) = runtime.as_mut() {
            rt.step(&mut c, &mut e);
        }
        epochs += 1;
        if !sample.is_zero() && t >= next_sample {
            let dt = (t.as_secs_f64() - sampler.last_t).max(1e-9);
            series.push(sampler.point(&c, &sim, &e, dt));
            next_sample += sample;
        }
        progress(t.as_secs_f64(), end.as_secs_f64());
    }
    let report = e.report();
    let out = RunResult {
        scenario: scenario.name.clone(),
        variant: variant.into(),
        cpus: scenario.machine.cpus(),
        threads,
        events: e.events(),
        report,
        series,
        epochs,
        decisions: c.decisions().query(None, usize::MAX).len(),
        wall_s: wall.elapsed().as_secs_f64(),
        cpu_s: process_cpu_s() - cpu0,
        runtime: runtime.map(|rt| rt.stats()),
    };
    // Nothing outlives the run: the simulated machine is dropped next.
    let _ = c.teardown();
    Ok(out)
}

/// Keeps the running sums windows are measured from.
struct Sampler {
    islands: Vec<String>,
    usage: Vec<u64>,
    /// Per app, how many of its latencies earlier windows consumed.
    lat_seen: Vec<usize>,
    lat_buf: Vec<u64>,
    latency_apps: bool,
    last_t: f64,
}

impl Sampler {
    fn new(islands: &[String], w: &atoll_sim::WorkloadSpec) -> Self {
        Self {
            islands: islands.to_vec(),
            usage: vec![0; islands.len()],
            lat_seen: vec![0; w.apps.len()],
            lat_buf: Vec::new(),
            latency_apps: w.apps.iter().any(|a| {
                matches!(
                    a.program,
                    atoll_sim::workload::Program::Client { .. }
                        | atoll_sim::workload::Program::Service { .. }
                )
            }),
            last_t: 0.0,
        }
    }

    fn point(&mut self, c: &Controller, sim: &SimPlatform, e: &Engine, dt: f64) -> Point {
        let status = c.status();
        let s = e.sample();
        let mut p = Point {
            t_s: s.t_s,
            ..Point::default()
        };
        for (k, name) in self.islands.iter().enumerate() {
            let Some(st) = status.islands.iter().find(|i| &i.name == name) else {
                continue;
            };
            let mut cpus = st.cpus.len() as f64;
            if let Ok(n) = atoll_core::Name::new(name) {
                if let Some(m) = sim.settings(&GroupPath::island(&n)).and_then(|g| g.cpu_max) {
                    cpus = cpus.min(m.quota_us as f64 / m.period_us.max(1) as f64);
                }
            }
            let usage = st.stats.cpu_usage_us.unwrap_or(0);
            let used = if dt > 0.0 {
                usage.saturating_sub(self.usage[k]) as f64 / 1e6 / dt
            } else {
                0.0
            };
            self.usage[k] = usage;
            p.islands.push(IslandPoint {
                name: name.clone(),
                cpus,
                used,
            });
        }
        for (k, a) in s.apps.iter().enumerate() {
            let mut window = None;
            if self.latency_apps {
                let all = e.latencies(k);
                let from = self.lat_seen[k].min(all.len());
                self.lat_buf.clear();
                self.lat_buf.extend_from_slice(&all[from..]);
                window = window_latency(&mut self.lat_buf);
                self.lat_seen[k] = all.len();
            }
            p.apps.push(AppPoint {
                name: a.name.clone(),
                cpu_rate: a.cpu_rate,
                queued: a.queued,
                recv_queued: a.recv_queued,
                latency_p99_ms: window.map(|w| w.0),
                latency_mean_ms: window.map(|w| w.1),
            });
        }
        self.last_t = s.t_s;
        p
    }
}

#[cfg(test)]
mod tests {
    use super::window_latency;

    #[test]
    fn window_latency_is_the_nearest_rank_p99_and_the_mean() {
        assert_eq!(window_latency(&mut []), None);
        // 1..=200 ms, shuffled: rank ceil(0.99 * 200) = 198.
        let mut v: Vec<u64> = (1..=200u64).rev().map(|ms| ms * 1_000_000).collect();
        v.swap(3, 150);
        let (p99, mean) = window_latency(&mut v).unwrap();
        assert_eq!(p99, 198.0);
        assert!((mean - 100.5).abs() < 1e-9);
        let (p99, mean) = window_latency(&mut [5_000_000]).unwrap();
        assert_eq!((p99, mean), (5.0, 5.0));
    }
}
