//! The network island's coordinator driving the actuator: a tune of a
//! unit's bandwidth becomes new class rates on the (fake) interface, and
//! deregistering puts them back.

use atoll_core::coord::{Direction, Message, OverlaySpec, Property, Resource};
use atoll_core::netisland::{Leaf, NetCoordinator, NetIslandSetup, NetUnitSetup, TriggerConfig};
use atoll_core::Name;
use atoll_net::{FakeNet, Interfaces, LeafQdisc, Steering, TcPlan};

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

#[test]
fn a_bandwidth_tune_rewrites_the_class_rates_and_deregister_restores_them() {
    let mut coord = NetCoordinator::new(
        NetIslandSetup {
            name: n("wire"),
            interface: "v0".to_string(),
            rate_bps: 100_000_000,
            default_share: 100,
            units: ["web", "batch"]
                .iter()
                .map(|u| NetUnitSetup {
                    name: n(u),
                    share: 100,
                    ceil_bps: None,
                    prio: 3,
                })
                .collect(),
            triggers: TriggerConfig::default(),
            leaf: Leaf::FqCodel,
            rx_cpus: None,
            tx_cpus: None,
        },
        1.25,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("class/net/v0/queues")).unwrap();
    let mut net = FakeNet::new();
    net.add_iface("v0", "noqueue");
    let mut ifs = Interfaces::new(net, Steering::new(dir.path(), dir.path()));
    ifs.take("v0").unwrap();
    let apply = |ifs: &mut Interfaces<FakeNet>, coord: &NetCoordinator| {
        let plan = TcPlan::from_rates(coord.rate_bps(), LeafQdisc::FqCodel, &coord.rates());
        ifs.apply("v0", &plan).unwrap();
        ifs.backend().plan("v0").unwrap().clone()
    };
    let first = apply(&mut ifs, &coord);
    assert_eq!(first.default_minor, 2);
    let web = |p: &TcPlan| p.classes.iter().find(|c| c.minor == 0x10).unwrap().rate_bps;
    assert_eq!(web(&first), 33_333_333);

    let register = Message::Register {
        overlay: OverlaySpec {
            name: n("lat"),
            priority: 5,
            units: vec![(n("cpu0"), n("web"))],
            property: Property::ThroughputFloor { per_s: 10.0 },
        },
    };
    assert!(coord.handle(&register).is_ack());
    let tune = Message::Tune {
        resource: Resource::Bandwidth,
        dir: Direction::Up,
        overlay: n("lat"),
        unit: n("web"),
    };
    assert_eq!(coord.handle(&tune).changes().len(), 1);
    let tuned = apply(&mut ifs, &coord);
    // 125 of 325.
    assert_eq!(web(&tuned), 38_461_538);
    let back = coord.handle(&Message::Deregister { overlay: n("lat") });
    assert_eq!(back.changes().len(), 1);
    assert_eq!(web(&apply(&mut ifs, &coord)), 33_333_333);
    ifs.restore("v0").unwrap();
}
