//! Writes island frequency policies and power-cap limits, and restores
//! what it found.
//!
//! The first time the actuator touches a CPU it keeps that CPU's governor
//! and scaling range ([`FreqOriginal`]); [`Actuator::restore`] writes them
//! back (daemon teardown, or an island's policy removed on reload). The
//! originals can be handed over ([`Actuator::originals`]) for the state
//! file and taken back by a restarted daemon ([`Actuator::adopt`]), so
//! that a crash does not turn what atoll wrote into what it found.
//!
//! Each CPU has a *base* range (the original one, with what the island's
//! policy asked laid over it) and an optional *limit* on its maximum (the
//! platform power cap's, [`Actuator::limit_max`]); the range written is
//! the base cut at the limit. CPUs no policy or limit named are never
//! written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use atoll_core::power::{FreqError, FreqOriginal, FreqPolicy};
use atoll_core::CpuSet;

use crate::cpufreq::{self, CpuFreq};
use crate::file::write;
use crate::PowerError;

/// The frequency actuator of one sysfs root.
#[derive(Debug)]
pub struct Actuator {
    root: PathBuf,
    saved: BTreeMap<u32, FreqOriginal>,
    /// Per CPU: the range the policy asks (the original where it asks
    /// nothing), `(min, max)` kHz.
    base: BTreeMap<u32, (u64, u64)>,
    /// Per CPU: the power cap's limit on the maximum, kHz.
    limit: BTreeMap<u32, u64>,
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

fn original(f: &CpuFreq) -> FreqOriginal {
    FreqOriginal {
        cpu: f.cpu,
        governor: f.governor.clone(),
        min_khz: f.scaling_min_khz,
        max_khz: f.scaling_max_khz,
    }
}

impl Actuator {
    /// An actuator that has touched nothing yet.
    pub fn new(sysfs_root: &Path) -> Self {
        Self {
            root: sysfs_root.to_path_buf(),
            saved: BTreeMap::new(),
            base: BTreeMap::new(),
            limit: BTreeMap::new(),
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

    /// Keeps `f`'s values as the originals the first time, and returns
    /// the CPU's base range.
    fn touch(&mut self, f: &CpuFreq) -> &mut (u64, u64) {
        let o = self.saved.entry(f.cpu).or_insert_with(|| original(f));
        let first = (o.min_khz, o.max_khz);
        self.base.entry(f.cpu).or_insert(first)
    }

    /// Writes the CPU's base range cut at its limit.
    fn write_effective(&self, f: &CpuFreq) -> Result<(), PowerError> {
        let (bmin, bmax) = self
            .base
            .get(&f.cpu)
            .copied()
            .unwrap_or((f.scaling_min_khz, f.scaling_max_khz));
        let max = self.limit.get(&f.cpu).map_or(bmax, |l| bmax.min(*l));
        let min = bmin.min(max);
        let dir = cpufreq::dir(&self.root, f.cpu);
        write_range(&dir, f.scaling_max_khz, Some(min), Some(max))
    }

    /// Writes `policy` to every CPU of `cpus`, after checking it against
    /// all of them (a policy one CPU refuses writes nothing). A power-cap
    /// limit in force still cuts the maximum.
    pub fn apply(&mut self, cpus: &CpuSet, policy: &FreqPolicy) -> Result<(), PowerError> {
        let now = self.check(cpus, policy)?;
        for f in now {
            let base = self.touch(&f);
            if let Some(v) = policy.min_khz {
                base.0 = v;
            }
            if let Some(v) = policy.max_khz {
                base.1 = v;
            }
            if let Some(g) = &policy.governor {
                write(&cpufreq::dir(&self.root, f.cpu).join("scaling_governor"), g)?;
            }
            self.write_effective(&f)?;
        }
        Ok(())
    }

    /// Sets (`Some`) or lifts (`None`) the limit on the maximum frequency
    /// of every CPU of `cpus`, checked against each CPU's hardware range
    /// first; the minimum follows the maximum down where it would cross
    /// it, and comes back with it.
    pub fn limit_max(&mut self, cpus: &CpuSet, limit: Option<u64>) -> Result<(), PowerError> {
        let check = FreqPolicy {
            max_khz: limit,
            ..FreqPolicy::default()
        };
        let now = self.check(cpus, &check)?;
        for f in now {
            if limit.is_none() && !self.limit.contains_key(&f.cpu) {
                continue;
            }
            self.touch(&f);
            match limit {
                Some(l) => self.limit.insert(f.cpu, l),
                None => self.limit.remove(&f.cpu),
            };
            self.write_effective(&f)?;
        }
        Ok(())
    }

    /// CPUs whose original values are kept.
    pub fn touched(&self) -> Vec<u32> {
        self.saved.keys().copied().collect()
    }

    /// The original values of every touched CPU, for the state file.
    pub fn originals(&self) -> Vec<FreqOriginal> {
        self.saved.values().cloned().collect()
    }

    /// Takes `originals` (from the state file of a run that did not tear
    /// down) as what the CPUs had before atoll: teardown writes them back
    /// whatever this run finds and writes. Call before anything is
    /// written.
    pub fn adopt(&mut self, originals: Vec<FreqOriginal>) {
        for o in originals {
            self.base.insert(o.cpu, (o.min_khz, o.max_khz));
            self.saved.insert(o.cpu, o);
        }
    }

    /// Writes back every touched CPU's governor and range, and forgets
    /// them (and the limits). Tries every CPU; returns the errors of those
    /// that failed.
    pub fn restore(&mut self) -> Vec<PowerError> {
        let mut errors = Vec::new();
        self.base.clear();
        self.limit.clear();
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

    #[test]
    fn a_limit_cuts_the_policy_and_lifting_it_brings_the_policy_back() {
        let root = FakePower::new()
            .cpufreq(FakeCpuFreq::new(0).scaling(1_000_000, 3_600_000))
            .cpufreq(FakeCpuFreq::new(1))
            .write_temp()
            .unwrap();
        let before = cpufreq::read_all(root.path()).unwrap();
        let mut a = Actuator::new(root.path());
        let cpu0 = CpuSet::parse("0").unwrap();
        a.apply(&cpu0, &policy(None, None, Some(3_000_000)))
            .unwrap();
        // Below the minimum: the minimum follows it down.
        a.limit_max(&cpu0, Some(900_000)).unwrap();
        let f = cpufreq::read(root.path(), 0).unwrap().unwrap();
        assert_eq!((f.scaling_min_khz, f.scaling_max_khz), (900_000, 900_000));
        // A new policy maximum stays cut at the limit.
        a.apply(&cpu0, &policy(None, None, Some(2_000_000)))
            .unwrap();
        let f = cpufreq::read(root.path(), 0).unwrap().unwrap();
        assert_eq!(f.scaling_max_khz, 900_000);
        // Lifted: the policy's maximum and the original minimum.
        a.limit_max(&cpu0, None).unwrap();
        let f = cpufreq::read(root.path(), 0).unwrap().unwrap();
        assert_eq!(
            (f.scaling_min_khz, f.scaling_max_khz),
            (1_000_000, 2_000_000)
        );
        // Lifting a limit never set writes nothing; one out of range is refused.
        a.limit_max(&CpuSet::parse("1").unwrap(), None).unwrap();
        assert_eq!(a.touched(), [0]);
        assert!(a.limit_max(&cpu0, Some(100)).is_err());
        assert!(a.restore().is_empty());
        assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
    }

    #[test]
    fn adopted_originals_are_what_teardown_gives_back() {
        let root = FakePower::new()
            .cpufreq(FakeCpuFreq::new(0))
            .write_temp()
            .unwrap();
        let before = cpufreq::read_all(root.path()).unwrap();
        let cpu0 = CpuSet::parse("0").unwrap();
        let mut first = Actuator::new(root.path());
        first
            .apply(&cpu0, &policy(Some("powersave"), None, Some(1_200_000)))
            .unwrap();
        first.limit_max(&cpu0, Some(1_000_000)).unwrap();
        let kept = first.originals();
        assert_eq!(kept[0].governor, "performance");
        // A crash: the first actuator never restores.
        drop(first);
        let mut second = Actuator::new(root.path());
        second.adopt(kept);
        second
            .apply(&cpu0, &policy(Some("powersave"), None, Some(1_500_000)))
            .unwrap();
        assert_eq!(
            cpufreq::read(root.path(), 0)
                .unwrap()
                .unwrap()
                .scaling_max_khz,
            1_500_000
        );
        assert!(second.restore().is_empty());
        assert_eq!(cpufreq::read_all(root.path()).unwrap(), before);
    }
}
