//! The cgroup1 backend against the running kernel.
//!
//! Runs only as root with writable v1 `cpuset` and `cpu` hierarchies; prints
//! "skipped: ..." otherwise. Everything happens under a root group named
//! `atoll-test-<pid>-<nanos>`, the only process moved is a `sleep` this test
//! starts, and a drop guard kills it and removes the groups even if an
//! assertion fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{SystemTime, UNIX_EPOCH};

use atoll_cgroup::{can_write, choose, detect, Cgroup1Backend, Choice, RealFs, Requested};
use atoll_core::backend::{Actuator, Monitor};
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings, Partition, RtBudget};
use atoll_core::process::CgroupMembership;
use atoll_core::spec::MemoryEntitlement;
use atoll_core::weight::weight_to_shares;
use atoll_core::CpuSet;

/// Kills the child and removes every group under the test's root.
struct Guard {
    root: String,
    mounts: Vec<PathBuf>,
    child: Option<Child>,
}

impl Guard {
    fn kill_child(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn remove_tree(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill_child();
        assert!(self.root.starts_with("atoll-test-"));
        for m in &self.mounts {
            let d = m.join(&self.root);
            if d.exists() {
                remove_tree(&d);
            }
        }
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
        .trim()
        .to_string()
}

fn gp(s: &str) -> GroupPath {
    GroupPath::from_relative(s)
}

#[test]
fn cgroup1_backend_on_the_real_kernel() {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: not root");
        return;
    }
    let mounts = match detect(Path::new("/proc/self/mountinfo")) {
        Ok(m) => m,
        Err(e) => {
            println!("skipped: {e}");
            return;
        }
    };
    let paths = match choose(Requested::Cgroup1, &mounts, &RealFs, &can_write) {
        Ok(Choice::Cgroup1(p)) => p,
        Ok(other) => {
            println!("skipped: unexpected choice {other:?}");
            return;
        }
        Err(e) => {
            println!("skipped: {e}");
            return;
        }
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let root = format!("atoll-test-{}-{nanos}", std::process::id());
    let mut guard = Guard {
        root: root.clone(),
        mounts: mounts.v1.iter().map(|m| m.mount.path.clone()).collect(),
        child: None,
    };
    let mut b = Cgroup1Backend::new(paths.clone(), &root, RealFs).unwrap();
    let caps = b.capabilities();
    assert!(caps.cpuset && caps.cpu);

    let all_cpus = CpuSet::parse(&read(&paths.cpuset.join("cpuset.cpus"))).unwrap();
    let mems = CpuSet::parse(&read(&paths.cpuset.join("cpuset.mems"))).unwrap();
    let last = CpuSet::range(all_cpus.last().unwrap(), all_cpus.last().unwrap());
    let rt = |runtime_us| {
        Some(RtBudget {
            runtime_us,
            period_us: 1_000_000,
        })
    };
    let f = b
        .apply(
            &GroupPath::root(),
            &GroupSettings {
                cpus: Some(all_cpus.clone()),
                mems: Some(mems.clone()),
                rt_budget: rt(100_000),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(f.is_empty(), "{f:#?}");
    // The island asks for exclusivity; atoll's root is not made exclusive by
    // default, so this is a fallback (and nothing outside is constrained).
    let f = b
        .apply(
            &gp("isl"),
            &GroupSettings {
                cpus: Some(last.clone()),
                mems: Some(mems.clone()),
                partition: Some(Partition::Root),
                rt_budget: rt(50_000),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].knob, "cpuset.cpu_exclusive");
    let unit = GroupSettings {
        cpu_weight: Some(200),
        cpu_max: Some(CpuMax {
            quota_us: 50_000,
            period_us: 100_000,
        }),
        rt_budget: rt(20_000),
        memory: MemoryEntitlement {
            low: Some(64 << 20),
            max: Some(256 << 20),
            ..Default::default()
        },
        io_weight: Some(300),
        ..Default::default()
    };
    let f = b.apply(&gp("isl/u"), &unit).unwrap();
    assert!(f.is_empty(), "{f:#?}");
    // Re-applying changes nothing and reports nothing.
    assert!(b.apply(&gp("isl/u"), &unit).unwrap().is_empty());

    let u = |m: &Path| m.join(&root).join("isl/u");
    assert_eq!(
        read(&u(&paths.cpuset).join("cpuset.cpus")),
        last.to_string()
    );
    assert_eq!(
        read(&u(&paths.cpuset).join("cpuset.mems")),
        mems.to_string()
    );
    assert_eq!(
        read(&u(&paths.cpu).join("cpu.shares")),
        weight_to_shares(200).to_string()
    );
    assert_eq!(read(&u(&paths.cpu).join("cpu.cfs_quota_us")), "50000");
    assert_eq!(read(&u(&paths.cpu).join("cpu.cfs_period_us")), "100000");
    assert_eq!(read(&u(&paths.cpu).join("cpu.rt_runtime_us")), "20000");
    if let Some(mem) = &paths.memory {
        assert_eq!(
            read(&u(mem).join("memory.limit_in_bytes")),
            (256u64 << 20).to_string()
        );
    }

    let child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    guard.child = Some(child);
    let cg_file = format!("/proc/{pid}/cgroup");
    let origin_text = read(Path::new(&cg_file));
    let origin = CgroupMembership::parse(&origin_text).unwrap();

    b.move_process(pid, &gp("isl/u")).unwrap();
    assert_eq!(b.processes(&gp("isl/u")).unwrap(), [pid]);
    let now = CgroupMembership::parse(&read(Path::new(&cg_file))).unwrap();
    let want = format!("/{root}/isl/u");
    for (ctrl, _) in paths.hierarchies() {
        assert_eq!(now.controller(ctrl), Some(want.as_str()), "{ctrl}");
    }
    let stats = b.stats(&gp("isl/u")).unwrap();
    assert!(stats.cpu_usage_us.is_some() || paths.cpuacct.is_none());
    assert!(stats.nr_periods.is_some());
    assert_eq!(stats.memory_current.is_some(), paths.memory.is_some());
    let psi_file = u(&paths.cpu).join("cpu.pressure");
    assert_eq!(stats.cpu_pressure.is_some(), psi_file.exists());

    b.restore_process(pid, &origin).unwrap();
    assert_eq!(read(Path::new(&cg_file)), origin_text);
    assert!(b.processes(&gp("isl/u")).unwrap().is_empty());

    for g in ["isl/u", "isl", ""] {
        b.remove(&gp(g)).unwrap();
    }
    for m in &mounts.v1 {
        assert!(
            !m.mount.path.join(&root).exists(),
            "{} left behind",
            m.mount.path.join(&root).display()
        );
    }
    guard.kill_child();
}
