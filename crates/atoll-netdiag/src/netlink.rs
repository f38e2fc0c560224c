//! sock_diag over a raw `NETLINK_SOCK_DIAG` socket: the default
//! [`SocketSource`].
//!
//! A sample sends one dump request per protocol (`tcp` for both families
//! in one walk of the kernel's hash table, see [`wire`]; `udp4`, `udp6`,
//! `unix`; as [`Protocols`] selects) and reads the answers until
//! `NLMSG_DONE`; requests and answers are the byte layouts of [`wire`]. If
//! the kernel refuses the single TCP request, it is replaced by `tcp4` and
//! `tcp6` for that namespace (and listed by [`NetlinkSource::unavailable`]
//! as `tcp`). The
//! kernel filters by state (no listening, TIME_WAIT or request sockets),
//! so the cost grows with the sockets that can hold data. The receive
//! buffer is 64 KiB, twice the largest dump message the kernel builds
//! (32 KiB), and a receive timeout of 2 s keeps a stuck kernel from
//! stalling the daemon. Answers to an abandoned dump (after an error) carry
//! an older sequence number and are skipped.
//!
//! **Network namespaces.** A netlink socket reports the sockets of the
//! namespace it was created in. The source's own namespace uses the socket
//! opened at start. For another namespace, it opens `/proc/<pid>/ns/net` of
//! one of the processes in it, `setns`es a short-lived thread into it (the
//! namespace of a thread is its own; the daemon's threads are untouched),
//! opens a netlink socket there and keeps it, keyed by the namespace inode.
//! This needs `CAP_SYS_ADMIN`; without it the namespace is reported as
//! skipped ([`NetlinkError::skips_namespace`]) and retried on the monitor's
//! end of the monitor's rescan period. The socket keeps its namespace alive, so its inode
//! cannot be reused while it is cached; namespaces no longer seen are
//! dropped by [`SocketSource::retain_namespaces`].
//!
//! A protocol whose diag module is missing (the kernel answers `ENOENT` or
//! `EOPNOTSUPP`, e.g. no `udp_diag`) is dropped from the requests for the
//! namespace, and listed by [`NetlinkSource::unavailable`].

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::wire::{self, Progress, Request, WireError, AF_INET, AF_INET6};
use crate::{NetNs, Protocols, SocketFigures, SocketSource, SourceError, SourceKind};

/// Receive buffer size.
const RECV_BUF: usize = 64 * 1024;

/// Why a sock_diag dump failed.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// A system call on the netlink socket failed.
    #[error("sock_diag {op}: {source}")]
    Io {
        /// What was being done (`socket`, `send tcp4`, `recv unix`, ...).
        op: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The kernel's answer could not be read.
    #[error("sock_diag: {0}")]
    Wire(#[from] WireError),
    /// A message longer than the receive buffer.
    #[error("sock_diag {request}: a {len}-byte message does not fit the {RECV_BUF}-byte buffer")]
    Oversized {
        /// The dump being read.
        request: &'static str,
        /// The message's real length.
        len: usize,
    },
    /// Another network namespace could not be entered.
    #[error("sock_diag: network namespace {path}: {source}")]
    Netns {
        /// The `ns/net` path used.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl NetlinkError {
    /// Whether only one namespace is affected (see [`SourceError`]).
    pub fn skips_namespace(&self) -> bool {
        matches!(self, NetlinkError::Netns { .. })
    }
}

/// One `NETLINK_SOCK_DIAG` socket, bound to the namespace it was opened in.
#[derive(Debug)]
pub struct DiagSocket {
    fd: OwnedFd,
    seq: u32,
    req: Vec<u8>,
    buf: Vec<u8>,
}

impl DiagSocket {
    /// Opens a socket in the calling thread's network namespace.
    pub fn open() -> Result<Self, NetlinkError> {
        // SAFETY: socket(2) takes no pointers; the result is checked below.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            return Err(io_err("socket"));
        }
        // SAFETY: `fd` is a descriptor we just opened and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let timeout = libc::timeval {
            tv_sec: 2,
            tv_usec: 0,
        };
        // SAFETY: the pointer and size describe `timeout`, which lives for
        // the call; `fd` is a valid socket.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&timeout as *const libc::timeval).cast(),
                socklen::<libc::timeval>(),
            )
        };
        if rc != 0 {
            return Err(io_err("setsockopt SO_RCVTIMEO"));
        }
        Ok(Self {
            fd,
            seq: 0,
            req: Vec::with_capacity(wire::NLMSG_HDRLEN + wire::INET_DIAG_REQ_LEN),
            buf: vec![0; RECV_BUF],
        })
    }

    /// Runs one dump, appending its sockets to `out`. After an error
    /// other than the kernel's own answer, the rest of the dump is read and
    /// dropped, so that the next request does not find the kernel still
    /// busy with this one (`EBUSY`).
    pub fn dump(
        &mut self,
        req: &Request,
        out: &mut Vec<SocketFigures>,
    ) -> Result<(), NetlinkError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        req.encode(seq, &mut self.req);
        self.send(req.name())?;
        let res = self.read_answers(req, seq, out);
        if let Err(e) = &res {
            if !matches!(e, NetlinkError::Wire(WireError::Kernel { .. })) {
                self.drain(req, seq);
            }
        }
        res
    }

    fn read_answers(
        &mut self,
        req: &Request,
        seq: u32,
        out: &mut Vec<SocketFigures>,
    ) -> Result<(), NetlinkError> {
        loop {
            let n = self.recv(req.name())?;
            if n > self.buf.len() {
                return Err(NetlinkError::Oversized {
                    request: req.name(),
                    len: n,
                });
            }
            if n == 0 {
                return Err(NetlinkError::Io {
                    op: format!("recv {}", req.name()),
                    source: io::Error::from(io::ErrorKind::UnexpectedEof),
                });
            }
            if wire::parse_answers(req, seq, &self.buf[..n], out)? == Progress::Done {
                return Ok(());
            }
        }
    }

    /// Reads until the end of dump `seq` (best effort, bounded by the
    /// receive timeout).
    fn drain(&mut self, req: &Request, seq: u32) {
        for _ in 0..100_000 {
            let Ok(n) = self.recv(req.name()) else { return };
            if n == 0 || wire::ends_dump(&self.buf[..n.min(self.buf.len())], seq) {
                return;
            }
        }
    }

    fn send(&mut self, name: &str) -> Result<(), NetlinkError> {
        // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = netlink_family();
        loop {
            // SAFETY: the buffer pointer and length describe `self.req`; the
            // address pointer and size describe `kernel`; both outlive the
            // call.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    self.req.as_ptr().cast(),
                    self.req.len(),
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
                return Err(NetlinkError::Io {
                    op: format!("send {name}"),
                    source: e,
                });
            }
        }
    }

    /// One datagram into `self.buf`; returns its real length (which
    /// `MSG_TRUNC` reports even when it did not fit).
    fn recv(&mut self, name: &str) -> Result<usize, NetlinkError> {
        loop {
            // SAFETY: the pointer and length describe `self.buf`, which is
            // valid for writes of that many bytes during the call.
            let rc = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_TRUNC,
                )
            };
            // A negative length is an error.
            if let Ok(n) = usize::try_from(rc) {
                return Ok(n);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(NetlinkError::Io {
                    op: format!("recv {name}"),
                    source: e,
                });
            }
        }
    }
}

/// `size_of::<T>()` as the `socklen_t` a socket call takes: only small C
/// structs (a netlink address, a timeval) are passed, far below 4 GiB.
fn socklen<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(std::mem::size_of::<T>())
        .expect("a socket argument is a small C struct")
}

/// `AF_NETLINK` (16) as the `sa_family_t` (u16) of a `sockaddr_nl`.
fn netlink_family() -> libc::sa_family_t {
    libc::sa_family_t::try_from(libc::AF_NETLINK).expect("AF_NETLINK is 16")
}

fn io_err(op: &str) -> NetlinkError {
    NetlinkError::Io {
        op: op.to_string(),
        source: io::Error::last_os_error(),
    }
}

/// Opens a diag socket inside the network namespace of `ns_path` (a
/// `/proc/<pid>/ns/net` file), from a short-lived thread.
fn open_in_netns(ns_path: &Path) -> Result<DiagSocket, NetlinkError> {
    let netns_err = |source| NetlinkError::Netns {
        path: ns_path.to_path_buf(),
        source,
    };
    let ns = File::open(ns_path).map_err(netns_err)?;
    let joined = std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: `ns` is an open namespace file for the whole call;
            // setns only changes this thread's network namespace, and the
            // thread ends right after opening the socket.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(netns_err(io::Error::last_os_error()));
            }
            DiagSocket::open()
        })
        .join()
    });
    match joined {
        Ok(r) => r,
        Err(_) => Err(netns_err(io::Error::other("namespace thread panicked"))),
    }
}

/// The requests that `protocols` selects.
fn requests(protocols: Protocols) -> Vec<Request> {
    let mut v = Vec::new();
    if protocols.tcp {
        v.push(Request::tcp_any());
    }
    if protocols.udp {
        v.push(Request::udp(AF_INET));
        v.push(Request::udp(AF_INET6));
    }
    if protocols.unix {
        v.push(Request::unix());
    }
    v
}

/// One namespace's socket and the requests that work there.
#[derive(Debug)]
struct NsEntry {
    sock: DiagSocket,
    requests: Vec<Request>,
}

/// [`SocketSource`] from sock_diag netlink.
#[derive(Debug)]
pub struct NetlinkSource {
    proc_root: PathBuf,
    own_ns: NetNs,
    protocols: Protocols,
    own: NsEntry,
    /// Other namespaces: their socket, or `None` when it could not be
    /// opened (skipped until the next `retain_namespaces`).
    foreign: HashMap<u64, Option<NsEntry>>,
    unavailable: Vec<&'static str>,
}

impl NetlinkSource {
    /// Opens a source in the caller's network namespace. `proc_root` (usually
    /// `/proc`) is where `self/ns/net` and `<pid>/ns/net` are found.
    pub fn open(proc_root: impl Into<PathBuf>, protocols: Protocols) -> Result<Self, NetlinkError> {
        let proc_root = proc_root.into();
        let own_ns = std::fs::read_link(proc_root.join("self/ns/net"))
            .ok()
            .and_then(|t| crate::parse_ns_or_socket(t.as_os_str().as_encoded_bytes(), b"net:["));
        Ok(Self {
            proc_root,
            own_ns,
            protocols,
            own: NsEntry {
                sock: DiagSocket::open()?,
                requests: requests(protocols),
            },
            foreign: HashMap::new(),
            unavailable: Vec::new(),
        })
    }

    /// The namespace the source runs in (`None` if unknown).
    pub fn own_namespace(&self) -> NetNs {
        self.own_ns
    }

    /// Dumps found missing from the kernel (`udp4`, `unix`, ...), once each.
    pub fn unavailable(&self) -> &[&'static str] {
        &self.unavailable
    }

    /// The number of other namespaces with an open socket.
    pub fn foreign_namespaces(&self) -> usize {
        self.foreign.values().filter(|e| e.is_some()).count()
    }

    fn entry(&mut self, ns: NetNs, pids: &[u32]) -> Result<&mut NsEntry, NetlinkError> {
        let id = match ns {
            Some(id) if Some(id) != self.own_ns => id,
            _ => return Ok(&mut self.own),
        };
        if !self.foreign.contains_key(&id) {
            let mut last = None;
            let mut opened = None;
            for pid in pids {
                let path = self.proc_root.join(pid.to_string()).join("ns/net");
                match open_in_netns(&path) {
                    Ok(sock) => {
                        opened = Some(sock);
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            let entry = opened.map(|sock| NsEntry {
                sock,
                requests: requests(self.protocols),
            });
            self.foreign.insert(id, entry);
            if let Some(e) = last.filter(|_| self.foreign[&id].is_none()) {
                return Err(e);
            }
        }
        match self.foreign.get_mut(&id) {
            Some(Some(e)) => Ok(e),
            _ => Err(NetlinkError::Netns {
                path: self.proc_root.join(format!("net:[{id}]")),
                source: io::Error::other(
                    "could not be entered earlier; retried after the rescan period",
                ),
            }),
        }
    }
}

impl SocketSource for NetlinkSource {
    fn kind(&self) -> SourceKind {
        SourceKind::SockDiag
    }

    fn dump(
        &mut self,
        ns: NetNs,
        pids: &[u32],
        out: &mut Vec<SocketFigures>,
    ) -> Result<(), SourceError> {
        let entry = self.entry(ns, pids)?;
        let mut dropped = Vec::new();
        let mut i = 0;
        while i < entry.requests.len() {
            let req = entry.requests[i];
            match entry.sock.dump(&req, out) {
                Ok(()) => i += 1,
                Err(NetlinkError::Wire(WireError::Kernel { .. })) if req == Request::tcp_any() => {
                    // No v1 request here: one v2 request per family.
                    entry
                        .requests
                        .splice(i..=i, [Request::tcp(AF_INET), Request::tcp(AF_INET6)]);
                    dropped.push(req.name());
                }
                Err(NetlinkError::Wire(WireError::Kernel { errno, .. }))
                    if errno == libc::ENOENT || errno == libc::EOPNOTSUPP =>
                {
                    entry.requests.remove(i);
                    dropped.push(req.name());
                }
                Err(e) => return Err(e.into()),
            }
        }
        for name in dropped {
            if !self.unavailable.contains(&name) {
                self.unavailable.push(name);
            }
        }
        Ok(())
    }

    fn retain_namespaces(&mut self, live: &[NetNs]) {
        self.foreign
            .retain(|id, e| e.is_some() && live.contains(&Some(*id)));
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::unix::net::UnixStream;

    use super::*;

    fn inode_of(fd: &impl AsRawFd) -> u64 {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        crate::parse_ns_or_socket(link.as_os_str().as_encoded_bytes(), b"socket:[").unwrap()
    }

    /// The kernel's own answers, for sockets of this test: queued bytes show
    /// in the receive queue, and read bytes in the counter.
    #[test]
    fn dumps_this_process_sockets() {
        let mut sock = DiagSocket::open().expect("NETLINK_SOCK_DIAG");
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        let (mut u1, u2) = UnixStream::pair().unwrap();

        let find = |sock: &mut DiagSocket,
                    req: Request,
                    inode: u64,
                    done: &dyn Fn(&SocketFigures) -> bool| {
            // The data may still be in flight on loopback: poll a few times
            // (no timing assertion: only the last value is checked).
            let mut last = None;
            for _ in 0..200 {
                let mut out = Vec::new();
                sock.dump(&req, &mut out).unwrap();
                last = out.into_iter().find(|f| f.inode == inode);
                if last.as_ref().is_some_and(done) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            last.unwrap_or_else(|| panic!("{} inode {inode} not in the dump", req.name()))
        };
        let tcp = Request::tcp_any();
        // The active side's counter includes its SYN (sequence space): only
        // differences are meaningful.
        let before = find(&mut sock, tcp, inode_of(&a), &|_| true);
        a.write_all(&[7u8; 3000]).unwrap();
        u1.write_all(&[1u8; 500]).unwrap();
        let fb = find(&mut sock, tcp, inode_of(&b), &|f| f.rqueue >= 3000);
        assert_eq!(fb.rqueue, 3000);
        assert_eq!(fb.bytes_read, Some(0));
        let mut got = vec![0u8; 3000];
        b.read_exact(&mut got).unwrap();
        let fb2 = find(&mut sock, tcp, inode_of(&b), &|f| f.rqueue == 0);
        assert_eq!((fb2.rqueue, fb2.bytes_read), (0, Some(3000)));
        let fa = find(&mut sock, tcp, inode_of(&a), &|f| f.wqueue == 0);
        assert_eq!(
            fa.bytes_written.unwrap() - before.bytes_written.unwrap(),
            3000
        );

        // The one TCP request covers IPv6 too, where the machine has it.
        if let Ok(l6) = TcpListener::bind("[::1]:0") {
            let mut c6 = TcpStream::connect(l6.local_addr().unwrap()).unwrap();
            let (s6, _) = l6.accept().unwrap();
            c6.write_all(&[3u8; 700]).unwrap();
            let f6 = find(&mut sock, tcp, inode_of(&s6), &|f| f.rqueue > 0);
            assert_eq!(f6.rqueue, 700);
            let f6 = find(&mut sock, Request::tcp(AF_INET6), inode_of(&s6), &|f| {
                f.rqueue > 0
            });
            assert_eq!(f6.rqueue, 700);
        }

        let fu = find(&mut sock, Request::unix(), inode_of(&u2), &|f| f.rqueue > 0);
        assert_eq!(fu.rqueue, 500);
        assert_eq!(fu.proto, crate::SockProto::Unix);
    }
}
