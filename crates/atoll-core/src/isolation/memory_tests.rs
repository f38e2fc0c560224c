use proptest::prelude::*;

use super::*;
use crate::isolation::cpu::tests::n;

/// 1000 bytes, reserve 8 % = 80, hysteresis step 1 % = 10.
const T: u64 = 1000;
const R: f64 = 0.08;

fn m(unit: &str, entitled: u64, used: u64) -> MemSample {
    MemSample {
        unit: n(unit),
        entitled,
        used,
        pressure_some: None,
        sharing: SharePolicy::Lend,
    }
}

fn policy() -> MemoryPolicy {
    MemoryPolicy::new(MemConfig::default()).unwrap()
}

fn ev(p: &MemPlan) -> Vec<String> {
    p.events
        .iter()
        .map(|e| match e {
            MemEvent::Borrow { unit, bytes, limit } => format!("{unit} +{bytes} ={limit}"),
            MemEvent::Revoke {
                unit,
                bytes,
                limit,
                reason,
            } => format!("{unit} -{bytes} ={limit} {reason:?}"),
        })
        .collect()
}

#[test]
fn lends_beyond_the_reserve_and_revokes_as_the_lender_grows() {
    // a and b are entitled to 500 each; b is always full (uses its limit).
    let mut pol = policy();
    let mut b_limit = 500;
    #[rustfmt::skip]
    let epochs: &[(u64, u64, &[&str])] = &[
        // a's usage, pool, events
        (100, 320, &["b +320 =820"]),                             // 400 idle - 80 reserve
        (300, 120, &["b -200 =620 PoolShrank { pool: 120 }"]),    // a grew by 200
        (305, 115, &["b -5 =615 PoolShrank { pool: 115 }"]),      // small, but the pool needs it
        (300, 120, &[]),                                          // +5 < step: no flapping
        (300, 120, &[]),
        (100, 320, &["b +205 =820"]),
    ];
    for (a_used, pool, events) in epochs {
        let p = pol
            .plan(
                T,
                R,
                IsolationMode::Isolate,
                &[m("a", 500, *a_used), m("b", 500, b_limit)],
            )
            .unwrap();
        assert_eq!((p.pool, p.reserve), (*pool, 80), "a={a_used}");
        assert_eq!(ev(&p), *events, "a={a_used}");
        let (a, b) = (&p.units[&n("a")], &p.units[&n("b")]);
        assert_eq!(a.limit, Some(500), "a lends without losing its limit");
        assert_eq!(a.lent, b.borrowed);
        assert!(b.pressured && !a.pressured);
        assert_eq!((a.protected, b.protected), (460, 460)); // 920 of 1000 protected
        b_limit = b.limit.unwrap();
        // Everything in use plus everything lendable leaves the reserve free.
        assert!(a_used + 500 + b.borrowed <= T - 80);
    }
    let p = pol
        .plan(
            T,
            R,
            IsolationMode::Isolate,
            &[m("a", 500, 100), m("b", 500, 820)],
        )
        .unwrap();
    assert_eq!(p.units[&n("b")].revocations, 2);
    assert_eq!(p.units[&n("a")].revocations, 0);
}

#[test]
fn pressure_needs_stalls_where_psi_is_known() {
    #[rustfmt::skip]
    let cases: &[(u64, Option<f64>, bool)] = &[
        // b's usage of its 500, PSI some %, under pressure
        (500, None,       true),   // no PSI: full is pressure
        (474, None,       false),  // below 95 %
        (475, None,       true),
        (500, Some(0.0),  false),  // full of cache, nothing stalls
        (500, Some(20.0), true),
        (300, Some(90.0), false),  // stalls, but not on its own limit
    ];
    for (used, psi, want) in cases {
        let b = MemSample {
            pressure_some: *psi,
            ..m("b", 500, *used)
        };
        let p = policy()
            .plan(T, R, IsolationMode::Isolate, &[m("a", 500, 0), b])
            .unwrap();
        let g = &p.units[&n("b")];
        assert_eq!(g.pressured, *want, "{used} {psi:?}");
        assert_eq!(g.borrowed > 0, *want, "{used} {psi:?}");
    }
}

#[test]
fn the_pool_is_shared_in_proportion_to_entitlement() {
    type Case<'a> = (&'a [(&'a str, u64, u64)], &'a [(&'a str, u64)]);
    #[rustfmt::skip]
    let cases: &[Case] = &[
        // units (name, entitled, used), borrowed
        (&[("a", 200, 200), ("b", 300, 300), ("c", 500, 0)],  &[("a", 168), ("b", 252), ("c", 0)]),
        (&[("a", 250, 250), ("b", 250, 250), ("c", 500, 0)],  &[("a", 210), ("b", 210), ("c", 0)]),
        // Memory entitled to nobody is lent too.
        (&[("a", 200, 200), ("b", 200, 0)],                   &[("a", 720), ("b", 0)]),
        // Nothing idle beyond the reserve: nothing lent.
        (&[("a", 500, 500), ("b", 500, 430)],                 &[("a", 0), ("b", 0)]),
    ];
    for (units, want) in cases {
        let samples: Vec<MemSample> = units.iter().map(|(u, e, used)| m(u, *e, *used)).collect();
        let p = policy()
            .plan(T, R, IsolationMode::Isolate, &samples)
            .unwrap();
        let got: Vec<(&str, u64)> = want
            .iter()
            .map(|(u, _)| (*u, p.units[&n(u)].borrowed))
            .collect();
        assert_eq!(got, *want, "{units:?}");
    }
}

#[test]
fn borrowers_release_what_they_do_not_use() {
    for (used, kept, events) in [
        (400, 0, vec!["b -320 =500 Released { used: 400 }"]),
        // Keeps enough to sit at 85 % of its limit: 650 / 0.85 = 765.
        (650, 265, vec!["b -55 =765 Released { used: 650 }"]),
        (780, 320, vec![]),
    ] {
        let mut pol = policy();
        pol.plan(
            T,
            R,
            IsolationMode::Isolate,
            &[m("a", 500, 100), m("b", 500, 500)],
        )
        .unwrap();
        let p = pol
            .plan(
                T,
                R,
                IsolationMode::Isolate,
                &[m("a", 500, 100), m("b", 500, used)],
            )
            .unwrap();
        assert_eq!(p.units[&n("b")].borrowed, kept, "{used}");
        assert_eq!(ev(&p), events, "{used}");
        assert_eq!(
            p.units[&n("b")].revocations,
            0,
            "a release is no revocation"
        );
    }
}

#[test]
fn sharing_none_and_modes() {
    let lend = [m("a", 500, 100), m("b", 500, 500)];
    let mut pol = policy();
    pol.plan(T, R, IsolationMode::Isolate, &lend).unwrap();
    // b switches to none: back to its entitlement.
    let b_none = MemSample {
        sharing: SharePolicy::None,
        ..m("b", 500, 820)
    };
    let p = pol
        .plan(T, R, IsolationMode::Isolate, &[m("a", 500, 100), b_none])
        .unwrap();
    assert_eq!(ev(&p), ["b -320 =500 Stopped"]);
    assert_eq!(p.units[&n("b")].revocations, 0);
    // a with sharing none lends nothing.
    let a_none = MemSample {
        sharing: SharePolicy::None,
        ..m("a", 500, 0)
    };
    let p = policy()
        .plan(T, R, IsolationMode::Isolate, &[a_none, m("b", 500, 500)])
        .unwrap();
    assert_eq!((p.pool, p.units[&n("b")].borrowed), (0, 0));
    // Quota: limit = entitlement, nothing lent.
    let p = policy().plan(T, R, IsolationMode::Quota, &lend).unwrap();
    for (u, e) in [("a", 500), ("b", 500)] {
        let g = &p.units[&n(u)];
        assert_eq!(
            (g.limit, g.protected, g.borrowed, g.lent),
            (Some(e), 460, 0, 0)
        );
    }
    assert!(p.events.is_empty());
    // Smp: no limit, no protection.
    let p = policy().plan(T, R, IsolationMode::Smp, &lend).unwrap();
    for g in p.units.values() {
        assert_eq!((g.limit, g.protected, g.borrowed), (None, 0, 0));
    }
    // Back from smp, nothing is remembered as borrowed.
    let mut pol = policy();
    pol.plan(T, R, IsolationMode::Isolate, &lend).unwrap();
    pol.plan(T, R, IsolationMode::Smp, &lend).unwrap();
    let p = pol.plan(T, R, IsolationMode::Quota, &lend).unwrap();
    assert!(p.events.is_empty());
}

#[test]
fn protection_scales_when_entitlements_overcommit() {
    let p = policy()
        .plan(
            T,
            R,
            IsolationMode::Isolate,
            &[m("a", 600, 0), m("b", 600, 0)],
        )
        .unwrap();
    assert_eq!(p.units[&n("a")].protected, 460); // 600 * 920 / 1200
    assert_eq!(
        memory_entitlements(1000, &[Some(100), None, None]),
        [100, 333, 333]
    );
    assert_eq!(memory_entitlements(1000, &[]), Vec::<u64>::new());
}

#[test]
fn bad_input_is_refused() {
    let mut pol = policy();
    for bad in [1.0, 1.5, -0.1, f64::NAN] {
        let r = pol.plan(T, bad, IsolationMode::Isolate, &[]);
        assert!(
            matches!(
                &r,
                Err(IsolationError::BadConfig {
                    field: "isolation.memory_reserve",
                    ..
                })
            ),
            "{bad}: {r:?}"
        );
    }
    assert_eq!(
        pol.plan(T, R, IsolationMode::Isolate, &[m("a", 1, 1), m("a", 1, 1)]),
        Err(IsolationError::DuplicateUnit { unit: n("a") })
    );
    let nan = MemSample {
        pressure_some: Some(f64::NAN),
        ..m("a", 1, 1)
    };
    assert!(matches!(
        pol.plan(T, R, IsolationMode::Isolate, &[nan]),
        Err(IsolationError::BadSample {
            field: "pressure_some",
            ..
        })
    ));
    let bad = MemConfig {
        release: 0.99,
        ..Default::default()
    };
    let e = MemoryPolicy::new(bad).unwrap_err();
    assert!(e.to_string().contains("memory.release = 0.99"), "{e}");
}

#[test]
fn event_text_names_unit_amount_and_reason() {
    let e = MemEvent::Revoke {
        unit: n("b"),
        bytes: 200,
        limit: 620,
        reason: MemRevokeReason::PoolShrank { pool: 120 },
    };
    assert_eq!(
        e.to_string(),
        "unit b gives back 200 bytes, limit 620: lenders grew, 120 bytes are left to lend"
    );
}

proptest! {
    #[test]
    fn borrowing_never_eats_the_reserve(
        total in 1_000u64..100_000,
        reserve in 0.0f64..0.3,
        units in proptest::collection::vec((0u64..40_000, any::<bool>()), 1..5),
        epochs in proptest::collection::vec(
            proptest::collection::vec((0u64..60_000, proptest::option::of(0u32..40)), 5),
            1..10,
        ),
        quota in any::<bool>(),
    ) {
        let mode = if quota { IsolationMode::Quota } else { IsolationMode::Isolate };
        let mut pol = policy();
        for epoch in &epochs {
            let samples: Vec<MemSample> = units
                .iter()
                .zip(epoch)
                .enumerate()
                .map(|(i, ((e, lend), (used, psi)))| MemSample {
                    unit: n(&format!("u{i}")),
                    entitled: *e,
                    used: *used,
                    pressure_some: psi.map(f64::from),
                    sharing: if *lend { SharePolicy::Lend } else { SharePolicy::None },
                })
                .collect();
            let p = pol.plan(total, reserve, mode, &samples).unwrap();
            let borrowed: u64 = p.units.values().map(|g| g.borrowed).sum();
            prop_assert!(borrowed <= p.pool);
            let in_use: u64 = samples.iter().map(|s| s.used.min(s.entitled)).sum();
            if p.pool > 0 {
                prop_assert!(in_use + p.pool + p.reserve <= total);
            }
            for s in &samples {
                let g = &p.units[&s.unit];
                prop_assert_eq!(g.limit, Some(s.entitled + g.borrowed));
                if s.sharing == SharePolicy::None || quota {
                    prop_assert_eq!(g.borrowed, 0);
                    prop_assert_eq!(g.lent, 0);
                }
                prop_assert!(g.protected <= s.entitled);
            }
            let protected: u64 = p.units.values().map(|g| g.protected).sum();
            prop_assert!(protected <= total - p.reserve);
        }
    }
}
