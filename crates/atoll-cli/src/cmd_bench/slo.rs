//! `atoll bench slo`: its flags and its three scenarios (`redis`, `tiers`,
//! `stream`), each checked for the flags that are not its own before
//! anything runs.

use std::path::PathBuf;
use std::process::ExitCode;

use atoll_bench::netisland::TriggerKey;
use atoll_bench::progress::Progress;
use atoll_bench::slo::{self, stream, SloOptions};
use atoll_bench::tiers;

use super::parse::*;
use super::{command_line, print_report, print_saved};

/// Flags of `atoll bench slo`.
#[derive(Debug, clap::Args)]
pub struct SloArgs {
    /// `redis` (a latency-critical Redis beside a hog), `tiers` (a
    /// three-tier auction, nginx -> auction-app -> MariaDB, beside hogs;
    /// needs nginx and mariadb-server) or `stream` (seed 001's stream
    /// consumer beside a bulk transfer on a shaped veth link of the bench's
    /// own, the receive-queue trigger off in `static` and on in `slo`;
    /// needs `ip` and `tc`).
    #[arg(long, default_value = "redis", value_parser = ["redis", "tiers", "stream"])]
    scenario: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Short phases (a smoke test; the numbers are noisier).
    #[arg(long)]
    quick: bool,
    /// Offered loads, percent of the LC's solo maximum (`--scenario
    /// redis`).
    #[arg(long, default_value = "10,30,50,70,90", value_parser = parse_loads)]
    loads: Loads,
    /// Configurations beside the baselines.
    #[arg(long, value_delimiter = ',', default_value = "linux,static,isolate,slo", value_parser = parse_slo_config)]
    configs: Vec<slo::Config>,
    /// Measured seconds per load (default 20, 3 with --quick; with
    /// `--scenario stream`: per configuration and rep, default 20, 4 with
    /// --quick).
    #[arg(long, value_parser = parse_seconds)]
    seconds: Option<f64>,
    /// Warm-up seconds per load, not recorded (default 10, 2 with
    /// --quick; not for `--scenario stream`).
    #[arg(long, value_parser = parse_warmup)]
    warmup: Option<f64>,
    /// The SLO: p99 of a window within this many µs (default: twice
    /// the LC's worst p99 alone; not for `--scenario stream`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    slo_us: Option<u64>,
    /// Lua loop iterations per request: the LC's CPU cost per request
    /// (with `--scenario tiers`: hash rounds per `putbid` in the app tier;
    /// with `--scenario stream`: units of ~10 ms of CPU per frame, 0-100,
    /// default 3).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    work: Option<u64>,
    /// The `slo` overlay's `be_grow_above`: slack above which the best
    /// effort grows a step (default: the daemon's; `--scenario redis`).
    #[arg(long, value_parser = parse_slack)]
    be_grow_above: Option<f64>,
    /// The `slo` overlay's `be_cut_below`: slack below which the best
    /// effort is halved (default: the daemon's; `--scenario redis`).
    #[arg(long, value_parser = parse_slack)]
    be_cut_below: Option<f64>,
    /// Repetitions of every configuration (`--scenario stream`; default
    /// 2, 1 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100))]
    reps: Option<u64>,
    /// The trigger's threshold, bytes of the consumer's socket backlog
    /// (`--scenario stream`; default 65536).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    backlog_bytes: Option<u64>,
    /// The trigger of `slo` (`--scenario stream`): `socket-backlog`, the
    /// network island's `socket_backlog_bytes` (the default), or
    /// `recv-queue`, the overlay's `react_recv_queue`.
    #[arg(long, value_parser = parse_trigger)]
    trigger: Option<TriggerKey>,
    /// Run nothing: print the table of a report saved with --json (with
    /// the same --scenario).
    #[arg(long, value_name = "FILE")]
    table: Option<PathBuf>,
}

impl SloArgs {
    /// The flags given that `scenario` does not take, by name.
    fn foreign(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        let redis_only = [
            ("--be-grow-above", self.be_grow_above.is_some()),
            ("--be-cut-below", self.be_cut_below.is_some()),
        ];
        let stream_only = [
            ("--reps", self.reps.is_some()),
            ("--backlog-bytes", self.backlog_bytes.is_some()),
            ("--trigger", self.trigger.is_some()),
        ];
        if self.scenario != "redis" {
            v.extend(redis_only.iter().filter(|(_, g)| *g).map(|(f, _)| *f));
        }
        if self.scenario != "stream" {
            v.extend(stream_only.iter().filter(|(_, g)| *g).map(|(f, _)| *f));
        }
        v
    }
}

/// Runs `atoll bench slo` as `a` asks.
pub(super) fn run(exe: PathBuf, a: SloArgs) -> anyhow::Result<ExitCode> {
    let foreign = a.foreign();
    if !foreign.is_empty() {
        let owner = |f: &str| {
            if f.starts_with("--be-") {
                "--scenario redis"
            } else {
                "--scenario stream"
            }
        };
        let list: Vec<String> = foreign
            .iter()
            .map(|f| format!("{f} is for {}", owner(f)))
            .collect();
        anyhow::bail!("atoll bench slo: {}", list.join("; "));
    }
    let picked = slo::Picked {
        configs: a.configs,
        seconds: a.seconds,
        warmup_s: a.warmup,
        work: a.work,
        slo_us: a.slo_us,
    };
    match a.scenario.as_str() {
        "tiers" => {
            if let Some(file) = a.table {
                return print_saved::<tiers::TiersReport>(
                    &file,
                    "slo --scenario tiers",
                    tiers::render_table,
                );
            }
            let mut settings = tiers::TiersSettings::new(a.quick);
            settings.common.pick(picked);
            let progress = Progress::new(settings.common.configs.len() * 3 + 2, true);
            let report = tiers::run(&exe, &settings, command_line(), &progress)?;
            drop(progress);
            print_report(a.json, &report, tiers::render_table)?;
        }
        "stream" => {
            if let Some(file) = a.table {
                return print_saved::<stream::StreamReport>(
                    &file,
                    "slo --scenario stream",
                    stream::render_table,
                );
            }
            let mut settings = stream::StreamSettings::new(a.quick);
            settings
                .pick(picked)
                .map_err(|e| anyhow::anyhow!("atoll bench slo: {e}"))?;
            if let Some(r) = a.reps {
                settings.rig.reps = usize::try_from(r).unwrap_or(1);
            }
            if let Some(b) = a.backlog_bytes {
                settings.rig.backlog_bytes = b;
            }
            if let Some(t) = a.trigger {
                settings.rig.trigger = t;
            }
            let progress = Progress::new(settings.steps(), true);
            let report = stream::run(&exe, &settings, command_line(), &progress)?;
            drop(progress);
            print_report(a.json, &report, stream::render_table)?;
        }
        _ => {
            if let Some(file) = a.table {
                return print_saved::<slo::SloReport>(&file, "slo", slo::render_table);
            }
            let mut settings = slo::Settings::new(a.quick);
            settings.loads = a.loads.0;
            settings.common.pick(picked);
            settings.be = slo::BeThresholds {
                grow_above: a.be_grow_above,
                cut_below: a.be_cut_below,
            };
            if let Some(why) = settings.be.problem() {
                anyhow::bail!("atoll bench slo: the daemon would refuse {why}");
            }
            let opts = SloOptions {
                exe,
                settings,
                command: command_line(),
            };
            let progress = Progress::new(opts.steps(), true);
            let report = slo::run(&opts, &progress)?;
            drop(progress);
            print_report(a.json, &report, slo::render_table)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
