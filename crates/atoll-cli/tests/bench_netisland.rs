//! `atoll bench netisland` through the built binary: its command line, and
//! a real short run (skipped, saying why, when not root or without `ip`
//! and `tc`). Only shapes are checked: benchmark numbers are printed,
//! never asserted.

mod common;

use std::process::Command;

use common::{assert_help_lists, assert_refused, BIN};

#[test]
fn bench_netisland_is_listed_with_its_options_and_refuses_bad_ones() {
    assert_help_lists(
        "netisland",
        &[
            "--json",
            "--quick",
            "--configs",
            "--secs",
            "--reps",
            "--rate-mbit",
            "--work",
            "--backlog-bytes",
            "--scenario",
            "--req-rate",
            "--bound-ms",
            "--heavy-bytes",
            "--heavy-work",
            "--table",
        ],
    );
    assert_refused(
        "netisland",
        &[
            &["--configs", "none,heracles"][..],
            &["--secs", "0"],
            &["--reps", "0"],
            &["--rate-mbit", "0"],
            &["--scenario", "rubis"],
            &["--req-rate", "0"],
            &["--bound-ms", "0"],
        ],
    );
}

fn skip_reason() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root");
    }
    for prog in ["tc", "ip"] {
        if Command::new(prog).arg("-V").output().is_err() {
            return Some("iproute2 (`ip`, `tc`) is not installed");
        }
    }
    None
}

/// Held by the real runs: each counts the rigs' interfaces before and
/// after, so two at once would see each other's.
static REAL_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Namespaces and interfaces named like the rig's (`atlb<pid>...`).
fn ours() -> usize {
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

/// Runs `atoll bench netisland ARGS --json` for real and checks that it
/// left no namespace or veth of the rig behind; the report as JSON and as
/// bytes. `None` (said on stdout) where it cannot run here.
fn real_run(args: &[&str]) -> Option<(serde_json::Value, Vec<u8>)> {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return None;
    }
    let _one = REAL_RUN.lock().unwrap_or_else(|e| e.into_inner());
    let before = ours();
    let out = Command::new(BIN)
        .args(["bench", "netisland"])
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        ours() <= before,
        "the rig's namespace or veth was left behind"
    );
    let v = serde_json::from_slice(&out.stdout).unwrap();
    Some((v, out.stdout))
}

/// Two configurations, 3 s each: the rig is made and removed, the report
/// has a row per configuration with frames counted.
#[test]
fn bench_netisland_quick_runs_and_leaves_no_interface() {
    let Some((v, _)) = real_run(&[
        "--quick",
        "--secs",
        "3",
        "--work",
        "0",
        "--configs",
        "none,both",
    ]) else {
        return;
    };
    let rows = v["rows"].as_array().unwrap();
    let ran = rows.len() + v["unavailable"].as_array().unwrap().len();
    assert_eq!(ran, 2, "{v}");
    for r in rows {
        assert!(r["samples"][0]["frames_sent"].as_u64().unwrap() > 0, "{r}");
    }
}

/// The single-tune configurations are the web tier's: the stream scenario
/// refuses them before making anything.
#[test]
fn bench_netisland_stream_refuses_the_single_tune_configurations() {
    let out = Command::new(BIN)
        .args(["bench", "netisland", "--configs", "net,both-bw"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("both-bw") && err.contains("--scenario web"),
        "{err}"
    );
}

/// The web scenario, all six configurations, 3 s each: the rig is made
/// and removed, every configuration that ran has both classes answered,
/// and only the coordinated ones send tunes (each acknowledged or not,
/// never more acknowledged than sent). Ignored by default (about 45 s);
/// run with `-- --ignored`.
#[test]
#[ignore = "a real run of the web tier (root, ip, tc), ~45 s"]
fn bench_netisland_web_quick_runs_and_leaves_no_interface() {
    let Some((v, json)) = real_run(&[
        "--scenario",
        "web",
        "--quick",
        "--secs",
        "3",
        "--configs",
        "none,cpu,net,both,both-bw,both-cpu",
    ]) else {
        return;
    };
    assert_eq!(v["settings"]["scenario"], "web", "{v}");
    assert!(v["rows"].as_array().unwrap().is_empty(), "{v}");
    let rows = v["web_rows"].as_array().unwrap();
    let ran = rows.len() + v["unavailable"].as_array().unwrap().len();
    assert_eq!(ran, 6, "{v}");
    for r in rows {
        assert!(r["light"]["count"].as_u64().unwrap() > 0, "{r}");
        assert!(r["heavy"]["count"].as_u64().unwrap() > 0, "{r}");
        let (sent, acked) = (
            r["tunes_sent"].as_f64().unwrap(),
            r["tunes_acked"].as_f64().unwrap(),
        );
        assert!(acked <= sent, "{r}");
        if !["both", "both-bw", "both-cpu"].contains(&r["config"].as_str().unwrap()) {
            assert_eq!(sent, 0.0, "{r}");
        }
    }
    // The saved report prints as the web table.
    let file = std::env::temp_dir().join(format!("atoll-web-{}.json", std::process::id()));
    std::fs::write(&file, &json).unwrap();
    let table = Command::new(BIN)
        .args(["bench", "netisland", "--table"])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("--scenario web") && text.contains("heavy p99/net"),
        "{text}"
    );
    assert!(
        text.contains("both-bw") && text.contains("both-cpu"),
        "{text}"
    );
}
