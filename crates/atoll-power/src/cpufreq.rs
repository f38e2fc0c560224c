//! Each CPU's cpufreq state (`devices/system/cpu/cpuN/cpufreq/`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use atoll_core::power::FreqOffer;

use crate::file::{parse_u64, read_optional, read_required, read_u64};
use crate::PowerError;

/// The CPU directory below the sysfs root.
pub const CPU_DIR: &str = "devices/system/cpu";

/// One CPU's cpufreq files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuFreq {
    /// The CPU.
    pub cpu: u32,
    /// `scaling_governor`.
    pub governor: String,
    /// `scaling_cur_freq`, kHz (absent on some drivers).
    pub cur_khz: Option<u64>,
    /// `scaling_min_freq`, kHz.
    pub scaling_min_khz: u64,
    /// `scaling_max_freq`, kHz.
    pub scaling_max_khz: u64,
    /// `cpuinfo_min_freq`, kHz.
    pub hw_min_khz: u64,
    /// `cpuinfo_max_freq`, kHz.
    pub hw_max_khz: u64,
    /// `scaling_available_governors`.
    pub governors: Vec<String>,
}

impl CpuFreq {
    /// What the CPU offers, for checking a policy.
    pub fn offer(&self) -> FreqOffer {
        FreqOffer {
            cpu: self.cpu,
            min_khz: self.hw_min_khz,
            max_khz: self.hw_max_khz,
            governors: self.governors.clone(),
        }
    }
}

/// The cpufreq directory of `cpu`.
pub fn dir(sysfs_root: &Path, cpu: u32) -> PathBuf {
    sysfs_root.join(CPU_DIR).join(format!("cpu{cpu}/cpufreq"))
}

/// Reads one CPU; `None` when it has no `cpufreq/` directory.
pub fn read(sysfs_root: &Path, cpu: u32) -> Result<Option<CpuFreq>, PowerError> {
    let d = dir(sysfs_root, cpu);
    if !d.is_dir() {
        return Ok(None);
    }
    let cur_path = d.join("scaling_cur_freq");
    let cur_khz = match read_optional(&cur_path)? {
        Some(t) => Some(parse_u64(&cur_path, &t)?),
        None => None,
    };
    Ok(Some(CpuFreq {
        cpu,
        governor: read_required(&d.join("scaling_governor"))?,
        cur_khz,
        scaling_min_khz: read_u64(&d.join("scaling_min_freq"))?,
        scaling_max_khz: read_u64(&d.join("scaling_max_freq"))?,
        hw_min_khz: read_u64(&d.join("cpuinfo_min_freq"))?,
        hw_max_khz: read_u64(&d.join("cpuinfo_max_freq"))?,
        governors: read_optional(&d.join("scaling_available_governors"))?
            .map(|t| t.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    }))
}

/// Every CPU that has cpufreq, by CPU number; empty when none has.
pub fn read_all(sysfs_root: &Path) -> Result<Vec<CpuFreq>, PowerError> {
    let cpu_dir = sysfs_root.join(CPU_DIR);
    let entries = match fs::read_dir(&cpu_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(PowerError::Read {
                path: cpu_dir,
                source,
            })
        }
    };
    let mut cpus: Vec<u32> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| n.strip_prefix("cpu").and_then(|r| r.parse().ok()))
        .collect();
    cpus.sort_unstable();
    let mut out = Vec::new();
    for cpu in cpus {
        if let Some(f) = read(sysfs_root, cpu)? {
            out.push(f);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutils::{FakeCpuFreq, FakePower};

    #[test]
    fn reads_every_cpu_with_cpufreq() {
        let root = FakePower::new()
            .cpufreq(FakeCpuFreq::new(0).cur(2_400_000))
            .cpufreq(FakeCpuFreq::new(2).governor("powersave"))
            .cpu_without_cpufreq(1)
            .write_temp()
            .unwrap();
        let all = read_all(root.path()).unwrap();
        assert_eq!(all.iter().map(|c| c.cpu).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(all[0].cur_khz, Some(2_400_000));
        assert_eq!(all[1].governor, "powersave");
        assert_eq!(all[1].governors, ["performance", "powersave"]);
        assert_eq!(all[0].offer().max_khz, all[0].hw_max_khz);
        assert_eq!(read(root.path(), 1).unwrap(), None);
    }

    #[test]
    fn this_vm_shape_has_none() {
        let root = FakePower::new()
            .cpu_without_cpufreq(0)
            .cpu_without_cpufreq(1)
            .write_temp()
            .unwrap();
        assert!(read_all(root.path()).unwrap().is_empty());
        let a = crate::Availability::probe(root.path());
        assert_eq!(a.cpufreq_line(), "cpufreq: none");
        assert_eq!(a.energy_line(), "energy: no RAPL on this machine");
    }

    #[test]
    fn malformed_frequency_names_the_file() {
        let root = FakePower::new()
            .cpufreq(FakeCpuFreq::new(0))
            .write_temp()
            .unwrap();
        fs::write(dir(root.path(), 0).join("scaling_max_freq"), "fast\n").unwrap();
        let e = read_all(root.path()).unwrap_err();
        assert!(
            e.to_string().contains("cpu0/cpufreq/scaling_max_freq"),
            "{e}"
        );
    }
}
