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
        "machine: {} CPUs, {} backend, kernel {}; saturation {:.0} req/s (linux, no hogs), \
         offered {:.0} req/s ({:.0} %), putbid share {:.0} %, SLO p99 <= {} us",
        rep.machine.cpus,
        rep.machine.backend,
        rep.machine.kernel,
        rep.saturated_per_s,
        rep.offered_per_s,
        s.load * 100.0,
        s.heavy * 100.0,
        rep.slo_us
    );
    let _ =
        writeln!(
        t,
        "{:<8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} | {:>20} {:>5} {:>5} {:>6} {:>6} {:>5}",
        "config", "req/s", "errors", "avg ms", "p99 ms", "sd ms", "bid avg", "bid p99",
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
            "{:<8} {:>8.1} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} | {:>20} {:>5} {:>5} {:>6} {:>6} {:>5}",
            row.config.as_str(),
            row.throughput_per_s,
            row.errors,
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
