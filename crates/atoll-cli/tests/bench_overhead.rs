//! `atoll bench overhead` through the built binary: its command line, the
//! configs it generates (checked by `atoll check-config`), a real `--quick
//! --json` run as root on the real kernel (skipped, with a note, when not
//! root) and one on the simulated backend (any user). Only shapes and
//! sanity are checked: benchmark numbers are printed, never asserted in a
//! direction, and nothing is timed.

mod common;

use std::process::{Command, Stdio};

use common::{assert_refused, is_root, BIN};

#[test]
fn bad_arguments_are_refused() {
    assert_refused(
        "overhead",
        &[
            &["--units", "0"][..],
            &["--units", "10000"],
            &["--features", "maybe"],
            &["--backend", "cgroup3"],
            &["--reps", "0"],
            &["--seconds", "0"],
            &["--warmup=-1"],
            &["--epoch-ms", "0"],
        ],
    );
}

#[test]
fn generated_configs_pass_check_config_on_this_machine() {
    let dir = tempfile::tempdir().unwrap();
    for units in ["10", "100"] {
        for features in ["off", "on"] {
            let out = Command::new(BIN)
                .args(["bench", "overhead", "--print-config", "--units", units])
                .args(["--features", features])
                .output()
                .unwrap();
            assert!(out.status.success(), "{units} {features}");
            let text = String::from_utf8(out.stdout).unwrap();
            assert_eq!(text.matches("[unit.").count().to_string(), units, "{text}");
            assert_eq!(text.contains("[comm]"), features == "on", "{text}");
            let path = dir.path().join(format!("{units}-{features}.toml"));
            std::fs::write(&path, &text).unwrap();
            let check = Command::new(BIN)
                .arg("check-config")
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                check.status.success(),
                "{text}\n{}",
                String::from_utf8_lossy(&check.stderr)
            );
        }
    }
}

/// Runs `atoll bench overhead ARGS --json`; returns the report and the
/// benchmark's pid.
fn run(args: &[&str]) -> (serde_json::Value, u32) {
    let child = Command::new(BIN)
        .args(["bench", "overhead", "--json"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), pid)
}

fn num(v: &serde_json::Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {v}"))
}

/// One window's figures are plausible: CPU shares finite and not negative
/// (the ns-resolution one above zero: 100 Hz ticks may show none of a
/// frugal daemon in 2 s), memory and epochs above zero.
fn sane_sample(s: &serde_json::Value, units_held: u64) {
    for key in ["cpu_pct", "cpu_pct_threads"] {
        let v = num(s, key);
        assert!(v.is_finite() && v >= 0.0, "{key}: {s}");
    }
    assert!(num(s, "cpu_pct_threads") > 0.0, "{s}");
    assert!(num(s, "rss_mib") > 0.0, "{s}");
    assert!(num(s, "hwm_mib") >= num(s, "rss_mib"), "{s}");
    assert!(s["epochs"].as_u64().unwrap() > 0, "{s}");
    assert!(num(s, "epochs_per_s") > 0.0, "{s}");
    assert!(num(s, "window_s") > 0.0, "{s}");
    assert!(s["threads"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(s["units_held"].as_u64(), Some(units_held), "{s}");
}

fn sane_report(r: &serde_json::Value, units_held: u64) {
    let scenarios = r["scenarios"].as_array().unwrap();
    let names: Vec<&str> = scenarios
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["u10-off", "u10-on"]);
    for sc in scenarios {
        assert_eq!(sc["units"], 10);
        assert!(num(sc, "entitlement_cpus") > 0.0, "{sc}");
        let samples = sc["daemon"]["samples"].as_array().unwrap();
        assert_eq!(samples.len(), 1, "{sc}");
        sane_sample(&samples[0], units_held);
        for key in ["cpu_pct", "rss_mib", "hwm_mib", "epochs_per_s"] {
            let s = &sc["daemon"][key];
            assert!(num(s, "min") <= num(s, "median"), "{key}: {sc}");
            assert!(num(s, "median") <= num(s, "max"), "{key}: {sc}");
        }
        assert!(sc["baseline"].is_null() && sc["ratio"].is_null(), "{sc}");
    }
    let goal = &r["goal"];
    assert!(
        goal["text"].as_str().unwrap().contains("under 0.3 %"),
        "{goal}"
    );
    // No 100-unit scenario in --quick: no verdict.
    assert!(goal["daemon"].is_null(), "{goal}");
    assert!(r["baseline"].is_null());
    assert_eq!(r["settings"]["quick"], true);
    assert_eq!(r["idle_processes"], 2000);
    assert_eq!(
        r["daemon"]["path"].as_str(),
        Some(std::fs::canonicalize(BIN).unwrap().to_str().unwrap())
    );
}

/// No process named for this run's units is left running.
fn no_unit_processes_left(bench_pid: u32) {
    let prefix = format!("ao{bench_pid}u");
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
            assert!(!comm.starts_with(&prefix), "left running: {comm}");
        }
    }
}

#[test]
fn quick_json_run_on_the_real_kernel() {
    if !is_root() {
        eprintln!("skipped: `atoll bench overhead` on real cgroups needs root");
        return;
    }
    let (r, pid) = run(&["--quick"]);
    sane_report(&r, 10);
    let backend = r["daemon"]["backend"].as_str().unwrap();
    assert!(backend.starts_with("cgroup"), "{backend}");
    no_unit_processes_left(pid);
    // Nothing of the run is left in any cgroup mount (its roots are named
    // after its pid).
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mine = format!("atoll-bench-overhead-{pid}-");
    for line in mounts.lines().filter(|l| l.contains(" - cgroup")) {
        let dir = line.split_whitespace().nth(4).unwrap();
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                assert!(!name.starts_with(&mine), "left behind: {dir}/{name}");
            }
        }
    }
}

#[test]
fn quick_json_run_on_the_simulated_backend() {
    let (r, pid) = run(&["--quick", "--backend", "sim"]);
    // The simulated machine has none of the real processes: units stay
    // empty.
    sane_report(&r, 0);
    assert_eq!(r["daemon"]["backend"], "sim");
    assert_eq!(r["settings"]["backend"], "sim");
    no_unit_processes_left(pid);
}
