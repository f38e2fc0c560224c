//! The cgroup1 backend against the running kernel.
//!
//! Runs only as root with writable v1 `cpuset` and `cpu` hierarchies; prints
//! "skipped: ..." otherwise. Everything happens under a root group named
//! `atoll-test-<pid>-<nanos>`, the only process moved is a `sleep` this test
//! starts, and a drop guard kills it and removes the groups even if an
//! assertion fails.

mod common;

use std::path::Path;
use std::process::Command;

use atoll_cgroup::{Cgroup1Backend, RealFs};
use atoll_core::backend::{Actuator, Monitor};
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings, Partition, RtBudget};
use atoll_core::process::CgroupMembership;
use atoll_core::spec::MemoryEntitlement;
use atoll_core::weight::weight_to_shares;
use atoll_core::CpuSet;
use common::{gp, read, Guard};

#[test]
fn cgroup1_backend_on_the_real_kernel() {
    let Some(setup) = common::setup() else {
        return;
    };
    let (paths, root) = (setup.paths.clone(), setup.root.clone());
    let mut guard = Guard::new(&setup, None);
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
    for m in &setup.mounts {
        let d = m.join(&root);
        assert!(!d.exists(), "{} left behind", d.display());
    }
    guard.kill_child();
}
