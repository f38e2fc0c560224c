use proptest::prelude::*;

use super::*;
use crate::isolation::cpu::tests::{n, set, topo};
use crate::isolation::home_cpus;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// 20 ms of idleness before lending, backoff up to 160 ms.
fn cfg() -> CpuLendConfig {
    CpuLendConfig {
        lend_after: ms(20),
        backoff_max: ms(160),
        ..Default::default()
    }
}

fn s(unit: &str, usage: f64) -> CpuSample {
    CpuSample {
        unit: n(unit),
        usage_cpus: usage,
        pressure_some: None,
        sharing: SharePolicy::Lend,
        cap_cpus: None,
    }
}

/// A unit with more runnable work than CPUs: its tasks wait.
fn busy(unit: &str) -> CpuSample {
    CpuSample {
        pressure_some: Some(50.0),
        ..s(unit, 4.0)
    }
}

fn none(unit: &str, usage: f64) -> CpuSample {
    CpuSample {
        sharing: SharePolicy::None,
        ..s(unit, usage)
    }
}

/// A lender on `cores` x 2 threads (siblings c and c + cores).
fn lender(cores: u32, units: &[(&str, f64)], mode: IsolationMode, cfg: CpuLendConfig) -> CpuLender {
    let t = topo(cores, 2);
    let units: Vec<(Name, Option<f64>)> = units.iter().map(|(u, c)| (n(u), Some(*c))).collect();
    let layout = home_cpus(&t.online(), &t, &units).unwrap();
    CpuLender::new(layout, &t, mode, cfg).unwrap()
}

/// `unit:lent/borrowed` for every unit that lends or borrows.
fn show(p: &CpuPlan) -> String {
    p.units
        .iter()
        .filter(|(_, g)| !g.lent.is_empty() || !g.borrowed.is_empty())
        .map(|(u, g)| format!("{u}:{}/{}", g.lent, g.borrowed))
        .collect::<Vec<_>>()
        .join(" ")
}

fn kinds(p: &CpuPlan) -> Vec<String> {
    p.events
        .iter()
        .map(|e| match e {
            CpuEvent::Lend { from, to, cpus } => format!("lend {cpus} {from}->{to}"),
            CpuEvent::Revoke {
                from,
                to,
                cpus,
                reason,
            } => format!("revoke {cpus} {from}->{to} ({})", reason.kind()),
        })
        .collect()
}

#[test]
fn idle_lends_after_hysteresis_and_revokes_the_next_epoch() {
    // a: home 0-1,4-5 (lends 5, 1, 4, 0 in that order); b: home 2-3,6-7.
    let mut l = lender(4, &[("a", 4.0), ("b", 4.0)], IsolationMode::Isolate, cfg());
    #[rustfmt::skip]
    let epochs: &[(u64, f64, f64, &str, &[&str])] = &[
        // t ms, a's usage, b's usage, a:lent/borrowed b:..., events
        (0,  0.2, 4.0, "", &[]),                               // idle, not long enough
        (10, 0.2, 4.0, "", &[]),
        (20, 0.2, 4.0, "a:1,4-5/ b:/1,4-5", &["lend 1,4-5 unit a->b"]),
        (30, 2.0, 4.0, "a:5/ b:/5", &["revoke 1,4 unit a->b (0)"]), // a needs 3: at once
        (40, 0.2, 4.0, "a:5/ b:/5", &[]),                      // backoff: now 40 ms
        (50, 0.2, 4.0, "a:5/ b:/5", &[]),
        (60, 0.2, 4.0, "a:5/ b:/5", &[]),                      // would lend again without backoff
        (70, 0.2, 4.0, "a:5/ b:/5", &[]),
        (80, 0.2, 4.0, "a:1,4-5/ b:/1,4-5", &["lend 1,4 unit a->b"]),
        (90, 0.2, 4.0, "a:1,4-5/ b:/1,4-5", &[]),              // stable: no events
    ];
    for (t, ua, ub, want, events) in epochs {
        let b = CpuSample {
            usage_cpus: *ub,
            ..busy("b")
        };
        let p = l.step(ms(*t), &[s("a", *ua), b]).unwrap();
        assert_eq!(show(&p), *want, "t={t}");
        assert_eq!(kinds(&p), *events, "t={t}");
        assert!(set("2-3,6-7").is_subset(&p.units[&n("b")].allowed()));
    }
    let p = l.step(ms(100), &[s("a", 0.2), busy("b")]).unwrap();
    assert_eq!(p.units[&n("a")].revocations, 1);
    assert_eq!(p.units[&n("b")].lost, 1);
    assert_eq!(p.units[&n("b")].revocations, 0);
}

#[test]
fn pressure_revokes_everything_at_once() {
    let mut l = lender(4, &[("a", 4.0), ("b", 4.0)], IsolationMode::Isolate, cfg());
    for t in [0, 10, 20] {
        l.step(ms(t), &[s("a", 0.0), busy("b")]).unwrap();
    }
    let p = l.step(ms(30), &[s("a", 0.0), busy("b")]).unwrap();
    assert_eq!(show(&p), "a:1,4-5/ b:/1,4-5");
    let pressured = CpuSample {
        pressure_some: Some(25.0),
        ..s("a", 0.1)
    };
    let p = l.step(ms(40), &[pressured, busy("b")]).unwrap();
    assert_eq!(show(&p), "");
    assert_eq!(
        p.events,
        [CpuEvent::Revoke {
            from: CpuOwner::Unit(n("a")),
            to: n("b"),
            cpus: set("1,4-5"),
            reason: RevokeReason::OwnerPressure { pressure: 25.0 },
        }]
    );
    assert_eq!(
        p.events[0].to_string(),
        "take CPUs 1,4-5 of unit a back from unit b: the owner's CPU pressure is 25.0%"
    );
}

#[test]
fn sharing_none_neither_lends_nor_borrows() {
    let no_wait = CpuLendConfig {
        lend_after: Duration::ZERO,
        ..cfg()
    };
    #[rustfmt::skip]
    let cases: &[(CpuSample, CpuSample, &str)] = &[
        (s("a", 0.0),    busy("b"),      "a:1,4-5/ b:/1,4-5"), // both lend: a lends to b
        (none("a", 0.0), busy("b"),      ""),                   // a keeps its idle CPUs
        (s("a", 0.0),    CpuSample { sharing: SharePolicy::None, ..busy("b") }, ""), // b may not borrow
    ];
    for (a, b, want) in cases {
        let mut l = lender(
            4,
            &[("a", 4.0), ("b", 4.0)],
            IsolationMode::Isolate,
            no_wait,
        );
        for t in 0..5 {
            let p = l.step(ms(t * 10), &[a.clone(), b.clone()]).unwrap();
            assert_eq!(show(&p), *want, "{a:?} {b:?} t={t}");
        }
    }
}

#[test]
fn idle_cpus_are_water_filled_by_entitlement() {
    let no_wait = CpuLendConfig {
        lend_after: Duration::ZERO,
        ..cfg()
    };
    let capped = |u: &str, cap: f64| CpuSample {
        cap_cpus: Some(cap),
        ..s(u, 8.0)
    };
    // 6 cores x 2: a=6 idle keeps 1 and offers 5 to b and c.
    #[rustfmt::skip]
    let cases: &[(f64, f64, CpuSample, CpuSample, usize, usize)] = &[
        // b, c entitlements, samples, CPUs borrowed by b and c
        (4.0, 2.0, s("b", 8.0), s("c", 8.0), 3, 2),  // 3.33 : 1.67
        (2.0, 4.0, s("b", 8.0), s("c", 8.0), 2, 3),
        (3.0, 3.0, s("b", 8.0), s("c", 8.0), 3, 2),  // tie: first in unit order
        (4.0, 2.0, capped("b", 5.0), s("c", 8.0), 1, 4), // b's cap leaves 1 to borrow
        (4.0, 2.0, s("b", 3.0), s("c", 8.0), 0, 5),  // b keeps its 4, is not overloaded
        (4.0, 2.0, s("b", 3.7), s("c", 1.0), 5, 0),  // 3.7 >= 0.9 * 4: overloaded
    ];
    for (eb, ec, b, c, want_b, want_c) in cases {
        let mut l = lender(
            6,
            &[("a", 6.0), ("b", *eb), ("c", *ec)],
            IsolationMode::Isolate,
            no_wait,
        );
        let p = l.step(ms(0), &[s("a", 0.0), b.clone(), c.clone()]).unwrap();
        let got = (
            p.units[&n("b")].borrowed.len(),
            p.units[&n("c")].borrowed.len(),
        );
        assert_eq!(got, (*want_b, *want_c), "b={eb} c={ec} {b:?} {c:?}");
        let lent = p.units[&n("a")].lent.len();
        assert_eq!(lent, want_b + want_c);
    }
}

#[test]
fn borrowers_return_what_they_no_longer_use_and_rebalance() {
    let no_wait = CpuLendConfig {
        lend_after: Duration::ZERO,
        return_after: Duration::ZERO,
        ..cfg()
    };
    let mut l = lender(
        4,
        &[("a", 4.0), ("b", 2.0), ("c", 2.0)],
        IsolationMode::Isolate,
        no_wait,
    );
    // a (0-1,4-5) offers 5, 1, 4; b (2,6) takes them all.
    // c uses 1 of its 2 CPUs: keeps both (headroom), not overloaded.
    let p = l
        .step(ms(0), &[s("a", 0.0), s("b", 5.0), s("c", 1.0)])
        .unwrap();
    assert_eq!(show(&p), "a:1,4-5/ b:/1,4-5");
    // c is overloaded too: shares 2:2 of 3 CPUs, b keeps 2 of its own.
    let p = l
        .step(ms(10), &[s("a", 0.0), s("b", 5.0), busy("c")])
        .unwrap();
    assert_eq!(show(&p), "a:1,4-5/ b:/1,5 c:/4");
    assert_eq!(kinds(&p), ["revoke 4 unit a->b (4)", "lend 4 unit a->c"]);
    // b's usage falls to 2.6: it keeps ceil(2.6 + 0.5 - 2) = 2 of its 2 ...
    let p = l
        .step(ms(20), &[s("a", 0.0), s("b", 2.6), busy("c")])
        .unwrap();
    assert_eq!(show(&p), "a:1,4-5/ b:/1,5 c:/4");
    // ... and at 1.2 it keeps none and returns both; c takes all three.
    let p = l
        .step(ms(30), &[s("a", 0.0), s("b", 1.2), busy("c")])
        .unwrap();
    assert_eq!(show(&p), "a:1,4-5/ c:/1,4-5");
    assert_eq!(
        kinds(&p),
        ["revoke 1,5 unit a->b (3)", "lend 1,5 unit a->c"]
    );
    // Neither a return nor a rebalance counts as a revocation.
    assert_eq!(p.units[&n("a")].revocations, 0);
    assert_eq!(p.units[&n("b")].lost, 0);
}

#[test]
fn modes_smp_quota_isolate() {
    // 4 cores x 2: a=2.5 (0,4 + pool), b=1.5 (1 + pool), pool 5, spare 2-3,6-7.
    let units = [("a", 2.5), ("b", 1.5)];
    let samples = [s("a", 1.0), s("b", 8.0)];
    let mut smp = lender(4, &units, IsolationMode::Smp, cfg());
    let p = smp.step(ms(0), &samples).unwrap();
    for g in p.units.values() {
        assert_eq!(g.allowed(), set("0-7"));
        assert!(g.home.is_empty() && g.lent.is_empty() && g.cap.is_none());
    }
    assert!(p.events.is_empty());

    let mut quota = lender(4, &units, IsolationMode::Quota, cfg());
    for t in 0..5 {
        let p = quota.step(ms(t * 10), &samples).unwrap();
        let (a, b) = (&p.units[&n("a")], &p.units[&n("b")]);
        assert_eq!((a.allowed(), b.allowed()), (set("0,4-5"), set("1,5")));
        assert_eq!((a.cap, b.cap), (Some(2.5), Some(1.5)));
        assert!(p.events.is_empty());
    }

    // Isolate: the spare CPUs go to b at once; pool members are not capped.
    let mut iso = lender(4, &units, IsolationMode::Isolate, cfg());
    let p = iso.step(ms(0), &samples).unwrap();
    let b = &p.units[&n("b")];
    assert_eq!((b.borrowed.clone(), b.cap), (set("2-3,6-7"), None));
    assert_eq!(p.spare, set("2-3,6-7"));
    assert_eq!(kinds(&p), ["lend 2-3,6-7 the spare CPUs->b"]);
    // Switching to quota takes them back at the next step.
    iso.set_mode(IsolationMode::Quota);
    let p = iso.step(ms(10), &samples).unwrap();
    assert_eq!(kinds(&p), ["revoke 2-3,6-7 the spare CPUs->b (2)"]);
    assert_eq!(p.units[&n("b")].lost, 1);
    // A pool member with sharing none is capped like in quota mode.
    iso.set_mode(IsolationMode::Isolate);
    let p = iso.step(ms(20), &[none("a", 1.0), s("b", 0.1)]).unwrap();
    assert_eq!(p.units[&n("a")].cap, Some(2.5));
    assert_eq!(p.units[&n("b")].cap, None);
}

#[test]
fn units_without_a_sample_stop_lending() {
    let no_wait = CpuLendConfig {
        lend_after: Duration::ZERO,
        ..cfg()
    };
    let mut l = lender(
        4,
        &[("a", 4.0), ("b", 4.0)],
        IsolationMode::Isolate,
        no_wait,
    );
    let p = l.step(ms(0), &[s("a", 0.0), busy("b")]).unwrap();
    assert_eq!(show(&p), "a:1,4-5/ b:/1,4-5");
    let p = l.step(ms(10), &[busy("b")]).unwrap();
    assert_eq!(show(&p), "");
    assert_eq!(kinds(&p), ["revoke 1,4-5 unit a->b (2)"]);
    // Without b's sample, a's offer finds no borrower.
    let p = l.step(ms(20), &[s("a", 0.0)]).unwrap();
    assert_eq!(show(&p), "");
}

#[test]
fn bad_samples_are_refused() {
    let mut l = lender(2, &[("a", 2.0)], IsolationMode::Isolate, cfg());
    let nan = s("a", f64::NAN);
    let neg_psi = CpuSample {
        pressure_some: Some(-1.0),
        ..s("a", 0.0)
    };
    assert_eq!(
        l.step(ms(0), &[s("x", 0.0)]),
        Err(IsolationError::UnknownUnit { unit: n("x") })
    );
    assert!(matches!(
        l.step(ms(0), &[nan]),
        Err(IsolationError::BadSample {
            field: "usage_cpus",
            ..
        })
    ));
    assert!(matches!(
        l.step(ms(0), &[neg_psi]),
        Err(IsolationError::BadSample { field: "pressure_some", value, .. }) if value == -1.0
    ));
    assert_eq!(
        l.step(ms(0), &[s("a", 0.0), s("a", 0.0)]),
        Err(IsolationError::DuplicateUnit { unit: n("a") })
    );
    l.step(ms(50), &[s("a", 0.0)]).unwrap();
    assert_eq!(
        l.step(ms(40), &[s("a", 0.0)]),
        Err(IsolationError::TimeWentBack {
            last: ms(50),
            now: ms(40)
        })
    );
    let bad = CpuLendConfig {
        overload: 0.0,
        ..cfg()
    };
    let t = topo(2, 2);
    let layout = home_cpus(&t.online(), &t, &[(n("a"), None)]).unwrap();
    assert!(matches!(
        CpuLender::new(layout, &t, IsolationMode::Isolate, bad),
        Err(IsolationError::BadConfig {
            field: "cpu.overload",
            ..
        })
    ));
}

#[test]
fn relayout_keeps_counters_and_ends_loans() {
    let no_wait = CpuLendConfig {
        lend_after: Duration::ZERO,
        ..cfg()
    };
    let mut l = lender(
        4,
        &[("a", 4.0), ("b", 4.0)],
        IsolationMode::Isolate,
        no_wait,
    );
    l.step(ms(0), &[s("a", 0.0), busy("b")]).unwrap();
    l.step(ms(10), &[s("a", 4.0), busy("b")]).unwrap();
    let t = topo(4, 2);
    let layout = home_cpus(
        &t.online(),
        &t,
        &[
            (n("a"), Some(4.0)),
            (n("b"), Some(2.0)),
            (n("c"), Some(2.0)),
        ],
    )
    .unwrap();
    l.relayout(layout, &t);
    let p = l
        .step(ms(20), &[s("a", 4.0), s("b", 2.0), s("c", 2.0)])
        .unwrap();
    assert_eq!(p.units[&n("a")].revocations, 1);
    assert_eq!(p.units[&n("b")].lost, 1);
    assert!(p.events.is_empty());
    assert_eq!(l.layout().units.len(), 3);
    assert_eq!(l.mode(), IsolationMode::Isolate);
}

proptest! {
    #[test]
    fn grants_are_consistent(
        ents in proptest::collection::vec((1u32..16, any::<bool>()), 1..5),
        epochs in proptest::collection::vec(
            proptest::collection::vec((0u32..36, proptest::option::of(0u32..40)), 5),
            1..16,
        ),
    ) {
        let c = cfg();
        let t = topo(4, 2);
        let units: Vec<(Name, Option<f64>)> = ents
            .iter()
            .enumerate()
            .map(|(i, (e, _))| (n(&format!("u{i}")), Some(f64::from(*e) / 4.0)))
            .collect();
        let layout = home_cpus(&t.online(), &t, &units).unwrap();
        let mut l = CpuLender::new(layout.clone(), &t, IsolationMode::Isolate, c).unwrap();
        for (k, epoch) in epochs.iter().enumerate() {
            let samples: Vec<CpuSample> = units
                .iter()
                .zip(&ents)
                .zip(epoch)
                .map(|(((u, _), (_, lend)), (use4, psi))| CpuSample {
                    unit: u.clone(),
                    usage_cpus: f64::from(*use4) / 4.0,
                    pressure_some: psi.map(f64::from),
                    sharing: if *lend { SharePolicy::Lend } else { SharePolicy::None },
                    cap_cpus: None,
                })
                .collect();
            let p = l.step(ms(10 * k as u64), &samples).unwrap();
            let mut homes = CpuSet::new();
            let mut borrowed = CpuSet::new();
            let mut lent = CpuSet::new();
            for (smp, (u, g)) in samples.iter().zip(&p.units) {
                prop_assert_eq!(&smp.unit, u);
                prop_assert!(g.home.is_disjoint(&homes), "homes overlap");
                homes = homes.union(&g.home);
                prop_assert!(g.borrowed.is_disjoint(&borrowed), "CPU borrowed twice");
                borrowed = borrowed.union(&g.borrowed);
                lent = lent.union(&g.lent);
                prop_assert!(g.lent.is_subset(&g.home));
                prop_assert!(g.borrowed.is_disjoint(&g.home) && g.borrowed.is_disjoint(&g.pool));
                prop_assert!(g.allowed().is_subset(&t.online()));
                prop_assert!(!g.allowed().is_empty());
                if smp.sharing == SharePolicy::None {
                    prop_assert!(g.lent.is_empty() && g.borrowed.is_empty());
                }
                if !g.lent.is_empty() {
                    prop_assert!(g.borrowed.is_empty(), "{u} lends and borrows");
                }
                // Revocation is immediate: never more lent than the owner
                // can spare given this epoch's usage and pressure.
                let h = g.home.len();
                let spare_now = if smp.pressure_some.is_some_and(|x| x >= c.pressure) {
                    0
                } else {
                    h - cpus_for(smp.usage_cpus + c.headroom).min(h)
                };
                prop_assert!(g.lent.len() <= spare_now, "{u} lends {} > {spare_now}", g.lent);
            }
            // Every borrowed CPU is some other unit's lent CPU or spare.
            prop_assert!(borrowed.is_subset(&lent.union(&layout.spare)));
            prop_assert!(lent.is_subset(&borrowed));
        }
    }
}

#[test]
fn negative_headroom_lends_a_partly_used_cpu_and_revokes_when_the_owner_needs_it() {
    // Two 1-CPU units on a 1-core, 2-thread machine: a's home is one CPU.
    let c = CpuLendConfig {
        headroom: -0.5,
        ..cfg()
    };
    let mut l = lender(1, &[("a", 1.0), ("b", 1.0)], IsolationMode::Isolate, c);
    // a uses 20% of its CPU; b is overloaded.
    for t in [0, 10, 20, 30] {
        let p = l.step(ms(t), &[s("a", 0.2), busy("b")]).unwrap();
        if t == 30 {
            // a's home is CPU 0 (its sibling 1 is b's home).
            assert_eq!(show(&p), "a:0/ b:/0", "{:?}", kinds(&p));
        }
    }
    // a needs most of its CPU: it comes back at once.
    let p = l.step(ms(40), &[s("a", 0.8), busy("b")]).unwrap();
    assert_eq!(show(&p), "");
    assert!(
        kinds(&p).iter().any(|k| k.starts_with("revoke")),
        "{:?}",
        kinds(&p)
    );
    // With the default headroom a partly used CPU is never lent.
    let mut l = lender(1, &[("a", 1.0), ("b", 1.0)], IsolationMode::Isolate, cfg());
    for t in [0, 10, 20, 30, 40] {
        let p = l.step(ms(t), &[s("a", 0.2), busy("b")]).unwrap();
        assert_eq!(show(&p), "", "t={t}");
    }
}

#[test]
fn without_psi_a_unit_using_all_it_may_counts_as_overloaded() {
    let c = CpuLendConfig {
        headroom: -0.5,
        ..cfg()
    };
    // Two single-thread cores, one each: nothing spare.
    let t = topo(2, 1);
    let units = vec![(n("a"), Some(1.0)), (n("b"), Some(1.0))];
    let layout = home_cpus(&t.online(), &t, &units).unwrap();
    let mut l = CpuLender::new(layout, &t, IsolationMode::Isolate, c).unwrap();
    let mut last = String::new();
    for t in [0, 10, 20, 30, 40] {
        let p = l.step(ms(t), &[s("a", 0.0), s("b", 1.0)]).unwrap();
        last = show(&p);
    }
    assert!(last.contains("b:/"), "b never borrowed: {last:?}");
}

#[test]
fn a_borrower_returns_cpus_only_after_using_less_for_return_after() {
    let c = CpuLendConfig {
        lend_after: Duration::ZERO,
        return_after: ms(30),
        ..cfg()
    };
    // a and b have two CPUs each; idle a keeps one (headroom) and lends one.
    let mut l = lender(2, &[("a", 2.0), ("b", 2.0)], IsolationMode::Isolate, c);
    let p = l.step(ms(0), &[s("a", 0.0), busy("b")]).unwrap();
    let lent = p.units[&n("a")].lent.clone();
    assert_eq!(lent.len(), 1, "{}", show(&p));
    let keeps = |p: &CpuPlan| p.units[&n("b")].borrowed == lent;
    // b now uses 1.2 CPUs (its tasks have not spread yet): it keeps the
    // borrowed CPU ...
    for t in [10, 20, 30] {
        let p = l.step(ms(t), &[s("a", 0.0), s("b", 1.2)]).unwrap();
        assert!(keeps(&p), "t={t}: {}", show(&p));
    }
    // ... until it has used less for 30 ms.
    let p = l.step(ms(40), &[s("a", 0.0), s("b", 1.2)]).unwrap();
    assert!(p.units[&n("b")].borrowed.is_empty(), "{}", show(&p));
    // Being overloaded again in between resets the clock.
    let mut l = lender(2, &[("a", 2.0), ("b", 2.0)], IsolationMode::Isolate, c);
    l.step(ms(0), &[s("a", 0.0), busy("b")]).unwrap();
    l.step(ms(10), &[s("a", 0.0), s("b", 1.2)]).unwrap();
    l.step(ms(20), &[s("a", 0.0), busy("b")]).unwrap();
    let p = l.step(ms(45), &[s("a", 0.0), s("b", 1.2)]).unwrap();
    assert!(keeps(&p), "{}", show(&p));
}

/// `s` with a pressure reading.
fn sp(unit: &str, usage: f64, pressure: f64) -> CpuSample {
    CpuSample {
        pressure_some: Some(pressure),
        ..s(unit, usage)
    }
}

#[test]
fn a_saturated_unit_whose_tasks_do_not_wait_does_not_borrow() {
    // Two single-thread cores, one each: a is idle and lends its CPU.
    let c = CpuLendConfig {
        headroom: -0.5,
        ..cfg()
    };
    let t = topo(2, 1);
    let units = vec![(n("a"), Some(1.0)), (n("b"), Some(1.0))];
    let layout = home_cpus(&t.online(), &t, &units).unwrap();
    let mut l = CpuLender::new(layout.clone(), &t, IsolationMode::Isolate, c).unwrap();
    // b runs one thread on its one CPU: it uses all it may, but nothing
    // waits, so another CPU would not help it.
    for t in [0, 10, 20, 30, 40] {
        let p = l.step(ms(t), &[s("a", 0.0), sp("b", 1.0, 0.0)]).unwrap();
        assert_eq!(show(&p), "", "t={t}: {:?}", kinds(&p));
    }
    // A second thread: now its tasks wait, and it borrows a's CPU.
    let mut last = String::new();
    for t in [50, 60] {
        last = show(&l.step(ms(t), &[s("a", 0.0), sp("b", 1.0, 100.0)]).unwrap());
    }
    assert_eq!(last, "a:0/ b:/0");
    // Back to one thread: with nothing waiting b needs no headroom and
    // returns the CPU after `return_after`, although it still uses one CPU.
    let mut l2 = CpuLender::new(layout, &t, IsolationMode::Isolate, c).unwrap();
    for t in [0, 10, 20] {
        l2.step(ms(t), &[s("a", 0.0), sp("b", 1.0, 100.0)]).unwrap();
    }
    let mut at = None;
    for t in (30..=400).step_by(10) {
        let p = l2.step(ms(t), &[s("a", 0.0), sp("b", 1.0, 0.0)]).unwrap();
        if p.units[&n("b")].borrowed.is_empty() {
            at = Some(t);
            break;
        }
    }
    let at = at.expect("b never returned the CPU");
    assert!(
        at >= 30 + u64::try_from(c.return_after.as_millis()).unwrap(),
        "returned at {at} ms"
    );
    // Without a pressure reading the same b keeps it (usage + headroom).
    let mut l3 = CpuLender::new(
        home_cpus(&t.online(), &t, &[(n("a"), Some(1.0)), (n("b"), Some(1.0))]).unwrap(),
        &t,
        IsolationMode::Isolate,
        c,
    )
    .unwrap();
    for t in [0, 10, 20] {
        l3.step(ms(t), &[s("a", 0.0), sp("b", 1.0, 100.0)]).unwrap();
    }
    let mut p = None;
    for t in (30..=400).step_by(10) {
        p = Some(l3.step(ms(t), &[s("a", 0.0), s("b", 1.0)]).unwrap());
    }
    assert_eq!(show(&p.unwrap()), "a:0/ b:/0");
}
