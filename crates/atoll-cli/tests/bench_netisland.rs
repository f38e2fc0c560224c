//! `atoll bench netisland` through the built binary: its command line, and
//! a real short run (skipped, saying why, when not root or without `ip`
//! and `tc`). Only shapes are checked: benchmark numbers are printed,
//! never asserted.

mod common;

use std::process::Command;

use common::BIN;

#[test]
fn bench_netisland_is_listed_with_its_options_and_refuses_bad_ones() {
    let out = Command::new(BIN)
        .args(["bench", "netisland", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for opt in [
        "--json",
        "--quick",
        "--configs",
        "--secs",
        "--reps",
        "--rate-mbit",
        "--work",
        "--backlog-bytes",
        "--table",
    ] {
        assert!(help.contains(opt), "{opt} missing: {help}");
    }
    for bad in [
        &["--configs", "none,heracles"][..],
        &["--secs", "0"],
        &["--reps", "0"],
        &["--rate-mbit", "0"],
    ] {
        let out = Command::new(BIN)
            .args(["bench", "netisland"])
            .args(bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(bad[0]), "{bad:?}: {err}");
    }
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

/// Two configurations, 3 s each: the rig is made and removed, the report
/// has a row per configuration with frames counted.
#[test]
fn bench_netisland_quick_runs_and_leaves_no_interface() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let before = ours();
    let out = Command::new(BIN)
        .args([
            "bench",
            "netisland",
            "--quick",
            "--secs",
            "3",
            "--work",
            "0",
            "--configs",
            "none,both",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let ran = rows.len() + v["unavailable"].as_array().unwrap().len();
    assert_eq!(ran, 2, "{v}");
    for r in rows {
        assert!(r["samples"][0]["frames_sent"].as_u64().unwrap() > 0, "{r}");
    }
    assert!(
        ours() <= before,
        "the rig's namespace or veth was left behind"
    );
}
