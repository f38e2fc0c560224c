//! The report of `atoll bench comm` as text tables.

use std::fmt::Write as _;

use super::{CommReport, GoalRow, StreamProbe, TwoTierMean};
use crate::table::num;

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{:.1}%", v * 100.0))
}

fn boosts(m: &TwoTierMean) -> String {
    m.boosts.map_or_else(|| "n/a".into(), |b| format!("{b:.0}"))
}

/// One headline line: the statistic off and on, the value against the goal.
fn goal_line(g: &GoalRow) -> String {
    let (label, off, on, value, goal) = match g.name.as_str() {
        "hog_cpu_loss" => (
            "hog work loss (chunks/s)".to_string(),
            num(g.off, 0),
            num(g.on, 0),
            pct(g.value),
            format!("< {:.0}%", g.goal * 100.0),
        ),
        "hog_reservation_ratio" => (
            "hog CPU / reservation (min)".to_string(),
            num(g.off, 2),
            num(g.on, 2),
            num(g.value, 2),
            format!(">= {:.2}", g.goal),
        ),
        name => (
            format!("{} improvement", name.trim_end_matches("_ms")),
            num(g.off, 2),
            num(g.on, 2),
            pct(g.value),
            format!(">= {:.0}%", g.goal * 100.0),
        ),
    };
    let met = match g.met {
        Some(true) => "met",
        Some(false) => "NOT met",
        None => "-",
    };
    let reps: Vec<String> = g
        .per_rep
        .iter()
        .map(|v| {
            if g.name == "hog_reservation_ratio" {
                num(*v, 2)
            } else {
                pct(*v)
            }
        })
        .collect();
    format!(
        "{label:<28} {off:>9} {on:>9} {value:>8} {goal:>8}  {met:<7}  per rep: {}",
        reps.join(" ")
    )
}

fn probe_line(name: &str, ps: &[StreamProbe]) -> String {
    let m = |f: &dyn Fn(&StreamProbe) -> Option<f64>| super::mean(ps.iter().map(f));
    let ok: usize = ps.iter().map(|p| p.clients_ok).sum();
    let all: usize = ps.iter().map(|p| p.n).sum();
    format!(
        "{name:<22} {:>16} {:>15} {:>20} {:>12}",
        num(m(&|p| Some(p.underruns_mean)), 2),
        num(m(&|p| Some(p.underruns_max as f64)), 1),
        num(m(&|p| p.first_underrun_s), 2),
        format!("{ok}/{all}"),
    )
}

/// Runs kept although other load disturbed them.
pub fn noisy_runs(r: &CommReport) -> usize {
    let busy = |o: Option<f64>| o.is_some_and(|o| o > super::MAX_OUTSIDE_CPU);
    let two_tier = r
        .two_tier
        .values()
        .flat_map(|v| &v.reps)
        .filter(|s| busy(s.outside_cpu))
        .count();
    let stream = r.stream.as_ref().map_or(0, |st| {
        st.searches
            .values()
            .flatten()
            .flat_map(|s| &s.probes)
            .chain(st.breakdown.values().flatten())
            .filter(|p| busy(p.outside_cpu))
            .count()
    });
    two_tier + stream
}

/// The whole report.
pub fn render_table(r: &CommReport) -> String {
    let s = &r.settings;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Two-tier: nginx proxy (front) -> nginx gzip level {} of {} KiB (back), {} req/s open \
         loop; {} hogs; {} rep(s) x {} s; island CPU {}, load on CPU {}",
        s.gzip_level, s.page_kib, s.rate, s.hogs, s.reps, s.seconds, s.island_cpus, s.load_cpus
    );
    let _ = writeln!(
        out,
        "{:<22} {:>8} {:>8} {:>8} {:>7} {:>5} {:>12} {:>8} {:>9} {:>11} {:>8} {:>7} {:>8}",
        "variant",
        "avg ms",
        "p95 ms",
        "max ms",
        "req/s",
        "err",
        "hog chunk/s",
        "hog CPU",
        "CPU/res",
        "back ms/req",
        "ctx/s",
        "boosts",
        "others"
    );
    let mut names: Vec<&String> = r.two_tier.keys().collect();
    // off first, then the headline variant, then the rest by name.
    names.sort_by_key(|n| (n.as_str() != "off", n.as_str() != r.on, n.as_str()));
    for name in names {
        let m = &r.two_tier[name].mean;
        let _ = writeln!(
            out,
            "{name:<22} {:>8} {:>8} {:>8} {:>7} {:>5} {:>12} {:>8} {:>9} {:>11} {:>8} {:>7} {:>8}",
            num(m.avg_ms, 2),
            num(m.p95_ms, 2),
            num(m.max_ms, 2),
            num(m.throughput_rps, 1),
            m.errors,
            num(m.hog_chunks_per_s, 0),
            num(m.hog_cpu, 3),
            num(m.hog_reservation_ratio_min, 2),
            num(m.back_cpu_ms_per_request, 2),
            num(m.ctx_switches_per_s, 0),
            boosts(m),
            num(m.outside_cpu, 3),
        );
    }
    let _ = writeln!(
        out,
        "(CPU/res: the smallest hog's CPU / its reservation; others: CPUs of the island used by \
         processes not the benchmark's; boosts: the daemon's comm accounting, n/a without it)"
    );
    for (name, why) in &r.unavailable {
        let _ = writeln!(out, "{name:<22} unavailable: {why}");
    }
    let _ = writeln!(out);
    if r.headline.is_empty() {
        let _ = writeln!(
            out,
            "off -> {}: not compared (it did not run; see above)",
            r.on
        );
    } else {
        let _ = writeln!(
            out,
            "{:<28} {:>9} {:>9} {:>8} {:>8}",
            format!("off -> {}", r.on),
            "off",
            "on",
            "value",
            "goal"
        );
        for g in &r.headline {
            let _ = writeln!(out, "{}", goal_line(g).trim_end());
        }
    }
    let others: Vec<String> = r
        .two_tier
        .iter()
        .filter(|(n, _)| n.as_str() != r.on)
        .filter_map(|(n, v)| {
            let i = v.improvement.as_ref()?;
            Some(format!(
                "  {n:<22} avg {:>7} p95 {:>7} max {:>7} hog loss {:>6} ctx {:>7}",
                pct(i.avg),
                pct(i.p95),
                pct(i.max),
                pct(i.hog_cpu_loss),
                pct(i.ctx_switches)
            ))
        })
        .collect();
    if !others.is_empty() {
        let _ = writeln!(
            out,
            "other variants against off (improvement = 1 - on/off):"
        );
        for l in others {
            let _ = writeln!(out, "{l}");
        }
    }
    if let Some(best) = &r.best_mechanism {
        let _ = writeln!(out, "best mechanism (measured, every feature on): {best}");
    }
    if let Some(st) = &r.stream {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Streaming: N clients x {} KiB/s through the proxy, {} ms buffers, {} s runs; \
             pass = every client at most one under-run",
            s.stream_bytes_per_s / 1024,
            s.buffer_ms,
            s.seconds
        );
        for (name, searches) in &st.searches {
            let per: Vec<String> = searches.iter().map(|x| x.max_clients.to_string()).collect();
            let fails: Vec<String> = searches
                .iter()
                .map(|x| x.first_failing.map_or("none".into(), |f| f.to_string()))
                .collect();
            let _ = writeln!(
                out,
                "{name:<22} largest N {:>7} (per rep {}; first failing {})",
                num(st.max_clients.get(name).copied(), 1),
                per.join(", "),
                fails.join(", ")
            );
        }
        if let Some(ratio) = st.max_clients_ratio {
            let _ = writeln!(
                out,
                "largest N on / off: {ratio:.2} (paper: 18 -> 60 clients, 3.3x)"
            );
        }
        if let Some(n) = st.breakdown_n {
            let _ = writeln!(out, "per feature at N = {n}:");
            let _ = writeln!(
                out,
                "{:<22} {:>16} {:>15} {:>20} {:>12}",
                "variant", "under-runs/client", "worst client", "first under-run s", "clients ok"
            );
            let mut names: Vec<&String> = st.breakdown.keys().collect();
            names.sort_by_key(|n| (n.as_str() != "off", n.starts_with("all/"), n.as_str()));
            for name in names {
                let _ = writeln!(out, "{}", probe_line(name, &st.breakdown[name]));
            }
        }
    }
    let noisy = noisy_runs(r);
    if noisy > 0 {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "WARNING: in {noisy} kept run(s) other processes used more than {:.2} CPUs of the \
             island (see `others`; such runs are repeated up to {} times, the quietest kept): \
             the machine was busy, compare with care",
            super::MAX_OUTSIDE_CPU,
            super::NOISY_RETRIES
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "machine: {}", r.machine);
    let _ = write!(out, "command: {}", r.command);
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::report::{assemble, headline, StreamReport, StreamSearch, TwoTierSample};
    use super::super::{Mechanism, Settings, Variant};
    use super::*;
    use crate::machine::Machine;

    fn sample(rep: usize, avg: f64) -> TwoTierSample {
        TwoTierSample {
            rep,
            avg_ms: Some(avg),
            p95_ms: Some(avg * 4.0),
            max_ms: Some(avg * 10.0),
            throughput_rps: 100.0,
            completed: 1000,
            hog_chunks_per_s: Some(8000.0),
            hog_cpu: vec![0.16; 5],
            hog_reservation: 0.12,
            window_s: 10.0,
            ..Default::default()
        }
    }

    fn report() -> CommReport {
        let two_tier = assemble(vec![
            (Variant::Off, vec![sample(0, 10.0)]),
            (Variant::all(Mechanism::Slice), vec![sample(0, 6.0)]),
            (Variant::alone(Mechanism::Slice)[2], vec![sample(0, 9.0)]),
        ]);
        let headline = headline(&two_tier["off"], &two_tier["all/slice"]);
        let mut stream = StreamReport::default();
        stream.searches.insert(
            "off".into(),
            vec![StreamSearch {
                rep: 0,
                max_clients: 16,
                first_failing: Some(32),
                probes: Vec::new(),
            }],
        );
        stream.summarize("all/slice");
        stream.breakdown_n = Some(32);
        stream.breakdown.insert(
            "off".into(),
            vec![StreamProbe {
                n: 32,
                underruns_mean: 2.5,
                underruns_max: 4,
                clients_ok: 20,
                first_underrun_s: Some(3.25),
                ..Default::default()
            }],
        );
        CommReport {
            on: "all/slice".into(),
            headline,
            best_mechanism: Some("slice".into()),
            two_tier,
            stream: Some(stream),
            unavailable: BTreeMap::from([(
                "all/weight".to_string(),
                "exited during start-up: unknown field comm".to_string(),
            )]),
            settings: Settings::new(true, None, None, None),
            machine: Machine::default(),
            command: "atoll bench comm --quick".into(),
        }
    }

    #[test]
    fn the_table_lists_off_first_and_checks_goals() {
        let t = render_table(&report());
        let off = t.find("\noff ").unwrap();
        let on = t.find("\nall/slice ").unwrap();
        let np = t.find("\nnetpath/slice ").unwrap();
        assert!(off < on && on < np, "{t}");
        assert!(t.contains("avg improvement"), "{t}");
        assert!(t.contains("40.0%") && t.contains(">= 34%"), "{t}");
        assert!(t.contains("met"), "{t}");
        assert!(t.contains("n/a"), "no accounting shows n/a: {t}");
        assert!(
            t.contains("all/weight             unavailable: exited during start-up"),
            "{t}"
        );
        assert!(t.contains("netpath/slice          avg   10.0%"), "{t}");
        assert!(
            t.contains("largest N    16.0 (per rep 16; first failing 32)"),
            "{t}"
        );
        assert!(t.contains("per feature at N = 32:"), "{t}");
        assert!(
            t.contains("2.50") && t.contains("3.25") && t.contains("20/32"),
            "{t}"
        );
        assert!(t.ends_with("command: atoll bench comm --quick"), "{t}");
        assert!(!t.contains("WARNING"), "{t}");
    }

    #[test]
    fn runs_disturbed_by_other_load_are_counted_and_warned_about() {
        let mut r = report();
        assert_eq!(noisy_runs(&r), 0);
        r.two_tier.get_mut("off").unwrap().reps[0].outside_cpu = Some(0.5);
        r.stream.as_mut().unwrap().breakdown.get_mut("off").unwrap()[0].outside_cpu = Some(0.2);
        assert_eq!(noisy_runs(&r), 2);
        let t = render_table(&r);
        assert!(t.contains("WARNING: in 2 kept run(s)"), "{t}");
    }

    /// Prints the table of a saved `--json` report (for the docs):
    /// `ATOLL_COMM_JSON=report.json cargo test -p atoll-bench render_saved
    /// -- --ignored --nocapture`.
    #[test]
    #[ignore = "prints the table of the report in $ATOLL_COMM_JSON"]
    fn render_saved_report() {
        let path = std::env::var("ATOLL_COMM_JSON").expect("ATOLL_COMM_JSON");
        let text = std::fs::read_to_string(path).unwrap();
        let r: CommReport = serde_json::from_str(&text).unwrap();
        println!("{}", render_table(&r));
    }

    #[test]
    fn without_the_on_variant_there_is_no_headline() {
        let mut r = report();
        r.headline.clear();
        r.stream = None;
        let t = render_table(&r);
        assert!(t.contains("not compared"), "{t}");
        assert!(!t.contains("Streaming"), "{t}");
    }
}
