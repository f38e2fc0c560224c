//! `[island.NAME.frequency]`: per-island cpufreq policies
//! (`crate::power::FreqPolicy`). Here only what needs no machine: the
//! island exists and `min_khz` is not above `max_khz`. What the CPUs offer
//! (governors, hardware range) is checked by the daemon at start, with
//! [`FreqPolicy::validate_for`](crate::power::FreqPolicy::validate_for).

use super::{PlatformSpec, SpecError};
use crate::power::FreqError;

/// Each policy's island is declared, and the policy is consistent.
pub(super) fn validate_frequency(spec: &PlatformSpec, errs: &mut Vec<SpecError>) {
    for (name, policy) in &spec.frequency {
        let key = format!("island.{name}.frequency");
        if spec.island(name).is_none() {
            errs.push(SpecError::new(
                key.clone(),
                format!("no island named {:?}", name.as_str()),
            ));
        }
        if let Err(e) = policy.validate() {
            let field = match e {
                FreqError::MinAboveMax { .. } => "min_khz",
                _ => "",
            };
            let key = if field.is_empty() {
                key
            } else {
                format!("{key}.{field}")
            };
            errs.push(SpecError::new(key, e.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::power::FreqPolicy;
    use crate::spec::tests::{spec16, topo16};
    use crate::Name;

    #[test]
    fn a_policy_needs_its_island_and_min_below_max() {
        let topo = topo16();
        let mut s = spec16();
        let island = s.islands[0].name.clone();
        s.frequency.insert(
            island.clone(),
            FreqPolicy {
                governor: Some("powersave".into()),
                min_khz: Some(800_000),
                max_khz: Some(1_200_000),
            },
        );
        assert_eq!(s.validate(&topo), Ok(()));
        s.frequency
            .insert(Name::new("nowhere").unwrap(), FreqPolicy::default());
        s.frequency.insert(
            island.clone(),
            FreqPolicy {
                min_khz: Some(2_000_000),
                max_khz: Some(1_000_000),
                ..FreqPolicy::default()
            },
        );
        let errs = s.validate(&topo).unwrap_err();
        let keys: Vec<String> = errs.iter().map(|e| e.key.clone()).collect();
        assert!(
            keys.contains(&format!("island.{island}.frequency.min_khz")),
            "{keys:?}"
        );
        assert!(
            keys.contains(&"island.nowhere.frequency".to_string()),
            "{keys:?}"
        );
    }
}
