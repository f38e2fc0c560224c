//! Every signal that would end the daemon makes it tear down and exit
//! cleanly instead: the `atoll` binary on the simulated backend (no root,
//! no cgroups), one daemon per signal.

use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_atoll");

fn wait_for(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ready() {
        assert!(t.elapsed() < timeout, "{what} within {timeout:?}");
        sleep(Duration::from_millis(20));
    }
}

fn signal_ends_the_daemon_with_a_teardown(sig: libc::c_int) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("atoll.sock");
    let mut child = Command::new(BIN)
        .args(["daemon", "--backend", "sim", "--socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["--cgroup-root", "atoll-signals"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the socket", Duration::from_secs(20), || socket.exists());
    // A few epochs, with every thread of the daemon running.
    sleep(Duration::from_millis(300));
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on the child we started, with a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "signal {sig}: still running"
        );
        sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        status.success(),
        "signal {sig}: exit {status:?}, not a clean teardown\n{err}"
    );
    assert!(err.contains("shutting down"), "signal {sig}:\n{err}");
    assert!(!Path::new(&socket).exists(), "the socket is removed");
    assert!(
        !dir.path().join("state/state.json").exists(),
        "a clean teardown removes the state file"
    );
}

#[test]
fn sigterm_sigquit_sigusr1_and_sighup_tear_down() {
    for sig in [libc::SIGTERM, libc::SIGQUIT, libc::SIGUSR1, libc::SIGHUP] {
        signal_ends_the_daemon_with_a_teardown(sig);
    }
}
