use atoll_core::backend::{Actuator, Monitor};
use atoll_core::plan::{CpuMax, GroupSettings};

use super::*;

fn barrier(threads: u32, compute_ms: f64, rounds: u32, jitter: f64) -> String {
    format!(
        "[[apps]]\nname = \"solver\"\nunit = \"solver\"\nthreads = {threads}\n\
         program = {{ kind = \"barrier\", compute_ms = {compute_ms}, rounds = {rounds}, jitter = {jitter} }}\n"
    )
}

#[test]
fn a_barrier_app_on_an_idle_machine_finishes_on_time() {
    // 4 threads on 4 CPUs: each phase takes its CPU time.
    let sim = machine(4);
    let mut e = engine(&sim, &barrier(4, 10.0, 5, 0.0), 1);
    let r = finish(&mut e, 10.0);
    let a = app(&r, "solver");
    assert!(close(a.finished_s.unwrap(), 0.050, 1e-6), "{a:?}");
    assert!(close(a.cpu_s, 0.2, 1e-6), "{a:?}");
    assert_eq!(a.rounds, Some(5));
    assert!(r.done);

    // 8 threads on 4 CPUs: half a CPU each, phases take twice as long.
    let sim = machine(4);
    let mut e = engine(&sim, &barrier(8, 10.0, 5, 0.0), 1);
    let a = finish(&mut e, 10.0).apps.remove(0);
    assert!(close(a.finished_s.unwrap(), 0.100, 1e-6), "{a:?}");
    assert!(close(a.cpu_s, 0.4, 1e-6), "{a:?}");
}

#[test]
fn jitter_makes_the_slowest_thread_set_the_pace() {
    let sim = machine(4);
    let mut e = engine(&sim, &barrier(4, 10.0, 20, 0.5), 3);
    let a = finish(&mut e, 10.0).apps.remove(0);
    // Each round lasts as long as its longest phase: more than the mean,
    // less than the longest possible.
    let t = a.finished_s.unwrap();
    assert!(t > 0.2 && t < 0.3, "{t}");
    // The CPU used is the sum of the phases: close to the mean.
    assert!(close(a.cpu_s, 0.8, 0.1), "{}", a.cpu_s);
}

#[test]
fn a_cap_slows_a_barrier_app_as_computed() {
    let mut sim = machine(8);
    ok(&mut sim, "", GroupSettings::default());
    let capped = GroupSettings {
        cpu_max: Some(CpuMax {
            quota_us: 200_000,
            period_us: 100_000,
        }),
        ..Default::default()
    };
    ok(&mut sim, "solver", capped);
    let mut e = engine(&sim, &barrier(4, 10.0, 5, 0.0), 1);
    e.run_until(secs(0.0));
    let pids = e.pids("solver");
    assert_eq!(pids.len(), 1);
    sim.move_process(pids[0], &g("solver")).unwrap();
    let a = finish(&mut e, 10.0).apps.remove(0);
    // 2 CPUs for 4 threads: 20 ms per phase.
    assert!(close(a.finished_s.unwrap(), 0.100, 1e-6), "{a:?}");
    let s = sim.stats(&g("solver")).unwrap();
    assert!(s.cpu_usage_us.unwrap().abs_diff(200_000) <= 1, "{s:?}");
    assert_eq!(s.nr_throttled, Some(1), "{s:?}");
}

#[test]
fn a_cpuset_shrink_mid_run_slows_a_barrier_app() {
    // 4 threads, 10 rounds of 10 ms on CPUs 0-3. At 25 ms (round 3 half
    // done) the group shrinks to CPUs 0-1: round 3's last 5 ms take 10 ms,
    // the 7 rounds left 20 ms each: done at 25 + 10 + 140 = 175 ms.
    let mut sim = machine(4);
    ok(&mut sim, "", GroupSettings::default());
    let on = |c: &str| GroupSettings {
        cpus: Some(cpus(c)),
        ..Default::default()
    };
    ok(&mut sim, "solver", on("0-3"));
    let mut e = engine(&sim, &barrier(4, 10.0, 10, 0.0), 1);
    e.run_until(secs(0.0));
    sim.move_process(e.pids("solver")[0], &g("solver")).unwrap();
    e.run_until(secs(0.025));
    assert!(!e.done());
    ok(&mut sim, "solver", on("0-1"));
    let a = finish(&mut e, 10.0).apps.remove(0);
    assert!(close(a.finished_s.unwrap(), 0.175, 1e-6), "{a:?}");
    assert!(close(a.cpu_s, 0.4, 1e-6), "{a:?}");
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let text = format!(
        "{}[[apps]]\nname = \"svc\"\nunit = \"svc\"\nthreads = 2\n\
         program = {{ kind = \"service\", cpu_us = 300, exponential = true }}\n\
         [[apps]]\nname = \"cli\"\nunit = \"cli\"\n\
         program = {{ kind = \"client\", target = \"svc\", rate_per_s = 2000, requests = 300 }}\n",
        barrier(6, 5.0, 10, 0.3)
    );
    let run = |seed| {
        let sim = machine(4);
        let mut e = engine(&sim, &text, seed);
        finish(&mut e, 10.0)
    };
    let (a, b, c) = (run(7), run(7), run(8));
    assert_eq!(a, b);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    assert_ne!(app(&a, "cli").latency, app(&c, "cli").latency);
    assert!(a.done && app(&a, "cli").latency.as_ref().unwrap().count == 300);
}

#[test]
fn samples_show_rates_and_states() {
    let sim = machine(2);
    let mut e = engine(&sim, &barrier(4, 50.0, 2, 0.0), 1);
    e.run_until(secs(0.01));
    let s = e.sample();
    assert!(close(s.t_s, 0.01, 1e-9));
    let a = &s.apps[0];
    assert_eq!((a.runnable, a.blocked), (4, 0));
    assert!(close(a.cpu_rate, 2.0, 1e-9) && close(s.cpu_rate, 2.0, 1e-9));
    assert!(close(a.cpu_s, 0.02, 1e-9), "{a:?}");
    assert!(e.next_event().unwrap() == secs(0.1));
    let units = s.by_unit();
    assert_eq!(units["solver"].runnable, 4);
}
