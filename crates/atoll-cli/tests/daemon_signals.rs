//! Every signal that would end the daemon makes it tear down and exit
//! cleanly instead, and SIGHUP reloads the configuration: the `atoll`
//! binary on the simulated backend (no root, no cgroups), one daemon per
//! signal.

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
fn sigterm_sigquit_and_sigusr1_tear_down() {
    for sig in [libc::SIGTERM, libc::SIGQUIT, libc::SIGUSR1] {
        signal_ends_the_daemon_with_a_teardown(sig);
    }
}

fn units(socket: &Path) -> Vec<String> {
    let out = Command::new(BIN)
        .args(["status", "--json", "--socket"])
        .arg(socket)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap().to_string())
        .collect()
}

const ONE_UNIT: &str = "[island.work]\ncpus = \"1\"\n\n[unit.a]\nisland = \"work\"\n";

#[test]
fn sighup_reloads_the_configuration_and_a_bad_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("atoll.sock");
    let config = dir.path().join("atoll.toml");
    std::fs::write(&config, ONE_UNIT).unwrap();
    let log = dir.path().join("daemon.log");
    let mut child = Command::new(BIN)
        .args(["daemon", "--backend", "sim", "--socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&config)
        .args(["--cgroup-root", "atoll-sighup"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_for("the socket", Duration::from_secs(20), || socket.exists());
    assert_eq!(units(&socket), ["a"]);
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let hup = || {
        // SAFETY: kill(2) on the child we started, with a valid signal number.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    };

    std::fs::write(
        &config,
        format!("{ONE_UNIT}\n[unit.b]\nisland = \"work\"\n"),
    )
    .unwrap();
    hup();
    wait_for("unit b after SIGHUP", Duration::from_secs(20), || {
        units(&socket).contains(&"b".to_string())
    });

    std::fs::write(&config, "[unit.c]\nisland = 7\n").unwrap();
    hup();
    wait_for("the refusal in the log", Duration::from_secs(20), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("atoll.toml:2:"))
    });
    let mut now = units(&socket);
    now.sort();
    assert_eq!(now, ["a", "b"], "a bad configuration changes nothing");
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP does not stop the daemon"
    );

    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    wait_for("the daemon to exit", Duration::from_secs(20), || {
        child.try_wait().unwrap().is_some()
    });
}
