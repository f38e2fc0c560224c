//! `atoll`: the command-line front end.
//!
//! Local commands (`topology`, `check-config`) read the machine and config
//! directly; `daemon` runs the control loop in this process; the others talk
//! to a running daemon over its Unix socket. The coordination commands
//! (`overlay`, `tune`, `trigger`, `borrow`, `release`, `report`) exit with 3
//! when the daemon refuses (a nack), so scripts can tell a refusal from an
//! error (1) and bad arguments (2).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd_apps;
mod cmd_bench;
mod cmd_client;
mod cmd_coord;
mod cmd_daemon;
mod cmd_local;
mod cmd_run;
mod cmd_runtime;
mod cmd_sim;
mod render;
mod render_coord;
mod top;

/// atoll: a runtime resource manager for multicore Linux.
#[derive(Debug, Parser)]
#[command(name = "atoll", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Show the machine as atoll sees it (CPUs, cores, caches, NUMA nodes).
    Topology {
        /// Read sysfs from this directory instead of /sys.
        #[arg(long, default_value = atoll_topology::DEFAULT_SYSFS_ROOT)]
        sysfs_root: PathBuf,
        /// Print the documented JSON form.
        #[arg(long)]
        json: bool,
    },
    /// Validate a platform description; print what it resolves to.
    CheckConfig(cmd_local::CheckConfigArgs),
    /// Run the daemon in the foreground.
    Daemon(cmd_daemon::DaemonArgs),
    /// Islands, units, processes and usage.
    Status {
        #[command(flatten)]
        socket: SocketArg,
        /// Print the API's JSON (with --watch: one compact document a line).
        #[arg(long)]
        json: bool,
        /// Ask again every SECONDS (default 2) until Ctrl-C.
        #[arg(long, value_name = "SECONDS", num_args = 0..=1,
              default_missing_value = cmd_client::WATCH_DEFAULT,
              value_parser = cmd_client::parse_interval)]
        watch: Option<std::time::Duration>,
    },
    /// A live view: islands, units, overlays, applications and the latest
    /// decisions, refreshed every --interval (`?` lists the keys; `q` quits).
    Top(top::TopArgs),
    /// Run a command inside a unit (created in ISLAND, or the default island,
    /// if it does not exist).
    Run {
        #[command(flatten)]
        socket: SocketArg,
        /// The unit.
        #[arg(long)]
        unit: String,
        /// Island for a new unit.
        #[arg(long)]
        island: Option<String>,
        /// A network class for a new unit.
        #[command(flatten)]
        net: cmd_runtime::NetFlags,
        /// Say where the command runs as JSON (on standard error).
        #[arg(long)]
        json: bool,
        /// The command and its arguments.
        #[arg(last = true, required = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// Move a running process into a unit.
    Adopt {
        #[command(flatten)]
        socket: SocketArg,
        /// The unit.
        #[arg(long)]
        unit: String,
        /// The process.
        #[arg(long)]
        pid: u32,
        /// Island for a new unit.
        #[arg(long)]
        island: Option<String>,
        /// A network class for a new unit.
        #[command(flatten)]
        net: cmd_runtime::NetFlags,
        /// Print JSON: {"pid", "unit", "island", "created"}.
        #[arg(long)]
        json: bool,
    },
    /// Why things are where they are: recent decisions with their reasons.
    Why {
        #[command(flatten)]
        socket: SocketArg,
        /// Only decisions about this group, unit, island or pid.
        subject: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reconfigurable applications: working mode, resources, goal gap.
    Apps {
        #[command(flatten)]
        socket: SocketArg,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Read the configuration file again and apply what changed, without
    /// a restart (root only; what SIGHUP and `systemctl reload` do).
    Reload {
        #[command(flatten)]
        socket: SocketArg,
        /// Print JSON: {"changes": [...]}.
        #[arg(long)]
        json: bool,
    },
    /// Tear down and stop the daemon (root only).
    Stop {
        #[command(flatten)]
        socket: SocketArg,
        /// Print JSON: {"stopped": true, "left": [...]}.
        #[arg(long)]
        json: bool,
    },
    /// Units created at run time with an entitlement: `add`, `set`, `rm`.
    #[command(subcommand)]
    Unit(cmd_runtime::UnitCmd),
    /// Coordination overlays: `ls` lists them, `show NAME` shows one;
    /// `add`, `set`, `rm` change them at run time (root only).
    #[command(subcommand)]
    Overlay(cmd_coord::OverlayCmd),
    /// The effective configuration: `dump` prints it as a config file.
    #[command(subcommand)]
    Config(cmd_runtime::ConfigCmd),
    #[command(flatten)]
    Coord(cmd_coord::CoordCmd),
    /// Report the current value of an overlay's property; the overlay's
    /// policy may act on it (root only).
    Report(cmd_coord::ReportArgs),
    /// Benchmarks that compare atoll's modes side by side (not tests).
    Bench(cmd_bench::BenchArgs),
    /// Run a scenario on the simulated machine with the daemon's control
    /// loop: a summary per variant and SVG plots (docs/sim.md).
    Sim(cmd_sim::SimArgs),
    /// Print a shell completion script: `atoll completions bash >
    /// /usr/share/bash-completion/completions/atoll`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages (atoll.1 and atoll-SUBCOMMAND.1) into DIR.
    Man {
        /// The directory (created if missing).
        dir: PathBuf,
    },
    /// A workload worker of the benchmarks: `atoll __worker KIND ARGS...`.
    #[command(hide = true, name = "__worker")]
    Worker {
        /// The kind and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// The daemon's socket.
#[derive(Debug, Clone, clap::Args)]
struct SocketArg {
    /// The daemon's API socket (the flag wins over $ATOLL_SOCKET).
    #[arg(long, env = "ATOLL_SOCKET", default_value = atoll_proto::DEFAULT_SOCKET)]
    socket: PathBuf,
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod cli_tests;

/// `atoll man DIR`: a page for the command and one per subcommand.
fn man_pages(dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cmd = <Cli as clap::CommandFactory>::command();
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))?;
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Topology { sysfs_root, json } => cmd_local::topology(&sysfs_root, json),
        Cmd::CheckConfig(args) => cmd_local::check_config(&args),
        Cmd::Daemon(args) => cmd_daemon::daemon(args),
        Cmd::Status {
            socket,
            json,
            watch,
        } => cmd_client::status(&socket.socket, json, watch),
        Cmd::Top(args) => top::run::top(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(anyhow::Error::from),
        Cmd::Run {
            socket,
            unit,
            island,
            net,
            json,
            command,
        } => cmd_run::run(
            &socket.socket,
            &unit,
            island.as_deref(),
            net.class(),
            &command,
            json,
        ),
        Cmd::Adopt {
            socket,
            unit,
            pid,
            island,
            net,
            json,
        } => cmd_client::adopt(
            &socket.socket,
            &unit,
            pid,
            island.as_deref(),
            net.class(),
            json,
        ),
        Cmd::Why {
            socket,
            subject,
            limit,
            json,
        } => cmd_client::why(&socket.socket, subject.as_deref(), limit, json),
        Cmd::Apps { socket, json } => cmd_apps::apps(&socket.socket, json),
        Cmd::Reload { socket, json } => cmd_client::reload(&socket.socket, json),
        Cmd::Stop { socket, json } => cmd_client::stop(&socket.socket, json),
        Cmd::Unit(cmd) => cmd_runtime::unit(&cmd),
        Cmd::Overlay(cmd) => cmd_coord::overlay(&cmd),
        Cmd::Config(cmd) => cmd_runtime::config(&cmd),
        Cmd::Coord(cmd) => cmd_coord::coordinate(&cmd),
        Cmd::Report(args) => cmd_coord::report(&args),
        Cmd::Bench(args) => cmd_bench::bench(args),
        Cmd::Sim(args) => cmd_sim::sim(args),
        Cmd::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "atoll", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Man { dir } => man_pages(&dir),
        Cmd::Worker { args } => Ok(cmd_bench::worker(&args)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("atoll: {e:#}");
            ExitCode::FAILURE
        }
    }
}
