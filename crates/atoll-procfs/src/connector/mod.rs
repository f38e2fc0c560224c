//! The Linux proc connector: process events from the kernel as they happen.
//!
//! **What the kernel sends.** A `NETLINK_CONNECTOR` socket bound to the
//! `CN_IDX_PROC` multicast group, after a `PROC_CN_MCAST_LISTEN` request,
//! receives one datagram per event of every task on the machine: fork
//! (process or thread), exec, uid and gid changes, session changes, ptrace
//! attach/detach, renames, core dumps and exits, each naming the thread and
//! its process with pids of the initial pid namespace ([`wire`] has the
//! layouts). The kernel sends a fork before the child can run and an exit
//! before the parent can reap, into one queue, so the events of one process
//! arrive in the order they happened. It also multicasts its answers to
//! every listener's subscription requests; they are counted and dropped.
//!
//! **What is kept.** [`ProcConnector`] turns the events into the
//! process-level [`ProcEvent`]s of atoll-core: new processes, execs,
//! renames and id changes of a process's main thread, and exits of a main
//! thread. Thread creation and exit, renames and id changes of other
//! threads, session, ptrace and core dump events are dropped and only
//! counted ([`ConnectorStats`]); [`wire::classify`] says exactly what is
//! kept. Two kernel habits to know: a new thread's fork event names its
//! process's *parent* as parent (threads share it), and a process whose main
//! thread ends first (`pthread_exit`, or an exec from another thread) gets
//! an exit while it lives on; the exec case is followed by an exec of the
//! same pid, which [`ProcChanges`](atoll_core::events::ProcChanges) takes
//! into account.
//!
//! **Overflow.** Events queue in the socket's receive buffer until read.
//! When it is full the kernel drops events and the next read fails with
//! `ENOBUFS`; a message the kernel could not even allocate leaves a gap in
//! the per-CPU sequence numbers ([`wire::SeqTracker`]); a datagram that does
//! not parse may have held an event. Any of these sets
//! [`ProcEventBatch::overflowed`]: some events are missing, and the caller
//! lists `/proc` to catch up. The buffer is [`ConnectorOptions::recv_buffer`]
//! (8 MiB asked by default, which the kernel doubles; `SO_RCVBUFFORCE` when
//! allowed, else `SO_RCVBUF` capped by `net.core.rmem_max`). A queued event
//! takes about 830 bytes of it (measured on 6.18 x86-64), so the default
//! holds about 20 000 events: over 6 000 short-lived processes.
//!
//! **When it cannot be used.** [`ProcConnector::open`] subscribes and waits
//! for the kernel's acknowledgement, and fails with a [`ConnectorError`]
//! whose [`reason`](ConnectorError::reason) is one of [`Unavailable`]: no
//! connector in the kernel, not permitted (older kernels want
//! `CAP_NET_ADMIN` to listen; 6.18 lets any user), not in the initial user
//! and pid namespaces (the kernel ignores such requests), or no answer (a
//! kernel without `CONFIG_PROC_EVENTS`). The caller then lists `/proc`
//! every epoch as before and shows the reason in its status.
//!
//! On drop the source sends `PROC_CN_MCAST_IGNORE`, so the kernel stops
//! building events when no one listens (closing the socket alone does not
//! tell it).

mod diagnose;
pub(crate) use diagnose::has_capability;
#[cfg(any(test, feature = "testutils"))]
mod fake;
mod socket;
pub mod wire;

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use atoll_core::events::{ProcEvent, ProcEventBatch, ProcEventError, ProcEventSource};
#[cfg(any(test, feature = "testutils"))]
pub use fake::{FakeEvents, FakeEventsHandle};
pub(crate) use socket::poll_ms;
use socket::{
    bind_group, io_error, local_port, netlink_family, open_socket, set_recv_buffer, socklen, Slots,
};
use wire::{Kind, Message, SeqCheck, SeqTracker};

/// [`ProcEventSource::kind`] of the connector.
pub const KIND: &str = "proc-connector";

/// Most datagrams one read pass takes from the socket.
const MAX_DATAGRAMS_PER_READ: usize = 16 * 1024;

/// How to open the connector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectorOptions {
    /// Receive buffer asked for, bytes (the kernel doubles the value for
    /// its bookkeeping; [`ConnectorStats::recv_buffer`] shows what it
    /// granted).
    pub recv_buffer: usize,
    /// How long to wait for the kernel to acknowledge the subscription.
    pub ack_timeout: Duration,
    /// Most events one [`next_batch`](ProcEventSource::next_batch) returns
    /// (more stay queued for the next call). Reads stop once this many
    /// datagrams could have filled it, so a batch is often smaller.
    pub max_batch: usize,
    /// Where `self/status` and `self/uid_map` are read to explain a silent
    /// kernel (usually `/proc`).
    pub proc_root: PathBuf,
}

impl Default for ConnectorOptions {
    fn default() -> Self {
        Self {
            recv_buffer: 8 << 20,
            ack_timeout: Duration::from_secs(1),
            max_batch: 4096,
            proc_root: PathBuf::from("/proc"),
        }
    }
}

/// Why the connector cannot be used, in one word for status output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unavailable {
    /// The kernel has no connector (`CONFIG_CONNECTOR`).
    NoKernelSupport,
    /// The process may not subscribe (needs `CAP_NET_ADMIN` before 6.6; or
    /// a security policy refused the socket).
    NotPermitted,
    /// The process is not in the initial user and pid namespaces.
    Namespaced,
    /// The kernel did not answer the subscription (no
    /// `CONFIG_PROC_EVENTS`).
    NoAnswer,
    /// A system call failed for another reason.
    Failed,
}

impl Unavailable {
    /// A stable short name: `no-kernel-support`, `not-permitted`,
    /// `namespaced`, `no-answer`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Unavailable::NoKernelSupport => "no-kernel-support",
            Unavailable::NotPermitted => "not-permitted",
            Unavailable::Namespaced => "namespaced",
            Unavailable::NoAnswer => "no-answer",
            Unavailable::Failed => "failed",
        }
    }
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the connector could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectorError {
    /// `socket(AF_NETLINK, NETLINK_CONNECTOR)` is not supported.
    #[error("proc connector: the kernel has no connector (CONFIG_CONNECTOR): socket(AF_NETLINK, SOCK_DGRAM, NETLINK_CONNECTOR): {source}")]
    NoConnector {
        /// The OS error (`EPROTONOSUPPORT`, `EAFNOSUPPORT`).
        #[source]
        source: io::Error,
    },
    /// The kernel or a security policy said no.
    #[error("proc connector: not permitted: {detail}")]
    NotPermitted {
        /// What was refused and what would allow it.
        detail: String,
    },
    /// The process is in a child user or pid namespace.
    #[error("proc connector: {detail}; the kernel ignores subscriptions from outside the initial user and pid namespaces")]
    Namespaced {
        /// Which namespace, as `/proc/self` shows it.
        detail: String,
    },
    /// No acknowledgement came.
    #[error("proc connector: the kernel did not acknowledge the subscription within {waited:?}; {detail}")]
    NoAnswer {
        /// How long it waited.
        waited: Duration,
        /// The likely cause.
        detail: String,
    },
    /// The kernel acknowledged the subscription with an error other than
    /// `EPERM`.
    #[error("proc connector: the kernel refused PROC_CN_MCAST_LISTEN: {}", io::Error::from_raw_os_error(*.errno))]
    Refused {
        /// The positive errno.
        errno: i32,
    },
    /// A system call failed.
    #[error("proc connector: {op}: {source}")]
    Io {
        /// The call and its argument (`bind CN_IDX_PROC`, `setsockopt
        /// SO_RCVBUF 8388608`, ...).
        op: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl ConnectorError {
    /// The reason in one word, for status output.
    pub fn reason(&self) -> Unavailable {
        match self {
            ConnectorError::NoConnector { .. } => Unavailable::NoKernelSupport,
            ConnectorError::NotPermitted { .. } => Unavailable::NotPermitted,
            ConnectorError::Namespaced { .. } => Unavailable::Namespaced,
            ConnectorError::NoAnswer { .. } => Unavailable::NoAnswer,
            ConnectorError::Refused { .. } | ConnectorError::Io { .. } => Unavailable::Failed,
        }
    }
}

/// Counters since the connector was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectorStats {
    /// Datagrams read.
    pub datagrams: u64,
    /// Process events delivered.
    pub events: u64,
    /// Thread events dropped (thread creation and exit, renames and id
    /// changes of threads other than the main one).
    pub thread_events: u64,
    /// Other events dropped (session, ptrace, core dump, unknown types).
    pub other_events: u64,
    /// Acknowledgements seen (ours and other listeners').
    pub acks: u64,
    /// Reads that failed with `ENOBUFS` (the kernel dropped events).
    pub enobufs: u64,
    /// Gaps in the per-CPU sequence numbers.
    pub seq_gaps: u64,
    /// Messages missing in those gaps.
    pub seq_missing: u64,
    /// Datagrams that did not parse or were truncated.
    pub malformed: u64,
    /// Datagrams or messages not from the kernel's proc connector (another
    /// sender, another connector index, netlink no-ops).
    pub foreign: u64,
    /// The receive buffer the kernel granted, bytes (`SO_RCVBUF`).
    pub recv_buffer: usize,
}

/// A subscribed proc connector socket: a [`ProcEventSource`].
pub struct ProcConnector {
    fd: OwnedFd,
    port: u32,
    seqs: SeqTracker,
    /// Events read while waiting for the acknowledgement.
    pending: VecDeque<ProcEvent>,
    pending_overflow: bool,
    slots: Box<Slots>,
    msgs: Vec<Message>,
    max_batch: usize,
    stats: ConnectorStats,
}

impl std::fmt::Debug for ProcConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcConnector")
            .field("fd", &self.fd)
            .field("port", &self.port)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// What one read pass found besides events.
#[derive(Default)]
struct Pass {
    /// The acknowledgement of our request, if seen: its errno.
    our_ack: Option<u32>,
}

impl ProcConnector {
    /// Opens a socket, subscribes, and waits for the kernel's
    /// acknowledgement.
    pub fn open(opts: &ConnectorOptions) -> Result<Self, ConnectorError> {
        let fd = open_socket()?;
        let granted = set_recv_buffer(&fd, opts.recv_buffer)?;
        bind_group(&fd)?;
        let port = local_port(&fd)?;
        let mut c = Self {
            fd,
            port,
            seqs: SeqTracker::default(),
            pending: VecDeque::new(),
            pending_overflow: false,
            slots: Box::default(),
            msgs: Vec::new(),
            max_batch: opts.max_batch.max(1),
            stats: ConnectorStats {
                recv_buffer: granted,
                ..ConnectorStats::default()
            },
        };
        c.send_op(wire::PROC_CN_MCAST_LISTEN)
            .map_err(|source| ConnectorError::Io {
                op: "send PROC_CN_MCAST_LISTEN".into(),
                source,
            })?;
        match c.await_ack(opts.ack_timeout)? {
            Some(0) => Ok(c),
            Some(err) if err == libc::EPERM as u32 => {
                // Nothing to undo: the kernel did not count us.
                Err(ConnectorError::NotPermitted {
                    detail: "the kernel answered EPERM to PROC_CN_MCAST_LISTEN: \
                             listening needs CAP_NET_ADMIN on this kernel"
                        .into(),
                })
            }
            Some(err) => Err(ConnectorError::Refused { errno: err as i32 }),
            // The acknowledgement may be among what the kernel dropped.
            None if c.pending_overflow => Err(ConnectorError::NoAnswer {
                waited: opts.ack_timeout,
                detail: format!(
                    "the {}-byte receive buffer overflowed meanwhile and may have lost it; \
                     ask for a larger one",
                    c.stats.recv_buffer
                ),
            }),
            None => Err(explain_silence(opts)),
        }
    }

    /// Opens with [`ConnectorOptions::default`].
    pub fn open_default() -> Result<Self, ConnectorError> {
        Self::open(&ConnectorOptions::default())
    }

    /// The counters so far.
    pub fn stats(&self) -> ConnectorStats {
        self.stats
    }

    /// Reads until our acknowledgement arrives or `timeout` passes; events
    /// read meanwhile are kept for the first batch.
    fn await_ack(&mut self, timeout: Duration) -> Result<Option<u32>, ConnectorError> {
        let deadline = Instant::now() + timeout;
        let mut batch = ProcEventBatch::default();
        let io = |op: &str, e: ProcEventError| ConnectorError::Io {
            op: op.to_string(),
            source: match e {
                ProcEventError::Io { error, .. } => error,
                other => io::Error::other(other.to_string()),
            },
        };
        loop {
            let pass = self
                .receive(&mut batch, usize::MAX)
                .map_err(|e| io("recvmmsg", e))?;
            self.pending.extend(batch.events.drain(..));
            self.pending_overflow |= batch.overflowed;
            batch.overflowed = false;
            if pass.our_ack.is_some() {
                return Ok(pass.our_ack);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.wait_readable(left).map_err(|e| io("poll", e))?;
        }
    }

    fn send_op(&self, op: u32) -> io::Result<()> {
        let req = wire::mcast_request(op, 0, self.port, self.port);
        // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = netlink_family();
        // nl_pid 0: the kernel; nl_groups 0: not multicast to the other
        // listeners.
        loop {
            // SAFETY: the buffer pointer and length describe `req`; the
            // address pointer and size describe `kernel`; both outlive the
            // call.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    req.as_ptr().cast(),
                    req.len(),
                    0,
                    (&kernel as *const libc::sockaddr_nl).cast(),
                    socklen::<libc::sockaddr_nl>(),
                )
            };
            if rc >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Waits up to `timeout` for the socket to become readable (or to have
    /// an error pending); returns whether it did.
    fn wait_readable(&self, timeout: Duration) -> Result<bool, ProcEventError> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // SAFETY: `pfd` is one valid pollfd that lives for the call.
            let rc = unsafe { libc::poll(&mut pfd, 1, poll_ms(left)) };
            if rc > 0 {
                if pfd.revents & libc::POLLNVAL != 0 {
                    return Err(io_error("poll", io::Error::from_raw_os_error(libc::EBADF)));
                }
                return Ok(true);
            }
            if rc == 0 {
                return Ok(false);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(io_error("poll", e));
            }
        }
    }

    /// Reads every queued datagram (until `limit` events are in `batch`, or
    /// [`MAX_DATAGRAMS_PER_READ`] datagrams were read: a machine creating
    /// threads faster than they are read must not hold the caller here),
    /// appending process events and setting `overflowed` on a loss.
    fn receive(
        &mut self,
        batch: &mut ProcEventBatch,
        limit: usize,
    ) -> Result<Pass, ProcEventError> {
        let mut pass = Pass::default();
        let mut datagrams = 0;
        while batch.events.len() < limit && datagrams < MAX_DATAGRAMS_PER_READ {
            let room = limit - batch.events.len();
            let n = match self.slots.recv(self.fd.as_fd(), room) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.stats.enobufs += 1;
                    batch.overflowed = true;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(io_error("recvmmsg", e)),
            };
            datagrams += n;
            for i in 0..n {
                self.take_datagram(i, batch, &mut pass);
            }
            if n < socket::SLOTS.min(room) {
                break;
            }
        }
        Ok(pass)
    }

    /// Parses slot `i` of the last read.
    fn take_datagram(&mut self, i: usize, batch: &mut ProcEventBatch, pass: &mut Pass) {
        let (buf, sender, truncated) = self.slots.datagram(i);
        self.stats.datagrams += 1;
        if sender != 0 {
            // Only the kernel (port 0) sends proc events; anything else is
            // another process writing to the group.
            self.stats.foreign += 1;
            return;
        }
        if truncated {
            self.stats.malformed += 1;
            batch.overflowed = true;
            return;
        }
        self.msgs.clear();
        match wire::parse_datagram(buf, &mut self.msgs) {
            Ok(d) => {
                self.stats.foreign += d.skipped as u64;
                if d.overrun {
                    batch.overflowed = true;
                }
            }
            Err(_) => {
                self.stats.malformed += 1;
                batch.overflowed = true;
            }
        }
        for m in self.msgs.drain(..) {
            match self.seqs.observe(m.cpu, m.seq) {
                SeqCheck::Gap(n) => {
                    self.stats.seq_gaps += 1;
                    self.stats.seq_missing += u64::from(n);
                    batch.overflowed = true;
                }
                SeqCheck::First | SeqCheck::InOrder | SeqCheck::Behind => {}
                SeqCheck::Unnumbered => {}
            }
            match wire::classify(&m.event) {
                Kind::Process(e) => {
                    self.stats.events += 1;
                    batch.events.push(e);
                }
                Kind::Thread => self.stats.thread_events += 1,
                Kind::Other => self.stats.other_events += 1,
                Kind::Ack { err } => {
                    self.stats.acks += 1;
                    if m.ack == self.port.wrapping_add(1) {
                        pass.our_ack = Some(err);
                    }
                }
            }
        }
    }
}

impl ProcEventSource for ProcConnector {
    fn next_batch(&mut self, timeout: Duration) -> Result<ProcEventBatch, ProcEventError> {
        let mut batch = ProcEventBatch {
            overflowed: std::mem::take(&mut self.pending_overflow),
            ..ProcEventBatch::default()
        };
        let kept = self.pending.len().min(self.max_batch);
        batch.events.extend(self.pending.drain(..kept));
        if !batch.is_empty() {
            self.receive(&mut batch, self.max_batch)?;
            return Ok(batch);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !self.wait_readable(left)? {
                return Ok(batch);
            }
            self.receive(&mut batch, self.max_batch)?;
            // Readable but only dropped events: wait on until the deadline.
            if !batch.is_empty() || left.is_zero() {
                return Ok(batch);
            }
        }
    }

    fn kind(&self) -> &'static str {
        KIND
    }

    fn wake_fd(&self) -> Option<i32> {
        Some(self.fd.as_raw_fd())
    }
}

impl AsFd for ProcConnector {
    /// The socket, to wait on it together with other descriptors
    /// (readable: call [`next_batch`](ProcEventSource::next_batch) with a
    /// zero timeout).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for ProcConnector {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for ProcConnector {
    fn drop(&mut self) {
        // Best effort: if it fails, the kernel keeps building events for a
        // listener that is gone, which costs time but loses nothing.
        let _ = self.send_op(wire::PROC_CN_MCAST_IGNORE);
    }
}

/// The error for a kernel that did not acknowledge the subscription, from
/// what `/proc/self` says of this process.
fn explain_silence(opts: &ConnectorOptions) -> ConnectorError {
    let read = |rel: &str| std::fs::read_to_string(opts.proc_root.join(rel)).ok();
    let status = read("self/status").unwrap_or_default();
    if let Some(map) = read("self/uid_map").filter(|m| !diagnose::is_initial_uid_map(m)) {
        return ConnectorError::Namespaced {
            detail: format!(
                "this process is in a child user namespace (uid_map {:?})",
                map.split_whitespace().collect::<Vec<_>>().join(" ")
            ),
        };
    }
    if let Some(depth) = diagnose::pid_ns_depth(&status).filter(|d| *d > 1) {
        return ConnectorError::Namespaced {
            detail: format!("this process is in a child pid namespace ({depth} levels, NSpid)"),
        };
    }
    let registered = read("net/connector").map(|t| diagnose::lists_cn_proc(&t));
    if registered == Some(false) {
        return ConnectorError::NoAnswer {
            waited: opts.ack_timeout,
            detail: "the kernel was built without CONFIG_PROC_EVENTS (no cn_proc in net/connector)"
                .into(),
        };
    }
    if diagnose::has_capability(&status, diagnose::CAP_NET_ADMIN) == Some(false) {
        return ConnectorError::NotPermitted {
            detail: format!(
                "no answer to PROC_CN_MCAST_LISTEN within {:?} and no CAP_NET_ADMIN \
                 (kernels before 6.6 require it, and refuse silently when no one else listens)",
                opts.ack_timeout
            ),
        };
    }
    ConnectorError::NoAnswer {
        waited: opts.ack_timeout,
        detail: "it was probably built without CONFIG_PROC_EVENTS".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_have_stable_names() {
        let e = ConnectorError::NoAnswer {
            waited: Duration::from_secs(1),
            detail: "it was probably built without CONFIG_PROC_EVENTS".into(),
        };
        assert_eq!(e.reason(), Unavailable::NoAnswer);
        assert_eq!(e.reason().to_string(), "no-answer");
        assert!(e.to_string().contains("CONFIG_PROC_EVENTS"), "{e}");
        let e = ConnectorError::NoConnector {
            source: io::Error::from_raw_os_error(libc::EPROTONOSUPPORT),
        };
        assert_eq!(e.reason().as_str(), "no-kernel-support");
        assert!(e.to_string().contains("CONFIG_CONNECTOR"), "{e}");
        let e = ConnectorError::Refused {
            errno: libc::EINVAL,
        };
        assert_eq!(e.reason(), Unavailable::Failed);
        assert!(e.to_string().contains("Invalid argument"), "{e}");
    }

    /// A fake `/proc/self` (and `/proc/net/connector`, when given) for
    /// [`explain_silence`].
    fn silence_in(status: &str, uid_map: Option<&str>, connector: Option<&str>) -> ConnectorError {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("self")).unwrap();
        std::fs::write(dir.path().join("self/status"), status).unwrap();
        if let Some(m) = uid_map {
            std::fs::write(dir.path().join("self/uid_map"), m).unwrap();
        }
        if let Some(c) = connector {
            std::fs::create_dir(dir.path().join("net")).unwrap();
            std::fs::write(dir.path().join("net/connector"), c).unwrap();
        }
        explain_silence(&ConnectorOptions {
            proc_root: dir.path().to_path_buf(),
            ..ConnectorOptions::default()
        })
    }

    #[test]
    fn silence_is_explained_by_namespace_then_capability() {
        let root = "NSpid:\t10\nCapEff:\t000001ffffffffff\n";
        let initial = Some("0 0 4294967295\n");
        let with_cn = Some("Name            ID\ncn_proc         1:1\n");
        let without_cn = Some("Name            ID\n");
        let e = silence_in(root, Some("0 100000 65536\n"), with_cn);
        assert_eq!(e.reason(), Unavailable::Namespaced);
        assert!(e.to_string().contains("0 100000 65536"), "{e}");
        let e = silence_in("NSpid:\t10\t1\nCapEff:\t0\n", initial, with_cn);
        assert_eq!(e.reason(), Unavailable::Namespaced);
        assert!(e.to_string().contains("2 levels"), "{e}");
        let no_caps = "NSpid:\t10\nCapEff:\t0000000000000000\n";
        let e = silence_in(no_caps, initial, with_cn);
        assert_eq!(e.reason(), Unavailable::NotPermitted);
        assert!(e.to_string().contains("CAP_NET_ADMIN"), "{e}");
        // No cn_proc registered: the kernel lacks it, whatever the caps.
        let e = silence_in(no_caps, initial, without_cn);
        assert_eq!(e.reason(), Unavailable::NoAnswer);
        assert!(e.to_string().contains("no cn_proc"), "{e}");
        assert_eq!(
            silence_in(root, initial, with_cn).reason(),
            Unavailable::NoAnswer
        );
        // Nothing readable: no evidence of anything but silence.
        assert_eq!(silence_in("", None, None).reason(), Unavailable::NoAnswer);
    }
}
