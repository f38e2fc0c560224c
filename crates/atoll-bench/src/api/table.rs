//! The report of `atoll bench api` as text: requests per mix, binary and
//! kind; the daemon's epochs and costs; the goals with each binary's
//! verdict.

use std::fmt::Write as _;

use super::{
    ApiReport, KindFigures, Mix, RunResult, Verdicts, GOAL_EPOCH_TOLERANCE, GOAL_LATE_SHARE,
    GOAL_STATUS_P99_MS, GOAL_STATUS_PER_S,
};
use crate::overhead::Which;
use crate::stats::ratio;
use crate::table::{aligned, load3, num};

/// The kinds a run sent, reads first.
fn kinds(r: &RunResult) -> Vec<(&'static str, &KindFigures)> {
    super::Kind::ALL
        .iter()
        .filter_map(|k| r.kind(k.as_str()).map(|f| (k.as_str(), f)))
        .collect()
}

fn request_rows(rep: &ApiReport, baseline: bool) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for mix in Mix::ALL {
        for which in [Which::Daemon, Which::Baseline] {
            let Some(r) = rep.run_of(mix, which) else {
                continue;
            };
            let other = rep.run_of(mix, Which::Baseline);
            for (i, (kind, f)) in kinds(r).into_iter().enumerate() {
                let first = i == 0;
                let mut row = vec![
                    if first && which == Which::Daemon {
                        mix.as_str().to_string()
                    } else {
                        String::new()
                    },
                    if first {
                        which.letter().to_string()
                    } else {
                        String::new()
                    },
                    kind.to_string(),
                    format!("{:.0}", f.per_s),
                    num(f.p50_ms, 3),
                    num(f.p99_ms, 3),
                    num(f.max_ms, 1),
                    f.ok.to_string(),
                    f.busy.to_string(),
                    f.failures().to_string(),
                ];
                if baseline {
                    let b = other
                        .filter(|_| which == Which::Daemon)
                        .and_then(|o| o.kind(kind));
                    row.push(num(ratio(Some(f.per_s), b.map(|b| b.per_s)), 2));
                    row.push(num(ratio(f.p99_ms, b.and_then(|b| b.p99_ms)), 3));
                }
                rows.push(row);
            }
        }
    }
    rows
}

fn daemon_rows(rep: &ApiReport) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for mix in Mix::ALL {
        for which in [Which::Daemon, Which::Baseline] {
            let Some(r) = rep.run_of(mix, which) else {
                continue;
            };
            rows.push(vec![
                if which == Which::Daemon {
                    mix.as_str().to_string()
                } else {
                    String::new()
                },
                which.letter().to_string(),
                num(r.idle.map(|w| w.per_s), 2),
                num(r.load.map(|w| w.per_s), 2),
                num(r.epoch_ratio, 3),
                num(r.load.map(|w| w.missed), 1),
                num(r.load.map(|w| w.late_share * 100.0), 2),
                num(r.load.map(|w| w.worst_stall), 1),
                format!("{:.1}", r.use_idle.cpu_pct),
                format!("{:.1}", r.use_load.cpu_pct),
                format!("{:.2}", r.rss_mib),
                format!("{:.2}", r.hwm_mib),
                r.sent().to_string(),
                r.lost().to_string(),
                r.clients.refused.to_string(),
                num(r.use_load.machine_busy_pct, 1),
            ]);
        }
    }
    rows
}

fn verdict(v: Option<bool>, figures: String) -> String {
    match v {
        Some(true) => format!("met{figures}"),
        Some(false) => format!("NOT met{figures}"),
        None => "not measured".into(),
    }
}

fn goal_lines(rep: &ApiReport) -> String {
    let mut t = String::new();
    let bins: Vec<(Which, Verdicts)> = std::iter::once((Which::Daemon, rep.goals.daemon))
        .chain(rep.goals.baseline.map(|b| (Which::Baseline, b)))
        .collect();
    let runs = |w: Which| rep.runs.iter().filter(move |r| r.which == w);
    let _ = writeln!(
        t,
        "goal: at least {GOAL_STATUS_PER_S:.0} status req/s with p99 under {GOAL_STATUS_P99_MS} ms (read mix)"
    );
    for (w, v) in &bins {
        let st = rep.run_of(Mix::Read, *w).and_then(|r| r.kind("status"));
        let figures = st.map_or_else(String::new, |f| {
            format!(
                ": {:.0} req/s ({:.2} x the goal), p99 {} ms",
                f.per_s,
                f.per_s / GOAL_STATUS_PER_S,
                num(f.p99_ms, 3)
            )
        });
        let _ = writeln!(t, "  {}: {}", w.letter(), verdict(v.status, figures));
    }
    let _ = writeln!(
        t,
        "goal: epochs on time: rate under load within {:.0} % of idle, at most {:.0} % of epochs late by more than one epoch (every mix)",
        GOAL_EPOCH_TOLERANCE * 100.0,
        GOAL_LATE_SHARE * 100.0
    );
    for (w, v) in &bins {
        let ratios: Vec<f64> = runs(*w).filter_map(|r| r.epoch_ratio).collect();
        let late: Vec<f64> = runs(*w)
            .filter_map(|r| r.load.map(|l| l.late_share))
            .collect();
        let figures = if ratios.is_empty() {
            String::new()
        } else {
            format!(
                ": load/idle {:.3} to {:.3}, late at most {:.2} %",
                ratios.iter().copied().fold(f64::INFINITY, f64::min),
                ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                late.iter().copied().fold(0.0, f64::max) * 100.0
            )
        };
        let _ = writeln!(t, "  {}: {}", w.letter(), verdict(v.epochs, figures));
    }
    let _ = writeln!(t, "goal: no request lost (every mix)");
    for (w, v) in &bins {
        let lost: u64 = runs(*w).map(RunResult::lost).sum();
        let sent: u64 = runs(*w).map(RunResult::sent).sum();
        let _ = writeln!(
            t,
            "  {}: {}",
            w.letter(),
            verdict(v.lost, format!(": {lost} lost of {sent} sent"))
        );
    }
    t
}

/// Failures and notes worth a line each.
fn notes(rep: &ApiReport) -> String {
    let mut t = String::new();
    for r in &rep.runs {
        let tag = format!("{} {}", r.mix.as_str(), r.which.letter());
        for (kind, f) in kinds(r) {
            if !f.failed.is_empty() {
                let codes: Vec<String> = f.failed.iter().map(|(c, n)| format!("{c} {n}")).collect();
                let _ = writeln!(t, "  {tag}: {kind} failed: {}", codes.join(", "));
            }
        }
        let c = &r.clients;
        if c.mismatched + c.unmatched + c.connect_failures + c.reconnects > 0 {
            let _ = writeln!(
                t,
                "  {tag}: replies out of order {}, replies to nothing {}, failed connects {}, reconnects {}",
                c.mismatched, c.unmatched, c.connect_failures, c.reconnects
            );
        }
        for n in c.notes.iter().chain(&r.sampler_notes).take(4) {
            let _ = writeln!(t, "  {tag}: {n}");
        }
    }
    if t.is_empty() {
        t
    } else {
        format!("failures and notes:\n{t}")
    }
}

/// The tables, what their columns mean, the goals and their verdicts.
pub fn render_table(rep: &ApiReport) -> String {
    let s = &rep.settings;
    let mut t = String::new();
    let (root, users) = s.split();
    let uids: Vec<String> = rep.user_groups.iter().map(|(u, _)| u.to_string()).collect();
    let backend = rep
        .daemon
        .backend
        .clone()
        .unwrap_or_else(|| rep.machine.backend.clone());
    let _ = writeln!(
        t,
        "atoll bench api: {} clients ({}), {} request(s) in flight each, {} s per mix after {} s idle; \
         {} units, {} ms epochs, backend {backend}",
        s.clients,
        match (root, users) {
            (_, 0) => format!("{root} as root"),
            (0, _) => format!("{users} as uids {}", uids.join(",")),
            _ => format!("{root} as root, {users} as uids {}", uids.join(",")),
        },
        s.depth,
        s.seconds,
        s.idle_s,
        rep.config.units,
        rep.config.epoch_ms
    );
    let bin = |b: &crate::overhead::Binary| {
        format!(
            "{} (version {})",
            b.path,
            b.version.as_deref().unwrap_or("?")
        )
    };
    let _ = writeln!(t, "A = daemon:   {}", bin(&rep.daemon));
    if let Some(b) = &rep.baseline {
        let _ = writeln!(t, "B = baseline: {}", bin(b));
    }
    let _ = writeln!(
        t,
        "load average {} at the start, {} at the end\n",
        load3(&rep.machine.loadavg),
        load3(&rep.loadavg_end)
    );
    let baseline = rep.baseline.is_some();
    let mut head = vec![
        "MIX", "BIN", "KIND", "REQ/S", "P50 ms", "P99 ms", "MAX ms", "OK", "BUSY", "FAILED",
    ];
    if baseline {
        head.extend(["REQ/S A/B", "P99 A/B"]);
    }
    t += &aligned(&head, &request_rows(rep, baseline), 3);
    let _ = writeln!(
        t,
        "REQ/S = replies ÷ the window (all clients); P50/P99 = nearest rank, within 0.8 % below the sample; \
         MAX exact; BUSY = `busy` replies (users' changing requests paced), FAILED = any other error\n"
    );
    let head = [
        "MIX",
        "BIN",
        "IDLE EP/S",
        "LOAD EP/S",
        "LOAD/IDLE",
        "MISSED",
        "LATE %",
        "STALL",
        "CPU % IDLE",
        "CPU % LOAD",
        "RSS MiB",
        "HWM MiB",
        "SENT",
        "LOST",
        "REFUSED",
        "MACHINE BUSY %",
    ];
    t += &aligned(&head, &daemon_rows(rep), 2);
    let _ = writeln!(
        t,
        "EP/S = epochs per second of the loop's clock, from `epochs` and `uptime_ms` of `status` every {} ms; \
         MISSED = periods lost under load (loop time ÷ epoch − epochs, ±1); LATE % = MISSED ÷ expected epochs, \
         at least the share started more than one epoch late; STALL = most periods lost between two samples; \
         CPU % = the daemon, % of one CPU; RSS/HWM at the end; LOST = sent, never answered; \
         REFUSED = connections refused; MACHINE BUSY % = all CPUs under load, everything on them\n",
        s.sample_ms
    );
    let c = &rep.config;
    let uu: Vec<String> = c
        .user_units
        .iter()
        .map(|(w, on)| {
            format!(
                "{} {}",
                w.letter(),
                if *on { "yes" } else { "no (not accepted)" }
            )
        })
        .collect();
    let _ = writeln!(
        t,
        "config: host CPUs \"{}\", island CPUs {}, {} units of {:.2} CPUs each holding one idle process, overlay {}; \
         island user_units = true: {}",
        c.host,
        c.island,
        c.units,
        c.entitlement_cpus,
        c.overlay,
        if uu.is_empty() { "-".to_string() } else { uu.join(", ") }
    );
    let _ = writeln!(
        t,
        "mixes: read = status; mixed = 9 reads (status x5, why x2, overlays, apps) then 1 change; write = changes; \
         changes: root adopts its idle process (two units by turns), coordinate null, tune up/down, report; other users adopt\n"
    );
    t += &goal_lines(rep);
    t += &notes(rep);
    let _ = writeln!(t, "machine: {}", rep.machine);
    let _ = write!(t, "command: {}", rep.command);
    t
}

#[cfg(test)]
mod tests {
    use super::super::tests::measured;
    use super::super::*;
    use super::*;

    fn report(baseline: bool) -> ApiReport {
        let mut runs = vec![
            measured(Mix::Read, Which::Daemon, 33.3, 33.3),
            measured(Mix::Write, Which::Daemon, 33.3, 33.0),
        ];
        if baseline {
            runs.push(measured(Mix::Read, Which::Baseline, 33.3, 4.0));
            runs[2].kinds.get_mut("status").unwrap().per_s = 2000.0;
            runs[2]
                .kinds
                .get_mut("status")
                .unwrap()
                .failed
                .insert("backend".into(), 3);
        }
        let s = Settings::new(false);
        ApiReport {
            goals: Goals::judge(&runs, baseline),
            runs,
            daemon: crate::overhead::Binary {
                path: "/bin/atoll".into(),
                version: Some("0.1.0".into()),
                backend: Some("cgroup1".into()),
            },
            baseline: baseline.then(|| crate::overhead::Binary {
                path: "/bins/old".into(),
                version: None,
                backend: None,
            }),
            config: ConfigInfo {
                host: "0".into(),
                island: "1".into(),
                units: 10,
                entitlement_cpus: 0.1,
                overlay: "api: units u001 and u002".into(),
                epoch_ms: 30,
                user_units: vec![(Which::Daemon, true), (Which::Baseline, false)],
            },
            user_groups: s.user_groups(),
            settings: s,
            machine: crate::machine::Machine {
                loadavg: "0.5 0.4 0.3 1/2 3".into(),
                ..Default::default()
            },
            loadavg_end: "0.6 0.5 0.4 1/100 7".into(),
            command: "atoll bench api".into(),
        }
    }

    #[test]
    fn a_table_with_ratios_and_verdicts() {
        let t = render_table(&report(true));
        assert!(
            t.contains("32 clients (16 as root, 16 as uids 65534,65533,65532,65531)"),
            "{t}"
        );
        assert!(t.contains("B = baseline: /bins/old (version ?)"), "{t}");
        assert!(t.contains("REQ/S A/B"), "{t}");
        let line = t
            .lines()
            .find(|l| l.starts_with("read ") && l.contains("status"))
            .unwrap();
        assert!(line.contains("18000") && line.contains("9.00"), "{line}");
        assert!(t.contains("  A: met: 18000 req/s (1.80 x the goal)"), "{t}");
        assert!(t.contains("  B: NOT met: 2000 req/s"), "{t}");
        assert!(t.contains("  B: NOT met: load/idle 0.120"), "{t}");
        assert!(t.contains("  A: met: 0 lost of 360000 sent"), "{t}");
        assert!(t.contains("read B: status failed: backend 3"), "{t}");
        assert!(
            t.contains("user_units = true: A yes, B no (not accepted)"),
            "{t}"
        );
        assert!(t.contains("load average 0.5 0.4 0.3 at the start, 0.6 0.5 0.4 at the end"));
        assert!(t.ends_with("command: atoll bench api"), "{t}");
    }

    #[test]
    fn without_a_baseline_there_are_no_ratios() {
        let t = render_table(&report(false));
        assert!(!t.contains("A/B") && !t.contains("B = baseline"), "{t}");
        assert!(!t.contains("  B: "), "{t}");
        assert!(!t.contains("failures and notes"), "{t}");
    }
}
