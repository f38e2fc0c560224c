//! Units and overlays changed at run time, on the simulated backend:
//! `unit add|set|rm` write the unit's group from its entitlement (checked
//! as the config file's units are), give processes back on removal and
//! are decisions with their reason; overlays span units made at run time;
//! both survive a crash (the controller dropped without teardown, a new one
//! started on the same machine and state directory); `config dump` writes
//! the effective platform as a file that parses back to it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::coord::{Direction, Message, Resource};
use atoll_core::decision::Action;
use atoll_core::plan::GroupPath;
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandAccess, IslandSpec, PlatformSpec, SchedPolicy,
    UnitSpec, DEFAULT_EPOCH,
};
use atoll_daemon::controller::{Controller, Env, Options};
use atoll_daemon::units::EMPTY_GRACE;
use atoll_proto::runtime::{OverlaySettings, SloSettings, UnitSettings};
use atoll_proto::{ErrorCode, Reply, Request, ResponseEnvelope};
use atoll_sim::{Location, SimPlatform};
use common::sim::{ask, controller, n, reply, set, topo8, user, ROOT};

/// Islands `a` (CPUs 1-3, users' units allowed) and `b` (4-7); configured
/// unit `api` in `a`, entitled to 1 CPU.
fn spec() -> PlatformSpec {
    let island = |name: &str, cpus: &str, users: bool| IslandSpec {
        name: n(name),
        cpus: set(cpus),
        mems: set("0-1"),
        policy: SchedPolicy::Fair,
        arbitration: Default::default(),
        exclusive: false,
        access: IslandAccess {
            user_units: users,
            ..Default::default()
        },
    };
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0-1"),
            adopt_all: false,
        },
        islands: vec![island("a", "1-3", true), island("b", "4-7", false)],
        units: vec![UnitSpec {
            name: n("api"),
            island: n("a"),
            entitlement: Entitlement {
                cpus: Some(1.0),
                ..Default::default()
            },
            adopt: vec![AdoptRule::Comm("api".into())],
            rt_priority: None,
        }],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

fn started(sim: &SimPlatform) -> Controller {
    let mut c = controller(sim, spec(), topo8());
    c.start().unwrap();
    c
}

fn unit_add(unit: &str, island: &str, settings: UnitSettings) -> Request {
    Request::UnitAdd {
        unit: unit.into(),
        island: Some(island.into()),
        settings,
    }
}

/// Runs the loop past the time an empty runtime unit is kept
/// ([`EMPTY_GRACE`]): one periodic step that sees it empty, then one
/// after the grace.
fn past_the_grace(sim: &SimPlatform, c: &mut Controller) {
    for wait in [Duration::from_secs(2), EMPTY_GRACE + Duration::from_secs(2)] {
        sim.advance(wait);
        c.epoch();
    }
}

fn refused(r: ResponseEnvelope) -> (ErrorCode, String) {
    let e = r.err.unwrap_or_else(|| panic!("accepted: {:?}", r.ok));
    (e.code, e.message)
}

fn latency_over(units: &[&str]) -> OverlaySettings {
    OverlaySettings {
        units: Some(units.iter().map(|u| u.to_string()).collect()),
        latency_us: Some(2000),
        priority: Some(4),
        ..Default::default()
    }
}

#[test]
fn a_unit_added_at_run_time_gets_its_entitlement_and_gives_processes_back() {
    let sim = SimPlatform::new(topo8(), "atoll-rt-units", ManualClock::new());
    let mut c = started(&sim);
    let settings = UnitSettings {
        cpus: Some(1.5),
        memory_max: Some(1 << 30),
        ..Default::default()
    };
    let r = reply(ask(&mut c, ROOT, unit_add("job", "a", settings)));
    let Reply::Unit { entitlement, .. } = r else {
        panic!("{r:?}")
    };
    assert_eq!(entitlement.cpus, Some(1.5));
    let group = GroupPath::unit(&n("a"), &n("job"));
    let s = sim.settings(&group).expect("the unit's group exists");
    assert_eq!(s.cpu_weight, Some(150), "weight from cpus");
    assert_eq!(s.memory.max, Some(1 << 30));

    // Empty, a declared unit stays; a unit `adopt` made does not.
    let brief = sim.spawn("brief", 0, None);
    let scratch = Request::Adopt {
        unit: "scratch".into(),
        pid: brief,
        island: Some("b".into()),
        network: None,
    };
    reply(ask(&mut c, ROOT, scratch));
    sim.exit(brief).unwrap();
    past_the_grace(&sim, &mut c);
    assert!(
        c.registry().unit("scratch").is_none(),
        "an empty unit adopt made goes"
    );
    assert!(c.registry().unit("job").is_some(), "a declared unit stays");

    let pid = sim.spawn("worker", 0, None);
    let origin = sim.location(pid).unwrap();
    let adopt = Request::Adopt {
        unit: "job".into(),
        pid,
        island: None,
        network: None,
    };
    reply(ask(&mut c, ROOT, adopt));
    assert_eq!(sim.location(pid), Some(Location::Group(group.clone())));

    let more = UnitSettings {
        cpus: Some(2.0),
        ..Default::default()
    };
    let set_job = Request::UnitSet {
        unit: "job".into(),
        settings: more,
    };
    reply(ask(&mut c, ROOT, set_job));
    let s = sim.settings(&group).unwrap();
    assert_eq!(s.cpu_weight, Some(200));
    assert_eq!(s.memory.max, Some(1 << 30), "keys not given stay");

    let rm = Request::UnitRm { unit: "job".into() };
    let r = reply(ask(&mut c, ROOT, rm));
    assert_eq!(
        r,
        Reply::UnitRemoved {
            unit: "job".into(),
            returned: vec![pid]
        }
    );
    assert_eq!(sim.location(pid), Some(origin), "the process went back");
    assert!(sim.settings(&group).is_none(), "the group is gone");
    assert!(c.registry().unit("job").is_none());

    let actions: Vec<String> = c
        .decisions()
        .query(Some("job"), 100)
        .iter()
        .filter(|d| {
            matches!(
                d.action,
                Action::CreateUnit { .. } | Action::SetUnit { .. } | Action::RemoveUnit { .. }
            )
        })
        .map(|d| d.to_string())
        .collect();
    assert_eq!(actions.len(), 3, "{actions:#?}");
    assert!(actions[1].contains("cpus 1.5 -> 2"), "{}", actions[1]);
    assert!(
        actions.iter().all(|a| a.contains("uid 0 asked")),
        "{actions:#?}"
    );
}

#[test]
fn run_time_units_are_checked_as_the_config_is_and_by_who_asks() {
    let sim = SimPlatform::new(topo8(), "atoll-rt-check", ManualClock::new());
    let mut c = started(&sim);
    let cpus = |c: f64| UnitSettings {
        cpus: Some(c),
        ..Default::default()
    };
    let (code, msg) = refused(ask(&mut c, ROOT, unit_add("big", "a", cpus(4.0))));
    assert_eq!(code, ErrorCode::BadRequest);
    assert!(msg.contains("unit.big.cpus"), "{msg}");
    // api has 1 of a's 3 CPUs: 2 more fit, 2.5 do not.
    let (_, msg) = refused(ask(&mut c, ROOT, unit_add("big", "a", cpus(2.5))));
    assert!(msg.contains("overcommit"), "{msg}");
    reply(ask(&mut c, ROOT, unit_add("fits", "a", cpus(2.0))));
    let bad_memory = UnitSettings {
        memory_min: Some(2 << 20),
        memory_max: Some(1 << 20),
        ..Default::default()
    };
    let (_, msg) = refused(ask(&mut c, ROOT, unit_add("m", "b", bad_memory)));
    assert!(msg.contains("unit.m.memory_max"), "{msg}");
    let (code, _) = refused(ask(&mut c, ROOT, unit_add("host", "b", cpus(1.0))));
    assert_eq!(code, ErrorCode::BadRequest, "a reserved name");

    let set_api = Request::UnitSet {
        unit: "api".into(),
        settings: cpus(2.0),
    };
    let (_, msg) = refused(ask(&mut c, ROOT, set_api));
    assert!(
        msg.contains("configuration file") && msg.contains("reload"),
        "{msg}"
    );
    let (_, msg) = refused(ask(&mut c, ROOT, Request::UnitRm { unit: "api".into() }));
    assert!(msg.contains("configured"), "{msg}");

    // A user: limits in an island that takes users' units, no protection,
    // and only its own units.
    let alice = user(1000);
    let (code, msg) = refused(ask(&mut c, alice, unit_add("mine", "a", cpus(0.5))));
    assert_eq!(code, ErrorCode::PermissionDenied, "{msg}");
    let capped = UnitSettings {
        cpu_cap: Some(1.0),
        memory_high: Some(256 << 20),
        ..Default::default()
    };
    let (code, _) = refused(ask(&mut c, alice, unit_add("mine", "b", capped.clone())));
    assert_eq!(
        code,
        ErrorCode::PermissionDenied,
        "island b takes no users' units"
    );
    reply(ask(&mut c, alice, unit_add("mine", "a", capped)));
    let heavier = UnitSettings {
        weight: Some(500),
        ..Default::default()
    };
    let set_mine = |settings| Request::UnitSet {
        unit: "mine".into(),
        settings,
    };
    let (code, _) = refused(ask(&mut c, alice, set_mine(heavier)));
    assert_eq!(code, ErrorCode::PermissionDenied);
    let lighter = UnitSettings {
        weight: Some(50),
        ..Default::default()
    };
    reply(ask(&mut c, alice, set_mine(lighter.clone())));
    let (code, _) = refused(ask(&mut c, user(1001), set_mine(lighter)));
    assert_eq!(code, ErrorCode::PermissionDenied, "not bob's unit");
    let (code, _) = refused(ask(
        &mut c,
        user(1001),
        Request::UnitRm {
            unit: "fits".into(),
        },
    ));
    assert_eq!(code, ErrorCode::PermissionDenied, "root's unit");
    reply(ask(
        &mut c,
        alice,
        Request::UnitRm {
            unit: "mine".into(),
        },
    ));
}

#[test]
fn overlays_span_units_made_at_run_time() {
    let sim = SimPlatform::new(topo8(), "atoll-rt-overlays", ManualClock::new());
    let mut c = started(&sim);
    reply(ask(
        &mut c,
        ROOT,
        unit_add("job", "b", UnitSettings::default()),
    ));
    // A unit `atoll run` made (adopt into a new unit) joins as well.
    let pid = sim.spawn("runner", 0, None);
    let adopt = Request::Adopt {
        unit: "ran".into(),
        pid,
        island: Some("a".into()),
        network: None,
    };
    reply(ask(&mut c, ROOT, adopt));
    let add = Request::OverlayAdd {
        overlay: "shop".into(),
        settings: latency_over(&["job", "ran", "api"]),
    };
    let r = reply(ask(&mut c, ROOT, add));
    let Reply::Overlay { overlay } = r else {
        panic!("{r:?}")
    };
    assert_eq!(overlay.units, ["b/job", "a/ran", "a/api"]);
    assert_eq!(overlay.priority, 4);

    let ran = GroupPath::unit(&n("a"), &n("ran"));
    let planned = sim.settings(&ran).unwrap().cpu_weight;
    let tune = Request::Coordinate {
        from: None,
        message: Message::Tune {
            resource: Resource::CpuTime,
            dir: Direction::Up,
            overlay: n("shop"),
            unit: n("ran"),
        },
    };
    let r = reply(ask(&mut c, ROOT, tune));
    let Reply::Coordinated {
        reply: answer,
        text,
    } = r
    else {
        panic!("{r:?}")
    };
    assert!(answer.is_ack(), "{text}");
    assert!(
        sim.settings(&ran).unwrap().cpu_weight > Some(100),
        "the tune reached the run-time unit's group"
    );

    let (_, msg) = refused(ask(&mut c, ROOT, Request::UnitRm { unit: "job".into() }));
    assert!(msg.contains("overlay shop"), "{msg}");
    let (code, _) = refused(ask(
        &mut c,
        user(1000),
        Request::OverlayRm {
            overlay: "shop".into(),
        },
    ));
    assert_eq!(code, ErrorCode::PermissionDenied);

    let fewer = OverlaySettings {
        units: Some(vec!["api".into()]),
        priority: Some(9),
        ..Default::default()
    };
    let set = Request::OverlaySet {
        overlay: "shop".into(),
        settings: fewer,
    };
    let Reply::Overlay { overlay } = reply(ask(&mut c, ROOT, set)) else {
        panic!("not an overlay")
    };
    assert_eq!(
        (overlay.units, overlay.priority),
        (vec!["a/api".to_string()], 9)
    );
    assert_eq!(
        sim.settings(&ran).unwrap().cpu_weight,
        planned,
        "what the overlay tuned on a unit it left is undone"
    );
    reply(ask(&mut c, ROOT, Request::UnitRm { unit: "job".into() }));
    let two = OverlaySettings {
        throughput_floor: Some(5.0),
        ..latency_over(&["api"])
    };
    let (_, msg) = refused(ask(
        &mut c,
        ROOT,
        Request::OverlaySet {
            overlay: "shop".into(),
            settings: two,
        },
    ));
    assert!(msg.contains("exactly one"), "{msg}");
    reply(ask(
        &mut c,
        ROOT,
        Request::OverlayRm {
            overlay: "shop".into(),
        },
    ));
    assert!(c
        .coordination()
        .manager()
        .unwrap()
        .overlay(&n("shop"))
        .is_none());
    assert!(c.registry().runtime_overlays().is_empty());
    // A `register` message over a run-time unit works as well; such an
    // overlay is removed, not changed, with the run-time requests.
    let register = Request::Coordinate {
        from: None,
        message: Message::Register {
            overlay: atoll_core::coord::OverlaySpec {
                name: n("msg"),
                priority: 1,
                units: vec![(n("a"), n("ran"))],
                property: atoll_core::coord::Property::ThroughputFloor { per_s: 5.0 },
            },
        },
    };
    let Reply::Coordinated {
        reply: answer,
        text,
    } = reply(ask(&mut c, ROOT, register))
    else {
        panic!("not coordinated")
    };
    assert!(answer.is_ack(), "{text}");
    let set_msg = Request::OverlaySet {
        overlay: "msg".into(),
        settings: OverlaySettings {
            priority: Some(2),
            ..Default::default()
        },
    };
    let (_, msg) = refused(ask(&mut c, ROOT, set_msg));
    assert!(
        msg.contains("registered with a coordination message"),
        "{msg}"
    );
    reply(ask(
        &mut c,
        ROOT,
        Request::OverlayRm {
            overlay: "msg".into(),
        },
    ));
    assert!(c
        .coordination()
        .manager()
        .unwrap()
        .overlay(&n("msg"))
        .is_none());
    // An overlay decision names its units, so `atoll why ran` shows it.
    let about_ran = c.decisions().query(Some("ran"), 100);
    assert!(
        about_ran
            .iter()
            .any(|d| matches!(d.action, Action::SetOverlay { .. })),
        "{about_ran:#?}"
    );
}

/// A controller on `sim` that saves its state in `dir`.
fn with_state(sim: &SimPlatform, dir: &std::path::Path) -> Controller {
    let env = Env {
        backend: Box::new(sim.clone()),
        procs: Box::new(sim.clone()),
        tasks: Box::new(sim.clone()),
        system: Box::new(sim.clone()),
        clock: Arc::new(sim.clock()),
    };
    let opts = Options {
        state_dir: Some(dir.to_path_buf()),
        self_origin: CgroupMembership::parse("0::/daemon.slice\n").unwrap(),
        self_pid: 1,
        topology: topo8(),
    };
    Controller::new(env, spec(), opts)
}

#[test]
fn run_time_units_and_overlays_survive_a_crash() {
    let sim = SimPlatform::new(topo8(), "atoll-rt-crash", ManualClock::new());
    let dir = tempfile::tempdir().unwrap();
    let mut c = with_state(&sim, dir.path());
    c.start().unwrap();
    let settings = UnitSettings {
        cpus: Some(1.0),
        cpu_cap: Some(2.0),
        ..Default::default()
    };
    reply(ask(&mut c, ROOT, unit_add("job", "b", settings)));
    let pid = sim.spawn("worker", 0, None);
    let adopt = Request::Adopt {
        unit: "job".into(),
        pid,
        island: None,
        network: None,
    };
    reply(ask(&mut c, ROOT, adopt));
    let add = Request::OverlayAdd {
        overlay: "shop".into(),
        settings: latency_over(&["job", "api"]),
    };
    reply(ask(&mut c, ROOT, add));
    let before = reply(ask(&mut c, ROOT, Request::ConfigDump {}));
    // The crash: no teardown.
    drop(c);

    let mut c = with_state(&sim, dir.path());
    c.start().unwrap();
    let (job, origin_of_job) = c.registry().unit("job").expect("the unit is back");
    assert_eq!(origin_of_job, atoll_proto::UnitOrigin::Runtime);
    assert_eq!(job.entitlement.cpus, Some(1.0));
    assert_eq!(job.entitlement.cpu_cap, Some(2.0));
    let group = GroupPath::unit(&n("b"), &n("job"));
    assert_eq!(sim.location(pid), Some(Location::Group(group.clone())));
    assert_eq!(sim.settings(&group).unwrap().cpu_weight, Some(100));
    let m = c.coordination().manager().unwrap();
    let shop = m
        .overlay(&n("shop"))
        .expect("the overlay is registered again");
    assert_eq!(shop.units, vec![(n("b"), n("job")), (n("a"), n("api"))]);
    assert_eq!(reply(ask(&mut c, ROOT, Request::ConfigDump {})), before);
    // After the crash it is still declared: empty, it stays.
    sim.exit(pid).unwrap();
    past_the_grace(&sim, &mut c);
    assert!(
        c.registry().unit("job").is_some(),
        "a declared unit stays when empty"
    );
    reply(ask(
        &mut c,
        ROOT,
        Request::OverlayRm {
            overlay: "shop".into(),
        },
    ));
    reply(ask(&mut c, ROOT, Request::UnitRm { unit: "job".into() }));
    c.teardown().unwrap();
}

#[test]
fn a_reload_keeps_run_time_units_and_registers_their_overlays_again() {
    let sim = SimPlatform::new(topo8(), "atoll-rt-reload", ManualClock::new());
    let mut c = started(&sim);
    reply(ask(
        &mut c,
        ROOT,
        unit_add("job", "b", UnitSettings::default()),
    ));
    let add = Request::OverlayAdd {
        overlay: "shop".into(),
        settings: latency_over(&["job", "api"]),
    };
    reply(ask(&mut c, ROOT, add));
    let mut next = spec();
    next.units[0].entitlement.cpus = Some(0.5);
    c.reload(next.clone()).unwrap();
    assert!(c.registry().unit("job").is_some());
    let shop = c
        .coordination()
        .manager()
        .unwrap()
        .overlay(&n("shop"))
        .cloned();
    assert_eq!(
        shop.expect("registered again").units,
        vec![(n("b"), n("job")), (n("a"), n("api"))]
    );
    // An island that goes takes its run-time units, and their overlays.
    next.islands.retain(|i| i.name.as_str() != "b");
    c.reload(next).unwrap();
    assert!(c.registry().unit("job").is_none());
    assert!(c.registry().runtime_overlays().is_empty());
    assert!(c
        .coordination()
        .manager()
        .unwrap()
        .overlay(&n("shop"))
        .is_none());
}

#[test]
fn config_dump_is_the_effective_platform() {
    let sim = SimPlatform::new(topo8(), "atoll-rt-dump", ManualClock::new());
    let mut c = started(&sim);
    let settings = UnitSettings {
        cpus: Some(0.5),
        memory_high: Some(3 << 29),
        io_weight: Some(300),
        ..Default::default()
    };
    reply(ask(&mut c, ROOT, unit_add("job", "b", settings)));
    let add = Request::OverlayAdd {
        overlay: "shop".into(),
        settings: OverlaySettings {
            react_pressure: Some(25.0),
            ..latency_over(&["job"])
        },
    };
    reply(ask(&mut c, ROOT, add));
    let Reply::Config { toml } = reply(ask(&mut c, user(1000), Request::ConfigDump {})) else {
        panic!("not a config")
    };
    let back =
        atoll_config::parse(&toml, "dump", &topo8()).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    assert_eq!(back, c.registry().effective_spec());
    assert_eq!(back.units.len(), 2, "{toml}");
    assert_eq!(back.units[1].entitlement.memory.high, Some(3 << 29));
    assert_eq!(back.overlays[0].react.pressure, Some(25.0));
    assert!(toml.contains("[unit.job]"), "{toml}");
}

#[test]
fn an_overlay_added_at_run_time_may_measure_its_slo_and_name_best_effort_units() {
    let sim = SimPlatform::new(topo8(), "atoll-rt-slo", ManualClock::new());
    let mut c = started(&sim);
    let job = UnitSettings {
        cpus: Some(1.0),
        ..Default::default()
    };
    reply(ask(&mut c, ROOT, unit_add("job", "a", job)));
    // A key of another source than the one chosen is refused by its key.
    let (_, msg) = refused(ask(
        &mut c,
        ROOT,
        Request::OverlayAdd {
            overlay: "bad".into(),
            settings: OverlaySettings {
                slo: Some(Box::new(SloSettings {
                    probe: Some("tcp://127.0.0.1:1".into()),
                    ..Default::default()
                })),
                ..latency_over(&["api"])
            },
        },
    ));
    assert!(msg.contains("overlay.bad.probe"), "{msg}");
    let (_, msg) = refused(ask(
        &mut c,
        ROOT,
        Request::OverlayAdd {
            overlay: "bad".into(),
            settings: OverlaySettings {
                slo: Some(Box::new(SloSettings {
                    best_effort: Some(vec!["job".into()]),
                    be_grow_above: Some(0.05),
                    ..Default::default()
                })),
                ..latency_over(&["api"])
            },
        },
    ));
    assert!(msg.contains("be_grow_above"), "{msg}");

    let add = Request::OverlayAdd {
        overlay: "shop".into(),
        settings: OverlaySettings {
            slo: Some(Box::new(SloSettings {
                latency_source: Some("probe".into()),
                probe: Some("tcp://127.0.0.1:1".into()),
                probe_every_ms: Some(1000),
                stale_after_ms: Some(5000),
                best_effort: Some(vec!["job".into()]),
                be_steps: Some(4),
                ..Default::default()
            })),
            ..latency_over(&["api"])
        },
    };
    reply(ask(&mut c, ROOT, add));
    sim.advance(DEFAULT_EPOCH);
    c.epoch();
    let show = |c: &mut Controller| match reply(ask(
        c,
        ROOT,
        Request::OverlayShow {
            overlay: "shop".into(),
        },
    )) {
        Reply::OverlayShown(s) => *s,
        other => panic!("{other:?}"),
    };
    let s = show(&mut c);
    assert_eq!(
        (
            s.source.as_str(),
            s.best_effort.clone(),
            s.be_level,
            s.be_steps,
            s.stale_after_ms
        ),
        ("probe", vec!["job".to_string()], Some(0), 4, Some(5000)),
        "{s:?}"
    );
    let Reply::Config { toml } = reply(ask(&mut c, ROOT, Request::ConfigDump {})) else {
        panic!("not a config")
    };
    for key in [
        "latency_source = \"probe\"",
        "stale_after_ms = 5000",
        "be_steps = 4",
    ] {
        assert!(toml.contains(key), "{key} in:\n{toml}");
    }
    // A set without SLO keys keeps them; one with them replaces them all.
    let set = |settings| Request::OverlaySet {
        overlay: "shop".into(),
        settings,
    };
    reply(ask(
        &mut c,
        ROOT,
        set(OverlaySettings {
            priority: Some(7),
            ..Default::default()
        }),
    ));
    assert_eq!(show(&mut c).source, "probe");
    reply(ask(
        &mut c,
        ROOT,
        set(OverlaySettings {
            slo: Some(Box::new(SloSettings {
                latency_source: Some("report".into()),
                ..Default::default()
            })),
            ..Default::default()
        }),
    ));
    sim.advance(DEFAULT_EPOCH);
    c.epoch();
    let s = show(&mut c);
    assert_eq!(
        (s.source.as_str(), s.best_effort.is_empty(), s.be_level),
        ("report", true, None),
        "{s:?}"
    );
}
