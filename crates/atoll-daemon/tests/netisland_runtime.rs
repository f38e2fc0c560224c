//! Units made at run time get a class on a network island (issue 17):
//! `unit add --net-island wire --net-share ...` (the request's
//! `settings.network`, the keys of `[network.NAME.units.UNIT]`) adds an HTB
//! class through the same path as a configured unit (the island's tree
//! written again, a decision naming the class); bad classes are refused
//! before anything changes; the class survives a reload that rebuilds the
//! island and a crash (the state file); `unit rm` takes it away. On the
//! simulator and a fake interface (`FakeNet`).

mod common;

use std::sync::{Arc, Mutex};

use atoll_core::clock::ManualClock;
use atoll_daemon::controller::Controller;
use atoll_net::FakeNet;
use atoll_proto::runtime::{NetClassSettings, UnitSettings};
use atoll_proto::{ErrorCode, Request};
use atoll_sim::SimPlatform;

use crate::common::net::{daemon, fakes, root_of, spec, why};
use crate::common::sim::{ask, epochs, reply, topo8, user, ROOT};

const CONFIG: &str = r#"
[host]
cpus = "0"

[island.work]
cpus = "1-7"
user_units = true

[unit.api]
island = "work"

[network.wire]
interface = "v0"
rate_mbit = 10

[network.wire.units.api]
share = 300
"#;

fn add(unit: &str, class: Option<NetClassSettings>) -> Request {
    Request::UnitAdd {
        unit: unit.into(),
        island: Some("work".into()),
        settings: UnitSettings {
            network: class,
            ..Default::default()
        },
    }
}

fn class(island: &str, share: Option<u32>) -> NetClassSettings {
    NetClassSettings {
        island: island.into(),
        share,
        ceil_mbit: Some(5),
        prio: Some(1),
    }
}

/// (class, unit, share, ceil) of island wire, from the status.
fn classes(c: &mut Controller) -> Vec<(String, Option<String>, u32, u64)> {
    c.status().network[0]
        .classes
        .iter()
        .map(|k| (k.class.clone(), k.unit.clone(), k.share, k.ceil_bps))
        .collect()
}

/// The class minors of the tree on the fake `v0`.
fn tree(fake: &Arc<Mutex<FakeNet>>) -> Vec<(u16, u64)> {
    let f = fake.lock().unwrap();
    let plan = f.plan("v0").expect("a tree on v0");
    plan.classes.iter().map(|c| (c.minor, c.ceil_bps)).collect()
}

fn refused(r: atoll_proto::ResponseEnvelope) -> (ErrorCode, String) {
    let e = r.err.expect("a refusal");
    (e.code, e.message)
}

#[test]
fn a_run_time_unit_gets_its_class_keeps_it_across_reload_and_crash_and_loses_it_with_the_unit() {
    let (sys, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir_all(sys.path().join("class/net/v0/queues")).unwrap();
    let fake = fakes(&[("v0", "noqueue")]);
    let sim = SimPlatform::new(topo8(), "atoll-netrt", ManualClock::new());
    let mut c = daemon(&sim, CONFIG, &fake, sys.path(), state.path());
    assert_eq!(tree(&fake).len(), 2, "default and api");

    // Refused before anything changes: no such island, a bad share, a
    // user, a class on a unit the config names.
    let (code, msg) = refused(ask(&mut c, ROOT, add("job", Some(class("air", None)))));
    assert_eq!(code, ErrorCode::BadRequest);
    assert!(
        msg.contains("network island \"air\" is not configured"),
        "{msg}"
    );
    let (_, msg) = refused(ask(&mut c, ROOT, add("job", Some(class("wire", Some(0))))));
    assert!(msg.contains("share 0"), "{msg}");
    let (code, _) = refused(ask(
        &mut c,
        user(1000),
        add("job", Some(class("wire", None))),
    ));
    assert_eq!(code, ErrorCode::PermissionDenied);
    assert!(c.registry().unit("job").is_none());
    assert_eq!(tree(&fake).len(), 2);

    // Without a class: the default class, as the status says.
    reply(ask(&mut c, ROOT, add("plain", None)));
    assert_eq!(classes(&mut c).len(), 2);
    let text = c.status().network[0].classification.clone();
    assert!(
        text.contains("--net-island wire") && text.contains("default class 1:2"),
        "{text}"
    );

    // With one: a class 1:11 (api has 1:10) in the tree, a decision.
    reply(ask(
        &mut c,
        ROOT,
        add("job", Some(class("wire", Some(200)))),
    ));
    assert_eq!(
        classes(&mut c)[2],
        ("1:11".into(), Some("job".into()), 200, 5_000_000)
    );
    assert_eq!(tree(&fake)[2], (0x11, 5_000_000));
    let log = why(&c, "wire");
    assert!(
        log.iter().any(|d| d.contains(
            "run-time unit job: class 1:11 added (share 200, ceil 5000000 bit/s, prio 1)"
        ) && d.contains("add unit job")),
        "{log:#?}"
    );

    // A reload that rebuilds the island keeps it.
    let changed = CONFIG.replace("share = 300", "share = 400");
    c.reload(spec(&changed)).unwrap();
    let now = classes(&mut c);
    assert_eq!(now[1].2, 400);
    assert_eq!(now[2].1.as_deref(), Some("job"));
    assert_eq!(tree(&fake).len(), 3);

    // A crash: the next run has it back from the state file.
    drop(c);
    let mut c = daemon(&sim, &changed, &fake, sys.path(), state.path());
    assert!(c.registry().unit("job").is_some());
    assert_eq!(
        classes(&mut c)[2],
        ("1:11".into(), Some("job".into()), 200, 5_000_000)
    );
    assert_eq!(tree(&fake).len(), 3);

    // `unit rm`: the class goes, the tree is written without it.
    reply(ask(&mut c, ROOT, Request::UnitRm { unit: "job".into() }));
    assert_eq!(classes(&mut c).len(), 2);
    assert_eq!(tree(&fake).len(), 2);
    let log = why(&c, "wire");
    assert!(
        log.iter()
            .any(|d| d.contains("run-time unit job: class 1:11 removed")),
        "{log:#?}"
    );
    // Gone from the state file too: a crash now brings no class back.
    drop(c);
    let mut c = daemon(&sim, &changed, &fake, sys.path(), state.path());
    assert_eq!(classes(&mut c).len(), 2);
    c.teardown().unwrap();
    assert_eq!(root_of(&fake, "v0"), ("noqueue".into(), "0:".into()));
}

fn adopt(unit: &str, pid: u32, class: Option<NetClassSettings>) -> Request {
    Request::Adopt {
        unit: unit.into(),
        pid,
        island: Some("work".into()),
        network: class,
    }
}

#[test]
fn adopt_into_a_new_unit_gives_the_class_unit_set_takes_it_off_and_the_dump_keeps_it() {
    let (sys, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir_all(sys.path().join("class/net/v0/queues")).unwrap();
    let fake = fakes(&[("v0", "noqueue")]);
    let sim = SimPlatform::new(topo8(), "atoll-netrt2", ManualClock::new());
    let mut c = daemon(&sim, CONFIG, &fake, sys.path(), state.path());
    let (p1, p2, mine) = (
        sim.spawn("a", 0, None),
        sim.spawn("b", 0, None),
        sim.spawn("c", 1000, None),
    );

    // Refused before anything changes: a user's class, an unknown island.
    let (code, msg) = refused(ask(
        &mut c,
        user(1000),
        adopt("job", mine, Some(class("wire", None))),
    ));
    assert_eq!(code, ErrorCode::PermissionDenied, "{msg}");
    assert!(msg.contains("only root may"), "{msg}");
    let (code, msg) = refused(ask(
        &mut c,
        ROOT,
        adopt("job", p1, Some(class("air", None))),
    ));
    assert_eq!(code, ErrorCode::BadRequest);
    assert!(msg.contains("\"air\" is not configured"), "{msg}");
    assert!(c.registry().unit("job").is_none());
    assert_eq!(tree(&fake).len(), 2);

    // `atoll run`/`adopt` into a new unit: the unit and its class, by the
    // same path as `unit add` (the same decision, the request as reason).
    reply(ask(
        &mut c,
        ROOT,
        adopt("job", p1, Some(class("wire", Some(200)))),
    ));
    assert_eq!(
        classes(&mut c)[2],
        ("1:11".into(), Some("job".into()), 200, 5_000_000)
    );
    assert_eq!(tree(&fake)[2], (0x11, 5_000_000));
    let log = why(&c, "wire");
    assert!(
        log.iter().any(
            |d| d.contains("run-time unit job: class 1:11 added (share 200")
                && d.contains("adopt pid")
                && d.contains("with network wire share 200")
        ),
        "{log:#?}"
    );
    // Into the unit again with the class it has: fine; with another: no.
    reply(ask(
        &mut c,
        ROOT,
        adopt("job", p2, Some(class("wire", Some(200)))),
    ));
    let (code, msg) = refused(ask(
        &mut c,
        ROOT,
        adopt("job", p2, Some(class("wire", Some(300)))),
    ));
    assert_eq!(code, ErrorCode::BadRequest);
    assert!(
        msg.contains("unit job exists with a class on network island wire (share 200")
            && msg.contains("atoll unit set job --net-island"),
        "{msg}"
    );
    assert_eq!(classes(&mut c)[2].2, 200);

    // The dump writes the class in the island's table; loaded by another
    // daemon, it gives the same classes.
    let Some(atoll_proto::Reply::Config { toml }) = ask(&mut c, ROOT, Request::ConfigDump {}).ok
    else {
        panic!("no dump")
    };
    assert!(toml.contains("[network.wire.units.job]"), "{toml}");
    let dumped = spec(&toml);
    let wire = &dumped.network[0];
    let job = wire
        .units
        .iter()
        .find(|u| u.name.as_str() == "job")
        .unwrap();
    assert_eq!(
        (job.share, job.ceil_bps, job.prio),
        (200, Some(5_000_000), 1)
    );
    let (sys2, state2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir_all(sys2.path().join("class/net/v0/queues")).unwrap();
    let fake2 = fakes(&[("v0", "noqueue")]);
    let sim2 = SimPlatform::new(topo8(), "atoll-netrt3", ManualClock::new());
    let mut reloaded = daemon(&sim2, &toml, &fake2, sys2.path(), state2.path());
    assert_eq!(classes(&mut reloaded), classes(&mut c));
    assert_eq!(tree(&fake2), tree(&fake));
    reloaded.teardown().unwrap();

    // Taken off a unit that stays: the tree without it, a decision, the
    // state file without it (a crash brings no class back), the dump too.
    let clear = Request::UnitSet {
        unit: "job".into(),
        settings: UnitSettings {
            clear_network: true,
            ..Default::default()
        },
    };
    let both = Request::UnitSet {
        unit: "job".into(),
        settings: UnitSettings {
            clear_network: true,
            network: Some(class("wire", None)),
            ..Default::default()
        },
    };
    let (code, msg) = refused(ask(&mut c, ROOT, both));
    assert_eq!(code, ErrorCode::BadRequest);
    assert!(msg.contains("clear_network together"), "{msg}");
    reply(ask(&mut c, ROOT, clear));
    assert!(c.registry().unit("job").is_some());
    assert_eq!(classes(&mut c).len(), 2);
    assert_eq!(tree(&fake).len(), 2);
    let log = why(&c, "wire");
    assert!(
        log.iter()
            .any(|d| d.contains("run-time unit job: class 1:11 removed")
                && d.contains("set unit job: network none")),
        "{log:#?}"
    );
    let Some(atoll_proto::Reply::Config { toml }) = ask(&mut c, ROOT, Request::ConfigDump {}).ok
    else {
        panic!("no dump")
    };
    assert!(!toml.contains("[network.wire.units.job]"), "{toml}");
    assert!(toml.contains("[unit.job]"), "{toml}");
    drop(c);
    let mut c = daemon(&sim, CONFIG, &fake, sys.path(), state.path());
    assert!(c.registry().unit("job").is_some());
    assert_eq!(classes(&mut c).len(), 2);
    c.teardown().unwrap();
    assert_eq!(root_of(&fake, "v0"), ("noqueue".into(), "0:".into()));
}

/// An application registered by a process of a unit with a class: its
/// unit (`app-<id>`) gets a class of its own with that unit's share,
/// ceiling and prio on the same island, once it exists; the class goes
/// with the application. An application from a unit without a class, or
/// a user's, gets none.
#[test]
fn an_applications_unit_takes_the_class_of_the_unit_it_registered_from() {
    let config = format!(
        "{CONFIG}
[recipe.r]
[[recipe.r.mode]]
id = 0
value = 1.0
cpu_quota = 1.0
"
    );
    let (sys, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir_all(sys.path().join("class/net/v0/queues")).unwrap();
    let fake = fakes(&[("v0", "noqueue")]);
    let sim = SimPlatform::new(topo8(), "atoll-netrt4", ManualClock::new());
    let mut c = daemon(&sim, &config, &fake, sys.path(), state.path());
    let (p1, p2) = (sim.spawn("a", 0, None), sim.spawn("b", 0, None));
    reply(ask(
        &mut c,
        ROOT,
        adopt("job", p1, Some(class("wire", Some(200)))),
    ));
    reply(ask(&mut c, ROOT, adopt("plain", p2, None)));
    let register = |pid| Request::AppRegister {
        recipe: atoll_proto::apps::RecipeRef::Named("r".into()),
        pid: Some(pid),
    };
    let app = match reply(ask(&mut c, ROOT, register(p1))) {
        atoll_proto::Reply::AppRegistered { app, .. } => app,
        other => panic!("{other:?}"),
    };
    let other = match reply(ask(&mut c, ROOT, register(p2))) {
        atoll_proto::Reply::AppRegistered { app, .. } => app,
        other => panic!("{other:?}"),
    };
    // A user's process in job: its application takes no class (root's).
    let p3 = sim.spawn("c", 1000, None);
    reply(ask(&mut c, ROOT, adopt("job", p3, None)));
    let users = match reply(ask(&mut c, user(1000), register(p3))) {
        atoll_proto::Reply::AppRegistered { app, .. } => app,
        other => panic!("{other:?}"),
    };
    epochs(&sim, &mut c, 20);
    let unit = format!("app-{app}");
    assert!(c.registry().unit(&unit).is_some(), "the app runs in {unit}");
    assert!(c.registry().unit(&format!("app-{other}")).is_some());
    assert!(c.registry().unit(&format!("app-{users}")).is_some());
    let now = classes(&mut c);
    assert_eq!(
        now.len(),
        4,
        "default, api, job and root's app from job: {now:?}"
    );
    assert_eq!(now[3], ("1:12".into(), Some(unit.clone()), 200, 5_000_000));
    let log = why(&c, "wire");
    assert!(
        log.iter().any(|d| d.contains(&format!(
            "run-time unit {unit}: class 1:12 added (share 200"
        )) && d.contains("from unit job, whose network class its unit takes")),
        "{log:#?}"
    );
    // Done: the unit goes, and its class with it.
    reply(ask(&mut c, ROOT, Request::AppDone { app }));
    epochs(&sim, &mut c, 20);
    assert!(c.registry().unit(&unit).is_none());
    assert_eq!(classes(&mut c).len(), 3);
    assert_eq!(tree(&fake).len(), 3);
    c.teardown().unwrap();
}
