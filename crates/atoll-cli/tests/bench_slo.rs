//! `atoll bench slo` through the built binary: its command line, and
//! (ignored: root, redis-server and about two minutes) a real short run.
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
        let out = Command::new(BIN)
            .args(["bench", "slo"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
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
