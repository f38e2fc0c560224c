//! What the daemon's integration tests share: finding writable cgroup v1
//! hierarchies for the real-kernel tests (a unique root name and a guard
//! that removes it), and the simulator rig ([`sim`]). Each test crate uses
//! part of it.
#![allow(dead_code)]

pub mod net;
pub mod real_coord;
pub mod rig;
pub mod sim;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use atoll_cgroup::{can_write, choose, detect, open, Choice, RealFs, Requested};
use atoll_core::clock::ManualClock;
use atoll_core::process::CgroupMembership;
use atoll_core::spec::PlatformSpec;
use atoll_core::topology::Topology;
use atoll_daemon::controller::{Controller, Env, Options};
use atoll_procfs::{LinuxTaskControl, ProcFs};

/// Removes atoll's test root from every v1 hierarchy, even after a failed
/// assertion.
pub struct Guard {
    root: String,
    mounts: Vec<PathBuf>,
}

fn remove_tree(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

impl Drop for Guard {
    fn drop(&mut self) {
        assert!(self.root.starts_with("atoll-test-"));
        for m in &self.mounts {
            let d = m.join(&self.root);
            if d.exists() {
                remove_tree(&d);
            }
        }
    }
}

/// This machine's writable cgroup v1 hierarchies and topology, with a
/// unique root name and its guard.
pub struct RealV1 {
    pub choice: Choice,
    pub topo: Topology,
    pub root: String,
    /// Removes the root when the test ends.
    _guard: Guard,
}

impl RealV1 {
    /// The backend on the test's root, as a restarted daemon opens it.
    pub fn backend(&self) -> Box<dyn atoll_core::backend::Backend> {
        Box::new(open(&self.choice, &self.root, RealFs).unwrap())
    }

    /// The hierarchies' paths.
    pub fn paths(&self) -> &atoll_cgroup::V1Paths {
        match &self.choice {
            Choice::Cgroup1(p) => p,
            _ => unreachable!("found only for cgroup v1"),
        }
    }

    /// Island `main` (fair) on every online CPU, with one unit `light` in
    /// it holding `entitlement` and adopting by `adopt`: the platform of the
    /// real-kernel tests that need one unit and nothing else.
    pub fn one_unit_spec(
        &self,
        entitlement: atoll_core::spec::Entitlement,
        adopt: Vec<atoll_core::spec::AdoptRule>,
    ) -> PlatformSpec {
        use atoll_core::spec::{HostSpec, IslandSpec, SchedPolicy, UnitSpec, DEFAULT_EPOCH};
        let name = |s: &str| atoll_core::Name::new(s).expect("a valid name");
        let mems = self.topo.all_nodes();
        PlatformSpec {
            host: HostSpec {
                cpus: atoll_core::CpuSet::new(),
                mems: mems.clone(),
                adopt_all: false,
            },
            islands: vec![IslandSpec {
                name: name("main"),
                cpus: self.topo.online(),
                mems,
                policy: SchedPolicy::Fair,
                arbitration: Default::default(),
                exclusive: false,
                access: Default::default(),
            }],
            units: vec![UnitSpec {
                name: name("light"),
                island: name("main"),
                entitlement,
                adopt,
                rt_priority: None,
            }],
            default_island: None,
            epoch: DEFAULT_EPOCH,
            isolation: Default::default(),
            overlays: vec![],
            comm: None,
            apps: Default::default(),
            network: Vec::new(),
            frequency: Default::default(),
        }
    }

    /// A controller on the real kernel with a manual clock, started.
    pub fn start(&self, spec: PlatformSpec, clock: &ManualClock) -> Controller {
        self.start_with_state(spec, clock, None)
    }

    /// A controller on the real kernel with a manual clock and its state
    /// file in `state_dir`, started.
    pub fn start_with_state(
        &self,
        spec: PlatformSpec,
        clock: &ManualClock,
        state_dir: Option<PathBuf>,
    ) -> Controller {
        self.start_env(spec, clock, state_dir, false, None)
    }

    /// [`Self::start_with_state`] with network islands.
    pub fn start_with_network(
        &self,
        spec: PlatformSpec,
        clock: &ManualClock,
        state_dir: Option<PathBuf>,
        net: atoll_daemon::netisland::NetIslands,
    ) -> Controller {
        self.start_env(spec, clock, state_dir, false, Some(net))
    }

    /// [`Self::start`] with the backend watching writes to its groups'
    /// files, as the daemon opens it on cgroup v1.
    pub fn start_watching(&self, spec: PlatformSpec, clock: &ManualClock) -> Controller {
        self.start_env(spec, clock, None, true, None)
    }

    fn start_env(
        &self,
        spec: PlatformSpec,
        clock: &ManualClock,
        state_dir: Option<PathBuf>,
        watch: bool,
        net: Option<atoll_daemon::netisland::NetIslands>,
    ) -> Controller {
        spec.validate(&self.topo).unwrap();
        let procfs = ProcFs::new("/proc");
        let mut backend = open(&self.choice, &self.root, RealFs).unwrap();
        if watch {
            backend.watch_writes().unwrap();
        }
        let env = Env {
            backend: Box::new(backend),
            procs: Box::new(procfs.clone()),
            tasks: Box::new(LinuxTaskControl::new()),
            system: Box::new(procfs.clone()),
            clock: Arc::new(clock.clone()),
        };
        let opts = Options {
            state_dir,
            self_origin: atoll_core::process::ProcessTable::info(&procfs, std::process::id())
                .map(|i| i.cgroups)
                .unwrap_or_else(|_| CgroupMembership::parse("0::/\n").unwrap()),
            self_pid: std::process::id(),
            topology: self.topo.clone(),
        };
        let mut c = Controller::new(env, spec, opts);
        if let Some(net) = net {
            c.set_network(net);
        }
        c.start().unwrap();
        c
    }
}

/// Writable v1 `cpuset` and `cpu` hierarchies as root with at least two
/// CPUs, or why not (the test then prints "skipped: ..." and passes).
pub fn real_v1() -> Result<RealV1, String> {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    let mounts = detect(Path::new("/proc/self/mountinfo")).map_err(|e| e.to_string())?;
    let choice = match choose(Requested::Cgroup1, &mounts, &RealFs, &can_write) {
        Ok(c @ Choice::Cgroup1(_)) => c,
        Ok(other) => return Err(format!("unexpected choice {other:?}")),
        Err(e) => return Err(e.to_string()),
    };
    let topo = atoll_topology::read_topology(Path::new("/sys")).map_err(|e| e.to_string())?;
    if topo.online().len() < 2 {
        return Err("fewer than 2 CPUs".into());
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let root = format!("atoll-test-{}-{nanos}", std::process::id());
    let guard = Guard {
        root: root.clone(),
        mounts: mounts.v1.iter().map(|m| m.mount.path.clone()).collect(),
    };
    Ok(RealV1 {
        choice,
        topo,
        root,
        _guard: guard,
    })
}
