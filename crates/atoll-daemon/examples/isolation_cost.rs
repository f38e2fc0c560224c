//! What one control-loop epoch costs per isolation mode, on the simulated
//! backend: 8 CPUs, 8 units entitled to one CPU each, 4 with one busy
//! process and 4 with two (the pmake scenario's shape).
//!
//! `cargo run --release -p atoll-daemon --example isolation_cost [-- EPOCHS]`

use std::sync::Arc;
use std::time::Instant;

use atoll_core::clock::ManualClock;
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{
    AdoptRule, Entitlement, HostSpec, IslandSpec, IsolationMode, IsolationSpec, PlatformSpec,
    SchedPolicy, UnitSpec, DEFAULT_EPOCH,
};
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::{CpuSet, Name};
use atoll_daemon::controller::{Controller, Env, Options};
use atoll_sim::SimPlatform;

const UNITS: usize = 8;

fn spec(mode: IsolationMode) -> PlatformSpec {
    let n = |s: &str| Name::new(s).expect("valid name");
    PlatformSpec {
        host: HostSpec {
            cpus: CpuSet::new(),
            mems: CpuSet::parse("0").expect("valid set"),
            adopt_all: false,
        },
        islands: vec![IslandSpec {
            name: n("all"),
            cpus: CpuSet::parse("0-7").expect("valid set"),
            mems: CpuSet::parse("0").expect("valid set"),
            policy: SchedPolicy::Fair,
            arbitration: Default::default(),
            exclusive: false,
            access: Default::default(),
        }],
        units: (1..=UNITS)
            .map(|i| UnitSpec {
                name: n(&format!("u{i}")),
                island: n("all"),
                entitlement: Entitlement {
                    cpus: Some(1.0),
                    ..Default::default()
                },
                adopt: vec![AdoptRule::Comm(format!("u{i}"))],
                rt_priority: None,
            })
            .collect(),
        default_island: None,
        overlays: Vec::new(),
        comm: None,
        epoch: DEFAULT_EPOCH,
        isolation: IsolationSpec {
            mode,
            ..Default::default()
        },
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

fn main() {
    let epochs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let topo = Topology::synthetic(SyntheticShape {
        packages: 1,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: 8,
        threads_per_core: 1,
        memory_per_node: 8 << 30,
    });
    for mode in [
        IsolationMode::Smp,
        IsolationMode::Quota,
        IsolationMode::Isolate,
    ] {
        let clock = ManualClock::new();
        let sim = SimPlatform::new(topo.clone(), "atoll-bench", clock.clone());
        for i in 1..=UNITS {
            for _ in 0..(if i <= UNITS / 2 { 1 } else { 2 }) {
                let pid = sim.spawn(&format!("u{i}"), 0, None);
                sim.set_busy(pid, true).expect("a live process");
            }
        }
        let env = Env {
            backend: Box::new(sim.clone()),
            procs: Box::new(sim.clone()),
            tasks: Box::new(sim.clone()),
            system: Box::new(sim.clone()),
            clock: Arc::new(clock.clone()),
        };
        let opts = Options {
            state_dir: None,
            self_origin: CgroupMembership::default(),
            self_pid: 1,
            topology: topo.clone(),
        };
        let mut c = Controller::new(env, spec(mode), opts);
        c.start().expect("start on the simulated backend");
        let mut v = Vec::with_capacity(epochs);
        for _ in 0..epochs {
            sim.advance(DEFAULT_EPOCH);
            let t = Instant::now();
            c.epoch();
            v.push(t.elapsed().as_secs_f64() * 1e6);
        }
        v.sort_by(f64::total_cmp);
        let p = |q: f64| v[atoll_core::num::saturating_usize(((v.len() - 1) as f64 * q).round())];
        println!(
            "{:<8} epoch: p50 {:>7.1} us  p99 {:>7.1} us  ({} epochs, {} units)",
            format!("{mode:?}").to_lowercase(),
            p(0.5),
            p(0.99),
            epochs,
            UNITS
        );
    }
}
