use std::time::Duration;

use atoll_core::backend::{Monitor, StatSelect};
use atoll_core::plan::{CpuMax, RtBudget};
use atoll_core::spec::{IoLimit, MemoryEntitlement};

use super::*;
use crate::testutils::{FakeCgroupFs, FakeKernel, Refusal, V1_UNLIMITED};

fn gp(s: &str) -> GroupPath {
    GroupPath::from_relative(s)
}

fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

fn backend_with(
    kernel: FakeKernel,
    comounted: bool,
) -> (FakeCgroupFs, V1Paths, Cgroup1Backend<FakeCgroupFs>) {
    let (fake, paths) = FakeCgroupFs::v1_machine(kernel, comounted);
    let mut b = Cgroup1Backend::new(paths.clone(), "atoll", fake.clone()).unwrap();
    b.set_rmdir_retry(3, Duration::ZERO);
    b.set_exclusive_root(true);
    (fake, paths, b)
}

fn backend() -> (FakeCgroupFs, V1Paths, Cgroup1Backend<FakeCgroupFs>) {
    backend_with(FakeKernel::default(), false)
}

fn island(cpus: &str) -> GroupSettings {
    GroupSettings {
        cpus: Some(set(cpus)),
        mems: Some(set("0")),
        partition: Some(Partition::Root),
        ..Default::default()
    }
}

fn unit() -> GroupSettings {
    GroupSettings {
        cpu_weight: Some(200),
        cpu_max: Some(CpuMax {
            quota_us: 50_000,
            period_us: 20_000,
        }),
        cpu_idle: false,
        memory: MemoryEntitlement {
            min: None,
            low: Some(1 << 30),
            high: None,
            max: Some(2 << 30),
        },
        io_weight: Some(300),
        io_max: vec![IoLimit {
            device: DeviceId { major: 8, minor: 0 },
            rbps: Some(1 << 20),
            wbps: None,
            riops: None,
            wiops: Some(50),
        }],
        ..Default::default()
    }
}

fn tree(b: &mut Cgroup1Backend<FakeCgroupFs>) -> Vec<Fallback> {
    let root = GroupSettings {
        cpus: Some(set("0-3")),
        mems: Some(set("0")),
        ..Default::default()
    };
    let mut f = b.apply(&GroupPath::root(), &root).unwrap();
    f.extend(b.apply(&gp("web"), &island("2-3")).unwrap());
    f.extend(b.apply(&gp("web/api"), &unit()).unwrap());
    f
}

fn read(fake: &FakeCgroupFs, mount: &Path, g: &str, f: &str) -> String {
    let base = mount.join("atoll");
    let dir = if g.is_empty() { base } else { base.join(g) };
    fake.get(&dir.join(f)).trim().to_string()
}

#[test]
fn creates_the_group_in_every_hierarchy_and_copies_parent_cpusets() {
    let (fake, p, mut b) = backend();
    let f = tree(&mut b);
    assert!(f.is_empty(), "{f:#?}");
    for (_, m) in p.hierarchies() {
        assert!(m.join("atoll/web/api").is_dir(), "{}", m.display());
    }
    assert_eq!(read(&fake, &p.cpuset, "", "cpuset.cpus"), "0-3");
    assert_eq!(read(&fake, &p.cpuset, "web", "cpuset.cpus"), "2-3");
    // Unit without explicit CPUs/nodes: copied from the island.
    assert_eq!(read(&fake, &p.cpuset, "web/api", "cpuset.cpus"), "2-3");
    assert_eq!(read(&fake, &p.cpuset, "web/api", "cpuset.mems"), "0");
    // The island is exclusive, which required atoll's root to be too.
    assert_eq!(read(&fake, &p.cpuset, "web", "cpuset.cpu_exclusive"), "1");
    assert_eq!(read(&fake, &p.cpuset, "", "cpuset.cpu_exclusive"), "1");
    assert_eq!(
        read(&fake, &p.cpuset, "web/api", "cpuset.cpu_exclusive"),
        "0"
    );
    assert_eq!(b.children(&GroupPath::root()).unwrap(), ["web"]);
}

#[test]
fn knobs_translate_to_v1_files() {
    let (fake, p, mut b) = backend();
    let f = tree(&mut b);
    assert!(f.is_empty(), "{f:#?}");
    let r = |m: &Path, f: &str| read(&fake, m, "web/api", f);
    assert_eq!(r(&p.cpu, "cpu.shares"), weight_to_shares(200).to_string());
    assert_ne!(r(&p.cpu, "cpu.shares"), "2048", "not a linear map");
    assert_eq!(r(&p.cpu, "cpu.cfs_period_us"), "20000");
    assert_eq!(r(&p.cpu, "cpu.cfs_quota_us"), "50000");
    assert_eq!(r(&p.cpu, "cpu.idle"), "0");
    // An idle group gets no shares written (the kernel refuses them).
    fake.take_writes();
    let idle = GroupSettings {
        cpu_idle: true,
        cpu_weight: Some(400),
        ..unit()
    };
    b.apply(&gp("web/api"), &idle).unwrap();
    let w = fake.take_writes();
    assert!(!w.iter().any(|(f, _)| f.ends_with("cpu.shares")), "{w:#?}");
    assert_eq!(r(&p.cpu, "cpu.idle"), "1");
    b.apply(&gp("web/api"), &unit()).unwrap();
    assert_eq!(r(&p.cpu, "cpu.idle"), "0");
    let mem = p.memory.clone().unwrap();
    assert_eq!(r(&mem, "memory.limit_in_bytes"), (2u64 << 30).to_string());
    assert_eq!(
        r(&mem, "memory.soft_limit_in_bytes"),
        (1u64 << 30).to_string()
    );
    let blk = p.blkio.clone().unwrap();
    assert_eq!(r(&blk, "blkio.bfq.weight"), "300");
    assert_eq!(r(&blk, "blkio.throttle.read_bps_device"), "8:0 1048576");
    assert_eq!(r(&blk, "blkio.throttle.write_iops_device"), "8:0 50");
    assert_eq!(r(&blk, "blkio.throttle.write_bps_device"), "");
}

#[test]
fn memory_min_and_high_are_fallbacks() {
    let (_, _, mut b) = backend();
    tree(&mut b);
    let mut u = unit();
    u.memory.min = Some(1);
    u.memory.high = Some(2);
    let f = b.apply(&gp("web/api"), &u).unwrap();
    let knobs: Vec<&str> = f.iter().map(|f| f.knob.as_str()).collect();
    assert_eq!(knobs, ["memory.min", "memory.high"]);
    assert!(f[0].reason.contains("cgroup v1"), "{}", f[0].reason);
}

#[test]
fn cfq_weight_and_no_weight_file() {
    let (fake, p, mut b) = backend_with(
        FakeKernel {
            blkio_weight: "cfq",
            ..Default::default()
        },
        false,
    );
    assert!(tree(&mut b).is_empty());
    let blk = p.blkio.clone().unwrap();
    assert_eq!(
        read(&fake, &blk, "web/api", "blkio.weight"),
        io_weight_to_blkio(300).to_string()
    );
    assert_eq!(blkio_weight("blkio.bfq.weight", 100), 100);
    assert_eq!(blkio_weight("blkio.bfq.weight", 5000), 1000);
    assert_eq!(blkio_weight("blkio.weight", 100), 500);

    let (_, _, mut b) = backend_with(
        FakeKernel {
            blkio_weight: "",
            ..Default::default()
        },
        false,
    );
    let f = tree(&mut b);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].knob, "blkio.weight");
    assert!(f[0].reason.contains("neither"), "{}", f[0].reason);
}

#[test]
fn unchanged_knobs_are_not_rewritten() {
    let (fake, p, mut b) = backend();
    tree(&mut b);
    fake.take_writes();
    assert!(tree(&mut b).is_empty());
    assert_eq!(fake.take_writes(), []);
    let mut u = unit();
    u.io_max[0].wiops = None;
    b.apply(&gp("web/api"), &u).unwrap();
    let file = p
        .blkio
        .clone()
        .unwrap()
        .join("atoll/web/api/blkio.throttle.write_iops_device");
    assert_eq!(fake.take_writes(), [(file, "8:0 0".to_string())]);
}

#[test]
fn none_resets_to_the_kernel_default() {
    let (fake, p, mut b) = backend();
    tree(&mut b);
    b.apply(&gp("web/api"), &GroupSettings::default()).unwrap();
    let r = |m: &Path, f: &str| read(&fake, m, "web/api", f);
    assert_eq!(r(&p.cpu, "cpu.shares"), "1024");
    assert_eq!(r(&p.cpu, "cpu.cfs_quota_us"), "-1");
    assert_eq!(r(&p.cpu, "cpu.idle"), "0");
    let mem = p.memory.clone().unwrap();
    assert_eq!(r(&mem, "memory.limit_in_bytes"), V1_UNLIMITED.to_string());
    let blk = p.blkio.clone().unwrap();
    assert_eq!(r(&blk, "blkio.bfq.weight"), "100");
    assert_eq!(r(&blk, "blkio.throttle.read_bps_device"), "");
}

#[test]
fn exclusive_refused_by_an_overlapping_sibling_is_a_fallback() {
    let (fake, p, mut b) = backend();
    tree(&mut b);
    let f = b.apply(&gp("db"), &island("1-2")).unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].knob, "cpuset.cpus");
    assert!(f[0].reason.contains("EINVAL"), "{}", f[0].reason);
    let f = b.apply(&gp("db"), &island("1")).unwrap();
    assert!(f.is_empty(), "{f:#?}");
    assert_eq!(read(&fake, &p.cpuset, "db", "cpuset.cpu_exclusive"), "1");

    // A non-exclusive sibling overlapping db: db cannot turn exclusive.
    let (fake, p, mut b) = backend();
    tree(&mut b);
    b.apply(
        &gp("host"),
        &GroupSettings {
            cpus: Some(set("0-1")),
            mems: Some(set("0")),
            ..Default::default()
        },
    )
    .unwrap();
    let f = b.apply(&gp("db"), &island("1")).unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].knob, "cpuset.cpu_exclusive");
    assert_eq!((f[0].wanted.as_str(), f[0].got.as_str()), ("1", "0"));
    assert!(f[0].reason.contains("overlap"), "{}", f[0].reason);
    assert_eq!(read(&fake, &p.cpuset, "db", "cpuset.cpu_exclusive"), "0");
    fake.take_writes();
    assert_eq!(b.apply(&gp("db"), &island("1")).unwrap(), f, "remembered");
    assert_eq!(fake.take_writes(), []);
}

#[test]
fn atolls_root_is_made_exclusive_only_when_allowed() {
    let (fake, p) = FakeCgroupFs::v1_machine(FakeKernel::default(), false);
    let mut b = Cgroup1Backend::new(p.clone(), "atoll", fake.clone()).unwrap();
    let f = tree(&mut b);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        (f[0].path.as_str(), f[0].knob.as_str()),
        ("web", "cpuset.cpu_exclusive")
    );
    assert!(f[0].reason.contains("--v1-exclusive"), "{}", f[0].reason);
    assert_eq!(read(&fake, &p.cpuset, "", "cpuset.cpu_exclusive"), "0");
    assert_eq!(read(&fake, &p.cpuset, "web", "cpuset.cpu_exclusive"), "0");
    // Inside atoll's tree the parent is made exclusive regardless.
    b.set_exclusive_root(true);
    b.retry_refused();
    assert!(tree(&mut b).is_empty());
    let member = |cpus: &str| GroupSettings {
        cpus: Some(set(cpus)),
        ..Default::default()
    };
    assert!(b.apply(&gp("db"), &member("1")).unwrap().is_empty());
    assert_eq!(read(&fake, &p.cpuset, "db", "cpuset.cpu_exclusive"), "0");
    assert!(b.apply(&gp("db/pinned"), &island("1")).unwrap().is_empty());
    assert_eq!(
        read(&fake, &p.cpuset, "db/pinned", "cpuset.cpu_exclusive"),
        "1"
    );
    assert_eq!(read(&fake, &p.cpuset, "db", "cpuset.cpu_exclusive"), "1");
    // Member again: db keeps exclusivity while its child needs it.
    b.apply(&gp("db"), &member("1")).unwrap();
    assert_eq!(read(&fake, &p.cpuset, "db", "cpuset.cpu_exclusive"), "1");
    b.apply(&gp("db/pinned"), &GroupSettings::default())
        .unwrap();
    b.apply(&gp("db"), &member("1")).unwrap();
    assert_eq!(read(&fake, &p.cpuset, "db", "cpuset.cpu_exclusive"), "0");
}

#[test]
fn exclusive_needs_an_exclusive_parent() {
    let (fake, p, mut b) = backend();
    fake.refuse_write(
        "atoll/cpuset.cpu_exclusive",
        Some("1"),
        Refusal::Errno(libc::EINVAL),
    );
    let f = tree(&mut b);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(
        f[0].reason.contains("parent must be exclusive"),
        "{}",
        f[0].reason
    );
    assert_eq!(read(&fake, &p.cpuset, "web", "cpuset.cpu_exclusive"), "0");
}

#[test]
fn a_shrinking_parent_shrinks_its_children_first() {
    let (fake, p, mut b) = backend();
    b.apply(&GroupPath::root(), &island("0-3")).unwrap();
    b.apply(&gp("web"), &island("1-3")).unwrap();
    b.apply(&gp("web/api"), &GroupSettings::default()).unwrap();
    assert_eq!(read(&fake, &p.cpuset, "web/api", "cpuset.cpus"), "1-3");
    let f = b.apply(&gp("web"), &island("3")).unwrap();
    assert!(f.is_empty(), "{f:#?}");
    assert_eq!(read(&fake, &p.cpuset, "web", "cpuset.cpus"), "3");
    assert_eq!(read(&fake, &p.cpuset, "web/api", "cpuset.cpus"), "3");
    // Growing back: the unit follows when applied.
    b.apply(&gp("web"), &island("1-3")).unwrap();
    b.apply(&gp("web/api"), &GroupSettings::default()).unwrap();
    assert_eq!(read(&fake, &p.cpuset, "web/api", "cpuset.cpus"), "1-3");
}

#[test]
fn rt_budgets_go_parent_first_and_excess_is_a_fallback() {
    let (fake, p, mut b) = backend();
    let rt = |runtime_us| GroupSettings {
        rt_budget: Some(RtBudget {
            runtime_us,
            period_us: 1_000_000,
        }),
        ..Default::default()
    };
    assert!(b
        .apply(&GroupPath::root(), &rt(500_000))
        .unwrap()
        .is_empty());
    assert!(b.apply(&gp("rt"), &rt(400_000)).unwrap().is_empty());
    assert!(b.apply(&gp("rt/a"), &rt(200_000)).unwrap().is_empty());
    assert_eq!(read(&fake, &p.cpu, "rt/a", "cpu.rt_runtime_us"), "200000");
    // More than the parent has left: what is left, and a fallback that
    // names the group, the budget, and the parent's.
    let f = b.apply(&gp("rt/b"), &rt(300_000)).unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].knob, "cpu.rt_runtime_us");
    assert_eq!(f[0].path, gp("rt/b"));
    assert_eq!(f[0].wanted, "300000/1000000");
    assert_eq!(f[0].got, "200000/1000000");
    assert_eq!(read(&fake, &p.cpu, "rt/b", "cpu.rt_runtime_us"), "200000");
    for part in [
        "EINVAL",
        "wants 300000/1000000 µs",
        "its parent has 400000/1000000 µs",
        "other children hold 200000 µs",
        "leaving 200000 µs",
        "it has 200000 µs of it",
    ] {
        assert!(f[0].reason.contains(part), "{part}: {}", f[0].reason);
    }
    // Once the sibling gives some back, it gets all it wants.
    b.apply(&gp("rt/a"), &rt(100_000)).unwrap();
    assert!(b.apply(&gp("rt/b"), &rt(300_000)).unwrap().is_empty());
    assert_eq!(read(&fake, &p.cpu, "rt/b", "cpu.rt_runtime_us"), "300000");
    // Nothing left: it keeps what it has, and says so.
    let f = b.apply(&gp("rt/c"), &rt(50_000)).unwrap();
    assert_eq!(f[0].got, "0/1000000", "{f:#?}");
    assert!(f[0].reason.contains("leaving 0 µs"), "{}", f[0].reason);
    b.remove(&gp("rt/c")).unwrap();
    b.apply(&gp("rt/b"), &GroupSettings::default()).unwrap();
    b.apply(&gp("rt/a"), &rt(200_000)).unwrap();
    // A different period is written in a safe order.
    let f = b
        .apply(
            &gp("rt/a"),
            &GroupSettings {
                rt_budget: Some(RtBudget {
                    runtime_us: 10_000,
                    period_us: 100_000,
                }),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(f.is_empty(), "{f:#?}");
    assert_eq!(read(&fake, &p.cpu, "rt/a", "cpu.rt_period_us"), "100000");
    // None frees the budget.
    b.apply(&gp("rt/a"), &GroupSettings::default()).unwrap();
    assert_eq!(read(&fake, &p.cpu, "rt/a", "cpu.rt_runtime_us"), "0");
}

#[test]
fn moves_to_every_hierarchy_and_restores_per_controller() {
    let (fake, p, mut b) = backend();
    tree(&mut b);
    let mem = p.memory.clone().unwrap();
    std::fs::create_dir_all(mem.join("process_api/job")).unwrap();
    fake.set(&mem.join("process_api/job/cgroup.procs"), "77\n");
    b.move_process(77, &gp("web/api")).unwrap();
    for (_, m) in p.hierarchies() {
        assert_eq!(
            fake.get(&m.join("atoll/web/api/cgroup.procs")),
            "77\n",
            "{}",
            m.display()
        );
    }
    assert_eq!(fake.get(&mem.join("process_api/job/cgroup.procs")), "");
    assert_eq!(b.processes(&gp("web/api")).unwrap(), [77]);
    let origin = CgroupMembership::parse(
        "4:memory:/process_api/job/gone\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n",
    )
    .unwrap();
    b.restore_process(77, &origin).unwrap();
    assert_eq!(fake.get(&mem.join("process_api/job/cgroup.procs")), "77\n");
    assert_eq!(fake.get(&p.cpuset.join("cgroup.procs")), "77\n");
    // Missing from the origin (blkio): the hierarchy's root.
    assert_eq!(
        fake.get(&p.blkio.clone().unwrap().join("cgroup.procs")),
        "77\n"
    );
    assert!(b.processes(&gp("web/api")).unwrap().is_empty());

    fake.kill(5);
    assert!(matches!(
        b.move_process(5, &gp("web/api")),
        Err(BackendError::NoProcess(5))
    ));
    assert!(matches!(
        b.move_process(77, &gp("nope")),
        Err(BackendError::NoGroup(_))
    ));
    // A cpuset group without CPUs cannot take tasks (ENOSPC): an error.
    fake.set(&p.cpuset.join("atoll/web/api/cpuset.cpus"), "");
    let e = b.move_process(77, &gp("web/api")).unwrap_err();
    assert!(e.to_string().contains("cgroup.procs"), "{e}");
}

#[test]
fn comounted_cpu_and_cpuacct() {
    let (fake, p, mut b) = backend_with(FakeKernel::default(), true);
    assert_eq!(p.hierarchies().len(), 4);
    assert!(tree(&mut b).is_empty());
    let d = p.cpu.join("atoll/web/api");
    assert!(d.join("cpuacct.usage").exists() && d.join("cpu.shares").exists());
    fake.set(&d.join("cpuacct.usage"), "7000\n");
    assert_eq!(b.stats(&gp("web/api")).unwrap().cpu_usage_us, Some(7));
    b.move_process(3, &gp("web/api")).unwrap();
    assert_eq!(fake.get(&d.join("cgroup.procs")), "3\n");
}

#[test]
fn stats_convert_units_and_reject_garbage() {
    let (fake, p, mut b) = backend();
    tree(&mut b);
    let g = gp("web/api");
    let at = |m: &Path, f: &str| m.join("atoll/web/api").join(f);
    fake.set(
        &at(p.cpuacct.as_ref().unwrap(), "cpuacct.usage"),
        "123456789\n",
    );
    fake.set(
        &at(&p.cpu, "cpu.stat"),
        "nr_periods 20\nnr_throttled 5\nthrottled_time 3000000\nnr_bursts 0\nburst_time 0\n",
    );
    fake.set(
        &at(p.memory.as_ref().unwrap(), "memory.usage_in_bytes"),
        "4096\n",
    );
    fake.set(
        &at(
            p.blkio.as_ref().unwrap(),
            "blkio.throttle.io_service_bytes_recursive",
        ),
        "8:0 Read 100\n8:0 Write 50\n8:0 Total 150\nTotal 150\n",
    );
    let s = b.stats(&g).unwrap();
    assert_eq!(s.cpu_usage_us, Some(123_456));
    assert_eq!(
        (s.nr_periods, s.nr_throttled, s.throttled_us),
        (Some(20), Some(5), Some(3000))
    );
    assert_eq!(s.memory_current, Some(4096));
    assert_eq!((s.io_read_bytes, s.io_write_bytes), (Some(100), Some(50)));
    assert_eq!(
        (s.cpu_pressure, s.memory_pressure, s.io_pressure),
        (None, None, None)
    );
    // The CPU selection reads cpuacct.usage only: garbage in the memory
    // file goes unnoticed.
    let mem = at(p.memory.as_ref().unwrap(), "memory.usage_in_bytes");
    fake.set(&mem, "garbage\n");
    let c = b.stats_of(&g, StatSelect::CPU).unwrap();
    assert_eq!(c.cpu_usage_us, Some(123_456));
    assert_eq!(
        (c.nr_periods, c.memory_current, c.io_read_bytes),
        (None, None, None)
    );
    assert!(b.stats(&g).is_err());
    fake.set(&mem, "4096\n");

    fake.remove_file(&at(
        p.blkio.as_ref().unwrap(),
        "blkio.throttle.io_service_bytes_recursive",
    ));
    fake.set(
        &at(p.blkio.as_ref().unwrap(), "blkio.throttle.io_service_bytes"),
        "8:0 Read 7\n",
    );
    assert_eq!(b.stats(&g).unwrap().io_read_bytes, Some(7));

    fake.set(
        &at(p.blkio.as_ref().unwrap(), "blkio.throttle.io_service_bytes"),
        "8:0 Read\n",
    );
    match b.stats(&g).unwrap_err() {
        BackendError::Parse { path, value, .. } => {
            assert!(
                path.ends_with("blkio.throttle.io_service_bytes"),
                "{}",
                path.display()
            );
            assert_eq!(value, "8:0 Read");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        b.stats(&gp("gone")),
        Err(BackendError::NoGroup(_))
    ));
}

#[test]
fn pressure_when_the_kernel_exposes_it_for_v1() {
    let (fake, p, mut b) = backend_with(
        FakeKernel {
            v1_psi: true,
            ..Default::default()
        },
        false,
    );
    tree(&mut b);
    fake.set(
        &p.cpu.join("atoll/web/api/cpu.pressure"),
        "some avg10=3.00 avg60=2.00 avg300=1.00 total=500\n",
    );
    let s = b.stats(&gp("web/api")).unwrap();
    assert_eq!(s.cpu_pressure.unwrap().some.avg10, 3.0);
    assert!(s.memory_pressure.is_some() && s.io_pressure.is_some());
    assert!(b.capabilities().psi);
    assert_eq!(
        b.cpu_pressure_file(&gp("web/api")),
        Some(p.cpu.join("atoll/web/api/cpu.pressure")),
        "in the cpu hierarchy"
    );
    assert_eq!(b.cpu_pressure_file(&gp("gone")), None);
}

#[test]
fn no_pressure_file_without_cgroup1_psi() {
    let (_, _, mut b) = backend();
    tree(&mut b);
    assert_eq!(b.cpu_pressure_file(&gp("web/api")), None);
    assert_eq!(b.cpu_pressure_file(&GroupPath::root()), None);
}

#[test]
fn a_kernel_without_v1_pressure_files_is_asked_once() {
    let (fake, p, mut b) = backend();
    tree(&mut b);
    let want = StatSelect {
        pressure: true,
        ..StatSelect::CPU
    };
    assert_eq!(b.stats_of(&gp("web/api"), want).unwrap().cpu_pressure, None);
    // A file that appears later (no kernel does this) is not read: the
    // first read taught the backend that this kernel has none.
    fake.set(
        &p.cpu.join("atoll/web/api/cpu.pressure"),
        "some avg10=3.00 avg60=2.00 avg300=1.00 total=500\n",
    );
    assert_eq!(b.stats_of(&gp("web/api"), want).unwrap().cpu_pressure, None);
}

#[test]
fn a_kernel_with_v1_pressure_files_is_read_every_time() {
    let (fake, p, mut b) = backend_with(
        FakeKernel {
            v1_psi: true,
            ..Default::default()
        },
        false,
    );
    tree(&mut b);
    let want = StatSelect {
        pressure: true,
        ..StatSelect::CPU
    };
    let file = p.cpu.join("atoll/web/api/cpu.pressure");
    for total in [500, 900] {
        fake.set(
            &file,
            &format!("some avg10=3.00 avg60=2.00 avg300=1.00 total={total}\n"),
        );
        let s = b.stats_of(&gp("web/api"), want).unwrap();
        assert_eq!(s.cpu_pressure.unwrap().some.total_us, total);
    }
}

#[test]
fn capabilities_and_missing_hierarchies() {
    let (_, mut p, _) = backend();
    let caps = Cgroup1Backend::new(p.clone(), "atoll", RealFs).unwrap();
    assert_eq!(caps.kind(), BackendKind::Cgroup1);
    let (fake, _, b) = backend();
    let c = b.capabilities();
    assert!(c.cpuset && c.cpu && c.partitions && c.cpu_idle && c.rt_groups && c.memory && c.io);
    assert!(!c.psi);

    p = b.paths().clone();
    p.memory = None;
    p.blkio = None;
    let mut b = Cgroup1Backend::new(p, "atoll", fake).unwrap();
    b.set_exclusive_root(true);
    let c = b.capabilities();
    assert!(!c.memory && !c.io);
    let f = tree(&mut b);
    let knobs: Vec<&str> = f.iter().map(|f| f.knob.as_str()).collect();
    assert_eq!(
        knobs,
        [
            "memory.limit_in_bytes",
            "memory.soft_limit_in_bytes",
            "blkio.weight",
            "blkio.throttle"
        ]
    );
}

#[test]
fn remove_everywhere_tolerating_missing_dirs() {
    let (fake, p, mut b) = backend();
    tree(&mut b);
    std::fs::remove_dir_all(p.memory.clone().unwrap().join("atoll/web/api")).unwrap();
    fake.refuse_rmdir("cpu/atoll/web/api", libc::EBUSY, Some(1));
    b.remove(&gp("web/api")).unwrap();
    b.remove(&gp("web")).unwrap();
    b.remove(&GroupPath::root()).unwrap();
    for (_, m) in p.hierarchies() {
        assert!(!m.join("atoll").exists(), "{}", m.display());
    }
    assert!(!b.exists(&GroupPath::root()));
    // Children first is the caller's job: a parent with children fails.
    tree(&mut b);
    assert!(b.remove(&gp("web")).is_err());
}

#[test]
fn children_are_the_sub_groups_of_every_hierarchy() {
    let (_fake, p, mut b) = backend();
    tree(&mut b);
    let mem = p.memory.clone().unwrap();
    // Someone made directories in one hierarchy only.
    std::fs::create_dir(mem.join("atoll/web/api/sub")).unwrap();
    std::fs::create_dir(p.cpu.join("atoll/web/extra")).unwrap();
    assert_eq!(b.children(&gp("web/api")).unwrap(), ["sub"]);
    assert_eq!(b.children(&gp("web")).unwrap(), ["api", "extra"]);
    // A group that exists in one hierarchy only has children too.
    assert!(!b.exists(&gp("web/api/sub")));
    assert!(b.children(&gp("web/api/sub")).unwrap().is_empty());
    assert!(matches!(
        b.children(&gp("web/nothing")),
        Err(BackendError::NoGroup(_))
    ));
    // And it is removed from where it is.
    b.remove(&gp("web/api/sub")).unwrap();
    b.remove(&gp("web/extra")).unwrap();
    b.remove(&gp("web/api")).unwrap();
    assert!(!mem.join("atoll/web/api").exists());
}

#[test]
fn a_group_left_in_several_hierarchies_names_each_directory() {
    let (fake, p, mut b) = backend();
    tree(&mut b);
    b.move_process(7, &gp("web/api")).unwrap();
    let e = b.remove(&gp("web/api")).unwrap_err();
    assert!(e.is_busy(), "{e}");
    let text = e.to_string();
    let BackendError::NotRemoved { group, failed } = e else {
        panic!("{text}");
    };
    assert_eq!(group, gp("web/api"));
    let dirs: Vec<PathBuf> = failed.iter().map(|(d, _)| d.clone()).collect();
    let want: Vec<PathBuf> = p
        .hierarchies()
        .iter()
        .map(|(_, m)| m.join("atoll/web/api"))
        .collect();
    assert_eq!(dirs, want);
    for d in &want {
        assert!(text.contains(&format!("rmdir {}:", d.display())), "{text}");
    }
    // One directory left is that rmdir's own error, as before.
    fake.kill(7);
    let mem = p.memory.clone().unwrap();
    std::fs::create_dir(mem.join("atoll/web/api/sub")).unwrap();
    let e = b.remove(&gp("web/api")).unwrap_err();
    assert!(e.is_busy(), "{e}");
    match &e {
        BackendError::Io { op, path, .. } => {
            assert_eq!((*op, path), ("rmdir", &mem.join("atoll/web/api")));
        }
        other => panic!("{other}"),
    }
    // Other errors are not "busy".
    fake.refuse_rmdir("atoll/web/api/sub", libc::EACCES, None);
    let e = b.remove(&gp("web/api/sub")).unwrap_err();
    assert!(!e.is_busy(), "{e}");
}

#[test]
fn an_rt_budget_shrinks_its_children_first() {
    let (fake, p, mut b) = backend();
    let rt = |runtime_us| GroupSettings {
        rt_budget: Some(RtBudget {
            runtime_us,
            period_us: 1_000_000,
        }),
        ..Default::default()
    };
    b.apply(&GroupPath::root(), &rt(600_000)).unwrap();
    b.apply(&gp("web"), &rt(400_000)).unwrap();
    b.apply(&gp("web/a"), &rt(300_000)).unwrap();
    b.apply(&gp("web/b"), &rt(100_000)).unwrap();
    // The root shrinks below what its island holds: the island and its
    // units shrink first, in proportion.
    let f = b.apply(&GroupPath::root(), &rt(200_000)).unwrap();
    assert!(f.is_empty(), "{f:#?}");
    let at = |g: &str| read(&fake, &p.cpu, g, "cpu.rt_runtime_us");
    assert_eq!(at(""), "200000");
    assert_eq!(at("web"), "200000");
    assert_eq!(at("web/a"), "150000");
    assert_eq!(at("web/b"), "50000");
    // Applied again, each child gets what fits of its own.
    let f = b.apply(&gp("web"), &rt(100_000)).unwrap();
    assert!(f.is_empty(), "{f:#?}");
    assert_eq!(at("web/a"), "75000");
}

#[test]
fn an_optional_rt_budget_is_no_fallback_where_the_kernel_has_none() {
    let (fake, p, mut b) = backend();
    let rt = |optional| GroupSettings {
        rt_budget: Some(RtBudget {
            runtime_us: 50_000,
            period_us: 1_000_000,
        }),
        rt_budget_optional: optional,
        ..Default::default()
    };
    // Written like any other where RT group scheduling exists.
    assert!(b.apply(&GroupPath::root(), &rt(true)).unwrap().is_empty());
    assert_eq!(read(&fake, &p.cpu, "", "cpu.rt_runtime_us"), "50000");
    // Where it does not, only a budget that is not optional is a fallback.
    fake.remove_file(&p.cpu.join("atoll/cpu.rt_runtime_us"));
    assert!(b.apply(&GroupPath::root(), &rt(true)).unwrap().is_empty());
    let f = b.apply(&GroupPath::root(), &rt(false)).unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].reason.contains("no RT group scheduling"), "{f:#?}");
}

#[test]
fn an_islands_cpus_are_read_back_from_its_cpuset() {
    let (fake, p, mut b) = backend();
    tree(&mut b);
    assert_eq!(b.cpuset(&gp("web")).unwrap(), Some(set("2-3")));
    // Written behind atoll's back: the kernel's view is what is read.
    fake.set(&p.cpuset.join("atoll/web/cpuset.cpus"), "3\n");
    assert_eq!(b.cpuset(&gp("web")).unwrap(), Some(set("3")));
    fake.set(&p.cpuset.join("atoll/web/cpuset.cpus"), "\n");
    assert_eq!(b.cpuset(&gp("web")).unwrap(), None);
    assert!(matches!(
        b.cpuset(&gp("gone")),
        Err(BackendError::NoGroup(_))
    ));
}
