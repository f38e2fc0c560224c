//! The authorization model of `docs/security.md`, enforced: what a user
//! other than root may do through the API, and what it can never take
//! from the units the platform description configures. On the simulated
//! backend; callers are given by uid as `SO_PEERCRED` would.

mod common;

use std::time::Duration;

use atoll_core::backend::Monitor;
use atoll_core::clock::ManualClock;
use atoll_core::coord::{Message, Property, Resource};
use atoll_core::plan::GroupPath;
use atoll_core::process::TaskControl;
use atoll_core::spec::{
    Entitlement, HostSpec, IslandAccess, IslandSpec, IsolationMode, IsolationSpec, OverlayConfig,
    PlatformSpec, ReactPolicy, RealtimePolicy, RtClass, SchedPolicy, UnitSpec, DEFAULT_EPOCH,
};
use atoll_daemon::controller::Controller;
use atoll_proto::{ErrorCode, Reply, Request, ResponseEnvelope};
use atoll_sim::SimPlatform;
use common::sim::{ask, controller, epochs, n, set, topo8, user, ROOT};

fn unit(name: &str, island: &str, cpus: f64) -> UnitSpec {
    UnitSpec {
        name: n(name),
        island: n(island),
        entitlement: Entitlement {
            cpus: Some(cpus),
            ..Default::default()
        },
        adopt: vec![],
        rt_priority: None,
    }
}

/// Host CPU 0; island `web` (1-3) taking users' units (at most 2 each)
/// with configured units `api` and `db` (1 CPU each); island `closed`
/// (4-5) taking none; realtime island `rt` (6-7) whose RT user is uid
/// 2000; overlay `shop` over `api` and `db`; `isolate` mode.
fn spec() -> PlatformSpec {
    let island = |name: &str, cpus: &str, policy, access| IslandSpec {
        name: n(name),
        cpus: set(cpus),
        mems: set("0-1"),
        policy,
        arbitration: Default::default(),
        exclusive: false,
        access,
    };
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![
            island(
                "web",
                "1-3",
                SchedPolicy::Fair,
                IslandAccess {
                    user_units: true,
                    user_units_max: 2,
                    rt_users: vec![],
                },
            ),
            island("closed", "4-5", SchedPolicy::Fair, IslandAccess::default()),
            island(
                "rt",
                "6-7",
                SchedPolicy::Realtime(RealtimePolicy {
                    class: RtClass::Fifo,
                    priority_min: 10,
                    priority_max: 40,
                    runtime_us: 300_000,
                    period_us: 1_000_000,
                }),
                IslandAccess {
                    user_units: true,
                    user_units_max: 4,
                    rt_users: vec![2000],
                },
            ),
        ],
        units: vec![unit("api", "web", 1.0), unit("db", "web", 1.0)],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: IsolationSpec {
            mode: IsolationMode::Isolate,
            ..Default::default()
        },
        overlays: vec![OverlayConfig {
            name: n("shop"),
            priority: 5,
            units: vec![n("api"), n("db")],
            property: Property::LatencyPercentile {
                percentile: 99.0,
                bound_us: 1000,
            },
            slo: Default::default(),
            cap_timing: Default::default(),
            react: ReactPolicy::default(),
        }],
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

fn start(sim: &SimPlatform) -> Controller {
    spec().validate(&topo8()).unwrap();
    let mut c = controller(sim, spec(), topo8());
    c.start().unwrap();
    c
}

fn adopt(unit: &str, pid: u32, island: Option<&str>) -> Request {
    Request::Adopt {
        unit: unit.into(),
        pid,
        island: island.map(Into::into),
        network: None,
    }
}

fn refused(r: ResponseEnvelope) -> (ErrorCode, String) {
    let e = r.err.expect("refused");
    (e.code, e.message)
}

#[test]
fn users_make_units_only_where_allowed_and_only_so_many() {
    let sim = SimPlatform::new(topo8(), "atoll-sec", ManualClock::new());
    let mut c = start(&sim);
    let me = user(1000);
    let p: Vec<u32> = (0..4).map(|_| sim.spawn("job", 1000, None)).collect();
    // An island that takes no users' units.
    let (code, msg) = refused(ask(&mut c, me, adopt("mine", p[0], Some("closed"))));
    assert_eq!(code, ErrorCode::PermissionDenied);
    assert!(msg.contains("user_units"), "{msg}");
    assert!(!sim.exists(&GroupPath::from_relative("closed/mine")));
    // Two in web, not three.
    for (i, name) in ["a", "b"].iter().enumerate() {
        assert!(ask(&mut c, me, adopt(name, p[i], Some("web"))).ok.is_some());
    }
    let (code, msg) = refused(ask(&mut c, me, adopt("c", p[2], Some("web"))));
    assert_eq!(code, ErrorCode::PermissionDenied);
    assert!(msg.contains("user_units_max"), "{msg}");
    // Into its own unit again: fine. Into another user's: no.
    assert!(ask(&mut c, me, adopt("a", p[2], None)).ok.is_some());
    let other = sim.spawn("job", 1001, None);
    let (code, _) = refused(ask(&mut c, user(1001), adopt("a", other, None)));
    assert_eq!(code, ErrorCode::PermissionDenied);
    // Root may do anything.
    let rootish = sim.spawn("job", 0, None);
    assert!(ask(&mut c, ROOT, adopt("c", rootish, Some("closed")))
        .ok
        .is_some());
}

#[test]
fn configured_units_and_their_overlays_cannot_be_claimed() {
    let sim = SimPlatform::new(topo8(), "atoll-sec", ManualClock::new());
    let mut c = start(&sim);
    let me = user(1000);
    let mine = sim.spawn("job", 1000, None);
    // `db` is configured and empty: still not the user's to fill.
    let (code, msg) = refused(ask(&mut c, me, adopt("db", mine, None)));
    assert_eq!(code, ErrorCode::PermissionDenied);
    assert!(msg.contains("platform description"), "{msg}");
    // So the overlay over it is not the user's to steer.
    let tune = Message::Tune {
        resource: Resource::CpuTime,
        dir: atoll_core::coord::Direction::Up,
        overlay: n("shop"),
        unit: n("db"),
    };
    let (code, _) = refused(ask(
        &mut c,
        me,
        Request::Coordinate {
            from: None,
            message: tune,
        },
    ));
    assert_eq!(code, ErrorCode::PermissionDenied);
}

#[test]
fn realtime_islands_take_tasks_only_from_root_and_their_rt_users() {
    let sim = SimPlatform::new(topo8(), "atoll-sec", ManualClock::new());
    let mut c = start(&sim);
    let mine = sim.spawn("job", 1000, None);
    let (code, msg) = refused(ask(&mut c, user(1000), adopt("fast", mine, Some("rt"))));
    assert_eq!(code, ErrorCode::PermissionDenied);
    assert!(msg.contains("realtime"), "{msg}");
    assert_eq!(
        sim.policy(mine).unwrap(),
        atoll_core::plan::TaskPolicy::Other,
        "no SCHED_FIFO for it"
    );
    let theirs = sim.spawn("job", 2000, None);
    assert!(ask(&mut c, user(2000), adopt("fast", theirs, Some("rt")))
        .ok
        .is_some());
    assert!(matches!(
        sim.policy(theirs).unwrap(),
        atoll_core::plan::TaskPolicy::Fifo(_)
    ));
}

#[test]
fn a_process_root_placed_stays_where_root_put_it() {
    let sim = SimPlatform::new(topo8(), "atoll-sec", ManualClock::new());
    let mut c = start(&sim);
    let mine = sim.spawn("job", 1000, None);
    assert!(ask(&mut c, ROOT, adopt("api", mine, None)).ok.is_some());
    // Its owner would move it out of `api`, into a unit of its own.
    let (code, msg) = refused(ask(&mut c, user(1000), adopt("escape", mine, Some("web"))));
    assert_eq!(code, ErrorCode::PermissionDenied);
    assert!(msg.contains("root"), "{msg}");
    assert!(!sim.exists(&GroupPath::from_relative("web/escape")));
    // A process the user placed itself, it may move between its units.
    let other = sim.spawn("job", 1000, None);
    assert!(ask(&mut c, user(1000), adopt("one", other, Some("web")))
        .ok
        .is_some());
    assert!(ask(&mut c, user(1000), adopt("two", other, Some("web")))
        .ok
        .is_some());
}

#[test]
fn a_users_unit_takes_no_home_cpu_from_a_configured_unit() {
    let sim = SimPlatform::new(topo8(), "atoll-sec", ManualClock::new());
    let mut c = start(&sim);
    epochs(&sim, &mut c, 3);
    let homes = |c: &Controller| -> Vec<(String, String)> {
        c.status()
            .units
            .iter()
            .filter(|u| u.name == "api" || u.name == "db")
            .map(|u| {
                let iso = u.isolation.clone().expect("isolate mode");
                (u.name.clone(), iso.home_cpus.to_string())
            })
            .collect()
    };
    let before = homes(&c);
    assert!(before.iter().all(|(_, h)| !h.is_empty()), "{before:?}");
    for i in 0..2 {
        let p = sim.spawn("job", 1000, None);
        sim.set_busy(p, true).unwrap();
        let r = ask(&mut c, user(1000), adopt(&format!("u{i}"), p, Some("web")));
        assert!(r.ok.is_some(), "{r:?}");
    }
    epochs(&sim, &mut c, 10);
    assert_eq!(
        homes(&c),
        before,
        "the users' units shrank a configured one"
    );
    let api = sim.settings(&GroupPath::from_relative("web/api")).unwrap();
    assert!(api.cpus.is_some());
}

#[test]
fn an_empty_runtime_unit_is_removed_after_its_grace() {
    let sim = SimPlatform::new(topo8(), "atoll-sec", ManualClock::new());
    let mut c = start(&sim);
    let short = sim.spawn("job", 1000, None);
    let long = sim.spawn("job", 1000, None);
    for (u, p) in [("short", short), ("long", long)] {
        assert!(ask(&mut c, user(1000), adopt(u, p, Some("web")))
            .ok
            .is_some());
    }
    sim.exit(short).unwrap();
    let steps = (atoll_daemon::units::EMPTY_GRACE + Duration::from_secs(2)).as_millis()
        / DEFAULT_EPOCH.as_millis();
    epochs(&sim, &mut c, usize::try_from(steps).unwrap());
    assert!(c.registry().unit("short").is_none());
    assert!(!sim.exists(&GroupPath::from_relative("web/short")));
    assert!(c.registry().unit("long").is_some(), "a unit in use stays");
    let why = c.decisions().query(Some("short"), 10);
    assert!(
        why.iter()
            .any(|d| d.to_string().contains("held no process")),
        "{why:#?}"
    );
    assert!(matches!(
        ask(&mut c, ROOT, Request::Status {}).ok,
        Some(Reply::Status(_))
    ));
}
