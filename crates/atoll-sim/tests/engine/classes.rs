use atoll_core::backend::Actuator;
use atoll_core::plan::{GroupSettings, RtBudget};
use atoll_core::process::TaskControl;

use super::*;

fn hog(name: &str, policy: &str) -> String {
    format!(
        "[[apps]]\nname = \"{name}\"\nunit = \"{name}\"\npolicy = \"{policy}\"\nprogram = {{ kind = \"hog\" }}\n"
    )
}

fn job(name: &str, ms: f64, policy: &str) -> String {
    format!(
        "[[apps]]\nname = \"{name}\"\nunit = \"{name}\"\npolicy = \"{policy}\"\n\
         program = {{ kind = \"barrier\", compute_ms = {ms}, rounds = 1 }}\n"
    )
}

#[test]
fn an_rt_thread_starves_a_fair_one_on_its_cpu() {
    // One CPU: the FIFO hog takes 95% (the kernel's RT throttling), the
    // fair job's 10 ms of CPU take 200 ms.
    let sim = machine(1);
    let mut e = engine(
        &sim,
        &(hog("rt", "fifo:50") + &job("fair", 10.0, "other")),
        1,
    );
    let r = finish(&mut e, 10.0);
    assert!(
        close(app(&r, "fair").finished_s.unwrap(), 0.2, 1e-6),
        "{r:?}"
    );
    assert!(close(app(&r, "rt").cpu_s, 0.95 * r.now_s, 1e-6), "{r:?}");

    // On two CPUs the fair job has a CPU of its own.
    let sim = machine(2);
    let mut e = engine(
        &sim,
        &(hog("rt", "fifo:50") + &job("fair", 10.0, "other")),
        1,
    );
    let r = finish(&mut e, 10.0);
    assert!(
        close(app(&r, "fair").finished_s.unwrap(), 0.01, 1e-6),
        "{r:?}"
    );
}

#[test]
fn a_group_rt_budget_limits_rt_threads() {
    // RT in a group with a 30% budget on one CPU: the fair job gets 70%.
    let mut sim = machine(1);
    let budget = |r| GroupSettings {
        rt_budget: Some(RtBudget {
            runtime_us: r,
            period_us: 1_000_000,
        }),
        ..Default::default()
    };
    ok(&mut sim, "", budget(900_000));
    ok(&mut sim, "rt", budget(300_000));
    let mut e = engine(
        &sim,
        &(hog("rt", "fifo:50") + &job("fair", 7.0, "other")),
        1,
    );
    e.run_until(secs(0.0));
    sim.move_process(e.pids("rt")[0], &g("rt")).unwrap();
    let r = finish(&mut e, 10.0);
    assert!(
        close(app(&r, "fair").finished_s.unwrap(), 0.01, 1e-6),
        "{r:?}"
    );
    assert!(close(app(&r, "rt").cpu_s, 0.003, 1e-6), "{r:?}");
}

#[test]
fn higher_rt_priorities_go_first() {
    let sim = machine(1);
    let text = job("high", 10.0, "fifo:60") + &job("low", 10.0, "fifo:10");
    let mut e = engine(&sim, &text, 1);
    let r = finish(&mut e, 10.0);
    // Each alone gets 95% of the CPU: high first, then low.
    let (h, l) = (app(&r, "high"), app(&r, "low"));
    assert!(close(h.finished_s.unwrap(), 0.01 / 0.95, 1e-6), "{r:?}");
    assert!(close(l.finished_s.unwrap(), 0.02 / 0.95, 1e-6), "{r:?}");
}

#[test]
fn idle_class_threads_get_only_leftovers() {
    // The idle hog weighs 3 against the fair job's 1024.
    let sim = machine(1);
    let mut e = engine(&sim, &(hog("bg", "idle") + &job("fair", 100.0, "other")), 1);
    let r = finish(&mut e, 10.0);
    let t = app(&r, "fair").finished_s.unwrap();
    assert!(close(t, 0.1 * 1027.0 / 1024.0, 1e-6), "{t}");
    // Then it has the CPU to itself.
    let bg = t * 3.0 / 1027.0 + (r.now_s - t);
    assert!(close(app(&r, "bg").cpu_s, bg, 1e-6), "{r:?}");
    // Against a fair hog, the job takes twice as long.
    let sim = machine(1);
    let mut e = engine(
        &sim,
        &(hog("bg", "other") + &job("fair", 100.0, "other")),
        1,
    );
    let r = finish(&mut e, 10.0);
    assert!(
        close(app(&r, "fair").finished_s.unwrap(), 0.2, 1e-6),
        "{r:?}"
    );
}

/// A service thread on a CPU shared with two fair hogs, and a closed-loop
/// client elsewhere: mean latency with the service's slice set to `slice`.
fn latency_with_slice(slice: Option<Duration>) -> f64 {
    let mut sim = machine(2);
    ok(&mut sim, "", GroupSettings::default());
    let on = |c: &str| GroupSettings {
        cpus: Some(cpus(c)),
        ..Default::default()
    };
    ok(&mut sim, "busy", on("0"));
    ok(&mut sim, "cli", on("1"));
    let text = format!(
        "{}[[apps]]\nname = \"svc\"\nunit = \"svc\"\nprogram = {{ kind = \"service\", cpu_us = 50 }}\n\
         [[apps]]\nname = \"cli\"\nunit = \"cli\"\n\
         program = {{ kind = \"client\", target = \"svc\", think_ms = 2, requests = 200 }}\n",
        hog("hog", "other").replace("[[apps]]\nname = \"hog\"", "[[apps]]\nname = \"hog\"\nthreads = 2")
    );
    let mut e = engine(&sim, &text, 1);
    e.run_until(secs(0.0));
    for (a, grp) in [("hog", "busy"), ("svc", "busy"), ("cli", "cli")] {
        sim.move_process(e.pids(a)[0], &g(grp)).unwrap();
    }
    if let Some(s) = slice {
        for tid in e.tids("svc") {
            sim.set_slice(tid, s).unwrap();
        }
    }
    let r = finish(&mut e, 30.0);
    let l = app(&r, "cli").latency.clone().unwrap();
    assert_eq!(l.count, 200);
    l.mean_ms
}

#[test]
fn a_short_slice_cuts_a_woken_servers_latency() {
    let default = latency_with_slice(None);
    let short = latency_with_slice(Some(Duration::from_micros(100)));
    // Default slice on 2 CPUs: 1.5 ms; two hogs queued on CPU 0: the woken
    // server waits about one slice (2 × 1.5 / 2) for each request, then
    // 50 µs of CPU at a third of the CPU, plus two network hops.
    assert!(default > 1.5 && default < 2.0, "{default}");
    // With 100 µs: 0.1 ms.
    assert!(short < 0.5, "{short}");
    assert!(default - short > 1.3, "{default} {short}");
}
