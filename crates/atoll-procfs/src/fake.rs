//! A fake `/proc` tree in a temp dir, for tests (feature `testutils`).
//!
//! ```ignore
//! let fake = FakeProc::new()?;
//! fake.add(&FakeProcess::new(100, "nginx").uid(33).threads([100, 101]))?;
//! fake.add(&FakeProcess::kernel_thread(7, "kworker/0:1"))?;
//! let table = fake.proc_fs();
//! ```
//!
//! Each process gets `stat`, `status`, `cgroup`, an `exe` symlink (dangling
//! is fine: only the link is read) and `task/<tid>/` directories. Files can be
//! overwritten with anything ([`FakeProc::write_file`]) to test malformed
//! input, and processes removed ([`FakeProc::remove`]) to test vanishing.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::stat::PF_KTHREAD;
use crate::ProcFs;

/// One fake process. Build with [`FakeProcess::new`] and the setters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeProcess {
    /// Process id.
    pub pid: u32,
    /// Parent pid (default 1).
    pub ppid: u32,
    /// `comm` (written verbatim between parentheses).
    pub comm: String,
    /// Real uid (default 0).
    pub uid: u32,
    /// `PF_*` flags (default 0x400100, a typical user process).
    pub flags: u64,
    /// Start time in clock ticks (default `1000 + pid`).
    pub start_ticks: u64,
    /// `exe` link target; `None` writes no link (default `/usr/bin/<comm>`).
    pub exe: Option<PathBuf>,
    /// Text of the `cgroup` file (default `0::/user.slice\n`).
    pub cgroup: String,
    /// Thread ids (default just `pid`).
    pub threads: Vec<u32>,
}

impl FakeProcess {
    /// A user process with the defaults above.
    pub fn new(pid: u32, comm: &str) -> Self {
        Self {
            pid,
            ppid: 1,
            comm: comm.to_string(),
            uid: 0,
            flags: 0x0040_0100,
            start_ticks: 1000 + u64::from(pid),
            exe: Some(PathBuf::from(format!("/usr/bin/{comm}"))),
            cgroup: "0::/user.slice\n".into(),
            threads: vec![pid],
        }
    }

    /// A kernel thread: child of kthreadd, `PF_KTHREAD`, no `exe`, in the
    /// root cgroup.
    pub fn kernel_thread(pid: u32, comm: &str) -> Self {
        Self {
            ppid: 2,
            flags: 0x0020_8040 | PF_KTHREAD,
            exe: None,
            cgroup: "0::/\n".into(),
            ..Self::new(pid, comm)
        }
    }

    /// Sets the parent.
    pub fn ppid(mut self, ppid: u32) -> Self {
        self.ppid = ppid;
        self
    }

    /// Sets the real uid.
    pub fn uid(mut self, uid: u32) -> Self {
        self.uid = uid;
        self
    }

    /// Sets the flags.
    pub fn flags(mut self, flags: u64) -> Self {
        self.flags = flags;
        self
    }

    /// Sets the start time.
    pub fn start_ticks(mut self, ticks: u64) -> Self {
        self.start_ticks = ticks;
        self
    }

    /// Sets (or, with `None`, drops) the `exe` link.
    pub fn exe(mut self, exe: Option<&str>) -> Self {
        self.exe = exe.map(PathBuf::from);
        self
    }

    /// Sets the `cgroup` file's text.
    pub fn cgroup(mut self, text: &str) -> Self {
        self.cgroup = text.to_string();
        self
    }

    /// Sets the thread ids.
    pub fn threads(mut self, tids: impl IntoIterator<Item = u32>) -> Self {
        self.threads = tids.into_iter().collect();
        self
    }

    /// The `stat` line, laid out like the kernel's (52 fields).
    pub fn stat_line(&self) -> String {
        let Self {
            pid,
            ppid,
            comm,
            flags,
            start_ticks,
            ..
        } = self;
        let n = self.threads.len().max(1);
        format!(
            "{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 {flags} 120 0 0 0 3 2 0 0 20 0 {n} 0 \
             {start_ticks} 10485760 500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 \
             0 0 0 0 0 0 0 0 0 0 0\n"
        )
    }

    /// The `status` text (the lines atoll reads, plus a few others).
    pub fn status_text(&self) -> String {
        let uid = self.uid;
        format!(
            "Name:\t{}\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t{}\nPid:\t{}\nPPid:\t{}\n\
             Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{uid}\t{uid}\t{uid}\t{uid}\nThreads:\t{}\n",
            self.comm,
            self.pid,
            self.pid,
            self.ppid,
            self.threads.len()
        )
    }
}

/// A fake `/proc` root in a temp dir, removed on drop.
#[derive(Debug)]
pub struct FakeProc {
    dir: TempDir,
}

impl FakeProc {
    /// An empty tree.
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            dir: tempfile::Builder::new()
                .prefix("atoll-fakeproc-")
                .tempdir()?,
        })
    }

    /// The root to hand to [`ProcFs::new`].
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A table reading this tree.
    pub fn proc_fs(&self) -> ProcFs {
        ProcFs::new(self.root())
    }

    /// Writes (or rewrites) process `p`: its directory, files and threads.
    pub fn add(&self, p: &FakeProcess) -> io::Result<()> {
        let dir = self.pid_dir(p.pid);
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        fs::create_dir_all(dir.join("task"))?;
        fs::write(dir.join("stat"), p.stat_line())?;
        fs::write(dir.join("status"), p.status_text())?;
        fs::write(dir.join("cgroup"), &p.cgroup)?;
        fs::write(dir.join("comm"), format!("{}\n", p.comm))?;
        if let Some(exe) = &p.exe {
            std::os::unix::fs::symlink(exe, dir.join("exe"))?;
        }
        for tid in &p.threads {
            let task = dir.join("task").join(tid.to_string());
            fs::create_dir_all(&task)?;
            fs::write(
                task.join("stat"),
                FakeProcess {
                    pid: *tid,
                    ..p.clone()
                }
                .stat_line(),
            )?;
        }
        Ok(())
    }

    /// Removes process `pid`, as if it exited.
    pub fn remove(&self, pid: u32) -> io::Result<()> {
        fs::remove_dir_all(self.pid_dir(pid))
    }

    /// Overwrites one file of process `pid` (e.g. `stat`, `cgroup`) with
    /// `contents`.
    pub fn write_file(&self, pid: u32, name: &str, contents: &str) -> io::Result<()> {
        fs::write(self.pid_dir(pid).join(name), contents)
    }

    /// Removes one file of process `pid` (e.g. `status`, to simulate an exit
    /// half-way through a read).
    pub fn remove_file(&self, pid: u32, name: &str) -> io::Result<()> {
        fs::remove_file(self.pid_dir(pid).join(name))
    }

    fn pid_dir(&self, pid: u32) -> PathBuf {
        self.root().join(pid.to_string())
    }
}
