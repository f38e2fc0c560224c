//! Units added or changed at run time (`atoll unit add|set`) are checked
//! as the config file's units are, against the platform they join: the
//! same names, ranges, sizes and memory order ([`PlatformSpec::validate`]
//! on the platform with the unit in it), and one rule more. A unit added
//! at run time may not take an island's `cpus` entitlements beyond its
//! CPUs: the config file may overcommit an island (the isolation model
//! scales the shares down), but a run-time change must not shrink what the
//! configured units were given.

use super::{PlatformSpec, SpecError, UnitSpec};
use crate::topology::Topology;

impl PlatformSpec {
    /// Checks `unit` as it would be with the run-time units `runtime`
    /// (a unit of the same name there is replaced by it); returns every
    /// problem about it, keyed as the config file would be
    /// (`unit.NAME.cpus`).
    pub fn validate_runtime_unit(
        &self,
        runtime: &[UnitSpec],
        unit: &UnitSpec,
        topo: &Topology,
    ) -> Result<(), Vec<SpecError>> {
        let key = format!("unit.{}", unit.name);
        let mut all = self.clone();
        all.units
            .extend(runtime.iter().filter(|u| u.name != unit.name).cloned());
        all.units.push(unit.clone());
        let mut errs: Vec<SpecError> = match all.validate(topo) {
            Ok(()) => Vec::new(),
            Err(errs) => errs
                .into_iter()
                .filter(|e| e.key == key || e.key.starts_with(&format!("{key}.")))
                .collect(),
        };
        if let (Some(island), Some(mine)) = (self.island(&unit.island), unit.entitlement.cpus) {
            let others: f64 = all
                .units
                .iter()
                .filter(|u| u.island == unit.island && u.name != unit.name)
                .filter_map(|u| u.entitlement.cpus)
                .sum();
            let ncpus = island.cpus.len() as f64;
            if others + mine > ncpus + 1e-9 {
                errs.push(SpecError::new(
                    format!("{key}.cpus"),
                    format!(
                        "{mine} more CPUs would entitle island {}'s units to {} of its {ncpus} CPUs ({others} are entitled already); a unit added at run time may not overcommit an island",
                        island.name,
                        others + mine
                    ),
                ));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::{n, spec16, topo16};
    use crate::spec::Entitlement;

    fn unit(name: &str, island: &str, cpus: Option<f64>) -> UnitSpec {
        UnitSpec {
            name: n(name),
            island: n(island),
            entitlement: Entitlement {
                cpus,
                ..Default::default()
            },
            adopt: vec![],
            rt_priority: None,
        }
    }

    #[test]
    fn a_runtime_unit_is_checked_like_a_configured_one() {
        let s = spec16(); // web: 6 CPUs, api entitled to 2
        let topo = topo16();
        s.validate_runtime_unit(&[], &unit("b", "web", Some(4.0)), &topo)
            .unwrap();
        let mut bad = unit("b", "web", Some(2.0));
        bad.entitlement.cpu_cap = Some(1.0);
        bad.entitlement.memory.min = Some(2 << 30);
        bad.entitlement.memory.max = Some(1 << 30);
        let errs = s.validate_runtime_unit(&[], &bad, &topo).unwrap_err();
        let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["unit.b.cpu_cap", "unit.b.memory_max"], "{errs:?}");
        let errs = s
            .validate_runtime_unit(&[], &unit("b", "nowhere", None), &topo)
            .unwrap_err();
        assert_eq!(errs[0].key, "unit.b.island");
        let errs = s
            .validate_runtime_unit(&[], &unit("api", "web", None), &topo)
            .unwrap_err();
        assert_eq!(errs[0].problem, "unit defined twice");
    }

    #[test]
    fn runtime_units_may_not_overcommit_an_island() {
        let s = spec16();
        let topo = topo16();
        let other = unit("c", "web", Some(3.0));
        let errs = s
            .validate_runtime_unit(
                std::slice::from_ref(&other),
                &unit("b", "web", Some(1.5)),
                &topo,
            )
            .unwrap_err();
        assert_eq!(errs[0].key, "unit.b.cpus");
        assert!(errs[0].problem.contains("6.5 of its 6 CPUs"), "{}", errs[0]);
        // Replacing a unit counts its new entitlement, not both.
        s.validate_runtime_unit(
            std::slice::from_ref(&other),
            &unit("c", "web", Some(4.0)),
            &topo,
        )
        .unwrap();
        s.validate_runtime_unit(&[other], &unit("b", "web", Some(1.0)), &topo)
            .unwrap();
    }
}
