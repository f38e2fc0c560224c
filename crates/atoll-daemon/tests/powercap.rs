//! `[overlay.NAME] power_cap_watts` on the simulated backend with a fake
//! sysfs (a RAPL zone, cpufreq on island `batch`'s CPUs only): above the
//! budget the daemon limits `batch`'s maximum frequency and caps `web`'s
//! CPU time (no cpufreq there), each a decision naming the measured watts
//! and the budget; the status shows budget, measure and limits; well under
//! the budget the limits are lifted; teardown gives the CPUs back as found.
//! Without RAPL the cap is refused.

mod common;

use atoll_core::clock::ManualClock;
use atoll_core::coord::Property;
use atoll_core::plan::GroupPath;
use atoll_core::spec::{OverlayConfig, PlatformSpec};
use atoll_daemon::controller::{Controller, ReloadError};
use atoll_daemon::frequency::Frequencies;
use atoll_daemon::power::Power;
use atoll_power::cpufreq;
use atoll_power::testutils::{FakeCpuFreq, FakePower};
use atoll_proto::{Reply, Request};
use atoll_sim::SimPlatform;
use common::sim::{
    ask, controller, controller_saving, epochs, n, reply, topo8, web_and_batch, ROOT,
};

const RANGE: u64 = 262_143_328_850;

/// Islands web (1-3) and batch (4-7) with a power cap of `watts`.
fn spec(watts: Option<f64>) -> PlatformSpec {
    let overlays = watts
        .map(|w| OverlayConfig {
            name: n("budget"),
            priority: 0,
            units: Vec::new(),
            property: Property::PlatformPowerCap { watts: w },
            react: Default::default(),
            slo: Default::default(),
            cap_timing: Default::default(),
        })
        .into_iter()
        .collect();
    web_and_batch(&[], overlays)
}

fn why(c: &mut Controller, subject: &str) -> Vec<String> {
    match reply(ask(
        c,
        ROOT,
        Request::Why {
            subject: Some(subject.into()),
            limit: None,
        },
    )) {
        Reply::Decisions { decisions } => decisions
            .iter()
            .map(|d| format!("{} ({})", d.action, d.why))
            .collect(),
        other => panic!("{other:?}"),
    }
}

/// Adds `watts` over one epoch to the fake counter and runs that epoch.
fn epoch_at(
    sim: &SimPlatform,
    c: &mut Controller,
    root: &std::path::Path,
    energy: &mut u64,
    watts: u64,
) {
    let dt = c.epoch_len();
    *energy += watts * u64::try_from(dt.as_micros()).unwrap();
    FakePower::set_energy(root, 0, *energy).unwrap();
    epochs(sim, c, 1);
}

/// A fake sysfs: one RAPL zone, cpufreq on batch's CPUs 4-7, CPU 1 without.
fn rapl_and_batch_cpufreq() -> tempfile::TempDir {
    (4..8)
        .fold(
            FakePower::new().rapl(0, "package-0", 1_000_000, RANGE),
            |p, c| p.cpufreq(FakeCpuFreq::new(c)),
        )
        .cpu_without_cpufreq(1)
        .write_temp()
        .unwrap()
}

/// A controller for `s` reading power and setting frequencies under `root`.
fn powered(sim: &SimPlatform, s: &PlatformSpec, root: &std::path::Path) -> Controller {
    let mut c = controller(sim, s.clone(), topo8());
    c.set_frequencies(Frequencies::new(root, s).unwrap());
    c.set_power(Power::probe(root));
    c
}

/// `api` with one busy thread, `job` with three.
fn busy_api_and_job(sim: &SimPlatform) {
    let api = sim.spawn("api", 0, None);
    sim.set_busy(api, true).unwrap();
    let job = sim.spawn("job", 0, None);
    sim.set_busy(job, true).unwrap();
    for _ in 0..2 {
        sim.spawn_thread(job).unwrap();
    }
}

/// `overlay add shop` over the API: unit `api`, priority 5, a throughput
/// floor.
fn shop_for_api() -> Request {
    Request::OverlayAdd {
        overlay: "shop".into(),
        settings: atoll_proto::runtime::OverlaySettings {
            units: Some(vec!["api".into()]),
            priority: Some(5),
            throughput_floor: Some(10.0),
            ..Default::default()
        },
    }
}

#[test]
fn the_daemon_holds_a_power_budget_through_frequency_and_cpu_caps() {
    let root = rapl_and_batch_cpufreq();
    let before = cpufreq::read_all(root.path()).unwrap();
    let sim = SimPlatform::new(topo8(), "atoll-pcap", ManualClock::new());
    let s = spec(Some(100.0));
    assert_eq!(s.validate(&topo8()), Ok(()));
    let mut c = powered(&sim, &s, root.path());
    c.start().unwrap();
    let mut energy = 1_000_000;
    // The first sample has no figure; the second measures 125 W.
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    let p = c.status().energy.unwrap().power_cap.unwrap();
    assert_eq!(p.measured_watts, None);
    assert!(p
        .islands
        .iter()
        .all(|i| i.max_khz.is_none() && i.cap_cpus.is_none()));
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);

    // batch: 3.6 GHz × 100/125; web (no cpufreq): 3 CPUs × 100/125.
    let f = cpufreq::read_all(root.path()).unwrap();
    assert!(f.iter().all(|f| f.scaling_max_khz == 2_880_000), "{f:?}");
    let web = sim.settings(&GroupPath::island(&n("web"))).unwrap();
    assert_eq!(web.cpu_max.map(|m| m.quota_us), Some(240_000));
    let batch = sim.settings(&GroupPath::island(&n("batch"))).unwrap();
    assert_eq!(batch.cpu_max, None);
    let b = why(&mut c, "batch");
    assert!(
        b.iter().any(|d| d.contains("power cap: max 2880000 kHz")
            && d.contains("125.0 W measured, budget 100.0 W")
            && d.contains("island draws 57 %")),
        "{b:?}"
    );
    let w = why(&mut c, "web");
    assert!(
        w.iter()
            .any(|d| d.contains("CPU cap 2.40 CPUs") && d.contains("budget 100.0 W")),
        "{w:?}"
    );
    let e = c.status().energy.unwrap();
    let p = e.power_cap.clone().unwrap();
    assert_eq!(p.overlay, "budget");
    assert_eq!(p.budget_watts, 100.0);
    assert!((p.measured_watts.unwrap() - 125.0).abs() < 0.01, "{p:?}");
    assert_eq!(
        p.text(),
        "budget: 100.0 W budget, 125.0 W measured; island web cap 2.40 CPUs, island batch max 2880000 kHz"
    );
    assert!(e
        .frequency
        .contains(&"island batch (CPUs 4-7): power cap max 2880000 kHz".to_string()));

    // Within the band: nothing moves.
    epoch_at(&sim, &mut c, root.path(), &mut energy, 95);
    assert!(cpufreq::read_all(root.path())
        .unwrap()
        .iter()
        .all(|f| f.scaling_max_khz == 2_880_000));
    // Well under: relaxed until lifted.
    for _ in 0..10 {
        epoch_at(&sim, &mut c, root.path(), &mut energy, 40);
    }
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
    let web = sim.settings(&GroupPath::island(&n("web"))).unwrap();
    assert_eq!(web.cpu_max, None);
    let p = c.status().energy.unwrap().power_cap.unwrap();
    assert!(p.text().ends_with("no limit in force"), "{}", p.text());

    // Over again, then teardown gives every CPU back as found.
    epoch_at(&sim, &mut c, root.path(), &mut energy, 200);
    assert!(cpufreq::read_all(root.path())
        .unwrap()
        .iter()
        .all(|f| f.scaling_max_khz == 1_800_000));
    c.teardown().unwrap();
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
}

#[test]
fn without_rapl_the_power_cap_is_refused_or_not_held() {
    let vm = FakePower::new()
        .cpu_without_cpufreq(0)
        .write_temp()
        .unwrap();
    let s = spec(Some(100.0));
    let e = atoll_daemon::powercap::check_rapl(&s, vm.path()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("overlay.budget.power_cap_watts: no RAPL zone under "),
        "{e}"
    );
    assert!(atoll_daemon::powercap::check_rapl(&spec(None), vm.path()).is_ok());

    // A running daemon on that machine refuses a reload that adds one.
    let sim = SimPlatform::new(topo8(), "atoll-pcap-vm", ManualClock::new());
    let mut c = controller(&sim, spec(None), topo8());
    c.set_power(Power::probe(vm.path()));
    c.start().unwrap();
    let e = c.reload(spec(Some(100.0))).unwrap_err();
    assert!(matches!(e, ReloadError::PowerCap(_)), "{e}");
    assert!(c.status().energy.unwrap().power_cap.is_none());
    c.teardown().unwrap();

    // The simulated backend (no power monitor): configured, not held.
    let sim = SimPlatform::new(topo8(), "atoll-pcap-sim", ManualClock::new());
    let mut c = controller(&sim, spec(Some(100.0)), topo8());
    c.start().unwrap();
    let p = c.status().energy.unwrap().power_cap.unwrap();
    assert_eq!(
        p.text(),
        "budget: 100.0 W budget, not held: this daemon reads no RAPL (simulated backend)"
    );
    c.teardown().unwrap();
}

fn refused(r: atoll_proto::ResponseEnvelope) -> (atoll_proto::ErrorCode, String) {
    let e = r.err.expect("a refusal");
    (e.code, e.message)
}

fn cap_add(overlay: &str, watts: f64) -> Request {
    Request::OverlayAdd {
        overlay: overlay.into(),
        settings: atoll_proto::runtime::OverlaySettings {
            power_cap_watts: Some(watts),
            ..Default::default()
        },
    }
}

/// The same cap added over the API (`overlay add --power-cap-watts`): held
/// like the configured one, its budget changed by `overlay set` (limits
/// lifted, held again from the new budget), and removed by `overlay rm`
/// (frequency limits given back, the `power` layer's CPU cap gone).
#[test]
fn a_power_cap_added_over_the_api_is_held_changed_and_lifted() {
    let root = rapl_and_batch_cpufreq();
    let before = cpufreq::read_all(root.path()).unwrap();
    let sim = SimPlatform::new(topo8(), "atoll-pcap-api", ManualClock::new());
    let s = spec(None);
    let mut c = powered(&sim, &s, root.path());
    c.start().unwrap();
    let mut energy = 1_000_000;
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    assert!(c.status().energy.unwrap().power_cap.is_none());

    // The config path's validation, over the API.
    for (bad, words) in [
        (-5.0, "is not a number of watts"),
        (f64::INFINITY, "is not a number of watts"),
    ] {
        let (code, msg) = refused(ask(&mut c, ROOT, cap_add("budget", bad)));
        assert_eq!(code, atoll_proto::ErrorCode::BadRequest);
        assert!(
            msg.contains("overlay.budget.power_cap_watts") && msg.contains(words),
            "{msg}"
        );
    }
    let with_unit = Request::OverlayAdd {
        overlay: "budget".into(),
        settings: atoll_proto::runtime::OverlaySettings {
            units: Some(vec!["nope".into()]),
            power_cap_watts: Some(100.0),
            ..Default::default()
        },
    };
    let (_, msg) = refused(ask(&mut c, ROOT, with_unit));
    assert!(msg.contains("names no unit"), "{msg}");
    let two = Request::OverlayAdd {
        overlay: "budget".into(),
        settings: atoll_proto::runtime::OverlaySettings {
            cpu_cap: Some(2.0),
            power_cap_watts: Some(100.0),
            ..Default::default()
        },
    };
    let (_, msg) = refused(ask(&mut c, ROOT, two));
    assert!(
        msg.contains("cpu_cap and power_cap_watts are two properties"),
        "{msg}"
    );
    assert!(c.status().energy.unwrap().power_cap.is_none());

    // Added: the next epoch at 125 W slows batch and caps web.
    reply(ask(&mut c, ROOT, cap_add("budget", 100.0)));
    let (_, msg) = refused(ask(&mut c, ROOT, cap_add("second", 90.0)));
    assert!(msg.contains("sets the platform power cap already"), "{msg}");
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    let f = cpufreq::read_all(root.path()).unwrap();
    assert!(f.iter().all(|f| f.scaling_max_khz == 2_880_000), "{f:?}");
    let web = sim.settings(&GroupPath::island(&n("web"))).unwrap();
    assert_eq!(web.cpu_max.map(|m| m.quota_us), Some(240_000));
    let p = c.status().energy.unwrap().power_cap.unwrap();
    assert_eq!(
        p.text(),
        "budget: 100.0 W budget, 125.0 W measured; island web cap 2.40 CPUs, island batch max 2880000 kHz"
    );

    // A new budget: the limits are lifted and the cap held again from it
    // (125 W is within 10 % of 130 W: nothing is limited).
    let set = Request::OverlaySet {
        overlay: "budget".into(),
        settings: atoll_proto::runtime::OverlaySettings {
            power_cap_watts: Some(130.0),
            ..Default::default()
        },
    };
    reply(ask(&mut c, ROOT, set));
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
    let web = sim.settings(&GroupPath::island(&n("web"))).unwrap();
    assert_eq!(web.cpu_max, None);
    let p = c.status().energy.unwrap().power_cap.unwrap();
    assert_eq!(p.budget_watts, 130.0);

    // Over it again, then removed: everything given back.
    epoch_at(&sim, &mut c, root.path(), &mut energy, 260);
    assert!(cpufreq::read_all(root.path())
        .unwrap()
        .iter()
        .all(|f| f.scaling_max_khz == 1_800_000));
    reply(ask(
        &mut c,
        ROOT,
        Request::OverlayRm {
            overlay: "budget".into(),
        },
    ));
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
    epochs(&sim, &mut c, 1);
    let web = sim.settings(&GroupPath::island(&n("web"))).unwrap();
    assert_eq!(web.cpu_max, None);
    assert!(c.status().energy.unwrap().power_cap.is_none());
    let b = why(&mut c, "batch");
    assert!(
        b.iter().any(|d| d.contains("power cap removed or changed")),
        "{b:?}"
    );
    c.teardown().unwrap();
    assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
}

/// Without RAPL, `overlay add` refuses a power cap with the config path's
/// error and changes nothing.
#[test]
fn without_rapl_the_api_refuses_a_power_cap() {
    let vm = FakePower::new()
        .cpu_without_cpufreq(0)
        .write_temp()
        .unwrap();
    let sim = SimPlatform::new(topo8(), "atoll-pcap-api-vm", ManualClock::new());
    let mut c = controller(&sim, spec(None), topo8());
    c.set_power(Power::probe(vm.path()));
    c.start().unwrap();
    let (code, msg) = refused(ask(&mut c, ROOT, cap_add("budget", 100.0)));
    assert_eq!(code, atoll_proto::ErrorCode::BadRequest);
    assert!(
        msg.starts_with("overlay.budget.power_cap_watts: no RAPL zone under "),
        "{msg}"
    );
    assert!(c.status().energy.unwrap().power_cap.is_none());
    let (_, msg) = refused(ask(
        &mut c,
        ROOT,
        Request::OverlayRm {
            overlay: "budget".into(),
        },
    ));
    assert!(msg.contains("budget"), "{msg}");
    c.teardown().unwrap();
}

/// The cut by island draw and priority: `api` (web, overlay `shop` of
/// priority 5) runs one busy thread, `job` (batch, no overlay) three; over
/// the budget batch, the low tier drawing 3/4 of the power, sheds all of
/// it and web is not slowed; the decision names batch's share.
#[test]
fn the_cut_falls_on_the_low_priority_island_by_its_draw() {
    let root = rapl_and_batch_cpufreq();
    let sim = SimPlatform::new(topo8(), "atoll-pcap-split", ManualClock::new());
    let shop = OverlayConfig {
        name: n("shop"),
        priority: 5,
        units: vec![n("api")],
        property: Property::ThroughputFloor { per_s: 10.0 },
        react: Default::default(),
        slo: Default::default(),
        cap_timing: Default::default(),
    };
    let mut s = web_and_batch(&[("api", "web"), ("job", "batch")], vec![shop]);
    s.overlays.extend(spec(Some(100.0)).overlays);
    assert_eq!(s.validate(&topo8()), Ok(()));
    let mut c = powered(&sim, &s, root.path());
    busy_api_and_job(&sim);
    c.start().unwrap();
    let mut energy = 1_000_000;
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    // batch: 93.75 W of 125 must shed 25 W: 3.6 GHz × (1 − 25/93.75).
    let f = cpufreq::read_all(root.path()).unwrap();
    assert!(f.iter().all(|f| f.scaling_max_khz == 2_640_000), "{f:?}");
    let web = sim.settings(&GroupPath::island(&n("web"))).unwrap();
    assert_eq!(web.cpu_max, None, "web (priority 5) is not slowed");
    let b = why(&mut c, "batch");
    assert!(
        b.iter().any(|d| d.contains("island draws 75 %")
            && d.contains("priority 0: max frequency 2640000 kHz")),
        "{b:?}"
    );
    c.teardown().unwrap();
}

/// An overlay added over the API moves its island up a tier: with `api`'s
/// overlay gone, both islands are in tier 0 and share the cut by draw; with
/// it added again (priority 5), batch takes the cut alone.
#[test]
fn an_overlay_added_over_the_api_changes_the_islands_tiers() {
    let root = rapl_and_batch_cpufreq();
    let sim = SimPlatform::new(topo8(), "atoll-pcap-tiers", ManualClock::new());
    let mut s = web_and_batch(&[("api", "web"), ("job", "batch")], Vec::new());
    s.overlays.extend(spec(Some(100.0)).overlays);
    let mut c = powered(&sim, &s, root.path());
    busy_api_and_job(&sim);
    c.start().unwrap();
    let mut energy = 1_000_000;
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    // One tier: the equal cut, 0.8 each.
    let f = cpufreq::read_all(root.path()).unwrap();
    assert!(f.iter().all(|f| f.scaling_max_khz == 2_880_000), "{f:?}");
    let web = sim.settings(&GroupPath::island(&n("web"))).unwrap();
    assert_eq!(web.cpu_max.map(|m| m.quota_us), Some(240_000));
    let add = shop_for_api();
    reply(ask(&mut c, ROOT, add));
    // Well under: given back (web, now the high tier, first); then over
    // again: batch alone sheds the cut.
    for _ in 0..6 {
        epoch_at(&sim, &mut c, root.path(), &mut energy, 40);
    }
    let web = sim.settings(&GroupPath::island(&n("web"))).unwrap();
    assert_eq!(web.cpu_max, None);
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    let web = sim.settings(&GroupPath::island(&n("web"))).unwrap();
    assert_eq!(web.cpu_max, None, "web is in tier 5 now");
    let f = cpufreq::read_all(root.path()).unwrap();
    assert!(f.iter().all(|f| f.scaling_max_khz == 2_640_000), "{f:?}");
    c.teardown().unwrap();
}

/// A cap set over the API and saved in the state file, at a restart on a
/// machine without RAPL: the daemon starts, the overlay is kept but not
/// enforced (status, warning and a decision say so and why), other
/// overlays can still be added, the cap cannot be changed (the API's
/// refusal), and `overlay rm` removes it.
#[test]
fn a_saved_api_power_cap_without_rapl_at_restart_is_kept_but_not_enforced() {
    let rapl = FakePower::new()
        .rapl(0, "package-0", 1_000_000, RANGE)
        .write_temp()
        .unwrap();
    let vm = FakePower::new()
        .cpu_without_cpufreq(0)
        .write_temp()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sim = SimPlatform::new(topo8(), "atoll-pcap-restart", ManualClock::new());
    let s = web_and_batch(&[("api", "web")], Vec::new());
    let mut c = controller_saving(&sim, s.clone(), topo8(), Some(dir.path().to_path_buf()));
    c.set_power(Power::probe(rapl.path()));
    c.start().unwrap();
    reply(ask(&mut c, ROOT, cap_add("budget", 100.0)));
    assert_eq!(
        c.status().energy.unwrap().power_cap.unwrap().unavailable,
        None
    );
    // The crash (no teardown); the next run finds no RAPL.
    drop(c);

    let mut c = controller_saving(&sim, s, topo8(), Some(dir.path().to_path_buf()));
    c.set_power(Power::probe(vm.path()));
    c.start()
        .expect("a saved run-time cap does not refuse the start");
    let cap = c
        .status()
        .energy
        .unwrap()
        .power_cap
        .expect("the cap is shown");
    assert_eq!((cap.overlay.as_str(), cap.budget_watts), ("budget", 100.0));
    let why_not = cap.unavailable.expect("not enforced");
    assert!(
        why_not.starts_with("no RAPL zone on this machine, so its power cannot be measured"),
        "{why_not}"
    );
    assert!(
        c.status()
            .warnings
            .iter()
            .any(|w| w.starts_with("overlay budget: power cap 100.0 W not enforced")),
        "{:?}",
        c.status().warnings
    );
    let decisions = why(&mut c, "budget");
    assert!(
        decisions
            .iter()
            .any(|d| d.contains("power cap 100.0 W not enforced")
                && d.contains("restored from the state file")),
        "{decisions:#?}"
    );
    // Other overlays are not blocked by the unenforced cap.
    let shop = shop_for_api();
    reply(ask(&mut c, ROOT, shop));
    // A new budget still needs RAPL.
    let set = Request::OverlaySet {
        overlay: "budget".into(),
        settings: atoll_proto::runtime::OverlaySettings {
            power_cap_watts: Some(50.0),
            ..Default::default()
        },
    };
    let (_, msg) = refused(ask(&mut c, ROOT, set));
    assert!(msg.contains("no RAPL zone under"), "{msg}");
    reply(ask(
        &mut c,
        ROOT,
        Request::OverlayRm {
            overlay: "budget".into(),
        },
    ));
    assert!(c.status().energy.unwrap().power_cap.is_none());
}

#[test]
fn a_held_cap_reads_each_islands_cpu_counter_once_per_epoch() {
    let root = FakePower::new()
        .rapl(0, "package-0", 1_000_000, RANGE)
        .write_temp()
        .unwrap();
    let sim = SimPlatform::new(topo8(), "atoll-pcap-reads", ManualClock::new());
    let s = spec(Some(100.0));
    let mut c = controller(&sim, s, topo8());
    c.set_power(Power::probe(root.path()));
    c.start().unwrap();
    let mut energy = 1_000_000;
    epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    let islands = [GroupPath::island(&n("web")), GroupPath::island(&n("batch"))];
    let before: Vec<u64> = islands.iter().map(|g| sim.cpu_usage_reads(g)).collect();
    for _ in 0..3 {
        epoch_at(&sim, &mut c, root.path(), &mut energy, 125);
    }
    let after: Vec<u64> = islands.iter().map(|g| sim.cpu_usage_reads(g)).collect();
    // The island loads' sample is the one read; the cap takes its figures.
    assert_eq!(
        after
            .iter()
            .zip(&before)
            .map(|(a, b)| a - b)
            .collect::<Vec<_>>(),
        [3, 3]
    );
    // And the cap still acts on them: web (no cpufreq here) is capped
    // under its 3 CPUs.
    let web = sim.settings(&islands[0]).unwrap();
    let quota = web.cpu_max.map(|m| m.quota_us);
    assert!(quota.is_some_and(|q| q < 300_000), "{quota:?}");
    c.teardown().unwrap();
}
