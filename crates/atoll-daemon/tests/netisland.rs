//! Network islands in the daemon (issue 17): configured ones are named in
//! a status warning, and no interface is touched, until the daemon manages
//! them (docs/netisland.md, "Not done yet").

mod common;

use atoll_core::clock::ManualClock;
use atoll_proto::{Reply, Request};
use atoll_sim::SimPlatform;

use crate::common::sim::{ask, controller, reply, topo8, ROOT};

const CONFIG: &str = r#"
[host]
cpus = "0"

[island.work]
cpus = "1-7"

[unit.api]
island = "work"

[network.wire]
interface = "atlnone0"
rate_mbit = 10

[network.wire.units.api]
share = 300
"#;

#[test]
fn configured_network_islands_are_named_in_a_warning_and_nothing_else_happens() {
    let spec = atoll_config::parse(CONFIG, "test.toml", &topo8()).unwrap();
    assert_eq!(spec.network.len(), 1);
    let sim = SimPlatform::new(topo8(), "atoll-netisland", ManualClock::new());
    let mut c = controller(&sim, spec, topo8());
    c.start().unwrap();
    let Reply::Status(status) = reply(ask(&mut c, ROOT, Request::Status {})) else {
        panic!("not a status")
    };
    assert!(
        status
            .warnings
            .iter()
            .any(|w| w.contains("wire (atlnone0)") && w.contains("left as they are")),
        "{:?}",
        status.warnings
    );
    c.teardown().unwrap();
}
