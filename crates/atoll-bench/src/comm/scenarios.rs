//! The two experiments of `atoll bench comm`, each one run of a variant:
//! the two-tier web application (front end, back end, hogs beside them)
//! and the streaming consumer, with the search for the largest stream
//! count each mechanism keeps. [`super::run`] holds the machinery they
//! share: the daemon, servers started in units, quiet windows.

use std::time::Duration;

use super::config::{nginx_back, nginx_front, BACK, FRONT, STREAM};
use super::procstat::Counters;
use super::run::{comm_status, free_ports, stop_quietly, Bench, RunError, Window};
use super::search::{bounds, next_probe};
use super::{
    rep_order, stream_feature_variants, Mechanism, StreamProbe, StreamReport, StreamSearch,
    TwoTierSample, Variant,
};
use crate::error::BenchError;
use crate::interrupt;
use crate::procs::{Output, Proc};

impl Bench<'_> {
    /// One two-tier run of `v`.
    pub(super) fn two_tier(&self, v: &Variant, rep: usize) -> Result<TwoTierSample, RunError> {
        let s = &self.s;
        let daemon = self.daemon(v)?;
        let [front_port, back_port, stream_port] = free_ports()?;
        let mut back = self.nginx(
            &daemon,
            BACK,
            &nginx_back(&self.dir, back_port, s.gzip_level),
        )?;
        let mut front = self.nginx(
            &daemon,
            FRONT,
            &nginx_front(&self.dir, front_port, back_port, stream_port),
        )?;
        self.wait_http(
            front_port,
            "/page.txt",
            &mut [(BACK, &mut back), (FRONT, &mut front)],
        )?;
        let hogs = self.hogs(&daemon)?;
        let total = s.warmup_s + s.seconds;
        let args: Vec<String> = [
            "--addr",
            &format!("127.0.0.1:{front_port}"),
            "--path",
            "/page.txt",
            "--rate",
            &s.rate.to_string(),
            "--seconds",
            &total.to_string(),
            "--warmup",
            &s.warmup_s.to_string(),
            "--connections",
            &s.connections.to_string(),
        ]
        .map(String::from)
        .into();
        let load = self.load("http-load", &args)?;
        interrupt::sleep(Duration::from_secs_f64(s.warmup_s))?;
        let island: Vec<u32> = self.layout.island.iter().collect();
        let mut units = vec![&front, &back];
        units.extend(hogs.0.iter());
        let window = Window::start(&units, &island);
        let out = load.wait(Duration::from_secs_f64(total) + Duration::from_secs(60))?;
        let m = window.end(&units, &island);
        let r = out.report("http-load (load)")?;
        let hog_chunks_per_s = hogs.finish()?;
        let comm = comm_status(daemon.socket());
        stop_quietly(front);
        stop_quietly(back);
        daemon.stop()?;

        let window_s = m.window_s;
        let cpu = |ns: u64| ns as f64 / 1e9 / window_s;
        let (f, b) = (m.units[0], m.units[1]);
        let hog_deltas = &m.units[2..];
        let mut hogs_ctx = Counters::default();
        for h in hog_deltas {
            hogs_ctx.voluntary += h.voluntary;
            hogs_ctx.involuntary += h.involuntary;
            hogs_ctx.run_ns += h.run_ns;
        }
        let rt = &r["rt_ms"];
        Ok(TwoTierSample {
            rep,
            avg_ms: rt["mean"].as_f64(),
            p50_ms: rt["p50"].as_f64(),
            p95_ms: rt["p95"].as_f64(),
            p99_ms: rt["p99"].as_f64(),
            max_ms: rt["max"].as_f64(),
            throughput_rps: r["throughput_rps"].as_f64().unwrap_or(0.0),
            completed: r["completed"].as_u64().unwrap_or(0),
            errors: r["errors"].as_u64().unwrap_or(0),
            hog_chunks_per_s,
            hog_cpu: hog_deltas.iter().map(|h| cpu(h.run_ns)).collect(),
            hog_reservation: self.hog_reservation(),
            front_cpu: cpu(f.run_ns),
            back_cpu: cpu(b.run_ns),
            servers_ctx: Counters {
                voluntary: f.voluntary + b.voluntary,
                involuntary: f.involuntary + b.involuntary,
                run_ns: f.run_ns + b.run_ns,
            },
            hogs_ctx,
            window_s,
            outside_cpu: m.outside_cpu,
            comm,
        })
    }

    /// One streaming run of `v` with `n` clients.
    fn stream(&self, v: &Variant, rep: usize, n: usize) -> Result<StreamProbe, RunError> {
        let s = &self.s;
        let daemon = self.daemon(v)?;
        let [front_port, back_port, stream_port] = free_ports()?;
        let server_args: Vec<String> = [
            "--port",
            &stream_port.to_string(),
            "--bytes-per-s",
            &s.stream_bytes_per_s.to_string(),
            "--interval-ms",
            &s.stream_interval_ms.to_string(),
        ]
        .map(String::from)
        .into();
        let mut server = Proc::spawn(
            "stream server (stream)",
            daemon.run_worker(STREAM, "stream-server", &server_args),
        )?;
        let mut front = self.nginx(
            &daemon,
            FRONT,
            &nginx_front(&self.dir, front_port, back_port, stream_port),
        )?;
        self.wait_http(
            front_port,
            "/health",
            &mut [(STREAM, &mut server), (FRONT, &mut front)],
        )?;
        let hogs = self.hogs(&daemon)?;
        let seconds = s.seconds + s.buffer_ms as f64 / 1000.0;
        let args: Vec<String> = [
            "--addr",
            &format!("127.0.0.1:{front_port}"),
            "--path",
            "/stream",
            "--clients",
            &n.to_string(),
            "--bytes-per-s",
            &s.stream_bytes_per_s.to_string(),
            "--buffer-ms",
            &s.buffer_ms.to_string(),
            "--seconds",
            &seconds.to_string(),
        ]
        .map(String::from)
        .into();
        let client = self.load("stream-client", &args)?;
        let island: Vec<u32> = self.layout.island.iter().collect();
        let mut units = vec![&server, &front];
        units.extend(hogs.0.iter());
        let window = Window::start(&units, &island);
        let out = client.wait(Duration::from_secs_f64(seconds) + Duration::from_secs(60))?;
        let outside_cpu = window.end(&units, &island).outside_cpu;
        let r = out.report("stream-client (load)")?;
        let hog_chunks_per_s = hogs.finish()?;
        let comm = comm_status(daemon.socket());
        let late_sends = server
            .finish(Duration::from_secs(30))
            .and_then(|o: Output| o.report("stream server (stream)"))
            .ok()
            .and_then(|r| r["late_sends"].as_u64());
        stop_quietly(front);
        daemon.stop()?;

        let underruns: Vec<u64> = r["underruns"]
            .as_array()
            .map(|a| a.iter().filter_map(|u| u.as_u64()).collect())
            .unwrap_or_default();
        let firsts: Vec<Option<f64>> = r["first_underrun_s"]
            .as_array()
            .map(|a| a.iter().map(|x| x.as_f64()).collect())
            .unwrap_or_default();
        let clients_ok = atoll_core::num::u64_to_usize(r["clients_ok"].as_u64().unwrap_or(0));
        Ok(StreamProbe {
            rep,
            n,
            ok: clients_ok == n,
            underruns_max: underruns.iter().copied().max().unwrap_or(0),
            underruns_mean: if underruns.is_empty() {
                0.0
            } else {
                crate::stats::round(
                    underruns.iter().sum::<u64>() as f64 / underruns.len() as f64,
                    3,
                )
            },
            clients_ok,
            failed: atoll_core::num::u64_to_usize(r["failed"].as_u64().unwrap_or(0)),
            first_underrun_s: super::mean(firsts).map(|x| crate::stats::round(x, 3)),
            stalled_s: r["stalled_s"].as_f64().unwrap_or(0.0),
            late_sends,
            outside_cpu: outside_cpu.map(|x| crate::stats::round(x, 3)),
            hog_chunks_per_s,
            comm,
        })
    }

    /// The streaming workload: a search for the largest N per rep, off and
    /// on interleaved probe by probe, then every feature at the N where
    /// `off` first failed.
    pub(super) fn stream_all(
        &mut self,
        on: Variant,
        first: Mechanism,
    ) -> Result<StreamReport, BenchError> {
        let mut report = StreamReport::default();
        let pair = [Variant::Off, on];
        for rep in 0..self.s.reps {
            let mut probes: Vec<Vec<StreamProbe>> = vec![Vec::new(); pair.len()];
            loop {
                let mut ran = false;
                for v in rep_order(&pair, rep) {
                    let i = usize::from(v.is_on());
                    let hist: Vec<(usize, bool)> = probes[i].iter().map(|p| (p.n, p.ok)).collect();
                    let Some(n) = next_probe(&self.s.search, &hist) else {
                        continue;
                    };
                    let what = format!("stream N={n}, rep {}/{}", rep + 1, self.s.reps);
                    if let Some(p) = self.attempt(&v, &what, |b| b.stream(&v, rep, n))? {
                        probes[i].push(p);
                        ran = true;
                    }
                }
                if !ran {
                    break;
                }
            }
            for (v, p) in pair.iter().zip(probes) {
                if p.is_empty() {
                    continue;
                }
                let hist: Vec<(usize, bool)> = p.iter().map(|p| (p.n, p.ok)).collect();
                let (max_clients, first_failing) = bounds(&hist);
                report
                    .searches
                    .entry(v.name())
                    .or_default()
                    .push(StreamSearch {
                        rep,
                        max_clients,
                        first_failing,
                        probes: p,
                    });
            }
        }
        report.summarize(&on.name());
        report.breakdown_n = report.pick_breakdown_n();
        if let Some(n) = report.breakdown_n {
            let variants = stream_feature_variants(first);
            for rep in 0..self.s.reps {
                for v in rep_order(&variants, rep) {
                    let what = format!("stream features N={n}, rep {}/{}", rep + 1, self.s.reps);
                    if let Some(p) = self.attempt(&v, &what, |b| b.stream(&v, rep, n))? {
                        report.breakdown.entry(v.name()).or_default().push(p);
                    }
                }
            }
        } else {
            self.progress
                .note("streaming: off never failed up to the largest N; no per-feature runs");
        }
        Ok(report)
    }
}
