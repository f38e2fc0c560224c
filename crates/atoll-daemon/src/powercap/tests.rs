use atoll_core::coord::Property;
use atoll_core::spec::{HostSpec, IslandSpec, OverlayConfig, SchedPolicy};
use atoll_core::CpuSet;

use super::*;

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn spec(watts: f64) -> PlatformSpec {
    let island = |name: &str, cpus: &str| IslandSpec {
        name: n(name),
        cpus: CpuSet::parse(cpus).unwrap(),
        mems: CpuSet::parse("0").unwrap(),
        policy: SchedPolicy::Fair,
        arbitration: Default::default(),
        exclusive: false,
        access: Default::default(),
    };
    PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::parse("0").unwrap(),
            mems: CpuSet::parse("0").unwrap(),
            adopt_all: false,
        },
        islands: vec![island("web", "1-2"), island("batch", "3-6")],
        units: Vec::new(),
        default_island: None,
        epoch: atoll_core::spec::DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: vec![OverlayConfig {
            name: n("budget"),
            priority: 0,
            units: Vec::new(),
            property: Property::PlatformPowerCap { watts },
            react: Default::default(),
            slo: Default::default(),
            cap_timing: Default::default(),
        }],
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

#[test]
fn moves_are_in_force_once_applied_and_lift_names_them() {
    let s = spec(50.0);
    let mut p = PowerCapping::default();
    assert!(p.step(Some(100.0)).is_empty(), "nothing held yet");
    let ranges = [(n("batch"), (800_000, 3_000_000))].into_iter().collect();
    p.start(&s, &ranges);
    assert!(p.step(None).is_empty());
    let moves = p.step(Some(100.0));
    assert_eq!(moves.len(), 2);
    assert_eq!(moves[0].knob, Knob::CpuCap(Some(1.0)));
    assert_eq!(moves[1].knob, Knob::MaxFrequency(Some(1_500_000)));
    // Not applied: asked again.
    assert_eq!(p.step(Some(100.0)), moves);
    for m in &moves {
        p.applied(m);
    }
    let st = p.status().unwrap();
    assert_eq!(st.islands[0].cap_cpus, Some(1.0));
    assert_eq!(st.islands[1].max_khz, Some(1_500_000));
    // An island whose frequency cannot be written is capped instead.
    p.without_frequency(&n("batch"));
    let moves = p.step(Some(100.0));
    assert!(moves
        .iter()
        .any(|m| m.island == n("batch") && matches!(m.knob, Knob::CpuCap(Some(_)))));
    for m in &moves {
        p.applied(m);
    }
    let (freq, caps) = p.lift();
    assert!(freq.is_empty());
    assert_eq!(caps, [n("web"), n("batch")]);
    assert!(!p.is_held() && p.status().is_none());
}

#[test]
fn the_layer_caps_island_groups_unless_a_tighter_cap_is_laid() {
    let s = spec(50.0);
    let mut p = PowerCapping::default();
    p.start(&s, &BTreeMap::new());
    for m in p.step(Some(100.0)) {
        p.applied(&m);
    }
    let path = atoll_core::plan::GroupPath::island(&n("web"));
    let at = At {
        path: &path,
        spec: &s,
        unit: None,
        island: Some(&s.islands[0]),
        parent: None,
    };
    let mut g = GroupSettings::default();
    p.lay(&at, &mut g);
    assert_eq!(g.cpu_max, Some(CpuMax::for_cpus(1.0)));
    let mut tight = GroupSettings {
        cpu_max: Some(CpuMax::for_cpus(0.5)),
        ..GroupSettings::default()
    };
    p.lay(&at, &mut tight);
    assert_eq!(tight.cpu_max, Some(CpuMax::for_cpus(0.5)));
    let mut loose = GroupSettings {
        cpu_max: Some(CpuMax::for_cpus(2.0)),
        ..GroupSettings::default()
    };
    p.lay(&at, &mut loose);
    assert_eq!(loose.cpu_max, Some(CpuMax::for_cpus(1.0)));
}
