//! awm_parallel: a sample reconfigurable application (seed 002).
//!
//! A data-parallel workload: every cycle is a fixed amount of CPU work
//! (`--work` units) split evenly among T threads, which meet at a barrier
//! at the end of the cycle. Managed, it registers with a recipe (by default
//! `clients/recipes/awm_parallel.toml`: working modes of 1, 2, 4 and 8
//! threads), runs as many threads as its working mode says, changes its
//! thread count when the daemon changes its working mode, stops working
//! while the daemon has it wait, and reports its cycles and its goal.
//! Unmanaged (`--unmanaged --threads N`) it runs N threads from start to
//! end, for comparison. Either way it prints one JSON object at the end:
//! cycles, completion time, reconfigurations, suspensions, the thread
//! counts it ran with, and a checksum of the work (the same for any thread
//! count).
//!
//! ```text
//! cargo run -p atoll-client --example awm_parallel -- [--socket PATH]
//!     [--recipe FILE | --recipe-name NAME] [--max-cpus N] [--cycles N]
//!     [--work UNITS] [--goal-cps G] [--poll-ms MS] [--report-ms MS]
//! cargo run -p atoll-client --example awm_parallel -- --unmanaged --threads N
//!     [--cycles N] [--work UNITS]
//! ```
//!
//! Exits 0 after printing the summary, 1 on an error (on stderr), 2 on bad
//! usage.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use atoll_client::apps::{self, AppRuntime, Recipe, RecipeRef, RuntimeOptions, Step};
use atoll_client::Client;
use serde_json::{json, Value};

/// The recipe used without `--recipe` or `--recipe-name`.
const RECIPE: &str = include_str!("../../../clients/recipes/awm_parallel.toml");

const USAGE: &str = "usage: awm_parallel [--socket PATH] [--recipe FILE | --recipe-name NAME] \
[--max-cpus N] [--cycles N] [--work UNITS] [--goal-cps G] [--poll-ms MS] [--report-ms MS]
       awm_parallel --unmanaged --threads N [--cycles N] [--work UNITS]";

/// Rounds of the generator in one unit of work (some tens of µs).
const ROUNDS: u32 = 20_000;

/// Where the recipe comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum RecipeSource {
    /// `clients/recipes/awm_parallel.toml`, built in.
    Builtin,
    /// A TOML (or `.json`) file, sent inline.
    File(PathBuf),
    /// A recipe of the platform description.
    Named(String),
}

/// The command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Args {
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The recipe.
    pub recipe: RecipeSource,
    /// Leave out the working modes charged more CPUs than this.
    pub max_cpus: Option<f64>,
    /// Cycles to run.
    pub cycles: u64,
    /// Units of work per cycle.
    pub work: u64,
    /// The goal reported, cycles per second.
    pub goal_cps: Option<f64>,
    /// Poll at most this often, ms.
    pub poll_ms: u64,
    /// Report at most this often, ms.
    pub report_ms: u64,
    /// Run unmanaged with this many threads.
    pub unmanaged: Option<usize>,
}

impl Args {
    /// Parses the arguments (without the program name).
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut a = Self {
            socket: PathBuf::from(atoll_client::atoll_proto::DEFAULT_SOCKET),
            recipe: RecipeSource::Builtin,
            max_cpus: None,
            cycles: 100,
            work: 2000,
            goal_cps: None,
            poll_ms: 100,
            report_ms: 1000,
            unmanaged: None,
        };
        let (mut unmanaged, mut threads) = (false, None);
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            if flag == "--unmanaged" {
                unmanaged = true;
                continue;
            }
            let value = it
                .next()
                .ok_or_else(|| format!("{flag} needs a value"))?
                .as_str();
            match flag.as_str() {
                "--socket" => a.socket = value.into(),
                "--recipe" => a.recipe = RecipeSource::File(value.into()),
                "--recipe-name" => a.recipe = RecipeSource::Named(value.into()),
                "--max-cpus" => a.max_cpus = Some(positive(flag, value)?),
                "--cycles" => a.cycles = positive(flag, value)?,
                "--work" => a.work = positive(flag, value)?,
                "--goal-cps" => a.goal_cps = Some(positive(flag, value)?),
                "--poll-ms" => a.poll_ms = number(flag, value)?,
                "--report-ms" => a.report_ms = number(flag, value)?,
                "--threads" => threads = Some(positive(flag, value)?),
                _ => return Err(format!("unknown option {flag}")),
            }
        }
        match (unmanaged, threads) {
            (true, Some(t)) => a.unmanaged = Some(t),
            (true, None) => return Err("--unmanaged needs --threads".into()),
            (false, Some(_)) => return Err("--threads goes with --unmanaged".into()),
            (false, None) => {}
        }
        Ok(a)
    }
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{flag} {value:?}: not a number"))
}

fn positive<T: std::str::FromStr + PartialOrd + Default>(
    flag: &str,
    value: &str,
) -> Result<T, String> {
    let v: T = number(flag, value)?;
    if v > T::default() {
        Ok(v)
    } else {
        Err(format!("{flag} {value:?}: must be above 0"))
    }
}

/// One unit of CPU work: a xorshift generator run [`ROUNDS`] times from a
/// seed; the result depends only on the seed.
fn work_unit(seed: u64) -> u64 {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for _ in 0..ROUNDS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

/// What the threads share.
struct Shared {
    quit: AtomicBool,
    cycle: AtomicU64,
    checksum: AtomicU64,
}

/// T threads that do one cycle's work together: the units of a cycle are
/// split in T contiguous ranges; the main thread and the workers meet at a
/// barrier to start a cycle and at another when it is done.
struct Pool {
    threads: usize,
    start: Arc<Barrier>,
    end: Arc<Barrier>,
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl Pool {
    fn new(threads: usize, work: u64, shared: &Arc<Shared>) -> Self {
        let start = Arc::new(Barrier::new(threads + 1));
        let end = Arc::new(Barrier::new(threads + 1));
        let handles = (0..threads)
            .map(|i| {
                let (start, end, shared) = (start.clone(), end.clone(), shared.clone());
                let n = threads as u64;
                let i = i as u64;
                let (from, to) = (work * i / n, work * (i + 1) / n);
                std::thread::spawn(move || loop {
                    start.wait();
                    if shared.quit.load(Ordering::SeqCst) {
                        return;
                    }
                    let base = shared.cycle.load(Ordering::SeqCst) * work;
                    let sum = (from..to).fold(0u64, |s, u| s.wrapping_add(work_unit(base + u)));
                    shared.checksum.fetch_add(sum, Ordering::SeqCst);
                    end.wait();
                })
            })
            .collect();
        Self {
            threads,
            start,
            end,
            shared: shared.clone(),
            handles,
        }
    }

    /// Runs cycle number `cycle` on every thread and waits for the end.
    fn cycle(&self, cycle: u64) {
        self.shared.cycle.store(cycle, Ordering::SeqCst);
        self.start.wait();
        self.end.wait();
    }

    fn shutdown(self) {
        self.shared.quit.store(true, Ordering::SeqCst);
        self.start.wait();
        for h in self.handles {
            h.join().expect("a worker thread panicked");
        }
        self.shared.quit.store(false, Ordering::SeqCst);
    }
}

/// The counters both modes print.
struct Run {
    started: Instant,
    shared: Arc<Shared>,
    pool: Option<Pool>,
    cycles: u64,
    /// `(seconds since start, mode, threads)` at each (re)configuration.
    changes: Vec<Value>,
    reconfigurations: u64,
    last_mode: Option<u8>,
}

impl Run {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            shared: Arc::new(Shared {
                quit: AtomicBool::new(false),
                cycle: AtomicU64::new(0),
                checksum: AtomicU64::new(0),
            }),
            pool: None,
            cycles: 0,
            changes: Vec::new(),
            reconfigurations: 0,
            last_mode: None,
        }
    }

    /// Runs `threads` threads from now on (working mode `mode`).
    fn configure(&mut self, threads: usize, mode: Option<u8>, work: u64) {
        if self.last_mode.is_some() && self.last_mode != mode {
            self.reconfigurations += 1;
        }
        self.last_mode = mode;
        if self.pool.as_ref().map(|p| p.threads) != Some(threads) {
            if let Some(p) = self.pool.take() {
                p.shutdown();
            }
            self.pool = Some(Pool::new(threads, work, &self.shared));
        }
        self.changes.push(json!({
            "at_s": self.started.elapsed().as_secs_f64(),
            "mode": mode,
            "threads": threads,
        }));
    }

    fn cycle(&mut self) {
        self.pool.as_ref().expect("configured").cycle(self.cycles);
        self.cycles += 1;
    }

    fn finish(mut self, args: &Args, mode: &str) -> Value {
        let elapsed = self.started.elapsed().as_secs_f64();
        let threads_final = self.pool.as_ref().map_or(0, |p| p.threads);
        if let Some(p) = self.pool.take() {
            p.shutdown();
        }
        json!({
            "mode": mode,
            "cycles": self.cycles,
            "work_per_cycle": args.work,
            "completion_s": elapsed,
            "cycles_per_s": if elapsed > 0.0 { self.cycles as f64 / elapsed } else { 0.0 },
            "reconfigurations": self.reconfigurations,
            "threads_final": threads_final,
            "threads": self.changes,
            "checksum": self.shared.checksum.load(Ordering::SeqCst),
        })
    }
}

/// The recipe, with the working modes above `--max-cpus` left out.
fn recipe(args: &Args) -> Result<RecipeRef, String> {
    let mut r: Recipe = match &args.recipe {
        RecipeSource::Named(n) => return Ok(RecipeRef::Named(n.clone())),
        RecipeSource::Builtin => apps::parse_recipe(RECIPE).map_err(|e| e.to_string())?,
        RecipeSource::File(p) => apps::load_recipe(p).map_err(|e| e.to_string())?,
    };
    if let Some(max) = args.max_cpus {
        r.modes.retain(|m| m.needs.charged_cpus() <= max);
        if r.modes.is_empty() {
            return Err(format!(
                "recipe {}: no working mode needs at most {max} CPUs",
                r.name
            ));
        }
    }
    Ok(RecipeRef::Inline(r))
}

fn run_managed(args: &Args) -> Result<Value, String> {
    let recipe = recipe(args)?;
    let client = Client::connect(&args.socket).map_err(|e| e.to_string())?;
    let options = RuntimeOptions {
        pid: None,
        poll_every: Duration::from_millis(args.poll_ms),
        report_every: Duration::from_millis(args.report_ms),
        goal_cps: args.goal_cps,
    };
    let mut rt = AppRuntime::register(client, recipe, options).map_err(|e| e.to_string())?;
    let mut run = Run::new();
    let mut suspended = Duration::ZERO;
    let mut suspended_at: Option<Instant> = None;
    while run.cycles < args.cycles {
        match rt.next_step().map_err(|e| e.to_string())? {
            Step::Configure(grant) => {
                if let Some(t) = suspended_at.take() {
                    suspended += t.elapsed();
                }
                let threads = usize::try_from(grant.parallelism()).unwrap_or(1);
                eprintln!("awm_parallel: {grant}");
                run.configure(threads, Some(grant.mode), args.work);
            }
            Step::Suspend(reason) => {
                eprintln!("awm_parallel: suspended: {reason}");
                suspended_at = Some(Instant::now());
            }
            Step::Run => {
                run.cycle();
                rt.cycles_done(1);
            }
            Step::Release => break,
        }
    }
    let summary = rt.done().map_err(|e| e.to_string())?;
    let mut out = run.finish(args, "managed");
    out["app"] = json!(summary.app);
    out["configurations"] = json!(summary.configurations);
    out["suspensions"] = json!(summary.suspensions);
    out["suspended_s"] = json!(suspended.as_secs_f64());
    out["polls"] = json!(summary.polls);
    out["reports"] = json!(summary.reports);
    out["goal_cps"] = json!(args.goal_cps);
    out["goal_gap"] = json!(summary.goal_gap);
    Ok(out)
}

fn run_unmanaged(args: &Args, threads: usize) -> Value {
    let mut run = Run::new();
    run.configure(threads, None, args.work);
    while run.cycles < args.cycles {
        run.cycle();
    }
    let mut out = run.finish(args, "unmanaged");
    out["configurations"] = json!(1);
    out["suspensions"] = json!(0);
    out["suspended_s"] = json!(0.0);
    out
}

/// Runs the application as the command line says and returns its summary.
pub fn run(args: &Args) -> Result<Value, String> {
    match args.unmanaged {
        Some(threads) => Ok(run_unmanaged(args, threads)),
        None => run_managed(args),
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match Args::parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("awm_parallel: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("awm_parallel: {e}");
            ExitCode::FAILURE
        }
    }
}
