//! `atoll bench slo`: a latency-critical service beside best-effort work
//! (issue 16's evidence, after Heracles), side by side in one run.
//!
//! - **LC**: a real `redis-server` started by the benchmark (its own temp
//!   dir, a free loopback port, `--save ''`), driven by the `kvfront`
//!   worker (open loop, a `GET` and an `EVAL` of a `--work`-iteration Lua
//!   loop per request) from the host CPU, outside every unit.
//! - **BE**: a `spin` worker with one thread per island CPU; its
//!   throughput is work chunks per second.
//!
//! Measured first, in the same run, under plain Linux (no daemon, both
//! pinned to the island CPUs): the LC's solo maximum (kvfront offered far
//! more than Redis serves: its `--conns` threads then never wait, a closed
//! loop of `conns` outstanding requests; the maximum is the throughput it
//! got), the LC alone at every offered load (`--loads`, shares of that
//! maximum), and the BE alone (before the configurations and again after
//! them; the better of the two is its solo rate, so that a machine busy
//! during one of them does not inflate the BE's shares). Then each configuration ([`Config`]) runs
//! the LC at every load with the BE beside it. Every load has a warm-up
//! phase (LC and BE run, nothing recorded) and a measured phase.
//!
//! Per load ([`LoadRow`]): LC p50/p99, the p99 ratio against the LC alone
//! at that load, the LC throughput ratio, the windows whose p99 was above
//! the SLO, the BE's throughput as a share of its solo throughput, and the
//! effective machine utilization ([`emu`]). [`Goals`] are checked per row.
//!
//! Issue 16's other scenarios: the RUBiS-like three-tier application is
//! [`crate::tiers`] (`--scenario tiers`); seed 001's receive-buffer trigger
//! (a stream consumer beside a bulk transfer, the trigger off and on) is
//! [`stream`] (`--scenario stream`), `atoll bench netisland`'s stream
//! experiment run with these configurations (`static` the trigger off,
//! `slo` the trigger on).

pub mod config;
mod run;
pub mod stream;
mod table;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;

pub use config::BeThresholds;
pub use run::{run, DEPS_SCRIPT};
use serde::{Deserialize, Serialize};
pub use table::render_table;

use crate::machine::Machine;
use crate::stats::{ratio, round};

/// One way of running the LC beside the BE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Config {
    /// No daemon: both processes pinned to the island CPUs, plain Linux.
    Linux,
    /// The daemon with the units' `cpus` (and so their weights) alone.
    Static,
    /// The daemon in isolation mode `isolate` with the same entitlements.
    Isolate,
    /// The daemon with an overlay holding the LC to a `latency_us` SLO
    /// (fed by kvfront's reports) and the BE unit as its `best_effort`.
    Slo,
}

impl Config {
    /// Every configuration, in the default order.
    pub const ALL: [Self; 4] = [Self::Linux, Self::Static, Self::Isolate, Self::Slo];

    /// The name on the command line and in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Linux => "linux",
            Self::Static => "static",
            Self::Isolate => "isolate",
            Self::Slo => "slo",
        }
    }
}

impl FromStr for Config {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s.trim())
            .ok_or_else(|| {
                format!("unknown configuration {s:?} (one of linux, static, isolate, slo)")
            })
    }
}

/// Parses `--loads`: comma-separated percentages of the LC's solo maximum,
/// each in 1..=100, returned as shares (0.1 for 10).
pub fn parse_loads(s: &str) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        let pct: u32 = part
            .parse()
            .map_err(|_| format!("{part:?} is not a whole percentage"))?;
        if !(1..=100).contains(&pct) {
            return Err(format!("{pct} is not in 1..=100"));
        }
        out.push(f64::from(pct) / 100.0);
    }
    Ok(out)
}

/// The part of a run's settings both SLO scenarios (`slo` and `slo
/// --scenario tiers`) share and `atoll bench slo` sets from the same flags
/// (`--configs`, `--seconds`, `--warmup`, `--work`, `--slo-us`); flattened
/// into each scenario's settings, so a report's JSON is as before.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Common {
    /// The configurations run beside the baselines.
    pub configs: Vec<Config>,
    /// Measured seconds per load (per configuration in `tiers`).
    pub seconds: f64,
    /// Warm-up seconds (not recorded).
    pub warmup_s: f64,
    /// CPU work per request (Lua loop iterations in `slo`, hash rounds per
    /// `putbid` in `tiers`).
    pub work: u64,
    /// The SLO (p99 of a window, µs); `None`: derived by the scenario.
    pub slo_us: Option<u64>,
}

/// What the user picked for [`Common`]: each `Some` (and non-empty
/// `configs`) replaces the scenario's default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Picked {
    /// `--configs` (empty: the default).
    pub configs: Vec<Config>,
    /// `--seconds`.
    pub seconds: Option<f64>,
    /// `--warmup`.
    pub warmup_s: Option<f64>,
    /// `--work`.
    pub work: Option<u64>,
    /// `--slo-us`.
    pub slo_us: Option<u64>,
}

impl Common {
    /// Replaces the defaults with what the user picked.
    pub fn pick(&mut self, picked: Picked) {
        if !picked.configs.is_empty() {
            self.configs = picked.configs;
        }
        if let Some(s) = picked.seconds {
            self.seconds = s;
        }
        if let Some(w) = picked.warmup_s {
            self.warmup_s = w;
        }
        if let Some(w) = picked.work {
            self.work = w;
        }
        if picked.slo_us.is_some() {
            self.slo_us = picked.slo_us;
        }
    }
}

/// How a run is set up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Offered loads, shares of the LC's solo maximum.
    pub loads: Vec<f64>,
    /// What `slo` shares with `tiers`: configurations, seconds, warm-up,
    /// Lua loop iterations per request (the LC's CPU cost per request) and
    /// the SLO (`None`: derived from the LC alone, [`derive_slo`]).
    #[serde(flatten)]
    pub common: Common,
    /// Seconds of the solo-maximum measurement.
    pub max_seconds: f64,
    /// kvfront's concurrent requests.
    pub conns: usize,
    /// kvfront's window, ms (one p99 per window).
    pub report_ms: u64,
    /// The `slo` overlay's best-effort thresholds (`None`: the daemon's
    /// defaults).
    #[serde(default)]
    pub be: BeThresholds,
    /// The island's CPUs (filled in by the run).
    pub island_cpus: String,
    /// The host CPUs the load generator runs on (filled in by the run).
    pub load_cpus: String,
    /// A short run (a smoke test).
    pub quick: bool,
}

impl Settings {
    /// The defaults, shortened with `quick`.
    pub fn new(quick: bool) -> Self {
        Self {
            loads: vec![0.1, 0.3, 0.5, 0.7, 0.9],
            common: Common {
                configs: Config::ALL.to_vec(),
                seconds: if quick { 3.0 } else { 20.0 },
                warmup_s: if quick { 2.0 } else { 10.0 },
                work: 2000,
                slo_us: None,
            },
            max_seconds: if quick { 2.0 } else { 5.0 },
            conns: 4,
            report_ms: 1000,
            be: BeThresholds::default(),
            island_cpus: String::new(),
            load_cpus: String::new(),
            quick,
        }
    }
}

/// What `atoll bench slo` is asked to do.
#[derive(Clone, Debug)]
pub struct SloOptions {
    /// The atoll binary (daemon and workers).
    pub exe: PathBuf,
    /// The run's settings.
    pub settings: Settings,
    /// The command line, for the report.
    pub command: String,
}

impl SloOptions {
    /// Progress steps: the maximum, the BE alone, the LC alone at every
    /// load, every configuration at every load, the BE alone again.
    pub fn steps(&self) -> usize {
        let s = &self.settings;
        3 + s.loads.len() * (1 + s.common.configs.len())
    }
}

/// What the LC's load generator measured in one phase (kvfront's report).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LcSample {
    /// Offered requests per second.
    pub offered_per_s: f64,
    /// Completed requests per second.
    pub throughput_per_s: f64,
    /// Latency percentiles over the phase, µs.
    pub p50_us: Option<f64>,
    /// See `p50_us`.
    pub p99_us: Option<f64>,
    /// Failed requests.
    pub errors: u64,
    /// Each window's p99 (`None`: no completion and nothing outstanding).
    pub windows_us: Vec<Option<f64>>,
    /// Reports the daemon refused or that failed (`slo` only).
    pub reports_failed: u64,
}

/// Reads kvfront's JSON report.
pub fn parse_kvfront(v: &serde_json::Value) -> Result<LcSample, String> {
    if v["kind"] != "kvfront" {
        return Err(format!("not a kvfront report: {v}"));
    }
    let num = |k: &str| {
        v[k].as_f64()
            .ok_or_else(|| format!("kvfront report without {k}"))
    };
    let windows = v["windows"]
        .as_array()
        .ok_or("kvfront report without windows")?
        .iter()
        .map(|w| w["p_us"].as_f64())
        .collect();
    Ok(LcSample {
        offered_per_s: num("rate_per_s")?,
        throughput_per_s: num("throughput_per_s")?,
        p50_us: v["latency_us"]["p50"].as_f64(),
        p99_us: v["latency_us"]["p99"].as_f64(),
        errors: v["errors"].as_u64().unwrap_or(0),
        windows_us: windows,
        reports_failed: v["reports"]["failed"].as_u64().unwrap_or(0),
    })
}

/// Reads a `spin` report's work rate (chunks per second).
pub fn parse_spin(v: &serde_json::Value) -> Result<f64, String> {
    if v["kind"] != "spin" {
        return Err(format!("not a spin report: {v}"));
    }
    v["chunks_per_s"]
        .as_f64()
        .ok_or_else(|| format!("spin report without chunks_per_s: {v}"))
}

/// The windows whose p99 was above `slo_us`.
pub fn violations(windows_us: &[Option<f64>], slo_us: u64) -> usize {
    windows_us
        .iter()
        .flatten()
        .filter(|&&p| p > slo_us as f64)
        .count()
}

/// Whether the LC kept up with its offered load (completed at least
/// [`goal::THROUGHPUT_RATIO`] of it).
pub fn sustained(s: &LcSample) -> bool {
    s.offered_per_s > 0.0 && s.throughput_per_s >= goal::THROUGHPUT_RATIO * s.offered_per_s
}

/// The SLO when none is given: twice the worst p99 of the LC alone over
/// the loads it sustained ([`sustained`]; all of them if it sustained
/// none), rounded up to 100 µs. Heracles takes the SLO from the LC's tail
/// alone at its peak load; a load the LC alone could not keep up with has
/// a queue, not a tail.
pub fn derive_slo(alone: &[&LcSample]) -> Option<u64> {
    let kept: Vec<&&LcSample> = alone.iter().filter(|s| sustained(s)).collect();
    let from: Vec<&&LcSample> = if kept.is_empty() {
        alone.iter().collect()
    } else {
        kept
    };
    let worst = from
        .iter()
        .filter_map(|s| s.p99_us)
        .fold(None, |m: Option<f64>, p| Some(m.map_or(p, |m| m.max(p))))?;
    let us = (2.0 * worst / 100.0).ceil() * 100.0;
    Some(atoll_core::num::saturating_u64(us).max(100))
}

/// Effective machine utilization (Heracles): the LC's load as a share of
/// its solo maximum plus the BE's throughput as a share of its solo
/// throughput.
pub fn emu(lc_share: f64, be_share: f64) -> f64 {
    lc_share + be_share
}

/// The goals of issue 16.
pub mod goal {
    /// LC p99 at most this times its p99 alone.
    pub const P99_RATIO: f64 = 1.1;
    /// LC throughput at least this times alone.
    pub const THROUGHPUT_RATIO: f64 = 0.95;
    /// EMU at least this.
    pub const EMU: f64 = 0.9;
    /// The BE gets at least this share of what the LC leaves idle
    /// (`1 - load`): our reading of "the BE still gets the idle CPU".
    pub const BE_OF_IDLE: f64 = 0.5;
}

/// Which goals a row met (`None`: not measurable).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goals {
    /// p99 ratio <= [`goal::P99_RATIO`].
    pub p99: Option<bool>,
    /// Throughput ratio >= [`goal::THROUGHPUT_RATIO`].
    pub throughput: Option<bool>,
    /// EMU >= [`goal::EMU`].
    pub emu: Option<bool>,
    /// No window over the SLO.
    pub no_violation: bool,
    /// BE share >= [`goal::BE_OF_IDLE`] × (1 - load).
    pub be_idle: Option<bool>,
}

impl Goals {
    /// Whether every measurable goal was met.
    pub fn all(&self) -> bool {
        [self.p99, self.throughput, self.emu, self.be_idle]
            .into_iter()
            .all(|g| g != Some(false))
            && self.no_violation
    }
}

/// One configuration at one load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadRow {
    /// The configuration.
    pub config: Config,
    /// Offered load, share of the LC's solo maximum.
    pub load: f64,
    /// What the LC measured.
    pub lc: LcSample,
    /// The BE's work rate, chunks/s.
    pub be_chunks_per_s: Option<f64>,
    /// LC p99 ÷ LC alone's p99 at this load.
    pub p99_ratio: Option<f64>,
    /// LC throughput ÷ LC alone's at this load.
    pub throughput_ratio: Option<f64>,
    /// LC throughput ÷ the LC's solo maximum.
    pub lc_share: Option<f64>,
    /// BE work rate ÷ the BE's solo rate.
    pub be_share: Option<f64>,
    /// `lc_share + be_share`.
    pub emu: Option<f64>,
    /// Windows over the SLO, of `windows`.
    pub violations: usize,
    /// Windows with a value.
    pub windows: usize,
    /// The goals met.
    pub goals: Goals,
    /// `/proc/loadavg` after the row's run (other load on the machine).
    #[serde(default)]
    pub loadavg: String,
}

/// The baselines a row is compared with.
#[derive(Clone, Copy, Debug)]
pub struct Baselines<'a> {
    /// The LC alone at this load.
    pub alone: &'a LcSample,
    /// The LC's solo maximum, requests/s.
    pub lc_max: f64,
    /// The BE's solo rate, chunks/s.
    pub be_solo: Option<f64>,
    /// The SLO, µs.
    pub slo_us: u64,
}

/// The row of `config` at `load` from its samples and the baselines.
pub fn row(
    config: Config,
    load: f64,
    lc: LcSample,
    be_chunks_per_s: Option<f64>,
    b: Baselines<'_>,
) -> LoadRow {
    let r3 = |v: Option<f64>| v.map(|v| round(v, 3));
    let p99_ratio = ratio(lc.p99_us, b.alone.p99_us);
    let throughput_ratio = ratio(Some(lc.throughput_per_s), Some(b.alone.throughput_per_s));
    let lc_share = ratio(Some(lc.throughput_per_s), Some(b.lc_max));
    let be_share = ratio(be_chunks_per_s, b.be_solo);
    let emu = lc_share.zip(be_share).map(|(l, e)| emu(l, e));
    let violations = violations(&lc.windows_us, b.slo_us);
    let windows = lc.windows_us.iter().flatten().count();
    let goals = Goals {
        p99: p99_ratio.map(|r| r <= goal::P99_RATIO),
        throughput: throughput_ratio.map(|r| r >= goal::THROUGHPUT_RATIO),
        emu: emu.map(|e| e >= goal::EMU),
        no_violation: violations == 0,
        be_idle: be_share.map(|s| s >= goal::BE_OF_IDLE * (1.0 - load).max(0.0)),
    };
    LoadRow {
        config,
        load,
        lc,
        be_chunks_per_s: r3(be_chunks_per_s),
        p99_ratio: r3(p99_ratio),
        throughput_ratio: r3(throughput_ratio),
        lc_share: r3(lc_share),
        be_share: r3(be_share),
        emu: r3(emu),
        violations,
        windows,
        goals,
        loadavg: String::new(),
    }
}

/// The result of `atoll bench slo`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SloReport {
    /// The LC's solo maximum, requests/s, and the phase that measured it.
    pub lc_max_per_s: f64,
    /// The solo-maximum phase as kvfront saw it.
    pub lc_max: LcSample,
    /// The BE's solo work rate, chunks/s: the best of its solo runs.
    pub be_solo_chunks_per_s: f64,
    /// The BE's solo runs (before and after the configurations), chunks/s.
    pub be_solo_runs: Vec<f64>,
    /// The SLO used, µs, and whether it was derived.
    pub slo_us: u64,
    /// Whether [`derive_slo`] chose it.
    pub slo_derived: bool,
    /// The LC alone at each load (by the load's percentage).
    pub alone: BTreeMap<u32, LcSample>,
    /// Every configuration at every load.
    pub rows: Vec<LoadRow>,
    /// Configurations the daemon refused, with why.
    pub unavailable: BTreeMap<String, String>,
    /// The run's settings.
    pub settings: Settings,
    /// The machine.
    pub machine: Machine,
    /// The command line.
    pub command: String,
}

/// A load's percentage, the key of [`SloReport::alone`].
pub fn load_pct(load: f64) -> u32 {
    atoll_core::num::saturating_u32((load * 100.0).round())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sample(p99: f64, thr: f64, windows: &[Option<f64>]) -> LcSample {
        LcSample {
            offered_per_s: thr,
            throughput_per_s: thr,
            p50_us: Some(p99 / 2.0),
            p99_us: Some(p99),
            windows_us: windows.to_vec(),
            ..LcSample::default()
        }
    }

    #[test]
    fn configs_and_loads_parse() {
        for c in Config::ALL {
            assert_eq!(c.as_str().parse::<Config>(), Ok(c));
        }
        assert!("heracles".parse::<Config>().is_err());
        assert_eq!(parse_loads("10, 50,90"), Ok(vec![0.1, 0.5, 0.9]));
        assert!(parse_loads("0").is_err());
        assert!(parse_loads("101").is_err());
        assert!(parse_loads("5.5").is_err());
        assert!(parse_loads("").is_err());
    }

    #[test]
    fn emu_adds_the_lc_share_and_the_be_share() {
        assert_eq!(emu(0.5, 0.45), 0.95);
        assert_eq!(emu(0.9, 0.0), 0.9);
    }

    #[test]
    fn windows_over_the_slo_are_violations() {
        let w = [Some(900.0), Some(1000.0), Some(1000.5), None, Some(5000.0)];
        assert_eq!(violations(&w, 1000), 2);
        assert_eq!(violations(&w, 5000), 0);
        assert_eq!(violations(&[], 1), 0);
    }

    #[test]
    fn the_derived_slo_is_twice_the_worst_sustained_alone_p99_rounded_up() {
        let a = sample(310.0, 100.0, &[]);
        let b = sample(1234.0, 500.0, &[]);
        // Offered 1000/s, served 500/s: not sustained, its p99 is a queue.
        let queue = LcSample {
            offered_per_s: 1000.0,
            ..sample(900_000.0, 500.0, &[])
        };
        assert!(sustained(&a) && !sustained(&queue));
        assert_eq!(derive_slo(&[&a, &b, &queue]), Some(2500));
        // None sustained: all of them count.
        assert_eq!(derive_slo(&[&queue]), Some(1_800_000));
        assert_eq!(derive_slo(&[&sample(10.0, 1.0, &[])]), Some(100));
        let none = LcSample::default();
        assert_eq!(derive_slo(&[&none]), None);
        assert_eq!(derive_slo(&[]), None);
    }

    #[test]
    fn a_row_has_its_ratios_and_goals() {
        let alone = sample(1000.0, 500.0, &[]);
        let b = Baselines {
            alone: &alone,
            lc_max: 1000.0,
            be_solo: Some(200.0),
            slo_us: 2000,
        };
        // p99 1.05x alone, full throughput, BE at 45 % of solo: EMU 0.95.
        let r = row(
            Config::Slo,
            0.5,
            sample(1050.0, 500.0, &[Some(1500.0), Some(1900.0)]),
            Some(90.0),
            b,
        );
        assert_eq!(r.p99_ratio, Some(1.05));
        assert_eq!(r.throughput_ratio, Some(1.0));
        assert_eq!(
            (r.lc_share, r.be_share, r.emu),
            (Some(0.5), Some(0.45), Some(0.95))
        );
        assert_eq!((r.violations, r.windows), (0, 2));
        assert!(r.goals.all(), "{:?}", r.goals);
        // Slower, fewer requests, one window over, BE starved.
        let r = row(
            Config::Linux,
            0.5,
            sample(1200.0, 450.0, &[Some(2500.0), None]),
            Some(10.0),
            b,
        );
        assert_eq!(r.p99_ratio, Some(1.2));
        assert_eq!(r.throughput_ratio, Some(0.9));
        assert_eq!((r.violations, r.windows), (1, 1));
        let g = r.goals;
        assert_eq!(
            (g.p99, g.throughput, g.emu, g.no_violation, g.be_idle),
            (Some(false), Some(false), Some(false), false, Some(false))
        );
        assert!(!g.all());
        // No BE rate: its goals are not measurable, the others still are.
        let r = row(Config::Static, 0.5, sample(1000.0, 500.0, &[]), None, b);
        assert_eq!((r.be_share, r.emu, r.goals.emu), (None, None, None));
        assert!(r.goals.all());
    }

    #[test]
    fn worker_reports_parse() {
        let kv = json!({
            "kind": "kvfront", "rate_per_s": 300.0, "throughput_per_s": 299.5,
            "errors": 1, "latency_us": {"p50": 120.0, "p99": 900.0},
            "reports": {"sent": 3, "failed": 1},
            "windows": [{"p_us": 800.0}, {"p_us": null}, {"p_us": 950.0}],
        });
        let s = parse_kvfront(&kv).unwrap();
        assert_eq!((s.offered_per_s, s.throughput_per_s), (300.0, 299.5));
        assert_eq!(
            (s.p50_us, s.p99_us, s.errors),
            (Some(120.0), Some(900.0), 1)
        );
        assert_eq!(s.windows_us, vec![Some(800.0), None, Some(950.0)]);
        assert_eq!(s.reports_failed, 1);
        assert!(parse_kvfront(&json!({"kind": "spin"})).is_err());
        assert!(parse_kvfront(&json!({"kind": "kvfront"})).is_err());
        let spin = json!({"kind": "spin", "chunks_per_s": 4321.5});
        assert_eq!(parse_spin(&spin), Ok(4321.5));
        assert!(parse_spin(&json!({"kind": "spin"})).is_err());
        assert!(parse_spin(&kv).is_err());
    }

    #[test]
    fn load_percentages_key_the_baselines() {
        assert_eq!(load_pct(0.1), 10);
        assert_eq!(load_pct(0.9), 90);
        let mut s = Settings::new(true);
        s.loads = vec![0.1, 0.5];
        s.common.configs = vec![Config::Linux, Config::Slo];
        let o = SloOptions {
            exe: PathBuf::from("atoll"),
            settings: s,
            command: String::new(),
        };
        assert_eq!(o.steps(), 3 + 2 * 3);
    }

    #[test]
    fn picked_flags_replace_the_defaults_of_both_scenarios() {
        let picked = Picked {
            configs: vec![Config::Linux, Config::Isolate],
            seconds: Some(7.5),
            warmup_s: None,
            work: Some(42),
            slo_us: Some(900),
        };
        let mut slo = Settings::new(false);
        let mut tiers = crate::tiers::TiersSettings::new(false);
        let (slo_warmup, tiers_warmup) = (slo.common.warmup_s, tiers.common.warmup_s);
        slo.common.pick(picked.clone());
        tiers.common.pick(picked);
        for (c, warmup) in [(&slo.common, slo_warmup), (&tiers.common, tiers_warmup)] {
            assert_eq!(c.configs, vec![Config::Linux, Config::Isolate]);
            assert_eq!((c.seconds, c.warmup_s), (7.5, warmup));
            assert_eq!((c.work, c.slo_us), (42, Some(900)));
        }
        // Nothing picked: the defaults stay.
        let mut d = Settings::new(true);
        d.common.pick(Picked::default());
        assert_eq!(d, Settings::new(true));
    }

    #[test]
    fn the_shared_part_is_flat_in_a_report() {
        let s = Settings::new(true);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["seconds"], json!(s.common.seconds));
        assert_eq!(v["work"], json!(2000));
        assert!(v.get("common").is_none());
        let back: Settings = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
        let t = crate::tiers::TiersSettings::new(true);
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["work"], json!(200_000));
        assert_eq!(
            serde_json::from_value::<crate::tiers::TiersSettings>(v).unwrap(),
            t
        );
    }
}
