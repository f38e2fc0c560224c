//! The applications' step of each epoch: exits, planning when the batcher
//! is due, and the schedule's changes in order.

use std::collections::BTreeMap;

use atoll_core::awm::{AppId, AppState, Change, ChangeKind, Grant, IslandCapacity};
use atoll_core::decision::{Action, Reason};
use atoll_core::plan::GroupPath;
use atoll_core::spec::{is_app_unit_name, PlatformSpec};
use atoll_core::topology::Topology;
use atoll_core::{CpuSet, Name};
use atoll_proto::apps::AppRunState;

use super::units::UnitError;
use super::{Apps, Kit};

impl Apps {
    /// One epoch of application management. Nothing to do costs nothing.
    /// `freezer`: the backend can suspend a group.
    pub(crate) fn step(&mut self, freezer: bool, kit: &mut Kit<'_, '_>) {
        self.sweep_stale_units(kit);
        if self.list.is_empty() && !self.batcher.pending() {
            return;
        }
        self.reap(kit);
        if self.batcher.due(kit.p.now) {
            self.plan(freezer, kit);
        }
        self.refresh_moved_cpus(kit.island_cpus);
    }

    /// What each island applications may use offers them now: the config's
    /// capacities ([`PlatformSpec::app_capacities`]) with the island's CPUs
    /// as coordination has them.
    pub(crate) fn capacities(
        &self,
        spec: &PlatformSpec,
        topo: &Topology,
        island_cpus: &BTreeMap<Name, CpuSet>,
    ) -> Vec<IslandCapacity> {
        let mut caps = spec.app_capacities(topo);
        for c in &mut caps {
            if let (Some(i), Some(live)) = (spec.island(&c.name), island_cpus.get(&c.name)) {
                c.cpus = (c.cpus + live.len() as f64 - i.cpus.len() as f64).max(0.0);
            }
        }
        caps
    }

    /// Removes applications whose process exited.
    fn reap(&mut self, kit: &mut Kit<'_, '_>) {
        let gone: Vec<(u64, String)> = self
            .list
            .values()
            .filter(|a| kit.p.procs.comm(a.pid).is_err())
            .map(|a| {
                (
                    a.id,
                    format!("app {} ({}): pid {} exited", a.id, a.recipe.name, a.pid),
                )
            })
            .collect();
        for (id, detail) in gone {
            tracing::info!("{detail}");
            self.remove(id, Reason::Apps { detail }, kit);
            self.batcher.event(kit.p.now);
        }
    }

    /// A planning run: every application, from scratch, on what the islands
    /// offer; then the changes, in order.
    fn plan(&mut self, freezer: bool, kit: &mut Kit<'_, '_>) {
        self.batcher.planned();
        let caps = self.capacities(kit.p.reg.spec(), kit.topo, kit.island_cpus);
        self.prepare_power();
        let states: Vec<AppState> = self
            .list
            .values()
            .map(|a| AppState {
                app: AppId(a.id),
                recipe: self.with_learned_power(&a.recipe),
                current: a.current(),
                goal_gap: a.goal_gap,
                waiting: a.waiting,
            })
            .collect();
        let schedule = match self.planner.plan(&caps, &states) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("application policy: {e}");
                return;
            }
        };
        self.runs += 1;
        tracing::debug!(
            "application policy: {} running, {} waiting, {} changes",
            schedule.grants.len(),
            schedule.blocked.len(),
            schedule.changes.len()
        );
        for a in self.list.values_mut() {
            a.planned_gap = a.goal_gap;
            a.waiting = if schedule.is_blocked(AppId(a.id)) {
                a.waiting.saturating_add(1)
            } else {
                0
            };
        }
        for change in &schedule.changes {
            let grant = schedule.grant(change.app).cloned();
            self.apply_change(change, grant, freezer, kit);
        }
        let ids: Vec<u64> = self.list.keys().copied().collect();
        for id in ids {
            self.refresh_assignment(id, kit.island_cpus);
        }
    }

    /// Carries out one change of a schedule; its text is the reason of
    /// every decision it makes.
    fn apply_change(
        &mut self,
        c: &Change,
        grant: Option<Grant>,
        freezer: bool,
        kit: &mut Kit<'_, '_>,
    ) {
        let id = c.app.0;
        let Some(app) = self.list.get(&id) else {
            return;
        };
        let why = Reason::Apps {
            detail: c.to_string(),
        };
        let counts = app.ever_ran && c.kind != ChangeKind::Wait;
        let done = match (c.kind, grant) {
            (ChangeKind::Wait, _) if app.unit_island.is_some() => {
                // Still waiting: its unit is suspended already.
                self.note_wait(id, c, freezer);
                return;
            }
            (ChangeKind::Wait | ChangeKind::Release, _) => {
                self.note_wait(id, c, freezer);
                self.suspend(id, &why, freezer, kit)
            }
            (ChangeKind::Shrink | ChangeKind::Grow | ChangeKind::Reshape, Some(g)) => {
                self.resize(id, g, &why, kit)
            }
            (ChangeKind::Move | ChangeKind::Grant, Some(g)) => self.place(id, g, &why, kit),
            (kind, None) => {
                tracing::warn!("app {id}: a {kind:?} change without a grant");
                return;
            }
        };
        match done {
            Ok(()) => {
                if let Some(app) = self.list.get_mut(&id) {
                    if counts {
                        app.reconfigurations += 1;
                    }
                    app.restart_measurement();
                }
            }
            Err(UnitError::Gone) => {
                let detail = format!("app {id} ({}): its process is gone", c.name);
                self.remove(id, Reason::Apps { detail }, kit);
                self.batcher.event(kit.p.now);
            }
            Err(e) => tracing::warn!("{c}: {e}"),
        }
    }

    /// Why application `id` waits, for its assignment.
    fn note_wait(&mut self, id: u64, c: &Change, freezer: bool) {
        let Some(app) = self.list.get_mut(&id) else {
            return;
        };
        let mut reason = match &c.blocked {
            Some(b) => b.to_string(),
            None => "blocked".to_string(),
        };
        if !freezer {
            reason.push_str(
                "; not suspended (no cgroup freezer): it runs at its smallest mode's quota",
            );
        }
        app.reason = reason;
    }

    /// Rebuilds application `id`'s assignment; a change of what it should
    /// do bumps its generation (a new reason for waiting does not).
    pub(crate) fn refresh_assignment(&mut self, id: u64, island_cpus: &BTreeMap<Name, CpuSet>) {
        let cpus = self.run_cpus(id, island_cpus);
        let Some(app) = self.list.get_mut(&id) else {
            return;
        };
        let new = match &app.grant {
            Some(g) => AppRunState::Running {
                mode: g.mode,
                mode_name: app
                    .recipe
                    .mode(g.mode)
                    .map(|m| m.name.clone())
                    .unwrap_or_default(),
                island: g.island.to_string(),
                cpu_quota: g.cpu_quota,
                cpus,
                threads: g.threads,
                memory_bytes: g.memory_bytes,
            },
            None => AppRunState::Waiting {
                reason: app.reason.clone(),
            },
        };
        let changed = match (&app.state, &new) {
            (AppRunState::Waiting { .. }, AppRunState::Waiting { .. }) => app.generation == 0,
            (old, new) => old != new,
        };
        if changed {
            app.generation += 1;
        }
        app.state = new;
    }

    /// Refreshes the assignments whose CPUs moved (coordination moved the
    /// island's CPUs, or a neighbour took CPUs of its own).
    fn refresh_moved_cpus(&mut self, island_cpus: &BTreeMap<Name, CpuSet>) {
        let stale: Vec<u64> = self
            .list
            .values()
            .filter(|a| match &a.state {
                AppRunState::Running { cpus, .. } => *cpus != self.run_cpus(a.id, island_cpus),
                AppRunState::Waiting { .. } => false,
            })
            .map(|a| a.id)
            .collect();
        for id in stale {
            self.refresh_assignment(id, island_cpus);
        }
    }

    /// Once: units `app-<id>` that no registered application holds (a
    /// previous run's: applications register again after a restart) give
    /// their processes back and are removed.
    pub(crate) fn sweep_stale_units(&mut self, kit: &mut Kit<'_, '_>) {
        if self.swept {
            return;
        }
        self.swept = true;
        let stale: Vec<(String, GroupPath)> = kit
            .p
            .reg
            .runtime_units()
            .iter()
            .filter(|u| is_app_unit_name(u.name.as_str()))
            .map(|u| (u.name.to_string(), GroupPath::unit(&u.island, &u.name)))
            .filter(|(_, g)| self.at(g).is_none())
            .collect();
        for (unit, group) in stale {
            let why = Reason::Recover {
                detail: format!(
                    "unit {unit} held an application of a previous run; it must register again"
                ),
            };
            kit.p.release_group(&group, why.clone());
            if let Err(e) =
                kit.compose
                    .remove(&group, kit.p.backend, kit.p.log, kit.p.now, why.clone())
            {
                tracing::warn!("removing {group}: {e}");
            }
            kit.p.reg.remove_runtime_unit(&unit);
            kit.p.decide(Action::RemoveUnit { unit }, why);
        }
    }
}
