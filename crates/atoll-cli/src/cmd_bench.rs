//! `atoll bench` and the hidden `atoll __worker`.
//!
//! The benchmarks live in `atoll-bench`; this file parses their flags,
//! installs the Ctrl-C handler (so cleanup runs), and prints a table or
//! JSON. Workers are this same binary re-executed (`current_exe`) as
//! `atoll __worker KIND ARGS...`.

use std::process::ExitCode;

use anyhow::Context;
use atoll_bench::coordination::{self, CoordinationOptions};
use atoll_bench::isolation::{self, config::parse_mode, IsolationOptions};
use atoll_bench::progress::Progress;
use atoll_bench::revocation::{self, Mechanism, RevocationOptions, Settings};
use clap::Subcommand;

/// Flags of `atoll bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// How fast a lent CPU comes back to its owner under each kernel
    /// mechanism (real cgroups; root).
    Revocation {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Short runs (a smoke test; the numbers are noisier).
        #[arg(long)]
        quick: bool,
        /// Mechanisms to compare.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "alone,none,cpu_idle,sched_idle,weight,cpuset",
            value_parser = parse_mechanism
        )]
        mechanisms: Vec<Mechanism>,
    },
    /// The isolation modes side by side: a light and a heavy unit under the
    /// real daemon (root).
    Isolation {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Short phases (a smoke test; the numbers are noisier).
        #[arg(long)]
        quick: bool,
        /// Modes to run.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "smp,quota,isolate",
            value_parser = parse_mode
        )]
        modes: Vec<atoll_core::spec::IsolationMode>,
        /// The lending mechanism whose revocation latency is reported (the
        /// one the daemon uses).
        #[arg(long, default_value = "cpu_idle", value_parser = parse_mechanism)]
        mechanism: Mechanism,
    },
    /// What coordination costs: one message through the platform manager
    /// (null, tune, trigger, borrow across 2 and 6 islands), in ns.
    Coordination {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Fewer calls (a smoke test; the numbers are noisier).
        #[arg(long)]
        quick: bool,
        /// Skip timing API calls through a real daemon (which needs root).
        #[arg(long)]
        no_api: bool,
    },
}

fn parse_mechanism(s: &str) -> Result<Mechanism, String> {
    s.parse()
}

fn command_line() -> String {
    let mut args = std::env::args();
    let _ = args.next();
    std::iter::once("atoll".to_string())
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn bench(a: BenchArgs) -> anyhow::Result<ExitCode> {
    atoll_bench::interrupt::install();
    let exe = std::env::current_exe().context("locating the atoll binary")?;
    match a.which {
        Which::Revocation {
            json,
            quick,
            mechanisms,
        } => {
            let opts = RevocationOptions {
                exe,
                mechanisms,
                settings: Settings::new(quick),
                command: command_line(),
            };
            let progress = Progress::new(opts.mechanisms.len(), true);
            let report = revocation::run(&opts, &progress)?;
            drop(progress);
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!("{}", revocation::render_table(&report));
            }
        }
        Which::Isolation {
            json,
            quick,
            modes,
            mechanism,
        } => {
            let opts = IsolationOptions {
                exe,
                modes,
                mechanism,
                quick,
                command: command_line(),
            };
            let progress = Progress::new(opts.steps(), true);
            let report = isolation::run(&opts, &progress)?;
            drop(progress);
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!("{}", isolation::render_table(&report));
            }
        }
        Which::Coordination {
            json,
            quick,
            no_api,
        } => {
            let opts = CoordinationOptions {
                exe,
                quick,
                api: !no_api,
                command: command_line(),
            };
            let report = coordination::run(&opts)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!("{}", coordination::render_table(&report));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `atoll __worker KIND ARGS...`.
pub fn worker(args: &[String]) -> ExitCode {
    ExitCode::from(u8::try_from(atoll_bench::worker::main(args)).unwrap_or(1))
}
