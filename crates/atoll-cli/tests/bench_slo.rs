//! `atoll bench slo` through the built binary: its command line, and
//! (ignored: root and redis-server, nginx and MariaDB, or `ip` and `tc`;
//! up to two minutes) a real short run of each scenario.
//! Only shapes are checked: benchmark numbers are printed, never asserted.

mod common;

use std::process::Command;

use common::{assert_help_lists, assert_refused, BIN};

#[test]
fn bench_slo_is_listed_with_its_options_and_refuses_bad_ones() {
    assert_help_lists(
        "slo",
        &[
            "--json",
            "--quick",
            "--loads",
            "--configs",
            "--seconds",
            "--warmup",
            "--slo-us",
            "--work",
            "--be-grow-above",
            "--be-cut-below",
            "--reps",
            "--backlog-bytes",
            "--trigger",
            "--table",
        ],
    );
    assert_refused(
        "slo",
        &[
            &["--loads", "10,150"][..],
            &["--loads", "half"],
            &["--configs", "linux,heracles"],
            &["--seconds", "0"],
            &["--slo-us", "0"],
            &["--be-grow-above", "1.5"],
            &["--be-cut-below", "1"],
            &["--reps", "0"],
            &["--backlog-bytes", "0"],
            &["--trigger", "react_recv_queue"],
            &["--scenario", "streams"],
        ],
    );
}

/// The whole benchmark, shortened: needs root, cgroups and redis-server
/// (`scripts/bench-deps.sh`), and takes about two minutes. Run with
/// `cargo test -p atoll-cli --test bench_slo -- --ignored`.
#[test]
#[ignore = "root, redis-server and ~2 minutes: a real `atoll bench slo --quick`"]
fn bench_slo_quick_runs_every_configuration() {
    let out = Command::new(BIN)
        .args(["bench", "slo", "--quick", "--loads", "10,50", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["lc_max_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["be_solo_chunks_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(v["alone"].as_object().unwrap().len(), 2, "{v}");
    let rows = v["rows"].as_array().unwrap();
    let ran = rows.len() / 2 + v["unavailable"].as_object().unwrap().len();
    assert_eq!(ran, 4, "linux, static, isolate, slo: {v}");
    for r in rows {
        assert!(r["lc"]["throughput_per_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["be_share"].as_f64().is_some() && r["emu"].as_f64().is_some(),
            "{r}"
        );
    }
    assert!(v["machine"].is_object() && v["settings"]["quick"] == true);
}

/// The three-tier auction scenario, shortened: needs root, cgroups, nginx
/// and mariadb-server (`scripts/bench-deps.sh`), about two minutes. Run
/// with `cargo test -p atoll-cli --test bench_slo -- --ignored`.
#[test]
#[ignore = "root, nginx, mariadb-server and ~2 minutes: `atoll bench slo --scenario tiers --quick`"]
fn bench_slo_tiers_quick_runs_every_configuration() {
    let out = Command::new(BIN)
        .args(["bench", "slo", "--scenario", "tiers", "--quick", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["saturated_per_s"].as_f64().unwrap() > 0.0, "{v}");
    let rows = v["rows"].as_array().unwrap();
    let ran = rows.len() + v["unavailable"].as_object().unwrap().len();
    assert_eq!(ran, 4, "linux, static, isolate, slo: {v}");
    for r in rows {
        assert!(r["throughput_per_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["all"]["count"].as_u64().unwrap() > 0, "{r}");
        assert!(r["heavy"]["count"].as_u64().unwrap() > 0, "{r}");
        if r["config"] != "linux" {
            assert!(r["vs_linux"]["mean"].as_f64().is_some(), "{r}");
        }
    }
}

#[test]
fn thresholds_the_daemon_would_refuse_are_refused_before_running() {
    for (args, says) in [
        // Below the daemon's default cut (0.1): refused, nothing run.
        (&["--be-grow-above", "0.05"][..], "be_grow_above: 0.05"),
        (
            &["--be-grow-above", "0.2", "--be-cut-below", "0.2"],
            "be_grow_above: 0.2",
        ),
        (
            &["--scenario", "tiers", "--be-cut-below", "0.05"],
            "--scenario redis",
        ),
    ] {
        refused_before_running(args, says);
    }
}

/// `atoll bench slo ARGS` exits 1 before running anything, saying `says`.
fn refused_before_running(args: &[&str], says: &str) {
    let out = Command::new(BIN)
        .args(["bench", "slo"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(says), "{args:?}: {err}");
}

/// Each scenario refuses the flags of the others (and the stream's the
/// Redis scenario's warm-up and SLO, and a work per frame it cannot do)
/// before making anything: no root needed.
#[test]
fn each_scenario_refuses_the_flags_of_the_others() {
    for (args, says) in [
        (&["--reps", "2"][..], "--reps is for --scenario stream"),
        (
            &["--scenario", "tiers", "--trigger", "recv-queue"],
            "--trigger is for --scenario stream",
        ),
        (
            &[
                "--scenario",
                "stream",
                "--be-grow-above",
                "0.5",
                "--backlog-bytes",
                "9",
            ],
            "--be-grow-above is for --scenario redis",
        ),
        (
            &["--scenario", "stream", "--warmup", "5"],
            "--warmup and --slo-us are not for --scenario stream",
        ),
        (&["--scenario", "stream", "--slo-us", "900"], "--slo-us"),
        (&["--scenario", "stream", "--work", "2000"], "at most 100"),
    ] {
        refused_before_running(args, says);
    }
}

fn stream_skip_reason() -> Option<&'static str> {
    if !common::is_root() {
        return Some("not root");
    }
    for prog in ["tc", "ip"] {
        if Command::new(prog).arg("-V").output().is_err() {
            return Some("iproute2 (`ip`, `tc`) is not installed");
        }
    }
    None
}

/// Namespaces and interfaces named like the rig's (`atlb<pid>...`).
fn rigs() -> usize {
    let mut n = 0;
    for args in [&["-o", "link"][..], &["netns", "list"]] {
        let out = Command::new("ip").args(args).output().unwrap();
        n += String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("atlb"))
            .count();
    }
    n
}

/// The buffer-trigger scenario, all four configurations, 3 s each, one
/// rep: root, `ip` and `tc` (skipped, saying why, without them), about 30
/// s. The rig is made and removed; every configuration that ran has frames
/// sent and is what it says (`isolate` in mode isolate, `linux` without a
/// trigger figure), its ratios are to `static`, and the saved report
/// prints as the stream table. Run with `cargo test -p atoll-cli --test
/// bench_slo -- --ignored`.
#[test]
#[ignore = "root, ip and tc, ~30 s: a real `atoll bench slo --scenario stream --quick`"]
fn bench_slo_stream_quick_runs_every_configuration() {
    if let Some(why) = stream_skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let before = rigs();
    let out = Command::new(BIN)
        .args([
            "bench",
            "slo",
            "--scenario",
            "stream",
            "--quick",
            "--seconds",
            "3",
        ])
        .args(["--work", "0", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        rigs() <= before,
        "the rig's namespace or veth was left behind"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["settings"]["rig"]["scenario"], "stream", "{v}");
    assert_eq!(v["settings"]["rig"]["work"], 0, "{v}");
    let rows = v["rows"].as_array().unwrap();
    let ran = rows.len() + v["unavailable"].as_array().unwrap().len();
    assert_eq!(ran, 4, "linux, static, isolate, slo: {v}");
    for r in rows {
        let f = &r["figures"];
        assert!(f["samples"][0]["frames_sent"].as_u64().unwrap() > 0, "{r}");
        let linux = r["config"] == "linux";
        assert_eq!(f["triggers"].is_null(), linux, "{r}");
        assert_eq!(r["setup"]["isolate"], r["config"] == "isolate", "{r}");
        if r["config"] == "static" && f["fps_mean"].as_f64().unwrap() > 0.0 {
            assert_eq!(f["fps_ratio"], 1.0, "{r}");
        }
    }
    let file = std::env::temp_dir().join(format!("atoll-slostream-{}.json", std::process::id()));
    std::fs::write(&file, &out.stdout).unwrap();
    let table = Command::new(BIN)
        .args(["bench", "slo", "--scenario", "stream", "--table"])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("--scenario stream") && text.contains("hog chunks/s"),
        "{text}"
    );
}

#[test]
fn an_unknown_scenario_is_refused() {
    let out = Command::new(BIN)
        .args(["bench", "slo", "--scenario", "rubis"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--scenario"));
}
