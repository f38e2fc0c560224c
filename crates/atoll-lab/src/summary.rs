//! The figures a run is judged by, and the table `atoll sim` prints.
//!
//! - *completion*: when the last finite app finished (`None` if one did
//!   not within the run);
//! - *spread*: last finish minus first finish over the finite apps;
//! - per app: finish time, CPU time, latency p50/p99 (clients and
//!   services);
//! - *energy*: the machine's joules until completion (or the end of the
//!   run) under [`PowerModel::SEED002`](atoll_sim::power::PowerModel):
//!   every CPU's idle power over the time, plus the busy power over the
//!   apps' CPU time (see `atoll_sim::power`).

use serde::{Deserialize, Serialize};

use crate::run::RunResult;

/// One app's line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppLine {
    /// The app.
    pub name: String,
    /// When it finished, s.
    pub finished_s: Option<f64>,
    /// CPU time, s.
    pub cpu_s: f64,
    /// Latency median, ms.
    pub p50_ms: Option<f64>,
    /// Latency 99th percentile, ms.
    pub p99_ms: Option<f64>,
}

/// A run's summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The variant.
    pub variant: String,
    /// Simulated seconds run.
    pub sim_s: f64,
    /// When the last finite app finished, s.
    pub completion_s: Option<f64>,
    /// Last minus first finish among finite apps, s.
    pub spread_s: Option<f64>,
    /// Per app.
    pub apps: Vec<AppLine>,
    /// Engine events per wall second.
    pub events_per_s: f64,
    /// Wall time, s.
    pub wall_s: f64,
    /// CPU time of the run, s.
    pub cpu_s: f64,
    /// The apps' CPU time (the simulated machine's busy CPU-seconds), s.
    #[serde(default)]
    pub busy_cpu_s: f64,
    /// The simulated machine's energy until completion (or the end of the
    /// run), J.
    #[serde(default)]
    pub energy_j: f64,
}

impl Summary {
    /// The summary of `r`.
    pub fn of(r: &RunResult) -> Self {
        let finite: Vec<Option<f64>> = r
            .report
            .apps
            .iter()
            .filter(|a| a.kind == "barrier" || a.kind == "malleable" || a.finished_s.is_some())
            .map(|a| a.finished_s)
            .collect();
        let all_done = !finite.is_empty() && finite.iter().all(Option::is_some);
        let done: Vec<f64> = finite.iter().flatten().copied().collect();
        let max = done.iter().copied().fold(f64::NAN, f64::max);
        let min = done.iter().copied().fold(f64::NAN, f64::min);
        let busy_cpu_s: f64 = r.report.apps.iter().map(|a| a.cpu_s).sum();
        let until = if all_done { max } else { r.report.now_s };
        let energy_j = atoll_sim::power::PowerModel::SEED002.energy_j(
            f64::from(r.cpus),
            until,
            busy_cpu_s,
            atoll_sim::power::PowerModel::SEED002.f_max_ghz,
        );
        Self {
            variant: r.variant.clone(),
            sim_s: r.report.now_s,
            completion_s: all_done.then_some(max),
            spread_s: all_done.then_some(max - min),
            apps: r
                .report
                .apps
                .iter()
                .map(|a| AppLine {
                    name: a.name.clone(),
                    finished_s: a.finished_s,
                    cpu_s: a.cpu_s,
                    p50_ms: a.latency.as_ref().map(|l| l.p50_ms),
                    p99_ms: a.latency.as_ref().map(|l| l.p99_ms),
                })
                .collect(),
            events_per_s: r.events as f64 / r.wall_s.max(1e-9),
            wall_s: r.wall_s,
            cpu_s: r.cpu_s,
            busy_cpu_s,
            energy_j,
        }
    }

    /// The app called `name`.
    pub fn app(&self, name: &str) -> Option<&AppLine> {
        self.apps.iter().find(|a| a.name == name)
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.prec$}"))
}

/// A table of the summaries: one block per variant, then a line per app.
pub fn render(summaries: &[Summary]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<12} {:>8} {:>11} {:>9} {:>11} {:>7} {:>7} {:>9} {:>10}\n",
        "variant",
        "sim_s",
        "completion",
        "spread",
        "events/s",
        "wall_s",
        "cpu_s",
        "busy_s",
        "energy_j"
    ));
    for s in summaries {
        out.push_str(&format!(
            "{:<12} {:>8.2} {:>11} {:>9} {:>11.0} {:>7.2} {:>7.2} {:>9.2} {:>10.0}\n",
            s.variant,
            s.sim_s,
            opt(s.completion_s, 2),
            opt(s.spread_s, 2),
            s.events_per_s,
            s.wall_s,
            s.cpu_s,
            s.busy_cpu_s,
            s.energy_j
        ));
    }
    out.push('\n');
    out.push_str(&format!(
        "{:<12} {:<16} {:>10} {:>9} {:>9} {:>9}\n",
        "variant", "app", "finished_s", "cpu_s", "p50_ms", "p99_ms"
    ));
    for s in summaries {
        for a in &s.apps {
            out.push_str(&format!(
                "{:<12} {:<16} {:>10} {:>9.2} {:>9} {:>9}\n",
                s.variant,
                a.name,
                opt(a.finished_s, 2),
                a.cpu_s,
                opt(a.p50_ms, 3),
                opt(a.p99_ms, 3)
            ));
        }
    }
    out
}
