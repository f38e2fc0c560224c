use std::time::Duration;

use atoll_core::plan::{CpuMax, Partition, RtBudget};
use atoll_core::spec::{DeviceId, IoLimit, MemoryEntitlement};

use super::*;
use crate::testutils::{FakeCgroupFs, FakeKernel, Refusal};

const ALL: &[&str] = &["cpuset", "cpu", "io", "memory", "pids"];

fn gp(s: &str) -> GroupPath {
    GroupPath::from_relative(s)
}

fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

fn backend(controllers: &[&str]) -> (FakeCgroupFs, PathBuf, Cgroup2Backend<FakeCgroupFs>) {
    let (fake, mount) = FakeCgroupFs::v2_machine(controllers);
    let mut b = Cgroup2Backend::new(&mount, "atoll", fake.clone()).unwrap();
    b.set_rmdir_retry(3, Duration::ZERO);
    (fake, mount, b)
}

fn root_settings() -> GroupSettings {
    GroupSettings {
        cpus: Some(set("0-3")),
        mems: Some(set("0")),
        ..Default::default()
    }
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
            quota_us: 400_000,
            period_us: 100_000,
        }),
        cpu_idle: false,
        memory: MemoryEntitlement {
            min: Some(1 << 20),
            low: Some(2 << 20),
            high: Some(1_000_000_000),
            max: Some(2_000_000_000),
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

/// Root, island `web` on CPUs 2-3, unit `web/api`.
fn tree(b: &mut Cgroup2Backend<FakeCgroupFs>) -> Vec<Fallback> {
    let mut f = b.apply(&GroupPath::root(), &root_settings()).unwrap();
    f.extend(b.apply(&gp("web"), &island("2-3")).unwrap());
    f.extend(b.apply(&gp("web/api"), &unit()).unwrap());
    f
}

fn read(fake: &FakeCgroupFs, b: &Cgroup2Backend<FakeCgroupFs>, g: &str, f: &str) -> String {
    fake.get(&b.dir(&gp(g)).join(f)).trim().to_string()
}

#[test]
fn creates_groups_enables_controllers_and_restores_the_parent() {
    let (fake, mount, mut b) = backend(ALL);
    fake.set(&mount.join("cgroup.subtree_control"), "cpu");
    assert!(!b.exists(&GroupPath::root()));
    let f = tree(&mut b);
    assert!(f.is_empty(), "{f:#?}");
    assert!(b.exists(&gp("web/api")));
    assert_eq!(
        fake.get(&mount.join("cgroup.subtree_control")).trim(),
        "cpuset cpu io memory"
    );
    // Only what was missing is remembered: cpu was already on.
    assert_eq!(b.added_parent_controllers(), ["cpuset", "io", "memory"]);
    assert_eq!(
        read(&fake, &b, "", "cgroup.subtree_control"),
        "cpuset cpu io memory"
    );
    assert_eq!(
        read(&fake, &b, "web", "cgroup.subtree_control"),
        "cpuset cpu io memory"
    );
    assert_eq!(b.children(&GroupPath::root()).unwrap(), ["web"]);
    for p in ["web/api", "web", ""] {
        b.remove(&gp(p)).unwrap();
    }
    b.restore_parent_controllers().unwrap();
    assert_eq!(
        fake.get(&mount.join("cgroup.subtree_control")).trim(),
        "cpu"
    );
    assert!(b.added_parent_controllers().is_empty());
}

#[test]
fn knobs_translate_to_v2_files() {
    let (fake, _, mut b) = backend(ALL);
    tree(&mut b);
    let r = |f: &str| read(&fake, &b, "web/api", f);
    assert_eq!(read(&fake, &b, "", "cpuset.cpus"), "0-3");
    assert_eq!(read(&fake, &b, "web", "cpuset.cpus"), "2-3");
    assert_eq!(read(&fake, &b, "web", "cpuset.cpus.partition"), "root");
    assert_eq!(r("cpuset.cpus"), "");
    assert_eq!(r("cpu.weight"), "200");
    assert_eq!(r("cpu.max"), "400000 100000");
    assert_eq!(r("cpu.idle"), "0");
    assert_eq!(r("memory.min"), "1048576");
    assert_eq!(r("memory.low"), "2097152");
    // Rounded down to a page by the (fake) kernel.
    assert_eq!(r("memory.high"), "999997440");
    assert_eq!(r("memory.max"), "1999998976");
    assert_eq!(r("io.weight"), "default 300");
    assert_eq!(r("io.max"), "8:0 rbps=1048576 wbps=max riops=max wiops=50");
}

#[test]
fn unchanged_knobs_are_not_rewritten() {
    let (fake, mount, mut b) = backend(ALL);
    tree(&mut b);
    fake.take_writes();
    let f = tree(&mut b);
    assert!(f.is_empty(), "{f:#?}");
    assert_eq!(fake.take_writes(), [], "second apply wrote");
    // One knob changes: exactly one write.
    let mut u = unit();
    u.cpu_weight = Some(300);
    b.apply(&gp("web/api"), &u).unwrap();
    assert_eq!(
        fake.take_writes(),
        [(b.dir(&gp("web/api")).join("cpu.weight"), "300".to_string())]
    );
    assert!(!mount.join("cpu.weight").exists());
}

#[test]
fn idle_groups_get_no_weight_and_leave_idle_before_weighting() {
    // The kernel refuses cpu.weight on an idle group (EINVAL).
    let (fake, _, mut b) = backend(ALL);
    tree(&mut b);
    let dir = b.dir(&gp("web/api"));
    fake.take_writes();
    let idle = GroupSettings {
        cpu_idle: true,
        cpu_weight: Some(300),
        ..unit()
    };
    let f = b.apply(&gp("web/api"), &idle).unwrap();
    assert!(f.is_empty(), "{f:#?}");
    let w = fake.take_writes();
    assert!(w.contains(&(dir.join("cpu.idle"), "1".into())), "{w:#?}");
    assert!(!w.iter().any(|(p, _)| p.ends_with("cpu.weight")), "{w:#?}");
    // Back to normal with the new weight: idle off first, then the weight.
    let busy = GroupSettings {
        cpu_weight: Some(300),
        ..unit()
    };
    b.apply(&gp("web/api"), &busy).unwrap();
    let w = fake.take_writes();
    let pos = |f: &str| w.iter().position(|(p, _)| p.ends_with(f));
    assert!(pos("cpu.weight").is_some(), "{w:#?}");
    assert!(pos("cpu.idle") < pos("cpu.weight"), "{w:#?}");
    assert_eq!(fake.get(&dir.join("cpu.weight")).trim(), "300");
}

#[test]
fn none_resets_to_the_kernel_default() {
    let (fake, _, mut b) = backend(ALL);
    tree(&mut b);
    b.apply(&gp("web/api"), &GroupSettings::default()).unwrap();
    let r = |f: &str| read(&fake, &b, "web/api", f);
    assert_eq!(r("cpu.weight"), "100");
    assert_eq!(r("cpu.max"), "max 100000");
    assert_eq!(r("cpu.idle"), "0");
    assert_eq!(r("memory.min"), "0");
    assert_eq!(r("memory.max"), "max");
    assert_eq!(r("io.weight"), "default 100");
    assert_eq!(r("io.max"), "");
}

#[test]
fn invalid_partition_falls_back_to_member_with_the_kernels_reason() {
    let (fake, _, mut b) = backend(ALL);
    let shown = "root invalid (Cpu list in cpuset.cpus not exclusive)";
    fake.refuse_write(
        "web/cpuset.cpus.partition",
        Some("root"),
        Refusal::Show(shown.into()),
    );
    let f = tree(&mut b);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].knob, "cpuset.cpus.partition");
    assert_eq!(f[0].path, gp("web"));
    assert_eq!(
        (f[0].wanted.as_str(), f[0].got.as_str()),
        ("root", "member")
    );
    assert!(f[0].reason.contains("not exclusive"), "{}", f[0].reason);
    assert_eq!(read(&fake, &b, "web", "cpuset.cpus.partition"), "member");
    assert_eq!(read(&fake, &b, "web", "cpuset.cpus.exclusive"), "");
    // The CPUs claimed in the root for it are given back.
    assert_eq!(read(&fake, &b, "", "cpuset.cpus.exclusive"), "");

    // Remembered: the next epoch reports it without writing.
    fake.take_writes();
    let again = b.apply(&gp("web"), &island("2-3")).unwrap();
    assert_eq!(again, f);
    assert_eq!(fake.take_writes(), []);
    // New CPUs: retried (and refused again).
    let f3 = b.apply(&gp("web"), &island("3")).unwrap();
    assert_eq!(f3.len(), 1);
    assert!(fake.writes().iter().any(|(_, v)| v == "root"));
    // Retrying after the kernel would accept.
    fake.clear_refusals();
    b.retry_refused();
    assert!(b.apply(&gp("web"), &island("3")).unwrap().is_empty());
    assert_eq!(read(&fake, &b, "web", "cpuset.cpus.partition"), "root");
}

#[test]
fn refused_partition_write_names_the_errno() {
    let (fake, _, mut b) = backend(ALL);
    fake.refuse_write(
        "web/cpuset.cpus.partition",
        Some("root"),
        Refusal::Errno(libc::EINVAL),
    );
    let f = tree(&mut b);
    assert_eq!(f.len(), 1);
    assert!(f[0].reason.contains("EINVAL"), "{}", f[0].reason);
    assert_eq!(read(&fake, &b, "web", "cpuset.cpus.partition"), "member");
}

/// The cpuset writes since the last call, as (path under the mount, value).
fn cpuset_writes(fake: &FakeCgroupFs, mount: &Path) -> Vec<(String, String)> {
    fake.take_writes()
        .into_iter()
        .filter(|(p, _)| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("cpuset."))
        })
        .map(|(p, v)| {
            let rel = p.strip_prefix(mount).unwrap_or(&p);
            (rel.display().to_string(), v)
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(p, w)| (p.to_string(), w.to_string()))
        .collect()
}

fn host(cpus: &str) -> GroupSettings {
    GroupSettings {
        cpus: Some(set(cpus)),
        mems: Some(set("0")),
        ..Default::default()
    }
}

/// atoll's layout: a member root with every CPU, `host` on CPU 0, islands
/// `web` (1-2) and `batch` (3) as partitions.
fn layout(b: &mut Cgroup2Backend<FakeCgroupFs>) -> Vec<Fallback> {
    let mut f = b.apply(&GroupPath::root(), &root_settings()).unwrap();
    f.extend(b.apply(&GroupPath::host(), &host("0")).unwrap());
    f.extend(b.apply(&gp("web"), &island("1-2")).unwrap());
    f.extend(b.apply(&gp("batch"), &island("3")).unwrap());
    f
}

/// The sequence Linux 6.12 accepts (checked in the VM, docs/testing-vm.md):
/// a partition under atoll's member root is a remote partition, so its CPUs
/// are claimed in the root's `cpuset.cpus.exclusive` first, then set as its
/// own exclusive CPUs, then `root` is written. Without the claim 6.12 shows
/// "root invalid (Invalid cpu list in cpuset.cpus.exclusive)".
#[test]
fn remote_partitions_claim_exclusive_cpus_first_as_linux_6_12_needs() {
    let (fake, mount, mut b) = backend(ALL);
    let f = layout(&mut b);
    assert!(f.is_empty(), "{f:#?}");
    assert_eq!(
        cpuset_writes(&fake, &mount),
        pairs(&[
            ("atoll/cpuset.cpus", "0-3"),
            ("atoll/cpuset.mems", "0"),
            ("atoll/host/cpuset.cpus", "0"),
            ("atoll/host/cpuset.mems", "0"),
            ("atoll/web/cpuset.cpus", "1-2"),
            ("atoll/web/cpuset.mems", "0"),
            ("atoll/cpuset.cpus.exclusive", "1-2"),
            ("atoll/web/cpuset.cpus.exclusive", "1-2"),
            ("atoll/web/cpuset.cpus.partition", "root"),
            ("atoll/batch/cpuset.cpus", "3"),
            ("atoll/batch/cpuset.mems", "0"),
            ("atoll/cpuset.cpus.exclusive", "1-3"),
            ("atoll/batch/cpuset.cpus.exclusive", "3"),
            ("atoll/batch/cpuset.cpus.partition", "root"),
        ])
    );
    // The root's claim is what its islands hold: re-applying writes nothing.
    assert!(layout(&mut b).is_empty());
    assert_eq!(fake.take_writes(), []);
    assert_eq!(read(&fake, &b, "host", "cpuset.cpus.exclusive"), "");
}

/// Linux 6.1 has no `cpuset.cpus.exclusive` and only local partitions: the
/// write of `root` succeeds but the file shows why the partition is invalid.
/// `member` is written back and the kernel's words are the fallback's reason.
#[test]
fn linux_6_1_refuses_a_partition_under_a_member_parent() {
    let fake = FakeCgroupFs::with_kernel(FakeKernel {
        v2_cpus_exclusive: false,
        ..Default::default()
    });
    let mount = fake.add_v2_mount("cg", ALL);
    let mut b = Cgroup2Backend::new(&mount, "atoll", fake.clone()).unwrap();
    let shown = "root invalid (Parent is not a partition root)";
    for island in ["web", "batch"] {
        fake.refuse_write(
            &format!("{island}/cpuset.cpus.partition"),
            Some("root"),
            Refusal::Show(shown.into()),
        );
    }
    let f = layout(&mut b);
    assert_eq!(f.len(), 2, "{f:#?}");
    for (fb, island) in f.iter().zip(["web", "batch"]) {
        assert_eq!(fb.path, gp(island));
        assert_eq!(fb.knob, "cpuset.cpus.partition");
        assert_eq!((fb.wanted.as_str(), fb.got.as_str()), ("root", "member"));
        assert_eq!(fb.reason, format!("the kernel shows {shown:?}"));
        assert_eq!(read(&fake, &b, island, "cpuset.cpus.partition"), "member");
    }
    let w = cpuset_writes(&fake, &mount);
    assert_eq!(
        w[4..],
        pairs(&[
            ("atoll/web/cpuset.cpus", "1-2"),
            ("atoll/web/cpuset.mems", "0"),
            ("atoll/web/cpuset.cpus.partition", "root"),
            ("atoll/web/cpuset.cpus.partition", "member"),
            ("atoll/batch/cpuset.cpus", "3"),
            ("atoll/batch/cpuset.mems", "0"),
            ("atoll/batch/cpuset.cpus.partition", "root"),
            ("atoll/batch/cpuset.cpus.partition", "member"),
        ])
    );
    // Not retried while nothing changed; the same fallbacks are reported.
    assert_eq!(layout(&mut b), f);
    assert_eq!(fake.take_writes(), []);
}

#[test]
fn resizing_a_remote_partition_moves_its_exclusive_cpus() {
    let (fake, mount, mut b) = backend(ALL);
    layout(&mut b);
    fake.take_writes();
    // Shrinking: once cpuset.cpus.exclusive is set, the kernel takes the
    // partition's CPUs from it, not from cpuset.cpus.
    assert!(b.apply(&gp("web"), &island("1")).unwrap().is_empty());
    assert_eq!(
        cpuset_writes(&fake, &mount),
        pairs(&[
            ("atoll/web/cpuset.cpus", "1"),
            ("atoll/web/cpuset.cpus.exclusive", "1"),
            ("atoll/cpuset.cpus.exclusive", "1,3"),
        ])
    );
    // Growing into CPUs a sibling still holds: refused, reported, retried.
    fake.refuse_write(
        "web/cpuset.cpus.exclusive",
        Some("1-3"),
        Refusal::Errno(libc::EINVAL),
    );
    let f = b.apply(&gp("web"), &island("1-3")).unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].knob, "cpuset.cpus.exclusive");
    assert_eq!((f[0].wanted.as_str(), f[0].got.as_str()), ("1-3", "1"));
    assert!(f[0].reason.contains("EINVAL"), "{}", f[0].reason);
    assert_eq!(read(&fake, &b, "web", "cpuset.cpus.exclusive"), "1");
    assert_eq!(read(&fake, &b, "web", "cpuset.cpus.partition"), "root");
    // The claim made for it is given back.
    assert_eq!(read(&fake, &b, "", "cpuset.cpus.exclusive"), "1,3");
    assert_eq!(b.apply(&gp("web"), &island("1-3")).unwrap(), f);
    // The sibling gave CPU 3 up: the next apply gets it.
    fake.clear_refusals();
    b.apply(&gp("batch"), &GroupSettings::default()).unwrap();
    assert!(b.apply(&gp("web"), &island("1-3")).unwrap().is_empty());
    assert_eq!(read(&fake, &b, "web", "cpuset.cpus.exclusive"), "1-3");
    assert_eq!(read(&fake, &b, "", "cpuset.cpus.exclusive"), "1-3");
}

#[test]
fn member_and_removed_partitions_give_their_claims_back() {
    let (fake, _, mut b) = backend(ALL);
    layout(&mut b);
    b.apply(&gp("web/api"), &unit()).unwrap();
    assert_eq!(read(&fake, &b, "", "cpuset.cpus.exclusive"), "1-3");
    // Back to member.
    assert!(b
        .apply(&gp("batch"), &GroupSettings::default())
        .unwrap()
        .is_empty());
    assert_eq!(read(&fake, &b, "batch", "cpuset.cpus.partition"), "member");
    assert_eq!(read(&fake, &b, "batch", "cpuset.cpus.exclusive"), "");
    assert_eq!(read(&fake, &b, "", "cpuset.cpus.exclusive"), "1-2");
    // Removed.
    b.remove(&gp("web/api")).unwrap();
    assert_eq!(read(&fake, &b, "", "cpuset.cpus.exclusive"), "1-2");
    b.remove(&gp("web")).unwrap();
    assert_eq!(read(&fake, &b, "", "cpuset.cpus.exclusive"), "");
}

#[test]
fn claims_stay_inside_atolls_root() {
    let (fake, mount, _) = backend(ALL);
    std::fs::create_dir(mount.join("system.slice")).unwrap();
    fake.set(
        &mount.join("system.slice/cgroup.controllers"),
        "cpuset cpu memory",
    );
    fake.set(&mount.join("system.slice/cgroup.subtree_control"), "");
    fake.set(&mount.join("system.slice/cpuset.cpus.exclusive"), "");
    let mut b = Cgroup2Backend::new(&mount, "system.slice/atoll", fake.clone()).unwrap();
    assert!(layout(&mut b).is_empty());
    assert_eq!(read(&fake, &b, "", "cpuset.cpus.exclusive"), "1-3");
    assert_eq!(
        fake.get(&mount.join("system.slice/cpuset.cpus.exclusive")),
        ""
    );
}

#[test]
fn refused_exclusive_claim_is_a_fallback() {
    let (fake, _, mut b) = backend(ALL);
    fake.refuse_write(
        "atoll/cpuset.cpus.exclusive",
        None,
        Refusal::Errno(libc::EINVAL),
    );
    let f = tree(&mut b);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].reason.contains("claiming CPUs 2-3"), "{}", f[0].reason);
    assert_eq!(read(&fake, &b, "web", "cpuset.cpus.partition"), "member");
}

#[test]
fn rt_budget_needs_rt_group_files() {
    let rt = GroupSettings {
        rt_budget: Some(RtBudget {
            runtime_us: 200_000,
            period_us: 1_000_000,
        }),
        ..Default::default()
    };
    let (_, _, mut b) = backend(ALL);
    let f = b.apply(&GroupPath::root(), &rt).unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].knob, "cpu.rt_runtime_us");
    assert!(
        f[0].reason.contains("no RT group scheduling"),
        "{}",
        f[0].reason
    );
    assert!(!b.capabilities().rt_groups);

    let fake = FakeCgroupFs::with_kernel(FakeKernel {
        v2_rt_groups: true,
        ..Default::default()
    });
    let mount = fake.add_v2_mount("cg", ALL);
    let mut b = Cgroup2Backend::new(&mount, "atoll", fake.clone()).unwrap();
    b.apply(&GroupPath::root(), &GroupSettings::default())
        .unwrap();
    let f = b.apply(&gp("rt"), &rt).unwrap();
    assert!(f.is_empty(), "{f:#?}");
    assert_eq!(
        fake.get(&b.dir(&gp("rt")).join("cpu.rt_runtime_us")).trim(),
        "200000"
    );
    assert!(b.capabilities().rt_groups);
}

#[test]
fn missing_controllers_give_one_fallback_per_asked_knob() {
    let (fake, mount, mut b) = backend(&["cpu", "memory"]);
    let f = tree(&mut b);
    let knobs: Vec<(&str, &str)> = f
        .iter()
        .map(|f| (f.path.as_str(), f.knob.as_str()))
        .collect();
    assert_eq!(
        knobs,
        [
            ("", "cpuset.cpus"),
            ("", "cpuset.mems"),
            ("web", "cpuset.cpus"),
            ("web", "cpuset.mems"),
            ("web", "cpuset.cpus.partition"),
            ("web/api", "io.weight"),
            ("web/api", "io.max"),
        ]
    );
    assert!(
        f[0].reason.contains("controller cpuset is not available"),
        "{}",
        f[0].reason
    );
    assert!(
        f[0].reason.contains(&mount.display().to_string()),
        "{}",
        f[0].reason
    );
    assert_eq!(read(&fake, &b, "web/api", "cpu.weight"), "200");
    let caps = b.capabilities();
    assert!(caps.cpu && caps.memory && !caps.cpuset && !caps.io && !caps.partitions);
    assert!(caps.psi);
}

#[test]
fn a_controller_the_parent_refuses_to_enable_is_explained() {
    let (fake, _, mut b) = backend(ALL);
    fake.refuse_write(
        "web/cgroup.subtree_control",
        Some("+cpuset +cpu +io +memory"),
        Refusal::Errno(libc::EINVAL),
    );
    fake.refuse_write(
        "web/cgroup.subtree_control",
        Some("+io"),
        Refusal::Errno(libc::EBUSY),
    );
    let f = tree(&mut b);
    assert_eq!(f.len(), 2, "{f:#?}");
    assert_eq!(f[0].knob, "io.weight");
    assert!(f[0].reason.contains("\"+io\""), "{}", f[0].reason);
    assert_eq!(
        read(&fake, &b, "web", "cgroup.subtree_control"),
        "cpuset cpu memory"
    );
}

#[test]
fn old_kernel_without_cpu_idle() {
    let fake = FakeCgroupFs::with_kernel(FakeKernel {
        cpu_idle: false,
        ..Default::default()
    });
    let mount = fake.add_v2_mount("cg", ALL);
    let mut b = Cgroup2Backend::new(&mount, "atoll", fake.clone()).unwrap();
    assert!(b
        .apply(&GroupPath::root(), &root_settings())
        .unwrap()
        .is_empty());
    assert!(!b.capabilities().cpu_idle);
    let idle = GroupSettings {
        cpu_idle: true,
        ..Default::default()
    };
    let f = b.apply(&gp("batch"), &idle).unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].knob.as_str(), f[0].got.as_str()), ("cpu.idle", "n/a"));
}

#[test]
fn missing_parent_is_no_group() {
    let (_, _, mut b) = backend(ALL);
    b.apply(&GroupPath::root(), &root_settings()).unwrap();
    let e = b.apply(&gp("web/api"), &unit()).unwrap_err();
    assert!(
        matches!(e, BackendError::NoGroup(ref p) if p == &gp("web")),
        "{e:?}"
    );
}

#[test]
fn moves_and_restores_processes() {
    let (fake, mount, mut b) = backend(ALL);
    tree(&mut b);
    std::fs::create_dir_all(mount.join("system.slice/app.service")).unwrap();
    fake.set(&mount.join("system.slice/app.service/cgroup.procs"), "42\n");
    b.move_process(42, &gp("web/api")).unwrap();
    assert_eq!(b.processes(&gp("web/api")).unwrap(), [42]);
    assert_eq!(
        fake.get(&mount.join("system.slice/app.service/cgroup.procs")),
        ""
    );
    // The origin's leaf is gone: the nearest ancestor takes it.
    let origin = CgroupMembership::parse("0::/system.slice/app.service/sub/gone\n").unwrap();
    b.restore_process(42, &origin).unwrap();
    assert_eq!(
        fake.get(&mount.join("system.slice/app.service/cgroup.procs")),
        "42\n"
    );
    assert!(b.processes(&gp("web/api")).unwrap().is_empty());
    // No unified entry: the mount root.
    b.move_process(42, &gp("web/api")).unwrap();
    b.restore_process(42, &CgroupMembership::default()).unwrap();
    assert_eq!(fake.get(&mount.join("cgroup.procs")), "42\n");

    fake.kill(7);
    let e = b.move_process(7, &gp("web/api")).unwrap_err();
    assert!(
        matches!(e, BackendError::NoProcess(7)) && e.is_gone(),
        "{e:?}"
    );
    let e = b.move_process(42, &gp("nope")).unwrap_err();
    assert!(matches!(e, BackendError::NoGroup(_)), "{e:?}");
    // An interior group refuses processes (no internal processes).
    let e = b.move_process(42, &gp("web")).unwrap_err();
    assert!(matches!(e, BackendError::Io { .. }), "{e:?}");
    assert!(e.to_string().contains("cgroup.procs"), "{e}");
}

#[test]
fn remove_retries_busy_and_tolerates_missing() {
    let (fake, _, mut b) = backend(ALL);
    tree(&mut b);
    fake.refuse_rmdir("web/api", libc::EBUSY, Some(2));
    b.remove(&gp("web/api")).unwrap();
    assert!(!b.exists(&gp("web/api")));
    b.remove(&gp("web/api")).unwrap();
    fake.refuse_rmdir("atoll/web", libc::EBUSY, Some(5));
    let e = b.remove(&gp("web")).unwrap_err();
    assert!(e.to_string().contains("rmdir"), "{e}");
    // A group with a process is busy.
    b.apply(&gp("web"), &island("2-3")).unwrap();
    b.apply(&gp("web/x"), &GroupSettings::default()).unwrap();
    b.move_process(9, &gp("web/x")).unwrap();
    assert!(b.remove(&gp("web/x")).is_err());
}

#[test]
fn the_cpu_pressure_file_is_named_where_it_exists() {
    let (fake, _, mut b) = backend(ALL);
    tree(&mut b);
    let d = b.dir(&gp("web/api"));
    assert_eq!(
        b.cpu_pressure_file(&gp("web/api")),
        Some(d.join("cpu.pressure"))
    );
    assert_eq!(b.cpu_pressure_file(&gp("web/none")), None, "no group");
    // A kernel without PSI shows no pressure files.
    fake.remove_file(&d.join("cpu.pressure"));
    assert_eq!(b.cpu_pressure_file(&gp("web/api")), None);
}

#[test]
fn stats_read_every_file() {
    let (fake, _, mut b) = backend(ALL);
    tree(&mut b);
    let d = b.dir(&gp("web/api"));
    fake.set(
        &d.join("cpu.stat"),
        "usage_usec 5000\nuser_usec 3000\nsystem_usec 2000\nnr_periods 10\nnr_throttled 4\nthrottled_usec 700\n",
    );
    fake.set(&d.join("memory.current"), "123456\n");
    fake.set(
        &d.join("io.stat"),
        "8:0 rbytes=10 wbytes=20 rios=1 wios=2\n8:16 rbytes=1 wbytes=2\n",
    );
    fake.set(
        &d.join("cpu.pressure"),
        "some avg10=1.50 avg60=0.00 avg300=0.00 total=99\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3\n",
    );
    let s = b.stats(&gp("web/api")).unwrap();
    assert_eq!(s.cpu_usage_us, Some(5000));
    assert_eq!(
        (s.nr_periods, s.nr_throttled, s.throttled_us),
        (Some(10), Some(4), Some(700))
    );
    assert_eq!(s.memory_current, Some(123_456));
    assert_eq!((s.io_read_bytes, s.io_write_bytes), (Some(11), Some(22)));
    assert_eq!(s.cpu_pressure.unwrap().some.total_us, 99);
    assert_eq!(s.cpu_pressure.unwrap().full.unwrap().total_us, 3);
    assert!(s.memory_pressure.is_some());

    // A selection reads only its files: garbage elsewhere goes unnoticed.
    fake.set(&d.join("memory.current"), "garbage\n");
    fake.set(&d.join("io.stat"), "garbage\n");
    let c = b.stats_of(&gp("web/api"), StatSelect::CPU).unwrap();
    assert_eq!(c.cpu_usage_us, Some(5000));
    assert_eq!(c.cpu_pressure.unwrap().some.total_us, 99);
    assert_eq!((c.nr_periods, c.memory_current), (None, None));
    assert_eq!((c.io_read_bytes, c.memory_pressure), (None, None));
    assert!(b.stats(&gp("web/api")).is_err());
    fake.set(&d.join("memory.current"), "123456\n");
    fake.set(
        &d.join("io.stat"),
        "8:0 rbytes=10 wbytes=20 rios=1 wios=2\n8:16 rbytes=1 wbytes=2\n",
    );

    fake.remove_file(&d.join("io.stat"));
    fake.remove_file(&d.join("memory.pressure"));
    let s = b.stats(&gp("web/api")).unwrap();
    assert_eq!((s.io_read_bytes, s.memory_pressure), (None, None));

    fake.set(&d.join("cpu.stat"), "usage_usec lots\n");
    let e = b.stats(&gp("web/api")).unwrap_err();
    match &e {
        BackendError::Parse { path, value, .. } => {
            assert_eq!(path, &d.join("cpu.stat"));
            assert_eq!(value, "usage_usec lots");
        }
        other => panic!("{other:?}"),
    }
    fake.set(&d.join("cpu.stat"), "usage_usec 1\n");
    fake.set(&d.join("io.pressure"), "some avg10=1.0\n");
    assert!(b.stats(&gp("web/api")).is_err());
    assert!(matches!(
        b.stats(&gp("gone")),
        Err(BackendError::NoGroup(_))
    ));
    assert!(matches!(
        b.processes(&gp("gone")),
        Err(BackendError::NoGroup(_))
    ));
    assert!(matches!(
        b.children(&gp("gone")),
        Err(BackendError::NoGroup(_))
    ));
}

#[test]
fn capabilities_follow_the_kernel() {
    let (_, _, mut b) = backend(ALL);
    let before = b.capabilities();
    assert!(before.cpuset && before.cpu && before.memory && before.io && before.partitions);
    assert!(before.cpu_idle && !before.rt_groups && before.psi);
    tree(&mut b);
    assert_eq!(b.capabilities(), before);
    assert_eq!(b.kind(), BackendKind::Cgroup2);
    assert_eq!(b.root_name(), "atoll");
}

#[test]
fn nested_root_name_and_bad_names() {
    let (fake, mount, _) = backend(ALL);
    std::fs::create_dir(mount.join("system.slice")).unwrap();
    fake.set(
        &mount.join("system.slice/cgroup.controllers"),
        "cpuset cpu memory",
    );
    fake.set(&mount.join("system.slice/cgroup.subtree_control"), "");
    let mut b = Cgroup2Backend::new(&mount, "system.slice/atoll", fake.clone()).unwrap();
    let f = b.apply(&GroupPath::root(), &root_settings()).unwrap();
    assert!(f.is_empty(), "{f:#?}");
    assert_eq!(b.added_parent_controllers(), ["cpuset", "cpu", "memory"]);
    assert!(Cgroup2Backend::new(&mount, "../etc", fake.clone()).is_err());
    assert!(Cgroup2Backend::new(&mount, "", fake).is_err());
}

#[test]
fn an_islands_cpus_are_read_back_from_its_cpuset() {
    let (fake, mount, mut b) = backend(&["cpuset", "cpu", "memory", "io"]);
    b.apply(&GroupPath::root(), &root_settings()).unwrap();
    b.apply(&gp("web"), &island("2-3")).unwrap();
    assert_eq!(b.cpuset(&gp("web")).unwrap(), Some(set("2-3")));
    fake.set(&mount.join("atoll/web/cpuset.cpus"), "2\n");
    assert_eq!(b.cpuset(&gp("web")).unwrap(), Some(set("2")));
    assert!(matches!(
        b.cpuset(&gp("gone")),
        Err(BackendError::NoGroup(_))
    ));
}

#[test]
fn a_groups_v2_directory_is_named_with_the_mount_for_nft() {
    let (_, mount, b) = backend(&["cpuset", "cpu"]);
    let (m, dir) = b.cgroup2_dir(&gp("work/api")).unwrap();
    assert_eq!(m, mount);
    assert_eq!(dir, mount.join("atoll/work/api"));
}
