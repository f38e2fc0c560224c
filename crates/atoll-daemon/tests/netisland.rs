//! Network islands in the daemon (issue 17): without an actuator they are
//! named in a status warning and nothing is touched; with one (a fake
//! here), each interface is written at start, logged, and given back at
//! teardown.

mod common;

use std::sync::{Arc, Mutex};

use atoll_core::clock::ManualClock;
use atoll_daemon::netisland::NetIslands;
use atoll_net::{FakeNet, NetBackend, Steering};
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

/// A fake interface `v0` with one receive and one transmit queue.
fn fake_sysfs(root: &std::path::Path) {
    for (q, file) in [("rx-0", "rps_cpus"), ("tx-0", "xps_cpus")] {
        let dir = root.join("class/net/v0/queues").join(q);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), "00000000\n").unwrap();
    }
}

#[test]
fn the_interface_is_written_at_start_logged_and_given_back_at_teardown() {
    let config = CONFIG
        .replace("atlnone0", "v0")
        .replace("rate_mbit = 10\n", "rate_mbit = 10\nrx_cpus = \"1\"\n");
    let spec = atoll_config::parse(&config, "test.toml", &topo8()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    fake_sysfs(dir.path());
    let mut fake = FakeNet::new();
    fake.add_iface("v0", "noqueue");
    let fake = Arc::new(Mutex::new(fake));
    let net = NetIslands::new(
        Box::new(Arc::clone(&fake)),
        Steering::new(dir.path(), dir.path()),
        &spec,
        1.25,
    )
    .unwrap();
    let sim = SimPlatform::new(topo8(), "atoll-netisland2", ManualClock::new());
    let mut c = controller(&sim, spec, topo8());
    c.set_network(net);
    c.start().unwrap();
    let rps = dir.path().join("class/net/v0/queues/rx-0/rps_cpus");
    {
        let f = fake.lock().unwrap();
        let plan = f.plan("v0").expect("the tree is written");
        let rates: Vec<(u16, u64)> = plan.classes.iter().map(|k| (k.minor, k.rate_bps)).collect();
        // Default share 100 and api's 300 of 10 Mbit/s.
        assert_eq!(rates, vec![(2, 2_500_000), (0x10, 7_500_000)]);
    }
    assert_eq!(std::fs::read_to_string(&rps).unwrap(), "00000002");
    let why: Vec<String> = c
        .decisions()
        .query(Some("wire"), 100)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        why.iter()
            .any(|d| d.contains("HTB tree") && d.contains("1:10 (api)")),
        "{why:?}"
    );
    assert!(why.iter().any(|d| d.contains("rx CPUs 1")), "{why:?}");

    c.teardown().unwrap();
    let f = fake.lock().unwrap();
    assert_eq!(f.plan("v0"), None);
    drop(f);
    let root = fake.lock().unwrap().root_qdisc("v0").unwrap();
    assert_eq!(
        (root.kind.as_str(), root.handle.as_str()),
        ("noqueue", "0:")
    );
    assert_eq!(std::fs::read_to_string(&rps).unwrap(), "00000000");
    let why: Vec<String> = c
        .decisions()
        .query(Some("v0"), 100)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        why.iter().any(|d| d.contains("restored as found")),
        "{why:?}"
    );
}

#[test]
fn an_interface_that_cannot_be_taken_is_a_warning_and_the_rest_starts() {
    let spec = atoll_config::parse(CONFIG, "test.toml", &topo8()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // No interface atlnone0 in the fake.
    let net = NetIslands::new(
        Box::new(FakeNet::new()),
        Steering::new(dir.path(), dir.path()),
        &spec,
        1.25,
    )
    .unwrap();
    let sim = SimPlatform::new(topo8(), "atoll-netisland3", ManualClock::new());
    let mut c = controller(&sim, spec, topo8());
    c.set_network(net);
    c.start().unwrap();
    let Reply::Status(status) = reply(ask(&mut c, ROOT, Request::Status {})) else {
        panic!("not a status")
    };
    assert!(
        status
            .warnings
            .iter()
            .any(|w| w.contains("no interface atlnone0")),
        "{:?}",
        status.warnings
    );
    c.teardown().unwrap();
}
