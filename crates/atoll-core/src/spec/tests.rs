//! Tests of the platform description and its validation.

use super::*;
use crate::topology::SyntheticShape;

pub(crate) fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

pub(crate) fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

pub(crate) fn topo16() -> Topology {
    Topology::synthetic(SyntheticShape {
        packages: 2,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: 4,
        threads_per_core: 2,
        memory_per_node: 8 << 30,
    })
}

pub(crate) fn spec16() -> PlatformSpec {
    PlatformSpec {
        host: HostSpec {
            cpus: set("0,8"),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![
            IslandSpec {
                name: n("web"),
                cpus: set("1-3,9-11"),
                mems: set("0"),
                policy: SchedPolicy::Fair,
                arbitration: ArbitrationPolicy::default(),
                exclusive: false,
                access: Default::default(),
            },
            IslandSpec {
                name: n("rt"),
                cpus: set("4-7,12-15"),
                mems: set("1"),
                policy: SchedPolicy::Realtime(RealtimePolicy {
                    class: RtClass::Fifo,
                    priority_min: 10,
                    priority_max: 50,
                    runtime_us: 500_000,
                    period_us: 1_000_000,
                }),
                arbitration: ArbitrationPolicy::default(),
                exclusive: false,
                access: Default::default(),
            },
        ],
        units: vec![UnitSpec {
            name: n("api"),
            island: n("web"),
            entitlement: Entitlement {
                cpus: Some(2.0),
                cpu_cap: Some(4.0),
                ..Default::default()
            },
            adopt: vec![AdoptRule::Comm("nginx".into())],
            rt_priority: None,
        }],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: IsolationSpec::default(),
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

#[test]
fn a_good_spec_validates() {
    spec16().validate(&topo16()).unwrap();
    assert_eq!(spec16().default_island().unwrap().name, n("web"));
}

#[test]
fn reports_every_problem_with_its_key() {
    let mut s = spec16();
    s.host.cpus = set("0,99");
    s.islands[1].cpus = set("3-7");
    s.units[0].island = n("nope");
    s.units.push(UnitSpec {
        name: n("db"),
        island: n("rt"),
        entitlement: Entitlement {
            cpus: Some(3.0),
            cpu_cap: Some(2.0),
            memory: MemoryEntitlement {
                min: Some(2 << 30),
                low: Some(1 << 30),
                ..Default::default()
            },
            ..Default::default()
        },
        adopt: vec![],
        rt_priority: Some(70),
    });
    let errs = s.validate(&topo16()).unwrap_err();
    let keys: Vec<_> = errs.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "host.cpus",
            "island.rt.cpus",
            "unit.api.island",
            "unit.db.cpu_cap",
            "unit.db.memory_low",
            "unit.db.rt_priority"
        ],
        "{errs:#?}"
    );
    assert!(errs[0].problem.contains("99"), "{}", errs[0]);
    assert!(errs[1].problem.contains("CPUs 3"), "{}", errs[1]);
}

#[test]
fn an_empty_host_partition_is_allowed_only_without_adopt_all() {
    let mut s = spec16();
    s.host.cpus = CpuSet::new();
    s.validate(&topo16()).unwrap();
    s.host.adopt_all = true;
    let errs = s.validate(&topo16()).unwrap_err();
    assert_eq!(errs[0].key, "host.cpus");
}

#[test]
fn rt_budget_must_leave_room() {
    let mut s = spec16();
    if let SchedPolicy::Realtime(rt) = &mut s.islands[1].policy {
        rt.runtime_us = rt.period_us;
    }
    let errs = s.validate(&topo16()).unwrap_err();
    assert_eq!(errs[0].key, "island.rt.rt_runtime_us");
}
