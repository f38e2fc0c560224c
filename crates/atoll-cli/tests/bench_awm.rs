//! `atoll bench awm` through the built binary: its command line, its
//! workers (no root), and a real `--quick --json` run as root on the real
//! kernel (skipped, with a note, when not root). Only shapes and sanity are
//! checked: benchmark numbers are printed, never asserted in a direction.

mod common;

use std::process::{Command, Stdio};

use common::{assert_refused, is_root, worker, BIN};

#[test]
fn bad_scenarios_and_reps_are_refused() {
    assert_refused(
        "awm",
        &[
            &["--scenarios", "burst-0"][..],
            &["--scenarios", "mix-2"],
            &["--reps", "0"],
            &["--balance-weight=-1"],
            &["--ws-kib", "0"],
        ],
    );
}

#[test]
fn workers_run_unmanaged_and_report_one_json_line() {
    for (kind, extra) in [
        ("awm-parallel", vec![]),
        ("awm-pipeline", vec!["--items", "3"]),
    ] {
        let mut args = vec![
            kind,
            "--threads",
            "2",
            "--cycles",
            "3",
            "--work",
            "4",
            "--ws-kib",
            "8",
        ];
        args.extend(extra);
        let r = worker(&args);
        assert_eq!(r["kind"], kind);
        assert_eq!(r["mode"], "unmanaged");
        assert_eq!(
            (r["cycles"].as_u64(), r["complete"].as_bool()),
            (Some(3), Some(true))
        );
        assert!(r["context_switches"].as_u64().unwrap() > 0, "{r}");
        assert!(r["migrations"].as_u64().is_some(), "{r}");
    }
}

fn sane_side(s: &serde_json::Value, scenario: &serde_json::Value, managed: bool) {
    let n = scenario["parallel"].as_u64().unwrap() + scenario["pipeline"].as_u64().unwrap();
    let instances = s["instances"].as_array().unwrap();
    assert_eq!(instances.len() as u64, n, "{s}");
    let mut max: f64 = 0.0;
    for i in instances {
        assert_eq!(i["complete"], true, "{i}");
        assert!(i["cycles"].as_u64().unwrap() > 0, "{i}");
        assert!(i["context_switches"].as_u64().unwrap() > 0, "{i}");
        assert!(i["migrations"].as_u64().is_some(), "{i}");
        assert!(i["cpu_s"].as_f64().unwrap() > 0.0, "{i}");
        let t = i["completion_s"].as_f64().unwrap();
        assert!(t > 0.0 && t < 600.0, "{i}");
        max = max.max(t);
        // Managed instances acted on at least one assignment.
        assert_eq!(
            i["configurations"].as_u64().is_some_and(|c| c >= 1),
            managed,
            "{i}"
        );
    }
    assert_eq!(s["makespan_s"].as_f64().unwrap(), max, "{s}");
    let mean = s["mean_completion_s"].as_f64().unwrap();
    assert!(mean > 0.0 && mean <= max, "{s}");
    assert!(s["context_switches"].as_u64().unwrap() > 0, "{s}");
    assert!(s["outside_cpu"].as_f64().unwrap() >= 0.0, "{s}");
}

#[test]
fn quick_json_run_on_the_real_kernel() {
    if !is_root() {
        eprintln!("skipped: `atoll bench awm` needs root");
        return;
    }
    let child = Command::new(BIN)
        .args(["bench", "awm", "--quick", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let scenarios = r["scenarios"].as_array().unwrap();
    let names: Vec<&str> = scenarios
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["burst-2", "mix-1+1"]);
    for sc in scenarios {
        for (side, managed) in [("unmanaged_samples", false), ("managed_samples", true)] {
            let samples = sc[side].as_array().unwrap();
            assert_eq!(samples.len(), 1, "{side}: {sc}");
            sane_side(&samples[0], &sc["scenario"], managed);
        }
        for side in ["unmanaged", "managed"] {
            assert!(sc[side]["makespan_s"].as_f64().unwrap() > 0.0, "{sc}");
        }
        // Both sides there: the improvements are numbers (of either sign).
        assert!(sc["completion_improvement"].as_f64().is_some(), "{sc}");
        assert!(sc["mean_completion_improvement"].as_f64().is_some(), "{sc}");
        assert_eq!(sc["oversubscribed"], true, "{sc}");
        assert!(sc["goal_met"].is_boolean(), "{sc}");
    }
    assert!(r["goal"].as_str().unwrap().contains("0.20"));
    assert_eq!(r["settings"]["quick"], true);
    // Nothing of the run is left in any cgroup mount (its roots are named
    // after its pid).
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    for line in mounts.lines().filter(|l| l.contains(" - cgroup")) {
        let dir = line.split_whitespace().nth(4).unwrap();
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                let mine = format!("atoll-bench-awm-{pid}-");
                assert!(!name.starts_with(&mine), "left behind: {dir}/{name}");
            }
        }
    }
}
