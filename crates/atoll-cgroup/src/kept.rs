//! Counter files kept open between reads.
//!
//! The control loop reads the same few counters of a group every epoch
//! (`cpuacct.usage`, `cpu.stat`, `*.pressure`, ...). Opening a file under
//! `/sys/fs/cgroup` walks its path and sets up a `seq_file` each time;
//! kept open, the next read is one `pread(2)` at offset 0, which makes the
//! kernel produce the file afresh (kernfs `seq_file`s start over at offset
//! 0). A backend holds a [`KeptFiles`] and reads its counters through
//! [`Through`], a [`CgroupFs`] whose `read_to_string` goes through the
//! kept files; everything else is the backend's own filesystem.
//!
//! A kept file of a group that was removed reads `ENODEV`: the entry is
//! dropped and the file opened again, which gives what a plain read gives
//! (`NotFound` for a group that is gone, the new group's figures for one
//! recreated under the same name). A backend forgets the files of a group
//! it removes. A filesystem that keeps nothing open ([`CgroupFs::keep_open`]
//! returns `None`, as the test fakes do) is read as before.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use atoll_core::CpuSet;

use crate::fs::CgroupFs;

/// Most files kept open by one backend: the CPU counters of the islands
/// and of some 250 units. Past it, files are read the plain way (open, read,
/// close): with the PSI triggers (at most a quarter of the descriptor
/// limit) the daemon keeps at most half of a 1024 limit for itself.
pub const MAX_KEPT: usize = 256;

/// A file kept open, read again from its start.
pub trait Reread: Send + std::fmt::Debug {
    /// The whole file as it is now.
    fn reread(&mut self) -> io::Result<String>;
}

/// The files a backend keeps open, by path.
#[derive(Debug, Default)]
pub struct KeptFiles {
    files: Mutex<HashMap<PathBuf, Box<dyn Reread>>>,
}

impl KeptFiles {
    /// Reads `path` through its kept handle, opening (and keeping) it the
    /// first time; a handle that fails is dropped and the file read anew.
    pub fn read(&self, fs: &dyn CgroupFs, path: &Path) -> io::Result<String> {
        let mut files = self
            .files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(f) = files.get_mut(path) {
            match f.reread() {
                Ok(text) => return Ok(text),
                // Removed (ENODEV), or anything else: open it again below.
                Err(_) => {
                    files.remove(path);
                }
            }
        }
        if files.len() >= MAX_KEPT {
            return fs.read_to_string(path);
        }
        match fs.keep_open(path) {
            None => fs.read_to_string(path),
            Some(Err(e)) => Err(e),
            Some(Ok(mut f)) => {
                let text = f.reread()?;
                files.insert(path.to_path_buf(), f);
                Ok(text)
            }
        }
    }

    /// Closes the files under `dir` (a group being removed).
    pub fn forget_under(&self, dir: &Path) {
        self.files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|p, _| !p.starts_with(dir));
    }

    /// How many files are kept open.
    pub fn len(&self) -> usize {
        self.files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A filesystem whose reads go through kept files (see the module doc).
pub struct Through<'a> {
    /// The backend's filesystem.
    pub fs: &'a dyn CgroupFs,
    /// Its kept files.
    pub kept: &'a KeptFiles,
}

impl CgroupFs for Through<'_> {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        self.fs.mkdir(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.kept.forget_under(path);
        self.fs.rmdir(path)
    }
    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        self.kept.read(self.fs, path)
    }
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        self.fs.write(path, value)
    }
    fn exists(&self, path: &Path) -> bool {
        self.fs.exists(path)
    }
    fn child_dirs(&self, path: &Path) -> io::Result<Vec<String>> {
        self.fs.child_dirs(path)
    }
    fn is_delegated(&self, path: &Path) -> bool {
        self.fs.is_delegated(path)
    }
    fn affinity(&self, tid: u32) -> Option<CpuSet> {
        self.fs.affinity(tid)
    }
    fn set_affinity(&self, tid: u32, cpus: &CpuSet) -> io::Result<()> {
        self.fs.set_affinity(tid, cpus)
    }
    fn keep_open(&self, path: &Path) -> Option<io::Result<Box<dyn Reread>>> {
        self.fs.keep_open(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    #[test]
    fn a_kept_file_reads_what_it_holds_now() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cpuacct.usage");
        std::fs::write(&f, "100\n").unwrap();
        let kept = KeptFiles::default();
        assert_eq!(kept.read(&RealFs, &f).unwrap(), "100\n");
        assert_eq!(kept.len(), 1);
        // Rewritten in place (same inode): the kept handle sees the change,
        // also when the new text is shorter.
        std::fs::write(&f, "7\n").unwrap();
        assert_eq!(kept.read(&RealFs, &f).unwrap(), "7\n");
        std::fs::write(&f, "123456789\n").unwrap();
        assert_eq!(kept.read(&RealFs, &f).unwrap(), "123456789\n");
        assert_eq!(kept.len(), 1);
    }

    #[test]
    fn a_kept_file_longer_than_one_read_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("memory.stat");
        let text: String = (0..2000).map(|i| format!("key{i} {i}\n")).collect();
        assert!(text.len() > 3 * 4096);
        std::fs::write(&f, &text).unwrap();
        let kept = KeptFiles::default();
        assert_eq!(kept.read(&RealFs, &f).unwrap(), text);
        assert_eq!(kept.read(&RealFs, &f).unwrap(), text);
    }

    #[test]
    fn past_the_cap_files_are_read_without_being_kept() {
        let dir = tempfile::tempdir().unwrap();
        let kept = KeptFiles::default();
        for i in 0..=MAX_KEPT {
            let f = dir.path().join(format!("f{i}"));
            std::fs::write(&f, format!("{i}\n")).unwrap();
            assert_eq!(kept.read(&RealFs, &f).unwrap(), format!("{i}\n"));
        }
        assert_eq!(kept.len(), MAX_KEPT);
    }

    #[test]
    fn a_missing_file_is_not_found_and_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let kept = KeptFiles::default();
        let err = kept.read(&RealFs, &dir.path().join("nope")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(kept.is_empty());
    }

    #[test]
    fn forgetting_a_directory_closes_its_files_only() {
        let dir = tempfile::tempdir().unwrap();
        for g in ["a", "b"] {
            std::fs::create_dir(dir.path().join(g)).unwrap();
            std::fs::write(dir.path().join(g).join("cpu.stat"), "x\n").unwrap();
        }
        let kept = KeptFiles::default();
        let through = Through {
            fs: &RealFs,
            kept: &kept,
        };
        for g in ["a", "b"] {
            assert_eq!(
                through
                    .read_to_string(&dir.path().join(g).join("cpu.stat"))
                    .unwrap(),
                "x\n"
            );
        }
        assert_eq!(kept.len(), 2);
        kept.forget_under(&dir.path().join("a"));
        assert_eq!(kept.len(), 1);
    }

    /// A handle that fails once, as a kept file of a removed group does.
    #[derive(Debug)]
    struct Gone;
    impl Reread for Gone {
        fn reread(&mut self) -> io::Result<String> {
            Err(io::Error::from_raw_os_error(libc::ENODEV))
        }
    }

    #[test]
    fn a_failing_handle_is_dropped_and_the_file_read_anew() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cpu.stat");
        std::fs::write(&f, "new\n").unwrap();
        let kept = KeptFiles::default();
        kept.files
            .lock()
            .unwrap()
            .insert(f.clone(), Box::new(Gone) as Box<dyn Reread>);
        assert_eq!(kept.read(&RealFs, &f).unwrap(), "new\n");
        // The new handle replaced the failed one.
        assert_eq!(kept.read(&RealFs, &f).unwrap(), "new\n");
        assert_eq!(kept.len(), 1);
        // Gone for good: not found, nothing kept.
        std::fs::remove_file(&f).unwrap();
        kept.files
            .lock()
            .unwrap()
            .insert(f.clone(), Box::new(Gone) as Box<dyn Reread>);
        assert_eq!(
            kept.read(&RealFs, &f).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(kept.is_empty());
    }
}
