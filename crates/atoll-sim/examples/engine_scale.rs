//! How fast the engine runs a big workload: 64, 256 and 1,024 CPUs (2 NUMA
//! nodes, SMT 2), about 10 tasks per CPU (10,000 at 1,024), 60 simulated
//! seconds, stepped in 30 ms epochs (where the daemon would run), once with
//! every process outside atoll and once in a fixed cgroup layout (four
//! islands with a cpuset each, `CPUs / 16` weighted units, every third
//! capped, the apps dealt round robin into the units).
//!
//! The mix, by threads: 40% barrier apps (16 threads, 50 ms phases ±20%),
//! 30% three-tier request chains (a client at 100 requests/s, a front and
//! a back service of 8 threads), 15% streams (a 4-thread server, 16
//! viewers at 2 Mbit/s in 16 KiB chunks), 10% hogs (half `SCHED_IDLE`), 5%
//! disk readers.
//!
//! ```text
//! cargo run --release -p atoll-sim --example engine_scale -- [--cpus 64,256,1024]
//!     [--seconds 60] [--tasks N] [--layout flat|groups|both]
//! ```
//!
//! Prints one line per run: CPUs, layout, tasks, events, events/s, wall
//! time, and the CPU model's rate recomputations.

use std::time::{Duration, Instant};

use atoll_core::backend::{Actuator, Monitor, StatSelect};
use atoll_core::clock::ManualClock;
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings};
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::CpuSet;
use atoll_sim::workload::{AppSpec, DiskSpec, Pattern, Program};
use atoll_sim::{Engine, SimPlatform, WorkloadSpec};

fn app(
    name: String,
    threads: u32,
    instances: u32,
    policy: Option<&str>,
    program: Program,
) -> AppSpec {
    AppSpec {
        unit: name.chars().take(15).collect(),
        name,
        start_ms: 0.0,
        instances,
        threads,
        uid: 1000,
        memory_mb: 64.0,
        policy: policy.map(str::to_string),
        program,
    }
}

/// About `tasks` threads (see the module docs).
fn workload(tasks: u32) -> WorkloadSpec {
    let mut apps = Vec::new();
    let mut left = tasks;
    let mut take = |n: u32| {
        let t = n.min(left);
        left -= t;
        t
    };
    let share = |f: f64| (f64::from(tasks) * f) as u32;
    // Barrier apps, 16 threads: 50 ms phases, ±20%.
    for i in 0..share(0.40) / 16 {
        let t = take(16);
        apps.push(app(
            format!("par{i}"),
            t,
            1,
            None,
            Program::Barrier {
                compute_ms: 50.0,
                rounds: 1_000_000,
                jitter: 0.2,
            },
        ));
    }
    // Chains: client (2 threads, 100 req/s) -> front (8) -> back (8).
    for i in 0..share(0.30) / 18 {
        take(18);
        apps.push(app(
            format!("fe{i}"),
            8,
            1,
            None,
            Program::Service {
                cpu_us: 300.0,
                exponential: true,
                next: Some(format!("be{i}")),
                response_bytes: 8192,
            },
        ));
        apps.push(app(
            format!("be{i}"),
            8,
            1,
            None,
            Program::Service {
                cpu_us: 800.0,
                exponential: true,
                next: None,
                response_bytes: 2048,
            },
        ));
        apps.push(app(
            format!("cl{i}"),
            2,
            1,
            None,
            Program::Client {
                target: format!("fe{i}"),
                rate_per_s: Some(100.0),
                poisson: true,
                think_ms: 0.0,
                requests: None,
                request_bytes: 512,
                cpu_us: 50.0,
            },
        ));
    }
    // Streams: a server (4 threads) and 16 viewers, 2 Mbit/s in 16 KiB.
    for i in 0..share(0.15) / 20 {
        take(20);
        apps.push(app(
            format!("tv{i}"),
            4,
            1,
            None,
            Program::StreamServer {
                clients: format!("view{i}"),
                rate_kbps: 2000.0,
                chunk_kb: 16.0,
                cpu_us: 2000.0,
                duration_ms: 3_600_000.0,
            },
        ));
        apps.push(app(
            format!("view{i}"),
            1,
            16,
            None,
            Program::StreamClient {
                prefill_ms: 500.0,
                cpu_us: 300.0,
            },
        ));
    }
    // Hogs, half of them SCHED_IDLE.
    for i in 0..share(0.10) / 8 {
        let t = take(8);
        let policy = (i % 2 == 1).then_some("idle");
        apps.push(app(
            format!("hog{i}"),
            t,
            1,
            policy,
            Program::Hog { cpu_ms: None },
        ));
    }
    // Disk readers.
    for i in 0.. {
        let t = take(8);
        if t == 0 {
            break;
        }
        apps.push(app(
            format!("io{i}"),
            t,
            1,
            None,
            Program::Disk {
                pattern: if i % 2 == 0 {
                    Pattern::Sequential
                } else {
                    Pattern::Random
                },
                request_kb: 64.0,
                requests: None,
                write: false,
                cpu_us: 100.0,
            },
        ));
    }
    WorkloadSpec {
        network: Default::default(),
        disk: Some(DiskSpec::default()),
        apps,
    }
}

fn topology(cpus: u32) -> Topology {
    Topology::synthetic(SyntheticShape {
        packages: 2,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: cpus / 4,
        threads_per_core: 2,
        memory_per_node: 64 << 30,
    })
}

/// Four islands of a quarter of the CPUs each; `cpus / 16` units dealt
/// round robin over them, every third capped at a quarter of its island;
/// apps dealt round robin over the units.
fn layout(sim: &mut SimPlatform, cpus: u32, spec: &WorkloadSpec) -> Vec<(String, GroupPath)> {
    let root = GroupPath::root();
    sim.apply(&root, &GroupSettings::default()).unwrap();
    let q = cpus / 4;
    let islands: Vec<GroupPath> = (0..4)
        .map(|i| {
            let p = GroupPath::from_relative(&format!("isl{i}"));
            let set = CpuSet::parse(&format!("{}-{}", i * q, (i + 1) * q - 1)).unwrap();
            let s = GroupSettings {
                cpus: Some(set),
                ..Default::default()
            };
            sim.apply(&p, &s).unwrap();
            p
        })
        .collect();
    let units: Vec<GroupPath> = (0..(cpus / 16).max(4))
        .map(|k| {
            let p = GroupPath::from_relative(&format!("{}/u{k}", islands[k as usize % 4].as_str()));
            let s = GroupSettings {
                cpu_weight: Some(50 + (k * 37) % 200),
                cpu_max: (k % 3 == 0).then_some(CpuMax {
                    quota_us: u64::from(q) * 25_000,
                    period_us: 100_000,
                }),
                ..Default::default()
            };
            sim.apply(&p, &s).unwrap();
            p
        })
        .collect();
    spec.apps
        .iter()
        .enumerate()
        .map(|(k, a)| (a.name.clone(), units[k % units.len()].clone()))
        .collect()
}

/// CPU time this process has used, s.
fn cpu_time() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage struct.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn run(cpus: u32, tasks: u32, seconds: f64, grouped: bool) {
    let mut sim = SimPlatform::new(topology(cpus), "atoll", ManualClock::new());
    let spec = workload(tasks);
    let threads: u32 = spec.apps.iter().map(|a| a.threads * a.instances).sum();
    let leaves = if grouped {
        layout(&mut sim, cpus, &spec)
    } else {
        Vec::new()
    };
    let wall = Instant::now();
    let cpu0 = cpu_time();
    let mut e = Engine::new(sim.clone(), spec, 42).unwrap();
    e.run_until(Duration::ZERO);
    for (app, leaf) in &leaves {
        for pid in e.pids(app) {
            sim.move_process(pid, leaf).unwrap();
        }
    }
    let epoch = Duration::from_millis(30);
    let end = Duration::from_secs_f64(seconds);
    let mut t = Duration::ZERO;
    let mut usage = 0;
    while t < end {
        t += epoch;
        e.run_until(t);
        // What a control loop would read each epoch.
        for (_, leaf) in leaves.iter().step_by(8) {
            usage += sim
                .stats_of(leaf, StatSelect::CPU)
                .unwrap()
                .cpu_usage_us
                .unwrap_or(0);
        }
    }
    let s = wall.elapsed().as_secs_f64();
    let cpu = cpu_time() - cpu0;
    let sample = e.sample();
    let m = sim.model_stats();
    println!(
        "cpus {cpus:5} layout {:6} tasks {threads:6} events {:9} events/s {:9.0} wall_s {s:7.2} \
         cpu_s {cpu:7.2} recomputes {:9} rebases {:10} busy_cpus {:7.1}",
        if grouped { "groups" } else { "flat" },
        e.events(),
        e.events() as f64 / s,
        m.recomputes,
        m.rebases,
        sample.cpu_rate,
    );
    std::hint::black_box(usage);
}

fn main() {
    let mut cpus = vec![64, 256, 1024];
    let mut seconds = 60.0;
    let mut tasks: Option<u32> = None;
    let mut layouts = vec![false, true];
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i + 1 < args.len() {
        let v = &args[i + 1];
        match args[i].as_str() {
            "--cpus" => cpus = v.split(',').filter_map(|x| x.parse().ok()).collect(),
            "--seconds" => seconds = v.parse().unwrap_or(seconds),
            "--tasks" => tasks = v.parse().ok(),
            "--layout" => {
                layouts = match v.as_str() {
                    "flat" => vec![false],
                    "groups" => vec![true],
                    _ => vec![false, true],
                }
            }
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    for &c in &cpus {
        let n = tasks.unwrap_or(c * 10_000 / 1024);
        for &grouped in &layouts {
            run(c, n, seconds, grouped);
        }
    }
}
