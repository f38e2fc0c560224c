//! Automatic layouts: the host partition and islands derived from topology.
//!
//! - [`default_host`]: the first core (all its SMT siblings); if that would
//!   leave no CPU for islands, only the first CPU.
//! - [`auto_islands`] with [`AutoLayout::PerNode`]: one island per NUMA node
//!   that has CPUs left, with that node's memory.
//! - [`AutoLayout::PerLlc`]: one island per last-level-cache group.
//! - [`AutoLayout::Split`]`(n)`: `n` islands of whole cores, as equal in core
//!   count as possible, in CPU order, never splitting SMT siblings. A core
//!   some of whose siblings are taken (by the host partition) contributes its
//!   remaining threads as one unit.
//!
//! Memory nodes of an island are the nodes of its CPUs that have memory, or
//! every memory node when none of them does (CPU-only nodes exist).

use serde::{Deserialize, Serialize};

use crate::topology::Topology;
use crate::{CpuSet, NodeSet};

/// How to carve islands out of the CPUs left after the host partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoLayout {
    /// One island per NUMA node.
    PerNode,
    /// One island per last-level-cache group.
    PerLlc,
    /// `n` islands of whole cores.
    Split(u32),
}

/// Why a layout cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// No CPU is left for islands.
    #[error("no CPUs are left for islands after the host partition ({host})")]
    NothingLeft {
        /// The host partition.
        host: CpuSet,
    },
    /// More islands asked for than there are cores.
    #[error("cannot split {cores} cores into {want} islands")]
    TooFewCores {
        /// Cores available.
        cores: usize,
        /// Islands asked for.
        want: u32,
    },
}

/// The default host partition: the first online core, or just the first CPU
/// when the first core is the whole machine. Empty only for an empty machine.
pub fn default_host(topo: &Topology) -> CpuSet {
    let online = topo.online();
    let Some(first) = online.first() else {
        return CpuSet::new();
    };
    let core = topo.siblings(first);
    if online.difference(&core).is_empty() {
        std::iter::once(first).collect()
    } else {
        core
    }
}

/// Memory nodes for an island on `cpus`.
pub fn mems_for(topo: &Topology, cpus: &CpuSet) -> NodeSet {
    let with_mem = topo.memory_nodes();
    let mine = topo.nodes_of(cpus).intersection(&with_mem);
    if mine.is_empty() {
        with_mem
    } else {
        mine
    }
}

/// Islands (CPUs, memory nodes) over `available` CPUs, in CPU order.
pub fn auto_islands(
    topo: &Topology,
    available: &CpuSet,
    layout: AutoLayout,
) -> Result<Vec<(CpuSet, NodeSet)>, LayoutError> {
    let groups: Vec<CpuSet> = match layout {
        AutoLayout::PerNode => topo
            .nodes
            .iter()
            .map(|n| n.cpus.intersection(available))
            .collect(),
        AutoLayout::PerLlc => topo
            .llcs
            .iter()
            .map(|l| l.cpus.intersection(available))
            .collect(),
        AutoLayout::Split(n) => split_cores(topo, available, n)?,
    };
    let out: Vec<_> = groups
        .into_iter()
        .filter(|g| !g.is_empty())
        .map(|g| {
            let mems = mems_for(topo, &g);
            (g, mems)
        })
        .collect();
    if out.is_empty() {
        return Err(LayoutError::NothingLeft {
            host: topo.online().difference(available),
        });
    }
    Ok(out)
}

fn split_cores(topo: &Topology, available: &CpuSet, n: u32) -> Result<Vec<CpuSet>, LayoutError> {
    let mut cores: Vec<CpuSet> = topo
        .cores
        .iter()
        .map(|c| c.cpus.intersection(available))
        .filter(|c| !c.is_empty())
        .collect();
    cores.sort_by_key(|c| c.first());
    if cores.is_empty() {
        return Err(LayoutError::NothingLeft {
            host: topo.online().difference(available),
        });
    }
    if n == 0 || n as usize > cores.len() {
        return Err(LayoutError::TooFewCores {
            cores: cores.len(),
            want: n,
        });
    }
    let (n, total) = (n as usize, cores.len());
    let mut out = Vec::with_capacity(n);
    let mut it = cores.into_iter();
    for i in 0..n {
        // The first `total % n` islands take one core more.
        let take = total / n + usize::from(i < total % n);
        out.push(
            it.by_ref()
                .take(take)
                .fold(CpuSet::new(), |acc, c| acc.union(&c)),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::SyntheticShape;

    fn shape(packages: u32, nodes: u32, llcs: u32, cores: u32, threads: u32) -> Topology {
        Topology::synthetic(SyntheticShape {
            packages,
            nodes_per_package: nodes,
            llcs_per_node: llcs,
            cores_per_llc: cores,
            threads_per_core: threads,
            memory_per_node: 1 << 30,
        })
    }

    #[test]
    fn host_takes_first_core_unless_that_is_everything() {
        let smt1 = shape(1, 1, 1, 1, 2); // like this 2-CPU build machine
        assert_eq!(default_host(&smt1).to_string(), "0");
        let two = shape(1, 1, 1, 2, 1);
        assert_eq!(default_host(&two).to_string(), "0");
        let big = shape(2, 1, 1, 8, 2);
        assert_eq!(default_host(&big).to_string(), "0,16");
    }

    #[test]
    fn per_node_and_per_llc() {
        let t = shape(2, 2, 2, 4, 1); // 4 nodes, 8 LLCs, 32 CPUs
        let host = default_host(&t);
        let avail = t.online().difference(&host);
        let nodes = auto_islands(&t, &avail, AutoLayout::PerNode).unwrap();
        let printed: Vec<_> = nodes.iter().map(|(c, m)| format!("{c}@{m}")).collect();
        assert_eq!(printed, ["1-7@0", "8-15@1", "16-23@2", "24-31@3"]);
        let llcs = auto_islands(&t, &avail, AutoLayout::PerLlc).unwrap();
        assert_eq!(llcs.len(), 8);
        assert_eq!(llcs[0].0.to_string(), "1-3");
        assert_eq!(llcs[7].1.to_string(), "3");
    }

    #[test]
    fn split_keeps_smt_siblings_together_and_balances() {
        let t = shape(2, 1, 1, 8, 2); // 16 cores, 32 CPUs, siblings n and n+16
        let avail = t.online().difference(&default_host(&t));
        let parts = auto_islands(&t, &avail, AutoLayout::Split(4)).unwrap();
        let sizes: Vec<_> = parts.iter().map(|(c, _)| c.len()).collect();
        // 15 whole cores: 4+4+4+3 cores → 8,8,8,6 CPUs.
        assert_eq!(sizes, [8, 8, 8, 6]);
        for (cpus, _) in &parts {
            for cpu in cpus.iter() {
                assert!(
                    t.siblings(cpu).is_subset(cpus),
                    "{cpu} split from its sibling in {cpus}"
                );
            }
        }
        assert_eq!(parts[0].0.to_string(), "1-4,17-20");
        assert_eq!(parts[3].1.to_string(), "1");
    }

    #[test]
    fn impossible_layouts_say_why() {
        let t = shape(1, 1, 1, 2, 1);
        let avail = t.online().difference(&default_host(&t));
        assert_eq!(
            auto_islands(&t, &avail, AutoLayout::Split(3)),
            Err(LayoutError::TooFewCores { cores: 1, want: 3 })
        );
        let e = auto_islands(&t, &CpuSet::new(), AutoLayout::PerNode).unwrap_err();
        assert!(e.to_string().contains("no CPUs are left"), "{e}");
    }
}
