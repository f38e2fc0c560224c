use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::snapshot::{CoordSnapshot, Restored};
use super::test_util::*;
use super::*;

fn platform(islands: Vec<IslandSetup>) -> PlatformManager {
    PlatformManager::new(CoordConfig::default(), islands).unwrap()
}

/// Islands a (0-1, units ua and ua2), b (2-3), c (4-7); overlay o on a's
/// units (priority 1), overlay q on c's (priority 2).
fn fresh() -> PlatformManager {
    let mut p = platform(vec![
        fair("a", "0-1", &["ua", "ua2"]),
        fair("b", "2-3", &["ub"]),
        fair("c", "4-7", &["uc"]),
    ]);
    register(&mut p, overlay("o", 1, &[("a", "ua"), ("a", "ua2")]));
    register(&mut p, overlay("q", 2, &[("c", "uc")]));
    p
}

/// What each island holds, as a caller reads it back.
fn holding(p: &PlatformManager) -> BTreeMap<Name, CpuSet> {
    p.islands()
        .iter()
        .map(|c| (c.name().clone(), c.cpus().clone()))
        .collect()
}

/// `fresh()` after a borrow of CPU 3 from b, a tune up of ua, and a refused
/// tune of uc (alone on its island: at capacity).
fn busy() -> PlatformManager {
    let mut p = fresh();
    p.observe(&n("b"), 0.0).unwrap();
    let r = p.handle(ms(10), &n("a"), &borrow("o", "b", 1));
    assert_eq!(moves(&r), ["b->a:3"], "{r}");
    let r = p.handle(
        ms(20),
        &n("a"),
        &tune("o", "ua", Resource::CpuTime, Direction::Up),
    );
    assert!(r.is_ack(), "{r}");
    let r = p.handle(
        ms(30),
        &n("c"),
        &tune("q", "uc", Resource::CpuTime, Direction::Up),
    );
    assert!(!r.is_ack(), "{r}");
    p
}

fn through_json(s: &CoordSnapshot) -> CoordSnapshot {
    let text = serde_json::to_string(s).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_snapshot_restores_loans_knobs_backoff_and_escalation_counts() {
    let p = busy();
    let snap = p.snapshot(ms(40));
    assert_eq!(snap.loans.len(), 1);
    assert_eq!(snap.units.len(), 1);
    assert_eq!(snap.overlays.len(), 1);
    let tuned = *p.island(&n("a")).unwrap().knobs(&n("ua")).unwrap();
    let until = p
        .backoff_until(&n("c"), &n("q"), Resource::CpuTime)
        .unwrap();

    // A new process: its clock starts again at 0; 5 ms passed meanwhile.
    let mut q = fresh();
    let r = q.restore(&through_json(&snap), ms(0), ms(5), &holding(&p));
    assert!(r.dropped.is_empty(), "{:?}", r.dropped);
    assert_eq!(r.summary(), "1 loan, 1 tuned unit, escalation level 1");
    assert_eq!(layout(&q), layout(&p));
    check_ledger(&q);
    let loans = q.loans();
    assert_eq!(loans.len(), 1);
    assert_eq!((loans[0].cpu, &loans[0].borrower), (3, &n("a")));
    assert_eq!(q.island(&n("a")).unwrap().knobs(&n("ua")), Some(&tuned));
    assert_eq!(q.nack_count(&n("q"), Resource::CpuTime), 1);
    // The backoff's time left, less the 5 ms that passed.
    let left = until - ms(40);
    assert_eq!(
        q.backoff_until(&n("c"), &n("q"), Resource::CpuTime),
        Some(left - ms(5))
    );
    // Taken again, the state is the same but for the time that passed.
    assert_eq!(q.snapshot(ms(0)).timeless(), snap.timeless());
    // The restored loan is released as any other.
    let r = q.handle(ms(1), &n("a"), &release("o", "b"));
    assert_eq!(moves(&r), ["a->b:3"], "{r}");
    check_ledger(&q);
}

#[test]
fn a_backoff_that_ran_out_while_down_is_over_but_its_count_stays() {
    let p = busy();
    let snap = p.snapshot(ms(40));
    let mut q = fresh();
    q.restore(&snap, ms(100), Duration::from_secs(60), &holding(&p));
    assert_eq!(
        q.backoff_until(&n("c"), &n("q"), Resource::CpuTime),
        Some(ms(100))
    );
    assert_eq!(q.nack_count(&n("q"), Resource::CpuTime), 1);
}

#[test]
fn a_loan_whose_cpu_is_not_where_the_ledger_says_is_dropped() {
    let p = busy();
    let snap = p.snapshot(ms(40));
    // The kernel has CPU 3 back in b.
    let mut kernel = holding(&p);
    kernel.insert(n("a"), set("0-1"));
    kernel.insert(n("b"), set("2-3"));
    let mut q = fresh();
    let r = q.restore(&snap, ms(0), ms(0), &kernel);
    assert!(q.loans().is_empty());
    assert_eq!(layout(&q), "a=0-1 b=2-3 c=4-7");
    check_ledger(&q);
    assert_eq!(r.dropped.len(), 1, "{:?}", r.dropped);
    assert_eq!(
        r.dropped[0].to_string(),
        "loan of CPU 3 (b -> a, overlay o) dropped: CPU 3 is not in island a's CPUs (0-1) but in b's"
    );
    // In both islands: dropped as well.
    kernel.insert(n("a"), set("0-1,3"));
    let mut q = fresh();
    let r = q.restore(&snap, ms(0), ms(0), &kernel);
    assert!(q.loans().is_empty());
    assert!(r.dropped[0].why.contains("as well"), "{:?}", r.dropped);
    // An island whose CPUs cannot be read: dropped.
    kernel.remove(&n("a"));
    let mut q = fresh();
    let r = q.restore(&snap, ms(0), ms(0), &kernel);
    assert!(q.loans().is_empty());
    assert!(r.dropped[0].why.contains("read back"), "{:?}", r.dropped);
}

#[test]
fn parts_of_a_gone_overlay_island_or_unit_are_dropped() {
    let p = busy();
    let snap = p.snapshot(ms(40));
    // Overlay o is not registered any more: its loan and tune go.
    let mut q = platform(vec![
        fair("a", "0-1", &["ua", "ua2"]),
        fair("b", "2-3", &["ub"]),
        fair("c", "4-7", &["uc"]),
    ]);
    register(&mut q, overlay("q", 2, &[("c", "uc")]));
    let r = q.restore(&snap, ms(0), ms(0), &holding(&p));
    assert!(q.loans().is_empty());
    assert_eq!(layout(&q), "a=0-1 b=2-3 c=4-7");
    assert_eq!(r.summary(), "escalation level 1");
    let whys: Vec<String> = r.dropped.iter().map(ToString::to_string).collect();
    assert_eq!(
        whys,
        [
            "tuned knobs of unit ua dropped: the unit is not in overlay o now",
            "loan of CPU 3 (b -> a, overlay o) dropped: overlay o is not registered",
        ]
    );
    // Island b is gone: the loan goes with it.
    let mut q = platform(vec![
        fair("a", "0-1", &["ua", "ua2"]),
        fair("c", "4-7", &["uc"]),
    ]);
    register(&mut q, overlay("o", 1, &[("a", "ua"), ("a", "ua2")]));
    let r = q.restore(&snap, ms(0), ms(0), &holding(&p));
    assert!(q.loans().is_empty());
    assert!(
        r.dropped
            .iter()
            .any(|d| d.why == "island b is not configured"),
        "{:?}",
        r.dropped
    );
    check_ledger(&q);
}

#[test]
fn tuned_knobs_over_a_changed_base_are_dropped() {
    let p = busy();
    let snap = p.snapshot(ms(40));
    let mut q = fresh();
    q.set_unit_base(
        &n("ua"),
        UnitKnobs {
            weight: 300,
            ..UnitKnobs::default()
        },
    )
    .unwrap();
    let r = q.restore(&snap, ms(0), ms(0), &holding(&p));
    assert_eq!(
        q.island(&n("a")).unwrap().knobs(&n("ua")).unwrap().weight,
        300
    );
    assert!(r.units.is_empty());
    assert!(r.dropped[0].why.contains("configured knobs changed"));
}

#[test]
fn a_forged_ledger_is_refused() {
    let p = busy();
    let mut snap = p.snapshot(ms(40));
    // b's lowest CPU, never lent.
    snap.loans[0].cpu = 2;
    let mut kernel = holding(&p);
    kernel.insert(n("a"), set("0-2"));
    kernel.insert(n("b"), set("3"));
    let mut q = fresh();
    let r = q.restore(&snap, ms(0), ms(0), &kernel);
    assert!(q.loans().is_empty());
    assert!(r.dropped[0].why.contains("lowest"), "{:?}", r.dropped);
    // A CPU that is not the lender's; the same CPU twice.
    let mut snap = p.snapshot(ms(40));
    snap.loans[0].cpu = 5;
    let mut q = fresh();
    let r = q.restore(&snap, ms(0), ms(0), &holding(&p));
    assert!(r.dropped[0].why.contains("not one of island b's own"));
    let mut snap = p.snapshot(ms(40));
    snap.loans.push(snap.loans[0].clone());
    let mut q = fresh();
    let r = q.restore(&snap, ms(0), ms(0), &holding(&p));
    assert_eq!(q.loans().len(), 1);
    assert!(r.dropped[0].why.contains("twice"));
    check_ledger(&q);
}

#[test]
fn the_snapshot_format_is_strict() {
    let snap = busy().snapshot(ms(40));
    let text = serde_json::to_string(&snap).unwrap();
    let bad = text.replacen("\"cpu\":3", "\"cpu\":3,\"extra\":1", 1);
    assert_ne!(bad, text);
    assert!(serde_json::from_str::<CoordSnapshot>(&bad).is_err());
    assert!(CoordSnapshot::default().is_empty());
    assert_eq!(Restored::default().summary(), "nothing");
}

#[derive(Clone, Debug)]
enum Op {
    Observe(usize, u8),
    Borrow(usize, usize, u32),
    Release(usize, usize),
    Tune(usize, bool),
    Time(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..4, 0u8..5).prop_map(|(i, u)| Op::Observe(i, u)),
        (0usize..4, 0usize..4, 1u32..4).prop_map(|(a, b, k)| Op::Borrow(a, b, k)),
        (0usize..4, 0usize..4).prop_map(|(a, b)| Op::Release(a, b)),
        (0usize..4, any::<bool>()).prop_map(|(a, up)| Op::Tune(a, up)),
        (0u64..400).prop_map(Op::Time),
    ]
}

fn four() -> PlatformManager {
    let mut p = platform(vec![
        fair("a", "0", &["ua"]),
        fair("b", "1-2", &["ub", "vb"]),
        fair("c", "3-5", &["uc", "vc"]),
        fair("d", "6-9", &["ud"]),
    ]);
    for i in ["a", "b", "c", "d"] {
        register(
            &mut p,
            overlay(&format!("o{i}"), 1, &[(i, &format!("u{i}"))]),
        );
    }
    p
}

proptest! {
    /// Whatever was borrowed, released and tuned, a fresh platform restored
    /// from the snapshot (with the CPUs where the ledger says) holds the
    /// same CPUs, loans, knobs, backoff and counts, and a restored platform
    /// keeps its ledger consistent.
    #[test]
    fn a_restore_reproduces_the_state(ops in prop::collection::vec(op(), 1..60)) {
        let names = ["a", "b", "c", "d"];
        let mut p = four();
        let mut t = Duration::ZERO;
        for op in ops {
            match op {
                Op::Observe(i, u) => p.observe(&n(names[i]), f64::from(u)).unwrap(),
                Op::Borrow(a, b, k) => {
                    p.handle(t, &n(names[a]), &borrow(&format!("o{}", names[a]), names[b], k));
                }
                Op::Release(a, b) => {
                    p.handle(t, &n(names[a]), &release(&format!("o{}", names[a]), names[b]));
                }
                Op::Tune(a, up) => {
                    let dir = if up { Direction::Up } else { Direction::Down };
                    let o = format!("o{}", names[a]);
                    let u = format!("u{}", names[a]);
                    p.handle(t, &n(names[a]), &tune(&o, &u, Resource::CpuTime, dir));
                }
                Op::Time(d) => t += ms(d),
            }
        }
        let snap = p.snapshot(t);
        let mut q = four();
        let r = q.restore(&through_json(&snap), ms(7), ms(0), &holding(&p));
        prop_assert!(r.dropped.is_empty(), "{:?}", r.dropped);
        check_ledger(&q);
        prop_assert_eq!(layout(&q), layout(&p));
        prop_assert_eq!(q.loans().len(), p.loans().len());
        prop_assert_eq!(q.snapshot(ms(7)).timeless(), snap.timeless());
        for c in p.islands() {
            for (u, k) in c.units() {
                prop_assert_eq!(q.island(c.name()).unwrap().knobs(u), Some(k));
            }
        }
    }
}
