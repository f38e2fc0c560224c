use std::time::Duration;

use super::*;
use crate::coord::{Direction, Message, NackReason, OverlaySpec, Property, Resource, Why};

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn unit(name: &str, share: u32) -> NetUnitSetup {
    NetUnitSetup {
        name: n(name),
        share,
        ceil_bps: None,
        prio: 3,
    }
}

fn setup() -> NetIslandSetup {
    NetIslandSetup {
        name: n("wire"),
        interface: "eth9".to_string(),
        rate_bps: 1_000_000_000,
        default_share: 100,
        units: vec![unit("web", 300), unit("batch", 100)],
        triggers: TriggerConfig {
            socket_backlog_bytes: Some(64 * 1024),
            class_backlog_bytes: Some(32 * 1024),
            cooldown: Duration::from_millis(100),
        },
        leaf: Leaf::FqCodel,
        rx_cpus: None,
        tx_cpus: None,
    }
}

fn coordinator() -> NetCoordinator {
    NetCoordinator::new(setup(), 1.25).unwrap()
}

fn overlay(name: &str, units: &[&str]) -> Message {
    let property = Property::ThroughputFloor { per_s: 100.0 };
    Message::Register {
        overlay: OverlaySpec {
            name: n(name),
            priority: 5,
            units: units.iter().map(|u| (n("cpu0"), n(u))).collect(),
            property,
        },
    }
}

fn tune(dir: Direction, unit: &str) -> Message {
    Message::Tune {
        resource: Resource::Bandwidth,
        dir,
        overlay: n("lat"),
        unit: n(unit),
    }
}

#[test]
fn shares_become_rates_that_sum_to_at_most_the_link() {
    let c = coordinator();
    let rates = c.rates();
    assert_eq!(rates.len(), 3);
    assert_eq!(rates[0].unit, None);
    assert_eq!(rates[0].minor, DEFAULT_MINOR);
    assert_eq!(rates[0].rate_bps, 200_000_000);
    assert_eq!(rates[1].unit, Some(n("web")));
    assert_eq!(rates[1].minor, FIRST_UNIT_MINOR);
    assert_eq!(rates[1].rate_bps, 600_000_000);
    assert_eq!(rates[2].rate_bps, 200_000_000);
    assert!(rates.iter().all(|r| r.ceil_bps == 1_000_000_000));
    assert_eq!(c.classid(&n("batch")), Some(0x0001_0011));
}

#[test]
fn a_ceiling_bounds_the_rate_and_odd_shares_round_down() {
    let inputs = [
        ClassInput {
            unit: None,
            minor: 2,
            share: 1,
            ceil_bps: None,
            prio: 7,
        },
        ClassInput {
            unit: None,
            minor: 3,
            share: 2,
            ceil_bps: Some(10),
            prio: 0,
        },
    ];
    let r = class_rates(100, &inputs);
    assert_eq!((r[0].rate_bps, r[0].ceil_bps), (33, 100));
    assert_eq!((r[1].rate_bps, r[1].ceil_bps), (10, 10));
}

#[test]
fn tune_bandwidth_moves_the_share_and_every_rate_follows() {
    let mut c = coordinator();
    assert!(c.handle(&overlay("lat", &["web"])).is_ack());
    let reply = c.handle(&tune(Direction::Up, "web"));
    assert_eq!(reply.changes().len(), 1);
    let ch = &reply.changes()[0];
    assert_eq!((ch.unit.as_str(), ch.share), ("web", 375));
    assert_eq!(
        ch.why,
        Why::Tune {
            overlay: n("lat"),
            resource: Resource::Bandwidth,
            dir: Direction::Up
        }
    );
    let rates = c.rates();
    // 375 of 575.
    assert_eq!(rates[1].rate_bps, 652_173_913);
    assert!(rates[0].rate_bps < 200_000_000);
    let down = c.handle(&tune(Direction::Down, "web"));
    assert_eq!(down.changes()[0].share, 300);
}

#[test]
fn tune_refuses_at_the_limits_units_of_no_overlay_and_other_resources() {
    let mut c = coordinator();
    // Not registered.
    assert!(matches!(
        c.handle(&tune(Direction::Up, "web")),
        NetReply::Nack {
            reason: NackReason::NotRegistered { .. }
        }
    ));
    c.handle(&overlay("lat", &["web"]));
    // batch is not the overlay's.
    assert!(matches!(
        c.handle(&tune(Direction::Up, "batch")),
        NetReply::Nack {
            reason: NackReason::UnknownUnit { .. }
        }
    ));
    for _ in 0..60 {
        c.handle(&tune(Direction::Up, "web"));
    }
    assert_eq!(c.share(&n("web")), Some(10_000));
    assert!(matches!(
        c.handle(&tune(Direction::Up, "web")),
        NetReply::Nack {
            reason: NackReason::AtCapacity {
                resource: Resource::Bandwidth,
                ..
            }
        }
    ));
    for _ in 0..80 {
        c.handle(&tune(Direction::Down, "web"));
    }
    assert_eq!(c.share(&n("web")), Some(1));
    assert!(matches!(
        c.handle(&tune(Direction::Down, "web")),
        NetReply::Nack {
            reason: NackReason::AtMinimum { .. }
        }
    ));
    let cpu = Message::Tune {
        resource: Resource::CpuTime,
        dir: Direction::Up,
        overlay: n("lat"),
        unit: n("web"),
    };
    assert!(matches!(
        c.handle(&cpu),
        NetReply::Nack {
            reason: NackReason::Unsupported { .. }
        }
    ));
    assert!(c.handle(&Message::Null).is_ack());
}

#[test]
fn deregister_puts_the_shares_back_and_a_unit_belongs_to_one_overlay() {
    let mut c = coordinator();
    c.handle(&overlay("lat", &["web"]));
    assert!(matches!(
        c.handle(&overlay("other", &["web", "batch"])),
        NetReply::Nack {
            reason: NackReason::UnitTaken { .. }
        }
    ));
    // Nothing of the refused overlay was recorded.
    assert_eq!(c.overlays().count(), 1);
    c.handle(&tune(Direction::Up, "web"));
    let reply = c.handle(&Message::Deregister { overlay: n("lat") });
    assert_eq!(reply.changes().len(), 1);
    assert_eq!(reply.changes()[0].share, 300);
    assert_eq!(c.share(&n("web")), Some(300));
    assert_eq!(c.overlays().count(), 0);
    // An overlay with no unit here is acknowledged, not recorded.
    assert!(c.handle(&overlay("cpu-only", &["elsewhere"])).is_ack());
    assert_eq!(c.overlays().count(), 0);
}

fn sample(unit: &str, socket: u64, class: u64) -> NetSample {
    NetSample {
        unit: n(unit),
        socket_backlog_bytes: socket,
        class_backlog_bytes: class,
    }
}

#[test]
fn a_backlog_over_its_threshold_triggers_the_units_cpu_island_once_per_cooldown() {
    let mut c = coordinator();
    c.handle(&overlay("lat", &["web", "batch"]));
    let t0 = Duration::from_secs(1);
    // Below both thresholds: nothing.
    assert!(c
        .backlog_triggers(t0, &[sample("web", 1000, 1000)])
        .is_empty());
    let out = c.backlog_triggers(
        t0,
        &[sample("web", 64 * 1024, 0), sample("batch", 0, 40_000)],
    );
    assert_eq!(out.len(), 2);
    assert_eq!(
        out[0].message,
        Message::Trigger {
            resource: Resource::CpuTime,
            overlay: n("lat"),
            unit: n("web")
        }
    );
    assert!(matches!(
        out[0].cause,
        TriggerCause::SocketBacklog { bytes: 65536, .. }
    ));
    assert!(matches!(
        out[1].cause,
        TriggerCause::ClassBacklog { bytes: 40_000, .. }
    ));
    assert!(out[0].cause.to_string().contains("65536"));
    // Within the cooldown: nothing; after it: again.
    let big = [sample("web", 1 << 20, 0)];
    assert!(c
        .backlog_triggers(t0 + Duration::from_millis(99), &big)
        .is_empty());
    assert_eq!(
        c.backlog_triggers(t0 + Duration::from_millis(100), &big)
            .len(),
        1
    );
}

#[test]
fn units_of_no_overlay_or_not_here_are_never_triggered() {
    let mut c = coordinator();
    let t = Duration::from_secs(1);
    assert!(c
        .backlog_triggers(t, &[sample("web", 1 << 30, 1 << 30)])
        .is_empty());
    c.handle(&overlay("lat", &["web"]));
    assert!(c
        .backlog_triggers(t, &[sample("ghost", 1 << 30, 1 << 30)])
        .is_empty());
    assert!(c
        .backlog_triggers(t, &[sample("batch", 1 << 30, 1 << 30)])
        .is_empty());
}

#[test]
fn bad_setups_are_refused_naming_the_value() {
    let mut s = setup();
    s.units[1].share = 0;
    assert!(matches!(
        NetCoordinator::new(s, 1.25),
        Err(NetIslandError::BadShare { share: 0, .. })
    ));
    let mut s = setup();
    s.units[0].ceil_bps = Some(2_000_000_000);
    assert!(matches!(
        NetCoordinator::new(s, 1.25),
        Err(NetIslandError::BadCeil { .. })
    ));
    let mut s = setup();
    s.units.push(unit("web", 1));
    assert!(matches!(
        NetCoordinator::new(s, 1.25),
        Err(NetIslandError::DuplicateUnit { .. })
    ));
    let mut s = setup();
    s.rate_bps = 0;
    assert!(matches!(
        NetCoordinator::new(s, 1.25),
        Err(NetIslandError::ZeroRate { .. })
    ));
    let mut s = setup();
    s.units[0].prio = 9;
    assert!(matches!(
        NetCoordinator::new(s, 1.25),
        Err(NetIslandError::BadPrio { prio: 9, .. })
    ));
}

#[test]
fn runtime_units_get_the_lowest_free_class() {
    let mut c = coordinator();
    assert!(c.remove_unit(&n("web")));
    c.add_unit(unit("api", 10)).unwrap();
    assert_eq!(c.classid(&n("api")), Some(0x0001_0010));
    assert!(c.add_unit(unit("api", 10)).is_err());
}
