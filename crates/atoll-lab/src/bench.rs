//! `atoll bench sim`: how the simulator with the daemon's control loop
//! scales. Scenarios built here (not from files): 2 packages of SMT-2
//! cores, `cpus` CPUs, about 10 threads per CPU (10,000 at 1,024), four
//! islands of a quarter of the CPUs each, `cpus / 16` units (at least 4)
//! dealt round robin over them with a `comm` adoption rule, every third
//! capped, and the apps dealt round robin over the units.
//!
//! The mix, by threads: 45% barrier apps (16 threads, 50 ms phases ±20%),
//! 35% request chains (a 2-thread client at 100 requests/s, a front and a
//! back service of 8 threads), 20% hogs (half `SCHED_IDLE`).

use atoll_sim::workload::{AppSpec, NetworkSpec, Program};
use atoll_sim::WorkloadSpec;
use serde::{Deserialize, Serialize};

use crate::run::{run, RunResult};
use crate::scenario::{MachineSpec, RunSpec, Scenario};
use crate::LabError;

/// One size's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchRow {
    /// CPUs.
    pub cpus: u32,
    /// Threads started.
    pub tasks: u64,
    /// Units the daemon manages.
    pub units: u32,
    /// Simulated seconds.
    pub sim_s: f64,
    /// Control-loop epochs.
    pub epochs: u64,
    /// Engine events.
    pub events: u64,
    /// Events per wall second.
    pub events_per_s: f64,
    /// Wall time, s.
    pub wall_s: f64,
    /// CPU time of the run, s.
    pub cpu_s: f64,
}

/// The whole benchmark.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Rows, smallest machine first.
    pub rows: Vec<BenchRow>,
    /// Wall time of the 1,024-CPU run, s (when it ran).
    pub wall_s_1024: Option<f64>,
    /// Simulated seconds per run.
    pub seconds: f64,
}

fn app(name: String, unit: &str, threads: u32, policy: Option<&str>, program: Program) -> AppSpec {
    AppSpec {
        name,
        unit: unit.into(),
        start_ms: 0.0,
        instances: 1,
        threads,
        uid: 1000,
        memory_mb: 64.0,
        policy: policy.map(str::to_string),
        program,
    }
}

/// The scenario at `cpus` CPUs for `seconds` (see the module docs).
pub fn scenario(cpus: u32, seconds: f64) -> Result<Scenario, LabError> {
    let tasks = cpus * 10_000 / 1024;
    let units = (cpus / 16).max(4);
    let unit = |k: usize| format!("u{}", k % units as usize);
    let mut apps = Vec::new();
    let mut k = 0;
    for i in 0..tasks * 45 / 100 / 16 {
        apps.push(app(
            format!("par{i}"),
            &unit(k),
            16,
            None,
            Program::Barrier {
                compute_ms: 50.0,
                rounds: 1_000_000,
                jitter: 0.2,
            },
        ));
        k += 1;
    }
    for i in 0..tasks * 35 / 100 / 18 {
        let u = unit(k);
        k += 1;
        apps.push(app(
            format!("fe{i}"),
            &u,
            8,
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
            &u,
            8,
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
            &u,
            2,
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
    for i in 0..tasks * 20 / 100 / 8 {
        apps.push(app(
            format!("hog{i}"),
            &unit(k),
            8,
            (i % 2 == 1).then_some("idle"),
            Program::Hog { cpu_ms: None },
        ));
        k += 1;
    }
    let q = cpus / 4;
    let mut platform = String::from("[host]\ncpus = \"\"\n");
    for i in 0..4 {
        platform.push_str(&format!(
            "[island.i{i}]\ncpus = \"{}-{}\"\n",
            i * q,
            (i + 1) * q - 1
        ));
    }
    for u in 0..units {
        platform.push_str(&format!(
            "[unit.u{u}]\nisland = \"i{}\"\nweight = {}\nadopt = [{{ comm = \"u{u}\" }}]\n",
            u % 4,
            50 + (u * 37) % 200
        ));
        if u % 3 == 0 {
            platform.push_str(&format!("cpu_cap = {}\n", f64::from(q) / 4.0));
        }
    }
    let platform: toml::Table = toml::from_str(&platform).map_err(|e| LabError::Invalid {
        source_name: "bench".into(),
        message: e.to_string(),
    })?;
    let s = Scenario {
        name: format!("bench-{cpus}"),
        description: "atoll bench sim".into(),
        machine: MachineSpec {
            packages: 2,
            nodes: 1,
            llcs: 1,
            cores: cpus / 4,
            threads: 2,
            memory_gb: 64,
        },
        run: RunSpec {
            seconds,
            seed: 42,
            epoch_ms: Some(30),
            sample_ms: 0,
        },
        platform,
        workload: WorkloadSpec {
            network: NetworkSpec::default(),
            disk: None,
            apps,
        },
        managed: Default::default(),
        variants: Vec::new(),
    };
    s.platform_spec("base")?;
    Ok(s)
}

/// Runs the sizes in `cpus` for `seconds` each; `progress(size index,
/// sim_s, end_s)` after every epoch.
pub fn bench(
    cpus: &[u32],
    seconds: f64,
    progress: &mut dyn FnMut(usize, f64, f64),
) -> Result<BenchReport, LabError> {
    let mut rows = Vec::new();
    for (i, &c) in cpus.iter().enumerate() {
        let s = scenario(c, seconds)?;
        let r: RunResult = run(&s, "base", &mut |t, end| progress(i, t, end))?;
        rows.push(BenchRow {
            cpus: c,
            tasks: r.threads,
            units: (c / 16).max(4),
            sim_s: r.report.now_s,
            epochs: r.epochs,
            events: r.events,
            events_per_s: r.events as f64 / r.wall_s.max(1e-9),
            wall_s: r.wall_s,
            cpu_s: r.cpu_s,
        });
    }
    Ok(BenchReport {
        wall_s_1024: rows.iter().find(|r| r.cpus == 1024).map(|r| r.wall_s),
        rows,
        seconds,
    })
}

/// The table `atoll bench sim` prints.
pub fn render(r: &BenchReport) -> String {
    let mut out = format!(
        "{:>6} {:>7} {:>6} {:>7} {:>7} {:>11} {:>10} {:>8} {:>8}\n",
        "cpus", "tasks", "units", "sim_s", "epochs", "events", "events/s", "wall_s", "cpu_s"
    );
    for x in &r.rows {
        out.push_str(&format!(
            "{:>6} {:>7} {:>6} {:>7.1} {:>7} {:>11} {:>10.0} {:>8.2} {:>8.2}\n",
            x.cpus,
            x.tasks,
            x.units,
            x.sim_s,
            x.epochs,
            x.events,
            x.events_per_s,
            x.wall_s,
            x.cpu_s
        ));
    }
    if let Some(w) = r.wall_s_1024 {
        out.push_str(&format!("wall_s_1024 = {w:.2}\n"));
    }
    out
}
