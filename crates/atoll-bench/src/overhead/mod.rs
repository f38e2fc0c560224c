//! `atoll bench overhead`: what the daemon itself costs, its share of a
//! CPU and its memory, on a machine with many processes, with one or two
//! daemon binaries side by side in one run.
//!
//! Before any daemon the benchmark starts 2,000 idle processes (`sleep`s in
//! one process group of its own, [`idle`]); one per unit of the largest
//! scenario carries a name that unit's adopt rule matches, the others stay
//! outside atoll. Then, for each **scenario** (10 and 100 units, features
//! off and on; [`config`]), each **binary** (the daemon measured, and with
//! `--baseline-bin` a second one) and each rep, it starts that binary's
//! `atoll daemon` on a fresh config, cgroup root, socket and state dir,
//! waits until every unit holds its process, lets it run a warm-up, and
//! then measures the daemon's process over a window ([`measure`]): CPU
//! share (`utime + stime` over wall time, % of one CPU), RSS at the end and
//! its peak, epochs per second (from `status --json`), context switches.
//! Runs of the two binaries alternate (scenario by scenario, daemon then
//! baseline, the whole order reversed every other rep), so drift in the
//! machine's load falls on both. [`assemble`] gives medians with min and
//! max over the reps, and daemon ÷ baseline of the medians.

pub mod config;
pub mod idle;
pub mod measure;
mod run;
mod table;

use std::path::PathBuf;

pub use config::ConfigSummary;
pub(crate) use run::existing;
pub use run::{config_here, run};
use serde::{Deserialize, Serialize};
pub use table::render_table;

use crate::machine::Machine;
use crate::stats::{ratio, round, Summary};

/// The scenario the goal is about: 100 units, features on.
pub const GOAL_UNITS: usize = 100;
/// The goal's CPU share, % of one CPU.
pub const GOAL_CPU_PCT: f64 = 0.3;
/// The goal's RSS, MiB.
pub const GOAL_RSS_MIB: f64 = 20.0;
/// The goal, as the issue states it.
pub const GOAL_TEXT: &str =
    "goal: under 0.3 % of one CPU and under 20 MB RSS with 100 units, features on";

/// The optional features off or on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Features {
    /// `smp`, no `[comm]`.
    Off,
    /// `isolate` and `[comm]`.
    On,
}

impl Features {
    /// `off` / `on`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
        }
    }

    /// Whether they are on.
    pub fn on(self) -> bool {
        self == Self::On
    }
}

impl std::str::FromStr for Features {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "off" => Ok(Self::Off),
            "on" => Ok(Self::On),
            _ => Err(format!("features {s:?}: expected off or on")),
        }
    }
}

/// Which backend the daemons run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The machine's cgroups (`--backend auto`: cgroup2 or cgroup1); root.
    Cgroup,
    /// The simulated backend (`--backend sim`): no root, but the daemon
    /// then sees only its simulated processes, not the machine's.
    Sim,
}

impl Backend {
    /// `cgroup` / `sim`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cgroup => "cgroup",
            Self::Sim => "sim",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "cgroup" => Ok(Self::Cgroup),
            "sim" => Ok(Self::Sim),
            _ => Err(format!("backend {s:?}: expected cgroup or sim")),
        }
    }
}

/// One scenario: how many units, which features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scenario {
    /// Units in the config.
    pub units: usize,
    /// Features off or on.
    pub features: Features,
}

impl Scenario {
    /// `u100-on`.
    pub fn name(&self) -> String {
        format!("u{}-{}", self.units, self.features.as_str())
    }
}

/// Which of the two binaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Which {
    /// The daemon measured (`--daemon-bin`, else this binary): A.
    Daemon,
    /// The one it is compared with (`--baseline-bin`): B.
    Baseline,
}

impl Which {
    /// `daemon` / `baseline`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Daemon => "daemon",
            Self::Baseline => "baseline",
        }
    }

    /// `A` / `B`, in the table.
    pub fn letter(self) -> &'static str {
        match self {
            Self::Daemon => "A",
            Self::Baseline => "B",
        }
    }
}

/// Durations, reps and scenarios of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Short runs (a smoke test).
    pub quick: bool,
    /// Repetitions of every scenario and binary.
    pub reps: usize,
    /// The measured window, s.
    pub seconds: f64,
    /// Time between the units holding their processes and the window, s.
    pub warmup_s: f64,
    /// Unit counts.
    pub units: Vec<usize>,
    /// Features off, on, or both.
    pub features: Vec<Features>,
    /// Idle processes started (the units' among them).
    pub idle: usize,
    /// The daemon's epoch, ms.
    pub epoch_ms: u64,
    /// The backend.
    pub backend: Backend,
}

impl Settings {
    /// The defaults (`quick`: 10 units only, a 2 s window after 2 s, 1
    /// rep); the arguments given override them.
    pub fn new(
        quick: bool,
        reps: Option<usize>,
        seconds: Option<f64>,
        units: Option<Vec<usize>>,
    ) -> Self {
        Self {
            quick,
            reps: reps.unwrap_or(if quick { 1 } else { 3 }).max(1),
            seconds: seconds.unwrap_or(if quick { 2.0 } else { 20.0 }),
            warmup_s: if quick { 2.0 } else { 5.0 },
            units: units.unwrap_or_else(|| if quick { vec![10] } else { vec![10, 100] }),
            features: vec![Features::Off, Features::On],
            idle: 2000,
            epoch_ms: 30,
            backend: Backend::Cgroup,
        }
    }

    /// Every scenario, units first.
    pub fn scenarios(&self) -> Vec<Scenario> {
        self.units
            .iter()
            .flat_map(|&units| {
                self.features
                    .iter()
                    .map(move |&features| Scenario { units, features })
            })
            .collect()
    }
}

/// What `atoll bench overhead` runs.
#[derive(Clone, Debug)]
pub struct OverheadOptions {
    /// The daemon binary measured (A).
    pub daemon_bin: PathBuf,
    /// The binary compared with it (B).
    pub baseline_bin: Option<PathBuf>,
    /// Durations, reps, scenarios.
    pub settings: Settings,
    /// The command line, for the report.
    pub command: String,
}

impl OverheadOptions {
    /// Progress steps: the set-up, and one per run.
    pub fn steps(&self) -> usize {
        let bins = 1 + usize::from(self.baseline_bin.is_some());
        1 + self.settings.reps * self.settings.scenarios().len() * bins
    }
}

/// One window of one daemon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The rep (0-based).
    pub rep: usize,
    /// The window, s.
    pub window_s: f64,
    /// `utime + stime` over the window, clock ticks.
    pub cpu_ticks: u64,
    /// That over the window, % of one CPU.
    pub cpu_pct: f64,
    /// The live threads' `schedstat` run time over the window, % of one
    /// CPU (ns resolution; a thread that ended in the window is missing).
    pub cpu_pct_threads: f64,
    /// `VmRSS` at the end of the window, MiB.
    pub rss_mib: f64,
    /// `VmHWM` (peak RSS since start) at the end of the window, MiB.
    pub hwm_mib: f64,
    /// Epochs between the status calls around the window.
    pub epochs: u64,
    /// Those per second.
    pub epochs_per_s: f64,
    /// Context switches of its threads per second.
    pub ctx_switches_per_s: f64,
    /// Voluntary context switches in the window.
    pub voluntary: u64,
    /// Involuntary ones.
    pub involuntary: u64,
    /// Its threads at the end.
    pub threads: u64,
    /// Units holding a process at the end.
    pub units_held: usize,
    /// How busy the machine's CPUs were over the window, % of all of them
    /// (`/proc/stat`; everything, the daemon included).
    pub machine_busy_pct: Option<f64>,
    /// The 1-minute load average at the end.
    pub loadavg_1m: Option<f64>,
}

/// Median, smallest and largest of the reps.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Nearest-rank median (a sample that was observed).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// Of `values`; `None` when there is none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let v: Vec<f64> = values.into_iter().collect();
        Summary::of(&v).map(|s| Self {
            median: s.p50,
            min: s.min,
            max: s.max,
        })
    }
}

/// One binary in one scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BinaryResult {
    /// CPU share, % of one CPU.
    pub cpu_pct: Option<Spread>,
    /// The same from the live threads' `schedstat`.
    pub cpu_pct_threads: Option<Spread>,
    /// RSS at the end of the window, MiB.
    pub rss_mib: Option<Spread>,
    /// Peak RSS, MiB.
    pub hwm_mib: Option<Spread>,
    /// Epochs per second.
    pub epochs_per_s: Option<Spread>,
    /// Context switches per second.
    pub ctx_switches_per_s: Option<Spread>,
    /// Every window.
    pub samples: Vec<Sample>,
}

impl BinaryResult {
    /// The spreads of `samples`.
    pub fn of(samples: Vec<Sample>) -> Self {
        let spread = |f: fn(&Sample) -> f64| Spread::of(samples.iter().map(f));
        Self {
            cpu_pct: spread(|s| s.cpu_pct),
            cpu_pct_threads: spread(|s| s.cpu_pct_threads),
            rss_mib: spread(|s| s.rss_mib),
            hwm_mib: spread(|s| s.hwm_mib),
            epochs_per_s: spread(|s| s.epochs_per_s),
            ctx_switches_per_s: spread(|s| s.ctx_switches_per_s),
            samples,
        }
    }

    /// Whether its medians meet the goal (CPU and RSS under the limits).
    pub fn meets_goal(&self) -> Option<bool> {
        Some(self.cpu_pct?.median < GOAL_CPU_PCT && self.rss_mib?.median < GOAL_RSS_MIB)
    }
}

/// Daemon ÷ baseline, of the medians.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    /// CPU share.
    pub cpu_pct: Option<f64>,
    /// RSS at the end.
    pub rss_mib: Option<f64>,
    /// Peak RSS.
    pub hwm_mib: Option<f64>,
    /// Epochs per second.
    pub epochs_per_s: Option<f64>,
}

impl Ratios {
    /// `a ÷ b`, rounded to 3 decimals.
    pub fn of(a: &BinaryResult, b: &BinaryResult) -> Self {
        let r = |f: fn(&BinaryResult) -> Option<Spread>| {
            ratio(f(a).map(|s| s.median), f(b).map(|s| s.median)).map(|v| round(v, 3))
        };
        Self {
            cpu_pct: r(|x| x.cpu_pct),
            rss_mib: r(|x| x.rss_mib),
            hwm_mib: r(|x| x.hwm_mib),
            epochs_per_s: r(|x| x.epochs_per_s),
        }
    }
}

/// One scenario, both binaries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// `u100-on`.
    pub name: String,
    /// Units.
    pub units: usize,
    /// Features.
    pub features: Features,
    /// Each unit's entitlement, CPUs.
    pub entitlement_cpus: f64,
    /// The daemon measured.
    pub daemon: BinaryResult,
    /// The baseline, when there is one.
    pub baseline: Option<BinaryResult>,
    /// Daemon ÷ baseline, when there is a baseline.
    pub ratio: Option<Ratios>,
}

/// Puts one scenario's samples together.
pub fn assemble(
    sc: Scenario,
    entitlement_cpus: f64,
    daemon: Vec<Sample>,
    baseline: Option<Vec<Sample>>,
) -> ScenarioResult {
    let daemon = BinaryResult::of(daemon);
    let baseline = baseline.map(BinaryResult::of);
    ScenarioResult {
        name: sc.name(),
        units: sc.units,
        features: sc.features,
        entitlement_cpus,
        ratio: baseline.as_ref().map(|b| Ratios::of(&daemon, b)),
        daemon,
        baseline,
    }
}

/// The goal and whether each binary meets it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    /// The goal, in words.
    pub text: String,
    /// The scenario it is judged on.
    pub scenario: String,
    /// The CPU limit, % of one CPU.
    pub max_cpu_pct: f64,
    /// The RSS limit, MiB.
    pub max_rss_mib: f64,
    /// Whether the daemon's medians meet it (`None`: not measured).
    pub daemon: Option<bool>,
    /// The same for the baseline.
    pub baseline: Option<bool>,
}

impl Goal {
    /// Judged on the 100-unit, features-on scenario of `scenarios`.
    pub fn judge(scenarios: &[ScenarioResult]) -> Self {
        let sc = scenarios
            .iter()
            .find(|s| s.units == GOAL_UNITS && s.features == Features::On);
        Self {
            text: GOAL_TEXT.into(),
            scenario: Scenario {
                units: GOAL_UNITS,
                features: Features::On,
            }
            .name(),
            max_cpu_pct: GOAL_CPU_PCT,
            max_rss_mib: GOAL_RSS_MIB,
            daemon: sc.and_then(|s| s.daemon.meets_goal()),
            baseline: sc.and_then(|s| s.baseline.as_ref()?.meets_goal()),
        }
    }
}

/// A binary the benchmark ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Binary {
    /// Its path.
    pub path: String,
    /// The version its daemon reported (`status`).
    pub version: Option<String>,
    /// The backend its daemon reported (`status`).
    pub backend: Option<String>,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverheadReport {
    /// Every scenario.
    pub scenarios: Vec<ScenarioResult>,
    /// The goal, judged.
    pub goal: Goal,
    /// The daemon measured (A).
    pub daemon: Binary,
    /// The baseline (B).
    pub baseline: Option<Binary>,
    /// How the configs were built.
    pub config: ConfigSummary,
    /// Idle processes still running at the end (the units' among them).
    pub idle_processes: usize,
    /// Durations, reps, scenarios.
    pub settings: Settings,
    /// The machine (load average at the start).
    pub machine: Machine,
    /// `/proc/loadavg` at the end.
    pub loadavg_end: String,
    /// The command line.
    pub command: String,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample(rep: usize, cpu: f64, rss: f64) -> Sample {
        Sample {
            rep,
            window_s: 20.0,
            cpu_ticks: atoll_core::num::saturating_u64(cpu * 20.0),
            cpu_pct: cpu,
            cpu_pct_threads: cpu,
            rss_mib: rss,
            hwm_mib: rss + 1.0,
            epochs: 666,
            epochs_per_s: 33.3,
            ctx_switches_per_s: 70.0,
            voluntary: 1400,
            involuntary: 0,
            threads: 4,
            units_held: 100,
            machine_busy_pct: Some(5.0),
            loadavg_1m: Some(0.5),
        }
    }

    #[test]
    fn names_and_parsing() {
        let sc = Scenario {
            units: 100,
            features: Features::On,
        };
        assert_eq!(sc.name(), "u100-on");
        assert_eq!("off".parse::<Features>(), Ok(Features::Off));
        assert!("maybe".parse::<Features>().is_err());
        assert_eq!("sim".parse::<Backend>(), Ok(Backend::Sim));
        assert!("cgroup3".parse::<Backend>().is_err());
        assert_eq!(
            (Which::Daemon.letter(), Which::Baseline.as_str()),
            ("A", "baseline")
        );
    }

    #[test]
    fn settings_and_scenarios() {
        let s = Settings::new(false, None, None, None);
        assert_eq!((s.reps, s.seconds, s.idle, s.epoch_ms), (3, 20.0, 2000, 30));
        let names: Vec<String> = s.scenarios().iter().map(Scenario::name).collect();
        assert_eq!(names, ["u10-off", "u10-on", "u100-off", "u100-on"]);
        let q = Settings::new(true, None, None, None);
        assert_eq!((q.reps, q.seconds, q.units.clone()), (1, 2.0, vec![10]));
        let o = Settings::new(true, Some(0), Some(5.0), Some(vec![3]));
        assert_eq!((o.reps, o.seconds, o.units), (1, 5.0, vec![3]));
        let opts = OverheadOptions {
            daemon_bin: "a".into(),
            baseline_bin: Some("b".into()),
            settings: s,
            command: String::new(),
        };
        assert_eq!(opts.steps(), 1 + 3 * 4 * 2);
    }

    #[test]
    fn medians_ratios_and_the_goal() {
        let sc = Scenario {
            units: 100,
            features: Features::On,
        };
        let a = vec![
            sample(0, 0.2, 9.0),
            sample(1, 0.4, 9.5),
            sample(2, 0.25, 9.2),
        ];
        let b = vec![
            sample(0, 2.0, 9.0),
            sample(1, 2.6, 9.5),
            sample(2, 2.5, 9.2),
        ];
        let r = assemble(sc, 0.01, a, Some(b));
        let cpu = r.daemon.cpu_pct.unwrap();
        assert_eq!((cpu.median, cpu.min, cpu.max), (0.25, 0.2, 0.4));
        assert_eq!(r.baseline.as_ref().unwrap().cpu_pct.unwrap().median, 2.5);
        let ratio = r.ratio.unwrap();
        assert_eq!(ratio.cpu_pct, Some(0.1));
        assert_eq!((ratio.rss_mib, ratio.epochs_per_s), (Some(1.0), Some(1.0)));
        let g = Goal::judge(std::slice::from_ref(&r));
        assert_eq!((g.daemon, g.baseline), (Some(true), Some(false)));
        assert_eq!(g.scenario, "u100-on");
        // RSS over the limit fails it too.
        let fat = assemble(sc, 0.01, vec![sample(0, 0.1, 25.0)], None);
        assert_eq!(fat.daemon.meets_goal(), Some(false));
        assert!(fat.ratio.is_none());
        // Without the 100-unit, features-on scenario there is no verdict.
        let small = assemble(
            Scenario {
                units: 10,
                features: Features::On,
            },
            0.1,
            vec![sample(0, 0.1, 5.0)],
            None,
        );
        let g = Goal::judge(&[small]);
        assert_eq!((g.daemon, g.baseline), (None, None));
        assert!(BinaryResult::of(vec![]).meets_goal().is_none());
    }
}
