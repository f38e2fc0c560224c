//! An application's unit: created, resized, moved between islands,
//! suspended and removed.
//!
//! Each application runs in a runtime unit `app-<id>` of the island of its
//! grant. What the unit's entitlement carries (`cpu_cap` = the working
//! mode's quota, `memory_max` = its memory) survives the periodic repair
//! pass like any unit's. What it does not carry, the suspension (`frozen`)
//! and the CPUs of exclusive modes, is merged in by
//! [`Controller::merge_app_unit`] and re-asserted every epoch when another
//! writer put the plan's value back.

use atoll_core::awm::Grant;
use atoll_core::decision::{Action, Reason};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::spec::{Entitlement, MemoryEntitlement, UnitSpec};
use atoll_core::{CpuSet, Name};

use crate::controller::Controller;
use crate::reconcile::knob_diff;

/// Why a unit operation failed: the process is gone (the application is
/// then removed), or something else, in words.
#[derive(Debug)]
pub(crate) enum UnitError {
    /// The application's process exited (or its pid was reused).
    Gone,
    /// The backend refused.
    Failed(String),
}

/// The spec of an application's unit.
fn unit_spec(name: Name, island: Name, quota: f64, memory: u64) -> UnitSpec {
    UnitSpec {
        name,
        island,
        entitlement: Entitlement {
            cpu_cap: Some(quota),
            memory: MemoryEntitlement {
                max: (memory > 0).then_some(memory),
                ..Default::default()
            },
            ..Default::default()
        },
        adopt: Vec::new(),
        rt_priority: None,
    }
}

impl Controller {
    /// An application unit's own knobs over `s` (the settings every other
    /// writer merged): frozen while it waits, and its CPUs when it or a
    /// neighbour has CPUs of its own. Other groups are returned unchanged.
    pub(crate) fn merge_app_unit(&self, group: &GroupPath, mut s: GroupSettings) -> GroupSettings {
        let Some(app) = self.apps.at(group) else {
            return s;
        };
        s.frozen = app.frozen;
        if let Some(cpus) = self.app_unit_cpus(app.id) {
            s.cpus = Some(cpus);
        }
        s
    }

    /// The `cpuset.cpus` an application's unit needs: its own CPUs when its
    /// mode is exclusive; else, in an island where others have CPUs of
    /// their own, the island's other CPUs; else `None` (the island's).
    pub(crate) fn app_unit_cpus(&self, id: u64) -> Option<CpuSet> {
        let app = self.apps.list.get(&id)?;
        if let Some(p) = &app.pinned {
            return Some(p.clone());
        }
        let island = app.unit_island.as_ref()?;
        let pins = self.apps.pins(island);
        if pins.is_empty() {
            return None;
        }
        let live = self
            .reg
            .spec()
            .island(island)
            .map(|i| self.island_cpus(i))?;
        let rest = live.difference(&pins);
        (!rest.is_empty()).then_some(rest)
    }

    /// The CPUs an application may run on, as its assignment says.
    pub(crate) fn app_run_cpus(&self, id: u64) -> CpuSet {
        if let Some(c) = self.app_unit_cpus(id) {
            return c;
        }
        self.apps
            .list
            .get(&id)
            .and_then(|a| a.grant.as_ref())
            .and_then(|g| self.reg.spec().island(&g.island))
            .map(|i| self.island_cpus(i))
            .unwrap_or_default()
    }

    /// `k` CPUs of `island` for application `id`: those it has there and
    /// no one else holds first, then the free ones from the highest id down
    /// (away from the low CPUs the system's own work tends to use).
    pub(crate) fn pick_app_cpus(&self, island: &Name, k: u32, id: u64) -> CpuSet {
        let Some(spec) = self.reg.spec().island(island) else {
            return CpuSet::new();
        };
        let live = self.island_cpus(spec);
        let others = self
            .apps
            .list
            .values()
            .filter(|a| a.id != id && a.unit_island.as_ref() == Some(island))
            .filter_map(|a| a.pinned.as_ref())
            .fold(CpuSet::new(), |acc, p| acc.union(p));
        let free = live.difference(&others);
        let own = self
            .apps
            .list
            .get(&id)
            .and_then(|a| a.pinned.clone())
            .unwrap_or_default()
            .intersection(&free);
        let mut out = CpuSet::new();
        let mut order: Vec<u32> = own.iter().collect();
        let mut rest: Vec<u32> = free.difference(&own).iter().collect();
        rest.reverse();
        order.extend(rest);
        for c in order.into_iter().take(k as usize) {
            out.insert(c);
        }
        if out.len() < k as usize {
            tracing::warn!(
                "app {id}: island {island} has {} free CPUs for {k} CPUs of its own",
                out.len()
            );
        }
        out
    }

    /// Writes an application unit's group as every writer merges it, if
    /// that differs from what was applied; a decision with `why`.
    pub(crate) fn write_app_group(&mut self, group: &GroupPath, why: Reason) -> Result<(), String> {
        let Some(base) = self.unit_settings(group) else {
            return Err(format!("{group} is not a unit"));
        };
        let settings = self.merge_app_unit(group, base);
        self.write_settings(group, settings, why)
    }

    /// Writes `settings` to `group` unless already applied.
    fn write_settings(
        &mut self,
        group: &GroupPath,
        settings: GroupSettings,
        why: Reason,
    ) -> Result<(), String> {
        let before = self.applied.get(group);
        if before == Some(&settings) {
            return Ok(());
        }
        let knobs = knob_diff(before, &settings);
        match self.env.backend.apply(group, &settings) {
            Ok(fallbacks) => {
                self.decide(
                    Action::ApplyGroup {
                        path: group.clone(),
                        knobs,
                    },
                    why,
                );
                self.applied.insert(group.clone(), settings);
                self.note_fallbacks(group, fallbacks);
                Ok(())
            }
            Err(e) => {
                self.decide(
                    Action::ApplyGroup {
                        path: group.clone(),
                        knobs,
                    },
                    Reason::KernelRefused {
                        error: e.to_string(),
                    },
                );
                Err(format!("{group}: {e}"))
            }
        }
    }

    /// Sets application `id`'s unit to `island` with this quota and memory
    /// in the registry; a `CreateUnit` decision when it had none there.
    /// Returns the unit's group.
    fn set_app_unit(
        &mut self,
        id: u64,
        island: &Name,
        quota: f64,
        memory: u64,
        why: &Reason,
    ) -> GroupPath {
        let name = crate::apps::unit_name(id);
        let same = self
            .reg
            .unit(name.as_str())
            .is_some_and(|(u, _)| &u.island == island);
        self.reg.remove_runtime_unit(name.as_str());
        self.reg
            .restore_runtime_unit(unit_spec(name.clone(), island.clone(), quota, memory));
        self.dirty = true;
        if !same {
            self.decide(
                Action::CreateUnit {
                    unit: name.to_string(),
                    island: island.to_string(),
                },
                why.clone(),
            );
        }
        if let Some(app) = self.apps.list.get_mut(&id) {
            app.unit_island = Some(island.clone());
        }
        GroupPath::unit(island, &name)
    }

    /// Moves application `id`'s process (and every other process of its
    /// old unit) into `group`. The process must still be the one that
    /// registered.
    fn move_app(
        &mut self,
        id: u64,
        from: Option<&GroupPath>,
        group: &GroupPath,
        why: &Reason,
    ) -> Result<(), UnitError> {
        let Some(app) = self.apps.list.get(&id) else {
            return Err(UnitError::Gone);
        };
        let (pid, start) = (app.pid, app.start_ticks);
        let info = match self.env.procs.info(pid) {
            Ok(i) if i.start_ticks == start => i,
            _ => return Err(UnitError::Gone),
        };
        let current = self.in_atoll(&info.cgroups);
        if current.as_ref() != Some(group) {
            self.move_into(&info, group, why.clone()).map_err(|e| {
                if e.is_gone() {
                    UnitError::Gone
                } else {
                    UnitError::Failed(format!("moving pid {pid} into {group}: {e}"))
                }
            })?;
        }
        if let Some(s) = self.seen.get_mut(&pid) {
            s.settled = true;
        }
        // Its children (and anything else in its old unit) come along.
        if let Some(old) = from.filter(|o| *o != group) {
            for p in self.env.backend.processes(old).unwrap_or_default() {
                if let Ok(child) = self.env.procs.info(p) {
                    if let Err(e) = self.move_into(&child, group, why.clone()) {
                        tracing::warn!("app {id}: moving pid {p} from {old} to {group}: {e}");
                    }
                }
            }
        }
        Ok(())
    }

    /// Thaws `group` if it was applied frozen (before its tasks leave it).
    fn thaw_group(&mut self, group: &GroupPath, why: &Reason) {
        let Some(s) = self.applied.get(group).filter(|s| s.frozen).cloned() else {
            return;
        };
        let s = GroupSettings { frozen: false, ..s };
        if let Err(e) = self.write_settings(group, s, why.clone()) {
            tracing::warn!("thawing {group}: {e}");
        }
    }

    /// Removes an empty group of atoll's (a decision), forgetting what was
    /// applied to it.
    fn remove_app_group(&mut self, group: &GroupPath, why: &Reason) {
        match self.env.backend.remove(group) {
            Ok(()) => {
                self.applied.remove(group);
                self.decide(
                    Action::RemoveGroup {
                        path: group.clone(),
                    },
                    why.clone(),
                );
            }
            Err(e) => tracing::warn!("removing {group}: {e}"),
        }
    }

    /// Runs application `id` with `grant`: in place when its unit is
    /// already in the grant's island (resumed if it waited), else in a new
    /// unit there (its process and its children moved, the old unit
    /// removed).
    pub(crate) fn place_app(
        &mut self,
        id: u64,
        grant: Grant,
        why: &Reason,
    ) -> Result<(), UnitError> {
        let Some(app) = self.apps.list.get(&id) else {
            return Err(UnitError::Gone);
        };
        let old_island = app.unit_island.clone();
        let name = crate::apps::unit_name(id);
        let old_group = old_island.as_ref().map(|i| GroupPath::unit(i, &name));
        let pinned = (grant.exclusive_cpus > 0)
            .then(|| self.pick_app_cpus(&grant.island, grant.exclusive_cpus, id));
        let island = grant.island.clone();
        let (quota, memory) = (grant.cpu_quota, grant.memory_bytes);
        if let Some(app) = self.apps.list.get_mut(&id) {
            app.pinned = pinned;
            app.frozen = false;
            app.unfrozen_wait = false;
            app.ever_ran = true;
            app.grant = Some(grant);
        }
        self.apps.recount_pins();
        if let Some(old) = old_group
            .as_ref()
            .filter(|_| old_island.as_ref() != Some(&island))
        {
            self.thaw_group(old, why);
        }
        let group = self.set_app_unit(id, &island, quota, memory, why);
        self.write_app_group(&group, why.clone())
            .map_err(UnitError::Failed)?;
        self.move_app(id, old_group.as_ref(), &group, why)?;
        if let Some(old) = old_group.filter(|o| *o != group) {
            self.remove_app_group(&old, why);
        }
        Ok(())
    }

    /// Suspends application `id` in its unit (creating the unit, with its
    /// smallest mode's quota, in the first island that mode may use when it
    /// has none): frozen where the backend has a freezer, else left running
    /// at that quota. Its CPUs of its own go back.
    pub(crate) fn suspend_app(&mut self, id: u64, why: &Reason) -> Result<(), UnitError> {
        let freezer = self.env.backend.capabilities().freezer;
        let Some(app) = self.apps.list.get(&id) else {
            return Err(UnitError::Gone);
        };
        let smallest = app
            .recipe
            .modes
            .iter()
            .min_by(|a, b| a.needs.charged_cpus().total_cmp(&b.needs.charged_cpus()));
        let quota = smallest.map_or(0.01, |m| m.needs.cpu_quota);
        let (island, memory) = match (&app.unit_island, &app.grant) {
            // It keeps its unit and its memory limit: its pages stay.
            (Some(i), Some(g)) => (i.clone(), g.memory_bytes),
            (Some(i), None) => (i.clone(), 0),
            (None, _) => {
                let caps = self.app_capacities();
                let allowed = |n: &Name| smallest.is_none_or(|m| m.needs.allows(n));
                match caps.iter().find(|c| allowed(&c.name)) {
                    Some(c) => (c.name.clone(), 0),
                    None => return Err(UnitError::Failed("no island applications may use".into())),
                }
            }
        };
        let had_unit = app.unit_island.is_some();
        if let Some(app) = self.apps.list.get_mut(&id) {
            app.grant = None;
            app.pinned = None;
            app.frozen = freezer;
            app.unfrozen_wait = !freezer;
        }
        self.apps.recount_pins();
        let group = self.set_app_unit(id, &island, quota, memory, why);
        self.write_app_group(&group, why.clone())
            .map_err(UnitError::Failed)?;
        if !had_unit {
            self.move_app(id, None, &group, why)?;
        }
        Ok(())
    }

    /// Resizes application `id` in place (another mode on the same island).
    pub(crate) fn resize_app(
        &mut self,
        id: u64,
        grant: Grant,
        why: &Reason,
    ) -> Result<(), UnitError> {
        let pinned = (grant.exclusive_cpus > 0)
            .then(|| self.pick_app_cpus(&grant.island, grant.exclusive_cpus, id));
        let island = grant.island.clone();
        let (quota, memory) = (grant.cpu_quota, grant.memory_bytes);
        let Some(app) = self.apps.list.get_mut(&id) else {
            return Err(UnitError::Gone);
        };
        if app.unit_island.as_ref() != Some(&island) {
            // Not where the schedule thinks it is: place it properly.
            return self.place_app(id, grant, why);
        }
        app.pinned = pinned;
        app.grant = Some(grant);
        self.apps.recount_pins();
        let group = self.set_app_unit(id, &island, quota, memory, why);
        self.write_app_group(&group, why.clone())
            .map_err(UnitError::Failed)
    }

    /// Forgets application `id`: its unit's processes go back where they
    /// came from (thawed first), the unit and its group are removed.
    pub(crate) fn remove_app(&mut self, id: u64, why: Reason) {
        let Some(app) = self.apps.list.remove(&id) else {
            return;
        };
        self.apps.recount_pins();
        let Some(island) = app.unit_island else {
            return;
        };
        let name = crate::apps::unit_name(id);
        let group = GroupPath::unit(&island, &name);
        self.thaw_group(&group, &why);
        self.release_group(&group, why.clone());
        self.remove_app_group(&group, &why);
        if self.reg.remove_runtime_unit(name.as_str()) {
            self.decide(
                Action::RemoveUnit {
                    unit: name.to_string(),
                },
                why,
            );
        }
        self.dirty = true;
    }
}
