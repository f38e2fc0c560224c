//! Workload workers: small programs the benchmarks run as separate
//! processes, so that atoll can place them in units like any other process.
//!
//! The CLI runs them as `atoll __worker KIND ARGS...` (a re-exec of its own
//! binary); [`main`] parses the arguments and runs one. Each worker is plain
//! Rust over `std` and `libc`, prints exactly one JSON object on stdout when
//! it finishes (or when SIGTERM/SIGINT stops it), and exits 0.
//!
//! | kind | does | prints |
//! |------|------|--------|
//! | `spin [--threads T] [--seconds S]` | CPU hog until stopped | work chunks done and chunks/s |
//! | `cpujob --work N` | N units of fixed CPU work | elapsed ms |
//! | `echo-server --socket P` | echoes 64-byte messages on a Unix socket | connections served |
//! | `latency-client --socket P --count N --interval-us I [--raw]` | N round trips, I µs apart | round-trip summary, µs |
//! | `memhog --mib M [--seconds S]` | keeps writing every page of M MiB | MiB touched per second |
//! | `diskwriter --dir D --mib M [--rounds R]` | writes M MiB, fsyncs, repeats | MB/s |
//! | `probe --period-us P --samples N [--burst-us B] [--jitter-us J] [--start-delay-ms D] [--raw]` | sleeps P µs N times | wakeup lateness summary, µs |
//! | `kvfront --backends A,B --rate R [--seconds S] [--conns C] [--work W] [--keys K] [--value-bytes V] [--percentile P] [--report-ms M] [--overlay O] [--socket PATH] [--timeout-ms T]` | front end of Redis back ends: R requests/s, open loop, each a GET (and an EVAL of a W-iteration Lua loop) on every back end; reports each window's percentile to overlay O | count, throughput, latency percentiles (µs), errors, the per-window values |
//! | `http-load --addr H:P (--rate R \| --closed) --seconds S [--path P] [--warmup W] [--limit L] [--connections C] [--heavy H]` | GETs at a fixed rate (open loop) or each as soon as the last on its connection is done (closed loop) over keep-alive connections; nothing sent and nothing counted after the wall-time limit L; with `--heavy` the auction's mix (`/browse`, a share H of `/putbid`) | response time summary (ms, with p95 and standard deviation), throughput within the window, errors, requests not served by the limit; with `--heavy` the heavy class's summary apart |
//! | `stream-server --port P --bytes-per-s R [--interval-ms T]` | sends each client R bytes/s in batches every T ms (HTTP/1.0 on loopback) | connections, bytes, late sends |
//! | `stream-client --addr H:P --clients N --bytes-per-s R --buffer-ms B --seconds S [--path P]` | plays N streams through B ms playback buffers | buffer under-runs per client |
//! | `awm-parallel [--cycles N] [--work U] [--ws-kib K] (--threads T \| [--socket P] [--recipe F]) [--go FILE] [--poll-ms M] [--report-ms M]` | N cycles of U units split among T threads (managed: the working mode's) meeting at a barrier | completion time, cycles, its context switches and CPU migrations |
//! | `awm-pipeline` (the same, and `[--items I] [--queue Q]`) | N batches of I items through load, extract (T threads), rank (T threads), out | the same, and items |
//! | `frame-send --addr H:P --seconds S [--fps F] [--packets N] [--bytes B]` | seed 001's stream: F frames/s of N UDP datagrams ([`frames`]) | frames, packets sent, send errors |
//! | `frame-recv --port P --seconds S [--fps F] [--work W] [--deadline-ms D]` | reassembles frames, W units of CPU work each, counts those done within D ms | packets, frames on time and late, per second |
//! | `udp-blast --addr H:P --seconds S [--bytes B]` | UDP datagrams as fast as the socket takes them | bytes sent |
//! | `udp-sink --port P --seconds S` | counts the bytes received | bytes |
//! | `api-load --socket P --seconds S [--clients N] [--mix M \| --request LINE] [--depth D] ...` | clients of the daemon's API sending a mix of requests as fast as it answers ([`api_load`]) | per kind of request: sent, answered, errors by code, latency histogram; lost requests |
//! | `web-back --port P --seconds S` | seed 001's web back end over TCP ([`web`]): per request its CPU work, then its reply bytes | requests served per class, bytes |
//! | `web-front --addr H:P --seconds S --rate R [--heavy-share F] [--light-bytes B] [--heavy-bytes B] [--light-work C] [--heavy-work C] [--conns N] [--window-ms W] [--percentile P] [--bound-ms B] [--overlay O --socket PATH --unit U] [--tune bandwidth,cpu_time] [--timeout-ms T]` | two classes of request at R/s, open loop ([`webfront`]); with `--overlay`, `tune(bandwidth)` and `tune(cpu_time)` (or the one `--tune` names) of unit U when the heavy class's percentile is over the bound | per class: count, mean, sd, p99 (ms); throughput; tunes sent and acked |
//! | `auction-app --port P --db-socket PATH [--work W] [--seconds S]` | the auction's application tier: an HTTP server (a thread per connection) routing `/browse` (two reads) and `/putbid` (a transaction and W rounds of CPU work) to MariaDB ([`auction_app`]) | requests served per kind, errors |

mod api_load;
mod auction_app;
mod awm;
mod awm_parallel;
mod awm_pipeline;
mod cpu;
mod disk;
mod frames;
mod http_load;
mod kvfront;
mod memory;
mod net;
mod probe;
mod stream;
mod web;
mod webfront;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use api_load::{api_load, ApiLoadArgs, Load};
pub use auction_app::AuctionAppArgs;
pub use awm::{monotonic_s, AwmArgs};
pub use cpu::cpu_work;
pub use frames::{BulkArgs, FrameRecvArgs, FrameSendArgs, FrameTally, Header as FrameHeader};
pub use http_load::{get as http_get, read_response, HttpLoadArgs, Pace, Response};
pub use kvfront::KvFrontArgs;
pub use probe::ProbeArgs;
pub use stream::{Playback, StreamClientArgs, StreamServerArgs};
pub use web::{Class as WebClass, Request as WebRequest, WebBackArgs};
pub use webfront::{parse_tunes, tune_name, Tuner, WebFrontArgs};

/// One worker and its arguments.
#[derive(Clone, Debug, PartialEq)]
pub enum Worker {
    /// A CPU hog.
    Spin {
        /// Threads spinning.
        threads: usize,
        /// Stop by itself after this long (default: only when signalled).
        seconds: Option<f64>,
    },
    /// A fixed amount of CPU work.
    CpuJob {
        /// Units of work ([`cpu_work`]).
        work: u64,
    },
    /// The server side of the latency pair.
    EchoServer {
        /// The Unix socket to listen on (must not exist).
        socket: PathBuf,
    },
    /// The client side of the latency pair.
    LatencyClient {
        /// The server's socket.
        socket: PathBuf,
        /// Round trips.
        count: usize,
        /// Pause between round trips, µs.
        interval_us: u64,
        /// Print every sample too.
        raw: bool,
    },
    /// Memory pressure.
    MemHog {
        /// MiB to allocate and keep touching.
        mib: usize,
        /// Stop by itself after this long.
        seconds: Option<f64>,
    },
    /// Disk write pressure.
    DiskWriter {
        /// Directory for the file written.
        dir: PathBuf,
        /// MiB per round (one fsync per round).
        mib: usize,
        /// Stop by itself after this many rounds.
        rounds: Option<u64>,
    },
    /// The wakeup-latency probe.
    Probe(ProbeArgs),
    /// A fixed-rate HTTP load generator.
    HttpLoad(HttpLoadArgs),
    /// A constant-rate streaming server.
    StreamServer(StreamServerArgs),
    /// Streaming clients with playback buffers.
    StreamClient(StreamClientArgs),
    /// The front end of a key-value application over Redis back ends.
    KvFront(KvFrontArgs),
    /// The data-parallel reconfigurable application.
    AwmParallel(AwmArgs),
    /// The pipeline reconfigurable application.
    AwmPipeline(AwmArgs),
    /// Clients of the daemon's API.
    ApiLoad(ApiLoadArgs),
    /// Seed 001's stream sender.
    FrameSend(FrameSendArgs),
    /// Seed 001's stream consumer.
    FrameRecv(FrameRecvArgs),
    /// A UDP bulk sender.
    UdpBlast(BulkArgs),
    /// A UDP sink counting bytes.
    UdpSink(BulkArgs),
    /// The application tier of the three-tier auction scenario.
    AuctionApp(AuctionAppArgs),
    /// `web-back`.
    WebBack(WebBackArgs),
    /// `web-front`.
    WebFront(WebFrontArgs),
}

/// Why the worker arguments were refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// No kind given.
    #[error("missing worker kind (one of {kinds})", kinds = KINDS.join(", "))]
    NoKind,
    /// Unknown kind.
    #[error("unknown worker kind {0:?} (one of {kinds})", kinds = KINDS.join(", "))]
    UnknownKind(String),
    /// An option the kind does not take.
    #[error("{kind}: unknown option {option:?}")]
    UnknownOption {
        /// The worker.
        kind: String,
        /// The option.
        option: String,
    },
    /// An option without its value.
    #[error("{kind}: option {option} needs a value")]
    MissingValue {
        /// The worker.
        kind: String,
        /// The option.
        option: String,
    },
    /// A required option is absent.
    #[error("{kind}: option {option} is required")]
    Required {
        /// The worker.
        kind: String,
        /// The option.
        option: &'static str,
    },
    /// A value that does not parse or is out of range.
    #[error("{kind}: {option} {value:?}: {reason}")]
    BadValue {
        /// The worker.
        kind: String,
        /// The option.
        option: String,
        /// What was given.
        value: String,
        /// What was expected.
        reason: String,
    },
}

/// The worker kinds.
pub const KINDS: [&str; 21] = [
    "spin",
    "cpujob",
    "echo-server",
    "latency-client",
    "memhog",
    "diskwriter",
    "probe",
    "kvfront",
    "http-load",
    "stream-server",
    "stream-client",
    "awm-parallel",
    "awm-pipeline",
    "api-load",
    "frame-send",
    "frame-recv",
    "udp-blast",
    "udp-sink",
    "auction-app",
    "web-back",
    "web-front",
];

/// Options with values, and flags, of one kind.
struct Spec {
    valued: &'static [&'static str],
    flags: &'static [&'static str],
}

fn spec(kind: &str) -> Option<Spec> {
    let (valued, flags): (&'static [&'static str], &'static [&'static str]) = match kind {
        "spin" => (&["--threads", "--seconds"], &[]),
        "cpujob" => (&["--work"], &[]),
        "echo-server" => (&["--socket"], &[]),
        "latency-client" => (&["--socket", "--count", "--interval-us"], &["--raw"]),
        "memhog" => (&["--mib", "--seconds"], &[]),
        "diskwriter" => (&["--dir", "--mib", "--rounds"], &[]),
        "probe" => (
            &[
                "--period-us",
                "--samples",
                "--burst-us",
                "--jitter-us",
                "--start-delay-ms",
            ],
            &["--raw"],
        ),
        "kvfront" => (kvfront::OPTIONS, &[]),
        "http-load" => (http_load::OPTIONS, http_load::FLAGS),
        "stream-server" => (stream::SERVER_OPTIONS, &[]),
        "stream-client" => (stream::CLIENT_OPTIONS, &[]),
        "awm-parallel" => (awm::COMMON_OPTIONS, &[]),
        "awm-pipeline" => (awm::PIPELINE_OPTIONS, &[]),
        "api-load" => (api_load::OPTIONS, &[]),
        "frame-send" => (frames::SEND_OPTIONS, &[]),
        "frame-recv" => (frames::RECV_OPTIONS, &[]),
        "udp-blast" => (frames::BLAST_OPTIONS, &[]),
        "udp-sink" => (frames::SINK_OPTIONS, &[]),
        "auction-app" => (auction_app::OPTIONS, &[]),
        "web-back" => (web::BACK_OPTIONS, &[]),
        "web-front" => (webfront::OPTIONS, &[]),
        _ => return None,
    };
    Some(Spec { valued, flags })
}

/// The parsed options of one kind, with typed getters.
struct Opts {
    kind: String,
    values: BTreeMap<String, String>,
    flags: Vec<String>,
}

impl Opts {
    fn bad(&self, option: &str, value: &str, reason: &str) -> ArgError {
        ArgError::BadValue {
            kind: self.kind.clone(),
            option: option.into(),
            value: value.into(),
            reason: reason.into(),
        }
    }

    fn num<T: std::str::FromStr>(&self, option: &str) -> Result<Option<T>, ArgError> {
        match self.values.get(option) {
            None => Ok(None),
            Some(v) => v
                .parse::<T>()
                .map(Some)
                .map_err(|_| self.bad(option, v, "not a number of the expected kind")),
        }
    }

    fn positive<T: std::str::FromStr + PartialOrd + Default>(
        &self,
        option: &'static str,
    ) -> Result<Option<T>, ArgError> {
        let v = self.num::<T>(option)?;
        if let Some(x) = &v {
            if *x <= T::default() {
                return Err(self.bad(option, &self.values[option], "must be positive"));
            }
        }
        Ok(v)
    }

    fn required<T>(&self, option: &'static str, v: Option<T>) -> Result<T, ArgError> {
        v.ok_or(ArgError::Required {
            kind: self.kind.clone(),
            option,
        })
    }

    fn path(&self, option: &'static str) -> Result<PathBuf, ArgError> {
        self.required(option, self.values.get(option).map(PathBuf::from))
    }

    fn flag(&self, option: &str) -> bool {
        self.flags.iter().any(|f| f == option)
    }
}

impl Worker {
    /// Parses `KIND ARGS...` (without the program name or `__worker`).
    pub fn parse(args: &[String]) -> Result<Self, ArgError> {
        let (kind, rest) = args.split_first().ok_or(ArgError::NoKind)?;
        let spec = spec(kind).ok_or_else(|| ArgError::UnknownKind(kind.clone()))?;
        let mut o = Opts {
            kind: kind.clone(),
            values: BTreeMap::new(),
            flags: Vec::new(),
        };
        let mut it = rest.iter();
        while let Some(arg) = it.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
                _ => (arg.as_str(), None),
            };
            if spec.flags.contains(&name) && inline.is_none() {
                o.flags.push(name.to_string());
            } else if spec.valued.contains(&name) {
                let value = match inline {
                    Some(v) => v,
                    None => it.next().cloned().ok_or_else(|| ArgError::MissingValue {
                        kind: kind.clone(),
                        option: name.to_string(),
                    })?,
                };
                o.values.insert(name.to_string(), value);
            } else {
                return Err(ArgError::UnknownOption {
                    kind: kind.clone(),
                    option: arg.clone(),
                });
            }
        }
        Ok(match kind.as_str() {
            "spin" => Self::Spin {
                threads: o.positive("--threads")?.unwrap_or(1),
                seconds: o.positive("--seconds")?,
            },
            "cpujob" => Self::CpuJob {
                work: o.required("--work", o.positive("--work")?)?,
            },
            "echo-server" => Self::EchoServer {
                socket: o.path("--socket")?,
            },
            "latency-client" => Self::LatencyClient {
                socket: o.path("--socket")?,
                count: o.required("--count", o.positive("--count")?)?,
                interval_us: o.num("--interval-us")?.unwrap_or(1000),
                raw: o.flag("--raw"),
            },
            "memhog" => Self::MemHog {
                mib: o.required("--mib", o.positive("--mib")?)?,
                seconds: o.positive("--seconds")?,
            },
            "diskwriter" => Self::DiskWriter {
                dir: o.path("--dir")?,
                mib: o.required("--mib", o.positive("--mib")?)?,
                rounds: o.positive("--rounds")?,
            },
            "probe" => Self::Probe(ProbeArgs {
                period_us: o.required("--period-us", o.positive("--period-us")?)?,
                samples: o.required("--samples", o.positive("--samples")?)?,
                burst_us: o.num("--burst-us")?.unwrap_or(0),
                jitter_us: o.num("--jitter-us")?.unwrap_or(0),
                start_delay_ms: o.num("--start-delay-ms")?.unwrap_or(0),
                raw: o.flag("--raw"),
            }),
            "kvfront" => Self::KvFront(kvfront::parse(&o)?),
            "http-load" => Self::HttpLoad(HttpLoadArgs::from_opts(&o)?),
            "stream-server" => Self::StreamServer(StreamServerArgs::from_opts(&o)?),
            "stream-client" => Self::StreamClient(StreamClientArgs::from_opts(&o)?),
            "awm-parallel" => Self::AwmParallel(AwmArgs::from_opts(&o)?),
            "awm-pipeline" => Self::AwmPipeline(AwmArgs::from_opts(&o)?),
            "api-load" => Self::ApiLoad(ApiLoadArgs::from_opts(&o)?),
            "frame-send" => Self::FrameSend(FrameSendArgs::from_opts(&o)?),
            "frame-recv" => Self::FrameRecv(FrameRecvArgs::from_opts(&o)?),
            "udp-blast" => Self::UdpBlast(BulkArgs::blast(&o)?),
            "udp-sink" => Self::UdpSink(BulkArgs::sink(&o)?),
            "auction-app" => Self::AuctionApp(AuctionAppArgs::from_opts(&o)?),
            "web-back" => Self::WebBack(WebBackArgs::from_opts(&o)?),
            "web-front" => Self::WebFront(WebFrontArgs::from_opts(&o)?),
            _ => unreachable!("spec() knows only the kinds matched here"),
        })
    }

    /// Runs the worker; returns its JSON report.
    pub fn run(&self) -> std::io::Result<serde_json::Value> {
        match self {
            Self::Spin { threads, seconds } => Ok(cpu::spin(*threads, secs(*seconds))),
            Self::CpuJob { work } => Ok(cpu::cpujob(*work)),
            Self::EchoServer { socket } => net::echo_server(socket),
            Self::LatencyClient {
                socket,
                count,
                interval_us,
                raw,
            } => net::latency_client(socket, *count, *interval_us, *raw),
            Self::MemHog { mib, seconds } => memory::memhog(*mib, secs(*seconds)),
            Self::DiskWriter { dir, mib, rounds } => disk::diskwriter(dir, *mib, *rounds),
            Self::Probe(a) => Ok(probe::probe(a)),
            Self::HttpLoad(a) => http_load::http_load(a),
            Self::StreamServer(a) => stream::stream_server(a),
            Self::StreamClient(a) => stream::stream_client(a),
            Self::KvFront(a) => kvfront::kvfront(a),
            Self::AwmParallel(a) => awm_parallel::awm_parallel(a),
            Self::AwmPipeline(a) => awm_pipeline::awm_pipeline(a),
            Self::ApiLoad(a) => api_load::api_load(a),
            Self::FrameSend(a) => frames::frame_send(a),
            Self::FrameRecv(a) => frames::frame_recv(a),
            Self::UdpBlast(a) => frames::udp_blast(a),
            Self::UdpSink(a) => frames::udp_sink(a),
            Self::AuctionApp(a) => auction_app::auction_app(a),
            Self::WebBack(a) => web::web_back(a),
            Self::WebFront(a) => webfront::web_front(a),
        }
    }
}

fn secs(s: Option<f64>) -> Option<Duration> {
    s.map(Duration::from_secs_f64)
}

/// Entry point of `atoll __worker KIND ARGS...`: parses, runs, prints the
/// report as one JSON line. Returns the exit code (2 for bad arguments, 1
/// for a failure).
pub fn main(args: &[String]) -> i32 {
    let w = match Worker::parse(args) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("atoll __worker: {e}");
            return 2;
        }
    };
    install_stop_handler();
    match w.run() {
        Ok(report) => {
            println!("{report}");
            0
        }
        Err(e) => {
            eprintln!("atoll __worker {}: {e}", args[0]);
            1
        }
    }
}

/// Set by SIGTERM or SIGINT: workers finish their current step, report and
/// exit.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn install_stop_handler() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `on_stop` is an extern "C" fn that only stores to an atomic,
        // which is async-signal-safe.
        unsafe {
            libc::signal(sig, on_stop as *const () as libc::sighandler_t);
        }
    }
}

/// Whether the worker was asked to stop.
pub(crate) fn stopping() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Sets the calling thread's timer slack to 1 ns so that sleeps end when
/// asked (the default 50 µs slack would count as lateness).
pub(crate) fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and affects only the
    // calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Worker, ArgError> {
        Worker::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses_every_kind() {
        assert_eq!(
            p("spin").unwrap(),
            Worker::Spin {
                threads: 1,
                seconds: None
            }
        );
        assert_eq!(
            p("spin --threads 8 --seconds=0.5").unwrap(),
            Worker::Spin {
                threads: 8,
                seconds: Some(0.5)
            }
        );
        assert_eq!(p("cpujob --work 3").unwrap(), Worker::CpuJob { work: 3 });
        assert_eq!(
            p("echo-server --socket /tmp/s").unwrap(),
            Worker::EchoServer {
                socket: "/tmp/s".into()
            }
        );
        assert_eq!(
            p("latency-client --socket /tmp/s --count 10 --interval-us 50 --raw").unwrap(),
            Worker::LatencyClient {
                socket: "/tmp/s".into(),
                count: 10,
                interval_us: 50,
                raw: true
            }
        );
        assert_eq!(
            p("memhog --mib 64").unwrap(),
            Worker::MemHog {
                mib: 64,
                seconds: None
            }
        );
        assert_eq!(
            p("diskwriter --dir /d --mib 4 --rounds 2").unwrap(),
            Worker::DiskWriter {
                dir: "/d".into(),
                mib: 4,
                rounds: Some(2)
            }
        );
        assert_eq!(
            p("probe --period-us 1000 --samples 20 --burst-us 500 --start-delay-ms 5").unwrap(),
            Worker::Probe(ProbeArgs {
                period_us: 1000,
                samples: 20,
                burst_us: 500,
                jitter_us: 0,
                start_delay_ms: 5,
                raw: false
            })
        );
        assert_eq!(
            p(
                "kvfront --backends 6379,127.0.0.1:6380 --rate 50 --seconds 2 --work 300 \
               --overlay app --percentile 95 --report-ms 500 --socket /s"
            )
            .unwrap(),
            Worker::KvFront(KvFrontArgs {
                backends: vec![
                    "127.0.0.1:6379".parse().unwrap(),
                    "127.0.0.1:6380".parse().unwrap()
                ],
                rate: 50.0,
                seconds: Some(2.0),
                conns: 4,
                work: 300,
                keys: 1000,
                value_bytes: 64,
                percentile: 95.0,
                report_ms: 500,
                overlay: Some("app".into()),
                socket: "/s".into(),
                timeout_ms: 2000,
            })
        );
        let Worker::KvFront(a) = p("kvfront --backends 1 --rate 1").unwrap() else {
            panic!("not kvfront")
        };
        assert_eq!(
            a.socket,
            PathBuf::from(atoll_client::atoll_proto::DEFAULT_SOCKET)
        );
        assert_eq!((a.overlay, a.percentile, a.report_ms), (None, 99.0, 1000));
    }

    #[test]
    fn refuses_bad_arguments_with_the_option_and_value() {
        assert_eq!(p(""), Err(ArgError::NoKind));
        assert_eq!(p("fly"), Err(ArgError::UnknownKind("fly".into())));
        assert_eq!(
            p("spin --work 3"),
            Err(ArgError::UnknownOption {
                kind: "spin".into(),
                option: "--work".into()
            })
        );
        assert_eq!(
            p("cpujob"),
            Err(ArgError::Required {
                kind: "cpujob".into(),
                option: "--work"
            })
        );
        assert_eq!(
            p("cpujob --work"),
            Err(ArgError::MissingValue {
                kind: "cpujob".into(),
                option: "--work".into()
            })
        );
        let e = p("probe --period-us ten --samples 3").unwrap_err();
        assert!(e.to_string().contains("--period-us \"ten\""), "{e}");
        let e = p("memhog --mib 0").unwrap_err();
        assert!(e.to_string().contains("must be positive"), "{e}");
        let e = p("spin --threads -2").unwrap_err();
        assert!(matches!(e, ArgError::BadValue { .. }), "{e}");
        let e = p("kvfront --backends redis:6379 --rate 5").unwrap_err();
        assert!(e.to_string().contains("--backends \"redis:6379\""), "{e}");
        let e = p("kvfront --backends 6379 --rate 5 --percentile 101").unwrap_err();
        assert!(e.to_string().contains("at most 100"), "{e}");
        assert_eq!(
            p("kvfront --backends 6379"),
            Err(ArgError::Required {
                kind: "kvfront".into(),
                option: "--rate"
            })
        );
        // A flag does not take a value.
        assert!(p("probe --period-us 1 --samples 1 --raw=yes").is_err());
    }
}
