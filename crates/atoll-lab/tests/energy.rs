//! Energy of the seed 002 scenarios (burst and mix) under the simulated
//! power model: managed and power-aware against unmanaged (docs/apps.md,
//! "Energy").

use std::path::PathBuf;

use atoll_lab::{run, Scenario, Summary};

fn load(name: &str) -> Scenario {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    Scenario::load(&p).unwrap_or_else(|e| panic!("{e}"))
}

fn run_all(s: &Scenario) -> Vec<Summary> {
    s.variant_names()
        .iter()
        .map(|v| Summary::of(&run(s, v, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}"))))
        .inspect(|sm| eprintln!("{}", atoll_lab::summary::render(std::slice::from_ref(sm))))
        .collect()
}

fn get<'a>(v: &'a [Summary], name: &str) -> &'a Summary {
    v.iter().find(|x| x.variant == name).unwrap()
}

/// Mean power until completion, W.
fn watts(s: &Summary) -> f64 {
    s.energy_j / s.completion_s.unwrap_or(s.sim_s)
}

#[test]
fn burst_managed_and_power_aware_use_less_energy_than_unmanaged() {
    let runs = run_all(&load("burst.toml"));
    let u = get(&runs, "unmanaged");
    for v in ["managed", "managed-power", "power-1"] {
        assert!(get(&runs, v).completion_s.is_some(), "{v} did not finish");
    }
    for v in ["managed", "managed-power"] {
        let m = get(&runs, v);
        assert!(
            m.energy_j < u.energy_j,
            "{v} {:.0} J, unmanaged {:.0} J",
            m.energy_j,
            u.energy_j
        );
    }
    // A heavy power weight lowers the power drawn (the term's direction),
    // by leaving CPUs idle: on this platform that costs time, and idle
    // power makes it cost energy (docs/apps.md, "Energy").
    let (m, p) = (get(&runs, "managed"), get(&runs, "power-1"));
    assert!(
        watts(p) < watts(m),
        "{:.1} W vs {:.1} W",
        watts(p),
        watts(m)
    );
    assert!(p.busy_cpu_s < u.busy_cpu_s);
}

#[test]
fn mix_managed_uses_less_energy_than_unmanaged() {
    let runs = run_all(&load("awm.toml"));
    let (u, m) = (get(&runs, "unmanaged"), get(&runs, "managed"));
    assert!(
        m.energy_j < u.energy_j,
        "managed {:.0} J, unmanaged {:.0} J",
        m.energy_j,
        u.energy_j
    );
}
