//! Fixtures shared by the coordination tests.

use std::time::Duration;

use super::*;
use crate::spec::{RealtimePolicy, RtClass, SchedPolicy};

pub(crate) fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

pub(crate) fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

pub(crate) fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A fair island with default knobs for each unit.
pub(crate) fn fair(name: &str, cpus: &str, units: &[&str]) -> IslandSetup {
    IslandSetup {
        name: n(name),
        cpus: set(cpus),
        policy: SchedPolicy::Fair,
        arbitration: ArbitrationPolicy::RoundRobin,
        memory_bytes: 1 << 30,
        units: units
            .iter()
            .map(|u| UnitSetup {
                name: n(u),
                knobs: UnitKnobs::default(),
            })
            .collect(),
    }
}

/// A realtime island, budget 500000/1000000 us, priorities 10..=50, each unit
/// starting with `each_us`.
pub(crate) fn rt(name: &str, cpus: &str, units: &[&str], each_us: u64) -> IslandSetup {
    IslandSetup {
        policy: SchedPolicy::Realtime(RealtimePolicy {
            class: RtClass::Fifo,
            priority_min: 10,
            priority_max: 50,
            runtime_us: 500_000,
            period_us: 1_000_000,
        }),
        units: units
            .iter()
            .map(|u| UnitSetup {
                name: n(u),
                knobs: UnitKnobs {
                    rt_priority: 10,
                    rt_runtime_us: each_us,
                    ..UnitKnobs::default()
                },
            })
            .collect(),
        ..fair(name, cpus, &[])
    }
}

/// An overlay with a throughput property.
pub(crate) fn overlay(name: &str, priority: u8, units: &[(&str, &str)]) -> OverlaySpec {
    OverlaySpec {
        name: n(name),
        priority,
        units: units.iter().map(|(i, u)| (n(i), n(u))).collect(),
        property: Property::ThroughputFloor { per_s: 100.0 },
    }
}

/// Registers `spec` from its first island (or the platform's first) and
/// insists on an ack.
pub(crate) fn register(p: &mut PlatformManager, spec: OverlaySpec) -> Reply {
    let from = spec
        .units
        .first()
        .map(|(i, _)| i.clone())
        .unwrap_or_else(|| p.islands()[0].name().clone());
    let r = p.handle(Duration::ZERO, &from, &Message::Register { overlay: spec });
    assert!(r.is_ack(), "{r}");
    r
}

pub(crate) fn tune(overlay: &str, unit: &str, resource: Resource, dir: Direction) -> Message {
    Message::Tune {
        resource,
        dir,
        overlay: n(overlay),
        unit: n(unit),
    }
}

pub(crate) fn trigger(overlay: &str, unit: &str) -> Message {
    Message::Trigger {
        resource: Resource::CpuTime,
        overlay: n(overlay),
        unit: n(unit),
    }
}

pub(crate) fn borrow(overlay: &str, island: &str, amount: u32) -> Message {
    Message::BorrowPreferred {
        resource: Resource::Cores,
        overlay: n(overlay),
        island: n(island),
        amount,
    }
}

pub(crate) fn borrow_any(overlay: &str, amount: u32) -> Message {
    Message::BorrowAny {
        resource: Resource::Cores,
        overlay: n(overlay),
        amount,
    }
}

pub(crate) fn release(overlay: &str, island: &str) -> Message {
    Message::Release {
        resource: Resource::Cores,
        overlay: n(overlay),
        island: n(island),
    }
}

/// The `MoveCores` of a reply as `from->to:cpus`.
pub(crate) fn moves(r: &Reply) -> Vec<String> {
    r.effects()
        .iter()
        .filter_map(|e| match &e.change {
            Change::MoveCores {
                from_island,
                to_island,
                cpus,
            } => Some(format!("{from_island}->{to_island}:{cpus}")),
            _ => None,
        })
        .collect()
}

/// The CPUs each island holds, `name=cpus` joined by spaces.
pub(crate) fn layout(p: &PlatformManager) -> String {
    p.islands()
        .iter()
        .map(|c| format!("{}={}", c.name(), c.cpus()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Checks the CPU bookkeeping: islands partition the CPUs, each keeps an own
/// CPU, and the ledger agrees with who holds what.
pub(crate) fn check_ledger(p: &PlatformManager) {
    let mut all = CpuSet::new();
    let mut homes = CpuSet::new();
    for c in p.islands() {
        assert!(all.is_disjoint(c.cpus()), "CPUs held twice: {}", layout(p));
        all = all.union(c.cpus());
        homes = homes.union(c.home());
        let own = c.cpus().difference(c.borrowed());
        assert!(
            !own.is_empty(),
            "island {} holds no own CPU: {}",
            c.name(),
            layout(p)
        );
        assert!(
            own.is_subset(c.home()),
            "{}: own {own} outside home",
            c.name()
        );
        assert!(c.borrowed().is_subset(c.cpus()));
    }
    assert_eq!(all, homes, "CPUs lost or invented");
    let loans = p.loans();
    let mut loaned = CpuSet::new();
    for l in &loans {
        let holder = p.island(&l.borrower).unwrap();
        assert!(
            holder.borrowed().contains(l.cpu),
            "{l:?} not borrowed by holder"
        );
        assert!(p.island(&l.owner).unwrap().home().contains(l.cpu));
        loaned.insert(l.cpu);
    }
    let borrowed = p
        .islands()
        .iter()
        .fold(CpuSet::new(), |a, c| a.union(c.borrowed()));
    assert_eq!(loaned, borrowed, "ledger and islands disagree");
}

/// A lone coordinator with overlay `o` registered on `units`.
pub(crate) fn coord(setup: IslandSetup, cfg: CoordConfig, units: &[&str]) -> Coordinator {
    let name = setup.name.clone();
    let mut c = Coordinator::new(setup, cfg).unwrap();
    let spec = overlay(
        "o",
        1,
        &units
            .iter()
            .map(|u| (name.as_str(), *u))
            .collect::<Vec<_>>(),
    );
    let r = c.handle(Duration::ZERO, &name, &Message::Register { overlay: spec });
    assert!(r.is_ack(), "{r}");
    c
}

pub(crate) fn up(unit: &str) -> Message {
    tune("o", unit, Resource::CpuTime, Direction::Up)
}

pub(crate) fn down(unit: &str) -> Message {
    tune("o", unit, Resource::CpuTime, Direction::Down)
}

pub(crate) fn send(c: &mut Coordinator, t: Duration, m: &Message) -> Reply {
    let from = c.name().clone();
    c.handle(t, &from, m)
}
