//! One `atoll daemon` of the isolation benchmark, and the guard that stops
//! it.
//!
//! The daemon is the real binary (`exe daemon ...`) with the generated
//! config, a unique `--cgroup-root`, and its socket, state and log in the
//! run's temp dir. [`Daemon::stop`] asks it to tear down (`atoll stop`, or
//! SIGTERM when the benchmark is not root: `stop` is root's only);
//! dropping a daemon that was not stopped does the same, then kills it if it
//! does not exit, then sweeps its root by name.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cgroups::{sweep, unique_root};
use crate::error::BenchError;
use crate::interrupt;
use crate::procs::Proc;

/// How long start-up and teardown may take.
const WAIT: Duration = Duration::from_secs(30);

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    exe: PathBuf,
    mode: String,
    root: String,
    socket: PathBuf,
    log: PathBuf,
    proc: Option<Proc>,
}

impl Daemon {
    /// Writes `config` into `dir` and starts a daemon on it; waits until it
    /// answers `status`. A daemon that exits during start-up is an error
    /// carrying its log.
    pub fn start(exe: &Path, mode: &str, config: &str, dir: &Path) -> Result<Self, BenchError> {
        Self::start_with(exe, mode, config, dir, &[])
    }

    /// [`start`](Self::start) with more arguments for `atoll daemon` (such
    /// as `--backend sim`).
    pub fn start_with(
        exe: &Path,
        mode: &str,
        config: &str,
        dir: &Path,
        extra: &[String],
    ) -> Result<Self, BenchError> {
        let path = dir.join(format!("{mode}.toml"));
        std::fs::write(&path, config).map_err(|source| BenchError::Io {
            op: "write",
            path: path.clone(),
            source,
        })?;
        let root = unique_root(mode);
        let socket = dir.join(format!("{mode}.sock"));
        let log = dir.join(format!("{mode}.log"));
        let _ = std::fs::remove_file(&log);
        let mut cmd = Command::new(exe);
        cmd.arg("daemon")
            .arg("--config")
            .arg(&path)
            .args(["--cgroup-root", &root])
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.join(format!("state-{mode}")))
            .args(extra);
        let proc = Proc::spawn_logged(format!("atoll daemon ({mode})"), cmd, &log)?;
        let mut d = Self {
            exe: exe.to_path_buf(),
            mode: mode.to_string(),
            root,
            socket,
            log,
            proc: Some(proc),
        };
        let t0 = Instant::now();
        loop {
            interrupt::check()?;
            if d.proc.as_mut().is_some_and(Proc::exited) {
                d.proc = None;
                return Err(d.error("exited during start-up"));
            }
            if d.socket.exists() && d.client(&["status"]).is_ok_and(|o| o.status.success()) {
                return Ok(d);
            }
            if t0.elapsed() > WAIT {
                return Err(d.error("did not answer within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its API socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Its cgroup root's name.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// Its pid (0 once it was stopped).
    pub fn pid(&self) -> u32 {
        self.proc.as_ref().map_or(0, Proc::pid)
    }

    /// `exe status --json` against this daemon (the daemon binary's own
    /// client, so any version of it answers in its own terms), parsed.
    pub fn status_json(&self) -> Result<serde_json::Value, BenchError> {
        let out = self
            .client(&["status", "--json"])
            .map_err(|e| self.error(&format!("`atoll status --json` did not run: {e}")))?;
        if !out.status.success() {
            return Err(self.error(&format!(
                "`atoll status --json` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        serde_json::from_slice(&out.stdout)
            .map_err(|e| self.error(&format!("`atoll status --json` is not JSON: {e}")))
    }

    fn client(&self, args: &[&str]) -> std::io::Result<std::process::Output> {
        Command::new(&self.exe)
            .arg(args[0])
            .arg("--socket")
            .arg(&self.socket)
            .args(&args[1..])
            .output()
    }

    /// `exe run --unit UNIT -- exe __worker KIND ARGS...` against this
    /// daemon.
    pub fn run_worker(&self, unit: &str, kind: &str, args: &[String]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("run")
            .arg("--socket")
            .arg(&self.socket)
            .args(["--unit", unit, "--"])
            .arg(&self.exe)
            .args(["__worker", kind])
            .args(args);
        cmd
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn error(&self, reason: &str) -> BenchError {
        BenchError::Daemon {
            mode: self.mode.clone(),
            reason: reason.to_string(),
            log: self.log_tail(),
        }
    }

    /// Tears down (`atoll stop`) and waits for the daemon to exit.
    pub fn stop(mut self) -> Result<(), BenchError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), BenchError> {
        let Some(mut proc) = self.proc.take() else {
            return Ok(());
        };
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            // `atoll stop` is root's only; SIGTERM tears down the same way.
            // Without root only a daemon on the simulated backend can run,
            // which leaves nothing in the kernel; it may also die of the
            // signal (its sim clock thread is started before the daemon
            // blocks SIGTERM), which is then no failure.
            proc.signal(libc::SIGTERM);
            return match proc.wait_cleanup(WAIT) {
                Ok(o) if o.status.success() || o.status.signal() == Some(libc::SIGTERM) => Ok(()),
                Ok(o) => Err(self.error(&format!("exited with {}", o.status))),
                Err(e) => Err(self.error(&format!("did not exit after SIGTERM: {e}"))),
            };
        }
        let asked = self.client(&["stop"]);
        let out = proc.wait_cleanup(WAIT);
        match (asked, out) {
            (Ok(a), Ok(o)) if a.status.success() && o.status.success() => Ok(()),
            (Ok(a), _) if !a.status.success() => Err(self.error(&format!(
                "`atoll stop` failed: {}",
                String::from_utf8_lossy(&a.stderr).trim()
            ))),
            (Err(e), _) => Err(self.error(&format!("`atoll stop` did not run: {e}"))),
            (_, Err(e)) => Err(self.error(&format!("did not exit after `atoll stop`: {e}"))),
            (_, Ok(o)) => Err(self.error(&format!("exited with {}", o.status))),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("atoll bench: {e}");
        }
        for left in sweep(&self.root) {
            eprintln!("atoll bench: could not remove {}", left.display());
        }
    }
}
