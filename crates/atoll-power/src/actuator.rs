//! Writes island frequency policies and restores what it found.
//!
//! The first time the actuator touches a CPU it keeps that CPU's governor
//! and scaling range; [`Actuator::restore`] writes them back (daemon
//! teardown, or an island's policy removed on reload). CPUs no policy
//! named are never written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use atoll_core::power::{FreqError, FreqPolicy};
use atoll_core::CpuSet;

use crate::cpufreq::{self, CpuFreq};
use crate::file::write;
use crate::PowerError;

/// What a CPU had before the actuator wrote to it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Saved {
    governor: String,
    min_khz: u64,
    max_khz: u64,
}

/// The frequency actuator of one sysfs root.
#[derive(Debug)]
pub struct Actuator {
    root: PathBuf,
    saved: BTreeMap<u32, Saved>,
}

/// The writes of a scaling range, in an order the kernel accepts at every
/// step: a new minimum above the current maximum needs the maximum raised
/// first; otherwise the minimum goes first (a new maximum below the
/// current minimum needs that).
fn range_writes(cur_max: u64, min: Option<u64>, max: Option<u64>) -> Vec<(&'static str, u64)> {
    let lo = min.map(|v| ("scaling_min_freq", v));
    let hi = max.map(|v| ("scaling_max_freq", v));
    match min {
        Some(m) if m > cur_max => hi.into_iter().chain(lo).collect(),
        _ => lo.into_iter().chain(hi).collect(),
    }
}

fn write_range(
    dir: &Path,
    cur_max: u64,
    min: Option<u64>,
    max: Option<u64>,
) -> Result<(), PowerError> {
    for (file, v) in range_writes(cur_max, min, max) {
        write(&dir.join(file), &v.to_string())?;
    }
    Ok(())
}

impl Actuator {
    /// An actuator that has touched nothing yet.
    pub fn new(sysfs_root: &Path) -> Self {
        Self {
            root: sysfs_root.to_path_buf(),
            saved: BTreeMap::new(),
        }
    }

    /// Checks `policy` against every CPU of `cpus` without writing.
    pub fn check(&self, cpus: &CpuSet, policy: &FreqPolicy) -> Result<Vec<CpuFreq>, PowerError> {
        let mut out = Vec::new();
        for cpu in cpus.iter() {
            let dir = cpufreq::dir(&self.root, cpu);
            let Some(f) = cpufreq::read(&self.root, cpu)? else {
                return Err(PowerError::Policy {
                    path: dir,
                    source: FreqError::NoCpufreq { cpu },
                });
            };
            policy
                .validate_for(&f.offer())
                .map_err(|source| PowerError::Policy { path: dir, source })?;
            out.push(f);
        }
        Ok(out)
    }

    /// Writes `policy` to every CPU of `cpus`, after checking it against
    /// all of them (a policy one CPU refuses writes nothing).
    pub fn apply(&mut self, cpus: &CpuSet, policy: &FreqPolicy) -> Result<(), PowerError> {
        let now = self.check(cpus, policy)?;
        for f in now {
            self.saved.entry(f.cpu).or_insert_with(|| Saved {
                governor: f.governor.clone(),
                min_khz: f.scaling_min_khz,
                max_khz: f.scaling_max_khz,
            });
            let dir = cpufreq::dir(&self.root, f.cpu);
            if let Some(g) = &policy.governor {
                write(&dir.join("scaling_governor"), g)?;
            }
            write_range(&dir, f.scaling_max_khz, policy.min_khz, policy.max_khz)?;
        }
        Ok(())
    }

    /// CPUs whose original values are kept.
    pub fn touched(&self) -> Vec<u32> {
        self.saved.keys().copied().collect()
    }

    /// Writes back every touched CPU's governor and range, and forgets
    /// them. Tries every CPU; returns the errors of those that failed.
    pub fn restore(&mut self) -> Vec<PowerError> {
        let mut errors = Vec::new();
        for (cpu, s) in std::mem::take(&mut self.saved) {
            let dir = cpufreq::dir(&self.root, cpu);
            let cur_max = cpufreq::read(&self.root, cpu)
                .ok()
                .flatten()
                .map_or(u64::MAX, |f| f.scaling_max_khz);
            if let Err(e) = write(&dir.join("scaling_governor"), &s.governor) {
                errors.push(e);
            }
            if let Err(e) = write_range(&dir, cur_max, Some(s.min_khz), Some(s.max_khz)) {
                errors.push(e);
            }
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutils::{FakeCpuFreq, FakePower};

    fn policy(g: Option<&str>, min: Option<u64>, max: Option<u64>) -> FreqPolicy {
        FreqPolicy {
            governor: g.map(str::to_string),
            min_khz: min,
            max_khz: max,
        }
    }

    #[test]
    fn writes_then_restores_the_original_values() {
        let root = FakePower::new()
            .cpufreq(FakeCpuFreq::new(0))
            .cpufreq(FakeCpuFreq::new(1))
            .cpufreq(FakeCpuFreq::new(2))
            .write_temp()
            .unwrap();
        let before = cpufreq::read_all(root.path()).unwrap();
        let mut a = Actuator::new(root.path());
        let cpus = CpuSet::parse("0-1").unwrap();
        a.apply(&cpus, &policy(Some("powersave"), None, Some(1_200_000)))
            .unwrap();
        // A second policy on the same CPUs keeps the first originals.
        a.apply(&cpus, &policy(None, Some(1_000_000), None))
            .unwrap();
        let mid = cpufreq::read_all(root.path()).unwrap();
        for f in &mid[..2] {
            assert_eq!(f.governor, "powersave");
            assert_eq!(f.scaling_max_khz, 1_200_000);
            assert_eq!(f.scaling_min_khz, 1_000_000);
        }
        assert_eq!(mid[2], before[2], "cpu2 was not named");
        assert_eq!(a.touched(), [0, 1]);
        assert!(a.restore().is_empty());
        assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
        assert!(a.touched().is_empty());
    }

    #[test]
    fn a_refused_policy_writes_nothing() {
        let root = FakePower::new()
            .cpufreq(FakeCpuFreq::new(0))
            .cpufreq(FakeCpuFreq::new(1).range(800_000, 2_000_000))
            .write_temp()
            .unwrap();
        let before = cpufreq::read_all(root.path()).unwrap();
        let mut a = Actuator::new(root.path());
        let e = a
            .apply(
                &CpuSet::parse("0-1").unwrap(),
                &policy(None, None, Some(3_000_000)),
            )
            .unwrap_err();
        assert!(e.to_string().contains("cpu1 runs at"), "{e}");
        let e = a
            .apply(
                &CpuSet::parse("0").unwrap(),
                &policy(Some("turbo"), None, None),
            )
            .unwrap_err();
        assert!(e.to_string().contains("offers only"), "{e}");
        let e = a
            .apply(
                &CpuSet::parse("5").unwrap(),
                &policy(Some("powersave"), None, None),
            )
            .unwrap_err();
        assert!(e.to_string().contains("no cpufreq"), "{e}");
        assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
        assert!(a.touched().is_empty());
    }

    #[test]
    fn raising_the_minimum_above_the_maximum_writes_max_first() {
        assert_eq!(
            range_writes(1_000_000, Some(2_000_000), Some(3_000_000)),
            [
                ("scaling_max_freq", 3_000_000),
                ("scaling_min_freq", 2_000_000)
            ]
        );
        assert_eq!(
            range_writes(3_000_000, Some(800_000), Some(900_000)),
            [("scaling_min_freq", 800_000), ("scaling_max_freq", 900_000)]
        );
        assert_eq!(
            range_writes(3_000_000, None, Some(900_000)),
            [("scaling_max_freq", 900_000)]
        );
        let root = FakePower::new()
            .cpufreq(FakeCpuFreq::new(0).scaling(800_000, 1_000_000))
            .write_temp()
            .unwrap();
        let mut a = Actuator::new(root.path());
        a.apply(
            &CpuSet::parse("0").unwrap(),
            &policy(None, Some(2_000_000), Some(3_000_000)),
        )
        .unwrap();
        let f = cpufreq::read(root.path(), 0).unwrap().unwrap();
        assert_eq!(
            (f.scaling_min_khz, f.scaling_max_khz),
            (2_000_000, 3_000_000)
        );
        assert!(a.restore().is_empty());
        let f = cpufreq::read(root.path(), 0).unwrap().unwrap();
        assert_eq!((f.scaling_min_khz, f.scaling_max_khz), (800_000, 1_000_000));
    }
}
