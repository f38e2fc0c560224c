//! The energy table of docs/apps.md ("Energy"): the seed 002 burst and mix
//! scenarios at 12 and 256 simulated CPUs, unmanaged, managed and
//! power-aware, with completion time, busy CPU time, energy (the simulated
//! power model, `atoll_sim::power`) and mean power.
//!
//! ```sh
//! cargo run --release -p atoll-lab --example energy
//! ```

use std::path::PathBuf;

use atoll_lab::{run, Scenario, Summary};

const SCENARIOS: [(&str, &str); 4] = [
    ("burst", "burst.toml"),
    ("mix M1", "awm.toml"),
    ("burst", "burst-256.toml"),
    ("mix M1", "awm-256.toml"),
];

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    println!(
        "| scenario | CPUs | variant | completion s | busy CPU-s | energy J | mean W | energy vs unmanaged |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (label, file) in SCENARIOS {
        let s = Scenario::load(&dir.join(file)).unwrap_or_else(|e| panic!("{e}"));
        let runs: Vec<(Summary, u32)> = s
            .variant_names()
            .iter()
            .map(|v| {
                let r = run(&s, v, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}"));
                (Summary::of(&r), r.cpus)
            })
            .collect();
        let base = runs
            .iter()
            .find(|(x, _)| x.variant == "unmanaged")
            .map_or(f64::NAN, |(x, _)| x.energy_j);
        for (x, cpus) in &runs {
            let t = x.completion_s.unwrap_or(x.sim_s);
            println!(
                "| {label} | {cpus} | {} | {} | {:.1} | {:.0} | {:.1} | {:+.1} % |",
                x.variant,
                x.completion_s.map_or_else(
                    || format!("not done at {:.1}", x.sim_s),
                    |c| format!("{c:.2}")
                ),
                x.busy_cpu_s,
                x.energy_j,
                x.energy_j / t,
                (x.energy_j / base - 1.0) * 100.0
            );
        }
    }
}
