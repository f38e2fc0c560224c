//! sock_diag netlink messages: requests built and answers parsed as plain
//! bytes, with no I/O, so that every path is tested on hand-built buffers.
//!
//! Layouts follow the kernel's uapi headers (`linux/netlink.h`,
//! `linux/sock_diag.h`, `linux/inet_diag.h`, `linux/unix_diag.h`,
//! `linux/tcp.h`); integers are in host byte order except the ports and
//! addresses of `inet_diag_sockid`, which are not read here. Offsets used:
//!
//! | struct | size | fields read (offset) |
//! |---|---|---|
//! | `nlmsghdr` | 16 | len 0, type 4, flags 6, seq 8 |
//! | `inet_diag_req_v2` | 56 | built: family 0, protocol 1, ext 2, states 4 |
//! | `inet_diag_req` (v1) | 60 | built: ext 3, states 52 |
//! | `inet_diag_msg` | 72 | state 1, rqueue 56, wqueue 60, inode 68 |
//! | `unix_diag_req` | 24 | built: family 0, states 4, show 12 |
//! | `unix_diag_msg` | 16 | state 2, inode 4 |
//! | `unix_diag_rqlen` | 8 | rqueue 0, wqueue 4 |
//! | `tcp_info` | 232 in 6.x headers, longer in newer kernels | bytes_acked 120, bytes_received 128 (present from 136 bytes on: Linux 4.1) |
//!
//! **One walk for both TCP families.** The kernel dumps TCP by walking
//! every bucket of the established hash table (262144 buckets here), which
//! costs about 160 µs even when it holds nothing, once per request. A
//! `inet_diag_req_v2` names one family, so TCP over IPv4 and IPv6 would
//! walk it twice. The older `TCPDIAG_GETSOCK` request (`inet_diag_req`,
//! still served by `inet_diag` for compatibility) dumps with family
//! `AF_UNSPEC`: both families in one walk. [`Request::tcp_any`] builds it;
//! its answers carry the request's message type and either family. Where
//! a kernel refuses it, [`crate::netlink`] falls back to the two v2
//! requests.
//!
//! Attributes (`rtattr`: u16 length, u16 type, payload, padded to 4) follow
//! the fixed part of each answer. Every length is checked against what is
//! left of the buffer: a short or inconsistent message is an error, never a
//! panic or an out-of-bounds read. A `tcp_info` shorter than 136 bytes (a
//! kernel older than 4.1) is not an error: the socket comes without byte
//! counters.

use crate::{SockProto, SocketFigures};

/// Size of `struct nlmsghdr`.
pub const NLMSG_HDRLEN: usize = 16;
/// `NLMSG_NOOP`.
pub const NLMSG_NOOP: u16 = 1;
/// `NLMSG_ERROR`.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`.
pub const NLMSG_DONE: u16 = 3;
/// `NLMSG_OVERRUN`.
pub const NLMSG_OVERRUN: u16 = 4;
/// `NLM_F_REQUEST`.
pub const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`).
pub const NLM_F_DUMP: u16 = 0x300;
/// `SOCK_DIAG_BY_FAMILY`: the message type of requests and answers.
pub const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `TCPDIAG_GETSOCK`: the v1 TCP request (and its answers), any family.
pub const TCPDIAG_GETSOCK: u16 = 18;
/// Size of `struct inet_diag_req` (v1).
pub const INET_DIAG_REQ_V1_LEN: usize = 60;
/// `INET_DIAG_INFO`: the attribute carrying `tcp_info`.
pub const INET_DIAG_INFO: u16 = 2;
/// `UNIX_DIAG_RQLEN`: the attribute carrying a Unix socket's queues.
pub const UNIX_DIAG_RQLEN: u16 = 4;
/// `UDIAG_SHOW_RQLEN`: asks for [`UNIX_DIAG_RQLEN`].
pub const UDIAG_SHOW_RQLEN: u32 = 0x10;
/// Size of `struct inet_diag_req_v2`.
pub const INET_DIAG_REQ_LEN: usize = 56;
/// Size of `struct inet_diag_msg`.
pub const INET_DIAG_MSG_LEN: usize = 72;
/// Size of `struct unix_diag_req`.
pub const UNIX_DIAG_REQ_LEN: usize = 24;
/// Size of `struct unix_diag_msg`.
pub const UNIX_DIAG_MSG_LEN: usize = 16;
/// `tcp_info` offset of `tcpi_bytes_acked` (u64).
pub const TCPI_BYTES_ACKED: usize = 120;
/// `tcp_info` offset of `tcpi_bytes_received` (u64).
pub const TCPI_BYTES_RECEIVED: usize = 128;

/// `AF_UNSPEC`: in a [`Request::Inet`], both IPv4 and IPv6 (TCP only).
pub const AF_UNSPEC: u8 = 0;
/// `AF_UNIX`.
pub const AF_UNIX: u8 = 1;
/// `AF_INET`.
pub const AF_INET: u8 = 2;
/// `AF_INET6`.
pub const AF_INET6: u8 = 10;
/// `IPPROTO_TCP`.
pub const IPPROTO_TCP: u8 = 6;
/// `IPPROTO_UDP`.
pub const IPPROTO_UDP: u8 = 17;

/// TCP states (`include/net/tcp_states.h`), which Unix sockets share.
pub mod state {
    /// `TCP_ESTABLISHED`.
    pub const ESTABLISHED: u8 = 1;
    /// `TCP_SYN_SENT`.
    pub const SYN_SENT: u8 = 2;
    /// `TCP_SYN_RECV` (a full socket: fast open).
    pub const SYN_RECV: u8 = 3;
    /// `TCP_FIN_WAIT1`.
    pub const FIN_WAIT1: u8 = 4;
    /// `TCP_FIN_WAIT2`.
    pub const FIN_WAIT2: u8 = 5;
    /// `TCP_TIME_WAIT` (a mini socket without inode).
    pub const TIME_WAIT: u8 = 6;
    /// `TCP_CLOSE`.
    pub const CLOSE: u8 = 7;
    /// `TCP_CLOSE_WAIT`.
    pub const CLOSE_WAIT: u8 = 8;
    /// `TCP_LAST_ACK`.
    pub const LAST_ACK: u8 = 9;
    /// `TCP_LISTEN`: queues count connections, not bytes.
    pub const LISTEN: u8 = 10;
    /// `TCP_CLOSING`.
    pub const CLOSING: u8 = 11;
}

/// The states dumped for TCP: every state of a full socket that can hold
/// data. Listening sockets (their queues count connections), TIME_WAIT and
/// request sockets (no inode, no data) are filtered out by the kernel.
pub const TCP_STATES: u32 = bit(state::ESTABLISHED)
    | bit(state::SYN_SENT)
    | bit(state::SYN_RECV)
    | bit(state::FIN_WAIT1)
    | bit(state::FIN_WAIT2)
    | bit(state::CLOSE)
    | bit(state::CLOSE_WAIT)
    | bit(state::LAST_ACK)
    | bit(state::CLOSING);

/// The states dumped for UDP and Unix sockets: connected (ESTABLISHED) and
/// unconnected (CLOSE); not listening Unix sockets.
pub const DGRAM_STATES: u32 = bit(state::ESTABLISHED) | bit(state::CLOSE);

const fn bit(s: u8) -> u32 {
    1 << s
}

/// One sock_diag dump request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// `inet_diag_req_v2` for one address family and protocol, or the v1
    /// `inet_diag_req` for TCP over both families (`family` `AF_UNSPEC`).
    Inet {
        /// `AF_INET`, `AF_INET6`, or `AF_UNSPEC` (TCP only: both).
        family: u8,
        /// `IPPROTO_TCP` or `IPPROTO_UDP`.
        protocol: u8,
        /// Bit mask of the states to dump.
        states: u32,
        /// Extensions asked for (bit `1 << (INET_DIAG_INFO - 1)` for
        /// `tcp_info`).
        ext: u8,
    },
    /// `unix_diag_req`.
    Unix {
        /// Bit mask of the states to dump.
        states: u32,
        /// What to show (`UDIAG_SHOW_*`).
        show: u32,
    },
}

impl Request {
    /// TCP over `family`, with `tcp_info`.
    pub fn tcp(family: u8) -> Self {
        Request::Inet {
            family,
            protocol: IPPROTO_TCP,
            states: TCP_STATES,
            ext: 1 << (INET_DIAG_INFO - 1),
        }
    }

    /// TCP over IPv4 and IPv6 in one dump (the v1 request), with
    /// `tcp_info`.
    pub fn tcp_any() -> Self {
        Self::tcp(AF_UNSPEC)
    }

    /// UDP over `family`.
    pub fn udp(family: u8) -> Self {
        Request::Inet {
            family,
            protocol: IPPROTO_UDP,
            states: DGRAM_STATES,
            ext: 0,
        }
    }

    /// Unix sockets with their queue lengths.
    pub fn unix() -> Self {
        Request::Unix {
            states: DGRAM_STATES,
            show: UDIAG_SHOW_RQLEN,
        }
    }

    /// A short name for errors and stats: `tcp4`, `udp6`, `unix`, ...
    pub fn name(&self) -> &'static str {
        match *self {
            Request::Inet {
                family, protocol, ..
            } => match (family, protocol) {
                (AF_UNSPEC, IPPROTO_TCP) => "tcp",
                (AF_INET, IPPROTO_TCP) => "tcp4",
                (AF_INET6, IPPROTO_TCP) => "tcp6",
                (AF_INET, IPPROTO_UDP) => "udp4",
                (AF_INET6, IPPROTO_UDP) => "udp6",
                _ => "inet",
            },
            Request::Unix { .. } => "unix",
        }
    }

    /// What kind of socket the answers describe.
    pub fn proto(&self) -> SockProto {
        match *self {
            Request::Inet {
                protocol: IPPROTO_TCP,
                ..
            } => SockProto::Tcp,
            Request::Inet { .. } => SockProto::Udp,
            Request::Unix { .. } => SockProto::Unix,
        }
    }

    /// The netlink message type of the request and its answers.
    pub fn message_type(&self) -> u16 {
        match *self {
            Request::Inet {
                family: AF_UNSPEC, ..
            } => TCPDIAG_GETSOCK,
            _ => SOCK_DIAG_BY_FAMILY,
        }
    }

    /// Replaces `buf` with this request as one netlink message with
    /// sequence number `seq`.
    pub fn encode(&self, seq: u32, buf: &mut Vec<u8>) {
        buf.clear();
        let body = match self {
            Request::Inet {
                family: AF_UNSPEC, ..
            } => INET_DIAG_REQ_V1_LEN,
            Request::Inet { .. } => INET_DIAG_REQ_LEN,
            Request::Unix { .. } => UNIX_DIAG_REQ_LEN,
        };
        let len = NLMSG_HDRLEN + body;
        buf.resize(len, 0);
        put_u32(
            buf,
            0,
            u32::try_from(len).expect("a request is under 100 bytes"),
        );
        put_u16(buf, 4, self.message_type());
        put_u16(buf, 6, NLM_F_REQUEST | NLM_F_DUMP);
        put_u32(buf, 8, seq);
        // nlmsg_pid 0: the kernel fills in the port.
        let b = NLMSG_HDRLEN;
        match *self {
            Request::Inet {
                family: AF_UNSPEC,
                states,
                ext,
                ..
            } => {
                // inet_diag_req: family, src_len, dst_len, ext, sockid (48),
                // states, dbs. The kernel dumps with AF_UNSPEC whatever the
                // family byte says; the protocol is the message type's.
                buf[b + 3] = ext;
                put_u32(buf, b + 52, states);
            }
            Request::Inet {
                family,
                protocol,
                states,
                ext,
            } => {
                buf[b] = family;
                buf[b + 1] = protocol;
                buf[b + 2] = ext;
                put_u32(buf, b + 4, states);
                // inet_diag_sockid left zero: no address filter.
            }
            Request::Unix { states, show } => {
                buf[b] = AF_UNIX;
                buf[b + 1] = 0;
                put_u32(buf, b + 4, states);
                put_u32(buf, b + 8, 0); // udiag_ino: any
                put_u32(buf, b + 12, show);
                // cookie left zero.
            }
        }
    }
}

/// Why a netlink answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A length field points past the end of the buffer or is too small for
    /// its header.
    #[error(
        "{request}: {what} at byte {offset}: length {len} does not fit ({available} bytes left)"
    )]
    Truncated {
        /// The dump being read.
        request: &'static str,
        /// Which structure.
        what: &'static str,
        /// Where it starts in the buffer.
        offset: usize,
        /// Its length field (or the size it needs).
        len: usize,
        /// Bytes available.
        available: usize,
    },
    /// The kernel answered the request with an error (`NLMSG_ERROR`, or a
    /// negative status in `NLMSG_DONE`).
    #[error("{request}: the kernel answered errno {errno} ({})", std::io::Error::from_raw_os_error(*.errno))]
    Kernel {
        /// The dump being read.
        request: &'static str,
        /// The positive errno.
        errno: i32,
    },
    /// A message type that does not belong in a sock_diag dump.
    #[error("{request}: unexpected netlink message type {kind} at byte {offset}")]
    UnexpectedType {
        /// The dump being read.
        request: &'static str,
        /// `nlmsg_type`.
        kind: u16,
        /// Where it starts in the buffer.
        offset: usize,
    },
    /// An answer for another address family than asked.
    #[error("{request}: answer for address family {family} at byte {offset}")]
    WrongFamily {
        /// The dump being read.
        request: &'static str,
        /// The family in the answer.
        family: u8,
        /// Where it starts in the buffer.
        offset: usize,
    },
}

/// Where a dump stands after one received buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// More buffers follow.
    More,
    /// `NLMSG_DONE` was seen: the dump is complete.
    Done,
}

/// Parses one received buffer of answers to `req` (sequence number `seq`),
/// appending one [`SocketFigures`] per socket with an inode to `out`.
/// Messages with another sequence number (left over from an abandoned
/// dump) are skipped.
pub fn parse_answers(
    req: &Request,
    seq: u32,
    buf: &[u8],
    out: &mut Vec<SocketFigures>,
) -> Result<Progress, WireError> {
    let name = req.name();
    let mut off = 0usize;
    while off < buf.len() {
        let left = buf.len() - off;
        if left < NLMSG_HDRLEN {
            return Err(WireError::Truncated {
                request: name,
                what: "nlmsghdr",
                offset: off,
                len: NLMSG_HDRLEN,
                available: left,
            });
        }
        let len = get_u32(buf, off) as usize;
        if len < NLMSG_HDRLEN || len > left {
            return Err(WireError::Truncated {
                request: name,
                what: "netlink message",
                offset: off,
                len,
                available: left,
            });
        }
        let kind = get_u16(buf, off + 4);
        let msg_seq = get_u32(buf, off + 8);
        let payload = &buf[off + NLMSG_HDRLEN..off + len];
        if msg_seq == seq {
            match kind {
                NLMSG_NOOP => {}
                NLMSG_DONE => {
                    // The payload, when present, is the dump's status.
                    if payload.len() >= 4 {
                        let status = get_i32(payload, 0);
                        if status < 0 {
                            return Err(WireError::Kernel {
                                request: name,
                                errno: status.saturating_neg(),
                            });
                        }
                    }
                    return Ok(Progress::Done);
                }
                NLMSG_ERROR => {
                    if payload.len() < 4 {
                        return Err(WireError::Truncated {
                            request: name,
                            what: "nlmsgerr",
                            offset: off,
                            len: NLMSG_HDRLEN + 4,
                            available: len,
                        });
                    }
                    let errno = get_i32(payload, 0).saturating_neg();
                    if errno == 0 {
                        // An acknowledgement: the request is finished.
                        return Ok(Progress::Done);
                    }
                    return Err(WireError::Kernel {
                        request: name,
                        errno,
                    });
                }
                t if t == req.message_type() => {
                    let figures = match req {
                        Request::Inet { family, .. } => {
                            parse_inet(name, *family, req.proto(), payload, off)?
                        }
                        Request::Unix { .. } => parse_unix(name, payload, off)?,
                    };
                    if let Some(f) = figures {
                        out.push(f);
                    }
                }
                other => {
                    return Err(WireError::UnexpectedType {
                        request: name,
                        kind: other,
                        offset: off,
                    })
                }
            }
        }
        // NLMSG_ALIGN; the last message's padding may be missing.
        off += align4(len).min(left);
    }
    Ok(Progress::More)
}

/// Whether `buf` holds the `NLMSG_DONE` or `NLMSG_ERROR` of dump `seq`,
/// reading only message headers (for draining an abandoned dump). Stops at
/// the first header that does not fit.
pub fn ends_dump(buf: &[u8], seq: u32) -> bool {
    let mut off = 0usize;
    while buf.len() - off >= NLMSG_HDRLEN {
        let len = get_u32(buf, off) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() - off {
            return false;
        }
        let kind = get_u16(buf, off + 4);
        if get_u32(buf, off + 8) == seq && (kind == NLMSG_DONE || kind == NLMSG_ERROR) {
            return true;
        }
        off += align4(len).min(buf.len() - off);
    }
    false
}

/// One `inet_diag_msg` and its attributes; `None` for sockets without inode
/// or in a state that holds no data.
fn parse_inet(
    name: &'static str,
    family: u8,
    proto: SockProto,
    p: &[u8],
    msg_off: usize,
) -> Result<Option<SocketFigures>, WireError> {
    if p.len() < INET_DIAG_MSG_LEN {
        return Err(WireError::Truncated {
            request: name,
            what: "inet_diag_msg",
            offset: msg_off,
            len: NLMSG_HDRLEN + INET_DIAG_MSG_LEN,
            available: NLMSG_HDRLEN + p.len(),
        });
    }
    let family_ok = match family {
        AF_UNSPEC => p[0] == AF_INET || p[0] == AF_INET6,
        f => p[0] == f,
    };
    if !family_ok {
        return Err(WireError::WrongFamily {
            request: name,
            family: p[0],
            offset: msg_off,
        });
    }
    let st = p[1];
    let rqueue = u64::from(get_u32(p, 56));
    let wqueue = u64::from(get_u32(p, 60));
    let inode = u64::from(get_u32(p, 68));
    let mut info: Option<(u64, u64)> = None;
    for (kind, data) in attributes(name, p, INET_DIAG_MSG_LEN, msg_off)? {
        if kind == INET_DIAG_INFO && proto == SockProto::Tcp {
            info = tcp_counters(data);
        }
    }
    if inode == 0 || (proto == SockProto::Tcp && st == state::LISTEN) {
        return Ok(None);
    }
    let (bytes_read, bytes_written) = match info {
        Some((acked, received)) => (
            Some(received.saturating_sub(rqueue)),
            Some(acked.saturating_add(wqueue)),
        ),
        None => (None, None),
    };
    Ok(Some(SocketFigures {
        inode,
        proto,
        rqueue,
        wqueue,
        bytes_read,
        bytes_written,
    }))
}

/// `(tcpi_bytes_acked, tcpi_bytes_received)` of a `tcp_info` long enough to
/// have them.
pub fn tcp_counters(info: &[u8]) -> Option<(u64, u64)> {
    if info.len() < TCPI_BYTES_RECEIVED + 8 {
        return None;
    }
    Some((
        get_u64(info, TCPI_BYTES_ACKED),
        get_u64(info, TCPI_BYTES_RECEIVED),
    ))
}

/// One `unix_diag_msg` and its attributes.
fn parse_unix(
    name: &'static str,
    p: &[u8],
    msg_off: usize,
) -> Result<Option<SocketFigures>, WireError> {
    if p.len() < UNIX_DIAG_MSG_LEN {
        return Err(WireError::Truncated {
            request: name,
            what: "unix_diag_msg",
            offset: msg_off,
            len: NLMSG_HDRLEN + UNIX_DIAG_MSG_LEN,
            available: NLMSG_HDRLEN + p.len(),
        });
    }
    if p[0] != AF_UNIX {
        return Err(WireError::WrongFamily {
            request: name,
            family: p[0],
            offset: msg_off,
        });
    }
    let st = p[2];
    let inode = u64::from(get_u32(p, 4));
    let (mut rqueue, mut wqueue) = (0, 0);
    for (kind, data) in attributes(name, p, UNIX_DIAG_MSG_LEN, msg_off)? {
        if kind == UNIX_DIAG_RQLEN {
            if data.len() < 8 {
                return Err(WireError::Truncated {
                    request: name,
                    what: "unix_diag_rqlen",
                    offset: msg_off,
                    len: 8,
                    available: data.len(),
                });
            }
            rqueue = u64::from(get_u32(data, 0));
            wqueue = u64::from(get_u32(data, 4));
        }
    }
    if inode == 0 || st == state::LISTEN {
        return Ok(None);
    }
    Ok(Some(SocketFigures {
        inode,
        proto: SockProto::Unix,
        rqueue,
        wqueue,
        bytes_read: None,
        bytes_written: None,
    }))
}

/// The `(type, payload)` of each `rtattr` of `p` from `start` on.
fn attributes<'a>(
    name: &'static str,
    p: &'a [u8],
    start: usize,
    msg_off: usize,
) -> Result<Vec<(u16, &'a [u8])>, WireError> {
    let mut out = Vec::new();
    let mut off = start;
    while off < p.len() {
        let left = p.len() - off;
        if left < 4 {
            return Err(WireError::Truncated {
                request: name,
                what: "rtattr",
                offset: msg_off + NLMSG_HDRLEN + off,
                len: 4,
                available: left,
            });
        }
        let len = usize::from(get_u16(p, off));
        if len < 4 || len > left {
            return Err(WireError::Truncated {
                request: name,
                what: "rtattr",
                offset: msg_off + NLMSG_HDRLEN + off,
                len,
                available: left,
            });
        }
        // The top two bits are the nested / byte-order flags.
        let kind = get_u16(p, off + 2) & 0x3fff;
        out.push((kind, &p[off + 4..off + len]));
        off += align4(len).min(left);
    }
    Ok(out)
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

// The getters take offsets that callers have checked against the length;
// they still index with bounds checks, so a mistake panics in tests rather
// than reading out of bounds.
fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn get_i32(b: &[u8], at: usize) -> i32 {
    get_u32(b, at) as i32
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_ne_bytes());
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
