use std::time::Duration;

use proptest::prelude::*;

use super::test_util::*;
use super::*;

/// Backoff that never outlasts a round a second long; no damping.
fn quick() -> CoordConfig {
    CoordConfig {
        damping: Duration::ZERO,
        backoff_base: ms(1),
        backoff_max: ms(2),
        escalate_after: 1000,
        ..CoordConfig::default()
    }
}

/// A lender `l` (CPUs 0-1: one to lend) and a one-CPU borrower island per
/// overlay, overlay `o<k>` with priority `prios[k]` on island `b<k>`.
fn contest(prios: &[u8], policy: ArbitrationPolicy, cfg: CoordConfig) -> PlatformManager {
    let mut islands = vec![fair("l", "0-1", &["ul"])];
    for k in 0..prios.len() {
        islands.push(fair(
            &format!("b{k}"),
            &(k + 2).to_string(),
            &[&format!("u{k}")],
        ));
    }
    let mut p = PlatformManager::new(cfg, islands).unwrap();
    p.set_arbitration(&n("l"), policy).unwrap();
    for (k, prio) in prios.iter().enumerate() {
        let (i, u) = (format!("b{k}"), format!("u{k}"));
        register(&mut p, overlay(&format!("o{k}"), *prio, &[(&i, &u)]));
    }
    p.observe(&n("l"), 0.0).unwrap();
    p
}

/// `rounds` rounds in which every overlay asks `l` for its one CPU (always
/// in the same arrival order); the winner gives it back at the end of the
/// round. Returns the wins per overlay and every loser's refusal.
fn play(p: &mut PlatformManager, overlays: usize, rounds: u64) -> (Vec<u32>, Vec<NackReason>) {
    let mut wins = vec![0u32; overlays];
    let mut refusals = Vec::new();
    for r in 0..rounds {
        let t = Duration::from_secs(r + 1);
        let tickets: Vec<Ticket> = (0..overlays)
            .map(|k| {
                p.submit(t, &n(&format!("b{k}")), borrow(&format!("o{k}"), "l", 1))
                    .unwrap()
            })
            .collect();
        let answers = p.arbitrate(t);
        assert_eq!(
            answers.iter().map(|a| a.ticket).collect::<Vec<_>>(),
            tickets
        );
        let winners: Vec<usize> = (0..overlays)
            .filter(|k| answers[*k].reply.is_ack())
            .collect();
        assert_eq!(winners.len(), 1, "one CPU, one winner: {answers:?}");
        let w = winners[0];
        wins[w] += 1;
        for a in answers.iter().filter(|a| !a.reply.is_ack()) {
            refusals.push(a.reply.reason().cloned().unwrap());
        }
        let back = p.handle(t, &n(&format!("b{w}")), &release(&format!("o{w}"), "l"));
        assert!(back.is_ack(), "{back}");
    }
    (wins, refusals)
}

#[test]
fn round_robin_shares_a_contended_cpu_evenly_whatever_the_arrival_order() {
    let mut p = contest(&[1, 9], ArbitrationPolicy::RoundRobin, quick());
    let (wins, refusals) = play(&mut p, 2, 100);
    assert_eq!(wins, [50, 50]);
    for r in &refusals {
        assert!(matches!(r, NackReason::LostArbitration { .. }), "{r}");
    }
    let mut p = contest(&[3, 3, 3], ArbitrationPolicy::RoundRobin, quick());
    let (wins, _) = play(&mut p, 3, 99);
    assert_eq!(wins, [33, 33, 33]);
}

#[test]
fn priority_arbitration_serves_the_highest_and_rotates_among_equals() {
    let mut p = contest(&[1, 9], ArbitrationPolicy::Priority, quick());
    let (wins, refusals) = play(&mut p, 2, 100);
    assert_eq!(wins, [0, 100]);
    assert!(refusals
        .iter()
        .all(|r| r == &NackReason::LostArbitration { winner: n("o1") }));
    let mut p = contest(&[1, 5, 5], ArbitrationPolicy::Priority, quick());
    let (wins, _) = play(&mut p, 3, 100);
    assert_eq!(wins, [0, 50, 50]);
}

#[test]
fn uncontended_demands_of_one_round_are_all_granted() {
    let mut p = PlatformManager::new(
        quick(),
        vec![fair("a", "0-1", &["x", "y", "z"]), fair("b", "2-3", &["w"])],
    )
    .unwrap();
    register(&mut p, overlay("ox", 1, &[("a", "x")]));
    register(&mut p, overlay("oy", 2, &[("a", "y")]));
    p.observe(&n("b"), 0.0).unwrap();
    let up = |o: &str, u: &str| tune(o, u, Resource::CpuTime, Direction::Up);
    p.submit(ms(0), &n("a"), up("ox", "x")).unwrap();
    p.submit(ms(0), &n("a"), up("oy", "y")).unwrap();
    // A release in the same round runs before the demands.
    p.submit(ms(0), &n("a"), borrow("ox", "b", 1)).unwrap();
    let answers = p.arbitrate(ms(0));
    assert!(answers.iter().all(|a| a.reply.is_ack()), "{answers:?}");
    assert_eq!(p.pending(), 0);
    p.submit(ms(10), &n("a"), borrow("oy", "b", 1)).unwrap();
    p.submit(ms(10), &n("a"), release("ox", "b")).unwrap();
    let answers = p.arbitrate(ms(10));
    assert!(
        answers.iter().all(|a| a.reply.is_ack()),
        "release first: {answers:?}"
    );
}

#[test]
fn a_refused_sender_backs_off_exponentially_until_an_ack() {
    let mut p = PlatformManager::new(
        CoordConfig {
            escalate_after: 1000,
            ..CoordConfig::default()
        },
        vec![fair("a", "0", &["ua"]), fair("l", "1-2", &["ul"])],
    )
    .unwrap();
    register(&mut p, overlay("o", 1, &[("a", "ua")]));
    let m = borrow("o", "l", 1);
    let key = |p: &PlatformManager| p.backoff_until(&n("a"), &n("o"), Resource::Cores);
    let mut t = ms(1000);
    let mut delays = Vec::new();
    for _ in 0..8 {
        let r = p.handle(t, &n("a"), &m);
        assert!(
            matches!(r.reason(), Some(NackReason::NoIdleCapacity { .. })),
            "{r}"
        );
        let until = key(&p).unwrap();
        delays.push((until - t).as_millis());
        // Early: refused at once with the retry time, which does not move.
        let early = p.handle(until - ms(1), &n("a"), &m);
        assert_eq!(early.reason(), Some(&NackReason::BackingOff { until }));
        assert_eq!(
            p.submit(until - ms(1), &n("a"), m.clone()),
            Err(NackReason::BackingOff { until })
        );
        assert_eq!(key(&p), Some(until));
        t = until;
    }
    assert_eq!(delays, [30, 60, 120, 240, 480, 960, 960, 960]);
    // Non-demands are never held back.
    let r = p.handle(t - ms(1), &n("a"), &release("o", "l"));
    assert!(
        matches!(r.reason(), Some(NackReason::NothingToRelease { .. })),
        "{r}"
    );
    // Another resource, or another sender, is not held back either.
    let r = p.handle(
        t - ms(1),
        &n("a"),
        &tune("o", "ua", Resource::CpuTime, Direction::Up),
    );
    assert!(
        matches!(r.reason(), Some(NackReason::AtCapacity { .. })),
        "{r}"
    );

    p.observe(&n("l"), 0.0).unwrap();
    assert!(p.handle(t, &n("a"), &m).is_ack());
    assert_eq!(key(&p), None, "an ack resets the backoff");
    p.observe(&n("l"), 2.0).unwrap();
    p.handle(t + ms(1), &n("a"), &m);
    assert_eq!(key(&p), Some(t + ms(31)), "back to the base");
}

/// Islands l (0-1), lo (2), hi (3); overlay low (priority 1) on lo, high
/// (priority 9) on hi. Backoff short so a request every 10 ms goes through.
fn ladder() -> PlatformManager {
    let cfg = CoordConfig {
        backoff_base: ms(1),
        backoff_max: ms(8),
        ..CoordConfig::default()
    };
    let mut p = PlatformManager::new(
        cfg,
        vec![
            fair("l", "0-1", &["ul"]),
            fair("lo", "2", &["ulo"]),
            fair("hi", "3", &["uhi"]),
        ],
    )
    .unwrap();
    register(&mut p, overlay("low", 1, &[("lo", "ulo")]));
    register(&mut p, overlay("high", 9, &[("hi", "uhi")]));
    p.observe(&n("l"), 0.0).unwrap();
    p
}

#[test]
fn the_fifth_successive_refusal_escalates_and_takes_a_lower_priority_loan() {
    let mut p = ladder();
    assert_eq!(
        moves(&p.handle(ms(0), &n("lo"), &borrow("low", "l", 1))),
        ["l->lo:1"]
    );
    let m = borrow("high", "l", 1);
    for k in 1..=4u64 {
        let r = p.handle(ms(10 * k), &n("hi"), &m);
        assert_eq!(
            r.reason(),
            Some(&NackReason::LastCore { island: n("l") }),
            "#{k}"
        );
        assert_eq!(
            p.nack_count(&n("high"), Resource::Cores),
            u32::try_from(k).unwrap()
        );
    }
    let r = p.handle(ms(50), &n("hi"), &m);
    assert_eq!(moves(&r), ["lo->hi:1"], "{r}");
    assert_eq!(
        r.effects()[0].why,
        Why::Escalation {
            winner: n("high"),
            victim: n("low"),
            nacks: 5,
            resource: Resource::Cores,
        }
    );
    assert_eq!(p.nack_count(&n("high"), Resource::Cores), 0);
    assert_eq!(p.backoff_until(&n("hi"), &n("high"), Resource::Cores), None);
    let loans = p.loans();
    assert_eq!(
        (
            loans[0].lender.as_str(),
            loans[0].borrower.as_str(),
            loans[0].overlay.as_str()
        ),
        ("l", "hi", "high"),
        "the loan is high's now; the lender stays"
    );
    check_ledger(&p);
    // low asking back never escalates against a higher priority.
    for k in 6..=10u64 {
        let r = p.handle(ms(10 * k), &n("lo"), &borrow("low", "l", 1));
        assert!(!r.is_ack(), "#{k}: {r}");
    }
    assert!(
        matches!(
            p.handle(ms(200), &n("lo"), &borrow("low", "l", 1)).reason(),
            Some(NackReason::LastCore { .. })
        ),
        "the count started again after the refused escalation"
    );
    check_ledger(&p);
}

#[test]
fn without_a_victim_every_fifth_refusal_is_a_platform_refusal() {
    let mut p = ladder();
    p.observe(&n("l"), 2.0).unwrap();
    let m = borrow("high", "l", 1);
    let refused: Vec<u64> = (1..=12u64)
        .filter(|k| {
            matches!(
                p.handle(ms(10 * k), &n("hi"), &m).reason(),
                Some(NackReason::PlatformRefused { nacks: 5, .. })
            )
        })
        .collect();
    assert_eq!(refused, [5, 10]);
}

#[test]
fn lost_arbitrations_count_toward_escalation() {
    let cfg = CoordConfig {
        escalate_after: 5,
        ..quick()
    };
    let mut p = contest(&[1, 9], ArbitrationPolicy::Priority, cfg);
    let (_, refusals) = play(&mut p, 2, 10);
    let kinds: Vec<bool> = refusals
        .iter()
        .map(|r| matches!(r, NackReason::PlatformRefused { .. }))
        .collect();
    assert_eq!(
        kinds,
        [false, false, false, false, true, false, false, false, false, true]
    );
}

#[test]
fn an_escalated_realtime_tune_takes_budget_back_from_a_lower_priority_unit() {
    let cfg = CoordConfig {
        backoff_base: ms(1),
        backoff_max: ms(8),
        ..CoordConfig::default()
    };
    let mut p = PlatformManager::new(cfg, vec![rt("r", "0-1", &["hi", "lo"], 100_000)]).unwrap();
    register(&mut p, overlay("high", 9, &[("r", "hi")]));
    register(&mut p, overlay("low", 1, &[("r", "lo")]));
    let up = |o: &str, u: &str| tune(o, u, Resource::CpuTime, Direction::Up);
    while p.handle(ms(0), &n("r"), &up("low", "lo")).is_ack() {}
    let knob = |p: &PlatformManager, u: &str| p.islands()[0].knobs(&n(u)).unwrap().rt_runtime_us;
    assert_eq!(knob(&p, "lo"), 400_000);
    let mut last = Reply::nack(NackReason::ZeroAmount);
    for k in 1..=5u64 {
        last = p.handle(ms(10 * k), &n("r"), &up("high", "hi"));
        assert_eq!(last.is_ack(), k == 5, "#{k}: {last}");
    }
    let text: Vec<String> = last
        .effects()
        .iter()
        .map(|e| e.change.to_string())
        .collect();
    assert_eq!(
        text,
        [
            "set the RT budget of r/lo to 100000 us",
            "set the RT budget of r/hi to 150000 us"
        ]
    );
    assert!(matches!(last.effects()[0].why, Why::Escalation { .. }));
    assert!(knob(&p, "lo") + knob(&p, "hi") <= 500_000);
}

#[test]
fn an_escalated_trigger_ends_a_lower_priority_boost() {
    let cfg = CoordConfig {
        backoff_base: ms(1),
        backoff_max: ms(8),
        boost_len: Duration::from_secs(10),
        ..CoordConfig::default()
    };
    let mut p = PlatformManager::new(cfg, vec![fair("f", "0-1", &["hi", "lo"])]).unwrap();
    register(&mut p, overlay("high", 9, &[("f", "hi")]));
    register(&mut p, overlay("low", 1, &[("f", "lo")]));
    assert!(p.handle(ms(0), &n("f"), &trigger("low", "lo")).is_ack());
    for k in 1..=4u64 {
        let r = p.handle(ms(10 * k), &n("f"), &trigger("high", "hi"));
        assert!(
            matches!(r.reason(), Some(NackReason::BoostSlotsBusy { .. })),
            "{r}"
        );
    }
    let r = p.handle(ms(50), &n("f"), &trigger("high", "hi"));
    let text: Vec<String> = r.effects().iter().map(|e| e.change.to_string()).collect();
    assert_eq!(
        text,
        [
            "end the boost of f/lo: back to weight 100",
            "boost f/hi to weight 10000 until t=10.050s"
        ]
    );
    assert!(p.islands()[0].boosted_until(&n("lo"), ms(50)).is_none());
}

proptest! {
    /// Over any arrival orders, round-robin gives each of two overlays that
    /// ask every round within one win of the other.
    #[test]
    fn round_robin_is_fair_for_any_arrival_order(orders in prop::collection::vec(any::<bool>(), 1..60)) {
        let mut p = contest(&[2, 7], ArbitrationPolicy::RoundRobin, quick());
        let mut wins = [0i64; 2];
        for (r, flip) in orders.iter().enumerate() {
            let t = Duration::from_secs(r as u64 + 1);
            let ks = if *flip { [1, 0] } else { [0, 1] };
            for k in ks {
                p.submit(t, &n(&format!("b{k}")), borrow(&format!("o{k}"), "l", 1)).unwrap();
            }
            let answers = p.arbitrate(t);
            for a in answers.iter().filter(|a| a.reply.is_ack()) {
                let k = usize::from(a.from == n("b1"));
                wins[k] += 1;
                let back = p.handle(t, &a.from, &release(&format!("o{k}"), "l"));
                prop_assert!(back.is_ack());
            }
            prop_assert!((wins[0] - wins[1]).abs() <= 1, "{:?}", wins);
        }
    }
}
