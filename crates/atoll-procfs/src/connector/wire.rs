//! Proc connector messages as plain bytes: the subscription request built,
//! the kernel's datagrams parsed, events sorted into process events and the
//! rest, and sequence numbers checked for gaps. No I/O, so every path is
//! tested on hand-built buffers.
//!
//! Layouts follow the uapi headers `linux/netlink.h`, `linux/connector.h`
//! and `linux/cn_proc.h`; integers are in host byte order. Each datagram
//! normally holds one netlink message: an `nlmsghdr` of type `NLMSG_DONE`,
//! a `cn_msg` and a `proc_event`:
//!
//! | struct | size | fields read (offset) |
//! |---|---|---|
//! | `nlmsghdr` | 16 | len 0, type 4, seq 8 |
//! | `cn_msg` | 20 | idx 0, val 4, seq 8, ack 12, len 16 |
//! | `proc_event` header | 16 | what 0, cpu 4 (timestamp 8 is not read) |
//! | `fork_proc_event` | 16 | parent pid 16, parent tgid 20, child pid 24, child tgid 28 |
//! | `exec_proc_event` | 8 | pid 16, tgid 20 |
//! | `id_proc_event` | 16 | pid 16, tgid 20, real 24, effective 28 |
//! | `comm_proc_event` | 24 | pid 16, tgid 20, comm 24..40 |
//! | `exit_proc_event` | 16 (24 since 5.x) | pid 16, tgid 20, exit code 24, exit signal 28 |
//! | ack | 4 | err 16 |
//!
//! `cn_msg.len` says how long the `proc_event` is (40 bytes on 6.x): each
//! event is read only as far as its type needs, so a longer event from a
//! newer kernel still parses, and a shorter one is an error. Every length is
//! checked against what is left of the buffer: a short or inconsistent
//! message is a [`WireError`], never a panic or an out-of-bounds read.
//!
//! `pid` in these structs is the thread id and `tgid` the process id.
//! [`classify`] keeps an event only when it is about a whole process (see
//! there).

use std::collections::HashMap;

use atoll_core::events::{IdChange, ProcEvent};

/// Size of `struct nlmsghdr`.
pub const NLMSG_HDRLEN: usize = 16;
/// `NLMSG_NOOP`.
pub const NLMSG_NOOP: u16 = 1;
/// `NLMSG_ERROR`.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the type of every connector message.
pub const NLMSG_DONE: u16 = 3;
/// `NLMSG_OVERRUN`: data was lost.
pub const NLMSG_OVERRUN: u16 = 4;
/// Size of `struct cn_msg`.
pub const CN_MSG_LEN: usize = 20;
/// `CN_IDX_PROC`: the connector index (and multicast group) of proc events.
pub const CN_IDX_PROC: u32 = 1;
/// `CN_VAL_PROC`.
pub const CN_VAL_PROC: u32 = 1;
/// Size of the `proc_event` header (`what`, `cpu`, `timestamp_ns`).
pub const PROC_EVENT_HDRLEN: usize = 16;
/// `PROC_CN_MCAST_LISTEN`: start sending events.
pub const PROC_CN_MCAST_LISTEN: u32 = 1;
/// `PROC_CN_MCAST_IGNORE`: stop.
pub const PROC_CN_MCAST_IGNORE: u32 = 2;
/// The length of a subscription request: header, `cn_msg`, one `u32` op.
pub const MCAST_REQUEST_LEN: usize = NLMSG_HDRLEN + CN_MSG_LEN + 4;

/// `enum proc_cn_event` values.
pub mod what {
    /// `PROC_EVENT_NONE`: an acknowledgement of a subscription request.
    pub const NONE: u32 = 0;
    /// `PROC_EVENT_FORK`.
    pub const FORK: u32 = 0x0000_0001;
    /// `PROC_EVENT_EXEC`.
    pub const EXEC: u32 = 0x0000_0002;
    /// `PROC_EVENT_UID`.
    pub const UID: u32 = 0x0000_0004;
    /// `PROC_EVENT_GID`.
    pub const GID: u32 = 0x0000_0040;
    /// `PROC_EVENT_SID`.
    pub const SID: u32 = 0x0000_0080;
    /// `PROC_EVENT_PTRACE`.
    pub const PTRACE: u32 = 0x0000_0100;
    /// `PROC_EVENT_COMM`.
    pub const COMM: u32 = 0x0000_0200;
    /// `PROC_EVENT_COREDUMP`.
    pub const COREDUMP: u32 = 0x4000_0000;
    /// `PROC_EVENT_EXIT`.
    pub const EXIT: u32 = 0x8000_0000;
}

/// The `cpu` of acknowledgements from kernels that did not number them
/// (`-1`): not a CPU, no sequence number to check.
pub const NO_CPU: u32 = u32::MAX;

/// One `proc_event`, decoded but not yet filtered. `pid` is a thread id,
/// `tgid` its process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawEvent {
    /// `PROC_EVENT_NONE`: the answer to a subscription request (ours or
    /// another listener's); `err` is a positive errno, 0 for success.
    Ack {
        /// The errno.
        err: u32,
    },
    /// `PROC_EVENT_FORK`: a thread or process was created.
    Fork {
        /// The new task's parent thread (for a new thread: the parent of
        /// its process).
        parent_pid: u32,
        /// The parent's process.
        parent_tgid: u32,
        /// The new thread.
        child_pid: u32,
        /// Its process (equal to `child_pid` for a new process).
        child_tgid: u32,
    },
    /// `PROC_EVENT_EXEC`.
    Exec {
        /// The thread (the process's main thread after the exec).
        pid: u32,
        /// Its process.
        tgid: u32,
    },
    /// `PROC_EVENT_UID` or `PROC_EVENT_GID`.
    Id {
        /// The thread.
        pid: u32,
        /// Its process.
        tgid: u32,
        /// The new ids.
        change: IdChange,
    },
    /// `PROC_EVENT_COMM`.
    Comm {
        /// The thread.
        pid: u32,
        /// Its process.
        tgid: u32,
        /// The new name, NUL-padded.
        comm: [u8; 16],
    },
    /// `PROC_EVENT_EXIT`: a thread exited.
    Exit {
        /// The thread.
        pid: u32,
        /// Its process.
        tgid: u32,
        /// Its exit code (a wait status).
        code: u32,
    },
    /// Any other event (`SID`, `PTRACE`, `COREDUMP`, or a type this code
    /// does not know).
    Other {
        /// `what`.
        what: u32,
    },
}

/// One proc connector message: the numbers around the event and the event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `cn_msg.seq`: a per-CPU counter of the messages the kernel sent.
    pub seq: u32,
    /// `cn_msg.ack`: 0 for events; for an acknowledgement, the request's
    /// `ack` plus one.
    pub ack: u32,
    /// `proc_event.cpu`: the CPU whose counter `seq` is ([`NO_CPU`] for
    /// acknowledgements from old kernels).
    pub cpu: u32,
    /// The event.
    pub event: RawEvent,
}

/// What a datagram held besides proc messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Datagram {
    /// Proc messages appended to the output.
    pub messages: usize,
    /// An `NLMSG_OVERRUN`: the kernel says data was lost.
    pub overrun: bool,
    /// Messages skipped: `NLMSG_NOOP`, `NLMSG_ERROR`, or connector messages
    /// of another index than [`CN_IDX_PROC`].
    pub skipped: usize,
}

/// Why a datagram could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A length field points past the end of the buffer or is too small for
    /// what it must hold.
    #[error("proc connector: {what} at byte {offset}: length {len} does not fit ({available} bytes available)")]
    Truncated {
        /// Which structure.
        what: &'static str,
        /// Where it starts in the datagram.
        offset: usize,
        /// Its length field (or the size it needs).
        len: usize,
        /// Bytes available for it.
        available: usize,
    },
    /// A netlink message type that the connector does not send.
    #[error("proc connector: unexpected netlink message type {kind} at byte {offset}")]
    UnexpectedType {
        /// `nlmsg_type`.
        kind: u16,
        /// Where it starts in the datagram.
        offset: usize,
    },
}

/// Builds a subscription request (`PROC_CN_MCAST_LISTEN` or
/// `PROC_CN_MCAST_IGNORE`) as one netlink message. `ack` comes back in the
/// kernel's acknowledgement plus one, which tells ours from other
/// listeners'. The request is the original 4-byte form, which every kernel
/// understands and which subscribes to all event types (no kernel-side
/// filter, so the sequence numbers have no gaps by design).
pub fn mcast_request(op: u32, seq: u32, ack: u32, port: u32) -> [u8; MCAST_REQUEST_LEN] {
    let mut b = [0u8; MCAST_REQUEST_LEN];
    put_u32(
        &mut b,
        0,
        u32::try_from(MCAST_REQUEST_LEN).expect("a 40-byte message"),
    );
    put_u16(&mut b, 4, NLMSG_DONE);
    put_u16(&mut b, 6, 0);
    put_u32(&mut b, 8, seq);
    put_u32(&mut b, 12, port);
    let c = NLMSG_HDRLEN;
    put_u32(&mut b, c, CN_IDX_PROC);
    put_u32(&mut b, c + 4, CN_VAL_PROC);
    put_u32(&mut b, c + 8, seq);
    put_u32(&mut b, c + 12, ack);
    put_u16(&mut b, c + 16, 4);
    put_u16(&mut b, c + 18, 0);
    put_u32(&mut b, c + CN_MSG_LEN, op);
    b
}

/// Parses one received datagram, appending its proc messages to `out`. On
/// an error, the messages before the bad one are already in `out`; the rest
/// of the datagram is not read.
pub fn parse_datagram(buf: &[u8], out: &mut Vec<Message>) -> Result<Datagram, WireError> {
    let mut d = Datagram::default();
    let mut off = 0usize;
    while off < buf.len() {
        let left = buf.len() - off;
        if left < NLMSG_HDRLEN {
            return Err(WireError::Truncated {
                what: "nlmsghdr",
                offset: off,
                len: NLMSG_HDRLEN,
                available: left,
            });
        }
        let len = get_u32(buf, off) as usize;
        if len < NLMSG_HDRLEN || len > left {
            return Err(WireError::Truncated {
                what: "netlink message",
                offset: off,
                len,
                available: left,
            });
        }
        match get_u16(buf, off + 4) {
            NLMSG_DONE => match parse_cn(&buf[off + NLMSG_HDRLEN..off + len], off)? {
                Some(m) => {
                    out.push(m);
                    d.messages += 1;
                }
                None => d.skipped += 1,
            },
            NLMSG_OVERRUN => d.overrun = true,
            NLMSG_NOOP | NLMSG_ERROR => d.skipped += 1,
            kind => return Err(WireError::UnexpectedType { kind, offset: off }),
        }
        // NLMSG_ALIGN; the last message's padding may be missing.
        off += align4(len).min(left);
    }
    Ok(d)
}

/// The `cn_msg` and `proc_event` in the payload of a netlink message at
/// `msg_off`; `None` for another connector index.
fn parse_cn(p: &[u8], msg_off: usize) -> Result<Option<Message>, WireError> {
    if p.len() < CN_MSG_LEN {
        return Err(WireError::Truncated {
            what: "cn_msg",
            offset: msg_off + NLMSG_HDRLEN,
            len: CN_MSG_LEN,
            available: p.len(),
        });
    }
    if (get_u32(p, 0), get_u32(p, 4)) != (CN_IDX_PROC, CN_VAL_PROC) {
        return Ok(None);
    }
    let seq = get_u32(p, 8);
    let ack = get_u32(p, 12);
    let data_len = usize::from(get_u16(p, 16));
    let available = p.len() - CN_MSG_LEN;
    let ev_off = msg_off + NLMSG_HDRLEN + CN_MSG_LEN;
    if data_len > available {
        return Err(WireError::Truncated {
            what: "cn_msg data",
            offset: ev_off,
            len: data_len,
            available,
        });
    }
    let ev = &p[CN_MSG_LEN..CN_MSG_LEN + data_len];
    let need = |n: usize, what: &'static str| -> Result<(), WireError> {
        if ev.len() < n {
            Err(WireError::Truncated {
                what,
                offset: ev_off,
                len: n,
                available: ev.len(),
            })
        } else {
            Ok(())
        }
    };
    need(PROC_EVENT_HDRLEN, "proc_event")?;
    let kind = get_u32(ev, 0);
    let cpu = get_u32(ev, 4);
    let d = PROC_EVENT_HDRLEN;
    let event = match kind {
        what::NONE => {
            need(d + 4, "proc_event ack")?;
            RawEvent::Ack {
                err: get_u32(ev, d),
            }
        }
        what::FORK => {
            need(d + 16, "fork_proc_event")?;
            RawEvent::Fork {
                parent_pid: get_u32(ev, d),
                parent_tgid: get_u32(ev, d + 4),
                child_pid: get_u32(ev, d + 8),
                child_tgid: get_u32(ev, d + 12),
            }
        }
        what::EXEC => {
            need(d + 8, "exec_proc_event")?;
            RawEvent::Exec {
                pid: get_u32(ev, d),
                tgid: get_u32(ev, d + 4),
            }
        }
        what::UID | what::GID => {
            need(d + 16, "id_proc_event")?;
            let (real, effective) = (get_u32(ev, d + 8), get_u32(ev, d + 12));
            RawEvent::Id {
                pid: get_u32(ev, d),
                tgid: get_u32(ev, d + 4),
                change: if kind == what::UID {
                    IdChange::Uid { real, effective }
                } else {
                    IdChange::Gid { real, effective }
                },
            }
        }
        what::COMM => {
            need(d + 24, "comm_proc_event")?;
            let mut comm = [0u8; 16];
            comm.copy_from_slice(&ev[d + 8..d + 24]);
            RawEvent::Comm {
                pid: get_u32(ev, d),
                tgid: get_u32(ev, d + 4),
                comm,
            }
        }
        what::EXIT => {
            need(d + 16, "exit_proc_event")?;
            RawEvent::Exit {
                pid: get_u32(ev, d),
                tgid: get_u32(ev, d + 4),
                code: get_u32(ev, d + 8),
            }
        }
        other => RawEvent::Other { what: other },
    };
    Ok(Some(Message {
        seq,
        ack,
        cpu,
        event,
    }))
}

/// What [`classify`] makes of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An event about a whole process.
    Process(ProcEvent),
    /// About a thread other than its process's main thread: dropped.
    Thread,
    /// An acknowledgement.
    Ack {
        /// The errno (0: success).
        err: u32,
    },
    /// An event atoll does not use (session, ptrace, core dump, unknown).
    Other,
}

/// Sorts an event into a process event or something to drop.
///
/// - A fork is a new process when the child is its own process
///   (`child_pid == child_tgid`); otherwise it created a thread. The parent
///   reported is the forking thread's process.
/// - An exec is always reported (the thread that execs becomes the main
///   thread).
/// - An exit is a process exit when the main thread exits
///   (`pid == tgid`); other threads' exits are dropped.
/// - A rename or id change is reported only for the main thread, whose
///   `comm` and credentials are those `/proc/PID` shows and adoption rules
///   match.
pub fn classify(event: &RawEvent) -> Kind {
    match *event {
        RawEvent::Ack { err } => Kind::Ack { err },
        RawEvent::Fork {
            parent_tgid,
            child_pid,
            child_tgid,
            ..
        } => {
            if child_pid == child_tgid {
                Kind::Process(ProcEvent::Fork {
                    parent: parent_tgid,
                    child: child_tgid,
                })
            } else {
                Kind::Thread
            }
        }
        RawEvent::Exec { tgid, .. } => Kind::Process(ProcEvent::Exec { pid: tgid }),
        RawEvent::Exit { pid, tgid, .. } if pid == tgid => {
            Kind::Process(ProcEvent::Exit { pid: tgid })
        }
        RawEvent::Id { pid, tgid, change } if pid == tgid => {
            Kind::Process(ProcEvent::Id { pid: tgid, change })
        }
        RawEvent::Comm { pid, tgid, comm } if pid == tgid => {
            let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
            Kind::Process(ProcEvent::Comm {
                pid: tgid,
                comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
            })
        }
        RawEvent::Exit { .. } | RawEvent::Id { .. } | RawEvent::Comm { .. } => Kind::Thread,
        RawEvent::Other { .. } => Kind::Other,
    }
}

/// What [`SeqTracker::observe`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqCheck {
    /// The first message seen from this CPU.
    First,
    /// The next number for this CPU.
    InOrder,
    /// This many messages of this CPU were skipped: lost.
    Gap(u32),
    /// A number already passed: a message delivered late (kernels before
    /// 5.8 numbered and sent messages in two steps, so a preempted sender
    /// could be overtaken). Not a loss.
    Behind,
    /// An acknowledgement without CPU ([`NO_CPU`]): not numbered.
    Unnumbered,
}

/// Checks the per-CPU sequence numbers of proc messages for gaps.
///
/// The kernel numbers the messages it sends from each CPU with a per-CPU
/// counter, incremented for every message sent to the group (whoever
/// listens), with preemption disabled from numbering to delivery (since
/// 5.8). A listener subscribed to every event type therefore sees each
/// CPU's numbers without gaps, unless a message was dropped: its receive
/// buffer was full (which `recv` also reports as `ENOBUFS`) or the kernel
/// could not allocate the message (which nothing else reports).
#[derive(Clone, Debug, Default)]
pub struct SeqTracker {
    next: HashMap<u32, u32>,
}

impl SeqTracker {
    /// Records message `seq` from `cpu`.
    pub fn observe(&mut self, cpu: u32, seq: u32) -> SeqCheck {
        if cpu == NO_CPU {
            return SeqCheck::Unnumbered;
        }
        let Some(expected) = self.next.get_mut(&cpu) else {
            self.next.insert(cpu, seq.wrapping_add(1));
            return SeqCheck::First;
        };
        let ahead = seq.wrapping_sub(*expected);
        if ahead == 0 {
            *expected = seq.wrapping_add(1);
            SeqCheck::InOrder
        } else if ahead < 1 << 31 {
            *expected = seq.wrapping_add(1);
            SeqCheck::Gap(ahead)
        } else {
            SeqCheck::Behind
        }
    }
}

/// The size of the `proc_event` [`encode_message`] writes: what 6.x
/// kernels send.
pub const PROC_EVENT_LEN: usize = 40;

/// Appends `m` to `out` as the kernel sends it: one `NLMSG_DONE` netlink
/// message (sequence number `m.seq`, padded to 4 bytes) holding a `cn_msg`
/// of [`CN_IDX_PROC`] and a [`PROC_EVENT_LEN`]-byte `proc_event`, with a
/// zero timestamp. The inverse of [`parse_datagram`] for one message: what
/// it parses encodes to bytes that parse to the same [`Message`] (an
/// [`RawEvent::Other`] whose `what` is a known type is written as that type
/// with zero fields, and so does not round-trip; the parser never makes
/// one). For tests, fuzzing and fake sources: the daemon only parses.
pub fn encode_message(m: &Message, out: &mut Vec<u8>) {
    let mut ev = [0u8; PROC_EVENT_LEN];
    let d = PROC_EVENT_HDRLEN;
    let (kind, words): (u32, [u32; 4]) = match &m.event {
        RawEvent::Ack { err } => (what::NONE, [*err, 0, 0, 0]),
        RawEvent::Fork {
            parent_pid,
            parent_tgid,
            child_pid,
            child_tgid,
        } => (
            what::FORK,
            [*parent_pid, *parent_tgid, *child_pid, *child_tgid],
        ),
        RawEvent::Exec { pid, tgid } => (what::EXEC, [*pid, *tgid, 0, 0]),
        RawEvent::Id { pid, tgid, change } => match *change {
            IdChange::Uid { real, effective } => (what::UID, [*pid, *tgid, real, effective]),
            IdChange::Gid { real, effective } => (what::GID, [*pid, *tgid, real, effective]),
        },
        RawEvent::Comm { pid, tgid, comm } => {
            ev[d + 8..d + 24].copy_from_slice(comm);
            (what::COMM, [*pid, *tgid, 0, 0])
        }
        RawEvent::Exit { pid, tgid, code } => (what::EXIT, [*pid, *tgid, *code, 0]),
        RawEvent::Other { what } => (*what, [0; 4]),
    };
    put_u32(&mut ev, 0, kind);
    put_u32(&mut ev, 4, m.cpu);
    let used = if kind == what::COMM { 2 } else { 4 };
    for (i, w) in words.iter().take(used).enumerate() {
        put_u32(&mut ev, d + 4 * i, *w);
    }
    let start = out.len();
    let len = NLMSG_HDRLEN + CN_MSG_LEN + PROC_EVENT_LEN;
    out.resize(start + align4(len), 0);
    let b = &mut out[start..];
    // 76 bytes: the conversions cannot fail.
    put_u32(b, 0, u32::try_from(len).unwrap_or(u32::MAX));
    put_u16(b, 4, NLMSG_DONE);
    put_u32(b, 8, m.seq);
    let c = NLMSG_HDRLEN;
    put_u32(b, c, CN_IDX_PROC);
    put_u32(b, c + 4, CN_VAL_PROC);
    put_u32(b, c + 8, m.seq);
    put_u32(b, c + 12, m.ack);
    put_u16(b, c + 16, u16::try_from(PROC_EVENT_LEN).unwrap_or(u16::MAX));
    b[c + CN_MSG_LEN..c + CN_MSG_LEN + PROC_EVENT_LEN].copy_from_slice(&ev);
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

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_ne_bytes());
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
