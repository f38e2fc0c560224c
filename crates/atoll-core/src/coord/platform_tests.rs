use std::time::Duration;

use proptest::prelude::*;

use super::bench::{BenchKind, BenchRig};
use super::test_util::*;
use super::*;

fn platform(islands: Vec<IslandSetup>) -> PlatformManager {
    PlatformManager::new(CoordConfig::default(), islands).unwrap()
}

/// Islands a (0-1), b (2-3), c (4-7); overlay o on a's unit.
fn abc() -> PlatformManager {
    let mut p = platform(vec![
        fair("a", "0-1", &["ua"]),
        fair("b", "2-3", &["ub"]),
        fair("c", "4-7", &["uc"]),
    ]);
    register(&mut p, overlay("o", 1, &[("a", "ua")]));
    p
}

#[test]
fn borrow_preferred_moves_cpus_records_the_loan_and_release_returns_them() {
    let mut p = abc();
    p.observe(&n("b"), 0.0).unwrap();
    let r = p.handle(ms(0), &n("a"), &borrow("o", "b", 1));
    assert_eq!(moves(&r), ["b->a:3"], "{r}");
    assert_eq!(r.effects()[0].why, Why::Borrow { overlay: n("o") });
    assert_eq!(layout(&p), "a=0-1,3 b=2 c=4-7");
    assert_eq!(
        p.loans(),
        [Loan {
            cpu: 3,
            owner: n("b"),
            lender: n("b"),
            borrower: n("a"),
            overlay: n("o"),
            since: ms(0),
        }]
    );
    check_ledger(&p);
    // b keeps its last own CPU.
    let r = p.handle(ms(1), &n("a"), &borrow("o", "b", 1));
    assert_eq!(r.reason(), Some(&NackReason::LastCore { island: n("b") }));

    let r = p.handle(ms(2), &n("a"), &release("o", "b"));
    assert_eq!(moves(&r), ["a->b:3"], "{r}");
    assert_eq!(layout(&p), "a=0-1 b=2-3 c=4-7");
    assert!(p.loans().is_empty());
    check_ledger(&p);
    let r = p.handle(ms(3), &n("a"), &release("o", "b"));
    assert!(
        matches!(r.reason(), Some(NackReason::NothingToRelease { .. })),
        "{r}"
    );
}

#[test]
fn a_borrow_grants_up_to_the_amount_from_idle_cpus() {
    let mut p = abc();
    p.observe(&n("c"), 1.0).unwrap();
    let r = p.handle(ms(0), &n("a"), &borrow("o", "c", 5));
    assert_eq!(moves(&r), ["c->a:5-7"], "three idle CPUs of four: {r}");
    // Each refusal backs the sender off: space the requests a second apart.
    let r = p.handle(ms(1000), &n("a"), &borrow("o", "c", 0));
    assert_eq!(r.reason(), Some(&NackReason::ZeroAmount));
    let r = p.handle(ms(2000), &n("a"), &borrow("o", "a", 1));
    assert!(
        matches!(r.reason(), Some(NackReason::SelfBorrow { .. })),
        "{r}"
    );
    let r = p.handle(ms(3000), &n("a"), &borrow("o", "zz", 1));
    assert!(
        matches!(r.reason(), Some(NackReason::UnknownIsland { .. })),
        "{r}"
    );
    let r = p.handle(ms(4000), &n("a"), &borrow("x", "c", 1));
    assert!(
        matches!(r.reason(), Some(NackReason::NotRegistered { .. })),
        "{r}"
    );
    let r = p.handle(ms(0), &n("zz"), &Message::Null);
    assert!(
        matches!(r.reason(), Some(NackReason::UnknownIsland { .. })),
        "{r}"
    );
    check_ledger(&p);
}

#[test]
fn borrow_any_tries_the_overlays_islands_first_then_the_most_idle() {
    let mut p = platform(vec![
        fair("a", "0", &["ua"]),
        fair("b", "1-2", &["ub"]),
        fair("c", "3-5", &["uc"]),
        fair("d", "6-9", &["ud"]),
    ]);
    register(&mut p, overlay("o", 1, &[("a", "ua"), ("b", "ub")]));
    for i in ["b", "c", "d"] {
        p.observe(&n(i), 0.0).unwrap();
    }
    // b is the overlay's: first, though c and d are idler.
    let r = p.handle(ms(0), &n("a"), &borrow_any("o", 1));
    assert_eq!(moves(&r), ["b->a:2"], "{r}");
    // b is down to its last own CPU: now the idlest other island, d.
    let r = p.handle(ms(0), &n("a"), &borrow_any("o", 1));
    assert_eq!(moves(&r), ["d->a:7"], "{r}");
    p.observe(&n("d"), 2.5).unwrap();
    // d: 3 CPUs, 0 idle now; c has 3 idle.
    let r = p.handle(ms(0), &n("a"), &borrow_any("o", 1));
    assert_eq!(moves(&r), ["c->a:4"], "{r}");
    let idle: Vec<(String, u32)> = p
        .query_idle(ms(0))
        .map(|(i, q)| (i.to_string(), q.lendable))
        .collect();
    assert_eq!(
        idle,
        [
            ("a".into(), 0),
            ("b".into(), 0),
            ("c".into(), 1),
            ("d".into(), 0)
        ]
    );
    check_ledger(&p);
    p.observe(&n("c"), 3.0).unwrap();
    let r = p.handle(ms(0), &n("a"), &borrow_any("o", 1));
    assert_eq!(
        r.reason(),
        Some(&NackReason::NoIdleCapacity { island: None })
    );
}

#[test]
fn a_moved_cpu_is_damped_back_and_onward_but_may_be_released() {
    // a lends CPU 1 to b (one CPU of its own); c and a then ask b.
    let mut p = platform(vec![
        fair("a", "0-1", &["ua"]),
        fair("b", "2", &["ub"]),
        fair("c", "3", &["uc"]),
    ]);
    register(&mut p, overlay("o", 1, &[("b", "ub")]));
    register(&mut p, overlay("q", 1, &[("c", "uc"), ("a", "ua")]));
    p.observe(&n("a"), 0.0).unwrap();
    assert_eq!(
        moves(&p.handle(ms(0), &n("b"), &borrow("o", "a", 1))),
        ["a->b:1"]
    );
    p.observe(&n("b"), 0.0).unwrap();
    let damped = NackReason::Damped {
        island: n("b"),
        cpu: 1,
        until: ms(300),
    };
    // Onward to c, and back to a: both damped.
    assert_eq!(
        p.handle(ms(100), &n("c"), &borrow("q", "b", 1)).reason(),
        Some(&damped)
    );
    assert_eq!(
        p.handle(ms(150), &n("a"), &borrow("q", "b", 1)).reason(),
        Some(&damped)
    );
    let r = p.handle(ms(160), &n("c"), &borrow_any("q", 1));
    assert_eq!(
        r.reason(),
        Some(&damped),
        "borrow_any reports the damping too"
    );
    // After the window it moves onward: a stack of two loans.
    let r = p.handle(ms(300), &n("c"), &borrow("q", "b", 1));
    assert_eq!(moves(&r), ["b->c:1"], "{r}");
    let loans = p.loans();
    assert_eq!(
        (loans[0].owner.as_str(), loans[0].lender.as_str()),
        ("a", "b")
    );
    check_ledger(&p);
    // Releases are never damped: c gives it back to b at once, b to a.
    assert_eq!(
        moves(&p.handle(ms(301), &n("c"), &release("q", "b"))),
        ["c->b:1"]
    );
    assert_eq!(
        moves(&p.handle(ms(302), &n("b"), &release("o", "a"))),
        ["b->a:1"]
    );
    assert!(p.loans().is_empty());
    check_ledger(&p);
    // Back home, it may not leave a again within the window: no ping-pong.
    let r = p.handle(ms(400), &n("b"), &borrow("o", "a", 1));
    assert_eq!(
        r.reason(),
        Some(&NackReason::Damped {
            island: n("a"),
            cpu: 1,
            until: ms(602)
        })
    );
    assert!(p.handle(ms(602), &n("b"), &borrow("o", "a", 1)).is_ack());
}

#[test]
fn registration_is_checked_and_a_refusal_registers_nothing() {
    let mut p = abc();
    let reg = |p: &mut PlatformManager, spec: OverlaySpec| {
        p.handle(ms(0), &n("a"), &Message::Register { overlay: spec })
    };
    let cases = [
        (overlay("o", 1, &[]), "is registered already"),
        (overlay("x", 1, &[("zz", "ua")]), "no island zz"),
        (overlay("x", 1, &[("b", "ua")]), "not a unit"),
        (overlay("x", 1, &[("a", "ua")]), "belongs to overlay o"),
        (
            overlay("x", 1, &[("b", "ub"), ("b", "ub")]),
            "belongs to overlay x",
        ),
        (
            OverlaySpec {
                property: Property::LatencyPercentile {
                    percentile: 120.0,
                    bound_us: 10,
                },
                ..overlay("x", 1, &[])
            },
            "percentile = 120",
        ),
    ];
    for (spec, why) in cases {
        let r = reg(&mut p, spec);
        let text = r.reason().map(|r| r.to_string()).unwrap_or_default();
        assert!(text.contains(why), "{why}: {r}");
    }
    assert!(p.overlay(&n("x")).is_none(), "refusals register nothing");
    assert!(p.island(&n("b")).unwrap().overlay_of(&n("ub")).is_none());
}

#[test]
fn deregistration_returns_loans_resets_knobs_and_ends_boosts() {
    let mut p = platform(vec![
        fair("a", "0-1", &["ua", "va"]),
        fair("b", "2-3", &["ub"]),
    ]);
    register(&mut p, overlay("o", 1, &[("a", "ua")]));
    p.observe(&n("b"), 0.0).unwrap();
    assert!(p
        .handle(
            ms(0),
            &n("a"),
            &tune("o", "ua", Resource::CpuTime, Direction::Up)
        )
        .is_ack());
    assert!(p.handle(ms(0), &n("a"), &trigger("o", "ua")).is_ack());
    assert!(p.handle(ms(0), &n("a"), &borrow("o", "b", 1)).is_ack());
    let r = p.handle(ms(10), &n("b"), &Message::Deregister { overlay: n("o") });
    let text: Vec<String> = r.effects().iter().map(|e| e.to_string()).collect();
    assert_eq!(
        text,
        [
            "move CPUs 3 from island a to island b: overlay o deregistered",
            "end the boost of a/ua: back to weight 100: overlay o deregistered",
        ]
    );
    assert_eq!(
        p.island(&n("a")).unwrap().knobs(&n("ua")).unwrap().weight,
        100
    );
    assert!(p.island(&n("a")).unwrap().overlays().next().is_none());
    assert!(p.loans().is_empty());
    check_ledger(&p);
    let r = p.handle(ms(10), &n("b"), &Message::Deregister { overlay: n("o") });
    assert!(
        matches!(r.reason(), Some(NackReason::NotRegistered { .. })),
        "{r}"
    );
}

#[test]
fn a_loan_under_a_departed_overlays_loan_goes_home_when_released() {
    let mut p = platform(vec![
        fair("a", "0-1", &["ua"]),
        fair("b", "2", &["ub"]),
        fair("c", "3", &["uc"]),
    ]);
    register(&mut p, overlay("o", 1, &[("b", "ub")]));
    register(&mut p, overlay("q", 1, &[("c", "uc")]));
    for i in ["a", "b"] {
        p.observe(&n(i), 0.0).unwrap();
    }
    assert!(p.handle(ms(0), &n("b"), &borrow("o", "a", 1)).is_ack());
    assert!(p.handle(ms(300), &n("c"), &borrow("q", "b", 1)).is_ack());
    let r = p.handle(ms(301), &n("b"), &Message::Deregister { overlay: n("o") });
    assert!(moves(&r).is_empty(), "CPU 1 is at c under q's loan: {r}");
    let r = p.handle(ms(302), &n("c"), &release("q", "b"));
    assert_eq!(moves(&r), ["c->b:1", "b->a:1"], "{r}");
    assert_eq!(layout(&p), "a=0-1 b=2 c=3");
    check_ledger(&p);
}

#[test]
fn tunes_and_triggers_reach_the_units_island_from_any_island() {
    let mut p = platform(vec![
        fair("a", "0-1", &["ua", "va"]),
        fair("b", "2-3", &["ub"]),
    ]);
    register(&mut p, overlay("o", 1, &[("a", "ua"), ("b", "ub")]));
    let r = p.handle(
        ms(0),
        &n("b"),
        &tune("o", "ua", Resource::CpuTime, Direction::Up),
    );
    assert!(
        matches!(&r.effects()[0].change, Change::SetWeight { island, weight: 125, .. } if island == &n("a")),
        "{r}"
    );
    let r = p.handle(
        ms(0),
        &n("b"),
        &tune("o", "va", Resource::CpuTime, Direction::Up),
    );
    assert!(
        matches!(r.reason(), Some(NackReason::UnknownUnit { .. })),
        "{r}"
    );
    let r = p.handle(
        ms(0),
        &n("a"),
        &tune("o", "ub", Resource::CpuTime, Direction::Up),
    );
    assert!(
        matches!(r.reason(), Some(NackReason::AtCapacity { .. })),
        "alone on b: {r}"
    );
    // The refusal backs a off for CPU time of o: 30 ms.
    let r = p.handle(ms(10), &n("a"), &trigger("o", "ub"));
    assert_eq!(r.reason(), Some(&NackReason::BackingOff { until: ms(30) }));
    assert!(p.handle(ms(30), &n("a"), &trigger("o", "ub")).is_ack());
    assert!(p.tick(ms(59)).is_empty());
    let ends = p.tick(ms(60));
    assert_eq!(ends.len(), 1);
    assert!(p.handle(ms(0), &n("a"), &Message::Null).is_ack());
}

#[test]
fn a_platform_is_built_from_a_spec_with_the_plans_knobs() {
    let spec = crate::spec::tests::spec16();
    let topo = crate::spec::tests::topo16();
    let p = PlatformManager::from_spec(
        &spec,
        &topo,
        ArbitrationPolicy::Priority,
        CoordConfig::default(),
    )
    .unwrap();
    let web = p.island(&n("web")).unwrap();
    let api = web.knobs(&n("api")).unwrap();
    assert_eq!((api.weight, api.cap), (200, Some(4.0)));
    assert_eq!(web.arbitration(), ArbitrationPolicy::Priority);
    assert_eq!(p.island(&n("rt")).unwrap().cpus(), &set("4-7,12-15"));
    assert!(matches!(
        PlatformManager::new(
            CoordConfig::default(),
            vec![fair("a", "0-1", &[]), fair("b", "1-2", &[])]
        ),
        Err(CoordError::OverlappingIslands { .. })
    ));
    assert!(matches!(
        PlatformManager::new(
            CoordConfig::default(),
            vec![fair("a", "0", &["u"]), fair("b", "1", &["u"])]
        ),
        Err(CoordError::DuplicateUnit { .. })
    ));
    assert!(matches!(
        PlatformManager::new(
            CoordConfig::default(),
            vec![fair("a", "0", &[]), fair("a", "1", &[])]
        ),
        Err(CoordError::DuplicateIsland { .. })
    ));
}

#[test]
fn the_bench_rig_runs_every_kind_at_steady_state() {
    for islands in [2, 6] {
        let mut rig = BenchRig::new(islands, 2).unwrap();
        for kind in [
            BenchKind::Null,
            BenchKind::Tune,
            BenchKind::Trigger,
            BenchKind::Borrow,
        ] {
            for _ in 0..5 {
                let r = rig.step(kind);
                assert!(r.is_ack(), "{islands} islands, {kind:?}: {r}");
                rig.reset(kind);
            }
        }
        assert!(rig.platform().loans().is_empty());
        check_ledger(rig.platform());
    }
    assert!(BenchRig::new(1, 2).is_err());
}

#[derive(Clone, Debug)]
enum Op {
    Observe(usize, u8),
    Borrow(usize, usize, u32),
    Any(usize, u32),
    Release(usize, usize),
    Time(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..4, 0u8..5).prop_map(|(i, u)| Op::Observe(i, u)),
        (0usize..4, 0usize..4, 1u32..4).prop_map(|(a, b, k)| Op::Borrow(a, b, k)),
        (0usize..4, 1u32..4).prop_map(|(a, k)| Op::Any(a, k)),
        (0usize..4, 0usize..4).prop_map(|(a, b)| Op::Release(a, b)),
        (0u64..400).prop_map(Op::Time),
    ]
}

proptest! {
    /// Whatever is borrowed and released, no CPU is lost or held twice,
    /// every island keeps an own CPU, and the ledger matches the islands.
    #[test]
    fn cpus_are_conserved_and_no_island_gives_its_last(ops in prop::collection::vec(op(), 1..80)) {
        let names = ["a", "b", "c", "d"];
        let mut p = platform(vec![
            fair("a", "0", &["ua"]),
            fair("b", "1-2", &["ub"]),
            fair("c", "3-5", &["uc"]),
            fair("d", "6-9", &["ud"]),
        ]);
        // One overlay per island, so any island may borrow for its own.
        for i in names {
            register(&mut p, overlay(&format!("o{i}"), 1, &[(i, &format!("u{i}"))]));
        }
        let mut t = Duration::ZERO;
        for op in ops {
            match op {
                Op::Observe(i, u) => p.observe(&n(names[i]), f64::from(u)).unwrap(),
                Op::Borrow(a, b, k) => {
                    let r = p.handle(t, &n(names[a]), &borrow(&format!("o{}", names[a]), names[b], k));
                    if let Reply::Ack { effects } = &r {
                        prop_assert_eq!(effects.len(), 1);
                    }
                }
                Op::Any(a, k) => {
                    p.handle(t, &n(names[a]), &borrow_any(&format!("o{}", names[a]), k));
                }
                Op::Release(a, b) => {
                    p.handle(t, &n(names[a]), &release(&format!("o{}", names[a]), names[b]));
                }
                Op::Time(d) => t += ms(d),
            }
            check_ledger(&p);
            for c in p.islands() {
                prop_assert!(!c.cpus().is_empty());
            }
        }
    }
}
