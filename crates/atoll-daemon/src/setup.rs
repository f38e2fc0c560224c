//! Building a controller from the daemon's flags: the machine, the platform
//! description, and the backend.
//!
//! `--backend auto` picks cgroup2 when its mount offers the cpuset, cpu and
//! memory controllers and is writable, else cgroup1; when neither can be
//! used the error says why and points at `--backend sim`. With `sim`, the
//! daemon runs a simulated machine of the same topology in real time: the
//! sim's clock follows the wall clock.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use atoll_cgroup::{CgroupError, RealFs, Requested};
use atoll_config::ConfigError;
use atoll_core::backend::Backend;
use atoll_core::clock::{Clock, ManualClock};
use atoll_core::name::NameError;
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

/// What `atoll daemon` was told.
#[derive(Clone, Debug)]
pub struct SetupOptions {
    /// The platform description; `None` for the embedded default.
    pub config: Option<PathBuf>,
    /// The backend.
    pub backend: BackendRequest,
    /// atoll's root group name.
    pub cgroup_root: String,
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
}

/// Why the daemon cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `--cgroup-root` is not a plain name.
    #[error("--cgroup-root")]
    RootName(#[from] NameError),
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
}

/// Builds the controller (not started) and a one-line description of what
/// was chosen.
pub fn build(o: &SetupOptions) -> Result<(Controller, String), SetupError> {
    let root = Name::new(&o.cgroup_root)?;
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
    let self_origin = procfs.cgroups(self_pid)?;
    let real = !matches!(o.backend, BackendRequest::Sim);
    let (env, what) = match o.backend {
        BackendRequest::Sim => sim_env(topo, root.as_str()),
        BackendRequest::Cgroup(requested) => {
            let mounts = atoll_cgroup::detect(&o.proc_root.join("self/mountinfo"))?;
            let choice =
                atoll_cgroup::choose(requested, &mounts, &RealFs, &atoll_cgroup::can_write)?;
            let what = format!("{choice:?}");
            let mut backend = atoll_cgroup::open(&choice, root.as_str(), RealFs)?;
            backend.set_exclusive_root(o.v1_exclusive);
            let env = Env {
                backend: Box::new(backend),
                procs: Box::new(procfs.clone()),
                tasks: Box::new(LinuxTaskControl::new()),
                system: Box::new(procfs),
                clock: Arc::new(MonotonicClock::new()),
            };
            (env, what)
        }
    };
    let description = format!(
        "backend {} ({what}), root {root}, platform from {source}: host cpus {}, {} islands, {} units",
        env.backend.kind().as_str(),
        spec.host.cpus,
        spec.islands.len(),
        spec.units.len()
    );
    let opts = Options {
        state_dir: Some(o.state_dir.clone()),
        self_origin,
        self_pid,
        topology: topo_for_opts,
    };
    let comm = spec.comm.is_some();
    let mut controller = Controller::new(env, spec, opts);
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
