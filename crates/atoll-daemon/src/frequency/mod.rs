//! `Frequencies`: the islands' CPU frequency policies
//! (`[island.NAME.frequency]`, issue 17). It owns the frequency actuator
//! of one sysfs root: every policy is checked against every CPU of its
//! island before anything is written (a policy the machine cannot follow,
//! or any policy on a machine without cpufreq, refuses the start or the
//! reload); at start each island's policy is written, at teardown every
//! CPU it touched gets its original governor and range back. Every write
//! is a [`Decision`] (`atoll why ISLAND`). CPUs of islands without a
//! policy are never written.

use std::path::Path;
use std::time::Duration;

use atoll_core::decision::{Action, Decision, Reason};
use atoll_core::power::FreqPolicy;
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
    actuator: Actuator,
    policies: Vec<IslandPolicy>,
}

impl Frequencies {
    /// The policies of `spec` on the cpufreq files under `sysfs_root`,
    /// checked against the CPUs without writing.
    pub fn new(sysfs_root: &Path, spec: &PlatformSpec) -> Result<Self, FrequencyError> {
        let actuator = Actuator::new(sysfs_root);
        let policies = checked(&actuator, spec)?;
        Ok(Self { actuator, policies })
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
            record(log, now, p, change, Reason::Config);
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
        if next == self.policies {
            return Ok(Vec::new());
        }
        let mut warnings = self.give_back(now, log, Reason::Config);
        self.policies = next;
        warnings.extend(self.start(now, log));
        Ok(warnings)
    }

    /// Every touched CPU back as found; a warning for each file that
    /// could not be written.
    pub fn teardown(&mut self, now: Duration, log: &mut DecisionLog) -> Vec<String> {
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
        for p in &self.policies {
            if p.cpus.iter().any(|c| cpus.contains(c)) {
                let change = if errors.is_empty() {
                    "restored as found".to_string()
                } else {
                    format!("restore failed on {} files", errors.len())
                };
                record(log, now, p, change, why.clone());
            }
        }
        warnings
    }

    /// `island batch (CPUs 4-7): governor powersave, max 1200000 kHz`, one
    /// line per policy, for the status.
    pub fn lines(&self) -> Vec<String> {
        self.policies
            .iter()
            .map(|p| {
                format!(
                    "island {} (CPUs {}): {}",
                    p.island,
                    p.cpus,
                    describe(&p.policy)
                )
            })
            .collect()
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

fn record(log: &mut DecisionLog, now: Duration, p: &IslandPolicy, change: String, why: Reason) {
    log.record(Decision {
        at: now,
        action: Action::SetFrequency {
            island: p.island.to_string(),
            cpus: p.cpus.to_string(),
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
