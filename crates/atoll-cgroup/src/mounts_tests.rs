use std::path::{Path, PathBuf};

use super::*;
use crate::fs::RealFs;

/// `/proc/self/mountinfo` of the development machine: v1 controllers each
/// on their own hierarchy, and an empty cgroup2 at `/sys/fs/cgroup/unified`.
const HYBRID: &str = "\
22 1 253:0 / / rw,relatime - ext4 /dev/vda rw
23 22 0:21 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

/// A systemd machine with only the unified hierarchy.
const PURE_V2: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
25 24 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

/// No cgroup filesystem at all.
const NONE: &str = "\
22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
23 22 0:5 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
";

/// An older systemd layout: `cpu,cpuacct` co-mounted (read-only here),
/// optional fields, an escaped path.
const COMOUNTED: &str = "\
30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime shared:12 master:3 - cgroup cgroup rw,cpu,cpuacct
31 25 0:27 / /sys/fs/cgroup/cpuset rw,nosuid shared:13 - cgroup cgroup rw,cpuset,clone_children
32 25 0:28 /docker/abc /sys/fs/cgroup/my\\040mem rw shared:14 - cgroup cgroup rw,memory
33 25 0:29 / /sys/fs/cgroup/systemd rw shared:15 - cgroup cgroup rw,xattr,name=systemd
";

fn parse(text: &str) -> Mounts {
    parse_mountinfo(text, Path::new("/proc/self/mountinfo")).unwrap()
}

#[test]
fn detects_this_machines_hybrid_layout() {
    let m = parse(HYBRID);
    assert_eq!(m.v2.len(), 1);
    assert_eq!(
        m.unified().unwrap().path,
        PathBuf::from("/sys/fs/cgroup/unified")
    );
    assert_eq!(m.v1.len(), 9);
    let cpu = m.v1_for("cpu").unwrap();
    assert_eq!(cpu.mount.path, PathBuf::from("/sys/fs/cgroup/cpu"));
    assert_eq!(cpu.controllers, ["cpu"]);
    assert!(!cpu.mount.read_only);
    assert_eq!(
        m.v1_for("name=systemd").unwrap().mount.path,
        PathBuf::from("/sys/fs/cgroup/systemd")
    );
    assert!(m.v1_for("rdma").is_none());
}

#[test]
fn detects_pure_v2_and_nothing() {
    let m = parse(PURE_V2);
    assert!(m.v1.is_empty());
    assert_eq!(m.unified().unwrap().path, PathBuf::from("/sys/fs/cgroup"));
    assert!(parse(NONE).is_empty());
}

#[test]
fn detects_comounted_readonly_and_escaped() {
    let m = parse(COMOUNTED);
    let cpu = m.v1_for("cpuacct").unwrap();
    assert_eq!(cpu.controllers, ["cpu", "cpuacct"]);
    assert!(cpu.mount.read_only);
    assert_eq!(m.v1_for("cpuset").unwrap().controllers, ["cpuset"]);
    let mem = m.v1_for("memory").unwrap();
    assert_eq!(mem.mount.path, PathBuf::from("/sys/fs/cgroup/my mem"));
    assert_eq!(mem.mount.root, "/docker/abc");
    assert_eq!(
        m.v1_for("name=systemd").unwrap().controllers,
        ["name=systemd"]
    );
}

#[test]
fn malformed_lines_name_line_and_content() {
    let text = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n23 1 0:5 / /x rw shared:1\n";
    let e = parse_mountinfo(text, Path::new("/mi")).unwrap_err();
    match &e {
        CgroupError::Mountinfo { line, value, .. } => {
            assert_eq!(*line, 2);
            assert_eq!(value, "23 1 0:5 / /x rw shared:1");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().starts_with("/mi:2:"), "{e}");
    assert!(parse_mountinfo("1 2 3 4 5 6 -", Path::new("/mi")).is_err());
    let e = detect(Path::new("/nonexistent/mountinfo")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/mountinfo"), "{e}");
}

#[test]
fn detect_reads_the_injected_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("mountinfo");
    std::fs::write(&p, HYBRID).unwrap();
    assert_eq!(detect(&p).unwrap(), parse(HYBRID));
}

/// A fake `/sys/fs/cgroup` in a temp dir with the mountinfo describing it.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn v2(&self, rel: &str, controllers: &str) -> String {
        std::fs::create_dir_all(self.p(rel)).unwrap();
        std::fs::write(self.p(rel).join("cgroup.controllers"), controllers).unwrap();
        format!(
            "41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw\n",
            self.p(rel).display()
        )
    }

    fn v1(&self, rel: &str, opts: &str) -> String {
        std::fs::create_dir_all(self.p(rel)).unwrap();
        format!(
            "32 31 0:29 / {} {opts},relatime - cgroup cgroup rw,{rel}\n",
            self.p(rel).display()
        )
    }
}

fn all(_: &Path) -> bool {
    true
}

#[test]
fn auto_prefers_v2_with_controllers() {
    let t = Tree::new();
    let text = t.v2("unified", "cpuset cpu io memory pids\n") + &t.v1("cpuset", "rw");
    let c = choose(Requested::Auto, &parse(&text), &RealFs, &all).unwrap();
    assert_eq!(c.kind(), BackendKind::Cgroup2);
    match c {
        Choice::Cgroup2 { mount, controllers } => {
            assert_eq!(mount, t.p("unified"));
            assert!(controllers.contains(&"io".to_string()));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn auto_falls_back_to_v1_on_this_machines_layout() {
    let t = Tree::new();
    let mut text = t.v2("unified", "hugetlb\n");
    for c in ["cpu", "cpuacct", "cpuset", "memory", "blkio"] {
        text += &t.v1(c, "rw");
    }
    let c = choose(Requested::Auto, &parse(&text), &RealFs, &all).unwrap();
    let Choice::Cgroup1(p) = c else {
        panic!("{c:?}")
    };
    assert_eq!(p.cpuset, t.p("cpuset"));
    assert_eq!(p.cpuacct, Some(t.p("cpuacct")));
    assert_eq!(p.hierarchies().len(), 5);
    // Explicit cgroup2 names the missing controllers.
    let e = choose(Requested::Cgroup2, &parse(&text), &RealFs, &all).unwrap_err();
    let s = e.to_string();
    assert!(s.contains("cpuset, cpu, memory"), "{s}");
    assert!(s.contains(&t.p("unified").display().to_string()), "{s}");
    assert!(s.contains("--backend sim"), "{s}");
}

#[test]
fn v1_needs_cpuset_and_cpu_and_skips_unwritable_extras() {
    let t = Tree::new();
    let text = t.v1("cpuset", "rw") + &t.v1("memory", "rw");
    let e = choose(Requested::Cgroup1, &parse(&text), &RealFs, &all).unwrap_err();
    assert!(e.to_string().contains("cpu controller"), "{e}");

    let text = text + &t.v1("cpu", "rw");
    let mem = t.p("memory");
    let c = choose(Requested::Cgroup1, &parse(&text), &RealFs, &|p: &Path| {
        p != mem.as_path()
    })
    .unwrap();
    let Choice::Cgroup1(p) = c else {
        panic!("{c:?}")
    };
    assert_eq!(p.memory, None);
    assert_eq!(p.blkio, None);
}

#[test]
fn comounted_cpu_is_one_hierarchy() {
    let t = Tree::new();
    std::fs::create_dir_all(t.p("cpu,cpuacct")).unwrap();
    let text = t.v1("cpuset", "rw")
        + &format!(
            "30 25 0:26 / {} rw - cgroup cgroup rw,cpu,cpuacct\n",
            t.p("cpu,cpuacct").display()
        );
    let Choice::Cgroup1(p) = choose(Requested::Auto, &parse(&text), &RealFs, &all).unwrap() else {
        panic!()
    };
    assert_eq!(p.cpu, p.cpuacct.clone().unwrap());
    let names: Vec<_> = p.hierarchies().iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["cpuset", "cpu"]);
}

#[test]
fn refusals_say_why() {
    let t = Tree::new();
    let text = t.v2("unified", "cpuset cpu memory") + &t.v1("cpuset", "ro");
    let none = |_: &Path| false;
    let e = choose(Requested::Auto, &parse(&text), &RealFs, &none).unwrap_err();
    let s = e.to_string();
    assert!(s.contains("not writable by uid"), "{s}");
    assert!(s.contains("read-only"), "{s}");
    assert!(s.starts_with("cannot use the auto backend"), "{s}");

    let e = choose(Requested::Auto, &parse(NONE), &RealFs, &all).unwrap_err();
    assert!(e.to_string().contains("no cgroup filesystem"), "{e}");

    // cgroup.controllers unreadable.
    let text = "41 31 0:38 / /nonexistent/cg rw - cgroup2 cgroup2 rw\n";
    let e = choose(Requested::Cgroup2, &parse(text), &RealFs, &all).unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot read /nonexistent/cg/cgroup.controllers"),
        "{e}"
    );
}

#[test]
fn requested_parses() {
    assert_eq!("cgroup1".parse::<Requested>().unwrap(), Requested::Cgroup1);
    assert_eq!("auto".parse::<Requested>().unwrap().to_string(), "auto");
    assert!("sim".parse::<Requested>().is_err());
}

mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// mountinfo is outside input: arbitrary text never panics, and a
        /// cgroup2 line with an arbitrary (escaped) mount point is read back.
        /// The fuzz target `cgroup_stats` runs the same parser.
        #[test]
        fn mountinfo_parses_or_fails_cleanly(
            text in any::<String>(),
            fields in proptest::collection::vec("[a-z0-9/,=:\\-]{0,12}", 0..14),
            dir in "[a-z ]{1,12}",
        ) {
            let path = Path::new("/proc/self/mountinfo");
            let _ = parse_mountinfo(&text, path);
            let _ = parse_mountinfo(&fields.join(" "), path);
            let escaped = dir.replace(' ', "\\040");
            let line = format!("30 24 0:26 / /sys/fs/{escaped} rw,relatime shared:9 - cgroup2 cgroup2 rw\n");
            let m = parse_mountinfo(&line, path).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(m.v2.len(), 1);
            prop_assert_eq!(&m.v2[0].path, &PathBuf::from(format!("/sys/fs/{dir}")));
        }
    }
}
