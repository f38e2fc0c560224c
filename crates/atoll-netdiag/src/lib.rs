//! atoll's network monitor: what each unit's sockets hold and have carried,
//! per control epoch, for communication-aware scheduling (seed 003, "Xen
//! and Co."; the policy is `atoll_core::comm`).
//!
//! [`DiagMonitor`] implements [`atoll_core::comm::NetMonitor`] on Linux. One
//! sample per epoch does three things:
//!
//! 1. **Which sockets belong to which unit** ([`owners`]). A socket belongs
//!    to the processes that hold an fd on it: the `socket:[INODE]` links of
//!    `/proc/<pid>/fd`. Reading every fd of every process each epoch is the
//!    expensive part, so the map from pid to socket inodes is kept and
//!    refreshed incrementally (a pid's fds are read when the pid is new,
//!    when the socket dump shows sockets nobody is known to hold, and once
//!    a period, about 1 s); the module docs give the rules.
//! 2. **The figures of every socket of a network namespace** from a
//!    [`SocketSource`]: sock_diag netlink ([`netlink::NetlinkSource`],
//!    messages in [`wire`]) by default, or the `/proc/net/*` tables
//!    ([`procnet::ProcNetSource`]) when the netlink socket cannot be opened.
//!    One dump per protocol and namespace per epoch, whatever the number of
//!    units; a namespace other than the monitor's own is entered with
//!    `setns` (see [`netlink`]).
//! 3. **Sums per unit** ([`monitor`]): each socket a unit's processes hold
//!    is counted once for that unit.
//!
//! What a socket's figures mean ([`SocketFigures`]): the receive queue is
//! what arrived and was not read yet; the send queue is what was written and
//! not yet acknowledged (TCP) or not yet freed (UDP, Unix: these are memory
//! charges, a little above the payload). The counters are TCP only, from
//! `tcp_info`, and count what the *application* did, so that they line up
//! with the queues: bytes read = `tcpi_bytes_received - rqueue` (what
//! arrived minus what still waits), bytes written = `tcpi_bytes_acked +
//! wqueue` (what the peer acknowledged plus what is still in flight or
//! unsent). Both count the socket's SYN and FIN as one byte each where the
//! kernel does (sequence space: the connecting side's `bytes_acked`
//! includes its SYN): an offset of at most 2 per socket that differences
//! between samples cancel. The `/proc/net` fallback has no counters and no
//! Unix queues.
//!
//! Choices and measured costs are in `docs/comm.md`, section "Monitoring";
//! `examples/netdiag_cost.rs` measures them.

pub mod monitor;
pub mod netlink;
pub mod owners;
pub mod procnet;
pub mod wire;

pub use monitor::{DiagMonitor, MonitorOptions, MonitorStats};
pub use netlink::NetlinkSource;
pub use owners::{OwnerMap, OwnerStats};
pub use procnet::ProcNetSource;

/// The kind of a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SockProto {
    /// TCP over IPv4 or IPv6.
    Tcp,
    /// UDP over IPv4 or IPv6.
    Udp,
    /// A Unix-domain socket (stream, datagram or seqpacket).
    Unix,
}

/// One socket's figures, as a [`SocketSource`] reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketFigures {
    /// The socket's inode (the `N` of the `socket:[N]` fd link).
    pub inode: u64,
    /// Its kind.
    pub proto: SockProto,
    /// Bytes received and not yet read (memory charge for UDP).
    pub rqueue: u64,
    /// Bytes written and not yet acknowledged (TCP) or memory charged for
    /// what is not yet sent or freed (UDP, Unix).
    pub wqueue: u64,
    /// Bytes the application has read, where the source knows it (TCP
    /// through sock_diag with a `tcp_info` of 4.1 or later).
    pub bytes_read: Option<u64>,
    /// Bytes the application has written, where the source knows it.
    pub bytes_written: Option<u64>,
}

/// Which source a monitor reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// sock_diag netlink dumps: queues and TCP byte counters.
    SockDiag,
    /// `/proc/<pid>/net/{tcp,tcp6,udp,udp6,unix}`: TCP and UDP queues, Unix
    /// sockets counted without queues, no byte counters.
    ProcNet,
    /// A source made for tests.
    Fake,
}

impl SourceKind {
    /// A short name for logs and status: `sock_diag`, `proc_net`, `fake`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::SockDiag => "sock_diag",
            SourceKind::ProcNet => "proc_net",
            SourceKind::Fake => "fake",
        }
    }
}

/// Which kinds of sockets a source dumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocols {
    /// TCP over IPv4 and IPv6.
    pub tcp: bool,
    /// UDP over IPv4 and IPv6.
    pub udp: bool,
    /// Unix-domain sockets.
    pub unix: bool,
}

impl Default for Protocols {
    /// All of them.
    fn default() -> Self {
        Self {
            tcp: true,
            udp: true,
            unix: true,
        }
    }
}

/// A network namespace, by the inode of its `ns/net` link (`net:[N]`).
/// `None` stands for "the monitor's own namespace, or unknown".
pub type NetNs = Option<u64>;

/// Why a source could not dump a namespace.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// sock_diag failed.
    #[error(transparent)]
    Netlink(#[from] netlink::NetlinkError),
    /// Reading `/proc/<pid>/net` failed.
    #[error(transparent)]
    ProcNet(#[from] procnet::ProcNetError),
}

impl SourceError {
    /// Whether only this namespace is affected (it could not be entered, or
    /// every process seen in it exited): the monitor skips it and counts it,
    /// rather than failing the whole sample.
    pub fn skips_namespace(&self) -> bool {
        match self {
            SourceError::Netlink(e) => e.skips_namespace(),
            SourceError::ProcNet(e) => e.skips_namespace(),
        }
    }
}

/// Where the sockets' figures come from: one dump of a network namespace at
/// a time. Behind a trait so that tests can feed canned socket lists.
pub trait SocketSource: Send {
    /// Which kind of source this is.
    fn kind(&self) -> SourceKind;

    /// Appends the figures of the sockets of namespace `ns` to `out`. `pids`
    /// are processes known to live in `ns` (at least one), for sources that
    /// look at a namespace through a process.
    fn dump(
        &mut self,
        ns: NetNs,
        pids: &[u32],
        out: &mut Vec<SocketFigures>,
    ) -> Result<(), SourceError>;

    /// Forgets per-namespace state for namespaces not in `live` (called on
    /// the end of each rescan period of the monitor). The default keeps
    /// nothing to forget.
    fn retain_namespaces(&mut self, live: &[NetNs]) {
        let _ = live;
    }
}

/// The inode of a `socket:[N]` link target.
pub(crate) fn parse_ns_or_socket(target: &[u8], prefix: &[u8]) -> Option<u64> {
    let rest = target.strip_prefix(prefix)?.strip_suffix(b"]")?;
    if rest.is_empty() || rest.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in rest {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_targets() {
        assert_eq!(parse_ns_or_socket(b"socket:[123]", b"socket:["), Some(123));
        assert_eq!(
            parse_ns_or_socket(b"net:[4026531840]", b"net:["),
            Some(4026531840)
        );
        assert_eq!(parse_ns_or_socket(b"socket:[]", b"socket:["), None);
        assert_eq!(parse_ns_or_socket(b"socket:[12a]", b"socket:["), None);
        assert_eq!(parse_ns_or_socket(b"socket:[123", b"socket:["), None);
        assert_eq!(parse_ns_or_socket(b"pipe:[123]", b"socket:["), None);
        assert_eq!(
            parse_ns_or_socket(b"socket:[99999999999999999999]", b"socket:["),
            None
        );
    }
}
