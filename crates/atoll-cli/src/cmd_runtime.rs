//! Changes at run time: `unit add|set|rm`, `overlay add|set|rm` and
//! `config dump`. The options are the config file's keys (`--cpus`,
//! `--memory-max 2G`, `--latency-us 1000`), checked by the daemon as the
//! config file is; a configured unit or overlay is changed in the file
//! instead (`atoll reload`).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use atoll_client::Client;
use atoll_proto::runtime::{NetClassSettings, OverlaySettings, SloSettings, UnitSettings};
use atoll_proto::{Reply, Request};
use clap::{Args, Subcommand};

use crate::{render_coord, SocketArg};

fn size(s: &str) -> Result<u64, String> {
    atoll_config::parse_size(s).map_err(|e| e.to_string())
}

/// A unit's entitlement, as the config's `[unit.NAME]` keys.
#[derive(Debug, Clone, Default, Args)]
pub struct UnitFlags {
    /// Entitlement in CPUs (sets the weight when --weight is not given).
    #[arg(long)]
    pub cpus: Option<f64>,
    /// `cpu.weight`, 1..=10000.
    #[arg(long)]
    pub weight: Option<u32>,
    /// Hard cap in CPUs (`cpu.max`).
    #[arg(long)]
    pub cpu_cap: Option<f64>,
    /// `memory.min` (a size: 4096, 512M, 2G).
    #[arg(long, value_parser = size)]
    pub memory_min: Option<u64>,
    /// `memory.low`.
    #[arg(long, value_parser = size)]
    pub memory_low: Option<u64>,
    /// `memory.high`.
    #[arg(long, value_parser = size)]
    pub memory_high: Option<u64>,
    /// `memory.max`.
    #[arg(long, value_parser = size)]
    pub memory_max: Option<u64>,
    /// `io.weight`, 1..=10000.
    #[arg(long)]
    pub io_weight: Option<u32>,
    /// A class on a network island.
    #[command(flatten)]
    pub net: NetFlags,
}

impl UnitFlags {
    /// The request's settings.
    pub fn settings(&self) -> UnitSettings {
        UnitSettings {
            cpus: self.cpus,
            weight: self.weight,
            cpu_cap: self.cpu_cap,
            memory_min: self.memory_min,
            memory_low: self.memory_low,
            memory_high: self.memory_high,
            memory_max: self.memory_max,
            io_weight: self.io_weight,
            network: self.net.class(),
            clear_network: false,
        }
    }
}

/// A unit's class on a network island, as a `[network.NAME.units.UNIT]`
/// table gives one: `unit add|set`, and `atoll run` and `atoll adopt` when
/// they make a new unit.
#[derive(Debug, Clone, Default, Args)]
pub struct NetFlags {
    /// A class on network island NAME, as a `[network.NAME.units.UNIT]`
    /// table gives one (root only; `unit set` replaces the class; `run` and
    /// `adopt`: for a new unit, or the class an existing one has). Without
    /// it the unit's traffic is in the island's default class.
    #[arg(long, value_name = "NAME")]
    pub net_island: Option<String>,
    /// The class's share, 1..=10000 (default 100).
    #[arg(long, requires = "net_island")]
    pub net_share: Option<u32>,
    /// The most the class may use, Mbit/s (default: the link rate).
    #[arg(long, requires = "net_island")]
    pub net_ceil_mbit: Option<u64>,
    /// The class's priority for spare bandwidth, 0 (first) to 7 (default 3).
    #[arg(long, requires = "net_island")]
    pub net_prio: Option<u8>,
}

impl NetFlags {
    /// The request's class, when `--net-island` is given.
    pub fn class(&self) -> Option<NetClassSettings> {
        self.net_island.as_ref().map(|island| NetClassSettings {
            island: island.clone(),
            share: self.net_share,
            ceil_mbit: self.net_ceil_mbit,
            prio: self.net_prio,
        })
    }
}

/// `atoll unit ...`.
#[derive(Debug, Subcommand)]
pub enum UnitCmd {
    /// Create a unit with an entitlement (it stays, empty or not, until
    /// `unit rm`); `atoll run --unit` and `adopt --unit` put processes in it.
    Add {
        #[command(flatten)]
        socket: SocketArg,
        /// The unit.
        name: String,
        /// Its island (default: the default island).
        #[arg(long)]
        island: Option<String>,
        #[command(flatten)]
        flags: UnitFlags,
        /// Print the API's reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Change a unit created at run time: the options given replace theirs.
    Set {
        #[command(flatten)]
        socket: SocketArg,
        /// The unit.
        name: String,
        #[command(flatten)]
        flags: UnitFlags,
        /// Take the unit's network class away: its traffic goes back to
        /// the island's default class.
        #[arg(long, conflicts_with = "net_island")]
        no_net_class: bool,
        /// Print the API's reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a unit created at run time: its processes go back where they
    /// came from.
    Rm {
        #[command(flatten)]
        socket: SocketArg,
        /// The unit.
        name: String,
        /// Print the API's reply as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// An overlay, as the config's `[overlay.NAME]` keys.
#[derive(Debug, Clone, Default, Args)]
pub struct OverlayFlags {
    /// A unit of the overlay (repeat for more; `set`: replaces the list).
    #[arg(long = "unit")]
    pub units: Vec<String>,
    /// Arbitration priority, 0..=255 (higher wins).
    #[arg(long)]
    pub priority: Option<u8>,
    /// Property: the percentile's latency within this many µs.
    #[arg(long)]
    pub latency_us: Option<u64>,
    /// The percentile of --latency-us (default 99).
    #[arg(long)]
    pub percentile: Option<f64>,
    /// Property: at least this many operations per second.
    #[arg(long)]
    pub throughput_floor: Option<f64>,
    /// Property: a CPU cap for the whole machine.
    #[arg(long)]
    pub cpu_cap: Option<f64>,
    /// Property: a power budget for the whole machine, W (held through
    /// frequency limits and CPU caps; refused on a machine without RAPL).
    #[arg(long)]
    pub power_cap_watts: Option<f64>,
    /// React: tune a unit up while its CPU pressure (%) is above this.
    #[arg(long)]
    pub react_pressure: Option<f64>,
    /// React: borrow a CPU for an island used above this share (0..1].
    #[arg(long)]
    pub react_utilization: Option<f64>,
    /// React: trigger a unit whose sockets hold more unread bytes (a size).
    #[arg(long, value_parser = size)]
    pub react_recv_queue: Option<u64>,
    /// The latency source and best-effort flags.
    #[command(flatten)]
    pub slo: Box<SloFlags>,
}

/// An overlay's latency source and best-effort units, as the config's
/// `[overlay.NAME]` keys.
#[derive(Debug, Clone, Default, Args)]
pub struct SloFlags {
    /// SLO: where --latency-us is measured: report, probe or access_log
    /// (any SLO flag replaces the overlay's SLO keys as a whole).
    #[arg(long)]
    pub latency_source: Option<String>,
    /// SLO: span of the percentile window, ms.
    #[arg(long)]
    pub window_ms: Option<u64>,
    /// SLO: the window is stale (latency unknown) once its newest sample is
    /// older than this, ms.
    #[arg(long)]
    pub stale_after_ms: Option<u64>,
    /// SLO probe: http://host:port/path or tcp://host:port.
    #[arg(long)]
    pub probe: Option<String>,
    /// SLO probe (tcp://): what is sent.
    #[arg(long)]
    pub probe_send: Option<String>,
    /// SLO probe: time between two probes, ms.
    #[arg(long)]
    pub probe_every_ms: Option<u64>,
    /// SLO probe: timeout, ms.
    #[arg(long)]
    pub probe_timeout_ms: Option<u64>,
    /// SLO access log: the log file (absolute path).
    #[arg(long)]
    pub access_log: Option<String>,
    /// SLO access log: nginx or haproxy.
    #[arg(long)]
    pub log_format: Option<String>,
    /// SLO access log (nginx): the request time's field (negative: from the end).
    #[arg(long, allow_hyphen_values = true)]
    pub log_field: Option<i32>,
    /// SLO access log (nginx): its unit, s, ms or us.
    #[arg(long)]
    pub log_unit: Option<String>,
    /// A unit run as best effort beside the overlay (repeat for more).
    #[arg(long = "best-effort")]
    pub best_effort: Vec<String>,
    /// Best effort: levels above the floor.
    #[arg(long)]
    pub be_steps: Option<u32>,
    /// Best effort: slack above which it grows a step.
    #[arg(long)]
    pub be_grow_above: Option<f64>,
    /// Best effort: slack below which it is cut to half.
    #[arg(long)]
    pub be_cut_below: Option<f64>,
}

impl OverlayFlags {
    /// The SLO keys, if any flag gives one.
    fn slo_settings(&self) -> Option<Box<SloSettings>> {
        let slo = SloSettings {
            latency_source: self.slo.latency_source.clone(),
            window_ms: self.slo.window_ms,
            stale_after_ms: self.slo.stale_after_ms,
            probe: self.slo.probe.clone(),
            probe_send: self.slo.probe_send.clone(),
            probe_every_ms: self.slo.probe_every_ms,
            probe_timeout_ms: self.slo.probe_timeout_ms,
            access_log: self.slo.access_log.clone(),
            log_format: self.slo.log_format.clone(),
            log_field: self.slo.log_field,
            log_unit: self.slo.log_unit.clone(),
            best_effort: (!self.slo.best_effort.is_empty()).then(|| self.slo.best_effort.clone()),
            be_steps: self.slo.be_steps,
            be_grow_above: self.slo.be_grow_above,
            be_cut_below: self.slo.be_cut_below,
        };
        (slo != SloSettings::default()).then(|| Box::new(slo))
    }

    /// The request's settings.
    pub fn settings(&self) -> OverlaySettings {
        OverlaySettings {
            units: (!self.units.is_empty()).then(|| self.units.clone()),
            priority: self.priority,
            latency_us: self.latency_us,
            percentile: self.percentile,
            throughput_floor: self.throughput_floor,
            cpu_cap: self.cpu_cap,
            power_cap_watts: self.power_cap_watts,
            react_pressure: self.react_pressure,
            react_utilization: self.react_utilization,
            react_recv_queue: self.react_recv_queue,
            slo: self.slo_settings(),
        }
    }
}

/// `atoll config ...`.
#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Print the effective configuration: the file's description with the
    /// units and overlays added at run time, as a file `atoll check-config`
    /// accepts.
    Dump {
        #[command(flatten)]
        socket: SocketArg,
    },
}

fn ask(socket: &Path, request: Request) -> anyhow::Result<Reply> {
    Ok(Client::connect(socket)?.request(request)?)
}

fn unexpected(reply: &Reply) -> anyhow::Error {
    anyhow::anyhow!("unexpected reply from the daemon: {reply:?}")
}

/// `atoll unit add|set|rm`.
pub fn unit(cmd: &UnitCmd) -> anyhow::Result<ExitCode> {
    let (socket, json, request) = match cmd {
        UnitCmd::Add {
            socket,
            name,
            island,
            flags,
            json,
        } => (
            socket,
            *json,
            Request::UnitAdd {
                unit: name.clone(),
                island: island.clone(),
                settings: flags.settings(),
            },
        ),
        UnitCmd::Set {
            socket,
            name,
            flags,
            no_net_class,
            json,
        } => (
            socket,
            *json,
            Request::UnitSet {
                unit: name.clone(),
                settings: UnitSettings {
                    clear_network: *no_net_class,
                    ..flags.settings()
                },
            },
        ),
        UnitCmd::Rm { socket, name, json } => {
            (socket, *json, Request::UnitRm { unit: name.clone() })
        }
    };
    let reply = ask(&socket.socket, request)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&reply)?);
        return Ok(ExitCode::SUCCESS);
    }
    match reply {
        Reply::Unit {
            unit,
            island,
            entitlement,
        } => {
            let parts = atoll_config::entitlement_parts(&entitlement);
            let what = if parts.is_empty() {
                "no entitlement".to_string()
            } else {
                parts.join(", ")
            };
            println!("unit {unit} (island {island}): {what}");
        }
        Reply::UnitRemoved { unit, returned } => {
            println!(
                "unit {unit} removed; {} process{} given back",
                returned.len(),
                if returned.len() == 1 { "" } else { "es" }
            );
        }
        other => return Err(unexpected(&other)),
    }
    Ok(ExitCode::SUCCESS)
}

/// `atoll overlay add|set|rm`.
pub fn overlay_change(
    socket: &SocketArg,
    json: bool,
    request: Request,
) -> anyhow::Result<ExitCode> {
    let reply = ask(&socket.socket, request)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&reply)?);
        return Ok(ExitCode::SUCCESS);
    }
    let text = match reply {
        Reply::Overlay { overlay } => render_coord::overlay_detail(&overlay),
        Reply::OverlayRemoved { overlay } => format!("overlay {overlay} removed\n"),
        other => return Err(unexpected(&other)),
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// `atoll config dump`.
pub fn config(cmd: &ConfigCmd) -> anyhow::Result<ExitCode> {
    let ConfigCmd::Dump { socket } = cmd;
    match ask(&socket.socket, Request::ConfigDump {})? {
        Reply::Config { toml } => {
            std::io::stdout().lock().write_all(toml.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
        other => Err(unexpected(&other)),
    }
}
