//! The control loop: the one place that knows every component.
//!
//! A [`Controller`] owns the injected kernel ([`Env`]: backend, process
//! table, task control, system accounts, clock), the [`Registry`], the
//! decision log, the [`Composer`] of group settings, and one component per
//! concern, each owning its own state:
//!
//! | component | owns | reads | changes |
//! |---|---|---|---|
//! | [`Adoption`] | the processes seen | `/proc` | moves processes |
//! | [`RtGuard`] | RT windows | group CPU time | task policies |
//! | [`Coordination`] | overlays, the platform manager | islands' and units' figures | its layer, RT priorities |
//! | [`Isolation`] | lenders, memory and disk policies | units' figures | its layer |
//! | [`Comm`] | boosts, the network monitor | sockets, CPU time | its layer, thread slices |
//! | [`Apps`] | applications, the planner | their processes | its layer, runtime units, moves |
//!
//! Components never call each other and never write a group: they update
//! their own state, touch the groups whose layer changed, and the composer
//! writes each changed group once (see [`crate::compose`]). What a step
//! needs of the others comes in as arguments.
//!
//! The driver ([`crate::run`]) calls [`Controller::start`] once, then
//! [`Controller::handle`] for each command and [`Controller::epoch`] every
//! epoch, and [`Controller::teardown`] at the end. Nothing here blocks on
//! anything but the backend, and nothing reads the system clock, so tests
//! and the simulator drive it step by step.

mod network;
mod pace;
mod powercap;
mod reload;
mod repair;
mod requests;
mod runtime;
mod runtime_overlay;
mod slo;
mod start;
mod status;
mod teardown;
mod wiring;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use atoll_core::backend::{BackendError, Fallback, Monitor};
use atoll_core::clock::Clock;
use atoll_core::decision::Reason;
use atoll_core::process::{CgroupMembership, ProcessTable, SystemMonitor, TaskControl};
use atoll_core::spec::PlatformSpec;
use atoll_core::{CpuSet, Name};
pub use reload::{describe, ConfigSource, ReloadError};
pub use runtime::RuntimeError;

use crate::adopt::Adoption;
use crate::apps::{Apps, Kit};
use crate::comm::Comm;
use crate::command::Command;
use crate::compose::{ComposeError, Composer, Stack};
use crate::coord::Coordination;
use crate::decisions::DecisionLog;
use crate::isolation::Isolation;
use crate::load::Loads;
use crate::persist::Persist;
use crate::placement::Placement;
use crate::registry::Registry;
use crate::rt_guard::RtGuard;
use crate::services::Services;
use crate::state::StateError;
use crate::units::RuntimeUnits;

/// How often the periodic work of a scanning loop runs (pruning exited
/// processes when `/proc` is scanned and no rule asks for more).
pub const RECONCILE_EVERY: Duration = Duration::from_secs(1);

/// By default, every group atoll owns is checked against what atoll wrote
/// (and rewritten where someone changed it) once in this long, a slice of
/// the groups per epoch...
pub const REPAIR_EVERY: Duration = Duration::from_secs(10);

/// ...but no more than this many groups a second: a check reads every knob
/// of the group (on cgroup v1 some 25 files across five hierarchies), so
/// on a platform of 100 units the round takes 25 s.
pub const REPAIR_RATE: f64 = 4.0;

/// The round's rate when the backend watches writes to the groups' files
/// (inotify, see [`atoll_core::backend::Actuator::watches_writes`]): the
/// groups someone wrote are checked in the epoch after the write, and the
/// round is left only what raises no event (a cpuset mask the kernel
/// shrank on CPU hotplug, a process moved out of its unit): one group in
/// two seconds, a round of 100 units in 200 s.
pub const REPAIR_RATE_WATCHED: f64 = 0.5;

/// What the controller is given.
pub struct Env {
    /// The kernel (or simulator).
    pub backend: Box<dyn atoll_core::backend::Backend>,
    /// Processes.
    pub procs: Box<dyn ProcessTable>,
    /// Scheduling policies.
    pub tasks: Box<dyn TaskControl>,
    /// The `kernel` and `shared` accounts.
    pub system: Box<dyn SystemMonitor>,
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
    /// A group could not be written.
    #[error(transparent)]
    Compose(#[from] ComposeError),
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
    #[error("teardown left {}", .0.join(", "))]
    Leftover(Vec<String>),
}

/// A reply waiting for the state file: the request's id, where the reply
/// goes, and the reply.
type Unsaved = (
    u64,
    std::sync::mpsc::Sender<atoll_proto::ResponseEnvelope>,
    atoll_proto::ResponseEnvelope,
);

/// Whether the driver should keep going.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep running.
    Continue,
    /// Tear down and exit.
    Stop,
}

/// The control loop's state: the components and what they share.
pub struct Controller {
    env: Env,
    opts: Options,
    reg: Registry,
    log: DecisionLog,
    compose: Composer,
    persist: Persist,
    adoption: Adoption,
    rt: RtGuard,
    runtime_units: RuntimeUnits,
    loads: Loads,
    coord: Coordination,
    iso: Isolation,
    comm: Comm,
    apps: Apps,
    slo: crate::slo::Slo,
    services: Services,
    /// RAPL and cpufreq, on a real machine (see [`crate::power`]).
    power: Option<crate::power::Power>,
    /// What epochs cost, the daemon's own figures (see [`crate::telemetry`]).
    meter: crate::telemetry::Meter,
    epochs: u64,
    started_at: Duration,
    last_periodic: Duration,
    /// Every group is checked for drift once in this long.
    repair_every: Duration,
    /// Groups owed a drift check (a fraction carried from epoch to epoch).
    repair_owed: f64,
    /// The registry's plan generation at the last flush.
    flushed_generation: u64,
    /// What the backend can enforce, probed once the hierarchy exists.
    caps: Option<atoll_core::backend::Capabilities>,
    /// What the daemon could not do or know, for the status.
    warnings: Vec<String>,
    /// A `stop` that waits for teardown: its id and where its reply goes.
    stop_reply: Option<(u64, std::sync::mpsc::Sender<atoll_proto::ResponseEnvelope>)>,
    /// Replies to requests that changed something, waiting for the state
    /// file to be saved (see [`Controller::commit`]).
    unsaved: Vec<Unsaved>,
    /// The coordination state staged for the state file is current: it was
    /// staged at the end of an epoch or by a commit, and no command or
    /// reload ran since, so a [`commit`](Controller::commit) need not build
    /// and compare it again (the loop commits twice after every epoch).
    coord_staged: bool,
    /// Where a reload reads the configuration, or why it cannot.
    config_source: Option<Result<ConfigSource, String>>,
    /// The network islands, when the daemon was given an actuator for them.
    net: Option<crate::netisland::NetIslands>,
    /// The islands' frequency policies, when the daemon was given an
    /// actuator for them (see [`crate::frequency`]).
    freq: Option<crate::frequency::Frequencies>,
    /// The platform power cap (see [`crate::powercap`]), also the
    /// composer layer `power`.
    powercap: crate::powercap::PowerCapping,
    /// How long the loop waits between epochs (see [`crate::pace`]).
    pace: crate::pace::Pace,
}

/// The layers over the plan, in the order they are laid: isolation,
/// coordination, power (the power cap's island CPU caps), slo (best-effort
/// units beside a latency SLO), comm, apps. The one place that order is
/// written.
#[allow(clippy::too_many_arguments)]
fn stack<'a>(
    reg: &'a Registry,
    iso: &'a Isolation,
    coord: &'a Coordination,
    power: &'a crate::powercap::PowerCapping,
    slo: &'a crate::slo::Slo,
    comm: &'a Comm,
    apps: &'a Apps,
) -> Stack<'a> {
    Stack {
        reg,
        layers: vec![iso, coord, power, slo, comm, apps],
    }
}

/// Borrows what moving processes takes.
fn placement<'a>(
    env: &'a mut Env,
    reg: &'a mut Registry,
    log: &'a mut DecisionLog,
    now: Duration,
    self_origin: &'a CgroupMembership,
) -> Placement<'a> {
    Placement {
        backend: &mut *env.backend,
        procs: &*env.procs,
        tasks: &mut *env.tasks,
        reg,
        log,
        now,
        self_origin,
    }
}

impl Controller {
    /// A controller for `spec`; call [`Controller::start`] next.
    pub fn new(env: Env, spec: PlatformSpec, opts: Options) -> Self {
        let now = env.clock.now();
        let meter = crate::telemetry::Meter::new(Arc::clone(&env.clock));
        let coord = Coordination::new(&spec, &opts.topology);
        let apps = Apps::new(&spec);
        let persist = Persist::new(opts.state_dir.clone());
        Self {
            env,
            reg: Registry::new(spec),
            log: DecisionLog::default(),
            compose: Composer::default(),
            persist,
            opts,
            adoption: Adoption::default(),
            rt: RtGuard::default(),
            runtime_units: RuntimeUnits::default(),
            loads: Loads::default(),
            coord,
            iso: Isolation::default(),
            comm: Comm::default(),
            apps,
            slo: crate::slo::Slo::default(),
            services: Services::default(),
            power: None,
            meter,
            epochs: 0,
            started_at: now,
            last_periodic: now,
            repair_every: REPAIR_EVERY,
            repair_owed: 0.0,
            flushed_generation: 0,
            caps: None,
            warnings: Vec::new(),
            net: None,
            freq: None,
            powercap: Default::default(),
            pace: crate::pace::Pace::default(),
            stop_reply: None,
            unsaved: Vec::new(),
            coord_staged: false,
            config_source: None,
        }
    }

    /// What the backend can enforce (probed once, after start).
    fn caps(&mut self) -> atoll_core::backend::Capabilities {
        match self.caps {
            Some(c) => c,
            None => self.env.backend.capabilities(),
        }
    }

    /// One control-loop iteration: every step updates its own state and
    /// touches what changed; then the composer writes, the applications'
    /// moves follow, and the state file is saved if anything it holds
    /// changed.
    pub fn epoch(&mut self) {
        use crate::telemetry::epoch::Step;
        self.meter.start_epoch();
        self.epochs += 1;
        let now = self.now();
        let periodic = now.saturating_sub(self.last_periodic) >= RECONCILE_EVERY;
        if periodic {
            self.last_periodic = now;
        }
        {
            let epoch = self.epoch_len();
            let mut p = placement(
                &mut self.env,
                &mut self.reg,
                &mut self.log,
                now,
                &self.opts.self_origin,
            );
            self.adoption
                .step(&mut p, self.opts.self_pid, epoch, periodic);
        }
        self.meter.lap(Step::Adoption);
        self.guard_rt_budgets(now);
        self.meter.lap(Step::RtGuard);
        self.sample_loads(now);
        if let Some(p) = &mut self.power {
            p.sample(now);
        }
        self.hold_power_cap(now);
        let joules = self
            .power
            .as_ref()
            .and_then(crate::power::Power::joules_total);
        self.apps.learn_power(now, joules, monitor(&self.env));
        self.meter.lap(Step::Load);
        self.coordinate(now);
        self.network_step(now);
        self.measure_slos(now);
        self.meter.lap(Step::Coordination);
        self.isolate(now);
        self.meter.lap(Step::Isolation);
        self.communicate(now);
        self.meter.lap(Step::Comm);
        self.manage_apps(now);
        self.meter.lap(Step::Apps);
        if periodic {
            let mut p = placement(
                &mut self.env,
                &mut self.reg,
                &mut self.log,
                now,
                &self.opts.self_origin,
            );
            let coord = &self.coord;
            self.runtime_units
                .sweep(&mut p, &mut self.compose, &|u| coord.holds(u));
        }
        self.settle();
        self.repair();
        self.meter.lap(Step::Compose);
        self.stage_coord();
        self.stage_frequency();
        self.coord_staged = true;
        let _ = self
            .persist
            .save_if_changed(&mut self.reg, &*self.env.backend, Vec::new());
        self.meter.lap(Step::State);
        self.meter.end_epoch();
    }

    fn guard_rt_budgets(&mut self, now: Duration) {
        if self.caps().rt_groups {
            return;
        }
        let units = crate::rt_guard::rt_units(&self.reg, &self.coord);
        if units.is_empty() {
            return;
        }
        let mut p = placement(
            &mut self.env,
            &mut self.reg,
            &mut self.log,
            now,
            &self.opts.self_origin,
        );
        self.rt.guard(&units, &mut p);
    }

    /// Each island's load, when a step looks at it.
    fn sample_loads(&mut self, now: Duration) {
        let spec = self.reg.spec();
        let wanted = self.coord.watching()
            || spec.comm.is_some()
            || spec.isolation.mode == atoll_core::spec::IsolationMode::Isolate
            // The power cap takes its CPU counters from this sample.
            || self.powercap.is_held();
        if wanted {
            self.loads.sample(
                now,
                &self.reg,
                monitor(&self.env),
                self.coord.all_island_cpus(),
                self.coord.capped(),
            );
        }
    }

    fn coordinate(&mut self, now: Duration) {
        let inp = crate::coord::Inputs {
            now,
            reg: &self.reg,
            mon: monitor(&self.env),
            procs: &*self.env.procs,
            loads: self.loads.all(),
        };
        self.coord.step(&inp, &mut self.compose);
        self.carry_out_priorities(now);
    }

    /// Sets the task priorities coordination's RT boosts asked for.
    fn carry_out_priorities(&mut self, now: Duration) {
        let boosts = self.coord.take_priorities();
        if boosts.is_empty() {
            return;
        }
        let mut p = placement(
            &mut self.env,
            &mut self.reg,
            &mut self.log,
            now,
            &self.opts.self_origin,
        );
        for b in boosts {
            let Some((group, policy)) = crate::coord::boost_policy(p.reg, &b) else {
                tracing::warn!(
                    "coordination: unit {} has no group in island {}",
                    b.unit,
                    b.island
                );
                continue;
            };
            for pid in p.backend.processes(&group).unwrap_or_default() {
                p.set_policy(pid, policy, b.why.clone());
            }
        }
    }

    fn isolate(&mut self, now: Duration) {
        let inp = crate::isolation::Inputs {
            now,
            reg: &self.reg,
            mon: monitor(&self.env),
            procs: &*self.env.procs,
            topo: &self.opts.topology,
            island_cpus: self.coord.all_island_cpus(),
            loads: &self.loads,
        };
        self.iso.step(&inp, &mut self.compose);
    }

    fn communicate(&mut self, now: Duration) {
        let inp = crate::comm::Inputs {
            now,
            reg: &self.reg,
            mon: monitor_of(&*self.env.backend),
            procs: &*self.env.procs,
            island_cpus: self.coord.all_island_cpus(),
            loads: &self.loads,
        };
        self.comm
            .step(&inp, &mut *self.env.tasks, &mut self.compose, &mut self.log);
    }

    fn manage_apps(&mut self, now: Duration) {
        let freezer = self.caps().freezer;
        let island_cpus = self.coord.all_island_cpus();
        let mut p = placement(
            &mut self.env,
            &mut self.reg,
            &mut self.log,
            now,
            &self.opts.self_origin,
        );
        let mut kit = Kit {
            p: &mut p,
            compose: &mut self.compose,
            island_cpus,
            topo: &self.opts.topology,
        };
        self.apps.step(freezer, &mut kit);
    }

    /// Writes what the steps touched; then the moves that waited for their
    /// groups, and once more whatever those changed. Returns the first
    /// group the kernel refused.
    fn settle(&mut self) -> Option<ComposeError> {
        let mut first = None;
        for _ in 0..3 {
            if let Err(e) = self.flush() {
                tracing::warn!("{e}");
                // The kernel's refusal before a service manager's.
                if first
                    .as_ref()
                    .is_none_or(|f: &ComposeError| f.is_refusal() && !e.is_refusal())
                {
                    first = Some(e);
                }
            }
            let now = self.now();
            let island_cpus = self.coord.all_island_cpus();
            let mut p = placement(
                &mut self.env,
                &mut self.reg,
                &mut self.log,
                now,
                &self.opts.self_origin,
            );
            let mut kit = Kit {
                p: &mut p,
                compose: &mut self.compose,
                island_cpus,
                topo: &self.opts.topology,
            };
            self.apps.after_flush(&mut kit);
            if !self.compose.pending() && self.reg.generation() == self.flushed_generation {
                break;
            }
        }
        first
    }

    /// Writes every group whose effective settings changed (see
    /// [`Composer::flush`]); a changed plan recomputes every group.
    fn flush(&mut self) -> Result<(), ComposeError> {
        let now = self.now();
        if self.services.due(&self.reg, now) {
            self.bind_services(now);
        }
        if self.reg.generation() != self.flushed_generation {
            self.flushed_generation = self.reg.generation();
            self.compose.touch_all(Reason::Config);
        }
        if !self.compose.pending() {
            return Ok(());
        }
        let stack = stack(
            &self.reg,
            &self.iso,
            &self.coord,
            &self.powercap,
            &self.slo,
            &self.comm,
            &self.apps,
        );
        self.compose
            .flush(&stack, &mut *self.env.backend, &mut self.log, now)
    }

    /// Binds the units that name systemd units (and runtime units, to
    /// scopes) before their groups are written, and puts back those no
    /// longer named (see [`Services::sync`]). A binding changed is saved at
    /// once: the backend recorded the properties to put back, which a
    /// restart after a crash must know before any is changed.
    fn bind_services(&mut self, now: Duration) {
        let changed = self.services.sync(
            &self.reg,
            &mut *self.env.backend,
            &mut self.compose,
            &mut self.log,
            now,
        );
        if changed.is_empty() {
            return;
        }
        // Bound for what is writing every group (a reload), else the plan.
        let why = self.compose.all_reason().cloned().unwrap_or(Reason::Config);
        for g in changed {
            self.compose.forget(&g);
            self.compose.touch(g, why.clone());
        }
        self.reg.mark_dirty();
        self.stage_coord();
        self.stage_frequency();
        let _ = self
            .persist
            .save_if_changed(&mut self.reg, &*self.env.backend, Vec::new());
    }

    /// Whether the backend is the simulator.
    pub fn simulated(&self) -> bool {
        self.env.backend.kind() == atoll_core::backend::BackendKind::Sim
    }

    /// The control-loop period.
    pub fn epoch_len(&self) -> Duration {
        self.reg.spec().epoch
    }

    /// Handles one command and answers it (see [`take`](Self::take) and
    /// [`commit`](Self::commit)).
    pub fn handle(&mut self, cmd: Command) -> Flow {
        let (flow, _) = self.take(cmd);
        self.commit();
        flow
    }

    /// Handles one command. A request that may have changed what atoll
    /// manages is answered only at the next [`commit`](Self::commit), once
    /// the change is saved, so a driver saves once for a batch of requests
    /// (group commit: each save costs the loop an `fsync` or two); the
    /// others are answered now. Returns whether the command may have
    /// changed anything a status shows.
    pub fn take(&mut self, cmd: Command) -> (Flow, bool) {
        self.coord_staged = false;
        match cmd {
            Command::Shutdown => (Flow::Stop, false),
            Command::Reload => {
                crate::notify::tell("RELOADING=1");
                match self.reload_from_source() {
                    Ok(changes) if changes.is_empty() => {
                        tracing::info!("reload: the configuration is unchanged")
                    }
                    Ok(changes) => tracing::info!(
                        "reload: applied {} change(s): {}",
                        changes.len(),
                        changes.join("; ")
                    ),
                    Err(e) => tracing::error!("reload: {e}"),
                }
                crate::notify::tell("READY=1");
                (Flow::Continue, true)
            }
            // The driver publishes after every command (see `crate::run`).
            Command::Refresh => (Flow::Continue, false),
            // The driver paces the loop on it (see `crate::run`).
            Command::Wake(_) => (Flow::Continue, false),
            Command::Snapshot { reply } => {
                let _ = reply.send(Box::new(self.status()));
                (Flow::Continue, false)
            }
            Command::Api {
                caller,
                id,
                request: atoll_proto::Request::Stop { wait: true },
                reply,
            } if caller.is_root() => {
                // Answered once teardown is over (see `finish_stop`).
                self.stop_reply = Some((id, reply));
                (Flow::Stop, true)
            }
            Command::Api {
                caller,
                id,
                request,
                reply,
            } => {
                let changes = request.changes_state();
                let waits = changes && !answered_before_saved(&request);
                let (resp, flow) = self.request(caller, id, request);
                let changed = changes && resp.ok.is_some();
                if changed && waits {
                    self.unsaved.push((id, reply, resp));
                } else {
                    let _ = reply.send(resp);
                }
                (flow, changed)
            }
        }
    }

    /// How many times the state file was written.
    pub fn state_saves(&self) -> u64 {
        self.persist.saves()
    }

    /// Whether replies wait for a [`commit`](Self::commit).
    pub fn uncommitted(&self) -> bool {
        !self.unsaved.is_empty()
    }

    /// Saves the state file if anything it holds changed, then sends the
    /// replies that waited for it. A change the state file does not hold
    /// is not acknowledged: if the save fails, each is answered with an
    /// error saying so.
    pub fn commit(&mut self) {
        if !self.coord_staged {
            self.stage_coord();
            self.coord_staged = true;
        }
        let done: Vec<crate::saver::Done> = self
            .unsaved
            .drain(..)
            .map(|(id, reply, resp)| {
                Box::new(move |saved: Result<(), &crate::saver::SaveError>| {
                    let resp = match saved {
                        Err(e) if resp.ok.is_some() => atoll_proto::ResponseEnvelope::err(
                            id,
                            atoll_proto::ErrorCode::Backend,
                            format!("done, but the state file could not be saved ({e}): a restart now would not know it"),
                        ),
                        _ => resp,
                    };
                    let _ = reply.send(resp);
                }) as crate::saver::Done
            })
            .collect();
        let _ = self
            .persist
            .save_if_changed(&mut self.reg, &*self.env.backend, done);
    }

    /// Answers a `stop` that waited, with what teardown left.
    pub fn finish_stop(&mut self, result: &Result<(), ControllerError>) {
        let Some((id, reply)) = self.stop_reply.take() else {
            return;
        };
        let left = match result {
            Ok(()) => Vec::new(),
            Err(ControllerError::Leftover(left)) => left.clone(),
            Err(e) => vec![e.to_string()],
        };
        let _ = reply.send(atoll_proto::ResponseEnvelope::ok(
            id,
            atoll_proto::Reply::Stopped { left },
        ));
    }

    /// The decision log.
    pub fn decisions(&self) -> &DecisionLog {
        &self.log
    }

    /// What readers off the loop may see now (see [`crate::publish`]).
    pub fn view(&self) -> crate::publish::View {
        crate::publish::View {
            overlays: Some(self.coord.overlay_statuses().map_err(|e| e.to_string())),
            apps: self.apps.views(),
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.reg
    }

    /// Fallbacks in force.
    pub fn fallbacks(&self) -> impl Iterator<Item = &Fallback> {
        self.compose.fallbacks()
    }

    /// The coordination state.
    pub fn coordination(&self) -> &Coordination {
        &self.coord
    }

    /// Planning runs of the application policy so far.
    pub fn app_planning_runs(&self) -> u64 {
        self.apps.planning_runs()
    }

    /// Now, on the injected clock.
    pub fn now(&self) -> Duration {
        self.env.clock.now()
    }

    /// The CPUs each island holds now.
    fn island_cpus(&self) -> &BTreeMap<Name, CpuSet> {
        self.coord.all_island_cpus()
    }
}

/// Whether `request` is answered as soon as it is served, its change
/// saved at the next epoch instead of before the reply: a `trigger`. Its
/// boost is in the kernel before the reply and lasts a moment; what the
/// state file would keep of it (the unit's cooldown, a refusal's backoff)
/// a crash within the epoch loses, and a restart writes the unit's
/// settings without the boost. Waiting for the save (two `fsync`s and a
/// `rename`, 10-30 ms on this VM's disk) is what kept a trigger from
/// taking effect in under a millisecond.
fn answered_before_saved(request: &atoll_proto::Request) -> bool {
    matches!(
        request,
        atoll_proto::Request::Coordinate {
            message: atoll_core::coord::Message::Trigger { .. },
            ..
        }
    )
}

/// The backend as a monitor.
fn monitor(env: &Env) -> &dyn Monitor {
    monitor_of(&*env.backend)
}

/// A backend as a monitor.
fn monitor_of(b: &dyn atoll_core::backend::Backend) -> &dyn Monitor {
    b
}
