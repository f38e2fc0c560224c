//! The local API server: a Unix socket speaking [`atoll_proto`].
//!
//! This layer only turns requests into typed commands. Each connection gets
//! a thread that reads newline-delimited requests, answers what it can
//! without the control loop (unparseable lines, unknown fields, a wrong
//! protocol version), and sends every valid request to the loop as
//! [`Command::Api`] with the caller's identity from `SO_PEERCRED`, then waits
//! for the loop's one reply and writes it. Requests on one connection are
//! answered in order, so a client may pipeline them.
//!
//! Authorization is the control loop's job and rests on the peer's uid, so
//! the socket is world-connectable (mode 0666): anyone may ask, the loop
//! decides.
//!
//! Reads (`status`, `why`, `overlays`, `apps`, `app_poll`) are answered
//! here from what the loop publishes ([`crate::publish`]): a flood of them
//! never reaches the loop. The others go to the loop, paced per uid.
//!
//! Limits (see [`ServeOptions`]): at most `max_connections` connections at
//! once and `max_per_uid` per user, the last `root_reserve` only for root
//! (more are answered with one error line and closed); lines of at most
//! [`MAX_LINE`] bytes (a longer one is answered and the connection closed);
//! a connection that sends no request (blank lines do not count) for
//! `idle_timeout`, or takes longer than `request_deadline` to finish a
//! line, is closed; requests that change something are paced per uid
//! (`rate` a second, `burst` at once; root is not paced); and a loop that
//! does not answer in time yields an error reply instead of a hung client.

mod limits;
mod net;
mod reads;

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use atoll_proto::{ErrorCode, Request, ResponseEnvelope, MAX_LINE, PROTOCOL_VERSION};
pub(crate) use limits::{Admission, Admitted};
pub(crate) use net::{accept_loop as serve_connections, LineReader, Next};

use crate::command::{Caller, Command};
use crate::publish::Board;
use crate::telemetry::requests;

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The socket's directory could not be created.
    #[error("create socket directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Something that is not a socket is in the way.
    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// A daemon answers on the socket already.
    #[error("another atoll daemon is already listening on {path}")]
    InUse {
        /// The socket.
        path: PathBuf,
    },
    /// The existing socket could not be examined.
    #[error("probe existing socket {path}: {source}")]
    Probe {
        /// The socket.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A stale socket could not be removed.
    #[error("remove stale socket {path}: {source}")]
    RemoveStale {
        /// The socket.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `bind` failed.
    #[error("bind {path}: {source}")]
    Bind {
        /// The socket.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The socket's mode could not be set.
    #[error("chmod 0666 {path}: {source}")]
    Chmod {
        /// The socket.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// Creates the socket at `path`: makes a missing parent directory (mode
/// 0755), removes a stale socket file only if nothing answers on it (a
/// daemon that answers means refusal), binds, and sets mode 0666.
pub fn bind(path: &Path) -> Result<UnixListener, ApiError> {
    let owned = || path.to_path_buf();
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.exists() {
            let create = fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)
                .and_then(|()| fs::set_permissions(parent, fs::Permissions::from_mode(0o755)));
            create.map_err(|source| ApiError::CreateDir {
                path: parent.to_path_buf(),
                source,
            })?;
        }
    }
    match fs::symlink_metadata(path) {
        Ok(md) if !md.file_type().is_socket() => {
            return Err(ApiError::NotASocket { path: owned() })
        }
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => return Err(ApiError::InUse { path: owned() }),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => match fs::remove_file(path) {
                Ok(()) => tracing::info!(path = %path.display(), "removed stale socket"),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ApiError::RemoveStale {
                        path: owned(),
                        source,
                    })
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(ApiError::Probe {
                    path: owned(),
                    source,
                })
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(ApiError::Probe {
                path: owned(),
                source,
            })
        }
    }
    let listener = UnixListener::bind(path).map_err(|source| {
        if source.kind() == io::ErrorKind::AddrInUse {
            ApiError::InUse { path: owned() }
        } else {
            ApiError::Bind {
                path: owned(),
                source,
            }
        }
    })?;
    if let Err(source) = fs::set_permissions(path, fs::Permissions::from_mode(0o666)) {
        let _ = fs::remove_file(path);
        return Err(ApiError::Chmod {
            path: owned(),
            source,
        });
    }
    Ok(listener)
}

/// Limits and timeouts of the server. The defaults suit production; tests
/// shorten them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServeOptions {
    /// Most connections served at once.
    pub max_connections: usize,
    /// Most connections of one uid (root: no ceiling but the total).
    pub max_per_uid: usize,
    /// Connections only root may take when the rest are in use.
    pub root_reserve: usize,
    /// How often blocked threads look at the stop flag.
    pub tick: Duration,
    /// A connection with no complete request for this long is closed
    /// (blank lines are no request).
    pub idle_timeout: Duration,
    /// A request line must be complete this long after its first byte.
    pub request_deadline: Duration,
    /// How long a request waits for the control loop's reply.
    pub reply_timeout: Duration,
    /// How long writing a reply may block.
    pub write_timeout: Duration,
    /// Requests that change something, per second per uid (root: any).
    pub rate: f64,
    /// ... and at once.
    pub burst: f64,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_connections: 64,
            max_per_uid: 8,
            root_reserve: 4,
            tick: Duration::from_millis(200),
            idle_timeout: Duration::from_secs(30),
            request_deadline: Duration::from_secs(5),
            reply_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(5),
            rate: 100.0,
            burst: 200.0,
        }
    }
}

/// Serves the API on `listener` with [`ServeOptions::default`] until `stop`
/// is set, reads answered from `board`; see [`serve_with`].
pub fn serve(
    listener: UnixListener,
    tx: Sender<Command>,
    stop: Arc<AtomicBool>,
    board: Board,
) -> JoinHandle<()> {
    serve_with(listener, tx, stop, ServeOptions::default(), Some(board))
}

/// Serves the API on `listener` until `stop` is set: one thread per
/// connection, reads answered from `board` (without one, everything goes
/// to the loop), the rest sent to the control loop through `tx`. The
/// returned thread ends after every connection thread has (within about
/// one [`ServeOptions::tick`] of `stop`, plus any reply being waited for)
/// and then removes the socket file if it is still the one it served.
pub fn serve_with(
    listener: UnixListener,
    tx: Sender<Command>,
    stop: Arc<AtomicBool>,
    opts: ServeOptions,
    board: Option<Board>,
) -> JoinHandle<()> {
    thread::Builder::new()
        .name("atoll-api".into())
        .spawn(move || accept_loop(listener, tx, stop, opts, board))
        .expect("spawn the API thread")
}

/// A peer's uid, as admission counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Uid(u32);

impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "uid {}", self.0)
    }
}

/// What every connection of the server shares.
#[derive(Clone)]
struct Shared {
    tx: Sender<Command>,
    stop: Arc<AtomicBool>,
    opts: ServeOptions,
    board: Option<Board>,
    rate: limits::RateLimiter,
}

fn accept_loop(
    listener: UnixListener,
    tx: Sender<Command>,
    stop: Arc<AtomicBool>,
    opts: ServeOptions,
    board: Option<Board>,
) {
    let socket = listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(Path::to_path_buf))
        .and_then(|p| fs::metadata(&p).ok().map(|md| (p, md.dev(), md.ino())));
    let admission: Admission<Uid> =
        Admission::new(opts.max_connections, opts.max_per_uid, opts.root_reserve);
    let shared = Shared {
        tx,
        stop: Arc::clone(&stop),
        opts,
        board,
        rate: limits::RateLimiter::new(opts.rate, opts.burst),
    };
    serve_connections(
        &listener,
        "api",
        opts.tick,
        &stop,
        |stream: &UnixStream| {
            let caller = net::peer_credentials(stream).map_err(|e| e.to_string())?;
            let admitted = admission
                .admit(Uid(caller.uid), caller.is_root())
                .map_err(|e| e.to_string())?;
            Ok((admitted, caller))
        },
        |stream, why| refuse(stream, &opts, &why),
        move |stream, (_, caller): &(Admitted<Uid>, Caller)| connection(stream, *caller, &shared),
    );
    if let Some((path, dev, ino)) = socket {
        let same = fs::metadata(&path).is_ok_and(|md| md.dev() == dev && md.ino() == ino);
        if same {
            let _ = fs::remove_file(&path);
        }
    }
}

/// Answers a connection that is not admitted with one error line and
/// closes it.
fn refuse(mut stream: UnixStream, opts: &ServeOptions, why: &str) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(opts.write_timeout));
    let reply = ResponseEnvelope::err(0, ErrorCode::Busy, format!("{why}; try again later"));
    let _ = stream.write_all(atoll_proto::encode(&reply).as_bytes());
}

/// Serves one connection until EOF, an error, idleness, a line that takes
/// too long, or `stop`.
fn connection(stream: UnixStream, caller: Caller, shared: &Shared) {
    let opts = &shared.opts;
    if let Err(e) = setup(&stream, opts) {
        tracing::warn!(error = %e, "API connection: cannot set it up");
        return;
    }
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut out = stream;
    let mut lines = LineReader::new(read_half, MAX_LINE);
    let mut last = Instant::now();
    loop {
        let reply = match lines.next() {
            Next::Line(line) => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    // Not a request: it keeps nothing alive.
                    continue;
                }
                last = Instant::now();
                let (op, reply) = if shared.stop.load(Ordering::Acquire) {
                    let reply = ResponseEnvelope::err(
                        request_id(&line),
                        ErrorCode::ShuttingDown,
                        "the daemon is shutting down",
                    );
                    (requests::op_index_of_line(&line), reply)
                } else {
                    answer_as(&line, caller, shared)
                };
                if let Some(board) = &shared.board {
                    board.request_counters().count(op, &reply);
                }
                reply
            }
            Next::TooLong(len) => {
                let reply = ResponseEnvelope::err(
                    0,
                    ErrorCode::BadRequest,
                    format!(
                        "request line of {len}+ bytes is longer than the limit of {MAX_LINE}; closing the connection"
                    ),
                );
                if let Some(board) = &shared.board {
                    board.request_counters().count(requests::INVALID, &reply);
                }
                let _ = out.write_all(atoll_proto::encode(&reply).as_bytes());
                return;
            }
            Next::Tick => {
                let started = lines.partial_since();
                if shared.stop.load(Ordering::Acquire)
                    || last.elapsed() >= opts.idle_timeout
                    || started.is_some_and(|t| t.elapsed() >= opts.request_deadline)
                {
                    return;
                }
                continue;
            }
            Next::Eof => return,
            Next::Failed(e) => {
                tracing::debug!(error = %e, "API connection: read failed");
                return;
            }
        };
        if let Err(e) = out.write_all(atoll_proto::encode(&reply).as_bytes()) {
            tracing::debug!(error = %e, "API connection: write failed");
            return;
        }
    }
}

fn setup(stream: &UnixStream, opts: &ServeOptions) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(opts.tick))?;
    stream.set_write_timeout(Some(opts.write_timeout))
}

/// The `id` of a line that is a JSON object with a numeric `id`, else 0.
fn request_id(line: &[u8]) -> u64 {
    serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("id").and_then(serde_json::Value::as_u64))
        .unwrap_or(0)
}

/// Longest error message echoed to a client: parser errors may quote the
/// offending value, which may be most of a 64 KiB line.
const MAX_MESSAGE: usize = 512;

fn clip(mut s: String) -> String {
    if s.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

/// Answers one request line for `caller`: reads from the board, changes
/// through the loop (paced). Returns the reply with the request's
/// operation (an index in [`requests::OPS`]).
fn answer_as(line: &[u8], caller: Caller, shared: &Shared) -> (usize, ResponseEnvelope) {
    let envelope = match decode(line) {
        Ok(e) => e,
        Err((op, reply)) => {
            net::serve_urgently(false);
            return (op, *reply);
        }
    };
    let op = requests::op_index(&envelope.request);
    (op, answer_request(envelope, caller, shared))
}

/// Answers a decoded request (see [`answer_as`]).
fn answer_request(
    envelope: atoll_proto::RequestEnvelope,
    caller: Caller,
    shared: &Shared,
) -> ResponseEnvelope {
    let id = envelope.id;
    // A coordination message is what an application waits on (a trigger's
    // boost): it is served at the loop's priority, everything else at
    // SERVER_NICE (see `net::serve_urgently`), so a flood of reads or
    // refused requests still yields to the loop.
    let urgent = matches!(envelope.request, Request::Coordinate { .. });
    if !urgent {
        net::serve_urgently(false);
    }
    if let Some(board) = &shared.board {
        let wake = || {
            let _ = shared.tx.send(Command::Refresh);
        };
        if let Some(reply) = reads::answer(board, &wake, caller, &envelope.request) {
            return match reply {
                Ok(r) => ResponseEnvelope::ok(id, r),
                Err((code, message)) => ResponseEnvelope::err(id, code, message),
            };
        }
    }
    if !caller.is_root() {
        if let Err(wait) = shared.rate.take(caller.uid, Instant::now()) {
            net::serve_urgently(false);
            return ResponseEnvelope::err(
                id,
                ErrorCode::Busy,
                format!(
                    "uid {} sends more than {} requests a second; try again in {} ms",
                    caller.uid,
                    shared.opts.rate,
                    wait.as_millis().max(1)
                ),
            );
        }
    }
    if urgent {
        net::serve_urgently(true);
    }
    let timeout = match envelope.request {
        // Teardown may take a while (groups whose tasks are still exiting).
        Request::Stop { wait: true } => shared.opts.reply_timeout.max(STOP_TIMEOUT),
        _ => shared.opts.reply_timeout,
    };
    ask_loop(envelope, caller, &shared.tx, timeout)
}

/// How long a `stop` that waits for teardown waits.
const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// A request line that was not answered: the operation it names (an index
/// in [`requests::OPS`]) and the error reply.
type Unanswered = (usize, Box<ResponseEnvelope>);

/// Decodes a request line (read once, see [`atoll_proto::decode_request`]),
/// or the error reply for it. A request of another protocol version is
/// answered "unsupported version", also when it does not decode as one of
/// this version's (a newer client's may not); a line that does not decode
/// is read again, loosely, only to name its `id`, `v` and `op` in the
/// error.
fn decode(line: &[u8]) -> Result<atoll_proto::RequestEnvelope, Unanswered> {
    let Ok(text) = std::str::from_utf8(line) else {
        let reply = ResponseEnvelope::err(0, ErrorCode::BadRequest, "request is not UTF-8");
        return Err((requests::INVALID, Box::new(reply)));
    };
    let unsupported = |id: u64, v: &str| {
        Box::new(ResponseEnvelope::err(
            id,
            ErrorCode::UnsupportedVersion,
            format!(
                "this daemon speaks protocol version {PROTOCOL_VERSION}; the request has v={v}"
            ),
        ))
    };
    let e = match atoll_proto::decode_request(text) {
        Ok(env) if env.v == PROTOCOL_VERSION => return Ok(env),
        Ok(env) => {
            let op = requests::op_index(&env.request);
            return Err((op, unsupported(env.id, &env.v.to_string())));
        }
        Err(e) => e,
    };
    let loose: Option<serde_json::Value> = serde_json::from_str(text).ok();
    let get = |k: &str| loose.as_ref().and_then(|v| v.get(k));
    let id = get("id").and_then(serde_json::Value::as_u64).unwrap_or(0);
    let op = requests::op_index_of_name(get("op").and_then(serde_json::Value::as_str));
    match get("v") {
        Some(v) if v.as_u64() != Some(u64::from(PROTOCOL_VERSION)) => {
            Err((op, unsupported(id, &v.to_string())))
        }
        _ => {
            let reply = ResponseEnvelope::err(id, ErrorCode::BadRequest, clip(e.to_string()));
            Err((op, Box::new(reply)))
        }
    }
}

/// Answers one request line through the control loop (every request).
#[cfg(test)]
pub(crate) fn answer(
    line: &[u8],
    caller: Caller,
    tx: &Sender<Command>,
    reply_timeout: Duration,
) -> ResponseEnvelope {
    match decode(line) {
        Ok(envelope) => ask_loop(envelope, caller, tx, reply_timeout),
        Err((_, reply)) => *reply,
    }
}

/// Sends a decoded request to the loop and waits for its reply.
fn ask_loop(
    envelope: atoll_proto::RequestEnvelope,
    caller: Caller,
    tx: &Sender<Command>,
    reply_timeout: Duration,
) -> ResponseEnvelope {
    let (reply_tx, reply_rx) = mpsc::channel();
    let command = Command::Api {
        caller,
        id: envelope.id,
        request: envelope.request,
        reply: reply_tx,
    };
    if tx.send(command).is_err() {
        return ResponseEnvelope::err(
            envelope.id,
            ErrorCode::ShuttingDown,
            "the daemon is shutting down",
        );
    }
    match reply_rx.recv_timeout(reply_timeout) {
        Ok(mut reply) => {
            // The reply belongs to this request whatever the loop wrote.
            reply.id = envelope.id;
            reply
        }
        Err(RecvTimeoutError::Timeout) => ResponseEnvelope::err(
            envelope.id,
            ErrorCode::Backend,
            format!(
                "the control loop did not answer within {} ms",
                reply_timeout.as_millis()
            ),
        ),
        Err(RecvTimeoutError::Disconnected) => ResponseEnvelope::err(
            envelope.id,
            ErrorCode::ShuttingDown,
            "the daemon is shutting down",
        ),
    }
}

#[cfg(test)]
mod tests;
