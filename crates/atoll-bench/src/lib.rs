//! atoll's evidence tools: workload workers and benchmarks that run on the
//! real kernel and print numbers (they never assert them).
//!
//! - [`worker`]: the small programs the benchmarks start as separate
//!   processes (`atoll __worker KIND ...`): CPU hogs, a fixed CPU job, a
//!   request/response latency pair, a memory hog, a disk writer, a
//!   wakeup-latency probe, HTTP and streaming load, a Redis front end and
//!   the reconfigurable workers.
//! - [`revocation`]: `atoll bench revocation`, which compares the kernel
//!   mechanisms that can lend an idle CPU and take it back (plain sharing,
//!   `cpu.idle`, `SCHED_IDLE`, extreme weights, a polling cpuset loop) on
//!   real cgroups through the backend traits.
//! - [`isolation`]: `atoll bench isolation`, which runs the real daemon once
//!   per isolation mode (`smp`, `quota`, `isolate`) with a light and a heavy
//!   unit and reports how much the heavy unit slows the light one and how
//!   much throughput the heavy one keeps.
//! - [`coordination`]: `atoll bench coordination`, the cost of coordination
//!   messages (and, with a daemon, of an API call to the applied change).
//! - [`comm`]: `atoll bench comm`, communication-aware CPU scheduling off
//!   and on: a two-tier nginx application and a streaming server beside
//!   CPU hogs, under the real daemon.
//! - [`awm`]: `atoll bench awm`, reconfigurable applications (bursts and
//!   mixes of data-parallel and pipeline workers) managed by the real
//!   daemon against Linux alone.
//! - [`overhead`]: `atoll bench overhead`, what the daemon itself costs
//!   (CPU share, RSS, epochs) with 10 and 100 units, features off and on,
//!   beside 2,000 idle processes; two daemon binaries side by side.
//! - [`api`]: `atoll bench api`, the daemon's API under 32 clients (half
//!   of them users other than root) in read, mixed and write mixes:
//!   requests per second, latency, errors and lost requests, and whether
//!   the control loop keeps its epochs meanwhile; two binaries side by
//!   side.
//! - [`slo`]: `atoll bench slo`, a latency-critical Redis beside a
//!   best-effort CPU hog at offered loads of its solo maximum, under plain
//!   Linux, static weights, `isolate` and an SLO overlay with the hog as
//!   best effort: p99 against alone, SLO violations and effective machine
//!   utilization.
//! - [`netisland`]: `atoll bench netisland`, seed 001's stream consumer
//!   beside a bulk transfer on a shaped veth link of its own, with no
//!   atoll, CPU islands, the network island, and both coordinated.
//! - [`tiers`]: `atoll bench slo --scenario tiers`, a three-tier auction
//!   (nginx, an application worker, MariaDB) beside CPU hogs under the
//!   same configurations: response time average, p99 and deviation, and
//!   the heavy `putbid` class's, against plain Linux.
//!
//! Around them: [`stats`] (nearest-rank percentiles), [`progress`] (a
//! hand-rolled progress bar), [`procs`] (child processes in their own
//! process groups, killed on drop), [`cgroups`] (a unique root and a
//! last-resort sweep of it), [`interrupt`] (Ctrl-C turns into an error that
//! unwinds through the guards) and [`machine`] (what the numbers depend on).

pub mod api;
pub mod awm;
pub mod cgroups;
pub mod comm;
pub mod coordination;
pub mod error;
pub mod interrupt;
pub mod isolation;
pub mod machine;
pub mod netisland;
pub mod overhead;
pub mod procs;
pub mod progress;
pub mod revocation;
pub mod slo;
pub mod stats;
mod table;
pub mod tiers;
pub mod worker;

pub use error::BenchError;

/// A temporary directory of a benchmark run, `atoll-bench-<tag>-XXXXXX`
/// under the system's temp dir, removed when dropped.
pub fn temp_dir(tag: &str) -> Result<tempfile::TempDir, error::BenchError> {
    tempfile::Builder::new()
        .prefix(&format!("atoll-bench-{tag}-"))
        .tempdir()
        .map_err(|source| error::BenchError::Io {
            op: "create",
            path: std::env::temp_dir(),
            source,
        })
}
