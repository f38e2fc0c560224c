//! The benchmark workers through the built `atoll` binary (`atoll __worker
//! ...`), as the benchmarks start them. Only the shape of their reports is
//! checked: benchmark numbers are printed, never asserted.

mod common;

use std::process::{Command, Stdio};

use common::{stop_server, worker, BIN};

#[test]
fn cpujob_reports_its_work_and_time() {
    let r = worker(&["cpujob", "--work", "1"]);
    assert_eq!(r["kind"], "cpujob");
    assert_eq!(r["work"], 1);
    assert!(r["elapsed_ms"].as_f64().is_some(), "{r}");
}

#[test]
fn probe_reports_a_lateness_summary_of_every_sample() {
    let r = worker(&["probe", "--period-us", "1000", "--samples", "20", "--raw"]);
    assert_eq!(r["kind"], "probe");
    assert_eq!(r["samples"], 20);
    let late = &r["lateness_us"];
    assert_eq!(late["count"], 20);
    let raw = r["raw_lateness_us"].as_array().unwrap();
    assert_eq!(raw.len(), 20);
    let max = raw.iter().map(|v| v.as_f64().unwrap()).fold(0.0, f64::max);
    assert_eq!(late["max"].as_f64(), Some(max));
    assert!(late["p50"].as_f64() <= late["p99"].as_f64());
    assert!(r["burst_stretch"].is_null());
}

#[test]
fn the_latency_pair_talks_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("echo.sock");
    let server = Command::new(BIN)
        .args(["__worker", "echo-server", "--socket"])
        .arg(&sock)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let r = worker(&[
        "latency-client",
        "--socket",
        sock.to_str().unwrap(),
        "--count",
        "10",
        "--interval-us",
        "100",
    ]);
    assert_eq!(r["count"], 10);
    assert_eq!(r["rtt_us"]["count"], 10);
    // SIGTERM: the server reports and removes its socket.
    let report = stop_server(server);
    assert_eq!(report["connections"], 1);
    assert!(!sock.exists());
}

#[test]
fn bad_worker_arguments_exit_2_with_the_reason() {
    let out = Command::new(BIN)
        .args(["__worker", "cpujob", "--work", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--work \"lots\""), "{err}");
}

#[test]
fn bench_is_listed_and_the_worker_is_hidden() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("bench"), "{help}");
    assert!(!help.contains("__worker"), "{help}");
    let out = Command::new(BIN)
        .args(["bench", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("revocation") && help.contains("isolation"),
        "{help}"
    );
}

#[test]
fn bench_coordination_quick_reports_the_five_messages() {
    let out = Command::new(BIN)
        .args(["bench", "coordination", "--quick", "--json", "--no-api"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["messages"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "null",
            "tune",
            "trigger",
            "borrow_2_islands",
            "borrow_6_islands"
        ]
    );
    for m in v["messages"]["messages"].as_array().unwrap() {
        assert_eq!(m["ns"]["count"], 2000, "{m}");
    }
}

#[test]
fn bench_coordination_times_api_calls_through_the_daemon() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (starts the daemon on real cgroups)");
        return;
    }
    let out = Command::new(BIN)
        .args(["bench", "coordination", "--quick", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let api = &v["api_to_actuation_us"];
    assert_eq!(api["us"]["count"], 50, "{api}");
    assert!(api["us"]["p50"].as_f64().unwrap() > 0.0, "{api}");
    assert!(
        api["knob"].as_str().unwrap().contains("/bench/front/"),
        "{api}"
    );
}
