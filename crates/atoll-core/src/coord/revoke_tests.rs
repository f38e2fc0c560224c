use super::test_util::*;
use super::*;

fn platform(islands: Vec<IslandSetup>) -> PlatformManager {
    PlatformManager::new(CoordConfig::default(), islands).unwrap()
}

fn revoke(overlay: &str, island: &str) -> Message {
    Message::Revoke {
        resource: Resource::Cores,
        overlay: n(overlay),
        island: n(island),
    }
}

/// Islands a (0-1), b (2-4), c (5-7); overlay o on a's unit, p on c's.
fn abc() -> PlatformManager {
    let mut p = platform(vec![
        fair("a", "0-1", &["ua"]),
        fair("b", "2-4", &["ub"]),
        fair("c", "5-7", &["uc"]),
    ]);
    register(&mut p, overlay("o", 1, &[("a", "ua")]));
    register(&mut p, overlay("q", 1, &[("c", "uc")]));
    p
}

#[test]
fn a_lender_revokes_its_own_cpus_at_once_whatever_the_damping() {
    let mut p = abc();
    p.observe(&n("b"), 0.0).unwrap();
    let r = p.handle(ms(0), &n("a"), &borrow("o", "b", 2));
    assert_eq!(moves(&r), ["b->a:3-4"], "{r}");
    // 10 ms later, well within the damping window: b's load rose.
    let r = p.handle(ms(10), &n("b"), &revoke("o", "a"));
    assert_eq!(moves(&r), ["a->b:3-4"], "{r}");
    assert_eq!(
        r.effects()[0].why,
        Why::Revoke {
            overlay: n("o"),
            lender: n("b")
        }
    );
    assert_eq!(layout(&p), "a=0-1 b=2-4 c=5-7");
    assert!(p.loans().is_empty());
    check_ledger(&p);
    // Nothing left to revoke; not a shortage, so nothing escalates.
    let r = p.handle(ms(20), &n("b"), &revoke("o", "a"));
    assert_eq!(
        r.reason(),
        Some(&NackReason::NothingLent {
            island: n("a"),
            overlay: n("o")
        })
    );
    let r = p.handle(ms(2000), &n("b"), &revoke("o", "b"));
    assert!(
        matches!(r.reason(), Some(NackReason::SelfBorrow { .. })),
        "{r}"
    );
    let mut r2 = revoke("o", "a");
    if let Message::Revoke { resource, .. } = &mut r2 {
        *resource = Resource::CpuTime;
    }
    let r = p.handle(ms(3000), &n("b"), &r2);
    assert!(
        matches!(r.reason(), Some(NackReason::Unsupported { .. })),
        "{r}"
    );
}

#[test]
fn a_cpu_lent_onward_is_damped_then_an_escalated_revoke_takes_it() {
    let cfg = CoordConfig {
        escalate_after: 2,
        ..CoordConfig::default()
    };
    let mut p = PlatformManager::new(
        cfg,
        vec![
            fair("a", "0-1", &["ua"]),
            fair("b", "2-4", &["ub"]),
            fair("c", "5-7", &["uc"]),
        ],
    )
    .unwrap();
    register(&mut p, overlay("o", 1, &[("a", "ua")]));
    register(&mut p, overlay("q", 1, &[("c", "uc")]));
    p.observe(&n("b"), 0.0).unwrap();
    let r = p.handle(ms(0), &n("a"), &borrow("o", "b", 1));
    assert_eq!(moves(&r), ["b->a:3"], "{r}");
    // a lends its own CPU and b's onward to c (after the damping window).
    p.observe(&n("a"), 0.0).unwrap();
    let r = p.handle(ms(400), &n("c"), &borrow("q", "a", 2));
    assert_eq!(moves(&r), ["a->c:1,3"], "{r}");
    // a's load rises 10 ms later: its own CPU comes back at once, b's is
    // c's for the damping window.
    let r = p.handle(ms(410), &n("a"), &revoke("q", "c"));
    assert_eq!(moves(&r), ["c->a:1"], "{r}");
    let r = p.handle(ms(420), &n("a"), &revoke("q", "c"));
    assert_eq!(
        r.reason(),
        Some(&NackReason::Damped {
            island: n("c"),
            cpu: 3,
            until: ms(700)
        })
    );
    assert_eq!(p.nack_count(&n("q"), Resource::Cores), 1);
    let until = p.backoff_until(&n("a"), &n("q"), Resource::Cores).unwrap();
    assert_eq!(until, ms(450));
    let r = p.handle(ms(449), &n("a"), &revoke("q", "c"));
    assert!(
        matches!(r.reason(), Some(NackReason::BackingOff { .. })),
        "{r}"
    );
    // The second refusal escalates: the platform manager carries it out.
    let r = p.handle(until, &n("a"), &revoke("q", "c"));
    assert_eq!(moves(&r), ["c->a:3"], "{r}");
    assert!(matches!(r.effects()[0].why, Why::Revoke { .. }), "{r}");
    assert_eq!(layout(&p), "a=0-1,3 b=2,4 c=5-7");
    check_ledger(&p);
    // b takes its own CPU home.
    let r = p.handle(ms(2000), &n("b"), &revoke("o", "a"));
    assert_eq!(moves(&r), ["a->b:3"], "{r}");
    assert_eq!(layout(&p), "a=0-1 b=2-4 c=5-7");
    assert!(p.loans().is_empty());
    check_ledger(&p);
}

#[test]
fn an_overlay_trigger_boosts_all_its_units_together_or_none() {
    let mut p = platform(vec![
        fair("a", "0-1", &["u1", "u2", "x"]),
        fair("b", "2-3", &["u3"]),
    ]);
    register(
        &mut p,
        overlay("o", 1, &[("a", "u1"), ("a", "u2"), ("b", "u3")]),
    );
    register(&mut p, overlay("other", 1, &[("a", "x")]));
    let all = Message::TriggerOverlay {
        resource: Resource::CpuTime,
        overlay: n("o"),
    };
    let r = p.handle(ms(100), &n("a"), &all);
    assert!(r.is_ack(), "{r}");
    let boosted: Vec<(String, Duration)> = r
        .effects()
        .iter()
        .filter_map(|e| match &e.change {
            Change::Boost { unit, until, .. } => Some((unit.to_string(), *until)),
            _ => None,
        })
        .collect();
    assert_eq!(
        boosted,
        [
            ("u1".to_string(), ms(130)),
            ("u2".to_string(), ms(130)),
            ("u3".to_string(), ms(130))
        ],
        "one boost slot of a holds both of o's units"
    );
    // The slot is o's: another overlay's unit on a waits for it.
    let r = p.handle(ms(110), &n("a"), &trigger("other", "x"));
    assert!(
        matches!(r.reason(), Some(NackReason::BoostSlotsBusy { .. })),
        "{r}"
    );
    // All or none: u3 alone cools down later than u1 and u2.
    let r = p.handle(ms(130), &n("b"), &Message::Null);
    assert!(r.is_ack());
    p.tick(ms(130));
    let r = p.handle(ms(5000), &n("a"), &trigger("other", "x"));
    assert!(r.is_ack(), "{r}");
    let r = p.handle(ms(5010), &n("a"), &all);
    assert!(
        matches!(r.reason(), Some(NackReason::BoostSlotsBusy { .. })),
        "{r}"
    );
    let u3 = p.island(&n("b")).unwrap();
    assert!(
        u3.units().all(|(_, k)| k.weight == 100),
        "nothing boosted when one unit was refused"
    );
    // A platform cap overlay has no units to boost.
    let mut q = platform(vec![fair("a", "0-1", &["u1"])]);
    register(
        &mut q,
        OverlaySpec {
            name: n("cap"),
            priority: 1,
            units: vec![],
            property: Property::PlatformCpuCap { cpus: 1.0 },
        },
    );
    let r = q.handle(
        ms(0),
        &n("a"),
        &Message::TriggerOverlay {
            resource: Resource::CpuTime,
            overlay: n("cap"),
        },
    );
    assert!(
        matches!(r.reason(), Some(NackReason::Unsupported { .. })),
        "{r}"
    );
}
