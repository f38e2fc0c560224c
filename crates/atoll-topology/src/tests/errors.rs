//! Failures: each names the file and quotes what it held.

use super::{ends_with, overwrite, remove};
use crate::testutils::fixtures;
use crate::TopologyError;

const CPU: &str = "devices/system/cpu";

fn fails(root: &crate::testutils::FakeRoot) -> TopologyError {
    match root.read() {
        Ok(t) => panic!("expected an error, read {} CPUs", t.cpus.len()),
        Err(e) => e,
    }
}

#[test]
fn missing_online_file_is_an_error() {
    let root = fixtures::this_machine().write_temp().unwrap();
    remove(&root, &format!("{CPU}/online"));
    let e = fails(&root);
    assert!(
        matches!(&e, TopologyError::Missing { path } if ends_with(path, "devices/system/cpu/online")),
        "{e}"
    );
    assert!(e.to_string().contains("required file is missing"), "{e}");
}

#[test]
fn malformed_online_file_names_path_and_value() {
    let root = fixtures::this_machine().write_temp().unwrap();
    overwrite(&root, &format!("{CPU}/online"), "0-x\n");
    let e = fails(&root);
    match &e {
        TopologyError::Malformed { path, value, .. } => {
            assert!(ends_with(path, "cpu/online"));
            assert_eq!(value, "0-x");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(e.to_string().contains("\"0-x\""), "{e}");
    assert_eq!(e.path(), root.path().join(CPU).join("online"));
}

#[test]
fn empty_online_list_is_malformed() {
    let root = fixtures::this_machine().write_temp().unwrap();
    overwrite(&root, &format!("{CPU}/online"), "\n");
    assert!(matches!(fails(&root), TopologyError::Malformed { value, .. } if value.is_empty()));
}

#[test]
fn missing_topology_files_are_errors() {
    let root = fixtures::this_machine().write_temp().unwrap();
    remove(&root, &format!("{CPU}/cpu1/topology/core_id"));
    let e = fails(&root);
    assert!(
        matches!(&e, TopologyError::Missing { path } if ends_with(path, "cpu1/topology/core_id")),
        "{e}"
    );

    let root = fixtures::this_machine().write_temp().unwrap();
    remove(&root, &format!("{CPU}/cpu0/topology/core_cpus_list"));
    remove(&root, &format!("{CPU}/cpu0/topology/thread_siblings_list"));
    let e = fails(&root);
    assert!(
        matches!(&e, TopologyError::Missing { path } if ends_with(path, "cpu0/topology/thread_siblings_list")),
        "{e}"
    );

    let root = fixtures::this_machine().write_temp().unwrap();
    remove(&root, &format!("{CPU}/cpu1/topology"));
    let e = fails(&root);
    assert!(matches!(&e, TopologyError::Missing { .. }), "{e}");
}

#[test]
fn online_cpu_without_a_directory_is_an_error() {
    let root = fixtures::this_machine().write_temp().unwrap();
    overwrite(&root, &format!("{CPU}/online"), "0-2\n");
    let e = fails(&root);
    assert!(e.path().to_string_lossy().contains("cpu2/topology"), "{e}");
}

#[test]
fn malformed_ids_and_capacity_are_errors() {
    for (file, bad) in [
        ("cpu1/topology/physical_package_id", "abc"),
        ("cpu1/topology/core_id", "-3"),
        ("cpu1/cpu_capacity", "big"),
        ("cpu1/cache/index3/level", "three"),
        ("cpu1/cache/index3/size", "32MB"),
        ("cpu1/cache/index3/shared_cpu_list", "0-1,"),
        ("cpu1/online", "2"),
    ] {
        let root = fixtures::this_machine().write_temp().unwrap();
        overwrite(&root, &format!("{CPU}/{file}"), &format!("{bad}\n"));
        match fails(&root) {
            TopologyError::Malformed { path, value, .. } => {
                assert!(ends_with(&path, file), "{file}: {}", path.display());
                assert_eq!(value, bad);
            }
            other => panic!("{file}: unexpected {other:?}"),
        }
    }
}

#[test]
fn cpu_missing_from_its_own_lists_is_inconsistent() {
    let root = fixtures::this_machine().write_temp().unwrap();
    overwrite(&root, &format!("{CPU}/cpu1/topology/core_cpus_list"), "0\n");
    let e = fails(&root);
    assert!(
        matches!(&e, TopologyError::Inconsistent { value, .. } if value == "0"),
        "{e}"
    );

    let root = fixtures::this_machine().write_temp().unwrap();
    overwrite(
        &root,
        &format!("{CPU}/cpu1/cache/index3/shared_cpu_list"),
        "0\n",
    );
    let e = fails(&root);
    assert!(
        matches!(&e, TopologyError::Inconsistent { path, .. } if ends_with(path, "index3/shared_cpu_list")),
        "{e}"
    );
}

#[test]
fn siblings_that_disagree_are_inconsistent() {
    // cpu0 says its core is {0,16}; cpu16 says it is alone.
    let root = fixtures::two_socket_smt().write_temp().unwrap();
    overwrite(
        &root,
        &format!("{CPU}/cpu16/topology/core_cpus_list"),
        "16\n",
    );
    let e = fails(&root);
    match &e {
        TopologyError::Inconsistent {
            path,
            value,
            reason,
        } => {
            assert!(ends_with(path, "cpu0/topology/core_cpus_list"), "{e}");
            assert_eq!(value, "0,16");
            assert!(reason.contains("sibling set 0,16"), "{reason}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn llc_groups_that_overlap_are_inconsistent() {
    let root = fixtures::numa4_64().write_temp().unwrap();
    overwrite(
        &root,
        &format!("{CPU}/cpu8/cache/index3/shared_cpu_list"),
        "0-8\n",
    );
    let e = fails(&root);
    assert!(matches!(&e, TopologyError::Inconsistent { .. }), "{e}");
    assert!(e.to_string().contains("LLC group"), "{e}");
}

#[test]
fn numa_inconsistencies_and_bad_meminfo_are_errors() {
    let node = "devices/system/node";
    let root = fixtures::two_socket_smt().write_temp().unwrap();
    overwrite(&root, &format!("{node}/node1/cpulist"), "0,8-15,24-31\n");
    let e = fails(&root);
    assert!(
        matches!(&e, TopologyError::Inconsistent { path, .. } if ends_with(path, "node1/cpulist")),
        "{e}"
    );

    let root = fixtures::two_socket_smt().write_temp().unwrap();
    overwrite(&root, &format!("{node}/online"), "0\n");
    let e = fails(&root);
    assert!(matches!(&e, TopologyError::Inconsistent { .. }), "{e}");
    assert!(e.to_string().contains("8-15,24-31"), "{e}");

    let root = fixtures::two_socket_smt().write_temp().unwrap();
    overwrite(
        &root,
        &format!("{node}/node0/meminfo"),
        "Node 0 MemTotal: many kB\n",
    );
    let e = fails(&root);
    assert!(
        matches!(&e, TopologyError::Malformed { path, value, .. }
        if ends_with(path, "node0/meminfo") && value == "Node 0 MemTotal: many kB"),
        "{e}"
    );

    let root = fixtures::two_socket_smt().write_temp().unwrap();
    remove(&root, &format!("{node}/node1/meminfo"));
    assert!(matches!(fails(&root), TopologyError::Missing { .. }));
}

#[test]
fn malformed_kind_list_is_an_error() {
    let root = fixtures::hybrid().write_temp().unwrap();
    overwrite(&root, "devices/cpu_atom/cpus", "8-\n");
    let e = fails(&root);
    assert!(
        matches!(&e, TopologyError::Malformed { path, .. } if ends_with(path, "cpu_atom/cpus")),
        "{e}"
    );
}
