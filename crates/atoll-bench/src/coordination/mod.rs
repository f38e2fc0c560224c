//! `atoll bench coordination`: what coordination costs (issue 4).
//!
//! - [`messages`]: the cost of one message through the real
//!   `PlatformManager`, for the paper's five rows (null, tune, trigger,
//!   borrow across 2 and 6 islands). Pure CPU work: no root needed.
//! - [`api`]: from an API call to the cgroup change applied, through the
//!   real daemon on real cgroups (root).
//! - [`trigger`]: from a `trigger` request to the boost written
//!   (`trigger_to_effect_us`), on the same daemon.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::machine::{self, Machine};

pub mod api;
pub mod messages;
pub mod trigger;

pub use api::ApiActuation;
pub use messages::{MessageCost, MessageCosts};

/// What `atoll bench coordination` runs.
#[derive(Clone, Debug)]
pub struct CoordinationOptions {
    /// The atoll binary (for the daemon).
    pub exe: PathBuf,
    /// Fewer calls (a smoke test).
    pub quick: bool,
    /// Also time API calls through a real daemon (needs root).
    pub api: bool,
    /// The command line, for the report.
    pub command: String,
}

/// Everything one run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoordinationReport {
    /// Per message kind, ns.
    pub messages: MessageCosts,
    /// `api_to_actuation_us`: a `tune` from the client to the cgroup write,
    /// µs (`None` with `--no-api`).
    pub api_to_actuation_us: Option<ApiActuation>,
    /// `trigger_to_effect_us`: a `trigger` from the request to the boost
    /// written, µs (`None` with `--no-api`).
    #[serde(default)]
    pub trigger_to_effect_us: Option<ApiActuation>,
    /// The machine the numbers come from.
    pub machine: Machine,
    /// How to run it again.
    pub command: String,
}

/// Calls timed per message kind.
pub fn calls(quick: bool) -> usize {
    if quick {
        2_000
    } else {
        200_000
    }
}

/// Runs the benchmark.
pub fn run(opts: &CoordinationOptions) -> Result<CoordinationReport, BenchError> {
    let messages = messages::measure(calls(opts.quick))?;
    let measured = if opts.api {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(BenchError::Unusable(
                "timing API calls starts the daemon on real cgroups: run as root, or pass --no-api"
                    .into(),
            ));
        }
        let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online").map_err(|source| {
            BenchError::Io {
                op: "read",
                path: "/sys/devices/system/cpu/online".into(),
                source,
            }
        })?;
        let dir = tempfile::tempdir().map_err(|source| BenchError::Io {
            op: "create",
            path: std::env::temp_dir(),
            source,
        })?;
        let n = if opts.quick { 50 } else { 1000 };
        Some(api::measure(&opts.exe, dir.path(), cpus.trim(), n)?)
    } else {
        None
    };
    let (api_to_actuation_us, trigger_to_effect_us) = match measured {
        Some((a, t)) => (Some(a), Some(t)),
        None => (None, None),
    };
    let backend = match &api_to_actuation_us {
        Some(a) if a.knob.ends_with("cpu.shares") => "cgroup1",
        Some(_) => "cgroup2",
        None => "none",
    };
    Ok(CoordinationReport {
        messages,
        api_to_actuation_us,
        trigger_to_effect_us,
        machine: machine::describe(backend),
        command: opts.command.clone(),
    })
}

/// The report as text.
pub fn render_table(r: &CoordinationReport) -> String {
    let api = match &r.api_to_actuation_us {
        Some(a) => format!(
            "api_to_actuation_us (tune, {} calls, checked in {}): p50 {:.0} us, p99 {:.0} us\n",
            a.us.count, a.knob, a.us.p50, a.us.p99
        ),
        None => String::new(),
    };
    let trigger = match &r.trigger_to_effect_us {
        Some(a) => format!(
            "trigger_to_effect_us (trigger, {} calls, checked in {}): p50 {:.0} us, p99 {:.0} us\n",
            a.us.count, a.knob, a.us.p50, a.us.p99
        ),
        None => String::new(),
    };
    format!(
        "{}{api}{trigger}machine: {}\ncommand: {}",
        messages::render(&r.messages),
        r.machine,
        r.command
    )
}
