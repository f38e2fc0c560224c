//! `http-load`: an HTTP/1.1 load generator, open loop at a fixed rate or
//! closed loop.
//!
//! **Open loop** (`--rate R`). A dispatcher releases request `i` at `t0 +
//! i / rate` whatever happened to the earlier ones, so the servers get the
//! same work per second however fast they answer, and so do the CPU hogs
//! beside them. (A closed loop, like `wrk`, sends the next request when the
//! last one returns: faster servers would then do more work and take more
//! CPU from the hogs, mixing the two things the comm benchmark compares.)
//! Released requests go through a queue to a pool of keep-alive
//! connections, one thread each; a request waits in the queue while every
//! connection is busy.
//!
//! **Closed loop** (`--closed`). Each connection sends its next request as
//! soon as its last one is answered (or failed), until `--seconds`: always
//! `--connections` requests in flight, no queue. This measures what the
//! servers serve at most (`atoll bench slo --scenario tiers`' saturation)
//! without building a backlog the servers would then have to work off.
//!
//! A response time runs from the request's *release* time (open loop) or
//! from when it was sent (closed loop) to the last byte of its response,
//! so time spent queued behind slow responses counts (no coordinated
//! omission). Requests released during the warm-up are sent but not
//! recorded. A request fails on a status other than 200, an I/O error, or
//! no answer within [`READ_TIMEOUT`]; its connection is then reopened.
//!
//! **The wall-time limit** (`--limit L`, at least `--seconds`). Without
//! it, every released request is served however long the backlog takes.
//! With it, no request is sent after `t0 + L`, a response that ends after
//! it does not count, and the requests still queued are dropped: all of
//! these are `unserved` (recorded, neither completed nor failed). A
//! connection waiting for an answer at the limit still waits for it (at
//! most [`READ_TIMEOUT`] per read), so the worker returns a little after
//! the limit at worst.
//!
//! **Throughput** is the responses (status 200) that *ended within the
//! measurement window* over the window's length: the release times of the
//! recorded requests (open loop: from the first recorded release for
//! `recorded / rate` seconds; closed loop: from the end of the warm-up to
//! `--seconds`). Responses to warm-up requests that end in the window
//! count, those to recorded requests that end after it do not, so a server
//! behind its load shows the rate it served, not the rate offered.

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{stopping, tight_timer_slack, ArgError, Opts};
use crate::stats::{percentile, round};
use crate::tiers::mix::{kind_at, path_at, DataSize, Kind, Rng};

/// The seed of the auction mix's items, bidders and bids.
const MIX_SEED: u64 = 16;

/// How long a connection waits for (each part of) a response.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The options `http-load` takes with a value.
pub(super) const OPTIONS: &[&str] = &[
    "--addr",
    "--path",
    "--rate",
    "--seconds",
    "--warmup",
    "--limit",
    "--connections",
    "--heavy",
];

/// The flags `http-load` takes.
pub(super) const FLAGS: &[&str] = &["--closed"];

/// How requests are sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// Open loop: this many requests released per second.
    Open(f64),
    /// Closed loop: each connection sends its next request when its last
    /// one is done.
    Closed,
}

/// Arguments of `http-load`.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpLoadArgs {
    /// `HOST:PORT` of the server.
    pub addr: String,
    /// The path requested.
    pub path: String,
    /// Open loop at a rate, or closed loop.
    pub pace: Pace,
    /// How long requests are released (sent, in a closed loop), warm-up
    /// included, s.
    pub seconds: f64,
    /// Requests released in the first `warmup` seconds are not recorded.
    pub warmup: f64,
    /// The run's wall-time limit from its start, s (at least `seconds`):
    /// nothing is sent after it and a response ending after it does not
    /// count. `None`: every released request is served.
    pub limit: Option<f64>,
    /// Connections (and threads) in the pool.
    pub connections: usize,
    /// With a share (0..=1): the auction's request mix instead of `path`
    /// (`/browse` and this share of `/putbid`, [`crate::tiers::mix`]), and
    /// the heavy class's response times reported apart.
    pub heavy: Option<f64>,
}

impl HttpLoadArgs {
    /// From the parsed options of `http-load`.
    pub(super) fn from_opts(o: &Opts) -> Result<Self, ArgError> {
        let warmup: f64 = o.num("--warmup")?.unwrap_or(0.0);
        let seconds = o.required("--seconds", o.positive("--seconds")?)?;
        if !(0.0..seconds).contains(&warmup) {
            return Err(o.bad(
                "--warmup",
                &warmup.to_string(),
                "must be at least 0 and below --seconds",
            ));
        }
        let pace = match (o.flag("--closed"), o.positive::<f64>("--rate")?) {
            (true, Some(r)) => {
                return Err(o.bad("--rate", &r.to_string(), "not with --closed"));
            }
            (true, None) => Pace::Closed,
            (false, r) => Pace::Open(o.required("--rate", r)?),
        };
        let limit: Option<f64> = o.positive("--limit")?;
        if let Some(l) = limit.filter(|&l| l < seconds) {
            return Err(o.bad("--limit", &l.to_string(), "must be at least --seconds"));
        }
        Ok(Self {
            addr: o.required("--addr", o.values.get("--addr").cloned())?,
            path: o
                .values
                .get("--path")
                .cloned()
                .unwrap_or_else(|| "/".into()),
            pace,
            seconds,
            warmup,
            limit,
            connections: o.positive("--connections")?.unwrap_or(32),
            heavy: match o.num::<f64>("--heavy")? {
                Some(h) if !(0.0..=1.0).contains(&h) => {
                    return Err(o.bad("--heavy", &h.to_string(), "must be in 0..=1"));
                }
                h => h,
            },
        })
    }
}

/// One parsed response.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Body bytes (after chunked decoding).
    pub body_bytes: u64,
    /// Whether the connection may carry another request.
    pub keep_alive: bool,
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, what.into())
}

fn line<R: BufRead>(r: &mut R) -> io::Result<String> {
    let mut s = String::new();
    if r.read_line(&mut s)? == 0 {
        return Err(io::Error::new(
            ErrorKind::UnexpectedEof,
            "connection closed mid-response",
        ));
    }
    Ok(s.trim_end_matches(['\r', '\n']).to_string())
}

fn skip<R: BufRead>(r: &mut R, n: u64) -> io::Result<()> {
    let got = io::copy(&mut r.by_ref().take(n), &mut io::sink())?;
    if got < n {
        return Err(io::Error::new(
            ErrorKind::UnexpectedEof,
            "connection closed mid-body",
        ));
    }
    Ok(())
}

/// Reads one HTTP/1.x response (status line, headers, body by
/// `Content-Length`, chunked, or until the connection closes).
pub fn read_response<R: BufRead>(r: &mut R) -> io::Result<Response> {
    let status_line = line(r)?;
    let mut parts = status_line.split_whitespace();
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(bad(format!("not an HTTP/1 status line: {status_line:?}")));
    }
    let status: u16 = parts
        .next()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad(format!("no status code in {status_line:?}")))?;
    let mut keep_alive = version != "HTTP/1.0";
    let (mut length, mut chunked) = (None, false);
    loop {
        let h = line(r)?;
        if h.is_empty() {
            break;
        }
        let Some((name, value)) = h.split_once(':') else {
            return Err(bad(format!("bad header line {h:?}")));
        };
        let value = value.trim().to_ascii_lowercase();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                length = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| bad(format!("bad Content-Length {value:?}")))?,
                );
            }
            "transfer-encoding" => chunked = value.split(',').any(|v| v.trim() == "chunked"),
            "connection" => {
                if value.contains("close") {
                    keep_alive = false;
                } else if value.contains("keep-alive") {
                    keep_alive = true;
                }
            }
            _ => {}
        }
    }
    let mut body_bytes = 0u64;
    if status < 200 || status == 204 || status == 304 {
        // No body.
    } else if chunked {
        loop {
            let size_line = line(r)?;
            let hex = size_line.split(';').next().unwrap_or("").trim();
            let size = u64::from_str_radix(hex, 16)
                .map_err(|_| bad(format!("bad chunk size {size_line:?}")))?;
            if size == 0 {
                // Trailers, up to an empty line.
                while !line(r)?.is_empty() {}
                break;
            }
            skip(r, size)?;
            body_bytes += size;
            if !line(r)?.is_empty() {
                return Err(bad("chunk not followed by CRLF"));
            }
        }
    } else if let Some(n) = length {
        skip(r, n)?;
        body_bytes = n;
    } else {
        body_bytes = io::copy(r, &mut io::sink())?;
        keep_alive = false;
    }
    Ok(Response {
        status,
        body_bytes,
        keep_alive,
    })
}

/// The request text for `path` (asks for gzip, keeps the connection).
pub fn request(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip\r\nUser-Agent: atoll-bench\r\n\r\n")
        .into_bytes()
}

fn open(addr: &str) -> io::Result<BufReader<TcpStream>> {
    let s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    s.set_write_timeout(Some(READ_TIMEOUT))?;
    Ok(BufReader::new(s))
}

/// One request on `conn` (opened first if needed); the connection is
/// dropped after an error or a response that closes it.
fn exchange(
    conn: &mut Option<BufReader<TcpStream>>,
    addr: &str,
    req: &[u8],
) -> io::Result<Response> {
    if conn.is_none() {
        *conn = Some(open(addr)?);
    }
    let c = conn.as_mut().expect("opened above");
    let r = c.get_mut().write_all(req).and_then(|()| read_response(c));
    if !matches!(&r, Ok(resp) if resp.keep_alive) {
        *conn = None;
    }
    r
}

/// A single GET on a fresh connection: the response (for readiness checks).
pub fn get(addr: &str, path: &str) -> io::Result<Response> {
    exchange(&mut None, addr, &request(path))
}

/// One request to send.
struct Job {
    /// When it was released (open loop) or taken (closed loop).
    released: Instant,
    record: bool,
    req: Arc<Vec<u8>>,
    heavy: bool,
}

/// The requests of a run in order: the same path, or the auction's mix.
struct Requests {
    plain: Arc<Vec<u8>>,
    heavy: Option<f64>,
    size: DataSize,
    rng: Rng,
    next: u64,
}

impl Requests {
    fn new(a: &HttpLoadArgs) -> Self {
        Self {
            plain: Arc::new(request(&a.path)),
            heavy: a.heavy,
            size: DataSize::default(),
            rng: Rng::new(MIX_SEED),
            next: 0,
        }
    }

    /// The next request and whether it is of the heavy class.
    fn next_request(&mut self) -> (Arc<Vec<u8>>, bool) {
        let i = self.next;
        self.next += 1;
        match self.heavy {
            None => (self.plain.clone(), false),
            Some(h) => (
                Arc::new(request(&path_at(i, h, &self.size, &mut self.rng))),
                kind_at(i, h) == Kind::PutBid,
            ),
        }
    }
}

/// Where the connection threads get their requests.
enum Source {
    /// Open loop: the dispatcher's queue.
    Queue(Mutex<mpsc::Receiver<Job>>),
    /// Closed loop: the next request, until `end`; recorded from `warm`.
    Closed {
        requests: Mutex<Requests>,
        warm: Instant,
        end: Instant,
    },
}

/// What the connection threads share.
struct Shared {
    addr: String,
    t0: Instant,
    source: Source,
    /// The wall-time limit.
    deadline: Option<Instant>,
}

impl Shared {
    /// The next request, `None` when there is no more to send.
    fn next_job(&self) -> Option<Job> {
        let job = match &self.source {
            Source::Queue(rx) => rx.lock().ok()?.recv().ok()?,
            Source::Closed {
                requests,
                warm,
                end,
            } => {
                let now = Instant::now();
                if stopping() || now >= *end {
                    return None;
                }
                let (req, heavy) = requests.lock().ok()?.next_request();
                Job {
                    released: Instant::now(),
                    record: now >= *warm,
                    req,
                    heavy,
                }
            }
        };
        (!self.past_deadline(Instant::now())).then_some(job)
    }

    fn past_deadline(&self, t: Instant) -> bool {
        self.deadline.is_some_and(|d| t > d)
    }
}

/// What one connection thread saw.
#[derive(Default)]
struct Tally {
    /// Requests taken (sent or failed), recorded ones apart.
    taken: u64,
    taken_recorded: u64,
    ms: Vec<f64>,
    heavy_ms: Vec<f64>,
    errors: u64,
    /// When every successful response ended, s since the start (warm-up
    /// ones too).
    done_s: Vec<f64>,
    last_error: Option<String>,
}

impl Tally {
    /// Counts `job`'s outcome `r`, which ended at `done`.
    fn add(&mut self, job: &Job, r: io::Result<Response>, done: Instant, t0: Instant) {
        let ok = matches!(&r, Ok(resp) if resp.status == 200);
        if ok {
            self.done_s.push(done.duration_since(t0).as_secs_f64());
        }
        if !job.record {
            return;
        }
        if ok {
            let ms = done.duration_since(job.released).as_secs_f64() * 1000.0;
            self.ms.push(ms);
            if job.heavy {
                self.heavy_ms.push(ms);
            }
        } else {
            self.errors += 1;
            self.last_error = Some(match r {
                Ok(resp) => format!("status {}", resp.status),
                Err(e) => e.to_string(),
            });
        }
    }

    fn merge(&mut self, t: Self) {
        self.taken += t.taken;
        self.taken_recorded += t.taken_recorded;
        self.ms.extend(t.ms);
        self.heavy_ms.extend(t.heavy_ms);
        self.errors += t.errors;
        self.done_s.extend(t.done_s);
        if t.last_error.is_some() {
            self.last_error = t.last_error;
        }
    }
}

/// One connection: requests until there are no more or the limit; a
/// response that ends after the limit is not counted.
fn connection(sh: &Shared) -> Tally {
    let mut conn = None;
    let mut t = Tally::default();
    while let Some(job) = sh.next_job() {
        t.taken += 1;
        t.taken_recorded += u64::from(job.record);
        let r = exchange(&mut conn, &sh.addr, &job.req);
        let done = Instant::now();
        if sh.past_deadline(done) {
            break;
        }
        t.add(&job, r, done, sh.t0);
    }
    t
}

/// Responses per second among those that ended at `done_s` (any order),
/// over the window `[from, to)` (s); 0 for an empty window.
pub(crate) fn rate_within(done_s: &[f64], from: f64, to: f64) -> f64 {
    if to <= from {
        return 0.0;
    }
    let n = done_s.iter().filter(|&&d| d >= from && d < to).count();
    n as f64 / (to - from)
}

/// The open loop's dispatcher: releases the requests on schedule until
/// `a.seconds`; returns (sent, recorded, the window of the recorded
/// releases in s since `t0`).
fn dispatch(
    a: &HttpLoadArgs,
    rate: f64,
    t0: Instant,
    tx: &mpsc::Sender<Job>,
) -> (u64, u64, (f64, f64)) {
    let interval = 1.0 / rate;
    let (mut sent, mut recorded) = (0u64, 0u64);
    let mut first = None;
    let mut requests = Requests::new(a);
    loop {
        let offset = sent as f64 * interval;
        if offset >= a.seconds || stopping() {
            break;
        }
        let release = t0 + Duration::from_secs_f64(offset);
        loop {
            let now = Instant::now();
            if now >= release || stopping() {
                break;
            }
            std::thread::sleep((release - now).min(Duration::from_millis(100)));
        }
        let record = offset >= a.warmup;
        if record {
            recorded += 1;
            first.get_or_insert(offset);
        }
        let (req, heavy) = requests.next_request();
        let job = Job {
            released: release,
            record,
            req,
            heavy,
        };
        if tx.send(job).is_err() {
            break;
        }
        sent += 1;
    }
    let from = first.unwrap_or(0.0);
    (sent, recorded, (from, from + recorded as f64 * interval))
}

/// Runs the load; returns the report.
pub(crate) fn http_load(a: &HttpLoadArgs) -> io::Result<serde_json::Value> {
    tight_timer_slack();
    let t0 = Instant::now();
    let at = |s: f64| t0 + Duration::from_secs_f64(s);
    let (tx, rx) = mpsc::channel::<Job>();
    let source = match a.pace {
        Pace::Open(_) => Source::Queue(Mutex::new(rx)),
        Pace::Closed => Source::Closed {
            requests: Mutex::new(Requests::new(a)),
            warm: at(a.warmup),
            end: at(a.seconds),
        },
    };
    let sh = Shared {
        addr: a.addr.clone(),
        t0,
        source,
        deadline: a.limit.map(at),
    };
    let mut all = Tally::default();
    let released = std::thread::scope(|s| {
        let threads: Vec<_> = (0..a.connections)
            .map(|_| s.spawn(|| connection(&sh)))
            .collect();
        let released = match a.pace {
            Pace::Open(rate) => Some(dispatch(a, rate, t0, &tx)),
            Pace::Closed => None,
        };
        drop(tx);
        for h in threads {
            all.merge(h.join().unwrap_or_default());
        }
        released
    });
    let (sent, recorded, window) = released.unwrap_or_else(|| {
        // Closed loop: the window ends at `seconds`, or earlier if stopped.
        let end = t0.elapsed().as_secs_f64().min(a.seconds);
        (all.taken, all.taken_recorded, (a.warmup, end))
    });
    Ok(report(a, sent, recorded, window, all))
}

fn report(
    a: &HttpLoadArgs,
    sent: u64,
    recorded: u64,
    (from, to): (f64, f64),
    t: Tally,
) -> serde_json::Value {
    let n = t.ms.len();
    let throughput = rate_within(&t.done_s, from, to);
    let rt = summary(t.ms);
    let (pace, rate) = match a.pace {
        Pace::Open(r) => ("open", Some(r)),
        Pace::Closed => ("closed", None),
    };
    json!({
        "kind": "http-load",
        "pace": pace,
        "rate": rate,
        "seconds": a.seconds,
        "warmup_s": a.warmup,
        "limit_s": a.limit,
        "connections": a.connections,
        "sent": sent,
        "recorded": recorded,
        "completed": n,
        "errors": t.errors,
        // Recorded requests neither answered nor failed: still queued or
        // answered after the limit, or the run was stopped.
        "unserved": recorded.saturating_sub(n as u64 + t.errors),
        "last_error": t.last_error,
        "window_s": round(to - from, 3),
        "throughput_rps": round(throughput, 2),
        "rt_ms": rt,
        "heavy_share": a.heavy,
        "heavy_rt_ms": a.heavy.and_then(|_| summary(t.heavy_ms)),
    })
}

/// Count, mean, percentiles, max and (population) standard deviation of
/// `ms`; `None` for no samples.
fn summary(mut ms: Vec<f64>) -> Option<serde_json::Value> {
    ms.sort_by(f64::total_cmp);
    let n = ms.len();
    (n > 0).then(|| {
        let mean = ms.iter().sum::<f64>() / n as f64;
        let var = ms.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        json!({
            "count": n,
            "mean": round(mean, 3),
            "stddev": round(var.sqrt(), 3),
            "p50": percentile(&ms, 50.0).map(|v| round(v, 3)),
            "p95": percentile(&ms, 95.0).map(|v| round(v, 3)),
            "p99": percentile(&ms, 99.0).map(|v| round(v, 3)),
            "max": round(ms[n - 1], 3),
        })
    })
}

#[cfg(test)]
#[path = "http_load_tests.rs"]
mod tests;
