//! `auction-app`: the application tier of the three-tier auction scenario
//! (`atoll bench slo --scenario tiers`). An HTTP/1.1 server on a loopback
//! port, a thread per connection (nginx keeps its upstream connections
//! open: a fixed pool of threads each holding one would leave the others
//! unanswered), serving its requests (keep-alive) one at a time: `GET /browse?item=I` runs the
//! light reads, `GET /putbid?item=I&user=U&bid=B` the bid transaction plus
//! `--work` rounds of CPU work ([`crate::tiers::mix`]), each thread with its
//! own connection to MariaDB on `--db-socket` ([`crate::tiers::mysql`]).
//! Runs until `--seconds` passed or it is told to stop; reports the
//! requests served per kind and the errors.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{stopping, ArgError, Opts};
use crate::tiers::mix::{self, Kind};
use crate::tiers::mysql::{Answer, Conn, MysqlError};

/// The options `auction-app` takes (all with a value).
pub(super) const OPTIONS: &[&str] = &["--port", "--db-socket", "--work", "--seconds"];

/// The database user (any name: the server skips grant tables).
const USER: &str = "atoll";

/// Arguments of `auction-app`.
#[derive(Clone, Debug, PartialEq)]
pub struct AuctionAppArgs {
    /// The loopback port to listen on.
    pub port: u16,
    /// MariaDB's unix socket.
    pub db_socket: PathBuf,
    /// Rounds of CPU work per `putbid`.
    pub work: u64,
    /// How long to serve, s (until stopped when absent).
    pub seconds: Option<f64>,
}

impl AuctionAppArgs {
    /// From the parsed options of `auction-app`.
    pub(super) fn from_opts(o: &Opts) -> Result<Self, ArgError> {
        Ok(Self {
            port: o.required("--port", o.positive("--port")?)?,
            db_socket: o.path("--db-socket")?,
            work: o.num("--work")?.unwrap_or(200_000),
            seconds: o.positive("--seconds")?,
        })
    }
}

#[derive(Default)]
struct Counts {
    browse: AtomicU64,
    putbid: AtomicU64,
    errors: AtomicU64,
}

/// Runs the server; see the module docs.
pub fn auction_app(a: &AuctionAppArgs) -> io::Result<serde_json::Value> {
    let listener = TcpListener::bind(("127.0.0.1", a.port))?;
    let counts = Arc::new(Counts::default());
    let c = Arc::clone(&counts);
    let (db, work) = (a.db_socket.clone(), a.work);
    std::thread::spawn(move || {
        while let Ok((s, _)) = listener.accept() {
            let (c, db) = (Arc::clone(&c), db.clone());
            std::thread::spawn(move || {
                let mut conn = None;
                let _ = serve(s, &db, &mut conn, work, &c);
            });
        }
    });
    let t0 = Instant::now();
    while !stopping() && a.seconds.is_none_or(|s| t0.elapsed().as_secs_f64() < s) {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(json!({
        "browse": counts.browse.load(Ordering::Relaxed),
        "putbid": counts.putbid.load(Ordering::Relaxed),
        "errors": counts.errors.load(Ordering::Relaxed),
        "seconds": t0.elapsed().as_secs_f64(),
    }))
}

/// Serves one connection's requests until it closes.
fn serve(
    s: TcpStream,
    db: &Path,
    conn: &mut Option<Conn<UnixStream>>,
    work: u64,
    counts: &Counts,
) -> io::Result<()> {
    s.set_nodelay(true)?;
    let mut w = s.try_clone()?;
    let mut r = BufReader::new(s);
    loop {
        let Some((path, keep_alive)) = read_request(&mut r)? else {
            return Ok(());
        };
        let (status, body) = match answer(&path, db, conn, work) {
            Ok((kind, body)) => {
                let c = match kind {
                    Kind::Browse => &counts.browse,
                    Kind::PutBid => &counts.putbid,
                };
                c.fetch_add(1, Ordering::Relaxed);
                ("200 OK", body)
            }
            Err(e) => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                ("500 Internal Server Error", format!("{e}\n"))
            }
        };
        let conn_hdr = if keep_alive { "keep-alive" } else { "close" };
        write!(
            w,
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: \
             {conn_hdr}\r\n\r\n{body}",
            body.len()
        )?;
        w.flush()?;
        if !keep_alive {
            return Ok(());
        }
    }
}

/// Reads a request's line and headers: its path and whether the
/// connection stays open; `None` at the end of the stream.
pub fn read_request<R: BufRead>(r: &mut R) -> io::Result<Option<(String, bool)>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (_method, path, version) = (parts.next(), parts.next(), parts.next());
    let path = path
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no request line"))?
        .to_string();
    let mut keep_alive = version != Some("HTTP/1.0");
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("connection") {
                let v = v.trim();
                keep_alive = if v.eq_ignore_ascii_case("close") {
                    false
                } else {
                    keep_alive || v.eq_ignore_ascii_case("keep-alive")
                };
            }
        }
    }
    Ok(Some((path, keep_alive)))
}

/// Runs the request of `path`: its kind and response body.
fn answer(
    path: &str,
    db: &Path,
    conn: &mut Option<Conn<UnixStream>>,
    work: u64,
) -> Result<(Kind, String), String> {
    let kind = Kind::of_path(path).ok_or_else(|| format!("no route for {path}"))?;
    let need = |k| mix::param(path, k).ok_or_else(|| format!("{path}: no {k}"));
    let item = need("item")?;
    let (sql, cpu) = match kind {
        Kind::Browse => (mix::browse_sql(item), None),
        Kind::PutBid => {
            let (user, bid) = (need("user")?, need("bid")?);
            (
                mix::putbid_sql(item, user, bid),
                Some(mix::cpu_work(item ^ user, work)),
            )
        }
    };
    let values = run_all(db, conn, &sql).map_err(|e| {
        // A broken connection is reopened by the next request.
        *conn = None;
        e.to_string()
    })?;
    let mut values = values;
    if let Some(h) = cpu {
        values.push(format!("{h:x}"));
    }
    Ok((kind, mix::body(kind, &values)))
}

/// Runs `sql` in order on the thread's connection (opened if needed): the
/// first value of each result set.
fn run_all(
    db: &Path,
    conn: &mut Option<Conn<UnixStream>>,
    sql: &[String],
) -> Result<Vec<String>, MysqlError> {
    let c = match conn {
        Some(c) => c,
        None => {
            let s = UnixStream::connect(db).map_err(|source| MysqlError::Io {
                op: "connect",
                source,
            })?;
            conn.insert(Conn::handshake(s, USER)?)
        }
    };
    let mut out = Vec::new();
    for q in sql {
        if let Answer::Rows { rows, .. } = c.query(q)? {
            if let Some(v) = rows.first().and_then(|r| r.first()).cloned().flatten() {
                out.push(v);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    #[test]
    fn requests_and_keep_alive() {
        let mut r = Cursor::new(
            b"GET /browse?item=3 HTTP/1.1\r\nHost: x\r\n\r\nGET /putbid?item=1 HTTP/1.0\r\n\r\n\
              GET / HTTP/1.1\r\nConnection: close\r\n\r\n"
                .to_vec(),
        );
        assert_eq!(
            read_request(&mut r).unwrap(),
            Some(("/browse?item=3".into(), true))
        );
        assert_eq!(
            read_request(&mut r).unwrap(),
            Some(("/putbid?item=1".into(), false))
        );
        assert_eq!(read_request(&mut r).unwrap(), Some(("/".into(), false)));
        assert_eq!(read_request(&mut r).unwrap(), None);
    }

    #[test]
    fn unknown_routes_and_missing_parameters_are_errors_before_the_database() {
        let mut conn = None;
        let db = Path::new("/nonexistent/socket");
        assert!(answer("/other", db, &mut conn, 1)
            .unwrap_err()
            .contains("no route"));
        assert!(answer("/putbid?item=1", db, &mut conn, 1)
            .unwrap_err()
            .contains("no user"));
        let e = answer("/browse?item=1", db, &mut conn, 1).unwrap_err();
        assert!(e.contains("mysql connect"), "{e}");
    }
}
