//! A typed client for atoll's local API (`docs/api.md`).
//!
//! ```no_run
//! let mut c = atoll_client::Client::connect_default()?;
//! let status = c.status()?;
//! println!("{} islands", status.islands.len());
//! # Ok::<(), atoll_client::ClientError>(())
//! ```
//!
//! One [`Client`] is one connection. Calls are sequential: each sends one
//! request with the next id and reads lines until the reply with that id
//! (a stale reply to an earlier, timed-out request is skipped). Reads and
//! writes time out ([`DEFAULT_TIMEOUT`] unless changed).
//!
//! Errors are one opaque [`ClientError`] with predicates for what callers
//! branch on ([`ClientError::is_not_running`],
//! [`ClientError::is_permission_denied`], [`ClientError::is_not_found`],
//! [`ClientError::api_code`]) and a message written for the person at the
//! terminal.
//!
//! Coordination (overlays, tune, trigger, borrow, release, register,
//! deregister, report) is in [`coord`]; there a refusal by a coordinator is
//! an answer ([`coord::Coordinated`]), not an error.
//!
//! Reconfigurable applications (register with a recipe of working modes,
//! poll the assignment, report cycles against a goal, done) are in
//! [`apps`], with [`apps::AppRuntime`], the execution loop over them.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use atoll_core::decision::Decision;
pub use atoll_proto;
use atoll_proto::{
    ErrorCode, Reply, Request, RequestEnvelope, ResponseEnvelope, StatusReport, DEFAULT_SOCKET,
    PROTOCOL_VERSION,
};

pub mod apps;
pub mod coord;

/// How long a call waits to write its request or read its reply, unless
/// changed with [`Client::set_timeout`]. Longer than the daemon's own wait
/// for its control loop, so the daemon's error arrives first.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest reply line accepted (a status of a large machine is long).
pub const MAX_REPLY: usize = 64 * 1024 * 1024;

/// A connection to the daemon.
#[derive(Debug)]
pub struct Client {
    path: PathBuf,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
    timeout: Option<Duration>,
}

/// What `adopt` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adopted {
    /// The unit.
    pub unit: String,
    /// Its island.
    pub island: String,
    /// Whether the request created the unit.
    pub created: bool,
}

impl Client {
    /// Connects to the daemon's socket at `path`.
    pub fn connect(path: &Path) -> Result<Self, ClientError> {
        let stream =
            UnixStream::connect(path).map_err(|e| ClientError::new(path, Repr::Connect(e)))?;
        let reader = stream
            .try_clone()
            .map_err(|e| ClientError::new(path, Repr::Io("set up", e)))?;
        let mut c = Self {
            path: path.to_path_buf(),
            writer: stream,
            reader: BufReader::new(reader),
            next_id: 1,
            timeout: None,
        };
        c.set_timeout(Some(DEFAULT_TIMEOUT))?;
        Ok(c)
    }

    /// Connects to [`DEFAULT_SOCKET`].
    pub fn connect_default() -> Result<Self, ClientError> {
        Self::connect(Path::new(DEFAULT_SOCKET))
    }

    /// The socket this client is connected to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets the read and write timeout of every call (`None`: wait forever).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> Result<(), ClientError> {
        self.writer
            .set_read_timeout(timeout)
            .and_then(|()| self.writer.set_write_timeout(timeout))
            .map_err(|e| self.err(Repr::Io("set timeouts on", e)))?;
        self.timeout = timeout;
        Ok(())
    }

    fn err(&self, repr: Repr) -> ClientError {
        ClientError::new(&self.path, repr)
    }

    /// Sends `request` and returns the daemon's reply; an error reply
    /// becomes a [`ClientError`] with [`ClientError::api_code`].
    pub fn request(&mut self, request: Request) -> Result<Reply, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let line = atoll_proto::encode(&RequestEnvelope {
            v: PROTOCOL_VERSION,
            id,
            request,
        });
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| self.io_err("send a request to", e))?;
        loop {
            let reply = self.read_reply()?;
            // Id 0: the daemon could not attribute its answer to a request
            // (e.g. it refused the connection); it is still the answer.
            if reply.id == id || reply.id == 0 {
                return reply.into_result().map_err(|e| self.err(Repr::Api(e)));
            }
            if reply.id > id {
                return Err(self.err(Repr::Protocol(format!(
                    "reply to request {} while waiting for request {id}",
                    reply.id
                ))));
            }
            // An answer to an earlier request we stopped waiting for.
        }
    }

    fn io_err(&self, what: &'static str, e: io::Error) -> ClientError {
        if matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            self.err(Repr::Timeout(self.timeout.unwrap_or_default()))
        } else if matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::UnexpectedEof
        ) {
            self.err(Repr::Closed)
        } else {
            self.err(Repr::Io(what, e))
        }
    }

    fn read_reply(&mut self) -> Result<ResponseEnvelope, ClientError> {
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_REPLY as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| self.io_err("read a reply from", e))?;
        if n == 0 {
            return Err(self.err(Repr::Closed));
        }
        if line.last() != Some(&b'\n') {
            return Err(if line.len() > MAX_REPLY {
                self.err(Repr::Protocol(format!(
                    "reply longer than {MAX_REPLY} bytes"
                )))
            } else {
                self.err(Repr::Closed)
            });
        }
        // Not `atoll_proto::decode_response`: it applies the request line
        // limit, and a status reply may be longer.
        serde_json::from_slice(&line).map_err(|e| {
            self.err(Repr::Protocol(format!(
                "undecodable reply {:?}: {e}",
                String::from_utf8_lossy(&line[..line.len().min(200)])
            )))
        })
    }

    fn unexpected(&self, want: &str, got: &Reply) -> ClientError {
        let kind = serde_json::to_value(got)
            .ok()
            .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
            .unwrap_or_else(|| "?".into());
        self.err(Repr::Protocol(format!(
            "expected reply kind {want}, got {kind}"
        )))
    }

    /// Islands, units, processes and their usage.
    pub fn status(&mut self) -> Result<StatusReport, ClientError> {
        match self.request(Request::Status {})? {
            Reply::Status(s) => Ok(*s),
            other => Err(self.unexpected("status", &other)),
        }
    }

    /// Moves process `pid` into `unit`, creating the unit (in `island`, or
    /// the default island) if needed.
    pub fn adopt(
        &mut self,
        unit: &str,
        pid: u32,
        island: Option<&str>,
    ) -> Result<Adopted, ClientError> {
        self.adopt_with_class(unit, pid, island, None)
    }

    /// [`Self::adopt`], a new unit getting the network class `network`
    /// (`unit add --net-island`'s; root only). A unit that exists must
    /// have that class already.
    pub fn adopt_with_class(
        &mut self,
        unit: &str,
        pid: u32,
        island: Option<&str>,
        network: Option<atoll_proto::runtime::NetClassSettings>,
    ) -> Result<Adopted, ClientError> {
        let request = Request::Adopt {
            unit: unit.to_string(),
            pid,
            island: island.map(str::to_string),
            network,
        };
        match self.request(request)? {
            Reply::Adopted {
                unit,
                island,
                created,
            } => Ok(Adopted {
                unit,
                island,
                created,
            }),
            other => Err(self.unexpected("adopted", &other)),
        }
    }

    /// Recent decisions, oldest first, optionally only those about
    /// `subject` (a group path, a unit, or `pid N`), at most `limit`.
    pub fn why(
        &mut self,
        subject: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<Decision>, ClientError> {
        let request = Request::Why {
            subject: subject.map(str::to_string),
            limit,
        };
        match self.request(request)? {
            Reply::Decisions { decisions } => Ok(decisions),
            other => Err(self.unexpected("decisions", &other)),
        }
    }

    /// Asks the daemon to read its configuration file again and apply it
    /// (root only): what changed, a line each, empty when nothing did. A
    /// configuration that does not parse or that the kernel refuses changes
    /// nothing and comes back as the error.
    pub fn reload(&mut self) -> Result<Vec<String>, ClientError> {
        match self.request(Request::Reload {})? {
            Reply::Reloaded { changes } => Ok(changes),
            other => Err(self.unexpected("reloaded", &other)),
        }
    }

    /// Asks the daemon to tear down and exit (root only), without waiting.
    pub fn stop(&mut self) -> Result<(), ClientError> {
        match self.request(Request::Stop { wait: false })? {
            Reply::Stopping => Ok(()),
            other => Err(self.unexpected("stopping", &other)),
        }
    }

    /// Asks the daemon to tear down and exit (root only), and waits until
    /// it has: what teardown left (cgroups it could not remove, processes
    /// it could not give back), empty when it left nothing.
    pub fn stop_and_wait(&mut self) -> Result<Vec<String>, ClientError> {
        match self.request(Request::Stop { wait: true })? {
            Reply::Stopped { left } => Ok(left),
            other => Err(self.unexpected("stopped", &other)),
        }
    }
}

/// Why a call failed. Branch with the predicates; show it with `Display`.
#[derive(Debug)]
pub struct ClientError {
    path: PathBuf,
    repr: Repr,
}

#[derive(Debug)]
enum Repr {
    /// `connect` failed.
    Connect(io::Error),
    /// Another socket operation failed.
    Io(&'static str, io::Error),
    /// The daemon closed the connection.
    Closed,
    /// No answer in time.
    Timeout(Duration),
    /// The daemon answered with an error.
    Api(atoll_proto::ApiError),
    /// The daemon's answer made no sense.
    Protocol(String),
    /// An argument was refused before anything was sent.
    Argument(String),
}

impl ClientError {
    fn new(path: &Path, repr: Repr) -> Self {
        Self {
            path: path.to_path_buf(),
            repr,
        }
    }

    /// The socket involved.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// No daemon: the socket is missing, or nothing listens on it.
    pub fn is_not_running(&self) -> bool {
        matches!(&self.repr, Repr::Connect(e) if matches!(
            e.kind(),
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
        ))
    }

    /// The socket may not be opened, or the daemon refused the caller.
    pub fn is_permission_denied(&self) -> bool {
        match &self.repr {
            Repr::Connect(e) => e.kind() == io::ErrorKind::PermissionDenied,
            Repr::Api(e) => e.code == ErrorCode::PermissionDenied,
            _ => false,
        }
    }

    /// The daemon knows no such unit, island or process.
    pub fn is_not_found(&self) -> bool {
        self.api_code() == Some(ErrorCode::NotFound)
    }

    /// An argument (a name, a value) was invalid; nothing was sent.
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self.repr, Repr::Argument(_))
    }

    /// No answer within the timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self.repr, Repr::Timeout(_))
    }

    /// The daemon's error code, when it answered with an error.
    pub fn api_code(&self) -> Option<ErrorCode> {
        match &self.repr {
            Repr::Api(e) => Some(e.code),
            _ => None,
        }
    }

    /// The daemon's error message, when it answered with an error.
    pub fn api_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Api(e) => Some(&e.message),
            _ => None,
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.repr {
            Repr::Connect(e) => match e.kind() {
                io::ErrorKind::NotFound => write!(
                    f,
                    "atoll daemon is not running (no socket at {path}); start it with `atoll daemon`"
                ),
                io::ErrorKind::ConnectionRefused => write!(
                    f,
                    "atoll daemon is not running (nothing listens on {path}); start it with `atoll daemon`"
                ),
                io::ErrorKind::PermissionDenied => write!(
                    f,
                    "cannot connect to the atoll daemon at {path}: permission denied (the socket should be mode 0666)"
                ),
                _ => write!(f, "cannot connect to the atoll daemon at {path}: {e}"),
            },
            Repr::Io(what, e) => write!(f, "cannot {what} the atoll daemon at {path}: {e}"),
            Repr::Closed => write!(
                f,
                "the atoll daemon at {path} closed the connection (is it shutting down?)"
            ),
            Repr::Timeout(d) => write!(
                f,
                "the atoll daemon at {path} did not answer within {} s",
                d.as_secs_f64()
            ),
            Repr::Api(e) => {
                let m = &e.message;
                match e.code {
                    ErrorCode::BadRequest => write!(f, "the atoll daemon refused the request: {m}"),
                    ErrorCode::UnsupportedVersion => write!(
                        f,
                        "the atoll daemon speaks another protocol version (this client speaks {PROTOCOL_VERSION}): {m}"
                    ),
                    ErrorCode::PermissionDenied => write!(f, "permission denied: {m}"),
                    ErrorCode::NotFound => write!(f, "not found: {m}"),
                    ErrorCode::Backend => write!(f, "the atoll daemon could not do it: {m}"),
                    ErrorCode::ShuttingDown => f.write_str("the atoll daemon is shutting down"),
                    ErrorCode::Busy => write!(f, "the atoll daemon is busy: {m}"),
                }
            }
            Repr::Protocol(m) => write!(f, "bad reply from the atoll daemon at {path}: {m}"),
            Repr::Argument(m) => write!(f, "invalid {m}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.repr {
            Repr::Connect(e) | Repr::Io(_, e) => Some(e),
            Repr::Api(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
