//! `atoll bench revocation`: how fast does a lender get back a CPU it lent?
//!
//! A *lender* (the wakeup probe) owns CPU `L`; *borrowers* (spin hogs) are
//! allowed onto `L` while the lender sleeps. Under each candidate
//! [`Mechanism`] the probe wakes up every period and measures how late it
//! got to run (the revocation latency) and how stretched its CPU burst was;
//! before the probe starts, the borrowers' CPU usage over a window with the
//! lender idle gives their share of `L` (lending must still hand out the
//! idle CPU). A first run without borrowers (`alone`) gives the floor: what
//! the rest of the machine's load costs the probe anyway. Everything runs on
//! real cgroups under a unique root, through the backend-agnostic
//! [`Actuator`](atoll_core::backend::Actuator) and
//! [`Monitor`](atoll_core::backend::Monitor) traits, so the same code runs on
//! cgroup v1 here and cgroup2 in the VM ([`run`] holds the real part).

mod run;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub use run::run;
use serde::{Deserialize, Serialize};

use crate::machine::Machine;
use crate::stats::{ratio, round};

/// A way to let borrowers use a lender's idle CPU and give it back (and
/// the reference without borrowers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    /// No borrowers at all: the floor, what the rest of the machine's load
    /// costs the lender. Not a mechanism, the reference for the others.
    Alone,
    /// Same weight, both on `L`: plain sharing (the baseline).
    None,
    /// The borrowers' group has `cpu.idle = 1`.
    CpuIdle,
    /// The borrowers' tasks are `SCHED_IDLE`.
    SchedIdle,
    /// Lender weight 10000, borrowers 1.
    Weight,
    /// The borrowers' cpuset loses `L` when a user-space loop polling every
    /// 30 ms (a daemon epoch) sees the lender active, and gets it back when
    /// the lender was idle for a poll.
    Cpuset,
}

impl Mechanism {
    /// All, the references first.
    pub const ALL: [Self; 6] = [
        Self::Alone,
        Self::None,
        Self::CpuIdle,
        Self::SchedIdle,
        Self::Weight,
        Self::Cpuset,
    ];

    /// The name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alone => "alone",
            Self::None => "none",
            Self::CpuIdle => "cpu_idle",
            Self::SchedIdle => "sched_idle",
            Self::Weight => "weight",
            Self::Cpuset => "cpuset",
        }
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mechanism {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s.trim().replace('-', "_"))
            .ok_or_else(|| {
                format!(
                    "unknown mechanism {s:?} (one of {})",
                    Self::ALL.map(Self::as_str).join(", ")
                )
            })
    }
}

/// How long and how hard to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Probe wakeups per mechanism.
    pub samples: usize,
    /// Probe sleep, µs (long enough for the cpuset loop to lend `L` again).
    pub period_us: u64,
    /// Extra random sleep per wakeup, up to this, µs.
    pub jitter_us: u64,
    /// CPU the probe burns after each wakeup, µs.
    pub burst_us: u64,
    /// Window over which the borrowers' share of idle `L` is measured, ms.
    pub lend_window_ms: u64,
    /// Borrower hogs (one spinning thread each).
    pub hogs: usize,
    /// Poll period of the cpuset loop, ms.
    pub poll_ms: u64,
}

impl Settings {
    /// The full run, or a short one (`quick`) for smoke tests.
    pub fn new(quick: bool) -> Self {
        if quick {
            Self {
                samples: 15,
                period_us: 100_000,
                jitter_us: 30_000,
                burst_us: 10_000,
                lend_window_ms: 500,
                hogs: 2,
                poll_ms: 30,
            }
        } else {
            Self {
                samples: 100,
                period_us: 150_000,
                jitter_us: 50_000,
                burst_us: 20_000,
                lend_window_ms: 2000,
                hogs: 2,
                poll_ms: 30,
            }
        }
    }

    /// Longest a probe run may take before it counts as hung.
    pub fn probe_timeout(&self) -> Duration {
        let per = self.period_us + self.jitter_us + 50 * self.burst_us;
        Duration::from_micros(per * self.samples as u64) + Duration::from_secs(30)
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct RevocationOptions {
    /// The `atoll` binary (for `__worker`).
    pub exe: PathBuf,
    /// Mechanisms, in this order.
    pub mechanisms: Vec<Mechanism>,
    /// How long and how hard.
    pub settings: Settings,
    /// The command line, for the report.
    pub command: String,
}

/// The numbers of one mechanism.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MechanismResult {
    /// Wakeup lateness of the lender, median, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Worst, ms.
    pub max_ms: f64,
    /// Mean, ms.
    pub mean_ms: f64,
    /// Wakeups measured.
    pub samples: usize,
    /// Median of the lender's burst wall time ÷ CPU time (1 = it had `L`).
    pub burst_stretch_p50: Option<f64>,
    /// 99th percentile of the stretch.
    pub burst_stretch_p99: Option<f64>,
    /// Share of `L` the borrowers got while the lender was idle (1 = all;
    /// `None` without borrowers).
    pub borrower_share: Option<f64>,
    /// cpuset only: how often the loop took `L` back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revocations: Option<u64>,
}

impl MechanismResult {
    /// From a probe's JSON report and the measured borrower share.
    pub fn from_probe(
        probe: &serde_json::Value,
        borrower_share: Option<f64>,
    ) -> Result<Self, String> {
        let late = &probe["lateness_us"];
        let ms = |k: &str| {
            late[k]
                .as_f64()
                .map(|us| round(us / 1000.0, 4))
                .ok_or_else(|| format!("probe report lacks lateness_us.{k}: {probe}"))
        };
        let stretch = |k: &str| probe["burst_stretch"][k].as_f64().map(|v| round(v, 3));
        Ok(Self {
            p50_ms: ms("p50")?,
            p90_ms: ms("p90")?,
            p99_ms: ms("p99")?,
            max_ms: ms("max")?,
            mean_ms: ms("mean")?,
            samples: atoll_core::num::u64_to_usize(late["count"].as_u64().unwrap_or(0)),
            burst_stretch_p50: stretch("p50"),
            burst_stretch_p99: stretch("p99"),
            borrower_share: borrower_share.map(|v| round(v, 3)),
            revocations: None,
        })
    }
}

/// The whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RevocationReport {
    /// Results by mechanism name.
    pub mechanisms: BTreeMap<String, MechanismResult>,
    /// Mechanisms this machine cannot do, with the reason.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub unavailable: BTreeMap<String, String>,
    /// The lent CPU.
    pub lender_cpu: u32,
    /// Where the cpuset loop puts the borrowers when it takes `L` back.
    pub home_cpu: Option<u32>,
    /// How it was measured.
    pub settings: Settings,
    /// Where.
    pub machine: Machine,
    /// The command that produced it.
    pub command: String,
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The report as a table, with each mechanism's p99 relative to `none`.
pub fn render_table(r: &RevocationReport) -> String {
    let s = &r.settings;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "CPU revocation on CPU {} ({} borrower hogs; lender wakes every {}+0..{} ms and burns {} ms)",
        r.lender_cpu,
        s.hogs,
        s.period_us / 1000,
        s.jitter_us / 1000,
        s.burst_us / 1000
    );
    let _ = writeln!(
        out,
        "{:<11} {:>8} {:>8} {:>8} {:>8} {:>14} {:>15} {:>9}",
        "mechanism",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "burst stretch",
        "borrower share",
        "p99/none"
    );
    let base = r.mechanisms.get(Mechanism::None.as_str()).map(|m| m.p99_ms);
    for m in Mechanism::ALL {
        let Some(x) = r.mechanisms.get(m.as_str()) else {
            continue;
        };
        let _ = writeln!(
            out,
            "{:<11} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>14} {:>15} {:>9}",
            m.as_str(),
            x.p50_ms,
            x.p90_ms,
            x.p99_ms,
            x.max_ms,
            cell(x.burst_stretch_p50, 2),
            cell(x.borrower_share, 3),
            cell(ratio(Some(x.p99_ms), base), 3),
        );
    }
    for (m, why) in &r.unavailable {
        let _ = writeln!(out, "{m}: unavailable: {why}");
    }
    let _ = writeln!(out, "machine: {}", r.machine);
    let _ = write!(out, "command: {}", r.command);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn probe(p50: f64, p99: f64) -> serde_json::Value {
        json!({
            "kind": "probe",
            "lateness_us": {"count": 10, "min": 1.0, "mean": p50, "p50": p50, "p90": p99, "p99": p99, "max": p99 * 2.0},
            "burst_stretch": {"count": 10, "min": 1.0, "mean": 1.5, "p50": 1.5, "p90": 2.0, "p99": 2.0, "max": 2.0},
        })
    }

    fn report() -> RevocationReport {
        let mut mechanisms = BTreeMap::new();
        mechanisms.insert(
            "none".into(),
            MechanismResult::from_probe(&probe(1500.0, 3000.0), Some(0.99)).unwrap(),
        );
        mechanisms.insert(
            "cpu_idle".into(),
            MechanismResult::from_probe(&probe(20.0, 60.0), Some(0.98765)).unwrap(),
        );
        let mut unavailable = BTreeMap::new();
        unavailable.insert("cpuset".into(), "one CPU".into());
        RevocationReport {
            mechanisms,
            unavailable,
            lender_cpu: 1,
            home_cpu: Some(0),
            settings: Settings::new(true),
            machine: Machine::default(),
            command: "atoll bench revocation --quick".into(),
        }
    }

    #[test]
    fn mechanisms_round_trip_their_names() {
        for m in Mechanism::ALL {
            assert_eq!(m.as_str().parse::<Mechanism>(), Ok(m));
        }
        assert_eq!("cpu-idle".parse::<Mechanism>(), Ok(Mechanism::CpuIdle));
        assert!("nice"
            .parse::<Mechanism>()
            .unwrap_err()
            .contains("cpu_idle"));
    }

    #[test]
    fn results_come_from_the_probe_report_in_ms() {
        let r = MechanismResult::from_probe(&probe(1500.0, 3000.0), None).unwrap();
        assert_eq!(
            (r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms),
            (1.5, 3.0, 3.0, 6.0)
        );
        assert_eq!(r.samples, 10);
        assert_eq!(r.burst_stretch_p50, Some(1.5));
        assert_eq!(r.borrower_share, None);
        assert!(MechanismResult::from_probe(&json!({"kind": "probe"}), None).is_err());
    }

    #[test]
    fn json_has_the_documented_shape() {
        let v = serde_json::to_value(report()).unwrap();
        assert_eq!(v["mechanisms"]["cpu_idle"]["p99_ms"], 0.06);
        assert_eq!(v["mechanisms"]["cpu_idle"]["borrower_share"], 0.988);
        assert_eq!(v["mechanisms"]["none"]["p50_ms"], 1.5);
        assert!(v["mechanisms"]["none"].get("revocations").is_none());
        assert_eq!(v["unavailable"]["cpuset"], "one CPU");
        assert_eq!(v["command"], "atoll bench revocation --quick");
    }

    #[test]
    fn the_table_shows_ratios_against_none() {
        let t = render_table(&report());
        let idle = t.lines().find(|l| l.starts_with("cpu_idle")).unwrap();
        assert!(idle.trim_end().ends_with("0.020"), "{t}");
        let none = t.lines().find(|l| l.starts_with("none")).unwrap();
        assert!(none.trim_end().ends_with("1.000"), "{t}");
        // Baseline first, whatever the map order.
        assert!(t.find("\nnone").unwrap() < t.find("\ncpu_idle").unwrap());
        assert!(t.contains("cpuset: unavailable: one CPU"));
    }
}
