//! What one control-loop epoch costs over this machine's real `/proc`.
//!
//! The controller runs with adoption rules (so the scan is on) against the
//! real process table, with the simulated backend standing in for cgroups
//! (nothing on the machine is moved). It measures `epoch()` in steady state
//! (every pid settled) and with a burst of new processes per epoch, and
//! prints percentiles.
//!
//! `cargo run --release -p atoll-daemon --example epoch_cost [-- EXTRA_PROCS EPOCHS]`

use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_core::clock::ManualClock;
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandSpec, PlatformSpec, SchedPolicy, UnitSpec,
    DEFAULT_EPOCH,
};
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::{CpuSet, Name};
use atoll_daemon::controller::{Controller, Env, Options};
use atoll_procfs::{LinuxTaskControl, ProcFs};
use atoll_sim::SimPlatform;

fn spec() -> PlatformSpec {
    let n = |s: &str| Name::new(s).expect("valid name");
    let set = |s: &str| CpuSet::parse(s).expect("valid set");
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![IslandSpec {
            name: n("main"),
            cpus: set("1"),
            mems: set("0"),
            policy: SchedPolicy::Fair,
            arbitration: Default::default(),
            exclusive: false,
            access: Default::default(),
        }],
        units: vec![UnitSpec {
            name: n("none"),
            island: n("main"),
            entitlement: Entitlement::default(),
            // Matches nothing, so every pid is read and then settles.
            adopt: vec![AdoptRule::Comm("no-such-comm".into())],
            rt_priority: None,
        }],
        default_island: None,
        epoch: DEFAULT_EPOCH,
        isolation: Default::default(),
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

fn percentiles(mut v: Vec<Duration>) -> String {
    v.sort();
    let p = |q: f64| v[atoll_core::num::saturating_usize(((v.len() - 1) as f64 * q).round())];
    format!(
        "p50 {:>8.1} us  p99 {:>8.1} us  max {:>8.1} us",
        p(0.5).as_secs_f64() * 1e6,
        p(0.99).as_secs_f64() * 1e6,
        p(1.0).as_secs_f64() * 1e6
    )
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let extra = args.first().copied().unwrap_or(200);
    let epochs = args.get(1).copied().unwrap_or(300);
    let mut children: Vec<Child> = (0..extra)
        .filter_map(|_| Command::new("sleep").arg("120").spawn().ok())
        .collect();
    let topo = Topology::synthetic(SyntheticShape {
        packages: 1,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: 2,
        threads_per_core: 1,
        memory_per_node: 1 << 30,
    });
    let clock = ManualClock::new();
    let sim = SimPlatform::new(topo.clone(), "atoll-bench", clock.clone());
    let env = Env {
        backend: Box::new(sim),
        procs: Box::new(ProcFs::system()),
        tasks: Box::new(LinuxTaskControl::new()),
        system: Box::new(ProcFs::system()),
        clock: Arc::new(clock.clone()),
    };
    let opts = Options {
        state_dir: None,
        self_origin: CgroupMembership::default(),
        self_pid: std::process::id(),
        topology: topo.clone(),
    };
    let mut c = Controller::new(env, spec(), opts);
    c.start().expect("start on the simulated backend");
    let pids = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
            })
            .count()
        })
        .unwrap_or(0);
    // Let every pid settle (rules stop re-reading a pid after 1 s).
    for _ in 0..40 {
        clock.advance(DEFAULT_EPOCH);
        c.epoch();
    }
    let mut steady = Vec::with_capacity(epochs);
    for _ in 0..epochs {
        clock.advance(DEFAULT_EPOCH);
        let t = Instant::now();
        c.epoch();
        steady.push(t.elapsed());
    }
    let mut burst = Vec::with_capacity(epochs / 3);
    for _ in 0..epochs / 3 {
        for _ in 0..10 {
            if let Ok(ch) = Command::new("sleep").arg("120").spawn() {
                children.push(ch);
            }
        }
        clock.advance(DEFAULT_EPOCH);
        let t = Instant::now();
        c.epoch();
        burst.push(t.elapsed());
    }
    println!("processes on the machine at start: {pids}");
    println!("steady epoch (all settled):       {}", percentiles(steady));
    println!("epoch with 10 new processes:      {}", percentiles(burst));
    for mut ch in children {
        let _ = ch.kill();
        let _ = ch.wait();
    }
}
