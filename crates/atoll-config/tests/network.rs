//! `[network.NAME]`: parsing, defaults, strictness, validation with
//! positions, and the dump's round trip.

mod common;

use std::time::Duration;

use atoll_core::netisland::{Leaf, TriggerConfig};
use common::*;

const BASE: &str = r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit.api]
island = "web"
[unit.db]
island = "web"
"#;

fn with(extra: &str) -> String {
    format!("{BASE}{extra}")
}

const FULL: &str = r#"[network.wire]
interface = "eth1"
rate_mbit = 1000
default_share = 50
leaf = "pfifo"
rx_cpus = "1"
tx_cpus = "0-1"
socket_backlog_bytes = 65536
class_backlog_bytes = 32768
trigger_cooldown_ms = 200
[network.wire.units.db]
share = 20
[network.wire.units.api]
share = 300
ceil_mbit = 800
prio = 0
"#;

#[test]
fn no_section_means_no_network_island() {
    assert!(ok(BASE, &vm8()).network.is_empty());
}

#[test]
fn every_key_is_read_in_its_unit_and_units_come_in_name_order() {
    let spec = ok(&with(FULL), &vm8());
    let net = &spec.network[0];
    assert_eq!(net.name, n("wire"));
    assert_eq!(net.interface, "eth1");
    assert_eq!(net.rate_bps, 1_000_000_000);
    assert_eq!(net.default_share, 50);
    assert_eq!(net.leaf, Leaf::Pfifo);
    assert_eq!(net.rx_cpus, Some(set("1")));
    assert_eq!(net.tx_cpus, Some(set("0-1")));
    assert_eq!(net.triggers.socket_backlog_bytes, Some(65536));
    assert_eq!(net.triggers.class_backlog_bytes, Some(32768));
    assert_eq!(net.triggers.cooldown, Duration::from_millis(200));
    let units: Vec<_> = net
        .units
        .iter()
        .map(|u| (u.name.to_string(), u.share, u.ceil_bps, u.prio))
        .collect();
    assert_eq!(
        units,
        vec![
            ("api".to_string(), 300, Some(800_000_000), 0),
            ("db".to_string(), 20, None, 3),
        ]
    );
}

#[test]
fn what_is_left_out_takes_the_defaults() {
    let spec = ok(
        &with("[network.wire]\ninterface = \"eth1\"\nrate_mbit = 10\n"),
        &vm8(),
    );
    let net = &spec.network[0];
    assert_eq!(net.default_share, 100);
    assert_eq!(net.leaf, Leaf::FqCodel);
    assert_eq!(net.rx_cpus, None);
    assert_eq!(net.triggers, TriggerConfig::default());
    assert!(net.units.is_empty());
}

#[test]
fn unknown_keys_and_bad_values_are_refused_where_they_are() {
    let e = err(
        &with("[network.wire]\ninterface = \"eth1\"\nrate_mbit = 10\nburst = 3\n"),
        &vm8(),
    );
    assert!(e.to_string().contains("burst"), "{e}");
    assert!(
        where_(&e).iter().any(|w| w.starts_with("12:")),
        "{:?}",
        where_(&e)
    );

    let e = err(
        &with("[network.wire]\ninterface = \"eth1\"\nrate_mbit = 10\n[network.wire.units.api]\nshare = 0\n"),
        &vm8(),
    );
    assert!(e.to_string().contains("share 0"), "{e}");
    assert!(
        where_(&e).iter().any(|w| w.starts_with("13:")),
        "{:?}",
        where_(&e)
    );
}

#[test]
fn validation_names_the_value() {
    let cases = [
        // An undeclared unit.
        ("rate_mbit = 10\n[network.wire.units.ghost]\n", "ghost"),
        // A ceiling above the link.
        (
            "rate_mbit = 10\n[network.wire.units.api]\nceil_mbit = 20\n",
            "ceil",
        ),
        // A priority above 7.
        (
            "rate_mbit = 10\n[network.wire.units.api]\nprio = 8\n",
            "prio 8",
        ),
        // No rate.
        ("rate_mbit = 0\n", "rate"),
        // CPUs the machine does not have.
        ("rate_mbit = 10\nrx_cpus = \"64\"\n", "64"),
    ];
    for (body, needle) in cases {
        let text = with(&format!("[network.wire]\ninterface = \"eth1\"\n{body}"));
        let e = err(&text, &vm8());
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
    // The name of a CPU island.
    let e = err(
        &with("[network.web]\ninterface = \"eth1\"\nrate_mbit = 10\n"),
        &vm8(),
    );
    assert!(e.to_string().contains("taken"), "{e}");
    // One island per interface.
    let e = err(
        &with("[network.a]\ninterface = \"eth1\"\nrate_mbit = 10\n[network.b]\ninterface = \"eth1\"\nrate_mbit = 10\n"),
        &vm8(),
    );
    assert!(e.to_string().contains("already"), "{e}");
}

#[test]
fn the_dump_reads_back_as_the_same_spec() {
    let spec = ok(&with(FULL), &vm8());
    let text = atoll_config::to_toml(&spec).unwrap();
    assert!(text.contains("[network.wire.units.api]"), "{text}");
    assert_eq!(ok(&text, &vm8()), spec);
}
