//! Real cgroups for the benchmarks: a backend rooted at a unique name, and a
//! last-resort sweep of that root.
//!
//! Everything a benchmark creates lives under `atoll-bench-<tag>-<pid>-<ns>`,
//! a name no one else uses; [`sweep`] touches nothing outside it.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use atoll_cgroup::{can_write, choose, detect, open, CgroupBackend, Choice, RealFs, Requested};

use crate::error::BenchError;

/// Prefix of every root group a benchmark creates.
pub const ROOT_PREFIX: &str = "atoll-bench-";

/// A root name of its own for this run: `atoll-bench-<tag>-<pid>-<ns>`.
pub fn unique_root(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{ROOT_PREFIX}{tag}-{}-{nanos}", std::process::id())
}

/// The backend atoll would pick here (`--backend auto`).
pub fn choose_here() -> Result<Choice, BenchError> {
    let mounts = detect(Path::new("/proc/self/mountinfo"))?;
    Ok(choose(Requested::Auto, &mounts, &RealFs, &can_write)?)
}

/// Opens the backend atoll would pick here, rooted at `root`. Needs root
/// (or a delegated hierarchy).
pub fn open_here(root: &str) -> Result<CgroupBackend, BenchError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(BenchError::Unusable(
            "needs root: it creates cgroups and moves its workers into them".into(),
        ));
    }
    Ok(open(&choose_here()?, root, RealFs)?)
}

/// Removes whatever is left under `root` in every cgroup mount: processes
/// inside are killed (only the benchmark's own workers can be there), then
/// the directories are removed deepest first. Returns those it could not
/// remove. Refuses any root not made by [`unique_root`].
pub fn sweep(root: &str) -> Vec<PathBuf> {
    if !root.starts_with(ROOT_PREFIX) || root.contains('/') {
        return Vec::new();
    }
    let Ok(mounts) = detect(Path::new("/proc/self/mountinfo")) else {
        return Vec::new();
    };
    let tops = mounts
        .v1
        .iter()
        .map(|m| &m.mount)
        .chain(&mounts.v2)
        .map(|m| m.path.join(root))
        .filter(|p| p.exists());
    let mut left = Vec::new();
    for top in tops {
        let mut dirs = Vec::new();
        let mut stack = vec![top];
        while let Some(d) = stack.pop() {
            if let Ok(rd) = std::fs::read_dir(&d) {
                stack.extend(
                    rd.flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path()),
                );
            }
            dirs.push(d);
        }
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs {
            kill_members(&d);
            let mut removed = false;
            for _ in 0..50 {
                if std::fs::remove_dir(&d).is_ok() || !d.exists() {
                    removed = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if !removed {
                left.push(d);
            }
        }
    }
    left
}

fn kill_members(dir: &Path) {
    for _ in 0..50 {
        let pids: Vec<i32> = std::fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .filter(|&p| p > 1)
            .collect();
        if pids.is_empty() {
            return;
        }
        for p in pids {
            // SAFETY: kill(2) on a process inside the benchmark's own root.
            unsafe {
                libc::kill(p, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_roots_are_recognizable_and_sweep_refuses_others() {
        let r = unique_root("rev");
        assert!(r.starts_with("atoll-bench-rev-"));
        assert!(r.contains(&std::process::id().to_string()));
        assert!(sweep("atoll").is_empty());
        assert!(sweep("atoll-bench-x/../..").is_empty());
    }
}
