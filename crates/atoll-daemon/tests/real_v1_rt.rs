//! SCHED_FIFO programs inside units of a `fair` island on this machine's
//! real cgroup v1 hierarchies with RT group scheduling (the review's
//! `atoll run --unit probe -- cyclictest ...`, which failed with "Unable to
//! change scheduling policy" because a new cpu group has
//! `cpu.rt_runtime_us` 0).
//!
//! Runs only as root with writable v1 `cpuset` and `cpu` hierarchies whose
//! `cpu` hierarchy has `cpu.rt_runtime_us`, and at least two CPUs; prints
//! "skipped: ..." otherwise. Everything happens under a root group named
//! `atoll-test-<pid>-<nanos>`; the only processes moved are children this
//! test starts, and drop guards kill them and remove the groups even if an
//! assertion fails. Time is a manual clock.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::spec::Entitlement;
use atoll_daemon::command::{Caller, Command as DaemonCommand};
use atoll_daemon::controller::Controller;
use atoll_proto::{Reply, Request};

fn read(p: &Path) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
        .trim()
        .to_string()
}

fn setup() -> Option<common::RealV1> {
    let real = match common::real_v1() {
        Ok(r) => r,
        Err(why) => {
            println!("skipped: {why}");
            return None;
        }
    };
    if !real.paths().cpu.join("cpu.rt_runtime_us").exists() {
        println!("skipped: no RT group scheduling in the v1 cpu hierarchy");
        return None;
    }
    Some(real)
}

/// `adopt` through the API as root; the reply or the error's message.
fn adopt(c: &mut Controller, unit: &str, pid: u32) -> Result<Reply, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    c.handle(DaemonCommand::Api {
        caller: Caller {
            uid: 0,
            gid: 0,
            pid: 1,
        },
        id: 1,
        request: Request::Adopt {
            unit: unit.into(),
            pid,
            island: None,
            network: None,
        },
        reply: tx,
    });
    rx.recv_timeout(Duration::from_secs(5))
        .unwrap()
        .into_result()
        .map_err(|e| e.message)
}

/// The cpu cgroup of `pid`.
fn cpu_cgroup(pid: u32) -> String {
    read(&Path::new("/proc").join(pid.to_string()).join("cgroup"))
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
            ctrls
                .split(',')
                .any(|c| c == "cpu")
                .then(|| path.to_string())
        })
        .unwrap_or_default()
}

fn policy_of(pid: u32) -> i32 {
    // SAFETY: sched_getscheduler(2) only reads the policy of a pid.
    unsafe { libc::sched_getscheduler(pid as i32) }
}

fn set_policy(pid: u32, policy: i32, priority: i32) -> Result<(), std::io::Error> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: a valid sched_param for the duration of the call.
    if unsafe { libc::sched_setscheduler(pid as i32, policy, &p) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A child that, once told to, asks for SCHED_FIFO priority 1 for itself
/// and reports the errno (0: granted), then waits to be killed.
struct Prober {
    pid: u32,
    go: i32,
    result: i32,
}

impl Prober {
    fn start() -> Self {
        let mut go = [0i32; 2];
        let mut result = [0i32; 2];
        // SAFETY: pipe(2) fills the two-element arrays; fork(2) in a test
        // binary: the child only calls async-signal-safe functions (read,
        // sched_setscheduler, write, pause) and never returns.
        unsafe {
            assert_eq!(libc::pipe(go.as_mut_ptr()), 0);
            assert_eq!(libc::pipe(result.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                let mut b = 0u8;
                libc::read(go[0], (&mut b as *mut u8).cast(), 1);
                let p = libc::sched_param { sched_priority: 1 };
                let err = if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0 {
                    0
                } else {
                    *libc::__errno_location()
                };
                libc::write(result[1], (&err as *const i32).cast(), 4);
                loop {
                    libc::pause();
                }
            }
            libc::close(go[0]);
            libc::close(result[1]);
            Self {
                pid: u32::try_from(pid).expect("fork returned the child's pid"),
                go: go[1],
                result: result[0],
            }
        }
    }

    /// Tells it to ask; the errno it got (0: granted).
    fn ask(&self) -> i32 {
        let mut err = -1i32;
        // SAFETY: one byte from a valid buffer; four bytes into an i32.
        unsafe {
            assert_eq!(libc::write(self.go, (&1u8 as *const u8).cast(), 1), 1);
            assert_eq!(libc::read(self.result, (&mut err as *mut i32).cast(), 4), 4);
        }
        err
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        // SAFETY: our own child and our own pipe ends.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGKILL);
            libc::waitpid(self.pid as i32, std::ptr::null_mut(), 0);
            libc::close(self.go);
            libc::close(self.result);
        }
    }
}

#[test]
fn a_fifo_program_in_a_unit_of_a_fair_island_gets_its_policy() {
    let Some(real) = setup() else {
        return;
    };
    let clock = ManualClock::new();
    let mut c = real.start(real.one_unit_spec(Entitlement::default(), vec![]), &clock);
    let prober = Prober::start();
    // `atoll run --unit probe`: a new unit in the default (fair) island.
    let r = adopt(&mut c, "probe", prober.pid).unwrap();
    assert!(matches!(r, Reply::Adopted { created: true, .. }), "{r:?}");
    assert_eq!(cpu_cgroup(prober.pid), format!("/{}/main/probe", real.root));
    let err = prober.ask();
    assert_eq!(
        err,
        0,
        "sched_setscheduler(SCHED_FIFO, 1) in main/probe: {}",
        std::io::Error::from_raw_os_error(err)
    );
    assert_eq!(policy_of(prober.pid), libc::SCHED_FIFO);
    let group = real.paths().cpu.join(&real.root).join("main/probe");
    let budget: i64 = read(&group.join("cpu.rt_runtime_us")).parse().unwrap();
    assert!(budget > 0, "main/probe has RT budget {budget}");
    // Its budget and the unit's neighbour's fit in the island's.
    let light: i64 = read(
        &real
            .paths()
            .cpu
            .join(&real.root)
            .join("main/light/cpu.rt_runtime_us"),
    )
    .parse()
    .unwrap();
    let island: i64 = read(
        &real
            .paths()
            .cpu
            .join(&real.root)
            .join("main/cpu.rt_runtime_us"),
    )
    .parse()
    .unwrap();
    assert!(
        light > 0 && budget + light <= island,
        "{budget} + {light} > {island}"
    );
    assert!(c.fallbacks().all(|f| f.knob != "cpu.rt_runtime_us"));
    c.teardown().unwrap();
    assert!(!real.paths().cpu.join(&real.root).exists());
}

/// Kills and reaps the child when the test ends.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_running_fifo_task_can_be_adopted_into_a_fair_island() {
    let Some(real) = setup() else {
        return;
    };
    let clock = ManualClock::new();
    let mut c = real.start(real.one_unit_spec(Entitlement::default(), vec![]), &clock);
    let child = Kill(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = child.0.id();
    if let Err(e) = set_policy(pid, libc::SCHED_FIFO, 1) {
        println!("skipped: cannot make a task SCHED_FIFO where this test runs: {e}");
        return;
    }
    let r = adopt(&mut c, "light", pid);
    assert!(
        matches!(r, Ok(Reply::Adopted { .. })),
        "adopting a SCHED_FIFO task into main/light: {r:?}"
    );
    assert_eq!(cpu_cgroup(pid), format!("/{}/main/light", real.root));
    c.teardown().unwrap();
    assert!(!real.paths().cpu.join(&real.root).exists());
    drop(child);
}
