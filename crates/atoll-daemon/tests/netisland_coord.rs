//! Network islands in coordination (issue 17): `tune bandwidth` from the
//! API reaches the network island's coordinator and rewrites the class
//! rates on the (fake) interface; its nacks come back to the caller; an
//! overlay naming a unit with a class is registered there and its
//! deregistration puts the rates back; a class backlog over its threshold
//! boosts the unit in its CPU island.

mod common;

use std::sync::{Arc, Mutex};

use atoll_core::clock::ManualClock;
use atoll_core::coord::{Direction, Message, Resource};
use atoll_core::plan::GroupPath;
use atoll_daemon::controller::Controller;
use atoll_daemon::netisland::NetIslands;
use atoll_net::{FakeNet, Steering};
use atoll_proto::{Reply, Request};
use atoll_sim::SimPlatform;

use crate::common::sim::{ask, controller, epochs, n, reply, topo8, ROOT};

const CONFIG: &str = r#"
[host]
cpus = "0"

[island.work]
cpus = "1-7"

[unit.api]
island = "work"

[unit.db]
island = "work"

[overlay.shop]
units = ["api"]
throughput_floor = 10

[network.wire]
interface = "v0"
rate_mbit = 10
class_backlog_bytes = 4096

[network.wire.units.api]
share = 300
"#;

struct Rig {
    sim: SimPlatform,
    c: Controller,
    fake: Arc<Mutex<FakeNet>>,
    _dir: tempfile::TempDir,
}

fn rig(name: &str, config: &str) -> Rig {
    rig_with(
        name,
        atoll_config::parse(config, "test.toml", &topo8()).unwrap(),
    )
}

fn rig_with(name: &str, spec: atoll_core::spec::PlatformSpec) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("class/net/v0/queues")).unwrap();
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
    let sim = SimPlatform::new(topo8(), name, ManualClock::new());
    let mut c = controller(&sim, spec, topo8());
    c.set_network(net);
    c.start().unwrap();
    Rig {
        sim,
        c,
        fake,
        _dir: dir,
    }
}

/// The api class's (1:10) rate on the fake interface.
fn api_rate(fake: &Arc<Mutex<FakeNet>>) -> u64 {
    let f = fake.lock().unwrap();
    let plan = f.plan("v0").expect("the tree is written");
    plan.classes
        .iter()
        .find(|k| k.minor == 0x10)
        .expect("a class for api")
        .rate_bps
}

fn coordinate(c: &mut Controller, message: Message) -> (bool, String) {
    let Reply::Coordinated { reply: r, text } = reply(ask(
        c,
        ROOT,
        Request::Coordinate {
            from: None,
            message,
        },
    )) else {
        panic!("not a coordination reply")
    };
    (r.is_ack(), text)
}

fn tune(overlay: &str, unit: &str, dir: Direction) -> Message {
    Message::Tune {
        resource: Resource::Bandwidth,
        dir,
        overlay: n(overlay),
        unit: n(unit),
    }
}

fn why(c: &Controller, key: &str) -> Vec<String> {
    c.decisions()
        .query(Some(key), 200)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_bandwidth_tune_from_the_api_rewrites_the_class_rates_with_a_decision() {
    let mut r = rig("atoll-netcoord1", CONFIG);
    // Default share 100 and api's 300 of 10 Mbit/s.
    assert_eq!(api_rate(&r.fake), 7_500_000);
    let (ack, text) = coordinate(&mut r.c, tune("shop", "api", Direction::Up));
    assert!(ack, "{text}");
    assert!(text.contains("bandwidth share of unit api"), "{text}");
    // 375 of 475.
    assert_eq!(api_rate(&r.fake), 7_894_736);
    let log = why(&r.c, "wire");
    assert!(
        log.iter()
            .any(|d| d.contains("unit api bandwidth share 375") && d.contains("shop")),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|d| d.contains("HTB tree") && d.contains("rate 7894736")),
        "{log:?}"
    );
    let (ack, _) = coordinate(&mut r.c, tune("shop", "api", Direction::Down));
    assert!(ack);
    assert_eq!(api_rate(&r.fake), 7_500_000);
    r.c.teardown().unwrap();
    assert_eq!(r.fake.lock().unwrap().plan("v0"), None);
}

#[test]
fn nacks_of_the_network_island_come_back_to_the_caller_and_change_nothing() {
    let mut r = rig("atoll-netcoord2", CONFIG);
    // db has no class on the link.
    let (ack, text) = coordinate(&mut r.c, tune("shop", "db", Direction::Up));
    assert!(!ack, "{text}");
    assert!(text.contains("db"), "{text}");
    // An overlay that is not registered.
    let (ack, text) = coordinate(&mut r.c, tune("other", "api", Direction::Up));
    assert!(!ack, "{text}");
    assert!(text.contains("other"), "{text}");
    assert_eq!(api_rate(&r.fake), 7_500_000);
    // At the floor: share 1 cannot go down.
    for _ in 0..40 {
        if !coordinate(&mut r.c, tune("shop", "api", Direction::Down)).0 {
            break;
        }
    }
    let (ack, text) = coordinate(&mut r.c, tune("shop", "api", Direction::Down));
    assert!(!ack, "{text}");
    assert!(text.contains("minimum"), "{text}");
    r.c.teardown().unwrap();
}

#[test]
fn deregistering_the_overlay_puts_the_shares_back_and_rates_follow() {
    let mut r = rig("atoll-netcoord3", CONFIG);
    for _ in 0..3 {
        assert!(coordinate(&mut r.c, tune("shop", "api", Direction::Up)).0);
    }
    assert_ne!(api_rate(&r.fake), 7_500_000);
    let (ack, text) = coordinate(&mut r.c, Message::Deregister { overlay: n("shop") });
    assert!(ack, "{text}");
    assert_eq!(api_rate(&r.fake), 7_500_000);
    // No longer registered on the network island either.
    let (ack, text) = coordinate(&mut r.c, tune("shop", "api", Direction::Up));
    assert!(!ack, "{text}");
    r.c.teardown().unwrap();
}

#[test]
fn a_class_backlog_over_its_threshold_boosts_the_unit_in_its_cpu_island() {
    let mut r = rig("atoll-netcoord4", CONFIG);
    let weight = |sim: &SimPlatform| {
        sim.settings(&GroupPath::from_relative("work/api"))
            .and_then(|s| s.cpu_weight)
    };
    epochs(&r.sim, &mut r.c, 1);
    let before = weight(&r.sim);
    // Below the threshold: nothing.
    r.fake.lock().unwrap().set_backlog("v0", 0x10, 4095, 3);
    epochs(&r.sim, &mut r.c, 1);
    assert_eq!(weight(&r.sim), before);
    assert!(!why(&r.c, "api").iter().any(|d| d.contains("traffic class")));
    r.fake.lock().unwrap().set_backlog("v0", 0x10, 9000, 6);
    epochs(&r.sim, &mut r.c, 1);
    let after = weight(&r.sim);
    assert!(
        after > before && after.is_some(),
        "boost: {before:?} -> {after:?}"
    );
    let log = why(&r.c, "api");
    assert!(
        log.iter().any(|d| d.contains("network island wire")
            && d.contains("9000 bytes wait in its traffic class (threshold 4096)")),
        "{log:?}"
    );
    r.c.teardown().unwrap();
}

#[test]
fn the_status_and_metrics_show_each_class_with_its_rate_share_and_figures() {
    let mut r = rig("atoll-netcoord5", CONFIG);
    {
        let mut f = r.fake.lock().unwrap();
        f.set_backlog("v0", 0x10, 1500, 1);
    }
    epochs(&r.sim, &mut r.c, 1);
    assert!(coordinate(&mut r.c, tune("shop", "api", Direction::Up)).0);
    let Reply::Status(status) = reply(ask(&mut r.c, ROOT, Request::Status {})) else {
        panic!("not a status")
    };
    assert_eq!(status.network.len(), 1);
    let wire = &status.network[0];
    assert_eq!(
        (wire.island.as_str(), wire.interface.as_str()),
        ("wire", "v0")
    );
    assert!(wire.managed);
    assert_eq!(wire.rate_bps, 10_000_000);
    let api = wire
        .classes
        .iter()
        .find(|c| c.unit.as_deref() == Some("api"))
        .expect("api's class");
    assert_eq!(
        (api.class.as_str(), api.share, api.rate_bps),
        ("1:10", 375, 7_894_736)
    );
    let stats = api.stats.expect("figures read in the epoch");
    assert_eq!((stats.backlog_bytes, stats.backlog_packets), (1500, 1));
    let default = &wire.classes[0];
    assert_eq!((default.unit.as_deref(), default.share), (None, 100));
    // The JSON form carries it too.
    let json = serde_json::to_string(&status).unwrap();
    assert!(json.contains("\"network\""), "{json}");
    let text = atoll_daemon::metrics::render(&status, &Default::default());
    assert!(
        text.contains(
            "atoll_net_class_backlog_packets{island=\"wire\",interface=\"v0\",class=\"1:10\",unit=\"api\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("atoll_net_class_rate_bits{island=\"wire\",interface=\"v0\",class=\"1:10\",unit=\"api\"} 7894736"),
        "{text}"
    );
    r.c.teardown().unwrap();
}

#[test]
fn a_bandwidth_tune_is_refused_like_a_cpu_tune_when_coordination_is_off() {
    let mut spec = atoll_config::parse(CONFIG, "test.toml", &topo8()).unwrap();
    // Two islands sharing CPU 7: the platform manager cannot be built, so
    // coordination is off (a configuration file could not say this).
    let mut extra = spec.islands[0].clone();
    extra.name = n("extra");
    extra.cpus = atoll_core::CpuSet::parse("7").unwrap();
    spec.islands.push(extra);
    let mut r = rig_with("atoll-netcoord-off", spec);
    let before = api_rate(&r.fake);
    for resource in [Resource::Bandwidth, Resource::CpuTime] {
        let env = ask(
            &mut r.c,
            ROOT,
            Request::Coordinate {
                from: None,
                message: Message::Tune {
                    resource,
                    dir: Direction::Up,
                    overlay: n("shop"),
                    unit: n("api"),
                },
            },
        );
        let err = env.err.expect("refused");
        assert!(
            err.message.contains("coordination is off"),
            "{resource:?}: {}",
            err.message
        );
    }
    assert_eq!(api_rate(&r.fake), before);
    r.c.teardown().unwrap();
}
