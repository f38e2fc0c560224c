//! The applications' step of each epoch: exits, planning when the batcher
//! is due, the schedule's changes in order, and the re-assertion of what
//! only this module knows (suspensions, CPUs of exclusive modes).

use atoll_core::awm::{AppId, AppState, Change, ChangeKind, Grant, IslandCapacity};
use atoll_core::decision::{Action, Reason};
use atoll_core::plan::GroupPath;
use atoll_core::spec::is_app_unit_name;
use atoll_proto::apps::AppRunState;

use super::units::UnitError;
use crate::controller::Controller;

impl Controller {
    /// One epoch of application management. Nothing to do costs nothing.
    pub(crate) fn manage_apps(&mut self) {
        self.sweep_stale_app_units();
        if self.apps.list.is_empty() && !self.apps.batcher.pending() {
            return;
        }
        self.reap_apps();
        let now = self.now();
        if self.apps.batcher.due(now) {
            self.plan_apps();
        }
        self.reassert_app_units();
    }

    /// What each island applications may use offers them now: the config's
    /// capacities ([`PlatformSpec::app_capacities`]) with the island's CPUs
    /// as coordination has them.
    ///
    /// [`PlatformSpec::app_capacities`]: atoll_core::spec::PlatformSpec::app_capacities
    pub(crate) fn app_capacities(&self) -> Vec<IslandCapacity> {
        let spec = self.reg.spec();
        let mut caps = spec.app_capacities(&self.opts.topology);
        for c in &mut caps {
            if let Some(i) = spec.island(&c.name) {
                let live = self.island_cpus(i).len() as f64;
                c.cpus = (c.cpus + live - i.cpus.len() as f64).max(0.0);
            }
        }
        caps
    }

    /// Removes applications whose process exited.
    fn reap_apps(&mut self) {
        let gone: Vec<(u64, String)> = self
            .apps
            .list
            .values()
            .filter(|a| self.env.procs.comm(a.pid).is_err())
            .map(|a| {
                (
                    a.id,
                    format!("app {} ({}): pid {} exited", a.id, a.recipe.name, a.pid),
                )
            })
            .collect();
        let now = self.now();
        for (id, detail) in gone {
            tracing::info!("{detail}");
            self.remove_app(id, Reason::Apps { detail });
            self.apps.batcher.event(now);
        }
    }

    /// A planning run: every application, from scratch, on what the islands
    /// offer; then the changes, in order.
    fn plan_apps(&mut self) {
        self.apps.batcher.planned();
        let caps = self.app_capacities();
        let states: Vec<AppState> = self
            .apps
            .list
            .values()
            .map(|a| AppState {
                app: AppId(a.id),
                recipe: a.recipe.clone(),
                current: a.current(),
                goal_gap: a.goal_gap,
                waiting: a.waiting,
            })
            .collect();
        let schedule = match self.apps.planner.plan(&caps, &states) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("application policy: {e}");
                return;
            }
        };
        self.apps.runs += 1;
        tracing::debug!(
            "application policy: {} running, {} waiting, {} changes",
            schedule.grants.len(),
            schedule.blocked.len(),
            schedule.changes.len()
        );
        for a in self.apps.list.values_mut() {
            a.planned_gap = a.goal_gap;
            a.waiting = if schedule.is_blocked(AppId(a.id)) {
                a.waiting.saturating_add(1)
            } else {
                0
            };
        }
        for change in &schedule.changes {
            let grant = schedule.grant(change.app).cloned();
            self.apply_app_change(change, grant);
        }
        let ids: Vec<u64> = self.apps.list.keys().copied().collect();
        for id in ids {
            self.refresh_assignment(id);
        }
    }

    /// Carries out one change of a schedule; its text is the reason of
    /// every decision it makes.
    fn apply_app_change(&mut self, c: &Change, grant: Option<Grant>) {
        let id = c.app.0;
        let Some(app) = self.apps.list.get(&id) else {
            return;
        };
        let why = Reason::Apps {
            detail: c.to_string(),
        };
        let counts = app.ever_ran && c.kind != ChangeKind::Wait;
        let done = match (c.kind, grant) {
            (ChangeKind::Wait, _) if app.unit_island.is_some() => {
                // Still waiting: its unit is suspended already.
                self.note_wait(id, c);
                return;
            }
            (ChangeKind::Wait | ChangeKind::Release, _) => {
                self.note_wait(id, c);
                self.suspend_app(id, &why)
            }
            (ChangeKind::Shrink | ChangeKind::Grow | ChangeKind::Reshape, Some(g)) => {
                self.resize_app(id, g, &why)
            }
            (ChangeKind::Move | ChangeKind::Grant, Some(g)) => self.place_app(id, g, &why),
            (kind, None) => {
                tracing::warn!("app {id}: a {kind:?} change without a grant");
                return;
            }
        };
        match done {
            Ok(()) => {
                if let Some(app) = self.apps.list.get_mut(&id) {
                    if counts {
                        app.reconfigurations += 1;
                    }
                    app.restart_measurement();
                }
            }
            Err(UnitError::Gone) => {
                let detail = format!("app {id} ({}): its process is gone", c.name);
                self.remove_app(id, Reason::Apps { detail });
                let now = self.now();
                self.apps.batcher.event(now);
            }
            Err(UnitError::Failed(e)) => {
                tracing::warn!("{c}: {e}");
            }
        }
    }

    /// Why application `id` waits, for its assignment.
    fn note_wait(&mut self, id: u64, c: &Change) {
        let freezer = self.env.backend.capabilities().freezer;
        let Some(app) = self.apps.list.get_mut(&id) else {
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
    fn refresh_assignment(&mut self, id: u64) {
        let Some(app) = self.apps.list.get(&id) else {
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
                cpus: self.app_run_cpus(id),
                threads: g.threads,
                memory_bytes: g.memory_bytes,
            },
            None => AppRunState::Waiting {
                reason: app.reason.clone(),
            },
        };
        let Some(app) = self.apps.list.get_mut(&id) else {
            return;
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

    /// Writes again the units whose suspension or CPUs another writer (the
    /// periodic repair pass, a unit created through the API) put back to
    /// the plan's values, and refreshes assignments whose CPUs moved.
    fn reassert_app_units(&mut self) {
        let stale: Vec<(u64, GroupPath)> = self
            .apps
            .list
            .values()
            .filter_map(|a| {
                let group = a.group()?;
                let want = (a.frozen, self.app_unit_cpus(a.id));
                let have = self.applied.get(&group).map(|s| (s.frozen, s.cpus.clone()));
                (have.as_ref() != Some(&want)).then_some((a.id, group))
            })
            .collect();
        for (id, group) in stale {
            let Some(app) = self.apps.list.get(&id) else {
                continue;
            };
            let detail = format!(
                "app {id} ({}): {} as the schedule has it",
                app.recipe.name,
                if app.frozen {
                    "suspended"
                } else {
                    "its unit's CPUs"
                }
            );
            if let Err(e) = self.write_app_group(&group, Reason::Apps { detail }) {
                tracing::warn!("app {id}: {e}");
            }
            self.refresh_assignment(id);
        }
    }

    /// Once: units `app-<id>` that no registered application holds (a
    /// previous run's: applications register again after a restart) give
    /// their processes back and are removed.
    pub(crate) fn sweep_stale_app_units(&mut self) {
        if self.apps.swept {
            return;
        }
        self.apps.swept = true;
        let stale: Vec<(String, GroupPath)> = self
            .reg
            .runtime_units()
            .iter()
            .filter(|u| is_app_unit_name(u.name.as_str()))
            .map(|u| (u.name.to_string(), GroupPath::unit(&u.island, &u.name)))
            .filter(|(_, g)| self.apps.at(g).is_none())
            .collect();
        for (unit, group) in stale {
            let why = Reason::Recover {
                detail: format!(
                    "unit {unit} held an application of a previous run; it must register again"
                ),
            };
            self.release_group(&group, why.clone());
            if self.env.backend.remove(&group).is_ok() {
                self.applied.remove(&group);
                self.decide(Action::RemoveGroup { path: group }, why.clone());
            }
            self.reg.remove_runtime_unit(&unit);
            self.decide(Action::RemoveUnit { unit }, why);
            self.dirty = true;
        }
    }
}
