//! Habits every command shares: `ATOLL_SOCKET` instead of `--socket`,
//! `--json` wherever something is printed, `status --watch`. Against the
//! `atoll` binary on the simulated backend (no root, no cgroups), and, for
//! what the simulated machine cannot do (adopt a real process) or what is
//! for root only (reload, stop), against a fake daemon with one canned
//! answer.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use atoll_proto::{Reply, Request, ResponseEnvelope};

const BIN: &str = env!("CARGO_BIN_EXE_atoll");

const CONFIG: &str = "[island.work]\ncpus = \"1\"\n\n[unit.habits]\nisland = \"work\"\n";

/// A daemon on the simulated backend, stopped with SIGTERM when dropped.
struct Daemon {
    dir: tempfile::TempDir,
    child: Child,
}

impl Daemon {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("atoll.toml");
        std::fs::write(&config, CONFIG).unwrap();
        let socket = dir.path().join("atoll.sock");
        let child = Command::new(BIN)
            .args([
                "daemon",
                "--backend",
                "sim",
                "--cgroup-root",
                "atoll-habits",
            ])
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--config")
            .arg(&config)
            .env_remove("ATOLL_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !socket.exists() {
            assert!(t.elapsed() < Duration::from_secs(20), "no socket");
            thread::sleep(Duration::from_millis(20));
        }
        Self { dir, child }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("atoll.sock")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the child we started.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// `atoll ARGS` with `ATOLL_SOCKET` set to `env` (or unset).
fn atoll(args: &[&str], env: Option<&Path>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    match env {
        Some(s) => cmd.env("ATOLL_SOCKET", s),
        None => cmd.env_remove("ATOLL_SOCKET"),
    };
    cmd.output().unwrap()
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: not JSON: {}", String::from_utf8_lossy(&o.stdout)))
}

fn unit_names(status: &serde_json::Value) -> Vec<&str> {
    status["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect()
}

#[test]
fn atoll_socket_stands_for_socket_and_the_flag_wins() {
    let d = Daemon::start();
    let socket = d.socket();
    let s = socket.to_str().unwrap();
    let missing = d.dir.path().join("none.sock");

    let status = json(&atoll(&["status", "--json"], Some(&socket)));
    assert_eq!(status["backend"], "sim", "{status}");
    assert_eq!(unit_names(&status), ["habits"]);
    // The flag wins over the environment, both ways.
    let status = json(&atoll(&["status", "--json", "--socket", s], Some(&missing)));
    assert_eq!(unit_names(&status), ["habits"]);
    let o = atoll(
        &["status", "--socket", missing.to_str().unwrap()],
        Some(&socket),
    );
    assert!(!o.status.success(), "the flag's missing socket is used");
    // Every command that talks to the daemon reads it, e.g. why and apps.
    let why = json(&atoll(&["why", "habits", "--json"], Some(&socket)));
    assert!(why.as_array().is_some_and(|a| !a.is_empty()), "{why}");
    let apps = json(&atoll(&["apps", "--json"], Some(&socket)));
    assert_eq!(apps, serde_json::json!([]));
    let overlays = json(&atoll(&["overlay", "ls", "--json"], Some(&socket)));
    assert_eq!(overlays, serde_json::json!([]));
    // And the daemon itself and `top`: their help names the variable.
    for cmd in ["daemon", "top"] {
        let o = atoll(&[cmd, "--help"], None);
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(help.contains("[env: ATOLL_SOCKET"), "{cmd}: {help}");
    }
}

#[test]
fn status_watch_json_prints_one_document_per_line_until_stopped() {
    let d = Daemon::start();
    let mut cmd = Command::new(BIN);
    cmd.args(["status", "--json", "--watch", "0.05"])
        .env("ATOLL_SOCKET", d.socket())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // A shell runs background jobs with SIGINT ignored, and the child would
    // inherit that: give it the disposition a terminal's Ctrl-C meets.
    // SAFETY: signal(2) is async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut epochs = Vec::new();
    for _ in 0..3 {
        let line = lines.next().expect("another report").unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(unit_names(&v), ["habits"]);
        epochs.push(v["uptime_ms"].as_u64().unwrap());
    }
    assert!(child.try_wait().unwrap().is_none(), "--watch keeps running");
    // SAFETY: kill(2) on the child we started: what Ctrl-C does.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    child.wait().unwrap();
    assert!(epochs.windows(2).all(|w| w[0] <= w[1]), "{epochs:?}");

    // Without --json, reports follow one another (not a terminal: no
    // clearing), and a closed pipe ends it quietly.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("'{BIN}' status --watch 0.05 | head -n 1"))
        .env("ATOLL_SOCKET", d.socket())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "a closed pipe is no error"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("atoll 0.1.0 on sim"), "{text}");

    let o = atoll(&["status", "--watch", "0"], Some(&d.socket()));
    assert_eq!(o.status.code(), Some(2), "an interval of 0 is refused");
}

/// A fake daemon that answers one request with `reply`, removes its socket
/// (as a stopping daemon does) and returns the request.
fn answer_once(reply: Reply) -> (tempfile::TempDir, PathBuf, thread::JoinHandle<Request>) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("atoll.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let path = socket.clone();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut out = stream.try_clone().unwrap();
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).unwrap();
        let req = atoll_proto::decode_request(line.trim_end()).unwrap();
        std::fs::remove_file(&path).unwrap();
        let reply = ResponseEnvelope::ok(req.id, reply);
        out.write_all(atoll_proto::encode(&reply).as_bytes())
            .unwrap();
        req.request
    });
    (dir, socket, handle)
}

#[test]
fn adopt_reload_and_stop_print_json() {
    let adopted = Reply::Adopted {
        unit: "habits".into(),
        island: "work".into(),
        created: true,
    };
    let (_dir, socket, seen) = answer_once(adopted.clone());
    let v = json(&atoll(
        &["adopt", "--unit", "habits", "--pid", "4242", "--json"],
        Some(&socket),
    ));
    assert_eq!(
        v,
        serde_json::json!({"pid": 4242, "unit": "habits", "island": "work", "created": true})
    );
    assert!(matches!(
        seen.join().unwrap(),
        Request::Adopt { pid: 4242, .. }
    ));

    let (_dir, socket, _) = answer_once(Reply::Reloaded {
        changes: vec!["unit b: added".into()],
    });
    let v = json(&atoll(&["reload", "--json"], Some(&socket)));
    assert_eq!(v, serde_json::json!({"changes": ["unit b: added"]}));

    let (_dir, socket, _) = answer_once(Reply::Stopped {
        left: vec!["cgroup x/a".into()],
    });
    let o = atoll(&["stop", "--json"], Some(&socket));
    assert_eq!(o.status.code(), Some(1), "teardown left something");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"stopped": true, "left": ["cgroup x/a"]})
    );

    // run: the command's output stays the command's; where it runs is a
    // JSON line on standard error.
    let (_dir, socket, _) = answer_once(adopted);
    let o = atoll(
        &["run", "--unit", "habits", "--json", "--", "echo", "hello"],
        Some(&socket),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello\n");
    let err: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(err["unit"], "habits");
    assert!(err["pid"].as_u64().is_some_and(|p| p > 0), "{err}");
}
