use std::fs;
use std::path::Path;

use super::*;
use crate::fake::FakeNet;
use crate::plan::{LeafQdisc, TcClass};

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn setup(dir: &Path) -> Interfaces<FakeNet> {
    let sys = dir.join("sys");
    put(&sys, "class/net/v0/queues/rx-0/rps_cpus", "00000000\n");
    put(&sys, "class/net/v0/queues/tx-0/xps_cpus", "00000000\n");
    let mut net = FakeNet::new();
    net.add_iface("v0", "noqueue");
    Interfaces::new(net, Steering::new(sys, dir.join("proc")))
}

fn class(minor: u16, rate_bps: u64) -> TcClass {
    TcClass {
        minor,
        rate_bps,
        ceil_bps: 1_000_000,
        prio: 3,
    }
}

fn plan(classes: Vec<TcClass>) -> TcPlan {
    TcPlan {
        rate_bps: 1_000_000,
        default_minor: classes[0].minor,
        leaf: LeafQdisc::FqCodel,
        classes,
    }
}

#[test]
fn take_apply_restore_leaves_the_interface_as_found() {
    let dir = tempfile::tempdir().unwrap();
    let mut ifs = setup(dir.path());
    let before = ifs.take("v0").unwrap().clone();
    ifs.apply("v0", &plan(vec![class(2, 500_000), class(3, 500_000)]))
        .unwrap();
    ifs.steer("v0", Some(&IdSet::parse("1").unwrap()), None)
        .unwrap();
    assert_eq!(ifs.backend().plan("v0").unwrap().classes.len(), 2);
    // A unit leaves: its class is deleted.
    ifs.apply("v0", &plan(vec![class(2, 1_000_000)])).unwrap();
    assert!(ifs
        .backend()
        .log
        .iter()
        .any(|l| l == "apply v0 removed=[3] root=false"));
    ifs.restore("v0").unwrap();
    let mut net = FakeNet::new();
    std::mem::swap(&mut net, ifs.backend_mut());
    assert_eq!(net.root_qdisc("v0").unwrap(), before.root);
    assert_eq!(net.plan("v0"), None);
    let rps = fs::read_to_string(dir.path().join("sys/class/net/v0/queues/rx-0/rps_cpus"));
    assert_eq!(rps.unwrap(), "00000000");
    assert_eq!(ifs.managed().count(), 0);
}

#[test]
fn a_configured_root_qdisc_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut ifs = setup(dir.path());
    ifs.backend_mut().set_root("v0", "tbf", "8001:");
    match ifs.take("v0") {
        Err(NetError::ForeignQdisc {
            iface,
            kind,
            handle,
        }) => {
            assert_eq!(
                (iface.as_str(), kind.as_str(), handle.as_str()),
                ("v0", "tbf", "8001:")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(ifs
        .backend()
        .log
        .iter()
        .all(|l| !l.starts_with("apply") && !l.starts_with("remove")));
    assert!(matches!(
        ifs.apply("v0", &plan(vec![class(2, 1)])),
        Err(NetError::NotManaged { .. })
    ));
}

#[test]
fn a_first_plan_failing_half_way_is_undone() {
    let dir = tempfile::tempdir().unwrap();
    let mut ifs = setup(dir.path());
    ifs.take("v0").unwrap();
    ifs.backend_mut().fail_next_apply = true;
    assert!(ifs.apply("v0", &plan(vec![class(2, 1_000)])).is_err());
    let root = ifs.backend_mut().root_qdisc("v0").unwrap();
    assert_eq!(root.kind, "noqueue");
    assert!(root.is_kernel_default());
}

#[test]
fn an_invalid_plan_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut ifs = setup(dir.path());
    ifs.take("v0").unwrap();
    let err = ifs.apply("v0", &plan(vec![class(1, 1_000)])).unwrap_err();
    assert!(err.to_string().contains("v0"), "{err}");
    assert!(ifs.backend().log.iter().all(|l| !l.starts_with("apply")));
}

#[test]
fn restore_notices_when_the_root_does_not_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut ifs = setup(dir.path());
    ifs.take("v0").unwrap();
    ifs.apply("v0", &plan(vec![class(2, 1_000)])).unwrap();
    // The kernel's default changed under us (another default_qdisc).
    ifs.backend_mut().add_iface("v0", "fq_codel");
    ifs.backend_mut().set_root("v0", "htb", "1:");
    match ifs.restore("v0") {
        Err(NetError::NotRestored { before, now, .. }) => {
            assert_eq!(before, "noqueue 0:");
            assert_eq!(now, "fq_codel 0:");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_new_default_class_builds_the_tree_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut ifs = setup(dir.path());
    ifs.take("v0").unwrap();
    ifs.apply("v0", &plan(vec![class(2, 1_000), class(3, 1_000)]))
        .unwrap();
    let mut p = plan(vec![class(2, 1_000), class(3, 1_000)]);
    p.default_minor = 3;
    ifs.apply("v0", &p).unwrap();
    let log = &ifs.backend().log;
    assert_eq!(log[log.len() - 2], "remove v0");
    assert_eq!(log[log.len() - 1], "apply v0 removed=[] root=true");
    assert_eq!(ifs.backend().plan("v0").unwrap().default_minor, 3);
}

#[test]
fn leaf_backlogs_come_back_by_class() {
    let dir = tempfile::tempdir().unwrap();
    let mut ifs = setup(dir.path());
    ifs.take("v0").unwrap();
    ifs.apply("v0", &plan(vec![class(2, 1_000), class(0x10, 1_000)]))
        .unwrap();
    ifs.backend_mut().set_backlog("v0", 0x10, 3000, 2);
    let stats = ifs.leaf_stats("v0").unwrap();
    let s = stats.iter().find(|s| s.minor == 0x10).unwrap();
    assert_eq!((s.backlog_bytes, s.backlog_packets), (3000, 2));
}

/// A run that crashed left its tree and its masks: a new run adopts the
/// interface with the snapshot the crashed run saved, and restores that.
#[test]
fn adopting_after_a_crash_restores_what_the_first_run_found() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = setup(dir.path());
    let saved = first.take("v0").unwrap().clone();
    first
        .apply("v0", &plan(vec![class(2, 500_000), class(3, 500_000)]))
        .unwrap();
    first
        .steer("v0", None, Some(&IdSet::parse("1").unwrap()))
        .unwrap();
    let xps = dir.path().join("sys/class/net/v0/queues/tx-0/xps_cpus");
    assert_eq!(fs::read_to_string(&xps).unwrap(), "00000002");
    // The crash: `first` is gone without restoring; its tree is on v0.
    let net = std::mem::take(first.backend_mut());
    let mut second = Interfaces::new(
        net,
        Steering::new(dir.path().join("sys"), dir.path().join("proc")),
    );
    assert!(matches!(
        second.take("v0"),
        Err(NetError::ForeignQdisc { ref kind, .. }) if kind == "htb"
    ));
    assert!(second.adopt("v0", saved.clone()).unwrap());
    assert_eq!(second.snapshot("v0"), Some(&saved));
    // The old tree was removed; the next apply writes a whole new one.
    second
        .apply("v0", &plan(vec![class(2, 1_000_000)]))
        .unwrap();
    assert!(second
        .backend()
        .log
        .iter()
        .any(|l| l == "apply v0 removed=[] root=true"));
    second.restore("v0").unwrap();
    assert_eq!(fs::read_to_string(&xps).unwrap(), "00000000");
    assert_eq!(second.backend_mut().root_qdisc("v0").unwrap(), saved.root);
}

#[test]
fn adopting_a_reset_interface_adopts_nothing_and_a_foreign_root_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut ifs = setup(dir.path());
    let saved = ifs.take("v0").unwrap().clone();
    ifs.restore("v0").unwrap();
    // The kernel's default again: nothing of a previous run is left.
    assert!(!ifs.adopt("v0", saved.clone()).unwrap());
    assert!(ifs.snapshot("v0").is_none());
    ifs.backend_mut().set_root("v0", "tbf", "8001:");
    assert!(matches!(
        ifs.adopt("v0", saved),
        Err(NetError::ForeignQdisc { ref kind, .. }) if kind == "tbf"
    ));
    assert!(ifs.snapshot("v0").is_none());
}
