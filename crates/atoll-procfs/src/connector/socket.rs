//! The system calls behind [`ProcConnector`](super::ProcConnector): the
//! socket, its buffer, its group, and batched reads.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use atoll_core::events::ProcEventError;

use super::{wire, ConnectorError, KIND};

/// Datagrams read per `recvmmsg(2)` call.
pub(super) const SLOTS: usize = 64;
/// Bytes per datagram slot: a proc event datagram is 76 bytes on 6.x;
/// a longer one is reported truncated (`MSG_TRUNC`), never cut silently.
const SLOT_LEN: usize = 256;

/// `size_of::<T>()` as the `socklen_t` a socket call takes: only small C
/// structs (a netlink address, an int) are passed, far below 4 GiB.
pub(super) fn socklen<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(std::mem::size_of::<T>())
        .expect("a socket argument is a small C struct")
}

/// `AF_NETLINK` (16) as the `sa_family_t` (u16) of a `sockaddr_nl`.
pub(super) fn netlink_family() -> libc::sa_family_t {
    libc::sa_family_t::try_from(libc::AF_NETLINK).expect("AF_NETLINK is 16")
}

/// Receive buffers for one `recvmmsg(2)` and what it said of each datagram.
pub(super) struct Slots {
    data: [[u8; SLOT_LEN]; SLOTS],
    /// Per datagram: length, sender port, truncated.
    meta: [(usize, u32, bool); SLOTS],
}

impl Default for Slots {
    fn default() -> Self {
        Self {
            data: [[0; SLOT_LEN]; SLOTS],
            meta: [(0, 0, false); SLOTS],
        }
    }
}

impl Slots {
    /// Reads up to `max` (at most [`SLOTS`]) queued datagrams without
    /// waiting; returns how many. `WouldBlock` when none is queued,
    /// `ENOBUFS` when the kernel dropped messages since the last read.
    pub(super) fn recv(&mut self, fd: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        let max = max.clamp(1, SLOTS);
        // SAFETY: these are plain C structs; all-zero is a valid value.
        let mut addrs: [libc::sockaddr_nl; SLOTS] = unsafe { std::mem::zeroed() };
        // SAFETY: as above (null pointers, zero lengths).
        let mut iovs: [libc::iovec; SLOTS] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; SLOTS] = unsafe { std::mem::zeroed() };
        for i in 0..SLOTS {
            iovs[i].iov_base = self.data[i].as_mut_ptr().cast();
            iovs[i].iov_len = SLOT_LEN;
            let h = &mut hdrs[i].msg_hdr;
            h.msg_name = (&mut addrs[i] as *mut libc::sockaddr_nl).cast();
            h.msg_namelen = socklen::<libc::sockaddr_nl>();
            h.msg_iov = &mut iovs[i];
            h.msg_iovlen = 1;
        }
        // SAFETY: every header points at its own iovec and address, and
        // every iovec at its own `SLOT_LEN`-byte buffer in `self.data`; all
        // of them live, unmoved, until the call returns. No timeout pointer.
        let rc = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                libc::c_uint::try_from(max).expect("max <= SLOTS"),
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        // A negative count is an error.
        let Ok(n) = usize::try_from(rc) else {
            return Err(io::Error::last_os_error());
        };
        let n = n.min(max);
        for i in 0..n {
            let h = &hdrs[i];
            self.meta[i] = (
                (h.msg_len as usize).min(SLOT_LEN),
                addrs[i].nl_pid,
                h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            );
        }
        Ok(n)
    }

    /// Datagram `i` of the last read: its bytes, its sender's port (0: the
    /// kernel), and whether it was longer than the slot.
    pub(super) fn datagram(&self, i: usize) -> (&[u8], u32, bool) {
        let (len, sender, truncated) = self.meta[i];
        (&self.data[i][..len], sender, truncated)
    }
}

/// A non-blocking `NETLINK_CONNECTOR` socket.
pub(super) fn open_socket() -> Result<OwnedFd, ConnectorError> {
    // SAFETY: socket(2) takes no pointers; the result is checked below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            libc::NETLINK_CONNECTOR,
        )
    };
    if fd < 0 {
        let source = io::Error::last_os_error();
        return Err(match source.raw_os_error() {
            Some(libc::EPROTONOSUPPORT | libc::EAFNOSUPPORT) => {
                ConnectorError::NoConnector { source }
            }
            Some(libc::EPERM | libc::EACCES) => ConnectorError::NotPermitted {
                detail: format!("socket(AF_NETLINK, NETLINK_CONNECTOR): {source}"),
            },
            _ => ConnectorError::Io {
                op: "socket(AF_NETLINK, NETLINK_CONNECTOR)".into(),
                source,
            },
        });
    }
    // SAFETY: `fd` is a descriptor we just opened and own alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Asks for a receive buffer of `bytes` (`SO_RCVBUFFORCE`, which ignores
/// `net.core.rmem_max` but needs `CAP_NET_ADMIN`, else `SO_RCVBUF`);
/// returns what the kernel granted.
pub(super) fn set_recv_buffer(fd: &OwnedFd, bytes: usize) -> Result<usize, ConnectorError> {
    // At most half of c_int::MAX (the kernel doubles it); more saturates.
    let value = libc::c_int::try_from(bytes)
        .unwrap_or(libc::c_int::MAX)
        .min(libc::c_int::MAX / 2);
    let set = |opt: libc::c_int| {
        // SAFETY: the pointer and size describe `value`, which lives for
        // the call; `fd` is a valid socket.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&value as *const libc::c_int).cast(),
                socklen::<libc::c_int>(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    if set(libc::SO_RCVBUFFORCE).is_err() {
        set(libc::SO_RCVBUF).map_err(|source| ConnectorError::Io {
            op: format!("setsockopt SO_RCVBUF {value}"),
            source,
        })?;
    }
    let mut granted: libc::c_int = 0;
    let mut len = socklen::<libc::c_int>();
    // SAFETY: the pointers describe `granted` and `len`, which live for the
    // call; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut granted as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(ConnectorError::Io {
            op: "getsockopt SO_RCVBUF".into(),
            source: io::Error::last_os_error(),
        });
    }
    // A negative size (never seen) reads as none.
    Ok(usize::try_from(granted).unwrap_or(0))
}

/// Binds the socket to the proc events multicast group; the kernel picks
/// the port.
pub(super) fn bind_group(fd: &OwnedFd) -> Result<(), ConnectorError> {
    // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = netlink_family();
    addr.nl_groups = wire::CN_IDX_PROC;
    // SAFETY: the pointer and size describe `addr`, which lives for the
    // call.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            socklen::<libc::sockaddr_nl>(),
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let source = io::Error::last_os_error();
    Err(match source.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => ConnectorError::NotPermitted {
            detail: format!(
                "bind to the proc events group (CN_IDX_PROC): {source}; \
                 this kernel needs CAP_NET_ADMIN to listen"
            ),
        },
        _ => ConnectorError::Io {
            op: "bind CN_IDX_PROC".into(),
            source,
        },
    })
}

/// The port the kernel gave the socket.
pub(super) fn local_port(fd: &OwnedFd) -> Result<u32, ConnectorError> {
    // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    let mut len = socklen::<libc::sockaddr_nl>();
    // SAFETY: the pointers describe `addr` and `len`, which live for the
    // call; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            (&mut addr as *mut libc::sockaddr_nl).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(ConnectorError::Io {
            op: "getsockname".into(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(addr.nl_pid)
}

/// `timeout` in whole milliseconds for poll(2), rounded up (a 0.3 ms wait
/// must not become a busy loop) and capped.
pub(crate) fn poll_ms(timeout: Duration) -> libc::c_int {
    let ms = timeout.as_nanos().div_ceil(1_000_000);
    libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
}

pub(super) fn io_error(op: &'static str, error: io::Error) -> ProcEventError {
    ProcEventError::Io {
        source_kind: KIND,
        op,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_timeouts_round_up() {
        assert_eq!(poll_ms(Duration::ZERO), 0);
        assert_eq!(poll_ms(Duration::from_micros(300)), 1);
        assert_eq!(poll_ms(Duration::from_millis(30)), 30);
        assert_eq!(poll_ms(Duration::from_secs(u64::MAX)), libc::c_int::MAX);
    }
}
