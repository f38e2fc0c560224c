//! The text table of `atoll bench slo --scenario tiers`.

use std::fmt::Write as _;

use super::run::TiersReport;
use super::stats::{Ratios, Times};

fn ms(t: Option<&Times>, f: fn(&Times) -> f64) -> String {
    t.map_or("-".into(), |t| format!("{:.2}", f(t)))
}

fn r(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

/// The report as text.
pub fn render_table(rep: &TiersReport) -> String {
    let s = &rep.settings;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "atoll bench slo --scenario tiers: nginx -> auction-app (putbid work {}) -> MariaDB, \
         with spin hogs, island CPUs {}, load on {}; {} s measured after {} s warm-up",
        s.common.work, s.island_cpus, s.load_cpus, s.common.seconds, s.common.warmup_s
    );
    let _ = writeln!(
        t,
        "machine: {} CPUs, {} backend, kernel {}; saturation {:.0} req/s (linux, no hogs, {}), \
         offered {:.0} req/s ({:.0} %), putbid share {:.0} %, SLO p99 <= {} us{}",
        rep.machine.cpus,
        rep.machine.backend,
        rep.machine.kernel,
        rep.saturated_per_s,
        if rep.drain_s.is_some() {
            "closed loop"
        } else {
            "open loop, its backlog served"
        },
        rep.offered_per_s,
        s.load * 100.0,
        s.heavy * 100.0,
        rep.slo_us,
        rep.drain_s.map_or(String::new(), |d| format!(
            "; unserved: not answered {d} s after the phase"
        )),
    );
    let _ =
        writeln!(
        t,
        "{:<8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} | {:>20} {:>5} {:>5} {:>6} {:>6} {:>5}",
        "config", "req/s", "errors", "unserved", "avg ms", "p99 ms", "sd ms", "bid avg", "bid p99",
        "vs linux: avg", "p99", "sd", "bidavg", "bidp99", "thr"
    );
    for row in &rep.rows {
        let v = row.vs_linux.unwrap_or(Ratios {
            mean: None,
            p99: None,
            stddev: None,
            heavy_mean: None,
            heavy_p99: None,
            throughput: None,
        });
        let _ = writeln!(
            t,
            "{:<8} {:>8.1} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} | {:>20} {:>5} {:>5} {:>6} {:>6} {:>5}",
            row.config.as_str(),
            row.throughput_per_s,
            row.errors,
            row.unserved,
            ms(row.all.as_ref(), |t| t.mean_ms),
            ms(row.all.as_ref(), |t| t.p99_ms),
            ms(row.all.as_ref(), |t| t.stddev_ms),
            ms(row.heavy.as_ref(), |t| t.mean_ms),
            ms(row.heavy.as_ref(), |t| t.p99_ms),
            r(v.mean),
            r(v.p99),
            r(v.stddev),
            r(v.heavy_mean),
            r(v.heavy_p99),
            r(v.throughput),
        );
    }
    for row in &rep.rows {
        if let Some(e) = &row.last_error {
            let _ = writeln!(t, "{}: last error: {e}", row.config.as_str());
        }
    }
    for (c, why) in &rep.unavailable {
        let _ = writeln!(t, "{c}: unavailable: {why}");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::super::run::TiersSettings;
    use super::super::stats::TierRow;
    use super::*;
    use crate::machine::Machine;
    use crate::slo::Config;

    fn report() -> TiersReport {
        TiersReport {
            saturated_per_s: 40.0,
            offered_per_s: 20.0,
            slo_us: 5000,
            drain_s: Some(10.0),
            rows: vec![TierRow {
                config: Config::Linux,
                offered_per_s: 20.0,
                throughput_per_s: 12.5,
                errors: 0,
                unserved: 31,
                last_error: None,
                all: Times::of(&[10.0, 20.0]),
                heavy: None,
                vs_linux: None,
            }],
            unavailable: Default::default(),
            settings: TiersSettings::new(true),
            machine: Machine {
                cpus: 8,
                backend: "cgroup2".into(),
                ..Machine::default()
            },
            command: String::new(),
        }
    }

    #[test]
    fn the_table_shows_what_was_not_served_by_the_limit() {
        let t = render_table(&report());
        assert!(t.contains("(linux, no hogs, closed loop)"), "{t}");
        assert!(
            t.contains("unserved: not answered 10 s after the phase"),
            "{t}"
        );
        let head = t.lines().find(|l| l.starts_with("config")).unwrap();
        let row = t.lines().find(|l| l.starts_with("linux")).unwrap();
        let words: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(head.split_whitespace().nth(3), Some("unserved"), "{head}");
        assert_eq!(&words[..4], ["linux", "12.5", "0", "31"], "{row}");
    }

    #[test]
    fn a_report_from_before_the_limit_still_reads() {
        let mut v = serde_json::to_value(report()).unwrap();
        v.as_object_mut().unwrap().remove("drain_s");
        v["rows"][0].as_object_mut().unwrap().remove("unserved");
        let old: TiersReport = serde_json::from_value(v).unwrap();
        assert_eq!((old.drain_s, old.rows[0].unserved), (None, 0));
        let t = render_table(&old);
        assert!(t.contains("open loop, its backlog served"), "{t}");
        assert!(!t.contains("not answered"), "{t}");
    }
}
