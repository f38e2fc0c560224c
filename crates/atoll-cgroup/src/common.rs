//! Pieces both backends share: read-compare-write of one knob, refusal
//! bookkeeping, group directories, rmdir with retry, pid moves.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use atoll_core::backend::Fallback;
use atoll_core::plan::GroupPath;

use crate::error::{errno_name, CgroupError};
use crate::fs::CgroupFs;

/// What happened to one knob.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Already as wanted: nothing written.
    Unchanged,
    /// Written over this value.
    Written {
        /// What the file held.
        was: String,
    },
    /// The file does not exist in the group.
    Missing,
    /// The kernel refused the value; the current value and why.
    Refused { got: String, reason: String },
}

/// Whether a write error means "the kernel does not accept this value here"
/// (reported as a fallback) rather than a broken system (an error).
pub(crate) fn is_refusal(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EINVAL
                | libc::EBUSY
                | libc::EACCES
                | libc::EPERM
                | libc::ENOSPC
                | libc::ERANGE
                | libc::EOPNOTSUPP
                | libc::ENODEV
                | libc::EDEADLK
        )
    )
}

/// "kernel refused (EINVAL: Invalid argument)".
pub(crate) fn refusal_reason(e: &io::Error) -> String {
    let n = e.raw_os_error().unwrap_or(0);
    format!("kernel refused the write ({}: {e})", errno_name(n))
}

/// Reads `dir/file`; if `same(current)` does not hold, writes `want`.
pub(crate) fn sync(
    fs: &dyn CgroupFs,
    dir: &Path,
    file: &str,
    want: &str,
    same: impl FnOnce(&str) -> bool,
) -> Result<Outcome, CgroupError> {
    let path = dir.join(file);
    let cur = match fs.read_to_string(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Outcome::Missing),
        Err(e) => return Err(CgroupError::io("read", path, None, e)),
    };
    if same(&cur) {
        return Ok(Outcome::Unchanged);
    }
    write(fs, &path, want, cur.trim())
}

/// Writes `want`; a refusal becomes [`Outcome::Refused`] with `got`.
pub(crate) fn write(
    fs: &dyn CgroupFs,
    path: &Path,
    want: &str,
    got: &str,
) -> Result<Outcome, CgroupError> {
    match fs.write(path, want) {
        Ok(()) => Ok(Outcome::Written {
            was: got.to_string(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Outcome::Missing),
        Err(e) if is_refusal(&e) => Ok(Outcome::Refused {
            got: got.to_string(),
            reason: refusal_reason(&e),
        }),
        Err(e) => Err(CgroupError::io("write", path, Some(want), e)),
    }
}

/// Collects fallbacks and rewrites for one group.
pub(crate) struct Report<'a> {
    pub path: &'a GroupPath,
    pub out: Vec<Fallback>,
    /// Knobs found different and written.
    pub rewritten: Vec<atoll_core::backend::Rewrite>,
}

impl<'a> Report<'a> {
    pub fn new(path: &'a GroupPath) -> Self {
        Self {
            path,
            out: Vec::new(),
            rewritten: Vec::new(),
        }
    }

    pub fn push(&mut self, knob: &str, wanted: &str, got: &str, reason: impl Into<String>) {
        self.out.push(Fallback {
            path: self.path.clone(),
            knob: knob.to_string(),
            wanted: wanted.to_string(),
            got: got.to_string(),
            reason: reason.into(),
        });
    }

    /// Records the outcome of a knob that was asked for (`asked`), or of one
    /// being reset to its default (a missing file is then not a fallback).
    pub fn outcome(&mut self, knob: &str, wanted: &str, asked: bool, o: Outcome, dir: &Path) {
        match o {
            Outcome::Unchanged => {}
            Outcome::Written { was } => self.rewritten.push(atoll_core::backend::Rewrite {
                path: self.path.clone(),
                knob: knob.to_string(),
                found: was,
                wrote: wanted.to_string(),
            }),
            Outcome::Missing if !asked => {}
            Outcome::Missing => self.push(
                knob,
                wanted,
                "n/a",
                format!("{} does not exist on this kernel", dir.join(knob).display()),
            ),
            Outcome::Refused { got, reason } => self.push(knob, wanted, &got, reason),
        }
    }
}

/// Refusals remembered per (group, knob) so a value the kernel refused is
/// not retried every epoch while nothing relevant changed.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    refused: BTreeMap<(GroupPath, String), (String, Fallback)>,
}

impl Memo {
    /// The remembered fallback if `context` (the wanted value and what it
    /// depends on) is the same as when it was refused.
    pub fn get(&self, path: &GroupPath, knob: &str, context: &str) -> Option<Fallback> {
        self.refused
            .get(&(path.clone(), knob.to_string()))
            .filter(|(c, _)| c == context)
            .map(|(_, f)| f.clone())
    }

    pub fn put(&mut self, path: &GroupPath, knob: &str, context: String, f: Fallback) {
        self.refused
            .insert((path.clone(), knob.to_string()), (context, f));
    }

    pub fn forget(&mut self, path: &GroupPath, knob: &str) {
        self.refused.remove(&(path.clone(), knob.to_string()));
    }

    pub fn forget_group(&mut self, path: &GroupPath) {
        self.refused.retain(|(p, _), _| p != path);
    }

    pub fn clear(&mut self) {
        self.refused.clear();
    }
}

/// Checks a root name: a non-empty relative path of normal components.
pub(crate) fn check_root_name(root: &str) -> Result<(), CgroupError> {
    let p = Path::new(root);
    let ok = !root.is_empty()
        && p.components().all(|c| matches!(c, Component::Normal(_)))
        && !root.contains('\n');
    if ok {
        Ok(())
    } else {
        Err(CgroupError::BadRootName(root.to_string()))
    }
}

/// The directory of `path` under `mount/root`.
pub(crate) fn group_dir(mount: &Path, root: &str, path: &GroupPath) -> PathBuf {
    let base = mount.join(root);
    if path.is_root() {
        base
    } else {
        base.join(path.as_str())
    }
}

/// Creates the group directory if missing. A missing parent is
/// [`CgroupError::NoGroup`] of the parent group.
pub(crate) fn ensure_dir(
    fs: &dyn CgroupFs,
    dir: &Path,
    path: &GroupPath,
) -> Result<bool, CgroupError> {
    if fs.exists(dir) {
        return Ok(false);
    }
    match fs.mkdir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => match path.parent() {
            Some(parent) => Err(CgroupError::NoGroup(parent)),
            None => Err(CgroupError::io("mkdir", dir, None, e)),
        },
        Err(e) => Err(CgroupError::io("mkdir", dir, None, e)),
    }
}

/// Removes a cgroup directory, retrying on `EBUSY` (a group whose last task
/// just exited stays busy for a moment) unless it has a child group, which
/// no wait removes. A missing directory is fine.
pub(crate) fn rmdir_retry(
    fs: &dyn CgroupFs,
    dir: &Path,
    attempts: u32,
    delay: Duration,
) -> Result<(), CgroupError> {
    let mut left = attempts.max(1);
    loop {
        match fs.rmdir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && left > 1
                    && fs.child_dirs(dir).is_ok_and(|c| c.is_empty()) =>
            {
                left -= 1;
                if !delay.is_zero() {
                    std::thread::sleep(delay);
                }
            }
            Err(e) => return Err(CgroupError::io("rmdir", dir, None, e)),
        }
    }
}

/// Writes `pid` to `dir/cgroup.procs`; `ESRCH` means the process is gone.
pub(crate) fn write_pid(fs: &dyn CgroupFs, dir: &Path, pid: u32) -> Result<(), CgroupError> {
    let path = dir.join("cgroup.procs");
    let v = pid.to_string();
    fs.write(&path, &v).map_err(|e| {
        if e.raw_os_error() == Some(libc::ESRCH) {
            CgroupError::NoProcess(pid)
        } else {
            CgroupError::io("write", path, Some(&v), e)
        }
    })
}

/// The nearest existing directory for a `/proc/PID/cgroup` path under
/// `mount`: the path itself, or its closest surviving ancestor, or the mount.
pub(crate) fn nearest_existing(fs: &dyn CgroupFs, mount: &Path, cg_path: &str) -> PathBuf {
    let mut p = mount.to_path_buf();
    for comp in Path::new(cg_path.trim_start_matches('/')).components() {
        let Component::Normal(c) = comp else {
            if comp == Component::RootDir || comp == Component::CurDir {
                continue;
            }
            break;
        };
        let next = p.join(c);
        if !fs.exists(&next) {
            break;
        }
        p = next;
    }
    p
}

/// `Monitor::children` for the group whose directory is `dir`.
pub(crate) fn list_children(
    fs: &dyn CgroupFs,
    dir: &Path,
    path: &GroupPath,
) -> Result<Vec<String>, atoll_core::backend::BackendError> {
    fs.child_dirs(dir).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            atoll_core::backend::BackendError::NoGroup(path.clone())
        } else {
            CgroupError::io("list", dir, None, e).into()
        }
    })
}

/// `Monitor::processes` for the group whose directory is `dir`.
pub(crate) fn list_processes(
    fs: &dyn CgroupFs,
    dir: &Path,
    path: &GroupPath,
) -> Result<Vec<u32>, atoll_core::backend::BackendError> {
    match crate::stats::read_parsed(fs, &dir.join("cgroup.procs"), crate::stats::parse_pids)? {
        Some(p) => Ok(p),
        None => Err(atoll_core::backend::BackendError::NoGroup(path.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    #[test]
    fn root_names() {
        assert!(check_root_name("atoll").is_ok());
        assert!(check_root_name("system.slice/atoll").is_ok());
        for bad in ["", "/atoll", "../x", "a/../b", "./a"] {
            assert!(check_root_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn nearest_existing_walks_up() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        let fs = RealFs;
        assert_eq!(
            nearest_existing(&fs, d.path(), "/a/b"),
            d.path().join("a/b")
        );
        assert_eq!(
            nearest_existing(&fs, d.path(), "/a/b/c/d"),
            d.path().join("a/b")
        );
        assert_eq!(nearest_existing(&fs, d.path(), "/x/b"), d.path());
        assert_eq!(nearest_existing(&fs, d.path(), "/"), d.path());
        // Never leaves the mount: `..` is not followed.
        assert_eq!(
            nearest_existing(&fs, d.path(), "/a/../.."),
            d.path().join("a")
        );
    }

    #[test]
    fn memo_keeps_context() {
        let mut m = Memo::default();
        let p = GroupPath::from_relative("web");
        let f = Fallback {
            path: p.clone(),
            knob: "k".into(),
            wanted: "root".into(),
            got: "member".into(),
            reason: "r".into(),
        };
        m.put(&p, "k", "0-3".into(), f.clone());
        assert_eq!(m.get(&p, "k", "0-3"), Some(f));
        assert_eq!(m.get(&p, "k", "0-2"), None);
        m.forget_group(&p);
        assert_eq!(m.get(&p, "k", "0-3"), None);
    }
}
