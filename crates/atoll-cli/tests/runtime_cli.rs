//! `atoll unit`, `atoll overlay add|set|rm` and `atoll config dump` against
//! a daemon on the simulated backend (no root, no cgroups): what they
//! print, their exit status, and a dump that `atoll check-config` accepts.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_atoll");

const CONFIG: &str = "[island.work]\ncpus = \"1\"\n\n[unit.a]\nisland = \"work\"\n";

fn atoll(socket: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--socket")
        .arg(socket)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn failed(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr.clone()).unwrap()
}

#[test]
fn units_and_overlays_at_run_time_and_the_dump_of_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("atoll.sock");
    let config = dir.path().join("atoll.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut child = Command::new(BIN)
        .args(["daemon", "--backend", "sim", "--socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&config)
        .args(["--cgroup-root", "atoll-runtime-cli"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !socket.exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no socket");
        sleep(Duration::from_millis(20));
    }

    let add = [
        "unit",
        "add",
        "job",
        "--island",
        "work",
        "--cpu-cap",
        "0.5",
        "--memory-max",
        "64M",
    ];
    let said = ok(&atoll(&socket, &add));
    assert!(said.contains("unit job (island work)"), "{said}");
    assert!(said.contains("cap 0.5"), "{said}");
    let err = failed(&atoll(&socket, &["unit", "add", "big", "--cpus", "3"]));
    assert!(err.contains("unit.big.cpus"), "{err}");
    let err = failed(&atoll(&socket, &["unit", "set", "a", "--weight", "300"]));
    assert!(err.contains("atoll reload"), "{err}");
    let bad_size = Command::new(BIN)
        .args(["unit", "set", "job", "--memory-high", "lots", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    assert_eq!(
        bad_size.status.code(),
        Some(2),
        "a bad size is a usage error"
    );
    ok(&atoll(
        &socket,
        &["unit", "set", "job", "--memory-high", "32M"],
    ));

    let overlay = [
        "overlay",
        "add",
        "shop",
        "--unit",
        "job",
        "--unit",
        "a",
        "--throughput-floor",
        "10",
    ];
    let said = ok(&atoll(&socket, &overlay));
    assert!(said.contains("shop"), "{said}");
    assert!(said.contains("work/job"), "{said}");
    let err = failed(&atoll(&socket, &["unit", "rm", "job"]));
    assert!(err.contains("overlay shop"), "{err}");

    let dump = ok(&atoll(&socket, &["config", "dump"]));
    assert!(dump.contains("[unit.job]"), "{dump}");
    assert!(dump.contains("memory_high = \"32M\""), "{dump}");
    assert!(dump.contains("[overlay.shop]"), "{dump}");
    let dumped = dir.path().join("dump.toml");
    std::fs::write(&dumped, &dump).unwrap();
    let check = Command::new(BIN)
        .arg("check-config")
        .arg(&dumped)
        .output()
        .unwrap();
    let summary = ok(&check);
    assert!(summary.contains("units: 2"), "{summary}");

    // A latency overlay measured by a probe, `job` beside it as best effort.
    ok(&atoll(&socket, &["overlay", "rm", "shop"]));
    let slo = [
        "overlay",
        "add",
        "shop",
        "--unit",
        "a",
        "--latency-us",
        "5000",
        "--latency-source",
        "probe",
        "--probe",
        "tcp://127.0.0.1:1",
        "--best-effort",
        "job",
        "--be-steps",
        "4",
        "--log-field",
        "-2",
    ];
    let err = failed(&atoll(&socket, &slo));
    assert!(err.contains("overlay.shop.log_field"), "{err}");
    ok(&atoll(&socket, &slo[..slo.len() - 2]));
    // The loop takes the overlay's best effort in at its next epoch.
    let mut shown = String::new();
    for _ in 0..200 {
        shown = ok(&atoll(&socket, &["overlay", "show", "shop"]));
        if shown.contains("beside") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(shown.contains("job as best effort, level 0/4"), "{shown}");
    let dump = ok(&atoll(&socket, &["config", "dump"]));
    assert!(dump.contains("latency_source = \"probe\""), "{dump}");

    let said = ok(&atoll(&socket, &["overlay", "rm", "shop", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&said).unwrap();
    assert_eq!(v["kind"], "overlay_removed", "{said}");
    assert_eq!(v["overlay"], "shop", "{said}");
    let said = ok(&atoll(&socket, &["unit", "rm", "job"]));
    assert!(said.contains("unit job removed"), "{said}");

    ok(&atoll(&socket, &["stop"]));
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(20), "still running");
        sleep(Duration::from_millis(20));
    }
}
