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

/// [`malleable`] with `cache_penalty = p` (`None`: the key absent).
fn cached(
    threads: u32,
    work_ms: f64,
    rounds: u32,
    jitter: f64,
    spin_us: f64,
    p: Option<f64>,
) -> String {
    let text = malleable(threads, work_ms, rounds, jitter, spin_us);
    match p {
        Some(p) => text.replace(" }\n", &format!(", cache_penalty = {p} }}\n")),
        None => text,
    }
}

#[test]
fn a_zero_cache_penalty_changes_nothing() {
    let run = |p: Option<f64>| {
        let sim = machine(2);
        let mut e = engine(&sim, &cached(8, 20.0, 50, 0.5, 2000.0, p), 5);
        finish(&mut e, 60.0).apps.remove(0)
    };
    let (absent, zero, some) = (run(None), run(Some(0.0)), run(Some(0.3)));
    assert_eq!(absent, zero);
    // The same run with a penalty does differ (8 threads on 2 CPUs).
    assert!(
        some.finished_s.unwrap() > absent.finished_s.unwrap() * 1.05,
        "{absent:?} {some:?}"
    );
}

#[test]
fn a_cache_penalty_costs_nothing_with_a_cpu_per_thread() {
    // As `the_work_of_a_round_is_split_among_the_threads`: k = 1.
    let sim = machine(4);
    let mut e = engine(&sim, &cached(4, 40.0, 10, 0.0, 0.0, Some(0.5)), 1);
    let a = finish(&mut e, 10.0).apps.remove(0);
    assert!(close(a.finished_s.unwrap(), 0.100, 1e-6), "{a:?}");
    assert!(close(a.cpu_s, 0.4, 1e-6), "{a:?}");
}

#[test]
fn a_cache_penalty_slows_threads_sharing_a_cpu_not_their_cpu_time() {
    // 4 threads on 1 CPU, 10 ms of work each, p = 0.5: with k threads per
    // CPU each makes 1 - 0.5 * (1 - 1/k) of its CPU share in work.
    // Thread 1 wakes at once; threads 2-4 find the CPU busy and wait half
    // a base slice (0.75 ms on 1 CPU): 0.375 ms.
    // - 0 to 0.375 ms: thread 1 alone (k = 1): 0.375 ms of work.
    // - then k = 4: 0.25 CPU * 0.625 = 0.15625 ms of work a ms; thread 1
    //   ends after 9.625 / 0.15625 = 61.6 ms, at 61.975 ms, the others
    //   with 0.375 ms left;
    // - then k = 3: (1/3) * (2/3) = 2/9 ms of work a ms: 1.6875 ms more.
    // Done at 63.6625 ms, the CPU busy all along (about 40 ms without).
    let run = |p| {
        let sim = machine(1);
        let mut e = engine(&sim, &cached(4, 40.0, 1, 0.0, 0.0, Some(p)), 1);
        finish(&mut e, 10.0).apps.remove(0)
    };
    let (cold, warm) = (run(0.5), run(0.0));
    assert!(close(cold.finished_s.unwrap(), 0.0636625, 1e-9), "{cold:?}");
    assert!(close(cold.cpu_s, 0.0636625, 1e-9), "{cold:?}");
    assert!(close(warm.finished_s.unwrap(), 0.040, 1e-9), "{warm:?}");
    assert!(close(warm.cpu_s, 0.040, 1e-9), "{warm:?}");
}

#[test]
fn the_cache_penalty_follows_the_threads_per_cpu() {
    // One penalised thread (10 ms of work, p = 0.5) and a hog of 5 ms on
    // 1 CPU. Until the hog ends (10 ms) k = 2: the thread makes
    // 0.5 * 0.75 = 0.375 ms of work a ms, 3.75 ms; then alone at full
    // speed, 6.25 ms more: done at 16.25 ms, with 11.25 ms of CPU.
    let sim = machine(1);
    let text = cached(1, 10.0, 1, 0.0, 0.0, Some(0.5))
        + "[[apps]]\nname = \"hog\"\nunit = \"hog\"\nprogram = { kind = \"hog\", cpu_ms = 5 }\n";
    let mut e = engine(&sim, &text, 1);
    let r = finish(&mut e, 10.0);
    let a = app(&r, "bt");
    assert!(close(a.finished_s.unwrap(), 0.01625, 1e-6), "{a:?}");
    assert!(close(a.cpu_s, 0.01125, 1e-6), "{a:?}");
    assert!(close(app(&r, "hog").finished_s.unwrap(), 0.010, 1e-6));
}
