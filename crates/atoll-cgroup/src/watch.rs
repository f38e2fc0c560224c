//! Writes by others to the groups' files, learned from inotify.
//!
//! A write to a cgroup file goes through the VFS, which raises `IN_MODIFY`
//! on the file and on the directory watching it (kernfs files included:
//! `vfs_write` calls `fsnotify_modify` after every write that took). The
//! event is queued before the `write` returns, so the backend drains the
//! queue around its own writes and keeps only what others wrote between
//! them. Changes the kernel makes itself (a cpuset mask shrunk by CPU
//! hotplug) are not writes and raise nothing: the daemon's slower full
//! check finds those.

use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use atoll_core::plan::GroupPath;

/// Files whose writes are not settings: process membership (what the
/// daemon's adoption step follows on its own).
const NOT_SETTINGS: [&str; 2] = ["tasks", "cgroup.procs"];

/// An inotify instance watching group directories: a written file or a
/// made directory marks the group for a check.
#[derive(Debug)]
pub struct Watch {
    fd: OwnedFd,
    /// Watch descriptor -> the group whose directory it watches.
    groups: HashMap<i32, GroupPath>,
    /// Groups written by others, until taken.
    written: BTreeSet<GroupPath>,
}

impl Watch {
    /// A new, empty watch (non-blocking, close-on-exec).
    pub fn new() -> io::Result<Self> {
        // SAFETY: no pointers; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            fd,
            groups: HashMap::new(),
            written: BTreeSet::new(),
        })
    }

    /// Watches the directory `dir` of `group` for writes to its files and
    /// for directories made in it (groups that are not atoll's).
    /// Watching a directory again changes nothing.
    pub fn add(&mut self, dir: &Path, group: &GroupPath) -> io::Result<()> {
        let c = CString::new(dir.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: `c` is a valid C string for the duration of the call.
        let wd = unsafe {
            libc::inotify_add_watch(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::IN_MODIFY | libc::IN_CREATE | libc::IN_ONLYDIR,
            )
        };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        self.groups.insert(wd, group.clone());
        Ok(())
    }

    /// Reads the queued events: writes to a watched group's settings are
    /// remembered when `keep`, else dropped (the backend's own writes).
    pub fn drain(&mut self, keep: bool) {
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: `buf` is valid for `buf.len()` bytes.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast::<libc::c_void>(),
                    buf.len(),
                )
            };
            let Ok(n) = usize::try_from(n) else {
                return; // EAGAIN (empty) or an error: nothing more now
            };
            if n == 0 {
                return;
            }
            self.parse(&buf[..n], keep);
        }
    }

    fn parse(&mut self, mut bytes: &[u8], keep: bool) {
        const HEAD: usize = std::mem::size_of::<libc::inotify_event>();
        while bytes.len() >= HEAD {
            let field = |at: usize| {
                let mut b = [0u8; 4];
                b.copy_from_slice(&bytes[at..at + 4]);
                b
            };
            let wd = i32::from_ne_bytes(field(0));
            let mask = u32::from_ne_bytes(field(4));
            let len = usize::try_from(u32::from_ne_bytes(field(12))).unwrap_or(usize::MAX);
            let end = HEAD.saturating_add(len).min(bytes.len());
            let name = &bytes[HEAD..end];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if mask & libc::IN_IGNORED != 0 {
                self.groups.remove(&wd); // the directory is gone
            } else if keep && !name.is_empty() && !NOT_SETTINGS.iter().any(|f| f.as_bytes() == name)
            {
                if let Some(g) = self.groups.get(&wd) {
                    self.written.insert(g.clone());
                }
            }
            bytes = &bytes[end..];
        }
    }

    /// The groups whose settings files others wrote since the last call.
    pub fn take(&mut self) -> Vec<GroupPath> {
        self.drain(true);
        std::mem::take(&mut self.written).into_iter().collect()
    }

    /// Whether `group`'s directory is watched (in at least one hierarchy).
    pub fn watches(&self, group: &GroupPath) -> bool {
        self.groups.values().any(|g| g == group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(s: &str) -> GroupPath {
        GroupPath::from_relative(s)
    }

    #[test]
    fn a_write_by_another_is_reported_once_and_own_writes_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let mut w = Watch::new().unwrap();
        w.add(&a, &group("isl/a")).unwrap();
        w.add(&b, &group("isl/b")).unwrap();
        assert!(w.take().is_empty());
        // the backend's own write, drained as its own
        std::fs::write(a.join("cpu.shares"), "100").unwrap();
        w.drain(false);
        assert!(w.take().is_empty());
        // someone else's, and a membership write that is not a setting
        std::fs::write(b.join("cpu.shares"), "7").unwrap();
        std::fs::write(a.join("tasks"), "1").unwrap();
        assert_eq!(w.take(), vec![group("isl/b")]);
        assert!(w.take().is_empty());
        // a group made in it by someone else
        std::fs::create_dir(a.join("theirs")).unwrap();
        assert_eq!(w.take(), vec![group("isl/a")]);
        // a removed directory is forgotten
        std::fs::remove_dir_all(&b).unwrap();
        w.drain(false);
        assert!(w.take().is_empty());
        assert!(!w.watches(&group("isl/b")));
        assert!(w.watches(&group("isl/a")));
    }
}
