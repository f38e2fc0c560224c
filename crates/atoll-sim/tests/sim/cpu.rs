use atoll_core::backend::{Actuator, Monitor};
use atoll_core::plan::{GroupSettings, TaskPolicy};
use atoll_core::process::TaskControl;

use super::*;

/// A busy process placed in `path`.
fn busy_in(sim: &mut SimPlatform, path: &str) -> u32 {
    let pid = sim.spawn("w", 1000, None);
    sim.move_process(pid, &g(path)).unwrap();
    sim.set_busy(pid, true).unwrap();
    pid
}

fn usage(sim: &SimPlatform, path: &str) -> u64 {
    sim.stats(&g(path)).unwrap().cpu_usage_us.unwrap()
}

#[test]
fn siblings_share_one_cpu_by_weight() {
    let mut sim = machine(1);
    ok(&mut sim, "", with_cpus("0"));
    ok(&mut sim, "a", weight(100));
    ok(&mut sim, "b", weight(300));
    let a = busy_in(&mut sim, "a");
    let b = busy_in(&mut sim, "b");
    sim.advance(secs(1.0));
    assert!(
        near(sim.cpu_time(a).unwrap(), secs(0.25)),
        "{:?}",
        sim.cpu_time(a)
    );
    assert!(
        near(sim.cpu_time(b).unwrap(), secs(0.75)),
        "{:?}",
        sim.cpu_time(b)
    );
    assert_eq!(usage(&sim, "a"), 250_000);
    assert_eq!(usage(&sim, "b"), 750_000);
    assert_eq!(usage(&sim, ""), 1_000_000, "usage is hierarchical");
}

#[test]
fn unused_share_goes_to_siblings_within_the_parent_only() {
    // x: {x1: 1 thread, x2: 5 threads}, y: 5 threads; 8 cpus. x and y get 4
    // each; x1 can use only 1 of x's, so x2 gets 3 (not shared with y).
    let mut sim = machine(8);
    ok(&mut sim, "", GroupSettings::default());
    for p in ["x", "x/x1", "x/x2", "y"] {
        ok(&mut sim, p, GroupSettings::default());
    }
    busy_in(&mut sim, "x/x1");
    for _ in 0..5 {
        busy_in(&mut sim, "x/x2");
        busy_in(&mut sim, "y");
    }
    sim.advance(secs(1.0));
    assert_eq!(usage(&sim, "x/x1"), 1_000_000);
    assert_eq!(usage(&sim, "x/x2"), 3_000_000);
    assert_eq!(usage(&sim, "y"), 4_000_000);
}

#[test]
fn cpu_max_caps_and_counts_throttling() {
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "capped", cap(50_000, 100_000));
    ok(&mut sim, "roomy", cap(150_000, 100_000));
    let p = busy_in(&mut sim, "capped");
    sim.spawn_thread(p).unwrap();
    sim.advance(secs(1.0));
    let s = sim.stats(&g("capped")).unwrap();
    assert_eq!(s.cpu_usage_us, Some(500_000));
    assert_eq!(s.nr_periods, Some(10));
    assert_eq!(s.nr_throttled, Some(10));
    // Two runnable threads wanted 2 CPUs; the cap allowed 0.5.
    assert_eq!(s.throttled_us, Some(1_500_000));

    // One thread under a 1.5-CPU cap is never throttled.
    sim.exit(p).unwrap();
    busy_in(&mut sim, "roomy");
    sim.advance(secs(0.35));
    let s = sim.stats(&g("roomy")).unwrap();
    assert_eq!(s.cpu_usage_us, Some(350_000));
    assert_eq!(s.nr_periods, Some(3));
    assert_eq!(s.nr_throttled, Some(0));
    assert_eq!(s.throttled_us, Some(0));
    // An idle capped group counts no periods.
    sim.advance(secs(0.5));
    assert_eq!(sim.stats(&g("capped")).unwrap().nr_periods, Some(10));
}

#[test]
fn a_capped_group_under_contention_is_not_throttled() {
    // Two busy groups on one CPU, equal weights: each gets 0.5, so a 0.6 cap
    // is never reached.
    let mut sim = machine(1);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "a", cap(60_000, 100_000));
    ok(&mut sim, "b", GroupSettings::default());
    busy_in(&mut sim, "a");
    busy_in(&mut sim, "b");
    sim.advance(secs(1.0));
    let s = sim.stats(&g("a")).unwrap();
    assert_eq!(s.cpu_usage_us, Some(500_000));
    assert_eq!((s.nr_periods, s.nr_throttled), (Some(10), Some(0)));
}

#[test]
fn disjoint_cpusets_do_not_compete() {
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "a", partition("0"));
    ok(
        &mut sim,
        "b",
        GroupSettings {
            cpu_weight: Some(1),
            ..partition("1")
        },
    );
    for _ in 0..3 {
        busy_in(&mut sim, "a");
    }
    let b = busy_in(&mut sim, "b");
    sim.advance(secs(1.0));
    assert_eq!(usage(&sim, "a"), 1_000_000);
    assert!(near(sim.cpu_time(b).unwrap(), secs(1.0)));
}

#[test]
fn overlapping_cpusets_share_their_cpus() {
    // a and b both on cpu 0, c alone on cpu 1: a and b split cpu 0.
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "a", with_cpus("0"));
    ok(&mut sim, "b", with_cpus("0"));
    ok(&mut sim, "c", with_cpus("1"));
    for p in ["a", "a", "b", "b", "c", "c"] {
        busy_in(&mut sim, p);
    }
    sim.advance(secs(1.0));
    assert_eq!(usage(&sim, "a"), 500_000);
    assert_eq!(usage(&sim, "b"), 500_000);
    assert_eq!(usage(&sim, "c"), 1_000_000);
}

#[test]
fn the_rest_of_the_machine_competes_with_atoll() {
    let mut sim = machine(1);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "u", GroupSettings::default());
    let outside = sim.spawn("noise", 0, None);
    sim.set_busy(outside, true).unwrap();
    let inside = busy_in(&mut sim, "u");
    sim.advance(secs(1.0));
    assert!(near(sim.cpu_time(outside).unwrap(), secs(0.5)));
    assert!(near(sim.cpu_time(inside).unwrap(), secs(0.5)));
}

#[test]
fn idle_policy_and_idle_groups_yield() {
    let mut sim = machine(1);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "u", GroupSettings::default());
    let normal = busy_in(&mut sim, "u");
    let idle = busy_in(&mut sim, "u");
    sim.set_policy(idle, TaskPolicy::Idle).unwrap();
    sim.advance(secs(1.0));
    let share = 3.0 / 1027.0;
    assert!(
        near(sim.cpu_time(idle).unwrap(), secs(share)),
        "{:?}",
        sim.cpu_time(idle)
    );
    assert!(near(sim.cpu_time(normal).unwrap(), secs(1.0 - share)));

    let mut sim = machine(1);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "fg", GroupSettings::default());
    ok(
        &mut sim,
        "bg",
        GroupSettings {
            cpu_idle: true,
            ..Default::default()
        },
    );
    busy_in(&mut sim, "fg");
    busy_in(&mut sim, "bg");
    sim.advance(secs(1.0));
    assert_eq!(
        usage(&sim, "bg"),
        atoll_core::num::saturating_u64((share * 1e6).floor())
    );
}

#[test]
fn rates_change_only_at_events() {
    let mut sim = machine(1);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "u", GroupSettings::default());
    let p = busy_in(&mut sim, "u");
    sim.advance(secs(0.4));
    sim.set_busy(p, false).unwrap();
    sim.advance(secs(1.0));
    assert_eq!(usage(&sim, "u"), 400_000);
    // Advancing the shared clock directly is picked up by the next call.
    sim.set_busy(p, true).unwrap();
    sim.clock().advance(secs(0.1));
    assert_eq!(usage(&sim, "u"), 500_000);
    // Usage survives the process.
    sim.exit(p).unwrap();
    sim.advance(secs(1.0));
    assert_eq!(usage(&sim, "u"), 500_000);
}

#[test]
fn memory_is_summed_per_group_and_up_the_tree() {
    let mut sim = machine(1);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "web", GroupSettings::default());
    ok(&mut sim, "web/api", GroupSettings::default());
    ok(&mut sim, "web/api2", GroupSettings::default());
    ok(&mut sim, "db", GroupSettings::default());
    let a = busy_in(&mut sim, "web/api");
    let b = busy_in(&mut sim, "web/api2");
    let c = busy_in(&mut sim, "db");
    let outside = sim.spawn("x", 0, None);
    for (pid, bytes) in [(a, 100), (b, 20), (c, 3), (outside, 5000)] {
        sim.set_memory(pid, bytes).unwrap();
    }
    let mem = |p: &str| sim.stats(&g(p)).unwrap().memory_current.unwrap();
    assert_eq!(mem("web/api"), 100);
    assert_eq!(mem("web"), 120);
    assert_eq!(mem("db"), 3);
    assert_eq!(mem(""), 123);
    assert!(sim.set_memory(4242, 1).is_err());
}

#[test]
fn frozen_groups_get_no_cpu_until_thawed() {
    use atoll_core::backend::FreezeState;
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "a", GroupSettings::default());
    ok(&mut sim, "a/x", GroupSettings::default());
    ok(&mut sim, "b", GroupSettings::default());
    let x = busy_in(&mut sim, "a/x");
    let b1 = busy_in(&mut sim, "b");
    let b2 = busy_in(&mut sim, "b");
    sim.advance(secs(1.0));
    assert!(near(sim.cpu_time(x).unwrap(), secs(1.0)));
    let frozen = GroupSettings {
        frozen: true,
        ..Default::default()
    };
    ok(&mut sim, "a", frozen);
    assert_eq!(
        sim.freeze_state(&g("a/x")).unwrap(),
        Some(FreezeState::Frozen)
    );
    assert_eq!(
        sim.freeze_state(&g("b")).unwrap(),
        Some(FreezeState::Thawed)
    );
    sim.advance(secs(1.0));
    // x stopped; b's two threads have both CPUs.
    assert!(near(sim.cpu_time(x).unwrap(), secs(1.0)));
    assert!(near(sim.cpu_time(b1).unwrap(), secs(1.5)));
    assert!(near(sim.cpu_time(b2).unwrap(), secs(1.5)));
    assert_eq!(usage(&sim, "a"), 1_000_000);
    let p = sim
        .stats(&g("a"))
        .unwrap()
        .cpu_pressure
        .unwrap()
        .some
        .total_us;
    ok(&mut sim, "a", GroupSettings::default());
    sim.advance(secs(1.0));
    // a and b share the CPUs 1:1 again.
    assert!(near(sim.cpu_time(x).unwrap(), secs(2.0)));
    // Frozen time is not pressure.
    assert_eq!(p, 0);
}

#[test]
fn thread_work_completes_at_the_rate_it_gets() {
    let mut sim = machine(1);
    ok(&mut sim, "", GroupSettings::default());
    ok(&mut sim, "u", GroupSettings::default());
    let a = busy_in(&mut sim, "u");
    sim.set_thread_work(a, secs(0.010)).unwrap();
    assert_eq!(sim.next_completion(), Some(secs(0.010)));
    assert_eq!(sim.thread_rate(a), Some(1.0));
    // A second runnable thread halves the rate from 4 ms on: 6 ms left
    // take 12 ms.
    sim.advance(secs(0.004));
    let b = busy_in(&mut sim, "u");
    assert_eq!(sim.next_completion(), Some(secs(0.016)));
    assert_eq!(sim.thread_rate(b), Some(0.5));
    sim.advance(secs(0.011));
    assert!(sim.take_completed().is_empty());
    sim.advance(secs(0.001));
    assert_eq!(sim.take_completed(), [a]);
    assert_eq!(sim.next_completion(), None);
    assert!(near(sim.thread_cpu_time(a).unwrap(), secs(0.010)));
    // Work survives blocking: it resumes where it was (a is still
    // runnable, so b gets half the CPU).
    sim.set_thread_work(b, secs(0.004)).unwrap();
    sim.set_thread_busy(b, false).unwrap();
    sim.advance(secs(1.0));
    sim.set_thread_busy(b, true).unwrap();
    assert_eq!(sim.next_completion(), Some(secs(1.024)));
    assert_eq!(sim.thread_busy(b), Some(true));
}
