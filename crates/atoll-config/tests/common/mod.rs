//! Shared helpers for the integration tests.
#![allow(dead_code)]

use atoll_config::{parse, ConfigError};
use atoll_core::spec::PlatformSpec;
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::{CpuSet, Name};

pub const GIB: u64 = 1 << 30;

/// A regular machine.
pub fn shape(packages: u32, nodes: u32, llcs: u32, cores: u32, threads: u32) -> Topology {
    Topology::synthetic(SyntheticShape {
        packages,
        nodes_per_package: nodes,
        llcs_per_node: llcs,
        cores_per_llc: cores,
        threads_per_core: threads,
        memory_per_node: 16 * GIB,
    })
}

/// This build machine: one core, two SMT threads (CPUs 0 and 1).
pub fn smt2() -> Topology {
    shape(1, 1, 1, 1, 2)
}

/// The VM of the VM tests: 8 CPUs, node 0 = 0-3, node 1 = 4-7, no SMT.
pub fn vm8() -> Topology {
    shape(1, 2, 1, 4, 1)
}

/// Two sockets of 8 cores with SMT: node 0 = 0-7,16-23; node 1 = 8-15,24-31.
pub fn two_socket() -> Topology {
    shape(2, 1, 1, 8, 2)
}

/// Four nodes of 8 CPUs (two LLCs each), no SMT.
pub fn four_node() -> Topology {
    shape(2, 2, 2, 4, 1)
}

pub fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

pub fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

pub fn ok(text: &str, topo: &Topology) -> PlatformSpec {
    match parse(text, "test.toml", topo) {
        Ok(spec) => spec,
        Err(e) => panic!("expected a valid config, got:\n{e}\n--- config ---\n{text}"),
    }
}

pub fn err(text: &str, topo: &Topology) -> ConfigError {
    match parse(text, "test.toml", topo) {
        Ok(spec) => panic!("expected an error, got {spec:#?}\n--- config ---\n{text}"),
        Err(e) => e,
    }
}

/// `"LINE:COL KEY"` of every diagnostic (`-` when there is no key).
pub fn where_(e: &ConfigError) -> Vec<String> {
    e.diagnostics
        .iter()
        .map(|d| {
            format!(
                "{}:{} {}",
                d.line,
                d.column,
                d.key.as_deref().unwrap_or("-")
            )
        })
        .collect()
}

/// `(name, cpus, mems)` of every island, printed.
pub fn islands(spec: &PlatformSpec) -> Vec<(String, String, String)> {
    spec.islands
        .iter()
        .map(|i| (i.name.to_string(), i.cpus.to_string(), i.mems.to_string()))
        .collect()
}

pub fn triples(v: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    v.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}
