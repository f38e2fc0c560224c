//! An application's unit: created, resized, moved between islands,
//! suspended and removed.
//!
//! Each application runs in a runtime unit `app-<id>` of the island of its
//! grant. What the unit's entitlement carries (`cpu_cap` = the working
//! mode's quota, `memory_max` = its memory) is in the plan like any unit's;
//! what it does not carry, the suspension (`frozen`) and the CPUs of
//! exclusive modes, is the `apps` layer ([`super::Apps`]'s `Layer`).
//!
//! Changing a unit touches its group; the composer writes it at the next
//! flush. A process moves into a unit only once the unit's group exists,
//! so moves wait ([`Apps::after_flush`]), and so does removing the unit
//! the application left.

use atoll_core::awm::Grant;
use atoll_core::decision::{Action, Reason};
use atoll_core::plan::GroupPath;
use atoll_core::spec::{Entitlement, MemoryEntitlement, UnitSpec};
use atoll_core::{CpuSet, Name};

use super::{unit_name, Apps, Kit, PendingMove};

/// Why a unit operation failed: the process is gone (the application is
/// then removed), or the unit could not be made or entered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UnitError {
    /// The application's process exited (or its pid was reused).
    #[error("the process is gone")]
    Gone,
    /// No island may hold the application's smallest mode.
    #[error("no island applications may use")]
    NoIsland,
    /// The process could not be moved into its unit.
    #[error("moving pid {pid} into {group}: {source}")]
    Move {
        /// The process.
        pid: u32,
        /// Its unit's group.
        group: GroupPath,
        /// What the kernel said.
        #[source]
        source: Box<atoll_core::backend::BackendError>,
    },
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

impl Apps {
    /// `k` CPUs of `island` for application `id`: those it has there and
    /// no one else holds first, then the free ones from the highest id down
    /// (away from the low CPUs the system's own work tends to use).
    pub(crate) fn pick_cpus(&self, live: &CpuSet, island: &Name, k: u32, id: u64) -> CpuSet {
        let others = self
            .list
            .values()
            .filter(|a| a.id != id && a.unit_island.as_ref() == Some(island))
            .filter_map(|a| a.pinned.as_ref())
            .fold(CpuSet::new(), |acc, p| acc.union(p));
        let free = live.difference(&others);
        let own = self
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
        let want = usize::try_from(k).unwrap_or(usize::MAX);
        for c in order.into_iter().take(want) {
            out.insert(c);
        }
        if out.len() < want {
            tracing::warn!(
                "app {id}: island {island} has {} free CPUs for {k} CPUs of its own",
                out.len()
            );
        }
        out
    }

    /// The CPUs of its own an exclusive grant gives application `id`.
    fn pinned_for(&self, grant: &Grant, id: u64, kit: &Kit<'_, '_>) -> Option<CpuSet> {
        (grant.exclusive_cpus > 0).then(|| {
            let live = kit
                .island_cpus
                .get(&grant.island)
                .cloned()
                .unwrap_or_default();
            self.pick_cpus(&live, &grant.island, grant.exclusive_cpus, id)
        })
    }

    /// Sets application `id`'s unit to `island` with this quota and memory
    /// in the registry, and touches its group; a `CreateUnit` decision when
    /// it had none there. Returns the unit's group.
    fn set_unit(
        &mut self,
        id: u64,
        island: &Name,
        quota: f64,
        memory: u64,
        why: &Reason,
        kit: &mut Kit<'_, '_>,
    ) -> GroupPath {
        let name = unit_name(id);
        let same = kit
            .p
            .reg
            .unit(name.as_str())
            .is_some_and(|(u, _)| &u.island == island);
        if !same {
            kit.p.reg.remove_runtime_unit(name.as_str());
            kit.p.decide(
                Action::CreateUnit {
                    unit: name.to_string(),
                    island: island.to_string(),
                },
                why.clone(),
            );
        }
        kit.p
            .reg
            .set_runtime_unit(unit_spec(name.clone(), island.clone(), quota, memory));
        if let Some(app) = self.list.get_mut(&id) {
            app.unit_island = Some(island.clone());
        }
        let group = GroupPath::unit(island, &name);
        kit.compose.touch(group.clone(), why.clone());
        group
    }

    /// Runs application `id` with `grant`: in place when its unit is
    /// already in the grant's island (resumed if it waited), else in a new
    /// unit there (its process and its children moved, the old unit
    /// removed, once the new one is written).
    pub(crate) fn place(
        &mut self,
        id: u64,
        grant: Grant,
        why: &Reason,
        kit: &mut Kit<'_, '_>,
    ) -> Result<(), UnitError> {
        let Some(app) = self.list.get(&id) else {
            return Err(UnitError::Gone);
        };
        let old_island = app.unit_island.clone();
        let old_group = old_island
            .as_ref()
            .map(|i| GroupPath::unit(i, &unit_name(id)));
        let pinned = self.pinned_for(&grant, id, kit);
        let island = grant.island.clone();
        let (quota, memory) = (grant.cpu_quota, grant.memory_bytes);
        if let Some(app) = self.list.get_mut(&id) {
            app.pinned = pinned;
            app.frozen = false;
            app.unfrozen_wait = false;
            app.ever_ran = true;
            app.grant = Some(grant);
        }
        self.recount_pins();
        let group = self.set_unit(id, &island, quota, memory, why, kit);
        self.pending.push(PendingMove {
            id,
            from: old_group,
            to: group,
            why: why.clone(),
        });
        Ok(())
    }

    /// Suspends application `id` in its unit (creating the unit, with its
    /// smallest mode's quota, in the first island that mode may use when it
    /// has none): frozen where the backend has a freezer, else left running
    /// at that quota. Its CPUs of its own go back.
    pub(crate) fn suspend(
        &mut self,
        id: u64,
        why: &Reason,
        freezer: bool,
        kit: &mut Kit<'_, '_>,
    ) -> Result<(), UnitError> {
        let Some(app) = self.list.get(&id) else {
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
                let caps = self.capacities(kit.p.reg.spec(), kit.topo, kit.island_cpus);
                let allowed = |n: &Name| smallest.is_none_or(|m| m.needs.allows(n));
                match caps.iter().find(|c| allowed(&c.name)) {
                    Some(c) => (c.name.clone(), 0),
                    None => return Err(UnitError::NoIsland),
                }
            }
        };
        let had_unit = app.unit_island.is_some();
        if let Some(app) = self.list.get_mut(&id) {
            app.grant = None;
            app.pinned = None;
            app.frozen = freezer;
            app.unfrozen_wait = !freezer;
        }
        self.recount_pins();
        let group = self.set_unit(id, &island, quota, memory, why, kit);
        if !had_unit {
            self.pending.push(PendingMove {
                id,
                from: None,
                to: group,
                why: why.clone(),
            });
        }
        Ok(())
    }

    /// Resizes application `id` in place (another mode on the same island).
    pub(crate) fn resize(
        &mut self,
        id: u64,
        grant: Grant,
        why: &Reason,
        kit: &mut Kit<'_, '_>,
    ) -> Result<(), UnitError> {
        let pinned = self.pinned_for(&grant, id, kit);
        let island = grant.island.clone();
        let (quota, memory) = (grant.cpu_quota, grant.memory_bytes);
        let Some(app) = self.list.get_mut(&id) else {
            return Err(UnitError::Gone);
        };
        if app.unit_island.as_ref() != Some(&island) {
            // Not where the schedule thinks it is: place it properly.
            return self.place(id, grant, why, kit);
        }
        app.pinned = pinned;
        app.grant = Some(grant);
        self.recount_pins();
        self.set_unit(id, &island, quota, memory, why, kit);
        Ok(())
    }

    /// Carries out the moves that waited for their units' groups: the old
    /// unit thawed, the process (and the rest of the old unit) moved, the
    /// old unit's group removed. Returns the applications whose process
    /// was gone (they are removed).
    pub(crate) fn after_flush(&mut self, kit: &mut Kit<'_, '_>) -> Vec<u64> {
        let mut gone = Vec::new();
        for m in std::mem::take(&mut self.pending) {
            let old = m.from.clone().filter(|o| *o != m.to);
            if let Some(old) = &old {
                kit.compose
                    .thaw(old, kit.p.backend, kit.p.log, kit.p.now, m.why.clone());
            }
            match self.move_app(m.id, old.as_ref(), &m.to, &m.why, kit) {
                Ok(()) => {}
                Err(UnitError::Gone) => gone.push(m.id),
                Err(e) => tracing::warn!("app {}: {e}", m.id),
            }
            if let Some(old) = &old {
                if let Err(e) =
                    kit.compose
                        .remove(old, kit.p.backend, kit.p.log, kit.p.now, m.why.clone())
                {
                    tracing::warn!("removing {old}: {e}");
                }
            }
        }
        for id in &gone {
            let detail = format!("app {id}: its process is gone");
            self.remove(*id, Reason::Apps { detail }, kit);
            self.batcher.event(kit.p.now);
        }
        gone
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
        kit: &mut Kit<'_, '_>,
    ) -> Result<(), UnitError> {
        let Some(app) = self.list.get(&id) else {
            return Err(UnitError::Gone);
        };
        let (pid, start) = (app.pid, app.start_ticks);
        let info = match kit.p.procs.info(pid) {
            Ok(i) if i.start_ticks == start => i,
            _ => return Err(UnitError::Gone),
        };
        let current = kit.p.in_atoll(&info.cgroups);
        if current.as_ref() != Some(group) {
            kit.p.move_into(&info, group, why.clone()).map_err(|e| {
                if e.is_gone() {
                    UnitError::Gone
                } else {
                    UnitError::Move {
                        pid,
                        group: group.clone(),
                        source: Box::new(e),
                    }
                }
            })?;
        }
        // Its children (and anything else in its old unit) come along.
        if let Some(old) = from {
            for p in kit.p.backend.processes(old).unwrap_or_default() {
                if let Ok(child) = kit.p.procs.info(p) {
                    if let Err(e) = kit.p.move_into(&child, group, why.clone()) {
                        tracing::warn!("app {id}: moving pid {p} from {old} to {group}: {e}");
                    }
                }
            }
        }
        Ok(())
    }

    /// Forgets application `id`: its unit's processes go back where they
    /// came from (thawed first), the unit and its group are removed.
    pub(crate) fn remove(&mut self, id: u64, why: Reason, kit: &mut Kit<'_, '_>) {
        let Some(app) = self.list.remove(&id) else {
            return;
        };
        self.pending.retain(|m| m.id != id);
        self.recount_pins();
        let Some(island) = app.unit_island else {
            return;
        };
        let name = unit_name(id);
        let group = GroupPath::unit(&island, &name);
        kit.compose
            .thaw(&group, kit.p.backend, kit.p.log, kit.p.now, why.clone());
        kit.p.release_group(&group, why.clone());
        if let Err(e) = kit
            .compose
            .remove(&group, kit.p.backend, kit.p.log, kit.p.now, why.clone())
        {
            tracing::warn!("removing {group}: {e}");
        }
        if kit.p.reg.remove_runtime_unit(name.as_str()) {
            kit.p.decide(
                Action::RemoveUnit {
                    unit: name.to_string(),
                },
                why,
            );
        }
    }
}
