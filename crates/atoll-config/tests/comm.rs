//! `[comm]`: parsing, defaults, strictness, validation with positions, and
//! the summary.

mod common;

use std::time::Duration;

use atoll_config::summary;
use atoll_core::comm::{CommSpec, Mechanism};
use common::*;

const BASE: &str = r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit.front]
island = "web"
[unit.back]
island = "web"
[unit.hog]
island = "web"
"#;

fn with(extra: &str) -> String {
    format!("{BASE}{extra}")
}

#[test]
fn no_section_means_off_and_an_empty_one_means_the_defaults() {
    assert_eq!(ok(BASE, &vm8()).comm, None);
    let spec = ok(&with("[comm]\n"), &vm8());
    assert_eq!(spec.comm, Some(CommSpec::default()));
}

#[test]
fn every_key_is_read_in_its_unit() {
    let spec = ok(
        &with(
            r#"[comm]
recipient = true
anticipate = true
netpath = ["front"]
mechanism = "weight"
period_ms = 50
boost_slice_us = 250
boost_weight = 4
max_boosted = 3
units = ["front", "back"]
"#,
        ),
        &vm8(),
    );
    let c = spec.comm.unwrap();
    assert!(c.recipient && c.anticipate);
    assert_eq!(c.netpath, vec![n("front")]);
    assert_eq!(c.mechanism, Mechanism::Weight);
    assert_eq!(c.period, Duration::from_millis(50));
    assert_eq!(c.boost_slice, Duration::from_micros(250));
    assert_eq!(c.boost_weight, 4);
    assert_eq!(c.max_boosted, 3);
    assert_eq!(c.units, Some(vec![n("front"), n("back")]));
}

#[test]
fn unknown_keys_and_bad_values_are_refused_where_they_are() {
    let e = err(&with("[comm]\nrecipient = true\nboost = 3\n"), &vm8());
    let text = e.to_string();
    assert!(text.contains("boost"), "{text}");
    assert!(
        where_(&e).iter().any(|w| w.starts_with("13:")),
        "{:?}",
        where_(&e)
    );

    let e = err(&with("[comm]\nmechanism = \"fast\"\n"), &vm8());
    assert!(e.to_string().contains("fast"), "{e}");
    assert!(
        where_(&e).iter().any(|w| w.starts_with("12:")),
        "{:?}",
        where_(&e)
    );
}

#[test]
fn ranges_and_unit_names_are_checked_at_their_keys() {
    let e = err(&with("[comm]\nperiod_ms = 5\n"), &vm8());
    let text = e.to_string();
    assert!(text.contains("comm.period_ms"), "{text}");
    assert!(
        where_(&e).iter().any(|w| w.starts_with("12:")),
        "{:?}",
        where_(&e)
    );

    let e = err(&with("[comm]\nboost_weight = 0\n"), &vm8());
    assert!(e.to_string().contains("boost_weight"), "{e}");

    let e = err(
        &with("[comm]\nrecipient = true\nnetpath = [\"proxy\"]\n"),
        &vm8(),
    );
    let text = e.to_string();
    assert!(
        text.contains("proxy") && text.contains("not declared"),
        "{text}"
    );
    assert!(
        where_(&e).iter().any(|w| w.starts_with("13:")),
        "{:?}",
        where_(&e)
    );

    let e = err(&with("[comm]\nunits = [\"front\", \"front\"]\n"), &vm8());
    assert!(e.to_string().contains("twice"), "{e}");
}

#[test]
fn the_summary_names_features_and_mechanism() {
    let spec = ok(
        &with("[comm]\nrecipient = true\nnetpath = [\"front\"]\nmechanism = \"slice\"\n"),
        &vm8(),
    );
    let text = summary(&spec);
    let line = text.lines().find(|l| l.starts_with("comm: ")).expect(&text);
    assert!(line.contains("recipient"), "{line}");
    assert!(line.contains("netpath front"), "{line}");
    assert!(line.contains("slice 100us"), "{line}");
    assert!(!line.contains("anticipate"), "{line}");
}
