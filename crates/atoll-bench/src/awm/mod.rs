//! `atoll bench awm`: the evidence for reconfigurable applications (seed
//! 002, BarbequeRTRM, sections 5.2 "Workload Burst Analysis" and 5.3
//! "Mixed-Workload Analysis"), managed and unmanaged, side by side in one
//! run.
//!
//! A **scenario** is N instances of the data-parallel worker
//! (`awm-parallel`, the burst) and K of the pipeline worker
//! (`awm-pipeline`, the mix), started at once; each instance has a fixed
//! amount of work. Both sides use the same CPUs (every online CPU: the
//! daemon and the benchmark need next to no CPU, and a one-CPU island would
//! leave no room for modes of 2 and 4 threads):
//!
//! - **unmanaged**: the original applications with their most threads
//!   (`max_threads` per thread pool), in a cgroup the benchmark makes
//!   (`atoll-bench-awm-<pid>-<ns>`, cpuset = those CPUs), freely scheduled
//!   by Linux;
//! - **managed**: the real daemon (one per run, a unique cgroup root, an
//!   island over those CPUs, `[apps]`), every instance registering with its
//!   recipe at once (one burst, one planning run) and running the working
//!   mode it is assigned, or waiting, frozen, while it cannot get its
//!   smallest one.
//!
//! Every instance waits for a start file, so all start together; each
//! reports its end on `CLOCK_MONOTONIC`, its context switches and its CPU
//! migrations ([`crate::worker`]). Per run: the **makespan** (start to the
//! last end, the paper's CTIME), the mean instance completion time, the
//! sums of context switches and migrations, and how much CPU anything else
//! used meanwhile (the daemon, the benchmark, other load on the machine:
//! the CPUs' busy time in `/proc/stat` minus the instances' own). Reps interleave the runs
//! (scenario by scenario, unmanaged then managed, the whole order reversed
//! every other rep). [`assemble`] turns the samples into means and
//! `completion_improvement = 1 - managed / unmanaged` on the makespan (the
//! mean completion's improvement is given separately), against the goal of
//! at least 0.20 with fewer migrations in the oversubscribed scenarios.

mod run;
mod table;

use std::path::PathBuf;
use std::str::FromStr;

pub use run::run;
use serde::{Deserialize, Serialize};
pub use table::render_table;

use crate::comm::{improvement, mean};
use crate::machine::Machine;
use crate::stats::round;

/// The goal on `completion_improvement` in oversubscribed scenarios.
pub const GOAL_IMPROVEMENT: f64 = 0.20;

/// Instances of each kind in one scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scenario {
    /// Data-parallel instances.
    pub parallel: usize,
    /// Pipeline instances.
    pub pipeline: usize,
}

impl Scenario {
    /// `burst-N` (parallel only) or `mix-M+K`.
    pub fn name(&self) -> String {
        if self.pipeline == 0 {
            format!("burst-{}", self.parallel)
        } else {
            format!("mix-{}+{}", self.parallel, self.pipeline)
        }
    }

    /// Threads all its instances run unmanaged, `max_threads` per pool
    /// (a pipeline: two compute stages, plus load and out).
    pub fn unmanaged_threads(&self, max_threads: usize) -> usize {
        self.parallel * max_threads + self.pipeline * (2 * max_threads + 2)
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let bad = || format!("scenario {s:?}: expected burst-N or mix-M+K (N, M, K > 0)");
        let n = |v: &str| v.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(bad);
        if let Some(n_) = s.strip_prefix("burst-") {
            return Ok(Self {
                parallel: n(n_)?,
                pipeline: 0,
            });
        }
        let (m, k) = s
            .strip_prefix("mix-")
            .and_then(|r| r.split_once('+'))
            .ok_or_else(bad)?;
        Ok(Self {
            parallel: n(m)?,
            pipeline: n(k)?,
        })
    }
}

/// The scenarios without `--scenarios`.
pub fn default_scenarios(quick: bool) -> Vec<Scenario> {
    let list: &[&str] = if quick {
        &["burst-2", "mix-1+1"]
    } else {
        &["burst-2", "burst-4", "burst-8", "mix-2+2", "mix-4+4"]
    };
    list.iter().map(|s| s.parse().expect("valid")).collect()
}

/// How big each instance's work is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkSize {
    /// Cycles (the pipeline: batches).
    pub cycles: u64,
    /// Units per cycle (the pipeline: per item and compute stage).
    pub work: u64,
    /// Items per batch (the pipeline).
    pub items: u64,
    /// Each thread's working set, KiB.
    pub ws_kib: usize,
}

/// Sizes, reps and scenarios of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Tiny sizes (a smoke test).
    pub quick: bool,
    /// Repetitions of every scenario and side.
    pub reps: usize,
    /// The scenarios.
    pub scenarios: Vec<Scenario>,
    /// Threads per pool unmanaged (the largest working mode's).
    pub max_threads: usize,
    /// The data-parallel instance's work.
    pub parallel: WorkSize,
    /// The pipeline instance's work.
    pub pipeline: WorkSize,
    /// How often managed instances poll the daemon, ms.
    pub poll_ms: u64,
    /// `[apps] weights.balance` for the daemon (`None`: its default).
    pub balance_weight: Option<f64>,
    /// The CPUs both sides run on (set when the run starts).
    pub cpus: String,
}

impl Settings {
    /// The defaults, or the tiny ones with `quick`; `reps` and `scenarios`
    /// override them.
    pub fn new(quick: bool, reps: Option<usize>, scenarios: Option<Vec<Scenario>>) -> Self {
        Self {
            quick,
            reps: reps.unwrap_or(if quick { 1 } else { 5 }).max(1),
            scenarios: scenarios.unwrap_or_else(|| default_scenarios(quick)),
            max_threads: 4,
            parallel: if quick {
                WorkSize {
                    cycles: 5,
                    work: 100,
                    items: 1,
                    ws_kib: 64,
                }
            } else {
                WorkSize {
                    cycles: 100,
                    work: 4500,
                    items: 1,
                    ws_kib: 256,
                }
            },
            pipeline: if quick {
                WorkSize {
                    cycles: 3,
                    work: 50,
                    items: 4,
                    ws_kib: 64,
                }
            } else {
                WorkSize {
                    cycles: 20,
                    work: 700,
                    items: 16,
                    ws_kib: 256,
                }
            },
            poll_ms: 20,
            balance_weight: None,
            cpus: String::new(),
        }
    }
}

/// What `atoll bench awm` runs.
#[derive(Clone, Debug)]
pub struct AwmOptions {
    /// The `atoll` binary (daemon, `__worker`).
    pub exe: PathBuf,
    /// Sizes, reps, scenarios.
    pub settings: Settings,
    /// The command line, for the report.
    pub command: String,
}

impl AwmOptions {
    /// Progress steps: one per run, and the machine check.
    pub fn steps(&self) -> usize {
        1 + 2 * self.settings.reps * self.settings.scenarios.len()
    }
}

/// Unmanaged or managed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Freely scheduled by Linux.
    Unmanaged,
    /// Under the daemon's application policy.
    Managed,
}

impl Side {
    /// `unmanaged` / `managed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unmanaged => "unmanaged",
            Self::Managed => "managed",
        }
    }
}

/// One instance's report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    /// `awm-parallel` or `awm-pipeline`.
    pub kind: String,
    /// Start signal to its end, s.
    pub completion_s: f64,
    /// Cycles done.
    pub cycles: u64,
    /// Items done (the pipeline; cycles for the parallel app).
    pub items: u64,
    /// Whether it did all its cycles.
    pub complete: bool,
    /// Its context switches.
    pub context_switches: u64,
    /// Its CPU migrations.
    pub migrations: u64,
    /// Its CPU time (user + system), s.
    pub cpu_s: f64,
    /// Threads at the end (per pool).
    pub threads_final: u64,
    /// Managed: assignments acted on (the first included).
    pub configurations: Option<u64>,
    /// Managed: changes of working mode.
    pub reconfigurations: Option<u64>,
    /// Managed: times it was told to wait.
    pub suspensions: Option<u64>,
    /// Managed: seconds spent waiting.
    pub suspended_s: Option<f64>,
}

/// One run of a scenario on one side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The rep (0-based).
    pub rep: usize,
    /// Start signal to the last instance's end, s.
    pub makespan_s: f64,
    /// Mean of the instances' completion times, s.
    pub mean_completion_s: f64,
    /// Sum over the instances.
    pub context_switches: u64,
    /// Sum over the instances.
    pub migrations: u64,
    /// CPUs' worth of time the run's CPUs were busy with anything but the
    /// instances (the daemon, the benchmark, the rest of the machine), over
    /// the run (from `/proc/stat`; at least 0: its ticks are coarse).
    pub outside_cpu: Option<f64>,
    /// Every instance.
    pub instances: Vec<Instance>,
    /// Energy of the machine's RAPL zones over the run, J (`None` without
    /// RAPL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
}

impl Sample {
    /// A sample of `instances` of rep `rep`; `busy` is how long the run's
    /// CPUs were busy (CPU seconds) over a window of `window_s`, if known.
    pub fn of(rep: usize, instances: Vec<Instance>, busy: Option<(f64, f64)>) -> Self {
        let times: Vec<f64> = instances.iter().map(|i| i.completion_s).collect();
        let own: f64 = instances.iter().map(|i| i.cpu_s).sum();
        let outside_cpu = busy
            .filter(|&(_, window_s)| window_s > 0.0)
            .map(|(busy_s, window_s)| round(((busy_s - own) / window_s).max(0.0), 3));
        Self {
            rep,
            makespan_s: round(times.iter().copied().fold(0.0, f64::max), 4),
            mean_completion_s: round(times.iter().sum::<f64>() / times.len().max(1) as f64, 4),
            context_switches: instances.iter().map(|i| i.context_switches).sum(),
            migrations: instances.iter().map(|i| i.migrations).sum(),
            outside_cpu,
            instances,
            energy_j: None,
        }
    }
}

/// Means over the reps of one side.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SideMean {
    /// Runs.
    pub reps: usize,
    /// Mean makespan, s.
    pub makespan_s: Option<f64>,
    /// Mean of the mean completion times, s.
    pub mean_completion_s: Option<f64>,
    /// Mean context switches per run.
    pub context_switches: Option<f64>,
    /// Mean migrations per run.
    pub migrations: Option<f64>,
    /// Mean CPUs used by anything but the instances (see
    /// [`Sample::outside_cpu`]).
    pub outside_cpu: Option<f64>,
    /// Mean seconds instances waited per run (managed).
    pub suspended_s: Option<f64>,
    /// Mean mode changes per run (managed).
    pub reconfigurations: Option<f64>,
    /// Mean RAPL energy per run, J (`None` without RAPL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
}

impl SideMean {
    /// The means of `samples`.
    pub fn of(samples: &[Sample]) -> Self {
        let m = |f: &dyn Fn(&Sample) -> Option<f64>, d| {
            mean(samples.iter().map(f)).map(|v| round(v, d))
        };
        Self {
            reps: samples.len(),
            makespan_s: m(&|s| Some(s.makespan_s), 4),
            mean_completion_s: m(&|s| Some(s.mean_completion_s), 4),
            context_switches: m(&|s| Some(s.context_switches as f64), 1),
            migrations: m(&|s| Some(s.migrations as f64), 1),
            outside_cpu: m(&|s| s.outside_cpu, 3),
            suspended_s: m(&|s| sum_of(s, |i| i.suspended_s), 3),
            reconfigurations: m(&|s| sum_of(s, |i| i.reconfigurations.map(|r| r as f64)), 2),
            energy_j: m(&|s| s.energy_j, 3),
        }
    }
}

/// The sum of `f` over the instances that have it (`None` if none has).
fn sum_of(s: &Sample, f: impl Fn(&Instance) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = s.instances.iter().filter_map(f).collect();
    (!v.is_empty()).then(|| v.iter().sum())
}

/// One scenario, both sides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// `burst-N` / `mix-M+K`.
    pub name: String,
    /// The instances.
    pub scenario: Scenario,
    /// Threads the unmanaged side runs, against the CPUs.
    pub unmanaged_threads: usize,
    /// More threads than CPUs unmanaged.
    pub oversubscribed: bool,
    /// Unmanaged means.
    pub unmanaged: SideMean,
    /// Managed means.
    pub managed: SideMean,
    /// `1 - managed / unmanaged` of the mean makespan.
    pub completion_improvement: Option<f64>,
    /// The same per rep (pairs of the same rep).
    pub completion_improvement_per_rep: Vec<Option<f64>>,
    /// `1 - managed / unmanaged` of the mean instance completion time.
    pub mean_completion_improvement: Option<f64>,
    /// `1 - managed / unmanaged` of the context switches.
    pub context_switch_reduction: Option<f64>,
    /// `1 - managed / unmanaged` of the migrations.
    pub migration_reduction: Option<f64>,
    /// Oversubscribed: improvement >= the goal and fewer migrations.
    pub goal_met: Option<bool>,
    /// Every run, unmanaged.
    pub unmanaged_samples: Vec<Sample>,
    /// Every run, managed.
    pub managed_samples: Vec<Sample>,
}

/// Puts one scenario's samples together.
pub fn assemble(
    scenario: Scenario,
    cpus: usize,
    max_threads: usize,
    unmanaged: Vec<Sample>,
    managed: Vec<Sample>,
) -> ScenarioResult {
    let (u, m) = (SideMean::of(&unmanaged), SideMean::of(&managed));
    let completion_improvement = improvement(u.makespan_s, m.makespan_s);
    let migration_reduction = improvement(u.migrations, m.migrations);
    let threads = scenario.unmanaged_threads(max_threads);
    let oversubscribed = threads > cpus;
    let goal_met = match (
        oversubscribed,
        completion_improvement,
        u.migrations,
        m.migrations,
    ) {
        (true, Some(c), Some(um), Some(mm)) => Some(c >= GOAL_IMPROVEMENT && mm < um),
        _ => None,
    };
    let per_rep = unmanaged
        .iter()
        .map(|us| {
            managed
                .iter()
                .find(|ms| ms.rep == us.rep)
                .and_then(|ms| improvement(Some(us.makespan_s), Some(ms.makespan_s)))
        })
        .collect();
    ScenarioResult {
        name: scenario.name(),
        scenario,
        unmanaged_threads: threads,
        oversubscribed,
        completion_improvement,
        completion_improvement_per_rep: per_rep,
        mean_completion_improvement: improvement(u.mean_completion_s, m.mean_completion_s),
        context_switch_reduction: improvement(u.context_switches, m.context_switches),
        migration_reduction,
        goal_met,
        unmanaged: u,
        managed: m,
        unmanaged_samples: unmanaged,
        managed_samples: managed,
    }
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AwmReport {
    /// Every scenario.
    pub scenarios: Vec<ScenarioResult>,
    /// The goal, in words.
    pub goal: String,
    /// Sizes, reps, scenarios.
    pub settings: Settings,
    /// The machine (load average at the start).
    pub machine: Machine,
    /// `/proc/loadavg` at the end.
    pub loadavg_end: String,
    /// The command line.
    pub command: String,
    /// Where joules come from: `RAPL package-0, ...`, or why there are
    /// none (`no RAPL on this machine`).
    #[serde(default)]
    pub energy: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(t: f64, cs: u64, mig: u64) -> Instance {
        Instance {
            kind: "awm-parallel".into(),
            completion_s: t,
            cycles: 5,
            items: 5,
            complete: true,
            context_switches: cs,
            migrations: mig,
            cpu_s: t / 2.0,
            threads_final: 1,
            configurations: None,
            reconfigurations: None,
            suspensions: None,
            suspended_s: None,
        }
    }

    #[test]
    fn scenarios_parse_and_name_themselves() {
        let s: Scenario = "burst-8".parse().unwrap();
        assert_eq!((s.parallel, s.pipeline, s.name()), (8, 0, "burst-8".into()));
        let s: Scenario = " mix-2+3".parse().unwrap();
        assert_eq!((s.parallel, s.pipeline, s.name()), (2, 3, "mix-2+3".into()));
        assert_eq!(s.unmanaged_threads(4), 8 + 3 * 10);
        for bad in ["burst-0", "mix-2", "mix-0+1", "fast", "burst-x"] {
            assert!(bad.parse::<Scenario>().is_err(), "{bad}");
        }
        assert_eq!(default_scenarios(true).len(), 2);
    }

    #[test]
    fn samples_and_improvements() {
        let s = Sample::of(
            0,
            vec![inst(2.0, 10, 1), inst(4.0, 30, 3)],
            Some((5.0, 4.0)),
        );
        assert_eq!((s.makespan_s, s.mean_completion_s), (4.0, 3.0));
        assert_eq!((s.context_switches, s.migrations), (40, 4));
        // 5 CPU-s busy over 4 s, 3 of them the instances'.
        assert_eq!(s.outside_cpu, Some(0.5));
        let busy_less = Sample::of(0, vec![inst(2.0, 1, 1)], Some((0.5, 2.0)));
        assert_eq!(busy_less.outside_cpu, Some(0.0));
        assert_eq!(Sample::of(0, vec![], Some((1.0, 0.0))).outside_cpu, None);
        let u = vec![s, Sample::of(1, vec![inst(6.0, 20, 6)], None)];
        let m = vec![
            Sample::of(0, vec![inst(3.0, 5, 1)], None),
            Sample::of(1, vec![inst(3.0, 5, 1)], None),
        ];
        let r = assemble("burst-2".parse().unwrap(), 2, 4, u, m);
        assert_eq!(r.unmanaged.makespan_s, Some(5.0));
        assert_eq!(r.completion_improvement, Some(0.4));
        assert_eq!(
            r.completion_improvement_per_rep,
            vec![Some(0.25), Some(0.5)]
        );
        assert_eq!(r.mean_completion_improvement, Some(0.3333));
        assert_eq!(r.migration_reduction, Some(0.8));
        assert!(r.oversubscribed);
        assert_eq!(r.goal_met, Some(true));
        // Slower managed: not met; not oversubscribed: no verdict.
        let r = assemble(
            "burst-1".parse().unwrap(),
            2,
            4,
            vec![Sample::of(0, vec![inst(1.0, 1, 1)], None)],
            vec![Sample::of(0, vec![inst(2.0, 1, 1)], None)],
        );
        assert_eq!(r.goal_met, Some(false));
        assert_eq!(r.completion_improvement, Some(-1.0));
        let r = assemble(
            "burst-1".parse().unwrap(),
            8,
            4,
            vec![Sample::of(0, vec![inst(1.0, 1, 1)], None)],
            vec![],
        );
        assert_eq!((r.goal_met, r.completion_improvement), (None, None));
    }
}
