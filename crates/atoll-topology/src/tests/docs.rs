//! docs/topology.md and the code cannot drift: every object's documented key
//! list must equal the keys `serde_json` emits, and the documented example
//! must be exactly what the reader produces for `fixtures::this_machine()`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::read;
use crate::testutils::fixtures;

const DOC: &str = include_str!("../../../../docs/topology.md");

/// The keys listed in the table under the heading "### `<object>`": the
/// first back-quoted cell of each row.
fn documented_keys(object: &str) -> BTreeSet<String> {
    let heading = format!("### `{object}`");
    let start = DOC
        .lines()
        .position(|l| l.starts_with(&heading))
        .unwrap_or_else(|| panic!("docs/topology.md has no heading {heading:?}"));
    let keys: BTreeSet<String> = DOC
        .lines()
        .skip(start + 1)
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let cell = l.strip_prefix('|')?.split('|').next()?.trim();
            Some(cell.strip_prefix('`')?.strip_suffix('`')?.to_string())
        })
        .collect();
    assert!(!keys.is_empty(), "no keys under {heading:?}");
    keys
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

#[test]
fn documented_keys_match_serialized_keys() {
    // The hybrid fixture has every optional field set.
    let t = read(&fixtures::hybrid().write_temp().unwrap());
    let v = serde_json::to_value(&t).unwrap();
    assert_eq!(keys(&v), documented_keys("Topology"), "top level");
    assert_eq!(keys(&v["cpus"]["9"]), documented_keys("Cpu"), "cpu");
    assert_eq!(keys(&v["cores"][0]), documented_keys("Core"), "core");
    assert_eq!(keys(&v["llcs"][0]), documented_keys("Llc"), "llc");
    assert_eq!(
        keys(&v["packages"][0]),
        documented_keys("Package"),
        "package"
    );
    assert_eq!(keys(&v["nodes"][0]), documented_keys("Node"), "node");
    assert_eq!(v["schema_version"], 1);
    assert!(DOC.contains("`schema_version` is **1**"));
}

#[test]
fn documented_example_is_what_the_reader_produces() {
    let marker = "<!-- example: fixtures::this_machine() -->";
    let after = &DOC[DOC.find(marker).expect("example marker") + marker.len()..];
    let body = after
        .split_once("```json\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("a json block after the marker")
        .0;
    let documented: Value = serde_json::from_str(body).expect("example parses");
    let t = read(&fixtures::this_machine().write_temp().unwrap());
    assert_eq!(documented, serde_json::to_value(&t).unwrap());
    let back: atoll_core::topology::Topology = serde_json::from_value(documented).unwrap();
    assert_eq!(back, t);
}
