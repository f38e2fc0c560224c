//! Helpers shared by the fuzz targets: the fixed machine of the config
//! target, the state file's envelope, and a JSON comparison that tolerates
//! the last bit of a float.

use std::sync::OnceLock;

use atoll_core::topology::{SyntheticShape, Topology};
use serde_json::Value;

/// The machine of the VM tests and `examples/vm-8cpu.toml` (and of most
/// atoll-config tests): one package, two NUMA nodes of four CPUs each
/// (node 0 = CPUs 0-3, node 1 = CPUs 4-7), no SMT, 16 GiB per node.
pub fn vm8() -> Topology {
    Topology::synthetic(SyntheticShape {
        packages: 1,
        nodes_per_package: 2,
        llcs_per_node: 1,
        cores_per_llc: 4,
        threads_per_core: 1,
        memory_per_node: 16 << 30,
    })
}

/// The state file text for the state JSON `state`, with its checksum: the
/// envelope `atoll_daemon::state::save` writes.
pub fn state_envelope(state: &str) -> String {
    format!(
        "{{\"format\":2,\"crc32\":\"{:08x}\",\"state\":{state}}}\n",
        crc32fast::hash(state.as_bytes())
    )
}

/// Whether two JSON values are equal, floats within a relative 1e-12:
/// serde_json's default float parser may be off by one unit in the last
/// place after a print/parse round trip, which is not a parser bug.
pub fn json_close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x == y {
                return true;
            }
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_close(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_close(v, w)))
        }
        _ => a == b,
    }
}

/// Whether `ATOLL_FUZZ_VERBOSE` is set: the targets then print what each
/// input parsed to (for checking that seeds are accepted, e.g.
/// `ATOLL_FUZZ_VERBOSE=1 fuzz/target/.../config fuzz/seeds/config/*`).
pub fn verbose() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("ATOLL_FUZZ_VERBOSE").is_some())
}
