//! Running `atoll bench slo`: the baselines under plain Linux, then one
//! daemon per configuration with Redis in `lc` and the spin in `be`.
//!
//! Processes are [`Proc`]s (their whole group killed on drop) declared
//! after the [`Daemon`] (stopped and its cgroup root swept on drop), so an
//! error, a panic or Ctrl-C leaves nothing behind. Under `linux` Redis and
//! the spin are pinned to the island's CPUs and no cgroup is made; the
//! load generator always runs pinned to the host CPU, outside every unit.

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::config::{daemon_config, Layout, BE, LC};
use super::{
    derive_slo, load_pct, parse_kvfront, parse_spin, row, Baselines, Config, LcSample, Settings,
    SloOptions, SloReport,
};
use crate::comm::{find_program, pin, search_dirs};
use crate::error::BenchError;
use crate::interrupt;
use crate::isolation::daemon::Daemon;
use crate::machine;
use crate::procs::{worker_command, Proc};
use crate::progress::Progress;

/// The script that installs what the benchmark needs.
pub const DEPS_SCRIPT: &str = "scripts/bench-deps.sh";
/// How long Redis gets to accept connections after it starts.
const READY_WAIT: Duration = Duration::from_secs(15);
/// The rate offered to find the LC's solo maximum: far more than one Redis
/// serves, so that kvfront's threads never wait.
const SATURATING_RATE: f64 = 1_000_000.0;
/// How much longer than its phase a worker may take to report.
const GRACE: Duration = Duration::from_secs(60);

/// `redis-server`, found in `dirs`, or an error naming the script that
/// installs it.
pub fn check_dependencies(dirs: &[PathBuf]) -> Result<PathBuf, BenchError> {
    find_program("redis-server", dirs).ok_or_else(|| {
        BenchError::Unusable(format!(
            "redis-server not found (on PATH or in /usr/sbin): install it with `sudo \
             {DEPS_SCRIPT}` (apt-get install redis-server)"
        ))
    })
}

/// Runs the baselines and every configuration; see the module docs.
pub fn run(opts: &SloOptions, progress: &Progress) -> Result<SloReport, BenchError> {
    progress.phase("", "checking the machine");
    let redis = check_dependencies(&search_dirs())?;
    let (machine, online) = machine::for_real_cgroups()?;
    let layout =
        Layout::for_cpus(&online).ok_or_else(|| BenchError::Unusable("no online CPU".into()))?;
    let mut settings = opts.settings.clone();
    settings.island_cpus = layout.island.to_string();
    settings.load_cpus = layout.load_cpus().to_string();
    let dir = crate::temp_dir("slo")?;
    let b = Bench {
        exe: opts.exe.clone(),
        redis,
        dir: dir.path().to_path_buf(),
        layout,
        s: settings,
    };

    // The baselines, plain Linux.
    progress.phase("linux", "LC solo maximum (saturated)");
    let lc_max = {
        let (mut server, port) = b.redis(None, "max")?;
        let m = b.kvfront(port, SATURATING_RATE, b.s.max_seconds, None)?;
        let m = m.wait(GRACE + secs(b.s.max_seconds))?;
        b.check_alive(&mut server, "max")?;
        parse_kvfront(&m.report("kvfront (LC maximum)")?).map_err(worker_error("kvfront"))?
    };
    if lc_max.throughput_per_s <= 0.0 {
        return Err(BenchError::Setup {
            what: "the LC's solo maximum".into(),
            reason: "Redis served no request".into(),
        });
    }
    progress.phase("linux", "BE alone (before)");
    let be_before = b.be_alone()?;
    let mut alone = BTreeMap::new();
    {
        let (mut server, port) = b.redis(None, "alone")?;
        for &load in &b.s.loads {
            progress.phase("linux", &format!("LC alone at {}%", load_pct(load)));
            let (lc, _) = b.phase(None, port, load * lc_max.throughput_per_s, false, false)?;
            b.check_alive(&mut server, "alone")?;
            alone.insert(load_pct(load), lc);
        }
    }
    let alone_p99: Vec<&LcSample> = alone.values().collect();
    let (slo_us, slo_derived) = match b.s.common.slo_us {
        Some(s) => (s, false),
        None => (
            derive_slo(&alone_p99).ok_or_else(|| BenchError::Setup {
                what: "deriving the SLO".into(),
                reason: "the LC alone completed no request".into(),
            })?,
            true,
        ),
    };

    // Every configuration at every load, the BE beside the LC.
    let mut rows = Vec::new();
    let mut unavailable = BTreeMap::new();
    for &config in &b.s.common.configs {
        let daemon = match daemon_config(config, &b.layout, slo_us, &b.s.be) {
            None => None,
            Some(text) => match Daemon::start(&b.exe, config.as_str(), &text, &b.dir) {
                Ok(d) => Some(d),
                Err(BenchError::Daemon { reason, log, .. }) => {
                    let last = log.lines().rev().find(|l| !l.trim().is_empty());
                    let why = format!("{reason}: {}", last.unwrap_or("").trim());
                    progress.note(&format!("{}: unavailable: {why}", config.as_str()));
                    unavailable.insert(config.as_str().to_string(), why);
                    continue;
                }
                Err(e) => return Err(e),
            },
        };
        let (mut server, port) = b.redis(daemon.as_ref(), config.as_str())?;
        for &load in &b.s.loads {
            progress.phase(config.as_str(), &format!("LC at {}% + BE", load_pct(load)));
            let rate = load * lc_max.throughput_per_s;
            let slo = config == Config::Slo;
            let (lc, be) = b.phase(daemon.as_ref(), port, rate, true, slo)?;
            b.check_alive(&mut server, config.as_str())?;
            // The BE's share is filled in at the end, against the best of
            // its solo runs before and after.
            let base = Baselines {
                alone: &alone[&load_pct(load)],
                lc_max: lc_max.throughput_per_s,
                be_solo: None,
                slo_us,
            };
            let mut r = row(config, load, lc, be, base);
            r.loadavg = std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
                .to_string();
            rows.push(r);
        }
        let _ = server.finish(Duration::from_secs(15));
        if let Some(d) = daemon {
            d.stop()?;
        }
    }
    progress.phase("linux", "BE alone (after)");
    let be_after = b.be_alone()?;
    let be_solo = be_before.max(be_after);
    for r in &mut rows {
        let base = Baselines {
            alone: &alone[&load_pct(r.load)],
            lc_max: lc_max.throughput_per_s,
            be_solo: Some(be_solo),
            slo_us,
        };
        let loadavg = std::mem::take(&mut r.loadavg);
        *r = row(
            r.config,
            r.load,
            std::mem::take(&mut r.lc),
            r.be_chunks_per_s,
            base,
        );
        r.loadavg = loadavg;
    }
    Ok(SloReport {
        lc_max_per_s: lc_max.throughput_per_s,
        lc_max,
        be_solo_chunks_per_s: be_solo,
        be_solo_runs: vec![be_before, be_after],
        slo_us,
        slo_derived,
        alone,
        rows,
        unavailable,
        settings: b.s,
        machine,
        command: opts.command.clone(),
    })
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn worker_error(what: &'static str) -> impl Fn(String) -> BenchError {
    move |reason| BenchError::Setup {
        what: format!("reading the {what} report"),
        reason,
    }
}

/// A free loopback port.
fn free_port() -> Result<u16, BenchError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| BenchError::Setup {
            what: "choosing a loopback port".into(),
            reason: e.to_string(),
        })
}

/// The arguments of `redis-server` for a run: its own dir and log, a
/// loopback port, no persistence.
pub(super) fn redis_args(dir: &Path, tag: &str, port: u16) -> Vec<String> {
    let d = dir.join(format!("redis-{tag}"));
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--dir",
        &d.display().to_string(),
        "--logfile",
        &dir.join(format!("redis-{tag}.log")).display().to_string(),
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
    ]
    .map(String::from)
    .into()
}

struct Bench {
    exe: PathBuf,
    redis: PathBuf,
    dir: PathBuf,
    layout: Layout,
    s: Settings,
}

impl Bench {
    /// Redis in `lc` under `daemon`, or pinned to the island without one;
    /// waits until it accepts connections.
    fn redis(&self, daemon: Option<&Daemon>, tag: &str) -> Result<(Proc, u16), BenchError> {
        let port = free_port()?;
        let data = self.dir.join(format!("redis-{tag}"));
        std::fs::create_dir_all(&data).map_err(|source| BenchError::Io {
            op: "create",
            path: data,
            source,
        })?;
        let args = redis_args(&self.dir, tag, port);
        let cmd = match daemon {
            Some(d) => self.in_unit(d, LC, &self.redis, &args),
            None => {
                let mut c = Command::new(&self.redis);
                c.args(&args);
                pin(&mut c, &self.layout.island);
                c
            }
        };
        let mut p = Proc::spawn(format!("redis-server ({tag})"), cmd)?;
        let t0 = Instant::now();
        loop {
            interrupt::check()?;
            self.check_alive(&mut p, tag)?;
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok((p, port));
            }
            if t0.elapsed() > READY_WAIT {
                return Err(BenchError::Setup {
                    what: format!("redis-server ({tag}) on port {port}"),
                    reason: format!("no connection within {READY_WAIT:?}\n{}", self.log(tag)),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// An error if Redis exited.
    fn check_alive(&self, p: &mut Proc, tag: &str) -> Result<(), BenchError> {
        if p.exited() {
            return Err(BenchError::Setup {
                what: format!("redis-server ({tag})"),
                reason: format!("exited\n{}", self.log(tag)),
            });
        }
        Ok(())
    }

    /// The end of Redis's log.
    fn log(&self, tag: &str) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(format!("redis-{tag}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    /// `atoll run --unit UNIT -- PROGRAM ARGS...` against `d`.
    fn in_unit(&self, d: &Daemon, unit: &str, program: &Path, args: &[String]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("run")
            .arg("--socket")
            .arg(d.socket())
            .args(["--unit", unit, "--"])
            .arg(program)
            .args(args);
        cmd
    }

    /// The BE alone on the island for `--seconds`, chunks/s.
    fn be_alone(&self) -> Result<f64, BenchError> {
        let spin = self.spin(None, self.s.common.seconds)?;
        parse_spin(
            &spin
                .wait(GRACE + secs(self.s.common.seconds))?
                .report("spin (BE alone)")?,
        )
        .map_err(worker_error("spin"))
    }

    /// kvfront on the host CPUs at `rate` for `seconds`, reporting to the
    /// overlay when `socket` is given.
    fn kvfront(
        &self,
        port: u16,
        rate: f64,
        seconds: f64,
        socket: Option<&Path>,
    ) -> Result<Proc, BenchError> {
        let mut args: Vec<String> = [
            "--backends",
            &port.to_string(),
            "--rate",
            &format!("{rate:.3}"),
            "--seconds",
            &seconds.to_string(),
            "--conns",
            &self.s.conns.to_string(),
            "--work",
            &self.s.common.work.to_string(),
            "--report-ms",
            &self.s.report_ms.to_string(),
        ]
        .map(String::from)
        .into();
        if let Some(sock) = socket {
            args.extend([
                "--overlay".into(),
                LC.into(),
                "--socket".into(),
                sock.display().to_string(),
            ]);
        }
        let mut cmd = worker_command(&self.exe, "kvfront", &args);
        pin(&mut cmd, self.layout.load_cpus());
        Proc::spawn("kvfront (load)", cmd)
    }

    /// The BE spin for `seconds`: in `be` under `daemon`, else pinned to
    /// the island.
    fn spin(&self, daemon: Option<&Daemon>, seconds: f64) -> Result<Proc, BenchError> {
        let args: Vec<String> = vec![
            "--threads".into(),
            self.layout.island.len().to_string(),
            "--seconds".into(),
            seconds.to_string(),
        ];
        let cmd = match daemon {
            Some(d) => d.run_worker(BE, "spin", &args),
            None => {
                let mut c = worker_command(&self.exe, "spin", &args);
                pin(&mut c, &self.layout.island);
                c
            }
        };
        Proc::spawn("spin (BE)", cmd)
    }

    /// One load: a warm-up (LC and, with `be`, the BE; nothing kept), then
    /// the measured phase. With `report` (the `slo` configuration, whose
    /// config has the overlay) kvfront reports each window to the daemon.
    fn phase(
        &self,
        daemon: Option<&Daemon>,
        port: u16,
        rate: f64,
        be: bool,
        report: bool,
    ) -> Result<(LcSample, Option<f64>), BenchError> {
        let socket = daemon.filter(|_| report).map(|d| d.socket().to_path_buf());
        for (seconds, keep) in [
            (self.s.common.warmup_s, false),
            (self.s.common.seconds, true),
        ] {
            if seconds <= 0.0 {
                continue;
            }
            let spin = if be {
                Some(self.spin(daemon, seconds)?)
            } else {
                None
            };
            let load = self.kvfront(port, rate, seconds, socket.as_deref())?;
            let lc = load.wait(GRACE + secs(seconds))?;
            let be_rate = match spin {
                Some(s) => Some(
                    parse_spin(&s.wait(GRACE + secs(seconds))?.report("spin (BE)")?)
                        .map_err(worker_error("spin"))?,
                ),
                None => None,
            };
            if keep {
                let lc =
                    parse_kvfront(&lc.report("kvfront (LC)")?).map_err(worker_error("kvfront"))?;
                return Ok((lc, be_rate));
            }
            lc.report("kvfront (LC warm-up)")?;
        }
        Err(BenchError::Unusable("no measured phase (seconds 0)".into()))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn redis_is_found_or_named_with_the_script() {
        let d = tempfile::tempdir().unwrap();
        let dirs = vec![d.path().to_path_buf()];
        let e = check_dependencies(&dirs).unwrap_err().to_string();
        assert!(
            e.contains("redis-server not found") && e.contains(DEPS_SCRIPT),
            "{e}"
        );
        let exe = d.path().join("redis-server");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(check_dependencies(&dirs).unwrap(), exe);
    }

    #[test]
    fn redis_runs_in_its_own_dir_without_persistence() {
        let a = redis_args(Path::new("/tmp/x"), "slo", 7000);
        let at = |k: &str| a[a.iter().position(|x| x == k).unwrap() + 1].as_str();
        assert_eq!(at("--port"), "7000");
        assert_eq!(at("--bind"), "127.0.0.1");
        assert_eq!(at("--dir"), "/tmp/x/redis-slo");
        assert_eq!(at("--logfile"), "/tmp/x/redis-slo.log");
        assert_eq!(at("--save"), "");
        assert_eq!(at("--appendonly"), "no");
        assert_eq!(at("--daemonize"), "no");
    }
}
