//! `atoll bench isolation`: the three isolation modes side by side.
//!
//! For each mode the real daemon runs with one island on the machine's CPUs
//! and two units ([`config`]): `light` (a request/response latency loop and
//! a fixed CPU job, needing less than its entitlement) and `heavy` (4 CPU
//! hogs per CPU, a memory hog and a disk writer, wanting everything). Three
//! phases per mode ([`run`]): light alone (baseline), heavy alone (its
//! throughput with light idle), both together. From them, per mode:
//!
//! - `light_p99_ratio`: light's p99 round trip together ÷ alone;
//! - `light_time_ratio`: light's CPU job time together ÷ alone;
//! - `heavy_throughput_ratio`: heavy's hog throughput with light idle in
//!   this mode ÷ the same in `smp` (what lending gives back).
//!
//! The goals of performance isolation (seed 004), for `isolate`: light
//! ratios ≤ 1.10 (no degradation while under its share) and heavy ≥ 0.95
//! (idle CPUs still used). The revocation latency of the mechanism the
//! daemon uses comes from the revocation benchmark.

pub mod config;
pub mod daemon;
mod run;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use atoll_core::spec::IsolationMode;
pub use run::run;
use serde::{Deserialize, Serialize};

use crate::machine::Machine;
use crate::revocation::Mechanism;
use crate::stats::{ratio, round};

/// Light's ratios must stay at or below this in `isolate`.
pub const LIGHT_GOAL: f64 = 1.10;
/// Heavy's throughput ratio must stay at or above this in `isolate`.
pub const HEAVY_GOAL: f64 = 0.95;

/// What to run.
#[derive(Clone, Debug)]
pub struct IsolationOptions {
    /// The `atoll` binary (daemon, `run`, `__worker`).
    pub exe: PathBuf,
    /// Modes, in this order.
    pub modes: Vec<IsolationMode>,
    /// The mechanism whose revocation latency is reported.
    pub mechanism: Mechanism,
    /// Short phases (smoke test).
    pub quick: bool,
    /// The command line, for the report.
    pub command: String,
}

/// Sizes and durations of the workloads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Light's round trips per latency run.
    pub latency_count: usize,
    /// Pause between round trips, µs.
    pub latency_interval_us: u64,
    /// Light's CPU job, calibrated to take about this long alone, ms.
    pub cpujob_target_ms: u64,
    /// Units of work of the CPU job (after calibration).
    pub cpujob_work: u64,
    /// Heavy's CPU hogs (threads), per CPU.
    pub hogs_per_cpu: usize,
    /// Heavy's memory hog, MiB.
    pub memhog_mib: usize,
    /// Heavy's disk writer, MiB per fsync.
    pub disk_mib: usize,
    /// Heavy runs this long before light starts, ms.
    pub warmup_ms: u64,
    /// Heavy alone is measured over this window, ms.
    pub heavy_window_ms: u64,
}

impl Workload {
    /// The full run or a short one; `memory_mib` bounds the memory hog.
    pub fn new(quick: bool, memory_mib: u64) -> Self {
        let cap = (memory_mib / 16).max(16) as usize;
        if quick {
            Self {
                latency_count: 200,
                latency_interval_us: 1000,
                cpujob_target_ms: 200,
                cpujob_work: 0,
                hogs_per_cpu: 4,
                memhog_mib: 32.min(cap),
                disk_mib: 8,
                warmup_ms: 300,
                heavy_window_ms: 1000,
            }
        } else {
            Self {
                latency_count: 3000,
                latency_interval_us: 1000,
                cpujob_target_ms: 2000,
                cpujob_work: 0,
                hogs_per_cpu: 4,
                memhog_mib: 256.min(cap),
                disk_mib: 32,
                warmup_ms: 1000,
                heavy_window_ms: 5000,
            }
        }
    }
}

/// What one mode measured (µs, ms and rates as named; `None` where a
/// worker gave no report).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModeSamples {
    /// The layout the daemon accepted.
    pub layout: String,
    /// Light alone: round trip p50, µs.
    pub light_alone_p50_us: Option<f64>,
    /// Light alone: round trip p99, µs.
    pub light_alone_p99_us: Option<f64>,
    /// Light alone: CPU job, ms.
    pub light_alone_cpujob_ms: Option<f64>,
    /// Heavy alone: hog work chunks per second.
    pub heavy_alone_chunks_per_s: Option<f64>,
    /// Heavy alone: memory hog MiB touched per second.
    pub heavy_alone_memhog_mib_per_s: Option<f64>,
    /// Heavy alone: disk writer MB/s.
    pub heavy_alone_disk_mb_per_s: Option<f64>,
    /// Together: light's round trip p50, µs.
    pub together_p50_us: Option<f64>,
    /// Together: light's round trip p99, µs.
    pub together_p99_us: Option<f64>,
    /// Together: light's CPU job, ms.
    pub together_cpujob_ms: Option<f64>,
    /// Together: heavy's hog chunks per second.
    pub together_heavy_chunks_per_s: Option<f64>,
}

/// The ratios of one mode, and what they came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModeResult {
    /// Light's p99 round trip together ÷ alone.
    pub light_p99_ratio: Option<f64>,
    /// Light's CPU job time together ÷ alone.
    pub light_time_ratio: Option<f64>,
    /// Heavy's throughput (light idle) ÷ the same in `smp`.
    pub heavy_throughput_ratio: Option<f64>,
    /// The measurements.
    pub samples: ModeSamples,
}

/// Revocation latency of the daemon's lending mechanism, ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RevocationMs {
    /// The mechanism.
    pub mechanism: String,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// The goals the table checks `isolate` against.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Goals {
    /// Light's ratios at most this.
    pub light_max_ratio: f64,
    /// Heavy's ratio at least this.
    pub heavy_min_ratio: f64,
}

/// The whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IsolationReport {
    /// Results by mode name.
    pub modes: BTreeMap<String, ModeResult>,
    /// Revocation latency, if it could be measured.
    pub revocation_ms: Option<RevocationMs>,
    /// The goals for `isolate`.
    pub goals: Goals,
    /// The workloads.
    pub workload: Workload,
    /// Where.
    pub machine: Machine,
    /// The command that produced it.
    pub command: String,
}

impl IsolationOptions {
    /// Progress steps of a run: calibration, three phases per mode, the
    /// revocation measurement.
    pub fn steps(&self) -> usize {
        1 + 3 * self.modes.len() + 1
    }
}

/// Computes each mode's ratios; heavy's is relative to `smp` when `smp` is
/// among the modes.
pub fn assemble(measured: &[(IsolationMode, ModeSamples)]) -> BTreeMap<String, ModeResult> {
    let smp_heavy = measured
        .iter()
        .find(|(m, _)| *m == IsolationMode::Smp)
        .and_then(|(_, s)| s.heavy_alone_chunks_per_s);
    let r3 = |v: Option<f64>| v.map(|x| round(x, 3));
    measured
        .iter()
        .map(|(mode, s)| {
            let result = ModeResult {
                light_p99_ratio: r3(ratio(s.together_p99_us, s.light_alone_p99_us)),
                light_time_ratio: r3(ratio(s.together_cpujob_ms, s.light_alone_cpujob_ms)),
                heavy_throughput_ratio: r3(ratio(s.heavy_alone_chunks_per_s, smp_heavy)),
                samples: s.clone(),
            };
            (config::mode_name(*mode).to_string(), result)
        })
        .collect()
}

/// Whether `r` meets the isolation goals; `None` when a ratio is missing.
pub fn meets_goals(r: &ModeResult) -> Option<bool> {
    let (p99, time, heavy) = (
        r.light_p99_ratio?,
        r.light_time_ratio?,
        r.heavy_throughput_ratio?,
    );
    Some(p99 <= LIGHT_GOAL && time <= LIGHT_GOAL && heavy >= HEAVY_GOAL)
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

/// The report as a table of ratios, with the goals.
pub fn render_table(r: &IsolationReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8} {:>16} {:>17} {:>23} {:>14}   layout",
        "mode", "light p99 ratio", "light time ratio", "heavy throughput ratio", "light p99 µs"
    );
    for mode in ["smp", "quota", "isolate"] {
        let Some(m) = r.modes.get(mode) else { continue };
        let mut line = format!(
            "{:<8} {:>16} {:>17} {:>23} {:>14}   {}",
            mode,
            cell(m.light_p99_ratio),
            cell(m.light_time_ratio),
            cell(m.heavy_throughput_ratio),
            format!(
                "{}→{}",
                m.samples
                    .light_alone_p99_us
                    .map_or("-".into(), |v| format!("{v:.0}")),
                m.samples
                    .together_p99_us
                    .map_or("-".into(), |v| format!("{v:.0}"))
            ),
            m.samples.layout
        );
        if mode == "isolate" {
            line += match meets_goals(m) {
                Some(true) => "   goals met",
                Some(false) => "   goals missed",
                None => "",
            };
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(
        out,
        "goals (isolate): light ratios <= {:.2}, heavy throughput ratio >= {:.2}",
        r.goals.light_max_ratio, r.goals.heavy_min_ratio
    );
    match &r.revocation_ms {
        Some(v) => {
            let _ = writeln!(
                out,
                "revocation ({}): p50 {:.3} ms, p99 {:.3} ms",
                v.mechanism, v.p50, v.p99
            );
        }
        None => {
            let _ = writeln!(out, "revocation: not measured");
        }
    }
    let _ = writeln!(out, "machine: {}", r.machine);
    let _ = write!(out, "command: {}", r.command);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(alone_p99: f64, together_p99: f64, job: (f64, f64), heavy: f64) -> ModeSamples {
        ModeSamples {
            layout: "host \"\" + island 0-1".into(),
            light_alone_p99_us: Some(alone_p99),
            together_p99_us: Some(together_p99),
            light_alone_cpujob_ms: Some(job.0),
            together_cpujob_ms: Some(job.1),
            heavy_alone_chunks_per_s: Some(heavy),
            ..Default::default()
        }
    }

    fn report() -> IsolationReport {
        let measured = [
            (
                IsolationMode::Smp,
                samples(100.0, 400.0, (1000.0, 1500.0), 2000.0),
            ),
            (
                IsolationMode::Quota,
                samples(100.0, 105.0, (1000.0, 1010.0), 1000.0),
            ),
            (
                IsolationMode::Isolate,
                samples(100.0, 108.0, (1000.0, 1050.0), 1960.0),
            ),
        ];
        IsolationReport {
            modes: assemble(&measured),
            revocation_ms: Some(RevocationMs {
                mechanism: "cpu_idle".into(),
                p50: 0.01,
                p99: 0.05,
            }),
            goals: Goals {
                light_max_ratio: LIGHT_GOAL,
                heavy_min_ratio: HEAVY_GOAL,
            },
            workload: Workload::new(true, 1024),
            machine: Machine::default(),
            command: "atoll bench isolation --quick".into(),
        }
    }

    #[test]
    fn ratios_are_together_over_alone_and_heavy_over_smp() {
        let r = report();
        let smp = &r.modes["smp"];
        assert_eq!(smp.light_p99_ratio, Some(4.0));
        assert_eq!(smp.light_time_ratio, Some(1.5));
        assert_eq!(smp.heavy_throughput_ratio, Some(1.0));
        let iso = &r.modes["isolate"];
        assert_eq!(iso.light_p99_ratio, Some(1.08));
        assert_eq!(iso.heavy_throughput_ratio, Some(0.98));
        assert_eq!(meets_goals(iso), Some(true));
        assert_eq!(r.modes["quota"].heavy_throughput_ratio, Some(0.5));
        assert_eq!(meets_goals(&r.modes["quota"]), Some(false));
    }

    #[test]
    fn without_smp_or_a_report_the_ratio_is_missing() {
        let mut s = samples(100.0, 200.0, (10.0, 20.0), 5.0);
        s.together_cpujob_ms = None;
        let m = assemble(&[(IsolationMode::Isolate, s)]);
        let iso = &m["isolate"];
        assert_eq!(iso.heavy_throughput_ratio, None);
        assert_eq!(iso.light_time_ratio, None);
        assert_eq!(iso.light_p99_ratio, Some(2.0));
        assert_eq!(meets_goals(iso), None);
    }

    #[test]
    fn json_has_the_documented_shape() {
        let v = serde_json::to_value(report()).unwrap();
        assert_eq!(v["modes"]["smp"]["light_p99_ratio"], 4.0);
        assert_eq!(v["modes"]["isolate"]["heavy_throughput_ratio"], 0.98);
        assert_eq!(v["revocation_ms"]["p99"], 0.05);
        assert_eq!(v["revocation_ms"]["p50"], 0.01);
        assert_eq!(v["command"], "atoll bench isolation --quick");
        assert!(v["machine"].is_object());
        let back: IsolationReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, report());
    }

    #[test]
    fn the_table_lists_modes_in_order_with_goals() {
        let t = render_table(&report());
        let smp = t.find("\nsmp").unwrap();
        let iso = t.find("\nisolate").unwrap();
        assert!(smp < t.find("\nquota").unwrap() && t.find("\nquota").unwrap() < iso);
        assert!(t.contains("goals met"), "{t}");
        assert!(t.contains("4.000") && t.contains("100→400"), "{t}");
        assert!(
            t.contains("revocation (cpu_idle): p50 0.010 ms, p99 0.050 ms"),
            "{t}"
        );
    }

    #[test]
    fn quick_workloads_are_smaller() {
        let (q, f) = (Workload::new(true, 24_000), Workload::new(false, 24_000));
        assert!(q.latency_count < f.latency_count && q.heavy_window_ms < f.heavy_window_ms);
        assert_eq!(f.memhog_mib, 256);
        assert_eq!(Workload::new(false, 512).memhog_mib, 32);
    }
}
