//! `Frequencies`: the islands' CPU frequency policies
//! (`[island.NAME.frequency]`, issue 17). It owns the frequency actuator
//! of one sysfs root: every policy is checked against every CPU of its
//! island before anything is written (a policy the machine cannot follow,
//! or any policy on a machine without cpufreq, refuses the start or the
//! reload); at start each island's policy is written, at teardown every
//! CPU it touched gets its original governor and range back. Every write
//! is a [`Decision`] (`atoll why ISLAND`). CPUs of islands without a
//! policy are never written.
//!
//! The platform power cap ([`crate::powercap`]) limits an island's
//! maximum frequency through [`Frequencies::limit`]: the limit cuts the
//! island's policy (or the CPUs' own range) and outlives a reload. The
//! originals of every CPU written go in the state file
//! ([`Frequencies::originals`]); a daemon restarted after a crash takes
//! them back ([`Frequencies::adopt`]) so that teardown restores what the
//! machine had before atoll, not what the crashed run wrote.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use atoll_core::decision::{Action, Decision, Reason};
use atoll_core::power::{FreqOriginal, FreqPolicy};
use atoll_core::spec::PlatformSpec;
use atoll_core::{CpuSet, Name};
use atoll_power::actuator::Actuator;
use atoll_power::PowerError;

use crate::decisions::DecisionLog;

/// A frequency policy the machine refuses.
#[derive(Debug, thiserror::Error)]
pub enum FrequencyError {
    /// The island's CPUs cannot follow its policy (or have no cpufreq).
    #[error("island.{island}.frequency: {source} (remove the policy, or change it to what the CPUs offer)")]
    Refused {
        /// The island.
        island: Name,
        /// The CPU's file and what is wrong.
        #[source]
        source: PowerError,
    },
}

/// One island's policy, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
struct IslandPolicy {
    island: Name,
    cpus: CpuSet,
    policy: FreqPolicy,
}

/// The islands' frequency policies and the actuator that writes them.
#[derive(Debug)]
pub struct Frequencies {
    root: std::path::PathBuf,
    actuator: Actuator,
    policies: Vec<IslandPolicy>,
    /// Every island's CPUs (a power-cap limit may name any of them).
    islands: BTreeMap<Name, CpuSet>,
    /// The power cap's limit on each island's maximum, kHz.
    limits: BTreeMap<Name, u64>,
}

fn island_cpus(spec: &PlatformSpec) -> BTreeMap<Name, CpuSet> {
    spec.islands
        .iter()
        .map(|i| (i.name.clone(), i.cpus.clone()))
        .collect()
}

impl Frequencies {
    /// The policies of `spec` on the cpufreq files under `sysfs_root`,
    /// checked against the CPUs without writing.
    pub fn new(sysfs_root: &Path, spec: &PlatformSpec) -> Result<Self, FrequencyError> {
        let actuator = Actuator::new(sysfs_root);
        let policies = checked(&actuator, spec)?;
        Ok(Self {
            root: sysfs_root.to_path_buf(),
            actuator,
            policies,
            islands: island_cpus(spec),
            limits: BTreeMap::new(),
        })
    }

    /// Takes the originals a previous run kept (its state file) as what
    /// the CPUs had before atoll. Call before [`start`](Self::start).
    pub fn adopt(&mut self, originals: Vec<FreqOriginal>) {
        self.actuator.adopt(originals);
    }

    /// The original values of every CPU written, for the state file.
    pub fn originals(&self) -> Vec<FreqOriginal> {
        self.actuator.originals()
    }

    /// Each island's hardware frequency range, when every CPU of it has
    /// cpufreq: the highest `cpuinfo_min_freq` and the lowest
    /// `cpuinfo_max_freq` of its CPUs (a limit in between suits them all).
    pub fn ranges(&self) -> BTreeMap<Name, (u64, u64)> {
        let mut out = BTreeMap::new();
        'island: for (name, cpus) in &self.islands {
            let mut range: Option<(u64, u64)> = None;
            for cpu in cpus.iter() {
                let Ok(Some(f)) = atoll_power::cpufreq::read(&self.root, cpu) else {
                    continue 'island;
                };
                range = Some(match range {
                    None => (f.hw_min_khz, f.hw_max_khz),
                    Some((lo, hi)) => (lo.max(f.hw_min_khz), hi.min(f.hw_max_khz)),
                });
            }
            if let Some((lo, hi)) = range.filter(|(lo, hi)| lo <= hi) {
                out.insert(name.clone(), (lo, hi));
            }
        }
        out
    }

    /// The power cap's limit on `island`'s maximum frequency, kHz.
    pub fn limit_of(&self, island: &Name) -> Option<u64> {
        self.limits.get(island).copied()
    }

    /// Sets (`Some`) or lifts (`None`) the limit on `island`'s maximum
    /// frequency, kHz, recorded as a decision with `why`.
    pub fn limit(
        &mut self,
        island: &Name,
        max_khz: Option<u64>,
        now: Duration,
        log: &mut DecisionLog,
        why: Reason,
    ) -> Result<(), PowerError> {
        let cpus = self.islands.get(island).cloned().unwrap_or_default();
        self.actuator.limit_max(&cpus, max_khz)?;
        match max_khz {
            Some(k) => self.limits.insert(island.clone(), k),
            None => self.limits.remove(island),
        };
        let change = match max_khz {
            Some(k) => format!("power cap: max {k} kHz"),
            None => "power cap: max frequency limit lifted".to_string(),
        };
        record(log, now, island, &cpus, change, why);
        Ok(())
    }

    /// Checks `spec`'s policies against the CPUs without writing.
    pub fn check(&self, spec: &PlatformSpec) -> Result<(), FrequencyError> {
        checked(&self.actuator, spec).map(drop)
    }

    /// Writes every island's policy; a warning for each that failed (its
    /// CPUs written so far are given back at teardown).
    pub fn start(&mut self, now: Duration, log: &mut DecisionLog) -> Vec<String> {
        let mut warnings = Vec::new();
        for p in &self.policies {
            let change = match self.actuator.apply(&p.cpus, &p.policy) {
                Ok(()) => describe(&p.policy),
                Err(e) => {
                    warnings.push(format!("frequency of island {}: {e}", p.island));
                    format!("not written: {e}")
                }
            };
            record(log, now, &p.island, &p.cpus, change, Reason::Config);
        }
        // The power cap's limits outlive a reload (which gave every CPU
        // back): written again over the new policies.
        for (island, k) in &self.limits {
            let cpus = self.islands.get(island).cloned().unwrap_or_default();
            if let Err(e) = self.actuator.limit_max(&cpus, Some(*k)) {
                warnings.push(format!("power-cap limit of island {island}: {e}"));
            }
        }
        warnings
    }

    /// Checks `spec`'s policies; when they differ from the running ones,
    /// gives every CPU back and writes the new ones. A policy the machine
    /// refuses changes nothing and is the error.
    pub fn reload(
        &mut self,
        spec: &PlatformSpec,
        now: Duration,
        log: &mut DecisionLog,
    ) -> Result<Vec<String>, FrequencyError> {
        let next = checked(&self.actuator, spec)?;
        // An island's CPUs changed: its power-cap limit moves with them.
        if next == self.policies && island_cpus(spec) == self.islands {
            return Ok(Vec::new());
        }
        let mut warnings = self.give_back(now, log, Reason::Config);
        self.policies = next;
        self.islands = island_cpus(spec);
        self.limits.retain(|i, _| self.islands.contains_key(i));
        warnings.extend(self.start(now, log));
        Ok(warnings)
    }

    /// Every touched CPU back as found; a warning for each file that
    /// could not be written.
    pub fn teardown(&mut self, now: Duration, log: &mut DecisionLog) -> Vec<String> {
        self.limits.clear();
        self.give_back(now, log, Reason::Teardown)
    }

    fn give_back(&mut self, now: Duration, log: &mut DecisionLog, why: Reason) -> Vec<String> {
        let touched = self.actuator.touched();
        if touched.is_empty() {
            return Vec::new();
        }
        let errors = self.actuator.restore();
        let warnings: Vec<String> = errors
            .iter()
            .map(|e| format!("frequency: restoring: {e}"))
            .collect();
        let cpus: CpuSet = touched.into_iter().collect();
        for (island, own) in &self.islands {
            if own.iter().any(|c| cpus.contains(c)) {
                let change = if errors.is_empty() {
                    "restored as found".to_string()
                } else {
                    format!("restore failed on {} files", errors.len())
                };
                record(log, now, island, own, change, why.clone());
            }
        }
        warnings
    }

    /// `island batch (CPUs 4-7): governor powersave, max 1200000 kHz`, one
    /// line per policy, then `island web (CPUs 1-3): power cap max 2000000
    /// kHz` per power-cap limit, for the status.
    pub fn lines(&self) -> Vec<String> {
        let policies = self.policies.iter().map(|p| {
            format!(
                "island {} (CPUs {}): {}",
                p.island,
                p.cpus,
                describe(&p.policy)
            )
        });
        let limits = self.limits.iter().map(|(i, k)| {
            let cpus = self.islands.get(i).cloned().unwrap_or_default();
            format!("island {i} (CPUs {cpus}): power cap max {k} kHz")
        });
        policies.chain(limits).collect()
    }
}

/// `spec`'s non-empty policies, each checked on its island's CPUs.
fn checked(actuator: &Actuator, spec: &PlatformSpec) -> Result<Vec<IslandPolicy>, FrequencyError> {
    let mut out = Vec::new();
    for island in &spec.islands {
        let Some(policy) = spec.frequency.get(&island.name) else {
            continue;
        };
        if policy.is_empty() {
            continue;
        }
        actuator
            .check(&island.cpus, policy)
            .map_err(|source| FrequencyError::Refused {
                island: island.name.clone(),
                source,
            })?;
        out.push(IslandPolicy {
            island: island.name.clone(),
            cpus: island.cpus.clone(),
            policy: policy.clone(),
        });
    }
    Ok(out)
}

fn record(
    log: &mut DecisionLog,
    now: Duration,
    island: &Name,
    cpus: &CpuSet,
    change: String,
    why: Reason,
) {
    log.record(Decision {
        at: now,
        action: Action::SetFrequency {
            island: island.to_string(),
            cpus: cpus.to_string(),
            change,
        },
        why,
    });
}

/// `governor powersave, min 800000 kHz, max 1200000 kHz`.
fn describe(p: &FreqPolicy) -> String {
    let mut parts = Vec::new();
    if let Some(g) = &p.governor {
        parts.push(format!("governor {g}"));
    }
    if let Some(v) = p.min_khz {
        parts.push(format!("min {v} kHz"));
    }
    if let Some(v) = p.max_khz {
        parts.push(format!("max {v} kHz"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests;
