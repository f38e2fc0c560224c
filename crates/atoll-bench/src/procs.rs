//! Processes the benchmarks start, and guards that end them.
//!
//! Every process is started in its own process group, so that (a) Ctrl-C on
//! the terminal reaches only the benchmark, which then cleans up in order,
//! and (b) a whole tree (`atoll run` and the worker it started) can be
//! signalled at once. A [`Proc`] that is dropped before it was reaped gets
//! SIGKILL sent to its group and is waited for. A group is never signalled
//! after its leader was reaped (its id could belong to someone else by then).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::interrupt;

/// A started process (the leader of its own process group).
#[derive(Debug)]
pub struct Proc {
    what: String,
    program: PathBuf,
    child: Option<Child>,
}

/// What a process printed, and how it ended.
#[derive(Debug)]
pub struct Output {
    /// Its exit status.
    pub status: ExitStatus,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

impl Output {
    /// The JSON report of a worker: the last non-empty stdout line, which
    /// must parse, from a process that exited 0.
    pub fn report(&self, what: &str) -> Result<serde_json::Value, BenchError> {
        let fail = |reason: String| BenchError::Worker {
            what: what.to_string(),
            reason,
            output: format!("{}{}", self.stdout, self.stderr).trim().to_string(),
        };
        if !self.status.success() {
            return Err(fail(format!("exited with {}", self.status)));
        }
        let line = self
            .stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .ok_or_else(|| fail("printed no report".into()))?;
        serde_json::from_str(line).map_err(|e| fail(format!("report is not JSON: {e}")))
    }
}

impl Proc {
    /// Starts `cmd` in a new process group with stdin closed and stdout and
    /// stderr captured. `what` names it in errors.
    pub fn spawn(what: impl Into<String>, cmd: Command) -> Result<Self, BenchError> {
        Self::start(what.into(), cmd, Stdio::piped(), Stdio::piped())
    }

    /// Starts `cmd` in a new process group with stdin closed and stdout and
    /// stderr appended to `log` (for chatty, long-lived processes).
    pub fn spawn_logged(
        what: impl Into<String>,
        cmd: Command,
        log: &Path,
    ) -> Result<Self, BenchError> {
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|source| BenchError::Io {
                    op: "create",
                    path: log.to_path_buf(),
                    source,
                })
        };
        Self::start(what.into(), cmd, open()?.into(), open()?.into())
    }

    fn start(what: String, mut cmd: Command, out: Stdio, err: Stdio) -> Result<Self, BenchError> {
        let program = PathBuf::from(cmd.get_program());
        cmd.process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = cmd.spawn().map_err(|source| BenchError::Spawn {
            what: what.clone(),
            program: program.clone(),
            source,
        })?;
        Ok(Self {
            what,
            program,
            child: Some(child),
        })
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Sends `sig` to its whole process group, unless it was reaped.
    pub fn signal(&mut self, sig: libc::c_int) {
        if let Some(c) = &mut self.child {
            if matches!(c.try_wait(), Ok(None)) {
                // SAFETY: kill(2) on the process group we created; the leader
                // is not reaped, so the group id is still ours.
                unsafe {
                    libc::kill(-(c.id() as libc::pid_t), sig);
                }
            }
        }
    }

    /// Whether it exited (it is reaped then).
    pub fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| !matches!(c.try_wait(), Ok(None)))
    }

    /// Waits up to `timeout` for it to exit; collects its output. On timeout
    /// it is killed and an error returned; on Ctrl-C it is killed (on drop)
    /// and [`BenchError::Interrupted`] returned.
    pub fn wait(self, timeout: Duration) -> Result<Output, BenchError> {
        self.wait_inner(timeout, true)
    }

    /// [`wait`](Self::wait) that Ctrl-C does not cut short: for processes
    /// that are cleaning up.
    pub fn wait_cleanup(self, timeout: Duration) -> Result<Output, BenchError> {
        self.wait_inner(timeout, false)
    }

    fn wait_inner(mut self, timeout: Duration, interruptible: bool) -> Result<Output, BenchError> {
        let t0 = Instant::now();
        loop {
            if interruptible {
                interrupt::check()?;
            }
            if self.exited() {
                break;
            }
            if t0.elapsed() >= timeout {
                self.signal(libc::SIGKILL);
                return Err(BenchError::Worker {
                    what: self.what.clone(),
                    reason: format!("did not finish within {timeout:?}; killed"),
                    output: String::new(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut c = self.child.take().expect("exited() reaped the child");
        let status = c.wait().map_err(|source| BenchError::Spawn {
            what: self.what.clone(),
            program: self.program.clone(),
            source,
        })?;
        let mut stdout = String::new();
        let mut stderr = String::new();
        if let Some(mut s) = c.stdout.take() {
            let _ = s.read_to_string(&mut stdout);
        }
        if let Some(mut s) = c.stderr.take() {
            let _ = s.read_to_string(&mut stderr);
        }
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }

    /// Asks it to stop (SIGTERM to its group) and waits for its output.
    pub fn finish(mut self, timeout: Duration) -> Result<Output, BenchError> {
        self.signal(libc::SIGTERM);
        self.wait(timeout)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}

/// `exe __worker KIND ARGS...` as a command.
pub fn worker_command(exe: &Path, kind: &str, args: &[String]) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg("__worker").arg(kind).args(args);
    cmd
}

/// nginx's arguments to run from `prefix` (its temp paths) with the config
/// file `conf` and its error log at `error_log`, none of the machine's own
/// (the benchmarks' nginx runs in the foreground with `daemon off`).
pub fn nginx_args(prefix: &Path, conf: &Path, error_log: &Path) -> Vec<String> {
    vec![
        "-p".into(),
        prefix.display().to_string(),
        "-c".into(),
        conf.display().to_string(),
        "-e".into(),
        error_log.display().to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_output_and_parses_the_last_line() {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo noise; echo '{\"kind\":\"x\",\"n\":3}'; echo err >&2",
        ]);
        let out = Proc::spawn("sh", cmd)
            .unwrap()
            .wait(Duration::from_secs(10))
            .unwrap();
        assert_eq!(out.report("sh").unwrap()["n"], 3);
        assert_eq!(out.stderr.trim(), "err");
    }

    #[test]
    fn a_failed_or_silent_process_is_an_error_with_its_output() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo broken >&2; exit 3"]);
        let out = Proc::spawn("sh", cmd)
            .unwrap()
            .wait(Duration::from_secs(10))
            .unwrap();
        let e = out.report("thing").unwrap_err().to_string();
        assert!(e.contains("thing") && e.contains("broken"), "{e}");
    }

    #[test]
    fn finish_and_drop_end_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        for finish in [true, false] {
            let pidfile = dir.path().join(format!("pid-{finish}"));
            let mut cmd = Command::new("sh");
            cmd.arg("-c")
                .arg(format!("sleep 30 & echo $! > {}; wait", pidfile.display()));
            let p = Proc::spawn("sleeper", cmd).unwrap();
            let t0 = Instant::now();
            while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().is_empty() {
                assert!(t0.elapsed() < Duration::from_secs(10));
                std::thread::sleep(Duration::from_millis(5));
            }
            let grandchild = std::fs::read_to_string(&pidfile).unwrap();
            if finish {
                let out = p.finish(Duration::from_secs(10)).unwrap();
                assert!(!out.status.success());
            } else {
                drop(p);
            }
            // The background sleep was in the group: it is gone (or a zombie
            // waiting for init), not sleeping.
            let stat = format!("/proc/{}/stat", grandchild.trim());
            let t0 = Instant::now();
            while let Ok(s) = std::fs::read_to_string(&stat) {
                if !s.contains("(sleep) S") || t0.elapsed() > Duration::from_secs(10) {
                    assert!(!s.contains("(sleep) S"), "{s}");
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}
