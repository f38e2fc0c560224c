//! Reading this machine's own `/sys` (skipped when absent).

use std::path::Path;

use crate::{read_topology, DEFAULT_SYSFS_ROOT};

/// `Cpus_allowed_list` of this process, from `/proc/self/status`.
fn allowed_cpus() -> Option<atoll_core::CpuSet> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))?;
    atoll_core::CpuSet::parse(line.split_once(':')?.1).ok()
}

#[test]
fn real_sysfs_online_count_matches_available_parallelism() {
    let root = Path::new(DEFAULT_SYSFS_ROOT);
    if !root.join("devices/system/cpu/online").exists() {
        eprintln!("note: {DEFAULT_SYSFS_ROOT}/devices/system/cpu/online absent; skipping");
        return;
    }
    let t = read_topology(root).unwrap_or_else(|e| panic!("reading the real sysfs: {e}"));
    let online = t.online();
    let parallelism = std::thread::available_parallelism().unwrap().get();
    assert!(!t.cores.is_empty() && !t.llcs.is_empty() && !t.nodes.is_empty());
    assert_eq!(
        t.cores.iter().map(|c| c.cpus.len()).sum::<usize>(),
        online.len()
    );
    match allowed_cpus() {
        // available_parallelism() honours the affinity mask (and a cgroup CPU
        // quota); the equality only holds when the process may use every
        // online CPU.
        Some(allowed) if allowed != online => {
            eprintln!(
                "note: affinity {allowed} differs from online {online}; checking subset only"
            );
            assert!(allowed.is_subset(&online), "{allowed} vs {online}");
            assert!(parallelism <= online.len());
        }
        _ => assert_eq!(online.len(), parallelism, "online {online}"),
    }
}

#[test]
#[ignore = "prints; run by hand to compare the real machine with fixtures::this_machine"]
fn print_real_and_fixture() {
    let real = read_topology(Path::new(DEFAULT_SYSFS_ROOT)).unwrap();
    let mut fake = crate::testutils::fixtures::this_machine()
        .write_temp()
        .unwrap()
        .read()
        .unwrap();
    println!("{}", crate::render_text(&real));
    // Node memory grows and shrinks here (memory hotplug in the VM).
    for (f, r) in fake.nodes.iter_mut().zip(&real.nodes) {
        f.memory_bytes = r.memory_bytes;
    }
    println!(
        "real == this_machine fixture (memory aside): {}",
        real == fake
    );
}

#[test]
#[ignore = "prints the JSON of fixtures::this_machine for docs/topology.md"]
fn print_this_machine_json() {
    let t = crate::testutils::fixtures::this_machine()
        .write_temp()
        .unwrap()
        .read()
        .unwrap();
    println!("{}", serde_json::to_string_pretty(&t).unwrap());
}
