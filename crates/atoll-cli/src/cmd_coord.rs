//! Coordination commands: `overlay ls|show`, `tune`, `trigger`, `borrow`,
//! `release`, `report`.
//!
//! Each coordination command builds one message ([`CoordCmd::message`], pure)
//! and prints the daemon's answer in words. Exit status: 0 for an ack,
//! [`NACK`] (3) for a nack, 1 for an error (no daemon, permission, a bad
//! reply), 2 for bad arguments (clap).

use std::io::Write;
use std::process::ExitCode;

use atoll_client::coord::{Coordinated, Direction, Message, Resource};
use atoll_client::Client;
use atoll_core::Name;
use clap::{Args, Subcommand, ValueEnum};

use crate::{render_coord, SocketArg};

/// Exit status of a coordination command the daemon refused (a nack).
pub const NACK: u8 = 3;

/// `atoll overlay ...`.
#[derive(Debug, Subcommand)]
pub enum OverlayCmd {
    /// List the overlays: priority, property, last value, whether it holds,
    /// borrowed CPUs and refusals in a row.
    #[command(alias = "list")]
    Ls {
        #[command(flatten)]
        socket: SocketArg,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Everything about one overlay.
    Show {
        #[command(flatten)]
        socket: SocketArg,
        /// The overlay.
        name: String,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Register an overlay over units of any origin, configured or made at
    /// run time; it survives a restart (root only).
    Add {
        #[command(flatten)]
        socket: SocketArg,
        /// The overlay.
        name: String,
        #[command(flatten)]
        flags: crate::cmd_runtime::OverlayFlags,
        /// Print the API's reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Change an overlay added at run time: the options given replace
    /// theirs; it is registered again, so what it tuned or borrowed ends
    /// (root only).
    Set {
        #[command(flatten)]
        socket: SocketArg,
        /// The overlay.
        name: String,
        #[command(flatten)]
        flags: crate::cmd_runtime::OverlayFlags,
        /// Print the API's reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Deregister an overlay added at run time (root only).
    Rm {
        #[command(flatten)]
        socket: SocketArg,
        /// The overlay.
        name: String,
        /// Print the API's reply as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Which way a tune goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DirArg {
    /// One step more.
    Up,
    /// One step less.
    Down,
}

/// What a tune adjusts (cores are borrowed, not tuned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TunedResource {
    /// Weight, cap or realtime budget in the unit's island.
    CpuTime,
    /// The unit's `memory.high`.
    Memory,
}

/// Options every coordination command and `report` take. Names are
/// checked while parsing, so a bad one is a usage error (status 2).
#[derive(Debug, Clone, Args)]
pub struct Common {
    #[command(flatten)]
    pub socket: SocketArg,
    /// Print the reply as JSON.
    #[arg(long)]
    pub json: bool,
}

const EXIT_STATUS: &str =
    "Exit status: 0 when the daemon acknowledges, 3 when it refuses (nack), 1 on errors.";

/// The coordination commands (root only).
#[derive(Debug, Subcommand)]
pub enum CoordCmd {
    /// Adjust a unit's CPU time or memory one step for an overlay (root only).
    #[command(after_help = EXIT_STATUS)]
    Tune {
        #[command(flatten)]
        common: Common,
        /// The overlay asking.
        #[arg(value_parser = Name::new)]
        overlay: Name,
        /// The unit.
        #[arg(value_parser = Name::new)]
        unit: Name,
        /// Which way.
        #[arg(value_enum)]
        dir: DirArg,
        /// What to adjust.
        #[arg(long, value_enum, default_value_t = TunedResource::CpuTime)]
        resource: TunedResource,
        /// The sending island (default: the unit's island).
        #[arg(long, value_parser = Name::new)]
        from: Option<Name>,
    },
    /// Boost a unit's CPU time at once, for a short bounded time; without
    /// a unit, every unit of the overlay together (coscheduling).
    #[command(after_help = EXIT_STATUS)]
    Trigger {
        #[command(flatten)]
        common: Common,
        /// The overlay asking.
        #[arg(value_parser = Name::new)]
        overlay: Name,
        /// The unit (default: all the overlay's units at once).
        #[arg(value_parser = Name::new)]
        unit: Option<Name>,
        /// The sending island (default: the unit's island).
        #[arg(long, value_parser = Name::new)]
        from: Option<Name>,
    },
    /// Borrow idle CPUs from another island for an overlay (root only).
    #[command(after_help = EXIT_STATUS)]
    Borrow {
        #[command(flatten)]
        common: Common,
        /// The overlay asking.
        #[arg(value_parser = Name::new)]
        overlay: Name,
        /// How many CPUs, at most (fewer may be granted).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        amount: u32,
        /// The island to borrow from (default: whichever can lend, the
        /// overlay's own islands first).
        #[arg(long, value_parser = Name::new)]
        from: Option<Name>,
        /// The island that gets the CPUs (default: the overlay's first
        /// unit's island).
        #[arg(long, value_parser = Name::new)]
        into: Option<Name>,
    },
    /// Give borrowed CPUs back to the island that lent them (root only).
    #[command(after_help = EXIT_STATUS)]
    Release {
        #[command(flatten)]
        common: Common,
        /// The overlay that borrowed them.
        #[arg(value_parser = Name::new)]
        overlay: Name,
        /// The island that lent them.
        #[arg(long, value_parser = Name::new)]
        lender: Name,
        /// The island that gives them back (default: the overlay's first
        /// unit's island).
        #[arg(long, value_parser = Name::new)]
        from: Option<Name>,
    },
}

impl CoordCmd {
    /// The socket and output options.
    pub fn common(&self) -> &Common {
        match self {
            Self::Tune { common, .. }
            | Self::Trigger { common, .. }
            | Self::Borrow { common, .. }
            | Self::Release { common, .. } => common,
        }
    }

    /// The sending island and the message.
    pub fn message(&self) -> (Option<String>, Message) {
        let sender = |n: &Option<Name>| n.as_ref().map(Name::to_string);
        match self {
            Self::Tune {
                overlay,
                unit,
                dir,
                resource,
                from,
                ..
            } => (
                sender(from),
                Message::Tune {
                    resource: match resource {
                        TunedResource::CpuTime => Resource::CpuTime,
                        TunedResource::Memory => Resource::Memory,
                    },
                    dir: match dir {
                        DirArg::Up => Direction::Up,
                        DirArg::Down => Direction::Down,
                    },
                    overlay: overlay.clone(),
                    unit: unit.clone(),
                },
            ),
            Self::Trigger {
                overlay,
                unit,
                from,
                ..
            } => (
                sender(from),
                match unit {
                    Some(unit) => Message::Trigger {
                        resource: Resource::CpuTime,
                        overlay: overlay.clone(),
                        unit: unit.clone(),
                    },
                    None => Message::TriggerOverlay {
                        resource: Resource::CpuTime,
                        overlay: overlay.clone(),
                    },
                },
            ),
            Self::Borrow {
                overlay,
                amount,
                from,
                into,
                ..
            } => (
                sender(into),
                match from {
                    Some(lender) => Message::BorrowPreferred {
                        resource: Resource::Cores,
                        overlay: overlay.clone(),
                        island: lender.clone(),
                        amount: *amount,
                    },
                    None => Message::BorrowAny {
                        resource: Resource::Cores,
                        overlay: overlay.clone(),
                        amount: *amount,
                    },
                },
            ),
            Self::Release {
                overlay,
                lender,
                from,
                ..
            } => (
                sender(from),
                Message::Release {
                    resource: Resource::Cores,
                    overlay: overlay.clone(),
                    island: lender.clone(),
                },
            ),
        }
    }
}

/// The exit status of an answer: 0 for an ack, [`NACK`] for a nack.
pub fn exit_status(c: &Coordinated) -> u8 {
    if c.is_ack() {
        0
    } else {
        NACK
    }
}

/// Sends one coordination message and prints the answer.
pub fn coordinate(cmd: &CoordCmd) -> anyhow::Result<ExitCode> {
    let (from, message) = cmd.message();
    let common = cmd.common();
    let answer = Client::connect(&common.socket.socket)?.coordinate(from.as_deref(), message)?;
    let text = if common.json {
        serde_json::to_string_pretty(&render_coord::coordinated_json(&answer))? + "\n"
    } else {
        render_coord::coordinated(&answer)
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::from(exit_status(&answer)))
}

/// `atoll overlay ls|show`.
pub fn overlay(cmd: &OverlayCmd) -> anyhow::Result<ExitCode> {
    use atoll_proto::Request;
    let (socket, json, request) = match cmd {
        OverlayCmd::Ls { socket, json } => return show(socket, *json, None),
        OverlayCmd::Show { socket, name, json } => return show(socket, *json, Some(name)),
        OverlayCmd::Add {
            socket,
            name,
            flags,
            json,
        } => (
            socket,
            *json,
            Request::OverlayAdd {
                overlay: name.clone(),
                settings: flags.settings(),
            },
        ),
        OverlayCmd::Set {
            socket,
            name,
            flags,
            json,
        } => (
            socket,
            *json,
            Request::OverlaySet {
                overlay: name.clone(),
                settings: flags.settings(),
            },
        ),
        OverlayCmd::Rm { socket, name, json } => (
            socket,
            *json,
            Request::OverlayRm {
                overlay: name.clone(),
            },
        ),
    };
    crate::cmd_runtime::overlay_change(socket, json, request)
}

/// `overlay ls` (no `name`) and `overlay show NAME` (with, for a latency
/// overlay, its measurement: `slo` in the JSON).
fn show(socket: &SocketArg, json: bool, name: Option<&String>) -> anyhow::Result<ExitCode> {
    let mut client = Client::connect(&socket.socket)?;
    let overlays = client.overlays()?;
    let text = match name {
        None if json => serde_json::to_string_pretty(&overlays)? + "\n",
        None => render_coord::overlay_table(&overlays),
        Some(name) => {
            let Some(o) = overlays.iter().find(|o| o.name == *name) else {
                let names: Vec<&str> = overlays.iter().map(|o| o.name.as_str()).collect();
                if names.is_empty() {
                    anyhow::bail!("no overlay {name}: no overlays are registered");
                }
                anyhow::bail!("no overlay {name} (overlays: {})", names.join(", "));
            };
            let slo = match o.property {
                atoll_core::coord::Property::LatencyPercentile { .. } => {
                    Some(client.overlay_show(name)?)
                }
                _ => None,
            };
            if json {
                let mut v = serde_json::to_value(o)?;
                if let (Some(slo), Some(obj)) = (&slo, v.as_object_mut()) {
                    obj.insert("slo".into(), serde_json::to_value(slo)?);
                }
                serde_json::to_string_pretty(&v)? + "\n"
            } else {
                let mut t = render_coord::overlay_detail(o);
                if let Some(slo) = &slo {
                    t.push_str(&render_coord::slo_detail(slo));
                }
                t
            }
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// A finite number.
fn finite(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(v) => Err(format!("{v} is not a finite number")),
        Err(e) => Err(e.to_string()),
    }
}

/// The arguments of `atoll report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub common: Common,
    /// The overlay.
    #[arg(value_parser = Name::new)]
    pub overlay: Name,
    /// The property's current value: the percentile's latency in µs, or
    /// operations per second.
    #[arg(value_parser = finite)]
    pub value: f64,
}

/// `atoll report OVERLAY VALUE`.
pub fn report(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let r =
        Client::connect(&args.common.socket.socket)?.report(args.overlay.as_str(), args.value)?;
    let text = if args.common.json {
        serde_json::to_string_pretty(&render_coord::reported_json(&r))? + "\n"
    } else {
        render_coord::reported(&r)
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
