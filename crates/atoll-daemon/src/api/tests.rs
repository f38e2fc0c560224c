//! The API server over a real socket in a temp dir, with a fake control loop.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::sync::mpsc::Receiver;
use std::time::Instant;

use atoll_proto::{decode_response, Reply, Request};

use super::*;

/// A fake control loop: answers `adopt` by echoing the unit and island,
/// `stop` with `stopping`, `why` by never answering (the reply sender is
/// kept), and reports every caller it sees.
fn fake_loop(rx: Receiver<Command>, callers: Sender<Caller>) -> JoinHandle<()> {
    thread::spawn(move || {
        let mut held = Vec::new();
        for cmd in rx {
            let Command::Api {
                caller,
                id,
                request,
                reply,
            } = cmd
            else {
                continue;
            };
            let _ = callers.send(caller);
            let answer = match request {
                Request::Adopt {
                    unit, island, pid, ..
                } => Reply::Adopted {
                    unit,
                    island: island.unwrap_or_else(|| format!("pid{pid}")),
                    created: true,
                },
                Request::Stop { .. } => Reply::Stopping,
                Request::Why { .. } => {
                    held.push(reply);
                    continue;
                }
                Request::Overlays {} => Reply::Overlays {
                    overlays: Vec::new(),
                },
                Request::Coordinate { .. }
                | Request::Report { .. }
                | Request::AppRegister { .. }
                | Request::AppPoll { .. }
                | Request::AppReport { .. }
                | Request::AppDone { .. }
                | Request::Apps {}
                | Request::UnitAdd { .. }
                | Request::UnitSet { .. }
                | Request::UnitRm { .. }
                | Request::OverlayAdd { .. }
                | Request::OverlaySet { .. }
                | Request::OverlayRm { .. }
                | Request::OverlayShow { .. }
                | Request::ConfigDump {}
                | Request::Reload {} => Reply::Stopping,
                Request::Status {} => {
                    // Answer with a wrong id: the server must fix it.
                    let _ = reply.send(ResponseEnvelope::ok(id + 1000, Reply::Stopping));
                    continue;
                }
            };
            let _ = reply.send(ResponseEnvelope::ok(id, answer));
        }
    })
}

struct Server {
    dir: tempfile::TempDir,
    path: PathBuf,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    callers: Receiver<Caller>,
}

impl Server {
    fn start(opts: ServeOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/atoll.sock");
        let listener = bind(&path).unwrap();
        let (tx, rx) = mpsc::channel();
        let (ctx, callers) = mpsc::channel();
        fake_loop(rx, ctx);
        let stop = Arc::new(AtomicBool::new(false));
        let handle = serve_with(listener, tx, Arc::clone(&stop), opts, None);
        Self {
            dir,
            path,
            stop,
            handle: Some(handle),
            callers,
        }
    }

    fn connect(&self) -> Conn {
        let s = UnixStream::connect(&self.path).unwrap();
        Conn {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
        }
    }

    fn shut(mut self) {
        self.stop.store(true, Ordering::Release);
        self.handle.take().unwrap().join().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

fn opts() -> ServeOptions {
    ServeOptions {
        tick: Duration::from_millis(20),
        ..Default::default()
    }
}

struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Conn {
    fn send(&mut self, text: &str) {
        self.writer.write_all(text.as_bytes()).unwrap();
    }

    fn recv(&mut self) -> Option<ResponseEnvelope> {
        let mut line = String::new();
        // A server that closes with our input unread makes the next read
        // fail with ECONNRESET (after the data it sent): both mean closed.
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        Some(decode_response(&line).unwrap())
    }

    fn err_code(&mut self) -> (u64, ErrorCode) {
        let r = self.recv().expect("a reply");
        let e = r.err.expect("an error reply");
        (r.id, e.code)
    }
}

#[test]
fn bind_makes_the_directory_and_a_world_writable_socket() {
    let s = Server::start(opts());
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&s.path), 0o666);
    assert_eq!(mode(&s.dir.path().join("run")), 0o755);
    s.shut();
}

#[test]
fn the_caller_is_identified_by_peer_credentials() {
    let s = Server::start(opts());
    let mut c = s.connect();
    c.send("{\"v\":1,\"id\":1,\"op\":\"stop\"}\n");
    assert_eq!(c.recv().unwrap().into_result().unwrap(), Reply::Stopping);
    let caller = s.callers.recv().unwrap();
    // SAFETY: geteuid/getegid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    assert_eq!(caller.uid, uid);
    assert_eq!(caller.gid, gid);
    assert_eq!(caller.pid, std::process::id() as i32);
    s.shut();
}

#[test]
fn pipelined_requests_are_answered_in_order_with_their_ids() {
    let s = Server::start(opts());
    let mut c = s.connect();
    c.send(concat!(
        "{\"v\":1,\"id\":1,\"op\":\"adopt\",\"unit\":\"a\",\"pid\":10}\n",
        "\n",
        "{\"v\":1,\"id\":2,\"op\":\"adopt\",\"unit\":\"b\",\"pid\":11,\"island\":\"web\"}\r\n",
        "{\"v\":1,\"id\":3,\"op\":\"status\"}\n",
        "{\"v\":1,\"id\":4,\"op\":\"adopt\",\"unit\":\"c\",\"pid\":12}\n",
    ));
    let adopted = |c: &mut Conn| {
        let r = c.recv().unwrap();
        match r.clone().into_result().unwrap() {
            Reply::Adopted { unit, island, .. } => (r.id, unit, island),
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(adopted(&mut c), (1, "a".into(), "pid10".into()));
    assert_eq!(adopted(&mut c), (2, "b".into(), "web".into()));
    assert_eq!(c.recv().unwrap().id, 3, "the server fixes the loop's id");
    assert_eq!(adopted(&mut c), (4, "c".into(), "pid12".into()));
    s.shut();
}

#[test]
fn garbage_and_wrong_versions_are_answered_without_the_loop() {
    let s = Server::start(opts());
    let mut c = s.connect();
    c.send("hello\n");
    assert_eq!(c.err_code(), (0, ErrorCode::BadRequest));
    c.send("{\"v\":1,\"id\":9,\"op\":\"reboot\"}\n");
    assert_eq!(c.err_code(), (9, ErrorCode::BadRequest));
    c.send("{\"v\":1,\"id\":10,\"op\":\"status\",\"uid\":0}\n");
    assert_eq!(c.err_code(), (10, ErrorCode::BadRequest));
    c.send("{\"v\":2,\"id\":5,\"op\":\"status\"}\n");
    assert_eq!(c.err_code(), (5, ErrorCode::UnsupportedVersion));
    c.send("{\"v\":2,\"id\":6,\"op\":\"teleport\"}\n");
    assert_eq!(c.err_code(), (6, ErrorCode::UnsupportedVersion));
    c.send("{\"v\":\"1\",\"id\":7,\"op\":\"status\"}\n");
    assert_eq!(c.err_code(), (7, ErrorCode::UnsupportedVersion));
    c.writer.write_all(b"\xff\xfe\n").unwrap();
    assert_eq!(c.err_code(), (0, ErrorCode::BadRequest));
    // The connection still works, and the loop saw none of the above.
    c.send("{\"v\":1,\"id\":8,\"op\":\"stop\"}\n");
    assert_eq!(c.recv().unwrap().id, 8);
    s.callers.recv().unwrap();
    assert!(s.callers.try_recv().is_err());
    s.shut();
}

#[test]
fn an_oversize_line_is_answered_and_the_connection_closed() {
    let s = Server::start(opts());
    let mut c = s.connect();
    let big = format!(
        "{{\"v\":1,\"id\":1,\"op\":\"adopt\",\"unit\":\"{}\",\"pid\":1}}\n",
        "x".repeat(MAX_LINE)
    );
    c.send(&big);
    let r = c.recv().unwrap();
    assert_eq!(r.err.unwrap().code, ErrorCode::BadRequest);
    assert!(c.recv().is_none(), "the connection is closed");
    // A line of exactly the limit is still read (and refused by shape).
    let mut c = s.connect();
    let exact = format!("\"{}\"\n", "y".repeat(MAX_LINE - 2));
    c.send(&exact);
    assert_eq!(c.err_code(), (0, ErrorCode::BadRequest));
    c.send("{\"v\":1,\"id\":2,\"op\":\"stop\"}\n");
    assert_eq!(c.recv().unwrap().id, 2);
    s.shut();
}

#[test]
fn a_silent_loop_times_out_and_a_closed_loop_means_shutting_down() {
    let s = Server::start(ServeOptions {
        reply_timeout: Duration::from_millis(50),
        ..opts()
    });
    let mut c = s.connect();
    c.send("{\"v\":1,\"id\":4,\"op\":\"why\"}\n");
    assert_eq!(c.err_code(), (4, ErrorCode::Backend));
    s.shut();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sock");
    let listener = bind(&path).unwrap();
    let (tx, rx) = mpsc::channel::<Command>();
    drop(rx);
    let stop = Arc::new(AtomicBool::new(false));
    let h = serve_with(listener, tx, Arc::clone(&stop), opts(), None);
    let s = UnixStream::connect(&path).unwrap();
    let mut c = Conn {
        reader: BufReader::new(s.try_clone().unwrap()),
        writer: s,
    };
    c.send("{\"v\":1,\"id\":5,\"op\":\"status\"}\n");
    assert_eq!(c.err_code(), (5, ErrorCode::ShuttingDown));
    stop.store(true, Ordering::Release);
    h.join().unwrap();
}

#[test]
fn connections_over_the_cap_are_refused_with_a_reply() {
    let s = Server::start(ServeOptions {
        max_connections: 1,
        ..opts()
    });
    let mut a = s.connect();
    a.send("{\"v\":1,\"id\":1,\"op\":\"stop\"}\n");
    assert_eq!(a.recv().unwrap().id, 1);
    let mut b = s.connect();
    assert_eq!(b.err_code(), (0, ErrorCode::Busy));
    assert!(b.recv().is_none());
    drop(a);
    s.shut();
}

#[test]
fn blank_lines_keep_nothing_alive_and_a_slow_line_is_cut() {
    let s = Server::start(ServeOptions {
        idle_timeout: Duration::from_millis(300),
        request_deadline: Duration::from_millis(300),
        ..opts()
    });
    // Blank lines every 100 ms: closed after the idle timeout all the same.
    let mut c = s.connect();
    let started = Instant::now();
    let mut closed = false;
    for _ in 0..20 {
        if c.writer.write_all(b"\n").is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(closed || c.recv().is_none(), "closed");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "not kept alive"
    );
    // A request dribbled a byte at a time: cut at the deadline.
    let mut d = s.connect();
    for b in "{\"v\":1,\"id\":1,".bytes() {
        if d.writer.write_all(&[b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(40));
    }
    assert!(d.recv().is_none(), "closed before the line was done");
    s.shut();
}

fn shared(
    board: Option<crate::publish::Board>,
    rate: f64,
    burst: f64,
) -> (Shared, Receiver<Caller>) {
    let (tx, rx) = mpsc::channel();
    let (ctx, callers) = mpsc::channel();
    fake_loop(rx, ctx);
    let opts = ServeOptions {
        rate,
        burst,
        ..opts()
    };
    (
        Shared {
            tx,
            stop: Arc::new(AtomicBool::new(false)),
            opts,
            board,
            rate: limits::RateLimiter::new(rate, burst),
        },
        callers,
    )
}

#[test]
fn changing_requests_are_paced_per_uid_and_root_is_not() {
    let (shared, _callers) = shared(None, 1.0, 2.0);
    let user = Caller {
        uid: 1000,
        gid: 1000,
        pid: 7,
    };
    let adopt = "{\"v\":1,\"id\":3,\"op\":\"adopt\",\"unit\":\"x\",\"pid\":7}";
    for _ in 0..2 {
        assert!(answer_as(adopt.as_bytes(), user, &shared).1.ok.is_some());
    }
    let (op, r) = answer_as(adopt.as_bytes(), user, &shared);
    assert_eq!(crate::telemetry::requests::OPS[op], "adopt");
    let e = r.err.expect("paced");
    assert_eq!((r.id, e.code), (3, ErrorCode::Busy));
    assert!(e.message.contains("uid 1000"), "{}", e.message);
    let other = Caller { uid: 1001, ..user };
    assert!(answer_as(adopt.as_bytes(), other, &shared).1.ok.is_some());
    let root = Caller { uid: 0, ..user };
    for _ in 0..5 {
        assert!(answer_as(adopt.as_bytes(), root, &shared).1.ok.is_some());
    }
}

#[test]
fn reads_come_from_the_board_and_never_reach_the_loop() {
    let log = crate::decisions::DecisionLog::default();
    let board = crate::publish::Board::new(log.reader());
    let status = atoll_proto::StatusReport {
        version: "t".into(),
        backend: "sim".into(),
        service_manager: None,
        root: "r".into(),
        root_info: None,
        epoch_ms: 30,
        uptime_ms: 0,
        epochs: 42,
        host: atoll_proto::HostStatus {
            cpus: Default::default(),
            mems: Default::default(),
            adopt_all: false,
            processes: 0,
            stats: Default::default(),
        },
        islands: vec![],
        units: vec![],
        fallbacks: vec![],
        isolation_mode: None,
        accounts: None,
        comm: None,
        discovery: None,
        pressure: None,
        pace: None,
        coord_restored: None,
        energy: None,
        network: Vec::new(),
        slo: Vec::new(),
        warnings: Vec::new(),
    };
    board.publish(
        crate::publish::View::default(),
        Some((status, crate::telemetry::Telemetry::default())),
    );
    let (shared, callers) = shared(Some(board), 1.0, 1.0);
    let user = Caller {
        uid: 1000,
        gid: 1000,
        pid: 7,
    };
    // Many more reads than the rate allows: none is paced, none reaches
    // the loop (which would answer `status` with a wrong id).
    for id in 0..50 {
        let line = format!("{{\"v\":1,\"id\":{id},\"op\":\"status\"}}");
        let (op, r) = answer_as(line.as_bytes(), user, &shared);
        assert_eq!(crate::telemetry::requests::OPS[op], "status");
        assert_eq!(r.id, id);
        match r.ok {
            Some(Reply::Status(s)) => assert_eq!(s.epochs, 42),
            other => panic!("{other:?}"),
        }
        let r = answer_as(b"{\"v\":1,\"id\":1,\"op\":\"why\"}", user, &shared).1;
        assert!(matches!(r.ok, Some(Reply::Decisions { .. })), "{r:?}");
    }
    assert!(callers.try_recv().is_err(), "a read reached the loop");
    // An application nobody registered: not found, from the board.
    let r = answer_as(
        b"{\"v\":1,\"id\":2,\"op\":\"app_poll\",\"app\":9}",
        user,
        &shared,
    )
    .1;
    assert_eq!(r.err.unwrap().code, ErrorCode::NotFound);
}

#[test]
fn stopping_ends_connections_and_removes_the_socket() {
    let s = Server::start(opts());
    let mut c = s.connect();
    c.send("{\"v\":1,\"id\":1,\"op\":\"stop\"}\n");
    assert_eq!(c.recv().unwrap().id, 1);
    let path = s.path.clone();
    s.shut(); // joins the accept thread, which joins the connection's
    assert!(c.recv().is_none());
    assert!(!path.exists());
}

#[test]
fn a_stale_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("atoll.sock");
    drop(UnixListener::bind(&path).unwrap()); // leaves the file, nobody listens
    assert!(path.exists());
    let l = bind(&path).unwrap();
    UnixStream::connect(&path).unwrap();
    drop(l);
}

#[test]
fn a_live_socket_or_a_non_socket_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("atoll.sock");
    let _live = bind(&path).unwrap();
    let e = bind(&path).unwrap_err();
    assert!(matches!(e, ApiError::InUse { .. }), "{e}");
    assert!(e.to_string().contains("atoll.sock"), "{e}");
    assert!(path.exists(), "the live socket is left alone");

    let file = dir.path().join("file");
    fs::write(&file, "keep me").unwrap();
    assert!(matches!(bind(&file), Err(ApiError::NotASocket { .. })));
    assert_eq!(fs::read_to_string(&file).unwrap(), "keep me");
}

#[test]
fn answer_takes_the_id_from_an_unparseable_request_when_it_can() {
    let (tx, _rx) = mpsc::channel();
    let caller = Caller {
        uid: 1000,
        gid: 1000,
        pid: 1,
    };
    let r = answer(
        br#"{"v":1,"id":77,"op":"why","limit":"x"}"#,
        caller,
        &tx,
        Duration::from_millis(1),
    );
    assert_eq!(r.id, 77);
    let e = r.err.unwrap();
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(
        e.message.contains("limit") || e.message.contains("invalid"),
        "{}",
        e.message
    );
}

#[test]
fn every_reply_is_counted_by_op_and_result() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("atoll.sock");
    let listener = bind(&path).unwrap();
    let (tx, rx) = mpsc::channel();
    let (ctx, _callers) = mpsc::channel();
    fake_loop(rx, ctx);
    let log = crate::decisions::DecisionLog::default();
    let board = crate::publish::Board::new(log.reader());
    let stop = Arc::new(AtomicBool::new(false));
    let h = serve_with(listener, tx, Arc::clone(&stop), opts(), Some(board.clone()));
    let s = UnixStream::connect(&path).unwrap();
    let mut c = Conn {
        reader: BufReader::new(s.try_clone().unwrap()),
        writer: s,
    };
    c.send("not json\n");
    c.send("{\"v\":1,\"id\":1,\"op\":\"adopt\",\"unit\":\"u\",\"pid\":5}\n");
    c.send("{\"v\":9,\"id\":2,\"op\":\"adopt\",\"unit\":\"u\",\"pid\":5}\n");
    // Answered from the board: no such application.
    c.send("{\"v\":1,\"id\":3,\"op\":\"app_poll\",\"app\":9}\n");
    for _ in 0..4 {
        c.recv().expect("a reply");
    }
    stop.store(true, Ordering::Release);
    h.join().unwrap();
    assert_eq!(
        board.request_counters().snapshot(),
        [
            ("adopt", "ok", 1),
            ("adopt", "unsupported_version", 1),
            ("app_poll", "not_found", 1),
            ("invalid", "bad_request", 1),
        ]
    );
}
