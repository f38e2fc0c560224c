//! `atoll bench comm` through the built binary: its workers (no root, no
//! nginx), its command line, and (ignored: root, nginx and about two
//! minutes) a real `--quick` run. Only shapes are checked: benchmark
//! numbers are printed, never asserted.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};

use common::{assert_help_lists, assert_refused, stop_server, worker, BIN};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn http_load_sends_at_its_rate_and_reports_p95() {
    // A keep-alive server that answers every request with a chunked body.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || {
                let mut r = BufReader::new(s);
                loop {
                    let mut head = String::new();
                    while !head.ends_with("\r\n\r\n") {
                        if r.read_line(&mut head).unwrap_or(0) == 0 {
                            return;
                        }
                    }
                    let reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
                    if r.get_mut().write_all(reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let r = worker(&[
        "http-load",
        "--addr",
        &addr,
        "--path",
        "/x",
        "--rate",
        "100",
        "--seconds",
        "0.295",
        "--warmup",
        "0.095",
        "--connections",
        "4",
    ]);
    assert_eq!(r["kind"], "http-load");
    assert_eq!(r["sent"], 30);
    assert_eq!(r["recorded"], 20);
    assert_eq!(r["completed"], 20);
    assert_eq!(r["errors"], 0);
    let rt = &r["rt_ms"];
    assert_eq!(rt["count"], 20);
    assert!(rt["p50"].as_f64() <= rt["p95"].as_f64(), "{rt}");
    assert!(rt["p95"].as_f64() <= rt["max"].as_f64(), "{rt}");
}

#[test]
fn the_stream_pair_plays_and_counts_underruns() {
    let port = free_port();
    let server = Command::new(BIN)
        .args(["__worker", "stream-server", "--port", &port.to_string()])
        .args(["--bytes-per-s", "200000", "--interval-ms", "10"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let r = worker(&[
        "stream-client",
        "--addr",
        &format!("127.0.0.1:{port}"),
        "--clients",
        "3",
        "--bytes-per-s",
        "200000",
        "--buffer-ms",
        "100",
        "--seconds",
        "0.6",
    ]);
    assert_eq!(r["kind"], "stream-client");
    assert_eq!(r["clients"], 3);
    assert_eq!(r["failed"], 0, "{r}");
    assert_eq!(r["underruns"].as_array().unwrap().len(), 3);
    assert_eq!(r["first_underrun_s"].as_array().unwrap().len(), 3);
    let report = stop_server(server);
    assert_eq!(report["kind"], "stream-server");
    assert_eq!(report["connections"], 3);
    assert!(report["bytes"].as_u64().unwrap() > 0, "{report}");
}

#[test]
fn bench_comm_is_listed_with_its_options_and_refuses_bad_ones() {
    assert_help_lists(
        "comm",
        &[
            "--json",
            "--quick",
            "--reps",
            "--seconds",
            "--rate",
            "--skip-stream",
            "--mechanisms",
            "--buffer-ms",
        ],
    );
    assert_refused(
        "comm",
        &[
            &["--mechanisms", "slice,fast"][..],
            &["--seconds", "0"],
            &["--rate", "nan"],
            &["--reps", "0"],
        ],
    );
}

/// The whole benchmark, shortened: needs root, cgroups and nginx
/// (`scripts/bench-deps.sh`), and takes about two minutes. Run with
/// `cargo test -p atoll-cli --test bench_comm -- --ignored`.
#[test]
#[ignore = "root, nginx and ~2 minutes: a real `atoll bench comm --quick`"]
fn bench_comm_quick_runs_every_part() {
    let out = Command::new(BIN)
        .args(["bench", "comm", "--quick", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let two_tier = v["two_tier"].as_object().unwrap();
    let ran = two_tier.len() + v["unavailable"].as_object().unwrap().len();
    assert_eq!(ran, 7, "off, all/x3, each feature alone: {v}");
    let off = &two_tier["off"];
    assert_eq!(off["reps"].as_array().unwrap().len(), 1);
    assert!(off["mean"]["avg_ms"].as_f64().unwrap() > 0.0, "{off}");
    assert_eq!(off["reps"][0]["hog_cpu"].as_array().unwrap().len(), 5);
    let stream = &v["stream"];
    assert_eq!(
        stream["searches"]["off"].as_array().unwrap().len(),
        1,
        "{stream}"
    );
    assert!(v["machine"].is_object() && v["settings"]["quick"] == true);
}
