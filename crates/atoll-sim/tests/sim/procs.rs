use std::path::PathBuf;

use atoll_core::backend::{Actuator, BackendError, Monitor};
use atoll_core::plan::{GroupSettings, TaskPolicy};
use atoll_core::process::{CgroupMembership, ProcessError, ProcessTable, TaskControl};
use atoll_sim::Location;

use super::*;

fn unified(path: &str) -> CgroupMembership {
    CgroupMembership::parse(&format!("0::{path}\n")).unwrap()
}

#[test]
fn processes_look_like_proc_says() {
    let sim = machine(2);
    sim.advance(secs(2.5));
    let pid = sim.spawn("a-very-long-process-name", 1000, Some("/usr/bin/long"));
    let info = sim.info(pid).unwrap();
    assert_eq!(info.comm, "a-very-long-pro");
    assert_eq!(info.uid, 1000);
    assert_eq!(info.ppid, 1);
    assert_eq!(info.exe, Some(PathBuf::from("/usr/bin/long")));
    assert_eq!(info.start_ticks, 250);
    assert!(!info.kernel_thread);
    assert_eq!(info.cgroups.unified(), Some("/user.slice"));
    let k = sim.spawn_kernel_thread("kworker/0:1");
    let kinfo = sim.info(k).unwrap();
    assert!(kinfo.kernel_thread && kinfo.ppid == 2 && kinfo.exe.is_none());
    assert!(sim.info(2).unwrap().kernel_thread);
    assert!(!sim.info(1).unwrap().kernel_thread);
    assert_eq!(sim.pids().unwrap(), [1, 2, pid, k]);
    assert!(matches!(sim.info(77), Err(ProcessError::Gone(77))));
    assert!(matches!(sim.threads(77), Err(ProcessError::Gone(77))));
}

#[test]
fn moving_and_restoring_processes() {
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "web", GroupSettings::default());
    ok(&mut sim, "web/api", GroupSettings::default());
    let pid = sim.spawn("nginx", 33, None);
    let origin = sim.info(pid).unwrap().cgroups;

    assert!(
        matches!(sim.move_process(pid, &g("web/db")), Err(BackendError::NoGroup(p)) if p == g("web/db"))
    );
    let e = sim.move_process(999, &g("web/api")).unwrap_err();
    assert!(matches!(e, BackendError::NoProcess(999)) && e.is_gone());
    let k = sim.spawn_kernel_thread("kworker");
    assert!(sim.move_process(k, &g("web/api")).is_err());

    sim.move_process(pid, &g("web/api")).unwrap();
    assert_eq!(
        sim.info(pid).unwrap().cgroups.unified(),
        Some("/atoll/web/api")
    );
    assert_eq!(sim.processes(&g("web/api")).unwrap(), [pid]);
    assert_eq!(sim.location(pid), Some(Location::Group(g("web/api"))));

    sim.restore_process(pid, &origin).unwrap();
    assert_eq!(sim.info(pid).unwrap().cgroups, origin);
    assert!(sim.processes(&g("web/api")).unwrap().is_empty());
    assert!(matches!(
        sim.restore_process(999, &origin),
        Err(BackendError::NoProcess(999))
    ));

    // An origin inside atoll's hierarchy goes to its nearest existing leaf.
    ok(&mut sim, "db", GroupSettings::default());
    sim.restore_process(pid, &unified("/atoll/db/gone/deeper"))
        .unwrap();
    assert_eq!(sim.location(pid), Some(Location::Group(g("db"))));
    // ...or, if that is not a leaf, to the machine's root.
    sim.restore_process(pid, &unified("/atoll/web/gone"))
        .unwrap();
    assert_eq!(sim.info(pid).unwrap().cgroups.unified(), Some("/"));
    // A name that merely starts like the root's is outside atoll.
    sim.restore_process(pid, &unified("/atoll-other/x"))
        .unwrap();
    assert_eq!(
        sim.info(pid).unwrap().cgroups.unified(),
        Some("/atoll-other/x")
    );

    // Someone else moves it out of atoll.
    sim.move_process(pid, &g("db")).unwrap();
    sim.move_outside(pid, unified("/system.slice/x.service"))
        .unwrap();
    assert!(sim.processes(&g("db")).unwrap().is_empty());
}

#[test]
fn fork_threads_and_exit() {
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "web", GroupSettings::default());
    let parent = sim.spawn("nginx", 33, Some("/usr/sbin/nginx"));
    sim.move_process(parent, &g("web")).unwrap();
    sim.set_policy(parent, TaskPolicy::Batch).unwrap();
    let child = sim.spawn_child(parent).unwrap();
    let info = sim.info(child).unwrap();
    assert_eq!(
        (info.ppid, info.uid, info.comm.as_str()),
        (parent, 33, "nginx")
    );
    assert_eq!(info.cgroups.unified(), Some("/atoll/web"));
    assert_eq!(sim.policy(child).unwrap(), TaskPolicy::Batch);
    assert_eq!(sim.processes(&g("web")).unwrap(), [parent, child]);
    let t = sim.spawn_thread(child).unwrap();
    assert_eq!(sim.threads(child).unwrap(), [child, t]);
    assert_eq!(sim.policy(t).unwrap(), TaskPolicy::Batch);
    sim.set_policy(t, TaskPolicy::Idle).unwrap();
    assert_eq!(sim.policy(child).unwrap(), TaskPolicy::Batch);

    sim.exit(parent).unwrap();
    assert_eq!(sim.info(child).unwrap().ppid, 1, "reparented to init");
    assert!(matches!(sim.spawn_child(parent), Err(ProcessError::Gone(p)) if p == parent));
    assert!(matches!(sim.exit(parent), Err(ProcessError::Gone(_))));
    sim.exit_thread(t).unwrap();
    assert_eq!(sim.threads(child).unwrap(), [child]);
    assert!(matches!(sim.policy(t), Err(ProcessError::Gone(_))));
    sim.exit_thread(child).unwrap();
    assert!(sim.info(child).is_err());
    assert!(sim.processes(&g("web")).unwrap().is_empty());
}

#[test]
fn a_reused_pid_has_a_new_start_time() {
    let sim = machine(1);
    let first = sim.spawn("a", 1, None);
    let before = sim.info(first).unwrap().start_ticks;
    sim.exit(first).unwrap();
    sim.advance(secs(1.0));
    sim.set_next_pid(first);
    let second = sim.spawn("b", 1, None);
    assert_eq!(second, first);
    assert_eq!(sim.info(second).unwrap().start_ticks, before + 100);
    // Pids in use are skipped.
    sim.set_next_pid(first);
    assert_eq!(sim.spawn("c", 1, None), first + 1);
}

#[test]
fn policies_follow_the_kernel_rules() {
    let mut sim = machine(1);
    let pid = sim.spawn("p", 0, None);
    for p in [
        TaskPolicy::Batch,
        TaskPolicy::Idle,
        TaskPolicy::Fifo(1),
        TaskPolicy::Rr(99),
        TaskPolicy::Other,
    ] {
        sim.set_policy(pid, p).unwrap();
        assert_eq!(sim.policy(pid).unwrap(), p);
    }
    for bad in [TaskPolicy::Fifo(0), TaskPolicy::Rr(100)] {
        let e = sim.set_policy(pid, bad).unwrap_err();
        assert!(
            matches!(&e, ProcessError::Sys { source, .. } if source.raw_os_error() == Some(libc::EINVAL)),
            "{e:?}"
        );
    }
    assert!(sim.set_policy(0, TaskPolicy::Idle).is_err());
    assert!(matches!(
        sim.set_policy(4242, TaskPolicy::Idle),
        Err(ProcessError::Gone(4242))
    ));
}
