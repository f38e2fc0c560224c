//! Reconfigurable applications (BarbequeRTRM, seed 002): register with a
//! recipe of working modes, learn the working mode and resources the daemon
//! assigns, follow its suspensions and resumptions, and report progress
//! against a goal (`docs/api.md`, section *Applications*).
//!
//! Two levels:
//!
//! * The calls on [`Client`]: [`Client::app_register`],
//!   [`Client::app_poll`], [`Client::app_report`], [`Client::app_done`] and
//!   [`Client::apps`], one request each. A process that only registers and
//!   polls is a complete application.
//! * [`AppRuntime`], the paper's execution loop (setup, configure, run,
//!   monitor, release) as a state machine a plain loop drives with
//!   [`AppRuntime::next_step`], or as callbacks ([`Reconfigurable`],
//!   [`AppRuntime::run`]).
//!   It polls at most every [`RuntimeOptions::poll_every`], reports the
//!   cycles counted every [`RuntimeOptions::report_every`], and while the
//!   daemon has the application waiting it blocks, polling, until resumed.
//!
//! ```no_run
//! use atoll_client::apps::{load_recipe, AppRuntime, RecipeRef, RuntimeOptions, Step};
//!
//! let recipe = load_recipe(std::path::Path::new("clients/recipes/awm_parallel.toml"))?;
//! let client = atoll_client::Client::connect_default()?;
//! let options = RuntimeOptions { goal_cps: Some(20.0), ..RuntimeOptions::default() };
//! let mut rt = AppRuntime::register(client, RecipeRef::Inline(recipe), options)?;
//! let mut threads = 1;
//! for _ in 0..1000 {
//!     match rt.next_step()? {
//!         Step::Configure(grant) => threads = grant.parallelism(),
//!         Step::Suspend(reason) => eprintln!("suspended: {reason}"),
//!         Step::Run => {
//!             // one cycle of work on `threads` threads
//!             rt.cycles_done(1);
//!         }
//!         Step::Release => break,
//!     }
//! }
//! println!("{:?}", rt.done()?);
//! # let _ = threads;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Arguments are checked before anything is sent (an invalid one is an
//! error with [`ClientError::is_invalid_argument`]): an inline recipe must
//! pass [`Recipe::validate`], a recipe name must be a valid name, a goal
//! must be a finite number above 0. A reply about another application than
//! the one asked about is a protocol error.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

pub use atoll_core::awm::{Needs, Recipe, RecipeError, WorkingMode};
use atoll_core::{CpuSet, Name};
pub use atoll_proto::apps::{AppAssignment, AppRunState, AppStatus, RecipeRef};
use atoll_proto::{Reply, Request};

use crate::{Client, ClientError, Repr};

mod runtime;

pub use runtime::{
    AppRuntime, Progress, Reconfigurable, RunError, RuntimeOptions, Step, StopHandle, Summary,
    SystemTimer, Timer, Workload,
};

/// What the daemon granted an application that runs: its working mode and
/// the resources that come with it ([`AppRunState::Running`] as a struct).
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    /// The working mode's id.
    pub mode: u8,
    /// The working mode's name (may be empty).
    pub mode_name: String,
    /// The island it runs on.
    pub island: String,
    /// CPUs' worth of time it may use.
    pub cpu_quota: f64,
    /// The CPUs it may run on.
    pub cpus: CpuSet,
    /// Threads the working mode asks for, if its recipe says.
    pub threads: Option<u32>,
    /// Memory it may use, bytes (0: no reservation).
    pub memory_bytes: u64,
}

impl Grant {
    /// The grant of a running state; `None` while waiting.
    pub fn of(state: &AppRunState) -> Option<Self> {
        match state {
            AppRunState::Waiting { .. } => None,
            AppRunState::Running {
                mode,
                mode_name,
                island,
                cpu_quota,
                cpus,
                threads,
                memory_bytes,
            } => Some(Self {
                mode: *mode,
                mode_name: mode_name.clone(),
                island: island.clone(),
                cpu_quota: *cpu_quota,
                cpus: cpus.clone(),
                threads: *threads,
                memory_bytes: *memory_bytes,
            }),
        }
    }

    /// How many threads to run: the working mode's `threads`, else the
    /// quota rounded up; at least 1.
    pub fn parallelism(&self) -> u32 {
        match self.threads {
            Some(t) => t.max(1),
            // Quotas are at most 1e6 CPUs (Recipe::validate), so this fits.
            None if self.cpu_quota.is_finite() && self.cpu_quota > 0.0 => {
                atoll_core::num::saturating_u32(self.cpu_quota.ceil()).max(1)
            }
            None => 1,
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mode {}", self.mode)?;
        if !self.mode_name.is_empty() {
            write!(f, " ({})", self.mode_name)?;
        }
        write!(
            f,
            " on island {}: {} CPUs' time on CPUs {}",
            self.island, self.cpu_quota, self.cpus
        )?;
        if let Some(t) = self.threads {
            write!(f, ", {t} threads")?;
        }
        if self.memory_bytes > 0 {
            write!(f, ", {} bytes of memory", self.memory_bytes)?;
        }
        Ok(())
    }
}

/// An assignment in words: `app 7 (generation 4): mode 2 on island b: ...`
/// or `app 7 (generation 5): waiting: REASON`.
pub fn describe(a: &AppAssignment) -> String {
    let head = format!("app {} (generation {})", a.app, a.generation);
    match (&a.state, Grant::of(&a.state)) {
        (AppRunState::Waiting { reason }, _) => format!("{head}: waiting: {reason}"),
        (AppRunState::Running { .. }, grant) => {
            format!("{head}: {}", grant.expect("a running state has a grant"))
        }
    }
}

/// Why a recipe could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecipeLoadError {
    /// The file could not be read.
    #[error("cannot read recipe {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Not TOML or JSON of a recipe (unknown fields are refused); the
    /// message has the line and column.
    #[error("recipe {origin}: {message}")]
    Syntax {
        /// The file, or `TOML text` / `JSON text`.
        origin: String,
        /// What is wrong, where.
        message: String,
    },
    /// Well formed, but [`Recipe::validate`] refuses it.
    #[error("{origin}: {source}")]
    Invalid {
        /// The file, or `TOML text` / `JSON text`.
        origin: String,
        /// The first problem.
        #[source]
        source: RecipeError,
    },
}

/// Parses and validates a recipe written as TOML, or as JSON when its first
/// non-blank character is `{` (the shape of `docs/api.md`; the TOML form has
/// `name`, `priority` and `[[modes]]` tables at its top level).
pub fn parse_recipe(text: &str) -> Result<Recipe, RecipeLoadError> {
    let json = text.trim_start().starts_with('{');
    let origin = if json { "JSON text" } else { "TOML text" };
    parse_recipe_from(text, json, origin)
}

/// Reads, parses and validates a recipe file: JSON if its name ends in
/// `.json`, else TOML.
pub fn load_recipe(path: &Path) -> Result<Recipe, RecipeLoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| RecipeLoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let json = path.extension().is_some_and(|e| e == "json");
    parse_recipe_from(&text, json, &path.display().to_string())
}

fn parse_recipe_from(text: &str, json: bool, origin: &str) -> Result<Recipe, RecipeLoadError> {
    let syntax = |message: String| RecipeLoadError::Syntax {
        origin: origin.to_string(),
        message,
    };
    let recipe: Recipe = if json {
        serde_json::from_str(text).map_err(|e| syntax(e.to_string()))?
    } else {
        toml::from_str(text).map_err(|e| syntax(e.to_string().trim_end().to_string()))?
    };
    recipe
        .validate()
        .map_err(|source| RecipeLoadError::Invalid {
            origin: origin.to_string(),
            source,
        })?;
    Ok(recipe)
}

impl Client {
    fn argument(&self, message: String) -> ClientError {
        self.err(Repr::Argument(message))
    }

    fn check_goal(&self, goal_cps: Option<f64>) -> Result<(), ClientError> {
        match goal_cps {
            Some(g) if !g.is_finite() || g <= 0.0 => Err(self.argument(format!(
                "goal_cps: {g} is not a finite number of cycles per second above 0"
            ))),
            _ => Ok(()),
        }
    }

    fn check_app(&self, what: &str, asked: u64, got: u64) -> Result<(), ClientError> {
        if asked == got {
            Ok(())
        } else {
            Err(self.err(Repr::Protocol(format!(
                "{what} about application {got}, asked about {asked}"
            ))))
        }
    }

    /// Registers a reconfigurable application: process `pid` (`None`: the
    /// caller) with `recipe`, a recipe of the platform description by name
    /// or one sent along. Returns the application's id and its first
    /// assignment (running in a working mode, or waiting).
    pub fn app_register(
        &mut self,
        recipe: RecipeRef,
        pid: Option<u32>,
    ) -> Result<(u64, AppAssignment), ClientError> {
        match &recipe {
            RecipeRef::Named(n) => {
                Name::new(n).map_err(|e| self.argument(format!("recipe name: {e}")))?;
            }
            RecipeRef::Inline(r) => {
                r.validate().map_err(|e| self.argument(e.to_string()))?;
            }
        }
        if pid == Some(0) {
            return Err(self.argument("pid: 0 is not a process".into()));
        }
        match self.request(Request::AppRegister { recipe, pid })? {
            Reply::AppRegistered { app, assignment } => {
                self.check_app("an assignment", app, assignment.app)?;
                Ok((app, assignment))
            }
            other => Err(self.unexpected("app_registered", &other)),
        }
    }

    /// The application's assignment now. With `after` (the generation the
    /// application last acted on) the answer says whether it changed: its
    /// `generation` differs from `after`.
    pub fn app_poll(&mut self, app: u64, after: Option<u64>) -> Result<AppAssignment, ClientError> {
        match self.request(Request::AppPoll { app, after })? {
            Reply::AppAssignment(a) => {
                self.check_app("an assignment", app, a.app)?;
                Ok(a)
            }
            other => Err(self.unexpected("app_assignment", &other)),
        }
    }

    /// Reports the application's progress: `cycles` done since it
    /// registered (a counter, not a delta) and its goal in cycles per
    /// second. Returns the goal gap the daemon computed (`goal / rate - 1`:
    /// above 0 it needs more; 0 without a goal). A gap other than 0 makes
    /// the daemon plan again.
    pub fn app_report(
        &mut self,
        app: u64,
        cycles: u64,
        goal_cps: Option<f64>,
    ) -> Result<f64, ClientError> {
        self.check_goal(goal_cps)?;
        let request = Request::AppReport {
            app,
            cycles,
            goal_cps,
        };
        match self.request(request)? {
            Reply::AppReported { app: got, goal_gap } => {
                self.check_app("a report", app, got)?;
                Ok(goal_gap)
            }
            other => Err(self.unexpected("app_reported", &other)),
        }
    }

    /// The application is done: the daemon gives its resources back.
    pub fn app_done(&mut self, app: u64) -> Result<(), ClientError> {
        match self.request(Request::AppDone { app })? {
            Reply::AppDone { app: got } => self.check_app("an answer", app, got),
            other => Err(self.unexpected("app_done", &other)),
        }
    }

    /// Every application: recipe, priority, process, assignment, goal, rate,
    /// goal gap and reconfigurations.
    pub fn apps(&mut self) -> Result<Vec<AppStatus>, ClientError> {
        match self.request(Request::Apps {})? {
            Reply::Apps { apps } => Ok(apps),
            other => Err(self.unexpected("apps", &other)),
        }
    }
}
