//! Reading the machine from sysfs.
//!
//! The reader works in two passes. The first reads every online CPU's raw
//! facts (package, core id, sibling list, last-level cache, capacity); the
//! second numbers cores and LLC groups densely in order of their lowest CPU,
//! checks that the groups the kernel described partition the CPUs, and
//! attaches NUMA nodes and core kinds. Sibling and cache lists are clipped to
//! the online CPUs, so an offline sibling never appears in the snapshot.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use atoll_core::topology::{Core, Cpu, Llc, Node, Package, Topology};
use atoll_core::CpuSet;

use crate::error::TopologyError;
use crate::sysfs::{
    inconsistent, malformed, numbered_entries, parse_id, parse_list, parse_node_memtotal,
    parse_size_kib, parse_u32, read_optional, read_required,
};

/// Where sysfs is mounted on a normal system.
pub const DEFAULT_SYSFS_ROOT: &str = "/sys";

/// What one online CPU says about itself.
struct RawCpu {
    id: u32,
    package: u32,
    core_id: u32,
    siblings: CpuSet,
    siblings_path: PathBuf,
    llc: Option<RawCache>,
    capacity: Option<u32>,
}

/// The last-level cache as one CPU sees it.
struct RawCache {
    level: u32,
    size_kib: Option<u64>,
    shared: CpuSet,
    shared_path: PathBuf,
}

/// Reads the machine under `sysfs_root` (normally [`DEFAULT_SYSFS_ROOT`]).
///
/// Files read, relative to the root: `devices/system/cpu/online`; per online
/// CPU `cpuN/online` (optional), `cpuN/topology/{core_cpus_list or
/// thread_siblings_list, physical_package_id, core_id}`,
/// `cpuN/cache/indexK/{level, type, shared_cpu_list, size}` and
/// `cpuN/cpu_capacity` (optional); `devices/system/node/{online,
/// nodeN/cpulist, nodeN/meminfo}` when the node directory exists; and
/// `devices/cpu_<kind>/cpus` for hybrid core kinds. See `docs/topology.md`.
pub fn read_topology(sysfs_root: &Path) -> Result<Topology, TopologyError> {
    let cpu_dir = sysfs_root.join("devices/system/cpu");
    let online_path = cpu_dir.join("online");
    let online_text = read_required(&online_path)?;
    let listed = parse_list(&online_path, &online_text)?;
    if listed.is_empty() {
        return Err(malformed(&online_path, &online_text, "no CPU is online"));
    }

    // First pass: raw facts per CPU. A CPU whose own `online` says 0 went
    // offline after the list was read (hotplug race): skip it too.
    let mut online = listed.clone();
    let mut raws = Vec::new();
    for id in listed.iter() {
        let dir = cpu_dir.join(format!("cpu{id}"));
        let flag_path = dir.join("online");
        match read_optional(&flag_path)?.as_deref() {
            Some("0") => {
                online.remove(id);
                continue;
            }
            Some("1") | None => {}
            Some(other) => return Err(malformed(&flag_path, other, "expected 0 or 1")),
        }
        raws.push(read_cpu(&dir, id)?);
    }
    if online.is_empty() {
        return Err(malformed(
            &online_path,
            &online_text,
            "every listed CPU reports itself offline",
        ));
    }

    let mut topo = Topology::empty();
    let cores = group_cores(&raws, &online)?;
    let llcs = group_llcs(&raws, &online)?;
    let kinds = read_kinds(sysfs_root)?;
    let nodes = read_nodes(sysfs_root, &online)?;

    let mut packages: BTreeMap<u32, CpuSet> = BTreeMap::new();
    for (i, raw) in raws.iter().enumerate() {
        packages.entry(raw.package).or_default().insert(raw.id);
        let node = nodes
            .iter()
            .find(|n| n.cpus.contains(raw.id))
            .map(|n| n.id)
            .unwrap_or(0);
        topo.cpus.insert(
            raw.id,
            Cpu {
                id: raw.id,
                core: cores.of_cpu[i],
                llc: llcs.of_cpu[i],
                node,
                package: raw.package,
                capacity: raw.capacity,
            },
        );
    }
    topo.cores = cores
        .groups
        .into_iter()
        .enumerate()
        .map(|(index, (first, cpus))| {
            let raw = &raws[first];
            let kind = kinds
                .iter()
                .find(|(_, set)| set.contains(raw.id))
                .map(|(k, _)| k.clone());
            Core {
                index,
                core_id: raw.core_id,
                package: raw.package,
                cpus,
                kind,
            }
        })
        .collect();
    topo.llcs = llcs
        .groups
        .into_iter()
        .enumerate()
        .map(|(index, (first, cpus))| {
            let cache = raws[first].llc.as_ref();
            Llc {
                index,
                level: cache.map_or(0, |c| c.level),
                size_kib: cache.and_then(|c| c.size_kib),
                cpus,
            }
        })
        .collect();
    topo.packages = packages
        .into_iter()
        .map(|(id, cpus)| Package { id, cpus })
        .collect();
    topo.nodes = nodes;
    Ok(topo)
}

/// Reads one online CPU's directory.
fn read_cpu(dir: &Path, id: u32) -> Result<RawCpu, TopologyError> {
    let topo_dir = dir.join("topology");
    let mut siblings_path = topo_dir.join("core_cpus_list");
    let text = match read_optional(&siblings_path)? {
        Some(text) => text,
        None => {
            siblings_path = topo_dir.join("thread_siblings_list");
            read_required(&siblings_path)?
        }
    };
    let siblings = parse_list(&siblings_path, &text)?;
    if !siblings.contains(id) {
        return Err(inconsistent(
            &siblings_path,
            &text,
            format!("cpu{id} is not among its own siblings"),
        ));
    }
    let package_path = topo_dir.join("physical_package_id");
    let package = parse_id(&package_path, &read_required(&package_path)?)?.unwrap_or(0);
    let core_id_path = topo_dir.join("core_id");
    let core_id = parse_id(&core_id_path, &read_required(&core_id_path)?)?
        .unwrap_or_else(|| siblings.first().unwrap_or(id));
    let capacity_path = dir.join("cpu_capacity");
    let capacity = read_optional(&capacity_path)?
        .map(|text| parse_u32(&capacity_path, &text))
        .transpose()?;
    let llc = read_llc(&dir.join("cache"), id)?;
    Ok(RawCpu {
        id,
        package,
        core_id,
        siblings,
        siblings_path,
        llc,
        capacity,
    })
}

/// The highest-level data or unified cache of a CPU, if it lists caches.
fn read_llc(cache_dir: &Path, id: u32) -> Result<Option<RawCache>, TopologyError> {
    let Some(indices) = numbered_entries(cache_dir, "index")? else {
        return Ok(None);
    };
    // (level, unified?, dir): the greatest wins, so Unified beats Data at a tie.
    let mut best: Option<(u32, bool, PathBuf)> = None;
    for k in indices {
        let index_dir = cache_dir.join(format!("index{k}"));
        let type_path = index_dir.join("type");
        let unified = match read_required(&type_path)?.as_str() {
            "Unified" => true,
            "Data" => false,
            _ => continue,
        };
        let level_path = index_dir.join("level");
        let level = parse_u32(&level_path, &read_required(&level_path)?)?;
        if best
            .as_ref()
            .is_none_or(|(l, u, _)| (level, unified) > (*l, *u))
        {
            best = Some((level, unified, index_dir));
        }
    }
    let Some((level, _, index_dir)) = best else {
        return Ok(None);
    };
    let shared_path = index_dir.join("shared_cpu_list");
    let text = read_required(&shared_path)?;
    let shared = parse_list(&shared_path, &text)?;
    if !shared.contains(id) {
        return Err(inconsistent(
            &shared_path,
            &text,
            format!("cpu{id} does not share its own cache"),
        ));
    }
    let size_path = index_dir.join("size");
    let size_kib = read_optional(&size_path)?
        .map(|text| parse_size_kib(&size_path, &text))
        .transpose()?;
    Ok(Some(RawCache {
        level,
        size_kib,
        shared,
        shared_path,
    }))
}

/// Dense groups: `groups[i] = (index of its first raw CPU, its CPUs)`, and
/// `of_cpu[r]` the group of raw CPU `r`.
struct Grouping {
    groups: Vec<(usize, CpuSet)>,
    of_cpu: Vec<usize>,
}

/// Groups CPUs by a key set, numbering groups in order of first appearance,
/// then checks the sets partition the CPUs: every CPU's set must list exactly
/// the CPUs that named that same set.
fn group_by(
    raws: &[RawCpu],
    key: impl Fn(&RawCpu) -> (u32, CpuSet),
    source: impl Fn(&RawCpu) -> (PathBuf, String),
    what: &str,
) -> Result<Grouping, TopologyError> {
    let mut index: HashMap<(u32, CpuSet), usize> = HashMap::new();
    let mut grouping = Grouping {
        groups: Vec::new(),
        of_cpu: Vec::with_capacity(raws.len()),
    };
    let mut members: Vec<CpuSet> = Vec::new();
    for (r, raw) in raws.iter().enumerate() {
        let k = key(raw);
        let g = *index.entry(k.clone()).or_insert_with(|| {
            grouping.groups.push((r, k.1.clone()));
            members.push(CpuSet::new());
            grouping.groups.len() - 1
        });
        grouping.of_cpu.push(g);
        members[g].insert(raw.id);
    }
    for (g, (first, cpus)) in grouping.groups.iter().enumerate() {
        if *cpus != members[g] {
            let (path, value) = source(&raws[*first]);
            return Err(inconsistent(
                &path,
                &value,
                format!(
                    "{what} {cpus} is claimed only by CPUs {} (the others disagree)",
                    members[g]
                ),
            ));
        }
    }
    Ok(grouping)
}

/// Cores keyed by (package, online siblings).
fn group_cores(raws: &[RawCpu], online: &CpuSet) -> Result<Grouping, TopologyError> {
    group_by(
        raws,
        |r| (r.package, r.siblings.intersection(online)),
        |r| (r.siblings_path.clone(), r.siblings.to_string()),
        "sibling set",
    )
}

/// LLC groups keyed by online `shared_cpu_list`; CPUs without cache
/// information fall back to one group per package.
fn group_llcs(raws: &[RawCpu], online: &CpuSet) -> Result<Grouping, TopologyError> {
    let mut uncached: BTreeMap<u32, CpuSet> = BTreeMap::new();
    for r in raws.iter().filter(|r| r.llc.is_none()) {
        uncached.entry(r.package).or_default().insert(r.id);
    }
    group_by(
        raws,
        |r| match &r.llc {
            // The key's first field separates real caches (0) from fallbacks (1).
            Some(c) => (0, c.shared.intersection(online)),
            None => (1, uncached[&r.package].clone()),
        },
        |r| match &r.llc {
            Some(c) => (c.shared_path.clone(), c.shared.to_string()),
            None => (PathBuf::from("(no cache directory)"), String::new()),
        },
        "LLC group",
    )
}

/// Core kinds from `devices/cpu_<kind>/cpus` (Intel hybrid: `cpu_core`,
/// `cpu_atom`), sorted by kind name.
fn read_kinds(sysfs_root: &Path) -> Result<Vec<(String, CpuSet)>, TopologyError> {
    let devices = sysfs_root.join("devices");
    let entries = match std::fs::read_dir(&devices) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(TopologyError::Io {
                path: devices,
                source,
            })
        }
    };
    let mut kinds = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(kind) = name.to_str().and_then(|n| n.strip_prefix("cpu_")) else {
            continue;
        };
        if kind.is_empty() {
            continue;
        }
        let path = devices.join(&name).join("cpus");
        if let Some(text) = read_optional(&path)? {
            kinds.push((kind.to_string(), parse_list(&path, &text)?));
        }
    }
    kinds.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(kinds)
}

/// NUMA nodes; without `devices/system/node`, a single node 0 holding every
/// CPU with memory 0 (unknown).
fn read_nodes(sysfs_root: &Path, online: &CpuSet) -> Result<Vec<Node>, TopologyError> {
    let node_dir = sysfs_root.join("devices/system/node");
    if !node_dir.is_dir() {
        return Ok(vec![Node {
            id: 0,
            cpus: online.clone(),
            memory_bytes: 0,
        }]);
    }
    let online_path = node_dir.join("online");
    let online_text = read_required(&online_path)?;
    let ids = parse_list(&online_path, &online_text)?;
    let mut nodes = Vec::new();
    let mut seen = CpuSet::new();
    for id in ids.iter() {
        let dir = node_dir.join(format!("node{id}"));
        let cpulist_path = dir.join("cpulist");
        let text = read_required(&cpulist_path)?;
        let cpus = parse_list(&cpulist_path, &text)?.intersection(online);
        if !cpus.is_disjoint(&seen) {
            return Err(inconsistent(
                &cpulist_path,
                &text,
                format!("CPUs {} are also in another node", cpus.intersection(&seen)),
            ));
        }
        seen = seen.union(&cpus);
        let meminfo_path = dir.join("meminfo");
        let memory_bytes = parse_node_memtotal(&meminfo_path, &read_required(&meminfo_path)?, id)?;
        nodes.push(Node {
            id,
            cpus,
            memory_bytes,
        });
    }
    let homeless = online.difference(&seen);
    if !homeless.is_empty() {
        return Err(inconsistent(
            &online_path,
            &online_text,
            format!("online CPUs {homeless} are in no online node's cpulist"),
        ));
    }
    Ok(nodes)
}
