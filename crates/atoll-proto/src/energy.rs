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
    /// The platform power cap (`[overlay.NAME] power_cap_watts`), when one
    /// is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cap: Option<PowerCapStatus>,
    /// The watts the power term uses, when the daemon has learned any
    /// from RAPL (`None`: nothing learned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned: Option<LearnedWatts>,
}

/// Where a working mode's watts come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WattsFrom {
    /// The recipe's `power_watts`.
    Recipe,
    /// Learned from RAPL by CPU time.
    Learned,
}

impl WattsFrom {
    /// `recipe` or `learned`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Recipe => "recipe",
            Self::Learned => "learned",
        }
    }
}

/// One working mode's watts as the power term uses them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModeWatts {
    /// The recipe.
    pub recipe: String,
    /// The mode's id.
    pub mode: u32,
    /// Its power, W.
    pub watts: f64,
    /// Recipe or learned.
    pub from: WattsFrom,
}

/// What the daemon learned of the machine's power from RAPL.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LearnedWatts {
    /// Watts per busy CPU (`None`: not learned yet).
    pub watts_per_cpu: Option<f64>,
    /// The modes of the registered applications' recipes with a figure
    /// (the recipe's or a learned one), and learned modes of recipes no
    /// longer registered; a mode with neither is not listed.
    pub modes: Vec<ModeWatts>,
}

impl LearnedWatts {
    /// `20.0 W per busy CPU` (or `per busy CPU not learned`).
    pub fn per_cpu_text(&self) -> String {
        match self.watts_per_cpu {
            Some(w) => format!("{w:.1} W per busy CPU"),
            None => "per busy CPU not learned".to_string(),
        }
    }

    /// `recipe bodytrack mode 1: 10.0 W (learned)`, a line each.
    pub fn mode_lines(&self) -> Vec<String> {
        self.modes
            .iter()
            .map(|m| {
                format!(
                    "recipe {} mode {}: {:.1} W ({})",
                    m.recipe,
                    m.mode,
                    m.watts,
                    m.from.as_str()
                )
            })
            .collect()
    }
}

/// The platform power cap: budget, measured power, limits in force.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PowerCapStatus {
    /// The overlay that sets it.
    pub overlay: String,
    /// The budget, W.
    pub budget_watts: f64,
    /// Power measured over the last epoch, W (`None` before two samples).
    pub measured_watts: Option<f64>,
    /// Each island's limits.
    pub islands: Vec<PowerCapIsland>,
    /// Why the cap is not held (no RAPL), if it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// The power cap's limits on one island.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PowerCapIsland {
    /// The island.
    pub island: String,
    /// Limit on its maximum frequency, kHz (`None`: none).
    pub max_khz: Option<u64>,
    /// CPU cap on its group, CPUs (`None`: none).
    pub cap_cpus: Option<f64>,
}

impl PowerCapStatus {
    /// `overlay budget: 95.0 W budget, 101.3 W measured; island batch max
    /// 2000000 kHz, island vm cap 1.50 CPUs` (or `not held: why`).
    pub fn text(&self) -> String {
        let head = format!("{}: {:.1} W budget", self.overlay, self.budget_watts);
        if let Some(why) = &self.unavailable {
            return format!("{head}, not held: {why}");
        }
        let measured = match self.measured_watts {
            Some(w) => format!("{w:.1} W measured"),
            None => "measuring".to_string(),
        };
        let limits: Vec<String> = self
            .islands
            .iter()
            .filter_map(|i| match (i.max_khz, i.cap_cpus) {
                (Some(k), _) => Some(format!("island {} max {k} kHz", i.island)),
                (None, Some(c)) => Some(format!("island {} cap {c:.2} CPUs", i.island)),
                (None, None) => None,
            })
            .collect();
        let limits = if limits.is_empty() {
            "no limit in force".to_string()
        } else {
            limits.join(", ")
        };
        format!("{head}, {measured}; {limits}")
    }
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
            power_cap: None,
            learned: None,
        };
        assert_eq!(
            some.energy_text(),
            "RAPL package-0 12.3 W, package-1 (measuring)"
        );
        assert_eq!(some.cpufreq_text(), "16 CPUs");
    }

    #[test]
    fn power_cap_text_names_budget_measure_and_limits() {
        let mut p = PowerCapStatus {
            overlay: "budget".into(),
            budget_watts: 95.0,
            measured_watts: Some(101.26),
            islands: vec![
                PowerCapIsland {
                    island: "batch".into(),
                    max_khz: Some(2_000_000),
                    cap_cpus: None,
                },
                PowerCapIsland {
                    island: "vm".into(),
                    max_khz: None,
                    cap_cpus: Some(1.5),
                },
            ],
            unavailable: None,
        };
        assert_eq!(
            p.text(),
            "budget: 95.0 W budget, 101.3 W measured; island batch max 2000000 kHz, island vm cap 1.50 CPUs"
        );
        p.unavailable = Some("no RAPL".into());
        assert_eq!(p.text(), "budget: 95.0 W budget, not held: no RAPL");
    }
}
