//! Workloads for the simulated machine: what the engine runs.
//!
//! A [`WorkloadSpec`] is a list of [apps](AppSpec), an optional
//! [disk](DiskSpec) and the [network path](NetworkSpec). Each app is one or
//! more *instances* (processes) whose `comm` is the app's `unit` (what a
//! unit's adoption rule `{ comm = "NAME" }` matches), each with `threads`
//! threads that all run the app's [`Program`]:
//!
//! - `barrier`: parallel compute. Each thread computes `compute_ms` of CPU
//!   time, then waits at the instance's barrier; `rounds` times. `jitter`
//!   draws each phase uniformly in `compute_ms × [1 − jitter, 1 + jitter]`.
//! - `malleable`: a reconfigurable data-parallel loop. Each round's
//!   `work_ms` of CPU time is split among the threads active in the round
//!   (each share drawn with `jitter`), who then meet at the barrier;
//!   `rounds` times. `threads` is the most it can use; the count in force
//!   changes between rounds ([`Engine::set_threads`](crate::Engine::set_threads)),
//!   and 0 pauses it. A thread that arrives early spins for `spin_us` of
//!   CPU time before it blocks (spin-then-block, as OpenMP and many thread
//!   pools wait); one still spinning when the round ends goes on at once.
//!   `cache_penalty = p` (0 to 1, default 0) slows its work when threads
//!   share CPUs: a thread on CPUs that hold `k` runnable threads each (at
//!   least 1) makes `1 − p·(1 − 1/k)` of the progress per CPU time it
//!   makes alone (its working set is evicted by the others for `1 − 1/k`
//!   of its turns); its CPU time is unchanged and its spinning not slowed.
//! - `hog`: always runnable (for `cpu_ms` of CPU time, or forever).
//! - `client`: issues requests to a `service` app. With `rate_per_s` it is
//!   open loop (each instance issues at that rate, Poisson or evenly
//!   spaced; its threads read the replies); without, closed loop (each
//!   thread sends, waits for the reply, thinks `think_ms`, repeats).
//!   Latency is from issue to the client having read the reply (and spent
//!   `cpu_us` on it).
//! - `service`: threads take requests from their instance's queue, spend
//!   `cpu_us` on each (fixed or exponential), call the `next` tier if any
//!   (blocking until it replies), then reply.
//! - `stream_server` / `stream_client`: every instance of the client app
//!   is one stream at `rate_kbps`, in `chunk_kb` chunks the server's threads
//!   produce (`cpu_us` each) on a timer; the client's threads spend
//!   `cpu_us` per chunk into a playback buffer that starts after
//!   `prefill_ms` and drains in real time. An *under-run* is the buffer
//!   running dry before the stream's end.
//! - `disk`: threads issue `request_kb` reads or writes, sequential or
//!   random, to the disk, waiting for each, then spend `cpu_us`.
//!
//! `memory_mb` per instance is charged to the process's group. Random
//! draws come from [`Rng`] streams of the seed given to the engine, so the
//! same spec and seed give the same run.
//!
//! In TOML (the runner embeds it next to the platform config):
//!
//! ```toml
//! [network]
//! latency_us = 30
//!
//! [disk]
//! queue = "weighted"
//!
//! [[apps]]
//! name = "solver"
//! unit = "solver"
//! threads = 16
//! program = { kind = "barrier", compute_ms = 20, rounds = 500, jitter = 0.1 }
//!
//! [[apps]]
//! name = "db"
//! unit = "db"
//! threads = 4
//! memory_mb = 512
//! program = { kind = "service", cpu_us = 800, exponential = true }
//!
//! [[apps]]
//! name = "users"
//! unit = "users"
//! program = { kind = "client", target = "db", rate_per_s = 500 }
//! ```
//!
//! Specs deserialize strictly (unknown fields are errors) and
//! [`WorkloadSpec::validate`] checks values and references, naming the app,
//! field and value in a [`WorkloadError`].

mod rng;
mod validate;

pub use rng::Rng;
use serde::{Deserialize, Serialize};
pub use validate::{parse_policy, WorkloadError, MAX_THREADS};

/// Everything the engine runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// The network path between processes.
    #[serde(default)]
    pub network: NetworkSpec,
    /// The disk, if any app uses one.
    #[serde(default)]
    pub disk: Option<DiskSpec>,
    /// The apps.
    #[serde(default)]
    pub apps: Vec<AppSpec>,
}

impl WorkloadSpec {
    /// Parses a TOML workload and validates it.
    pub fn from_toml(text: &str) -> Result<Self, WorkloadError> {
        let spec: Self = toml::from_str(text).map_err(|e| WorkloadError::Parse {
            message: e.to_string(),
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// The app called `name`.
    pub fn app(&self, name: &str) -> Option<&AppSpec> {
        self.apps.iter().find(|a| a.name == name)
    }
}

/// The network path: every message waits for its destination process's
/// link (one per receiving process, FIFO), takes `bytes / bandwidth` on
/// it, then `latency_us` to arrive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// One-way latency, µs.
    #[serde(default = "default_latency_us")]
    pub latency_us: f64,
    /// Link bandwidth, Gbit/s.
    #[serde(default = "default_bandwidth_gbps")]
    pub bandwidth_gbps: f64,
}

fn default_latency_us() -> f64 {
    30.0
}
fn default_bandwidth_gbps() -> f64 {
    10.0
}

impl Default for NetworkSpec {
    fn default() -> Self {
        Self {
            latency_us: default_latency_us(),
            bandwidth_gbps: default_bandwidth_gbps(),
        }
    }
}

/// The order in which the disk serves queued requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiskQueue {
    /// First come, first served.
    #[default]
    Fifo,
    /// Start-time fair queuing across groups by their `io.weight`.
    Weighted,
}

/// One disk with a head: see the engine's disk model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskSpec {
    /// Capacity, GB (10⁹ bytes).
    #[serde(default = "default_capacity_gb")]
    pub capacity_gb: f64,
    /// Transfer rate, MB/s (10⁶ bytes).
    #[serde(default = "default_disk_bw")]
    pub bandwidth_mb_s: f64,
    /// Seek time for the shortest non-zero distance, ms.
    #[serde(default = "default_seek_min")]
    pub seek_min_ms: f64,
    /// Seek time across the whole disk, ms.
    #[serde(default = "default_seek_full")]
    pub seek_full_ms: f64,
    /// Queue discipline.
    #[serde(default)]
    pub queue: DiskQueue,
}

fn default_capacity_gb() -> f64 {
    1000.0
}
fn default_disk_bw() -> f64 {
    200.0
}
fn default_seek_min() -> f64 {
    0.5
}
fn default_seek_full() -> f64 {
    12.0
}

impl Default for DiskSpec {
    fn default() -> Self {
        Self {
            capacity_gb: default_capacity_gb(),
            bandwidth_mb_s: default_disk_bw(),
            seek_min_ms: default_seek_min(),
            seek_full_ms: default_seek_full(),
            queue: DiskQueue::default(),
        }
    }
}

/// One app: `instances` processes of `threads` threads running `program`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    /// The app's name (unique; other apps refer to it).
    pub name: String,
    /// The processes' `comm` (at most 15 bytes).
    pub unit: String,
    /// When its processes start, ms of simulated time.
    #[serde(default)]
    pub start_ms: f64,
    /// Processes.
    #[serde(default = "one")]
    pub instances: u32,
    /// Threads per process.
    #[serde(default = "one")]
    pub threads: u32,
    /// The processes' uid.
    #[serde(default = "default_uid")]
    pub uid: u32,
    /// Resident memory per process, MiB.
    #[serde(default)]
    pub memory_mb: f64,
    /// The threads' policy: `other`, `batch`, `idle`, `fifo:P`, `rr:P`
    /// (`None`: `other`, or what the daemon sets).
    #[serde(default)]
    pub policy: Option<String>,
    /// What each thread does.
    pub program: Program,
}

fn one() -> u32 {
    1
}
fn default_uid() -> u32 {
    1000
}

/// Sequential or random disk requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// Each request starts where the thread's previous one ended.
    Sequential,
    /// Each request starts anywhere on the disk.
    Random,
}

/// What an app's threads do (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Program {
    /// Compute phases separated by the instance's barrier.
    Barrier {
        /// CPU time per phase, ms.
        compute_ms: f64,
        /// Phases.
        rounds: u32,
        /// Relative spread of each phase (0 ≤ jitter < 1).
        #[serde(default)]
        jitter: f64,
    },
    /// A data-parallel loop whose thread count can change while it runs
    /// (a reconfigurable application): each round's CPU work is split
    /// among the threads active in that round, who then meet at the
    /// instance's barrier (see [`Engine::set_threads`](crate::Engine::set_threads)).
    Malleable {
        /// CPU time per round, all active threads together, ms.
        work_ms: f64,
        /// Rounds.
        rounds: u32,
        /// Relative spread of each thread's share (0 ≤ jitter < 1).
        #[serde(default)]
        jitter: f64,
        /// CPU time a thread spends spinning at the barrier before it
        /// blocks, µs (spin-then-block synchronisation; 0: block at once).
        #[serde(default)]
        spin_us: f64,
        /// Cache penalty `p` in [0, 1] (0: none): a thread on CPUs that
        /// hold `k` runnable threads each makes `1 − p·(1 − 1/k)` of the
        /// progress per CPU time it makes alone (its CPU time is
        /// unchanged; see the module docs).
        #[serde(default)]
        cache_penalty: f64,
    },
    /// Always runnable.
    Hog {
        /// CPU time to use before finishing (`None`: never finish).
        #[serde(default)]
        cpu_ms: Option<f64>,
    },
    /// Sends requests to a service app.
    Client {
        /// The service app.
        target: String,
        /// Open loop: requests per second per instance.
        #[serde(default)]
        rate_per_s: Option<f64>,
        /// Open loop: exponential (true) or even gaps.
        #[serde(default = "yes")]
        poisson: bool,
        /// Closed loop: sleep between a reply and the next request, ms.
        #[serde(default)]
        think_ms: f64,
        /// Requests per instance before it finishes (`None`: never).
        #[serde(default)]
        requests: Option<u64>,
        /// Bytes per request.
        #[serde(default = "default_request_bytes")]
        request_bytes: u64,
        /// CPU per request (closed loop: before sending; open loop: on
        /// the reply), µs.
        #[serde(default)]
        cpu_us: f64,
    },
    /// Serves requests from its queue.
    Service {
        /// CPU per request, µs.
        cpu_us: f64,
        /// Exponentially distributed CPU (mean `cpu_us`) instead of fixed.
        #[serde(default)]
        exponential: bool,
        /// The next tier, called once per request.
        #[serde(default)]
        next: Option<String>,
        /// Bytes per reply.
        #[serde(default = "default_response_bytes")]
        response_bytes: u64,
    },
    /// Produces one stream per instance of the client app.
    StreamServer {
        /// The stream client app.
        clients: String,
        /// Stream rate, kbit/s.
        rate_kbps: f64,
        /// Chunk size, KiB.
        chunk_kb: f64,
        /// CPU per chunk, µs.
        cpu_us: f64,
        /// How long each stream lasts, ms.
        duration_ms: f64,
    },
    /// Receives and plays one stream per instance.
    StreamClient {
        /// Media buffered before playback starts (and restarts after an
        /// under-run), ms.
        prefill_ms: f64,
        /// CPU per chunk, µs.
        #[serde(default)]
        cpu_us: f64,
    },
    /// Disk requests, one at a time per thread.
    Disk {
        /// Sequential or random.
        pattern: Pattern,
        /// Bytes per request, KiB.
        request_kb: f64,
        /// Requests per thread before it finishes (`None`: never).
        #[serde(default)]
        requests: Option<u64>,
        /// Writes instead of reads.
        #[serde(default)]
        write: bool,
        /// CPU after each request, µs.
        #[serde(default)]
        cpu_us: f64,
    },
}

fn yes() -> bool {
    true
}
fn default_request_bytes() -> u64 {
    512
}
fn default_response_bytes() -> u64 {
    4096
}

impl Program {
    /// The program's name as written in specs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Barrier { .. } => "barrier",
            Self::Malleable { .. } => "malleable",
            Self::Hog { .. } => "hog",
            Self::Client { .. } => "client",
            Self::Service { .. } => "service",
            Self::StreamServer { .. } => "stream_server",
            Self::StreamClient { .. } => "stream_client",
            Self::Disk { .. } => "disk",
        }
    }

    /// Whether an app running it can finish.
    pub fn finite(&self) -> bool {
        match self {
            Self::Barrier { .. }
            | Self::Malleable { .. }
            | Self::StreamServer { .. }
            | Self::StreamClient { .. } => true,
            Self::Hog { cpu_ms } => cpu_ms.is_some(),
            Self::Client { requests, .. } | Self::Disk { requests, .. } => requests.is_some(),
            Self::Service { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests;
