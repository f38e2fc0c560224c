//! The cgroup1 freezer knob against the running kernel.
//!
//! Runs only as root with writable v1 `cpuset`, `cpu` and `freezer`
//! hierarchies; prints "skipped: ..." otherwise. Everything happens under a
//! root group named `atoll-test-<pid>-<nanos>`, the only process moved is a
//! `sleep` this test starts, and a drop guard thaws the test's groups, kills
//! the child (a frozen v1 task does not die of SIGKILL until thawed) and
//! removes the groups even if an assertion fails.
//!
//! Freezing is asynchronous, so states are polled until they show (at most
//! a few seconds); nothing is asserted about how long that takes.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use atoll_cgroup::{Cgroup1Backend, RealFs};
use atoll_core::backend::{Actuator, FreezeState, Monitor};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::process::CgroupMembership;
use atoll_core::CpuSet;
use common::{gp, read, Guard};

/// The one-letter state in `/proc/PID/status` (`S`, `D`, ...).
fn task_state(pid: u32) -> String {
    let status = read(Path::new(&format!("/proc/{pid}/status")));
    status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_default()
        .to_string()
}

/// Polls `probe` until it returns `want` (up to about 5 s); the last value.
fn wait_for<T: PartialEq + std::fmt::Debug>(want: &T, mut probe: impl FnMut() -> T) -> T {
    let mut last = probe();
    for _ in 0..500 {
        if &last == want {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        last = probe();
    }
    last
}

#[test]
fn cgroup1_freezer_on_the_real_kernel() {
    let Some(setup) = common::setup() else {
        return;
    };
    let (paths, root) = (setup.paths.clone(), setup.root.clone());
    let Some(freezer) = paths.freezer.clone() else {
        println!("skipped: no writable v1 freezer hierarchy");
        return;
    };
    let mut guard = Guard::new(&setup, Some(freezer.clone()));
    let mut b = Cgroup1Backend::new(paths.clone(), &root, RealFs).unwrap();
    b.set_rmdir_retry(2, Duration::from_millis(10));
    assert!(b.capabilities().freezer);

    let cpus = CpuSet::parse(&read(&paths.cpuset.join("cpuset.cpus"))).unwrap();
    let mems = CpuSet::parse(&read(&paths.cpuset.join("cpuset.mems"))).unwrap();
    let top = GroupSettings {
        cpus: Some(cpus),
        mems: Some(mems),
        ..Default::default()
    };
    assert!(b.apply(&GroupPath::root(), &top).unwrap().is_empty());
    let u = gp("u");
    let running = GroupSettings::default();
    let frozen = GroupSettings {
        frozen: true,
        ..Default::default()
    };
    assert!(b.apply(&u, &running).unwrap().is_empty());
    let state_file = freezer.join(&root).join("u/freezer.state");
    assert_eq!(read(&state_file), "THAWED");
    assert_eq!(b.freeze_state(&u).unwrap(), Some(FreezeState::Thawed));

    let child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    guard.child = Some(child);
    let cg_file = format!("/proc/{pid}/cgroup");
    let origin_text = read(Path::new(&cg_file));
    let origin = CgroupMembership::parse(&origin_text).unwrap();
    b.move_process(pid, &u).unwrap();
    let now = CgroupMembership::parse(&read(Path::new(&cg_file))).unwrap();
    let want = format!("/{root}/u");
    assert_eq!(now.controller("freezer"), Some(want.as_str()));
    assert_eq!(wait_for(&"S".to_string(), || task_state(pid)), "S");

    // Freeze: the kernel stops the task (shown as D, in __refrigerator).
    let f = b.apply(&u, &frozen).unwrap();
    assert!(f.is_empty(), "{f:#?}");
    let st = wait_for(&Some(FreezeState::Frozen), || b.freeze_state(&u).unwrap());
    assert_eq!(st, Some(FreezeState::Frozen));
    assert_eq!(read(&state_file), "FROZEN");
    assert_eq!(
        read(&state_file.with_file_name("freezer.self_freezing")),
        "1"
    );
    assert_eq!(wait_for(&"D".to_string(), || task_state(pid)), "D");
    // Re-applying asks nothing new.
    assert!(b.apply(&u, &frozen).unwrap().is_empty());

    // Thaw: it runs (sleeps) again.
    assert!(b.apply(&u, &running).unwrap().is_empty());
    let st = wait_for(&Some(FreezeState::Thawed), || b.freeze_state(&u).unwrap());
    assert_eq!(st, Some(FreezeState::Thawed));
    assert_eq!(wait_for(&"S".to_string(), || task_state(pid)), "S");

    // Removing a frozen group thaws it first: the rmdir fails (the task is
    // still inside) but the task is not left stopped.
    b.apply(&u, &frozen).unwrap();
    let st = wait_for(&Some(FreezeState::Frozen), || b.freeze_state(&u).unwrap());
    assert_eq!(st, Some(FreezeState::Frozen));
    assert!(b.remove(&u).is_err());
    assert_eq!(read(&state_file), "THAWED");
    assert_eq!(wait_for(&"S".to_string(), || task_state(pid)), "S");

    // Moving the task out of a frozen group lets it run.
    b.apply(&u, &frozen).unwrap();
    assert_eq!(wait_for(&"D".to_string(), || task_state(pid)), "D");
    b.restore_process(pid, &origin).unwrap();
    assert_eq!(read(Path::new(&cg_file)), origin_text);
    assert_eq!(wait_for(&"S".to_string(), || task_state(pid)), "S");
    b.remove(&u).unwrap();
    b.remove(&GroupPath::root()).unwrap();
    for m in &setup.mounts {
        let d = m.join(&root);
        assert!(!d.exists(), "{} left behind", d.display());
    }
    guard.kill_child();
}
