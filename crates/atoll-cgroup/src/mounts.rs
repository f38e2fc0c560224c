//! Finding the cgroup hierarchies and choosing a backend.
//!
//! [`detect`] parses `/proc/self/mountinfo` (the path is injected) into the
//! cgroup2 mount(s) and the v1 hierarchies with their controllers. [`choose`]
//! picks a backend: `auto` prefers cgroup2 when its root lists the controllers
//! atoll needs (`cpuset cpu memory`; `io` optional) and is writable, else
//! cgroup1 when writable `cpuset` and `cpu` hierarchies exist (`cpuacct`,
//! `memory`, `blkio`, `freezer` and `net_prio` are used when mounted and writable). Reading
//! `cgroup.controllers` goes through a [`CgroupFs`] and the permission check
//! through a closure, so both can be faked. A refusal names the mount and the
//! missing piece and points at `--backend sim`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use atoll_core::backend::BackendKind;

use crate::error::CgroupError;
use crate::fs::CgroupFs;

/// Controllers the cgroup2 backend requires in `cgroup.controllers`.
pub const V2_REQUIRED: [&str; 3] = ["cpuset", "cpu", "memory"];
/// Controllers the cgroup2 backend uses when present.
pub const V2_OPTIONAL: [&str; 1] = ["io"];

/// v1 controller names (anything else in a v1 mount's options is an option).
const V1_CONTROLLERS: &[&str] = &[
    "cpuset",
    "cpu",
    "cpuacct",
    "blkio",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "perf_event",
    "net_prio",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];

/// One cgroup filesystem mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMount {
    /// Where it is mounted.
    pub path: PathBuf,
    /// The hierarchy path shown at the mount point (`/` unless bind-mounted
    /// or in a cgroup namespace).
    pub root: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A v1 hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V1Mount {
    /// The mount.
    pub mount: CgroupMount,
    /// Its controllers, as named in `/proc/PID/cgroup` (`cpu`, `cpuacct`,
    /// `name=systemd`).
    pub controllers: Vec<String>,
}

/// The cgroup mounts of this mount namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mounts {
    /// cgroup2 mounts, in mountinfo order.
    pub v2: Vec<CgroupMount>,
    /// v1 hierarchies, in mountinfo order.
    pub v1: Vec<V1Mount>,
}

impl Mounts {
    /// The cgroup2 mount to use: the first showing the hierarchy's root.
    pub fn unified(&self) -> Option<&CgroupMount> {
        self.v2
            .iter()
            .find(|m| m.root == "/")
            .or_else(|| self.v2.first())
    }

    /// The v1 hierarchy carrying `controller` (`"cpu"`, `"name=systemd"`).
    pub fn v1_for(&self, controller: &str) -> Option<&V1Mount> {
        let mut it = self
            .v1
            .iter()
            .filter(|m| m.controllers.iter().any(|c| c == controller));
        let first = it.next()?;
        Some(
            std::iter::once(first)
                .chain(it)
                .find(|m| m.mount.root == "/")
                .unwrap_or(first),
        )
    }

    /// No cgroup filesystem at all.
    pub fn is_empty(&self) -> bool {
        self.v2.is_empty() && self.v1.is_empty()
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let d = &b[i + 1..i + 4];
            if d.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(v) = u8::try_from(v) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses mountinfo text; `path` is only used in errors.
pub fn parse_mountinfo(text: &str, path: &Path) -> Result<Mounts, CgroupError> {
    let mut mounts = Mounts::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |reason: &str| CgroupError::Mountinfo {
            path: path.to_path_buf(),
            line: i + 1,
            value: line.to_string(),
            reason: reason.to_string(),
        };
        let fields: Vec<&str> = line.split(' ').collect();
        let sep = fields
            .iter()
            .skip(6)
            .position(|f| *f == "-")
            .map(|p| p + 6)
            .ok_or_else(|| err("no \" - \" separator after the optional fields"))?;
        let (Some(fstype), Some(_source)) = (fields.get(sep + 1), fields.get(sep + 2)) else {
            return Err(err("missing filesystem type or source"));
        };
        if *fstype != "cgroup" && *fstype != "cgroup2" {
            continue;
        }
        let super_opts: Vec<&str> = fields
            .get(sep + 3)
            .map(|s| s.split(',').collect())
            .unwrap_or_default();
        let mount_opts: Vec<&str> = fields[5].split(',').collect();
        let mount = CgroupMount {
            path: PathBuf::from(unescape(fields[4])),
            root: unescape(fields[3]),
            read_only: mount_opts.contains(&"ro") || super_opts.contains(&"ro"),
        };
        if *fstype == "cgroup2" {
            mounts.v2.push(mount);
        } else {
            let controllers: Vec<String> = super_opts
                .iter()
                .filter(|o| V1_CONTROLLERS.contains(o) || o.starts_with("name="))
                .map(|o| o.to_string())
                .collect();
            mounts.v1.push(V1Mount { mount, controllers });
        }
    }
    Ok(mounts)
}

/// Reads and parses a mountinfo file (normally `/proc/self/mountinfo`).
pub fn detect(mountinfo: &Path) -> Result<Mounts, CgroupError> {
    let text = std::fs::read_to_string(mountinfo)
        .map_err(|e| CgroupError::io("read", mountinfo, None, e))?;
    parse_mountinfo(&text, mountinfo)
}

/// The backend asked for on the command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Requested {
    /// cgroup2 if usable, else cgroup1.
    #[default]
    Auto,
    /// cgroup2 only.
    Cgroup2,
    /// cgroup1 only.
    Cgroup1,
}

impl Requested {
    /// The command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Cgroup2 => "cgroup2",
            Self::Cgroup1 => "cgroup1",
        }
    }
}

impl fmt::Display for Requested {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Requested {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "cgroup2" => Ok(Self::Cgroup2),
            "cgroup1" => Ok(Self::Cgroup1),
            _ => Err(format!(
                "unknown cgroup backend {s:?} (expected auto, cgroup2 or cgroup1)"
            )),
        }
    }
}

/// The v1 hierarchies the cgroup1 backend manages. `cpu` and `cpuacct` may be
/// the same path (co-mounted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V1Paths {
    /// The `cpuset` hierarchy.
    pub cpuset: PathBuf,
    /// The `cpu` hierarchy.
    pub cpu: PathBuf,
    /// The `cpuacct` hierarchy, if mounted and writable.
    pub cpuacct: Option<PathBuf>,
    /// The `memory` hierarchy, if mounted and writable.
    pub memory: Option<PathBuf>,
    /// The `blkio` hierarchy, if mounted and writable.
    pub blkio: Option<PathBuf>,
    /// The `freezer` hierarchy, if mounted and writable (for
    /// `GroupSettings::frozen`).
    pub freezer: Option<PathBuf>,
    /// The `net_prio` hierarchy, if mounted and writable: unit groups are
    /// made there too, so that a network island can give their sockets a
    /// priority per interface (`net_prio.ifpriomap`, docs/netisland.md).
    pub net_prio: Option<PathBuf>,
}

impl V1Paths {
    /// Each managed hierarchy once, with the controller that names it in
    /// `/proc/PID/cgroup`, cpuset first.
    pub fn hierarchies(&self) -> Vec<(&'static str, &Path)> {
        let mut out: Vec<(&'static str, &Path)> = vec![("cpuset", &self.cpuset)];
        let rest = [
            ("cpu", Some(&self.cpu)),
            ("cpuacct", self.cpuacct.as_ref()),
            ("memory", self.memory.as_ref()),
            ("blkio", self.blkio.as_ref()),
            ("freezer", self.freezer.as_ref()),
            ("net_prio", self.net_prio.as_ref()),
        ];
        for (name, p) in rest {
            if let Some(p) = p {
                if !out.iter().any(|(_, q)| *q == p.as_path()) {
                    out.push((name, p));
                }
            }
        }
        out
    }
}

/// The backend [`choose`] settled on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The unified hierarchy at `mount`, with the controllers its root offers.
    Cgroup2 {
        /// The cgroup2 mount point.
        mount: PathBuf,
        /// `cgroup.controllers` of the mount's root.
        controllers: Vec<String>,
    },
    /// The v1 hierarchies.
    Cgroup1(V1Paths),
}

impl Choice {
    /// Which backend.
    pub fn kind(&self) -> BackendKind {
        match self {
            Self::Cgroup2 { .. } => BackendKind::Cgroup2,
            Self::Cgroup1(_) => BackendKind::Cgroup1,
        }
    }
}

fn not_writable(what: &str, path: &Path) -> String {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    format!(
        "{what} at {} is not writable by uid {uid} (atoll must run as root or be delegated the hierarchy)",
        path.display()
    )
}

fn try_v2(
    mounts: &Mounts,
    fs: &dyn CgroupFs,
    writable: &dyn Fn(&Path) -> bool,
) -> Result<Choice, String> {
    let m = mounts
        .unified()
        .ok_or_else(|| "no cgroup2 filesystem is mounted".to_string())?;
    let file = m.path.join("cgroup.controllers");
    let text = fs
        .read_to_string(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let controllers: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    let missing: Vec<&str> = V2_REQUIRED
        .iter()
        .copied()
        .filter(|c| !controllers.iter().any(|h| h == c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "cgroup2 at {} lacks controller(s) {} in cgroup.controllers ({:?}); they may be bound to cgroup v1 hierarchies",
            m.path.display(),
            missing.join(", "),
            text.trim()
        ));
    }
    if m.read_only {
        return Err(format!(
            "cgroup2 at {} is mounted read-only",
            m.path.display()
        ));
    }
    if !writable(&m.path) {
        return Err(not_writable("cgroup2", &m.path));
    }
    Ok(Choice::Cgroup2 {
        mount: m.path.clone(),
        controllers,
    })
}

fn try_v1(mounts: &Mounts, writable: &dyn Fn(&Path) -> bool) -> Result<Choice, String> {
    let usable = |c: &str| -> Result<PathBuf, String> {
        let m = mounts
            .v1_for(c)
            .ok_or_else(|| format!("no cgroup v1 hierarchy has the {c} controller"))?;
        if m.mount.read_only {
            return Err(format!(
                "cgroup v1 {c} hierarchy at {} is mounted read-only",
                m.mount.path.display()
            ));
        }
        if !writable(&m.mount.path) {
            return Err(not_writable(
                &format!("cgroup v1 {c} hierarchy"),
                &m.mount.path,
            ));
        }
        Ok(m.mount.path.clone())
    };
    let (cpuset, cpu) = match (usable("cpuset"), usable("cpu")) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            let errs: Vec<String> = [a.err(), b.err()].into_iter().flatten().collect();
            return Err(errs.join("; "));
        }
    };
    Ok(Choice::Cgroup1(V1Paths {
        cpuset,
        cpu,
        cpuacct: usable("cpuacct").ok(),
        memory: usable("memory").ok(),
        blkio: usable("blkio").ok(),
        freezer: usable("freezer").ok(),
        net_prio: usable("net_prio").ok(),
    }))
}

/// Picks the backend for `requested` among `mounts`. `fs` reads
/// `cgroup.controllers`; `writable` says whether a mount directory may be
/// written (use [`crate::fs::can_write`] on a real system).
pub fn choose(
    requested: Requested,
    mounts: &Mounts,
    fs: &dyn CgroupFs,
    writable: &dyn Fn(&Path) -> bool,
) -> Result<Choice, CgroupError> {
    let unusable = |reasons: Vec<String>| CgroupError::Unusable {
        requested: requested.as_str(),
        reasons,
    };
    if mounts.is_empty() {
        return Err(unusable(
            vec!["no cgroup filesystem is mounted".to_string()],
        ));
    }
    match requested {
        Requested::Cgroup2 => try_v2(mounts, fs, writable).map_err(|r| unusable(vec![r])),
        Requested::Cgroup1 => try_v1(mounts, writable).map_err(|r| unusable(vec![r])),
        Requested::Auto => match try_v2(mounts, fs, writable) {
            Ok(c) => Ok(c),
            Err(r2) => try_v1(mounts, writable).map_err(|r1| unusable(vec![r2, r1])),
        },
    }
}

#[cfg(test)]
#[path = "mounts_tests.rs"]
mod tests;
