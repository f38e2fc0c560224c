use proptest::prelude::*;

use super::test_util::*;
use super::*;

/// Islands a (4 CPUs), b (2), c (2).
fn abc() -> PlatformManager {
    abc_with(CoordConfig::default())
}

/// Islands a (4 CPUs), b (2), c (2) under `cfg`.
fn abc_with(cfg: CoordConfig) -> PlatformManager {
    PlatformManager::new(
        cfg,
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

/// The daemon's default epoch, ms: how often the tests feed samples.
const EPOCH: u64 = 30;

/// Whether the window being gathered is empty: the last call closed one
/// (or none has begun).
fn window_closed(p: &PlatformManager) -> bool {
    p.cap.as_ref().is_none_or(|c| c.window.since.is_none())
}

/// Feeds `usage` at every epoch from `from` until a window closes, at its
/// end (`cap_interval`) or early (grant on demand); returns the writes of
/// that last call and the next epoch. Every sample of the window it closes
/// is `usage`, whatever `cap_period` and `cap_interval` are.
fn window(p: &mut PlatformManager, from: u64, usage: &[(&str, f64, bool)]) -> (Vec<Effect>, u64) {
    let usage: Vec<(Name, f64, bool)> = usage.iter().map(|(i, u, t)| (n(i), *u, *t)).collect();
    assert!(window_closed(p), "a window from before {from} ms is open");
    let mut t = from;
    loop {
        let out = p.rebalance(ms(t), &usage).unwrap();
        t += EPOCH;
        if window_closed(p) {
            return (out, t);
        }
    }
}

/// The writes, applied in order, never take the caps in force above the
/// platform cap; returns the caps after them.
fn apply_in_order(before: &[u64], names: &[Name], out: &[Effect], total: u64) -> Vec<u64> {
    let mut caps = before.to_vec();
    for e in out {
        let Change::SetIslandCap {
            island,
            cpus: Some(c),
        } = &e.change
        else {
            panic!("not a cap: {e}");
        };
        let i = names.iter().position(|x| x == island).unwrap();
        caps[i] = crate::num::saturating_u64((c * 1000.0).round());
        assert!(
            caps.iter().sum::<u64>() <= total,
            "caps {caps:?} above {total} in between: {out:?}"
        );
    }
    caps
}

#[test]
fn an_idle_island_gives_cap_to_a_throttled_one_in_one_move() {
    let mut p = abc();
    p.set_cpu_cap(4.0).unwrap();
    let (out, _) = window(&mut p, 0, &[("a", 0.5, false), ("b", 1.0, true)]);
    // a keeps 0.5 + 0.1; b takes all it can (its 2 CPUs); what b cannot
    // use goes back to a; c, with no sample, keeps its cap.
    assert_eq!(caps(&p), [0.975, 2.0, 1.025]);
    let text: Vec<String> = out.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        text,
        [
            "cap island a at 0.975 CPUs: used only 0.50 CPUs: gave 0.975 CPUs to throttled islands",
            "cap island b at 2 CPUs: throttled at its cap using 1.00 CPUs: received 0.975 CPUs",
        ]
    );
    // Nobody throttled: nothing moves, however idle.
    let (out, _) = window(&mut p, 1000, &[("a", 0.0, false), ("b", 0.0, false)]);
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn throttled_islands_share_the_cap_by_their_cpus() {
    let mut p = abc();
    p.set_cpu_cap(4.0).unwrap();
    // a and b throttled, c nearly idle: c keeps its 0.05 + headroom; the
    // other 3.85 goes 4:2.
    window(
        &mut p,
        0,
        &[("a", 1.95, true), ("b", 1.025, true), ("c", 0.05, false)],
    );
    assert_eq!(caps(&p), [2.567, 1.283, 0.15]);
    assert_eq!(total_milli(&p), 4000);
}

#[test]
fn a_throttled_island_on_its_minimum_gets_at_least_the_minimum() {
    // One island of 1 CPU beside one of 7: proportional shares of 0.4
    // would leave the small one 0.05, below `cap_min`.
    let cfg = CoordConfig {
        cap_deadband: 0.0,
        ..CoordConfig::default()
    };
    let mut p =
        PlatformManager::new(cfg, vec![fair("s", "0", &[]), fair("l", "1-7", &[])]).unwrap();
    p.set_cpu_cap(0.4).unwrap();
    window(&mut p, 0, &[("s", 0.1, true), ("l", 0.3, true)]);
    assert_eq!(caps(&p), [0.1, 0.3]);
}

#[test]
fn a_move_smaller_than_the_dead_band_is_not_written() {
    // Whatever the period (so whether the windows close early or not).
    for period in [5, 10, 20, 50, 150] {
        dead_band(CoordConfig {
            cap_period: ms(period),
            ..CoordConfig::default()
        });
    }
}

fn dead_band(cfg: CoordConfig) {
    let mut p = abc_with(cfg);
    p.set_cpu_cap(4.0).unwrap();
    window(&mut p, 0, &[("a", 0.5, false), ("b", 1.025, true)]);
    assert_eq!(caps(&p), [0.975, 2.0, 1.025]);
    // a uses 0.8 (keeps 0.9), b is satisfied at its cap, c throttled
    // would take 1.1: no share moves by 0.1 CPU, nothing is written.
    let (out, _) = window(
        &mut p,
        1000,
        &[("a", 0.8, false), ("b", 1.95, false), ("c", 1.025, true)],
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(caps(&p), [0.975, 2.0, 1.025]);
    // A larger one is.
    let (out, _) = window(
        &mut p,
        2000,
        &[("a", 0.5, false), ("b", 1.95, false), ("c", 1.025, true)],
    );
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(caps(&p), [0.6, 2.0, 1.4]);
}

#[test]
fn a_throttled_sample_anywhere_in_the_window_counts() {
    // At a 30 ms epoch and a 100 ms CFS period, a group throttled early in
    // a period shows no new throttling and little use later in it: the
    // window must not take it for idle. (A window that begins with the
    // cap cannot close early: the cap's setting is the last move.)
    let mut p = abc();
    p.set_cpu_cap(4.0).unwrap();
    let mut t = 0;
    let mut out = Vec::new();
    let mut k = 0;
    while k == 0 || !window_closed(&p) {
        let b = if k % 3 == 0 {
            (2.0, true)
        } else {
            (0.0, false)
        };
        out = p
            .rebalance(
                ms(t),
                &[
                    (n("a"), 0.2, false),
                    (n("b"), b.0, b.1),
                    (n("c"), 0.0, false),
                ],
            )
            .unwrap();
        t += EPOCH;
        k += 1;
    }
    assert_eq!(k, 8, "the window is {} epochs", k);
    // b, throttled in 3 of 8 samples, takes all it can (2 CPUs); what it
    // cannot use goes back to a.
    assert!(!out.is_empty());
    assert_eq!(caps(&p), [1.9, 2.0, 0.1]);
}

#[test]
fn the_phased_workload_moves_the_cap_once_per_phase() {
    // inTune 5.1: two islands of 4 CPUs under a cap of 4; A busy, then
    // both, then B.
    let mut p = PlatformManager::new(
        CoordConfig::default(),
        vec![fair("A", "0-3", &[]), fair("B", "4-7", &[])],
    )
    .unwrap();
    p.set_cpu_cap(4.0).unwrap();
    let names = [n("A"), n("B")];
    let mut t = 0;
    let mut writes = Vec::new();
    let mut phase = |p: &mut PlatformManager, a: bool, b: bool, t: &mut u64| {
        let mut moves = 0;
        for _ in 0..10 {
            let now: Vec<u64> = p.islands().iter().map(|c| c.cap_milli().unwrap()).collect();
            let use_of = |busy: bool, cap: u64| if busy { cap as f64 / 1000.0 } else { 0.0 };
            let (out, next) = window(
                p,
                *t,
                &[("A", use_of(a, now[0]), a), ("B", use_of(b, now[1]), b)],
            );
            *t = next;
            if !out.is_empty() {
                moves += 1;
                apply_in_order(&now, &names, &out, 4000);
                writes.push(out.len());
            }
        }
        moves
    };
    assert_eq!(phase(&mut p, true, false, &mut t), 1);
    assert_eq!(caps(&p), [3.9, 0.1]);
    assert_eq!(phase(&mut p, true, true, &mut t), 1);
    assert_eq!(caps(&p), [2.0, 2.0]);
    assert_eq!(phase(&mut p, false, true, &mut t), 1);
    assert_eq!(caps(&p), [0.1, 3.9]);
    assert_eq!(writes, [2, 2, 2]);
}

/// Milliseconds of a duration (the tests' durations are whole ms).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap()
}

#[test]
fn a_throttled_island_gets_the_slack_at_once_then_the_cap_holds_a_window() {
    // The rule for any period: the first epoch at which the window spans
    // two periods, or the window's end if that comes first.
    for period in [5, 10, 20, 50, 150] {
        let cfg = CoordConfig {
            cap_period: ms(period),
            ..CoordConfig::default()
        };
        slack_at_once(cfg);
    }
}

fn slack_at_once(cfg: CoordConfig) {
    let (period, interval) = (millis(cfg.cap_period), millis(cfg.cap_interval));
    // Two islands of 4 CPUs under a cap of 4, quiet for a second.
    let mut p =
        PlatformManager::new(cfg, vec![fair("A", "0-3", &[]), fair("B", "4-7", &[])]).unwrap();
    p.set_cpu_cap(4.0).unwrap();
    let names = [n("A"), n("B")];
    let feed = |p: &mut PlatformManager, t: u64, a: (f64, bool), b: (f64, bool)| {
        p.rebalance(ms(t), &[(n("A"), a.0, a.1), (n("B"), b.0, b.1)])
            .unwrap()
    };
    let mut t = 0;
    while t < 1000 || !window_closed(&p) {
        assert!(feed(&mut p, t, (0.0, false), (0.0, false)).is_empty());
        t += EPOCH;
    }
    // B throttled, A idle, from the first sample of a window: the move
    // comes once the window spans two periods, not at the window's end.
    let start = t;
    let due = (2 * period).min(interval).div_ceil(EPOCH) * EPOCH;
    let out = loop {
        let out = feed(&mut p, t, (0.0, false), (2.0, true));
        if !out.is_empty() {
            break out;
        }
        assert!(t - start < due, "no move {} ms into the window", t - start);
        t += EPOCH;
    };
    assert_eq!(t - start, due, "period {period} ms");
    assert_eq!(out.len(), 2, "{out:?}");
    apply_in_order(&[2000, 2000], &names, &out, 4000);
    assert_eq!(caps(&p), [0.1, 3.9]);
    let moved_at = t;
    // Now A wakes and is throttled at once: no move before the last one
    // is `cap_interval` old, then one, with both sides sharing.
    let mut t = moved_at + EPOCH;
    let mut next = Vec::new();
    while next.is_empty() {
        next = feed(&mut p, t, (0.1, true), (3.9, true));
        assert!(
            next.is_empty() || t - moved_at >= interval,
            "moved again after {} ms: {next:?}",
            t - moved_at
        );
        t += EPOCH;
    }
    apply_in_order(&[100, 3900], &names, &next, 4000);
    assert_eq!(caps(&p), [2.0, 2.0]);
}

#[test]
fn the_islands_caps_take_a_twenty_millisecond_period_by_default() {
    let c = CoordConfig::default();
    assert_eq!(c.cap_period, Duration::from_millis(20));
    for (ms, ok) in [(0u64, false), (1, true), (1000, true), (1001, false)] {
        let cfg = CoordConfig {
            cap_period: Duration::from_millis(ms),
            ..c
        };
        assert_eq!(cfg.validate().is_ok(), ok, "{ms} ms");
    }
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
    /// cap, the writes of a move (cuts first) never take the caps in force
    /// above it in between, no island drops below `cap_min`, an island
    /// grows only when it was throttled (up to its CPUs) or to take back
    /// what it had, and a window closes (and may move) exactly when the
    /// rule says: at `cap_interval`, or early by grant on demand, for any
    /// `cap_period`.
    #[test]
    fn island_caps_always_sum_to_the_platform_cap(
        sizes in prop::collection::vec(1u32..5, 2..6),
        frac in 0.0f64..1.0,
        period in 1u64..150,
        steps in prop::collection::vec(
            prop::collection::vec((0.0f64..5.0, any::<bool>(), any::<bool>()), 6),
            1..60,
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
        let cfg = CoordConfig {
            cap_period: ms(period),
            ..CoordConfig::default()
        };
        let interval = millis(cfg.cap_interval);
        let mut p = PlatformManager::new(cfg, islands).unwrap();
        let names: Vec<Name> = p.islands().iter().map(|c| c.name().clone()).collect();
        let all: u32 = sizes.iter().sum();
        let min = 0.1 * sizes.len() as f64;
        let cap = min + frac * (f64::from(all) - min);
        p.set_cpu_cap(cap).unwrap();
        let total = total_milli(&p);
        prop_assert_eq!(total, crate::num::saturating_u64((cap * 1000.0).round()));
        let mut since: Option<u64> = None;
        let mut last_move = 0;
        let mut throttled = vec![false; sizes.len()];
        for (k, step) in steps.iter().enumerate() {
            let now = EPOCH * k as u64;
            let before: Vec<u64> = p.islands().iter().map(|c| c.cap_milli().unwrap()).collect();
            let usage: Vec<(Name, f64, bool)> = step
                .iter()
                .take(sizes.len())
                .enumerate()
                .filter(|(_, (_, _, present))| *present)
                .map(|(i, (u, thr, _))| (n(&format!("i{i}")), *u, *thr))
                .collect();
            for (u, _, thr) in &usage {
                let i = names.iter().position(|x| x == u).unwrap();
                throttled[i] |= *thr;
            }
            let start = *since.get_or_insert(now);
            let out = p.rebalance(ms(now), &usage).unwrap();
            // A window closes after `cap_interval`, or at once on a
            // throttled sample once it spans two periods and the last move
            // (the cap's setting at first) is `cap_interval` old.
            let throttled_now = usage.iter().any(|(_, _, t)| *t);
            let early = throttled_now && now - last_move >= interval && now - start >= 2 * period;
            let closed = now - start >= interval || early;
            prop_assert_eq!(closed, window_closed(&p), "window at {} ms from {} ms", now, start);
            if !out.is_empty() {
                last_move = now;
            }
            if !closed {
                prop_assert!(out.is_empty(), "moved inside the window: {:?}", out);
                continue;
            }
            since = None;
            let after = apply_in_order(&before, &names, &out, total);
            prop_assert_eq!(total_milli(&p), total);
            for (i, c) in p.islands().iter().enumerate() {
                let m = c.cap_milli().unwrap();
                prop_assert_eq!(m, after[i]);
                prop_assert!(m >= 100 || m >= before[i], "island {} fell to {}", i, m);
                if m > before[i] {
                    prop_assert!(throttled[i], "island {} grew unthrottled", i);
                    prop_assert!(m <= c.cpus().len() as u64 * 1000, "island {} over its CPUs", i);
                }
            }
            throttled = vec![false; sizes.len()];
        }
    }
}
