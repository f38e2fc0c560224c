//! Ready machines, each a [`FakeSysfs`] to write (and tweak first if needed):
//!
//! ```ignore
//! let root = fixtures::two_socket_smt().write_temp()?;
//! let topo = atoll_topology::read_topology(root.path())?;
//! ```
//!
//! | fixture | CPUs | shape |
//! |---|---|---|
//! | [`this_machine`] | 2 | the development VM: AMD EPYC, 2 cores without SMT, one shared L3, 1 node |
//! | [`smt_pair`] | 2 | one core with 2 SMT threads, shared L3, 1 node |
//! | [`two_socket_smt`] | 32 | 2 sockets × 8 cores × 2 threads, siblings N and N+16, node and L3 per socket |
//! | [`numa4_64`] | 64 | EPYC-like single socket in NPS4: 4 nodes × 2 CCX × 8 cores, no SMT |
//! | [`hybrid`] | 16 | Alder-Lake-like: 4 P-cores × 2 threads + 8 E-cores, one L3 |

use atoll_core::topology::SyntheticShape;
use atoll_core::CpuSet;

use super::{CacheType, FakeCpu, FakeSysfs};

const GIB: u64 = 1 << 30;

/// `MemTotal` of node 0 on the development machine, kB.
pub const THIS_MACHINE_NODE0_KB: u64 = 4_679_896;

/// A copy of this box's `/sys` as read when the fixture was written (kernel
/// 6.18, AMD EPYC VM): cpu0 and cpu1 are two cores (`core_id` 0 and 1, each
/// its own `thread_siblings_list`, `smt/control` = `notsupported`) in
/// package 0; per CPU 32K L1d, 32K L1i, 1024K L2; a 32768K L3 shared by
/// `0-1`; `cpu_capacity` 1024; node 0 with `cpulist` `0-1` and
/// `MemTotal: 4679896 kB` (the VM hot-adds memory, so the real value drifts;
/// everything else matched exactly). No `cpu_core`/`cpu_atom`.
pub fn this_machine() -> FakeSysfs {
    let mut fake = FakeSysfs::new().node_memory(0, THIS_MACHINE_NODE0_KB * 1024);
    for id in 0..2 {
        fake = fake.cpu(
            FakeCpu::new(id)
                .core_id(id)
                .capacity(1024)
                .private_caches(32, 32, 1024)
                .cache(3, CacheType::Unified, "0-1", 32 * 1024),
        );
    }
    fake
}

/// The smallest SMT machine: cpu0 and cpu1 are the two threads of core 0,
/// sharing L1/L2 and a 32M L3; package 0; node 0 with 4 GiB.
pub fn smt_pair() -> FakeSysfs {
    let mut fake = FakeSysfs::new().node_memory(0, 4 * GIB);
    for id in 0..2 {
        fake = fake.cpu(
            FakeCpu::new(id)
                .core_id(0)
                .siblings("0-1")
                .private_caches(32, 32, 1024)
                .cache(3, CacheType::Unified, "0-1", 32 * 1024),
        );
    }
    fake
}

/// The shape of [`two_socket_smt`].
pub const TWO_SOCKET_SMT: SyntheticShape = SyntheticShape {
    packages: 2,
    nodes_per_package: 1,
    llcs_per_node: 1,
    cores_per_llc: 8,
    threads_per_core: 2,
    memory_per_node: 64 * GIB,
};

/// 2 sockets × 8 cores × 2 threads = 32 CPUs in Linux x86 numbering: the
/// siblings of CPU N (N < 16) are N and N+16; socket 0 holds `0-7,16-23`,
/// socket 1 `8-15,24-31`. One node (64 GiB) and one 32M L3 per socket.
/// Reads back as `Topology::synthetic(TWO_SOCKET_SMT)`.
pub fn two_socket_smt() -> FakeSysfs {
    FakeSysfs::from_shape(TWO_SOCKET_SMT)
}

/// The shape of [`numa4_64`].
pub const NUMA4_64: SyntheticShape = SyntheticShape {
    packages: 1,
    nodes_per_package: 4,
    llcs_per_node: 2,
    cores_per_llc: 8,
    threads_per_core: 1,
    memory_per_node: 32 * GIB,
};

/// 64 CPUs without SMT on one socket split into 4 NUMA nodes (as an EPYC in
/// NPS4 mode): node k holds CPUs `16k..16k+15` and 32 GiB; each node has 2
/// LLC groups (CCX) of 8 CPUs with a 32M L3. Reads back as
/// `Topology::synthetic(NUMA4_64)`.
pub fn numa4_64() -> FakeSysfs {
    FakeSysfs::from_shape(NUMA4_64)
}

/// Capacity the [`hybrid`] fixture gives its E-cores.
pub const HYBRID_E_CAPACITY: u32 = 600;

/// An Alder-Lake-like hybrid with 16 CPUs, one package, one node (32 GiB):
///
/// * P-cores: CPUs `0-7`, 4 cores with 2 threads each, siblings `0-1`,
///   `2-3`, `4-5`, `6-7`; `core_id` 0, 4, 8, 12; `cpu_capacity` 1024; private
///   48K L1d, 32K L1i, 1280K L2; listed in `devices/cpu_core/cpus`.
/// * E-cores: CPUs `8-15`, one thread each; `core_id` 16..23;
///   `cpu_capacity` [`HYBRID_E_CAPACITY`]; private 32K L1d and 64K L1i; a 2M
///   L2 shared by each cluster of four (`8-11`, `12-15`); listed in
///   `devices/cpu_atom/cpus`.
/// * One 25M (25600K) L3 shared by `0-15`, so the whole machine is a single
///   LLC group: the E-core clusters share an L2, which is not last-level.
pub fn hybrid() -> FakeSysfs {
    let mut fake = FakeSysfs::new()
        .node_memory(0, 32 * GIB)
        .hybrid("0-7", "8-15");
    for id in 0..8 {
        let first = id & !1;
        fake = fake.cpu(
            FakeCpu::new(id)
                .core_id(first * 2)
                .siblings(CpuSet::range(first, first + 1))
                .capacity(1024)
                .private_caches(48, 32, 1280)
                .cache(3, CacheType::Unified, "0-15", 25600),
        );
    }
    for id in 8..16 {
        let cluster_start = if id < 12 { 8 } else { 12 };
        let cluster = CpuSet::range(cluster_start, cluster_start + 3);
        fake = fake.cpu(
            FakeCpu::new(id)
                .core_id(id + 8)
                .capacity(HYBRID_E_CAPACITY)
                .cache(1, CacheType::Data, CpuSet::range(id, id), 32)
                .cache(1, CacheType::Instruction, CpuSet::range(id, id), 64)
                .cache(2, CacheType::Unified, &cluster, 2048)
                .cache(3, CacheType::Unified, "0-15", 25600),
        );
    }
    fake
}
