//! The report of `atoll bench overhead` as a text table.

use std::fmt::Write as _;

use super::{
    BinaryResult, Goal, OverheadReport, Ratios, ScenarioResult, Spread, Which, GOAL_CPU_PCT,
    GOAL_RSS_MIB,
};
use crate::table::{aligned, load3, num};

fn median(s: Option<Spread>, digits: usize) -> String {
    num(s.map(|s| s.median), digits)
}

fn range(s: Option<Spread>) -> String {
    s.map_or_else(|| "-".into(), |s| format!("[{:.2}-{:.2}]", s.min, s.max))
}

fn row(sc: &ScenarioResult, which: Which, r: &BinaryResult, ratio: Option<&Ratios>) -> Vec<String> {
    let first = which == Which::Daemon;
    let busy = Spread::of(r.samples.iter().filter_map(|s| s.machine_busy_pct));
    let mut cells = vec![
        if first {
            sc.units.to_string()
        } else {
            String::new()
        },
        if first {
            sc.features.as_str().to_string()
        } else {
            String::new()
        },
        which.letter().to_string(),
        median(r.cpu_pct, 2),
        range(r.cpu_pct),
        median(r.rss_mib, 2),
        median(r.hwm_mib, 2),
        median(r.epochs_per_s, 1),
        median(r.ctx_switches_per_s, 0),
        median(busy, 1),
    ];
    if let Some(x) = ratio {
        cells.extend([
            num(x.cpu_pct, 3),
            num(x.rss_mib, 3),
            num(x.hwm_mib, 3),
            num(x.epochs_per_s, 3),
        ]);
    }
    cells
}

fn verdict(met: Option<bool>, r: Option<&BinaryResult>) -> String {
    let figures = r.map_or_else(String::new, |r| {
        format!(
            ": CPU {} % (limit {GOAL_CPU_PCT}), RSS {} MiB (limit {GOAL_RSS_MIB})",
            median(r.cpu_pct, 2),
            median(r.rss_mib, 2)
        )
    });
    match met {
        Some(true) => format!("met{figures}"),
        Some(false) => format!("NOT met{figures}"),
        None => "not measured (needs the 100-unit scenario with features on)".into(),
    }
}

fn goal_lines(g: &Goal, r: &OverheadReport) -> String {
    let sc = r.scenarios.iter().find(|s| s.name == g.scenario);
    let mut t = format!("{}\n", g.text);
    let _ = writeln!(
        t,
        "  A (daemon): {}",
        verdict(g.daemon, sc.map(|s| &s.daemon))
    );
    if r.baseline.is_some() {
        let _ = writeln!(
            t,
            "  B (baseline): {}",
            verdict(g.baseline, sc.and_then(|s| s.baseline.as_ref()))
        );
    }
    t
}

/// The table, what its columns mean, and the goal with each binary's
/// verdict.
pub fn render_table(r: &OverheadReport) -> String {
    let s = &r.settings;
    let mut t = String::new();
    let backend = r
        .daemon
        .backend
        .clone()
        .unwrap_or_else(|| r.machine.backend.clone());
    let _ = writeln!(
        t,
        "atoll bench overhead: the daemon's own cost, {} ms epochs, {} idle processes on the machine, backend {backend}",
        s.epoch_ms, r.idle_processes
    );
    let bin = |b: &super::Binary| {
        format!(
            "{} (version {})",
            b.path,
            b.version.as_deref().unwrap_or("?")
        )
    };
    let _ = writeln!(t, "A = daemon:   {}", bin(&r.daemon));
    if let Some(b) = &r.baseline {
        let _ = writeln!(t, "B = baseline: {}", bin(b));
    }
    let _ = writeln!(
        t,
        "{} rep(s) of a {} s window after {} s of warm-up{}; load average {} at the start, {} at the end\n",
        s.reps,
        s.seconds,
        s.warmup_s,
        if r.baseline.is_some() {
            ", A and B alternating"
        } else {
            ""
        },
        load3(&r.machine.loadavg),
        load3(&r.loadavg_end)
    );
    let mut head = vec![
        "UNITS",
        "FEATURES",
        "BIN",
        "CPU %",
        "[MIN-MAX]",
        "RSS MiB",
        "HWM MiB",
        "EPOCHS/S",
        "CTX SW/S",
        "MACHINE BUSY %",
    ];
    let baseline = r.baseline.is_some();
    if baseline {
        head.extend(["CPU A/B", "RSS A/B", "HWM A/B", "EPOCHS A/B"]);
    }
    let mut rows = Vec::new();
    for sc in &r.scenarios {
        let mut a = row(sc, Which::Daemon, &sc.daemon, sc.ratio.as_ref());
        if baseline && sc.ratio.is_none() {
            a.extend(["-".into(), "-".into(), "-".into(), "-".into()]);
        }
        rows.push(a);
        if let Some(b) = &sc.baseline {
            rows.push(row(sc, Which::Baseline, b, None));
        }
    }
    t += &aligned(&head, &rows, 3);
    let c = &r.config;
    let mut ents: Vec<String> = Vec::new();
    for sc in &r.scenarios {
        let e = format!("{} units: {:.2} CPUs each", sc.units, sc.entitlement_cpus);
        if !ents.contains(&e) {
            ents.push(e);
        }
    }
    let _ = writeln!(
        t,
        "\nconfig: host CPUs \"{}\", island bench CPUs {}, {}; {}",
        c.host,
        c.island,
        ents.join(", "),
        c.adoption
    );
    let _ = writeln!(t, "features off: {}; on: {}", c.features_off, c.features_on);
    if s.backend == super::Backend::Sim {
        let _ = writeln!(
            t,
            "backend sim: the daemons run a simulated machine, which has none of this machine's processes: \
             the units stay empty and the adoption scan never sees the idle processes"
        );
    }
    let _ = writeln!(
        t,
        "CPU % = utime + stime of all the daemon's threads over the window, % of one CPU: median [min-max] over the reps;\n\
         RSS = VmRSS at the end of the window, HWM = VmHWM (its peak since start), MiB; EPOCHS/S from `status --json`;\n\
         CTX SW/S = its threads' context switches; MACHINE BUSY % = all CPUs, everything on them; all medians{}\n",
        if baseline {
            "; X A/B = A's median ÷ B's"
        } else {
            ""
        }
    );
    t += &goal_lines(&r.goal, r);
    let _ = writeln!(t, "machine: {}", r.machine);
    let _ = write!(t, "command: {}", r.command);
    t
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::super::*;
    use super::*;

    fn report(baseline: bool) -> OverheadReport {
        let sc = |units, features| Scenario { units, features };
        let b = |cpu| baseline.then(|| vec![sample(0, cpu, 9.0)]);
        let scenarios = vec![
            assemble(
                sc(10, Features::Off),
                0.1,
                vec![sample(0, 1.0, 8.0)],
                b(1.1),
            ),
            assemble(
                sc(100, Features::On),
                0.01,
                vec![sample(0, 0.2, 9.0)],
                b(2.5),
            ),
        ];
        let layout =
            crate::isolation::config::Layout::fallback(&atoll_core::CpuSet::parse("0-1").unwrap())
                .unwrap();
        OverheadReport {
            goal: Goal::judge(&scenarios),
            scenarios,
            daemon: Binary {
                path: "/bin/atoll".into(),
                version: Some("0.1.0".into()),
                backend: Some("cgroup1".into()),
            },
            baseline: baseline.then(|| Binary {
                path: "/bins/atoll-main".into(),
                version: None,
                backend: None,
            }),
            config: ConfigSummary::new(&layout, 30),
            idle_processes: 2000,
            settings: Settings::new(false, None, None, None),
            machine: crate::machine::Machine {
                loadavg: "0.5 0.4 0.3".into(),
                ..Default::default()
            },
            loadavg_end: "0.6 0.5 0.4 1/100 7".into(),
            command: "atoll bench overhead".into(),
        }
    }

    #[test]
    fn a_table_with_ratios_and_the_goal() {
        let t = render_table(&report(true));
        assert!(
            t.contains("A = daemon:   /bin/atoll (version 0.1.0)"),
            "{t}"
        );
        assert!(
            t.contains("B = baseline: /bins/atoll-main (version ?)"),
            "{t}"
        );
        assert!(t.contains("backend cgroup1"), "{t}");
        assert!(t.contains("CPU A/B"), "{t}");
        // The A row of 100 units: 0.2 % against 2.5 %.
        let line = t.lines().find(|l| l.starts_with("100")).unwrap();
        assert!(line.contains("0.20") && line.contains("0.080"), "{line}");
        assert!(t.contains(GOAL_TEXT), "{t}");
        assert!(t.contains("  A (daemon): met: CPU 0.20 %"), "{t}");
        assert!(t.contains("  B (baseline): NOT met: CPU 2.50 %"), "{t}");
        assert!(
            t.contains("load average 0.5 0.4 0.3 at the start, 0.6 0.5 0.4 at the end"),
            "{t}"
        );
        assert!(t.contains("100 units: 0.01 CPUs each"), "{t}");
        assert!(t.ends_with("command: atoll bench overhead"), "{t}");
    }

    #[test]
    fn without_a_baseline_there_are_no_ratio_columns() {
        let t = render_table(&report(false));
        assert!(!t.contains("A/B") && !t.contains("B = baseline"), "{t}");
        assert!(!t.contains("B (baseline)"), "{t}");
        assert!(t.contains("  A (daemon): met"), "{t}");
        assert!(!t.contains("backend sim:"), "{t}");
        let mut r = report(false);
        r.settings.backend = Backend::Sim;
        assert!(render_table(&r).contains("backend sim: "));
        r.scenarios.pop();
        r.goal = Goal::judge(&r.scenarios);
        let t = render_table(&r);
        assert!(t.contains("A (daemon): not measured"), "{t}");
    }
}
