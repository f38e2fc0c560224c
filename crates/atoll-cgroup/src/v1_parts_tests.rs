//! `apply_changed`: only the parts that changed are synced (see
//! [`crate::parts`]).

use std::time::Duration;

use atoll_core::backend::Actuator;
use atoll_core::plan::CpuMax;
use atoll_core::spec::MemoryEntitlement;

use super::*;
use crate::testutils::{FakeCgroupFs, FakeKernel};

fn gp(s: &str) -> GroupPath {
    GroupPath::from_relative(s)
}

fn backend() -> (FakeCgroupFs, V1Paths, Cgroup1Backend<FakeCgroupFs>) {
    let (fake, paths) = FakeCgroupFs::v1_machine(FakeKernel::default(), false);
    let mut b = Cgroup1Backend::new(paths.clone(), "atoll", fake.clone()).unwrap();
    b.set_rmdir_retry(3, Duration::ZERO);
    (fake, paths, b)
}

/// A unit with a cap and a memory entitlement v1 cannot give in full.
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
        ..Default::default()
    }
}

fn made(b: &mut Cgroup1Backend<FakeCgroupFs>) -> Vec<Fallback> {
    let root = GroupSettings {
        cpus: Some(CpuSet::parse("0-3").unwrap()),
        mems: Some(CpuSet::parse("0").unwrap()),
        ..Default::default()
    };
    b.apply(&GroupPath::root(), &root).unwrap();
    b.apply(&gp("isl"), &GroupSettings::default()).unwrap();
    b.apply(&gp("isl/u"), &unit(100)).unwrap()
}

#[test]
fn a_weight_change_writes_the_weight_alone_and_keeps_the_other_fallbacks() {
    let (fake, p, mut b) = backend();
    let full = made(&mut b);
    assert_eq!(
        full.iter().map(|f| f.knob.as_str()).collect::<Vec<_>>(),
        ["memory.min"]
    );
    // Drift in a part that does not change: not read, so not seen.
    let quota = p.cpu.join("atoll/isl/u/cpu.cfs_quota_us");
    fake.set(&quota, "-1");
    fake.take_writes();
    let got = b
        .apply_changed(&gp("isl/u"), &unit(100), &unit(400))
        .unwrap();
    let shares = p.cpu.join("atoll/isl/u/cpu.shares");
    assert_eq!(
        fake.take_writes(),
        [(shares.clone(), weight_to_shares(400).to_string())]
    );
    assert_eq!(got, full, "the memory part's fallback is still reported");
    assert_eq!(fake.get(&quota).trim(), "-1");
    // Nothing changed: nothing written.
    assert_eq!(
        b.apply_changed(&gp("isl/u"), &unit(400), &unit(400))
            .unwrap(),
        full
    );
    assert_eq!(fake.take_writes(), []);
    // A whole sync (drift repair) finds the drift.
    b.apply(&gp("isl/u"), &unit(400)).unwrap();
    assert_eq!(fake.take_writes(), [(quota.clone(), "50000".to_string())]);
    assert_eq!(fake.get(&shares).trim(), weight_to_shares(400).to_string());
}

#[test]
fn a_group_not_synced_whole_is_synced_whole() {
    let (fake, p, mut b) = backend();
    made(&mut b);
    // Never applied: made, every knob written.
    let f = b
        .apply_changed(&gp("isl/v"), &unit(100), &unit(400))
        .unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(p.cpu.join("atoll/isl/v").is_dir());
    assert_eq!(
        fake.get(&p.cpu.join("atoll/isl/v/cpu.cfs_quota_us")).trim(),
        "50000"
    );
    // Removed, then asked again from what was taken before: whole again.
    b.remove(&gp("isl/v")).unwrap();
    b.apply_changed(&gp("isl/v"), &unit(400), &unit(400))
        .unwrap();
    assert!(p.cpu.join("atoll/isl/v").is_dir());
    assert_eq!(
        fake.get(&p.cpu.join("atoll/isl/v/cpu.shares")).trim(),
        weight_to_shares(400).to_string()
    );
}
