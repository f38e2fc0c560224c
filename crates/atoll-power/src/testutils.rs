//! A fake sysfs with powercap and cpufreq files, for tests.
//!
//! ```ignore
//! let root = FakePower::new()
//!     .rapl(0, "package-0", 1_000, 262_143_328_850)
//!     .cpufreq(FakeCpuFreq::new(0))
//!     .write_temp()?;
//! ```

use std::fs;
use std::io;
use std::path::Path;

use crate::cpufreq::{self, CPU_DIR};
use crate::rapl::POWERCAP_DIR;

/// One CPU's cpufreq files. Defaults: governor `performance`, offering
/// `performance powersave`, hardware and scaling range 800 MHz to 3.6 GHz,
/// current 3.6 GHz.
#[derive(Clone, Debug)]
pub struct FakeCpuFreq {
    cpu: u32,
    governor: String,
    governors: String,
    hw: (u64, u64),
    scaling: (u64, u64),
    cur: u64,
}

impl FakeCpuFreq {
    /// CPU `cpu` with the defaults.
    pub fn new(cpu: u32) -> Self {
        Self {
            cpu,
            governor: "performance".into(),
            governors: "performance powersave".into(),
            hw: (800_000, 3_600_000),
            scaling: (800_000, 3_600_000),
            cur: 3_600_000,
        }
    }

    /// The current governor.
    pub fn governor(mut self, g: &str) -> Self {
        self.governor = g.into();
        self
    }

    /// The hardware range (and scaling range), kHz.
    pub fn range(mut self, min: u64, max: u64) -> Self {
        self.hw = (min, max);
        self.scaling = (min, max);
        self
    }

    /// The scaling range only, kHz.
    pub fn scaling(mut self, min: u64, max: u64) -> Self {
        self.scaling = (min, max);
        self
    }

    /// `scaling_cur_freq`, kHz.
    pub fn cur(mut self, khz: u64) -> Self {
        self.cur = khz;
        self
    }
}

/// A sysfs tree to write into a temp dir.
#[derive(Clone, Debug, Default)]
pub struct FakePower {
    rapl: Vec<(String, String, u64, u64)>,
    cpus: Vec<FakeCpuFreq>,
    bare_cpus: Vec<u32>,
}

impl FakePower {
    /// An empty tree (no powercap, no CPU).
    pub fn new() -> Self {
        Self::default()
    }

    /// Zone `intel-rapl:<id>` named `name` with `energy_uj` and
    /// `max_energy_range_uj`.
    pub fn rapl(mut self, id: u32, name: &str, energy_uj: u64, max_range_uj: u64) -> Self {
        self.rapl.push((
            format!("intel-rapl:{id}"),
            name.into(),
            energy_uj,
            max_range_uj,
        ));
        self
    }

    /// Sub-zone `intel-rapl:<pkg>:<id>` (not a package zone).
    pub fn rapl_subzone(mut self, pkg: u32, id: u32, name: &str, energy_uj: u64) -> Self {
        self.rapl.push((
            format!("intel-rapl:{pkg}:{id}"),
            name.into(),
            energy_uj,
            u64::MAX,
        ));
        self
    }

    /// A CPU with cpufreq.
    pub fn cpufreq(mut self, c: FakeCpuFreq) -> Self {
        self.cpus.push(c);
        self
    }

    /// A CPU directory without `cpufreq/` (a VM).
    pub fn cpu_without_cpufreq(mut self, cpu: u32) -> Self {
        self.bare_cpus.push(cpu);
        self
    }

    /// Writes the tree under `root`.
    pub fn write(&self, root: &Path) -> io::Result<()> {
        fs::create_dir_all(root.join(CPU_DIR))?;
        if !self.rapl.is_empty() {
            fs::create_dir_all(root.join(POWERCAP_DIR).join("intel-rapl"))?;
        }
        for (dir, name, e, range) in &self.rapl {
            let d = root.join(POWERCAP_DIR).join(dir);
            fs::create_dir_all(&d)?;
            fs::write(d.join("name"), format!("{name}\n"))?;
            fs::write(d.join("energy_uj"), format!("{e}\n"))?;
            fs::write(d.join("max_energy_range_uj"), format!("{range}\n"))?;
        }
        for cpu in &self.bare_cpus {
            fs::create_dir_all(root.join(CPU_DIR).join(format!("cpu{cpu}")))?;
        }
        for c in &self.cpus {
            let d = cpufreq::dir(root, c.cpu);
            fs::create_dir_all(&d)?;
            let files = [
                ("scaling_governor", c.governor.clone()),
                ("scaling_available_governors", c.governors.clone()),
                ("scaling_cur_freq", c.cur.to_string()),
                ("scaling_min_freq", c.scaling.0.to_string()),
                ("scaling_max_freq", c.scaling.1.to_string()),
                ("cpuinfo_min_freq", c.hw.0.to_string()),
                ("cpuinfo_max_freq", c.hw.1.to_string()),
            ];
            for (f, v) in files {
                fs::write(d.join(f), format!("{v}\n"))?;
            }
        }
        Ok(())
    }

    /// Writes the tree into a new temp dir.
    pub fn write_temp(&self) -> io::Result<tempfile::TempDir> {
        let dir = tempfile::tempdir()?;
        self.write(dir.path())?;
        Ok(dir)
    }

    /// Sets zone `intel-rapl:<id>`'s counter in a written tree.
    pub fn set_energy(root: &Path, id: u32, energy_uj: u64) -> io::Result<()> {
        fs::write(
            root.join(POWERCAP_DIR)
                .join(format!("intel-rapl:{id}/energy_uj")),
            format!("{energy_uj}\n"),
        )
    }
}
