//! The streaming pair: `stream-server` sends every client a constant-rate
//! byte stream over TCP, `stream-client` plays N such streams through a
//! playback buffer and counts buffer under-runs (the streaming media server
//! of seed 003, section 4).
//!
//! The server speaks just enough HTTP to sit behind a proxy: it reads a
//! request head, answers `HTTP/1.0 200` and then sends, on a thread per
//! client, `rate × interval` bytes at every `t0 + k × interval`. A late
//! thread sends everything due at once (a constant-rate source that falls
//! behind catches up), so a delay shows up at the client as a late batch,
//! and a server that cannot keep up falls further and further behind.
//!
//! The client plays each stream with a [`Playback`] model: it fills the
//! buffer to `B` before playing, then consumes at the stream's rate; when
//! the buffer runs dry that is one under-run, and playback waits until the
//! buffer is full again (as in the paper). Time is the wall clock; the model
//! is advanced on every read and at least every 50 ms.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{stopping, ArgError, Opts};
use crate::stats::round;

/// How long a client keeps retrying to connect.
const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// Largest request head the server reads.
const HEAD_MAX: usize = 8192;

/// The options `stream-server` takes (all with a value).
pub(super) const SERVER_OPTIONS: &[&str] = &["--port", "--bytes-per-s", "--interval-ms"];
/// The options `stream-client` takes (all with a value).
pub(super) const CLIENT_OPTIONS: &[&str] = &[
    "--addr",
    "--path",
    "--clients",
    "--bytes-per-s",
    "--buffer-ms",
    "--seconds",
];

/// Arguments of `stream-server`.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamServerArgs {
    /// Loopback port to listen on.
    pub port: u16,
    /// Bytes per second per client.
    pub bytes_per_s: u64,
    /// Time between sends, ms.
    pub interval_ms: u64,
}

/// Arguments of `stream-client`.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamClientArgs {
    /// `HOST:PORT` to connect to.
    pub addr: String,
    /// The path requested.
    pub path: String,
    /// Streams played at once.
    pub clients: usize,
    /// Each stream's rate, bytes per second (the playback rate).
    pub bytes_per_s: u64,
    /// The playback buffer, ms of stream.
    pub buffer_ms: u64,
    /// How long to play, s (the first fill included).
    pub seconds: f64,
}

impl StreamServerArgs {
    pub(super) fn from_opts(o: &Opts) -> Result<Self, ArgError> {
        Ok(Self {
            port: o.required("--port", o.positive("--port")?)?,
            bytes_per_s: o.required("--bytes-per-s", o.positive("--bytes-per-s")?)?,
            interval_ms: o.positive("--interval-ms")?.unwrap_or(20),
        })
    }
}

impl StreamClientArgs {
    pub(super) fn from_opts(o: &Opts) -> Result<Self, ArgError> {
        Ok(Self {
            addr: o.required("--addr", o.values.get("--addr").cloned())?,
            path: o
                .values
                .get("--path")
                .cloned()
                .unwrap_or_else(|| "/stream".into()),
            clients: o.required("--clients", o.positive("--clients")?)?,
            bytes_per_s: o.required("--bytes-per-s", o.positive("--bytes-per-s")?)?,
            buffer_ms: o.required("--buffer-ms", o.positive("--buffer-ms")?)?,
            seconds: o.required("--seconds", o.positive("--seconds")?)?,
        })
    }
}

/// A playback buffer: fills to `buffer` bytes, then drains at `rate` bytes
/// per second while data keeps coming in. Times are seconds on any clock
/// that only goes forward.
#[derive(Clone, Debug, PartialEq)]
pub struct Playback {
    rate: f64,
    buffer: f64,
    received: f64,
    /// Bytes played when the current state began.
    consumed: f64,
    /// `Some(t)`: playing since `t`; `None`: filling.
    playing_since: Option<f64>,
    /// When playback first started.
    pub started: Option<f64>,
    /// Under-runs so far.
    pub underruns: u32,
    /// When the first under-run happened.
    pub first_underrun: Option<f64>,
    /// Time spent refilling after under-runs, s.
    pub stalled_s: f64,
    stalled_since: Option<f64>,
}

impl Playback {
    /// A buffer of `buffer` bytes drained at `rate` bytes/s.
    pub fn new(rate: f64, buffer: f64) -> Self {
        Self {
            rate,
            buffer,
            received: 0.0,
            consumed: 0.0,
            playing_since: None,
            started: None,
            underruns: 0,
            first_underrun: None,
            stalled_s: 0.0,
            stalled_since: None,
        }
    }

    /// Bytes in the buffer at `t` (without advancing).
    pub fn level(&self, t: f64) -> f64 {
        let played = self
            .playing_since
            .map_or(0.0, |t0| (t - t0).max(0.0) * self.rate);
        (self.received - self.consumed - played).max(0.0)
    }

    /// Plays until `t`: an empty buffer on the way is an under-run.
    pub fn advance(&mut self, t: f64) {
        let Some(t0) = self.playing_since else { return };
        let left = self.received - self.consumed;
        if (t - t0) * self.rate > left {
            let at = t0 + left / self.rate;
            self.underruns += 1;
            self.first_underrun.get_or_insert(at);
            self.consumed = self.received;
            self.playing_since = None;
            self.stalled_since = Some(at);
        }
    }

    /// `bytes` arrived at `t`.
    pub fn on_data(&mut self, t: f64, bytes: u64) {
        self.advance(t);
        self.received += bytes as f64;
        if self.playing_since.is_none() && self.received - self.consumed >= self.buffer {
            self.playing_since = Some(t);
            self.started.get_or_insert(t);
            if let Some(s) = self.stalled_since.take() {
                self.stalled_s += t - s;
            }
        }
    }

    /// Ends at `t`: plays until then and closes an open stall.
    pub fn finish(&mut self, t: f64) {
        self.advance(t);
        if let Some(s) = self.stalled_since.take() {
            self.stalled_s += t - s;
        }
    }
}

/// Reads a message head (up to an empty line) from `s`; returns it and the
/// bytes that came after it.
fn read_head(s: &mut TcpStream) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > HEAD_MAX {
            return Err(io::Error::new(ErrorKind::InvalidData, "head too long"));
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(ErrorKind::UnexpectedEof, "closed in head"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[derive(Default)]
struct ServerTally {
    connections: AtomicU64,
    bytes: AtomicU64,
    sends: AtomicU64,
    late_sends: AtomicU64,
    max_lag_us: AtomicU64,
}

fn serve(mut s: TcpStream, a: StreamServerArgs, tally: Arc<ServerTally>) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if read_head(&mut s).is_err() {
        return;
    }
    let head = b"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n\
                 Cache-Control: no-store\r\nConnection: close\r\n\r\n";
    if s.write_all(head).is_err() {
        return;
    }
    let _ = s.set_nodelay(true);
    let data = vec![0x5au8; 64 * 1024];
    let interval = Duration::from_millis(a.interval_ms);
    let t0 = Instant::now();
    let mut sent = 0u64;
    for k in 1u32.. {
        if stopping() {
            return;
        }
        let deadline = t0 + interval * k;
        let now = Instant::now();
        if now < deadline {
            std::thread::sleep(deadline - now);
        }
        let lag = deadline.elapsed();
        tally
            .max_lag_us
            .fetch_max(atoll_core::num::micros_u64(lag), Ordering::Relaxed);
        if lag >= interval {
            tally.late_sends.fetch_add(1, Ordering::Relaxed);
        }
        let due =
            atoll_core::num::saturating_u64(a.bytes_per_s as f64 * (interval * k).as_secs_f64());
        let mut left = due - sent;
        while left > 0 {
            let n = atoll_core::num::u64_to_usize(left.min(data.len() as u64));
            if s.write_all(&data[..n]).is_err() {
                return;
            }
            left -= n as u64;
        }
        tally.bytes.fetch_add(due - sent, Ordering::Relaxed);
        tally.sends.fetch_add(1, Ordering::Relaxed);
        sent = due;
    }
}

/// Serves streams until stopped.
pub(crate) fn stream_server(a: &StreamServerArgs) -> io::Result<serde_json::Value> {
    let listener = TcpListener::bind(("127.0.0.1", a.port))?;
    listener.set_nonblocking(true)?;
    let tally = Arc::new(ServerTally::default());
    while !stopping() {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                tally.connections.fetch_add(1, Ordering::Relaxed);
                let (a, tally) = (a.clone(), tally.clone());
                std::thread::spawn(move || serve(s, a, tally));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json!({
        "kind": "stream-server",
        "connections": tally.connections.load(Ordering::Relaxed),
        "bytes": tally.bytes.load(Ordering::Relaxed),
        "sends": tally.sends.load(Ordering::Relaxed),
        "late_sends": tally.late_sends.load(Ordering::Relaxed),
        "max_lag_ms": round(tally.max_lag_us.load(Ordering::Relaxed) as f64 / 1000.0, 3),
    }))
}

/// One client's outcome.
#[derive(Debug)]
struct Played {
    playback: Playback,
    error: Option<String>,
}

fn connect(addr: &str) -> io::Result<TcpStream> {
    let t0 = Instant::now();
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) if t0.elapsed() >= CONNECT_WAIT || stopping() => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn play(a: &StreamClientArgs, epoch: Instant, end: Instant) -> Played {
    let mut pb = Playback::new(
        a.bytes_per_s as f64,
        a.bytes_per_s as f64 * a.buffer_ms as f64 / 1000.0,
    );
    let error = play_into(a, &mut pb, epoch, end)
        .err()
        .map(|e| e.to_string());
    pb.finish(end.saturating_duration_since(epoch).as_secs_f64());
    Played {
        playback: pb,
        error,
    }
}

fn play_into(
    a: &StreamClientArgs,
    pb: &mut Playback,
    epoch: Instant,
    end: Instant,
) -> io::Result<()> {
    let mut s = connect(&a.addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {} HTTP/1.0\r\nHost: localhost\r\n\r\n", a.path)?;
    let body = read_status(&mut s)?;
    let now = || epoch.elapsed().as_secs_f64();
    pb.on_data(now(), body as u64);
    s.set_read_timeout(Some(Duration::from_millis(50)))?;
    let mut buf = vec![0u8; 256 * 1024];
    while Instant::now() < end && !stopping() {
        match s.read(&mut buf) {
            Ok(0) => {
                return Err(io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "the stream ended early",
                ))
            }
            Ok(n) => pb.on_data(now(), n as u64),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                pb.advance(now());
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads the response head; checks for status 200; returns how many body
/// bytes came with it.
fn read_status(s: &mut TcpStream) -> io::Result<usize> {
    let (head, rest) = read_head(s)?;
    let status = String::from_utf8_lossy(&head);
    let status = status.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            format!("the stream answered {status:?}"),
        ));
    }
    Ok(rest.len())
}

/// Plays `clients` streams for `seconds`; reports under-runs per client.
pub(crate) fn stream_client(a: &StreamClientArgs) -> io::Result<serde_json::Value> {
    let epoch = Instant::now();
    let end = epoch + Duration::from_secs_f64(a.seconds);
    let played: Vec<Played> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..a.clients)
            .map(|_| sc.spawn(|| play(a, epoch, end)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| Played {
                    playback: Playback::new(1.0, 1.0),
                    error: Some("client thread panicked".into()),
                })
            })
            .collect()
    });
    Ok(client_report(a, &played))
}

fn client_report(a: &StreamClientArgs, played: &[Played]) -> serde_json::Value {
    let underruns: Vec<u32> = played.iter().map(|p| p.playback.underruns).collect();
    let first: Vec<Option<f64>> = played
        .iter()
        .map(|p| {
            let (start, at) = (p.playback.started?, p.playback.first_underrun?);
            Some(round(at - start, 3))
        })
        .collect();
    let failed = played
        .iter()
        .filter(|p| p.error.is_some() || p.playback.started.is_none())
        .count();
    let ok = played
        .iter()
        .filter(|p| p.error.is_none() && p.playback.started.is_some() && p.playback.underruns <= 1)
        .count();
    let errors: Vec<&str> = played.iter().filter_map(|p| p.error.as_deref()).collect();
    json!({
        "kind": "stream-client",
        "clients": a.clients,
        "seconds": a.seconds,
        "bytes_per_s": a.bytes_per_s,
        "buffer_ms": a.buffer_ms,
        "underruns": underruns,
        "underruns_total": underruns.iter().map(|&u| u64::from(u)).sum::<u64>(),
        "underruns_max": underruns.iter().copied().max().unwrap_or(0),
        "first_underrun_s": first,
        "stalled_s": round(played.iter().map(|p| p.playback.stalled_s).sum::<f64>(), 3),
        "clients_ok": ok,
        "failed": failed,
        "first_error": errors.first(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::Worker;
    use super::*;

    fn p(s: &str) -> Result<Worker, ArgError> {
        Worker::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses_its_options() {
        assert_eq!(
            p("stream-server --port 8080 --bytes-per-s 1000").unwrap(),
            Worker::StreamServer(StreamServerArgs {
                port: 8080,
                bytes_per_s: 1000,
                interval_ms: 20
            })
        );
        assert_eq!(
            p("stream-client --addr h:1 --clients 3 --bytes-per-s 10 --buffer-ms 500 --seconds 2.5")
                .unwrap(),
            Worker::StreamClient(StreamClientArgs {
                addr: "h:1".into(),
                path: "/stream".into(),
                clients: 3,
                bytes_per_s: 10,
                buffer_ms: 500,
                seconds: 2.5
            })
        );
        assert!(p("stream-server --port 70000 --bytes-per-s 1").is_err());
        assert!(p(
            "stream-client --addr h:1 --clients 0 --bytes-per-s 1 --buffer-ms 1 --seconds 1"
        )
        .is_err());
        assert!(matches!(
            p("stream-client --addr h:1 --clients 1 --bytes-per-s 1 --seconds 1"),
            Err(ArgError::Required {
                option: "--buffer-ms",
                ..
            })
        ));
    }

    #[test]
    fn playback_fills_then_plays_and_counts_underruns() {
        // 100 B/s, a 50 B buffer.
        let mut p = Playback::new(100.0, 50.0);
        p.on_data(0.0, 30);
        assert_eq!(p.started, None);
        p.on_data(0.1, 30); // 60 ≥ 50: plays from 0.1
        assert_eq!(p.started, Some(0.1));
        assert!((p.level(0.3) - 40.0).abs() < 1e-9);
        p.on_data(0.5, 40); // 60 B lasted until 0.7: still fine
        assert_eq!(p.underruns, 0);
        // 100 B in total, empty at 1.1.
        p.advance(1.2);
        assert_eq!(p.underruns, 1);
        assert!((p.first_underrun.unwrap() - 1.1).abs() < 1e-9);
        // Refill: 30 B is not enough, 60 B is.
        p.on_data(1.3, 30);
        p.advance(1.4);
        assert_eq!(p.underruns, 1, "no second under-run while refilling");
        p.on_data(1.5, 30);
        assert!((p.stalled_s - 0.4).abs() < 1e-9);
        // Data at exactly the rate keeps it playing.
        for i in 1..=20 {
            p.on_data(1.5 + f64::from(i) * 0.1, 10);
        }
        p.finish(3.5);
        assert_eq!(p.underruns, 1);
        assert_eq!(p.first_underrun.map(|t| (t * 10.0).round()), Some(11.0));
    }

    #[test]
    fn a_late_batch_longer_than_the_buffer_is_an_underrun() {
        let mut p = Playback::new(1000.0, 200.0);
        p.on_data(0.0, 200);
        p.on_data(0.1, 100); // on time
        p.on_data(0.5, 400); // 300 B played by 0.3: dry 0.2 s
        assert_eq!(p.underruns, 1);
        assert!((p.first_underrun.unwrap() - 0.3).abs() < 1e-9);
        // Refilled at once (400 ≥ 200) and playing again.
        assert!((p.level(0.5) - 400.0).abs() < 1e-9);
        p.finish(0.6);
        assert!((p.stalled_s - 0.2).abs() < 1e-9);
    }

    #[test]
    fn server_and_client_stream_and_count() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let sa = StreamServerArgs {
            port,
            bytes_per_s: 100_000,
            interval_ms: 10,
        };
        let server = std::thread::spawn(move || {
            let listener = TcpListener::bind(("127.0.0.1", sa.port)).unwrap();
            let tally = Arc::new(ServerTally::default());
            for _ in 0..2 {
                let (s, _) = listener.accept().unwrap();
                let (sa, tally) = (sa.clone(), tally.clone());
                std::thread::spawn(move || serve(s, sa, tally));
            }
        });
        let ca = StreamClientArgs {
            addr: format!("127.0.0.1:{port}"),
            path: "/stream".into(),
            clients: 2,
            bytes_per_s: 100_000,
            buffer_ms: 100,
            seconds: 0.5,
        };
        let r = stream_client(&ca).unwrap();
        server.join().unwrap();
        assert_eq!(r["clients"], 2);
        assert_eq!(r["underruns"].as_array().unwrap().len(), 2);
        assert_eq!(r["failed"], 0, "{r}");
        assert!(r["first_error"].is_null(), "{r}");
    }

    #[test]
    fn clients_with_an_error_or_that_never_played_fail() {
        let mut twice = Playback::new(10.0, 10.0);
        twice.on_data(0.0, 10);
        twice.advance(2.0);
        twice.on_data(2.0, 10);
        twice.advance(4.0);
        assert_eq!(twice.underruns, 2);
        let mut once = Playback::new(10.0, 10.0);
        once.on_data(0.0, 10);
        once.finish(5.0);
        let played = vec![
            Played {
                playback: Playback::new(10.0, 10.0),
                error: Some("connect: refused".into()),
            },
            Played {
                playback: Playback::new(10.0, 10.0),
                error: None,
            },
            Played {
                playback: twice,
                error: None,
            },
            Played {
                playback: once,
                error: None,
            },
        ];
        let a = StreamClientArgs {
            addr: "127.0.0.1:1".into(),
            path: "/s".into(),
            clients: 4,
            bytes_per_s: 10,
            buffer_ms: 1000,
            seconds: 1.0,
        };
        let r = client_report(&a, &played);
        assert_eq!(r["failed"], 2);
        assert_eq!(r["clients_ok"], 1);
        assert_eq!(r["underruns"], json!([0, 0, 2, 1]));
        assert_eq!(r["underruns_max"], 2);
        assert_eq!(r["first_underrun_s"], json!([null, null, 1.0, 1.0]));
        assert!(r["first_error"].as_str().unwrap().contains("refused"));
    }
}
