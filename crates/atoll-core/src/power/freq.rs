//! A per-island frequency policy and its check against the machine.

use serde::{Deserialize, Serialize};

/// What an island asks of its CPUs' cpufreq policy (config
/// `[islands.<name>.frequency]`). Every field is optional; what is left
/// out stays as the machine has it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FreqPolicy {
    /// `scaling_governor` (one of `scaling_available_governors`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub governor: Option<String>,
    /// `scaling_min_freq`, kHz (within `cpuinfo_min_freq..=cpuinfo_max_freq`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_khz: Option<u64>,
    /// `scaling_max_freq`, kHz (within `cpuinfo_min_freq..=cpuinfo_max_freq`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_khz: Option<u64>,
}

/// What a CPU's cpufreq had before atoll first wrote to it: what teardown
/// writes back. Kept in the state file, so that a daemon restarted after
/// a crash gives back these values and not what the crashed run wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FreqOriginal {
    /// The CPU.
    pub cpu: u32,
    /// `scaling_governor`.
    pub governor: String,
    /// `scaling_min_freq`, kHz.
    pub min_khz: u64,
    /// `scaling_max_freq`, kHz.
    pub max_khz: u64,
}

/// What one CPU's cpufreq offers (its `cpuinfo_*` range and governors).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreqOffer {
    /// The CPU.
    pub cpu: u32,
    /// `cpuinfo_min_freq`, kHz.
    pub min_khz: u64,
    /// `cpuinfo_max_freq`, kHz.
    pub max_khz: u64,
    /// `scaling_available_governors`.
    pub governors: Vec<String>,
}

/// A frequency policy the machine cannot follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FreqError {
    /// `min_khz` above `max_khz`.
    #[error("frequency: min_khz = {min} is above max_khz = {max}")]
    MinAboveMax {
        /// min_khz.
        min: u64,
        /// max_khz.
        max: u64,
    },
    /// A governor the CPU does not offer.
    #[error("frequency.governor = {governor:?}: cpu{cpu} offers only {offered:?}")]
    Governor {
        /// The CPU.
        cpu: u32,
        /// The governor asked for.
        governor: String,
        /// `scaling_available_governors`.
        offered: Vec<String>,
    },
    /// A frequency outside the CPU's range.
    #[error("frequency.{field} = {khz}: cpu{cpu} runs at {min}..={max} kHz")]
    Range {
        /// `min_khz` or `max_khz`.
        field: &'static str,
        /// The value.
        khz: u64,
        /// The CPU.
        cpu: u32,
        /// `cpuinfo_min_freq`.
        min: u64,
        /// `cpuinfo_max_freq`.
        max: u64,
    },
    /// A policy on CPUs that have no cpufreq.
    #[error("frequency: cpu{cpu} has no cpufreq (a VM, or no driver)")]
    NoCpufreq {
        /// The first CPU without it.
        cpu: u32,
    },
}

impl FreqPolicy {
    /// Whether the policy asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.governor.is_none() && self.min_khz.is_none() && self.max_khz.is_none()
    }

    /// Checks the policy on its own (min not above max).
    pub fn validate(&self) -> Result<(), FreqError> {
        if let (Some(min), Some(max)) = (self.min_khz, self.max_khz) {
            if min > max {
                return Err(FreqError::MinAboveMax { min, max });
            }
        }
        Ok(())
    }

    /// Checks the policy against what one CPU offers.
    pub fn validate_for(&self, offer: &FreqOffer) -> Result<(), FreqError> {
        self.validate()?;
        if let Some(g) = &self.governor {
            if !offer.governors.contains(g) {
                return Err(FreqError::Governor {
                    cpu: offer.cpu,
                    governor: g.clone(),
                    offered: offer.governors.clone(),
                });
            }
        }
        for (field, v) in [("min_khz", self.min_khz), ("max_khz", self.max_khz)] {
            if let Some(khz) = v {
                if khz < offer.min_khz || khz > offer.max_khz {
                    return Err(FreqError::Range {
                        field,
                        khz,
                        cpu: offer.cpu,
                        min: offer.min_khz,
                        max: offer.max_khz,
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer() -> FreqOffer {
        FreqOffer {
            cpu: 3,
            min_khz: 800_000,
            max_khz: 3_600_000,
            governors: vec!["performance".into(), "powersave".into()],
        }
    }

    #[test]
    fn policy_is_checked_against_the_offer() {
        let ok = FreqPolicy {
            governor: Some("powersave".into()),
            min_khz: Some(800_000),
            max_khz: Some(2_000_000),
        };
        assert_eq!(ok.validate_for(&offer()), Ok(()));
        assert!(FreqPolicy::default().is_empty());
        let bad_gov = FreqPolicy {
            governor: Some("ondemand".into()),
            ..FreqPolicy::default()
        };
        let e = bad_gov.validate_for(&offer()).unwrap_err();
        assert!(e.to_string().contains("cpu3 offers only"), "{e}");
        let too_high = FreqPolicy {
            max_khz: Some(4_000_000),
            ..FreqPolicy::default()
        };
        assert!(matches!(
            too_high.validate_for(&offer()),
            Err(FreqError::Range {
                field: "max_khz",
                ..
            })
        ));
        let crossed = FreqPolicy {
            min_khz: Some(2_000_000),
            max_khz: Some(1_000_000),
            ..FreqPolicy::default()
        };
        assert!(matches!(
            crossed.validate(),
            Err(FreqError::MinAboveMax { .. })
        ));
        assert!(toml::from_str::<FreqPolicy>("max_khz = 1\ngovernr = \"x\"").is_err());
    }
}
