//! Running `atoll bench netisland`: the rig once, then every configuration
//! in every rep, each with its own daemon (none for `none`). The loop is
//! [`run_setups`], which `atoll bench slo --scenario stream` runs too with
//! its own list of setups.
//!
//! Processes are [`Proc`]s (their group killed on drop) made after the
//! [`Daemon`] (stopped and its cgroup root swept on drop), which is made
//! after the [`Rig`] (namespace, veth and shaping removed on drop), so an
//! error, a panic or Ctrl-C leaves nothing behind. Receivers start first,
//! in the namespace; the senders after half a second.

use std::process::Command;
use std::time::Duration;

use atoll_core::CpuSet;

use super::config::{layout, setup_config, BULK, CONSUMER, HOG, LINK, STREAM};
use super::rig::{skip_reason, Rig};
use super::web::{web_ratios, web_row, WebSample};
use super::{
    parse_recv, row, with_ratios, NetIslandOptions, NetIslandReport, Sample, Scenario, Settings,
    Setup,
};
use crate::comm::pin;
use crate::error::BenchError;
use crate::interrupt;
use crate::isolation::daemon::Daemon;
use crate::machine::{self, Machine};
use crate::procs::{worker_command, Proc};
use crate::progress::Progress;

/// The stream's UDP port in the namespace.
const STREAM_PORT: u16 = 47_001;
/// The bulk sink's UDP port in the namespace.
const BULK_PORT: u16 = 47_002;
/// How much longer than the senders the receivers listen, s.
const TAIL_S: f64 = 1.5;
/// How much longer than its phase a worker may take to report.
const GRACE: Duration = Duration::from_secs(60);

/// Runs every configuration `reps` times; see the module docs.
pub fn run(opts: &NetIslandOptions, progress: &Progress) -> Result<NetIslandReport, BenchError> {
    opts.settings
        .check_configs()
        .map_err(BenchError::Unusable)?;
    let setups: Vec<(String, Setup)> = opts
        .settings
        .configs
        .iter()
        .map(|c| (c.as_str().to_string(), Setup::from(*c)))
        .collect();
    let m = run_setups(opts, &setups, progress)?;
    let s = m.settings;
    let mut web_rows: Vec<_> = setups
        .iter()
        .zip(m.web)
        .filter(|(_, v)| !v.is_empty())
        .map(|((_, setup), v)| web_row(setup.config, v, s.seconds))
        .collect();
    web_ratios(&mut web_rows);
    let mut rows: Vec<_> = setups
        .iter()
        .zip(m.samples)
        .filter(|(_, v)| !v.is_empty())
        .map(|((_, setup), v)| row(setup.config, v, &s))
        .collect();
    with_ratios(&mut rows);
    Ok(NetIslandReport {
        rows,
        web_rows,
        unavailable: m.unavailable,
        settings: s,
        machine: m.machine,
        command: opts.command.clone(),
        loadavg: m.loadavg,
    })
}

/// What [`run_setups`] measured, before rows are made of it.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Each setup's samples (the stream scenario), one per rep it ran.
    pub samples: Vec<Vec<Sample>>,
    /// Each setup's samples (the web scenario).
    pub web: Vec<Vec<WebSample>>,
    /// Setups whose daemon would not start (by name), with why.
    pub unavailable: Vec<(String, String)>,
    /// The settings, with the island's CPUs filled in.
    pub settings: Settings,
    /// The machine.
    pub machine: Machine,
    /// `/proc/loadavg` at the end.
    pub loadavg: String,
}

/// Runs each of `setups` (a name for progress, the daemon's files and
/// [`Measured::unavailable`], and what to run) in every rep, in order, on
/// one rig: the one path of `atoll bench netisland` and of the stream
/// scenario of `atoll bench slo`. `opts.settings.configs` is not read.
pub fn run_setups(
    opts: &NetIslandOptions,
    setups: &[(String, Setup)],
    progress: &Progress,
) -> Result<Measured, BenchError> {
    progress.phase("", "checking the machine");
    if let Some(why) = skip_reason() {
        return Err(BenchError::Unusable(why));
    }
    let (machine, online) = machine::for_real_cgroups()?;
    let (host, island) =
        layout(&online).ok_or_else(|| BenchError::Unusable("no online CPU".into()))?;
    let mut s = opts.settings.clone();
    s.island_cpus = island.to_string();
    if s.scenario == Scenario::Web {
        s.web
            .check(s.rate_mbit)
            .map_err(|why| BenchError::Unusable(format!("--scenario web: {why}")))?;
    }
    let dir = crate::temp_dir("netisland")?;
    progress.phase("", "making the namespace and the veth pair");
    let mut rig = Rig::new()?;
    let b = Bench { opts, host, island };
    let mut samples: Vec<Vec<Sample>> = setups.iter().map(|_| vec![]).collect();
    let mut web: Vec<Vec<WebSample>> = setups.iter().map(|_| vec![]).collect();
    let mut unavailable = Vec::new();
    for rep in 0..s.reps {
        for (((name, setup), got), web_got) in setups.iter().zip(&mut samples).zip(&mut web) {
            let config = setup.config;
            interrupt::check()?;
            progress.phase(name, &format!("rep {}", rep + 1));
            if config.network_island() {
                rig.unshape()?;
            } else {
                rig.shape(s.rate_mbit)?;
            }
            let mode = format!("{name}-{rep}");
            let text = match s.scenario {
                Scenario::Stream => setup_config(*setup, &b.host, &b.island, &rig.names.host, &s),
                Scenario::Web => {
                    super::web::daemon_config(config, &b.host, &b.island, &rig.names.host, &s)
                }
            };
            let daemon = match text {
                None => None,
                Some(text) => match Daemon::start(&opts.exe, &mode, &text, dir.path()) {
                    Ok(d) => Some(d),
                    Err(BenchError::Daemon { reason, log, .. }) => {
                        let last = log.lines().rev().find(|l| !l.trim().is_empty());
                        let why = format!("{reason}: {}", last.unwrap_or("").trim());
                        progress.note(&format!("{name}: unavailable: {why}"));
                        unavailable.push((name.clone(), why));
                        continue;
                    }
                    Err(e) => return Err(e),
                },
            };
            match s.scenario {
                Scenario::Stream => got.push(b.once(&rig, daemon.as_ref(), &s)?),
                Scenario::Web => web_got.push(b.once_web(&rig, daemon.as_ref(), config, &s)?),
            }
            if let Some(d) = daemon {
                d.stop()?;
            }
        }
    }
    rig.unshape()?;
    drop(rig);
    Ok(Measured {
        samples,
        web,
        unavailable,
        settings: s,
        machine,
        loadavg: loadavg(),
    })
}

/// `/proc/loadavg`, trimmed (empty where it cannot be read).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[path = "run_web.rs"]
mod web_run;

struct Bench<'a> {
    opts: &'a NetIslandOptions,
    host: CpuSet,
    island: CpuSet,
}

impl Bench<'_> {
    /// A worker in `unit` under `daemon`, else pinned to `cpus`; in the
    /// namespace with `ns`.
    fn worker(
        &self,
        daemon: Option<&Daemon>,
        unit: Option<&str>,
        ns: Option<&Rig>,
        kind: &str,
        args: &[String],
    ) -> Command {
        let exe = &self.opts.exe;
        let mut inner: Vec<String> = Vec::new();
        if let Some(rig) = ns {
            inner.push("ip".into());
            inner.extend(rig.in_ns());
        }
        inner.push(exe.display().to_string());
        inner.extend(["__worker".into(), kind.into()]);
        inner.extend(args.iter().cloned());
        match (daemon, unit) {
            (Some(d), Some(unit)) => {
                let mut c = Command::new(exe);
                c.arg("run")
                    .arg("--socket")
                    .arg(d.socket())
                    .args(["--unit", unit, "--"])
                    .args(&inner);
                c
            }
            _ if ns.is_none() => {
                let mut c = worker_command(exe, kind, args);
                pin(
                    &mut c,
                    if unit.is_some() {
                        &self.island
                    } else {
                        self.host_or_island()
                    },
                );
                c
            }
            _ => {
                let mut c = Command::new(&inner[0]);
                c.args(&inner[1..]);
                pin(
                    &mut c,
                    if unit.is_some() {
                        &self.island
                    } else {
                        self.host_or_island()
                    },
                );
                c
            }
        }
    }

    fn host_or_island(&self) -> &CpuSet {
        if self.host.is_empty() {
            &self.island
        } else {
            &self.host
        }
    }

    /// The bulk transfer's receiver, in the namespace, for `secs` seconds.
    pub(super) fn bulk_sink(&self, rig: &Rig, secs: f64) -> Result<Proc, BenchError> {
        let args = [
            "--port".into(),
            BULK_PORT.to_string(),
            "--seconds".into(),
            secs.to_string(),
        ];
        Proc::spawn(
            "udp-sink (bulk)",
            self.worker(None, None, Some(rig), "udp-sink", &args),
        )
    }

    /// The bulk transfer's sender in unit `bulk`, to the namespace's end of
    /// the link, for `secs` seconds.
    pub(super) fn bulk_blast(
        &self,
        daemon: Option<&Daemon>,
        rig: &Rig,
        secs: f64,
    ) -> Result<Proc, BenchError> {
        let args = [
            "--addr".into(),
            format!("{}:{BULK_PORT}", rig.names.peer_ip),
            "--seconds".into(),
            secs.to_string(),
        ];
        Proc::spawn(
            "udp-blast (bulk)",
            self.worker(daemon, Some(BULK), None, "udp-blast", &args),
        )
    }

    /// The CPU hog in unit `hog`: two spinning threads per island CPU, for
    /// `secs` seconds.
    pub(super) fn hog(&self, daemon: Option<&Daemon>, secs: f64) -> Result<Proc, BenchError> {
        let args = [
            "--threads".into(),
            (2 * self.island.len()).to_string(),
            "--seconds".into(),
            secs.to_string(),
        ];
        Proc::spawn(
            "spin (hog)",
            self.worker(daemon, Some(HOG), None, "spin", &args),
        )
    }

    /// One configuration once: receivers, hog, then senders; their reports.
    fn once(&self, rig: &Rig, daemon: Option<&Daemon>, s: &Settings) -> Result<Sample, BenchError> {
        let n = |v: f64| format!("{v}");
        let listen = s.seconds + 0.5 + TAIL_S;
        let recv = Proc::spawn(
            "frame-recv (consumer)",
            self.worker(
                daemon,
                Some(CONSUMER),
                Some(rig),
                "frame-recv",
                &[
                    "--port".into(),
                    STREAM_PORT.to_string(),
                    "--fps".into(),
                    s.fps.to_string(),
                    "--work".into(),
                    s.work.to_string(),
                    "--deadline-ms".into(),
                    s.deadline_ms.to_string(),
                    "--seconds".into(),
                    n(listen),
                ],
            ),
        )?;
        let sink = self.bulk_sink(rig, listen)?;
        let hog = self.hog(daemon, listen)?;
        interrupt::sleep(Duration::from_millis(500))?;
        let peer = &rig.names.peer_ip;
        let send = Proc::spawn(
            "frame-send (stream)",
            self.worker(
                daemon,
                Some(STREAM),
                None,
                "frame-send",
                &[
                    "--addr".into(),
                    format!("{peer}:{STREAM_PORT}"),
                    "--fps".into(),
                    s.fps.to_string(),
                    "--packets".into(),
                    s.packets.to_string(),
                    "--bytes".into(),
                    s.bytes.to_string(),
                    "--seconds".into(),
                    n(s.seconds),
                ],
            ),
        )?;
        let blast = self.bulk_blast(daemon, rig, s.seconds)?;
        let wait = GRACE + Duration::from_secs_f64(listen);
        let sent = send.wait(wait)?.report("frame-send")?;
        blast.wait(wait)?.report("udp-blast")?;
        let recv = recv.wait(wait)?.report("frame-recv")?;
        let sink = sink.wait(wait)?.report("udp-sink")?;
        let hog = hog.wait(wait)?.report("spin (hog)")?;
        // A positive, parsed duration: small and not negative.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let secs = s.seconds.ceil() as u64;
        let (on_time_per_s, late) =
            parse_recv(&recv, secs).map_err(|reason| BenchError::Setup {
                what: "reading the frame-recv report".into(),
                reason,
            })?;
        let triggers = match daemon {
            Some(d) => Some(self.triggers(d)?),
            None => None,
        };
        Ok(Sample {
            frames_sent: sent["frames"].as_u64().unwrap_or(0),
            on_time_per_s,
            late,
            bulk_bytes: sink["bytes"].as_u64().unwrap_or(0),
            triggers,
            hog_chunks_per_s: hog["chunks_per_s"].as_f64().unwrap_or(0.0),
            loadavg: loadavg(),
        })
    }

    /// The boosts the triggers gave the consumer (its decisions naming the
    /// network island and the unit, or the unit's receive queue).
    fn triggers(&self, d: &Daemon) -> Result<u64, BenchError> {
        let out = Command::new(&self.opts.exe)
            .arg("why")
            .arg("--socket")
            .arg(d.socket())
            .args([CONSUMER, "--limit", "100000"])
            .output()
            .map_err(|e| BenchError::Setup {
                what: "atoll why".into(),
                reason: e.to_string(),
            })?;
        // The network island's trigger names it; the overlay's
        // `react_recv_queue` names the receive queue (one of them is set).
        let network = format!("network island {LINK}: unit {CONSUMER}:");
        let overlay = format!("(receive queue of {CONSUMER} ");
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains(&network) || l.contains(&overlay))
            .count() as u64)
    }
}
