//! Energy and frequency in the `status` reply.

use serde::{Deserialize, Serialize};

/// What the daemon measures of the machine's power.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EnergyStatus {
    /// RAPL zones (`package-0`, ...); empty when the machine has none.
    pub zones: Vec<ZoneEnergy>,
    /// CPUs with cpufreq (0: none, as in most VMs).
    pub cpufreq_cpus: u32,
    /// The last read that failed, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The islands' frequency policies the daemon wrote, a line each
    /// (`island batch (CPUs 4-7): governor powersave, max 1200000 kHz`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frequency: Vec<String>,
}

/// One RAPL zone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ZoneEnergy {
    /// The zone's name (`package-0`).
    pub zone: String,
    /// Mean power over the last epoch, W (`None` before two samples).
    pub watts: Option<f64>,
    /// Energy since the daemon started, J.
    pub joules_total: f64,
}

impl EnergyStatus {
    /// `RAPL package-0 12.3 W, package-1 9.8 W` or `no RAPL on this
    /// machine`.
    pub fn energy_text(&self) -> String {
        if self.zones.is_empty() {
            return "no RAPL on this machine".to_string();
        }
        let zones: Vec<String> = self
            .zones
            .iter()
            .map(|z| match z.watts {
                Some(w) => format!("{} {w:.1} W", z.zone),
                None => format!("{} (measuring)", z.zone),
            })
            .collect();
        format!("RAPL {}", zones.join(", "))
    }

    /// `16 CPUs` or `none`.
    pub fn cpufreq_text(&self) -> String {
        if self.cpufreq_cpus == 0 {
            "none".to_string()
        } else {
            format!("{} CPUs", self.cpufreq_cpus)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_say_what_is_there() {
        let none = EnergyStatus::default();
        assert_eq!(none.energy_text(), "no RAPL on this machine");
        assert_eq!(none.cpufreq_text(), "none");
        let some = EnergyStatus {
            zones: vec![
                ZoneEnergy {
                    zone: "package-0".into(),
                    watts: Some(12.34),
                    joules_total: 100.0,
                },
                ZoneEnergy {
                    zone: "package-1".into(),
                    watts: None,
                    joules_total: 0.0,
                },
            ],
            cpufreq_cpus: 16,
            error: None,
            frequency: Vec::new(),
        };
        assert_eq!(
            some.energy_text(),
            "RAPL package-0 12.3 W, package-1 (measuring)"
        );
        assert_eq!(some.cpufreq_text(), "16 CPUs");
    }
}
