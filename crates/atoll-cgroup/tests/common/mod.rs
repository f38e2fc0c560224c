//! What the real-kernel cgroup1 tests share: finding writable v1
//! hierarchies (or saying why the test is skipped), a root group name of
//! the test's own, and a drop guard that cleans up after it.
//!
//! Everything a test creates lives under `atoll-test-<pid>-<nanos>` in each
//! v1 hierarchy, and the only process it moves is a child it started.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{SystemTime, UNIX_EPOCH};

use atoll_cgroup::mounts::V1Paths;
use atoll_cgroup::{can_write, choose, detect, Choice, RealFs, Requested};
use atoll_core::plan::GroupPath;

/// The writable v1 hierarchies and the test's own root group name.
pub struct Setup {
    /// Where the controllers are mounted.
    pub paths: V1Paths,
    /// The test's root group name, `atoll-test-<pid>-<nanos>`.
    pub root: String,
    /// Every v1 mount point, to clean up under.
    pub mounts: Vec<PathBuf>,
}

/// The v1 hierarchies, or `None` after printing why the test is skipped
/// (not root, no writable `cpuset` and `cpu` hierarchies).
pub fn setup() -> Option<Setup> {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: not root");
        return None;
    }
    let mounts = match detect(Path::new("/proc/self/mountinfo")) {
        Ok(m) => m,
        Err(e) => {
            println!("skipped: {e}");
            return None;
        }
    };
    let paths = match choose(Requested::Cgroup1, &mounts, &RealFs, &can_write) {
        Ok(Choice::Cgroup1(p)) => p,
        Ok(other) => {
            println!("skipped: unexpected choice {other:?}");
            return None;
        }
        Err(e) => {
            println!("skipped: {e}");
            return None;
        }
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    Some(Setup {
        paths,
        root: format!("atoll-test-{}-{nanos}", std::process::id()),
        mounts: mounts.v1.iter().map(|m| m.mount.path.clone()).collect(),
    })
}

/// On drop: thaws the test's freezer groups (a frozen v1 task does not die
/// of SIGKILL until thawed), kills the child and removes every group under
/// the test's root, also when an assertion failed.
pub struct Guard {
    root: String,
    freezer: Option<PathBuf>,
    mounts: Vec<PathBuf>,
    /// The test's child, once it has one.
    pub child: Option<Child>,
}

impl Guard {
    /// A guard for `s`; `freezer` is the freezer mount when the test
    /// freezes groups.
    pub fn new(s: &Setup, freezer: Option<PathBuf>) -> Self {
        assert!(s.root.starts_with("atoll-test-"));
        Self {
            root: s.root.clone(),
            freezer,
            mounts: s.mounts.clone(),
            child: None,
        }
    }

    /// Kills and reaps the child, if any.
    pub fn kill_child(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn thaw_all(&self) {
        let Some(freezer) = &self.freezer else {
            return;
        };
        let mut dirs = Vec::new();
        dirs_under(&freezer.join(&self.root), &mut dirs);
        for d in dirs {
            let _ = std::fs::write(d.join("freezer.state"), "THAWED");
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.thaw_all();
        self.kill_child();
        for m in &self.mounts {
            let d = m.join(&self.root);
            if d.exists() {
                remove_tree(&d);
            }
        }
    }
}

/// `dir` and every directory below it, parents first.
fn dirs_under(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs_under(&e.path(), out);
            }
        }
    }
}

/// Removes `dir` and the groups below it, children first.
fn remove_tree(dir: &Path) {
    let mut dirs = Vec::new();
    dirs_under(dir, &mut dirs);
    for d in dirs.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
}

/// The trimmed text of `p`; panics with the path when it cannot be read.
pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
        .trim()
        .to_string()
}

/// A group path from its relative text.
pub fn gp(s: &str) -> GroupPath {
    GroupPath::from_relative(s)
}
