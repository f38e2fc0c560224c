//! Fake sysfs trees for tests (feature `testutils`).
//!
//! [`FakeSysfs`] describes a machine — CPUs with their package, core, SMT
//! siblings, caches, NUMA node and capacity; node memory; hybrid core kinds —
//! and [`FakeSysfs::write`] lays it out as the kernel would under a directory,
//! which is then handed to [`read_topology`] as the
//! sysfs root. [`fixtures`] holds ready machines.
//!
//! What gets written, relative to the root:
//!
//! * `devices/system/cpu/{online,offline,possible,present}`;
//! * per CPU `cpuN/online` (not for cpu0, which x86 cannot unplug) and, for
//!   online CPUs only (the kernel removes them on unplug), `cpuN/topology/`
//!   (`core_cpus_list`, `thread_siblings_list`, `core_siblings_list`,
//!   `package_cpus_list`, `physical_package_id`, `core_id`, `die_id`),
//!   `cpuN/cache/indexK/{level,type,shared_cpu_list,size,coherency_line_size}`
//!   and `cpuN/cpu_capacity` when given. Lists are clipped to online CPUs, as
//!   the kernel does. Hex bitmask twins (`thread_siblings`, `shared_cpu_map`)
//!   are not written: atoll reads only the list forms;
//! * unless [`FakeSysfs::without_numa`], `devices/system/node/{online,
//!   possible,has_cpu,has_memory}` and `nodeN/{cpulist,meminfo}`;
//! * per core kind, `devices/cpu_<kind>/cpus` (Intel hybrid PMUs).

pub mod fixtures;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::CpuSet;

use crate::{read_topology, TopologyError};

/// Something that can be turned into a [`CpuSet`]: a kernel list string
/// (`"0-3,8"`, panics if malformed — this is test code) or a set.
pub trait IntoCpuSet {
    /// The set.
    fn into_cpu_set(self) -> CpuSet;
}

impl IntoCpuSet for &str {
    fn into_cpu_set(self) -> CpuSet {
        CpuSet::parse(self).unwrap_or_else(|e| panic!("bad CPU list in test fixture: {e}"))
    }
}

impl IntoCpuSet for CpuSet {
    fn into_cpu_set(self) -> CpuSet {
        self
    }
}

impl IntoCpuSet for &CpuSet {
    fn into_cpu_set(self) -> CpuSet {
        self.clone()
    }
}

/// A cache's `type` as sysfs spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheType {
    /// `Data`.
    Data,
    /// `Instruction`.
    Instruction,
    /// `Unified`.
    Unified,
}

impl CacheType {
    /// The sysfs spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Data => "Data",
            Self::Instruction => "Instruction",
            Self::Unified => "Unified",
        }
    }
}

/// One `cache/indexK` directory of a CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeCache {
    /// `level`.
    pub level: u32,
    /// `type`.
    pub kind: CacheType,
    /// `shared_cpu_list` (clipped to online CPUs when written).
    pub shared: CpuSet,
    /// `size` in KiB; `None` leaves the file out.
    pub size_kib: Option<u64>,
}

/// One logical CPU. Built with [`FakeCpu::new`] and the chained setters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeCpu {
    /// Kernel id.
    pub id: u32,
    /// `physical_package_id`.
    pub package: u32,
    /// `core_id`.
    pub core_id: u32,
    /// SMT siblings including itself.
    pub siblings: CpuSet,
    /// NUMA node.
    pub node: u32,
    /// `cpu_capacity`; `None` leaves the file out.
    pub capacity: Option<u32>,
    /// `cache/index0..`, in order.
    pub caches: Vec<FakeCache>,
    /// Whether the CPU is online.
    pub online: bool,
}

impl FakeCpu {
    /// CPU `id`: package 0, `core_id` = `id`, no SMT sibling, node 0, no
    /// capacity, no caches, online.
    pub fn new(id: u32) -> Self {
        Self {
            id,
            package: 0,
            core_id: id,
            siblings: CpuSet::range(id, id),
            node: 0,
            capacity: None,
            caches: Vec::new(),
            online: true,
        }
    }

    /// Sets `physical_package_id`.
    pub fn package(mut self, package: u32) -> Self {
        self.package = package;
        self
    }

    /// Sets `core_id`.
    pub fn core_id(mut self, core_id: u32) -> Self {
        self.core_id = core_id;
        self
    }

    /// Sets the SMT siblings (should include the CPU itself).
    pub fn siblings(mut self, cpus: impl IntoCpuSet) -> Self {
        self.siblings = cpus.into_cpu_set();
        self
    }

    /// Sets the NUMA node.
    pub fn node(mut self, node: u32) -> Self {
        self.node = node;
        self
    }

    /// Sets `cpu_capacity`.
    pub fn capacity(mut self, capacity: u32) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// Appends a cache (the next `indexK`).
    pub fn cache(
        mut self,
        level: u32,
        kind: CacheType,
        shared: impl IntoCpuSet,
        size_kib: u64,
    ) -> Self {
        self.caches.push(FakeCache {
            level,
            kind,
            shared: shared.into_cpu_set(),
            size_kib: Some(size_kib),
        });
        self
    }

    /// Appends the usual private L1d/L1i/L2 caches, shared by the SMT siblings.
    pub fn private_caches(self, l1d_kib: u64, l1i_kib: u64, l2_kib: u64) -> Self {
        let s = self.siblings.clone();
        self.cache(1, CacheType::Data, &s, l1d_kib)
            .cache(1, CacheType::Instruction, &s, l1i_kib)
            .cache(2, CacheType::Unified, &s, l2_kib)
    }
}

/// A machine to be written as a sysfs tree. See the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FakeSysfs {
    cpus: BTreeMap<u32, FakeCpu>,
    node_memory: BTreeMap<u32, u64>,
    no_numa: bool,
    kinds: BTreeMap<String, CpuSet>,
}

impl FakeSysfs {
    /// An empty machine.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a CPU.
    pub fn cpu(mut self, cpu: FakeCpu) -> Self {
        self.cpus.insert(cpu.id, cpu);
        self
    }

    /// Sets a node's `MemTotal` in bytes (written in kB, so rounded down to
    /// KiB). Also declares the node, which may then have no CPU. Nodes with
    /// CPUs but no memory set get `MemTotal: 0 kB`.
    pub fn node_memory(mut self, node: u32, bytes: u64) -> Self {
        self.node_memory.insert(node, bytes);
        self
    }

    /// Leaves out `devices/system/node`, as a kernel without `CONFIG_NUMA`.
    pub fn without_numa(mut self) -> Self {
        self.no_numa = true;
        self
    }

    /// Removes every CPU's `cache` directory.
    pub fn without_caches(mut self) -> Self {
        for cpu in self.cpus.values_mut() {
            cpu.caches.clear();
        }
        self
    }

    /// Declares a core kind: writes `devices/cpu_<kind>/cpus`.
    pub fn kind(mut self, kind: &str, cpus: impl IntoCpuSet) -> Self {
        self.kinds.insert(kind.to_string(), cpus.into_cpu_set());
        self
    }

    /// Intel hybrid: `cpu_core` (P-cores) and `cpu_atom` (E-cores).
    pub fn hybrid(self, core: impl IntoCpuSet, atom: impl IntoCpuSet) -> Self {
        self.kind("core", core).kind("atom", atom)
    }

    /// Marks CPU `id` offline (it must have been added).
    pub fn offline(mut self, id: u32) -> Self {
        match self.cpus.get_mut(&id) {
            Some(cpu) => cpu.online = false,
            None => panic!("FakeSysfs::offline({id}): no such CPU"),
        }
        self
    }

    /// The CPUs, by id.
    pub fn cpus(&self) -> &BTreeMap<u32, FakeCpu> {
        &self.cpus
    }

    /// The online CPUs.
    pub fn online(&self) -> CpuSet {
        self.cpus
            .values()
            .filter(|c| c.online)
            .map(|c| c.id)
            .collect()
    }

    /// A regular machine numbered like [`Topology::synthetic`] (first threads
    /// of all cores, then second threads), with private 32K L1d, 32K L1i and
    /// 1M L2 per core and a 32M L3 per LLC group, so that reading it back
    /// gives exactly `Topology::synthetic(shape)`.
    pub fn from_shape(shape: SyntheticShape) -> Self {
        let SyntheticShape {
            packages,
            nodes_per_package,
            llcs_per_node,
            cores_per_llc,
            threads_per_core,
            memory_per_node,
        } = shape;
        let cores_per_node = llcs_per_node * cores_per_llc;
        let cores_per_package = nodes_per_package * cores_per_node;
        let cores_total = packages * cores_per_package;
        let mut fake = Self::new();
        for n in 0..packages * nodes_per_package {
            fake = fake.node_memory(n, memory_per_node);
        }
        let threads_of = |core: u32| -> CpuSet {
            (0..threads_per_core)
                .map(|t| t * cores_total + core)
                .collect()
        };
        for core in 0..cores_total {
            let llc = core / cores_per_llc;
            let l3: CpuSet = (llc * cores_per_llc..(llc + 1) * cores_per_llc)
                .flat_map(|c| threads_of(c).iter().collect::<Vec<_>>())
                .collect();
            let siblings = threads_of(core);
            for id in siblings.iter() {
                fake = fake.cpu(
                    FakeCpu::new(id)
                        .package(core / cores_per_package)
                        .core_id(core % cores_per_package)
                        .siblings(&siblings)
                        .node(core / cores_per_node)
                        .private_caches(32, 32, 1024)
                        .cache(3, CacheType::Unified, &l3, 32 * 1024),
                );
            }
        }
        fake
    }

    /// Writes the tree under `root` (created if needed; files already there
    /// are overwritten, others left alone — use a fresh directory) and
    /// returns `root`, ready for [`read_topology`].
    pub fn write(&self, root: &Path) -> io::Result<PathBuf> {
        let online = self.online();
        let all: CpuSet = self.cpus.keys().copied().collect();
        let cpu_dir = root.join("devices/system/cpu");
        put(&cpu_dir.join("online"), &online.to_string())?;
        put(
            &cpu_dir.join("offline"),
            &all.difference(&online).to_string(),
        )?;
        put(&cpu_dir.join("possible"), &all.to_string())?;
        put(&cpu_dir.join("present"), &all.to_string())?;
        for cpu in self.cpus.values() {
            self.write_cpu(&cpu_dir.join(format!("cpu{}", cpu.id)), cpu, &online)?;
        }
        if !self.no_numa {
            self.write_nodes(&root.join("devices/system/node"), &online)?;
        }
        for (kind, cpus) in &self.kinds {
            put(
                &root.join(format!("devices/cpu_{kind}/cpus")),
                &cpus.to_string(),
            )?;
        }
        Ok(root.to_path_buf())
    }

    /// Writes the tree into a fresh temporary directory, removed when the
    /// returned [`FakeRoot`] drops.
    pub fn write_temp(&self) -> io::Result<FakeRoot> {
        let dir = tempfile::Builder::new().prefix("atoll-sysfs-").tempdir()?;
        self.write(dir.path())?;
        Ok(FakeRoot { dir })
    }

    fn write_cpu(&self, dir: &Path, cpu: &FakeCpu, online: &CpuSet) -> io::Result<()> {
        fs::create_dir_all(dir)?;
        if cpu.id != 0 || !cpu.online {
            put(&dir.join("online"), if cpu.online { "1" } else { "0" })?;
        }
        if !cpu.online {
            return Ok(());
        }
        let package_cpus: CpuSet = self
            .cpus
            .values()
            .filter(|c| c.package == cpu.package && c.online)
            .map(|c| c.id)
            .collect();
        let siblings = cpu.siblings.intersection(online).to_string();
        let topo = dir.join("topology");
        put(&topo.join("core_cpus_list"), &siblings)?;
        put(&topo.join("thread_siblings_list"), &siblings)?;
        put(&topo.join("core_siblings_list"), &package_cpus.to_string())?;
        put(&topo.join("package_cpus_list"), &package_cpus.to_string())?;
        put(&topo.join("physical_package_id"), &cpu.package.to_string())?;
        put(&topo.join("die_id"), "0")?;
        put(&topo.join("core_id"), &cpu.core_id.to_string())?;
        if let Some(cap) = cpu.capacity {
            put(&dir.join("cpu_capacity"), &cap.to_string())?;
        }
        for (k, cache) in cpu.caches.iter().enumerate() {
            let index = dir.join(format!("cache/index{k}"));
            put(&index.join("level"), &cache.level.to_string())?;
            put(&index.join("type"), cache.kind.as_str())?;
            put(
                &index.join("shared_cpu_list"),
                &cache.shared.intersection(online).to_string(),
            )?;
            if let Some(size) = cache.size_kib {
                put(&index.join("size"), &format!("{size}K"))?;
            }
            put(&index.join("coherency_line_size"), "64")?;
        }
        Ok(())
    }

    fn write_nodes(&self, dir: &Path, online: &CpuSet) -> io::Result<()> {
        let mut nodes: BTreeMap<u32, CpuSet> = self
            .node_memory
            .keys()
            .map(|&n| (n, CpuSet::new()))
            .collect();
        for cpu in self.cpus.values() {
            let set = nodes.entry(cpu.node).or_default();
            if online.contains(cpu.id) {
                set.insert(cpu.id);
            }
        }
        let ids: CpuSet = nodes.keys().copied().collect();
        let with_cpus: CpuSet = nodes
            .iter()
            .filter(|(_, c)| !c.is_empty())
            .map(|(n, _)| *n)
            .collect();
        let with_memory: CpuSet = self
            .node_memory
            .iter()
            .filter(|(_, m)| **m > 0)
            .map(|(n, _)| *n)
            .collect();
        put(&dir.join("online"), &ids.to_string())?;
        put(&dir.join("possible"), &ids.to_string())?;
        put(&dir.join("has_cpu"), &with_cpus.to_string())?;
        put(&dir.join("has_memory"), &with_memory.to_string())?;
        for (id, cpus) in &nodes {
            let node = dir.join(format!("node{id}"));
            put(&node.join("cpulist"), &cpus.to_string())?;
            let total_kb = self.node_memory.get(id).copied().unwrap_or(0) / 1024;
            put(&node.join("meminfo"), &meminfo(*id, total_kb))?;
        }
        Ok(())
    }
}

/// A node `meminfo` in the kernel's layout, with plausible other lines.
fn meminfo(node: u32, total_kb: u64) -> String {
    let free = total_kb / 10 * 9;
    let lines = [
        ("MemTotal:", total_kb),
        ("MemFree:", free),
        ("MemUsed:", total_kb - free),
        ("SwapCached:", 0),
        ("Active:", (total_kb - free) / 2),
        ("Inactive:", (total_kb - free) / 4),
        ("HugePages_Total:", 0),
    ];
    let mut out = String::new();
    for (key, kb) in lines {
        if key.starts_with("HugePages") {
            out.push_str(&format!("Node {node} {key:<16}{kb:>6}\n"));
        } else {
            out.push_str(&format!("Node {node} {key:<16}{kb:>8} kB\n"));
        }
    }
    out
}

/// Writes `value` and a newline to `path`, creating parent directories.
fn put(path: &Path, value: &str) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, format!("{value}\n"))
}

/// A fake sysfs tree in a temporary directory; deleted on drop.
#[derive(Debug)]
pub struct FakeRoot {
    dir: tempfile::TempDir,
}

impl FakeRoot {
    /// The sysfs root to pass to [`read_topology`].
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Reads the tree back.
    pub fn read(&self) -> Result<Topology, TopologyError> {
        read_topology(self.path())
    }
}
