//! What the two reconfigurable workers of `atoll bench awm` share
//! (`awm-parallel`, `awm-pipeline`): their options, the work they do, the
//! start signal, the managed and unmanaged loops, and the counters they
//! print.
//!
//! Each worker is an [`Engine`]: something that runs with some number of
//! threads, does one cycle of work at a time and can change its thread
//! count between cycles. [`drive`] runs an engine:
//!
//! - **unmanaged** (`--threads N`): N threads from start to end, freely
//!   scheduled by Linux (the paper's original benchmark);
//! - **managed** (`--socket PATH`): it registers with a recipe through
//!   [`AppRuntime`] (inline, `--recipe FILE` or the built-in one), runs the
//!   thread count of the working mode the daemon assigns, stops while told
//!   to wait, and reports its cycles.
//!
//! With `--go FILE` the worker waits (polling every millisecond) until the
//! file exists before it starts its clock, so that a benchmark can start
//! all its instances at once. The report has the start and end on
//! `CLOCK_MONOTONIC` (comparable across processes), the process's own
//! context switches and CPU time (`getrusage(RUSAGE_SELF)`: `ru_nvcsw +
//! ru_nivcsw`, user + system time, both including threads that already
//! exited) and its CPU migrations: every thread adds its `se.nr_migrations`
//! (`/proc/thread-self/sched`) to a process-wide counter just before it
//! exits, and the main thread its own at the end. Reading
//! `/proc/self/task/*/sched` once at the end would miss the threads a
//! reconfiguration ended.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use atoll_client::apps::{self, AppRuntime, Recipe, RecipeRef, RuntimeOptions, Step};
use atoll_client::Client;
use serde_json::{json, Value};

use super::{stopping, ArgError, Opts};

/// The options both workers take, then `$extra`.
macro_rules! awm_options {
    ($($extra:literal),*) => {
        &[
            "--cycles",
            "--work",
            "--ws-kib",
            "--threads",
            "--socket",
            "--recipe",
            "--go",
            "--poll-ms",
            "--report-ms",
            $($extra),*
        ]
    };
}

/// Options both workers take.
pub(super) const COMMON_OPTIONS: &[&str] = awm_options!();

/// Options of `awm-pipeline`: [`COMMON_OPTIONS`] and its queue's.
pub(super) const PIPELINE_OPTIONS: &[&str] = awm_options!("--items", "--queue");

/// The arguments of `awm-parallel` and `awm-pipeline`.
#[derive(Clone, Debug, PartialEq)]
pub struct AwmArgs {
    /// Cycles to run (the pipeline: batches of `items` items).
    pub cycles: u64,
    /// Units of work per cycle (parallel, split among the threads) or per
    /// item and compute stage (pipeline).
    pub work: u64,
    /// Each worker thread's private working set, KiB.
    pub ws_kib: usize,
    /// Unmanaged with this many threads (per compute stage for the
    /// pipeline); `None`: managed.
    pub threads: Option<usize>,
    /// The daemon's socket (managed).
    pub socket: PathBuf,
    /// The recipe file (managed; default: the built-in one).
    pub recipe: Option<PathBuf>,
    /// Start once this file exists.
    pub go: Option<PathBuf>,
    /// Poll the daemon at most this often, ms.
    pub poll_ms: u64,
    /// Report progress at most this often, ms.
    pub report_ms: u64,
    /// Items per cycle (pipeline).
    pub items: u64,
    /// Capacity of each queue between stages (pipeline).
    pub queue: usize,
}

impl AwmArgs {
    pub(super) fn from_opts(o: &Opts) -> Result<Self, ArgError> {
        Ok(Self {
            cycles: o.positive("--cycles")?.unwrap_or(50),
            work: o.positive("--work")?.unwrap_or(400),
            ws_kib: o.positive("--ws-kib")?.unwrap_or(256),
            threads: o.positive("--threads")?,
            socket: o.values.get("--socket").map_or_else(
                || PathBuf::from(atoll_client::atoll_proto::DEFAULT_SOCKET),
                PathBuf::from,
            ),
            recipe: o.values.get("--recipe").map(PathBuf::from),
            go: o.values.get("--go").map(PathBuf::from),
            poll_ms: o.num("--poll-ms")?.unwrap_or(20),
            report_ms: o.num("--report-ms")?.unwrap_or(500),
            items: o.positive("--items")?.unwrap_or(16),
            queue: o.positive("--queue")?.unwrap_or(8),
        })
    }
}

/// Cache lines touched by one unit of work.
const LINES_PER_UNIT: usize = 256;
/// `u64`s in a 64-byte cache line.
const LINE: usize = 8;

/// A thread's private working set. One unit of work visits
/// [`LINES_PER_UNIT`] cache lines of it in a data-dependent order (each
/// line's index comes from the value read before, so the loads cannot be
/// prefetched or overlapped) and writes each back mixed: the unit is
/// bound by the latency of wherever the set is. A thread that keeps its set
/// in its core's cache runs faster than one whose set others evicted while
/// it was descheduled, as in real data-parallel applications.
#[derive(Debug)]
pub(super) struct WorkingSet {
    data: Vec<u64>,
    lines: usize,
    cursor: u64,
}

impl WorkingSet {
    /// `kib` KiB (at least one cache line), written once by the caller
    /// (call it on the thread that will use it: first touch).
    pub(super) fn new(kib: usize) -> Self {
        let lines = (kib * 1024 / 64).max(1);
        Self {
            data: (0..(lines * LINE) as u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .collect(),
            lines,
            cursor: 0,
        }
    }

    /// `units` units of work seeded with `seed`; the result depends only on
    /// the seed, the units and the set's history.
    pub(super) fn work(&mut self, units: u64, seed: u64) -> u64 {
        let mut x = seed | 1;
        for _ in 0..units {
            for _ in 0..LINES_PER_UNIT {
                let i = atoll_core::num::u64_to_usize((self.cursor ^ x) % self.lines as u64) * LINE;
                let v = self.data[i];
                x ^= v;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                self.data[i] = v.wrapping_add(x);
                self.cursor = self.cursor.wrapping_add(v);
            }
        }
        std::hint::black_box(x)
    }
}

static MIGRATIONS: AtomicU64 = AtomicU64::new(0);

/// `se.nr_migrations` of the calling thread (0 if unreadable).
fn own_migrations() -> u64 {
    std::fs::read_to_string("/proc/thread-self/sched")
        .ok()
        .and_then(|t| parse_migrations(&t))
        .unwrap_or(0)
}

/// The `se.nr_migrations` value of a `/proc/.../sched` text.
pub(super) fn parse_migrations(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some("se.nr_migrations"))
        .and_then(|l| l.rsplit(':').next())
        .and_then(|v| v.trim().parse().ok())
}

/// Every worker thread calls this just before it exits: its migrations
/// are added to the process's count.
pub(super) fn thread_exits() {
    MIGRATIONS.fetch_add(own_migrations(), Ordering::SeqCst);
}

/// `CLOCK_MONOTONIC` in seconds (comparable across processes).
pub fn monotonic_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Voluntary and involuntary context switches of the whole process, and
/// its CPU time (user + system, s).
fn own_usage() -> (u64, u64, f64) {
    // SAFETY: getrusage fills the struct we pass; zeroed is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        // Counts, never negative.
        u64::try_from(ru.ru_nvcsw).unwrap_or(0),
        u64::try_from(ru.ru_nivcsw).unwrap_or(0),
        tv(ru.ru_utime) + tv(ru.ru_stime),
    )
}

/// A workload with a variable number of threads.
pub(super) trait Engine {
    /// Runs `threads` threads from now on (between cycles).
    fn configure(&mut self, threads: usize);
    /// Threads now (0 before the first configuration).
    fn threads(&self) -> usize;
    /// Runs cycle number `n` and waits for its end.
    fn cycle(&mut self, n: u64);
    /// Ends every thread.
    fn shutdown(&mut self);
    /// A sum of the results (kept so the work is not optimized away).
    fn checksum(&self) -> u64;
    /// Items processed (the pipeline; cycles for the parallel app).
    fn items(&self) -> u64;
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

fn wait_go(go: &Option<PathBuf>) -> std::io::Result<()> {
    let Some(go) = go else { return Ok(()) };
    let t0 = Instant::now();
    while !go.exists() {
        if stopping() {
            return Err(other("stopped before the start signal"));
        }
        if t0.elapsed() > Duration::from_secs(120) {
            return Err(other(format!("{} did not appear in 120 s", go.display())));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// What the managed loop counted.
#[derive(Default)]
struct Managed {
    app: u64,
    configurations: u64,
    suspensions: u64,
    suspended_s: f64,
    polls: u64,
    reports: u64,
    reconfigurations: u64,
    modes: Vec<Value>,
}

fn run_managed<E: Engine>(
    kind: &str,
    a: &AwmArgs,
    e: &mut E,
    builtin: &str,
    start: Instant,
) -> std::io::Result<(u64, Managed)> {
    let recipe: Recipe = match &a.recipe {
        Some(p) => apps::load_recipe(p).map_err(other)?,
        None => apps::parse_recipe(builtin).map_err(other)?,
    };
    let client = Client::connect(&a.socket).map_err(other)?;
    let options = RuntimeOptions {
        pid: None,
        poll_every: Duration::from_millis(a.poll_ms),
        report_every: Duration::from_millis(a.report_ms),
        goal_cps: None,
    };
    let mut rt = AppRuntime::register(client, RecipeRef::Inline(recipe), options).map_err(other)?;
    let mut m = Managed::default();
    let mut cycles = 0;
    let mut last_mode = None;
    let mut suspended_at: Option<Instant> = None;
    while cycles < a.cycles && !stopping() {
        match rt.next_step().map_err(other)? {
            Step::Configure(grant) => {
                if let Some(t) = suspended_at.take() {
                    m.suspended_s += t.elapsed().as_secs_f64();
                }
                if last_mode.is_some_and(|l| l != grant.mode) {
                    m.reconfigurations += 1;
                }
                last_mode = Some(grant.mode);
                let threads = usize::try_from(grant.parallelism()).unwrap_or(1);
                e.configure(threads);
                m.modes.push(json!({
                    "at_s": start.elapsed().as_secs_f64(),
                    "mode": grant.mode,
                    "threads": threads,
                    "cpu_quota": grant.cpu_quota,
                }));
            }
            Step::Suspend(reason) => {
                eprintln!("{kind}: waits: {reason}");
                suspended_at.get_or_insert_with(Instant::now);
            }
            Step::Run => {
                e.cycle(cycles);
                cycles += 1;
                rt.cycles_done(1);
            }
            Step::Release => break,
        }
    }
    let s = rt.done().map_err(other)?;
    m.app = s.app;
    m.configurations = s.configurations;
    m.suspensions = s.suspensions;
    m.polls = s.polls;
    m.reports = s.reports;
    Ok((cycles, m))
}

/// Runs `e` as `a` says (module docs) and returns the report; `builtin` is
/// the recipe used without `--recipe`.
pub(super) fn drive<E: Engine>(
    kind: &str,
    a: &AwmArgs,
    mut e: E,
    builtin: &str,
) -> std::io::Result<Value> {
    wait_go(&a.go)?;
    let start_mono = monotonic_s();
    let start = Instant::now();
    let (cycles, managed) = match a.threads {
        Some(t) => {
            e.configure(t);
            let mut n = 0;
            while n < a.cycles && !stopping() {
                e.cycle(n);
                n += 1;
            }
            (n, None)
        }
        None => match run_managed(kind, a, &mut e, builtin, start) {
            Ok((n, m)) => (n, Some(m)),
            Err(err) => {
                e.shutdown();
                return Err(err);
            }
        },
    };
    let threads_final = e.threads();
    e.shutdown();
    let completion_s = start.elapsed().as_secs_f64();
    let end_mono = monotonic_s();
    let (nvcsw, nivcsw, cpu_s) = own_usage();
    let migrations = MIGRATIONS.load(Ordering::SeqCst) + own_migrations();
    let mut out = json!({
        "kind": kind,
        "mode": if managed.is_some() { "managed" } else { "unmanaged" },
        "cycles": cycles,
        "items": e.items(),
        "complete": cycles == a.cycles,
        "start_mono_s": start_mono,
        "end_mono_s": end_mono,
        "completion_s": completion_s,
        "nvcsw": nvcsw,
        "nivcsw": nivcsw,
        "context_switches": nvcsw + nivcsw,
        "migrations": migrations,
        "cpu_s": cpu_s,
        "threads_final": threads_final,
        "checksum": e.checksum(),
    });
    if let Some(m) = managed {
        out["app"] = json!(m.app);
        out["configurations"] = json!(m.configurations);
        out["reconfigurations"] = json!(m.reconfigurations);
        out["suspensions"] = json!(m.suspensions);
        out["suspended_s"] = json!(m.suspended_s);
        out["polls"] = json!(m.polls);
        out["reports"] = json!(m.reports);
        out["modes"] = Value::Array(m.modes);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::Worker;

    fn p(s: &str) -> Result<Worker, ArgError> {
        Worker::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses_both_kinds_with_their_defaults() {
        let Worker::AwmParallel(a) = p("awm-parallel --threads 4 --go /tmp/g").unwrap() else {
            panic!("not awm-parallel")
        };
        assert_eq!((a.threads, a.cycles, a.ws_kib), (Some(4), 50, 256));
        assert_eq!(a.go, Some(PathBuf::from("/tmp/g")));
        let Worker::AwmPipeline(a) =
            p("awm-pipeline --socket /s --items 3 --queue 2 --recipe r.toml").unwrap()
        else {
            panic!("not awm-pipeline")
        };
        assert_eq!((a.threads, a.items, a.queue), (None, 3, 2));
        assert_eq!(a.socket, PathBuf::from("/s"));
        assert_eq!(a.recipe, Some(PathBuf::from("r.toml")));
        // Items are the pipeline's only; counts must be positive.
        assert!(p("awm-parallel --items 3").is_err());
        assert!(p("awm-parallel --threads 0").is_err());
        // Every common option is the pipeline's too.
        assert!(COMMON_OPTIONS.iter().all(|o| PIPELINE_OPTIONS.contains(o)));
    }

    #[test]
    fn built_in_recipes_parse_with_modes_of_1_2_4_threads() {
        for text in [
            crate::worker::awm_parallel::RECIPE,
            crate::worker::awm_pipeline::RECIPE,
        ] {
            let r = apps::parse_recipe(text).unwrap();
            let threads: Vec<Option<u32>> = r.modes.iter().map(|m| m.needs.threads).collect();
            assert_eq!(threads, vec![Some(1), Some(2), Some(4)], "{}", r.name);
            assert!(r.modes.iter().all(|m| m.needs.charged_cpus() <= 2.0));
        }
    }

    #[test]
    fn unmanaged_runs_do_every_cycle_and_count_their_switches() {
        for (kind, extra, items) in [("awm-parallel", "", 4), ("awm-pipeline", " --items 2", 8)] {
            let w = p(&format!(
                "{kind} --threads 3 --cycles 4 --work 5 --ws-kib 8{extra}"
            ))
            .unwrap();
            let r = w.run().unwrap();
            assert_eq!(r["cycles"], 4, "{r}");
            assert_eq!(r["items"], items, "{r}");
            assert_eq!(r["complete"], true, "{r}");
            assert_eq!(r["threads_final"], 3, "{r}");
            // Threads met at barriers or queues: the process switched.
            assert!(r["context_switches"].as_u64().unwrap() > 0, "{r}");
            assert!(
                r["end_mono_s"].as_f64() >= r["start_mono_s"].as_f64(),
                "{r}"
            );
        }
    }

    #[test]
    fn reads_nr_migrations_from_a_sched_text() {
        let t = "x (1, #threads: 1)\n---\nse.exec_start   :   1.0\nse.nr_migrations                             :                   17\nnr_switches : 3\n";
        assert_eq!(parse_migrations(t), Some(17));
        assert_eq!(parse_migrations("se.nr_migrations_x : 3\n"), None);
        // This thread's own file has the line (any Linux since 2.6.x).
        let own = std::fs::read_to_string("/proc/thread-self/sched").unwrap();
        assert!(parse_migrations(&own).is_some(), "{own}");
    }

    #[test]
    fn work_depends_on_the_seed_and_the_set() {
        let (mut a, mut b) = (WorkingSet::new(16), WorkingSet::new(16));
        assert_eq!(a.work(3, 7), b.work(3, 7));
        assert_ne!(a.work(1, 7), WorkingSet::new(16).work(1, 8));
        assert_eq!(WorkingSet::new(0).data.len(), LINE);
        assert_eq!(WorkingSet::new(256).lines, 4096);
    }
}
