//! The control loop's state machine.
//!
//! A [`Controller`] owns the backend, the process table, task control and
//! the clock (all injected), the [`Registry`] and the decision log. The
//! driver ([`crate::run`]) calls [`Controller::start`] once, then
//! [`Controller::handle`] for each command and [`Controller::epoch`] every
//! epoch, and [`Controller::teardown`] at the end. Nothing here blocks on
//! anything but the backend, and nothing reads the system clock, so tests
//! and the simulator drive it step by step.
//!
//! The work is split by concern: [`crate::reconcile`] makes the hierarchy
//! match the plan, [`crate::adopt`] moves processes, [`crate::recover`]
//! rebuilds the registry after a restart, [`crate::teardown`] gives
//! everything back, [`crate::status`] reports.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use atoll_core::backend::{Backend, BackendError, Fallback};
use atoll_core::clock::Clock;
use atoll_core::decision::{Action, Decision, Reason};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::process::{CgroupMembership, ProcessTable, TaskControl};
use atoll_core::spec::PlatformSpec;
use atoll_proto::{ErrorCode, Reply, Request, ResponseEnvelope};

use crate::command::{Caller, Command};
use crate::decisions::DecisionLog;
use crate::registry::Registry;
use crate::state::{self, StateError};

/// How often the whole plan is re-applied to catch drift.
pub const RECONCILE_EVERY: Duration = Duration::from_secs(1);
/// How long a newly seen process keeps being matched against adoption rules
/// (it may still `exec` into the program a rule names).
pub const YOUNG_FOR: Duration = Duration::from_secs(1);

/// What the controller is given.
pub struct Env {
    /// The kernel (or simulator).
    pub backend: Box<dyn Backend>,
    /// Processes.
    pub procs: Box<dyn ProcessTable>,
    /// Scheduling policies.
    pub tasks: Box<dyn TaskControl>,
    /// The `kernel` and `shared` accounts.
    pub system: Box<dyn atoll_core::process::SystemMonitor>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

/// Knobs of the controller that are not in the spec.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where the state file lives (`None`: no state file, as in tests).
    pub state_dir: Option<PathBuf>,
    /// The daemon's own cgroups: where a process with no known origin goes
    /// back to.
    pub self_origin: CgroupMembership,
    /// The daemon's own pid.
    pub self_pid: u32,
    /// The machine (home CPU layouts keep SMT siblings together; memory
    /// totals for the isolation model).
    pub topology: atoll_core::topology::Topology,
}

/// Why the controller could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The state file could not be written or read.
    #[error(transparent)]
    State(#[from] StateError),
    /// A cgroup with atoll's root name exists and atoll has no record of it.
    #[error("cgroup {root:?} already exists and is not atoll's (no state file and no atoll layout in it); pick another --cgroup-root or remove it")]
    NotOurs {
        /// The root name.
        root: String,
    },
    /// Teardown left something behind.
    #[error("teardown left {0}")]
    Leftover(String),
}

/// Whether the driver should keep going.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep running.
    Continue,
    /// Tear down and exit.
    Stop,
}

/// A process first seen at some time, still being matched.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) first: Duration,
    pub(crate) settled: bool,
    /// `comm` when last matched; a young process is matched again only
    /// when it changes (it `exec`ed).
    pub(crate) comm: Option<String>,
    /// When to look at it next: checks back off exponentially while it is
    /// young (after 1, 2, 4, ... epochs).
    pub(crate) next: Duration,
}

/// The control loop's state.
pub struct Controller {
    pub(crate) env: Env,
    pub(crate) reg: Registry,
    pub(crate) log: DecisionLog,
    pub(crate) opts: Options,
    /// Settings last applied per group.
    pub(crate) applied: BTreeMap<GroupPath, GroupSettings>,
    /// Fallbacks in force, per group and knob.
    pub(crate) fallbacks: BTreeMap<(GroupPath, String), Fallback>,
    pub(crate) seen: HashMap<u32, Seen>,
    pub(crate) epochs: u64,
    pub(crate) started_at: Duration,
    pub(crate) last_reconcile: Duration,
    pub(crate) dirty: bool,
    /// RT windows of realtime units (see [`crate::rt_guard`]).
    pub(crate) rt_windows: BTreeMap<GroupPath, crate::rt_guard::RtWindow>,
    /// The isolation model's state (see [`crate::isolation`]).
    pub(crate) iso: crate::isolation::Isolation,
    /// Coordination between islands (see [`crate::coord`]).
    pub(crate) coord: crate::coord::Coordination,
    /// Communication-aware scheduling (see [`crate::comm`]).
    pub(crate) comm: crate::comm::Comm,
    /// Reconfigurable applications (see [`crate::apps`]).
    pub(crate) apps: crate::apps::Apps,
}

impl Controller {
    /// A controller for `spec`; call [`Controller::start`] next.
    pub fn new(env: Env, spec: PlatformSpec, opts: Options) -> Self {
        let now = env.clock.now();
        let coord = crate::coord::Coordination::new(&spec, &opts.topology);
        let apps = crate::apps::Apps::new(&spec);
        Self {
            env,
            reg: Registry::new(spec),
            log: DecisionLog::default(),
            opts,
            applied: BTreeMap::new(),
            fallbacks: BTreeMap::new(),
            seen: HashMap::new(),
            epochs: 0,
            started_at: now,
            last_reconcile: now,
            dirty: false,
            rt_windows: BTreeMap::new(),
            iso: Default::default(),
            coord,
            comm: Default::default(),
            apps,
        }
    }

    /// Builds the hierarchy, or takes over the one a previous run left
    /// (checking the state file against the kernel), then adopts processes.
    pub fn start(&mut self) -> Result<(), ControllerError> {
        let root = GroupPath::root();
        let saved = match &self.opts.state_dir {
            Some(dir) => match state::load(dir) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("ignoring the state file: {e}; the kernel's view decides");
                    None
                }
            },
            None => None,
        };
        let root_name = self.env.backend.root_name().to_string();
        let kind = self.env.backend.kind();
        if self.env.backend.exists(&root) {
            let saved = saved.filter(|s| s.root == root_name && s.backend == kind);
            let ours = saved.is_some() || self.env.backend.exists(&GroupPath::host());
            if !ours {
                return Err(ControllerError::NotOurs { root: root_name });
            }
            self.recover(saved)?;
            self.reconcile(Reason::Recover {
                detail: "re-applying the platform description".into(),
            })?;
            self.remove_strays();
        } else {
            if saved.is_some() {
                tracing::info!(
                    "a state file exists but cgroup {root_name:?} does not: starting fresh"
                );
            }
            if let Err(e) = self.reconcile(Reason::Config) {
                // Bad input changes nothing: undo what was made.
                let _ = self.teardown();
                return Err(e.into());
            }
        }
        self.save();
        self.scan(true);
        self.register_config_overlays();
        self.save();
        Ok(())
    }

    /// One control-loop iteration.
    pub fn epoch(&mut self) {
        self.epochs += 1;
        let now = self.now();
        let periodic = now.saturating_sub(self.last_reconcile) >= RECONCILE_EVERY;
        self.scan(periodic);
        self.guard_rt_budgets();
        self.coordinate();
        self.isolate();
        self.communicate();
        if periodic {
            self.last_reconcile = now;
            if let Err(e) = self.reconcile(Reason::Config) {
                tracing::warn!("reconcile: {e}");
            }
        }
        self.manage_apps();
        if self.dirty {
            self.save();
        }
    }

    /// The control-loop period.
    pub fn epoch_len(&self) -> Duration {
        self.reg.spec().epoch
    }

    /// Handles one command.
    pub fn handle(&mut self, cmd: Command) -> Flow {
        match cmd {
            Command::Shutdown => Flow::Stop,
            Command::Snapshot { reply } => {
                let _ = reply.send(Box::new(self.status()));
                Flow::Continue
            }
            Command::Api {
                caller,
                id,
                request,
                reply,
            } => {
                let (resp, flow) = self.api(caller, id, request);
                let _ = reply.send(resp);
                if self.dirty {
                    self.save();
                }
                flow
            }
        }
    }

    fn api(&mut self, caller: Caller, id: u64, request: Request) -> (ResponseEnvelope, Flow) {
        let summary = request.summary();
        tracing::debug!(uid = caller.uid, pid = caller.pid, "api: {summary}");
        match request {
            Request::Status {} => (
                ResponseEnvelope::ok(id, Reply::Status(Box::new(self.status()))),
                Flow::Continue,
            ),
            Request::Why { subject, limit } => (
                ResponseEnvelope::ok(
                    id,
                    Reply::Decisions {
                        decisions: self.log.query(subject.as_deref(), limit.unwrap_or(50)),
                    },
                ),
                Flow::Continue,
            ),
            Request::Stop {} if !caller.is_root() => (
                ResponseEnvelope::err(
                    id,
                    ErrorCode::PermissionDenied,
                    format!("only root may stop atoll (caller uid {})", caller.uid),
                ),
                Flow::Continue,
            ),
            Request::Stop {} => (ResponseEnvelope::ok(id, Reply::Stopping), Flow::Stop),
            Request::Adopt { unit, pid, island } => {
                let resp = match self.api_adopt(caller, &summary, &unit, pid, island.as_deref()) {
                    Ok(reply) => ResponseEnvelope::ok(id, reply),
                    Err((code, msg)) => ResponseEnvelope::err(id, code, msg),
                };
                (resp, Flow::Continue)
            }
            Request::Overlays {} => (answer(id, self.api_overlays()), Flow::Continue),
            Request::Coordinate { from, message } => (
                answer(id, self.api_coordinate(caller, from.as_deref(), message)),
                Flow::Continue,
            ),
            Request::Report { overlay, value } => (
                answer(id, self.api_report(caller, &overlay, value)),
                Flow::Continue,
            ),
            request @ (Request::AppRegister { .. }
            | Request::AppPoll { .. }
            | Request::AppReport { .. }
            | Request::AppDone { .. }
            | Request::Apps {}) => (answer(id, self.api_apps(caller, request)), Flow::Continue),
        }
    }

    /// The decision log.
    pub fn decisions(&self) -> &DecisionLog {
        &self.log
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.reg
    }

    /// Fallbacks in force.
    pub fn fallbacks(&self) -> impl Iterator<Item = &Fallback> {
        self.fallbacks.values()
    }

    pub(crate) fn now(&self) -> Duration {
        self.env.clock.now()
    }

    pub(crate) fn decide(&mut self, action: Action, why: Reason) {
        let at = self.now();
        self.log.record(Decision { at, action, why });
    }

    /// Writes the state file (if any); failures are logged, not fatal.
    pub(crate) fn save(&mut self) {
        self.dirty = false;
        let Some(dir) = self.opts.state_dir.clone() else {
            return;
        };
        let saved = self.saved_state();
        if let Err(e) = state::save(&dir, &saved) {
            tracing::error!("saving state: {e}");
            self.dirty = true;
        }
    }
}

/// A reply, or the error it failed with.
fn answer(id: u64, r: Result<Reply, crate::adopt::ApiFailure>) -> ResponseEnvelope {
    match r {
        Ok(reply) => ResponseEnvelope::ok(id, reply),
        Err((code, msg)) => ResponseEnvelope::err(id, code, msg),
    }
}
