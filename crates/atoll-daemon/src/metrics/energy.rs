//! RAPL figures: `atoll_power_watts` and `atoll_energy_joules_total`, one
//! sample per zone (label `zone`); absent on a machine without RAPL. The
//! platform power cap: its budget (label `overlay`) and the limits it holds
//! each island to (label `island`), when one is held.

use atoll_proto::energy::{EnergyStatus, PowerCapIsland, ZoneEnergy};

use super::text::{labels, Out};
use super::{COUNTER, GAUGE};

/// Reads one figure of a zone (`None`: not known yet).
pub(super) type ZoneGet = fn(&ZoneEnergy) -> Option<String>;

/// `(name, kind, help, get)` of each family.
pub(super) const ENERGY: &[(&str, &str, &str, ZoneGet)] = &[
    (
        "atoll_power_watts",
        GAUGE,
        "Mean power of the RAPL zone over the last epoch.",
        |z| z.watts.map(|w| format!("{w}")),
    ),
    (
        "atoll_energy_joules_total",
        COUNTER,
        "Energy the RAPL zone used since the daemon started.",
        |z| Some(format!("{}", z.joules_total)),
    ),
];

/// Reads one limit of an island (`None`: none in force).
pub(super) type CapGet = fn(&PowerCapIsland) -> Option<String>;

/// The budget family.
pub(super) const BUDGET: (&str, &str, &str) = (
    "atoll_power_cap_budget_watts",
    GAUGE,
    "The platform power cap's budget (overlay power_cap_watts).",
);

/// `(name, kind, help, get)` of each per-island power-cap family.
pub(super) const CAP_ISLANDS: &[(&str, &str, &str, CapGet)] = &[
    (
        "atoll_power_cap_max_khz",
        GAUGE,
        "The power cap's limit on the island's maximum frequency.",
        |i| i.max_khz.map(|k| k.to_string()),
    ),
    (
        "atoll_power_cap_cpus",
        GAUGE,
        "The power cap's CPU cap on the island (an island without cpufreq).",
        |i| i.cap_cpus.map(|c| format!("{c}")),
    ),
];

/// The learned watts per busy CPU.
pub(super) const PER_CPU: (&str, &str, &str) = (
    "atoll_learned_watts_per_busy_cpu",
    GAUGE,
    "Watts per busy CPU learned from RAPL by CPU time.",
);

/// The watts of each working mode the power term uses.
pub(super) const MODE_WATTS: (&str, &str, &str) = (
    "atoll_mode_watts",
    GAUGE,
    "A working mode's power as the power term uses it (label from: recipe or learned).",
);

/// Renders the zones' families, the learned watts, then the power cap's.
pub(super) fn render(out: &mut Out, e: &EnergyStatus) {
    for (name, kind, help, get) in ENERGY {
        let samples = e
            .zones
            .iter()
            .filter_map(|z| Some((labels(&[("zone", &z.zone)]), get(z)?)))
            .collect();
        out.family(name, kind, help, samples);
    }
    if let Some(l) = &e.learned {
        let (name, kind, help) = PER_CPU;
        let per_cpu = l
            .watts_per_cpu
            .map(|w| (String::new(), format!("{w}")))
            .into_iter()
            .collect();
        out.family(name, kind, help, per_cpu);
        let (name, kind, help) = MODE_WATTS;
        let modes = l
            .modes
            .iter()
            .map(|m| {
                let mode = m.mode.to_string();
                let l = labels(&[
                    ("recipe", &m.recipe),
                    ("mode", &mode),
                    ("from", m.from.as_str()),
                ]);
                (l, format!("{}", m.watts))
            })
            .collect();
        out.family(name, kind, help, modes);
    }
    let Some(p) = e.power_cap.as_ref().filter(|p| p.unavailable.is_none()) else {
        return;
    };
    let (name, kind, help) = BUDGET;
    let budget = vec![(
        labels(&[("overlay", &p.overlay)]),
        format!("{}", p.budget_watts),
    )];
    out.family(name, kind, help, budget);
    for (name, kind, help, get) in CAP_ISLANDS {
        let samples = p
            .islands
            .iter()
            .filter_map(|i| Some((labels(&[("island", &i.island)]), get(i)?)))
            .collect();
        out.family(name, kind, help, samples);
    }
}
