//! The paper's execution loop (BarbequeRTRM's RTLib: setup, then
//! configure / run / monitor until done, then release) over the
//! application calls of [`Client`].
//!
//! [`AppRuntime`] is a state machine: each [`AppRuntime::next_step`] says
//! what the application should do now ([`Step`]). It never starts threads
//! and never calls back on its own, so a plain loop can drive it; the
//! callback form ([`Reconfigurable`], [`AppRuntime::run`]) is a loop over
//! it. Between steps it:
//!
//! * polls the daemon at most every [`RuntimeOptions::poll_every`], asking
//!   with the generation the application last acted on;
//! * reports the cycles counted ([`AppRuntime::cycles_done`]) and the goal
//!   at most every [`RuntimeOptions::report_every`], and only when either
//!   changed since the last report;
//! * turns a new assignment into [`Step::Configure`] (running: adapt to
//!   the grant) or [`Step::Suspend`] (waiting: stop working). An assignment
//!   whose generation moved but whose state is the one already acted on
//!   (a round trip while nobody looked) is not reported again;
//! * while the application is waiting, blocks inside `next_step`, polling
//!   every `poll_every`, until the daemon resumes it (then
//!   [`Step::Configure`]) or the application is stopped.
//!
//! Time comes from a [`Timer`] ([`SystemTimer`] by default), so tests drive
//! it without waiting. Stopping ([`StopHandle`], usable from other threads)
//! makes the next step [`Step::Release`]; [`AppRuntime::done`] then reports
//! the last cycles and tells the daemon the application is done. A runtime
//! dropped without `done` still tells it, best effort.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{AppAssignment, AppRunState, Grant, RecipeRef};
use crate::{Client, ClientError};

/// Shortest pause between two polls while waiting (when `poll_every` is 0).
const MIN_PAUSE: Duration = Duration::from_millis(1);
/// How long a dropped runtime waits for the daemon to take its `app_done`.
const DROP_TIMEOUT: Duration = Duration::from_secs(1);

/// Time as the runtime sees it: a monotonic clock and a way to wait.
pub trait Timer {
    /// Time since an arbitrary origin.
    fn now(&self) -> Duration;
    /// Waits `d`.
    fn sleep(&self, d: Duration);
}

/// The system's monotonic clock and `std::thread::sleep`.
#[derive(Clone, Copy, Debug)]
pub struct SystemTimer {
    origin: Instant,
}

impl SystemTimer {
    /// A timer whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl Timer for SystemTimer {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// How an [`AppRuntime`] registers, polls and reports.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeOptions {
    /// The process to register (`None`: the caller).
    pub pid: Option<u32>,
    /// Poll at most this often while running, and this often while waiting
    /// (default 100 ms).
    pub poll_every: Duration,
    /// Report progress at most this often (default 1 s).
    pub report_every: Duration,
    /// The goal, cycles per second (`None`: no goal; the goal gap stays 0).
    pub goal_cps: Option<f64>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            pid: None,
            poll_every: Duration::from_millis(100),
            report_every: Duration::from_secs(1),
            goal_cps: None,
        }
    }
}

/// What the application should do now.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Adapt to this grant (its parallelism, its CPUs, its memory): the
    /// first working mode, a new one, a new island or new resources, or a
    /// resumption after [`Step::Suspend`]. Then carry on with the work.
    Configure(Grant),
    /// Do one cycle of work, then count it with [`AppRuntime::cycles_done`].
    Run,
    /// Stop working: the daemon has the application wait (the reason, in
    /// words). The next [`AppRuntime::next_step`] blocks until it is resumed.
    Suspend(String),
    /// The application was stopped: release what it holds, then call
    /// [`AppRuntime::done`]. Every later step is `Release` too.
    Release,
}

/// Stops an [`AppRuntime`] from anywhere (another thread, a signal
/// watcher): its next step, or its wait while suspended, ends in
/// [`Step::Release`]. Clones share the flag.
#[derive(Clone, Debug, Default)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// Asks the runtime to stop.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether stopping was asked.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Where the application stands, for [`Reconfigurable::monitor`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// The application's id.
    pub app: u64,
    /// Cycles counted so far.
    pub cycles: u64,
    /// The goal gap of the last report (`None` before the first).
    pub goal_gap: Option<f64>,
    /// The generation of the assignment acted on.
    pub generation: u64,
}

/// What a runtime did, as [`AppRuntime::done`] returns it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// The application's id.
    pub app: u64,
    /// Cycles counted.
    pub cycles: u64,
    /// [`Step::Configure`] steps (the first grant included).
    pub configurations: u64,
    /// [`Step::Suspend`] steps.
    pub suspensions: u64,
    /// Polls sent.
    pub polls: u64,
    /// Reports sent.
    pub reports: u64,
    /// The goal gap of the last report.
    pub goal_gap: Option<f64>,
}

/// The outcome of one [`Reconfigurable::run`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// A cycle was done; more may follow.
    Continue,
    /// Nothing was done: the work is finished.
    Finished,
}

/// The execution loop as callbacks (BarbequeRTRM's `onSetup`,
/// `onConfigure`, `onSuspend`, `onRun`, `onMonitor`, `onRelease`), driven
/// by [`AppRuntime::run`].
pub trait Reconfigurable {
    /// The application's own error.
    type Error;

    /// Once, before anything else.
    fn setup(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Adapt to a grant: the first, a new one, or after a suspension.
    fn configure(&mut self, grant: &Grant) -> Result<(), Self::Error>;

    /// The daemon has the application wait; `run` is not called until the
    /// next `configure`.
    fn suspend(&mut self, reason: &str) -> Result<(), Self::Error> {
        let _ = reason;
        Ok(())
    }

    /// One cycle of work.
    fn run(&mut self) -> Result<Workload, Self::Error>;

    /// After each cycle, with the progress so far.
    fn monitor(&mut self, progress: &Progress) -> Result<(), Self::Error> {
        let _ = progress;
        Ok(())
    }

    /// Once, at the end (work finished or the runtime stopped), before the
    /// daemon is told the application is done.
    fn release(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Why [`AppRuntime::run`] ended early.
#[derive(Debug, thiserror::Error)]
pub enum RunError<E> {
    /// Talking to the daemon failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A callback failed.
    #[error("the application failed: {0}")]
    App(E),
}

/// A registered application and its execution loop (module docs).
#[derive(Debug)]
pub struct AppRuntime<T: Timer = SystemTimer> {
    client: Client,
    timer: T,
    options: RuntimeOptions,
    app: u64,
    /// The last assignment received.
    latest: AppAssignment,
    /// The generation and state the application last acted on.
    acted: Option<(u64, AppRunState)>,
    cycles: u64,
    /// Cycles and goal of the last report (at first: nothing done, no
    /// goal, which is not worth a report).
    reported: (u64, Option<f64>),
    goal_gap: Option<f64>,
    last_poll: Duration,
    last_report: Duration,
    stop: StopHandle,
    released: bool,
    finished: bool,
    counts: Summary,
}

impl AppRuntime<SystemTimer> {
    /// Registers the application with `recipe` and returns its runtime; the
    /// first step will be the first assignment.
    pub fn register(
        client: Client,
        recipe: RecipeRef,
        options: RuntimeOptions,
    ) -> Result<Self, ClientError> {
        Self::with_timer(client, recipe, options, SystemTimer::new())
    }
}

impl<T: Timer> AppRuntime<T> {
    /// [`register`](AppRuntime::register) with another clock.
    pub fn with_timer(
        mut client: Client,
        recipe: RecipeRef,
        options: RuntimeOptions,
        timer: T,
    ) -> Result<Self, ClientError> {
        client.check_goal(options.goal_cps)?;
        let (app, latest) = client.app_register(recipe, options.pid)?;
        let now = timer.now();
        Ok(Self {
            client,
            timer,
            options,
            app,
            latest,
            acted: None,
            cycles: 0,
            reported: (0, None),
            goal_gap: None,
            last_poll: now,
            last_report: now,
            stop: StopHandle::default(),
            released: false,
            finished: false,
            counts: Summary {
                app,
                ..Summary::default()
            },
        })
    }

    /// What to do now (module docs). Blocks while the application waits.
    pub fn next_step(&mut self) -> Result<Step, ClientError> {
        if self.stopping() {
            return Ok(Step::Release);
        }
        let now = self.timer.now();
        if now.saturating_sub(self.last_report) >= self.options.report_every {
            self.report(now)?;
        }
        if now.saturating_sub(self.last_poll) >= self.options.poll_every {
            self.poll(now)?;
        }
        loop {
            if let Some(step) = self.news() {
                return Ok(step);
            }
            if !matches!(self.acted, Some((_, AppRunState::Waiting { .. }))) {
                return Ok(Step::Run);
            }
            self.timer.sleep(self.options.poll_every.max(MIN_PAUSE));
            if self.stopping() {
                return Ok(Step::Release);
            }
            let now = self.timer.now();
            self.poll(now)?;
        }
    }

    fn stopping(&mut self) -> bool {
        self.released |= self.stop.is_stopped();
        self.released
    }

    fn poll(&mut self, now: Duration) -> Result<(), ClientError> {
        let after = self.acted.as_ref().map(|(g, _)| *g);
        self.latest = self.client.app_poll(self.app, after)?;
        self.last_poll = now;
        self.counts.polls += 1;
        Ok(())
    }

    fn report(&mut self, now: Duration) -> Result<(), ClientError> {
        self.last_report = now;
        let key = (self.cycles, self.options.goal_cps);
        if self.reported == key {
            return Ok(());
        }
        let gap = self
            .client
            .app_report(self.app, self.cycles, self.options.goal_cps)?;
        self.reported = key;
        self.goal_gap = Some(gap);
        self.counts.reports += 1;
        Ok(())
    }

    /// The step the latest assignment calls for, if it is news.
    fn news(&mut self) -> Option<Step> {
        let (generation, state) = (self.latest.generation, &self.latest.state);
        match &mut self.acted {
            Some((g, _)) if *g == generation => return None,
            Some((g, s)) if s == state => {
                *g = generation;
                return None;
            }
            _ => {}
        }
        self.acted = Some((generation, state.clone()));
        Some(match state {
            AppRunState::Waiting { reason } => {
                self.counts.suspensions += 1;
                Step::Suspend(reason.clone())
            }
            AppRunState::Running { .. } => {
                self.counts.configurations += 1;
                Step::Configure(Grant::of(state).expect("running"))
            }
        })
    }

    /// Counts `n` more cycles done (reported at the next report).
    pub fn cycles_done(&mut self, n: u64) {
        self.cycles = self.cycles.saturating_add(n);
    }

    /// Changes the goal (cycles per second; `None`: none), reported at the
    /// next report.
    pub fn set_goal_cps(&mut self, goal_cps: Option<f64>) -> Result<(), ClientError> {
        self.client.check_goal(goal_cps)?;
        self.options.goal_cps = goal_cps;
        Ok(())
    }

    /// A handle that stops this runtime (see [`Step::Release`]).
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// The application's id.
    pub fn app(&self) -> u64 {
        self.app
    }

    /// The last assignment received (possibly not acted on yet).
    pub fn assignment(&self) -> &AppAssignment {
        &self.latest
    }

    /// The grant the application last configured for; `None` before the
    /// first and while suspended.
    pub fn grant(&self) -> Option<Grant> {
        self.acted.as_ref().and_then(|(_, s)| Grant::of(s))
    }

    /// Where the application stands.
    pub fn progress(&self) -> Progress {
        Progress {
            app: self.app,
            cycles: self.cycles,
            goal_gap: self.goal_gap,
            generation: self.acted.as_ref().map_or(0, |(g, _)| *g),
        }
    }

    /// What the runtime did so far.
    pub fn summary(&self) -> Summary {
        Summary {
            cycles: self.cycles,
            goal_gap: self.goal_gap,
            ..self.counts
        }
    }

    /// The connection, for other requests.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Reports the cycles not reported yet, tells the daemon the
    /// application is done, and returns the summary.
    pub fn done(mut self) -> Result<Summary, ClientError> {
        let now = self.timer.now();
        self.report(now)?;
        self.client.app_done(self.app)?;
        self.finished = true;
        Ok(self.summary())
    }

    /// Runs the execution loop with callbacks until the work is finished
    /// (or the runtime is stopped), then [`done`](Self::done).
    pub fn run<A: Reconfigurable>(mut self, app: &mut A) -> Result<Summary, RunError<A::Error>> {
        app.setup().map_err(RunError::App)?;
        loop {
            match self.next_step()? {
                Step::Configure(grant) => app.configure(&grant).map_err(RunError::App)?,
                Step::Suspend(reason) => app.suspend(&reason).map_err(RunError::App)?,
                Step::Run => match app.run().map_err(RunError::App)? {
                    Workload::Continue => {
                        self.cycles_done(1);
                        app.monitor(&self.progress()).map_err(RunError::App)?;
                    }
                    Workload::Finished => break,
                },
                Step::Release => break,
            }
        }
        app.release().map_err(RunError::App)?;
        Ok(self.done()?)
    }
}

impl<T: Timer> Drop for AppRuntime<T> {
    fn drop(&mut self) {
        if !self.finished {
            // Best effort: the daemon also notices when the process ends.
            let _ = self.client.set_timeout(Some(DROP_TIMEOUT));
            let _ = self.client.app_done(self.app);
        }
    }
}
