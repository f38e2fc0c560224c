//! `api-load`: clients of the daemon's API, one connection each, sending
//! the requests of a mix (or one fixed line) as fast as the daemon answers,
//! for a window; then they stop sending, wait for what is still in flight,
//! and the process reports ([`crate::api::load::LoadReport`]).
//!
//! ```text
//! atoll __worker api-load --socket P --clients N --seconds S
//!     [--mix read|mixed|write | --request LINE] [--depth D]
//!     [--units PREFIX] [--overlay NAME --overlay-unit UNIT]
//!     [--ready FILE] [--go FILE] [--drain-s S]
//! ```
//!
//! It runs as whoever started it (the benchmark starts it as root or as
//! another uid). Each client keeps `--depth` requests in flight (1: one
//! request, its reply, the next). For `adopt`s it starts one idle process
//! per client (its own, so a user other than root may adopt it) and adopts
//! it into `PREFIX-a` and `PREFIX-b` by turns. With `--ready FILE` it
//! creates FILE when those are up; with `--go FILE` it waits for FILE
//! before it connects. `--request LINE` sends that exact line over and
//! over (its id too): replies are then matched by their order only.
//!
//! A connection the daemon refuses (one `busy` line with id 0) is counted,
//! its requests are not (they never reached a request handler), and the
//! client connects again 10 ms later. A connection that closes under
//! requests in flight loses them; so does a request with no reply within
//! `--drain-s` (default 15) after the window.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{stopping, ArgError, Opts};
use crate::api::load::{
    encode, parse_reply, writes_for, Kind, KindStats, LoadReport, Mix, Planner, Writer,
};
use crate::overhead::idle::IdleHerd;

/// The options `api-load` takes.
pub(super) const OPTIONS: &[&str] = &[
    "--socket",
    "--clients",
    "--seconds",
    "--mix",
    "--request",
    "--depth",
    "--units",
    "--overlay",
    "--overlay-unit",
    "--ready",
    "--go",
    "--drain-s",
];

/// What the clients send.
#[derive(Clone, Debug, PartialEq)]
pub enum Load {
    /// The plan of a mix.
    Mix(Mix),
    /// One fixed line, over and over.
    Line(String),
}

/// The arguments of `api-load`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiLoadArgs {
    /// The daemon's socket.
    pub socket: PathBuf,
    /// Clients (threads, one connection each).
    pub clients: usize,
    /// The window, s.
    pub seconds: f64,
    /// What they send.
    pub load: Load,
    /// Requests in flight per client.
    pub depth: usize,
    /// Prefix of the units adopted into.
    pub units: String,
    /// The overlay and unit for `tune` and `report`.
    pub overlay: Option<(String, String)>,
    /// Created once ready.
    pub ready: Option<PathBuf>,
    /// Waited for before connecting.
    pub go: Option<PathBuf>,
    /// How long replies are waited for after the window, s.
    pub drain_s: f64,
}

impl ApiLoadArgs {
    pub(super) fn from_opts(o: &Opts) -> Result<Self, ArgError> {
        let load = match (o.values.get("--mix"), o.values.get("--request")) {
            (Some(_), Some(_)) => {
                return Err(o.bad("--request", "", "give --mix or --request, not both"))
            }
            (_, Some(line)) => {
                if line.contains('\n') {
                    return Err(o.bad("--request", line, "one line, without a newline"));
                }
                Load::Line(line.clone())
            }
            (Some(m), None) => Load::Mix(m.parse().map_err(|e: String| o.bad("--mix", m, &e))?),
            (None, None) => Load::Mix(Mix::Read),
        };
        let overlay = match (o.values.get("--overlay"), o.values.get("--overlay-unit")) {
            (Some(ov), Some(u)) => Some((ov.clone(), u.clone())),
            (None, None) => None,
            _ => return Err(o.bad("--overlay", "", "--overlay and --overlay-unit go together")),
        };
        Ok(Self {
            socket: o.path("--socket")?,
            clients: o.positive("--clients")?.unwrap_or(1),
            seconds: o.required("--seconds", o.positive("--seconds")?)?,
            load,
            depth: o.positive("--depth")?.unwrap_or(1),
            units: o
                .values
                .get("--units")
                .cloned()
                .unwrap_or_else(|| format!("bapi{}", std::process::id())),
            overlay,
            ready: o.values.get("--ready").map(PathBuf::from),
            go: o.values.get("--go").map(PathBuf::from),
            drain_s: o.positive("--drain-s")?.unwrap_or(15.0),
        })
    }
}

fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Waits for `go` (at most 120 s, or until stopped).
fn wait_go(go: &Path) -> io::Result<()> {
    let t0 = Instant::now();
    while !go.exists() {
        if stopping() {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(120) {
            return Err(io::Error::other(format!(
                "{} did not appear in 120 s",
                go.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// Runs the clients; the report as JSON.
pub fn api_load(a: &ApiLoadArgs) -> io::Result<serde_json::Value> {
    let adopting = matches!(a.load, Load::Mix(m) if m.writes());
    // The idle processes to adopt: this process's own, killed when the
    // herd is dropped (or with this thread: PR_SET_PDEATHSIG).
    let herd = if adopting {
        let h = IdleHerd::start(Path::new("/nonexistent"), &[], a.clients)
            .map_err(|e| io::Error::other(e.to_string()))?;
        Some(h)
    } else {
        None
    };
    let pids = herd.as_ref().map(IdleHerd::pids).unwrap_or_default();
    if let Some(r) = &a.ready {
        std::fs::write(r, b"")?;
    }
    if let Some(go) = &a.go {
        wait_go(go)?;
    }
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(a.seconds);
    let root = uid() == 0;
    let results: Vec<Client> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..a.clients)
            .map(|i| {
                let writer = Writer::new(
                    pids.get(i).copied(),
                    [format!("{}-a", a.units), format!("{}-b", a.units)],
                    a.overlay.clone(),
                );
                let planner = match &a.load {
                    Load::Mix(m) => Some(Planner::new(*m, writes_for(root, a.overlay.is_some()))),
                    Load::Line(_) => None,
                };
                s.spawn(move || {
                    let mut c = Client::new(a, planner, writer, deadline);
                    c.run();
                    c
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let window_s = deadline.duration_since(t0).as_secs_f64();
    drop(herd);
    let mut report = LoadReport {
        uid: uid(),
        mix: match &a.load {
            Load::Mix(m) => m.as_str().to_string(),
            Load::Line(_) => "raw".into(),
        },
        depth: a.depth,
        window_s,
        ..LoadReport::default()
    };
    for c in &results {
        report.merge(&c.report);
    }
    report.clients = a.clients;
    serde_json::to_value(&report).map_err(io::Error::other)
}

/// A request in flight.
struct InFlight {
    kind: String,
    id: u64,
    at: Instant,
}

/// One connection.
struct Conn {
    out: UnixStream,
    lines: BufReader<UnixStream>,
    buf: Vec<u8>,
}

/// What a read found.
enum Got {
    Line(Vec<u8>),
    Timeout,
    Closed(Option<io::Error>),
}

impl Conn {
    fn open(socket: &Path) -> io::Result<Self> {
        let out = UnixStream::connect(socket)?;
        out.set_read_timeout(Some(Duration::from_millis(100)))?;
        out.set_write_timeout(Some(Duration::from_secs(10)))?;
        let lines = BufReader::with_capacity(1 << 16, out.try_clone()?);
        Ok(Self {
            out,
            lines,
            buf: Vec::with_capacity(1 << 16),
        })
    }

    fn read(&mut self) -> Got {
        match self.lines.read_until(b'\n', &mut self.buf) {
            Ok(0) => Got::Closed(None),
            Ok(_) if self.buf.ends_with(b"\n") => {
                let mut line = std::mem::take(&mut self.buf);
                line.pop();
                Got::Line(line)
            }
            // The last line without its newline, then EOF.
            Ok(_) => Got::Line(std::mem::take(&mut self.buf)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Got::Timeout
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Got::Timeout,
            Err(e) => Got::Closed(Some(e)),
        }
    }
}

/// One client: its plan, its connection and its figures.
struct Client<'a> {
    a: &'a ApiLoadArgs,
    planner: Option<Planner>,
    writer: Writer,
    deadline: Instant,
    report: LoadReport,
    flight: VecDeque<InFlight>,
    next_id: u64,
    conn: Option<Conn>,
    connected_once: bool,
    /// The fixed line (with its newline) and its op.
    fixed: Option<(String, String)>,
}

impl<'a> Client<'a> {
    fn new(
        a: &'a ApiLoadArgs,
        planner: Option<Planner>,
        writer: Writer,
        deadline: Instant,
    ) -> Self {
        Self {
            a,
            planner,
            writer,
            deadline,
            report: LoadReport::default(),
            flight: VecDeque::new(),
            next_id: 1,
            conn: None,
            connected_once: false,
            fixed: match &a.load {
                Load::Line(line) => {
                    let op = serde_json::from_str::<serde_json::Value>(line)
                        .ok()
                        .and_then(|v| v.get("op")?.as_str().map(str::to_string))
                        .unwrap_or_else(|| "raw".into());
                    Some((format!("{line}\n"), op))
                }
                Load::Mix(_) => None,
            },
        }
    }

    fn stats(&mut self, kind: &str) -> &mut KindStats {
        self.report.kinds.entry(kind.to_string()).or_default()
    }

    fn sending(&self) -> bool {
        Instant::now() < self.deadline && !stopping()
    }

    /// The next line to send and its kind.
    fn next_line(&mut self) -> Option<(String, String, u64)> {
        let id = self.next_id;
        self.next_id += 1;
        match &mut self.planner {
            None => self
                .fixed
                .as_ref()
                .map(|(line, kind)| (line.clone(), kind.clone(), id)),
            Some(p) => {
                // A kind this client cannot send (no overlay, no process)
                // is skipped; the plan always holds a read or one it can.
                for _ in 0..16 {
                    let kind: Kind = p.next_kind();
                    if let Some(r) = self.writer.request(kind) {
                        return Some((encode(id, r), kind.as_str().to_string(), id));
                    }
                }
                None
            }
        }
    }

    fn run(&mut self) {
        let drain_end = self.deadline + Duration::from_secs_f64(self.a.drain_s);
        loop {
            if self.conn.is_none() {
                if !self.sending() {
                    break;
                }
                match Conn::open(&self.a.socket) {
                    Ok(c) => {
                        if self.connected_once {
                            self.report.reconnects += 1;
                        }
                        self.connected_once = true;
                        self.conn = Some(c);
                    }
                    Err(e) => {
                        self.report.connect_failures += 1;
                        self.report.note(format!("connect: {e}"));
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                }
            }
            while self.sending() && self.flight.len() < self.a.depth {
                if !self.send() {
                    break;
                }
            }
            if self.conn.is_none() {
                continue;
            }
            if self.flight.is_empty() {
                if self.sending() {
                    continue;
                }
                break;
            }
            let got = match &mut self.conn {
                Some(c) => c.read(),
                None => continue,
            };
            match got {
                Got::Line(line) => self.reply(&line),
                Got::Timeout => {
                    if Instant::now() >= drain_end {
                        let n = self.flight.len() as u64;
                        self.report.lost += n;
                        self.report.note(format!(
                            "{n} request(s) unanswered {} s after the window",
                            self.a.drain_s
                        ));
                        self.flight.clear();
                        break;
                    }
                }
                Got::Closed(e) => self.closed(e),
            }
        }
        self.conn = None;
    }

    /// Sends one request; `false` when the connection broke.
    fn send(&mut self) -> bool {
        let Some((line, kind, id)) = self.next_line() else {
            return false;
        };
        let Some(conn) = &mut self.conn else {
            return false;
        };
        let at = Instant::now();
        match conn.out.write_all(line.as_bytes()) {
            Ok(()) => {
                self.stats(&kind).sent += 1;
                self.flight.push_back(InFlight { kind, id, at });
                true
            }
            Err(e) => {
                // What the daemon wrote before it closed (a refusal) still
                // counts; the rest is lost.
                self.drain_closed(Some(e));
                false
            }
        }
    }

    /// The connection broke while writing: read what is left, then close.
    fn drain_closed(&mut self, e: Option<io::Error>) {
        let t0 = Instant::now();
        while self.conn.is_some() && t0.elapsed() < Duration::from_secs(1) {
            let got = match &mut self.conn {
                Some(c) => c.read(),
                None => break,
            };
            match got {
                Got::Line(line) => self.reply(&line),
                Got::Timeout => {}
                Got::Closed(_) => break,
            }
        }
        if self.conn.is_some() {
            self.closed(e);
        }
    }

    fn closed(&mut self, e: Option<io::Error>) {
        let n = self.flight.len() as u64;
        if n > 0 {
            self.report.lost += n;
            self.report.lost_at_close += n;
            self.report.note(format!(
                "the daemon closed a connection with {n} request(s) in flight{}",
                e.map(|e| format!(" ({e})")).unwrap_or_default()
            ));
        }
        self.flight.clear();
        self.conn = None;
    }

    fn reply(&mut self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let Some((id, result)) = parse_reply(line) else {
            self.report.unmatched += 1;
            let text = String::from_utf8_lossy(&line[..line.len().min(120)]).to_string();
            self.report.note(format!("not a reply: {text}"));
            return;
        };
        let refusal = id == 0 && result.as_ref().err().is_some_and(|c| c == "busy");
        if refusal && self.flight.front().is_none_or(|f| f.id != 0) {
            // Refused at the door: what was sent never reached a handler.
            self.report.refused += 1;
            let flight = std::mem::take(&mut self.flight);
            for f in flight {
                self.stats(&f.kind).sent -= 1;
            }
            self.conn = None;
            std::thread::sleep(Duration::from_millis(10));
            return;
        }
        let Some(f) = self.flight.pop_front() else {
            self.report.unmatched += 1;
            return;
        };
        if self.fixed.is_none() && id != f.id {
            self.report.mismatched += 1;
            self.report
                .note(format!("reply id {id} while request {} was oldest", f.id));
        }
        let us = u64::try_from(f.at.elapsed().as_micros()).unwrap_or(u64::MAX);
        let s = self.stats(&f.kind);
        s.answered += 1;
        s.latency.record(us);
        match result {
            Ok(()) => s.ok += 1,
            Err(code) => *s.errors.entry(code).or_insert(0) += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Worker;
    use super::*;

    fn p(args: &[&str]) -> Result<Worker, ArgError> {
        let v: Vec<String> = std::iter::once("api-load")
            .chain(args.iter().copied())
            .map(String::from)
            .collect();
        Worker::parse(&v)
    }

    #[test]
    fn parses_its_options() {
        let Worker::ApiLoad(a) = p(&[
            "--socket",
            "/s",
            "--clients",
            "4",
            "--seconds",
            "2",
            "--mix",
            "write",
            "--depth",
            "2",
            "--units",
            "w0",
            "--overlay",
            "bench",
            "--overlay-unit",
            "u001",
            "--go",
            "/g",
        ])
        .unwrap() else {
            panic!("not api-load")
        };
        assert_eq!(a.load, Load::Mix(Mix::Write));
        assert_eq!((a.clients, a.depth, a.seconds), (4, 2, 2.0));
        assert_eq!(a.overlay, Some(("bench".into(), "u001".into())));
        assert_eq!((a.go, a.ready, a.drain_s), (Some("/g".into()), None, 15.0));
        let Worker::ApiLoad(a) = p(&[
            "--socket",
            "/s",
            "--seconds",
            "1",
            "--request",
            r#"{"v":1,"id":1,"op":"status"}"#,
        ])
        .unwrap() else {
            panic!("not api-load")
        };
        assert_eq!(a.load, Load::Line(r#"{"v":1,"id":1,"op":"status"}"#.into()));
        assert_eq!(a.clients, 1);
        for bad in [
            &["--socket", "/s", "--seconds", "1", "--mix", "all"][..],
            &[
                "--socket",
                "/s",
                "--seconds",
                "1",
                "--mix",
                "read",
                "--request",
                "x",
            ],
            &["--socket", "/s", "--seconds", "1", "--overlay", "o"],
            &["--socket", "/s"],
            &["--seconds", "1"],
        ] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
    }

    /// A fake daemon on a socket pair: answers requests in order, refuses
    /// the first connection, and closes the third under a request.
    #[test]
    fn counts_replies_refusals_and_losses() {
        use std::os::unix::net::UnixListener;
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s");
        let listener = UnixListener::bind(&socket).unwrap();
        let server = std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { return };
                if n == 0 {
                    let _ = stream.write_all(
                        b"{\"v\":1,\"id\":0,\"err\":{\"code\":\"busy\",\"message\":\"full\"}}\n",
                    );
                    continue;
                }
                let mut r = BufReader::new(stream.try_clone().unwrap());
                let mut answered = 0;
                let mut line = String::new();
                while r.read_line(&mut line).unwrap_or(0) > 0 {
                    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                    line.clear();
                    if n == 1 && answered == 3 {
                        break; // closes under a request
                    }
                    let id = v["id"].as_u64().unwrap();
                    let reply = if answered % 2 == 0 {
                        format!("{{\"v\":1,\"id\":{id},\"ok\":{{\"kind\":\"status\"}}}}\n")
                    } else {
                        format!("{{\"v\":1,\"id\":{id},\"err\":{{\"code\":\"busy\",\"message\":\"slow\"}}}}\n")
                    };
                    answered += 1;
                    if stream.write_all(reply.as_bytes()).is_err() {
                        break;
                    }
                }
            }
        });
        let a = ApiLoadArgs {
            socket: socket.clone(),
            clients: 1,
            seconds: 0.3,
            load: Load::Mix(Mix::Read),
            depth: 2,
            units: "w".into(),
            overlay: None,
            ready: None,
            go: None,
            drain_s: 1.0,
        };
        let report: LoadReport = serde_json::from_value(api_load(&a).unwrap()).unwrap();
        drop(server);
        let st = &report.kinds["status"];
        assert_eq!(report.refused, 1, "{report:?}");
        assert!(
            report.lost >= 1 && report.lost == report.lost_at_close,
            "{report:?}"
        );
        assert_eq!(st.sent, st.answered + report.lost, "{report:?}");
        assert_eq!(st.ok + st.errors_of("busy"), st.answered);
        assert!(st.answered > 3 && st.errors_of("busy") > 0, "{report:?}");
        assert_eq!((report.mismatched, report.unmatched), (0, 0));
        assert!(report.reconnects >= 2, "{report:?}");
        assert_eq!(report.mix, "read");
    }
}
