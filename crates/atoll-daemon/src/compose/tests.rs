//! The composer on a fake backend that checks, at every write, what the
//! kernel checks: a child's CPUs lie within its parent's, and two
//! exclusive islands never claim the same CPU.

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_core::backend::{
    Actuator, BackendError, BackendKind, Capabilities, Fallback, GroupStats, Monitor, StatSelect,
};
use atoll_core::decision::{Action, Reason};
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings, Partition};
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{Entitlement, HostSpec, IslandSpec, PlatformSpec, SchedPolicy, UnitSpec};
use atoll_core::{CpuSet, Name};

use super::*;
use crate::decisions::DecisionLog;
use crate::registry::Registry;

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

fn g(s: &str) -> GroupPath {
    GroupPath::from_relative(s)
}

/// Host CPU 0; islands `a` (1-2) and `b` (3-4), each with one unit.
fn reg() -> Registry {
    let island = |name: &str, cpus: &str| IslandSpec {
        name: n(name),
        cpus: set(cpus),
        mems: set("0"),
        policy: SchedPolicy::Fair,
        arbitration: Default::default(),
        exclusive: false,
        access: Default::default(),
    };
    let unit = |name: &str, island: &str| UnitSpec {
        name: n(name),
        island: n(island),
        entitlement: Entitlement::default(),
        adopt: vec![],
        rt_priority: None,
    };
    Registry::new(PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![island("a", "1-2"), island("b", "3-4")],
        units: vec![unit("x", "a"), unit("y", "b")],
        default_island: None,
        epoch: atoll_core::spec::DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    })
}

/// Writes, and the kernel's rules on CPUs.
#[derive(Default)]
struct Fake {
    cpus: BTreeMap<GroupPath, CpuSet>,
    exclusive: BTreeMap<GroupPath, bool>,
    writes: Vec<(GroupPath, GroupSettings)>,
    /// The writes that came through `apply_changed`, with what was taken
    /// before.
    changed: Vec<(GroupPath, GroupSettings)>,
    refuse: Option<GroupPath>,
}

impl Actuator for Fake {
    fn kind(&self) -> BackendKind {
        BackendKind::Sim
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
    fn root_name(&self) -> &str {
        "t"
    }
    fn apply(
        &mut self,
        path: &GroupPath,
        s: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        if self.refuse.as_ref() == Some(path) {
            return Err(BackendError::NoGroup(path.clone()));
        }
        // A group inherits its parent's CPUs when it names none.
        let parent = path.parent().and_then(|p| self.cpus.get(&p).cloned());
        let cpus = s.cpus.clone().or(parent.clone()).unwrap_or_default();
        if let Some(p) = &parent {
            assert!(cpus.is_subset(p), "{path}: {cpus} outside its parent's {p}");
        }
        for (child, c) in &self.cpus {
            if child.parent().as_ref() == Some(path) {
                assert!(
                    c.is_subset(&cpus),
                    "{path}: {cpus} leaves out child {child}'s {c}"
                );
            }
        }
        let exclusive = s.partition == Some(Partition::Root);
        if exclusive {
            for (other, c) in &self.cpus {
                if other != path
                    && other.parent() == path.parent()
                    && self.exclusive.get(other) == Some(&true)
                {
                    assert!(
                        c.intersection(&cpus).is_empty(),
                        "{path}: {cpus} overlaps exclusive {other}'s {c}"
                    );
                }
            }
        }
        self.cpus.insert(path.clone(), cpus);
        self.exclusive.insert(path.clone(), exclusive);
        self.writes.push((path.clone(), s.clone()));
        Ok(Vec::new())
    }
    fn apply_changed(
        &mut self,
        path: &GroupPath,
        before: &GroupSettings,
        s: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        self.changed.push((path.clone(), before.clone()));
        self.apply(path, s)
    }
    fn remove(&mut self, path: &GroupPath) -> Result<(), BackendError> {
        self.cpus.remove(path);
        Ok(())
    }
    fn move_process(&mut self, pid: u32, _: &GroupPath) -> Result<(), BackendError> {
        Err(BackendError::NoProcess(pid))
    }
    fn restore_process(&mut self, pid: u32, _: &CgroupMembership) -> Result<(), BackendError> {
        Err(BackendError::NoProcess(pid))
    }
}

impl Monitor for Fake {
    fn exists(&self, path: &GroupPath) -> bool {
        self.cpus.contains_key(path)
    }
    fn children(&self, _: &GroupPath) -> Result<Vec<String>, BackendError> {
        Ok(Vec::new())
    }
    fn processes(&self, _: &GroupPath) -> Result<Vec<u32>, BackendError> {
        Ok(Vec::new())
    }
    fn stats_of(&self, _: &GroupPath, _: StatSelect) -> Result<GroupStats, BackendError> {
        Ok(GroupStats::default())
    }
}

/// A layer that sets CPUs and weights of the groups it names.
#[derive(Default)]
struct Knobs {
    name: &'static str,
    cpus: BTreeMap<GroupPath, CpuSet>,
    weight: BTreeMap<GroupPath, u32>,
    cpu_max: BTreeMap<GroupPath, CpuMax>,
}

impl Layer for Knobs {
    fn name(&self) -> &'static str {
        self.name
    }
    fn lay(&self, at: &At<'_>, s: &mut GroupSettings) {
        if let Some(c) = self.cpus.get(at.path) {
            s.cpus = Some(c.clone());
        }
        if let Some(w) = self.weight.get(at.path) {
            s.cpu_weight = Some(*w);
        }
        if let Some(m) = self.cpu_max.get(at.path) {
            s.cpu_max = Some(*m);
        }
    }
}

const NOW: Duration = Duration::from_secs(1);

fn flush(c: &mut Composer, reg: &Registry, layers: &[&dyn Layer], b: &mut Fake) -> DecisionLog {
    let mut log = DecisionLog::default();
    let stack = Stack {
        reg,
        layers: layers.to_vec(),
    };
    c.flush(&stack, b, &mut log, NOW).unwrap();
    log
}

fn started(reg: &Registry, layers: &[&dyn Layer]) -> (Composer, Fake) {
    let mut c = Composer::default();
    let mut b = Fake::default();
    c.touch_all(Reason::Config);
    flush(&mut c, reg, layers, &mut b);
    b.writes.clear();
    (c, b)
}

#[test]
fn a_cpu_moves_between_exclusive_islands_without_an_invalid_step() {
    let reg = reg();
    let mut iso = Knobs {
        name: "isolation",
        ..Default::default()
    };
    // The unit of `a` runs on both of a's CPUs; b's on b's.
    iso.cpus.insert(g("a/x"), set("1-2"));
    iso.cpus.insert(g("b/y"), set("3-4"));
    let (mut c, mut b) = started(&reg, &[&iso]);
    // Coordination moves CPU 2 from a to b.
    let mut coord = Knobs {
        name: "coordination",
        ..Default::default()
    };
    coord.cpus.insert(g("a"), set("1"));
    coord.cpus.insert(g("b"), set("2-4"));
    c.touch(g("a"), Reason::Config);
    c.touch(g("b"), Reason::Config);
    // The fake asserts the kernel's rules at every write.
    flush(&mut c, &reg, &[&iso, &coord], &mut b);
    let order: Vec<&str> = b.writes.iter().map(|(p, _)| p.as_str()).collect();
    let pos = |p: &str| order.iter().position(|o| *o == p).unwrap();
    assert!(pos("a/x") < pos("a"), "{order:?}");
    assert!(pos("a") < pos("b"), "{order:?}");
    // The unit of `a` is cut to what its island keeps, that of `b` keeps
    // its grant until its layer changes.
    assert_eq!(b.cpus[&g("a/x")], set("1"));
    assert_eq!(b.cpus[&g("b/y")], set("3-4"));
    assert_eq!(b.cpus[&g("b")], set("2-4"));
}

#[test]
fn cpus_that_move_both_ways_go_through_what_they_keep() {
    let reg = reg();
    let mut iso = Knobs {
        name: "isolation",
        ..Default::default()
    };
    iso.cpus.insert(g("a/x"), set("1"));
    let (mut c, mut b) = started(&reg, &[&iso]);
    // Island a swaps CPU 1 for CPU 3 while its unit follows: neither
    // order of the two writes alone is valid.
    let mut coord = Knobs {
        name: "coordination",
        ..Default::default()
    };
    coord.cpus.insert(g("a"), set("2-3"));
    coord.cpus.insert(g("b"), set("4"));
    iso.cpus.insert(g("a/x"), set("3"));
    c.touch(g("a"), Reason::Config);
    c.touch(g("b"), Reason::Config);
    c.touch(g("a/x"), Reason::Config);
    flush(&mut c, &reg, &[&iso, &coord], &mut b);
    assert_eq!(b.cpus[&g("a")], set("2-3"));
    assert_eq!(b.cpus[&g("a/x")], set("3"));
    assert_eq!(b.cpus[&g("b")], set("4"));
}

#[test]
fn a_group_touched_by_several_steps_is_written_once_naming_every_layer() {
    let reg = reg();
    let (mut c, mut b) = started(&reg, &[]);
    let mut iso = Knobs {
        name: "isolation",
        ..Default::default()
    };
    iso.cpus.insert(g("a/x"), set("2"));
    let mut comm = Knobs {
        name: "comm",
        ..Default::default()
    };
    comm.weight.insert(g("a/x"), 800);
    let lend = Reason::Isolation {
        detail: "lend CPUs 1".into(),
    };
    let boost = Reason::Comm {
        detail: "intensity 4096 bytes".into(),
    };
    c.touch(g("a/x"), lend.clone());
    c.touch(g("a/x"), boost.clone());
    c.touch(g("a/x"), lend.clone());
    let log = flush(&mut c, &reg, &[&iso, &comm], &mut b);
    assert_eq!(b.writes.len(), 1, "{:?}", b.writes);
    let d = log.query(None, 10);
    assert_eq!(d.len(), 1, "{d:?}");
    match &d[0].action {
        Action::ApplyGroup {
            path,
            knobs,
            layers,
        } => {
            assert_eq!(path, &g("a/x"));
            assert_eq!(knobs, &["cpuset.cpus=2", "cpu.weight=800"]);
            assert_eq!(layers, &["plan", "isolation", "comm"]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        d[0].why,
        Reason::Combined {
            causes: vec![lend, boost]
        }
    );
    // Nothing changed since: a touch writes nothing.
    c.touch(g("a/x"), Reason::Config);
    b.writes.clear();
    let log = flush(&mut c, &reg, &[&iso, &comm], &mut b);
    assert!(b.writes.is_empty());
    assert!(log.is_empty());
}

#[test]
fn an_island_whose_cpus_change_takes_its_inheriting_units_along() {
    let reg = reg();
    let (mut c, mut b) = started(&reg, &[]);
    let mut coord = Knobs {
        name: "coordination",
        ..Default::default()
    };
    coord.cpus.insert(g("b"), set("3"));
    c.touch(g("b"), Reason::Config);
    let log = flush(&mut c, &reg, &[&coord], &mut b);
    let order: Vec<&str> = b.writes.iter().map(|(p, _)| p.as_str()).collect();
    // b/y names no CPUs: written again after its island so it follows
    // (cgroup v1 copies a parent's CPUs only at creation); no decision,
    // since its settings did not change.
    assert_eq!(order, ["b/y", "b", "b/y"]);
    assert_eq!(b.cpus[&g("b/y")], set("3"));
    assert_eq!(log.len(), 1);
}

#[test]
fn a_refused_group_is_a_decision_and_its_children_wait() {
    let reg = reg();
    let mut c = Composer::default();
    let mut b = Fake {
        refuse: Some(g("a")),
        ..Default::default()
    };
    c.touch_all(Reason::Config);
    let mut log = DecisionLog::default();
    let stack = Stack {
        reg: &reg,
        layers: vec![],
    };
    let e = c.flush(&stack, &mut b, &mut log, NOW).unwrap_err();
    assert_eq!(e.path, g("a"));
    assert!(b.writes.iter().all(|(p, _)| p.as_str() != "a/x"));
    assert!(b.writes.iter().any(|(p, _)| p.as_str() == "b/y"));
    assert!(log
        .query(Some("a"), 10)
        .iter()
        .any(|d| matches!(d.why, Reason::KernelRefused { .. })));
    // Nothing was recorded as written for the refused group.
    assert!(c.applied(&g("a")).is_none());
}

#[test]
fn a_cap_moved_between_islands_is_cut_before_it_is_raised() {
    let reg = reg();
    let mut coord = Knobs {
        name: "coordination",
        ..Default::default()
    };
    // A platform cap of 2 CPUs, 0.5 on a and 1.5 on b.
    coord.cpu_max.insert(g("a"), CpuMax::for_cpus(0.5));
    coord.cpu_max.insert(g("b"), CpuMax::for_cpus(1.5));
    let (mut c, mut b) = started(&reg, &[&coord]);
    // The cap moves to a (first in plan order): a 1.5, b 0.5.
    let sum = |b: &Fake| -> u64 {
        let mut caps: BTreeMap<&GroupPath, u64> = BTreeMap::new();
        let mut worst = 0;
        for (p, s) in &b.writes {
            if let Some(m) = s.cpu_max {
                caps.insert(p, m.quota_us);
            }
            worst = worst.max(caps.values().sum());
        }
        worst
    };
    coord.cpu_max.insert(g("a"), CpuMax::for_cpus(1.5));
    coord.cpu_max.insert(g("b"), CpuMax::for_cpus(0.5));
    c.touch(g("a"), Reason::Config);
    c.touch(g("b"), Reason::Config);
    let log = flush(&mut c, &reg, &[&coord], &mut b);
    let order: Vec<&str> = b.writes.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(order[0], "b", "the cut goes first: {order:?}");
    let quota = |p: &str| {
        b.writes
            .iter()
            .rev()
            .find(|(w, _)| w.as_str() == p)
            .and_then(|(_, s)| s.cpu_max)
            .map(|m| m.quota_us)
    };
    assert_eq!(quota("a"), Some(150_000));
    assert_eq!(quota("b"), Some(50_000));
    // Replay the writes from the caps in force before (a 0.5, b 1.5): the
    // sum never goes above 2 CPUs.
    b.writes.insert(
        0,
        (
            g("a"),
            GroupSettings {
                cpu_max: Some(CpuMax::for_cpus(0.5)),
                ..Default::default()
            },
        ),
    );
    b.writes.insert(
        0,
        (
            g("b"),
            GroupSettings {
                cpu_max: Some(CpuMax::for_cpus(1.5)),
                ..Default::default()
            },
        ),
    );
    assert_eq!(sum(&b), 200_000);
    // One decision per group, as for any other write.
    let decided = log
        .query(None, 10)
        .iter()
        .filter(|d| matches!(d.action, Action::ApplyGroup { .. }))
        .count();
    assert_eq!(decided, 2);
}

#[test]
fn a_group_written_before_is_written_from_what_it_took_and_a_moved_unit_whole() {
    let reg = reg();
    let (mut c, mut b) = started(&reg, &[]);
    let taken = c.applied(&g("a/x")).cloned().expect("written at start");
    let mut coord = Knobs {
        name: "coordination",
        ..Default::default()
    };
    coord.weight.insert(g("a/x"), 2500);
    c.touch(g("a/x"), Reason::Config);
    flush(&mut c, &reg, &[&coord], &mut b);
    assert_eq!(b.changed, [(g("a/x"), taken)]);
    assert_eq!(b.writes.len(), 1);
    assert_eq!(b.writes[0].1.cpu_weight, Some(2500));
    // Island b moves: b itself from what it took, its unit (which inherits
    // the CPUs) whole.
    b.changed.clear();
    b.writes.clear();
    coord.cpus.insert(g("b"), set("3"));
    c.touch(g("b"), Reason::Config);
    flush(&mut c, &reg, &[&coord], &mut b);
    let via_changed: Vec<&str> = b.changed.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(via_changed, ["b"]);
    let order: Vec<&str> = b.writes.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(order, ["b/y", "b", "b/y"]);
}
