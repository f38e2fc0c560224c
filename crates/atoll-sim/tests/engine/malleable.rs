//! Malleable apps: the round's work split among the active threads, the
//! thread count changed between rounds, pauses, and spinning at the
//! barrier.

use super::*;

fn malleable(threads: u32, work_ms: f64, rounds: u32, jitter: f64, spin_us: f64) -> String {
    format!(
        "[[apps]]\nname = \"bt\"\nunit = \"bt\"\nthreads = {threads}\n\
         program = {{ kind = \"malleable\", work_ms = {work_ms}, rounds = {rounds}, \
         jitter = {jitter}, spin_us = {spin_us} }}\n"
    )
}

#[test]
fn the_work_of_a_round_is_split_among_the_threads() {
    // 40 ms of CPU a round on 4 threads and 4 CPUs: 10 ms a round.
    let sim = machine(4);
    let mut e = engine(&sim, &malleable(4, 40.0, 10, 0.0, 0.0), 1);
    let r = finish(&mut e, 10.0);
    let a = app(&r, "bt");
    assert_eq!(a.kind, "malleable");
    assert!(close(a.finished_s.unwrap(), 0.100, 1e-6), "{a:?}");
    assert!(close(a.cpu_s, 0.4, 1e-6), "{a:?}");
    assert_eq!(a.rounds, Some(10));
}

#[test]
fn fewer_threads_take_effect_at_the_next_round_and_zero_pauses() {
    let sim = machine(4);
    let mut e = engine(&sim, &malleable(4, 40.0, 10, 0.0, 0.0), 1);
    e.run_until(secs(0.0));
    let pid = e.pids("bt")[0];
    let s = e.malleable(pid).unwrap();
    assert_eq!((s.max_threads, s.threads, s.rounds_done), (4, 4, 0));
    // 5 ms into the first round: it still runs on 4 threads, then 2.
    e.run_until(secs(0.005));
    assert!(e.set_threads(pid, 2));
    e.run_until(secs(0.030));
    // Round 1 ended at 10 ms, round 2 (20 ms on 2 threads) at 30 ms.
    let s = e.malleable(pid).unwrap();
    assert_eq!((s.threads, s.rounds_done), (2, 2), "{s:?}");
    let sample = e.sample();
    assert_eq!(sample.apps[0].runnable, 2, "{sample:?}");
    // Paused from the next boundary (50 ms) on: no progress, no CPU.
    assert!(e.set_threads(pid, 0));
    e.run_until(secs(0.200));
    let s = e.malleable(pid).unwrap();
    assert!(s.paused && s.rounds_done == 3, "{s:?}");
    assert_eq!(e.sample().apps[0].cpu_rate, 0.0);
    // Resumed on 4 threads: 7 rounds of 10 ms.
    assert!(e.set_threads(pid, 9));
    assert_eq!(e.malleable(pid).unwrap().threads, 4);
    let a = finish(&mut e, 10.0).apps.remove(0);
    assert!(close(a.finished_s.unwrap(), 0.270, 1e-6), "{a:?}");
    assert!(close(a.cpu_s, 0.4, 1e-6), "{a:?}");
    assert!(
        !e.set_threads(pid, 2),
        "a finished instance takes no threads"
    );
    assert!(!e.set_threads(4242, 2));
}

#[test]
fn spinning_costs_time_only_with_more_threads_than_cpus() {
    let run = |threads: u32, spin_us: f64| {
        let sim = machine(2);
        let mut e = engine(&sim, &malleable(threads, 20.0, 50, 0.5, spin_us), 5);
        finish(&mut e, 60.0).apps.remove(0)
    };
    // Two threads on two CPUs: a spinner only burns its own CPU.
    let (quiet, spin) = (run(2, 0.0), run(2, 2000.0));
    assert!(
        close(quiet.finished_s.unwrap(), spin.finished_s.unwrap(), 1e-6),
        "{quiet:?} {spin:?}"
    );
    assert!(spin.cpu_s > quiet.cpu_s + 0.05, "{quiet:?} {spin:?}");
    // Eight threads on two CPUs: spinners take CPU from the threads still
    // computing, and every round lasts longer.
    let (quiet, spin) = (run(8, 0.0), run(8, 2000.0));
    assert!(
        spin.finished_s.unwrap() > quiet.finished_s.unwrap() * 1.1,
        "{quiet:?} {spin:?}"
    );
}
