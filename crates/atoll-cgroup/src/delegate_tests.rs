//! The delegated subtree on a fake systemd-like tree: every write, mkdir
//! and rmdir the daemon's cgroup code makes is recorded, and any outside
//! atoll's root is a violation, except the files of [`TOP_FILES`] in the
//! delegated top and `cgroup.procs` of the cgroup a process is returned to.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use atoll_core::backend::{Actuator, Monitor};
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings, Partition};
use atoll_core::process::CgroupMembership;
use atoll_core::CpuSet;

use super::*;
use crate::testutils::FakeCgroupFs;
use crate::v2::Cgroup2Backend;

/// A [`CgroupFs`] that forwards to the fake and checks each change against
/// where atoll may write.
#[derive(Clone)]
struct Guard {
    fake: FakeCgroupFs,
    root: PathBuf,
    top: PathBuf,
    origins: Vec<PathBuf>,
    changes: Arc<Mutex<Vec<String>>>,
    violations: Arc<Mutex<Vec<String>>>,
}

impl Guard {
    fn check(&self, op: &str, path: &Path, value: &str) {
        let line = format!("{op} {} {value}", path.display());
        self.changes.lock().unwrap().push(line.clone());
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let dir = path.parent().unwrap_or(path);
        let ok = if op == "write" {
            path.starts_with(&self.root)
                || (dir == self.top && TOP_FILES.contains(&name))
                || (dir == self.top.join(SUPERVISOR) && name == "cgroup.procs")
                || (self.origins.iter().any(|o| o == dir) && name == "cgroup.procs")
        } else {
            // mkdir and rmdir: only atoll's own cgroups and the leaf the
            // daemon moves into.
            path.starts_with(&self.root) || path == self.top.join(SUPERVISOR)
        };
        if !ok {
            self.violations.lock().unwrap().push(line);
        }
    }

    fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }
}

impl CgroupFs for Guard {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        self.check("mkdir", path, "");
        self.fake.mkdir(path)
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.check("rmdir", path, "");
        self.fake.rmdir(path)
    }
    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        self.fake.read_to_string(path)
    }
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        self.check("write", path, value);
        self.fake.write(path, value)
    }
    fn exists(&self, path: &Path) -> bool {
        self.fake.exists(path)
    }
    fn child_dirs(&self, path: &Path) -> io::Result<Vec<String>> {
        self.fake.child_dirs(path)
    }
    fn is_delegated(&self, path: &Path) -> bool {
        self.fake.is_delegated(path)
    }
}

const DAEMON: u32 = 100;
const HELPER: u32 = 101;
const NGINX: u32 = 200;

/// A machine as systemd lays it out: controllers enabled down to
/// `system.slice`, `atoll.service` delegated with the daemon and a helper
/// in it, `nginx.service` with nginx.
fn systemd_machine() -> (FakeCgroupFs, PathBuf) {
    let (fake, mount) = FakeCgroupFs::v2_machine(&["cpuset", "cpu", "io", "memory", "pids"]);
    let all = "+cpuset +cpu +io +memory +pids";
    fake.write(&mount.join("cgroup.subtree_control"), all)
        .unwrap();
    let slice = mount.join("system.slice");
    fake.mkdir(&slice).unwrap();
    fake.write(&slice.join("cgroup.subtree_control"), all)
        .unwrap();
    for unit in ["atoll.service", "nginx.service"] {
        fake.mkdir(&slice.join(unit)).unwrap();
    }
    let top = slice.join("atoll.service");
    for pid in [DAEMON, HELPER] {
        fake.write(&top.join("cgroup.procs"), &pid.to_string())
            .unwrap();
    }
    fake.write(
        &slice.join("nginx.service/cgroup.procs"),
        &NGINX.to_string(),
    )
    .unwrap();
    fake.mark_delegated(&top);
    (fake, mount)
}

fn set(s: &str) -> Option<CpuSet> {
    Some(CpuSet::parse(s).unwrap())
}

fn guard(fake: &FakeCgroupFs, mount: &Path, d: &Delegation) -> Guard {
    Guard {
        fake: fake.clone(),
        root: mount.join(d.managed()),
        top: d.top_dir(),
        origins: vec![mount.join("system.slice/nginx.service")],
        changes: Arc::default(),
        violations: Arc::default(),
    }
}

#[test]
fn find_needs_a_service_a_cgroup_and_the_delegation_mark() {
    let (fake, mount) = systemd_machine();
    let own = "/system.slice/atoll.service";
    assert_eq!(
        find(&mount, own, None, &fake),
        Err(NotDelegated::NotAService)
    );
    assert_eq!(
        find(&mount, own, Some(""), &fake),
        Err(NotDelegated::NotAService)
    );
    assert_eq!(
        find(&mount, "/", Some("f00"), &fake),
        Err(NotDelegated::TopCgroup)
    );
    assert_eq!(
        find(&mount, "/system.slice/nginx.service", Some("f00"), &fake),
        Err(NotDelegated::NotMarked(
            mount.join("system.slice/nginx.service")
        ))
    );
    let d = find(&mount, own, Some("f00"), &fake).unwrap();
    assert_eq!(d.top(), "system.slice/atoll.service");
    assert_eq!(d.unit(), "atoll.service");
    assert_eq!(d.managed(), "system.slice/atoll.service/managed");
    // Already in the leaf (DelegateSubgroup=supervisor, or moved before).
    let again = find(&mount, &format!("{own}/supervisor"), Some("f00"), &fake).unwrap();
    assert_eq!(again, d);
    assert!(d.is_below("system.slice/atoll.service/managed"));
    assert!(d.is_below("/system.slice/atoll.service/a/b"));
    assert!(!d.is_below("system.slice/atoll.service"));
    assert!(!d.is_below("system.slice/atoll.services/x"));
    assert!(!d.is_below("atoll"));
}

#[test]
fn a_delegated_daemon_writes_only_in_its_subtree() {
    let (fake, mount) = systemd_machine();
    let above: Vec<(PathBuf, String)> = [
        mount.join("cgroup.subtree_control"),
        mount.join("system.slice/cgroup.subtree_control"),
        mount.join("system.slice/nginx.service/cgroup.procs"),
    ]
    .into_iter()
    .map(|f| {
        let v = fake.get(&f);
        (f, v)
    })
    .collect();
    let d = find(&mount, "/system.slice/atoll.service", Some("f00"), &fake).unwrap();
    let g = guard(&fake, &mount, &d);

    // The daemon leaves the top for its leaf, with whatever shared it.
    let mut moved = d.enter_leaf(&g).unwrap();
    moved.sort_unstable();
    assert_eq!(moved, [DAEMON, HELPER]);
    assert_eq!(fake.get(&d.top_dir().join("cgroup.procs")).trim(), "");
    assert_eq!(
        fake.get(&d.top_dir().join("supervisor/cgroup.procs")),
        "100\n101\n"
    );

    // The whole life of a hierarchy: build, adopt, lend, return, remove.
    let mut b = Cgroup2Backend::new(&mount, &d.managed(), g.clone()).unwrap();
    b.set_delegation(Some(d.clone())).unwrap();
    b.set_rmdir_retry(1, std::time::Duration::ZERO);
    let root = GroupSettings {
        cpus: set("0-3"),
        mems: set("0"),
        ..Default::default()
    };
    let host = GroupSettings {
        cpus: set("0"),
        ..Default::default()
    };
    let island = GroupSettings {
        cpus: set("1-3"),
        partition: Some(Partition::Root),
        cpu_weight: Some(200),
        ..Default::default()
    };
    let unit = GroupSettings {
        cpus: set("1-2"),
        cpu_max: Some(CpuMax {
            quota_us: 150_000,
            period_us: 100_000,
        }),
        io_weight: Some(300),
        ..Default::default()
    };
    let web = GroupPath::from_relative("web");
    let api = GroupPath::from_relative("web/api");
    for (p, s) in [
        (GroupPath::root(), &root),
        (GroupPath::host(), &host),
        (web.clone(), &island),
        (api.clone(), &unit),
    ] {
        b.apply(&p, s).unwrap();
    }
    assert_eq!(
        fake.get(&d.top_dir().join("cgroup.subtree_control"))
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["cpuset", "cpu", "io", "memory"]
    );
    assert_eq!(
        b.added_parent_controllers(),
        ["cpuset", "cpu", "io", "memory"]
    );
    assert_eq!(
        fake.get(&mount.join(d.managed()).join("web/cpuset.cpus.partition"))
            .trim(),
        "root"
    );
    b.move_process(NGINX, &api).unwrap();
    assert_eq!(b.processes(&api).unwrap(), [NGINX]);
    let origin = CgroupMembership::parse("0::/system.slice/nginx.service\n").unwrap();
    b.restore_process(NGINX, &origin).unwrap();
    for p in [api, web, GroupPath::host(), GroupPath::root()] {
        b.remove(&p).unwrap();
    }
    b.restore_parent_controllers().unwrap();

    assert_eq!(g.violations(), Vec::<String>::new());
    assert!(!fake.exists(&mount.join(d.managed())));
    assert_eq!(
        fake.get(&d.top_dir().join("cgroup.subtree_control")).trim(),
        ""
    );
    assert_eq!(
        fake.get(&mount.join("system.slice/nginx.service/cgroup.procs")),
        "200\n"
    );
    for (f, before) in above {
        assert_eq!(fake.get(&f), before, "{}", f.display());
    }
    let changes = g.changes.lock().unwrap().len();
    assert!(changes > 20, "only {changes} changes recorded");
    let s = b.root_location();
    let want = format!(
        "{} (delegated by systemd to atoll.service; the daemon runs in ",
        mount.join(d.managed()).display()
    );
    assert!(s.starts_with(&want), "{s}");
}

#[test]
fn the_guard_catches_writes_above_the_root_and_knobs_in_the_top() {
    let (fake, mount) = systemd_machine();
    let d = find(&mount, "/system.slice/atoll.service", Some("f00"), &fake).unwrap();
    let g = guard(&fake, &mount, &d);
    // A plain root next to the unit, as a daemon that ignored the
    // delegation would make: its parent is the mount's top cgroup.
    let mut b = Cgroup2Backend::new(&mount, "atoll", g.clone()).unwrap();
    let _ = b.apply(
        &GroupPath::root(),
        &GroupSettings {
            cpus: set("0-3"),
            ..Default::default()
        },
    );
    let _ = g.write(&d.top_dir().join("cpu.weight"), "50");
    let v = g.violations();
    assert!(
        v.iter()
            .any(|l| l.starts_with(&format!("mkdir {}", mount.join("atoll").display()))),
        "{v:?}"
    );
    assert!(
        v.iter().any(|l| l.contains("atoll.service/cpu.weight")),
        "{v:?}"
    );
}

#[test]
fn a_root_outside_the_delegated_top_is_refused() {
    let (fake, mount) = systemd_machine();
    let d = find(&mount, "/system.slice/atoll.service", Some("f00"), &fake).unwrap();
    let mut b = Cgroup2Backend::new(&mount, "atoll", fake.clone()).unwrap();
    assert!(b.set_delegation(Some(d.clone())).is_err());
    let mut b = Cgroup2Backend::new(&mount, d.top(), fake).unwrap();
    assert!(b.set_delegation(Some(d)).is_err());
}
