//! `kvfront`: the front end of a small key-value application whose back
//! ends are real Redis servers (or anything that speaks RESP).
//!
//! Every request fans out to every back end: a `GET` of one of the keys it
//! prepared at start, then (with `--work N > 0`) an `EVAL` of a Lua loop of
//! `N` iterations, which costs the back end real CPU time. Both commands go
//! in one write per back end (a pipeline); the request is done when every
//! back end answered both.
//!
//! **Open loop.** Request `k` is due at `start + k / rate`. `--conns`
//! threads, each with its own connection to every back end, take the next
//! request number, sleep until it is due and send it. Latency runs from the
//! request's due time, not from when a thread got to it, so a slow back end
//! (every thread busy) shows as latency rather than as fewer requests.
//!
//! The run ends at `--seconds` of wall time even when the front end is
//! behind its schedule: requests due by then but not yet sent are not sent
//! (`sent` says how many were). Offered far more than the back ends serve,
//! the threads then never wait, a closed loop of `--conns` requests in
//! flight, and the throughput is the back ends' maximum.
//!
//! **Windows and reports.** Every `--report-ms` the main thread takes the
//! latencies of the requests completed in that window and computes their
//! `--percentile` (nearest rank, [`crate::stats::percentile`]). A window
//! with no completion while requests are outstanding takes the age of the
//! oldest one instead, so that a stalled back end is reported too. With
//! `--overlay NAME` the value is sent to the daemon (`report`, through
//! `atoll_client`), whose policy for the overlay may act on it; the report
//! keeps, per window, whether the property held and what the daemon did.
//!
//! **Failures.** A back end that refuses, closes or does not answer within
//! `--timeout-ms` makes the request an error (counted by kind) and its
//! connection is dropped; the next request on that thread connects again.
//! A `GET` that finds no value (a restarted back end lost its data) is a
//! miss, not an error. Failed reports are counted; the worker goes on.
//! Preparing the keys at the start is not a request: its I/O limit is at
//! least `START_WAIT`, and a failure there ends the worker.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{stopping, tight_timer_slack, ArgError, Opts};
use crate::stats::percentile;

/// The Lua loop that makes a request cost the back end CPU time.
const SCRIPT: &str = "local s = 0 for i = 1, tonumber(ARGV[1]) do s = s + i % 7 end return s";
/// How long the start waits for a back end to accept connections.
const START_WAIT: Duration = Duration::from_secs(20);
/// Keys set per pipelined batch while preparing the data.
const PREPARE_BATCH: usize = 100;
/// Longest bulk string or array accepted in a reply.
const MAX_LEN: i64 = 64 << 20;
/// Deepest nesting of arrays accepted in a reply.
const MAX_DEPTH: usize = 8;

/// The arguments of `kvfront`.
#[derive(Clone, Debug, PartialEq)]
pub struct KvFrontArgs {
    /// The back ends (`--backends IP:PORT,...`; a bare port is on 127.0.0.1).
    pub backends: Vec<SocketAddr>,
    /// Requests per second (`--rate`).
    pub rate: f64,
    /// Stop after this long (`--seconds`; default: when signalled).
    pub seconds: Option<f64>,
    /// Concurrent requests, each thread with a connection to every back end
    /// (`--conns`, default 4).
    pub conns: usize,
    /// Lua loop iterations per request and back end (`--work`, default 0:
    /// no `EVAL`).
    pub work: u64,
    /// Keys prepared in every back end (`--keys`, default 1000).
    pub keys: usize,
    /// Bytes per value (`--value-bytes`, default 64).
    pub value_bytes: usize,
    /// The percentile of a window (`--percentile`, default 99).
    pub percentile: f64,
    /// Window length, ms (`--report-ms`, default 1000).
    pub report_ms: u64,
    /// Report each window's value for this overlay (`--overlay`).
    pub overlay: Option<String>,
    /// The daemon's socket (`--socket`, default the CLI's).
    pub socket: PathBuf,
    /// I/O time limit per request and back end, ms (`--timeout-ms`,
    /// default 2000).
    pub timeout_ms: u64,
}

/// The options `kvfront` takes (all with a value).
pub(super) const OPTIONS: &[&str] = &[
    "--backends",
    "--rate",
    "--seconds",
    "--conns",
    "--work",
    "--keys",
    "--value-bytes",
    "--percentile",
    "--report-ms",
    "--overlay",
    "--socket",
    "--timeout-ms",
];

/// The typed arguments from the parsed options.
pub(super) fn parse(o: &Opts) -> Result<KvFrontArgs, ArgError> {
    let backends = o.required("--backends", o.values.get("--backends"))?;
    let backends =
        parse_backends(backends).map_err(|reason| o.bad("--backends", backends, &reason))?;
    let percentile = o.positive::<f64>("--percentile")?.unwrap_or(99.0);
    if percentile > 100.0 {
        return Err(o.bad("--percentile", &o.values["--percentile"], "at most 100"));
    }
    Ok(KvFrontArgs {
        backends,
        rate: o.required("--rate", o.positive("--rate")?)?,
        seconds: o.positive("--seconds")?,
        conns: o.positive("--conns")?.unwrap_or(4),
        work: o.num("--work")?.unwrap_or(0),
        keys: o.positive("--keys")?.unwrap_or(1000),
        value_bytes: o.num("--value-bytes")?.unwrap_or(64),
        percentile,
        report_ms: o.positive("--report-ms")?.unwrap_or(1000),
        overlay: o.values.get("--overlay").cloned(),
        socket: o.values.get("--socket").map_or_else(
            || PathBuf::from(atoll_client::atoll_proto::DEFAULT_SOCKET),
            PathBuf::from,
        ),
        timeout_ms: o.positive("--timeout-ms")?.unwrap_or(2000),
    })
}

/// Parses `--backends`: comma-separated `IP:PORT` or bare ports.
pub(crate) fn parse_backends(s: &str) -> Result<Vec<SocketAddr>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        let addr = if let Ok(port) = part.parse::<u16>() {
            SocketAddr::from(([127, 0, 0, 1], port))
        } else {
            part.parse::<SocketAddr>()
                .map_err(|_| format!("{part:?} is not IP:PORT or a port"))?
        };
        if addr.port() == 0 {
            return Err(format!("{part:?}: port 0"));
        }
        out.push(addr);
    }
    Ok(out)
}

// --- RESP ------------------------------------------------------------------

/// One RESP (version 2) reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Resp {
    /// `+OK`
    Simple(String),
    /// `-ERR ...`
    Error(String),
    /// `:42`
    Int(i64),
    /// `$3 foo`; `None` for the nil bulk `$-1`.
    Bulk(Option<Vec<u8>>),
    /// `*2 ...`; `None` for the nil array `*-1`.
    Array(Option<Vec<Resp>>),
}

/// Appends one command (an array of bulk strings) to `out`.
pub(crate) fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn invalid(what: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, what)
}

/// One CRLF-terminated line, without the CRLF.
fn read_line<R: BufRead>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    if r.read_until(b'\n', &mut line)? == 0 {
        return Err(io::Error::new(
            ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    if !line.ends_with(b"\r\n") {
        return Err(invalid(format!(
            "reply line not ended by CRLF: {:?}",
            String::from_utf8_lossy(&line)
        )));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

fn parse_int(s: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid(format!("bad integer {:?}", String::from_utf8_lossy(s))))
}

/// A length of a bulk string or array: `None` for -1 (nil).
fn parse_len(s: &[u8]) -> io::Result<Option<usize>> {
    match parse_int(s)? {
        -1 => Ok(None),
        n => usize::try_from(n)
            .ok()
            .filter(|_| n <= MAX_LEN)
            .map(Some)
            .ok_or_else(|| invalid(format!("length {n} out of range"))),
    }
}

/// Reads one reply.
pub(crate) fn read_reply<R: BufRead>(r: &mut R) -> io::Result<Resp> {
    read_nested(r, 0)
}

fn read_nested<R: BufRead>(r: &mut R, depth: usize) -> io::Result<Resp> {
    let line = read_line(r)?;
    let (&kind, rest) = line
        .split_first()
        .ok_or_else(|| invalid("empty reply line".into()))?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    Ok(match kind {
        b'+' => Resp::Simple(text()),
        b'-' => Resp::Error(text()),
        b':' => Resp::Int(parse_int(rest)?),
        b'$' => match parse_len(rest)? {
            None => Resp::Bulk(None),
            Some(n) => {
                let mut buf = vec![0; n + 2];
                r.read_exact(&mut buf)?;
                if !buf.ends_with(b"\r\n") {
                    return Err(invalid(format!(
                        "bulk string of {n} bytes not ended by CRLF"
                    )));
                }
                buf.truncate(n);
                Resp::Bulk(Some(buf))
            }
        },
        b'*' => match parse_len(rest)? {
            None => Resp::Array(None),
            Some(_) if depth >= MAX_DEPTH => {
                return Err(invalid(format!("arrays nested deeper than {MAX_DEPTH}")))
            }
            Some(n) => Resp::Array(Some(
                (0..n)
                    .map(|_| read_nested(r, depth + 1))
                    .collect::<io::Result<_>>()?,
            )),
        },
        other => {
            return Err(invalid(format!(
                "unknown reply type {:?}",
                char::from(other)
            )))
        }
    })
}

// --- back ends ---------------------------------------------------------------

/// A connection to one back end, made when needed and dropped on failure.
struct Backend {
    addr: SocketAddr,
    timeout: Duration,
    conn: Option<(TcpStream, BufReader<TcpStream>)>,
}

impl Backend {
    fn new(addr: SocketAddr, timeout: Duration) -> Self {
        Self {
            addr,
            timeout,
            conn: None,
        }
    }

    fn connect(&mut self) -> io::Result<()> {
        if self.conn.is_none() {
            let s = TcpStream::connect_timeout(&self.addr, self.timeout)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(self.timeout))?;
            s.set_write_timeout(Some(self.timeout))?;
            let reader = BufReader::new(s.try_clone()?);
            self.conn = Some((s, reader));
        }
        Ok(())
    }

    /// Sends `bytes` (connecting first if needed).
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.connect()?;
        let (s, _) = self.conn.as_mut().expect("connected above");
        let r = s.write_all(bytes);
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    /// Reads `n` replies to what was sent.
    fn recv(&mut self, n: usize) -> io::Result<Vec<Resp>> {
        let Some((_, r)) = self.conn.as_mut() else {
            return Err(io::Error::new(ErrorKind::NotConnected, "not connected"));
        };
        let replies = (0..n)
            .map(|_| read_reply(r))
            .collect::<io::Result<Vec<_>>>();
        if replies.is_err() {
            self.conn = None;
        }
        replies
    }

    /// One command, its reply.
    fn call(&mut self, args: &[&[u8]]) -> io::Result<Resp> {
        let mut out = Vec::new();
        encode(args, &mut out);
        self.send(&out)?;
        Ok(self.recv(1)?.remove(0))
    }
}

/// Waits until `b` answers `PING`, then sets `keys` keys of `value_bytes`.
fn prepare(b: &mut Backend, keys: usize, value_bytes: usize) -> io::Result<()> {
    let t0 = Instant::now();
    loop {
        match b.call(&[b"PING"]) {
            Ok(Resp::Simple(s)) if s == "PONG" => break,
            Ok(other) if t0.elapsed() >= START_WAIT => {
                return Err(invalid(format!("{}: PING answered {other:?}", b.addr)))
            }
            Err(e) if t0.elapsed() >= START_WAIT || stopping() => {
                return Err(io::Error::new(e.kind(), format!("{}: {e}", b.addr)))
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    let value = vec![b'v'; value_bytes];
    for batch in (0..keys).collect::<Vec<_>>().chunks(PREPARE_BATCH) {
        let mut out = Vec::new();
        for k in batch {
            encode(&[b"SET", key(*k).as_bytes(), &value], &mut out);
        }
        b.send(&out)?;
        for r in b.recv(batch.len())? {
            if r != Resp::Simple("OK".into()) {
                return Err(invalid(format!("{}: SET answered {r:?}", b.addr)));
            }
        }
    }
    Ok(())
}

fn key(k: usize) -> String {
    format!("key:{k}")
}

/// How one request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Every back end answered; `misses`: GETs that found no value.
    Done { misses: usize },
    /// A back end could not be reached or did not answer.
    Io,
    /// A back end answered with an error reply.
    Reply,
}

/// One request against every back end: GET (and EVAL) pipelined to each,
/// then every answer read.
fn request(backends: &mut [Backend], k: usize, keys: usize, work: u64) -> Outcome {
    let mut out = Vec::new();
    let key = key(k % keys.max(1));
    encode(&[b"GET", key.as_bytes()], &mut out);
    let per = if work > 0 {
        encode(
            &[
                b"EVAL",
                SCRIPT.as_bytes(),
                b"0",
                work.to_string().as_bytes(),
            ],
            &mut out,
        );
        2
    } else {
        1
    };
    let sent: Vec<bool> = backends.iter_mut().map(|b| b.send(&out).is_ok()).collect();
    let (mut io_failed, mut reply_failed, mut misses) = (false, false, 0);
    for (b, ok) in backends.iter_mut().zip(sent) {
        if !ok {
            io_failed = true;
            continue;
        }
        match b.recv(per) {
            Err(_) => io_failed = true,
            Ok(replies) => {
                for r in replies {
                    match r {
                        Resp::Error(_) => reply_failed = true,
                        Resp::Bulk(None) => misses += 1,
                        _ => {}
                    }
                }
            }
        }
    }
    if io_failed {
        Outcome::Io
    } else if reply_failed {
        Outcome::Reply
    } else {
        Outcome::Done { misses }
    }
}

// --- windows -----------------------------------------------------------------

/// The latencies of the requests completed since the last window closed.
#[derive(Debug, Default)]
pub(crate) struct Window {
    latencies_us: Vec<f64>,
    errors: u64,
}

/// A closed window.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WindowValue {
    /// Requests completed in it.
    pub n: usize,
    /// Requests that failed in it.
    pub errors: u64,
    /// The percentile of its latencies, or the oldest outstanding request's
    /// age when none completed; `None` when nothing was due.
    pub value_us: Option<f64>,
    /// Whether `value_us` is an outstanding request's age.
    pub stalled: bool,
}

impl Window {
    fn add(&mut self, latency_us: Option<f64>) {
        match latency_us {
            Some(l) => self.latencies_us.push(l),
            None => self.errors += 1,
        }
    }

    /// Closes the window: its `p`th percentile, or `oldest_outstanding_us`
    /// when nothing completed; empties it.
    pub(crate) fn close(&mut self, p: f64, oldest_outstanding_us: Option<f64>) -> WindowValue {
        let mut l = std::mem::take(&mut self.latencies_us);
        let errors = std::mem::take(&mut self.errors);
        l.retain(|v| !v.is_nan());
        l.sort_by(f64::total_cmp);
        let (value_us, stalled) = match percentile(&l, p) {
            Some(v) => (Some(v), false),
            None => (oldest_outstanding_us, oldest_outstanding_us.is_some()),
        };
        WindowValue {
            n: l.len(),
            errors,
            value_us,
            stalled,
        }
    }
}

// --- the worker --------------------------------------------------------------

/// What the threads share.
struct Shared {
    start: Instant,
    end: Option<Instant>,
    /// The next request number.
    next: AtomicU64,
    /// Per thread: the due time (µs since start, + 1) of its outstanding
    /// request, 0 when it has none.
    outstanding: Vec<AtomicU64>,
    window: Mutex<Window>,
    all: Mutex<Vec<f64>>,
    /// Errors by kind, misses, requests sent.
    io_errors: AtomicU64,
    reply_errors: AtomicU64,
    misses: AtomicU64,
    sent: AtomicU64,
}

fn sleep_until(t: Instant) {
    loop {
        let now = Instant::now();
        if now >= t || stopping() {
            return;
        }
        std::thread::sleep((t - now).min(Duration::from_millis(50)));
    }
}

fn client_thread(a: &KvFrontArgs, sh: &Shared, slot: usize) {
    tight_timer_slack();
    let timeout = Duration::from_millis(a.timeout_ms);
    let mut backends: Vec<Backend> = a
        .backends
        .iter()
        .map(|&b| Backend::new(b, timeout))
        .collect();
    let period = 1.0 / a.rate;
    loop {
        let k = sh.next.fetch_add(1, Ordering::Relaxed);
        let due = sh.start + Duration::from_secs_f64(k as f64 * period);
        // The end is wall time too: a front end behind its schedule (the
        // back ends slower than the rate) stops at `--seconds` rather than
        // sending its backlog.
        if stopping() || sh.end.is_some_and(|e| due >= e || Instant::now() >= e) {
            return;
        }
        sleep_until(due);
        if stopping() {
            return;
        }
        let due_us = atoll_core::num::micros_u64(due.duration_since(sh.start));
        sh.outstanding[slot].store(due_us + 1, Ordering::Relaxed);
        sh.sent.fetch_add(1, Ordering::Relaxed);
        let outcome = request(
            &mut backends,
            atoll_core::num::u64_to_usize(k),
            a.keys,
            a.work,
        );
        let latency_us = due.elapsed().as_secs_f64() * 1e6;
        sh.outstanding[slot].store(0, Ordering::Relaxed);
        let ok = match outcome {
            Outcome::Done { misses } => {
                sh.misses.fetch_add(misses as u64, Ordering::Relaxed);
                sh.all
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(latency_us);
                Some(latency_us)
            }
            Outcome::Io => {
                sh.io_errors.fetch_add(1, Ordering::Relaxed);
                None
            }
            Outcome::Reply => {
                sh.reply_errors.fetch_add(1, Ordering::Relaxed);
                None
            }
        };
        sh.window.lock().unwrap_or_else(|e| e.into_inner()).add(ok);
    }
}

/// Sends the windows' values to the daemon; counts what failed.
struct Reporter {
    overlay: Option<String>,
    socket: PathBuf,
    client: Option<atoll_client::Client>,
    sent: u64,
    failed: u64,
    last_error: Option<String>,
}

impl Reporter {
    /// Reports `value`; whether the overlay's property holds at it, and
    /// what the daemon did about it, in its words.
    fn report(&mut self, value: f64) -> Option<(bool, Option<String>)> {
        let overlay = self.overlay.clone()?;
        let result = (|| {
            if self.client.is_none() {
                let mut c = atoll_client::Client::connect(&self.socket)?;
                c.set_timeout(Some(Duration::from_secs(5)))?;
                self.client = Some(c);
            }
            let c = self.client.as_mut().expect("connected above");
            c.report(&overlay, value.round())
        })();
        match result {
            Ok(r) => {
                self.sent += 1;
                Some((r.holds, r.action))
            }
            Err(e) => {
                self.failed += 1;
                self.last_error = Some(e.to_string());
                self.client = None;
                None
            }
        }
    }
}

/// Prepares every back end's keys. Setting up is not measured, so its
/// I/O limit is at least [`START_WAIT`] rather than `--timeout-ms`: a
/// back end slowed by the best effort beside it (a TCG guest at `--work
/// 100`: a batch of `SET`s over 2 s) must not end the run before it
/// starts.
fn prepare_all(a: &KvFrontArgs) -> io::Result<()> {
    let timeout = Duration::from_millis(a.timeout_ms).max(START_WAIT);
    for &addr in &a.backends {
        prepare(&mut Backend::new(addr, timeout), a.keys, a.value_bytes)
            .map_err(|e| io::Error::new(e.kind(), format!("preparing {addr}: {e}")))?;
    }
    Ok(())
}

/// Runs the front end; returns its report.
pub(crate) fn kvfront(a: &KvFrontArgs) -> io::Result<serde_json::Value> {
    prepare_all(a)?;
    let start = Instant::now();
    let sh = Shared {
        start,
        end: a.seconds.map(|s| start + Duration::from_secs_f64(s)),
        next: AtomicU64::new(0),
        outstanding: (0..a.conns).map(|_| AtomicU64::new(0)).collect(),
        window: Mutex::new(Window::default()),
        all: Mutex::new(Vec::new()),
        io_errors: AtomicU64::new(0),
        reply_errors: AtomicU64::new(0),
        misses: AtomicU64::new(0),
        sent: AtomicU64::new(0),
    };
    let mut rep = Reporter {
        overlay: a.overlay.clone(),
        socket: a.socket.clone(),
        client: None,
        sent: 0,
        failed: 0,
        last_error: None,
    };
    let window_len = Duration::from_millis(a.report_ms.max(1));
    let mut windows = Vec::new();
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..a.conns)
            .map(|i| {
                let sh = &sh;
                s.spawn(move || client_thread(a, sh, i))
            })
            .collect();
        let mut w = 1u32;
        loop {
            let last = stopping() || threads.iter().all(|t| t.is_finished());
            if !last {
                sleep_until(start + window_len * w);
            }
            let now = Instant::now();
            let oldest = sh
                .outstanding
                .iter()
                .filter_map(|o| match o.load(Ordering::Relaxed) {
                    0 => None,
                    due => Some(
                        atoll_core::num::micros_u64(now.duration_since(start))
                            .saturating_sub(due - 1),
                    ),
                })
                .max()
                .map(|us| us as f64);
            let v = sh
                .window
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .close(a.percentile, oldest);
            let (holds, action) = v
                .value_us
                .and_then(|x| rep.report(x))
                .map_or((None, None), |(h, a)| (Some(h), a));
            if v.n > 0 || v.errors > 0 || v.value_us.is_some() {
                windows.push(json!({
                    "t_s": (now.duration_since(start).as_secs_f64() * 100.0).round() / 100.0,
                    "n": v.n,
                    "errors": v.errors,
                    "p_us": v.value_us.map(|x| x.round()),
                    "stalled": v.stalled,
                    "holds": holds,
                    "action": action,
                }));
            }
            if last {
                break;
            }
            w += 1;
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    // The main thread may have slept into one more window after the
    // senders stopped: the throughput is over the sending time.
    let sending = a.seconds.map_or(elapsed, |s| elapsed.min(s));
    let mut all = sh.all.into_inner().unwrap_or_else(|e| e.into_inner());
    all.sort_by(f64::total_cmp);
    let pct = |p: f64| percentile(&all, p).map(|x| x.round());
    let io_errors = sh.io_errors.load(Ordering::Relaxed);
    let reply_errors = sh.reply_errors.load(Ordering::Relaxed);
    let mut errors = BTreeMap::new();
    errors.insert("io", io_errors);
    errors.insert("reply", reply_errors);
    Ok(json!({
        "kind": "kvfront",
        "backends": a.backends.iter().map(|b| b.to_string()).collect::<Vec<_>>(),
        "rate_per_s": a.rate,
        "conns": a.conns,
        "work": a.work,
        "elapsed_s": (elapsed * 1000.0).round() / 1000.0,
        "sent": sh.sent.load(Ordering::Relaxed),
        "count": all.len(),
        "errors": io_errors + reply_errors,
        "error_kinds": errors,
        "misses": sh.misses.load(Ordering::Relaxed),
        "throughput_per_s": if sending > 0.0 { ((all.len() as f64 / sending) * 100.0).round() / 100.0 } else { 0.0 },
        "latency_us": {
            "p50": pct(50.0),
            "p95": pct(95.0),
            "p99": pct(99.0),
            "max": pct(100.0),
        },
        "percentile": a.percentile,
        "report_ms": a.report_ms,
        "overlay": a.overlay,
        "reports": { "sent": rep.sent, "failed": rep.failed, "last_error": rep.last_error },
        "windows": windows,
    }))
}

#[cfg(test)]
#[path = "kvfront_tests.rs"]
mod tests;
