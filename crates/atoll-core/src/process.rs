//! Processes as policies see them, and the rules that adopt them.
//!
//! A [`ProcessTable`] lists processes and describes each one; a
//! [`TaskControl`] sets a thread's scheduling policy. The procfs crate
//! implements both over an injected `/proc` root; the simulator over its own
//! tasks. Matching adoption rules is pure ([`match_rule`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::plan::TaskPolicy;
use crate::spec::AdoptRule;
use crate::Name;

/// The cgroups a process is in, as `/proc/PID/cgroup` says: hierarchy key
/// (`""` for the unified hierarchy, else the controller list such as
/// `cpu,cpuacct` or `name=systemd`) to path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupMembership {
    /// Hierarchy key to cgroup path.
    pub entries: BTreeMap<String, String>,
}

impl CgroupMembership {
    /// Parses the text of `/proc/PID/cgroup` (`ID:CONTROLLERS:PATH` lines).
    pub fn parse(text: &str) -> Option<Self> {
        let mut entries = BTreeMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let mut parts = line.splitn(3, ':');
            let (_, ctrl, path) = (parts.next()?, parts.next()?, parts.next()?);
            entries.insert(ctrl.to_string(), path.to_string());
        }
        Some(Self { entries })
    }

    /// The unified-hierarchy path, if the process has one.
    pub fn unified(&self) -> Option<&str> {
        self.entries.get("").map(String::as_str)
    }

    /// The path in the v1 hierarchy that carries `controller`.
    pub fn controller(&self, controller: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k.split(',').any(|c| c == controller))
            .map(|(_, v)| v.as_str())
    }
}

/// What atoll knows of one process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Process id.
    pub pid: u32,
    /// Parent's pid.
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    /// `comm`.
    pub comm: String,
    /// `exe` link target, if readable.
    pub exe: Option<PathBuf>,
    /// Start time in clock ticks after boot (tells a reused pid apart).
    pub start_ticks: u64,
    /// A kernel thread (never adopted).
    pub kernel_thread: bool,
    /// Its cgroups.
    pub cgroups: CgroupMembership,
}

/// Why a process could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The process exited.
    #[error("process {0} does not exist")]
    Gone(u32),
    /// A procfs file could not be read.
    #[error("read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A procfs file held something unexpected.
    #[error("parse {path}: {value:?}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What it held.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// A system call failed.
    #[error("{call}({tid}, {value}): {source}")]
    Sys {
        /// The call.
        call: &'static str,
        /// The thread.
        tid: u32,
        /// The argument that failed.
        value: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Lists and describes processes.
pub trait ProcessTable: Send {
    /// All pids (thread-group leaders).
    fn pids(&self) -> Result<Vec<u32>, ProcessError>;
    /// One process.
    fn info(&self, pid: u32) -> Result<ProcessInfo, ProcessError>;
    /// The thread ids of a process.
    fn threads(&self, pid: u32) -> Result<Vec<u32>, ProcessError>;
    /// Just the `comm` of a process: a cheap check for an `exec`. Backends
    /// with a cheaper path than [`info`](Self::info) override it.
    fn comm(&self, pid: u32) -> Result<String, ProcessError> {
        self.info(pid).map(|i| i.comm)
    }
    /// Time thread `tid` has spent runnable but waiting for a CPU since it
    /// started, ns (Linux: `schedstat`'s second field). `None` where the
    /// system does not tell.
    fn run_delay_ns(&self, tid: u32) -> Result<Option<u64>, ProcessError> {
        let _ = tid;
        Ok(None)
    }
}

/// Sets threads' scheduling policies.
pub trait TaskControl: Send {
    /// Applies `policy` to thread `tid`.
    fn set_policy(&mut self, tid: u32, policy: TaskPolicy) -> Result<(), ProcessError>;
    /// The thread's current policy.
    fn policy(&self, tid: u32) -> Result<TaskPolicy, ProcessError>;
    /// Asks for a custom time slice for fair-class thread `tid`
    /// (`Duration::ZERO`: the default slice again). A shorter slice gets a
    /// waking thread on a CPU sooner without changing its share (Linux:
    /// EEVDF's `sched_attr.sched_runtime`, 6.12 and later). Systems without
    /// custom slices refuse it.
    fn set_slice(&mut self, tid: u32, slice: std::time::Duration) -> Result<(), ProcessError> {
        Err(ProcessError::Sys {
            call: "sched_setattr",
            tid,
            value: format!("slice {}us", slice.as_micros()),
            source: std::io::Error::from(std::io::ErrorKind::Unsupported),
        })
    }
}

/// What belongs to no unit: the paper's `kernel` and `shared` SPUs (seed
/// 004, section 2.2). Linux charges a shared page to the first group that
/// touched it, so `shared` is what the kernel keeps for everyone: shared
/// memory and buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemAccounts {
    /// CPU time of kernel threads and interrupt handling, µs.
    pub kernel_cpu_us: u64,
    /// Kernel memory: slab, stacks, page tables, vmalloc, bytes.
    pub kernel_memory_bytes: u64,
    /// Shared memory (`Shmem`) and block buffers, bytes.
    pub shared_memory_bytes: u64,
}

/// Reads the machine-wide accounts.
pub trait SystemMonitor: Send {
    /// The `kernel` and `shared` accounts now.
    fn accounts(&self) -> Result<SystemAccounts, ProcessError>;
}

/// Whether `rule` could match a process of this pid and `comm`, when that
/// is all that is known of it: `false` means it cannot (so nothing more of
/// the process needs reading); rules on anything else could.
pub fn rule_could_match(rule: &AdoptRule, pid: u32, comm: &str) -> bool {
    match rule {
        AdoptRule::Comm(c) => c == comm,
        AdoptRule::Pid(p) => *p == pid,
        AdoptRule::Exe(_) | AdoptRule::Uid(_) | AdoptRule::Cgroup(_) => true,
        AdoptRule::SystemdUnit(_) => false,
    }
}

/// Whether `rule` matches `p`.
pub fn rule_matches(rule: &AdoptRule, p: &ProcessInfo) -> bool {
    match rule {
        AdoptRule::Comm(c) => &p.comm == c,
        AdoptRule::Exe(e) => p.exe.as_ref() == Some(e),
        AdoptRule::Uid(u) => p.uid == *u,
        AdoptRule::Cgroup(c) => {
            let want = c.trim_end_matches('/');
            p.cgroups
                .unified()
                .or_else(|| p.cgroups.controller("cpu"))
                .is_some_and(|have| have.trim_end_matches('/') == want)
        }
        AdoptRule::Pid(pid) => p.pid == *pid,
        // systemd places the unit's processes; atoll moves none.
        AdoptRule::SystemdUnit(_) => false,
    }
}

/// The first unit (in the given order) with a rule matching `p`, and the
/// rule. Kernel threads never match.
pub fn match_rule<'a>(
    units: impl IntoIterator<Item = (&'a Name, &'a [AdoptRule])>,
    p: &ProcessInfo,
) -> Option<(&'a Name, &'a AdoptRule)> {
    if p.kernel_thread {
        return None;
    }
    units
        .into_iter()
        .find_map(|(unit, rules)| rules.iter().find(|r| rule_matches(r, p)).map(|r| (unit, r)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// `/proc/PID/cgroup` is outside input: arbitrary text never panics,
        /// and `ID:CONTROLLERS:PATH` lines parse back to their entries (the
        /// last line of a hierarchy wins). The fuzz target `procfs` runs the
        /// same parser.
        #[test]
        fn cgroup_files_parse_or_fail_cleanly(
            text in any::<String>(),
            lines in proptest::collection::vec(
                (0u32..20, "[a-z,=]{0,12}", "/[^\n\r]{0,20}"), 0..6),
        ) {
            if let Some(m) = CgroupMembership::parse(&text) {
                prop_assert!(m.entries.len() <= text.lines().count());
            }
            let file: String = lines
                .iter()
                .map(|(id, ctrl, path)| format!("{id}:{ctrl}:{path}\n"))
                .collect();
            let want: BTreeMap<String, String> = lines
                .iter()
                .map(|(_, ctrl, path)| (ctrl.clone(), path.clone()))
                .collect();
            prop_assert_eq!(CgroupMembership::parse(&file), Some(CgroupMembership { entries: want }));
        }
    }

    fn proc_(pid: u32, comm: &str, cg: &str) -> ProcessInfo {
        ProcessInfo {
            pid,
            ppid: 1,
            uid: 1000,
            comm: comm.into(),
            exe: Some(PathBuf::from(format!("/usr/bin/{comm}"))),
            start_ticks: 5,
            kernel_thread: false,
            cgroups: CgroupMembership::parse(cg).unwrap(),
        }
    }

    #[test]
    fn parses_v1_and_v2_membership() {
        let m =
            CgroupMembership::parse("4:memory:/a/b\n2:cpu,cpuacct:/c\n1:name=systemd:/\n0::/u\n")
                .unwrap();
        assert_eq!(m.unified(), Some("/u"));
        assert_eq!(m.controller("cpuacct"), Some("/c"));
        assert_eq!(m.controller("memory"), Some("/a/b"));
        assert_eq!(m.controller("blkio"), None);
    }

    #[test]
    fn first_matching_unit_wins_and_kernel_threads_never_match() {
        let web = Name::new("web").unwrap();
        let db = Name::new("db").unwrap();
        let web_rules = vec![AdoptRule::Comm("nginx".into())];
        let db_rules = vec![
            AdoptRule::Uid(1000),
            AdoptRule::Cgroup("/system.slice/pg.service/".into()),
        ];
        let units = || [(&web, web_rules.as_slice()), (&db, db_rules.as_slice())];
        let p = proc_(10, "nginx", "0::/x\n");
        assert_eq!(match_rule(units(), &p).map(|(u, _)| u), Some(&web));
        let mut q = proc_(11, "postgres", "0::/system.slice/pg.service\n");
        q.uid = 0;
        assert_eq!(match_rule(units(), &q), Some((&db, &db_rules[1])));
        q.kernel_thread = true;
        assert_eq!(match_rule(units(), &q), None);
        let exe = AdoptRule::Exe("/usr/bin/nginx".into());
        assert!(rule_matches(&exe, &p));
        assert!(rule_matches(&AdoptRule::Pid(10), &p));
        assert!(!rule_matches(&AdoptRule::Pid(11), &p));
    }

    #[test]
    fn a_name_and_a_pid_rule_out_only_name_and_pid_rules() {
        use crate::spec::AdoptRule;
        assert!(rule_could_match(
            &AdoptRule::Comm("nginx".into()),
            7,
            "nginx"
        ));
        assert!(!rule_could_match(
            &AdoptRule::Comm("nginx".into()),
            7,
            "bash"
        ));
        assert!(rule_could_match(&AdoptRule::Pid(7), 7, "bash"));
        assert!(!rule_could_match(&AdoptRule::Pid(8), 7, "bash"));
        for r in [
            AdoptRule::Uid(33),
            AdoptRule::Exe("/usr/sbin/nginx".into()),
            AdoptRule::Cgroup("/system.slice/x.service".into()),
        ] {
            assert!(rule_could_match(&r, 7, "bash"), "{r:?}");
        }
    }
}
