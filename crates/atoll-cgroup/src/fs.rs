//! The filesystem seam between the backends and the kernel.
//!
//! Backends never call `std::fs` directly: they go through [`CgroupFs`], so
//! the same code runs on `/sys/fs/cgroup` ([`RealFs`]) and on a fake tree in a
//! temp dir (`testutils::FakeCgroupFs`, behind the `testutils` feature) that
//! imitates what the kernel does on `mkdir` and on writes. Methods return plain
//! `io::Error`s; the backends add the operation, path and value.

use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;

use atoll_core::CpuSet;

use crate::kept::Reread;

/// The file operations a cgroup backend needs.
pub trait CgroupFs: Send + Sync {
    /// Creates one directory (its parent must exist).
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// Removes one empty cgroup directory.
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    /// Reads a whole file.
    fn read_to_string(&self, path: &Path) -> io::Result<String>;
    /// Writes `value` to an existing file in one `write(2)`, without creating
    /// or truncating it (cgroup files take one value per write).
    fn write(&self, path: &Path, value: &str) -> io::Result<()>;
    /// Whether the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Names of the sub-directories of `path` (child cgroups), sorted.
    fn child_dirs(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Whether systemd marked the cgroup directory as delegated (the
    /// `trusted.delegate` or `user.delegate` extended attribute is `1`,
    /// which systemd sets on the cgroup of a unit with `Delegate=`).
    fn is_delegated(&self, path: &Path) -> bool {
        let _ = path;
        false
    }
    /// A thread's CPU mask (`sched_getaffinity`); `None` if it is gone or
    /// cannot be read.
    fn affinity(&self, tid: u32) -> Option<CpuSet> {
        let _ = tid;
        None
    }
    /// Sets a thread's CPU mask (`sched_setaffinity`).
    fn set_affinity(&self, tid: u32, cpus: &CpuSet) -> io::Result<()> {
        let _ = (tid, cpus);
        Ok(())
    }
    /// Opens `path` to be read again and again from its start (a counter;
    /// see [`crate::kept`]). `None`: this filesystem keeps nothing open,
    /// read the file with [`read_to_string`](CgroupFs::read_to_string)
    /// each time.
    fn keep_open(&self, path: &Path) -> Option<io::Result<Box<dyn Reread>>> {
        let _ = path;
        None
    }
}

/// `CgroupFs` for a reference or a shared pointer to one: each call goes to
/// the filesystem behind it.
macro_rules! forward_cgroup_fs {
    ($($outer:ty),+) => {$(
        impl<T: CgroupFs + ?Sized> CgroupFs for $outer {
            fn mkdir(&self, path: &Path) -> io::Result<()> {
                (**self).mkdir(path)
            }
            fn rmdir(&self, path: &Path) -> io::Result<()> {
                (**self).rmdir(path)
            }
            fn read_to_string(&self, path: &Path) -> io::Result<String> {
                (**self).read_to_string(path)
            }
            fn write(&self, path: &Path, value: &str) -> io::Result<()> {
                (**self).write(path, value)
            }
            fn exists(&self, path: &Path) -> bool {
                (**self).exists(path)
            }
            fn child_dirs(&self, path: &Path) -> io::Result<Vec<String>> {
                (**self).child_dirs(path)
            }
            fn is_delegated(&self, path: &Path) -> bool {
                (**self).is_delegated(path)
            }
            fn affinity(&self, tid: u32) -> Option<CpuSet> {
                (**self).affinity(tid)
            }
            fn set_affinity(&self, tid: u32, cpus: &CpuSet) -> io::Result<()> {
                (**self).set_affinity(tid, cpus)
            }
            fn keep_open(&self, path: &Path) -> Option<io::Result<Box<dyn Reread>>> {
                (**self).keep_open(path)
            }
        }
    )+};
}

forward_cgroup_fs!(&T, std::sync::Arc<T>);

/// The real filesystem.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

impl CgroupFs for RealFs {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }

    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        // Not `fs::read_to_string`: it asks the size first (one `statx`
        // more per file), and cgroup files report none. The control loop
        // reads many small files; a stack buffer suits them, and a read far
        // short of it is the last (see `KeptFile::reread`).
        KeptFile(fs::File::open(path)?).reread()
    }

    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(false)
            .truncate(false)
            .open(path)?;
        // One write(2): cgroup files parse each write as a whole value.
        let n = f.write(value.as_bytes())?;
        if n != value.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {n} of {} bytes", value.len()),
            ));
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn child_dirs(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                out.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        out.sort();
        Ok(out)
    }

    fn keep_open(&self, path: &Path) -> Option<io::Result<Box<dyn Reread>>> {
        Some(fs::File::open(path).map(|f| Box::new(KeptFile(f)) as Box<dyn Reread>))
    }

    fn is_delegated(&self, path: &Path) -> bool {
        ["trusted.delegate", "user.delegate"]
            .iter()
            .any(|name| xattr(path, name).is_some_and(|v| v == b"1"))
    }

    fn affinity(&self, tid: u32) -> Option<CpuSet> {
        let tid = libc::pid_t::try_from(tid).ok()?;
        // SAFETY: cpu_set_t is plain data; all zeroes is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
        let rc = unsafe { libc::sched_getaffinity(tid, std::mem::size_of_val(&set), &mut set) };
        if rc != 0 {
            return None;
        }
        let cpus: Vec<u32> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `i` is below CPU_SETSIZE, the set's capacity.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .filter_map(|i| u32::try_from(i).ok())
            .collect();
        Some(CpuSet::from_iter(cpus))
    }

    fn set_affinity(&self, tid: u32, cpus: &CpuSet) -> io::Result<()> {
        let tid =
            libc::pid_t::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
        // SAFETY: cpu_set_t is plain data; all zeroes is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for c in cpus.iter() {
            let c = c as usize;
            if c >= libc::CPU_SETSIZE as usize {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            // SAFETY: `c` is below CPU_SETSIZE, the set's capacity.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        // SAFETY: `set` is a valid cpu_set_t of the size passed.
        let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// A read that leaves more than this much of the buffer unused is the
/// last: longer than any one record of a cgroup file.
const LAST_READ_SLACK: usize = 512;

/// A file of [`RealFs`] kept open: read with `pread(2)` from offset 0.
#[derive(Debug)]
struct KeptFile(fs::File);

impl Reread for KeptFile {
    fn reread(&mut self) -> io::Result<String> {
        let mut buf = [0u8; 4096];
        let mut out = Vec::new();
        let mut at = 0u64;
        loop {
            match self.0.read_at(&mut buf, at) {
                Ok(0) => break,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    // Far short of the buffer is the end: a kernfs file
                    // fills the buffer but for less than one of its records
                    // (a line of a list; a counter file is one record, all
                    // in one read), a regular file gives all it has. Saves
                    // the read of nothing that would say so.
                    if n + LAST_READ_SLACK < buf.len() {
                        break;
                    }
                    at += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        String::from_utf8(out).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

/// The value of extended attribute `name` of `path`, if it has one.
fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let p = CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = CString::new(name).ok()?;
    let mut buf = [0u8; 64];
    // SAFETY: both strings are valid and NUL-terminated for the call; the
    // buffer is writable for `buf.len()` bytes, and getxattr(2) writes at
    // most that many.
    let len = unsafe {
        libc::getxattr(
            p.as_ptr(),
            n.as_ptr(),
            buf.as_mut_ptr().cast::<libc::c_void>(),
            buf.len(),
        )
    };
    let len = usize::try_from(len).ok()?;
    Some(buf[..len].to_vec())
}

/// Whether this process may write into `path` (`access(2)` with `W_OK`, which
/// uses the real uid as the kernel would for a non-setuid daemon).
pub fn can_write(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call;
    // access(2) only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_fs_writes_without_creating_and_lists_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cpu.weight");
        let fs = RealFs;
        let err = fs.write(&f, "100").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        std::fs::write(&f, "1\n").unwrap();
        fs.write(&f, "100").unwrap();
        assert_eq!(fs.read_to_string(&f).unwrap(), "100");
        fs.mkdir(&dir.path().join("b")).unwrap();
        fs.mkdir(&dir.path().join("a")).unwrap();
        assert_eq!(fs.child_dirs(dir.path()).unwrap(), ["a", "b"]);
        fs.rmdir(&dir.path().join("a")).unwrap();
        assert!(!fs.exists(&dir.path().join("a")));
        assert!(can_write(dir.path()));
        assert!(!can_write(&dir.path().join("missing")));
        // A plain directory carries no delegation mark.
        assert!(!fs.is_delegated(dir.path()));
    }

    #[test]
    fn real_fs_reads_a_long_list_whole() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cgroup.procs");
        let pids: String = (1..3000).map(|p| format!("{p}\n")).collect();
        std::fs::write(&f, &pids).unwrap();
        assert_eq!(RealFs.read_to_string(&f).unwrap(), pids);
        std::fs::write(&f, "").unwrap();
        assert_eq!(RealFs.read_to_string(&f).unwrap(), "");
    }

    #[test]
    fn real_fs_reads_and_sets_a_process_cpu_mask() {
        let fs = RealFs;
        let mine = fs.affinity(std::process::id()).unwrap();
        let one = CpuSet::from_iter(mine.iter().take(1));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert_eq!(fs.affinity(pid), Some(mine.clone()));
        let set = fs.set_affinity(pid, &one);
        let got = fs.affinity(pid);
        let _ = child.kill();
        let _ = child.wait();
        set.unwrap();
        assert_eq!(got, Some(one));
        assert_eq!(fs.affinity(pid), None, "a reaped process has no mask");
    }

    #[test]
    fn a_user_delegate_xattr_marks_a_directory_delegated() {
        let dir = tempfile::tempdir().unwrap();
        let p = CString::new(dir.path().as_os_str().as_bytes()).unwrap();
        let n = CString::new("user.delegate").unwrap();
        // SAFETY: valid NUL-terminated strings and a 1-byte value.
        let rc = unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), b"1".as_ptr().cast(), 1, 0) };
        if rc != 0 {
            eprintln!(
                "skipped: this filesystem takes no user xattrs ({})",
                io::Error::last_os_error()
            );
            return;
        }
        assert!(RealFs.is_delegated(dir.path()));
    }
}
