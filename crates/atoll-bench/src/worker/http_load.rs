//! `http-load`: an open-loop HTTP/1.1 load generator at a fixed rate.
//!
//! A dispatcher releases request `i` at `t0 + i / rate` whatever happened
//! to the earlier ones (open loop), so the servers get the same work per
//! second however fast they answer, and so do the CPU hogs beside them.
//! (A closed loop, like `wrk`, sends the next request when the last one
//! returns: faster servers would then do more work and take more CPU from
//! the hogs, mixing the two things the comm benchmark compares.) Released
//! requests go through a queue to a pool of keep-alive connections, one
//! thread each; a request waits in the queue while every connection is busy.
//!
//! A response time runs from the request's *release* time to the last byte
//! of its response, so time spent queued behind slow responses counts (no
//! coordinated omission). Requests released during the warm-up are sent but
//! not recorded. A request fails on a status other than 200, an I/O error,
//! or no answer within [`READ_TIMEOUT`]; its connection is then reopened.

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

/// The options `http-load` takes (all with a value).
pub(super) const OPTIONS: &[&str] = &[
    "--addr",
    "--path",
    "--rate",
    "--seconds",
    "--warmup",
    "--connections",
    "--heavy",
];

/// Arguments of `http-load`.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpLoadArgs {
    /// `HOST:PORT` of the server.
    pub addr: String,
    /// The path requested.
    pub path: String,
    /// Requests per second.
    pub rate: f64,
    /// How long requests are released, warm-up included, s.
    pub seconds: f64,
    /// Requests released in the first `warmup` seconds are not recorded.
    pub warmup: f64,
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
        Ok(Self {
            addr: o.required("--addr", o.values.get("--addr").cloned())?,
            path: o
                .values
                .get("--path")
                .cloned()
                .unwrap_or_else(|| "/".into()),
            rate: o.required("--rate", o.positive("--rate")?)?,
            seconds,
            warmup,
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

struct Job {
    released: Instant,
    record: bool,
    req: Arc<Vec<u8>>,
    heavy: bool,
}

/// What one connection thread saw.
#[derive(Default)]
struct Tally {
    ms: Vec<f64>,
    heavy_ms: Vec<f64>,
    errors: u64,
    completed_all: u64,
    last_error: Option<String>,
}

/// Runs the load; returns the report.
pub(crate) fn http_load(a: &HttpLoadArgs) -> io::Result<serde_json::Value> {
    tight_timer_slack();
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    let req = Arc::new(request(&a.path));
    let threads: Vec<_> = (0..a.connections)
        .map(|_| {
            let (rx, addr) = (rx.clone(), a.addr.clone());
            std::thread::spawn(move || {
                let mut conn = None;
                let mut t = Tally::default();
                loop {
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => break,
                    };
                    let Ok(job) = job else { break };
                    let r = exchange(&mut conn, &addr, &job.req);
                    let ms = job.released.elapsed().as_secs_f64() * 1000.0;
                    let ok = matches!(&r, Ok(resp) if resp.status == 200);
                    if ok {
                        t.completed_all += 1;
                    }
                    if !job.record {
                        continue;
                    }
                    if ok {
                        t.ms.push(ms);
                        if job.heavy {
                            t.heavy_ms.push(ms);
                        }
                    } else {
                        t.errors += 1;
                        t.last_error = Some(match r {
                            Ok(resp) => format!("status {}", resp.status),
                            Err(e) => e.to_string(),
                        });
                    }
                }
                t
            })
        })
        .collect();
    let t0 = Instant::now();
    let interval = 1.0 / a.rate;
    let (mut sent, mut recorded) = (0u64, 0u64);
    let mut record_start = None;
    let (size, mut rng) = (DataSize::default(), Rng::new(MIX_SEED));
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
            record_start.get_or_insert(release);
        }
        let (req, heavy) = match a.heavy {
            None => (req.clone(), false),
            Some(h) => (
                Arc::new(request(&path_at(sent, h, &size, &mut rng))),
                kind_at(sent, h) == Kind::PutBid,
            ),
        };
        if tx
            .send(Job {
                released: release,
                record,
                req,
                heavy,
            })
            .is_err()
        {
            break;
        }
        sent += 1;
    }
    let window = record_start.map_or(0.0, |s| s.elapsed().as_secs_f64());
    drop(tx);
    let mut all = Tally::default();
    for h in threads {
        let t = h.join().unwrap_or_default();
        all.ms.extend(t.ms);
        all.heavy_ms.extend(t.heavy_ms);
        all.errors += t.errors;
        all.completed_all += t.completed_all;
        if t.last_error.is_some() {
            all.last_error = t.last_error;
        }
    }
    Ok(report(a, sent, recorded, window, all))
}

fn report(
    a: &HttpLoadArgs,
    sent: u64,
    recorded: u64,
    window_s: f64,
    t: Tally,
) -> serde_json::Value {
    let n = t.ms.len();
    let rt = summary(t.ms);
    // Requests released and never answered (the run was stopped) count as
    // errors too.
    let unanswered = recorded.saturating_sub(n as u64 + t.errors);
    json!({
        "kind": "http-load",
        "rate": a.rate,
        "seconds": a.seconds,
        "warmup_s": a.warmup,
        "connections": a.connections,
        "sent": sent,
        "recorded": recorded,
        "completed": n,
        "errors": t.errors + unanswered,
        "last_error": t.last_error,
        "throughput_rps": if window_s > 0.0 { round(n as f64 / window_s, 2) } else { 0.0 },
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
mod tests {
    use std::io::Cursor;
    use std::net::TcpListener;

    use super::*;

    fn parse(s: &str) -> io::Result<Response> {
        read_response(&mut Cursor::new(s.as_bytes().to_vec()))
    }

    #[test]
    fn reads_content_length_chunked_and_close_delimited_bodies() {
        let r = parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").unwrap();
        assert_eq!((r.status, r.body_bytes, r.keep_alive), (200, 5, true));
        let r = parse(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n\
             4\r\nabcd\r\na;ext=1\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.body_bytes, r.keep_alive), (200, 14, true));
        let r = parse("HTTP/1.0 200 OK\r\nServer: x\r\n\r\nuntil the end").unwrap();
        assert_eq!((r.body_bytes, r.keep_alive), (13, false));
        let r =
            parse("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbad")
                .unwrap();
        assert_eq!((r.status, r.keep_alive), (502, false));
        let r = parse("HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n").unwrap();
        assert_eq!((r.status, r.body_bytes, r.keep_alive), (204, 0, true));
    }

    #[test]
    fn refuses_broken_responses() {
        assert!(parse("SSH-2.0\r\n\r\n").is_err());
        assert!(parse("HTTP/1.1 OK\r\n\r\n").is_err());
        assert!(parse("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
        assert!(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
        assert!(
            parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n").is_err()
        );
        assert!(parse("HTTP/1.1 200 OK\r\nno colon\r\n\r\n").is_err());
        assert!(parse("").is_err());
    }

    /// A keep-alive server answering `n` requests on one connection, the
    /// second one with a 500.
    fn server(n: usize) -> (String, std::thread::JoinHandle<usize>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let h = std::thread::spawn(move || {
            let mut served = 0;
            while served < n {
                let (s, _) = l.accept().unwrap();
                let mut r = BufReader::new(s);
                loop {
                    let mut head = String::new();
                    while !head.ends_with("\r\n\r\n") {
                        if r.read_line(&mut head).unwrap_or(0) == 0 {
                            break;
                        }
                    }
                    if head.is_empty() {
                        break;
                    }
                    served += 1;
                    let reply: &[u8] = if served == 2 {
                        b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n"
                    } else {
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                    };
                    r.get_mut().write_all(reply).unwrap();
                    if served >= n {
                        break;
                    }
                }
            }
            served
        });
        (addr, h)
    }

    #[test]
    fn load_records_after_warmup_and_counts_errors() {
        let (addr, h) = server(8);
        let a = HttpLoadArgs {
            addr,
            path: "/x".into(),
            rate: 100.0,
            seconds: 0.075,
            warmup: 0.0,
            connections: 1,
            heavy: None,
        };
        let r = http_load(&a).unwrap();
        assert_eq!(r["sent"], 8);
        assert_eq!(r["recorded"], 8);
        assert_eq!(r["completed"], 7);
        assert_eq!(r["errors"], 1);
        assert_eq!(r["last_error"], "status 500");
        assert_eq!(r["rt_ms"]["count"], 7);
        assert!(r["rt_ms"]["p95"].as_f64().unwrap() <= r["rt_ms"]["max"].as_f64().unwrap());
        assert_eq!(h.join().unwrap(), 8);
    }

    #[test]
    fn nothing_listening_is_an_error_per_request_not_a_crash() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let a = HttpLoadArgs {
            addr,
            path: "/".into(),
            rate: 100.0,
            seconds: 0.045,
            warmup: 0.025,
            connections: 2,
            heavy: None,
        };
        let r = http_load(&a).unwrap();
        assert_eq!(r["sent"], 5);
        assert_eq!(r["recorded"], 2);
        assert_eq!(r["errors"], 2);
        assert!(r["rt_ms"].is_null());
    }

    fn p(s: &str) -> Result<super::super::Worker, ArgError> {
        super::super::Worker::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses_its_options() {
        assert_eq!(
            p("http-load --addr 127.0.0.1:80 --rate 50 --seconds 3").unwrap(),
            super::super::Worker::HttpLoad(HttpLoadArgs {
                addr: "127.0.0.1:80".into(),
                path: "/".into(),
                rate: 50.0,
                seconds: 3.0,
                warmup: 0.0,
                connections: 32,
                heavy: None,
            })
        );
        let w =
            p("http-load --addr h:1 --rate 1.5 --seconds 3 --warmup=1 --path /p --connections 4")
                .unwrap();
        let super::super::Worker::HttpLoad(a) = w else {
            panic!("{w:?}")
        };
        assert_eq!((a.rate, a.warmup, a.connections), (1.5, 1.0, 4));
        assert_eq!(a.path, "/p");
        let e = p("http-load --addr h:1 --rate 1 --seconds 3 --warmup 3").unwrap_err();
        assert!(e.to_string().contains("below --seconds"), "{e}");
        assert!(matches!(
            p("http-load --rate 1 --seconds 1"),
            Err(ArgError::Required {
                option: "--addr",
                ..
            })
        ));
        assert!(p("http-load --addr h:1 --rate 0 --seconds 1").is_err());
        let w = p("http-load --addr h:1 --rate 1 --seconds 3 --heavy 0.15").unwrap();
        let super::super::Worker::HttpLoad(a) = w else {
            panic!("{w:?}")
        };
        assert_eq!(a.heavy, Some(0.15));
        let e = p("http-load --addr h:1 --rate 1 --seconds 3 --heavy 1.5").unwrap_err();
        assert!(e.to_string().contains("0..=1"), "{e}");
    }

    #[test]
    fn the_auction_mix_reports_its_heavy_class_apart() {
        // One connection keeps the order: requests 1, 3, 5, 7 are `putbid`
        // (a share of 0.5), and the server fails the second request.
        let (addr, h) = server(8);
        let a = HttpLoadArgs {
            addr,
            path: "/unused".into(),
            rate: 100.0,
            seconds: 0.075,
            warmup: 0.0,
            connections: 1,
            heavy: Some(0.5),
        };
        let r = http_load(&a).unwrap();
        assert_eq!(r["completed"], 7);
        assert_eq!(r["heavy_rt_ms"]["count"], 3);
        assert!(r["rt_ms"]["stddev"].as_f64().unwrap() >= 0.0);
        assert_eq!(h.join().unwrap(), 8);
    }

    #[test]
    fn the_request_asks_for_gzip_on_a_kept_connection() {
        let t = String::from_utf8(request("/page.txt")).unwrap();
        assert!(t.starts_with("GET /page.txt HTTP/1.1\r\n"), "{t}");
        assert!(t.contains("Accept-Encoding: gzip\r\n") && t.ends_with("\r\n\r\n"));
        assert!(!t.contains("close"));
    }
}
