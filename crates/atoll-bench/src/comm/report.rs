//! What `atoll bench comm` reports, and the arithmetic from samples to
//! means, improvements and goals (pure).
//!
//! `improvement = 1 - on / off` of a statistic's mean over reps (positive:
//! the policy made it smaller). `hog_cpu_loss = 1 - on / off` of the hogs'
//! work rate (their `spin` chunks per second, summed over the five hogs);
//! `hog_cpu_time_loss` the same of the CPU time they got. The goals are the
//! paper's (seed 003, Table 1 and section 4.4).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::procstat::Counters;
use super::Settings;
use crate::machine::Machine;
use crate::stats::round;

/// The paper's average response time improvement (Table 1: 34.11 %).
pub const AVG_GOAL: f64 = 0.34;
/// The paper's p95 improvement (19.98 %).
pub const P95_GOAL: f64 = 0.20;
/// The paper's max improvement (51.15 %).
pub const MAX_GOAL: f64 = 0.51;
/// The hogs may lose less than this of their work rate.
pub const HOG_LOSS_GOAL: f64 = 0.02;
/// Every hog's CPU ÷ its reservation must stay at least this.
pub const RESERVATION_GOAL: f64 = 1.0;

/// The daemon's comm accounting of one unit (`atoll status`, `units[].comm`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitComm {
    /// Boosts started.
    pub boosts: u64,
    /// Time spent boosted, µs.
    pub boosted_us: u64,
    /// Boosts refused because the unit had used its reservation.
    pub over_reservation: u64,
    /// Boosts started as a recipient.
    pub recipient: u64,
    /// Boosts started as an anticipated sender.
    pub sender: u64,
    /// Boosts started on the network path.
    pub netpath: u64,
}

/// One two-tier run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TwoTierSample {
    /// Which rep (from 0).
    pub rep: usize,
    /// Response time mean, ms (`None`: nothing completed).
    pub avg_ms: Option<f64>,
    /// Median, ms.
    pub p50_ms: Option<f64>,
    /// 95th percentile, ms.
    pub p95_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Largest, ms.
    pub max_ms: Option<f64>,
    /// Completed requests per second of the window.
    pub throughput_rps: f64,
    /// Requests completed in the window.
    pub completed: u64,
    /// Requests failed (status, I/O, timeout) in the window.
    pub errors: u64,
    /// The hogs' work rate, `spin` chunks/s, summed.
    pub hog_chunks_per_s: Option<f64>,
    /// Each hog's CPU over the window, CPUs.
    pub hog_cpu: Vec<f64>,
    /// Each hog's reservation, CPUs.
    pub hog_reservation: f64,
    /// The proxy's CPU, CPUs.
    pub front_cpu: f64,
    /// The back end's CPU, CPUs.
    pub back_cpu: f64,
    /// The servers' (front and back) context switches in the window.
    pub servers_ctx: Counters,
    /// The hogs' context switches in the window.
    pub hogs_ctx: Counters,
    /// The window, s.
    pub window_s: f64,
    /// CPU of the island used by processes that are not the benchmark's
    /// (other load on the machine), CPUs (`None`: unreadable).
    pub outside_cpu: Option<f64>,
    /// The daemon's comm accounting by unit (`None`: it reports none).
    pub comm: Option<BTreeMap<String, UnitComm>>,
}

impl TwoTierSample {
    /// The hogs' CPU, summed.
    pub fn hog_cpu_total(&self) -> f64 {
        self.hog_cpu.iter().sum()
    }

    /// The smallest hog CPU ÷ reservation.
    pub fn hog_reservation_ratio_min(&self) -> Option<f64> {
        if self.hog_reservation <= 0.0 {
            return None;
        }
        self.hog_cpu
            .iter()
            .map(|c| c / self.hog_reservation)
            .min_by(f64::total_cmp)
    }

    /// The back end's CPU per completed request, ms.
    pub fn back_cpu_ms_per_request(&self) -> Option<f64> {
        (self.completed > 0).then(|| self.back_cpu * self.window_s * 1000.0 / self.completed as f64)
    }

    /// Context switches of servers and hogs per second.
    pub fn ctx_per_s(&self) -> Option<f64> {
        (self.window_s > 0.0).then(|| {
            (self.servers_ctx.switches() + self.hogs_ctx.switches()) as f64 / self.window_s
        })
    }

    /// Boosts summed over units (`None` without accounting).
    pub fn boosts(&self) -> Option<u64> {
        self.comm
            .as_ref()
            .map(|m| m.values().map(|c| c.boosts).sum())
    }
}

/// Means over the reps of one variant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TwoTierMean {
    /// Response time mean, ms.
    pub avg_ms: Option<f64>,
    /// p95, ms.
    pub p95_ms: Option<f64>,
    /// Max, ms.
    pub max_ms: Option<f64>,
    /// Completed requests/s.
    pub throughput_rps: Option<f64>,
    /// Failed requests, summed over reps.
    pub errors: u64,
    /// Hogs' work rate, chunks/s.
    pub hog_chunks_per_s: Option<f64>,
    /// Hogs' CPU, CPUs (summed over hogs).
    pub hog_cpu: Option<f64>,
    /// The smallest hog CPU ÷ reservation of any rep.
    pub hog_reservation_ratio_min: Option<f64>,
    /// Proxy CPU, CPUs.
    pub front_cpu: Option<f64>,
    /// Back-end CPU, CPUs.
    pub back_cpu: Option<f64>,
    /// Back-end CPU per request, ms.
    pub back_cpu_ms_per_request: Option<f64>,
    /// Context switches (servers and hogs) per second.
    pub ctx_switches_per_s: Option<f64>,
    /// Other load on the island, CPUs.
    pub outside_cpu: Option<f64>,
    /// Boosts per rep (`None`: the daemon reports no accounting).
    pub boosts: Option<f64>,
    /// Refusals over the reservation per rep.
    pub over_reservation: Option<f64>,
}

/// The mean of the values that are there (`None` if none is).
pub fn mean(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = values
        .into_iter()
        .flatten()
        .filter(|x| x.is_finite())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn r(v: Option<f64>, digits: i32) -> Option<f64> {
    v.map(|x| round(x, digits))
}

impl TwoTierMean {
    /// The means of `reps`.
    pub fn of(reps: &[TwoTierSample]) -> Self {
        let m = |f: &dyn Fn(&TwoTierSample) -> Option<f64>| mean(reps.iter().map(f));
        let comm = |f: &dyn Fn(&UnitComm) -> u64| {
            mean(reps.iter().map(|s| {
                s.comm
                    .as_ref()
                    .map(|c| c.values().map(f).sum::<u64>() as f64)
            }))
        };
        Self {
            avg_ms: r(m(&|s| s.avg_ms), 3),
            p95_ms: r(m(&|s| s.p95_ms), 3),
            max_ms: r(m(&|s| s.max_ms), 3),
            throughput_rps: r(m(&|s| Some(s.throughput_rps)), 2),
            errors: reps.iter().map(|s| s.errors).sum(),
            hog_chunks_per_s: r(m(&|s| s.hog_chunks_per_s), 1),
            hog_cpu: r(m(&|s| Some(s.hog_cpu_total())), 4),
            hog_reservation_ratio_min: r(
                reps.iter()
                    .filter_map(TwoTierSample::hog_reservation_ratio_min)
                    .min_by(f64::total_cmp),
                3,
            ),
            front_cpu: r(m(&|s| Some(s.front_cpu)), 4),
            back_cpu: r(m(&|s| Some(s.back_cpu)), 4),
            back_cpu_ms_per_request: r(m(&TwoTierSample::back_cpu_ms_per_request), 3),
            ctx_switches_per_s: r(m(&TwoTierSample::ctx_per_s), 1),
            outside_cpu: r(m(&|s| s.outside_cpu), 3),
            boosts: r(comm(&|c| c.boosts), 1),
            over_reservation: r(comm(&|c| c.over_reservation), 1),
        }
    }
}

/// `1 - on / off` (`None` unless both are there and `off` is positive).
pub fn improvement(off: Option<f64>, on: Option<f64>) -> Option<f64> {
    match (off, on) {
        (Some(off), Some(on)) if off > 0.0 && on.is_finite() => Some(round(1.0 - on / off, 4)),
        _ => None,
    }
}

/// A variant against `off`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Improvement {
    /// Of the average response time.
    pub avg: Option<f64>,
    /// Of the p95.
    pub p95: Option<f64>,
    /// Of the max.
    pub max: Option<f64>,
    /// `1 - on/off` of the hogs' work rate.
    pub hog_cpu_loss: Option<f64>,
    /// `1 - on/off` of the hogs' CPU time.
    pub hog_cpu_time_loss: Option<f64>,
    /// `1 - on/off` of the context switches per second.
    pub ctx_switches: Option<f64>,
}

impl Improvement {
    /// `on` against `off`.
    pub fn of(off: &TwoTierMean, on: &TwoTierMean) -> Self {
        Self {
            avg: improvement(off.avg_ms, on.avg_ms),
            p95: improvement(off.p95_ms, on.p95_ms),
            max: improvement(off.max_ms, on.max_ms),
            hog_cpu_loss: improvement(off.hog_chunks_per_s, on.hog_chunks_per_s),
            hog_cpu_time_loss: improvement(off.hog_cpu, on.hog_cpu),
            ctx_switches: improvement(off.ctx_switches_per_s, on.ctx_switches_per_s),
        }
    }
}

/// One two-tier variant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VariantResult {
    /// Features on.
    pub features: Vec<String>,
    /// Its mechanism (`None`: off).
    pub mechanism: Option<String>,
    /// Means over reps.
    pub mean: TwoTierMean,
    /// Against `off` (`None` for `off` itself).
    pub improvement: Option<Improvement>,
    /// Every rep.
    pub reps: Vec<TwoTierSample>,
}

/// One line of the headline: a statistic off and on, its value and goal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalRow {
    /// `avg_ms`, `p95_ms`, `max_ms`, `hog_cpu_loss`, `hog_reservation_ratio`.
    pub name: String,
    /// The statistic with the policy off.
    pub off: Option<f64>,
    /// With the policy on.
    pub on: Option<f64>,
    /// The value checked: an improvement, a loss or a ratio.
    pub value: Option<f64>,
    /// The same per rep (off and on of the same rep).
    pub per_rep: Vec<Option<f64>>,
    /// The goal.
    pub goal: f64,
    /// `true`: the value must be at least the goal; `false`: below it.
    pub at_least: bool,
    /// Whether it was met (`None`: no value).
    pub met: Option<bool>,
}

impl GoalRow {
    fn new(
        name: &str,
        (off, on): (Option<f64>, Option<f64>),
        value: Option<f64>,
        per_rep: Vec<Option<f64>>,
        goal: f64,
        at_least: bool,
    ) -> Self {
        Self {
            name: name.into(),
            off,
            on,
            value,
            per_rep,
            goal,
            at_least,
            met: value.map(|v| if at_least { v >= goal } else { v < goal }),
        }
    }
}

/// The headline: `on` against `off`, statistic by statistic, with the
/// goals.
pub fn headline(off: &VariantResult, on: &VariantResult) -> Vec<GoalRow> {
    let pairs: Vec<(&TwoTierSample, &TwoTierSample)> = off
        .reps
        .iter()
        .filter_map(|o| on.reps.iter().find(|s| s.rep == o.rep).map(|s| (o, s)))
        .collect();
    let per_rep = |f: &dyn Fn(&TwoTierSample) -> Option<f64>| -> Vec<Option<f64>> {
        pairs.iter().map(|(o, s)| improvement(f(o), f(s))).collect()
    };
    let (a, b) = (&off.mean, &on.mean);
    let imp = on.improvement.clone().unwrap_or_default();
    vec![
        GoalRow::new(
            "avg_ms",
            (a.avg_ms, b.avg_ms),
            imp.avg,
            per_rep(&|s| s.avg_ms),
            AVG_GOAL,
            true,
        ),
        GoalRow::new(
            "p95_ms",
            (a.p95_ms, b.p95_ms),
            imp.p95,
            per_rep(&|s| s.p95_ms),
            P95_GOAL,
            true,
        ),
        GoalRow::new(
            "max_ms",
            (a.max_ms, b.max_ms),
            imp.max,
            per_rep(&|s| s.max_ms),
            MAX_GOAL,
            true,
        ),
        GoalRow::new(
            "hog_cpu_loss",
            (a.hog_chunks_per_s, b.hog_chunks_per_s),
            imp.hog_cpu_loss,
            per_rep(&|s| s.hog_chunks_per_s),
            HOG_LOSS_GOAL,
            false,
        ),
        GoalRow::new(
            "hog_reservation_ratio",
            (a.hog_reservation_ratio_min, b.hog_reservation_ratio_min),
            b.hog_reservation_ratio_min,
            pairs
                .iter()
                .map(|(_, s)| r(s.hog_reservation_ratio_min(), 3))
                .collect(),
            RESERVATION_GOAL,
            true,
        ),
    ]
}

/// Builds every variant's result from its samples; improvements against
/// the `off` entry.
pub fn assemble(
    measured: Vec<(super::Variant, Vec<TwoTierSample>)>,
) -> BTreeMap<String, VariantResult> {
    let off = measured
        .iter()
        .find(|(v, _)| !v.is_on())
        .map(|(_, s)| TwoTierMean::of(s));
    measured
        .into_iter()
        .map(|(v, reps)| {
            let mean = TwoTierMean::of(&reps);
            let improvement = match (&off, v.is_on()) {
                (Some(off), true) => Some(Improvement::of(off, &mean)),
                _ => None,
            };
            let result = VariantResult {
                features: v.features().iter().map(|f| f.to_string()).collect(),
                mechanism: v.mechanism().map(|m| m.as_str().to_string()),
                mean,
                improvement,
                reps,
            };
            (v.name(), result)
        })
        .collect()
}

/// The mechanism that measured best with every feature on: the largest
/// average-response improvement among those that kept the hogs' loss under
/// the goal, else the largest improvement.
pub fn best_mechanism(two_tier: &BTreeMap<String, VariantResult>) -> Option<String> {
    let all: Vec<(&str, f64, bool)> = two_tier
        .iter()
        .filter(|(name, _)| name.starts_with("all/"))
        .filter_map(|(_, v)| {
            let imp = v.improvement.as_ref()?;
            let fair = imp.hog_cpu_loss.is_some_and(|l| l < HOG_LOSS_GOAL);
            Some((v.mechanism.as_deref()?, imp.avg?, fair))
        })
        .collect();
    let pick = |fair_only: bool| {
        all.iter()
            .filter(|(_, _, fair)| *fair || !fair_only)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(m, _, _)| m.to_string())
    };
    pick(true).or_else(|| pick(false))
}

/// One streaming run at N clients.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamProbe {
    /// Which rep.
    pub rep: usize,
    /// Clients.
    pub n: usize,
    /// Whether every client had at most one under-run.
    pub ok: bool,
    /// Under-runs of the worst client.
    pub underruns_max: u64,
    /// Under-runs per client.
    pub underruns_mean: f64,
    /// Clients with at most one under-run.
    pub clients_ok: usize,
    /// Clients that failed (no connection, the stream broke, never played).
    pub failed: usize,
    /// Mean time from playback start to the first under-run, over the
    /// clients that had one, s (the paper's Table 2 metric).
    pub first_underrun_s: Option<f64>,
    /// Time spent refilling, summed over clients, s.
    pub stalled_s: f64,
    /// The server's sends at least one interval late.
    pub late_sends: Option<u64>,
    /// Other load on the island, CPUs.
    pub outside_cpu: Option<f64>,
    /// The hogs' work rate, chunks/s.
    pub hog_chunks_per_s: Option<f64>,
    /// The daemon's comm accounting by unit.
    pub comm: Option<BTreeMap<String, UnitComm>>,
}

/// One search for the largest N.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSearch {
    /// Which rep.
    pub rep: usize,
    /// The largest N that passed below the smallest that failed.
    pub max_clients: usize,
    /// The smallest N that failed (`None`: none up to the maximum).
    pub first_failing: Option<usize>,
    /// Every run, in order.
    pub probes: Vec<StreamProbe>,
}

/// The streaming workload's results.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// Searches by variant (`off` and the headline variant), one per rep.
    pub searches: BTreeMap<String, Vec<StreamSearch>>,
    /// Mean largest N by variant.
    pub max_clients: BTreeMap<String, f64>,
    /// On ÷ off of the mean largest N.
    pub max_clients_ratio: Option<f64>,
    /// The N the features are compared at (the median over reps of the
    /// smallest N that failed with the policy off), if any failed.
    pub breakdown_n: Option<usize>,
    /// Runs at `breakdown_n` by variant.
    pub breakdown: BTreeMap<String, Vec<StreamProbe>>,
}

impl StreamReport {
    /// Fills `max_clients` and the ratio from the searches; `on` names the
    /// headline variant.
    pub fn summarize(&mut self, on: &str) {
        self.max_clients = self
            .searches
            .iter()
            .filter_map(|(k, s)| {
                let m = mean(s.iter().map(|x| Some(x.max_clients as f64)))?;
                Some((k.clone(), round(m, 2)))
            })
            .collect();
        self.max_clients_ratio = match (self.max_clients.get("off"), self.max_clients.get(on)) {
            (Some(&off), Some(&on)) if off > 0.0 => Some(round(on / off, 3)),
            _ => None,
        };
    }

    /// The N to compare features at: where `off` first failed, the median
    /// over reps (the upper one of an even count; a rep that never failed
    /// does not count).
    pub fn pick_breakdown_n(&self) -> Option<usize> {
        let mut fails: Vec<usize> = self
            .searches
            .get("off")?
            .iter()
            .filter_map(|s| s.first_failing)
            .collect();
        fails.sort_unstable();
        fails.get(fails.len() / 2).copied()
    }
}

/// Everything one run of the benchmark measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommReport {
    /// The variant the headline compares with `off` (`all/MECHANISM`).
    pub on: String,
    /// `on` against `off` with the goals (empty when `on` could not run).
    pub headline: Vec<GoalRow>,
    /// The mechanism that measured best with every feature on.
    pub best_mechanism: Option<String>,
    /// Two-tier results by variant name.
    pub two_tier: BTreeMap<String, VariantResult>,
    /// Streaming results (`None` with `--skip-stream`).
    pub stream: Option<StreamReport>,
    /// Variants that could not run, and why (e.g. the daemon refused
    /// `[comm]`).
    pub unavailable: BTreeMap<String, String>,
    /// Sizes and durations.
    pub settings: Settings,
    /// Where.
    pub machine: Machine,
    /// The command that produced it.
    pub command: String,
}

#[cfg(test)]
mod tests {
    use super::super::{Mechanism, Variant};
    use super::*;

    fn sample(rep: usize, avg: f64, p95: f64, max: f64, chunks: f64) -> TwoTierSample {
        TwoTierSample {
            rep,
            avg_ms: Some(avg),
            p95_ms: Some(p95),
            max_ms: Some(max),
            throughput_rps: 100.0,
            completed: 1000,
            hog_chunks_per_s: Some(chunks),
            hog_cpu: vec![0.15; 5],
            hog_reservation: 0.12,
            back_cpu: 0.1,
            window_s: 10.0,
            servers_ctx: Counters {
                voluntary: 900,
                involuntary: 100,
                run_ns: 0,
            },
            ..Default::default()
        }
    }

    fn measured() -> Vec<(Variant, Vec<TwoTierSample>)> {
        vec![
            (
                Variant::Off,
                vec![
                    sample(0, 10.0, 40.0, 80.0, 1000.0),
                    sample(1, 12.0, 40.0, 120.0, 1000.0),
                ],
            ),
            (
                Variant::all(Mechanism::Slice),
                vec![
                    sample(0, 6.0, 30.0, 40.0, 990.0),
                    sample(1, 8.0, 34.0, 40.0, 990.0),
                ],
            ),
            (
                Variant::all(Mechanism::Weight),
                vec![sample(0, 5.0, 20.0, 30.0, 900.0)],
            ),
        ]
    }

    #[test]
    fn means_and_improvements_against_off() {
        let m = assemble(measured());
        let off = &m["off"];
        assert_eq!(off.mean.avg_ms, Some(11.0));
        assert_eq!(off.mean.max_ms, Some(100.0));
        assert!(off.improvement.is_none());
        assert_eq!(off.mean.back_cpu_ms_per_request, Some(1.0));
        assert_eq!(off.mean.ctx_switches_per_s, Some(100.0));
        assert_eq!(off.mean.hog_cpu, Some(0.75));
        assert_eq!(off.mean.hog_reservation_ratio_min, Some(1.25));
        assert_eq!(off.mean.boosts, None, "no accounting: n/a");
        let on = &m["all/slice"];
        assert_eq!(on.features, ["recipient", "anticipate", "netpath"]);
        assert_eq!(on.mechanism.as_deref(), Some("slice"));
        let imp = on.improvement.as_ref().unwrap();
        assert_eq!(imp.avg, Some(round(1.0 - 7.0 / 11.0, 4)));
        assert_eq!(imp.p95, Some(0.2));
        assert_eq!(imp.max, Some(0.6));
        assert_eq!(imp.hog_cpu_loss, Some(0.01));
        assert_eq!(imp.hog_cpu_time_loss, Some(0.0));
    }

    #[test]
    fn the_headline_checks_the_goals_per_statistic_and_rep() {
        let m = assemble(measured());
        let h = headline(&m["off"], &m["all/slice"]);
        let row = |n: &str| h.iter().find(|r| r.name == n).unwrap().clone();
        let avg = row("avg_ms");
        assert_eq!((avg.off, avg.on), (Some(11.0), Some(7.0)));
        assert_eq!(avg.met, Some(true), "36% >= 34%");
        assert_eq!(avg.per_rep, [Some(0.4), Some(round(1.0 - 8.0 / 12.0, 4))]);
        assert_eq!(row("p95_ms").met, Some(true), "exactly 20%");
        assert_eq!(row("max_ms").met, Some(true));
        let loss = row("hog_cpu_loss");
        assert_eq!(
            (loss.value, loss.met, loss.at_least),
            (Some(0.01), Some(true), false)
        );
        assert_eq!(row("hog_reservation_ratio").met, Some(true));
        // The weight variant loses 10% of the hogs' work: goal missed.
        let h = headline(&m["off"], &m["all/weight"]);
        let loss = h.iter().find(|r| r.name == "hog_cpu_loss").unwrap();
        assert_eq!(loss.met, Some(false));
        assert_eq!(loss.per_rep.len(), 1, "only rep 0 has a pair");
    }

    #[test]
    fn missing_values_are_not_goals_met() {
        assert_eq!(improvement(None, Some(1.0)), None);
        assert_eq!(improvement(Some(0.0), Some(1.0)), None);
        assert_eq!(improvement(Some(2.0), Some(3.0)), Some(-0.5));
        let mut off = VariantResult::default();
        off.reps.push(TwoTierSample::default());
        let h = headline(&off, &VariantResult::default());
        assert!(h.iter().all(|r| r.met.is_none()), "{h:?}");
        assert_eq!(
            mean([None, Some(1.0), Some(f64::NAN), Some(3.0)]),
            Some(2.0)
        );
        assert_eq!(mean([None]), None);
    }

    #[test]
    fn the_best_mechanism_must_be_fair_first() {
        let m = assemble(measured());
        // weight improves more but loses 10 % of the hogs' work.
        assert_eq!(best_mechanism(&m).as_deref(), Some("slice"));
        let mut unfair = m.clone();
        unfair.remove("all/slice");
        assert_eq!(best_mechanism(&unfair).as_deref(), Some("weight"));
        assert_eq!(best_mechanism(&BTreeMap::new()), None);
    }

    #[test]
    fn comm_accounting_sums_units_or_is_absent() {
        let mut s = sample(0, 1.0, 1.0, 1.0, 1.0);
        assert_eq!(s.boosts(), None);
        let mut c = BTreeMap::new();
        c.insert(
            "front".to_string(),
            UnitComm {
                boosts: 3,
                over_reservation: 1,
                ..Default::default()
            },
        );
        c.insert(
            "back".to_string(),
            UnitComm {
                boosts: 4,
                ..Default::default()
            },
        );
        s.comm = Some(c);
        assert_eq!(s.boosts(), Some(7));
        let m = TwoTierMean::of(&[s]);
        assert_eq!((m.boosts, m.over_reservation), (Some(7.0), Some(1.0)));
    }

    #[test]
    fn stream_summary_and_breakdown_n() {
        let search = |rep, max, fail| StreamSearch {
            rep,
            max_clients: max,
            first_failing: fail,
            probes: Vec::new(),
        };
        let mut s = StreamReport::default();
        s.searches.insert(
            "off".into(),
            vec![search(0, 16, Some(20)), search(1, 20, Some(24))],
        );
        s.searches.insert(
            "all/slice".into(),
            vec![search(0, 48, Some(56)), search(1, 64, None)],
        );
        s.summarize("all/slice");
        assert_eq!(s.max_clients["off"], 18.0);
        assert_eq!(s.max_clients["all/slice"], 56.0);
        assert_eq!(s.max_clients_ratio, Some(round(56.0 / 18.0, 3)));
        assert_eq!(s.pick_breakdown_n(), Some(24), "upper median of 20, 24");
        s.searches
            .get_mut("off")
            .unwrap()
            .push(search(2, 14, Some(16)));
        assert_eq!(s.pick_breakdown_n(), Some(20), "median of 16, 20, 24");
        s.searches
            .get_mut("off")
            .unwrap()
            .push(search(3, 256, None));
        assert_eq!(
            s.pick_breakdown_n(),
            Some(20),
            "a rep without failure does not count"
        );
        s.searches.insert("off".into(), vec![search(0, 256, None)]);
        assert_eq!(s.pick_breakdown_n(), None);
    }

    #[test]
    fn json_has_the_documented_shape() {
        let two_tier = assemble(measured());
        let headline = headline(&two_tier["off"], &two_tier["all/slice"]);
        let report = CommReport {
            on: "all/slice".into(),
            headline,
            best_mechanism: best_mechanism(&two_tier),
            two_tier,
            stream: Some(StreamReport::default()),
            unavailable: BTreeMap::from([("netpath/slice".to_string(), "refused".to_string())]),
            settings: Settings::new(true, None, None, None),
            machine: Machine::default(),
            command: "atoll bench comm --quick --json".into(),
        };
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(v["on"], "all/slice");
        assert_eq!(v["headline"][0]["name"], "avg_ms");
        assert_eq!(v["headline"][0]["met"], true);
        assert_eq!(v["two_tier"]["all/slice"]["improvement"]["p95"], 0.2);
        assert_eq!(v["two_tier"]["off"]["mean"]["avg_ms"], 11.0);
        assert_eq!(v["two_tier"]["off"]["reps"][1]["max_ms"], 120.0);
        assert!(v["two_tier"]["off"]["mean"]["boosts"].is_null());
        assert_eq!(v["best_mechanism"], "slice");
        assert_eq!(v["unavailable"]["netpath/slice"], "refused");
        assert_eq!(v["settings"]["quick"], true);
        let back: CommReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, report);
    }
}
