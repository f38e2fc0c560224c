//! Reload on the simulated backend: random sequences of configurations,
//! each applied to a running daemon with processes in every unit. After
//! each reload, every process is where the new configuration says (in its
//! unit if the unit stays or comes, back where it came from if it goes),
//! none is lost, every configured unit has its group and no removed unit
//! keeps one. A refused reload changes nothing. Each configuration has an
//! overlay over its units that borrows a CPU before each reload: a loan
//! whose islands and overlay stay is kept across the reload, every loan
//! listed is in its borrower's cpuset, and the islands' cpusets always
//! split their configured CPUs among them.

mod common;

use atoll_core::backend::Monitor;
use atoll_core::clock::ManualClock;
use atoll_core::coord::{Direction, Message, Property, Resource};
use atoll_core::decision::Action;
use atoll_core::plan::GroupPath;
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandSpec, OverlayConfig, PlatformSpec, ReactPolicy,
    SchedPolicy, UnitSpec, DEFAULT_EPOCH,
};
use atoll_core::CpuSet;
use atoll_daemon::controller::Controller;
use atoll_proto::{Reply, Request};
use atoll_sim::{Location, SimPlatform};
use common::sim::{ask, controller, epochs, n, reply, set, topo8, ROOT};
use proptest::prelude::*;

/// Islands that may exist: name, CPUs.
const ISLANDS: [(&str, &str); 3] = [("a", "1-3"), ("b", "4-5"), ("c", "6-7")];
/// Unit names; each adopts the processes whose comm is its name.
const UNITS: [&str; 5] = ["u0", "u1", "u2", "u3", "u4"];

/// One configuration: which islands exist (and whether exclusive), and for
/// each unit the island it is in (an index into the existing islands,
/// `None`: not configured) and its CPU cap.
#[derive(Clone, Debug)]
struct Shape {
    islands: Vec<(usize, bool)>,
    units: Vec<Option<(usize, Option<u8>)>>,
}

fn shape() -> impl Strategy<Value = Shape> {
    let islands = proptest::sample::subsequence(vec![0usize, 1, 2], 1..=3)
        .prop_flat_map(|ids| {
            let k = ids.len();
            (Just(ids), proptest::collection::vec(any::<bool>(), k))
        })
        .prop_map(|(ids, excl)| ids.into_iter().zip(excl).collect::<Vec<_>>());
    let units = proptest::collection::vec(
        proptest::option::of((0usize..3, proptest::option::of(1u8..=4))),
        UNITS.len(),
    );
    (islands, units).prop_map(|(islands, units)| Shape { islands, units })
}

fn spec(s: &Shape) -> PlatformSpec {
    let islands: Vec<IslandSpec> = s
        .islands
        .iter()
        .map(|&(i, exclusive)| IslandSpec {
            name: n(ISLANDS[i].0),
            cpus: set(ISLANDS[i].1),
            mems: set("0-1"),
            policy: SchedPolicy::Fair,
            arbitration: Default::default(),
            exclusive,
            access: Default::default(),
        })
        .collect();
    let units = s
        .units
        .iter()
        .zip(UNITS)
        .filter_map(|(u, name)| {
            let (island, cap) = (*u)?;
            Some(UnitSpec {
                name: n(name),
                island: islands[island % islands.len()].name.clone(),
                entitlement: Entitlement {
                    cpu_cap: cap.map(|c| f64::from(c) / 4.0),
                    ..Default::default()
                },
                adopt: vec![AdoptRule::Comm(name.into())],
                rt_priority: None,
            })
        })
        .collect::<Vec<UnitSpec>>();
    // One overlay over every configured unit.
    let overlays = if units.is_empty() {
        Vec::new()
    } else {
        vec![OverlayConfig {
            name: n("o"),
            priority: 5,
            units: units.iter().map(|u| u.name.clone()).collect(),
            property: Property::LatencyPercentile {
                percentile: 99.0,
                bound_us: 1000,
            },
            slo: Default::default(),
            cap_timing: Default::default(),
            react: ReactPolicy::default(),
        }]
    };
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0-1"),
            adopt_all: false,
        },
        islands,
        units,
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays,
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

/// A process the test started: pid, comm (the unit it belongs to), and
/// where it was before atoll took it.
struct Proc {
    pid: u32,
    comm: &'static str,
    origin: Location,
}

fn check(sim: &SimPlatform, c: &Controller, procs: &[Proc], spec: &PlatformSpec, step: usize) {
    for p in procs {
        let at = sim
            .location(p.pid)
            .unwrap_or_else(|| panic!("step {step}: pid {} was lost", p.pid));
        let want = match spec.units.iter().find(|u| u.name.as_str() == p.comm) {
            Some(u) => Location::Group(GroupPath::unit(&u.island, &u.name)),
            None => p.origin.clone(),
        };
        assert_eq!(at, want, "step {step}: pid {} ({})", p.pid, p.comm);
    }
    for name in UNITS {
        for (island, _) in ISLANDS {
            let group = GroupPath::unit(&n(island), &n(name));
            let configured = spec
                .units
                .iter()
                .any(|u| u.name.as_str() == name && u.island.as_str() == island);
            assert_eq!(
                sim.exists(&group),
                configured,
                "step {step}: group {group} exists iff configured"
            );
            if let Some(u) = spec.units.iter().find(|u| u.name.as_str() == name) {
                if u.island.as_str() == island {
                    let quota = sim
                        .settings(&group)
                        .and_then(|s| s.cpu_max)
                        .map(|m| m.quota_us);
                    let want = u
                        .entitlement
                        .cpu_cap
                        .map(|c| atoll_core::num::saturating_u64((c * 100_000.0).round()));
                    assert_eq!(quota, want, "step {step}: {group}'s cap");
                }
            }
        }
    }
    for (island, _) in ISLANDS {
        let configured = spec.island(&n(island)).is_some();
        assert_eq!(
            sim.exists(&GroupPath::island(&n(island))),
            configured,
            "step {step}: island {island} exists iff configured"
        );
    }
    let status = c.status();
    let mut shown: Vec<String> = status.units.iter().map(|u| u.name.clone()).collect();
    shown.sort();
    let mut want: Vec<String> = spec.units.iter().map(|u| u.name.to_string()).collect();
    want.sort();
    assert_eq!(shown, want, "step {step}: the units status shows");
}

/// A CPU on loan: (cpu, lender, borrower).
type Loan = (u32, String, String);

/// The loans of overlay `o`, as the API lists them.
fn loans(c: &mut Controller) -> Vec<Loan> {
    match reply(ask(c, ROOT, Request::Overlays {})) {
        Reply::Overlays { overlays } => overlays
            .iter()
            .flat_map(|o| o.loans.iter())
            .map(|l| (l.cpu, l.lender.clone(), l.borrower.clone()))
            .collect(),
        other => panic!("expected Overlays, got {other:?}"),
    }
}

/// Overlay `o` borrows a CPU for the first island from the last one, and
/// tunes the weight of its first unit without a cap up (either may be
/// refused).
fn coordinate(c: &mut Controller, spec: &PlatformSpec) {
    let (Some(o), Some(first), Some(last)) = (
        spec.overlays.first(),
        spec.islands.first(),
        spec.islands.last(),
    ) else {
        return;
    };
    let mut send = |from: &str, message: Message| {
        ask(
            c,
            ROOT,
            Request::Coordinate {
                from: Some(from.into()),
                message,
            },
        );
    };
    if first.name != last.name {
        send(
            first.name.as_str(),
            Message::BorrowPreferred {
                resource: Resource::Cores,
                overlay: o.name.clone(),
                island: last.name.clone(),
                amount: 1,
            },
        );
    }
    // A unit without a cap, so its weight is tuned (`check` wants the caps
    // as configured).
    if let Some(u) = spec.units.iter().find(|u| u.entitlement.cpu_cap.is_none()) {
        send(
            u.island.as_str(),
            Message::Tune {
                resource: Resource::CpuTime,
                dir: Direction::Up,
                overlay: o.name.clone(),
                unit: u.name.clone(),
            },
        );
    }
}

/// Coordination after a reload from `old` to `new`: the loans made before
/// whose islands and overlay stay are still there, every loan listed is in
/// its borrower's cpuset and between configured islands, and the islands'
/// cpusets split their configured CPUs among them.
fn check_coord(
    sim: &SimPlatform,
    c: &mut Controller,
    before: &[Loan],
    new: &PlatformSpec,
    step: usize,
) {
    let after = loans(c);
    let has = |i: &str| new.island(&n(i)).is_some();
    for l in before {
        if has(&l.1) && has(&l.2) && !new.overlays.is_empty() {
            assert!(after.contains(l), "step {step}: loan {l:?} lost: {after:?}");
        }
    }
    let cpus_of = |i: &str| {
        sim.settings(&GroupPath::island(&n(i)))
            .and_then(|s| s.cpus)
            .unwrap_or_default()
    };
    for l in &after {
        assert!(has(&l.1) && has(&l.2), "step {step}: {l:?}");
        assert!(
            cpus_of(&l.2).contains(l.0),
            "step {step}: CPU {} of {l:?} is not in {}'s cpuset {}",
            l.0,
            l.2,
            cpus_of(&l.2)
        );
    }
    let mut all = CpuSet::new();
    let mut homes = CpuSet::new();
    for i in &new.islands {
        let held = cpus_of(i.name.as_str());
        assert!(all.is_disjoint(&held), "step {step}: CPUs held twice");
        all = all.union(&held);
        homes = homes.union(&i.cpus);
    }
    assert_eq!(all, homes, "step {step}: the islands' CPUs");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20, ..ProptestConfig::default() })]

    /// 20 sequences of 5 reloads: 100 reloads, processes in every unit
    /// before each, new processes started between them.
    #[test]
    fn random_reloads_lose_nothing(first in shape(), next in proptest::collection::vec(shape(), 5)) {
        let sim = SimPlatform::new(topo8(), "atoll-reload", ManualClock::new());
        let start = spec(&first);
        let mut c = controller(&sim, start.clone(), topo8());
        c.start().unwrap();
        let mut procs = Vec::new();
        let mut current = start;
        for (step, s) in std::iter::once(&first).chain(&next).enumerate() {
            // Two new processes per unit name each round (configured or not).
            for comm in UNITS {
                for _ in 0..2 {
                    let pid = sim.spawn(comm, 1000, None);
                    let origin = sim.location(pid).unwrap();
                    procs.push(Proc { pid, comm, origin });
                }
            }
            if step > 0 {
                let new = spec(s);
                let before = loans(&mut c);
                c.reload(new.clone()).unwrap();
                current = new;
                check_coord(&sim, &mut c, &before, &current, step);
            }
            epochs(&sim, &mut c, 3);
            check(&sim, &c, &procs, &current, step);
            coordinate(&mut c, &current);
        }
        c.teardown().unwrap();
        for p in &procs {
            prop_assert_eq!(sim.location(p.pid), Some(p.origin.clone()), "teardown gives pid {} back", p.pid);
        }
    }
}

fn two_units() -> PlatformSpec {
    spec(&Shape {
        islands: vec![(0, false)],
        units: vec![Some((0, Some(2))), Some((0, None)), None, None, None],
    })
}

#[test]
fn reload_over_the_api_is_roots_and_says_what_changed() {
    let sim = SimPlatform::new(topo8(), "atoll-reload-api", ManualClock::new());
    let mut c = controller(&sim, two_units(), topo8());
    c.start().unwrap();
    let mut next = two_units();
    next.units.remove(1);
    let source = next.clone();
    c.set_config_source(Ok(Box::new(move || Ok(source.clone()))));
    let r = ask(&mut c, common::sim::user(1000), Request::Reload {});
    assert!(r.ok.is_none(), "only root reloads: {r:?}");
    assert_eq!(c.status().units.len(), 2);
    match reply(ask(&mut c, ROOT, Request::Reload {})) {
        Reply::Reloaded { changes } => assert_eq!(changes, ["unit u1 removed"]),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.status().units.len(), 1);
    match reply(ask(&mut c, ROOT, Request::Reload {})) {
        Reply::Reloaded { changes } => assert!(changes.is_empty(), "{changes:?}"),
        other => panic!("{other:?}"),
    }
    // A unit the reload adds is written for the reload, and says so.
    let mut more = next;
    let u2 = spec(&Shape {
        islands: vec![(0, false)],
        units: vec![None, None, Some((0, Some(1))), None, None],
    });
    more.units.push(u2.units[0].clone());
    c.set_config_source(Ok(Box::new(move || Ok(more.clone()))));
    match reply(ask(&mut c, ROOT, Request::Reload {})) {
        Reply::Reloaded { changes } => assert_eq!(changes, ["unit u2 added"]),
        other => panic!("{other:?}"),
    }
    let group = GroupPath::unit(&n("a"), &n("u2"));
    let written: Vec<_> = c
        .decisions()
        .query(None, 1000)
        .into_iter()
        .filter(|d| matches!(&d.action, Action::ApplyGroup { path, .. } if *path == group))
        .collect();
    assert!(!written.is_empty(), "a/u2 was not written");
    for d in &written {
        assert!(
            d.why.to_string().contains("reloaded"),
            "a/u2 written without the reload as its reason: {}",
            d.why
        );
    }
    c.teardown().unwrap();
}

#[test]
fn a_configuration_that_does_not_read_changes_nothing() {
    let sim = SimPlatform::new(topo8(), "atoll-reload-bad", ManualClock::new());
    let mut c = controller(&sim, two_units(), topo8());
    c.start().unwrap();
    c.set_config_source(Ok(Box::new(|| Err("atoll.toml:3:7: unit.x: no".into()))));
    let r = ask(&mut c, ROOT, Request::Reload {});
    let err = r.err.expect("refused");
    assert!(err.message.contains("atoll.toml:3:7"), "{}", err.message);
    assert_eq!(c.status().units.len(), 2);
    c.set_config_source(Err("the embedded default".into()));
    let err = ask(&mut c, ROOT, Request::Reload {}).err.expect("refused");
    assert!(err.message.contains("embedded default"), "{}", err.message);
    c.teardown().unwrap();
}
