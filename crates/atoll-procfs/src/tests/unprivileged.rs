//! What an unprivileged process gets: this test binary runs one of its own
//! tests again as uid 65534 in a child process (this process's privileges
//! stay as they are) and checks what it printed.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::is_root;
use crate::connector::{ConnectorOptions, ProcConnector};
use crate::psi::{PsiTrigger, Stall};

const PROBE_ENV: &str = "ATOLL_UNPRIVILEGED_PROBE";

/// Prints one `PROBE name result` line per facility. Does nothing unless
/// started by [`unprivileged_results`].
#[test]
#[ignore = "run by unprivileged_results as uid 65534"]
fn unprivileged_probe() {
    if std::env::var_os(PROBE_ENV).is_none() {
        return;
    }
    let opts = ConnectorOptions {
        ack_timeout: Duration::from_millis(500),
        ..ConnectorOptions::default()
    };
    match ProcConnector::open(&opts) {
        Ok(c) => println!("PROBE connector ok {:?}", c.stats()),
        Err(e) => println!("PROBE connector {} {e}", e.reason()),
    }
    for (name, window) in [("psi-1s", 1), ("psi-2s", 2)] {
        let t = PsiTrigger::open(
            "/proc/pressure/cpu",
            Stall::Some,
            Duration::from_millis(100),
            Duration::from_secs(window),
        );
        match t {
            Ok(_) => println!("PROBE {name} ok"),
            Err(e) => println!("PROBE {name} err {e}"),
        }
    }
}

#[test]
fn unprivileged_results() {
    use std::os::unix::process::CommandExt;
    if !is_root() {
        eprintln!("skipped: not root (cannot start a child as another user)");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(&exe)
        .args([
            "--ignored",
            "--exact",
            "tests::unprivileged::unprivileged_probe",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PROBE_ENV, "1")
        .uid(65534)
        .gid(65534)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: cannot run {} as uid 65534: {e}", exe.display());
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: HashMap<&str, &str> = text
        .lines()
        // The harness's "test ... " may start the same line.
        .filter_map(|l| l.find("PROBE ").map(|at| &l[at + 6..]))
        .filter_map(|l| l.split_once(' '))
        .collect();
    eprintln!("{lines:#?}");
    if lines.is_empty() {
        eprintln!(
            "skipped: the probe printed nothing (status {}, stderr {})",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    // The connector either works unprivileged or says it is not
    // permitted; never an unexplained failure or silence.
    let connector = lines["connector"];
    assert!(
        connector.starts_with("ok") || connector.starts_with("not-permitted"),
        "{connector}"
    );
    let cpu = Path::new("/proc/pressure/cpu");
    if cpu.exists() {
        // A window that is not a multiple of 2 s is refused without
        // CAP_SYS_RESOURCE, and the error names the file and the value.
        let one = lines["psi-1s"];
        assert!(one.starts_with("err"), "{one}");
        assert!(one.contains("/proc/pressure/cpu"), "{one}");
        assert!(one.contains("\"some 100000 1000000\""), "{one}");
        assert!(one.contains("multiple of 2 s"), "{one}");
        assert_eq!(lines["psi-2s"], "ok");
    }
}
