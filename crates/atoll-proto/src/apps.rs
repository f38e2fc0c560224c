//! Wire types of reconfigurable applications (BarbequeRTRM, seed 002): an
//! application registers with its recipe (its working modes), learns the
//! working mode and resources it is assigned, is told to suspend and
//! resume, and reports its progress against a goal.
//!
//! ```text
//! → {"v":1,"id":1,"op":"app_register","recipe":{"named":"bodytrack"},"pid":4242}
//! ← {"v":1,"id":1,"ok":{"kind":"app_registered","app":7,"assignment":{...}}}
//! → {"v":1,"id":2,"op":"app_poll","app":7,"after":3}
//! ← {"v":1,"id":2,"ok":{"kind":"app_assignment","app":7,"generation":4,
//!    "state":"running","mode":2,"island":"b","cpu_quota":2.0,...}}
//! → {"v":1,"id":3,"op":"app_report","app":7,"cycles":120,"goal_cps":30.0}
//! ← {"v":1,"id":3,"ok":{"kind":"app_reported","app":7,"goal_gap":0.25}}
//! ```
//!
//! An assignment carries a `generation` that grows with every change, so a
//! client that polls with `after` = the last generation it acted on learns
//! whether anything changed.

pub use atoll_core::awm::Recipe;
use serde::{Deserialize, Serialize};

use crate::CpuSet;

/// The recipe an application registers with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RecipeRef {
    /// A recipe of the platform description (`[recipe.NAME]`).
    Named(String),
    /// A recipe sent along.
    Inline(Recipe),
}

/// What an application should be doing now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum AppRunState {
    /// Not scheduled yet, or blocked: its smallest working mode does not fit
    /// (it is suspended meanwhile).
    Waiting {
        /// Why, in words.
        reason: String,
    },
    /// Running in a working mode with these resources.
    Running {
        /// The working mode's id.
        mode: u8,
        /// The working mode's name (may be empty).
        #[serde(default)]
        mode_name: String,
        /// The island.
        island: String,
        /// CPUs' worth of time (its unit's `cpu.max`).
        cpu_quota: f64,
        /// The CPUs it may run on.
        cpus: CpuSet,
        /// Threads the working mode asks for, if it says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        threads: Option<u32>,
        /// Memory it may use, bytes.
        memory_bytes: u64,
    },
}

/// An application's assignment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppAssignment {
    /// The application.
    pub app: u64,
    /// Grows with every change of `state`.
    pub generation: u64,
    /// What to do.
    #[serde(flatten)]
    pub state: AppRunState,
}

/// One application as `atoll apps` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppStatus {
    /// Its id.
    pub app: u64,
    /// Its recipe's name.
    pub name: String,
    /// Its priority (0 highest).
    pub priority: u8,
    /// Its process.
    pub pid: u32,
    /// The unit that holds it (`island/unit`), while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Its assignment.
    pub assignment: AppAssignment,
    /// Its goal, cycles per second, once reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_cps: Option<f64>,
    /// Its rate over the last report interval, cycles per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles_per_s: Option<f64>,
    /// `goal / rate - 1`: above 0 it needs more, below 0 it has more than
    /// it needs; 0 without a goal.
    pub goal_gap: f64,
    /// Times its working mode or island changed.
    pub reconfigurations: u64,
    /// The power of the mode it runs in, as the power term uses it: the
    /// recipe's `power_watts` or the figure learned from RAPL (`None`:
    /// neither, or not running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<AppPower>,
}

/// The watts of an application's working mode.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppPower {
    /// Its power, W.
    pub watts: f64,
    /// Recipe or learned.
    pub from: crate::energy::WattsFrom,
}
