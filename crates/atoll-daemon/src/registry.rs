//! What the daemon manages: the spec, units created at run time, and the
//! processes it moved (with where they came from).
//!
//! The registry is plain data. The steps change it; the composer
//! ([`crate::compose`]) makes the kernel's groups agree with its plan, and
//! the state file ([`crate::persist`]) keeps it across restarts. It keeps
//! the plan (the hierarchy as the spec and the runtime units describe it)
//! computed, so reading it costs nothing, and it notes when it changed in a
//! way the state file must learn ([`Registry::take_dirty`]).
//!
//! Only processes atoll moved itself are recorded here: their children
//! inherit the group in the kernel and are found by reading the group, and
//! at teardown they follow their parent's origin
//! ([`crate::placement::origin_of`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use atoll_core::plan::{self, GroupPath, GroupPlan, PlannedGroup, TaskPolicy};
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{
    is_app_unit_name, Entitlement, IslandSpec, OverlayConfig, PlatformSpec, UnitSpec,
};
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
    /// The user who placed it, when not root: `None` means root or the
    /// config's rules placed it, and no other user may move it.
    pub placed_by: Option<u32>,
}

/// The plan, with an index by path, and the units by name.
#[derive(Clone, Debug, Default)]
struct Planned {
    plan: GroupPlan,
    index: HashMap<GroupPath, usize>,
    /// Unit name → (runtime, position among config or runtime units).
    units: HashMap<String, (bool, usize)>,
}

impl Planned {
    fn new(spec: &PlatformSpec, runtime_units: &[UnitSpec]) -> Self {
        let plan = plan::plan(spec, runtime_units);
        let index = plan
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.path.clone(), i))
            .collect();
        let mut units = HashMap::new();
        for (i, u) in runtime_units.iter().enumerate() {
            units.insert(u.name.to_string(), (true, i));
        }
        // Config units first, as `units()` lists them.
        for (i, u) in spec.units.iter().enumerate() {
            units.insert(u.name.to_string(), (false, i));
        }
        Self { plan, index, units }
    }
}

/// Units, processes and the spec.
#[derive(Clone, Debug)]
pub struct Registry {
    spec: PlatformSpec,
    runtime_units: Vec<UnitSpec>,
    /// Runtime units created by a user other than root, with that user.
    owners: BTreeMap<String, u32>,
    /// Runtime units declared with `unit add`: kept while empty.
    kept: BTreeSet<String>,
    /// Overlays added at run time (`overlay add`), in the order added.
    overlays: Vec<OverlayConfig>,
    managed: BTreeMap<u32, Managed>,
    planned: Planned,
    /// Grows with every change of the plan.
    generation: u64,
    /// Something the state file holds changed since the last
    /// [`take_dirty`](Self::take_dirty).
    dirty: bool,
}

impl Registry {
    /// A registry for `spec`, with no runtime units and no processes.
    pub fn new(spec: PlatformSpec) -> Self {
        let planned = Planned::new(&spec, &[]);
        Self {
            spec,
            runtime_units: Vec::new(),
            owners: BTreeMap::new(),
            kept: BTreeSet::new(),
            overlays: Vec::new(),
            managed: BTreeMap::new(),
            planned,
            generation: 0,
            dirty: false,
        }
    }

    fn replan(&mut self) {
        self.planned = Planned::new(&self.spec, &self.runtime_units);
        self.generation += 1;
        self.dirty = true;
    }

    /// Grows with every change of the plan (a unit added, changed or
    /// removed): every group's planned settings may have moved (an
    /// island's RT budget is split among its units).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The platform spec.
    pub fn spec(&self) -> &PlatformSpec {
        &self.spec
    }

    /// The island named `name`.
    pub fn island(&self, name: &Name) -> Option<&IslandSpec> {
        self.spec.island(name)
    }

    /// The hierarchy as it should be, parents before children.
    pub fn plan(&self) -> &GroupPlan {
        &self.planned.plan
    }

    /// The planned group at `path`.
    pub fn planned(&self, path: &GroupPath) -> Option<&PlannedGroup> {
        let i = *self.planned.index.get(path)?;
        self.planned.plan.groups.get(i)
    }

    /// The position of `path` in the plan (parents come first).
    pub fn plan_order(&self, path: &GroupPath) -> Option<usize> {
        self.planned.index.get(path).copied()
    }

    /// Every unit with where it came from: config units first.
    pub fn units(&self) -> impl Iterator<Item = (&UnitSpec, UnitOrigin)> {
        self.spec
            .units
            .iter()
            .map(|u| (u, UnitOrigin::Config))
            .chain(self.runtime_units.iter().map(|u| (u, UnitOrigin::Runtime)))
    }

    /// The units of `island`.
    pub fn units_of<'a>(&'a self, island: &'a Name) -> impl Iterator<Item = &'a UnitSpec> + 'a {
        self.units()
            .map(|(u, _)| u)
            .filter(move |u| &u.island == island)
    }

    /// Units created at run time.
    pub fn runtime_units(&self) -> &[UnitSpec] {
        &self.runtime_units
    }

    /// The unit named `name`.
    pub fn unit(&self, name: &str) -> Option<(&UnitSpec, UnitOrigin)> {
        match *self.planned.units.get(name)? {
            (false, i) => self.spec.units.get(i).map(|u| (u, UnitOrigin::Config)),
            (true, i) => self.runtime_units.get(i).map(|u| (u, UnitOrigin::Runtime)),
        }
    }

    /// The leaf group of unit `name`.
    pub fn unit_group(&self, name: &str) -> Option<GroupPath> {
        self.unit(name)
            .map(|(u, _)| GroupPath::unit(&u.island, &u.name))
    }

    /// The unit whose leaf group is `path`.
    pub fn unit_at(&self, path: &GroupPath) -> Option<&UnitSpec> {
        let (island, unit) = path.as_str().split_once('/')?;
        self.unit(unit)
            .map(|(u, _)| u)
            .filter(|u| u.island.as_str() == island)
    }

    /// The island whose group is `path` (a depth-1 group other than the
    /// host partition).
    pub fn island_at(&self, path: &GroupPath) -> Option<&IslandSpec> {
        if path.depth() != 1 || *path == GroupPath::host() {
            return None;
        }
        self.spec
            .islands
            .iter()
            .find(|i| i.name.as_str() == path.as_str())
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
        self.replan();
        self.runtime_units.last().expect("just pushed")
    }

    /// Restores a runtime unit (from the state file or the kernel's view).
    pub fn restore_runtime_unit(&mut self, unit: UnitSpec) {
        if self.unit(unit.name.as_str()).is_none() {
            self.runtime_units.push(unit);
            self.replan();
        }
    }

    /// Replaces runtime unit `unit.name` (adds it when missing).
    pub fn set_runtime_unit(&mut self, unit: UnitSpec) {
        let name = unit.name.clone();
        match self.runtime_units.iter_mut().find(|u| u.name == name) {
            Some(u) if *u == unit => return,
            Some(u) => *u = unit,
            None => self.runtime_units.push(unit),
        }
        self.replan();
    }

    /// The user who created runtime unit `name`, when not root.
    pub fn owner(&self, name: &str) -> Option<u32> {
        self.owners.get(name).copied()
    }

    /// Records that `uid` (not root) created runtime unit `name`.
    pub fn set_owner(&mut self, name: &str, uid: u32) {
        self.owners.insert(name.to_string(), uid);
        self.dirty = true;
    }

    /// Runtime units `uid` created in `island`.
    pub fn owned_in(&self, uid: u32, island: &Name) -> usize {
        self.runtime_units
            .iter()
            .filter(|u| &u.island == island && self.owner(u.name.as_str()) == Some(uid))
            .count()
    }

    /// Whether runtime unit `name` was declared with `unit add` (it stays
    /// while empty, until `unit rm`).
    pub fn is_kept(&self, name: &str) -> bool {
        self.kept.contains(name)
    }

    /// Marks runtime unit `name` declared (see [`is_kept`](Self::is_kept)).
    pub fn keep(&mut self, name: &str) {
        self.kept.insert(name.to_string());
        self.dirty = true;
    }

    /// The overlays added at run time.
    pub fn runtime_overlays(&self) -> &[OverlayConfig] {
        &self.overlays
    }

    /// Adds or replaces a run-time overlay.
    pub fn set_runtime_overlay(&mut self, overlay: OverlayConfig) {
        match self.overlays.iter_mut().find(|o| o.name == overlay.name) {
            Some(o) => *o = overlay,
            None => self.overlays.push(overlay),
        }
        self.dirty = true;
    }

    /// Removes a run-time overlay; returns it.
    pub fn remove_runtime_overlay(&mut self, name: &str) -> Option<OverlayConfig> {
        let i = self.overlays.iter().position(|o| o.name.as_str() == name)?;
        self.dirty = true;
        Some(self.overlays.remove(i))
    }

    /// The run-time overlay that holds unit `name`, if one does.
    pub fn overlay_of(&self, name: &str) -> Option<&OverlayConfig> {
        self.overlays
            .iter()
            .find(|o| o.units.iter().any(|u| u.as_str() == name))
    }

    /// The platform as it is now: the description, with the runtime units
    /// (other than applications') after its units and the run-time
    /// overlays after its overlays. What `config dump` writes.
    pub fn effective_spec(&self) -> PlatformSpec {
        let mut spec = self.spec.clone();
        spec.units.extend(
            self.runtime_units
                .iter()
                .filter(|u| !is_app_unit_name(u.name.as_str()))
                .cloned(),
        );
        spec.overlays.extend(self.overlays.iter().cloned());
        spec
    }

    /// Removes a runtime unit; returns whether it existed.
    pub fn remove_runtime_unit(&mut self, name: &str) -> bool {
        self.owners.remove(name);
        self.kept.remove(name);
        let before = self.runtime_units.len();
        self.runtime_units.retain(|u| u.name.as_str() != name);
        let removed = before != self.runtime_units.len();
        if removed {
            self.replan();
        }
        removed
    }

    /// Replaces the platform description (a reload). Runtime units whose
    /// island it no longer has, or whose name one of its units takes, are
    /// dropped and returned (a caller gives their processes back first,
    /// except for a runtime unit the config now declares in the same
    /// island: that group stays, the config's unit now).
    pub fn set_spec(&mut self, spec: PlatformSpec) -> Vec<UnitSpec> {
        let (keep, dropped): (Vec<UnitSpec>, Vec<UnitSpec>) =
            std::mem::take(&mut self.runtime_units)
                .into_iter()
                .partition(|u| {
                    spec.island(&u.island).is_some() && !spec.units.iter().any(|c| c.name == u.name)
                });
        self.runtime_units = keep;
        for u in &dropped {
            self.owners.remove(u.name.as_str());
            self.kept.remove(u.name.as_str());
        }
        // Run-time overlays over units that went, or whose name the
        // description now takes, end.
        let units: Vec<&Name> = spec
            .units
            .iter()
            .chain(self.runtime_units.iter())
            .map(|u| &u.name)
            .collect();
        self.overlays.retain(|o| {
            o.units.iter().all(|u| units.contains(&u))
                && !spec.overlays.iter().any(|c| c.name == o.name)
        });
        self.spec = spec;
        self.replan();
        dropped
    }

    /// Records a process atoll moved.
    pub fn manage(&mut self, pid: u32, m: Managed) {
        self.managed.insert(pid, m);
        self.dirty = true;
    }

    /// Forgets a process.
    pub fn forget(&mut self, pid: u32) -> Option<Managed> {
        let m = self.managed.remove(&pid);
        self.dirty |= m.is_some();
        m
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

    /// Marks the registry changed for the state file (a change it cannot
    /// see itself).
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Whether it changed since the last call, and forgets that it did.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
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
            islands: vec![atoll_core::spec::IslandSpec {
                name: Name::new("main").unwrap(),
                cpus: CpuSet::parse("1").unwrap(),
                mems: CpuSet::parse("0").unwrap(),
                policy: atoll_core::spec::SchedPolicy::Fair,
                arbitration: Default::default(),
                exclusive: false,
                access: Default::default(),
            }],
            units: vec![],
            default_island: None,
            epoch: atoll_core::spec::DEFAULT_EPOCH,
            isolation: Default::default(),
            overlays: Vec::new(),
            comm: None,
            apps: Default::default(),
            network: Vec::new(),
            frequency: Default::default(),
        }
    }

    #[test]
    fn runtime_units_are_listed_after_config_units_and_planned() {
        let mut r = Registry::new(spec());
        assert!(!r.take_dirty());
        r.add_runtime_unit(Name::new("a").unwrap(), Name::new("main").unwrap());
        assert!(r.take_dirty());
        assert_eq!(r.unit("a").unwrap().1, UnitOrigin::Runtime);
        assert_eq!(r.unit_group("a").unwrap().as_str(), "main/a");
        let g = GroupPath::from_relative("main/a");
        assert!(r.unit_at(&g).is_some());
        assert!(r.planned(&g).is_some(), "the plan follows the units");
        assert!(r.remove_runtime_unit("a"));
        assert!(r.planned(&g).is_none());
        assert!(!r.remove_runtime_unit("a"));
    }

    #[test]
    fn process_records_mark_the_registry_dirty() {
        let mut r = Registry::new(spec());
        let m = Managed {
            start_ticks: 1,
            group: GroupPath::host(),
            origin: None,
            original_policy: None,
            comm: "x".into(),
            uid: 0,
            ppid: 1,
            placed_by: None,
        };
        r.manage(5, m);
        assert!(r.take_dirty());
        assert!(!r.take_dirty());
        assert!(r.forget(6).is_none());
        assert!(!r.take_dirty(), "forgetting nothing changes nothing");
        assert!(r.forget(5).is_some());
        assert!(r.take_dirty());
    }
}
