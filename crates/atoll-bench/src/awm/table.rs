//! The report of `atoll bench awm` as a text table.

use std::fmt::Write as _;

use super::{AwmReport, ScenarioResult};
use crate::table::num;

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{:+.1}%", v * 100.0))
}

fn verdict(r: &ScenarioResult) -> &'static str {
    match r.goal_met {
        Some(true) => "met",
        Some(false) => "NOT met",
        None => "-",
    }
}

/// The side-by-side table, the improvements against the goal, and what the
/// managed instances did.
pub fn render_table(r: &AwmReport) -> String {
    let s = &r.settings;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "atoll bench awm: managed (daemon, [apps]) vs unmanaged (Linux), CPUs {} ({} reps; load average {} at the start, {} at the end)",
        s.cpus,
        s.reps,
        r.machine.loadavg.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        r.loadavg_end.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    );
    if let Some(b) = s.balance_weight {
        let _ = writeln!(t, "daemon: [apps] weights.balance = {b} (not the default)");
    }
    let _ = writeln!(
        t,
        "parallel instance: {} cycles x {} units, {} KiB per thread; pipeline instance: {} batches x {} items x {} units x 2 stages; unmanaged: {} threads per pool\n",
        s.parallel.cycles,
        s.parallel.work,
        s.parallel.ws_kib,
        s.pipeline.cycles,
        s.pipeline.items,
        s.pipeline.work,
        s.max_threads
    );
    let rows: Vec<[String; 12]> = r
        .scenarios
        .iter()
        .flat_map(|sc| {
            let side = |name: &str, m: &super::SideMean| {
                [
                    sc.name.clone(),
                    name.to_string(),
                    if name == "unmanaged" {
                        sc.unmanaged_threads.to_string()
                    } else {
                        "mode".into()
                    },
                    num(m.makespan_s, 3),
                    num(m.mean_completion_s, 3),
                    num(m.context_switches, 0),
                    num(m.migrations, 0),
                    num(m.outside_cpu, 2),
                    num(m.suspended_s, 2),
                    num(m.reconfigurations, 1),
                    String::new(),
                    String::new(),
                ]
            };
            let u = side("unmanaged", &sc.unmanaged);
            let mut m = side("managed", &sc.managed);
            m[0].clear();
            m[10] = pct(sc.completion_improvement);
            m[11] = pct(sc.mean_completion_improvement);
            [u, m]
        })
        .collect();
    let head = [
        "SCENARIO",
        "SIDE",
        "THREADS",
        "MAKESPAN_S",
        "MEAN_DONE_S",
        "CTX_SW",
        "MIGRATIONS",
        "OTHERS_CPU",
        "WAITED_S",
        "RECONF",
        "COMPLETION_IMPR",
        "MEAN_DONE_IMPR",
    ];
    let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 || i == 1 {
                let _ = write!(l, "{c:<w$}  ");
            } else {
                let _ = write!(l, "{c:>w$}  ");
            }
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(t, "{}", line(head.to_vec()));
    for row in &rows {
        let _ = writeln!(t, "{}", line(row.iter().map(String::as_str).collect()));
    }
    let _ = writeln!(
        t,
        "\nCOMPLETION_IMPR = completion_improvement = 1 - managed/unmanaged makespan (the workload's completion time);"
    );
    let _ = writeln!(
        t,
        "MEAN_DONE_IMPR = 1 - managed/unmanaged mean instance completion time. CTX_SW and MIGRATIONS: sums over the instances, per run."
    );
    let _ = writeln!(
        t,
        "OTHERS_CPU: CPUs busy with anything but the instances during a run (daemon, benchmark, other load; /proc/stat)."
    );
    let _ = writeln!(
        t,
        "WAITED_S: seconds the managed instances waited in all (the first plan included); RECONF: mode changes."
    );
    let _ = writeln!(t, "\n{}", r.energy);
    for sc in r
        .scenarios
        .iter()
        .filter(|sc| sc.unmanaged.energy_j.is_some())
    {
        let _ = writeln!(
            t,
            "  {:<10} joules per run: unmanaged {}, managed {}",
            sc.name,
            num(sc.unmanaged.energy_j, 1),
            num(sc.managed.energy_j, 1)
        );
    }
    let _ = writeln!(t, "\ngoal: {}", r.goal);
    for sc in &r.scenarios {
        let per_rep: Vec<String> = sc
            .completion_improvement_per_rep
            .iter()
            .map(|v| pct(*v))
            .collect();
        let _ = writeln!(
            t,
            "  {:<10} completion_improvement {:>7} (reps: {}), migrations {} -> {} ({}), context switches {} -> {} ({}): {}",
            sc.name,
            pct(sc.completion_improvement),
            per_rep.join(" "),
            num(sc.unmanaged.migrations, 0),
            num(sc.managed.migrations, 0),
            pct(sc.migration_reduction.map(|v| 0.0 - v)),
            num(sc.unmanaged.context_switches, 0),
            num(sc.managed.context_switches, 0),
            pct(sc.context_switch_reduction.map(|v| 0.0 - v)),
            verdict(sc),
        );
    }
    let _ = writeln!(t, "\ncommand: {}", r.command);
    t
}

#[cfg(test)]
mod tests {
    use super::super::{assemble, Instance, Sample, Settings};
    use super::*;

    #[test]
    fn the_table_has_both_sides_and_the_verdict() {
        let inst = |t: f64, m: u64| Instance {
            kind: "awm-parallel".into(),
            completion_s: t,
            cycles: 5,
            items: 5,
            complete: true,
            context_switches: 100,
            migrations: m,
            cpu_s: t,
            threads_final: 4,
            configurations: None,
            reconfigurations: None,
            suspensions: None,
            suspended_s: None,
        };
        let sc = assemble(
            "burst-2".parse().unwrap(),
            2,
            4,
            vec![Sample::of(
                0,
                vec![inst(2.0, 10), inst(1.0, 10)],
                Some((3.5, 2.0)),
            )],
            vec![Sample::of(0, vec![inst(1.5, 2), inst(1.0, 2)], None)],
        );
        let r = AwmReport {
            scenarios: vec![sc],
            goal: "g".into(),
            settings: Settings::new(true, None, None),
            machine: Default::default(),
            loadavg_end: "1.0 2.0 3.0 1/2 3".into(),
            command: "atoll bench awm --quick".into(),
            energy: "energy: no RAPL on this machine: no joules per run".into(),
        };
        let t = render_table(&r);
        assert!(t.contains("burst-2"), "{t}");
        assert!(t.contains("unmanaged") && t.contains("managed"), "{t}");
        assert!(t.contains("+25.0%"), "{t}");
        // 3.5 CPU-s busy over 2 s, 3 of them the instances'.
        assert!(t.contains(" 0.25 "), "{t}");
        assert!(t.contains("(-80.0%)") && t.contains("(+0.0%): met"), "{t}");
        let mut r = r;
        r.scenarios[0].goal_met = Some(false);
        assert!(render_table(&r).contains("NOT met"));
        assert!(t.contains("command: atoll bench awm --quick"), "{t}");
        assert!(
            t.contains("no RAPL on this machine: no joules per run"),
            "{t}"
        );
        assert!(!t.contains("joules per run: unmanaged"), "{t}");
        r.scenarios[0].unmanaged.energy_j = Some(120.5);
        r.scenarios[0].managed.energy_j = Some(80.4);
        let t = render_table(&r);
        assert!(
            t.contains("joules per run: unmanaged 120.5, managed 80.4"),
            "{t}"
        );
    }
}
