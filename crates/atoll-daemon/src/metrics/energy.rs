//! RAPL figures: `atoll_power_watts` and `atoll_energy_joules_total`, one
//! sample per zone (label `zone`); absent on a machine without RAPL.

use atoll_proto::energy::{EnergyStatus, ZoneEnergy};

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

/// Renders the zones' families.
pub(super) fn render(out: &mut Out, e: &EnergyStatus) {
    for (name, kind, help, get) in ENERGY {
        let samples = e
            .zones
            .iter()
            .filter_map(|z| Some((labels(&[("zone", &z.zone)]), get(z)?)))
            .collect();
        out.family(name, kind, help, samples);
    }
}
