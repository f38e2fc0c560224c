//! [`ProcFs`]: the process table read from a `/proc` tree.
//!
//! `info` reads `stat`, `status`, `cgroup` and the `exe` link, in that order.
//! A process can exit between any two reads; `ENOENT` or `ESRCH` from any of
//! them means it is gone. The `exe` link is the exception: it is unreadable
//! for kernel threads and, without privileges, for other users' processes, so
//! a failure there gives `exe: None` unless the process directory itself has
//! disappeared.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use atoll_core::process::{CgroupMembership, ProcessError, ProcessInfo, ProcessTable};

use crate::stat::{parse_stat, Stat};

/// The process table under a `/proc` root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcFs {
    root: PathBuf,
}

impl ProcFs {
    /// A table reading the `/proc` tree at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The real `/proc`.
    pub fn system() -> Self {
        Self::new("/proc")
    }

    /// The root this table reads.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The parsed `stat` of `pid`.
    pub fn stat(&self, pid: u32) -> Result<Stat, ProcessError> {
        let path = self.file(pid, "stat");
        let text = read(pid, &path)?;
        parse_stat(&path, &text)
    }

    /// Only the start time of `pid` (clock ticks after boot): the cheap way to
    /// tell whether a pid still names the process it named before.
    pub fn read_start_ticks(&self, pid: u32) -> Result<u64, ProcessError> {
        Ok(self.stat(pid)?.start_ticks)
    }

    /// The real uid from `status`.
    pub fn uid(&self, pid: u32) -> Result<u32, ProcessError> {
        let path = self.file(pid, "status");
        let text = read(pid, &path)?;
        parse_uid(&path, &text)
    }

    /// The cgroups of `pid`.
    pub fn cgroups(&self, pid: u32) -> Result<CgroupMembership, ProcessError> {
        let path = self.file(pid, "cgroup");
        let text = read(pid, &path)?;
        CgroupMembership::parse(&text).ok_or_else(|| ProcessError::Parse {
            path,
            value: text.trim_end().to_string(),
            reason: "expected ID:CONTROLLERS:PATH lines".into(),
        })
    }

    /// The target of the `exe` link, `None` if it cannot be read.
    pub fn exe(&self, pid: u32) -> Result<Option<PathBuf>, ProcessError> {
        match fs::read_link(self.file(pid, "exe")) {
            Ok(target) => Ok(Some(target)),
            Err(e) if is_gone(&e) && !self.pid_dir(pid).exists() => Err(ProcessError::Gone(pid)),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Err(ProcessError::Gone(pid)),
            Err(_) => Ok(None),
        }
    }

    fn pid_dir(&self, pid: u32) -> PathBuf {
        self.root.join(pid.to_string())
    }

    fn file(&self, pid: u32, name: &str) -> PathBuf {
        self.pid_dir(pid).join(name)
    }
}

impl ProcessTable for ProcFs {
    fn pids(&self) -> Result<Vec<u32>, ProcessError> {
        numeric_entries(&self.root).map_err(|source| ProcessError::Io {
            path: self.root.clone(),
            source,
        })
    }

    fn info(&self, pid: u32) -> Result<ProcessInfo, ProcessError> {
        let stat = self.stat(pid)?;
        let uid = self.uid(pid)?;
        let cgroups = self.cgroups(pid)?;
        let exe = self.exe(pid)?;
        Ok(ProcessInfo {
            pid,
            ppid: stat.ppid,
            uid,
            kernel_thread: stat.is_kernel_thread(),
            comm: stat.comm,
            exe,
            start_ticks: stat.start_ticks,
            cgroups,
        })
    }

    fn threads(&self, pid: u32) -> Result<Vec<u32>, ProcessError> {
        let path = self.file(pid, "task");
        numeric_entries(&path).map_err(|source| io_error(pid, path, source))
    }

    /// From `comm`, which holds the name alone and a newline: the same
    /// `task->comm` as the second field of `stat`, unescaped there too,
    /// but a far cheaper read (the kernel formats every field of `stat` on
    /// each read, and adoption reads the name of every process that
    /// exec'd).
    fn comm(&self, pid: u32) -> Result<String, ProcessError> {
        let path = self.file(pid, "comm");
        let mut text = read(pid, &path)?;
        if text.ends_with('\n') {
            text.pop();
        }
        Ok(text)
    }

    fn run_delay_ns(&self, tid: u32) -> Result<Option<u64>, ProcessError> {
        // `/proc/<tid>` resolves for any thread id, not only leaders.
        let path = self.file(tid, "schedstat");
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if is_gone(&e) && !self.pid_dir(tid).exists() => {
                return Err(ProcessError::Gone(tid))
            }
            // Kernels without CONFIG_SCHEDSTATS have no such file.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(io_error(tid, path, source)),
        };
        parse_schedstat(&path, &text).map(Some)
    }
}

/// The run-queue wait (second field) of a `schedstat` line:
/// `on-cpu-ns wait-ns timeslices`; `path` is only used in errors. Public for
/// the fuzz targets and property tests.
pub fn parse_schedstat(path: &Path, text: &str) -> Result<u64, ProcessError> {
    let mut fields = text.split_whitespace();
    let wait = fields.nth(1).and_then(|f| f.parse().ok());
    wait.ok_or_else(|| ProcessError::Parse {
        path: path.to_path_buf(),
        value: text.trim_end().to_string(),
        reason: "expected three numbers: on-cpu ns, wait ns, timeslices".into(),
    })
}

/// Sorted numeric names in `dir`.
fn numeric_entries(dir: &Path) -> io::Result<Vec<u32>> {
    let mut ids = Vec::new();
    for entry in fs::read_dir(dir)? {
        if let Some(id) = entry?.file_name().to_str().and_then(|n| n.parse().ok()) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// The real uid (first number of the `Uid:` line) of a `status` file;
/// `path` is only used in errors. Public for the fuzz targets and property
/// tests.
pub fn parse_uid(path: &Path, text: &str) -> Result<u32, ProcessError> {
    let err = |value: &str, reason: &str| ProcessError::Parse {
        path: path.to_path_buf(),
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .ok_or_else(|| err(text.trim_end(), "no Uid: line"))?;
    line.split_whitespace()
        .next()
        .and_then(|u| u.parse().ok())
        .ok_or_else(|| err(line.trim(), "Uid: line does not start with a number"))
}

fn read(pid: u32, path: &Path) -> Result<String, ProcessError> {
    fs::read_to_string(path).map_err(|source| io_error(pid, path.to_path_buf(), source))
}

fn is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

fn io_error(pid: u32, path: PathBuf, source: io::Error) -> ProcessError {
    if is_gone(&source) {
        ProcessError::Gone(pid)
    } else {
        ProcessError::Io { path, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_is_the_first_number_of_the_uid_line() {
        let p = Path::new("/p/1/status");
        let text = "Name:\tx\nUmask:\t0022\nUid:\t1000\t0\t0\t0\nGid:\t5\t5\t5\t5\n";
        assert_eq!(parse_uid(p, text).unwrap(), 1000);
        let e = parse_uid(p, "Name:\tx\n").unwrap_err();
        assert!(e.to_string().contains("/p/1/status"), "{e}");
        let e = parse_uid(p, "Uid:\tme\n").unwrap_err();
        assert!(e.to_string().contains("\"me\""), "{e}");
    }

    #[test]
    fn run_delay_is_schedstat_second_field_and_missing_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("42");
        fs::create_dir(&t).unwrap();
        let procs = ProcFs::new(dir.path());
        // The directory exists but has no schedstat: a kernel without it.
        assert_eq!(procs.run_delay_ns(42).unwrap(), None);
        fs::write(t.join("schedstat"), "1200 3400 7\n").unwrap();
        assert_eq!(procs.run_delay_ns(42).unwrap(), Some(3400));
        fs::write(t.join("schedstat"), "1200\n").unwrap();
        let e = procs.run_delay_ns(42).unwrap_err();
        assert!(e.to_string().contains("42/schedstat"), "{e}");
        // A thread that is gone.
        assert!(matches!(
            procs.run_delay_ns(43),
            Err(ProcessError::Gone(43))
        ));
    }

    #[test]
    fn comm_is_the_name_stat_shows() {
        // Names with what `stat` puts around them, and a newline.
        for name in ["sleep", "a (b) c", "x\\y", "n\nl"] {
            let fake = crate::fake::FakeProc::new().unwrap();
            fake.add(&crate::fake::FakeProcess::new(42, name)).unwrap();
            let procs = fake.proc_fs();
            assert_eq!(procs.comm(42).unwrap(), name);
            assert_eq!(procs.stat(42).unwrap().comm, name);
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            ProcFs::new(dir.path()).comm(43),
            Err(ProcessError::Gone(43))
        ));
        // This process, on the real /proc.
        let me = std::process::id();
        let real = ProcFs::system();
        assert_eq!(real.comm(me).unwrap(), real.stat(me).unwrap().comm);
    }

    #[test]
    fn run_delay_of_this_thread_is_readable() {
        // Every kernel atoll supports has schedstat; this machine's too.
        let me = std::process::id();
        assert!(ProcFs::system().run_delay_ns(me).unwrap().is_some());
    }
}
