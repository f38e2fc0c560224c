use std::time::Duration;

use proptest::prelude::*;

use super::test_util::*;
use super::*;

#[test]
fn a_trigger_boosts_for_a_bounded_time_then_cools_down() {
    let mut c = coord(
        fair("web", "0-1", &["a", "b"]),
        CoordConfig::default(),
        &["a"],
    );
    let r = send(&mut c, ms(100), &trigger("o", "a"));
    assert_eq!(
        r.effects()[0].change,
        Change::Boost {
            island: n("web"),
            unit: n("a"),
            kind: BoostKind::Weight { weight: 10_000 },
            until: ms(130),
        }
    );
    let r = send(&mut c, ms(110), &trigger("o", "a"));
    assert_eq!(
        r.reason(),
        Some(&NackReason::AlreadyBoosted {
            unit: n("a"),
            until: ms(130)
        })
    );
    let mut out = Vec::new();
    c.expire(ms(129), &mut out);
    assert!(out.is_empty(), "expired early: {out:?}");
    c.expire(ms(130), &mut out);
    assert_eq!(
        out[0].change,
        Change::Unboost {
            island: n("web"),
            unit: n("a"),
            restore: BoostKind::Weight { weight: 100 },
        }
    );
    assert_eq!(out[0].why, Why::BoostExpired);
    let r = send(&mut c, ms(200), &trigger("o", "a"));
    assert_eq!(
        r.reason(),
        Some(&NackReason::CoolingDown {
            unit: n("a"),
            until: ms(220)
        })
    );
    assert!(send(&mut c, ms(220), &trigger("o", "a")).is_ack());
}

#[test]
fn an_island_boosts_at_most_max_boosts_units_at_once() {
    let mut c = coord(
        fair("web", "0-1", &["a", "b"]),
        CoordConfig::default(),
        &["a", "b"],
    );
    assert!(send(&mut c, ms(0), &trigger("o", "a")).is_ack());
    let r = send(&mut c, ms(10), &trigger("o", "b"));
    assert_eq!(
        r.reason(),
        Some(&NackReason::BoostSlotsBusy {
            island: n("web"),
            until: ms(30)
        })
    );
    // Once a's boost is over (even before the tick), b may go.
    assert!(send(&mut c, ms(30), &trigger("o", "b")).is_ack());
    let cfg = CoordConfig {
        max_boosts: 2,
        ..CoordConfig::default()
    };
    let mut c = coord(fair("web", "0-1", &["a", "b"]), cfg, &["a", "b"]);
    assert!(send(&mut c, ms(0), &trigger("o", "a")).is_ack());
    assert!(send(&mut c, ms(0), &trigger("o", "b")).is_ack());
}

#[test]
fn a_tune_during_a_boost_changes_what_the_boost_restores() {
    let mut c = coord(
        fair("web", "0-1", &["a", "b"]),
        CoordConfig::default(),
        &["a"],
    );
    assert!(send(&mut c, ms(0), &trigger("o", "a")).is_ack());
    let r = send(&mut c, ms(5), &up("a"));
    assert_eq!(
        r,
        Reply::Ack { effects: vec![] },
        "no write under the boost"
    );
    let mut out = Vec::new();
    c.expire(ms(30), &mut out);
    assert!(
        matches!(
            out[0].change,
            Change::Unboost {
                restore: BoostKind::Weight { weight: 125 },
                ..
            }
        ),
        "{out:?}"
    );
}

#[test]
fn a_realtime_trigger_raises_the_priority_to_the_islands_top() {
    let mut c = coord(
        rt("rt", "0-1", &["a", "b"], 100_000),
        CoordConfig::default(),
        &["a"],
    );
    let r = send(&mut c, ms(0), &trigger("o", "a"));
    assert!(
        matches!(
            r.effects()[0].change,
            Change::Boost {
                kind: BoostKind::RtPriority { priority: 50 },
                ..
            }
        ),
        "{r}"
    );
    let r = send(
        &mut c,
        ms(100),
        &Message::Trigger {
            resource: Resource::Memory,
            overlay: n("o"),
            unit: n("a"),
        },
    );
    assert!(
        matches!(r.reason(), Some(NackReason::Unsupported { .. })),
        "{r}"
    );
}

#[derive(Clone, Debug)]
enum Op {
    Tune(usize, bool),
    Trigger(usize),
    Tick,
}

fn ops() -> impl Strategy<Value = Vec<(u64, Op)>> {
    prop::collection::vec(
        (
            0u64..40,
            prop_oneof![
                (0usize..3, any::<bool>()).prop_map(|(u, up)| Op::Tune(u, up)),
                (0usize..3).prop_map(Op::Trigger),
                Just(Op::Tick),
            ],
        ),
        1..120,
    )
}

proptest! {
    /// Whatever the overlay asks, knobs stay in range, the island's RT budget
    /// is never over-committed, and boosts last exactly `boost_len` with at
    /// least `trigger_cooldown` between the end of one and the next.
    #[test]
    fn knobs_stay_bounded_and_boosts_are_rationed(seq in ops(), realtime in any::<bool>()) {
        let units = ["a", "b", "c"];
        let setup = if realtime {
            rt("i", "0-3", &units, 100_000)
        } else {
            let mut s = fair("i", "0-3", &units);
            s.units[1].knobs.cap = Some(1.5);
            s
        };
        let cfg = CoordConfig { max_boosts: 2, ..CoordConfig::default() };
        let mut c = coord(setup, cfg, &units);
        let mut t = Duration::ZERO;
        let mut boosts: Vec<Vec<(Duration, Duration)>> = vec![Vec::new(); 3];
        let mut ends: Vec<(Duration, String)> = Vec::new();
        for (dt, op) in seq {
            t += ms(dt);
            match op {
                Op::Tune(u, is_up) => {
                    let m = if is_up { up(units[u]) } else { down(units[u]) };
                    send(&mut c, t, &m);
                }
                Op::Trigger(u) => {
                    if let Reply::Ack { effects } = send(&mut c, t, &trigger("o", units[u])) {
                        match &effects[0].change {
                            Change::Boost { until, .. } => boosts[u].push((t, *until)),
                            other => prop_assert!(false, "{other}"),
                        }
                    }
                }
                Op::Tick => {
                    let mut out = Vec::new();
                    c.expire(t, &mut out);
                    for e in out {
                        if let Change::Unboost { unit, .. } = e.change {
                            ends.push((t, unit.to_string()));
                        }
                    }
                }
            }
            let knobs: Vec<UnitKnobs> = units.iter().map(|u| *c.knobs(&n(u)).unwrap()).collect();
            for k in &knobs {
                prop_assert!((MIN_WEIGHT..=MAX_WEIGHT).contains(&k.weight));
                if let Some(cap) = k.cap {
                    prop_assert!(cap > 0.0 && cap < 4.0, "cap {cap}");
                }
            }
            let rt_sum: u64 = knobs.iter().map(|k| k.rt_runtime_us).sum();
            let budget = if realtime { 500_000 } else { 0 };
            prop_assert!(rt_sum <= budget, "RT budget {} over {}", rt_sum, budget);
            let active = units
                .iter()
                .filter(|u| c.boosted_until(&n(u), t).is_some())
                .count();
            prop_assert!(active <= 2);
        }
        for b in &boosts {
            for (start, until) in b {
                prop_assert_eq!(*until - *start, cfg.boost_len);
            }
            for w in b.windows(2) {
                prop_assert!(w[1].0 >= w[0].1 + cfg.trigger_cooldown, "{w:?}");
            }
        }
        for (at, unit) in ends {
            let u = units.iter().position(|x| *x == unit).unwrap();
            prop_assert!(boosts[u].iter().any(|(_, until)| *until <= at), "unboost before its end");
        }
    }
}
