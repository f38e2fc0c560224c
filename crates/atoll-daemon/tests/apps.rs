//! Reconfigurable applications in the control loop, on the simulated
//! backend: registration and batching, grants as units with their
//! `cpu.max`, blocked applications suspended and resumed, goal gaps that
//! make an application grow, moves between islands, CPUs of their own,
//! permissions, and exited processes cleaned up.

mod common;

use std::time::Duration;

use atoll_core::awm::{Needs, Recipe, WorkingMode};
use atoll_core::clock::ManualClock;
use atoll_core::decision::Reason;
use atoll_core::plan::GroupPath;
use atoll_core::spec::{
    AppsSpec, Entitlement, HostSpec, IslandSpec, PlatformSpec, SchedPolicy, UnitSpec, DEFAULT_EPOCH,
};
use atoll_daemon::command::Caller;
use atoll_daemon::controller::Controller;
use atoll_proto::apps::{AppAssignment, AppRunState, AppStatus, RecipeRef};
use atoll_proto::{ErrorCode, Reply, Request, ResponseEnvelope};
use atoll_sim::SimPlatform;
use common::sim::{ask, controller, n, reply, set, topo8 as topo, user, ROOT};

fn mode(id: u8, value: f64, quota: f64) -> WorkingMode {
    WorkingMode {
        power_watts: None,
        id,
        name: format!("m{id}"),
        value,
        needs: Needs {
            cpu_quota: quota,
            threads: Some(atoll_core::num::saturating_u32(quota.ceil())),
            exclusive_cpus: false,
            memory_bytes: 0,
            islands: None,
        },
    }
}

fn recipe(name: &str, priority: u8, modes: Vec<WorkingMode>) -> Recipe {
    Recipe {
        name: n(name),
        priority,
        modes,
    }
}

/// Host CPU 0; island `a` (1-3, node 0) with unit `svc` entitled to 1 CPU
/// (applications get 2 of a), island `b` (4-7, node 1, 4 CPUs).
/// Recipes: `fixed` (one mode of 2 CPUs), `scalable` (1, 2 or 4 CPUs, the
/// smallest valued most: it grows only when its goal asks), `bigb` (4 CPUs
/// on b, priority 0), `low` (2 CPUs anywhere, priority 1), `pinned` (2
/// CPUs of its own and 256 MiB on b).
fn spec(islands: Option<&[&str]>) -> PlatformSpec {
    let island = |name: &str, cpus: &str, mems: &str| IslandSpec {
        name: n(name),
        cpus: set(cpus),
        mems: set(mems),
        policy: SchedPolicy::Fair,
        arbitration: Default::default(),
        exclusive: false,
        access: Default::default(),
    };
    let mut pinned = mode(0, 1.0, 2.0);
    pinned.needs.exclusive_cpus = true;
    pinned.needs.memory_bytes = 256 << 20;
    pinned.needs.islands = Some(vec![n("b")]);
    let mut bigb = mode(0, 1.0, 4.0);
    bigb.needs.islands = Some(vec![n("b")]);
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![island("a", "1-3", "0"), island("b", "4-7", "1")],
        units: vec![UnitSpec {
            name: n("svc"),
            island: n("a"),
            entitlement: Entitlement {
                cpus: Some(1.0),
                ..Default::default()
            },
            adopt: vec![],
            rt_priority: None,
        }],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm: None,
        apps: AppsSpec {
            recipes: vec![
                recipe("fixed", 0, vec![mode(0, 1.0, 2.0)]),
                recipe(
                    "scalable",
                    0,
                    vec![mode(0, 0.6, 1.0), mode(1, 0.5, 2.0), mode(2, 0.4, 4.0)],
                ),
                recipe("bigb", 0, vec![bigb]),
                recipe("low", 1, vec![mode(0, 1.0, 2.0)]),
                recipe("pinned", 0, vec![pinned]),
            ],
            islands: islands.map(|l| l.iter().map(|i| n(i)).collect()),
            ..Default::default()
        },
        network: Vec::new(),
        frequency: Default::default(),
    }
}

struct Rig {
    sim: SimPlatform,
}

impl Rig {
    fn new() -> Self {
        Self {
            sim: SimPlatform::new(topo(), "atoll-apps", ManualClock::new()),
        }
    }

    fn start(&self, spec: PlatformSpec) -> Controller {
        spec.validate(&topo()).unwrap();
        let mut c = controller(&self.sim, spec, topo());
        c.start().unwrap();
        c
    }

    fn epochs(&self, c: &mut Controller, k: usize) {
        for _ in 0..k {
            self.sim.advance(DEFAULT_EPOCH);
            c.epoch();
        }
    }

    /// Epochs for `d` of simulated time.
    fn run_for(&self, c: &mut Controller, d: Duration) {
        let k = d.as_nanos().div_ceil(DEFAULT_EPOCH.as_nanos()) as usize;
        self.epochs(c, k);
    }

    fn group(&self, path: &str) -> Option<atoll_core::plan::GroupSettings> {
        self.sim.settings(&GroupPath::from_relative(path))
    }

    /// `cpu.max` quota of a group, in CPUs.
    fn quota(&self, path: &str) -> f64 {
        let s = self
            .group(path)
            .unwrap_or_else(|| panic!("no group {path}"));
        let m = s.cpu_max.unwrap_or_else(|| panic!("{path} has no cpu.max"));
        m.quota_us as f64 / m.period_us as f64
    }

    fn frozen(&self, path: &str) -> bool {
        self.group(path)
            .unwrap_or_else(|| panic!("no group {path}"))
            .frozen
    }

    /// A busy process of `uid`.
    fn proc(&self, uid: u32) -> u32 {
        let p = self.sim.spawn("worker", uid, None);
        self.sim.set_busy(p, true).unwrap();
        p
    }

    fn location(&self, pid: u32) -> String {
        match self.sim.location(pid) {
            Some(atoll_sim::Location::Group(g)) => g.to_string(),
            other => format!("{other:?}"),
        }
    }
}

fn refused(r: ResponseEnvelope) -> ErrorCode {
    match (r.ok, r.err) {
        (None, Some(e)) => e.code,
        (ok, _) => panic!("expected an error, got {ok:?}"),
    }
}

/// `app_register` of `pid` with `recipe`, as `caller`: the raw answer.
fn ask_register(
    c: &mut Controller,
    caller: Caller,
    recipe: RecipeRef,
    pid: u32,
) -> ResponseEnvelope {
    ask(
        c,
        caller,
        Request::AppRegister {
            recipe,
            pid: Some(pid),
        },
    )
}

fn register(c: &mut Controller, caller: Caller, recipe: &str, pid: u32) -> u64 {
    let r = ask_register(c, caller, RecipeRef::Named(recipe.into()), pid);
    match reply(r) {
        Reply::AppRegistered { app, assignment } => {
            assert!(
                matches!(assignment.state, AppRunState::Waiting { .. }),
                "{assignment:?}"
            );
            app
        }
        other => panic!("{other:?}"),
    }
}

fn poll(c: &mut Controller, app: u64) -> AppAssignment {
    match reply(ask(c, ROOT, Request::AppPoll { app, after: None })) {
        Reply::AppAssignment(a) => a,
        other => panic!("{other:?}"),
    }
}

fn apps(c: &mut Controller) -> Vec<AppStatus> {
    match reply(ask(c, user(4242), Request::Apps {})) {
        Reply::Apps { apps } => apps,
        other => panic!("{other:?}"),
    }
}

/// (mode, island, quota) of a running application.
fn running(a: &AppAssignment) -> (u8, String, f64) {
    match &a.state {
        AppRunState::Running {
            mode,
            island,
            cpu_quota,
            ..
        } => (*mode, island.clone(), *cpu_quota),
        other => panic!("app {} is not running: {other:?}", a.app),
    }
}

fn waiting(a: &AppAssignment) -> bool {
    matches!(a.state, AppRunState::Waiting { .. })
}

/// Enough simulated time for a batch to be planned.
const SETTLE: Duration = Duration::from_millis(150);

#[test]
fn a_burst_of_registrations_is_planned_once_into_capped_units() {
    let rig = Rig::new();
    let mut c = rig.start(spec(None));
    let (p1, p2) = (rig.proc(1000), rig.proc(1000));
    let a1 = register(&mut c, user(1000), "scalable", p1);
    let a2 = register(&mut c, user(1000), "scalable", p2);
    assert_ne!(a1, a2);
    assert_eq!(c.app_planning_runs(), 0);
    // Nothing is planned before the quiet time (20 ms) has passed.
    c.epoch();
    assert_eq!(c.app_planning_runs(), 0);
    rig.run_for(&mut c, SETTLE);
    assert_eq!(c.app_planning_runs(), 1, "one run for the burst");
    let mut used = std::collections::BTreeMap::<String, f64>::new();
    for (app, pid) in [(a1, p1), (a2, p2)] {
        let a = poll(&mut c, app);
        assert_eq!(a.generation, 1);
        let (_, island, quota) = running(&a);
        let unit = format!("{island}/app-{app}");
        assert_eq!(rig.quota(&unit), quota, "{unit}");
        assert!(!rig.frozen(&unit));
        assert_eq!(rig.location(pid), unit);
        *used.entry(island).or_default() += quota;
    }
    // Within what each island offers applications (a: 3 CPUs - svc's 1).
    assert!(used.get("a").copied().unwrap_or(0.0) <= 2.0, "{used:?}");
    assert!(used.get("b").copied().unwrap_or(0.0) <= 4.0, "{used:?}");
    // Quiet: no more runs, no more changes.
    rig.run_for(&mut c, Duration::from_secs(2));
    assert_eq!(c.app_planning_runs(), 1);
    assert_eq!(poll(&mut c, a1).generation, 1);
    // `atoll apps` lists both, for anyone.
    let list = apps(&mut c);
    assert_eq!(list.iter().map(|s| s.app).collect::<Vec<_>>(), [a1, a2]);
    assert_eq!(list[0].name, "scalable");
    assert_eq!(list[0].pid, p1);
    assert!(list[0]
        .unit
        .as_deref()
        .unwrap()
        .ends_with(&format!("/app-{a1}")));
}

#[test]
fn a_blocked_app_is_frozen_and_resumed_when_another_is_done() {
    let rig = Rig::new();
    let mut c = rig.start(spec(Some(&["b"])));
    let pids: Vec<u32> = (0..3).map(|_| rig.proc(1000)).collect();
    let ids: Vec<u64> = pids
        .iter()
        .map(|&p| register(&mut c, user(1000), "fixed", p))
        .collect();
    rig.run_for(&mut c, SETTLE);
    assert_eq!(c.app_planning_runs(), 1);
    // b offers 4 CPUs: two apps of 2 CPUs run, the third waits, frozen.
    let states: Vec<AppAssignment> = ids.iter().map(|&a| poll(&mut c, a)).collect();
    assert_eq!(states.iter().filter(|a| waiting(a)).count(), 1);
    let (blocked, bpid) = ids
        .iter()
        .zip(&pids)
        .find(|(&a, _)| waiting(&poll(&mut c, a)))
        .map(|(&a, &p)| (a, p))
        .unwrap();
    let unit = format!("b/app-{blocked}");
    assert!(rig.frozen(&unit), "{unit} is not frozen");
    assert_eq!(rig.location(bpid), unit);
    match &poll(&mut c, blocked).state {
        AppRunState::Waiting { reason } => assert!(reason.contains("blocked"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // Frozen: it gets no CPU.
    let before = rig.sim.cpu_time(bpid).unwrap();
    rig.run_for(&mut c, Duration::from_millis(300));
    assert_eq!(rig.sim.cpu_time(bpid).unwrap(), before);
    // It stays frozen through the periodic repair pass.
    rig.run_for(&mut c, Duration::from_secs(2));
    assert!(rig.frozen(&unit));

    // One of the running ones is done: its unit goes, its process goes back
    // where it came from, and the blocked app is resumed in its place.
    let done = *ids.iter().find(|&&a| a != blocked).unwrap();
    let dpid = pids[ids.iter().position(|&a| a == done).unwrap()];
    let gen = poll(&mut c, blocked).generation;
    assert_eq!(
        reply(ask(&mut c, user(1000), Request::AppDone { app: done })),
        Reply::AppDone { app: done }
    );
    assert!(rig.group(&format!("b/app-{done}")).is_none());
    assert!(
        matches!(
            rig.sim.location(dpid),
            Some(atoll_sim::Location::Outside(_))
        ),
        "{}",
        rig.location(dpid)
    );
    rig.run_for(&mut c, SETTLE);
    let a = poll(&mut c, blocked);
    assert_eq!(running(&a), (0, "b".to_string(), 2.0));
    assert_eq!(a.generation, gen + 1);
    assert!(!rig.frozen(&unit));
    assert_eq!(rig.quota(&unit), 2.0);
    let before = rig.sim.cpu_time(bpid).unwrap();
    rig.run_for(&mut c, Duration::from_millis(300));
    assert!(rig.sim.cpu_time(bpid).unwrap() > before);
    // Every step is a decision `atoll why app-N` finds, with the policy's
    // reason.
    let why = match reply(ask(
        &mut c,
        ROOT,
        Request::Why {
            subject: Some(format!("app-{blocked}")),
            limit: None,
        },
    )) {
        Reply::Decisions { decisions } => decisions,
        other => panic!("{other:?}"),
    };
    let reasons: Vec<String> = why
        .iter()
        .filter_map(|d| match &d.why {
            Reason::Apps { detail } => Some(detail.clone()),
            _ => None,
        })
        .collect();
    assert!(reasons.iter().any(|r| r.contains("waits")), "{reasons:?}");
    assert!(
        reasons.iter().any(|r| r.contains("mode 0 on island b")),
        "{reasons:?}"
    );
}

#[test]
fn a_goal_gap_makes_an_app_grow() {
    let rig = Rig::new();
    let mut c = rig.start(spec(Some(&["b"])));
    let p = rig.proc(1000);
    let app = register(&mut c, user(1000), "scalable", p);
    rig.run_for(&mut c, SETTLE);
    // Without a goal the smallest mode is worth most.
    let a = poll(&mut c, app);
    assert_eq!(running(&a), (0, "b".into(), 1.0));
    assert_eq!(rig.quota(&format!("b/app-{app}")), 1.0);
    let report = |c: &mut Controller, cycles: u64| match reply(ask(
        c,
        user(1000),
        Request::AppReport {
            app,
            cycles,
            goal_cps: Some(100.0),
        },
    )) {
        Reply::AppReported { goal_gap, .. } => goal_gap,
        other => panic!("{other:?}"),
    };
    // On target (100 cycles per second): no new plan.
    let runs = c.app_planning_runs();
    let mut cycles = 0;
    assert_eq!(report(&mut c, cycles), 0.0);
    for _ in 0..3 {
        rig.run_for(&mut c, Duration::from_millis(510));
        cycles += 51;
        let gap = report(&mut c, cycles);
        assert!(gap.abs() < 0.05, "{gap}");
    }
    rig.run_for(&mut c, SETTLE);
    assert_eq!(c.app_planning_runs(), runs);
    // Half the goal: a gap of about 1, a new plan, a bigger mode.
    for _ in 0..3 {
        rig.run_for(&mut c, Duration::from_millis(510));
        cycles += 25;
    }
    let gap = report(&mut c, cycles);
    assert!(gap > 0.5, "{gap}");
    rig.run_for(&mut c, SETTLE);
    assert_eq!(c.app_planning_runs(), runs + 1);
    let a = poll(&mut c, app);
    let (m, _, quota) = running(&a);
    assert!(m > 0 && quota > 1.0, "{a:?}");
    assert_eq!(a.generation, 2);
    assert_eq!(rig.quota(&format!("b/app-{app}")), quota);
    let st = apps(&mut c).into_iter().find(|s| s.app == app).unwrap();
    assert_eq!(st.reconfigurations, 1);
    assert_eq!(st.goal_cps, Some(100.0));
}

#[test]
fn a_higher_priority_app_moves_a_lower_one_to_another_island() {
    let rig = Rig::new();
    let mut c = rig.start(spec(None));
    let low = rig.proc(1000);
    let l = register(&mut c, user(1000), "low", low);
    rig.run_for(&mut c, SETTLE);
    // b is emptier than a after the grant: the low app goes to b.
    assert_eq!(running(&poll(&mut c, l)).1, "b");
    let big = rig.proc(1000);
    let child = rig.sim.spawn_child(low).unwrap();
    let b = register(&mut c, user(1000), "bigb", big);
    rig.run_for(&mut c, SETTLE);
    assert_eq!(running(&poll(&mut c, b)), (0, "b".into(), 4.0));
    assert_eq!(running(&poll(&mut c, l)), (0, "a".into(), 2.0));
    // The process and its child moved; the old unit is gone.
    assert_eq!(rig.location(low), format!("a/app-{l}"));
    assert_eq!(rig.location(child), format!("a/app-{l}"));
    assert!(rig.group(&format!("b/app-{l}")).is_none());
    assert_eq!(rig.quota(&format!("a/app-{l}")), 2.0);
    let st = apps(&mut c).into_iter().find(|s| s.app == l).unwrap();
    assert_eq!(st.reconfigurations, 1);
}

#[test]
fn an_exclusive_mode_gets_cpus_of_its_own_and_its_memory() {
    let rig = Rig::new();
    let mut c = rig.start(spec(Some(&["b"])));
    let (p1, p2) = (rig.proc(0), rig.proc(0));
    let own = register(&mut c, ROOT, "pinned", p1);
    let shared = register(&mut c, ROOT, "fixed", p2);
    rig.run_for(&mut c, SETTLE);
    let own_cpus = match poll(&mut c, own).state {
        AppRunState::Running {
            cpus,
            threads,
            memory_bytes,
            ..
        } => {
            assert_eq!(threads, Some(2));
            assert_eq!(memory_bytes, 256 << 20);
            cpus
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(own_cpus, set("6-7"));
    let unit = rig.group(&format!("b/app-{own}")).unwrap();
    assert_eq!(unit.cpus, Some(set("6-7")));
    assert_eq!(unit.memory.max, Some(256 << 20));
    // The other application of the island keeps off them.
    let other = rig.group(&format!("b/app-{shared}")).unwrap();
    assert_eq!(other.cpus, Some(set("4-5")));
    // Through the periodic repair pass too.
    rig.run_for(&mut c, Duration::from_secs(2));
    assert_eq!(
        rig.group(&format!("b/app-{own}")).unwrap().cpus,
        Some(set("6-7"))
    );
    // Once it leaves, the other application gets the whole island back.
    reply(ask(&mut c, ROOT, Request::AppDone { app: own }));
    rig.run_for(&mut c, SETTLE);
    assert_eq!(rig.group(&format!("b/app-{shared}")).unwrap().cpus, None);
    match poll(&mut c, shared).state {
        AppRunState::Running { cpus, .. } => assert_eq!(cpus, set("4-7")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn only_owners_and_root_may_act_on_an_application() {
    let rig = Rig::new();
    let mut c = rig.start(spec(None));
    let mine = rig.proc(1000);
    let theirs = rig.proc(2000);
    // Someone else's process.
    let r = ask_register(&mut c, user(1000), RecipeRef::Named("fixed".into()), theirs);
    assert_eq!(refused(r), ErrorCode::PermissionDenied);
    // No such process, no such recipe, a recipe that can never run.
    let r = ask_register(&mut c, user(1000), RecipeRef::Named("fixed".into()), 99_999);
    assert_eq!(refused(r), ErrorCode::NotFound);
    let r = ask_register(&mut c, user(1000), RecipeRef::Named("nope".into()), mine);
    assert_eq!(refused(r), ErrorCode::NotFound);
    let r = ask_register(
        &mut c,
        user(1000),
        RecipeRef::Inline(recipe("huge", 0, vec![mode(0, 1.0, 16.0)])),
        mine,
    );
    assert_eq!(refused(r), ErrorCode::BadRequest);
    // A user's inline recipe does not outrank the config's recipes.
    let r = ask_register(
        &mut c,
        user(1000),
        RecipeRef::Inline(recipe("mine", 0, vec![mode(0, 1.0, 1.0)])),
        mine,
    );
    let app = match reply(r) {
        Reply::AppRegistered { app, .. } => app,
        other => panic!("{other:?}"),
    };
    let st = apps(&mut c).into_iter().find(|s| s.app == app).unwrap();
    assert_eq!(st.priority, 1);
    // Twice the same process.
    let r = ask_register(&mut c, ROOT, RecipeRef::Named("fixed".into()), mine);
    assert_eq!(refused(r), ErrorCode::BadRequest);
    // Others may not poll, report or leave for it; its owner and root may.
    for req in [
        Request::AppPoll { app, after: None },
        Request::AppReport {
            app,
            cycles: 1,
            goal_cps: None,
        },
        Request::AppDone { app },
    ] {
        assert_eq!(
            refused(ask(&mut c, user(2000), req.clone())),
            ErrorCode::PermissionDenied,
            "{req:?}"
        );
    }
    reply(ask(
        &mut c,
        user(1000),
        Request::AppPoll {
            app,
            after: Some(0),
        },
    ));
    reply(ask(&mut c, ROOT, Request::AppPoll { app, after: None }));
    let r = ask(
        &mut c,
        user(1000),
        Request::AppReport {
            app,
            cycles: 1,
            goal_cps: Some(f64::NAN),
        },
    );
    assert_eq!(refused(r), ErrorCode::BadRequest);
    assert_eq!(
        refused(ask(
            &mut c,
            ROOT,
            Request::AppPoll {
                app: 77,
                after: None
            }
        )),
        ErrorCode::NotFound
    );
    reply(ask(&mut c, ROOT, Request::AppDone { app }));
    assert!(apps(&mut c).is_empty());
}

#[test]
fn an_exited_process_is_cleaned_up_and_its_room_given_out() {
    let rig = Rig::new();
    let mut c = rig.start(spec(Some(&["b"])));
    let pids: Vec<u32> = (0..3).map(|_| rig.proc(1000)).collect();
    let ids: Vec<u64> = pids
        .iter()
        .map(|&p| register(&mut c, user(1000), "fixed", p))
        .collect();
    rig.run_for(&mut c, SETTLE);
    let blocked = *ids.iter().find(|&&a| waiting(&poll(&mut c, a))).unwrap();
    let (gone, gpid) = ids
        .iter()
        .zip(&pids)
        .find(|(&a, _)| a != blocked)
        .map(|(&a, &p)| (a, p))
        .unwrap();
    rig.sim.exit(gpid).unwrap();
    rig.run_for(&mut c, SETTLE);
    assert!(apps(&mut c).iter().all(|s| s.app != gone));
    assert!(rig.group(&format!("b/app-{gone}")).is_none());
    assert_eq!(
        refused(ask(
            &mut c,
            ROOT,
            Request::AppPoll {
                app: gone,
                after: None
            }
        )),
        ErrorCode::NotFound
    );
    assert_eq!(running(&poll(&mut c, blocked)), (0, "b".into(), 2.0));
    let why = c.decisions().query(Some(&format!("app-{gone}")), 100);
    assert!(
        why.iter()
            .any(|d| matches!(&d.why, Reason::Apps { detail } if detail.contains("exited"))),
        "{why:?}"
    );
}
