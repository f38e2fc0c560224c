//! Running the isolation scenario: one daemon per mode, three phases each,
//! then the revocation latency of the daemon's lending mechanism.
//!
//! Workers are placed with `atoll run --unit U -- atoll __worker ...`, so
//! they never run outside their unit. Every process is a [`Proc`] (killed on
//! drop) and every daemon a [`Daemon`] (stopped on drop), so an error, a
//! panic or Ctrl-C leaves nothing behind.

use std::path::Path;
use std::time::{Duration, Instant};

use atoll_core::spec::IsolationMode;

use super::config::{config_text, mode_name, Layout};
use super::daemon::Daemon;
use super::{
    assemble, Goals, IsolationOptions, IsolationReport, ModeSamples, RevocationMs, Workload,
    HEAVY_GOAL, LIGHT_GOAL,
};
use crate::cgroups::choose_here;
use crate::error::BenchError;
use crate::interrupt;
use crate::machine::{self, Machine};
use crate::procs::Proc;
use crate::progress::Progress;
use crate::revocation::{self, RevocationOptions, Settings};
use crate::worker::cpu_work;

/// Runs every mode of `opts`, then the revocation measurement.
pub fn run(opts: &IsolationOptions, progress: &Progress) -> Result<IsolationReport, BenchError> {
    let backend = choose_here()?.kind().as_str().to_string();
    let machine = machine::describe(&backend);
    let online = atoll_core::CpuSet::parse(&machine.online)
        .map_err(|e| BenchError::Unusable(format!("online CPUs {:?}: {e}", machine.online)))?;
    let mut workload = Workload::new(opts.quick, machine.memory_mib);
    progress.phase("", "calibrating the CPU job");
    workload.cpujob_work = calibrate(workload.cpujob_target_ms)?;
    let dir = crate::temp_dir("isolation")?;
    let mut measured = Vec::new();
    for &mode in &opts.modes {
        let s = run_mode(
            opts,
            mode,
            &workload,
            &machine,
            &online,
            dir.path(),
            progress,
        )?;
        measured.push((mode, s));
    }
    let revocation_ms = revocation_latency(opts, progress)?;
    Ok(IsolationReport {
        modes: assemble(&measured),
        revocation_ms,
        goals: Goals {
            light_max_ratio: LIGHT_GOAL,
            heavy_min_ratio: HEAVY_GOAL,
        },
        workload,
        machine,
        command: opts.command.clone(),
    })
}

/// Units of [`cpu_work`] that take about `target_ms` here (measured in this
/// process for ~200 ms).
fn calibrate(target_ms: u64) -> Result<u64, BenchError> {
    let t0 = Instant::now();
    let mut units = 0u64;
    while t0.elapsed() < Duration::from_millis(200) {
        interrupt::check()?;
        cpu_work(1);
        units += 1;
    }
    let per_ms = units as f64 / (t0.elapsed().as_secs_f64() * 1000.0);
    Ok(atoll_core::num::saturating_u64((per_ms * target_ms as f64).round()).max(1))
}

/// Starts the daemon for `mode`, with an empty host partition if it accepts
/// one, else with the fallback layout.
fn start_daemon(
    opts: &IsolationOptions,
    mode: IsolationMode,
    online: &atoll_core::CpuSet,
    dir: &Path,
    progress: &Progress,
) -> Result<(Daemon, Layout), BenchError> {
    let name = mode_name(mode);
    let whole = Layout::whole(online);
    match Daemon::start(&opts.exe, name, &config_text(mode, &whole), dir) {
        Ok(d) => Ok((d, whole)),
        Err(BenchError::Daemon { reason, log, .. }) => {
            let Some(fallback) = Layout::fallback(online) else {
                return Err(BenchError::Daemon {
                    mode: name.into(),
                    reason,
                    log,
                });
            };
            let why = log
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            progress.note(&format!(
                "{name}: the daemon refused {} ({reason}: {}); using {}",
                whole.describe(),
                why.trim(),
                fallback.describe()
            ));
            let d = Daemon::start(&opts.exe, name, &config_text(mode, &fallback), dir)?;
            Ok((d, fallback))
        }
        Err(e) => Err(e),
    }
}

/// The three phases of one mode.
fn run_mode(
    opts: &IsolationOptions,
    mode: IsolationMode,
    w: &Workload,
    machine: &Machine,
    online: &atoll_core::CpuSet,
    dir: &Path,
    progress: &Progress,
) -> Result<ModeSamples, BenchError> {
    let name = mode_name(mode);
    progress.phase(name, "light alone");
    let (daemon, layout) = start_daemon(opts, mode, online, dir, progress)?;
    let mut s = ModeSamples {
        layout: layout.describe(),
        ..Default::default()
    };
    let sock = dir.join(format!("{name}-echo.sock"));
    let echo_args = vec!["--socket".to_string(), sock.display().to_string()];
    let echo = Proc::spawn(
        "echo server (light)",
        daemon.run_worker("light", "echo-server", &echo_args),
    )?;
    (s.light_alone_p50_us, s.light_alone_p99_us) = latency(&daemon, &sock, w)?;
    s.light_alone_cpujob_ms = Some(cpujob(&daemon, w)?);

    progress.phase(name, "heavy alone");
    let heavy = Heavy::start(&daemon, w, machine.cpus, dir)?;
    interrupt::sleep(Duration::from_millis(w.warmup_ms + w.heavy_window_ms))?;
    let h = heavy.finish(progress);
    s.heavy_alone_chunks_per_s = h.chunks_per_s;
    s.heavy_alone_memhog_mib_per_s = h.memhog_mib_per_s;
    s.heavy_alone_disk_mb_per_s = h.disk_mb_per_s;

    progress.phase(name, "light + heavy");
    let heavy = Heavy::start(&daemon, w, machine.cpus, dir)?;
    interrupt::sleep(Duration::from_millis(w.warmup_ms))?;
    (s.together_p50_us, s.together_p99_us) = latency(&daemon, &sock, w)?;
    s.together_cpujob_ms = Some(cpujob(&daemon, w)?);
    s.together_heavy_chunks_per_s = heavy.finish(progress).chunks_per_s;

    let _ = echo.finish(Duration::from_secs(10));
    daemon.stop()?;
    Ok(s)
}

/// Light's latency loop: (p50, p99) round trip, µs.
fn latency(
    daemon: &Daemon,
    sock: &Path,
    w: &Workload,
) -> Result<(Option<f64>, Option<f64>), BenchError> {
    let args: Vec<String> = [
        "--socket".to_string(),
        sock.display().to_string(),
        "--count".into(),
        w.latency_count.to_string(),
        "--interval-us".into(),
        w.latency_interval_us.to_string(),
    ]
    .into();
    let budget = Duration::from_micros(w.latency_count as u64 * w.latency_interval_us * 20)
        + Duration::from_secs(60);
    let r = Proc::spawn(
        "latency client (light)",
        daemon.run_worker("light", "latency-client", &args),
    )?
    .wait(budget)?
    .report("latency client (light)")?;
    Ok((r["rtt_us"]["p50"].as_f64(), r["rtt_us"]["p99"].as_f64()))
}

/// Light's CPU job: elapsed ms.
fn cpujob(daemon: &Daemon, w: &Workload) -> Result<f64, BenchError> {
    let args = vec!["--work".to_string(), w.cpujob_work.to_string()];
    let budget = Duration::from_millis(w.cpujob_target_ms * 30) + Duration::from_secs(60);
    let r = Proc::spawn(
        "cpu job (light)",
        daemon.run_worker("light", "cpujob", &args),
    )?
    .wait(budget)?
    .report("cpu job (light)")?;
    r["elapsed_ms"].as_f64().ok_or_else(|| BenchError::Worker {
        what: "cpu job (light)".into(),
        reason: "report lacks elapsed_ms".into(),
        output: r.to_string(),
    })
}

/// Heavy's workers while they run.
struct Heavy {
    spin: Proc,
    memhog: Proc,
    disk: Proc,
}

/// What heavy's workers reported.
struct HeavyRates {
    chunks_per_s: Option<f64>,
    memhog_mib_per_s: Option<f64>,
    disk_mb_per_s: Option<f64>,
}

impl Heavy {
    fn start(daemon: &Daemon, w: &Workload, cpus: usize, dir: &Path) -> Result<Self, BenchError> {
        let run = |what: &str, kind: &str, args: Vec<String>| {
            Proc::spawn(
                format!("{what} (heavy)"),
                daemon.run_worker("heavy", kind, &args),
            )
        };
        Ok(Self {
            spin: run(
                "cpu hogs",
                "spin",
                vec![
                    "--threads".into(),
                    (w.hogs_per_cpu * cpus.max(1)).to_string(),
                ],
            )?,
            memhog: run(
                "memory hog",
                "memhog",
                vec!["--mib".into(), w.memhog_mib.to_string()],
            )?,
            disk: run(
                "disk writer",
                "diskwriter",
                vec![
                    "--dir".into(),
                    dir.display().to_string(),
                    "--mib".into(),
                    w.disk_mib.to_string(),
                ],
            )?,
        })
    }

    /// Stops the workers and collects their rates; a worker without a
    /// report (e.g. the memory hog killed by a limit) is noted and counts
    /// as `None`.
    fn finish(self, progress: &Progress) -> HeavyRates {
        let rate = |p: Proc, what: &str, key: &str| match p
            .finish(Duration::from_secs(60))
            .and_then(|o| o.report(what))
        {
            Ok(r) => r[key].as_f64(),
            Err(e) => {
                progress.note(&format!("note: {e}"));
                None
            }
        };
        HeavyRates {
            chunks_per_s: rate(self.spin, "cpu hogs (heavy)", "chunks_per_s"),
            memhog_mib_per_s: rate(self.memhog, "memory hog (heavy)", "mib_per_s"),
            disk_mb_per_s: rate(self.disk, "disk writer (heavy)", "mb_per_s"),
        }
    }
}

/// The revocation latency of `opts.mechanism`, from the revocation
/// benchmark; `None` (with a note) when this machine cannot measure it.
fn revocation_latency(
    opts: &IsolationOptions,
    progress: &Progress,
) -> Result<Option<RevocationMs>, BenchError> {
    let ropts = RevocationOptions {
        exe: opts.exe.clone(),
        mechanisms: vec![opts.mechanism],
        settings: Settings::new(opts.quick),
        command: opts.command.clone(),
    };
    let report = match revocation::run(&ropts, progress) {
        Ok(r) => r,
        Err(BenchError::Unusable(why)) => {
            progress.note(&format!("revocation not measured: {why}"));
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let name = opts.mechanism.as_str();
    Ok(report.mechanisms.get(name).map(|m| RevocationMs {
        mechanism: name.into(),
        p50: m.p50_ms,
        p99: m.p99_ms,
    }))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A stand-in for the atoll binary: its daemon refuses an empty host
    /// partition, serves until its socket is removed; `status` succeeds
    /// while the socket exists; `stop` removes it.
    const FAKE: &str = r#"#!/bin/sh
case "$1" in
daemon)
    if grep -q '^cpus = ""' "$3"; then echo "error: host.cpus must not be empty" >&2; exit 1; fi
    echo "daemon up" >&2
    touch "$7"
    while [ -e "$7" ]; do sleep 0.02; done
    exit 0 ;;
status) [ -e "$3" ] ;;
stop) rm -f "$3" ;;
esac
"#;

    #[test]
    fn a_daemon_that_refuses_an_empty_host_gets_the_fallback_layout() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("fake-atoll");
        std::fs::write(&exe, FAKE).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let opts = IsolationOptions {
            exe,
            modes: vec![IsolationMode::Isolate],
            mechanism: crate::revocation::Mechanism::CpuIdle,
            quick: true,
            command: String::new(),
        };
        let online = atoll_core::CpuSet::parse("0-3").unwrap();
        let progress = Progress::new(1, false);
        let (d, layout) = start_daemon(
            &opts,
            IsolationMode::Isolate,
            &online,
            dir.path(),
            &progress,
        )
        .unwrap();
        assert_eq!(layout, Layout::fallback(&online).unwrap());
        let config = std::fs::read_to_string(dir.path().join("isolate.toml")).unwrap();
        assert!(config.contains("cpus = \"1-3\""), "{config}");
        assert!(d.log_tail().contains("daemon up"));
        let sock = dir.path().join("isolate.sock");
        assert!(sock.exists());
        d.stop().unwrap();
        assert!(!sock.exists());

        // With one CPU there is nothing to fall back to: the refusal is the
        // error, with the daemon's log.
        let one = atoll_core::CpuSet::parse("0").unwrap();
        let e = start_daemon(&opts, IsolationMode::Smp, &one, dir.path(), &progress).unwrap_err();
        assert!(e.to_string().contains("host.cpus must not be empty"), "{e}");
    }
}
