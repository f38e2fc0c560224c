//! `atoll bench coordination`: what coordination costs (issue 4).
//!
//! - [`messages`]: the cost of one message through the real
//!   `PlatformManager`, for the paper's five rows (null, tune, trigger,
//!   borrow across 2 and 6 islands). Pure CPU work: no root needed.

use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::machine::{self, Machine};

pub mod messages;

pub use messages::{MessageCost, MessageCosts};

/// What `atoll bench coordination` runs.
#[derive(Clone, Debug)]
pub struct CoordinationOptions {
    /// Fewer calls (a smoke test).
    pub quick: bool,
    /// The command line, for the report.
    pub command: String,
}

/// Everything one run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoordinationReport {
    /// Per message kind, ns.
    pub messages: MessageCosts,
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
    Ok(CoordinationReport {
        messages,
        machine: machine::describe("none"),
        command: opts.command.clone(),
    })
}

/// The report as text.
pub fn render_table(r: &CoordinationReport) -> String {
    format!(
        "{}machine: {}\ncommand: {}",
        messages::render(&r.messages),
        r.machine,
        r.command
    )
}
