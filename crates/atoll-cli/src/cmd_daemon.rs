//! `atoll daemon`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use atoll_daemon::setup::{self, BackendRequest, SetupOptions, SystemdRequest};

/// The config file `atoll daemon` reads when `--config` is not given, if it
/// exists (the .deb installs it).
pub const DEFAULT_CONFIG: &str = "/etc/atoll/atoll.toml";

fn parse_backend(s: &str) -> Result<BackendRequest, setup::UnknownBackend> {
    s.parse()
}

fn parse_systemd(s: &str) -> Result<SystemdRequest, setup::UnknownSystemd> {
    s.parse()
}

fn parse_repair(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.001..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "--repair-interval {s:?}: expected seconds between 0.001 and 86400"
        )),
    }
}

/// Flags of `atoll daemon`.
#[derive(Debug, clap::Args)]
pub struct DaemonArgs {
    /// Platform description (TOML). Without it, /etc/atoll/atoll.toml if that
    /// exists, else the embedded default: the host partition on the first
    /// core, the rest as islands by topology, nothing moved.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Which backend enforces decisions: auto, cgroup2, cgroup1 or sim.
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    backend: BackendRequest,
    /// The systemd driver (cgroup2 only): units that name systemd units
    /// are set through systemd's D-Bus API, the others outside exclusive
    /// islands run in scopes of their own. auto: when systemd runs the
    /// machine and answers on the system bus; on: the daemon does not
    /// start without it; off: never.
    #[arg(long, default_value = "auto", value_parser = parse_systemd)]
    systemd: SystemdRequest,
    /// The cgroup atoll creates and owns: a name under the cgroup mount or a
    /// path below it (system.slice/atoll.service/managed). Default: under
    /// systemd with Delegate= on cgroup v2, `managed` in the unit's own
    /// cgroup (the daemon moves itself to `supervisor` beside it); else
    /// `atoll`.
    #[arg(long)]
    cgroup_root: Option<String>,
    /// The API socket (the flag wins over $ATOLL_SOCKET).
    #[arg(long, env = "ATOLL_SOCKET", default_value = atoll_proto::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Where the state file lives.
    #[arg(long, default_value = "/var/lib/atoll")]
    state_dir: PathBuf,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9184).
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
    /// cgroup v1 only: make atoll's root cpu_exclusive so islands get
    /// exclusive CPUs. Cpusets outside atoll can then no longer use any of
    /// atoll's CPUs.
    #[arg(long)]
    v1_exclusive: bool,
    /// Check every group atoll owns for changes made behind its back once
    /// in this many seconds (default 10; at most 4 groups a second).
    #[arg(long, value_parser = parse_repair)]
    repair_interval: Option<f64>,
    /// While no step has anything to act on, wait up to this many epochs
    /// between epochs (doubling; any command, process event or CPU
    /// pressure trigger brings the loop back to every epoch at once). 1
    /// never stretches. Default 8, and 1 on the simulator.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(atoll_daemon::pace::MAX_EPOCHS_LIMIT)))]
    idle_max_epochs: Option<u32>,
    /// Read sysfs from here (tests).
    #[arg(long, default_value = "/sys", hide = true)]
    sysfs_root: PathBuf,
    /// Read /proc from here (tests).
    #[arg(long, default_value = "/proc", hide = true)]
    proc_root: PathBuf,
    /// Look for systemd (/run/systemd/system) here (tests).
    #[arg(long, default_value = "/run", hide = true)]
    run_root: PathBuf,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

pub fn daemon(a: DaemonArgs) -> anyhow::Result<ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ATOLL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: under systemd stderr goes to the journal.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match a.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    let config = a.config.or_else(|| {
        let default = PathBuf::from(DEFAULT_CONFIG);
        default.exists().then_some(default)
    });
    let opts = SetupOptions {
        config,
        backend: a.backend,
        cgroup_root: a.cgroup_root,
        invocation_id: std::env::var("INVOCATION_ID").ok(),
        state_dir: a.state_dir,
        sysfs_root: a.sysfs_root,
        proc_root: a.proc_root,
        v1_exclusive: a.v1_exclusive,
        repair_every: a.repair_interval.map(std::time::Duration::from_secs_f64),
        systemd: a.systemd,
        run_root: a.run_root,
    };
    // Before any thread starts: a thread that does not block them would
    // take a shutdown signal and die of it, with the daemon.
    atoll_daemon::run::block_shutdown_signals()?;
    let (mut ctrl, chosen) = setup::build(&opts)?;
    tracing::info!("{chosen}");
    // The simulator's loads change with no event to wake the loop.
    let idle_max = a.idle_max_epochs.unwrap_or(if ctrl.simulated() {
        1
    } else {
        atoll_daemon::pace::DEFAULT_MAX_EPOCHS
    });
    ctrl.set_idle_max_epochs(idle_max);
    atoll_daemon::run::run(
        ctrl,
        &atoll_daemon::run::Endpoints {
            socket: a.socket,
            metrics: a.metrics_addr,
        },
    )?;
    Ok(ExitCode::SUCCESS)
}
