//! The freezer knob in both backends, on fake trees.

use std::path::{Path, PathBuf};
use std::time::Duration;

use atoll_core::backend::{Actuator, BackendKind, Fallback, Monitor};
use atoll_core::plan::{GroupPath, GroupSettings, Partition};
use atoll_core::process::CgroupMembership;
use atoll_core::CpuSet;

use super::*;
use crate::mounts::{choose, detect, Choice, Requested, V1Paths};
use crate::testutils::{FakeCgroupFs, FakeKernel, Refusal};
use crate::v1::Cgroup1Backend;
use crate::v2::Cgroup2Backend;

fn gp(s: &str) -> GroupPath {
    GroupPath::from_relative(s)
}

fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

fn root() -> GroupSettings {
    GroupSettings {
        cpus: Some(set("0-3")),
        mems: Some(set("0")),
        ..Default::default()
    }
}

fn island() -> GroupSettings {
    GroupSettings {
        cpus: Some(set("2-3")),
        mems: Some(set("0")),
        partition: Some(Partition::Root),
        ..Default::default()
    }
}

fn unit(frozen: bool) -> GroupSettings {
    GroupSettings {
        cpu_weight: Some(200),
        frozen,
        ..Default::default()
    }
}

/// Root, island `web`, unit `web/api` (thawed); the fallbacks.
fn tree<B: Actuator>(b: &mut B) -> Vec<Fallback> {
    let mut f = b.apply(&GroupPath::root(), &root()).unwrap();
    f.extend(b.apply(&gp("web"), &island()).unwrap());
    f.extend(b.apply(&gp("web/api"), &unit(false)).unwrap());
    f
}

/// Writes to files named `name` since the last call.
fn writes_to(fake: &FakeCgroupFs, name: &str) -> Vec<(PathBuf, String)> {
    fake.take_writes()
        .into_iter()
        .filter(|(p, _)| p.file_name().is_some_and(|n| n == name))
        .collect()
}

fn v2() -> (FakeCgroupFs, Cgroup2Backend<FakeCgroupFs>) {
    let (fake, mount) = FakeCgroupFs::v2_machine(&["cpuset", "cpu", "io", "memory"]);
    let mut b = Cgroup2Backend::new(&mount, "atoll", fake.clone()).unwrap();
    b.set_rmdir_retry(2, Duration::ZERO);
    (fake, b)
}

fn v1_with(freezer: bool) -> (FakeCgroupFs, V1Paths, Cgroup1Backend<FakeCgroupFs>) {
    let (fake, paths) = if freezer {
        FakeCgroupFs::v1_machine_with_freezer(FakeKernel::default(), false)
    } else {
        FakeCgroupFs::v1_machine(FakeKernel::default(), false)
    };
    let mut b = Cgroup1Backend::new(paths.clone(), "atoll", fake.clone()).unwrap();
    b.set_rmdir_retry(2, Duration::ZERO);
    b.set_exclusive_root(true);
    (fake, paths, b)
}

/// `<freezer mount>/atoll/<g>/<file>`.
fn fz(fake: &FakeCgroupFs, paths: &V1Paths, g: &str, file: &str) -> String {
    let m = paths.freezer.as_ref().unwrap();
    fake.get(&m.join("atoll").join(g).join(file))
        .trim()
        .to_string()
}

fn v2_read(fake: &FakeCgroupFs, b: &Cgroup2Backend<FakeCgroupFs>, g: &str, f: &str) -> String {
    fake.get(&b.dir(&gp(g)).join(f)).trim().to_string()
}

#[test]
fn parsers() {
    assert_eq!(parse_v1_state("FROZEN\n").unwrap(), FreezeState::Frozen);
    assert_eq!(parse_v1_state("FREEZING").unwrap(), FreezeState::Freezing);
    assert_eq!(parse_v1_state("THAWED").unwrap(), FreezeState::Thawed);
    assert_eq!(parse_v1_state("frozen").unwrap_err().value, "frozen");
    assert!(parse_flag("1\n").unwrap());
    assert!(!parse_flag("0").unwrap());
    assert!(parse_flag("2").is_err());
    assert_eq!(v2_state(true, true), FreezeState::Frozen);
    assert_eq!(v2_state(true, false), FreezeState::Freezing);
    assert_eq!(v2_state(false, true), FreezeState::Frozen, "an ancestor's");
    assert_eq!(v2_state(false, false), FreezeState::Thawed);
    assert_eq!(v1_word(true), "FROZEN");
    assert_eq!(v1_word(false), "THAWED");
}

#[test]
fn v2_freezes_and_thaws_writing_only_on_change() {
    let (fake, mut b) = v2();
    assert!(tree(&mut b).is_empty());
    assert!(b.capabilities().freezer);
    // A thawed plan on a new group writes nothing to cgroup.freeze.
    assert_eq!(writes_to(&fake, V2_FREEZE), []);
    assert_eq!(
        b.freeze_state(&gp("web/api")).unwrap(),
        Some(FreezeState::Thawed)
    );

    assert!(b.apply(&gp("web/api"), &unit(true)).unwrap().is_empty());
    let w = writes_to(&fake, V2_FREEZE);
    assert_eq!(w, [(b.dir(&gp("web/api")).join(V2_FREEZE), "1".into())]);
    assert!(v2_read(&fake, &b, "web/api", V2_EVENTS).contains("frozen 1"));
    assert_eq!(
        b.freeze_state(&gp("web/api")).unwrap(),
        Some(FreezeState::Frozen)
    );
    // Unchanged: no write.
    assert!(b.apply(&gp("web/api"), &unit(true)).unwrap().is_empty());
    assert_eq!(writes_to(&fake, V2_FREEZE), []);
    // Still stopping: the kernel has not set `frozen 1` yet.
    let events = b.dir(&gp("web/api")).join(V2_EVENTS);
    fake.set(&events, "populated 1\nfrozen 0\n");
    assert_eq!(
        b.freeze_state(&gp("web/api")).unwrap(),
        Some(FreezeState::Freezing)
    );

    assert!(b.apply(&gp("web/api"), &unit(false)).unwrap().is_empty());
    assert_eq!(v2_read(&fake, &b, "web/api", V2_FREEZE), "0");
    assert_eq!(writes_to(&fake, V2_FREEZE).len(), 1);
    assert_eq!(
        b.freeze_state(&gp("web/api")).unwrap(),
        Some(FreezeState::Thawed)
    );
    assert!(b.freeze_state(&gp("nope")).is_err());
}

#[test]
fn v2_a_frozen_parent_freezes_the_child_without_touching_its_knob() {
    let (fake, mut b) = v2();
    tree(&mut b);
    fake.take_writes();
    let frozen_island = GroupSettings {
        frozen: true,
        ..island()
    };
    assert!(b.apply(&gp("web"), &frozen_island).unwrap().is_empty());
    assert_eq!(
        b.freeze_state(&gp("web/api")).unwrap(),
        Some(FreezeState::Frozen)
    );
    assert!(b.apply(&gp("web/api"), &unit(false)).unwrap().is_empty());
    let w = writes_to(&fake, V2_FREEZE);
    assert_eq!(w, [(b.dir(&gp("web")).join(V2_FREEZE), "1".into())]);
    assert_eq!(v2_read(&fake, &b, "web/api", V2_FREEZE), "0");
}

#[test]
fn v2_missing_or_refused_freeze_is_a_fallback() {
    let (fake, mut b) = v2();
    tree(&mut b);
    fake.refuse_write(V2_FREEZE, Some("1"), Refusal::Errno(libc::EBUSY));
    let f = b.apply(&gp("web/api"), &unit(true)).unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!((f[0].knob.as_str(), f[0].wanted.as_str()), (V2_FREEZE, "1"));
    assert_eq!(f[0].got, "0");
    assert!(f[0].reason.contains("EBUSY"), "{}", f[0].reason);
    fake.clear_refusals();

    // An old kernel (before 5.2) has no cgroup.freeze.
    for g in ["", "web/api"] {
        fake.remove_file(&b.dir(&gp(g)).join(V2_FREEZE));
    }
    assert!(!b.capabilities().freezer);
    let f = b.apply(&gp("web/api"), &unit(true)).unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].knob, V2_FREEZE);
    assert_eq!(f[0].got, "n/a");
    assert!(f[0].reason.contains("5.2"), "{}", f[0].reason);
    // Not asked for: no fallback; nothing to read.
    assert!(b.apply(&gp("web/api"), &unit(false)).unwrap().is_empty());
    assert_eq!(b.freeze_state(&gp("web/api")).unwrap(), None);
    b.remove(&gp("web/api")).unwrap();
}

#[test]
fn v2_remove_thaws_first() {
    let (fake, mut b) = v2();
    tree(&mut b);
    b.apply(&gp("web/api"), &unit(true)).unwrap();
    b.move_process(7, &gp("web/api")).unwrap();
    fake.take_writes();
    // The group still holds a task: rmdir fails, but the task runs again.
    assert!(b.remove(&gp("web/api")).is_err());
    assert_eq!(v2_read(&fake, &b, "web/api", V2_FREEZE), "0");
    assert!(v2_read(&fake, &b, "web/api", V2_EVENTS).contains("frozen 0"));
    assert_eq!(writes_to(&fake, V2_FREEZE).len(), 1);

    fake.kill(7);
    b.apply(&gp("web/api"), &unit(true)).unwrap();
    fake.take_writes();
    b.remove(&gp("web/api")).unwrap();
    assert!(!b.exists(&gp("web/api")));
    let w = writes_to(&fake, V2_FREEZE);
    assert_eq!(w, [(b.dir(&gp("web/api")).join(V2_FREEZE), "0".into())]);
    // A thawed group is removed without a write.
    b.remove(&gp("web")).unwrap();
    assert_eq!(writes_to(&fake, V2_FREEZE), []);
}

#[test]
fn v1_uses_the_freezer_hierarchy() {
    let (fake, p, mut b) = v1_with(true);
    assert!(tree(&mut b).is_empty());
    assert!(b.capabilities().freezer);
    let m = p.freezer.clone().unwrap();
    assert!(m.join("atoll/web/api").is_dir());
    assert!(p.hierarchies().iter().any(|(c, _)| *c == "freezer"));
    assert_eq!(writes_to(&fake, V1_STATE), []);
    assert_eq!(
        b.freeze_state(&gp("web/api")).unwrap(),
        Some(FreezeState::Thawed)
    );

    assert!(b.apply(&gp("web/api"), &unit(true)).unwrap().is_empty());
    let file = m.join("atoll/web/api").join(V1_STATE);
    assert_eq!(
        writes_to(&fake, V1_STATE),
        [(file.clone(), "FROZEN".into())]
    );
    assert_eq!(fz(&fake, &p, "web/api", V1_STATE), "FROZEN");
    assert_eq!(fz(&fake, &p, "web/api", V1_SELF), "1");
    assert_eq!(
        b.freeze_state(&gp("web/api")).unwrap(),
        Some(FreezeState::Frozen)
    );
    assert!(b.apply(&gp("web/api"), &unit(true)).unwrap().is_empty());
    assert_eq!(writes_to(&fake, V1_STATE), []);

    assert!(b.apply(&gp("web/api"), &unit(false)).unwrap().is_empty());
    assert_eq!(writes_to(&fake, V1_STATE), [(file, "THAWED".into())]);
    assert_eq!(fz(&fake, &p, "web/api", V1_STATE), "THAWED");
}

#[test]
fn v1_processes_move_in_and_out_of_the_freezer_group() {
    let (fake, p, mut b) = v1_with(true);
    tree(&mut b);
    let m = p.freezer.clone().unwrap();
    std::fs::create_dir(m.join("outside")).unwrap();
    fake.set(&m.join("outside/cgroup.procs"), "9\n");
    b.move_process(9, &gp("web/api")).unwrap();
    assert_eq!(fake.get(&m.join("atoll/web/api/cgroup.procs")).trim(), "9");
    let origin = CgroupMembership::parse("6:freezer:/outside\n3:cpuset:/\n1:cpu:/\n").unwrap();
    b.restore_process(9, &origin).unwrap();
    assert_eq!(fake.get(&m.join("outside/cgroup.procs")).trim(), "9");
    assert_eq!(fake.get(&m.join("atoll/web/api/cgroup.procs")).trim(), "");
}

#[test]
fn v1_compares_what_the_group_itself_asked() {
    let (fake, p, mut b) = v1_with(true);
    tree(&mut b);
    // A frozen island freezes its units; their own knob is left alone.
    let frozen_island = GroupSettings {
        frozen: true,
        ..island()
    };
    fake.take_writes();
    assert!(b.apply(&gp("web"), &frozen_island).unwrap().is_empty());
    assert_eq!(fz(&fake, &p, "web/api", V1_STATE), "FROZEN");
    assert_eq!(fz(&fake, &p, "web/api", V1_SELF), "0");
    assert!(b.apply(&gp("web/api"), &unit(false)).unwrap().is_empty());
    assert_eq!(writes_to(&fake, V1_STATE).len(), 1, "the island's only");

    // Still stopping: FREEZING is already what was asked.
    let m = p.freezer.clone().unwrap();
    fake.set(&m.join("atoll/web").join(V1_STATE), "FREEZING");
    assert_eq!(
        b.freeze_state(&gp("web")).unwrap(),
        Some(FreezeState::Freezing)
    );
    assert!(b.apply(&gp("web"), &frozen_island).unwrap().is_empty());
    assert_eq!(writes_to(&fake, V1_STATE), []);

    // Kernels without freezer.self_freezing: compared on freezer.state.
    fake.remove_file(&m.join("atoll/web").join(V1_SELF));
    assert!(b.apply(&gp("web"), &frozen_island).unwrap().is_empty());
    assert_eq!(writes_to(&fake, V1_STATE), []);
    assert!(b.apply(&gp("web"), &island()).unwrap().is_empty());
    let w = writes_to(&fake, V1_STATE);
    assert_eq!(w, [(m.join("atoll/web").join(V1_STATE), "THAWED".into())]);
    assert_eq!(fz(&fake, &p, "web", V1_STATE), "THAWED");
}

#[test]
fn v1_refused_or_unavailable_freezer_is_a_fallback() {
    let (fake, _, mut b) = v1_with(true);
    tree(&mut b);
    fake.refuse_write(V1_STATE, Some("FROZEN"), Refusal::Errno(libc::EACCES));
    let f = b.apply(&gp("web/api"), &unit(true)).unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].knob, V1_STATE);
    assert_eq!(
        (f[0].wanted.as_str(), f[0].got.as_str()),
        ("FROZEN", "THAWED")
    );
    assert!(f[0].reason.contains("EACCES"), "{}", f[0].reason);

    let (_, p, mut b) = v1_with(false);
    assert!(p.freezer.is_none());
    assert!(tree(&mut b).is_empty());
    assert!(!b.capabilities().freezer);
    let f = b.apply(&gp("web/api"), &unit(true)).unwrap();
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!((f[0].knob.as_str(), f[0].got.as_str()), (V1_STATE, "n/a"));
    assert!(
        f[0].reason.contains("no writable freezer"),
        "{}",
        f[0].reason
    );
    assert_eq!(b.freeze_state(&gp("web/api")).unwrap(), None);
    b.remove(&gp("web/api")).unwrap();
}

#[test]
fn v1_remove_thaws_first() {
    let (fake, p, mut b) = v1_with(true);
    tree(&mut b);
    b.apply(&gp("web/api"), &unit(true)).unwrap();
    b.move_process(7, &gp("web/api")).unwrap();
    assert!(b.remove(&gp("web/api")).is_err());
    assert_eq!(fz(&fake, &p, "web/api", V1_STATE), "THAWED");

    fake.kill(7);
    b.apply(&gp("web/api"), &unit(true)).unwrap();
    fake.take_writes();
    b.remove(&gp("web/api")).unwrap();
    let m = p.freezer.clone().unwrap();
    let w = writes_to(&fake, V1_STATE);
    assert_eq!(
        w,
        [(m.join("atoll/web/api").join(V1_STATE), "THAWED".into())]
    );
    for (_, h) in p.hierarchies() {
        assert!(!h.join("atoll/web/api").exists(), "{}", h.display());
    }
    // A failed thaw is reported when the group could not go.
    tree(&mut b);
    b.apply(&gp("web/api"), &unit(true)).unwrap();
    b.move_process(8, &gp("web/api")).unwrap();
    fake.refuse_write(V1_STATE, Some("THAWED"), Refusal::Errno(libc::EIO));
    let e = b.remove(&gp("web/api")).unwrap_err().to_string();
    assert!(e.contains(V1_STATE), "{e}");
}

#[test]
fn choose_picks_up_a_writable_freezer() {
    let (fake, paths) = FakeCgroupFs::v1_machine_with_freezer(FakeKernel::default(), true);
    let mounts = detect(&fake.write_mountinfo()).unwrap();
    let choice = choose(Requested::Cgroup1, &mounts, &fake, &|_| true).unwrap();
    assert_eq!(choice, Choice::Cgroup1(paths.clone()));
    let fz = paths.freezer.clone().unwrap();
    let choice = choose(Requested::Cgroup1, &mounts, &fake, &|p: &Path| p != fz).unwrap();
    let Choice::Cgroup1(p) = choice else {
        panic!("{choice:?}")
    };
    assert_eq!(p.freezer, None);
    let b = Cgroup1Backend::new(paths, "atoll", fake).unwrap();
    assert_eq!(b.kind(), BackendKind::Cgroup1);
}
