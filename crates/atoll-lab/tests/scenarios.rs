//! The repo's scenarios (`scenarios/*.toml`) run on the simulator with the
//! daemon's control loop, and the direction each paper reports is checked
//! (see docs/sim.md for what each one mirrors).

use std::path::PathBuf;

use atoll_lab::{run, Scenario, Summary};

fn load(name: &str) -> Scenario {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    Scenario::load(&p).unwrap_or_else(|e| panic!("{e}"))
}

fn run_all(s: &Scenario) -> Vec<(Summary, atoll_lab::RunResult)> {
    s.variant_names()
        .iter()
        .map(|v| {
            let r = run(s, v, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}"));
            (Summary::of(&r), r)
        })
        .inspect(|(sm, _)| eprintln!("{}", atoll_lab::summary::render(std::slice::from_ref(sm))))
        .collect()
}

fn get<'a>(v: &'a [(Summary, atoll_lab::RunResult)], name: &str) -> &'a Summary {
    &v.iter().find(|x| x.0.variant == name).unwrap().0
}

fn finish(s: &Summary, app: &str) -> f64 {
    s.app(app)
        .and_then(|a| a.finished_s)
        .unwrap_or_else(|| panic!("{}: {app} did not finish", s.variant))
}

/// Mean finish time of the one-job (light) and two-job (heavy) units.
fn pmake(runs: &[(Summary, atoll_lab::RunResult)], v: &str) -> (f64, f64) {
    let s = get(runs, v);
    let mean = |apps: [&str; 4]| apps.iter().map(|a| finish(s, a)).sum::<f64>() / 4.0;
    (
        mean(["u1", "u2", "u3", "u4"]),
        mean(["u5", "u6", "u7", "u8"]),
    )
}

#[test]
fn pmake_isolate_keeps_light_units_at_quota_and_heavy_ones_at_smp() {
    let s = load("pmake.toml");
    let runs = run_all(&s);
    let (ls, hs) = pmake(&runs, "smp");
    let (lq, hq) = pmake(&runs, "quota");
    let (li, hi) = pmake(&runs, "isolate");
    eprintln!("light: smp {ls:.2} quota {lq:.2} isolate {li:.2}; heavy: smp {hs:.2} quota {hq:.2} isolate {hi:.2}");
    assert!(
        li <= lq * 1.05,
        "isolate light {li:.2} s not close to quota {lq:.2} s"
    );
    assert!(
        hi < hq * 0.9,
        "isolate heavy {hi:.2} s not ahead of quota {hq:.2} s"
    );
    assert!(
        hi <= hs * 1.05,
        "isolate heavy {hi:.2} s not close to smp {hs:.2} s"
    );
}

/// The paper's other half: smp slows the one-job units down (the heavy
/// users' extra jobs take CPU from everyone). The scenario's `smp`
/// variant holds every job in one unit, as the paper's SMP kernel (no
/// SPUs, CPU shared per process); with a unit per user, even atoll's
/// `smp` mode shares CPU per unit (equal `cpu.weight`), like `quota`.
#[test]
fn pmake_smp_slows_the_light_units() {
    let s = load("pmake.toml");
    let runs = run_all(&s);
    let (ls, _) = pmake(&runs, "smp");
    let (li, _) = pmake(&runs, "isolate");
    assert!(
        li < ls * 0.95,
        "isolate light {li:.2} s not ahead of smp {ls:.2} s"
    );
}

#[test]
fn cap_coordinated_islands_beat_static_ones_when_overloaded() {
    let s = load("cap.toml");
    let runs = run_all(&s);
    let dur = |v: &str, app: &str| {
        let sm = get(&runs, v);
        let start = s.workload.app(app).unwrap().start_ms / 1000.0;
        finish(sm, app) - start
    };
    for app in ["a1", "b3"] {
        let (st, co) = (dur("static", app), dur("coord", app));
        eprintln!("{app}: static {st:.2} s, coord {co:.2} s");
        assert!(
            co < st * 0.8,
            "{app}: coord {co:.2} s not well ahead of static {st:.2} s"
        );
    }
    let (st, co) = (
        get(&runs, "static").completion_s.unwrap(),
        get(&runs, "coord").completion_s.unwrap(),
    );
    assert!(co < st, "whole run: coord {co:.2} s, static {st:.2} s");
    // The cap holds: the islands together never use more than 4 CPUs
    // (window means; a little slack for the epoch boundary).
    let coord = &runs.iter().find(|x| x.0.variant == "coord").unwrap().1;
    for p in coord.series.iter().skip(1) {
        let used: f64 = p.islands.iter().map(|i| i.used).sum();
        assert!(
            used <= 4.0 * 1.05,
            "t={:.2}: {used:.2} CPUs used over a cap of 4",
            p.t_s
        );
    }
}

#[test]
fn twotier_comm_cuts_latency_and_leaves_the_hogs_their_cpu() {
    let s = load("twotier.toml");
    let runs = run_all(&s);
    let (off, on) = (get(&runs, "off"), get(&runs, "on"));
    let p = |s: &Summary, q: fn(&atoll_lab::summary::AppLine) -> Option<f64>| {
        q(s.app("client").unwrap()).unwrap()
    };
    let (off50, on50) = (p(off, |a| a.p50_ms), p(on, |a| a.p50_ms));
    let (off99, on99) = (p(off, |a| a.p99_ms), p(on, |a| a.p99_ms));
    let (hoff, hon) = (off.app("hog").unwrap().cpu_s, on.app("hog").unwrap().cpu_s);
    eprintln!("client p50 {off50:.3} -> {on50:.3} ms, p99 {off99:.3} -> {on99:.3} ms; hog cpu {hoff:.2} -> {hon:.2} s");
    assert!(
        on50 < off50,
        "p50 not lower with comm: {off50:.3} -> {on50:.3}"
    );
    assert!(
        on99 < off99,
        "p99 not lower with comm: {off99:.3} -> {on99:.3}"
    );
    assert!(
        (hon - hoff).abs() <= 0.02 * hoff,
        "hog CPU moved more than 2 %: {hoff:.2} -> {hon:.2}"
    );
    // The plotted series is each window's p99 (at least its mean), and
    // with [comm] its median window is lower too.
    let windows = |v: &str| -> Vec<f64> {
        let r = &runs.iter().find(|x| x.0.variant == v).unwrap().1;
        let k = r
            .report
            .apps
            .iter()
            .position(|a| a.name == "client")
            .unwrap();
        let mut out: Vec<f64> = r
            .series
            .iter()
            .filter_map(|p| {
                let a = &p.apps[k];
                let (p99, mean) = (a.latency_p99_ms?, a.latency_mean_ms?);
                assert!(p99 >= mean, "t={}: p99 {p99} < mean {mean}", p.t_s);
                Some(p99)
            })
            .collect();
        out.sort_by(f64::total_cmp);
        out
    };
    let (woff, won) = (windows("off"), windows("on"));
    assert!(woff.len() >= 30 && won.len() >= 30, "{woff:?} {won:?}");
    let median = |v: &[f64]| v[v.len() / 2];
    assert!(
        median(&won) < median(&woff),
        "window p99 median: off {:.2}, on {:.2}",
        median(&woff),
        median(&won)
    );
}

/// The working-mode mix (seed 002, §5.3): in the managed variant every
/// instance is registered and follows its assignments (paused until its
/// first one, then the mode's threads), and with fewer threads per CPU the
/// mix burns less CPU spinning at its barriers than unmanaged.
#[test]
fn awm_managed_apps_follow_their_working_modes_and_spin_less() {
    let s = load("awm.toml");
    let runs = run_all(&s);
    let (un, m) = (get(&runs, "unmanaged"), get(&runs, "managed"));
    let rt = runs
        .iter()
        .find(|x| x.0.variant == "managed")
        .and_then(|x| x.1.runtime.clone())
        .unwrap();
    eprintln!("runtime: {rt:?}");
    assert_eq!(rt.registered, 6, "{rt:?}");
    assert_eq!(rt.refused, 0, "{rt:?}");
    // Each instance is paused at registration, then runs a mode's threads
    // (the recipes' thread counts are 1-5).
    for pid in rt
        .changes
        .iter()
        .map(|c| c.1)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let mine: Vec<u32> = rt
            .changes
            .iter()
            .filter(|c| c.1 == pid)
            .map(|c| c.2)
            .collect();
        assert_eq!(mine[0], 0, "pid {pid}: {mine:?}");
        assert!(
            mine.len() >= 2 && mine[1..].iter().all(|&n| (1..=5).contains(&n)),
            "pid {pid}: {mine:?}"
        );
    }
    assert!(un.completion_s.is_some() && m.completion_s.is_some());
    let cpu = |s: &Summary| s.apps.iter().map(|a| a.cpu_s).sum::<f64>();
    eprintln!(
        "completion: unmanaged {:.2} s, managed {:.2} s; CPU {:.2} s vs {:.2} s",
        un.completion_s.unwrap(),
        m.completion_s.unwrap(),
        cpu(un),
        cpu(m)
    );
    assert!(
        cpu(m) < cpu(un),
        "CPU: managed {:.2} s, unmanaged {:.2} s",
        cpu(m),
        cpu(un)
    );
}

/// The paper's direction: managed, the oversubscribed mix completes
/// sooner (by 20-26 %, Table IX). The fluid CPU model alone is
/// work-conserving and does not show it (unmanaged 4.94 s, managed 5.40 s
/// with `cache_penalty = 0`, where this test fails): the paper's gain
/// comes from cache, IPC and migration costs (about 7x fewer
/// instructions, higher IPC, 100x fewer migrations in its Table VI),
/// while the managed run pays real costs of quotas (a unit's quota idles
/// while its threads wait at the barrier or for a CPU). With the cache
/// penalty measured on the real machine (`cache_penalty = 0.44`, from
/// `atoll bench awm --ws-kib 1024`, docs/apps.md) managed is ahead, by
/// less than the paper: 5.82 s vs 5.91 s (1.5 %; 1.5 to 2.8 % over seeds
/// 1-8), hence the 1 % margin. See docs/sim.md. Migrations are not
/// checked: the model has no per-CPU placement to count them.
#[test]
fn awm_managed_mix_completes_sooner_than_unmanaged() {
    let s = load("awm.toml");
    let runs = run_all(&s);
    let (un, m) = (get(&runs, "unmanaged"), get(&runs, "managed"));
    let (cu, cm) = (un.completion_s.unwrap(), m.completion_s.unwrap());
    assert!(
        cm < cu * 0.99,
        "managed {cm:.2} s not ahead of unmanaged {cu:.2} s"
    );
}

/// Per overlay island (x: webserver, y: count), the seconds it held a
/// borrowed CPU and the seconds it ran short (only its own 2 CPUs while
/// its 4 threads wanted more: the overlay's `react_utilization` violated).
fn borrowed_and_short(r: &atoll_lab::RunResult, island: &str) -> (f64, f64) {
    let (mut held, mut short) = (0.0, 0.0);
    for w in r.series.windows(2) {
        let dt = w[1].t_s - w[0].t_s;
        let Some(i) = w[1].islands.iter().find(|i| i.name == island) else {
            panic!("no island {island}");
        };
        if i.cpus > 2.5 {
            held += dt;
        } else if i.used / i.cpus.max(1e-9) > 0.8 {
            short += dt;
        }
    }
    (held, short)
}

#[test]
fn arbitration_priority_serves_the_higher_priority_overlay_where_round_robin_takes_turns() {
    let s = load("arbitration.toml");
    let runs = run_all(&s);
    let run = |v: &str| &runs.iter().find(|x| x.0.variant == v).unwrap().1;
    let (rr, pr) = (run("round_robin"), run("priority"));
    let (web_rr, web_pr) = (borrowed_and_short(rr, "x"), borrowed_and_short(pr, "x"));
    let (cnt_rr, cnt_pr) = (borrowed_and_short(rr, "y"), borrowed_and_short(pr, "y"));
    eprintln!(
        "held / short s: webserver rr {web_rr:.1?} prio {web_pr:.1?}; count rr {cnt_rr:.1?} prio {cnt_pr:.1?}"
    );
    // The higher priority runs short less under priority arbitration, and
    // holds the scarce CPU longer; the lower priority the other way round.
    assert!(
        web_pr.1 < web_rr.1,
        "webserver short: {web_pr:?} vs {web_rr:?}"
    );
    assert!(
        web_pr.0 > web_rr.0,
        "webserver held: {web_pr:?} vs {web_rr:?}"
    );
    assert!(cnt_pr.0 < cnt_rr.0, "count held: {cnt_pr:?} vs {cnt_rr:?}");
    // And it shows in the CPU time the apps got.
    let cpu = |v: &str, app: &str| get(&runs, v).app(app).unwrap().cpu_s;
    assert!(cpu("priority", "web") > cpu("round_robin", "web"));
    assert!(cpu("priority", "count") < cpu("round_robin", "count"));
    // Under round robin both overlays got the CPU at times.
    assert!(web_rr.0 > 0.0 && cnt_rr.0 > 0.0, "{web_rr:?} {cnt_rr:?}");
}
