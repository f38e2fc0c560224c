//! The API's `app_*` requests and `apps`.
//!
//! Permissions follow the rest of the API: a caller may register a process
//! it owns (root: any process); only root or the application's owner may
//! poll, report and leave; anyone may list. A recipe sent along by a
//! caller other than root never gets a better priority than the worst of
//! the config's recipes, so users cannot jump the queue the operator set.

use std::collections::VecDeque;
use std::sync::Arc;

use atoll_core::decision::Reason;
use atoll_proto::apps::{AppRunState, AppStatus, RecipeRef};
use atoll_proto::{ErrorCode, Reply, Request};

use super::App;
use crate::adopt::ApiFailure;
use crate::command::Caller;
use crate::controller::Controller;

fn bad(message: String) -> ApiFailure {
    (ErrorCode::BadRequest, message)
}

impl Controller {
    /// Answers an `app_*` or `apps` request.
    pub(crate) fn api_apps(
        &mut self,
        caller: Caller,
        request: Request,
    ) -> Result<Reply, ApiFailure> {
        self.sweep_stale_app_units();
        let summary = request.summary();
        match request {
            Request::AppRegister { recipe, pid } => self.app_register(caller, recipe, pid),
            Request::AppPoll { app, after: _ } => {
                Ok(Reply::AppAssignment(self.app_of(caller, app)?.assignment()))
            }
            Request::AppReport {
                app,
                cycles,
                goal_cps,
            } => self.app_report(caller, app, cycles, goal_cps),
            Request::AppDone { app } => {
                self.app_of(caller, app)?;
                let why = Reason::Api {
                    uid: caller.uid,
                    request: summary,
                };
                self.remove_app(app, why);
                let now = self.now();
                self.apps.batcher.event(now);
                Ok(Reply::AppDone { app })
            }
            Request::Apps {} => Ok(Reply::Apps {
                apps: self.app_statuses(),
            }),
            other => Err(bad(format!(
                "{}: not a request about applications",
                other.summary()
            ))),
        }
    }

    /// Planning runs made so far (a burst of events gives one).
    pub fn app_planning_runs(&self) -> u64 {
        self.apps.runs
    }

    /// Application `id`, if the caller may act on it.
    fn app_of(&self, caller: Caller, id: u64) -> Result<&App, ApiFailure> {
        let app = self
            .apps
            .list
            .get(&id)
            .ok_or_else(|| (ErrorCode::NotFound, format!("no application {id}")))?;
        if !caller.is_root() && caller.uid != app.uid {
            return Err((
                ErrorCode::PermissionDenied,
                format!(
                    "application {id} (pid {}) belongs to uid {}, not to the caller (uid {})",
                    app.pid, app.uid, caller.uid
                ),
            ));
        }
        Ok(app)
    }

    fn app_register(
        &mut self,
        caller: Caller,
        recipe: RecipeRef,
        pid: Option<u32>,
    ) -> Result<Reply, ApiFailure> {
        let pid = match pid {
            Some(p) => p,
            None if caller.pid > 0 => caller.pid as u32,
            None => return Err(bad("no pid given, and the caller's pid is unknown".into())),
        };
        if pid == self.opts.self_pid {
            return Err(bad(format!("pid {pid} is atoll itself")));
        }
        let info = self.process_of(caller, pid)?;
        if let Some(a) = self.apps.by_pid(pid) {
            return Err(bad(format!(
                "pid {pid} is already registered as application {}",
                a.id
            )));
        }
        let spec = self.reg.spec();
        let recipe = match recipe {
            RecipeRef::Named(name) => spec.apps.recipe(&name).cloned().ok_or_else(|| {
                (
                    ErrorCode::NotFound,
                    format!(
                        "no recipe named {name:?} in the platform description ([recipe.{name}])"
                    ),
                )
            })?,
            RecipeRef::Inline(mut r) => {
                r.validate_for(&self.app_capacities())
                    .map_err(|e| bad(e.to_string()))?;
                if !caller.is_root() {
                    if let Some(worst) = spec.apps.recipes.iter().map(|c| c.priority).max() {
                        r.priority = r.priority.max(worst);
                    }
                }
                r
            }
        };
        let reg = &self.reg;
        let id = self.apps.take_id(|name| reg.unit(name).is_some());
        let app = App {
            id,
            recipe: Arc::new(recipe),
            pid,
            start_ticks: info.start_ticks,
            uid: info.uid,
            generation: 0,
            state: AppRunState::Waiting {
                reason: "registered: waiting for the next planning run".into(),
            },
            grant: None,
            unit_island: None,
            frozen: false,
            unfrozen_wait: false,
            pinned: None,
            waiting: 0,
            reason: "registered: waiting for the next planning run".into(),
            ever_ran: false,
            goal_gap: 0.0,
            planned_gap: 0.0,
            goal_cps: None,
            rate: None,
            samples: VecDeque::new(),
            reconfigurations: 0,
        };
        tracing::info!(
            "application {id} ({}) registered: pid {pid} ({}), uid {}",
            app.recipe.name,
            info.comm,
            info.uid
        );
        let assignment = app.assignment();
        self.apps.list.insert(id, app);
        let now = self.now();
        self.apps.batcher.event(now);
        Ok(Reply::AppRegistered {
            app: id,
            assignment,
        })
    }

    fn app_report(
        &mut self,
        caller: Caller,
        id: u64,
        cycles: u64,
        goal_cps: Option<f64>,
    ) -> Result<Reply, ApiFailure> {
        self.app_of(caller, id)?;
        if let Some(g) = goal_cps.filter(|g| !g.is_finite() || *g < 0.0) {
            return Err(bad(format!(
                "goal_cps = {g}: must be a finite number of cycles per second >= 0 (0: no goal)"
            )));
        }
        let now = self.now();
        let deadband = self.apps.deadband;
        let Some(app) = self.apps.list.get_mut(&id) else {
            return Err((ErrorCode::NotFound, format!("no application {id}")));
        };
        let replan = app.record(now, cycles, goal_cps, deadband);
        let goal_gap = app.goal_gap;
        if replan {
            tracing::debug!("application {id}: goal gap {goal_gap:.3}: planning again");
            self.apps.batcher.event(now);
        }
        Ok(Reply::AppReported { app: id, goal_gap })
    }

    /// Every application, by id, for `atoll apps`.
    pub(crate) fn app_statuses(&self) -> Vec<AppStatus> {
        self.apps
            .list
            .values()
            .map(|a| AppStatus {
                app: a.id,
                name: a.recipe.name.to_string(),
                priority: a.recipe.priority,
                pid: a.pid,
                unit: a.group().map(|g| g.to_string()),
                assignment: a.assignment(),
                goal_cps: a.goal_cps,
                cycles_per_s: a.rate,
                goal_gap: a.goal_gap,
                reconfigurations: a.reconfigurations,
            })
            .collect()
    }
}
