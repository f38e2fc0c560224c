//! The power monitor: RAPL energy counters sampled every epoch, and what
//! cpufreq offers, for `atoll status` and the metrics
//! (`atoll_power_watts`, `atoll_energy_joules_total`).
//!
//! Set up only on a real machine ([`crate::setup`]); the simulated
//! backend has no counters. A machine without RAPL (a VM) has a monitor
//! that reads nothing, and the status says so.

use std::path::Path;
use std::time::Duration;

use atoll_power::rapl::Monitor;
use atoll_proto::energy::{EnergyStatus, ZoneEnergy};

/// The daemon's power component.
#[derive(Debug)]
pub struct Power {
    rapl: Monitor,
    cpufreq_cpus: u32,
    error: Option<String>,
}

impl Power {
    /// Probes `sysfs_root` (`/sys`). A powercap tree that cannot be read
    /// gives a monitor of no zone, with the error kept for the status.
    pub fn probe(sysfs_root: &Path) -> Self {
        let cpufreq_cpus = atoll_power::cpufreq::read_all(sysfs_root)
            .map_or(0, |c| u32::try_from(c.len()).unwrap_or(u32::MAX));
        match Monitor::new(sysfs_root) {
            Ok(rapl) => Self {
                rapl,
                cpufreq_cpus,
                error: None,
            },
            Err(e) => {
                tracing::warn!("energy: {e}");
                Self {
                    rapl: Monitor::empty(),
                    cpufreq_cpus,
                    error: Some(e.to_string()),
                }
            }
        }
    }

    /// Reads the counters at `now` (monotonic).
    pub fn sample(&mut self, now: Duration) {
        if self.rapl.is_empty() {
            return;
        }
        self.error = self.rapl.sample(now).err().map(|e| e.to_string());
    }

    /// Energy of every zone since the daemon started, J (`None` without
    /// RAPL).
    pub fn joules_total(&self) -> Option<f64> {
        self.has_rapl()
            .then(|| self.rapl.readings().iter().map(|r| r.joules_total).sum())
    }

    /// Whether the machine has a RAPL zone to measure.
    pub fn has_rapl(&self) -> bool {
        !self.rapl.is_empty()
    }

    /// Total power over the last epoch, W, when every zone has a figure.
    pub fn watts(&self) -> Option<f64> {
        self.rapl.total_watts()
    }

    /// The status figures.
    pub fn status(&self) -> EnergyStatus {
        EnergyStatus {
            zones: self
                .rapl
                .readings()
                .into_iter()
                .map(|r| ZoneEnergy {
                    zone: r.zone,
                    watts: r.watts,
                    joules_total: r.joules_total,
                })
                .collect(),
            cpufreq_cpus: self.cpufreq_cpus,
            error: self.error.clone(),
            frequency: Vec::new(),
            power_cap: None,
            learned: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use atoll_power::testutils::{FakeCpuFreq, FakePower};

    use super::*;

    #[test]
    fn a_machine_with_rapl_reports_watts_and_joules() {
        let root = FakePower::new()
            .rapl(0, "package-0", 1_000_000, 262_143_328_850)
            .cpufreq(FakeCpuFreq::new(0))
            .write_temp()
            .unwrap();
        let mut p = Power::probe(root.path());
        p.sample(Duration::from_secs(1));
        assert_eq!(p.status().energy_text(), "RAPL package-0 (measuring)");
        FakePower::set_energy(root.path(), 0, 13_300_000).unwrap();
        p.sample(Duration::from_secs(2));
        let s = p.status();
        assert_eq!(s.energy_text(), "RAPL package-0 12.3 W");
        assert_eq!(s.cpufreq_text(), "1 CPUs");
        assert!((s.zones[0].joules_total - 12.3).abs() < 1e-9);
        assert!((p.watts().unwrap() - 12.3).abs() < 1e-9);
    }

    #[test]
    fn a_vm_says_there_is_nothing_to_read() {
        let root = FakePower::new()
            .cpu_without_cpufreq(0)
            .write_temp()
            .unwrap();
        let mut p = Power::probe(root.path());
        p.sample(Duration::from_secs(1));
        let s = p.status();
        assert_eq!(s.energy_text(), "no RAPL on this machine");
        assert_eq!(s.cpufreq_text(), "none");
        assert_eq!(p.watts(), None);
    }
}
