//! What the CLI's benchmark tests share: the built binary, running one
//! worker (`atoll __worker ...`) for its one-line JSON report, and the
//! root check of the tests that need real cgroups.

#![allow(dead_code)]

use std::process::Command;

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

/// Whether the test runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
