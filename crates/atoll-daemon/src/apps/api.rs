//! The API's `app_*` requests and `apps`.
//!
//! Permissions follow the rest of the API: a caller may register a process
//! it owns (root: any process); only root or the application's owner may
//! poll, report and leave; anyone may list. A recipe sent along by a
//! caller other than root never gets a better priority than the worst of
//! the config's recipes, so users cannot jump the queue the operator set.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use atoll_core::awm::{IslandCapacity, RecipeError};
use atoll_core::decision::Reason;
use atoll_core::process::ProcessTable;
use atoll_core::spec::PlatformSpec;
use atoll_core::Name;
use atoll_proto::apps::{AppRunState, AppStatus, RecipeRef};
use atoll_proto::Reply;

use super::{App, Apps, Kit};
use crate::adopt::{process_of, AdoptError};
use crate::command::Caller;

/// Why a request about applications failed.
#[derive(Debug, thiserror::Error)]
pub enum AppsError {
    /// No pid given and the caller's is unknown.
    #[error("no pid given, and the caller's pid is unknown")]
    NoPid,
    /// The pid is the daemon's.
    #[error("pid {0} is atoll itself")]
    SelfPid(u32),
    /// The process cannot be registered by this caller.
    #[error(transparent)]
    Process(#[from] AdoptError),
    /// The process is registered already.
    #[error("pid {pid} is already registered as application {app}")]
    AlreadyRegistered {
        /// The pid.
        pid: u32,
        /// Its application.
        app: u64,
    },
    /// No recipe of that name in the config.
    #[error("no recipe named {0:?} in the platform description ([recipe.{0}])")]
    NoRecipe(String),
    /// A recipe sent along is not valid here.
    #[error(transparent)]
    BadRecipe(#[from] RecipeError),
    /// No such application.
    #[error("no application {0}")]
    NoApp(u64),
    /// The application is not the caller's.
    #[error(
        "application {app} (pid {pid}) belongs to uid {owner}, not to the caller (uid {caller})"
    )]
    NotOwner {
        /// The application.
        app: u64,
        /// Its process.
        pid: u32,
        /// Its owner.
        owner: u32,
        /// The caller.
        caller: u32,
    },
    /// A goal that is not a finite number >= 0.
    #[error("goal_cps = {0}: must be a finite number of cycles per second >= 0 (0: no goal)")]
    BadGoal(f64),
}

/// What registering needs to know of the daemon.
pub struct Registering<'a> {
    /// Processes.
    pub procs: &'a dyn ProcessTable,
    /// The config's recipes.
    pub spec: &'a PlatformSpec,
    /// What the islands offer applications now.
    pub caps: &'a [IslandCapacity],
    /// The daemon's own pid.
    pub self_pid: u32,
    /// A unit name is taken.
    pub taken: &'a dyn Fn(&str) -> bool,
    /// Now.
    pub now: Duration,
    /// The unit a process is in, if any.
    pub unit_of: &'a dyn Fn(u32) -> Option<Name>,
}

impl Apps {
    /// Planning runs made so far (a burst of events gives one).
    pub fn planning_runs(&self) -> u64 {
        self.runs
    }

    /// Application `id`, if the caller may act on it.
    fn app_of(&self, caller: Caller, id: u64) -> Result<&App, AppsError> {
        let app = self.list.get(&id).ok_or(AppsError::NoApp(id))?;
        if !caller.is_root() && caller.uid != app.uid {
            return Err(AppsError::NotOwner {
                app: id,
                pid: app.pid,
                owner: app.uid,
                caller: caller.uid,
            });
        }
        Ok(app)
    }

    /// `app_register`.
    pub fn register(
        &mut self,
        caller: Caller,
        recipe: RecipeRef,
        pid: Option<u32>,
        r: &Registering<'_>,
    ) -> Result<Reply, AppsError> {
        let pid = match pid {
            Some(p) => p,
            None => u32::try_from(caller.pid)
                .ok()
                .filter(|p| *p > 0)
                .ok_or(AppsError::NoPid)?,
        };
        if pid == r.self_pid {
            return Err(AppsError::SelfPid(pid));
        }
        let info = process_of(r.procs, caller, pid)?;
        if let Some(a) = self.by_pid(pid) {
            return Err(AppsError::AlreadyRegistered { pid, app: a.id });
        }
        let recipe = match recipe {
            RecipeRef::Named(name) => r
                .spec
                .apps
                .recipe(&name)
                .cloned()
                .ok_or(AppsError::NoRecipe(name))?,
            RecipeRef::Inline(mut recipe) => {
                recipe.validate_for(r.caps)?;
                if !caller.is_root() {
                    if let Some(worst) = r.spec.apps.recipes.iter().map(|c| c.priority).max() {
                        recipe.priority = recipe.priority.max(worst);
                    }
                }
                recipe
            }
        };
        let id = self.take_id(r.taken);
        let waiting = "registered: waiting for the next planning run".to_string();
        let app = App {
            id,
            recipe: Arc::new(recipe),
            pid,
            start_ticks: info.start_ticks,
            uid: info.uid,
            generation: 0,
            state: AppRunState::Waiting {
                reason: waiting.clone(),
            },
            grant: None,
            unit_island: None,
            frozen: false,
            unfrozen_wait: false,
            pinned: None,
            waiting: 0,
            reason: waiting,
            ever_ran: false,
            goal_gap: 0.0,
            planned_gap: 0.0,
            goal_cps: None,
            rate: None,
            samples: VecDeque::new(),
            reconfigurations: 0,
            came_from: (r.unit_of)(pid),
        };
        tracing::info!(
            "application {id} ({}) registered: pid {pid} ({}), uid {}",
            app.recipe.name,
            info.comm,
            info.uid
        );
        let assignment = app.assignment();
        self.list.insert(id, app);
        self.batcher.event(r.now);
        Ok(Reply::AppRegistered {
            app: id,
            assignment,
        })
    }

    /// `app_poll`.
    pub fn poll(&self, caller: Caller, id: u64) -> Result<Reply, AppsError> {
        Ok(Reply::AppAssignment(self.app_of(caller, id)?.assignment()))
    }

    /// `app_report`.
    pub fn report(
        &mut self,
        caller: Caller,
        id: u64,
        cycles: u64,
        goal_cps: Option<f64>,
        now: Duration,
    ) -> Result<Reply, AppsError> {
        self.app_of(caller, id)?;
        if let Some(g) = goal_cps.filter(|g| !g.is_finite() || *g < 0.0) {
            return Err(AppsError::BadGoal(g));
        }
        let deadband = self.deadband;
        let Some(app) = self.list.get_mut(&id) else {
            return Err(AppsError::NoApp(id));
        };
        let replan = app.record(now, cycles, goal_cps, deadband);
        let goal_gap = app.goal_gap;
        if replan {
            tracing::debug!("application {id}: goal gap {goal_gap:.3}: planning again");
            self.batcher.event(now);
        }
        Ok(Reply::AppReported { app: id, goal_gap })
    }

    /// `app_done`: the application leaves.
    pub fn done(
        &mut self,
        caller: Caller,
        id: u64,
        why: Reason,
        kit: &mut Kit<'_, '_>,
    ) -> Result<Reply, AppsError> {
        self.app_of(caller, id)?;
        self.remove(id, why, kit);
        self.batcher.event(kit.p.now);
        Ok(Reply::AppDone { app: id })
    }

    /// Every application with its owner, for readers off the loop.
    pub fn views(&self) -> Vec<crate::publish::AppView> {
        self.list
            .values()
            .zip(self.statuses())
            .map(|(a, status)| crate::publish::AppView { status, uid: a.uid })
            .collect()
    }

    /// Every application, by id, for `atoll apps`.
    pub fn statuses(&self) -> Vec<AppStatus> {
        self.list
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
                power: self.mode_power(a),
            })
            .collect()
    }
}
