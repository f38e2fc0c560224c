//! Reconfigurable applications (seed 002, BarbequeRTRM): working modes and
//! the multi-objective allocation policy that picks one for each
//! application and maps it on an island.
//!
//! This module is the pure core of the feature: the [`Recipe`] types a user
//! writes, the four contributions of the score ([`score`]), the
//! [`Planner`] that turns the active applications and the islands'
//! capacities into a [`Schedule`], and the helpers that decide when to plan
//! ([`trigger`]). The daemon, the runtime library and the CLI build on it;
//! nothing here reads a file, a clock or a global.
//!
//! # From the paper to atoll
//!
//! | BarbequeRTRM (Bellasi et al., §4)                       | atoll                                                                 |
//! |---------------------------------------------------------|-----------------------------------------------------------------------|
//! | application working mode (AWM): resources for a QoS     | [`WorkingMode`]: `value` (normalized QoS) and [`Needs`]               |
//! | recipe of AWMs, application priority                    | [`Recipe`] (`priority` 0 highest)                                     |
//! | cluster / node (PUs, CPU time quota, memory node)       | island ([`IslandCapacity`]: CPUs, memory)                             |
//! | `f = aV + bR + cL + dF`                                 | [`Weights::combine`] (`R` split into reconfiguration and migration)   |
//! | V: static, normalized value of the AWM                  | [`score::value`], shifted by the runtime library's goal gap           |
//! | R: reconfiguration and migration overheads              | [`score::reconfiguration`], [`score::migration`]                      |
//! | L: congestion, saturation from 70-80 % usage            | [`score::balance`] with [`PolicyParams::knee`]                        |
//! | F: fair share among the demanding applications          | [`score::fairness`] with the live fair share of the priority level    |
//! | ordering: evaluate each ⟨AWM, cluster⟩ pair             | per level, each application's best pair under the level's start state |
//! | selection: walk the list, skip scheduled applications   | walk applications in that order; each takes its best pair *now*       |
//! | repeat per priority level                               | levels in order; a level sees what the levels above left              |
//! | postpone an application that cannot get a minimum       | [`Schedule::blocked`]: it waits (suspended), never squeezed           |
//!
//! # The algorithm ([`Planner::plan`])
//!
//! The new schedule is computed from scratch (nothing is held over from
//! the last one); an application's current pair matters through `R`,
//! hysteresis and incumbency. CPU is accounted in milli-CPUs (integers,
//! needs rounded up, capacities down), memory in bytes, so capacity checks
//! are exact.
//!
//! For each priority level, highest first:
//!
//! 1. **Ordering.** Each application of the level is evaluated against the
//!    state the level starts from: its best `(mode, island)` pair by total
//!    score. Applications with no pair that fits are blocked at once (usage
//!    only grows during a level, so nothing would fit later). The others
//!    are sorted running ones first, then by that best total plus an aging
//!    bonus (`aging × waiting`, capped), highest first, ties by id.
//! 2. **Incumbency.** The current pairs of the running applications are
//!    reserved in that order (those that still fit).
//! 3. **Selection.** In that order each application gives back its
//!    reservation, is evaluated again against the *current* state (every
//!    grant made earlier in the run, and the reservations of the running
//!    applications still to come), and takes its best pair; if none fits
//!    it is blocked. Running applications whose pair could not be reserved
//!    come after the reserved ones, new and waiting ones last.
//! 4. **Idle capacity** (`PolicyParams::grow_into_idle`, on by default).
//!    `L` scores a full island 0, so the selection leaves room on an
//!    island for applications that might come: an application alone on
//!    an island of 2 CPUs stays in its 1-CPU mode. When no application of
//!    the run is blocked, that room would only stay idle, so each granted
//!    application (priority order, then id) takes, on its own island, the
//!    mode of highest value that fits in what is left, if it is worth more
//!    by more than the hysteresis margin and stays within its fair share
//!    (all CPUs over all applications, times `fair_slack`); not one that
//!    reported a negative goal gap. Its score says so ("grown into idle
//!    capacity"). Found by `atoll bench awm`: the last instance of a burst
//!    ran at half speed beside an idle CPU.
//!
//! The paper evaluates all pairs once per level and walks one sorted list,
//! so its `L` and `F` ignore the grants made during the walk: a burst of
//! applications would all see the same least-loaded island. Here `L` uses
//! the island's usage including the run's grants, and `F` the live fair
//! share (free platform CPU and memory, reservations counted as free,
//! divided by the level's applications still to be served), which keeps
//! the level work-conserving: what early applications leave is shared
//! among the later ones. The price is a second evaluation per application,
//! which the pruning below makes cheap.

//! # Pruning and complexity
//!
//! `V`, `R_r` and `F` do not depend on the island; `R_m` only tells the
//! current island from the others; `L` decreases with the island's usage
//! after the grant. So for a given mode only two islands can be best: the
//! current one, and the one with the lowest usage after the grant among
//! those that fit. Islands are grouped into classes of equal CPU capacity,
//! each class kept sorted by CPU in use: the first island of a class that
//! is allowed and has the memory is the best of its class (if it lacks the
//! CPU, so do all after it). An evaluation costs `O(M·(K + s))` for `M`
//! modes, `K` capacity classes and `s` islands skipped for constraints or
//! memory, instead of `O(M·I)`; a grant re-sorts one island in its class
//! (`O(I)` worst, a few swaps usually).
//!
//! Planning `N` applications costs `O(N·M + N log N + N·M·(K + s))`
//! (validation, sorting, the two evaluations), plus `O(N log N)` to order
//! the changes (`O(m²)` in the worst case of a chain of `m` moves each
//! waiting for the next). For the benchmark of 1,000 applications × 8
//! modes × 64 equal islands this is 16,000 mode evaluations of `O(1)`
//! each, instead of 512,000 pair evaluations per pass; measured at about
//! 0.65 ms per plan (median, release build, on a loaded 2-thread machine),
//! against a target of 2 ms (`cargo bench -p atoll-core --bench awm_plan`).
//!
//! # Stability
//!
//! - **Hysteresis.** An application keeps its current pair if it still
//!   fits and its total is within [`PolicyParams::hysteresis`] of the best
//!   one (the margin shrinks as the reported goal gap grows, so a clear gap
//!   is acted on). `R` already favours the current pair; the margin keeps
//!   two nearly equal pairs from alternating between runs as other
//!   applications come and go.
//! - **Incumbency.** A running application is never blocked to make room
//!   for a new or waiting one of its own level: its current pair is
//!   reserved until its turn, so it always has at least that. Fairness
//!   still applies: with newcomers its fair share drops and it may shrink
//!   to let them in. Only a higher priority level can take its room (the
//!   paper's priorities), which is then a release, not a squeeze.
//! - **Aging** orders the waiting applications of a level (the longest
//!   waiting first among similar scores); it does not preempt running ones.
//!
//! Together: blocked applications wait for room instead of thrashing, as
//! in the paper's burst experiments (a partial serialization of the
//! workload).

//! # Applying a schedule
//!
//! [`Schedule::changes`] lists what the daemon must do, frees first:
//! releases and waits (blocked applications are suspended), shrinks in
//! place, moves and reshapes (in an order that keeps every island within
//! capacity whenever possible: a move waits until its destination has
//! room), then grows in place and new grants. Unchanged applications have
//! no change. Replayed in order from a previous schedule within capacity,
//! no step of the last two groups exceeds an island's capacity. Each change
//! renders its reason for the decision log with `Display` (or
//! [`Change::reason`]), e.g. `app 7 (bodytrack): mode 2 → 1 on island b (2
//! → 1 CPUs, 0 B → 0 B): score 0.71 (V 0.50 Rr 0.00 Rm 1.00 L 0.93 F
//! 1.00)`.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::Name;

mod plan;
mod recipe;
mod schedule;
pub mod score;
pub mod trigger;

#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod power_tests;
#[cfg(test)]
mod prop_tests;

pub use plan::{PlanError, Planner};
pub use recipe::{Needs, Recipe, RecipeError, WorkingMode, MAX_MODES};
pub use schedule::{BlockInfo, Change, ChangeKind, Grant, Placement, Schedule};
pub use score::{PolicyError, PolicyParams, Score, Weights};

/// An application known to the policy (the daemon's registration id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AppId(pub u64);

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What an island offers to managed applications.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IslandCapacity {
    /// The island.
    pub name: Name,
    /// CPUs' worth of time available to applications (finite, `>= 0`).
    pub cpus: f64,
    /// Memory available to applications, bytes (`u64::MAX`: not metered).
    pub memory_bytes: u64,
}

impl IslandCapacity {
    /// An island with this capacity.
    pub fn new(name: Name, cpus: f64, memory_bytes: u64) -> Self {
        Self {
            name,
            cpus,
            memory_bytes,
        }
    }
}

/// Where an application runs now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Current {
    /// Its working mode.
    pub mode: u8,
    /// Its island.
    pub island: Name,
}

/// An active application as the policy sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct AppState {
    /// Its id.
    pub app: AppId,
    /// Its recipe (shared between instances of the same application).
    pub recipe: Arc<Recipe>,
    /// Its current pair, `None` if it is new or waiting.
    pub current: Option<Current>,
    /// The goal gap its runtime library last reported: `> 0` it needs more
    /// (0.25: it runs 25 % below its goal), `< 0` it has more than it needs,
    /// 0 on target or no goal. See [`score::value`].
    pub goal_gap: f64,
    /// Consecutive planning runs it has been blocked (fairness: aging within
    /// its priority level). The daemon increments it for each run that
    /// blocks the application and resets it on a grant.
    pub waiting: u32,
}

impl AppState {
    /// A new application: no current pair, no gap, not waiting.
    pub fn new(app: AppId, recipe: Arc<Recipe>) -> Self {
        Self {
            app,
            recipe,
            current: None,
            goal_gap: 0.0,
            waiting: 0,
        }
    }
}
