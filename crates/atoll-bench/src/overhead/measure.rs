//! What `atoll bench overhead` reads of the daemon, and how a window of
//! readings becomes a [`Sample`].
//!
//! - CPU time: `utime + stime` of `/proc/PID/stat`, which covers every
//!   thread of the process, those that ended included, in clock ticks
//!   (10 ms at the usual 100 Hz: ±0.05 % of a CPU over a 20 s window).
//!   Beside it, the sum over the live threads of
//!   `/proc/PID/task/TID/schedstat` (ns; a thread that ends within the
//!   window takes its time with it) and their context switches
//!   ([`crate::comm::procstat`]).
//! - Memory: `VmRSS` (now) and `VmHWM` (the peak since it started) of
//!   `/proc/PID/status`.
//! - The machine: the busy time of every CPU in `/proc/stat` and the load
//!   average, to tell a quiet window from a noisy one.

use std::path::Path;
use std::time::{Duration, Instant};

use super::Sample;
use crate::comm::procstat::{self, busy_now, clock_ticks_per_s, Snapshot};
use crate::error::BenchError;
use crate::interrupt;
use crate::isolation::daemon::Daemon;
use crate::stats::round;

/// `utime + stime` (ticks) and `num_threads` from the text of
/// `/proc/PID/stat`.
pub fn parse_stat_times(text: &str) -> Option<(u64, u64)> {
    // The fields after the command name (which may hold anything, up to
    // the last ')'): state ppid pgrp session tty_nr tpgid flags minflt
    // cminflt majflt cmajflt utime stime cutime cstime priority nice
    // num_threads ...
    let rest: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    let field = |i: usize| rest.get(i)?.parse::<u64>().ok();
    Some((field(11)? + field(12)?, field(17)?))
}

/// A `kB` field of `/proc/PID/status` (`VmRSS`, `VmHWM`).
pub fn status_kib(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The daemon's counters at one moment.
#[derive(Clone, Debug)]
pub struct Reading {
    at: Instant,
    ticks: u64,
    threads: u64,
    tasks: Snapshot,
    busy: Option<u64>,
}

fn read_proc(path: &Path) -> Result<String, BenchError> {
    std::fs::read_to_string(path).map_err(|source| BenchError::Io {
        op: "read",
        path: path.to_path_buf(),
        source,
    })
}

fn unreadable(path: &Path, what: &str) -> BenchError {
    BenchError::Setup {
        what: path.display().to_string(),
        reason: format!("no {what} in it"),
    }
}

/// Reads process `pid`'s counters (and the machine's busy time over
/// `cpus`).
pub fn read(pid: u32, cpus: &[u32]) -> Result<Reading, BenchError> {
    let proc_root = Path::new("/proc");
    let stat_path = proc_root.join(pid.to_string()).join("stat");
    let busy = busy_now(cpus);
    let stat = read_proc(&stat_path)?;
    let (ticks, threads) =
        parse_stat_times(&stat).ok_or_else(|| unreadable(&stat_path, "utime, stime"))?;
    let tasks = procstat::snapshot(proc_root, &[pid]);
    Ok(Reading {
        at: Instant::now(),
        ticks,
        threads,
        tasks,
        busy,
    })
}

/// `VmRSS` and `VmHWM` of `pid`, KiB.
pub fn memory(pid: u32) -> Result<(u64, u64), BenchError> {
    let path = Path::new("/proc").join(pid.to_string()).join("status");
    let text = read_proc(&path)?;
    let rss = status_kib(&text, "VmRSS").ok_or_else(|| unreadable(&path, "VmRSS"))?;
    let hwm = status_kib(&text, "VmHWM").ok_or_else(|| unreadable(&path, "VmHWM"))?;
    Ok((rss, hwm))
}

/// The first of `/proc/loadavg`'s fields.
pub fn loadavg_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Polls `d`'s status until `units` units hold a process each (at once
/// when `any` is set: the simulated backend sees no process), checking that
/// units hold only `herd`'s processes; returns the last status. Gives up
/// after `wait`, polling every `every`; `tag` names the benchmark.
pub fn wait_adopted(
    d: &Daemon,
    herd: &[u32],
    units: usize,
    any: bool,
    (tag, wait, every): (&str, Duration, Duration),
) -> Result<serde_json::Value, BenchError> {
    let t0 = Instant::now();
    loop {
        let status = d.status_json()?;
        let (_, held) = status_figures(&status);
        if let Some(p) = unit_pids(&status).into_iter().find(|p| !herd.contains(p)) {
            return Err(BenchError::Setup {
                what: "adoption".into(),
                reason: format!("a unit holds pid {p}, which the benchmark did not start"),
            });
        }
        if any || held >= units {
            return Ok(status);
        }
        if t0.elapsed() > wait {
            return Err(BenchError::Daemon {
                mode: tag.into(),
                reason: format!("only {held} of {units} units hold their process after {wait:?}"),
                log: d.log_tail(),
            });
        }
        interrupt::sleep(every)?;
    }
}

/// `epochs` and the number of units holding at least one process, from
/// the daemon's `status --json`.
pub fn status_figures(status: &serde_json::Value) -> (Option<u64>, usize) {
    let epochs = status.get("epochs").and_then(serde_json::Value::as_u64);
    let held = status
        .get("units")
        .and_then(serde_json::Value::as_array)
        .map_or(0, |units| {
            units
                .iter()
                .filter(|u| {
                    u.get("pids")
                        .and_then(serde_json::Value::as_array)
                        .is_some_and(|p| !p.is_empty())
                })
                .count()
        });
    (epochs, held)
}

/// Every pid in some unit of the daemon's `status --json`.
pub fn unit_pids(status: &serde_json::Value) -> Vec<u32> {
    status
        .get("units")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|u| u.get("pids")?.as_array())
        .flatten()
        .filter_map(|p| u32::try_from(p.as_u64()?).ok())
        .collect()
}

/// What one window measured, apart from the readings.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// The rep.
    pub rep: usize,
    /// `epochs` at the status call before and after the window.
    pub epochs: (u64, u64),
    /// Seconds between those two status calls.
    pub epochs_s: f64,
    /// `VmRSS`, `VmHWM` at the end, KiB.
    pub memory_kib: (u64, u64),
    /// Units holding a process at the end.
    pub units_held: usize,
    /// CPUs of the machine.
    pub cpus: usize,
}

/// The sample of a window from its two readings.
pub fn sample(before: &Reading, after: &Reading, w: Window) -> Sample {
    let window_s = after.at.duration_since(before.at).as_secs_f64().max(1e-9);
    let hz = clock_ticks_per_s();
    let ticks = after.ticks.saturating_sub(before.ticks);
    let tasks = procstat::delta(&before.tasks, &after.tasks);
    let epochs = w.epochs.1.saturating_sub(w.epochs.0);
    let busy = before
        .busy
        .zip(after.busy)
        .filter(|_| w.cpus > 0)
        .map(|(a, b)| {
            round(
                b.saturating_sub(a) as f64 / hz / window_s / w.cpus as f64 * 100.0,
                1,
            )
        });
    Sample {
        rep: w.rep,
        window_s: round(window_s, 3),
        cpu_ticks: ticks,
        cpu_pct: round(ticks as f64 / hz / window_s * 100.0, 3),
        cpu_pct_threads: round(tasks.run_ns as f64 / 1e9 / window_s * 100.0, 3),
        rss_mib: round(w.memory_kib.0 as f64 / 1024.0, 2),
        hwm_mib: round(w.memory_kib.1 as f64 / 1024.0, 2),
        epochs,
        epochs_per_s: round(epochs as f64 / w.epochs_s.max(1e-9), 2),
        ctx_switches_per_s: round(tasks.switches() as f64 / window_s, 1),
        voluntary: tasks.voluntary,
        involuntary: tasks.involuntary,
        threads: after.threads,
        units_held: w.units_held,
        machine_busy_pct: busy,
        loadavg_1m: loadavg_1m(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::comm::procstat::Counters;

    #[test]
    fn stat_times_skip_awkward_names() {
        let line = "4242 (atoll (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    150 37 0 0 20 0 5 0 1234 100000 2000 18446744073709551615";
        assert_eq!(parse_stat_times(line), Some((187, 5)));
        assert_eq!(parse_stat_times("1 (x) S 1 2"), None);
        assert_eq!(parse_stat_times(""), None);
    }

    #[test]
    fn status_fields_in_kib() {
        let s = "Name:\tatoll\nVmHWM:\t    9120 kB\nVmRSS:\t    8716 kB\n";
        assert_eq!(status_kib(s, "VmRSS"), Some(8716));
        assert_eq!(status_kib(s, "VmHWM"), Some(9120));
        assert_eq!(status_kib(s, "VmSwap"), None);
    }

    #[test]
    fn status_json_gives_epochs_and_held_units() {
        let v = serde_json::json!({"epochs": 700, "units": [
            {"name": "u001", "pids": [10, 11]}, {"name": "u002", "pids": []},
            {"name": "u003", "pids": [12]}]});
        assert_eq!(status_figures(&v), (Some(700), 2));
        assert_eq!(unit_pids(&v), [10, 11, 12]);
        assert_eq!(status_figures(&serde_json::json!({})), (None, 0));
        assert!(unit_pids(&serde_json::json!({"units": 3})).is_empty());
    }

    #[test]
    fn a_window_becomes_shares_of_a_cpu() {
        let t0 = Instant::now();
        let mut tasks = Snapshot::new();
        tasks.insert(
            1,
            Counters {
                voluntary: 10,
                involuntary: 1,
                run_ns: 1_000_000,
            },
        );
        let before = Reading {
            at: t0,
            ticks: 100,
            threads: 4,
            tasks: tasks.clone(),
            busy: Some(1000),
        };
        tasks.insert(
            1,
            Counters {
                voluntary: 410,
                involuntary: 1,
                run_ns: 201_000_000,
            },
        );
        let after = Reading {
            at: t0 + Duration::from_secs(20),
            ticks: 100 + atoll_core::num::saturating_u64(clock_ticks_per_s() * 0.2),
            threads: 5,
            tasks,
            busy: Some(1000 + atoll_core::num::saturating_u64(clock_ticks_per_s() * 4.0)),
        };
        let s = sample(
            &before,
            &after,
            Window {
                rep: 1,
                epochs: (100, 766),
                epochs_s: 20.0,
                memory_kib: (8704, 9216),
                units_held: 10,
                cpus: 2,
            },
        );
        assert_eq!(s.window_s, 20.0);
        assert_eq!(s.cpu_pct, 1.0);
        assert_eq!(s.cpu_pct_threads, 1.0);
        assert_eq!((s.rss_mib, s.hwm_mib), (8.5, 9.0));
        assert_eq!((s.epochs, s.epochs_per_s), (666, 33.3));
        assert_eq!(s.ctx_switches_per_s, 20.0);
        assert_eq!((s.threads, s.units_held, s.rep), (5, 10, 1));
        assert_eq!(s.machine_busy_pct, Some(10.0));
    }

    #[test]
    fn reads_this_process() {
        let pid = std::process::id();
        let r = read(pid, &[0]).unwrap();
        assert!(r.threads >= 1 && !r.tasks.is_empty());
        let (rss, hwm) = memory(pid).unwrap();
        assert!(rss > 0 && hwm >= rss);
        assert!(read(u32::MAX, &[0]).is_err());
    }
}
