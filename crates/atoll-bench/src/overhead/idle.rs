//! The idle processes of `atoll bench overhead`: `sleep`s that the
//! benchmark starts before any daemon and ends after the last.
//!
//! All of them share one process group, led by the first, so one
//! `kill(-group)` ends them all; the leader is reaped last, so the group id
//! cannot belong to anyone else while it is signalled. Dropping the
//! [`IdleHerd`] (normally, on an error, a panic or after Ctrl-C) kills and
//! reaps every one. Each also gets `PR_SET_PDEATHSIG = SIGKILL`, so even a
//! benchmark killed outright leaves none behind.
//!
//! The first few are *named*: started through a symlink `<dir>/<name>` to
//! `sleep`, their task name (`comm`, the basename the kernel was given to
//! exec) is `name`, which is what the units' adopt rules match. `argv[0]`
//! stays `sleep`, for multi-call builds of coreutils.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::error::BenchError;
use crate::interrupt;

/// How long each `sleep` would sleep, s (they are killed long before).
const SLEEP_S: &str = "100000";

/// A group of idle processes, killed and reaped on drop.
#[derive(Debug)]
pub struct IdleHerd {
    /// The group's leader (reaped last).
    leader: Option<Child>,
    /// The others.
    others: Vec<Child>,
    /// Pids of the named ones, by name, in order.
    named: Vec<(String, u32)>,
}

/// `sleep`'s path, from `PATH`.
pub fn find_sleep() -> Result<PathBuf, BenchError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("sleep"))
        .find(|p| p.is_file())
        .ok_or_else(|| BenchError::Unusable("no `sleep` in PATH".into()))
}

impl IdleHerd {
    /// Starts `total` idle processes (at least one per name), the first
    /// ones named `names` through symlinks made in `dir` (not touched
    /// without names).
    pub fn start(dir: &Path, names: &[String], total: usize) -> Result<Self, BenchError> {
        let sleep = find_sleep()?;
        if !names.is_empty() {
            std::fs::create_dir_all(dir).map_err(|source| BenchError::Io {
                op: "create",
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let mut herd = Self {
            leader: None,
            others: Vec::new(),
            named: Vec::new(),
        };
        let total = total.max(names.len());
        for i in 0..total {
            if i % 100 == 0 {
                interrupt::check()?;
            }
            let program = match names.get(i) {
                Some(name) => {
                    let link = dir.join(name);
                    let _ = std::fs::remove_file(&link);
                    std::os::unix::fs::symlink(&sleep, &link).map_err(|source| BenchError::Io {
                        op: "create",
                        path: link.clone(),
                        source,
                    })?;
                    link
                }
                None => sleep.clone(),
            };
            let child = herd.spawn(&program)?;
            if let Some(name) = names.get(i) {
                herd.named.push((name.clone(), child.id()));
            }
            if herd.leader.is_none() {
                herd.leader = Some(child);
            } else {
                herd.others.push(child);
            }
        }
        Ok(herd)
    }

    fn spawn(&self, program: &Path) -> Result<Child, BenchError> {
        let group = self.leader.as_ref().map_or(0, |l| l.id() as i32);
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let mut cmd = Command::new(program);
        cmd.arg0("sleep")
            .arg(SLEEP_S)
            .process_group(group)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only prctl(2) and getppid(2), which are async-signal-safe;
        // it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The benchmark ended before the prctl: do not linger.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        cmd.spawn().map_err(|source| BenchError::Spawn {
            what: "idle process".into(),
            program: program.to_path_buf(),
            source,
        })
    }

    /// How many processes it started.
    pub fn len(&self) -> usize {
        self.others.len() + usize::from(self.leader.is_some())
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The named processes' pids, by name.
    pub fn named(&self) -> &[(String, u32)] {
        &self.named
    }

    /// Every pid, in the order they were started.
    pub fn pids(&self) -> Vec<u32> {
        self.leader
            .iter()
            .chain(&self.others)
            .map(Child::id)
            .collect()
    }

    /// How many are still running (not exited).
    pub fn running(&mut self) -> usize {
        self.leader
            .iter_mut()
            .chain(self.others.iter_mut())
            .map(|c| usize::from(matches!(c.try_wait(), Ok(None))))
            .sum()
    }
}

impl Drop for IdleHerd {
    fn drop(&mut self) {
        if let Some(l) = &mut self.leader {
            if matches!(l.try_wait(), Ok(None)) {
                // SAFETY: kill(2) on the process group we created; its
                // leader is not reaped, so the group id is still ours.
                unsafe {
                    libc::kill(-(l.id() as libc::pid_t), libc::SIGKILL);
                }
            }
        }
        // Any that left the group (none should) are killed one by one;
        // kill and wait on a `Child` never reach a process that was reaped.
        for c in &mut self.others {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(mut l) = self.leader.take() {
            let _ = l.kill();
            let _ = l.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comm(pid: u32) -> Option<String> {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()
            .map(|s| s.trim().to_string())
    }

    fn sleeping(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| !s.contains(") Z") && !s.contains(") X"))
    }

    #[test]
    fn starts_named_and_plain_sleeps_in_one_group_and_reaps_them_all() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["aotestu001".to_string(), "aotestu002".to_string()];
        let mut herd = IdleHerd::start(dir.path(), &names, 5).unwrap();
        assert_eq!(herd.len(), 5);
        assert!(!herd.is_empty());
        assert_eq!(herd.running(), 5);
        let named = herd.named().to_vec();
        assert_eq!(named.len(), 2);
        for (name, pid) in &named {
            assert_eq!(comm(*pid).as_deref(), Some(name.as_str()));
        }
        let leader = herd.leader.as_ref().unwrap().id();
        let pids: Vec<u32> = herd.others.iter().map(Child::id).collect();
        for pid in &pids {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let (_, group) = crate::comm::procstat::parse_stat(&stat).unwrap();
            assert_eq!(group, leader);
            assert_eq!(
                comm(*pid)
                    .as_deref()
                    .map(|c| c == "sleep" || c.starts_with("aotest")),
                Some(true)
            );
        }
        drop(herd);
        for pid in pids.iter().chain([&leader]) {
            assert!(!sleeping(*pid), "{pid} still runs");
        }
    }

    #[test]
    fn at_least_one_per_name() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["aotestu001".to_string(), "aotestu002".to_string()];
        let herd = IdleHerd::start(dir.path(), &names, 0).unwrap();
        assert_eq!(herd.len(), 2);
        assert_eq!(herd.pids().len(), 2);
        assert_eq!(herd.pids()[0], herd.named()[0].1);
        // Without names the directory is not needed.
        let plain = IdleHerd::start(&dir.path().join("absent"), &[], 3).unwrap();
        assert_eq!(plain.pids().len(), 3);
        assert!(!dir.path().join("absent").exists());
        assert!(find_sleep().unwrap().is_file());
    }
}
