//! `atoll apps [--json]`: the reconfigurable applications the daemon
//! manages, their working mode, resources and goal gap.
//!
//! One row per application: id, recipe name, pid, state (`running` or
//! `waiting`), working mode, island, CPU quota and the CPUs it may run on,
//! goal and rate in cycles per second, goal gap, how many times its
//! mode or island changed, and the watts of its mode (the recipe's or
//! learned from RAPL, and which; `-` when neither). Waiting applications' reasons follow the table.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use atoll_client::Client;
use atoll_proto::apps::{AppRunState, AppStatus};
use atoll_proto::{Reply, Request};

pub fn apps(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let apps = match Client::connect(socket)?.request(Request::Apps {})? {
        Reply::Apps { apps } => apps,
        other => anyhow::bail!("unexpected reply to apps: {other:?}"),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&apps)?);
    } else {
        print!("{}", render(&apps));
    }
    Ok(ExitCode::SUCCESS)
}

/// Left-aligned columns, two spaces apart.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut o = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (cell, w) in row.iter().zip(&widths) {
            let _ = write!(line, "{cell:<w$}  ");
        }
        o.push_str(line.trim_end());
        o.push('\n');
    }
    o
}

/// A number without trailing zeros (`2`, `0.5`, `12.25`).
fn num(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The table and the waiting applications' reasons.
pub fn render(apps: &[AppStatus]) -> String {
    if apps.is_empty() {
        return "no applications registered\n".into();
    }
    let rows: Vec<Vec<String>> = apps
        .iter()
        .map(|a| {
            let (state, mode, island, quota) = match &a.assignment.state {
                AppRunState::Running {
                    mode,
                    mode_name,
                    island,
                    cpu_quota,
                    cpus,
                    ..
                } => (
                    "running",
                    if mode_name.is_empty() {
                        mode.to_string()
                    } else {
                        format!("{mode} ({mode_name})")
                    },
                    island.clone(),
                    format!("{} on {cpus}", num(*cpu_quota)),
                ),
                AppRunState::Waiting { .. } => ("waiting", "-".into(), "-".into(), "-".into()),
            };
            let per_s = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{}/s", num(v)));
            vec![
                a.app.to_string(),
                a.name.clone(),
                a.pid.to_string(),
                state.to_string(),
                mode,
                island,
                quota,
                per_s(a.goal_cps),
                per_s(a.cycles_per_s),
                if a.goal_gap == 0.0 {
                    "0".into()
                } else {
                    format!("{:+.2}", a.goal_gap)
                },
                a.reconfigurations.to_string(),
                a.power.map_or_else(
                    || "-".into(),
                    |p| format!("{} W ({})", num(p.watts), p.from.as_str()),
                ),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "ID", "NAME", "PID", "STATE", "MODE", "ISLAND", "CPUS", "GOAL", "RATE", "GAP",
            "RECONF", "WATTS",
        ],
        &rows,
    );
    for a in apps {
        if let AppRunState::Waiting { reason } = &a.assignment.state {
            let _ = writeln!(out, "app {} waits: {reason}", a.app);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use atoll_core::CpuSet;
    use atoll_proto::apps::AppAssignment;

    use super::*;

    fn app(id: u64, state: AppRunState) -> AppStatus {
        AppStatus {
            app: id,
            name: "bodytrack".into(),
            priority: 0,
            pid: 4000 + u32::try_from(id).unwrap(),
            unit: None,
            assignment: AppAssignment {
                app: id,
                generation: 3,
                state,
            },
            goal_cps: None,
            cycles_per_s: None,
            goal_gap: 0.0,
            reconfigurations: 0,
            power: None,
        }
    }

    #[test]
    fn rows_show_mode_resources_goal_and_gap() {
        let mut a = app(
            7,
            AppRunState::Running {
                mode: 2,
                mode_name: "high".into(),
                island: "b".into(),
                cpu_quota: 1.5,
                cpus: CpuSet::parse("4-7").unwrap(),
                threads: Some(2),
                memory_bytes: 0,
            },
        );
        a.goal_cps = Some(30.0);
        a.cycles_per_s = Some(24.0);
        a.goal_gap = 0.25;
        a.reconfigurations = 4;
        a.power = Some(atoll_proto::apps::AppPower {
            watts: 10.0,
            from: atoll_proto::energy::WattsFrom::Learned,
        });
        let b = app(
            8,
            AppRunState::Waiting {
                reason: "blocked: no room".into(),
            },
        );
        let out = render(&[a, b]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert!(lines[0].starts_with("ID  NAME"), "{out}");
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "7",
                "bodytrack",
                "4007",
                "running",
                "2",
                "(high)",
                "b",
                "1.5",
                "on",
                "4-7",
                "30/s",
                "24/s",
                "+0.25",
                "4",
                "10",
                "W",
                "(learned)"
            ]
        );
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "8",
                "bodytrack",
                "4008",
                "waiting",
                "-",
                "-",
                "-",
                "-",
                "-",
                "0",
                "0",
                "-"
            ]
        );
        assert_eq!(lines[3], "app 8 waits: blocked: no room");
        assert_eq!(render(&[]), "no applications registered\n");
    }
}
