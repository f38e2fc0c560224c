//! Living in a cgroup subtree that systemd delegated (`Delegate=` on
//! atoll's service).
//!
//! systemd owns the cgroup tree. A unit with `Delegate=` gets its cgroup
//! (the *delegated top*, e.g. `/system.slice/atoll.service`) to manage
//! below: atoll may create and remove sub-cgroups there and owns them, and
//! in the top itself it may write only `cgroup.procs`, `cgroup.threads` and
//! `cgroup.subtree_control` ([`TOP_FILES`]); everything above belongs to
//! systemd (`shared/research/systemd.md`, the delegation rules).
//!
//! A daemon systemd started is in the top itself. The kernel lets a cgroup
//! enable controllers for its children only while it holds no process, so
//! the daemon first moves itself (and anything else in the top) into a
//! leaf, `<top>/supervisor` ([`Delegation::enter_leaf`]); systemd 254's
//! `DelegateSubgroup=supervisor` would start it there, Debian 12's 252 does
//! not. atoll's root is then `<top>/managed` ([`Delegation::managed`]), and
//! the cgroup2 backend enables its controllers in the top's
//! `cgroup.subtree_control` as the root's parent, the only file above its
//! root it writes.
//!
//! [`find`] tells whether the daemon runs as such a service: systemd sets
//! `INVOCATION_ID` in a service's environment and marks a delegated unit's
//! cgroup with the `trusted.delegate` extended attribute
//! ([`crate::CgroupFs::is_delegated`]). A daemon started from a shell has
//! neither and keeps a plain root under the mount.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::CgroupError;
use crate::fs::CgroupFs;

/// The leaf the daemon moves itself into.
pub const SUPERVISOR: &str = "supervisor";
/// atoll's root below the delegated top.
pub const MANAGED: &str = "managed";
/// The only files atoll writes in the delegated top itself.
pub const TOP_FILES: [&str; 3] = ["cgroup.procs", "cgroup.threads", "cgroup.subtree_control"];

/// A cgroup subtree systemd delegated to this daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delegation {
    mount: PathBuf,
    top: String,
}

/// Why the daemon is not treated as a delegated service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotDelegated {
    /// No `INVOCATION_ID`: not started by systemd as a service.
    NotAService,
    /// The daemon is in the top cgroup of the hierarchy.
    TopCgroup,
    /// Its cgroup carries no delegation mark (the unit has no `Delegate=`).
    NotMarked(PathBuf),
}

impl fmt::Display for NotDelegated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAService => f.write_str("not started by systemd (no INVOCATION_ID)"),
            Self::TopCgroup => f.write_str("the daemon is in the top cgroup"),
            Self::NotMarked(p) => write!(
                f,
                "{} is not delegated (the unit has no Delegate=)",
                p.display()
            ),
        }
    }
}

/// The delegated subtree this daemon runs in, if it is a delegated service:
/// `own_cgroup` is its cgroup v2 path from `/proc/self/cgroup` (`/system.slice/
/// atoll.service`, or `.../supervisor` when it is already in the leaf), and
/// `invocation_id` the `INVOCATION_ID` variable systemd sets for services.
pub fn find(
    mount: &Path,
    own_cgroup: &str,
    invocation_id: Option<&str>,
    fs: &dyn CgroupFs,
) -> Result<Delegation, NotDelegated> {
    if invocation_id.is_none_or(str::is_empty) {
        return Err(NotDelegated::NotAService);
    }
    let mut top = own_cgroup.trim().trim_matches('/').to_string();
    if top.is_empty() {
        return Err(NotDelegated::TopCgroup);
    }
    // Already in the leaf: started with DelegateSubgroup=supervisor, or a
    // daemon that moved itself.
    if let Some(parent) = top.strip_suffix(&format!("/{SUPERVISOR}")) {
        if fs.is_delegated(&mount.join(parent)) {
            top = parent.to_string();
        }
    }
    let dir = mount.join(&top);
    if !fs.is_delegated(&dir) {
        return Err(NotDelegated::NotMarked(dir));
    }
    Ok(Delegation {
        mount: mount.to_path_buf(),
        top,
    })
}

impl Delegation {
    /// A delegation of `top` (relative to `mount`, e.g.
    /// `system.slice/atoll.service`), as [`find`] would return it.
    pub fn new(mount: impl Into<PathBuf>, top: &str) -> Self {
        Self {
            mount: mount.into(),
            top: top.trim_matches('/').to_string(),
        }
    }

    /// The delegated top, relative to the mount.
    pub fn top(&self) -> &str {
        &self.top
    }

    /// The delegated top's directory.
    pub fn top_dir(&self) -> PathBuf {
        self.mount.join(&self.top)
    }

    /// The unit's cgroup name (`atoll.service`).
    pub fn unit(&self) -> &str {
        self.top.rsplit('/').next().unwrap_or(&self.top)
    }

    /// The daemon's leaf, relative to the mount.
    pub fn supervisor(&self) -> String {
        format!("{}/{SUPERVISOR}", self.top)
    }

    /// atoll's root, relative to the mount.
    pub fn managed(&self) -> String {
        format!("{}/{MANAGED}", self.top)
    }

    /// Whether `rel` (a path relative to the mount) is strictly below the
    /// delegated top.
    pub fn is_below(&self, rel: &str) -> bool {
        rel.trim_matches('/')
            .strip_prefix(&self.top)
            .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1)
    }

    /// Moves every process of the delegated top (the daemon among them)
    /// into `<top>/supervisor`, creating it, so that the top holds no
    /// process and may enable controllers for its children. Returns the
    /// pids moved. A process that exits meanwhile is skipped.
    pub fn enter_leaf(&self, fs: &dyn CgroupFs) -> Result<Vec<u32>, CgroupError> {
        let top = self.top_dir();
        let leaf = top.join(SUPERVISOR);
        if !fs.exists(&leaf) {
            match fs.mkdir(&leaf) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(CgroupError::io("mkdir", leaf, None, e)),
            }
        }
        let procs = top.join("cgroup.procs");
        let target = leaf.join("cgroup.procs");
        let mut moved = Vec::new();
        // A process forked meanwhile lands in the top too: a few rounds.
        for _ in 0..3 {
            let text = fs
                .read_to_string(&procs)
                .map_err(|e| CgroupError::io("read", &procs, None, e))?;
            let pids: Vec<u32> = text
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                let v = pid.to_string();
                match fs.write(&target, &v) {
                    Ok(()) => moved.push(pid),
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => return Err(CgroupError::io("write", &target, Some(&v), e)),
                }
            }
        }
        Ok(moved)
    }
}

impl fmt::Display for Delegation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "delegated by systemd to {}; the daemon runs in {}",
            self.unit(),
            self.mount.join(self.supervisor()).display()
        )
    }
}

#[cfg(test)]
#[path = "delegate_tests.rs"]
mod tests;
