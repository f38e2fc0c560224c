//! Drift on this machine's real cgroup v1 hierarchies: what someone changes
//! inside atoll's tree behind its back is put back (a knob), let go of (a
//! process moved out of its unit) or removed (a group atoll did not make),
//! each a decision that says what was found.
//!
//! Runs only as root with writable v1 `cpuset` and `cpu` hierarchies and at
//! least two CPUs; prints "skipped: ..." otherwise. Everything happens
//! under a root group named `atoll-test-<pid>-<nanos>`; the only process
//! moved is a `sleep` this test starts, and guards kill it and remove the
//! groups even if an assertion fails. Time is a manual clock.

mod common;

use std::path::Path;
use std::process::{Child, Command};

use atoll_core::clock::ManualClock;
use atoll_core::spec::{AdoptRule, Entitlement, PlatformSpec, DEFAULT_EPOCH};
use atoll_daemon::controller::{REPAIR_EVERY, REPAIR_RATE_WATCHED};

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Island `main` on every CPU, unit `light` (weight 300) adopting `pid`.
fn spec(real: &common::RealV1, pid: u32) -> PlatformSpec {
    let weight = Entitlement {
        weight: Some(300),
        ..Default::default()
    };
    real.one_unit_spec(weight, vec![AdoptRule::Pid(pid)])
}

#[test]
fn drift_is_put_back_or_let_go_of_and_each_is_a_decision() {
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let child = Kill(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = child.0.id();
    let origin_cpu = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let clock = ManualClock::new();
    let mut c = real.start(spec(&real, pid), &clock);
    let paths = real.paths();
    let cpu_dir = paths.cpu.join(&real.root).join("main/light");
    let shares = cpu_dir.join("cpu.shares");
    let before = std::fs::read_to_string(&shares).unwrap();
    assert!(c.registry().managed(pid).is_some());

    // Someone rewrites a knob, makes a group of their own, and moves the
    // process out of its unit (back where it was, in every hierarchy).
    std::fs::write(&shares, "1234").unwrap();
    let stray = paths.cpuset.join(&real.root).join("main/light/theirs");
    std::fs::create_dir(&stray).unwrap();
    for (controller, mount) in [("cpuset", &paths.cpuset), ("cpu", &paths.cpu)] {
        let rel = origin_cpu
            .lines()
            .find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
                ctl.split(',')
                    .any(|c| c == controller)
                    .then(|| path.to_string())
            })
            .unwrap_or_else(|| "/".into());
        let dir = mount.join(rel.trim_start_matches('/'));
        std::fs::write(dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    // One repair round, on the loop's clock.
    let steps = (2 * REPAIR_EVERY.as_millis()) / DEFAULT_EPOCH.as_millis();
    for _ in 0..steps {
        clock.advance(DEFAULT_EPOCH);
        c.epoch();
    }
    assert_eq!(
        std::fs::read_to_string(&shares).unwrap(),
        before,
        "the knob is put back"
    );
    assert!(!Path::new(&stray).exists(), "the stray group is removed");
    assert!(
        c.registry().managed(pid).is_none(),
        "the moved process is let go of"
    );
    let said: Vec<String> = c
        .decisions()
        .query(None, 4096)
        .iter()
        .map(|d| d.to_string())
        .collect();
    for want in [
        "cpu.shares was \"1234\", changed behind atoll's back",
        "group main/light/theirs is not in the platform description",
        &format!("pid {pid} (sleep) left main/light: someone moved it"),
    ] {
        assert!(said.iter().any(|d| d.contains(want)), "{want}: {said:#?}");
    }
    c.teardown().unwrap();
    drop(child);
}

/// With the backend watching writes (as the daemon runs on v1), a knob
/// someone writes and a group someone makes are dealt with in the next
/// epoch; a process moved out (no event in atoll's groups) is still found
/// by the slower round.
#[test]
fn with_a_watch_a_write_is_put_back_in_the_next_epoch_and_the_round_still_runs() {
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let child = Kill(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = child.0.id();
    let origin_cpu = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let clock = ManualClock::new();
    let mut c = real.start_watching(spec(&real, pid), &clock);
    let paths = real.paths();
    let shares = paths.cpu.join(&real.root).join("main/light/cpu.shares");
    let before = std::fs::read_to_string(&shares).unwrap();
    assert!(c.registry().managed(pid).is_some());
    clock.advance(DEFAULT_EPOCH);
    c.epoch();
    let said = |c: &atoll_daemon::controller::Controller| -> Vec<String> {
        c.decisions()
            .query(None, 4096)
            .iter()
            .map(|d| d.to_string())
            .collect()
    };
    let behind = |d: &Vec<String>| {
        d.iter()
            .filter(|d| d.contains("behind atoll's back"))
            .count()
    };
    assert_eq!(behind(&said(&c)), 0, "atoll's own writes are not drift");

    std::fs::write(&shares, "1234").unwrap();
    let stray = paths.cpuset.join(&real.root).join("main/light/theirs");
    std::fs::create_dir(&stray).unwrap();
    clock.advance(DEFAULT_EPOCH);
    c.epoch();
    assert_eq!(
        std::fs::read_to_string(&shares).unwrap(),
        before,
        "put back at once"
    );
    assert!(
        !Path::new(&stray).exists(),
        "the stray group is removed at once"
    );
    let now = said(&c);
    assert!(
        now.iter()
            .any(|d| d.contains("cpu.shares was \"1234\", changed behind atoll's back")),
        "{now:#?}"
    );
    assert!(now
        .iter()
        .any(|d| d.contains("group main/light/theirs is not in the platform description")));

    // Moved out of its unit: nothing is written in atoll's groups.
    for (controller, mount) in [("cpuset", &paths.cpuset), ("cpu", &paths.cpu)] {
        let rel = origin_cpu
            .lines()
            .find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
                ctl.split(',')
                    .any(|c| c == controller)
                    .then(|| path.to_string())
            })
            .unwrap_or_else(|| "/".into());
        let dir = mount.join(rel.trim_start_matches('/'));
        std::fs::write(dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }
    clock.advance(DEFAULT_EPOCH);
    c.epoch();
    assert!(c.registry().managed(pid).is_some(), "not seen by the watch");
    // One slow round: every planned group at REPAIR_RATE_WATCHED (or the
    // repair interval, whichever is slower), twice over.
    let groups = c.registry().plan().groups.len() as f64;
    let round = std::time::Duration::from_secs_f64(
        REPAIR_EVERY.as_secs_f64().max(groups / REPAIR_RATE_WATCHED),
    );
    let steps = 2 * round.as_millis() / DEFAULT_EPOCH.as_millis() + 1;
    for _ in 0..steps {
        clock.advance(DEFAULT_EPOCH);
        c.epoch();
        if c.registry().managed(pid).is_none() {
            break;
        }
    }
    assert!(c.registry().managed(pid).is_none(), "the round lets it go");
    let last = said(&c);
    let want = format!("pid {pid} (sleep) left main/light: someone moved it");
    assert!(last.iter().any(|d| d.contains(&want)), "{want}: {last:#?}");
    assert_eq!(behind(&last), 1, "the only drift was the one write");
    c.teardown().unwrap();
    drop(child);
}
