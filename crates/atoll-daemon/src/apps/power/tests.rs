use std::sync::Mutex;

use atoll_core::awm::{AppId, Grant, Planner, PolicyParams, Score, Weights};
use atoll_core::backend::{BackendError, GroupStats};
use atoll_core::spec::{HostSpec, PlatformSpec};
use atoll_core::{CpuSet, Name};

use super::super::tests::app;
use super::*;

/// CPU time per group, µs, as a monitor.
#[derive(Default)]
struct Cpu(Mutex<BTreeMap<String, u64>>);

impl Cpu {
    fn set(&self, g: &GroupPath, us: u64) {
        self.0.lock().unwrap().insert(g.as_str().to_string(), us);
    }
}

impl Monitor for Cpu {
    fn exists(&self, _: &GroupPath) -> bool {
        true
    }
    fn children(&self, _: &GroupPath) -> Result<Vec<String>, BackendError> {
        Ok(Vec::new())
    }
    fn processes(&self, _: &GroupPath) -> Result<Vec<u32>, BackendError> {
        Ok(Vec::new())
    }
    fn stats_of(&self, path: &GroupPath, _: StatSelect) -> Result<GroupStats, BackendError> {
        Ok(GroupStats {
            cpu_usage_us: self.0.lock().unwrap().get(path.as_str()).copied(),
            ..GroupStats::default()
        })
    }
}

fn spec() -> PlatformSpec {
    PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::parse("0").unwrap(),
            mems: CpuSet::parse("0").unwrap(),
            adopt_all: false,
        },
        islands: Vec::new(),
        units: Vec::new(),
        default_island: None,
        epoch: atoll_core::spec::DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

/// Apps with one application running in mode 0 of recipe `r` on island
/// `i`, and the policy weighing power by `power`.
fn apps(power: f64) -> (Apps, GroupPath) {
    let mut a = Apps::new(&spec());
    a.planner = Planner::new(
        Weights {
            power,
            ..Weights::default()
        },
        PolicyParams::default(),
    )
    .unwrap();
    let mut x = app();
    let island = Name::new("i").unwrap();
    x.unit_island = Some(island.clone());
    x.grant = Some(Grant {
        app: AppId(x.id),
        mode: 0,
        island,
        cpu_quota: 1.0,
        exclusive_cpus: 0,
        threads: None,
        memory_bytes: 0,
        score: Score::default(),
    });
    let g = x.group().unwrap();
    a.list.insert(x.id, x);
    (a, g)
}

#[test]
fn an_epochs_energy_is_learned_by_the_apps_cpu_time_and_used_for_planning() {
    let (mut a, g) = apps(0.5);
    let mon = Cpu::default();
    let s = Duration::from_secs;
    mon.set(&GroupPath::root(), 0);
    mon.set(&g, 0);
    a.learn_power(s(10), Some(1000.0), &mon);
    assert_eq!(a.watts.mode_watts("r", 0), None, "one sample: no interval");
    // 2 s, 80 J, 4 CPU-s busy of which the app ran 1: 10 W.
    mon.set(&GroupPath::root(), 4_000_000);
    mon.set(&g, 1_000_000);
    a.learn_power(s(12), Some(1080.0), &mon);
    assert_eq!(a.watts.mode_watts("r", 0), Some(10.0));
    assert_eq!(a.watts.watts_per_cpu(), Some(20.0));
    // Planning sees the learned figure where the recipe gives none.
    let r = a.with_learned_power(&a.list[&1].recipe);
    assert_eq!(r.modes[0].power_watts, Some(10.0));
    a.prepare_power();
    assert_eq!(a.planner.watts_per_cpu(), 20.0);
}

#[test]
fn nothing_is_learned_or_changed_without_a_power_weight_or_rapl() {
    let mon = Cpu::default();
    mon.set(&GroupPath::root(), 0);
    let s = Duration::from_secs;
    for (power, joules) in [(0.0, Some(1.0)), (0.5, None)] {
        let (mut a, g) = apps(power);
        mon.set(&g, 0);
        a.learn_power(s(1), joules.map(|j| j * 10.0), &mon);
        mon.set(&GroupPath::root(), 1_000_000);
        mon.set(&g, 1_000_000);
        a.learn_power(s(2), joules.map(|j| j * 20.0), &mon);
        assert_eq!(a.watts.modes_learned(), 0);
        let r = &a.list[&1].recipe;
        assert!(Arc::ptr_eq(&a.with_learned_power(r), r));
    }
}

#[test]
fn the_status_shows_each_modes_watts_and_where_they_come_from() {
    let (mut a, g) = apps(0.5);
    // A second mode whose recipe gives its power.
    let mut r = Recipe::clone(&a.list[&1].recipe);
    let mut m1 = r.modes[0].clone();
    m1.id = 1;
    m1.power_watts = Some(7.5);
    r.modes.push(m1);
    a.list.get_mut(&1).unwrap().recipe = Arc::new(r);
    assert_eq!(a.watts_status(), None, "nothing learned: nothing shown");
    let mon = Cpu::default();
    let s = Duration::from_secs;
    mon.set(&GroupPath::root(), 0);
    mon.set(&g, 0);
    a.learn_power(s(10), Some(1000.0), &mon);
    assert_eq!(a.watts_status(), None, "one sample: nothing learned yet");
    mon.set(&GroupPath::root(), 4_000_000);
    mon.set(&g, 1_000_000);
    a.learn_power(s(12), Some(1080.0), &mon);
    let l = a.watts_status().unwrap();
    assert_eq!(l.watts_per_cpu, Some(20.0));
    assert_eq!(
        l.modes,
        vec![
            ModeWatts {
                recipe: "r".into(),
                mode: 0,
                watts: 10.0,
                from: WattsFrom::Learned,
            },
            ModeWatts {
                recipe: "r".into(),
                mode: 1,
                watts: 7.5,
                from: WattsFrom::Recipe,
            },
        ]
    );
    assert_eq!(l.per_cpu_text(), "20.0 W per busy CPU");
    assert_eq!(
        l.mode_lines(),
        vec![
            "recipe r mode 0: 10.0 W (learned)".to_string(),
            "recipe r mode 1: 7.5 W (recipe)".to_string(),
        ]
    );
    // `atoll apps`: the watts of the mode it runs in, and which.
    let x = &a.list[&1];
    assert_eq!(
        a.mode_power(x),
        Some(AppPower {
            watts: 10.0,
            from: WattsFrom::Learned,
        })
    );
    let mut in_1 = x.clone();
    if let Some(g) = in_1.grant.as_mut() {
        g.mode = 1;
    }
    assert_eq!(
        a.mode_power(&in_1),
        Some(AppPower {
            watts: 7.5,
            from: WattsFrom::Recipe,
        })
    );
    in_1.grant = None;
    assert_eq!(a.mode_power(&in_1), None, "waiting: no mode");
    // The application gone, its learned figure stays (planning keeps it).
    a.list.clear();
    let l = a.watts_status().unwrap();
    assert_eq!(l.modes.len(), 1);
    assert_eq!(l.modes[0].from, WattsFrom::Learned);
}
