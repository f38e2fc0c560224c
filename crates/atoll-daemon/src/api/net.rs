//! Socket plumbing shared by the API server and the metrics endpoint:
//! waiting for a listener with a timeout (so a stop flag is honored), a cap
//! on concurrent connections, reading a peer's credentials, and a line
//! reader that survives read timeouts.

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::command::Caller;

/// A listening socket the accept loop can serve.
pub(crate) trait Listener: AsRawFd {
    /// A connection.
    type Stream: Send + 'static;
    /// Accepts one pending connection.
    fn accept_one(&self) -> io::Result<Self::Stream>;
    /// Sets non-blocking mode.
    fn nonblocking(&self) -> io::Result<()>;
}

impl Listener for UnixListener {
    type Stream = UnixStream;
    fn accept_one(&self) -> io::Result<UnixStream> {
        self.accept().map(|(s, _)| s)
    }
    fn nonblocking(&self) -> io::Result<()> {
        self.set_nonblocking(true)
    }
}

impl Listener for TcpListener {
    type Stream = TcpStream;
    fn accept_one(&self) -> io::Result<TcpStream> {
        self.accept().map(|(s, _)| s)
    }
    fn nonblocking(&self) -> io::Result<()> {
        self.set_nonblocking(true)
    }
}

/// Accepts connections until `stop` is set, polling every `tick` so the
/// flag is honored; while no connection comes the wait doubles up to
/// [`IDLE_TICKS`] ticks (an idle daemon's thread wakes every 3.2 s instead
/// of every 200 ms; whoever sets `stop` connects once to be heard at once,
/// see [`crate::run`]): `admit` decides on each connection (a guard that lives
/// as long as the connection, or why not); an admitted one is served by
/// `serve` on its own thread, one refused is handed to `refuse` with the
/// reason. Returns after every connection thread has ended. `what` names
/// the threads and log lines (`api`, `metrics`).
pub(crate) fn accept_loop<L, G, A, R, S>(
    listener: &L,
    what: &str,
    tick: Duration,
    stop: &AtomicBool,
    admit: A,
    refuse: R,
    serve: S,
) where
    L: Listener,
    G: Send + 'static,
    A: Fn(&L::Stream) -> Result<G, String>,
    R: Fn(L::Stream, String),
    S: Fn(L::Stream, &G) + Clone + Send + 'static,
{
    if let Err(e) = listener.nonblocking() {
        tracing::error!(error = %e, "{what} socket: cannot set non-blocking mode; not serving");
        return;
    }
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    let mut wait = tick;
    while !stop.load(Ordering::Acquire) {
        match wait_readable(listener.as_raw_fd(), wait) {
            Ok(true) => wait = tick,
            Ok(false) => {
                wait = wait.saturating_mul(2).min(tick.saturating_mul(IDLE_TICKS));
                continue;
            }
            Err(e) => {
                tracing::error!(error = %e, "{what} socket: poll failed; not serving");
                break;
            }
        }
        loop {
            let stream = match listener.accept_one() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // E.g. EMFILE: back off until the next tick.
                    tracing::warn!(error = %e, "{what} socket: accept failed");
                    break;
                }
            };
            let guard = match admit(&stream) {
                Ok(g) => g,
                Err(why) => {
                    refuse(stream, why);
                    continue;
                }
            };
            let serve = serve.clone();
            let spawned = thread::Builder::new()
                .name(format!("atoll-{what}-conn"))
                .spawn(move || {
                    // Serving connections yields to the control loop.
                    lower_priority();
                    serve(stream, &guard);
                });
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => tracing::warn!(error = %e, "{what}: cannot spawn a connection thread"),
            }
        }
        workers.retain(|h| !h.is_finished());
    }
    for h in workers {
        let _ = h.join();
    }
}

/// The longest wait of an idle accept loop, in ticks.
pub(crate) const IDLE_TICKS: u32 = 16;

/// Nice value of the threads serving connections: the control loop (nice
/// 0) runs first when both want a CPU, so a flood of reads (answered by
/// the connection threads themselves, from what the loop publishes) cannot
/// starve the loop's epochs.
pub(crate) const SERVER_NICE: libc::c_int = 10;

thread_local! {
    /// Whether this connection thread asked to run at nice 0.
    static URGENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Lowers the calling thread's priority to [`SERVER_NICE`].
fn lower_priority() {
    set_nice(SERVER_NICE);
}

/// Runs the calling connection thread at nice 0 (`urgent`) or at
/// [`SERVER_NICE`], from now until told otherwise: also while it waits
/// for the loop's reply and for the connection's next line. The API asks
/// for nice 0 for a coordination message that passed the pacing (an
/// application waits on a trigger's boost; at nice 10 the thread that
/// reads the request and the one that writes the reply wait behind every
/// nice-0 task, and share a CPU equally with `nice -n 10` builds) and for
/// [`SERVER_NICE`] on every other line, so what a connection gets at
/// nice 0 is one line after each such message. A system call only on a
/// change; a thread without the privilege to raise its priority (a daemon
/// not run as root) stays at [`SERVER_NICE`].
pub(crate) fn serve_urgently(urgent: bool) {
    URGENT.with(|u| {
        if u.get() != urgent {
            u.set(urgent);
            set_nice(if urgent { 0 } else { SERVER_NICE });
        }
    });
}

/// Sets the calling thread's nice value (best effort).
fn set_nice(nice: libc::c_int) {
    // SAFETY: gettid(2) has no preconditions.
    let tid = unsafe { libc::gettid() };
    let Ok(tid) = libc::id_t::try_from(tid) else {
        return;
    };
    // SAFETY: setpriority(2) on our own thread id with a valid `which`;
    // a failure only leaves the priority as it was.
    let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
}

/// Waits until `fd` is readable (a listener: a connection is pending) or
/// `timeout` passes. `Ok(false)` on timeout or a signal.
pub(crate) fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `p` is one valid, initialized pollfd that outlives the call, and
    // we pass a count of 1.
    let rc = unsafe { libc::poll(&mut p, 1, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(rc > 0)
}

/// The peer's credentials at connect time (`SO_PEERCRED`).
pub(crate) fn peer_credentials(s: &UnixStream) -> io::Result<Caller> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let size = std::mem::size_of::<libc::ucred>();
    let mut len = libc::socklen_t::try_from(size).expect("ucred is 12 bytes");
    // SAFETY: the fd is a valid socket owned by `s`; `cred` is a writable
    // `ucred` and `len` holds its exact size, as SO_PEERCRED requires.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != size {
        return Err(io::Error::other(format!(
            "SO_PEERCRED returned {len} bytes, expected {size}"
        )));
    }
    Ok(Caller {
        uid: cred.uid,
        gid: cred.gid,
        pid: cred.pid,
    })
}

/// What [`LineReader::next`] found.
#[derive(Debug)]
pub(crate) enum Next {
    /// A line, without its `\n` (the last line may lack one).
    Line(Vec<u8>),
    /// The peer closed its side and nothing is buffered.
    Eof,
    /// More than `limit` bytes without a newline.
    TooLong(usize),
    /// The read timed out; partial input stays buffered.
    Tick,
    /// The read failed.
    Failed(io::Error),
}

/// Reads newline-delimited lines of at most `limit` bytes from a stream
/// with a read timeout, keeping a partial line across timeouts.
pub(crate) struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    scanned: usize,
    limit: usize,
    eof: bool,
    /// When the first byte of the unfinished line arrived.
    partial: Option<std::time::Instant>,
}

impl<R: Read> LineReader<R> {
    pub(crate) fn new(inner: R, limit: usize) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            scanned: 0,
            limit,
            eof: false,
            partial: None,
        }
    }

    /// When the first byte of a line not yet finished arrived (`None`:
    /// nothing is buffered).
    pub(crate) fn partial_since(&self) -> Option<std::time::Instant> {
        self.partial.filter(|_| !self.buf.is_empty())
    }

    /// The next line, or why there is none.
    pub(crate) fn next(&mut self) -> Next {
        loop {
            if let Some(pos) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
                let end = self.scanned + pos;
                if end > self.limit {
                    return Next::TooLong(end);
                }
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                self.scanned = 0;
                if !self.buf.is_empty() {
                    // What follows was pipelined: it counts from now.
                    self.partial = Some(std::time::Instant::now());
                }
                return Next::Line(line);
            }
            self.scanned = self.buf.len();
            if self.buf.len() > self.limit {
                return Next::TooLong(self.buf.len());
            }
            if self.eof {
                if self.buf.is_empty() {
                    return Next::Eof;
                }
                self.scanned = 0;
                return Next::Line(std::mem::take(&mut self.buf));
            }
            let mut chunk = [0u8; 8192];
            match self.inner.read(&mut chunk) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    if self.buf.is_empty() {
                        self.partial = Some(std::time::Instant::now());
                    }
                    self.buf.extend_from_slice(&chunk[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Next::Tick
                }
                Err(e) => return Next::Failed(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out scripted pieces, with timeouts in between.
    struct Script(Vec<Option<&'static [u8]>>);

    impl Read for Script {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            match self.0.remove(0) {
                Some(piece) => {
                    out[..piece.len()].copy_from_slice(piece);
                    Ok(piece.len())
                }
                None => Err(io::ErrorKind::WouldBlock.into()),
            }
        }
    }

    fn line(n: Next) -> Vec<u8> {
        match n {
            Next::Line(l) => l,
            other => panic!("expected a line, got {other:?}"),
        }
    }

    #[test]
    fn lines_survive_timeouts_and_pipelining() {
        let mut r = LineReader::new(
            Script(vec![Some(b"ab"), None, Some(b"c\nde\n"), Some(b"f")]),
            10,
        );
        assert!(matches!(r.next(), Next::Tick));
        assert_eq!(line(r.next()), b"abc");
        assert_eq!(line(r.next()), b"de");
        assert_eq!(line(r.next()), b"f");
        assert!(matches!(r.next(), Next::Eof));
    }

    #[test]
    fn long_lines_are_reported_with_or_without_a_newline() {
        let mut r = LineReader::new(Script(vec![Some(b"0123456789x\n")]), 10);
        assert!(matches!(r.next(), Next::TooLong(11)));
        let mut r = LineReader::new(Script(vec![Some(b"0123456789"), Some(b"xy")]), 10);
        assert!(matches!(r.next(), Next::TooLong(12)));
        let mut r = LineReader::new(Script(vec![Some(b"0123456789\n")]), 10);
        assert_eq!(line(r.next()), b"0123456789");
    }

    /// Whether this process may raise a thread's priority
    /// (`CAP_SYS_NICE` in its effective set).
    fn may_raise() -> bool {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let caps = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap();
        // CAP_SYS_NICE, linux/capability.h.
        caps & (1 << 23) != 0
    }

    fn own_nice() -> libc::c_int {
        // SAFETY: gettid(2) has no preconditions; getpriority(2) reads
        // our own thread's nice value.
        unsafe {
            let tid = libc::id_t::try_from(libc::gettid()).unwrap();
            libc::getpriority(libc::PRIO_PROCESS, tid)
        }
    }

    #[test]
    fn a_connection_thread_runs_at_nice_zero_only_while_asked() {
        std::thread::spawn(|| {
            lower_priority();
            assert_eq!(own_nice(), SERVER_NICE);
            serve_urgently(true);
            let want = if may_raise() { 0 } else { SERVER_NICE };
            assert_eq!(own_nice(), want);
            serve_urgently(true);
            assert_eq!(own_nice(), want);
            serve_urgently(false);
            assert_eq!(own_nice(), SERVER_NICE);
        })
        .join()
        .unwrap();
    }
}
