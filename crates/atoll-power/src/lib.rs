//! Energy and frequency from sysfs, under an injected root.
//!
//! - [`rapl`]: the RAPL energy counters of the powercap class
//!   (`class/powercap/intel-rapl:N/{name,energy_uj,max_energy_range_uj}`),
//!   sampled into watts and joules by [`atoll_core::power::Meter`].
//! - [`cpufreq`]: each CPU's `cpufreq/` directory (governor, current,
//!   scaling and hardware frequency range, available governors).
//! - [`actuator`]: writes a [`FreqPolicy`](atoll_core::power::FreqPolicy)
//!   to the CPUs of an island and puts back what it found at teardown.
//!
//! Every function takes the sysfs root (`/sys` on a machine, a temp dir in
//! tests; see [`testutils`] behind the `testutils` feature). A machine
//! without RAPL or cpufreq (most VMs) is not an error: the readers return
//! nothing and [`Availability`] says so in words for `atoll status`.

pub mod actuator;
pub mod cpufreq;
mod error;
mod file;
pub mod rapl;
#[cfg(any(test, feature = "testutils"))]
pub mod testutils;

pub use error::PowerError;

/// What this machine offers, for status lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Availability {
    /// RAPL zones found (top-level powercap `intel-rapl:N` zones).
    pub rapl_zones: Vec<String>,
    /// CPUs with a `cpufreq/` directory.
    pub cpufreq_cpus: usize,
}

impl Availability {
    /// Probes `sysfs_root`. Unreadable or malformed files count as absent
    /// here (the monitor reports them as errors when it reads them).
    pub fn probe(sysfs_root: &std::path::Path) -> Self {
        let rapl_zones = rapl::discover(sysfs_root)
            .map(|z| z.into_iter().map(|z| z.name).collect())
            .unwrap_or_default();
        let cpufreq_cpus = cpufreq::read_all(sysfs_root).map_or(0, |c| c.len());
        Self {
            rapl_zones,
            cpufreq_cpus,
        }
    }

    /// `energy: RAPL package-0, dram` or `energy: no RAPL on this machine`.
    pub fn energy_line(&self) -> String {
        if self.rapl_zones.is_empty() {
            "energy: no RAPL on this machine".to_string()
        } else {
            format!("energy: RAPL {}", self.rapl_zones.join(", "))
        }
    }

    /// `cpufreq: 16 CPUs` or `cpufreq: none`.
    pub fn cpufreq_line(&self) -> String {
        if self.cpufreq_cpus == 0 {
            "cpufreq: none".to_string()
        } else {
            format!("cpufreq: {} CPUs", self.cpufreq_cpus)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The real `/sys`: whatever this machine has, the lines say it, and
    /// agree with what the directory listing shows.
    #[test]
    fn this_machine_is_described_as_it_is() {
        let sys = Path::new("/sys");
        if !sys.join("devices/system/cpu").is_dir() {
            eprintln!("skipped: no /sys/devices/system/cpu here");
            return;
        }
        let a = Availability::probe(sys);
        let has_zone = std::fs::read_dir(sys.join(rapl::POWERCAP_DIR))
            .map(|d| {
                d.filter_map(Result::ok)
                    .any(|e| e.file_name().to_string_lossy().starts_with("intel-rapl:"))
            })
            .unwrap_or(false);
        assert_eq!(!a.rapl_zones.is_empty(), has_zone, "{a:?}");
        if has_zone {
            assert!(a.energy_line().starts_with("energy: RAPL "), "{a:?}");
        } else {
            assert_eq!(a.energy_line(), "energy: no RAPL on this machine");
        }
        let line = a.cpufreq_line();
        eprintln!("{} / {line}", a.energy_line());
        assert_eq!(line == "cpufreq: none", a.cpufreq_cpus == 0);
    }
}
