use super::test_util::*;
use super::*;
use crate::spec::SchedPolicy;

#[test]
fn a_fair_weight_grows_by_the_step_and_stops_at_capacity() {
    let mut c = coord(
        fair("web", "0-1", &["a", "b"]),
        CoordConfig::default(),
        &["a"],
    );
    let mut w = 100u32;
    let mut steps = 0;
    loop {
        let r = send(&mut c, ms(0), &up("a"));
        match r {
            Reply::Ack { effects } => {
                let expect = crate::num::saturating_u32((f64::from(w) * 1.25).ceil())
                    .clamp(w + 1, MAX_WEIGHT);
                assert_eq!(
                    effects[0].change,
                    Change::SetWeight {
                        island: n("web"),
                        unit: n("a"),
                        weight: expect
                    }
                );
                w = expect;
                steps += 1;
            }
            Reply::Nack { reason } => {
                assert_eq!(w, MAX_WEIGHT);
                assert!(
                    matches!(
                        reason,
                        NackReason::AtCapacity {
                            limit: Limit::MaxWeight { weight: 10_000 },
                            ..
                        }
                    ),
                    "{reason}"
                );
                assert!(reason.to_string().starts_with("at capacity"), "{reason}");
                break;
            }
        }
        assert!(steps < 100, "no capacity stop");
    }
    // 100 * 1.25^21 > 10000 > 100 * 1.25^20.
    assert_eq!(steps, 21);
    assert_eq!(c.knobs(&n("b")).unwrap().weight, 100, "others untouched");
}

#[test]
fn a_unit_alone_on_its_island_is_at_capacity() {
    let mut c = coord(fair("web", "0-1", &["a"]), CoordConfig::default(), &["a"]);
    let r = send(&mut c, ms(0), &up("a"));
    assert!(
        matches!(
            r.reason(),
            Some(NackReason::AtCapacity {
                limit: Limit::WholeIsland { cpus: 2 },
                ..
            })
        ),
        "{r}"
    );
}

#[test]
fn a_weight_goes_down_to_one_and_no_further() {
    let mut c = coord(
        fair("web", "0-1", &["a", "b"]),
        CoordConfig::default(),
        &["a"],
    );
    let mut last = 100;
    for _ in 0..40 {
        match send(&mut c, ms(0), &down("a")) {
            Reply::Ack { .. } => {
                let w = c.knobs(&n("a")).unwrap().weight;
                assert!(w < last && w >= 1);
                last = w;
            }
            Reply::Nack { reason } => {
                assert_eq!(last, 1);
                assert!(matches!(reason, NackReason::AtMinimum { .. }), "{reason}");
                return;
            }
        }
    }
    panic!("never reached the minimum");
}

#[test]
fn a_capped_unit_is_tuned_through_its_cap_which_lifts_at_the_island_size() {
    let mut setup = fair("web", "0-1", &["a", "b"]);
    setup.units[0].knobs.cap = Some(0.5);
    let mut c = coord(setup, CoordConfig::default(), &["a"]);
    let caps: Vec<Option<f64>> = (0..3)
        .map(|_| {
            let r = send(&mut c, ms(0), &up("a"));
            match &r.effects()[0].change {
                Change::SetCap { cpus, .. } => *cpus,
                other => panic!("{other}"),
            }
        })
        .collect();
    assert_eq!(caps, [Some(1.0), Some(1.5), None]);
    // Uncapped now: the weight moves.
    let r = send(&mut c, ms(0), &up("a"));
    assert!(
        matches!(r.effects()[0].change, Change::SetWeight { weight: 125, .. }),
        "{r}"
    );

    let mut setup = fair("web", "0-1", &["a", "b"]);
    setup.units[0].knobs.cap = Some(1.2);
    let mut c = coord(setup, CoordConfig::default(), &["a"]);
    assert!(send(&mut c, ms(0), &down("a")).is_ack());
    assert_eq!(c.knobs(&n("a")).unwrap().cap, Some(0.7));
    assert!(send(&mut c, ms(0), &down("a")).is_ack());
    assert_eq!(c.knobs(&n("a")).unwrap().cap, Some(0.5));
    let r = send(&mut c, ms(0), &down("a"));
    assert!(
        matches!(r.reason(), Some(NackReason::AtMinimum { .. })),
        "{r}"
    );
}

#[test]
fn a_realtime_budget_grows_within_the_islands_budget() {
    let mut c = coord(
        rt("rt", "0-1", &["a", "b"], 100_000),
        CoordConfig::default(),
        &["a", "b"],
    );
    let mut acks = 0;
    loop {
        let r = send(&mut c, ms(0), &up("a"));
        if !r.is_ack() {
            assert!(
                matches!(
                    r.reason(),
                    Some(NackReason::AtCapacity {
                        limit: Limit::RtBudget {
                            runtime_us: 500_000
                        },
                        ..
                    })
                ),
                "{r}"
            );
            break;
        }
        acks += 1;
    }
    // 300000 us of room in steps of 50000.
    assert_eq!(acks, 6);
    assert_eq!(c.knobs(&n("a")).unwrap().rt_runtime_us, 400_000);
    // Giving some back makes room for the other unit.
    assert!(send(&mut c, ms(0), &down("a")).is_ack());
    let r = send(&mut c, ms(0), &up("b"));
    assert!(
        matches!(
            r.effects()[0].change,
            Change::SetRtBudget {
                runtime_us: 150_000,
                ..
            }
        ),
        "{r}"
    );
    assert!(!send(&mut c, ms(0), &up("b")).is_ack());
}

#[test]
fn cores_cannot_be_tuned_and_idle_islands_not_at_all() {
    let mut c = coord(
        fair("web", "0-1", &["a", "b"]),
        CoordConfig::default(),
        &["a"],
    );
    let r = send(
        &mut c,
        ms(0),
        &tune("o", "a", Resource::Cores, Direction::Up),
    );
    assert!(
        matches!(r.reason(), Some(NackReason::Unsupported { .. })),
        "{r}"
    );
    let mut idle = fair("bg", "0-1", &["a", "b"]);
    idle.policy = SchedPolicy::Idle;
    let mut c = coord(idle, CoordConfig::default(), &["a"]);
    for m in [up("a"), trigger("o", "a")] {
        let r = send(&mut c, ms(0), &m);
        assert!(
            matches!(r.reason(), Some(NackReason::Unsupported { .. })),
            "{r}"
        );
    }
}

#[test]
fn memory_moves_by_steps_within_the_islands_memory() {
    let mut c = coord(
        fair("web", "0-1", &["a", "b"]),
        CoordConfig::default(),
        &["a"],
    );
    let mem = |d| tune("o", "a", Resource::Memory, d);
    let r = send(&mut c, ms(0), &mem(Direction::Up));
    assert!(
        matches!(r.reason(), Some(NackReason::AtCapacity { .. })),
        "no limit yet: {r}"
    );
    assert!(send(&mut c, ms(0), &mem(Direction::Down)).is_ack());
    assert_eq!(
        c.knobs(&n("a")).unwrap().memory_high,
        Some((1 << 30) - (64 << 20))
    );
    let r = send(&mut c, ms(0), &mem(Direction::Up));
    assert!(
        matches!(
            r.effects()[0].change,
            Change::SetMemoryHigh { bytes: None, .. }
        ),
        "{r}"
    );
}

#[test]
fn messages_for_unknown_overlays_and_units_are_refused() {
    let mut c = coord(
        fair("web", "0-1", &["a", "b"]),
        CoordConfig::default(),
        &["a"],
    );
    let r = send(
        &mut c,
        ms(0),
        &tune("x", "a", Resource::CpuTime, Direction::Up),
    );
    assert!(
        matches!(r.reason(), Some(NackReason::NotRegistered { .. })),
        "{r}"
    );
    let r = send(&mut c, ms(0), &up("b"));
    assert!(
        matches!(r.reason(), Some(NackReason::UnknownUnit { .. })),
        "b is not in o: {r}"
    );
    for m in [
        borrow_any("o", 1),
        release("o", "web"),
        borrow("o", "other", 1),
    ] {
        let r = send(&mut c, ms(0), &m);
        assert!(
            matches!(r.reason(), Some(NackReason::NotForIsland { .. })),
            "{r}"
        );
    }
    assert!(send(&mut c, ms(0), &Message::Null).is_ack());
}

#[test]
fn an_island_lends_idle_cpus_but_never_its_last_own_one() {
    let cfg = CoordConfig::default();
    let mut c = Coordinator::new(fair("a", "0-3", &["u"]), cfg).unwrap();
    // No usage sample yet: nothing counts as idle.
    assert_eq!(
        c.lend(ms(0), 1),
        Err(NackReason::NoIdleCapacity {
            island: Some(n("a"))
        })
    );
    c.observe(1.5).unwrap();
    assert_eq!(c.idle(ms(0)).idle_cores, 2);
    assert_eq!(
        c.lend(ms(0), 3).unwrap(),
        set("1-2"),
        "two idle CPUs, lowest kept"
    );
    assert_eq!(c.cpus(), &set("0,3"));
    c.observe(0.0).unwrap();
    assert_eq!(c.lend(ms(0), 5).unwrap(), set("3"));
    assert_eq!(
        c.lend(ms(0), 1),
        Err(NackReason::LastCore { island: n("a") })
    );
    assert_eq!(c.lend(ms(0), 0), Err(NackReason::ZeroAmount));
    let mut one = Coordinator::new(fair("b", "7", &["u"]), cfg).unwrap();
    one.observe(0.0).unwrap();
    assert_eq!(one.idle(ms(0)).lendable, 0);
    assert_eq!(
        one.lend(ms(0), 1),
        Err(NackReason::LastCore { island: n("b") })
    );
}

#[test]
fn a_coordinator_alone_lends_on_borrow_preferred_addressed_to_it() {
    let mut c = Coordinator::new(fair("a", "0-1", &["u"]), CoordConfig::default()).unwrap();
    c.observe(0.0).unwrap();
    c.handle(
        ms(0),
        &n("a"),
        &Message::Register {
            overlay: overlay("o", 1, &[]),
        },
    );
    let r = c.handle(ms(0), &n("b"), &borrow("o", "a", 1));
    assert_eq!(moves(&r), ["a->b:1"]);
    let r = c.handle(ms(0), &n("a"), &borrow("o", "a", 1));
    assert!(
        matches!(r.reason(), Some(NackReason::SelfBorrow { .. })),
        "{r}"
    );
}

#[test]
fn bad_constants_and_setups_are_refused_with_the_value() {
    CoordConfig::default().validate().unwrap();
    let bad = [
        CoordConfig {
            weight_step: 1.0,
            ..Default::default()
        },
        CoordConfig {
            backoff_max: ms(1),
            ..Default::default()
        },
        CoordConfig {
            escalate_after: 0,
            ..Default::default()
        },
        CoordConfig {
            cap_step: f64::NAN,
            ..Default::default()
        },
    ];
    let fields: Vec<&str> = bad
        .iter()
        .map(|c| match c.validate() {
            Err(CoordError::BadConfig { field, .. }) => field,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        fields,
        ["weight_step", "backoff_max", "escalate_after", "cap_step"]
    );
    let e = CoordConfig {
        weight_step: 1.0,
        ..Default::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.to_string(), "coord.weight_step = 1 is outside 1.01..=10");

    let cfg = CoordConfig::default();
    assert!(matches!(
        Coordinator::new(fair("a", "", &[]), cfg),
        Err(CoordError::EmptyIsland { .. })
    ));
    assert!(matches!(
        Coordinator::new(fair("a", "0", &["u", "u"]), cfg),
        Err(CoordError::DuplicateUnit { .. })
    ));
    let mut s = fair("a", "0", &["u"]);
    s.units[0].knobs.weight = 0;
    assert!(matches!(
        Coordinator::new(s, cfg),
        Err(CoordError::BadKnob {
            field: "weight",
            ..
        })
    ));
    let mut s = rt("r", "0", &["u"], 1000);
    s.units[0].knobs.rt_priority = 99;
    let e = Coordinator::new(s, cfg).unwrap_err();
    assert!(e.to_string().contains("10..=50"), "{e}");
    assert!(matches!(
        Coordinator::new(rt("r", "0", &["u", "v"], 300_000), cfg),
        Err(CoordError::BadKnob { .. })
    ));
    let mut c = Coordinator::new(fair("a", "0", &["u"]), cfg).unwrap();
    assert!(matches!(c.observe(-1.0), Err(CoordError::BadUsage { .. })));
}

#[test]
fn effects_and_refusals_read_as_reasons() {
    let e = Effect::new(
        Change::SetWeight {
            island: n("web"),
            unit: n("api"),
            weight: 125,
        },
        Why::Tune {
            overlay: n("shop"),
            resource: Resource::CpuTime,
            dir: Direction::Up,
        },
    );
    assert_eq!(
        e.to_string(),
        "set weight of web/api to 125: overlay shop asked to tune CPU time up"
    );
    let r = NackReason::Damped {
        island: n("b"),
        cpu: 3,
        until: ms(1500),
    };
    assert_eq!(
        r.to_string(),
        "damped: CPU 3 moved to island b recently and may move again at t=1.500s"
    );
    assert_eq!(
        NackReason::LostArbitration { winner: n("web") }.to_string(),
        "lost arbitration to overlay web"
    );
    assert_eq!(
        Reply::nack(NackReason::BackingOff { until: ms(60) }).to_string(),
        "nack: backing off until t=0.060s"
    );
}
