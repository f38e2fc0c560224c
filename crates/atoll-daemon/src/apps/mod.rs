//! Reconfigurable applications (seed 002, BarbequeRTRM) in the control
//! loop.
//!
//! An application registers through the API (`app_register`) with a recipe
//! of working modes, named in the config (`[recipe.NAME]`) or sent along.
//! The daemon keeps an [`Apps`] state: every registered application with
//! its process, owner, assignment and progress, the policy's
//! [`Planner`] and a [`PlanBatcher`].
//!
//! - **Events.** A registration, an application leaving (`app_done`) or
//!   exiting (checked every epoch), and a report whose goal gap asks for it
//!   ([`gap_needs_replan`](atoll_core::awm::trigger::gap_needs_replan)
//!   outside the `[apps] gap_deadband`, and different from the gap the last
//!   plan saw) are events for the batcher: a burst gives one planning run.
//! - **Planning** (when the batcher is due, checked every epoch): the
//!   planner gets what each island offers applications (its CPUs, as
//!   coordination has them now, minus the config units' `cpus`, and its
//!   memory share minus their protected memory: the "default recipe" of
//!   unmodified processes, which keep their units and entitlements) and
//!   every application with its current pair, goal gap and waiting count.
//! - **Applying** the schedule's changes in order, frees first
//!   ([`run`]): each application runs in its own runtime unit `app-<id>`
//!   in its island with `cpu.max` = the mode's quota and `memory.max` = its
//!   memory ([`units`]); a move creates the unit in the new island, moves
//!   the process (its threads come along; its children too) and removes the
//!   old unit; a blocked application's unit is frozen (without a freezer it
//!   is left at its smallest mode's quota, and its assignment says so).
//!   Every change is a decision whose reason is the change's text, so
//!   `atoll why app-<id>` tells its story.
//! - **The `apps` layer** (see [`crate::compose`]): an application unit's
//!   suspension and its CPUs (its own in an exclusive mode, else its
//!   island's less those others hold). A unit's group is written by the
//!   composer before its process moves in: moves wait in
//!   [`Apps::after_flush`] until the groups they need exist.
//! - **Assignments.** Each change of what an application should do bumps
//!   its generation; `app_poll` returns the assignment and the client
//!   compares generations.

mod api;
mod power;
mod run;
mod units;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

pub use api::{AppsError, Registering};
use atoll_core::awm::trigger::{gap_needs_replan, goal_gap, PlanBatcher};
use atoll_core::awm::{Current, Grant, Planner, Recipe};
use atoll_core::decision::Reason;
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::spec::{PlatformSpec, APP_UNIT_PREFIX};
use atoll_core::topology::Topology;
use atoll_core::{CpuSet, Name};
use atoll_proto::apps::{AppAssignment, AppRunState};

use crate::compose::{At, Composer, Layer};
use crate::placement::Placement;

/// Reports of progress are kept over at least this long for the rate.
pub const RATE_WINDOW: Duration = Duration::from_secs(1);
/// Most reports kept per application.
const MAX_SAMPLES: usize = 64;

/// The unit of application `id`.
pub(crate) fn unit_name(id: u64) -> Name {
    Name::new(&format!("{APP_UNIT_PREFIX}{id}")).expect("app-<digits> is a valid name")
}

/// One registered application.
#[derive(Clone, Debug)]
pub(crate) struct App {
    /// Its id.
    pub(crate) id: u64,
    /// Its recipe.
    pub(crate) recipe: Arc<Recipe>,
    /// Its process.
    pub(crate) pid: u32,
    /// The process's start time (a reused pid is another process).
    pub(crate) start_ticks: u64,
    /// The process's owner: who may poll, report and leave.
    pub(crate) uid: u32,
    /// Grows with every change of what it should do.
    pub(crate) generation: u64,
    /// What it was last told.
    pub(crate) state: AppRunState,
    /// Its grant in force, while it runs.
    pub(crate) grant: Option<Grant>,
    /// The island of its unit, once it has one.
    pub(crate) unit_island: Option<Name>,
    /// Its unit is suspended.
    pub(crate) frozen: bool,
    /// It waits but could not be suspended (no freezer).
    pub(crate) unfrozen_wait: bool,
    /// CPUs of its own (exclusive modes).
    pub(crate) pinned: Option<CpuSet>,
    /// Consecutive planning runs it was blocked.
    pub(crate) waiting: u32,
    /// Why it waits, in words.
    pub(crate) reason: String,
    /// It ran at least once.
    pub(crate) ever_ran: bool,
    /// Its goal gap (0 without a goal or a rate).
    pub(crate) goal_gap: f64,
    /// The goal gap the last plan saw.
    pub(crate) planned_gap: f64,
    /// Its goal, cycles per second.
    pub(crate) goal_cps: Option<f64>,
    /// Its rate over the kept reports, cycles per second.
    pub(crate) rate: Option<f64>,
    /// Reports since its assignment last changed: (time, cycles).
    pub(crate) samples: VecDeque<(Duration, u64)>,
    /// Times its working mode or island changed.
    pub(crate) reconfigurations: u64,
    /// The unit its process was in when it registered: the application's
    /// unit takes that unit's network class (`docs/netisland.md`).
    pub(crate) came_from: Option<Name>,
}

impl App {
    /// Its current pair, for the planner.
    pub(crate) fn current(&self) -> Option<Current> {
        self.grant.as_ref().map(|g| Current {
            mode: g.mode,
            island: g.island.clone(),
        })
    }

    /// Its unit's group, once it has one.
    pub(crate) fn group(&self) -> Option<GroupPath> {
        self.unit_island
            .as_ref()
            .map(|i| GroupPath::unit(i, &unit_name(self.id)))
    }

    /// Its assignment.
    pub(crate) fn assignment(&self) -> AppAssignment {
        AppAssignment {
            app: self.id,
            generation: self.generation,
            state: self.state.clone(),
        }
    }

    /// Records a report: `cycles` done so far at `now`, against `goal`
    /// (if given; 0 clears it). The rate is over the reports of at least
    /// the last [`RATE_WINDOW`] since its assignment last changed. Returns
    /// whether the new goal gap asks for a plan: outside `±deadband`, and
    /// by more than that from the gap the last plan saw.
    pub(crate) fn record(
        &mut self,
        now: Duration,
        cycles: u64,
        goal: Option<f64>,
        deadband: f64,
    ) -> bool {
        if let Some(g) = goal {
            self.goal_cps = (g > 0.0).then_some(g);
        }
        // A counter that went back was restarted: start over.
        if self.samples.back().is_some_and(|&(_, c)| cycles < c) {
            self.samples.clear();
        }
        if self.samples.back().is_some_and(|&(t, _)| t == now) {
            self.samples.pop_back();
        }
        self.samples.push_back((now, cycles));
        while self.samples.len() > MAX_SAMPLES
            || (self.samples.len() > 2 && self.samples[1].0 + RATE_WINDOW <= now)
        {
            self.samples.pop_front();
        }
        let (Some(&(t0, c0)), Some(&(t1, c1))) = (self.samples.front(), self.samples.back()) else {
            return false;
        };
        if t1 > t0 {
            let (dt, dc) = (t1 - t0, c1 - c0);
            self.rate = Some(dc as f64 / dt.as_secs_f64());
            self.goal_gap = self
                .goal_cps
                .and_then(|g| goal_gap(dc, dt, g))
                .unwrap_or(0.0);
        } else if self.goal_cps.is_none() {
            self.goal_gap = 0.0;
        }
        self.grant.is_some()
            && gap_needs_replan(self.goal_gap, deadband)
            && gap_needs_replan(self.goal_gap - self.planned_gap, deadband)
    }

    /// Its assignment changed: the rate measured under the old one says
    /// nothing about the new one.
    pub(crate) fn restart_measurement(&mut self) {
        self.samples.clear();
        self.rate = None;
        self.goal_gap = 0.0;
    }
}

/// Every registered application, the policy and the batcher.
#[derive(Debug)]
pub(crate) struct Apps {
    /// By id.
    pub(crate) list: BTreeMap<u64, App>,
    next_id: u64,
    pub(crate) planner: Planner,
    pub(crate) batcher: PlanBatcher,
    pub(crate) deadband: f64,
    /// Planning runs made.
    pub(crate) runs: u64,
    /// CPUs held by exclusive modes, per island.
    pins: BTreeMap<Name, CpuSet>,
    /// Units of applications a previous run left have been looked for.
    pub(crate) swept: bool,
    /// Moves waiting for their units' groups to be written.
    pending: Vec<PendingMove>,
    /// The modes' watts learned from RAPL (see [`power`]).
    pub(crate) watts: atoll_core::power::learn::WattsLearner,
    /// What the last learning sample saw.
    marks: power::PowerMarks,
}

/// An application's process (and whatever else is in its old unit) to move
/// into its unit once the unit's group is written.
#[derive(Clone, Debug)]
struct PendingMove {
    id: u64,
    from: Option<GroupPath>,
    to: GroupPath,
    why: Reason,
}

/// What the applications' steps take besides their own state.
pub struct Kit<'a, 'b> {
    /// Moving processes, the registry, decisions.
    pub p: &'b mut Placement<'a>,
    /// Touching and removing groups.
    pub compose: &'b mut Composer,
    /// The CPUs each island holds now.
    pub island_cpus: &'b BTreeMap<Name, CpuSet>,
    /// The machine.
    pub topo: &'b Topology,
}

impl Layer for Apps {
    fn name(&self) -> &'static str {
        "apps"
    }

    fn lay(&self, at: &At<'_>, s: &mut GroupSettings) {
        let Some(app) = self.at(at.path) else {
            return;
        };
        s.frozen = app.frozen;
        if let Some(cpus) = self.unit_cpus(app.id, at.parent.and_then(|p| p.cpus.as_ref())) {
            s.cpus = Some(cpus);
        }
    }
}

impl Apps {
    /// Whether the next epoch can be late without missing anything: no
    /// application is registered and no move waits.
    pub(crate) fn quiescent(&self) -> bool {
        self.list.is_empty() && self.pending.is_empty()
    }

    /// No applications yet; the policy from `spec.apps` (the default one,
    /// with a warning, if it is invalid: the config checks it first).
    pub(crate) fn new(spec: &PlatformSpec) -> Self {
        let a = &spec.apps;
        let planner = Planner::new(a.weights, a.params).unwrap_or_else(|e| {
            tracing::warn!("[apps]: {e}; using the default policy");
            Planner::default()
        });
        Self {
            list: BTreeMap::new(),
            next_id: 1,
            planner,
            batcher: PlanBatcher::new(a.batch_quiet, a.batch_max),
            deadband: a.gap_deadband,
            runs: 0,
            pins: BTreeMap::new(),
            swept: false,
            pending: Vec::new(),
            watts: Default::default(),
            marks: Default::default(),
        }
    }

    /// Takes the policy of a reloaded `spec.apps` (the applications and
    /// their schedule stay; the next plan uses the new weights).
    pub(crate) fn reconfigure(&mut self, spec: &PlatformSpec) {
        let fresh = Self::new(spec);
        self.planner = fresh.planner;
        self.batcher = fresh.batcher;
        self.deadband = fresh.deadband;
    }

    /// The `cpuset.cpus` an application's unit needs: its own CPUs when its
    /// mode is exclusive; else, in an island where others have CPUs of
    /// their own, the island's other CPUs (`live`: what the island holds
    /// now); else `None` (the island's).
    pub(crate) fn unit_cpus(&self, id: u64, live: Option<&CpuSet>) -> Option<CpuSet> {
        let app = self.list.get(&id)?;
        if let Some(p) = &app.pinned {
            return Some(p.clone());
        }
        let island = app.unit_island.as_ref()?;
        let pins = self.pins(island);
        if pins.is_empty() {
            return None;
        }
        let rest = live?.difference(&pins);
        (!rest.is_empty()).then_some(rest)
    }

    /// The CPUs an application may run on, as its assignment says.
    pub(crate) fn run_cpus(&self, id: u64, island_cpus: &BTreeMap<Name, CpuSet>) -> CpuSet {
        let Some(app) = self.list.get(&id) else {
            return CpuSet::new();
        };
        let live = app
            .unit_island
            .as_ref()
            .or(app.grant.as_ref().map(|g| &g.island))
            .and_then(|i| island_cpus.get(i));
        if let Some(c) = self.unit_cpus(id, live) {
            return c;
        }
        app.grant
            .as_ref()
            .and_then(|g| island_cpus.get(&g.island))
            .cloned()
            .unwrap_or_default()
    }

    /// A fresh id whose unit name is free.
    pub(crate) fn take_id(&mut self, taken: impl Fn(&str) -> bool) -> u64 {
        loop {
            let id = self.next_id;
            self.next_id += 1;
            if !self.list.contains_key(&id) && !taken(unit_name(id).as_str()) {
                return id;
            }
        }
    }

    /// The application registered for `pid`.
    pub(crate) fn by_pid(&self, pid: u32) -> Option<&App> {
        self.list.values().find(|a| a.pid == pid)
    }

    /// The application whose unit's group is `group`.
    pub(crate) fn at(&self, group: &GroupPath) -> Option<&App> {
        let (island, unit) = group.as_str().split_once('/')?;
        let id: u64 = unit.strip_prefix(APP_UNIT_PREFIX)?.parse().ok()?;
        self.list
            .get(&id)
            .filter(|a| a.unit_island.as_ref().is_some_and(|i| i.as_str() == island))
    }

    /// CPUs held by exclusive modes in `island`.
    pub(crate) fn pins(&self, island: &Name) -> CpuSet {
        self.pins.get(island).cloned().unwrap_or_default()
    }

    /// Recomputes [`pins`](Self::pins) after pins changed.
    pub(crate) fn recount_pins(&mut self) {
        self.pins.clear();
        for a in self.list.values() {
            if let (Some(i), Some(p)) = (&a.unit_island, &a.pinned) {
                let e = self.pins.entry(i.clone()).or_default();
                *e = e.union(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use atoll_core::awm::{Needs, WorkingMode};

    use super::*;

    pub(super) fn app() -> App {
        App {
            id: 1,
            recipe: Arc::new(Recipe {
                name: Name::new("r").unwrap(),
                priority: 0,
                modes: vec![WorkingMode {
                    power_watts: None,
                    id: 0,
                    name: String::new(),
                    value: 1.0,
                    needs: Needs {
                        cpu_quota: 1.0,
                        threads: None,
                        exclusive_cpus: false,
                        memory_bytes: 0,
                        islands: None,
                    },
                }],
            }),
            pid: 10,
            start_ticks: 0,
            uid: 0,
            generation: 0,
            state: AppRunState::Waiting {
                reason: String::new(),
            },
            grant: None,
            unit_island: None,
            frozen: false,
            unfrozen_wait: false,
            pinned: None,
            waiting: 0,
            reason: String::new(),
            ever_ran: false,
            goal_gap: 0.0,
            planned_gap: 0.0,
            goal_cps: None,
            rate: None,
            samples: VecDeque::new(),
            reconfigurations: 0,
            came_from: None,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_rate_spans_at_least_the_window_and_gives_the_gap() {
        let mut a = app();
        assert!(!a.record(ms(0), 0, Some(100.0), 0.05));
        assert_eq!(a.rate, None);
        // 40 cycles per 500 ms: 80/s against 100/s, gap 0.25.
        for k in 1..=6 {
            a.record(ms(500 * k), 40 * k, None, 0.05);
        }
        assert_eq!(a.rate, Some(80.0));
        assert!((a.goal_gap - 0.25).abs() < 1e-9, "{}", a.goal_gap);
        // The oldest sample kept is the newest one a window old.
        assert_eq!(a.samples.front().unwrap().0, ms(2000));
        // A waiting application does not ask for plans; a running one does,
        // once, until the gap moves again.
        assert!(!a.record(ms(3500), 280, None, 0.05));
        a.grant = Some(Grant {
            app: atoll_core::awm::AppId(1),
            mode: 0,
            island: Name::new("x").unwrap(),
            cpu_quota: 1.0,
            exclusive_cpus: 0,
            threads: None,
            memory_bytes: 0,
            score: Default::default(),
        });
        assert!(a.record(ms(4000), 320, None, 0.05));
        a.planned_gap = a.goal_gap;
        assert!(!a.record(ms(4500), 360, None, 0.05));
        // A counter that goes back starts over.
        a.record(ms(5000), 5, None, 0.05);
        assert_eq!(a.samples.len(), 1);
        // On target: no plan.
        let mut b = app();
        b.grant = a.grant.clone();
        b.record(ms(0), 0, Some(10.0), 0.05);
        assert!(!b.record(ms(1000), 10, None, 0.05));
        assert_eq!(b.goal_gap, 0.0);
    }
}
