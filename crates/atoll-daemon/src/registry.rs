//! What the daemon manages: the spec, units created at run time, and the
//! processes it moved (with where they came from).
//!
//! The registry is plain data; the controller changes it and the backend
//! makes the kernel agree. Only processes atoll moved itself are recorded
//! here: their children inherit the group in the kernel and are found by
//! reading the group, and at teardown they follow their parent's origin
//! (`Controller::origin_of`).

use std::collections::BTreeMap;

use atoll_core::plan::{self, GroupPath, GroupPlan, TaskPolicy};
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{Entitlement, PlatformSpec, UnitSpec};
use atoll_core::Name;
use atoll_proto::UnitOrigin;

/// A process atoll moved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Managed {
    /// Start time in ticks (tells a reused pid apart).
    pub start_ticks: u64,
    /// Where atoll put it.
    pub group: GroupPath,
    /// Where it came from (`None`: found in atoll's hierarchy on recovery
    /// with no record; it returns where its parent or the daemon came from).
    pub origin: Option<CgroupMembership>,
    /// Its scheduling policy before atoll changed it, when atoll changed it.
    pub original_policy: Option<TaskPolicy>,
    /// Its name, for logs.
    pub comm: String,
    /// Its real uid.
    pub uid: u32,
    /// Its parent, for origin fallback.
    pub ppid: u32,
}

/// Units, processes and the spec.
#[derive(Clone, Debug)]
pub struct Registry {
    spec: PlatformSpec,
    runtime_units: Vec<UnitSpec>,
    managed: BTreeMap<u32, Managed>,
}

impl Registry {
    /// A registry for `spec`, with no runtime units and no processes.
    pub fn new(spec: PlatformSpec) -> Self {
        Self {
            spec,
            runtime_units: Vec::new(),
            managed: BTreeMap::new(),
        }
    }

    /// The platform spec.
    pub fn spec(&self) -> &PlatformSpec {
        &self.spec
    }

    /// The hierarchy as it should be.
    pub fn plan(&self) -> GroupPlan {
        plan::plan(&self.spec, &self.runtime_units)
    }

    /// Every unit with where it came from: config units first.
    pub fn units(&self) -> impl Iterator<Item = (&UnitSpec, UnitOrigin)> {
        self.spec
            .units
            .iter()
            .map(|u| (u, UnitOrigin::Config))
            .chain(self.runtime_units.iter().map(|u| (u, UnitOrigin::Runtime)))
    }

    /// Units created at run time.
    pub fn runtime_units(&self) -> &[UnitSpec] {
        &self.runtime_units
    }

    /// The unit named `name`.
    pub fn unit(&self, name: &str) -> Option<(&UnitSpec, UnitOrigin)> {
        self.units().find(|(u, _)| u.name.as_str() == name)
    }

    /// The leaf group of unit `name`.
    pub fn unit_group(&self, name: &str) -> Option<GroupPath> {
        self.unit(name)
            .map(|(u, _)| GroupPath::unit(&u.island, &u.name))
    }

    /// The unit whose leaf group is `path`.
    pub fn unit_at(&self, path: &GroupPath) -> Option<&UnitSpec> {
        self.units()
            .map(|(u, _)| u)
            .find(|u| &GroupPath::unit(&u.island, &u.name) == path)
    }

    /// Adds a unit with the default entitlement in `island`.
    pub fn add_runtime_unit(&mut self, name: Name, island: Name) -> &UnitSpec {
        self.runtime_units.push(UnitSpec {
            name,
            island,
            entitlement: Entitlement::default(),
            adopt: Vec::new(),
            rt_priority: None,
        });
        self.runtime_units.last().expect("just pushed")
    }

    /// Restores a runtime unit (from the state file or the kernel's view).
    pub fn restore_runtime_unit(&mut self, unit: UnitSpec) {
        if self.unit(unit.name.as_str()).is_none() {
            self.runtime_units.push(unit);
        }
    }

    /// Removes a runtime unit; returns whether it existed.
    pub fn remove_runtime_unit(&mut self, name: &str) -> bool {
        let before = self.runtime_units.len();
        self.runtime_units.retain(|u| u.name.as_str() != name);
        before != self.runtime_units.len()
    }

    /// Records a process atoll moved.
    pub fn manage(&mut self, pid: u32, m: Managed) {
        self.managed.insert(pid, m);
    }

    /// Forgets a process.
    pub fn forget(&mut self, pid: u32) -> Option<Managed> {
        self.managed.remove(&pid)
    }

    /// The record of a process.
    pub fn managed(&self, pid: u32) -> Option<&Managed> {
        self.managed.get(&pid)
    }

    /// All records.
    pub fn all_managed(&self) -> impl Iterator<Item = (u32, &Managed)> {
        self.managed.iter().map(|(p, m)| (*p, m))
    }

    /// Processes recorded in `group`.
    pub fn managed_in(&self, group: &GroupPath) -> Vec<u32> {
        self.managed
            .iter()
            .filter(|(_, m)| &m.group == group)
            .map(|(p, _)| *p)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use atoll_core::spec::HostSpec;
    use atoll_core::CpuSet;

    use super::*;

    fn spec() -> PlatformSpec {
        PlatformSpec {
            host: HostSpec {
                cpus: CpuSet::parse("0").unwrap(),
                mems: CpuSet::parse("0").unwrap(),
                adopt_all: false,
            },
            islands: vec![],
            units: vec![],
            default_island: None,
            epoch: atoll_core::spec::DEFAULT_EPOCH,
            isolation: Default::default(),
            overlays: Vec::new(),
            comm: None,
            apps: Default::default(),
        }
    }

    #[test]
    fn runtime_units_are_listed_after_config_units() {
        let mut r = Registry::new(spec());
        r.add_runtime_unit(Name::new("a").unwrap(), Name::new("main").unwrap());
        assert_eq!(r.unit("a").unwrap().1, UnitOrigin::Runtime);
        assert_eq!(r.unit_group("a").unwrap().as_str(), "main/a");
        assert!(r.unit_at(&GroupPath::from_relative("main/a")).is_some());
        assert!(r.remove_runtime_unit("a"));
        assert!(!r.remove_runtime_unit("a"));
    }
}
