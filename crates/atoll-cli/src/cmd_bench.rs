//! `atoll bench` and the hidden `atoll __worker`.
//!
//! The benchmarks live in `atoll-bench`; this file parses their flags,
//! installs the Ctrl-C handler (so cleanup runs), and prints a table or
//! JSON. Workers are this same binary re-executed (`current_exe`) as
//! `atoll __worker KIND ARGS...`.

use std::process::ExitCode;

use anyhow::Context;
use atoll_bench::api::{self, ApiOptions};
use atoll_bench::awm::{self, AwmOptions};
use atoll_bench::comm::{self, CommOptions};
use atoll_bench::coordination::{self, CoordinationOptions};
use atoll_bench::isolation::{self, config::parse_mode, IsolationOptions};
use atoll_bench::netisland::{self, NetIslandOptions};
use atoll_bench::overhead::{self, OverheadOptions};
use atoll_bench::progress::Progress;
use atoll_bench::revocation::{self, Mechanism, RevocationOptions, Settings};
use clap::Subcommand;
use parse::*;

mod parse;
mod slo;

/// Flags of `atoll bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// How fast a lent CPU comes back to its owner under each kernel
    /// mechanism (real cgroups; root).
    Revocation {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Short runs (a smoke test; the numbers are noisier).
        #[arg(long)]
        quick: bool,
        /// Mechanisms to compare.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "alone,none,cpu_idle,sched_idle,weight,cpuset",
            value_parser = parse_mechanism
        )]
        mechanisms: Vec<Mechanism>,
    },
    /// The isolation modes side by side: a light and a heavy unit under the
    /// real daemon (root).
    Isolation {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Short phases (a smoke test; the numbers are noisier).
        #[arg(long)]
        quick: bool,
        /// Modes to run.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "smp,quota,isolate",
            value_parser = parse_mode
        )]
        modes: Vec<atoll_core::spec::IsolationMode>,
        /// The lending mechanism whose revocation latency is reported (the
        /// one the daemon uses).
        #[arg(long, default_value = "cpu_idle", value_parser = parse_mechanism)]
        mechanism: Mechanism,
    },
    /// What coordination costs: one message through the platform manager
    /// (null, tune, trigger, borrow across 2 and 6 islands), in ns.
    Coordination {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Fewer calls (a smoke test; the numbers are noisier).
        #[arg(long)]
        quick: bool,
        /// Skip timing API calls through a real daemon (which needs root).
        #[arg(long)]
        no_api: bool,
    },
    /// Communication-aware CPU scheduling off and on: a two-tier nginx
    /// application and a streaming server beside 5 CPU hogs, under the real
    /// daemon (root; needs nginx: scripts/bench-deps.sh).
    Comm {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Short runs that still exercise everything (a smoke test).
        #[arg(long)]
        quick: bool,
        /// Repetitions of every variant (default 3, 1 with --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        reps: Option<u64>,
        /// Measured seconds per run (default 15, 3 with --quick).
        #[arg(long, value_parser = parse_seconds)]
        seconds: Option<f64>,
        /// Requests per second of the two-tier load (fixed rate).
        #[arg(long, value_parser = parse_rate)]
        rate: Option<f64>,
        /// Skip the streaming workload.
        #[arg(long)]
        skip_stream: bool,
        /// Each streaming client's playback buffer, ms of stream (default
        /// 500).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        buffer_ms: Option<u64>,
        /// Mechanisms compared with every feature on; the first is also the
        /// one each feature alone runs with.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "weight,slice,idle_others",
            value_parser = parse_comm_mechanism
        )]
        mechanisms: Vec<comm::Mechanism>,
        /// Run nothing: print the table of a report saved with --json.
        #[arg(long, value_name = "FILE")]
        table: Option<std::path::PathBuf>,
    },
    /// Reconfigurable applications managed by the daemon against Linux
    /// alone: bursts and mixes of data-parallel and pipeline apps on every
    /// CPU (root).
    Awm {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Tiny workloads (a smoke test; the numbers mean little).
        #[arg(long)]
        quick: bool,
        /// Repetitions of every scenario and side (default 5, 1 with
        /// --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        reps: Option<u64>,
        /// Scenarios: burst-N (N data-parallel apps) and mix-M+K (M
        /// data-parallel and K pipeline apps) (default
        /// burst-2,burst-4,burst-8,mix-2+2,mix-4+4; burst-2,mix-1+1 with
        /// --quick).
        #[arg(long, value_delimiter = ',', value_parser = parse_scenario)]
        scenarios: Option<Vec<awm::Scenario>>,
        /// The daemon's `[apps] weights.balance` (default: the daemon's
        /// own default).
        #[arg(long, value_parser = parse_weight)]
        balance_weight: Option<f64>,
        /// Each worker thread's private working set, KiB (default 256, 64
        /// with --quick): larger sets make running more threads than CPUs
        /// cost cache.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
        ws_kib: Option<u64>,
    },
    /// What the daemon itself costs (CPU share, RSS, epochs/s) with 10 and
    /// 100 units, features off and on, beside 2,000 idle processes; with
    /// --baseline-bin, two daemon binaries side by side (root; or
    /// --backend sim).
    Overhead {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// 10 units only, a 2 s window after 2 s, 1 rep (a smoke test).
        #[arg(long)]
        quick: bool,
        /// Repetitions of every scenario and binary (default 3, 1 with
        /// --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        reps: Option<u64>,
        /// Measured seconds per run (default 20, 2 with --quick).
        #[arg(long, value_parser = parse_seconds)]
        seconds: Option<f64>,
        /// Seconds from the units holding their processes to the window
        /// (default 5, 2 with --quick).
        #[arg(long, value_parser = parse_warmup)]
        warmup: Option<f64>,
        /// Unit counts (default 10,100; 10 with --quick).
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=9999))]
        units: Option<Vec<u64>>,
        /// Features: off (`smp`, no `[comm]`), on (`isolate` and `[comm]`).
        #[arg(long, value_delimiter = ',', default_value = "off,on", value_parser = parse_features)]
        features: Vec<overhead::Features>,
        /// Idle processes started before the daemons (one per unit of the
        /// largest scenario among them).
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(0..=100_000))]
        idle: u64,
        /// The daemons' epoch, ms.
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=60_000))]
        epoch_ms: u64,
        /// The daemon binary to measure (default: this one).
        #[arg(long, value_name = "PATH")]
        daemon_bin: Option<std::path::PathBuf>,
        /// A second daemon binary, run in every scenario and rep beside the
        /// first (alternating); the report gives both and daemon ÷ baseline.
        #[arg(long, value_name = "PATH")]
        baseline_bin: Option<std::path::PathBuf>,
        /// cgroup: the machine's cgroups (root); sim: the simulated backend
        /// (no root, but the daemon then sees none of the machine's
        /// processes).
        #[arg(long, default_value = "cgroup", value_parser = parse_overhead_backend)]
        backend: overhead::Backend,
        /// Run nothing: print the config the daemon gets in the first
        /// scenario (of --units and --features) on this machine.
        #[arg(long)]
        print_config: bool,
        /// Run nothing: print the table of a report saved with --json.
        #[arg(long, value_name = "FILE")]
        table: Option<std::path::PathBuf>,
    },
    /// The API under load: 32 clients (half of them users other than
    /// root) in read, mixed and write mixes; requests/s, latency, errors,
    /// lost requests, and the daemon's epochs against idle; with
    /// --baseline-bin, two daemon binaries side by side (root).
    Api {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// 8 clients, a 2 s window after 1 s idle (a smoke test).
        #[arg(long)]
        quick: bool,
        /// Measured seconds per mix (default 15, 2 with --quick).
        #[arg(long, value_parser = parse_seconds)]
        seconds: Option<f64>,
        /// Seconds the daemon is measured idle before each mix (default 5,
        /// 1 with --quick).
        #[arg(long, value_parser = parse_idle_seconds)]
        idle_seconds: Option<f64>,
        /// Mixes: read (status), mixed (mostly reads, some changes), write
        /// (changes only).
        #[arg(long, value_delimiter = ',', default_value = "read,mixed,write", value_parser = parse_mix)]
        mixes: Vec<api::Mix>,
        /// Clients in all (default 32, 8 with --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=48))]
        clients: Option<u64>,
        /// Clients as users other than root (uids 65534, 65533, ..., 4
        /// clients each): on (half of them), off (none), only (all).
        #[arg(long, default_value = "on", value_parser = parse_users)]
        users: api::Users,
        /// Requests each client keeps in flight (1: request, reply, next).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
        depth: u64,
        /// Units in the daemon's config.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(2..=999))]
        units: u64,
        /// The daemons' epoch, ms.
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=60_000))]
        epoch_ms: u64,
        /// The daemon binary to measure (default: this one).
        #[arg(long, value_name = "PATH")]
        daemon_bin: Option<std::path::PathBuf>,
        /// A second daemon binary, run in every mix beside the first
        /// (alternating); the report gives both and daemon ÷ baseline.
        #[arg(long, value_name = "PATH")]
        baseline_bin: Option<std::path::PathBuf>,
        /// Run nothing: print the table of a report saved with --json.
        #[arg(long, value_name = "FILE")]
        table: Option<std::path::PathBuf>,
    },
    /// Issue 16's evidence under plain Linux, static weights, `isolate`
    /// and the overlay policy (root). `--scenario redis`: a
    /// latency-critical Redis beside a best-effort CPU hog at offered loads
    /// of its solo maximum, the policy an SLO overlay with the hog as best
    /// effort (needs redis-server: scripts/bench-deps.sh); `tiers`: a
    /// three-tier auction; `stream`: seed 001's buffer trigger.
    Slo(slo::SloArgs),
    /// Seed 001's stream consumer beside a UDP bulk transfer on a shaped
    /// veth link of the bench's own (a network namespace), with no atoll,
    /// CPU islands, the network island, and both coordinated by the
    /// socket-backlog trigger (root, `ip` and `tc`). `--scenario web`:
    /// seed 001's web tier instead, a front end sending light and heavy
    /// requests to a back end across the link, tuning the back end's
    /// bandwidth and CPU in `both` (one of them in `both-bw`, `both-cpu`).
    Netisland {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Which experiment: `stream` (the stream consumer) or `web` (the
        /// web tier).
        #[arg(long, default_value = "stream", value_parser = parse_net_scenario)]
        scenario: netisland::Scenario,
        /// Web: requests per second (both classes).
        #[arg(long, value_parser = parse_req_rate)]
        req_rate: Option<f64>,
        /// Web: the bound on the heavy class's p90 over which `both` tunes
        /// the back end up, ms.
        #[arg(long, value_parser = parse_bound_ms)]
        bound_ms: Option<f64>,
        /// Web: reply bytes of a heavy request.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
        heavy_bytes: Option<u32>,
        /// Web: CPU work of a heavy request, chunks of ~0.2 ms.
        #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100_000))]
        heavy_work: Option<u32>,
        /// Short phases, one rep (a smoke test; the numbers are noisier).
        #[arg(long)]
        quick: bool,
        /// Configurations, in order: none, cpu, net, both; web only:
        /// both-bw and both-cpu (`both` with the bandwidth or the CPU-time
        /// tune alone).
        #[arg(long, value_delimiter = ',', default_value = "none,cpu,net,both", value_parser = parse_net_config)]
        configs: Vec<netisland::Config>,
        /// Measured seconds per configuration and rep (default 20, 4 with
        /// --quick).
        #[arg(long, value_parser = parse_seconds)]
        secs: Option<f64>,
        /// Repetitions (default 2, 1 with --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100))]
        reps: Option<u64>,
        /// The link rate, Mbit/s.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        rate_mbit: Option<u32>,
        /// Units of CPU work (~10 ms each) per frame.
        #[arg(long, value_parser = clap::value_parser!(u64).range(0..=100))]
        work: Option<u64>,
        /// The `both` trigger's socket backlog, bytes.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        backlog_bytes: Option<u64>,
        /// Run nothing: print the table of a report saved with --json.
        #[arg(long, value_name = "FILE")]
        table: Option<std::path::PathBuf>,
    },
    /// How the simulator with the daemon's control loop scales: 64, 256
    /// and 1,024 CPUs, ~10 threads per CPU, 60 simulated s (no root).
    Sim {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// 3 simulated s instead of 60.
        #[arg(long)]
        quick: bool,
    },
}

/// Prints `report` as JSON, or as the table `table` renders.
fn print_report<T: serde::Serialize>(
    json: bool,
    report: &T,
    table: impl FnOnce(&T) -> String,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        println!("{}", table(report));
    }
    Ok(())
}

/// `--table FILE`: prints the table of a report `atoll bench WHAT --json`
/// saved in `file`.
fn print_saved<T: serde::de::DeserializeOwned>(
    file: &std::path::Path,
    what: &str,
    table: impl FnOnce(&T) -> String,
) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(file).with_context(|| format!("read {}", file.display()))?;
    let report: T = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a report of atoll bench {what} --json",
            file.display()
        )
    })?;
    println!("{}", table(&report));
    Ok(ExitCode::SUCCESS)
}

fn command_line() -> String {
    let mut args = std::env::args();
    let _ = args.next();
    std::iter::once("atoll".to_string())
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn bench(a: BenchArgs) -> anyhow::Result<ExitCode> {
    if let Which::Sim { json, quick } = a.which {
        return crate::cmd_sim::bench_sim(json, quick);
    }
    if let Which::Overhead {
        table: Some(file), ..
    } = &a.which
    {
        return print_saved::<overhead::OverheadReport>(file, "overhead", overhead::render_table);
    }
    if let Which::Api {
        table: Some(file), ..
    } = &a.which
    {
        return print_saved::<api::ApiReport>(file, "api", api::render_table);
    }
    atoll_bench::interrupt::install();
    let exe = std::env::current_exe().context("locating the atoll binary")?;
    match a.which {
        Which::Revocation {
            json,
            quick,
            mechanisms,
        } => {
            let opts = RevocationOptions {
                exe,
                mechanisms,
                settings: Settings::new(quick),
                command: command_line(),
            };
            let progress = Progress::new(opts.mechanisms.len(), true);
            let report = revocation::run(&opts, &progress)?;
            drop(progress);
            print_report(json, &report, revocation::render_table)?;
        }
        Which::Isolation {
            json,
            quick,
            modes,
            mechanism,
        } => {
            let opts = IsolationOptions {
                exe,
                modes,
                mechanism,
                quick,
                command: command_line(),
            };
            let progress = Progress::new(opts.steps(), true);
            let report = isolation::run(&opts, &progress)?;
            drop(progress);
            print_report(json, &report, isolation::render_table)?;
        }
        Which::Coordination {
            json,
            quick,
            no_api,
        } => {
            let opts = CoordinationOptions {
                exe,
                quick,
                api: !no_api,
                command: command_line(),
            };
            let report = coordination::run(&opts)?;
            print_report(json, &report, coordination::render_table)?;
        }
        Which::Comm {
            json,
            quick,
            reps,
            seconds,
            rate,
            skip_stream,
            buffer_ms,
            mechanisms,
            table,
        } => {
            if let Some(file) = table {
                return print_saved::<comm::CommReport>(&file, "comm", comm::render_table);
            }
            let reps = reps.map(|r| usize::try_from(r).unwrap_or(usize::MAX));
            let mut settings = comm::Settings::new(quick, reps, seconds, rate);
            if let Some(b) = buffer_ms {
                settings.buffer_ms = b;
            }
            let opts = CommOptions {
                exe,
                settings,
                skip_stream,
                mechanisms,
                command: command_line(),
            };
            let progress = Progress::new(opts.steps(), true);
            let report = comm::run(&opts, &progress)?;
            drop(progress);
            print_report(json, &report, comm::render_table)?;
        }
        Which::Awm {
            json,
            quick,
            reps,
            scenarios,
            balance_weight,
            ws_kib,
        } => {
            let reps = reps.map(|r| usize::try_from(r).unwrap_or(usize::MAX));
            let mut settings = awm::Settings::new(quick, reps, scenarios);
            settings.balance_weight = balance_weight;
            if let Some(k) = ws_kib {
                let k = usize::try_from(k).unwrap_or(usize::MAX);
                settings.parallel.ws_kib = k;
                settings.pipeline.ws_kib = k;
            }
            let opts = AwmOptions {
                exe,
                settings,
                command: command_line(),
            };
            let progress = Progress::new(opts.steps(), true);
            let report = awm::run(&opts, &progress)?;
            drop(progress);
            print_report(json, &report, awm::render_table)?;
        }
        Which::Overhead {
            json,
            quick,
            reps,
            seconds,
            warmup,
            units,
            features,
            idle,
            epoch_ms,
            daemon_bin,
            baseline_bin,
            backend,
            print_config,
            table: _,
        } => {
            let reps = reps.map(|r| usize::try_from(r).unwrap_or(usize::MAX));
            let units = units.map(|u| {
                u.into_iter()
                    .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                    .collect()
            });
            let mut settings = overhead::Settings::new(quick, reps, seconds, units);
            if let Some(w) = warmup {
                settings.warmup_s = w;
            }
            settings.features = features;
            settings.idle = usize::try_from(idle).unwrap_or(usize::MAX);
            settings.epoch_ms = epoch_ms;
            settings.backend = backend;
            if print_config {
                let first = settings
                    .scenarios()
                    .into_iter()
                    .next()
                    .context("no scenario: give --units and --features")?;
                print!("{}", overhead::config_here(first, epoch_ms)?);
                return Ok(ExitCode::SUCCESS);
            }
            let opts = OverheadOptions {
                daemon_bin: daemon_bin.unwrap_or(exe),
                baseline_bin,
                settings,
                command: command_line(),
            };
            let progress = Progress::new(opts.steps(), true);
            let report = overhead::run(&opts, &progress)?;
            drop(progress);
            print_report(json, &report, overhead::render_table)?;
        }
        Which::Api {
            json,
            quick,
            seconds,
            idle_seconds,
            mixes,
            clients,
            users,
            depth,
            units,
            epoch_ms,
            daemon_bin,
            baseline_bin,
            table: _,
        } => {
            let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
            let mut settings = api::Settings::new(quick);
            if let Some(s) = seconds {
                settings.seconds = s;
            }
            if let Some(s) = idle_seconds {
                settings.idle_s = s;
            }
            if let Some(c) = clients {
                settings.clients = size(c);
            }
            settings.mixes = mixes;
            settings.users = users;
            settings.depth = size(depth);
            settings.units = size(units);
            settings.epoch_ms = epoch_ms;
            let opts = ApiOptions {
                daemon_bin: daemon_bin.unwrap_or_else(|| exe.clone()),
                exe,
                baseline_bin,
                settings,
                command: command_line(),
            };
            let progress = Progress::new(opts.steps(), true);
            let report = api::run(&opts, &progress)?;
            drop(progress);
            print_report(json, &report, api::render_table)?;
        }
        Which::Slo(args) => return slo::run(exe, args),
        Which::Netisland {
            json,
            scenario,
            req_rate,
            bound_ms,
            heavy_bytes,
            heavy_work,
            quick,
            configs,
            secs,
            reps,
            rate_mbit,
            work,
            backlog_bytes,
            table,
        } => {
            if let Some(file) = table {
                return print_saved::<netisland::NetIslandReport>(
                    &file,
                    "netisland",
                    netisland::render_table,
                );
            }
            let mut settings = netisland::Settings::new(quick);
            settings.configs = configs;
            settings.scenario = scenario;
            if let Some(r) = req_rate {
                settings.web.rate = r;
            }
            if let Some(b) = bound_ms {
                settings.web.bound_ms = b;
            }
            if let Some(b) = heavy_bytes {
                settings.web.heavy_bytes = b;
            }
            if let Some(w) = heavy_work {
                settings.web.heavy_work = w;
            }
            if let Some(s) = secs {
                settings.seconds = s;
            }
            if let Some(r) = reps {
                settings.reps = usize::try_from(r).unwrap_or(1);
            }
            if let Some(r) = rate_mbit {
                settings.rate_mbit = r;
            }
            if let Some(w) = work {
                settings.work = w;
            }
            if let Some(b) = backlog_bytes {
                settings.backlog_bytes = b;
            }
            let steps = settings.configs.len() * settings.reps + 2;
            let opts = NetIslandOptions {
                exe,
                settings,
                command: command_line(),
            };
            let progress = Progress::new(steps, true);
            let report = netisland::run(&opts, &progress)?;
            drop(progress);
            print_report(json, &report, netisland::render_table)?;
        }
        Which::Sim { .. } => unreachable!("handled above"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `atoll __worker KIND ARGS...`.
pub fn worker(args: &[String]) -> ExitCode {
    ExitCode::from(u8::try_from(atoll_bench::worker::main(args)).unwrap_or(1))
}
