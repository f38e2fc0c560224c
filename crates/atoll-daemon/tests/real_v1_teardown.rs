//! Teardown on this machine's real cgroup v1 hierarchies, when someone made
//! a group of their own inside atoll's tree in one hierarchy only (the
//! review's `mkdir /sys/fs/cgroup/memory/ROOT/main/light/sub; atoll stop`).
//!
//! Runs only as root with writable v1 `cpuset`, `cpu` and `memory`
//! hierarchies and at least two CPUs; prints "skipped: ..." otherwise.
//! Everything happens under a root group named `atoll-test-<pid>-<nanos>`;
//! the only process moved is a `sleep` this test starts (into the stray
//! group it made), and drop guards kill it and remove the groups even if an
//! assertion fails. Time is a manual clock.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use atoll_core::clock::ManualClock;
use atoll_core::spec::Entitlement;

/// The rig, and the memory hierarchy's mount, or why the test skips.
fn setup() -> Option<(common::RealV1, PathBuf)> {
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return None;
        }
    };
    let Some(memory) = real.paths().memory.clone() else {
        println!("skipped: no writable v1 memory hierarchy");
        return None;
    };
    Some((real, memory))
}

/// Every directory of atoll's test root, in every hierarchy.
fn left_behind(real: &common::RealV1) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        if !d.is_dir() {
            return;
        }
        out.push(d.to_path_buf());
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    for (_, m) in real.paths().hierarchies() {
        walk(&m.join(&real.root), &mut out);
    }
    out
}

#[test]
fn a_stray_group_in_one_hierarchy_is_removed_with_the_rest() {
    let Some((real, memory)) = setup() else {
        return;
    };
    let clock = ManualClock::new();
    let mut c = real.start(real.one_unit_spec(Entitlement::default(), vec![]), &clock);
    let stray = memory.join(&real.root).join("main/light/sub");
    std::fs::create_dir(&stray).unwrap();
    assert!(!real
        .paths()
        .cpuset
        .join(&real.root)
        .join("main/light/sub")
        .exists());
    let result = c.teardown();
    let left = left_behind(&real);
    assert!(left.is_empty(), "left behind: {left:#?} ({result:?})");
    result.unwrap();
}

/// Kills and reaps the child when the test ends (before the root guard
/// removes the groups: it is declared after it).
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_process_in_a_stray_group_of_one_hierarchy_is_given_back_and_the_group_removed() {
    let Some((real, memory)) = setup() else {
        return;
    };
    let clock = ManualClock::new();
    let mut c = real.start(real.one_unit_spec(Entitlement::default(), vec![]), &clock);
    let stray = memory.join(&real.root).join("main/light/sub/deeper/still");
    std::fs::create_dir_all(&stray).unwrap();
    let child = Kill(Command::new("sleep").arg("60").spawn().unwrap());
    // In the stray group's memory hierarchy only: atoll never put it there.
    std::fs::write(stray.join("cgroup.procs"), child.0.id().to_string()).unwrap();
    c.teardown()
        .expect("teardown finds the process wherever it is and gives it back");
    assert!(left_behind(&real).is_empty(), "{:?}", left_behind(&real));
    let cg = std::fs::read_to_string(format!("/proc/{}/cgroup", child.0.id())).unwrap();
    assert!(!cg.contains(&real.root), "still inside atoll's tree: {cg}");
    drop(child);
}
