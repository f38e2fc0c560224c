use proptest::prelude::*;

use super::test_util::*;
use super::*;

/// Islands a (4 CPUs), b (2), c (2).
fn abc() -> PlatformManager {
    PlatformManager::new(
        CoordConfig::default(),
        vec![
            fair("a", "0-3", &["ua"]),
            fair("b", "4-5", &["ub"]),
            fair("c", "6-7", &["uc"]),
        ],
    )
    .unwrap()
}

fn caps(p: &PlatformManager) -> Vec<f64> {
    p.island_caps()
        .into_iter()
        .map(|(_, c)| c.unwrap())
        .collect()
}

fn total_milli(p: &PlatformManager) -> u64 {
    p.islands().iter().map(|c| c.cap_milli().unwrap()).sum()
}

#[test]
fn a_platform_cap_is_split_by_cpus_and_adds_up_exactly() {
    let mut p = abc();
    let out = p.set_cpu_cap(4.0).unwrap();
    assert_eq!(caps(&p), [1.95, 1.025, 1.025]);
    assert_eq!(total_milli(&p), 4000);
    assert_eq!(p.cpu_cap(), Some(4.0));
    assert_eq!(
        out[0].to_string(),
        "cap island a at 1.95 CPUs: platform CPU cap of 4 CPUs"
    );
    // Odd amounts: the rounding remainder goes to the first islands.
    p.set_cpu_cap(1.001).unwrap();
    assert_eq!(total_milli(&p), 1001);
    assert!(matches!(p.set_cpu_cap(0.2), Err(CoordError::BadCap { .. })));
    assert!(matches!(
        p.set_cpu_cap(f64::NAN),
        Err(CoordError::BadCap { .. })
    ));
    let out = p.clear_cpu_cap();
    assert_eq!(out.len(), 3);
    assert_eq!(p.cpu_cap(), None);
    assert!(p
        .rebalance(ms(0), &[(n("a"), 0.0, false)])
        .unwrap()
        .is_empty());
}

#[test]
fn an_idle_island_gives_cap_to_a_throttled_one() {
    let mut p = abc();
    p.set_cpu_cap(4.0).unwrap();
    let out = p
        .rebalance(ms(30), &[(n("a"), 0.5, false), (n("b"), 1.025, true)])
        .unwrap();
    assert_eq!(caps(&p), [1.7, 1.275, 1.025]);
    let text: Vec<String> = out.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        text,
        [
            "cap island a at 1.7 CPUs: used only 0.50 CPUs: gave 0.250 CPUs to throttled islands",
            "cap island b at 1.275 CPUs: throttled at its cap using 1.02 CPUs: received 0.250 CPUs",
        ]
    );
    // b grows step by step up to its 2 CPUs, no further; a keeps usage +
    // headroom.
    for k in 0..10 {
        p.rebalance(
            ms(60 + 30 * k),
            &[(n("a"), 0.5, false), (n("b"), 2.0, true)],
        )
        .unwrap();
        assert_eq!(total_milli(&p), 4000);
    }
    assert_eq!(caps(&p), [0.975, 2.0, 1.025]);
    // Nobody idle enough: nothing moves.
    let out = p
        .rebalance(ms(900), &[(n("a"), 0.9, false), (n("c"), 1.025, true)])
        .unwrap();
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn the_most_constrained_receiver_goes_first() {
    let mut p = abc();
    p.set_cpu_cap(3.0).unwrap();
    assert_eq!(caps(&p), [1.45, 0.775, 0.775]);
    p.rebalance(ms(0), &[(n("a"), 0.0, false), (n("b"), 1.0, true)])
        .unwrap();
    assert_eq!(caps(&p), [1.2, 1.025, 0.775]);
    // a has 0.2 CPUs to spare; b and c are both throttled: c, with the
    // lower cap, gets it.
    p.rebalance(
        ms(30),
        &[
            (n("a"), 0.9, false),
            (n("b"), 1.0, true),
            (n("c"), 0.8, true),
        ],
    )
    .unwrap();
    assert_eq!(caps(&p), [1.0, 1.025, 0.975]);
    assert_eq!(total_milli(&p), 3000);
}

#[test]
fn an_overlay_with_a_cpu_cap_property_sets_and_clears_it() {
    let mut p = abc();
    let spec = OverlaySpec {
        property: Property::PlatformCpuCap { cpus: 6.0 },
        ..overlay("cap", 5, &[])
    };
    let r = register(&mut p, spec);
    assert_eq!(r.effects().len(), 3);
    assert!(
        matches!(&r.effects()[0].why, Why::CapSet { overlay: Some(o), total } if o == &n("cap") && *total == 6.0)
    );
    assert_eq!(p.cpu_cap(), Some(6.0));
    let r = p.handle(ms(0), &n("a"), &Message::Deregister { overlay: n("cap") });
    assert_eq!(r.effects().len(), 3);
    assert_eq!(p.cpu_cap(), None);
    let bad = OverlaySpec {
        property: Property::PlatformCpuCap { cpus: 0.1 },
        ..overlay("cap", 5, &[])
    };
    let r = p.handle(ms(0), &n("a"), &Message::Register { overlay: bad });
    assert!(
        matches!(r.reason(), Some(NackReason::InvalidOverlay { .. })),
        "{r}"
    );
}

#[test]
fn bad_samples_are_refused_with_the_island() {
    let mut p = abc();
    p.set_cpu_cap(4.0).unwrap();
    assert!(matches!(
        p.rebalance(ms(0), &[(n("zz"), 1.0, false)]),
        Err(CoordError::UnknownIsland { .. })
    ));
    assert!(matches!(
        p.rebalance(ms(0), &[(n("a"), f64::NAN, false)]),
        Err(CoordError::BadUsage { .. })
    ));
    assert!(matches!(
        p.rebalance(ms(0), &[(n("a"), 1.0, false), (n("a"), 1.0, true)]),
        Err(CoordError::DuplicateSample { .. })
    ));
    assert_eq!(total_milli(&p), 4000);
}

proptest! {
    /// Whatever the usage, the island caps always add up to the platform
    /// cap, no island drops below `cap_min`, and a receiver never grows
    /// beyond its CPUs.
    #[test]
    fn island_caps_always_sum_to_the_platform_cap(
        sizes in prop::collection::vec(1u32..5, 2..6),
        frac in 0.0f64..1.0,
        steps in prop::collection::vec(
            prop::collection::vec((0.0f64..5.0, any::<bool>(), any::<bool>()), 6),
            1..30,
        ),
    ) {
        let mut first = 0;
        let islands: Vec<IslandSetup> = sizes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let cpus = format!("{}-{}", first, first + s - 1);
                first += s;
                fair(&format!("i{i}"), &cpus, &[])
            })
            .collect();
        let mut p = PlatformManager::new(CoordConfig::default(), islands).unwrap();
        let all: u32 = sizes.iter().sum();
        let min = 0.1 * sizes.len() as f64;
        let cap = min + frac * (f64::from(all) - min);
        p.set_cpu_cap(cap).unwrap();
        let total = total_milli(&p);
        prop_assert_eq!(total, crate::num::saturating_u64((cap * 1000.0).round()));
        for (k, step) in steps.iter().enumerate() {
            let before: Vec<u64> = p.islands().iter().map(|c| c.cap_milli().unwrap()).collect();
            let usage: Vec<(Name, f64, bool)> = step
                .iter()
                .take(sizes.len())
                .enumerate()
                .filter(|(_, (_, _, present))| *present)
                .map(|(i, (u, thr, _))| (n(&format!("i{i}")), *u, *thr))
                .collect();
            let out = p.rebalance(ms(30 * k as u64), &usage).unwrap();
            prop_assert_eq!(total_milli(&p), total);
            let delta: f64 = out
                .iter()
                .map(|e| match e.why {
                    Why::CapRebalance { delta, .. } => delta,
                    _ => 0.0,
                })
                .sum();
            prop_assert!(delta.abs() < 1e-6, "moves must net to zero: {}", delta);
            for (i, c) in p.islands().iter().enumerate() {
                let m = c.cap_milli().unwrap();
                prop_assert!(m >= 100 || m >= before[i], "island {} fell to {}", i, m);
                if m > before[i] {
                    prop_assert!(m <= c.cpus().len() as u64 * 1000, "island {} over its CPUs", i);
                    prop_assert!(usage.iter().any(|(u, _, thr)| u == c.name() && *thr));
                }
            }
        }
    }
}
