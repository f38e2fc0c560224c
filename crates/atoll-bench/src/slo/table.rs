//! The text table of `atoll bench slo`.

use std::fmt::Write as _;

use super::{goal, load_pct, BeThresholds, Goals, SloReport};
use crate::table::{aligned, load3, num};

/// The goals a row missed, by short name (`ok` when none).
pub fn missed(g: &Goals) -> String {
    let mut m = Vec::new();
    if g.p99 == Some(false) {
        m.push("p99");
    }
    if g.throughput == Some(false) {
        m.push("thr");
    }
    if g.emu == Some(false) {
        m.push("emu");
    }
    if !g.no_violation {
        m.push("slo");
    }
    if g.be_idle == Some(false) {
        m.push("be");
    }
    if m.is_empty() {
        "ok".into()
    } else {
        m.join(",")
    }
}

/// The report as text.
pub fn render_table(r: &SloReport) -> String {
    let s = &r.settings;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "atoll bench slo: Redis (LC, --work {}, {} conns) beside spin (BE) on island CPUs {}, \
         load generator on {}; {} s measured after {} s warm-up per load",
        s.common.work, s.conns, s.island_cpus, s.load_cpus, s.common.seconds, s.common.warmup_s
    );
    let _ = writeln!(
        t,
        "machine: {} CPUs, {} backend, kernel {}, load average at start {}",
        r.machine.cpus,
        r.machine.backend,
        r.machine.kernel,
        load3(&r.machine.loadavg)
    );
    let _ = writeln!(
        t,
        "LC solo maximum {:.0} req/s (saturated, {} in flight); BE solo {:.0} chunks/s \
         (best of {}); SLO p99 <= {} us per {} ms window{}",
        r.lc_max_per_s,
        s.conns,
        r.be_solo_chunks_per_s,
        r.be_solo_runs
            .iter()
            .map(|v| format!("{v:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
        r.slo_us,
        s.report_ms,
        if r.slo_derived {
            " (derived: 2x the worst p99 alone at a load it sustained)"
        } else {
            ""
        }
    );
    if let Some(line) = thresholds_line(&s.be) {
        let _ = writeln!(t, "{line}");
    }
    let _ = writeln!(t, "\nLC alone:");
    let rows: Vec<Vec<String>> = r
        .alone
        .iter()
        .map(|(pct, a)| {
            vec![
                format!("{pct}%"),
                format!("{:.0}", a.offered_per_s),
                format!("{:.0}", a.throughput_per_s),
                num(a.p50_us, 0),
                num(a.p99_us, 0),
                a.errors.to_string(),
                if super::sustained(a) { "yes" } else { "no" }.to_string(),
            ]
        })
        .collect();
    t += &aligned(
        &[
            "load",
            "offered/s",
            "req/s",
            "p50 us",
            "p99 us",
            "errors",
            "sustained",
        ],
        &rows,
        1,
    );
    let _ = writeln!(
        t,
        "\nLC beside BE (goals: p99 <= {}x alone, req/s >= {}x alone, EMU >= {}, no window \
         over the SLO, BE share >= {} x (1 - load)):",
        goal::P99_RATIO,
        goal::THROUGHPUT_RATIO,
        goal::EMU,
        goal::BE_OF_IDLE
    );
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|x| {
            vec![
                x.config.as_str().to_string(),
                format!("{}%", load_pct(x.load)),
                format!("{:.0}", x.lc.throughput_per_s),
                num(x.lc.p50_us, 0),
                num(x.lc.p99_us, 0),
                num(x.p99_ratio, 2),
                num(x.throughput_ratio, 3),
                format!("{}/{}", x.violations, x.windows),
                num(x.be_share, 2),
                num(x.emu, 2),
                missed(&x.goals),
                load3(&x.loadavg),
            ]
        })
        .collect();
    t += &aligned(
        &[
            "config", "load", "req/s", "p50 us", "p99 us", "p99 x", "req x", "over SLO",
            "BE share", "EMU", "missed", "loadavg",
        ],
        &rows,
        2,
    );
    for (c, why) in &r.unavailable {
        let _ = writeln!(t, "{c}: unavailable: {why}");
    }
    t
}

/// The `slo` overlay's best-effort thresholds, when the run set any.
fn thresholds_line(be: &BeThresholds) -> Option<String> {
    if *be == BeThresholds::default() {
        return None;
    }
    let given = |v: Option<f64>| v.map_or("the default".to_string(), |v| v.to_string());
    Some(format!(
        "slo overlay's best effort: grows above a slack of {}, is cut below {}",
        given(be.grow_above),
        given(be.cut_below)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_thresholds_are_printed() {
        assert_eq!(thresholds_line(&BeThresholds::default()), None);
        let be = BeThresholds {
            grow_above: Some(0.1),
            cut_below: None,
        };
        assert_eq!(
            thresholds_line(&be).unwrap(),
            "slo overlay's best effort: grows above a slack of 0.1, is cut below the default"
        );
    }

    #[test]
    fn missed_goals_are_named() {
        let ok = Goals {
            p99: Some(true),
            throughput: Some(true),
            emu: None,
            no_violation: true,
            be_idle: None,
        };
        assert_eq!(missed(&ok), "ok");
        let bad = Goals {
            p99: Some(false),
            emu: Some(false),
            no_violation: false,
            ..ok
        };
        assert_eq!(missed(&bad), "p99,emu,slo");
    }
}
