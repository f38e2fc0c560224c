use std::io::ErrorKind;

use atoll_core::backend::{Actuator, BackendError, Monitor};
use atoll_core::plan::{GroupSettings, RtBudget, TaskPolicy};
use atoll_core::process::{ProcessError, TaskControl};

use super::*;

#[test]
fn groups_need_their_parent() {
    let mut sim = machine(4);
    assert!(!sim.exists(&g("")));
    let e = sim.apply(&g("web"), &GroupSettings::default()).unwrap_err();
    assert!(
        matches!(&e, BackendError::NoGroup(p) if p.is_root()),
        "{e:?}"
    );
    ok(&mut sim, "", with_cpus("0-3"));
    let e = sim
        .apply(&g("web/api"), &GroupSettings::default())
        .unwrap_err();
    assert!(
        matches!(&e, BackendError::NoGroup(p) if p == &g("web")),
        "{e:?}"
    );
    ok(&mut sim, "web", GroupSettings::default());
    ok(&mut sim, "web/api", GroupSettings::default());
    ok(&mut sim, "host", GroupSettings::default());
    assert!(sim.exists(&g("web/api")));
    let mut kids = sim.children(&g("")).unwrap();
    kids.sort();
    assert_eq!(kids, ["host", "web"]);
    assert_eq!(sim.children(&g("web")).unwrap(), ["api"]);
    assert!(matches!(
        sim.children(&g("nope")),
        Err(BackendError::NoGroup(_))
    ));
    assert!(matches!(
        sim.processes(&g("nope")),
        Err(BackendError::NoGroup(_))
    ));
    assert!(matches!(
        sim.stats(&g("nope")),
        Err(BackendError::NoGroup(_))
    ));
}

#[test]
fn cpus_must_be_online_and_within_the_parent() {
    let mut sim = machine(8);
    let e = sim.apply(&g(""), &with_cpus("0-9")).unwrap_err();
    let (kind, msg) = io_parts(&e);
    assert_eq!(kind, ErrorKind::InvalidInput);
    assert!(
        msg.contains("atoll/cpuset.cpus") && msg.contains("\"0-9\""),
        "{msg}"
    );
    assert!(msg.contains("8-9 are not online"), "{msg}");
    ok(&mut sim, "", with_cpus("0-3"));
    let e = sim.apply(&g("web"), &with_cpus("2-5")).unwrap_err();
    let (kind, msg) = io_parts(&e);
    assert_eq!(kind, ErrorKind::InvalidInput);
    assert!(msg.contains("/sim/atoll/web/cpuset.cpus"), "{msg}");
    assert!(
        msg.contains("4-5 are outside the parent's effective cpus 0-3"),
        "{msg}"
    );
    assert!(!sim.exists(&g("web")), "a refused group is not created");
    ok(&mut sim, "web", with_cpus("2-3"));
    ok(&mut sim, "host", GroupSettings::default());
    assert_eq!(sim.effective_cpus(&g("web")), Some(cpus("2-3")));
    assert_eq!(
        sim.effective_cpus(&g("host")),
        Some(cpus("0-3")),
        "unset inherits"
    );
}

#[test]
fn knobs_are_range_checked() {
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    for (settings, knob) in [
        (weight(0), "cpu.weight"),
        (weight(10_001), "cpu.weight"),
        (cap(500, 100_000), "cpu.max"),
        (cap(50_000, 500), "cpu.max"),
        (
            GroupSettings {
                io_weight: Some(0),
                ..Default::default()
            },
            "io.weight",
        ),
        (
            GroupSettings {
                mems: Some(cpus("1")),
                ..Default::default()
            },
            "cpuset.mems",
        ),
    ] {
        let e = sim.apply(&g("u"), &settings).unwrap_err();
        assert!(io_parts(&e).1.contains(knob), "{knob}: {e}");
    }
    ok(&mut sim, "u", weight(10_000));
}

#[test]
fn partitions_need_cpus_exclusive_among_siblings() {
    let mut sim = machine(8);
    ok(&mut sim, "", with_cpus("0-7"));
    ok(&mut sim, "host", GroupSettings::default());
    ok(&mut sim, "a", partition("0-3"));
    assert_eq!(sim.partition_valid(&g("a")), Some(true));
    // A granted partition's cpus leave its member siblings.
    assert_eq!(sim.effective_cpus(&g("host")), Some(cpus("4-7")));

    // b overlaps a: neither can be exclusive; both are reported.
    let fb = sim.apply(&g("b"), &partition("2-5")).unwrap();
    let paths: Vec<_> = fb.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["a", "b"], "{fb:?}");
    let b = &fb[1];
    assert_eq!(
        (b.knob.as_str(), b.wanted.as_str(), b.got.as_str()),
        ("cpuset.cpus.partition", "root", "root invalid")
    );
    assert!(
        b.reason.contains("2-3") && b.reason.contains("sibling a"),
        "{}",
        b.reason
    );
    assert_eq!(sim.partition_valid(&g("a")), Some(false));
    assert_eq!(sim.effective_cpus(&g("host")), Some(cpus("0-7")));

    // Moving b away makes both valid again.
    ok(&mut sim, "b", partition("4-5"));
    assert_eq!(sim.partition_valid(&g("a")), Some(true));
    assert_eq!(sim.partition_valid(&g("b")), Some(true));
    assert_eq!(sim.effective_cpus(&g("host")), Some(cpus("6-7")));

    // No cpus of its own: invalid.
    let fb = sim
        .apply(
            &g("c"),
            &GroupSettings {
                partition: Some(atoll_core::plan::Partition::Root),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(fb.len(), 1);
    assert!(fb[0].reason.contains("no cpus"), "{fb:?}");

    // atoll's root cannot take every cpu from the rest of the machine.
    let fb = sim.apply(&g(""), &partition("0-7")).unwrap();
    assert!(
        fb.iter()
            .any(|f| f.path.is_root() && f.reason.contains("rest of the machine")),
        "{fb:?}"
    );
}

#[test]
fn shrinking_a_parent_invalidates_a_child_partition() {
    let mut sim = machine(8);
    ok(&mut sim, "", with_cpus("0-7"));
    ok(&mut sim, "rt", partition("4-5"));
    ok(&mut sim, "web", with_cpus("6-7"));
    let fb = sim.apply(&g(""), &with_cpus("0-3")).unwrap();
    assert_eq!(fb.len(), 1, "{fb:?}");
    assert_eq!(fb[0].path, g("rt"));
    assert!(fb[0].reason.contains("4-5"), "{}", fb[0].reason);
    // Members whose cpus vanished fall back to the parent's (cgroup v2).
    assert_eq!(sim.effective_cpus(&g("web")), Some(cpus("0-3")));
    assert_eq!(sim.effective_cpus(&g("rt")), Some(cpus("0-3")));
}

#[test]
fn busy_groups_cannot_be_removed() {
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "web", GroupSettings::default());
    ok(&mut sim, "web/api", GroupSettings::default());
    let pid = sim.spawn("nginx", 33, None);
    sim.move_process(pid, &g("web/api")).unwrap();
    for path in ["web/api", "web", ""] {
        let e = sim.remove(&g(path)).unwrap_err();
        match &e {
            BackendError::Io { op, source, .. } => {
                assert_eq!(*op, "rmdir");
                assert_eq!(source.raw_os_error(), Some(libc::EBUSY), "{e}");
            }
            other => panic!("{path}: {other:?}"),
        }
        assert!(sim.exists(&g(path)));
    }
    sim.exit(pid).unwrap();
    sim.remove(&g("web/api")).unwrap();
    sim.remove(&g("web")).unwrap();
    sim.remove(&g("")).unwrap();
    assert!(!sim.exists(&g("")));
    assert!(matches!(
        sim.remove(&g("web")),
        Err(BackendError::NoGroup(_))
    ));
}

#[test]
fn only_leaves_hold_processes() {
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "web", GroupSettings::default());
    let pid = sim.spawn("nginx", 33, None);
    sim.move_process(pid, &g("web")).unwrap();
    // web holds a process: no children under it.
    let e = sim
        .apply(&g("web/api"), &GroupSettings::default())
        .unwrap_err();
    let (kind, msg) = io_parts(&e);
    assert_eq!(kind, ErrorKind::ResourceBusy);
    assert!(msg.contains("web/cgroup.subtree_control"), "{msg}");
    // The root has a child: no processes in it.
    let e = sim.move_process(pid, &g("")).unwrap_err();
    assert_eq!(io_parts(&e).0, ErrorKind::ResourceBusy);
    assert_eq!(sim.processes(&g("web")).unwrap(), [pid]);
}

#[test]
fn rt_budgets_must_fit_and_rt_tasks_need_one() {
    let mut sim = machine(4);
    let rt = |runtime_us| GroupSettings {
        rt_budget: Some(RtBudget {
            runtime_us,
            period_us: 1_000_000,
        }),
        ..Default::default()
    };
    let e = sim.apply(&g(""), &rt(960_000)).unwrap_err();
    assert_eq!(
        io_parts(&e).0,
        ErrorKind::ResourceBusy,
        "above the machine's 95%"
    );
    ok(&mut sim, "", rt(500_000));
    ok(&mut sim, "audio", rt(300_000));
    let e = sim.apply(&g("video"), &rt(300_000)).unwrap_err();
    assert!(io_parts(&e).1.contains("video/cpu.rt_runtime_us"), "{e}");
    ok(&mut sim, "video", rt(200_000));
    let e = sim.apply(&g(""), &rt(400_000)).unwrap_err();
    assert!(io_parts(&e).1.contains("children's RT budgets"), "{e}");
    ok(&mut sim, "plain", GroupSettings::default());

    let pid = sim.spawn("synth", 0, None);
    // RT outside atoll is fine (the machine's root group has a budget).
    sim.set_policy(pid, TaskPolicy::Fifo(50)).unwrap();
    let e = sim.move_process(pid, &g("plain")).unwrap_err();
    assert!(io_parts(&e).1.contains("RT budget"), "{e}");
    sim.move_process(pid, &g("audio")).unwrap();
    // Its group cannot drop the budget while it holds RT tasks.
    let e = sim
        .apply(&g("audio"), &GroupSettings::default())
        .unwrap_err();
    assert!(io_parts(&e).1.contains("RT tasks"), "{e}");

    let other = sim.spawn("worker", 0, None);
    sim.move_process(other, &g("plain")).unwrap();
    let e = sim.set_policy(other, TaskPolicy::Rr(10)).unwrap_err();
    assert!(
        matches!(&e, ProcessError::Sys { source, .. } if source.raw_os_error() == Some(libc::EPERM)),
        "{e:?}"
    );
    assert_eq!(sim.policy(other).unwrap(), TaskPolicy::Other);
}

#[test]
fn without_rt_groups_only_a_promised_rt_budget_is_a_fallback() {
    let mut sim = machine(4);
    sim.set_rt_groups(false);
    let rt = |optional| GroupSettings {
        rt_budget: Some(RtBudget {
            runtime_us: 50_000,
            period_us: 1_000_000,
        }),
        rt_budget_optional: optional,
        ..Default::default()
    };
    // A non-realtime group's default budget is not needed here.
    ok(&mut sim, "", rt(true));
    // A realtime island's is, and the kernel cannot give it.
    let fb = sim.apply(&g("rt"), &rt(false)).unwrap();
    assert_eq!(fb.len(), 1, "{fb:?}");
    assert_eq!(fb[0].knob, "cpu.rt_runtime_us");
}
