//! What the CLI's benchmark tests share: the built binary, running one
//! worker (`atoll __worker ...`) for its one-line JSON report, and the
//! root check of the tests that need real cgroups, and the checks of a
//! benchmark's command line.

#![allow(dead_code)]

use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The `atoll` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_atoll");

/// Runs `atoll __worker ARGS...` to its end and returns its report: it must
/// succeed and print exactly one JSON line.
pub fn worker(args: &[&str]) -> serde_json::Value {
    let out = Command::new(BIN)
        .arg("__worker")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "one JSON line expected: {text}");
    serde_json::from_str(&text).unwrap()
}

/// `atoll bench BENCH --help` lists every flag of `opts`.
pub fn assert_help_lists(bench: &str, opts: &[&str]) {
    let out = Command::new(BIN)
        .args(["bench", bench, "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for opt in opts {
        assert!(help.contains(opt), "{opt} missing: {help}");
    }
}

/// `atoll bench BENCH ARGS...` is refused as a usage error (exit 2, nothing
/// run) for each of `bad`, and the error names the flag at fault (the first
/// argument, before any `=`: a negative value must be given as
/// `--flag=-1`, or clap takes `-1` for a flag of its own).
pub fn assert_refused(bench: &str, bad: &[&[&str]]) {
    for args in bad {
        let out = Command::new(BIN)
            .args(["bench", bench])
            .args(*args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let flag = args[0].split('=').next().unwrap();
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

/// Whether the test runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Stops a worker server with SIGTERM (waiting up to 10 s), checks it exited
/// 0 and returns its report.
pub fn stop_server(mut server: Child) -> serde_json::Value {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    while server.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "server did not stop"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = server.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}
