//! `apply_changed` on cgroup2: only the parts that changed are synced (see
//! [`crate::parts`]), counted in the files the fake tree saw read and
//! written.

use std::time::Duration;

use atoll_core::plan::CpuMax;
use atoll_core::spec::MemoryEntitlement;

use super::*;
use crate::testutils::{FakeCgroupFs, Refusal};

const ALL: &[&str] = &["cpuset", "cpu", "io", "memory", "pids"];

fn gp(s: &str) -> GroupPath {
    GroupPath::from_relative(s)
}

fn backend(controllers: &[&str]) -> (FakeCgroupFs, Cgroup2Backend<FakeCgroupFs>) {
    let (fake, mount) = FakeCgroupFs::v2_machine(controllers);
    let mut b = Cgroup2Backend::new(&mount, "atoll", fake.clone()).unwrap();
    b.set_rmdir_retry(3, Duration::ZERO);
    (fake, b)
}

/// A unit with a cap, a memory floor and an IO weight.
fn unit(weight: u32) -> GroupSettings {
    GroupSettings {
        cpu_weight: Some(weight),
        cpu_max: Some(CpuMax {
            quota_us: 50_000,
            period_us: 100_000,
        }),
        memory: MemoryEntitlement {
            min: Some(1 << 20),
            ..Default::default()
        },
        io_weight: Some(300),
        ..Default::default()
    }
}

/// Root, island `isl` on CPUs 0-1, unit `isl/u`: each synced whole. The
/// fake's logs are emptied.
fn made(fake: &FakeCgroupFs, b: &mut Cgroup2Backend<FakeCgroupFs>) -> Vec<Fallback> {
    let root = GroupSettings {
        cpus: Some(CpuSet::parse("0-3").unwrap()),
        mems: Some(CpuSet::parse("0").unwrap()),
        ..Default::default()
    };
    b.apply(&GroupPath::root(), &root).unwrap();
    let island = GroupSettings {
        cpus: Some(CpuSet::parse("0-1").unwrap()),
        ..Default::default()
    };
    b.apply(&gp("isl"), &island).unwrap();
    let f = b.apply(&gp("isl/u"), &unit(100)).unwrap();
    fake.take_writes();
    fake.take_reads();
    f
}

#[test]
fn a_boost_reads_the_weight_files_and_writes_the_weight_alone() {
    let (fake, mut b) = backend(ALL);
    let full = made(&fake, &mut b);
    let dir = b.dir(&gp("isl/u"));
    // Drift in a part that does not change: not read, so not seen.
    fake.set(&dir.join("cpu.max"), "max 100000");
    let got = b
        .apply_changed(&gp("isl/u"), &unit(100), &unit(10_000))
        .unwrap();
    assert_eq!(
        fake.take_reads(),
        [dir.join("cpu.idle"), dir.join("cpu.weight")]
    );
    assert_eq!(
        fake.take_writes(),
        [(dir.join("cpu.weight"), "10000".to_string())]
    );
    assert_eq!(got, full);
    // The boost's end: the same two files read, the one written back.
    b.apply_changed(&gp("isl/u"), &unit(10_000), &unit(100))
        .unwrap();
    assert_eq!(fake.take_reads().len(), 2);
    assert_eq!(
        fake.take_writes(),
        [(dir.join("cpu.weight"), "100".to_string())]
    );
    // Nothing changed: nothing read or written.
    b.apply_changed(&gp("isl/u"), &unit(100), &unit(100))
        .unwrap();
    assert_eq!(fake.take_reads(), Vec::<PathBuf>::new());
    assert_eq!(fake.take_writes(), []);
    // A whole sync (drift repair) finds the drift.
    b.apply(&gp("isl/u"), &unit(100)).unwrap();
    assert_eq!(
        fake.take_writes(),
        [(dir.join("cpu.max"), "50000 100000".to_string())]
    );
    assert_eq!(fake.get(&dir.join("cpu.weight")).trim(), "100");
}

#[test]
fn each_part_writes_its_own_files() {
    let (fake, mut b) = backend(ALL);
    made(&fake, &mut b);
    let dir = b.dir(&gp("isl/u"));
    let mut capped = unit(100);
    capped.cpu_max = Some(CpuMax {
        quota_us: 20_000,
        period_us: 100_000,
    });
    b.apply_changed(&gp("isl/u"), &unit(100), &capped).unwrap();
    assert_eq!(
        fake.take_writes(),
        [(dir.join("cpu.max"), "20000 100000".to_string())]
    );
    assert!(fake.take_reads().iter().all(|p| p.ends_with("cpu.max")));
    let mut limited = capped.clone();
    limited.memory.max = Some(1 << 30);
    limited.io_weight = Some(50);
    b.apply_changed(&gp("isl/u"), &capped, &limited).unwrap();
    let files: Vec<String> = fake
        .take_reads()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        files
            .iter()
            .all(|f| f.starts_with("memory.") || f.starts_with("io.")),
        "{files:?}"
    );
    let written: Vec<String> = fake
        .take_writes()
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written, ["memory.max", "io.weight"]);
    // Into idle and out again: cpu.idle, then the weight after it.
    let mut idle = limited.clone();
    idle.cpu_idle = true;
    b.apply_changed(&gp("isl/u"), &limited, &idle).unwrap();
    assert_eq!(
        fake.take_writes(),
        [(dir.join("cpu.idle"), "1".to_string())]
    );
    let mut back = limited.clone();
    back.cpu_weight = Some(300);
    b.apply_changed(&gp("isl/u"), &idle, &back).unwrap();
    assert_eq!(
        fake.take_writes(),
        [
            (dir.join("cpu.idle"), "0".to_string()),
            (dir.join("cpu.weight"), "300".to_string())
        ]
    );
}

#[test]
fn a_group_not_synced_whole_is_synced_whole() {
    let (fake, mut b) = backend(ALL);
    made(&fake, &mut b);
    // Never applied: made, every knob written.
    b.apply_changed(&gp("isl/v"), &unit(100), &unit(400))
        .unwrap();
    let dir = b.dir(&gp("isl/v"));
    assert_eq!(fake.get(&dir.join("cpu.max")).trim(), "50000 100000");
    assert_eq!(fake.get(&dir.join("io.weight")).trim(), "default 300");
    // Removed, then asked again from what it took before: whole again.
    b.remove(&gp("isl/v")).unwrap();
    b.apply_changed(&gp("isl/v"), &unit(400), &unit(400))
        .unwrap();
    assert_eq!(fake.get(&dir.join("cpu.weight")).trim(), "400");
    // Forgotten refusals: whole, the controllers read again.
    b.retry_refused();
    fake.take_reads();
    b.apply_changed(&gp("isl/v"), &unit(400), &unit(500))
        .unwrap();
    assert!(fake.take_reads().contains(&dir.join("cgroup.controllers")));
    // A directory removed behind atoll's back: made again, whole.
    b.apply(&gp("isl/w"), &unit(100)).unwrap();
    fake.take_reads();
    std::fs::remove_dir_all(b.dir(&gp("isl/w"))).unwrap();
    b.apply_changed(&gp("isl/w"), &unit(100), &unit(200))
        .unwrap();
    assert_eq!(
        fake.get(&b.dir(&gp("isl/w")).join("cpu.max")).trim(),
        "50000 100000"
    );
}

#[test]
fn a_failed_write_makes_the_next_sync_whole() {
    let (fake, mut b) = backend(ALL);
    made(&fake, &mut b);
    let dir = b.dir(&gp("isl/u"));
    fake.refuse_write("isl/u/cpu.weight", None, Refusal::Errno(libc::EIO));
    assert!(b
        .apply_changed(&gp("isl/u"), &unit(100), &unit(400))
        .is_err());
    fake.clear_refusals();
    fake.take_reads();
    b.apply_changed(&gp("isl/u"), &unit(400), &unit(400))
        .unwrap();
    let reads = fake.take_reads();
    assert!(reads.contains(&dir.join("cgroup.controllers")), "{reads:?}");
    assert_eq!(fake.get(&dir.join("cpu.weight")).trim(), "400");
}

#[test]
fn a_part_whose_controller_is_not_enabled_is_synced_whole() {
    let (fake, mut b) = backend(&["cpuset", "cpu", "memory"]);
    let full = made(&fake, &mut b);
    let dir = b.dir(&gp("isl/u"));
    let io: Vec<&str> = full.iter().map(|f| f.knob.as_str()).collect();
    assert_eq!(io, ["io.weight"]);
    // A weight: its controller is there, the weight alone.
    let got = b
        .apply_changed(&gp("isl/u"), &unit(100), &unit(400))
        .unwrap();
    assert_eq!(got, full, "the io part's fallback is still reported");
    assert_eq!(fake.take_reads().len(), 2);
    // An IO weight: whole, so the fallback names what is asked now.
    let mut io = unit(400);
    io.io_weight = Some(600);
    let got = b.apply_changed(&gp("isl/u"), &unit(400), &io).unwrap();
    assert!(fake.take_reads().contains(&dir.join("cgroup.controllers")));
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].wanted, "default 600");
}
