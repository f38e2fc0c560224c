//! Building a controller from the daemon's flags: the machine, the platform
//! description, and the backend.
//!
//! `--backend auto` picks cgroup2 when its mount offers the cpuset, cpu and
//! memory controllers and is writable, else cgroup1; when neither can be
//! used the error says why and points at `--backend sim`. With `sim`, the
//! daemon runs a simulated machine of the same topology in real time: the
//! sim's clock follows the wall clock.
//!
//! Where atoll's root goes. `--cgroup-root` names it: a plain name under the
//! hierarchy's mount (`atoll`, the default from a shell) or a path below it
//! (`system.slice/atoll.service/managed`). Without the flag, a daemon that
//! systemd started as a service with `Delegate=` on cgroup v2 (see
//! [`atoll_cgroup::delegate`]) manages `<its unit's cgroup>/managed`, after
//! moving itself into `<its unit's cgroup>/supervisor`; anything else gets
//! `atoll` under the mount, as before.
//!
//! The systemd driver. `--systemd auto` (the default) wraps the cgroup2
//! backend in [`atoll_systemd::SystemdDriver`] when systemd runs the
//! machine (`/run/systemd/system` exists) and answers on the system bus:
//! units that name systemd units are then set through systemd's D-Bus API,
//! and the other units outside exclusive islands run in scopes of their
//! own (see `docs/systemd.md`). `on` fails when that cannot be done; `off`
//! never does it. On cgroup v1 and the simulator there is no driver.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use atoll_cgroup::{delegate, CgroupError, Delegation, RealFs, Requested};
use atoll_config::ConfigError;
use atoll_core::backend::Backend;
use atoll_core::clock::{Clock, ManualClock};
use atoll_core::process::{ProcessTable, TaskControl};
use atoll_core::topology::Topology;
use atoll_core::Name;
use atoll_procfs::{LinuxTaskControl, ProcFs};
use atoll_sim::SimPlatform;
use atoll_topology::TopologyError;

use crate::clock::MonotonicClock;
use crate::controller::{Controller, Env, Options};

/// `--backend`: a cgroup backend (`auto`, `cgroup2`, `cgroup1`) or `sim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendRequest {
    /// A real cgroup hierarchy.
    Cgroup(Requested),
    /// A simulated machine.
    Sim,
}

impl Default for BackendRequest {
    fn default() -> Self {
        Self::Cgroup(Requested::Auto)
    }
}

/// A `--backend` value that names no backend.
#[derive(Debug, thiserror::Error)]
#[error("unknown backend {0:?} (expected auto, cgroup2, cgroup1 or sim)")]
pub struct UnknownBackend(pub String);

impl FromStr for BackendRequest {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> Result<Self, UnknownBackend> {
        match s {
            "sim" => Ok(Self::Sim),
            _ => s
                .parse()
                .map(Self::Cgroup)
                .map_err(|_| UnknownBackend(s.to_string())),
        }
    }
}

impl fmt::Display for BackendRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cgroup(r) => r.fmt(f),
            Self::Sim => f.write_str("sim"),
        }
    }
}

/// `--systemd`: whether the cgroup2 backend is wrapped in the systemd
/// driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SystemdRequest {
    /// When systemd runs the machine with cgroup v2 and its bus answers.
    #[default]
    Auto,
    /// Always: the daemon does not start without it.
    On,
    /// Never.
    Off,
}

/// A `--systemd` value that is not `auto`, `on` or `off`.
#[derive(Debug, thiserror::Error)]
#[error("unknown --systemd value {0:?} (expected auto, on or off)")]
pub struct UnknownSystemd(pub String);

impl FromStr for SystemdRequest {
    type Err = UnknownSystemd;
    fn from_str(s: &str) -> Result<Self, UnknownSystemd> {
        match s {
            "auto" => Ok(Self::Auto),
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            _ => Err(UnknownSystemd(s.to_string())),
        }
    }
}

impl fmt::Display for SystemdRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
        })
    }
}

/// Whether to try the systemd driver, from `--systemd`, whether the
/// backend chosen is cgroup2 (`v2`) and whether systemd runs the machine
/// (`booted`). An error when `on` cannot be honoured.
pub fn systemd_wanted(request: SystemdRequest, v2: bool, booted: bool) -> Result<bool, SetupError> {
    let missing = if !v2 {
        Some("the backend is not cgroup2 (systemd's D-Bus API sets cgroup v2 properties)")
    } else if !booted {
        Some("systemd does not run this machine (no /run/systemd/system)")
    } else {
        None
    };
    match (request, missing) {
        (SystemdRequest::Off, _) | (SystemdRequest::Auto, Some(_)) => Ok(false),
        (_, None) => Ok(true),
        (SystemdRequest::On, Some(why)) => Err(SetupError::Systemd {
            reason: why.to_string(),
        }),
    }
}

/// What the backend would be here for units that name systemd units,
/// in words, for `atoll check-config`: `cgroup2 via systemd` where the
/// unified hierarchy is mounted alone and systemd runs the machine (the
/// daemon still needs systemd's answer on the system bus, which this does
/// not ask), else why the daemon would leave such units unbound.
pub fn systemd_here(proc_root: &Path, run_root: &Path) -> String {
    let v2 = atoll_cgroup::detect(&proc_root.join("self/mountinfo"))
        .map(|m| m.unified().is_some() && m.v1.is_empty());
    match (v2, atoll_systemd::detect_in(run_root)) {
        (Ok(true), true) => "cgroup2 via systemd: the daemon (--systemd auto, the default) sets them through systemd's D-Bus API once systemd answers on the system bus".into(),
        (Ok(true), false) => "no systemd driver: systemd does not run this machine (no /run/systemd/system); the daemon would leave them unbound".into(),
        (Ok(false), _) => "no systemd driver: this machine has no unified cgroup v2 hierarchy alone; the daemon would leave them unbound".into(),
        (Err(e), _) => format!("unknown: the cgroup mounts cannot be read ({e})"),
    }
}

/// What `atoll daemon` was told.
#[derive(Clone, Debug)]
pub struct SetupOptions {
    /// The platform description; `None` for the embedded default.
    pub config: Option<PathBuf>,
    /// The backend.
    pub backend: BackendRequest,
    /// atoll's root group: a name under the mount or a path below it;
    /// `None`: the delegated subtree's `managed` when systemd delegated
    /// one, else [`DEFAULT_ROOT`].
    pub cgroup_root: Option<String>,
    /// `INVOCATION_ID` from the environment (systemd sets it for the
    /// processes of a service).
    pub invocation_id: Option<String>,
    /// Where the state file lives.
    pub state_dir: PathBuf,
    /// Where sysfs is.
    pub sysfs_root: PathBuf,
    /// Where procfs is.
    pub proc_root: PathBuf,
    /// cgroup v1: make atoll's root `cpu_exclusive` so islands can be
    /// exclusive too. Off by default: an exclusive root keeps every cpuset
    /// outside atoll (a container runtime's, say) off all of atoll's CPUs.
    pub v1_exclusive: bool,
    /// Every group is checked for drift once in this long (`None`: the
    /// default, [`crate::controller::REPAIR_EVERY`]).
    pub repair_every: Option<Duration>,
    /// `--systemd`: the systemd driver (cgroup2 only).
    pub systemd: SystemdRequest,
    /// Where `/run` is (systemd is detected by `/run/systemd/system`).
    pub run_root: PathBuf,
}

/// atoll's root without `--cgroup-root` outside a delegated subtree.
pub const DEFAULT_ROOT: &str = "atoll";

/// Why the daemon cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A network island could not be set up.
    #[error(transparent)]
    Network(#[from] atoll_core::netisland::NetIslandError),
    /// An island's frequency policy is one the machine cannot follow.
    #[error(transparent)]
    Frequency(#[from] crate::frequency::FrequencyError),
    /// A power cap on a machine without RAPL.
    #[error(transparent)]
    PowerCap(#[from] crate::powercap::NoRapl),
    /// `--cgroup-root` is neither a name nor a path below the mount.
    #[error("--cgroup-root {root:?}: {reason}")]
    RootName {
        /// The value given.
        root: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The machine could not be read.
    #[error("reading the machine")]
    Topology(#[from] TopologyError),
    /// The platform description is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No cgroup backend can be used.
    #[error("no usable cgroup backend")]
    Cgroup {
        /// What failed.
        #[from]
        source: CgroupError,
    },
    /// The daemon's own process could not be read.
    #[error("reading the daemon's own cgroups")]
    SelfProcess(#[from] atoll_core::process::ProcessError),
    /// `--systemd on`, and the driver cannot be used.
    #[error(
        "--systemd on: {reason} (use --systemd auto or off to run without the systemd driver)"
    )]
    Systemd {
        /// Why not.
        reason: String,
    },
}

/// Checks a `--cgroup-root` value: a name (the rules of island and unit
/// names) or a path of such names below the mount whose leading components
/// may also carry systemd's characters (`system.slice/atoll.service/managed`).
pub fn check_root(root: &str) -> Result<String, SetupError> {
    let bad = |reason: String| SetupError::RootName {
        root: root.to_string(),
        reason,
    };
    let trimmed = root.trim_start_matches('/');
    let parts: Vec<&str> = trimmed.split('/').collect();
    let (last, above) = parts.split_last().ok_or_else(|| bad("empty".into()))?;
    Name::new(last).map_err(|e| bad(e.to_string()))?;
    for p in above {
        let ok = !p.is_empty()
            && !p.starts_with('.')
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.@:\\".contains(c));
        if !ok {
            return Err(bad(format!(
                "{p:?} is not a cgroup name (letters, digits and _-.@:\\, not starting with '.')"
            )));
        }
    }
    Ok(trimmed.to_string())
}

/// Where atoll's root goes on this backend (see the module docs), and the
/// delegated subtree it is in, if any. In a delegated subtree the daemon
/// first moves itself (and whatever shares the unit's cgroup) into the
/// `supervisor` leaf.
fn place_root(
    choice: &atoll_cgroup::Choice,
    explicit: Option<String>,
    o: &SetupOptions,
    procfs: &ProcFs,
) -> Result<(String, Option<Delegation>), SetupError> {
    let atoll_cgroup::Choice::Cgroup2 { mount, .. } = choice else {
        return Ok((explicit.unwrap_or_else(|| DEFAULT_ROOT.into()), None));
    };
    let own = procfs.cgroups(std::process::id())?;
    let own = own.unified().unwrap_or("/").to_string();
    match delegate::find(mount, &own, o.invocation_id.as_deref(), &RealFs) {
        Ok(d) => {
            let root = explicit.unwrap_or_else(|| d.managed());
            if !d.is_below(&root) {
                tracing::warn!(
                    "atoll's root {root} is outside the subtree systemd delegated to it ({}): systemd owns it",
                    d.top()
                );
                return Ok((root, None));
            }
            let moved = d.enter_leaf(&RealFs)?;
            tracing::info!(
                "systemd delegated {} to atoll: moved pid(s) {moved:?} into {}, atoll's root is {root}",
                d.top(),
                d.supervisor()
            );
            Ok((root, Some(d)))
        }
        Err(why) => {
            let root = explicit.unwrap_or_else(|| DEFAULT_ROOT.into());
            if o.invocation_id.is_some() {
                tracing::warn!(
                    "started by systemd, but {why}: atoll's root is {}/{root}, outside any delegated subtree (give the unit Delegate=)",
                    mount.display()
                );
            }
            Ok((root, None))
        }
    }
}

/// Builds the controller (not started) and a one-line description of what
/// was chosen.
pub fn build(o: &SetupOptions) -> Result<(Controller, String), SetupError> {
    let explicit = o.cgroup_root.as_deref().map(check_root).transpose()?;
    let topo = atoll_topology::read_topology(&o.sysfs_root)?;
    let topo_for_opts = topo.clone();
    let (spec, source) = match &o.config {
        Some(path) => (atoll_config::load(path, &topo)?, path.display().to_string()),
        None => (
            atoll_config::embedded_default(&topo)?,
            "the embedded default".to_string(),
        ),
    };
    let procfs = ProcFs::new(&o.proc_root);
    let self_pid = std::process::id();
    let real = !matches!(o.backend, BackendRequest::Sim);
    let (env, what, root) = match o.backend {
        BackendRequest::Sim => {
            systemd_wanted(o.systemd, false, false)?;
            let root = explicit.unwrap_or_else(|| DEFAULT_ROOT.into());
            let (env, what) = sim_env(topo, &root);
            (env, what, root)
        }
        BackendRequest::Cgroup(requested) => {
            let mounts = atoll_cgroup::detect(&o.proc_root.join("self/mountinfo"))?;
            let choice =
                atoll_cgroup::choose(requested, &mounts, &RealFs, &atoll_cgroup::can_write)?;
            let what = format!("{choice:?}");
            let (root, delegation) = place_root(&choice, explicit, o, &procfs)?;
            let mut backend = atoll_cgroup::open(&choice, &root, RealFs)?;
            backend.set_delegation(delegation)?;
            backend.set_exclusive_root(o.v1_exclusive);
            if matches!(choice, atoll_cgroup::Choice::Cgroup1(_)) {
                // Drift repair learns of others' writes at once, and its
                // full round can be slow (see REPAIR_RATE_WATCHED).
                if let Err(e) = backend.watch_writes() {
                    tracing::warn!("drift repair by round only: {e}");
                }
            }
            let (backend, what) = with_systemd(backend, &choice, o, what)?;
            let env = Env {
                backend,
                procs: Box::new(procfs.clone()),
                tasks: Box::new(LinuxTaskControl::new()),
                system: Box::new(procfs.clone()),
                clock: Arc::new(MonotonicClock::new()),
            };
            (env, what, root)
        }
    };
    // Read after the daemon may have moved into its leaf: the origin of
    // last resort for processes atoll gives back.
    let self_origin = procfs.cgroups(self_pid)?;
    let description = format!(
        "backend {} ({what}), root {root}, platform from {source}: host cpus {}, {} islands, {} units",
        env.backend.kind().as_str(),
        spec.host.cpus,
        spec.islands.len(),
        spec.units.len()
    );
    let topo_for_reload = topo_for_opts.clone();
    let opts = Options {
        state_dir: Some(o.state_dir.clone()),
        self_origin,
        self_pid,
        topology: topo_for_opts,
    };
    let comm = spec.comm.is_some();
    // Network islands: iproute2's tc and the machine's own sysfs and procfs
    // (docs/netisland.md). Built even when none is configured, so that a
    // reload can add one; nothing is touched while none is.
    let net = {
        let mut net = crate::netisland::NetIslands::new(
            Box::new(atoll_net::TcBackend::new()),
            atoll_net::Steering::new(&o.sysfs_root, &o.proc_root),
            &spec,
            atoll_core::coord::CoordConfig::default().weight_step,
        )?;
        net.set_recv_queues(Box::new(crate::coord::ProcRecvQueues::new(&o.proc_root)));
        // On cgroup v2 the unit groups are classified with nftables, in a
        // table named after atoll's root.
        let v2 = env
            .backend
            .cgroup2_dir(&atoll_core::plan::GroupPath::root());
        if let (true, Some((mount, _))) = (real, v2) {
            if in_path("nft") {
                net.set_nft(atoll_net::NftClassifier::new(
                    env.backend.root_name(),
                    Box::new(atoll_net::NftCommand::new().with_v2_root(&mount)),
                ));
            } else {
                net.set_nft_missing("no `nft` in PATH; install nftables");
            }
        }
        Some(net)
    };
    // Frequency policies: the machine's cpufreq files, checked now (a
    // policy the CPUs cannot follow, or any on a machine without cpufreq,
    // refuses the start). Not with the simulated backend. Made even
    // without a policy: the power cap limits frequencies through it, and
    // a state file may keep the originals a crashed run wrote over.
    if real {
        crate::powercap::check_rapl(&spec, &o.sysfs_root)?;
    }
    let freq = if real {
        Some(crate::frequency::Frequencies::new(&o.sysfs_root, &spec)?)
    } else {
        None
    };
    let mut controller = Controller::new(env, spec, opts);
    if let Some(net) = net {
        controller.set_network(net);
    }
    if let Some(freq) = freq {
        controller.set_frequencies(freq);
    }
    // What an epoch costs is measured in real time whatever the backend.
    controller.set_stopwatch(Arc::new(MonotonicClock::new()));
    controller.set_self_reader(&o.proc_root);
    controller.set_config_source(match &o.config {
        Some(path) => {
            let (path, topo) = (path.clone(), topo_for_reload);
            Ok(Box::new(move || {
                atoll_config::load(&path, &topo).map_err(|e| e.to_string())
            }))
        }
        None => Err("the embedded default: start atoll with --config FILE, or put the configuration in /etc/atoll/atoll.toml, to reload it".into()),
    });
    if let Some(every) = o.repair_every {
        controller.set_repair_interval(every);
    }
    if real {
        // Opened before the first scan, so no process slips between them.
        let options = atoll_procfs::connector::ConnectorOptions {
            proc_root: o.proc_root.clone(),
            ..Default::default()
        };
        match atoll_procfs::connector::ProcConnector::open(&options) {
            Ok(c) => controller.set_process_events(Box::new(c)),
            Err(e) => {
                tracing::warn!("process events unavailable ({e}); scanning /proc every epoch");
                controller.set_process_scan(format!("{}: {e}", e.reason().as_str()));
            }
        }
        controller.set_power(crate::power::Power::probe(&o.sysfs_root));
        controller.set_recv_queues(Box::new(crate::coord::ProcRecvQueues::new(&o.proc_root)));
        match atoll_procfs::psi_watch::PsiGroupWatch::open(&o.proc_root) {
            Some(w) => {
                let w = w.with_limit(trigger_limit());
                controller.set_pressure_watch(Box::new(w));
            }
            None => controller.set_pressure_averages(format!(
                "no {}: the kernel has no PSI, or was booted with psi=0",
                o.proc_root.join("pressure/cpu").display()
            )),
        }
        if comm {
            // Opened only when asked for: the monitor keeps a netlink socket.
            let monitor = atoll_netdiag::DiagMonitor::new(atoll_netdiag::MonitorOptions {
                proc_root: o.proc_root.clone(),
                ..Default::default()
            });
            let source = monitor.source_kind().as_str();
            if let Some(why) = monitor.fallback_reason() {
                tracing::warn!("comm: sock_diag unavailable ({why}); reading /proc/net instead");
            }
            controller.set_net_monitor(Box::new(monitor), source);
        }
    } else {
        controller.set_process_scan("the simulated machine's processes are its own");
        controller.set_pressure_averages("the simulated machine has no pressure files");
    }
    Ok((controller, description))
}

/// The cgroup backend, wrapped in the systemd driver when `--systemd`
/// asks for it and it can be had (see the module docs); `what` says so.
fn with_systemd(
    backend: atoll_cgroup::CgroupBackend,
    choice: &atoll_cgroup::Choice,
    o: &SetupOptions,
    what: String,
) -> Result<(Box<dyn Backend>, String), SetupError> {
    let mount = match choice {
        atoll_cgroup::Choice::Cgroup2 { mount, .. } => Some(mount.clone()),
        atoll_cgroup::Choice::Cgroup1(_) => None,
    };
    let booted = atoll_systemd::detect_in(&o.run_root);
    let wanted = systemd_wanted(o.systemd, mount.is_some(), booted)?;
    let Some(mount) = mount.filter(|_| wanted) else {
        return Ok((Box::new(backend), what));
    };
    let options = atoll_systemd::Options::for_mount(mount);
    let bus = options.bus.to_string();
    // Connected before the driver takes the backend: without a bus the
    // backend runs on alone (`auto`).
    match atoll_systemd::DbusManager::connect(options.bus.clone(), options.timeout) {
        Err(reason) if o.systemd == SystemdRequest::On => Err(SetupError::Systemd {
            reason: format!("cannot reach systemd at {bus}: {reason}"),
        }),
        Err(reason) => {
            tracing::warn!(
                "systemd runs this machine but cannot be reached at {bus} ({reason}): no systemd driver; units that name systemd units stay unbound"
            );
            Ok((Box::new(backend), what))
        }
        Ok(manager) => {
            let driver = atoll_systemd::SystemdDriver::with_manager(
                backend,
                Box::new(manager),
                Arc::new(RealFs),
                options,
            )
            .map_err(|e| SetupError::Systemd {
                reason: e.to_string(),
            })?;
            let what = format!("{what}, via {} on {bus}", driver.manager_name());
            Ok((Box::new(driver), what))
        }
    }
}

/// Most PSI triggers the daemon arms: a quarter of its descriptor limit
/// (each holds an open file; the API's connections need the rest), at
/// most [`DEFAULT_LIMIT`](atoll_procfs::psi_watch::DEFAULT_LIMIT) x 4.
fn trigger_limit() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer for getrlimit.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    let default = atoll_procfs::psi_watch::DEFAULT_LIMIT;
    if rc != 0 {
        return default;
    }
    usize::try_from(lim.rlim_cur / 4).map_or(default * 4, |n| n.min(default * 4))
}

/// A simulated machine of the same shape, whose clock follows the wall
/// clock (a thread advances it every 10 ms).
fn sim_env(topo: Topology, root: &str) -> (Env, String) {
    let clock = ManualClock::new();
    let sim = SimPlatform::new(topo, root, clock.clone());
    let ticker = sim.clone();
    let wall = MonotonicClock::new();
    std::thread::Builder::new()
        .name("atoll-sim-clock".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(10));
            let behind = wall.now().saturating_sub(ticker.now());
            if !behind.is_zero() {
                ticker.advance(behind);
            }
        })
        .map(drop)
        .unwrap_or_else(|e| tracing::warn!("sim clock thread: {e}"));
    let env = Env {
        backend: Box::new(sim.clone()) as Box<dyn Backend>,
        procs: Box::new(sim.clone()) as Box<dyn ProcessTable>,
        system: Box::new(sim.clone()),
        tasks: Box::new(sim) as Box<dyn TaskControl>,
        clock: Arc::new(clock),
    };
    (env, "simulated machine, real time".into())
}

/// Whether `program` is an executable file in a directory of `PATH`.
fn in_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_systemd_driver_is_used_where_asked_and_possible() {
        use SystemdRequest::{Auto, Off, On};
        assert_eq!("auto".parse::<SystemdRequest>().unwrap(), Auto);
        assert_eq!("on".parse::<SystemdRequest>().unwrap(), On);
        assert_eq!("off".parse::<SystemdRequest>().unwrap(), Off);
        assert!("yes".parse::<SystemdRequest>().is_err());
        assert_eq!(SystemdRequest::default(), Auto);
        for (request, v2, booted, want) in [
            (Auto, true, true, Some(true)),
            (Auto, true, false, Some(false)),
            (Auto, false, true, Some(false)),
            (On, true, true, Some(true)),
            (On, true, false, None),
            (On, false, true, None),
            (Off, true, true, Some(false)),
            (Off, false, false, Some(false)),
        ] {
            let got = systemd_wanted(request, v2, booted);
            match want {
                Some(w) => assert_eq!(got.unwrap(), w, "{request} v2={v2} booted={booted}"),
                None => {
                    let e = got.unwrap_err().to_string();
                    assert!(
                        e.starts_with("--systemd on: ") && e.contains("--systemd auto or off"),
                        "{e}"
                    );
                }
            }
        }
        let e = systemd_wanted(On, false, true).unwrap_err().to_string();
        assert!(e.contains("not cgroup2"), "{e}");
        let e = systemd_wanted(On, true, false).unwrap_err().to_string();
        assert!(e.contains("/run/systemd/system"), "{e}");
    }

    #[test]
    fn roots_are_names_or_paths_below_the_mount() {
        assert_eq!(check_root("atoll").unwrap(), "atoll");
        assert_eq!(
            check_root("system.slice/atoll.service/managed").unwrap(),
            "system.slice/atoll.service/managed"
        );
        assert_eq!(
            check_root("/system.slice/system-x\\x2dy.slice/a@b.service/m").unwrap(),
            "system.slice/system-x\\x2dy.slice/a@b.service/m"
        );
        for bad in [
            "",
            "/",
            "a//b",
            "a/../b",
            "../x",
            "./x",
            "x/.hidden/y",
            "a.b",
            "system.slice/cpu.max",
            "x/y z/w",
            "x/managed/",
        ] {
            let e = check_root(bad).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with(&format!("--cgroup-root {bad:?}: ")),
                "{bad:?}: {e}"
            );
        }
    }
}
