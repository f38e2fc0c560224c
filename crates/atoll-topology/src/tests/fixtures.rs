//! Every fixture read back, with precise expectations.

use atoll_core::topology::Topology;

use super::{overwrite, read, set};
use crate::testutils::fixtures::{
    self, HYBRID_E_CAPACITY, NUMA4_64, THIS_MACHINE_NODE0_KB, TWO_SOCKET_SMT,
};
use crate::testutils::{CacheType, FakeCpu, FakeSysfs};

const GIB: u64 = 1 << 30;

#[test]
fn this_machine_reads_back_as_two_cores_one_l3_one_node() {
    let root = fixtures::this_machine().write_temp().unwrap();
    let t = read(&root);
    assert_eq!(t.schema_version, 1);
    assert_eq!(t.online(), set("0-1"));
    assert_eq!(t.cores.len(), 2);
    for (i, core) in t.cores.iter().enumerate() {
        assert_eq!(core.index, i);
        assert_eq!(core.core_id, u32::try_from(i).unwrap());
        assert_eq!(core.package, 0);
        assert_eq!(core.cpus, set(&i.to_string()));
        assert_eq!(core.kind, None);
    }
    assert!(!t.has_smt());
    assert_eq!(t.llcs.len(), 1);
    assert_eq!(t.llcs[0].level, 3);
    assert_eq!(t.llcs[0].size_kib, Some(32768));
    assert_eq!(t.llcs[0].cpus, set("0-1"));
    assert_eq!(t.packages.len(), 1);
    assert_eq!((t.packages[0].id, &t.packages[0].cpus), (0, &set("0-1")));
    assert_eq!(t.nodes.len(), 1);
    assert_eq!(t.nodes[0].cpus, set("0-1"));
    assert_eq!(t.nodes[0].memory_bytes, THIS_MACHINE_NODE0_KB * 1024);
    for (id, cpu) in &t.cpus {
        assert_eq!(cpu.id, *id);
        assert_eq!(
            (cpu.core, cpu.llc, cpu.node, cpu.package),
            (*id as usize, 0, 0, 0)
        );
        assert_eq!(cpu.capacity, Some(1024));
    }
}

#[test]
fn smt_pair_is_one_core_with_two_threads() {
    let t = read(&fixtures::smt_pair().write_temp().unwrap());
    assert_eq!(t.cpus.len(), 2);
    assert_eq!(t.cores.len(), 1);
    assert_eq!(t.cores[0].cpus, set("0-1"));
    assert_eq!(t.siblings(1), set("0-1"));
    assert!(t.has_smt());
    assert_eq!(t.cpus[&1].core, 0);
    assert_eq!(t.llcs.len(), 1);
    assert_eq!(t.nodes[0].memory_bytes, 4 * GIB);
    assert_eq!(t.cpus[&0].capacity, None);
}

#[test]
fn two_socket_smt_reads_back_as_linux_x86_numbering() {
    let t = read(&fixtures::two_socket_smt().write_temp().unwrap());
    assert_eq!(t, Topology::synthetic(TWO_SOCKET_SMT));
    assert_eq!(t.cpus.len(), 32);
    assert_eq!(t.cores.len(), 16);
    for n in 0..16u32 {
        let expected = set(&format!("{n},{}", n + 16));
        assert_eq!(t.siblings(n), expected);
        assert_eq!(t.siblings(n + 16), expected);
        assert_eq!(t.cpus[&(n + 16)].core, n as usize);
        assert_eq!(t.cores[n as usize].core_id, n % 8);
        assert_eq!(t.cores[n as usize].package, n / 8);
    }
    assert_eq!(t.llcs.len(), 2);
    assert_eq!(t.llcs[0].cpus, set("0-7,16-23"));
    assert_eq!(t.llcs[1].cpus, set("8-15,24-31"));
    assert!(t
        .llcs
        .iter()
        .all(|l| l.level == 3 && l.size_kib == Some(32768)));
    assert_eq!(t.packages.len(), 2);
    assert_eq!(t.packages[1].cpus, set("8-15,24-31"));
    assert_eq!(t.nodes.len(), 2);
    assert_eq!(t.nodes[0].cpus, set("0-7,16-23"));
    assert_eq!(t.nodes[1].cpus, set("8-15,24-31"));
    assert!(t.nodes.iter().all(|n| n.memory_bytes == 64 * GIB));
    let c24 = &t.cpus[&24];
    assert_eq!((c24.core, c24.llc, c24.node, c24.package), (8, 1, 1, 1));
    assert!(t.cpus.values().all(|c| c.capacity.is_none()));
    assert!(t.cores.iter().all(|c| c.kind.is_none()));
}

#[test]
fn numa4_64_has_four_nodes_of_two_llcs() {
    let t = read(&fixtures::numa4_64().write_temp().unwrap());
    assert_eq!(t, Topology::synthetic(NUMA4_64));
    assert_eq!(t.cpus.len(), 64);
    assert_eq!(t.cores.len(), 64);
    assert!(!t.has_smt());
    assert_eq!(t.packages.len(), 1);
    assert_eq!(t.packages[0].cpus, set("0-63"));
    assert_eq!(t.nodes.len(), 4);
    for (k, node) in t.nodes.iter().enumerate() {
        let k = u32::try_from(k).unwrap();
        assert_eq!(node.id, k);
        assert_eq!(node.cpus, set(&format!("{}-{}", 16 * k, 16 * k + 15)));
        assert_eq!(node.memory_bytes, 32 * GIB);
    }
    assert_eq!(t.llcs.len(), 8);
    for (i, llc) in t.llcs.iter().enumerate() {
        let first = 8 * u32::try_from(i).unwrap();
        assert_eq!(llc.cpus, set(&format!("{first}-{}", first + 7)));
        assert_eq!(t.nodes_of(&llc.cpus), set(&(i / 2).to_string()));
    }
    assert_eq!(t.cpus[&27].llc, 3);
    assert_eq!(t.cpus[&27].node, 1);
    assert_eq!(t.memory_of(&t.all_nodes()), 128 * GIB);
}

#[test]
fn hybrid_has_core_and_atom_kinds_capacities_and_one_l3() {
    let t = read(&fixtures::hybrid().write_temp().unwrap());
    assert_eq!(t.cpus.len(), 16);
    assert_eq!(t.cores.len(), 12);
    for (i, core) in t.cores.iter().take(4).enumerate() {
        let i = u32::try_from(i).unwrap();
        let first = 2 * i;
        assert_eq!(core.cpus, set(&format!("{first}-{}", first + 1)));
        assert_eq!(core.core_id, 4 * i);
        assert_eq!(core.kind.as_deref(), Some("core"));
    }
    for (i, core) in t.cores.iter().skip(4).enumerate() {
        let i = u32::try_from(i).unwrap();
        let cpu = 8 + i;
        assert_eq!(core.cpus, set(&cpu.to_string()));
        assert_eq!(core.core_id, 16 + i);
        assert_eq!(core.kind.as_deref(), Some("atom"));
    }
    for (id, cpu) in &t.cpus {
        let expected = if *id < 8 { 1024 } else { HYBRID_E_CAPACITY };
        assert_eq!(cpu.capacity, Some(expected), "cpu{id}");
    }
    assert_eq!(t.cpus[&5].core, 2);
    assert_eq!(t.cpus[&13].core, 9);
    assert_eq!(t.llcs.len(), 1);
    assert_eq!(t.llcs[0].level, 3);
    assert_eq!(t.llcs[0].size_kib, Some(25600));
    assert_eq!(t.llcs[0].cpus, set("0-15"));
    assert_eq!(t.nodes.len(), 1);
    assert_eq!(t.nodes[0].memory_bytes, 32 * GIB);
    assert_eq!(t.packages.len(), 1);
}

/// arm big.LITTLE: no `cpu_core`/`cpu_atom`, the difference shows only in
/// `cpu_capacity`; clusters have an L2 and no L3, so each cluster is an LLC
/// group; `physical_package_id` may read -1.
#[test]
fn big_little_shows_through_capacity_and_l2_clusters() {
    let mut fake = FakeSysfs::new().node_memory(0, 8 * GIB);
    for id in 0..8 {
        let (cluster, cap) = if id < 4 { ("0-3", 446) } else { ("4-7", 1024) };
        fake = fake.cpu(
            FakeCpu::new(id)
                .core_id(id % 4)
                .capacity(cap)
                .cache(1, CacheType::Data, id.to_string().as_str(), 32)
                .cache(1, CacheType::Instruction, id.to_string().as_str(), 32)
                .cache(2, CacheType::Unified, cluster, 512),
        );
    }
    let root = fake.write_temp().unwrap();
    for id in 0..8 {
        overwrite(
            &root,
            &format!("devices/system/cpu/cpu{id}/topology/physical_package_id"),
            "-1\n",
        );
    }
    let t = read(&root);
    assert!(t.cores.iter().all(|c| c.kind.is_none()));
    assert_eq!(t.cores.len(), 8);
    assert_eq!(t.packages.len(), 1);
    assert_eq!(t.packages[0].id, 0);
    assert_eq!(t.llcs.len(), 2);
    assert_eq!(t.llcs[0].cpus, set("0-3"));
    assert_eq!(t.llcs[1].cpus, set("4-7"));
    assert!(t
        .llcs
        .iter()
        .all(|l| l.level == 2 && l.size_kib == Some(512)));
    assert_eq!(t.cpus[&2].capacity, Some(446));
    assert_eq!(t.cpus[&6].capacity, Some(1024));
}

#[test]
fn missing_cache_dirs_give_one_llc_group_per_package() {
    let root = fixtures::two_socket_smt()
        .without_caches()
        .write_temp()
        .unwrap();
    let t = read(&root);
    assert_eq!(t.llcs.len(), 2);
    assert_eq!(t.llcs[0].cpus, set("0-7,16-23"));
    assert_eq!(t.llcs[1].cpus, set("8-15,24-31"));
    assert!(t.llcs.iter().all(|l| l.level == 0 && l.size_kib.is_none()));
    assert_eq!(t.cpus[&20].llc, 0);
    assert_eq!(t.cpus[&9].llc, 1);
}

#[test]
fn missing_node_dir_gives_node_zero_with_unknown_memory() {
    let t = read(
        &fixtures::two_socket_smt()
            .without_numa()
            .write_temp()
            .unwrap(),
    );
    assert_eq!(t.nodes.len(), 1);
    assert_eq!(t.nodes[0].id, 0);
    assert_eq!(t.nodes[0].cpus, set("0-31"));
    assert_eq!(t.nodes[0].memory_bytes, 0);
    assert!(t.cpus.values().all(|c| c.node == 0));
    assert!(t.memory_nodes().is_empty());
}

#[test]
fn memory_only_node_is_listed_without_cpus() {
    let root = fixtures::smt_pair()
        .node_memory(1, 2 * GIB)
        .write_temp()
        .unwrap();
    let t = read(&root);
    assert_eq!(t.nodes.len(), 2);
    assert_eq!(t.nodes[1].id, 1);
    assert!(t.nodes[1].cpus.is_empty());
    assert_eq!(t.nodes[1].memory_bytes, 2 * GIB);
    assert_eq!(t.memory_nodes(), set("0-1"));
}

#[test]
fn offline_cpu_is_skipped_everywhere() {
    let fake = fixtures::two_socket_smt().offline(17);
    let root = fake.write_temp().unwrap();
    assert!(!root
        .path()
        .join("devices/system/cpu/cpu17/topology")
        .exists());
    let t = read(&root);
    assert_eq!(t.cpus.len(), 31);
    assert!(!t.cpus.contains_key(&17));
    assert_eq!(t.siblings(1), set("1"));
    assert_eq!(t.cores.len(), 16);
    assert_eq!(t.cores[1].cpus, set("1"));
    assert_eq!(t.llcs[0].cpus, set("0-7,16,18-23"));
    assert_eq!(t.nodes[0].cpus, set("0-7,16,18-23"));
    assert_eq!(t.packages[0].cpus, set("0-7,16,18-23"));
}

#[test]
fn cpu_that_went_offline_after_the_online_list_is_skipped() {
    let root = fixtures::numa4_64().write_temp().unwrap();
    overwrite(&root, "devices/system/cpu/cpu5/online", "0\n");
    let t = read(&root);
    assert_eq!(t.cpus.len(), 63);
    assert!(!t.cpus.contains_key(&5));
    assert_eq!(t.llcs[0].cpus, set("0-4,6-7"));
    assert_eq!(t.nodes[0].cpus, set("0-4,6-15"));
}

#[test]
fn older_kernels_without_core_cpus_list_use_thread_siblings_list() {
    let root = fixtures::two_socket_smt().write_temp().unwrap();
    for id in 0..32 {
        super::remove(
            &root,
            &format!("devices/system/cpu/cpu{id}/topology/core_cpus_list"),
        );
    }
    assert_eq!(read(&root), Topology::synthetic(TWO_SOCKET_SMT));
}
