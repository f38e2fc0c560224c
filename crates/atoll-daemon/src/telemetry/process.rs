//! The daemon's own process figures (the standard `process_*` metrics),
//! read from `/proc/self` under an injected proc root.

use std::fs;
use std::path::{Path, PathBuf};

use super::TelemetryError;

/// The daemon process as the standard `process_*` metrics describe it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessStats {
    /// User and system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Resident memory, bytes.
    pub resident_bytes: u64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// When it started, seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

/// Reads [`ProcessStats`] of the process that reads `<proc_root>/self`.
#[derive(Clone, Debug)]
pub struct SelfReader {
    proc_root: PathBuf,
    ticks_per_second: u64,
    page_size: u64,
}

impl SelfReader {
    /// A reader of `<proc_root>/self`, with the kernel's clock tick and
    /// page size.
    pub fn new(proc_root: &Path) -> Self {
        // SAFETY: sysconf has no preconditions; it returns -1 for an unknown
        // name, handled below.
        let (tck, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        Self::with_units(
            proc_root,
            u64::try_from(tck).ok().filter(|t| *t > 0).unwrap_or(100),
            u64::try_from(page).ok().filter(|p| *p > 0).unwrap_or(4096),
        )
    }

    /// A reader with the given clock tick and page size (for fake trees).
    pub fn with_units(proc_root: &Path, ticks_per_second: u64, page_size: u64) -> Self {
        Self {
            proc_root: proc_root.to_path_buf(),
            ticks_per_second,
            page_size,
        }
    }

    fn read_file(&self, rel: &str) -> Result<String, TelemetryError> {
        let path = self.proc_root.join(rel);
        fs::read_to_string(&path).map_err(|source| TelemetryError::Read { path, source })
    }

    fn parse_error(&self, rel: &str, what: &str) -> TelemetryError {
        TelemetryError::Parse {
            path: self.proc_root.join(rel),
            what: what.to_string(),
        }
    }

    /// Reads `self/stat`, `self/statm`, `self/fd` and the boot time in
    /// `stat`.
    pub fn read(&self) -> Result<ProcessStats, TelemetryError> {
        let stat_path = self.proc_root.join("self/stat");
        let stat =
            atoll_procfs::parse_stat(&stat_path, &self.read_file("self/stat")?).map_err(|e| {
                TelemetryError::Parse {
                    path: stat_path.clone(),
                    what: e.to_string(),
                }
            })?;
        let resident_pages = self
            .read_file("self/statm")?
            .split_whitespace()
            .nth(1)
            .and_then(|f| f.parse::<u64>().ok())
            .ok_or_else(|| self.parse_error("self/statm", "no resident page count"))?;
        let boot = self
            .read_file("stat")?
            .lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())
            .ok_or_else(|| self.parse_error("stat", "no btime line"))?;
        let fd_dir = self.proc_root.join("self/fd");
        let open_fds = fs::read_dir(&fd_dir)
            .map_err(|source| TelemetryError::Read {
                path: fd_dir.clone(),
                source,
            })?
            .count() as u64;
        let tps = self.ticks_per_second as f64;
        Ok(ProcessStats {
            cpu_seconds: stat.cpu_ticks as f64 / tps,
            resident_bytes: resident_pages.saturating_mul(self.page_size),
            open_fds,
            start_time_seconds: boot as f64 + stat.start_ticks as f64 / tps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake proc root whose `self` used 250 + 50 ticks, has 300 resident
    /// pages and 3 descriptors, and started 1234 ticks after a boot at
    /// 1_700_000_000.
    fn fake_root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let me = dir.path().join("self");
        fs::create_dir_all(me.join("fd")).unwrap();
        for fd in ["0", "1", "2"] {
            fs::write(me.join("fd").join(fd), "").unwrap();
        }
        fs::write(
            me.join("stat"),
            "77 (atoll (d)) S 1 77 77 0 -1 4194560 10 0 0 0 250 50 0 0 20 0 3 0 1234 \
             1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
        )
        .unwrap();
        fs::write(me.join("statm"), "5000 300 100 10 0 400 0\n").unwrap();
        fs::write(
            dir.path().join("stat"),
            "cpu  1 2 3 4\nintr 5\nbtime 1700000000\nprocesses 9\n",
        )
        .unwrap();
        dir
    }

    #[test]
    fn reads_the_standard_figures_from_an_injected_root() {
        let root = fake_root();
        let s = SelfReader::with_units(root.path(), 100, 4096)
            .read()
            .unwrap();
        assert_eq!(s.cpu_seconds, 3.0);
        assert_eq!(s.resident_bytes, 300 * 4096);
        assert_eq!(s.open_fds, 3);
        assert!(
            (s.start_time_seconds - 1_700_000_012.34).abs() < 1e-6,
            "{s:?}"
        );
    }

    #[test]
    fn a_missing_or_broken_file_is_an_error_naming_it() {
        let root = fake_root();
        fs::write(root.path().join("stat"), "cpu 1 2\n").unwrap();
        let e = SelfReader::with_units(root.path(), 100, 4096)
            .read()
            .unwrap_err();
        assert!(e.to_string().contains("btime"), "{e}");
        fs::remove_file(root.path().join("self/statm")).unwrap();
        let e = SelfReader::with_units(root.path(), 100, 4096)
            .read()
            .unwrap_err();
        assert!(e.to_string().contains("self/statm"), "{e}");
    }

    #[test]
    fn reads_this_process() {
        let s = SelfReader::new(Path::new("/proc")).read().unwrap();
        assert!(s.resident_bytes > 0 && s.open_fds >= 3, "{s:?}");
        assert!(s.start_time_seconds > 1_000_000_000.0, "{s:?}");
    }
}
