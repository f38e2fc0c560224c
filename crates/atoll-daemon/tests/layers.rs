//! A group's settings come from every layer at every write: a change in one
//! layer never undoes another's, not even for one write. Checked on the
//! simulated backend with every write recorded: a frozen application whose
//! unit has a communication boost keeps both through a change of its
//! isolation grant (its island lends a CPU to another).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use atoll_core::awm::{Needs, Recipe, WorkingMode};
use atoll_core::backend::{
    Actuator, BackendError, BackendKind, Capabilities, Fallback, FreezeState, GroupStats, Monitor,
    StatSelect,
};
use atoll_core::clock::ManualClock;
use atoll_core::comm::{CommSpec, Mechanism, NetError, NetMonitor, UnitNetSample};
use atoll_core::coord::{Message, Property, Resource};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{
    AppsSpec, Entitlement, HostSpec, IslandSpec, IsolationMode, IsolationSpec, OverlayConfig,
    PlatformSpec, ReactPolicy, SchedPolicy, UnitSpec, DEFAULT_EPOCH,
};
use atoll_core::Name;
use atoll_daemon::controller::{Controller, Env, Options};
use atoll_proto::apps::{AppRunState, RecipeRef};
use atoll_proto::{Reply, Request};
use atoll_sim::SimPlatform;
use common::sim::{ask, n, reply, set, topo8, ROOT};

/// Every `apply` the daemon makes, in order.
type Writes = Arc<Mutex<Vec<(GroupPath, GroupSettings)>>>;

/// The simulator as the backend, recording every write.
struct Recording {
    sim: SimPlatform,
    writes: Writes,
}

impl Actuator for Recording {
    fn kind(&self) -> BackendKind {
        self.sim.kind()
    }
    fn capabilities(&self) -> Capabilities {
        self.sim.capabilities()
    }
    fn root_name(&self) -> &str {
        self.sim.root_name()
    }
    fn apply(
        &mut self,
        path: &GroupPath,
        s: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        self.writes.lock().unwrap().push((path.clone(), s.clone()));
        self.sim.apply(path, s)
    }
    fn remove(&mut self, path: &GroupPath) -> Result<(), BackendError> {
        self.sim.remove(path)
    }
    fn move_process(&mut self, pid: u32, to: &GroupPath) -> Result<(), BackendError> {
        self.sim.move_process(pid, to)
    }
    fn restore_process(&mut self, pid: u32, origin: &CgroupMembership) -> Result<(), BackendError> {
        self.sim.restore_process(pid, origin)
    }
    fn release(&mut self) -> Result<Vec<String>, BackendError> {
        self.sim.release()
    }
    fn outside_changes(&self) -> Vec<String> {
        self.sim.outside_changes()
    }
    fn set_outside_changes(&mut self, changes: Vec<String>) {
        self.sim.set_outside_changes(changes)
    }
}

impl Monitor for Recording {
    fn exists(&self, path: &GroupPath) -> bool {
        self.sim.exists(path)
    }
    fn children(&self, path: &GroupPath) -> Result<Vec<String>, BackendError> {
        self.sim.children(path)
    }
    fn processes(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        self.sim.processes(path)
    }
    fn stats_of(&self, path: &GroupPath, select: StatSelect) -> Result<GroupStats, BackendError> {
        self.sim.stats_of(path, select)
    }
    fn freeze_state(&self, path: &GroupPath) -> Result<Option<FreezeState>, BackendError> {
        self.sim.freeze_state(path)
    }
}

/// A network monitor that reports data waiting for the units named.
#[derive(Clone, Default)]
struct Waiting(Arc<Mutex<Vec<Name>>>);

impl NetMonitor for Waiting {
    fn sample(
        &mut self,
        units: &BTreeMap<Name, Vec<u32>>,
    ) -> Result<BTreeMap<Name, UnitNetSample>, NetError> {
        let busy = self.0.lock().unwrap();
        Ok(units
            .keys()
            .map(|u| {
                let s = if busy.contains(u) {
                    UnitNetSample {
                        recv_queued: 1 << 20,
                        bytes_received: 1 << 20,
                        sockets: 1,
                        ..Default::default()
                    }
                } else {
                    UnitNetSample::default()
                };
                (u.clone(), s)
            })
            .collect())
    }
}

/// A configured unit entitled to one CPU.
fn unit(name: &str, island: &str) -> UnitSpec {
    UnitSpec {
        name: n(name),
        island: n(island),
        entitlement: Entitlement {
            cpus: Some(1.0),
            ..Default::default()
        },
        adopt: vec![],
        rt_priority: None,
    }
}

/// Host CPU 0; island `a` (1-3) with unit `front`, island `b` (4-7) with
/// unit `back` and the applications; overlay `shop` over both units;
/// `isolate` mode; the `weight` boost for every unit; one recipe of 2 CPUs.
fn spec() -> PlatformSpec {
    let mode = WorkingMode {
        power_watts: None,
        id: 0,
        name: "m0".into(),
        value: 1.0,
        needs: Needs {
            cpu_quota: 2.0,
            threads: Some(2),
            exclusive_cpus: false,
            memory_bytes: 0,
            islands: None,
        },
    };
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![
            IslandSpec {
                name: n("a"),
                cpus: set("1-3"),
                mems: set("0"),
                policy: SchedPolicy::Fair,
                arbitration: Default::default(),
                exclusive: false,
                access: Default::default(),
            },
            IslandSpec {
                name: n("b"),
                cpus: set("4-7"),
                mems: set("1"),
                policy: SchedPolicy::Fair,
                arbitration: Default::default(),
                exclusive: false,
                access: Default::default(),
            },
        ],
        units: vec![unit("front", "a"), unit("back", "b")],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: IsolationSpec {
            mode: IsolationMode::Isolate,
            ..Default::default()
        },
        overlays: vec![OverlayConfig {
            name: n("shop"),
            priority: 5,
            units: vec![n("front"), n("back")],
            property: Property::LatencyPercentile {
                percentile: 99.0,
                bound_us: 1000,
            },
            slo: Default::default(),
            cap_timing: Default::default(),
            react: ReactPolicy::default(),
        }],
        comm: Some(CommSpec {
            recipient: true,
            mechanism: Mechanism::Weight,
            max_boosted: 1,
            ..CommSpec::default()
        }),
        apps: AppsSpec {
            recipes: vec![Recipe {
                name: n("fixed"),
                priority: 0,
                modes: vec![mode],
            }],
            islands: Some(vec![n("b")]),
            ..Default::default()
        },
        network: Vec::new(),
        frequency: Default::default(),
    }
}

#[test]
fn an_isolation_change_keeps_a_comm_boost_and_a_frozen_app() {
    let sim = SimPlatform::new(topo8(), "atoll-layers", ManualClock::new());
    let writes: Writes = Arc::default();
    let env = Env {
        backend: Box::new(Recording {
            sim: sim.clone(),
            writes: writes.clone(),
        }),
        procs: Box::new(sim.clone()),
        tasks: Box::new(sim.clone()),
        system: Box::new(sim.clone()),
        clock: Arc::new(sim.clock()),
    };
    let opts = Options {
        state_dir: None,
        self_origin: CgroupMembership::parse("0::/daemon.slice\n").unwrap(),
        self_pid: 1,
        topology: topo8(),
    };
    let net = Waiting::default();
    let mut c = Controller::new(env, spec(), opts);
    c.set_net_monitor(Box::new(net.clone()), "scripted");
    c.start().unwrap();
    let epochs = |c: &mut Controller, k: usize| {
        for _ in 0..k {
            sim.advance(DEFAULT_EPOCH);
            c.epoch();
        }
    };
    // Three applications of 2 CPUs where 3 are free: two wait, frozen.
    let mut apps = Vec::new();
    for _ in 0..3 {
        let pid = sim.spawn("worker", 0, None);
        sim.set_busy(pid, true).unwrap();
        let r = ask(
            &mut c,
            ROOT,
            Request::AppRegister {
                recipe: RecipeRef::Named("fixed".into()),
                pid: Some(pid),
            },
        );
        match reply(r) {
            Reply::AppRegistered { app, .. } => apps.push(app),
            other => panic!("{other:?}"),
        }
    }
    epochs(&mut c, 5);
    let blocked = apps
        .iter()
        .copied()
        .find(
            |&app| match reply(ask(&mut c, ROOT, Request::AppPoll { app, after: None })) {
                Reply::AppAssignment(a) => matches!(a.state, AppRunState::Waiting { .. }),
                other => panic!("{other:?}"),
            },
        )
        .expect("one application waits");
    let unit = format!("app-{blocked}");
    let group = GroupPath::from_relative(&format!("b/{unit}"));
    let settings = || sim.settings(&group).expect("the waiting app has a unit");
    assert!(settings().frozen);
    // Data waits for it: it is boosted.
    net.0.lock().unwrap().push(n(&unit));
    epochs(&mut c, 2);
    let boosted = settings();
    assert!(boosted.frozen);
    let weight = boosted.cpu_weight.unwrap_or(100);
    assert!(weight > 100, "{boosted:?}");

    // Island a borrows a CPU of island b: the isolation model lays island
    // b out again, and the waiting application's CPUs change.
    let mark = writes.lock().unwrap().len();
    let borrow = Message::BorrowPreferred {
        resource: Resource::Cores,
        overlay: n("shop"),
        island: n("b"),
        amount: 1,
    };
    let r = ask(
        &mut c,
        ROOT,
        Request::Coordinate {
            from: Some("a".into()),
            message: borrow,
        },
    );
    match reply(r) {
        Reply::Coordinated { reply, text } => assert!(reply.is_ack(), "{text}"),
        other => panic!("{other:?}"),
    }
    epochs(&mut c, 10);
    let after: Vec<GroupSettings> = writes.lock().unwrap()[mark..]
        .iter()
        .filter(|(p, _)| *p == group)
        .map(|(_, s)| s.clone())
        .collect();
    assert!(
        after.iter().any(|s| s.cpus != boosted.cpus),
        "the isolation grant of {group} did not change: {after:#?}"
    );
    for s in &after {
        assert!(s.frozen, "a write thawed {group}: {s:?}");
        assert_eq!(
            s.cpu_weight.unwrap_or(100),
            weight,
            "a write dropped the boost of {group}: {s:?}"
        );
    }
    assert!(settings().frozen);
}
