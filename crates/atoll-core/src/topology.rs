//! The machine as an immutable snapshot.
//!
//! ```text
//! Topology
//! ├── Package (physical_package_id)
//! ├── Node (NUMA node, with its memory)
//! ├── Llc  (last-level cache group)
//! ├── Core (SMT siblings; a core type where sysfs gives one)
//! └── Cpu  (logical CPU: kernel id + the ids of its core, llc, node, package)
//! ```
//!
//! Every object carries the kernel's id (`id`). Cores and LLC groups are
//! numbered densely (0..n) because the kernel's `core_id` repeats across
//! packages and caches have no id of their own. The snapshot is rebuilt on
//! hotplug, never mutated. [`Topology::synthetic`] builds regular machines for
//! tests and the simulator without reading anything.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{CpuSet, NodeSet};

/// Schema version of the JSON form (`atoll topology --json`).
pub const TOPOLOGY_SCHEMA_VERSION: u32 = 1;

/// One logical CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    /// Kernel CPU id (`cpuN`).
    pub id: u32,
    /// Dense index into [`Topology::cores`].
    pub core: usize,
    /// Dense index into [`Topology::llcs`].
    pub llc: usize,
    /// NUMA node id.
    pub node: u32,
    /// `physical_package_id`.
    pub package: u32,
    /// `cpu_capacity` (0..=1024) where sysfs gives it.
    pub capacity: Option<u32>,
}

/// A physical core: one or more SMT siblings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Core {
    /// Dense index.
    pub index: usize,
    /// The kernel's `core_id` (unique only within a package).
    pub core_id: u32,
    /// `physical_package_id`.
    pub package: u32,
    /// SMT siblings (`thread_siblings_list`).
    pub cpus: CpuSet,
    /// Core type where the kernel tells it (e.g. `core`/`atom` on hybrid
    /// Intel parts), else `None`.
    pub kind: Option<String>,
}

/// A group of CPUs sharing a last-level cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Llc {
    /// Dense index.
    pub index: usize,
    /// Cache level (usually 3, else the highest seen).
    pub level: u32,
    /// Size in KiB where sysfs gives it.
    pub size_kib: Option<u64>,
    /// `shared_cpu_list`.
    pub cpus: CpuSet,
}

/// A physical package (socket).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    /// `physical_package_id`.
    pub id: u32,
    /// Its CPUs.
    pub cpus: CpuSet,
}

/// A NUMA node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Node id.
    pub id: u32,
    /// Its online CPUs (may be empty for memory-only nodes).
    pub cpus: CpuSet,
    /// `MemTotal` of the node in bytes.
    pub memory_bytes: u64,
}

/// The whole machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Schema version of this form.
    pub schema_version: u32,
    /// Online CPUs by kernel id.
    pub cpus: BTreeMap<u32, Cpu>,
    /// Physical cores, dense.
    pub cores: Vec<Core>,
    /// Last-level cache groups, dense.
    pub llcs: Vec<Llc>,
    /// Packages by id order.
    pub packages: Vec<Package>,
    /// NUMA nodes by id order (a machine without NUMA has node 0).
    pub nodes: Vec<Node>,
}

/// The shape of a regular machine for [`Topology::synthetic`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyntheticShape {
    /// Sockets.
    pub packages: u32,
    /// NUMA nodes per package.
    pub nodes_per_package: u32,
    /// LLC groups per node.
    pub llcs_per_node: u32,
    /// Cores per LLC group.
    pub cores_per_llc: u32,
    /// SMT threads per core.
    pub threads_per_core: u32,
    /// Memory per node, bytes.
    pub memory_per_node: u64,
}

impl Topology {
    /// All online CPUs.
    pub fn online(&self) -> CpuSet {
        self.cpus.keys().copied().collect()
    }

    /// All node ids that have memory.
    pub fn memory_nodes(&self) -> NodeSet {
        self.nodes
            .iter()
            .filter(|n| n.memory_bytes > 0)
            .map(|n| n.id)
            .collect()
    }

    /// All node ids.
    pub fn all_nodes(&self) -> NodeSet {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// The SMT siblings of `cpu` (including itself); empty if offline.
    pub fn siblings(&self, cpu: u32) -> CpuSet {
        self.cpus
            .get(&cpu)
            .map(|c| self.cores[c.core].cpus.clone())
            .unwrap_or_default()
    }

    /// Whether any core has more than one thread.
    pub fn has_smt(&self) -> bool {
        self.cores.iter().any(|c| c.cpus.len() > 1)
    }

    /// Nodes whose CPUs intersect `cpus`.
    pub fn nodes_of(&self, cpus: &CpuSet) -> NodeSet {
        cpus.iter()
            .filter_map(|c| self.cpus.get(&c).map(|c| c.node))
            .collect()
    }

    /// Total memory of the nodes in `nodes`, bytes.
    pub fn memory_of(&self, nodes: &NodeSet) -> u64 {
        self.nodes
            .iter()
            .filter(|n| nodes.contains(n.id))
            .map(|n| n.memory_bytes)
            .sum()
    }

    /// Builds a regular machine: CPUs numbered the way Linux numbers most x86
    /// machines, first threads of all cores before second threads.
    pub fn synthetic(shape: SyntheticShape) -> Self {
        let SyntheticShape {
            packages,
            nodes_per_package,
            llcs_per_node,
            cores_per_llc,
            threads_per_core,
            memory_per_node,
        } = shape;
        let cores_total = packages * nodes_per_package * llcs_per_node * cores_per_llc;
        let mut topo = Self::empty();
        for p in 0..packages {
            topo.packages.push(Package {
                id: p,
                cpus: CpuSet::new(),
            });
        }
        for n in 0..packages * nodes_per_package {
            topo.nodes.push(Node {
                id: n,
                cpus: CpuSet::new(),
                memory_bytes: memory_per_node,
            });
        }
        let cores_per_package = nodes_per_package * llcs_per_node * cores_per_llc;
        for core in 0..cores_total {
            let package = core / cores_per_package;
            let llc = (core / cores_per_llc) as usize;
            let node = core / (llcs_per_node * cores_per_llc);
            if topo.llcs.len() <= llc {
                topo.llcs.push(Llc {
                    index: llc,
                    level: 3,
                    size_kib: Some(32 * 1024),
                    cpus: CpuSet::new(),
                });
            }
            let cpus: CpuSet = (0..threads_per_core)
                .map(|t| t * cores_total + core)
                .collect();
            for cpu in cpus.iter() {
                topo.cpus.insert(
                    cpu,
                    Cpu {
                        id: cpu,
                        core: core as usize,
                        llc,
                        node,
                        package,
                        capacity: None,
                    },
                );
                topo.llcs[llc].cpus.insert(cpu);
                topo.nodes[node as usize].cpus.insert(cpu);
                topo.packages[package as usize].cpus.insert(cpu);
            }
            topo.cores.push(Core {
                index: core as usize,
                core_id: core % cores_per_package,
                package,
                cpus,
                kind: None,
            });
        }
        topo
    }

    /// A topology with nothing in it, to be filled by a reader.
    pub fn empty() -> Self {
        Self {
            schema_version: TOPOLOGY_SCHEMA_VERSION,
            cpus: BTreeMap::new(),
            cores: Vec::new(),
            llcs: Vec::new(),
            packages: Vec::new(),
            nodes: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_two_socket_smt_machine() {
        let t = Topology::synthetic(SyntheticShape {
            packages: 2,
            nodes_per_package: 1,
            llcs_per_node: 1,
            cores_per_llc: 8,
            threads_per_core: 2,
            memory_per_node: 1 << 30,
        });
        assert_eq!(t.cpus.len(), 32);
        assert_eq!(t.cores.len(), 16);
        assert_eq!(t.siblings(0).to_string(), "0,16");
        assert_eq!(t.siblings(17).to_string(), "1,17");
        assert_eq!(t.nodes[1].cpus.to_string(), "8-15,24-31");
        assert_eq!(t.packages[0].cpus.to_string(), "0-7,16-23");
        assert!(t.has_smt());
        assert_eq!(t.memory_of(&t.all_nodes()), 2 << 30);
        assert_eq!(
            t.nodes_of(&CpuSet::parse("0,9").unwrap()).to_string(),
            "0-1"
        );
    }
}
