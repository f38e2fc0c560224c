use std::fs;
use std::path::Path;

use atoll_core::IdSet;

use super::*;

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn read(root: &Path, rel: &str) -> String {
    fs::read_to_string(root.join(rel)).unwrap()
}

/// A virtual device with two receive and two transmit queues.
fn virtual_dev(sys: &Path) {
    put(sys, "class/net/v0/queues/rx-0/rps_cpus", "00000000\n");
    put(sys, "class/net/v0/queues/rx-1/rps_cpus", "00000002\n");
    put(sys, "class/net/v0/queues/tx-0/xps_cpus", "00000000\n");
    put(sys, "class/net/v0/queues/tx-1/xps_cpus", "00000000\n");
}

#[test]
fn without_irqs_rx_is_steered_with_rps_and_restored_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (sys, proc) = (dir.path().join("sys"), dir.path().join("proc"));
    virtual_dev(&sys);
    let s = Steering::new(&sys, &proc);
    let snap = s.snapshot("v0").unwrap();
    assert_eq!(snap.files.len(), 4);
    let cpus = IdSet::parse("1,3").unwrap();
    let written = s
        .apply("v0", &snap, Some(&cpus), Some(&IdSet::parse("0").unwrap()))
        .unwrap();
    assert_eq!(written.len(), 4);
    assert_eq!(read(&sys, "class/net/v0/queues/rx-1/rps_cpus"), "0000000a");
    assert_eq!(read(&sys, "class/net/v0/queues/tx-0/xps_cpus"), "00000001");
    s.restore(&snap).unwrap();
    assert_eq!(read(&sys, "class/net/v0/queues/rx-0/rps_cpus"), "00000000");
    assert_eq!(read(&sys, "class/net/v0/queues/rx-1/rps_cpus"), "00000002");
    assert_eq!(read(&sys, "class/net/v0/queues/tx-1/xps_cpus"), "00000000");
}

#[test]
fn with_msi_irqs_rx_is_steered_by_irq_affinity_not_rps() {
    let dir = tempfile::tempdir().unwrap();
    let (sys, proc) = (dir.path().join("sys"), dir.path().join("proc"));
    virtual_dev(&sys);
    put(&sys, "class/net/v0/device/msi_irqs/40", "msix\n");
    put(&sys, "class/net/v0/device/msi_irqs/41", "msix\n");
    put(&proc, "irq/40/smp_affinity_list", "0-3\n");
    put(&proc, "irq/41/smp_affinity_list", "0-3\n");
    // An IRQ of another device is never read nor written.
    put(&proc, "irq/42/smp_affinity_list", "0-3\n");
    let s = Steering::new(&sys, &proc);
    let files = s.files("v0").unwrap();
    assert_eq!(files.irqs.len(), 2);
    let snap = s.snapshot("v0").unwrap();
    s.apply("v0", &snap, Some(&IdSet::parse("2-3").unwrap()), None)
        .unwrap();
    assert_eq!(read(&proc, "irq/40/smp_affinity_list"), "2-3");
    assert_eq!(read(&proc, "irq/41/smp_affinity_list"), "2-3");
    assert_eq!(read(&proc, "irq/42/smp_affinity_list"), "0-3\n");
    assert_eq!(
        read(&sys, "class/net/v0/queues/rx-1/rps_cpus"),
        "00000002\n"
    );
    s.restore(&snap).unwrap();
    assert_eq!(read(&proc, "irq/40/smp_affinity_list"), "0-3");
}

#[test]
fn a_missing_interface_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let s = Steering::new(dir.path(), dir.path());
    match s.snapshot("nope0") {
        Err(NetError::NoInterface { iface }) => assert_eq!(iface, "nope0"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_file_not_in_the_snapshot_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let (sys, proc) = (dir.path().join("sys"), dir.path().join("proc"));
    virtual_dev(&sys);
    let s = Steering::new(&sys, &proc);
    let snap = s.snapshot("v0").unwrap();
    // A queue that appeared after the snapshot.
    put(&sys, "class/net/v0/queues/rx-2/rps_cpus", "00000000\n");
    s.apply("v0", &snap, Some(&IdSet::parse("1").unwrap()), None)
        .unwrap();
    assert_eq!(
        read(&sys, "class/net/v0/queues/rx-2/rps_cpus"),
        "00000000\n"
    );
    assert_eq!(read(&sys, "class/net/v0/queues/rx-0/rps_cpus"), "00000002");
}
