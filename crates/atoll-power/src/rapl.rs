//! RAPL energy counters through the powercap class.
//!
//! `class/powercap/intel-rapl:N` is a package zone (`name` is `package-N`;
//! AMD's driver registers under the same name); its sub-zones
//! `intel-rapl:N:M` (core, uncore, dram) are parts of it and are not
//! summed again. Each zone's `energy_uj` counts up and wraps at
//! `max_energy_range_uj`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use atoll_core::power::{Meter, Sample};

use crate::file::{read_required, read_u64};
use crate::PowerError;

/// The powercap class below the sysfs root.
pub const POWERCAP_DIR: &str = "class/powercap";

/// One top-level RAPL zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zone {
    /// Its `name` (`package-0`).
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// `max_energy_range_uj`.
    pub max_range_uj: u64,
}

impl Zone {
    /// Reads `energy_uj`.
    pub fn energy_uj(&self) -> Result<u64, PowerError> {
        read_u64(&self.dir.join("energy_uj"))
    }
}

/// Whether a powercap entry is a top-level RAPL zone (`intel-rapl:0`, not
/// the control type `intel-rapl` nor a sub-zone `intel-rapl:0:1`).
fn is_package_zone(entry: &str) -> bool {
    entry
        .strip_prefix("intel-rapl:")
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}

/// The top-level RAPL zones under `sysfs_root`, by directory name; empty
/// when the machine has no powercap class or no RAPL zone.
pub fn discover(sysfs_root: &Path) -> Result<Vec<Zone>, PowerError> {
    let dir = sysfs_root.join(POWERCAP_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(PowerError::Read { path: dir, source }),
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_package_zone(n))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|entry| {
            let zdir = dir.join(&entry);
            Ok(Zone {
                name: read_required(&zdir.join("name"))?,
                max_range_uj: read_u64(&zdir.join("max_energy_range_uj"))?,
                dir: zdir,
            })
        })
        .collect()
}

/// One zone's latest figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    /// The zone's name.
    pub zone: String,
    /// Mean power over the last interval, W (`None` before two samples).
    pub watts: Option<f64>,
    /// Energy since the monitor started, J.
    pub joules_total: f64,
}

/// Samples every RAPL zone into a [`Meter`].
#[derive(Clone, Debug)]
pub struct Monitor {
    zones: Vec<(Zone, Meter)>,
}

impl Monitor {
    /// A monitor of the zones found under `sysfs_root` (none: a monitor
    /// that reads nothing, see [`Monitor::is_empty`]).
    pub fn new(sysfs_root: &Path) -> Result<Self, PowerError> {
        Ok(Self {
            zones: discover(sysfs_root)?
                .into_iter()
                .map(|z| {
                    let m = Meter::new(z.max_range_uj);
                    (z, m)
                })
                .collect(),
        })
    }

    /// A monitor of no zone.
    pub fn empty() -> Self {
        Self { zones: Vec::new() }
    }

    /// Whether there is no zone to read.
    pub fn is_empty(&self) -> bool {
        self.zones.is_empty()
    }

    /// Reads every zone at time `now` (monotonic). A zone that fails to
    /// read is skipped this time; the first error is returned after all
    /// zones were tried.
    pub fn sample(&mut self, now: Duration) -> Result<(), PowerError> {
        let mut first = None;
        for (z, m) in &mut self.zones {
            match z.energy_uj() {
                Ok(energy_uj) => m.push(Sample { at: now, energy_uj }),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The zones' figures, in zone order.
    pub fn readings(&self) -> Vec<Reading> {
        self.zones
            .iter()
            .map(|(z, m)| Reading {
                zone: z.name.clone(),
                watts: m.watts(),
                joules_total: m.joules_total(),
            })
            .collect()
    }

    /// Total power of all zones, W (`None` unless every zone has a figure).
    pub fn total_watts(&self) -> Option<f64> {
        if self.zones.is_empty() {
            return None;
        }
        self.zones.iter().map(|(_, m)| m.watts()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutils::FakePower;

    #[test]
    fn finds_package_zones_only() {
        assert!(is_package_zone("intel-rapl:0"));
        assert!(is_package_zone("intel-rapl:12"));
        assert!(!is_package_zone("intel-rapl"));
        assert!(!is_package_zone("intel-rapl:0:1"));
        assert!(!is_package_zone("intel-rapl:"));
        let root = FakePower::new()
            .rapl(0, "package-0", 1_000, 262_143_328_850)
            .rapl(1, "package-1", 5_000, 262_143_328_850)
            .rapl_subzone(0, 0, "core", 10)
            .write_temp()
            .unwrap();
        let zones = discover(root.path()).unwrap();
        let names: Vec<_> = zones.iter().map(|z| z.name.as_str()).collect();
        assert_eq!(names, ["package-0", "package-1"]);
        assert_eq!(zones[1].energy_uj().unwrap(), 5_000);
    }

    #[test]
    fn no_powercap_is_no_zone() {
        let root = FakePower::new().write_temp().unwrap();
        assert!(discover(root.path()).unwrap().is_empty());
        let m = Monitor::new(root.path()).unwrap();
        assert!(m.is_empty());
        assert_eq!(m.total_watts(), None);
    }

    #[test]
    fn monitor_measures_power_across_a_wrap() {
        let range = 65_536_000_000;
        let fake = FakePower::new().rapl(0, "package-0", range - 4_000_000, range);
        let root = fake.write_temp().unwrap();
        let mut m = Monitor::new(root.path()).unwrap();
        m.sample(Duration::from_secs(10)).unwrap();
        assert_eq!(m.readings()[0].watts, None);
        // 4 J to the wrap, then 20 J: 24 J in 2 s.
        FakePower::set_energy(root.path(), 0, 20_000_000).unwrap();
        m.sample(Duration::from_secs(12)).unwrap();
        let r = &m.readings()[0];
        assert_eq!(r.zone, "package-0");
        assert!((r.watts.unwrap() - 12.0).abs() < 1e-9, "{r:?}");
        assert!((r.joules_total - 24.0).abs() < 1e-9);
        assert!((m.total_watts().unwrap() - 12.0).abs() < 1e-9);
    }

    #[test]
    fn malformed_counter_names_the_file() {
        let root = FakePower::new()
            .rapl(0, "package-0", 1, 100)
            .write_temp()
            .unwrap();
        let mut m = Monitor::new(root.path()).unwrap();
        std::fs::write(
            root.path().join("class/powercap/intel-rapl:0/energy_uj"),
            "lots\n",
        )
        .unwrap();
        let e = m.sample(Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("intel-rapl:0/energy_uj"), "{e}");
    }
}
