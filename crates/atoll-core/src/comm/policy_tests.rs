//! Tests of [`CommPolicy`](super::CommPolicy): each feature alone, the
//! slice gate, counter resets, bookkeeping, and a property test of the bounds.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// Cumulative counters of a few units, advanced by the tests.
#[derive(Default)]
struct World {
    units: Vec<UnitInput>,
}

impl World {
    fn with(units: &[(&str, f64)]) -> Self {
        let mut w = World::default();
        for (u, r) in units {
            w.units.push(UnitInput {
                unit: n(u),
                net: UnitNetSample::default(),
                cpu_usage_us: 0,
                reservation_cpus: *r,
            });
        }
        w
    }

    fn get(&mut self, u: &str) -> &mut UnitInput {
        self.units
            .iter_mut()
            .find(|i| i.unit.as_str() == u)
            .unwrap()
    }

    /// Sets `u`'s receive queue to `queued` and adds `read` bytes read.
    fn recv(&mut self, u: &str, queued: u64, read: u64) {
        let i = self.get(u);
        i.net.recv_queued = queued;
        i.net.bytes_received += read;
    }

    fn send(&mut self, u: &str, bytes: u64) {
        self.get(u).net.bytes_sent += bytes;
    }

    fn cpu(&mut self, u: &str, us: u64) {
        self.get(u).cpu_usage_us += us;
    }
}

fn spec(f: impl FnOnce(&mut CommSpec)) -> CommSpec {
    let mut s = CommSpec::default();
    f(&mut s);
    s
}

fn names(bs: &[Boost]) -> Vec<&str> {
    bs.iter().map(|b| b.unit.as_str()).collect()
}

#[test]
fn all_features_off_boosts_nothing() {
    let mut p = CommPolicy::new(CommSpec::default()).unwrap();
    let mut w = World::with(&[("a", 0.5), ("b", 0.5)]);
    for t in 0..50 {
        w.recv("a", 5000, 100);
        w.send("b", 1000);
        let d = p.step(ms(t * 10), &w.units).unwrap();
        assert!(d.boosted.is_empty() && d.refused.is_empty(), "{d:?}");
    }
    assert!(p.accounts().values().all(|a| a.boosts == 0));
}

#[test]
fn recipient_alone() {
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    let mut w = World::with(&[("a", 0.5), ("b", 0.5), ("c", 0.5)]);
    w.recv("a", 1000, 0);
    let d = p.step(ms(0), &w.units).unwrap();
    assert_eq!(names(&d.started), ["a"]);
    assert_eq!(
        d.boosted[0].reasons,
        [BoostReason::Recipient {
            queued_bytes: 1000,
            received_bytes: 0
        }]
    );
    // a reads what waited; b sends every epoch but senders are not favoured.
    for t in 1..=5 {
        w.recv("a", 0, 200);
        w.send("b", 500);
        let d = p.step(ms(t * 10), &w.units).unwrap();
        assert_eq!(names(&d.boosted), ["a"]);
        assert_eq!(d.boosted[0].intensity, 200);
        assert!(d.started.is_empty() && d.ended.is_empty());
    }
    let d = p.step(ms(60), &w.units).unwrap();
    assert!(d.boosted.is_empty());
    assert_eq!(d.ended, [(n("a"), EndReason::Quiet)]);
    let a = &p.accounts()[&n("a")];
    assert_eq!(
        (a.boosts, a.reasons.recipient, a.boosted_us),
        (1, 1, 60_000)
    );
    assert_eq!(a.boosted_since, None);
    assert_eq!(p.accounts()[&n("b")].boosts, 0);
}

#[test]
fn recipient_prefers_the_most_received_and_keeps_ties() {
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    let mut w = World::with(&[("a", 0.5), ("b", 0.5), ("c", 0.5), ("d", 0.5)]);
    for (u, q) in [("a", 100), ("b", 300), ("c", 300), ("d", 50)] {
        w.recv(u, q, 0);
    }
    let d = p.step(ms(0), &w.units).unwrap();
    assert_eq!(names(&d.boosted), ["b", "c"]);
    // c now ties with a newcomer that sorts before it: c keeps its place.
    let mut w2 = World::with(&[("a", 0.5), ("b", 0.5), ("c", 0.5), ("aa", 0.5)]);
    for (u, q) in [("a", 400), ("b", 10), ("c", 300), ("aa", 300)] {
        w2.recv(u, q, 0);
    }
    let d = p.step(ms(10), &w2.units).unwrap();
    assert_eq!(names(&d.boosted), ["a", "c"]);
    assert_eq!(names(&d.started), ["a"]);
    assert_eq!(
        d.ended,
        [(
            n("b"),
            EndReason::Outranked {
                intensity: 10,
                cutoff: 300
            }
        )]
    );
}

#[test]
fn anticipation_alone() {
    let mut p = CommPolicy::new(spec(|s| s.anticipate = true)).unwrap();
    let mut w = World::with(&[("s", 0.5), ("r", 0.5)]);
    let mut boosted_at = Vec::new();
    for t in (0..=400).step_by(10) {
        if t > 0 && t % 100 == 0 {
            w.send("s", 1000);
        }
        w.recv("r", 4000, 100);
        let d = p.step(ms(t), &w.units).unwrap();
        assert!(d.boosted.iter().all(|b| b.unit.as_str() == "s"));
        if let Some(b) = d.boosted.first() {
            boosted_at.push(t);
            if t == 280 {
                assert_eq!(
                    b.reasons,
                    [BoostReason::Sender {
                        predicted_bytes: 1000,
                        due_in: ms(20)
                    }]
                );
            }
        }
        if t == 300 {
            assert_eq!(d.ended, [(n("s"), EndReason::Quiet)]);
        }
    }
    assert_eq!(boosted_at, [280, 290, 380, 390]);
    let s = &p.accounts()[&n("s")];
    assert_eq!((s.boosts, s.reasons.sender, s.boosted_us), (2, 2, 40_000));
    assert_eq!(s.prediction.unwrap().at, ms(500));
}

#[test]
fn netpath_alone_counts_own_reception_and_the_others_sends() {
    let mut p = CommPolicy::new(spec(|s| s.netpath = vec![n("p"), n("q")])).unwrap();
    let mut w = World::with(&[("p", 0.3), ("q", 0.3), ("web", 0.3), ("db", 0.3)]);
    let d = p.step(ms(0), &w.units).unwrap();
    assert!(d.boosted.is_empty());
    w.send("web", 300);
    w.send("db", 200);
    w.send("p", 1000); // its own sends do not count
    w.send("q", 700); // nor another path unit's
    w.recv("p", 10, 50);
    w.recv("web", 999, 999); // recipient is off
    let d = p.step(ms(10), &w.units).unwrap();
    assert_eq!(names(&d.boosted), ["p", "q"]);
    assert_eq!(
        d.boosted[0].reasons,
        [BoostReason::NetPath {
            intensity: 560,
            received_bytes: 60,
            others_sent_bytes: 500
        }]
    );
    assert_eq!(d.boosted[1].intensity, 500);
    assert_eq!(p.accounts()[&n("p")].reasons.netpath, 1);
    assert_eq!(p.accounts()[&n("web")].boosts, 0);
}

#[test]
fn recipient_and_sender_combine_largest_first() {
    let mut p = CommPolicy::new(spec(|s| {
        s.recipient = true;
        s.anticipate = true;
    }))
    .unwrap();
    let mut w = World::with(&[("a", 0.5)]);
    for t in [0, 10, 20] {
        w.send("a", 5000);
        p.step(ms(t), &w.units).unwrap();
    }
    w.send("a", 5000);
    w.recv("a", 100, 0);
    let d = p.step(ms(30), &w.units).unwrap();
    let b = &d.boosted[0];
    assert_eq!(b.intensity, 5100);
    assert_eq!(b.reason().kind(), ReasonKind::Sender);
    assert_eq!(b.reasons[1].kind(), ReasonKind::Recipient);
    assert_eq!(p.accounts()[&n("a")].reasons.sender, 1);
}

#[test]
fn max_boosted_is_respected() {
    for max in 1..=4 {
        let mut p = CommPolicy::new(spec(|s| {
            s.recipient = true;
            s.max_boosted = max;
        }))
        .unwrap();
        // Tiny reservations, but no CPU used: the slices never bite.
        let mut w = World::with(&[
            ("a", 0.01),
            ("b", 0.01),
            ("c", 0.01),
            ("d", 0.01),
            ("e", 0.01),
        ]);
        for t in 0..20u64 {
            for (i, u) in ["a", "b", "c", "d", "e"].iter().enumerate() {
                w.recv(u, (t * 7 + i as u64 * 13) % 50 + 1, 0);
            }
            let d = p.step(ms(t * 10), &w.units).unwrap();
            assert_eq!(d.boosted.len(), max, "{d:?}");
        }
    }
}

#[test]
fn a_unit_over_its_slice_is_refused_until_the_next_period() {
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    // Slice 10 ms per 100 ms; it burns 4 ms per 10 ms epoch.
    let mut w = World::with(&[("a", 0.1), ("z", 0.0)]);
    let mut boosted_at = Vec::new();
    for t in (0..=120).step_by(10) {
        if t > 0 {
            w.cpu("a", 4000);
        }
        w.recv("a", 100, 0);
        w.recv("z", 1_000_000, 0);
        let d = p.step(ms(t), &w.units).unwrap();
        assert!(
            d.boosted.iter().all(|b| b.unit.as_str() == "a"),
            "z has no reservation"
        );
        if !d.boosted.is_empty() {
            boosted_at.push(t);
        }
        if t == 30 {
            let limit = Limit::OverReservation {
                used_us: 12_000,
                slice_us: 10_000,
            };
            assert_eq!(d.ended, [(n("a"), EndReason::Limit(limit))]);
            assert!(d
                .refused
                .iter()
                .any(|r| r.unit.as_str() == "a" && r.limit == limit));
        }
    }
    assert_eq!(boosted_at, [0, 10, 20, 100, 110]);
    let a = &p.accounts()[&n("a")];
    assert_eq!((a.boosts, a.over_reservation), (2, 8));
    assert_eq!(a.slice_us, 10_000);
    let z = &p.accounts()[&n("z")];
    assert_eq!((z.boosts, z.over_reservation, z.slice_us), (0, 13, 0));
}

#[test]
fn a_light_receiver_stays_boosted_while_a_heavy_one_is_gated_per_period() {
    // 3 units of 1 CPU on 3 CPUs. A wall-time budget of
    // `period × (1 − others / capacity)` would allow 33 ms per 100 ms.
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    let mut w = World::with(&[("light", 1.0), ("heavy", 1.0), ("idle", 1.0)]);
    let mut heavy_at = Vec::new();
    for t in (0..=350).step_by(10) {
        if t > 0 {
            w.cpu("light", 100); // 1 % of a CPU
            w.cpu("heavy", 30_000); // three threads, flat out
            w.cpu("idle", 10);
        }
        w.recv("light", 10, 50);
        w.recv("heavy", 1000, 500);
        let d = p.step(ms(t), &w.units).unwrap();
        assert!(
            d.boosted.iter().any(|b| b.unit.as_str() == "light"),
            "light not boosted at {t} ms: {d:?}"
        );
        assert!(d.ended.iter().all(|(u, _)| u.as_str() == "heavy"), "{d:?}");
        if d.boosted.iter().any(|b| b.unit.as_str() == "heavy") {
            heavy_at.push(t);
        }
        if t == 40 || t == 130 {
            let limit = Limit::OverReservation {
                used_us: 120_000,
                slice_us: 100_000,
            };
            assert_eq!(d.ended, [(n("heavy"), EndReason::Limit(limit))]);
            assert_eq!(d.refused.len(), 1);
            assert_eq!(d.refused[0].limit, limit);
        }
        if t == 90 || t == 290 {
            // Boosted for 90 ms of this period already, and still on.
            assert_eq!(p.accounts()[&n("light")].period_boosted_us, 90_000);
        }
    }
    // heavy: its slice (100 ms) is used after 4 epochs, then it waits for
    // the next period.
    assert_eq!(
        heavy_at,
        [0, 10, 20, 30, 100, 110, 120, 200, 210, 220, 300, 310, 320]
    );
    let light = &p.accounts()[&n("light")];
    assert_eq!(
        (light.boosts, light.over_reservation, light.boosted_since),
        (1, 0, Some(ms(0)))
    );
    assert_eq!(
        (light.boosted_us, light.period_boosted_us),
        (350_000, 50_000)
    );
    let heavy = &p.accounts()[&n("heavy")];
    assert_eq!((heavy.boosts, heavy.over_reservation), (4, 6 + 7 + 7 + 3));
    assert_eq!(p.accounts()[&n("idle")].boosts, 0);
}

#[test]
fn boosted_time_splits_epochs_at_period_boundaries() {
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    let mut w = World::with(&[("a", 0.5)]);
    w.recv("a", 1, 0);
    for t in [0, 30, 60, 90, 120] {
        p.step(ms(t), &w.units).unwrap();
    }
    // Boosted throughout: 20 ms of the (90, 120] epoch lie in period 1.
    let a = &p.accounts()[&n("a")];
    assert_eq!((a.boosted_us, a.period_boosted_us), (120_000, 20_000));
}

#[test]
fn closed_sockets_rebase_the_counters() {
    let mut p = CommPolicy::new(spec(|s| s.anticipate = true)).unwrap();
    let mut w = World::with(&[("s", 0.5)]);
    let mut boosted_at = Vec::new();
    for t in (0..=300).step_by(10) {
        if t == 100 || t == 200 || t == 300 {
            w.send("s", 1000);
        }
        if t == 250 {
            w.get("s").net.bytes_sent = 300; // a socket closed
        }
        let d = p.step(ms(t), &w.units).unwrap();
        if !d.boosted.is_empty() {
            boosted_at.push(t);
        }
    }
    // The drop is not a burst: the prediction (300) stands.
    assert_eq!(boosted_at, [280, 290]);
    let pred = p.accounts()[&n("s")].prediction.unwrap();
    assert_eq!((pred.at, pred.bytes, pred.delta), (ms(400), 1000, ms(100)));

    // A dropped receive counter is not "received" either.
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    let mut w = World::with(&[("r", 0.5)]);
    w.recv("r", 0, 10_000);
    p.step(ms(0), &w.units).unwrap();
    w.get("r").net.bytes_received = 10;
    assert!(p.step(ms(10), &w.units).unwrap().boosted.is_empty());
    w.recv("r", 0, 5);
    assert_eq!(p.step(ms(20), &w.units).unwrap().boosted[0].intensity, 5);
}

#[test]
fn a_cpu_counter_that_restarts_counts_whole() {
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    let mut w = World::with(&[("a", 0.1)]);
    w.cpu("a", 50_000);
    p.step(ms(0), &w.units).unwrap();
    w.get("a").cpu_usage_us = 3_000;
    p.step(ms(10), &w.units).unwrap();
    assert_eq!(p.accounts()[&n("a")].period_use_us, 3_000);
    w.cpu("a", 8_000);
    w.recv("a", 1, 0);
    let d = p.step(ms(20), &w.units).unwrap();
    assert_eq!(
        d.refused[0].limit,
        Limit::OverReservation {
            used_us: 11_000,
            slice_us: 10_000
        }
    );
}

#[test]
fn unsampled_units_end_their_boost_and_keep_their_state() {
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    let mut w = World::with(&[("a", 0.5), ("b", 0.5)]);
    w.recv("a", 10, 0);
    p.step(ms(0), &w.units).unwrap();
    let only_b = vec![w.units[1].clone()];
    let d = p.step(ms(10), &only_b).unwrap();
    assert_eq!(d.ended, [(n("a"), EndReason::NotSampled)]);
    let a = &p.accounts()[&n("a")];
    assert_eq!((a.boosts, a.boosted_us, a.boosted_since), (1, 10_000, None));
    let d = p.step(ms(20), &w.units).unwrap();
    assert_eq!(names(&d.started), ["a"]);
    assert_eq!(p.accounts()[&n("a")].boosts, 2);
}

#[test]
fn forget_drops_the_unit() {
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    let mut w = World::with(&[("a", 0.5)]);
    w.recv("a", 10, 0);
    p.step(ms(0), &w.units).unwrap();
    p.step(ms(10), &w.units).unwrap();
    let last = p.forget(&n("a")).unwrap();
    assert_eq!(last.boosts, 1);
    assert!(p.boosted().is_empty() && p.accounts().is_empty());
    assert_eq!(p.forget(&n("a")), None);
    let d = p.step(ms(20), &w.units).unwrap();
    assert_eq!(names(&d.started), ["a"]);
    assert!(d.ended.is_empty());
    let a = &p.accounts()[&n("a")];
    assert_eq!((a.boosts, a.boosted_us), (1, 0));
}

#[test]
fn unwatched_units_are_only_checked() {
    let mut p = CommPolicy::new(spec(|s| {
        s.recipient = true;
        s.units = Some(vec![n("a")]);
    }))
    .unwrap();
    let mut w = World::with(&[("a", 0.5), ("b", 0.5)]);
    w.recv("a", 10, 0);
    w.recv("b", 10_000, 0);
    let d = p.step(ms(0), &w.units).unwrap();
    assert_eq!(names(&d.boosted), ["a"]);
    assert!(!p.accounts().contains_key(&n("b")));
    assert_eq!(p.accounts()[&n("a")].slice_us, 50_000);
    // Its sends do not count for a network-path unit either.
    let mut p = CommPolicy::new(spec(|s| {
        s.units = Some(vec![n("a")]);
        s.netpath = vec![n("p")];
    }))
    .unwrap();
    let mut w = World::with(&[("a", 0.5), ("b", 0.5), ("p", 0.5)]);
    p.step(ms(0), &w.units).unwrap();
    w.send("a", 300);
    w.send("b", 70_000);
    let d = p.step(ms(10), &w.units).unwrap();
    assert_eq!(names(&d.boosted), ["p"]);
    assert_eq!(d.boosted[0].intensity, 300);
    // But its input is checked like the others.
    w.get("b").reservation_cpus = f64::NAN;
    assert!(matches!(
        p.step(ms(20), &w.units),
        Err(CommError::BadReservation { unit, .. }) if unit.as_str() == "b"
    ));
}

#[test]
fn bad_steps_change_nothing() {
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    let mut w = World::with(&[("a", 0.5)]);
    w.recv("a", 10, 0);
    p.step(ms(20), &w.units).unwrap();
    let dup = vec![w.units[0].clone(), w.units[0].clone()];
    let mut nan = w.units.clone();
    nan[0].reservation_cpus = f64::NAN;
    let mut neg = w.units.clone();
    neg[0].reservation_cpus = -0.5;
    assert_eq!(
        p.step(ms(10), &w.units),
        Err(CommError::TimeWentBack {
            last: ms(20),
            now: ms(10)
        })
    );
    assert_eq!(
        p.step(ms(30), &dup),
        Err(CommError::DuplicateUnit { unit: n("a") })
    );
    assert!(matches!(
        p.step(ms(30), &nan),
        Err(CommError::BadReservation { .. })
    ));
    assert!(matches!(
        p.step(ms(30), &neg),
        Err(CommError::BadReservation { .. })
    ));
    assert!(CommPolicy::new(spec(|s| s.max_boosted = 0)).is_err());
    p.step(ms(30), &w.units).unwrap();
    // Only the one valid epoch (20..30) was charged.
    assert_eq!(p.accounts()[&n("a")].boosted_us, 10_000);
}

#[test]
fn decisions_serialize_and_read_as_sentences() {
    let mut p = CommPolicy::new(spec(|s| s.recipient = true)).unwrap();
    let mut w = World::with(&[("a", 0.5)]);
    w.recv("a", 10, 0);
    let d = p.step(ms(0), &w.units).unwrap();
    let back: CommDecision = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
    assert_eq!(back, d);
    assert_eq!(
        d.boosted[0].to_string(),
        "boost unit a (intensity 10 bytes): 10 bytes wait in its receive queues and it read 0 in the last epoch"
    );
    let e = EndReason::Limit(Limit::OverReservation {
        used_us: 5,
        slice_us: 4,
    });
    assert_eq!(
        e.to_string(),
        "it used 5 µs of CPU this period, its slice is 4 µs"
    );
    let json = serde_json::to_value(p.accounts()).unwrap();
    assert_eq!(json["a"]["boosts"], 1);
    let ends = [
        EndReason::Quiet,
        EndReason::Outranked {
            intensity: 3,
            cutoff: 9,
        },
        e,
        EndReason::NotSampled,
    ];
    for end in ends {
        let back: EndReason = serde_json::from_str(&serde_json::to_string(&end).unwrap()).unwrap();
        assert_eq!(back, end);
        assert!(!end.to_string().is_empty());
    }
    let limit = serde_json::to_value(ends[2]).unwrap();
    assert_eq!(limit["reason"], "limit");
    assert_eq!(limit["limit"], "over_reservation");
    assert_eq!(
        (&limit["used_us"], &limit["slice_us"]),
        (&5.into(), &4.into())
    );
}

/// One unit's activity in one epoch of the property test.
#[derive(Clone, Debug)]
struct Ev {
    present: bool,
    queued: u64,
    read: u64,
    sent: u64,
    cpu_us: u64,
    reset: bool,
}

fn ev() -> impl Strategy<Value = Ev> {
    (
        prop::bool::weighted(0.9),
        prop_oneof![Just(0u64), Just(100), 1u64..100_000],
        prop_oneof![Just(0u64), 1u64..10_000],
        prop_oneof![Just(0u64), Just(0), 1u64..10_000],
        0u64..60_000,
        prop::bool::weighted(0.05),
    )
        .prop_map(|(present, queued, read, sent, cpu_us, reset)| Ev {
            present,
            queued,
            read,
            sent,
            cpu_us,
            reset,
        })
}

proptest! {
    /// Checks the guarantees against figures the test computes itself from
    /// the inputs it fed and the decisions it got: the slice gate (and no
    /// other), `max_boosted`, boosted time per period within the period,
    /// and accounts that add up.
    #[test]
    fn boosts_respect_the_slice_gate_and_the_accounts_add_up(
        shares in prop::collection::vec(prop_oneof![Just(0.0), 0.05f64..1.5], 1..6),
        features in (any::<bool>(), any::<bool>(), any::<bool>()),
        max_boosted in 1usize..4,
        period_ms in 10u64..200,
        epochs in prop::collection::vec((1u64..60, prop::collection::vec(ev(), 6)), 1..60),
    ) {
        let names: Vec<Name> = (0..shares.len()).map(|i| n(&format!("u{i}"))).collect();
        let spec = CommSpec {
            recipient: features.0,
            anticipate: features.1,
            netpath: if features.2 { vec![names[0].clone()] } else { vec![] },
            period: ms(period_ms),
            max_boosted,
            ..CommSpec::default()
        };
        let any = spec.any_feature();
        let mut p = CommPolicy::new(spec).unwrap();
        let period_us = period_ms * 1000;
        let slices: Vec<u64> = shares.iter().map(|s| crate::num::saturating_u64((s * period_us as f64).round())).collect();
        let mut inputs: Vec<UnitInput> = names.iter().zip(&shares).map(|(u, &r)| UnitInput {
            unit: u.clone(),
            net: UnitNetSample::default(),
            cpu_usage_us: 0,
            reservation_cpus: r,
        }).collect();
        // The test's own books.
        let mut last_cpu: Vec<Option<u64>> = vec![None; names.len()];
        let mut used: BTreeMap<(usize, u64), u64> = BTreeMap::new();
        let mut boosted_in: BTreeMap<(usize, u64), u64> = BTreeMap::new();
        let mut boosted_total = vec![0u64; names.len()];
        let mut starts = vec![0u64; names.len()];
        let mut refusals = vec![0u64; names.len()];
        let mut prev: Option<(u64, Vec<usize>)> = None;
        let mut now_us = 0u64;
        let mut last_present = Vec::new();
        for (h, evs) in &epochs {
            now_us += h * 1000;
            let k = now_us / period_us;
            // Charge the last decision's boosts, split at period starts.
            if let Some((t0, b)) = &prev {
                for &i in b {
                    boosted_total[i] += now_us - t0;
                    let mut t = *t0;
                    while t < now_us {
                        let end = ((t / period_us + 1) * period_us).min(now_us);
                        *boosted_in.entry((i, t / period_us)).or_default() += end - t;
                        t = end;
                    }
                }
            }
            let mut present = Vec::new();
            last_present.clear();
            for (i, e) in evs.iter().take(names.len()).enumerate() {
                let inp = &mut inputs[i];
                inp.net.recv_queued = e.queued;
                inp.net.bytes_received += e.read;
                inp.net.bytes_sent += e.sent;
                if e.reset {
                    inp.net.bytes_sent /= 3;
                    inp.cpu_usage_us = e.cpu_us / 2;
                } else {
                    inp.cpu_usage_us += e.cpu_us;
                }
                if e.present {
                    let c = inp.cpu_usage_us;
                    let grown = last_cpu[i].map_or(0, |l| if c >= l { c - l } else { c });
                    *used.entry((i, k)).or_default() += grown;
                    last_cpu[i] = Some(c);
                    present.push(inp.clone());
                    last_present.push(i);
                }
            }
            let d = p.step(Duration::from_micros(now_us), &present).unwrap();
            prop_assert!(d.boosted.len() <= max_boosted);
            prop_assert!(any || d.boosted.is_empty());
            let use_of = |i: usize| used.get(&(i, k)).copied().unwrap_or(0);
            let mut now_boosted = Vec::new();
            for b in &d.boosted {
                let i = names.iter().position(|u| *u == b.unit).unwrap();
                prop_assert!(!now_boosted.contains(&i));
                prop_assert!(b.intensity > 0);
                prop_assert!(present.iter().any(|p| p.unit == b.unit));
                // The gate: below its slice when the boost is decided.
                prop_assert!(use_of(i) < slices[i], "{} boosted with {} >= {}", b.unit, use_of(i), slices[i]);
                now_boosted.push(i);
            }
            // Every refusal is the slice gate, with the test's figures.
            for r in &d.refused {
                let i = names.iter().position(|u| *u == r.unit).unwrap();
                let Limit::OverReservation { used_us, slice_us } = r.limit;
                prop_assert_eq!((used_us, slice_us), (use_of(i), slices[i]));
                prop_assert!(used_us >= slice_us);
                refusals[i] += 1;
            }
            // No other gate: a present unit with an intensity that is below
            // its slice and not boosted was outranked by `max_boosted` units.
            for &i in &last_present {
                let a = &p.accounts()[&names[i]];
                if a.intensity > 0 && use_of(i) < slices[i] && !now_boosted.contains(&i) {
                    prop_assert_eq!(d.boosted.len(), max_boosted);
                    prop_assert!(d.boosted.iter().all(|b| b.intensity >= a.intensity));
                }
            }
            for s in &d.started {
                starts[names.iter().position(|u| *u == s.unit).unwrap()] += 1;
            }
            prev = Some((now_us, now_boosted));
        }
        // Per period, boosted time stays within the period.
        for &b in boosted_in.values() {
            prop_assert!(b <= period_us);
        }
        // The accounts add up.
        let k = now_us / period_us;
        for (i, u) in names.iter().enumerate() {
            match p.accounts().get(u) {
                Some(a) => {
                    prop_assert_eq!(a.boosts, starts[i]);
                    prop_assert_eq!(a.reasons.total(), a.boosts);
                    prop_assert_eq!(a.boosted_us, boosted_total[i]);
                    prop_assert_eq!(a.over_reservation, refusals[i]);
                    prop_assert_eq!(a.slice_us, slices[i]);
                    if last_present.contains(&i) {
                        prop_assert_eq!(a.period_use_us, used.get(&(i, k)).copied().unwrap_or(0));
                        prop_assert_eq!(
                            a.period_boosted_us,
                            boosted_in.get(&(i, k)).copied().unwrap_or(0)
                        );
                    }
                }
                None => prop_assert_eq!(starts[i] + refusals[i], 0),
            }
        }
    }
}
