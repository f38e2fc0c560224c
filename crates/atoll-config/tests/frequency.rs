//! `[island.NAME.frequency]`: parsing, strictness with positions, the
//! machine-free checks, and the dump's round trip.

mod common;

use atoll_core::power::FreqPolicy;
use common::*;

const BASE: &str = r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[island.batch]
cpus = "4-7"
"#;

#[test]
fn no_table_means_no_policy() {
    assert!(ok(BASE, &vm8()).frequency.is_empty());
}

#[test]
fn a_table_and_an_inline_table_are_read_per_island() {
    let text =
        format!("{BASE}[island.web.frequency]\ngovernor = \"performance\"\nmin_khz = 2000000\n");
    let spec = ok(&text, &vm8());
    assert_eq!(spec.frequency.len(), 1);
    assert_eq!(
        spec.frequency[&n("web")],
        FreqPolicy {
            governor: Some("performance".into()),
            min_khz: Some(2_000_000),
            max_khz: None,
        }
    );
    let text = BASE.replace(
        "cpus = \"4-7\"",
        "cpus = \"4-7\"\nfrequency = { max_khz = 1200000 }",
    );
    let spec = ok(&text, &vm8());
    assert_eq!(spec.frequency[&n("batch")].max_khz, Some(1_200_000));
    assert!(!spec.frequency.contains_key(&n("web")));
}

#[test]
fn unknown_keys_and_bad_values_are_refused_at_their_line() {
    // Line 8: the misspelt key.
    let text = format!("{BASE}[island.web.frequency]\nmax_khz = 1\ngovernr = \"x\"\n");
    let e = err(&text, &vm8());
    assert!(e.to_string().contains("governr"), "{e}");
    assert!(
        where_(&e).iter().any(|w| w.starts_with("9:")),
        "{:?}",
        where_(&e)
    );
    let text = format!("{BASE}[island.web.frequency]\nmin_khz = -5\n");
    let e = err(&text, &vm8());
    assert!(
        where_(&e).iter().any(|w| w.starts_with("8:")),
        "{:?}",
        where_(&e)
    );
    // min above max: at the island's frequency table, with both values.
    let text = format!("{BASE}[island.web.frequency]\nmin_khz = 3000000\nmax_khz = 1000000\n");
    let e = err(&text, &vm8());
    assert!(
        e.to_string()
            .contains("min_khz = 3000000 is above max_khz = 1000000"),
        "{e}"
    );
    assert!(
        e.diagnostics
            .iter()
            .any(|d| d.key.as_deref() == Some("island.web.frequency.min_khz") && d.line == 8),
        "{:?}",
        where_(&e)
    );
}

#[test]
fn the_dump_writes_the_policy_back() {
    let text = format!(
        "{BASE}[island.web.frequency]\ngovernor = \"powersave\"\nmin_khz = 800000\nmax_khz = 1200000\n[island.batch.frequency]\n"
    );
    let spec = ok(&text, &vm8());
    assert_eq!(spec.frequency[&n("batch")], FreqPolicy::default());
    let dumped = atoll_config::to_toml(&spec).unwrap();
    assert!(dumped.contains("[island.web.frequency]"), "{dumped}");
    assert_eq!(ok(&dumped, &vm8()), spec);
}
