//! The human-readable summary printed by `atoll topology`.
//!
//! One headline, then one section per kind of object: packages, NUMA nodes
//! (with memory), LLC groups, core kinds and CPU capacities when the machine
//! has any, and finally every core with its SMT siblings. CPU sets are printed
//! in the kernel's list format so they can be pasted into a config file.

use std::collections::BTreeMap;
use std::fmt::Write;

use atoll_core::topology::{Core, Topology};
use atoll_core::CpuSet;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// Renders `t` as a multi-line text summary (ends with a newline).
pub fn render_text(t: &Topology) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_all(&mut out, t);
    out
}

fn write_all(out: &mut String, t: &Topology) -> std::fmt::Result {
    let max_threads = t.cores.iter().map(|c| c.cpus.len()).max().unwrap_or(0);
    let smt = if max_threads > 1 {
        format!("SMT on (up to {max_threads} threads per core)")
    } else {
        "SMT off".to_string()
    };
    let total_memory: u64 = t.nodes.iter().map(|n| n.memory_bytes).sum();
    writeln!(
        out,
        "Machine: {} online ({}), {}, {smt}, {}, {}, {}, memory {}",
        plural(t.cpus.len(), "CPU"),
        t.online(),
        plural(t.cores.len(), "core"),
        plural(t.packages.len(), "package"),
        plural(t.nodes.len(), "NUMA node"),
        plural(t.llcs.len(), "LLC group"),
        fmt_bytes(total_memory),
    )?;

    writeln!(out, "Packages:")?;
    for p in &t.packages {
        writeln!(out, "  package {}: {}", p.id, cpus(&p.cpus))?;
    }

    writeln!(out, "NUMA nodes:")?;
    for n in &t.nodes {
        writeln!(
            out,
            "  node {}: {}, memory {}",
            n.id,
            cpus(&n.cpus),
            fmt_bytes(n.memory_bytes)
        )?;
    }

    writeln!(out, "LLC groups:")?;
    for l in &t.llcs {
        let level = match l.level {
            0 => "no cache info".to_string(),
            n => format!("L{n}"),
        };
        let size = l.size_kib.map(|k| format!(" {}", fmt_kib(k)));
        writeln!(
            out,
            "  llc {}: {level}{}, {}",
            l.index,
            size.unwrap_or_default(),
            cpus(&l.cpus)
        )?;
    }

    let mut kinds: BTreeMap<&str, (usize, CpuSet)> = BTreeMap::new();
    for c in &t.cores {
        if let Some(k) = &c.kind {
            let entry = kinds.entry(k).or_default();
            entry.0 += 1;
            entry.1 = entry.1.union(&c.cpus);
        }
    }
    if !kinds.is_empty() {
        writeln!(out, "Core kinds:")?;
        for (kind, (n, set)) in &kinds {
            writeln!(out, "  {kind}: {}, {}", plural(*n, "core"), cpus(set))?;
        }
    }

    let mut capacities: BTreeMap<u32, CpuSet> = BTreeMap::new();
    for c in t.cpus.values() {
        if let Some(cap) = c.capacity {
            capacities.entry(cap).or_default().insert(c.id);
        }
    }
    if !capacities.is_empty() {
        writeln!(out, "CPU capacity:")?;
        for (cap, set) in capacities.iter().rev() {
            writeln!(out, "  {cap}: {}", cpus(set))?;
        }
    }

    writeln!(out, "Cores:")?;
    for c in &t.cores {
        writeln!(out, "  {}", core_line(t, c))?;
    }
    Ok(())
}

fn core_line(t: &Topology, c: &Core) -> String {
    let mut line = format!(
        "core {}: package {}, core_id {}",
        c.index, c.package, c.core_id
    );
    if let Some(kind) = &c.kind {
        line.push_str(&format!(", kind {kind}"));
    }
    let caps: Vec<u32> = c
        .cpus
        .iter()
        .filter_map(|id| t.cpus.get(&id).and_then(|cpu| cpu.capacity))
        .collect();
    if let Some(first) = caps.first() {
        if caps.iter().all(|c| c == first) {
            line.push_str(&format!(", capacity {first}"));
        } else {
            let list: Vec<String> = caps.iter().map(u32::to_string).collect();
            line.push_str(&format!(", capacities {}", list.join("/")));
        }
    }
    let label = if c.cpus.len() > 1 { "siblings" } else { "CPU" };
    line.push_str(&format!(", {label} {}", c.cpus));
    line
}

fn cpus(set: &CpuSet) -> String {
    format!("{} {set}", plural(set.len(), "CPU"))
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Bytes as GiB with one decimal, else whole MiB or KiB; 0 is "unknown".
fn fmt_bytes(b: u64) -> String {
    if b == 0 {
        "unknown".to_string()
    } else if b >= GIB {
        format!("{:.1} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{} MiB", b / MIB)
    } else {
        format!("{} KiB", b / KIB)
    }
}

/// A cache size in KiB as MiB (whole when exact) or KiB.
fn fmt_kib(kib: u64) -> String {
    if kib >= 1024 && kib % 1024 == 0 {
        format!("{} MiB", kib / 1024)
    } else if kib >= 1024 {
        format!("{:.2} MiB", kib as f64 / 1024.0)
    } else {
        format!("{kib} KiB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_sizes() {
        assert_eq!(fmt_bytes(0), "unknown");
        assert_eq!(fmt_bytes(512 * KIB), "512 KiB");
        assert_eq!(fmt_bytes(300 * MIB + 5), "300 MiB");
        assert_eq!(fmt_bytes(3 * GIB / 2), "1.5 GiB");
        assert_eq!(fmt_kib(32768), "32 MiB");
        assert_eq!(fmt_kib(1280), "1.25 MiB");
        assert_eq!(fmt_kib(48), "48 KiB");
    }
}
