//! Seed 001's stream over UDP: `frame-send` sends frames of N packets at a
//! set rate, `frame-recv` reassembles them, does CPU work per complete
//! frame and counts, per second of the stream, the frames delivered
//! complete and on time; `udp-blast` is the bulk transfer (datagrams as
//! fast as the socket takes them) and `udp-sink` counts what reaches it.
//!
//! A packet starts with a 24-byte header: magic `ATLF`, the frame number
//! (u64), the packet's index and the frame's packet count (u16 each), and
//! the frame's due time (u64 ns of `CLOCK_MONOTONIC`, which every network
//! namespace of a machine shares). A frame is on time when the consumer
//! has received all its packets and done its work within `deadline` of the
//! due time. The accounting is [`FrameTally`] (pure, tested).

use std::collections::BTreeMap;
use std::io::{self, ErrorKind};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{cpu_work, stopping, ArgError, Opts};

const MAGIC: &[u8; 4] = b"ATLF";
/// Header bytes at the start of every stream packet.
pub const HEADER: usize = 24;

/// The options of `frame-send`.
pub(super) const SEND_OPTIONS: &[&str] = &["--addr", "--fps", "--packets", "--bytes", "--seconds"];
/// The options of `frame-recv`.
pub(super) const RECV_OPTIONS: &[&str] =
    &["--port", "--fps", "--work", "--deadline-ms", "--seconds"];
/// The options of `udp-blast`.
pub(super) const BLAST_OPTIONS: &[&str] = &["--addr", "--bytes", "--seconds"];
/// The options of `udp-sink`.
pub(super) const SINK_OPTIONS: &[&str] = &["--port", "--seconds"];

/// One stream packet's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The frame's number, from 0.
    pub frame: u64,
    /// This packet's index in the frame.
    pub index: u16,
    /// Packets in the frame.
    pub count: u16,
    /// When the frame was due, ns of `CLOCK_MONOTONIC`.
    pub due_ns: u64,
}

impl Header {
    /// Writes the header at the start of `buf` (at least [`HEADER`] bytes).
    pub fn write(&self, buf: &mut [u8]) {
        buf[..4].copy_from_slice(MAGIC);
        buf[4..12].copy_from_slice(&self.frame.to_le_bytes());
        buf[12..14].copy_from_slice(&self.index.to_le_bytes());
        buf[14..16].copy_from_slice(&self.count.to_le_bytes());
        buf[16..24].copy_from_slice(&self.due_ns.to_le_bytes());
    }

    /// Reads a header; `None` for anything that is not a stream packet.
    pub fn read(buf: &[u8]) -> Option<Self> {
        if buf.len() < HEADER || &buf[..4] != MAGIC {
            return None;
        }
        let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().unwrap_or([0; 8]));
        let u16_at = |i: usize| u16::from_le_bytes([buf[i], buf[i + 1]]);
        let h = Self {
            frame: u64_at(4),
            index: u16_at(12),
            count: u16_at(14),
            due_ns: u64_at(16),
        };
        (h.count > 0 && h.index < h.count).then_some(h)
    }
}

/// What the consumer knows of the frames: the packets of each frame still
/// incomplete, and per second of the stream (frame number / fps) the
/// frames completed on time and late.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameTally {
    fps: u64,
    deadline_ns: u64,
    partial: BTreeMap<u64, (u16, u16)>,
    /// Frames done (complete, or given up), so duplicates count nothing.
    done_below: u64,
    done: std::collections::BTreeSet<u64>,
    /// Per second of the stream: (on time, late).
    pub seconds: BTreeMap<u64, (u64, u64)>,
    /// Packets received.
    pub packets: u64,
    /// Highest frame number seen, plus one.
    pub frames_seen: u64,
}

impl FrameTally {
    /// A tally for a stream of `fps` frames per second with `deadline`.
    pub fn new(fps: u64, deadline: Duration) -> Self {
        Self {
            fps: fps.max(1),
            deadline_ns: u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX),
            ..Self::default()
        }
    }

    /// Counts a packet; returns `Some(frame)` when it completes its frame
    /// (the consumer then does the frame's work and calls [`finish`]).
    ///
    /// [`finish`]: Self::finish
    pub fn packet(&mut self, h: Header) -> Option<u64> {
        self.packets += 1;
        self.frames_seen = self.frames_seen.max(h.frame + 1);
        if h.frame < self.done_below || self.done.contains(&h.frame) {
            return None;
        }
        let e = self.partial.entry(h.frame).or_insert((0, h.count));
        e.0 += 1;
        if e.0 >= e.1 {
            self.partial.remove(&h.frame);
            self.done.insert(h.frame);
            return Some(h.frame);
        }
        None
    }

    /// Records frame `frame` (due at `due_ns`) finished at `now_ns`.
    pub fn finish(&mut self, frame: u64, due_ns: u64, now_ns: u64) {
        let e = self.seconds.entry(frame / self.fps).or_default();
        if now_ns.saturating_sub(due_ns) <= self.deadline_ns {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
        // Keep the sets small: frames far behind will never complete.
        let horizon = frame.saturating_sub(self.fps * 10);
        if horizon > self.done_below {
            self.done_below = horizon;
            self.done = self.done.split_off(&horizon);
            self.partial = self.partial.split_off(&horizon);
        }
    }

    /// Frames delivered on time per second of the stream, for the seconds
    /// `0..seconds` (a second with none is 0).
    pub fn on_time_per_second(&self, seconds: u64) -> Vec<u64> {
        (0..seconds)
            .map(|s| self.seconds.get(&s).map_or(0, |e| e.0))
            .collect()
    }

    /// Frames completed late.
    pub fn late(&self) -> u64 {
        self.seconds.values().map(|e| e.1).sum()
    }
}

/// Arguments of `frame-send`.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameSendArgs {
    /// `IP:PORT` of the consumer.
    pub addr: String,
    /// Frames per second.
    pub fps: u64,
    /// Packets per frame.
    pub packets: u16,
    /// Bytes per packet (UDP payload, header included).
    pub bytes: usize,
    /// How long to send.
    pub seconds: f64,
}

/// Arguments of `frame-recv`.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameRecvArgs {
    /// UDP port to listen on (every address).
    pub port: u16,
    /// The stream's frames per second.
    pub fps: u64,
    /// Units of CPU work per complete frame ([`cpu_work`]; 0 for none).
    pub work: u64,
    /// A frame is on time when done within this of its due time.
    pub deadline_ms: u64,
    /// How long to listen.
    pub seconds: f64,
}

/// Arguments of `udp-blast` and `udp-sink`.
#[derive(Clone, Debug, PartialEq)]
pub struct BulkArgs {
    /// `IP:PORT` (blast) or `PORT` (sink).
    pub addr: String,
    /// Bytes per datagram (blast).
    pub bytes: usize,
    /// How long.
    pub seconds: f64,
}

impl FrameSendArgs {
    pub(super) fn from_opts(o: &Opts) -> Result<Self, ArgError> {
        let bytes: usize = o.positive("--bytes")?.unwrap_or(1200);
        if !(HEADER..=65_000).contains(&bytes) {
            return Err(o.bad("--bytes", &bytes.to_string(), "must be in 24..=65000"));
        }
        Ok(Self {
            addr: o.required("--addr", o.values.get("--addr").cloned())?,
            fps: o.positive("--fps")?.unwrap_or(30),
            packets: o.positive("--packets")?.unwrap_or(20),
            bytes,
            seconds: o.required("--seconds", o.positive("--seconds")?)?,
        })
    }
}

impl FrameRecvArgs {
    pub(super) fn from_opts(o: &Opts) -> Result<Self, ArgError> {
        Ok(Self {
            port: o.required("--port", o.positive("--port")?)?,
            fps: o.positive("--fps")?.unwrap_or(30),
            work: o.num("--work")?.unwrap_or(1),
            deadline_ms: o.positive("--deadline-ms")?.unwrap_or(100),
            seconds: o.required("--seconds", o.positive("--seconds")?)?,
        })
    }
}

impl BulkArgs {
    pub(super) fn blast(o: &Opts) -> Result<Self, ArgError> {
        Ok(Self {
            addr: o.required("--addr", o.values.get("--addr").cloned())?,
            bytes: o.positive("--bytes")?.unwrap_or(1400),
            seconds: o.required("--seconds", o.positive("--seconds")?)?,
        })
    }

    pub(super) fn sink(o: &Opts) -> Result<Self, ArgError> {
        let port: u16 = o.required("--port", o.positive("--port")?)?;
        Ok(Self {
            addr: port.to_string(),
            bytes: 0,
            seconds: o.required("--seconds", o.positive("--seconds")?)?,
        })
    }
}

/// `CLOCK_MONOTONIC`, ns.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

fn unbound() -> io::Result<UdpSocket> {
    UdpSocket::bind("0.0.0.0:0")
}

/// `frame-send`: frames at `fps`, each `packets` datagrams back to back.
pub(super) fn frame_send(a: &FrameSendArgs) -> io::Result<serde_json::Value> {
    let sock = unbound()?;
    sock.connect(&a.addr)?;
    let period = 1_000_000_000 / a.fps.max(1);
    // A positive, parsed duration times a rate: small and not negative.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let frames = (a.seconds * a.fps as f64) as u64;
    let t0 = mono_ns();
    let mut buf = vec![0u8; a.bytes];
    let (mut sent, mut errors) = (0u64, 0u64);
    for frame in 0..frames {
        if stopping() {
            break;
        }
        let due = t0 + frame * period;
        let now = mono_ns();
        if due > now {
            std::thread::sleep(Duration::from_nanos(due - now));
        }
        for index in 0..a.packets {
            Header {
                frame,
                index,
                count: a.packets,
                due_ns: due,
            }
            .write(&mut buf);
            match sock.send(&buf) {
                Ok(_) => sent += 1,
                Err(_) => errors += 1,
            }
        }
    }
    Ok(json!({
        "kind": "frame-send",
        "frames": frames,
        "packets_sent": sent,
        "send_errors": errors,
    }))
}

/// `frame-recv`: reassembles, works, counts; see the module docs.
pub(super) fn frame_recv(a: &FrameRecvArgs) -> io::Result<serde_json::Value> {
    let sock = UdpSocket::bind(("0.0.0.0", a.port))?;
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let mut tally = FrameTally::new(a.fps, Duration::from_millis(a.deadline_ms));
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    let mut buf = vec![0u8; 65_536];
    let mut dues: BTreeMap<u64, u64> = BTreeMap::new();
    while Instant::now() < end && !stopping() {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let Some(h) = Header::read(&buf[..n]) else {
                    continue;
                };
                dues.entry(h.frame).or_insert(h.due_ns);
                if let Some(frame) = tally.packet(h) {
                    if a.work > 0 {
                        cpu_work(a.work);
                    }
                    let due = dues.remove(&frame).unwrap_or(h.due_ns);
                    tally.finish(frame, due, mono_ns());
                    dues = dues.split_off(&frame.saturating_sub(a.fps * 10));
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
    let per_s: Vec<u64> = tally.seconds.values().map(|e| e.0).collect();
    let per_second: BTreeMap<String, [u64; 2]> = tally
        .seconds
        .iter()
        .map(|(s, e)| (s.to_string(), [e.0, e.1]))
        .collect();
    Ok(json!({
        "kind": "frame-recv",
        "packets": tally.packets,
        "frames_seen": tally.frames_seen,
        "on_time": per_s.iter().sum::<u64>(),
        "late": tally.late(),
        "per_second": per_second,
    }))
}

/// The bulk socket's send buffer: large enough that its datagrams fill
/// the link's queue (a default buffer of ~200 KiB holds back the sender
/// before a 1000-packet FIFO is full, and nothing is congested).
const BLAST_SNDBUF: libc::c_int = 8 << 20;

/// `udp-blast`: datagrams as fast as the socket takes them, from a socket
/// with an 8 MiB send buffer (`SO_SNDBUFFORCE` as root, else as large as
/// `SO_SNDBUF` allows).
pub(super) fn udp_blast(a: &BulkArgs) -> io::Result<serde_json::Value> {
    use std::os::fd::AsRawFd;
    let sock = unbound()?;
    sock.connect(&a.addr)?;
    for opt in [libc::SO_SNDBUFFORCE, libc::SO_SNDBUF] {
        let v = BLAST_SNDBUF;
        // SAFETY: a valid socket and a pointer to an int of the given size.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                std::ptr::addr_of!(v).cast(),
                libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4),
            )
        };
        if rc == 0 {
            break;
        }
    }
    let buf = vec![0x5au8; a.bytes.max(1)];
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    let (mut sent, mut errors) = (0u64, 0u64);
    while Instant::now() < end && !stopping() {
        match sock.send(&buf) {
            Ok(n) => sent += n as u64,
            Err(_) => {
                errors += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
    Ok(json!({"kind": "udp-blast", "bytes_sent": sent, "send_errors": errors}))
}

/// `udp-sink`: counts the bytes that reach it.
pub(super) fn udp_sink(a: &BulkArgs) -> io::Result<serde_json::Value> {
    let sock = UdpSocket::bind(format!("0.0.0.0:{}", a.addr))?;
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    let mut buf = vec![0u8; 65_536];
    let mut bytes = 0u64;
    while Instant::now() < end && !stopping() {
        match sock.recv(&mut buf) {
            Ok(n) => bytes += n as u64,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json!({"kind": "udp-sink", "bytes": bytes}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(frame: u64, index: u16, count: u16) -> Header {
        Header {
            frame,
            index,
            count,
            due_ns: frame * 1000,
        }
    }

    #[test]
    fn headers_round_trip_and_strangers_are_refused() {
        let mut buf = [0u8; 40];
        let x = Header {
            frame: 7,
            index: 3,
            count: 20,
            due_ns: 123_456_789,
        };
        x.write(&mut buf);
        assert_eq!(Header::read(&buf), Some(x));
        assert_eq!(Header::read(&buf[..HEADER - 1]), None);
        buf[0] = b'X';
        assert_eq!(Header::read(&buf), None);
        let mut bad = [0u8; 40];
        Header {
            index: 5,
            count: 5,
            ..x
        }
        .write(&mut bad);
        assert_eq!(Header::read(&bad), None, "index must be below count");
    }

    #[test]
    fn a_frame_counts_once_complete_and_by_its_own_second() {
        let mut t = FrameTally::new(2, Duration::from_nanos(500));
        // Frame 0: 3 packets, one duplicated; completes on the third distinct.
        assert_eq!(t.packet(h(0, 0, 3)), None);
        assert_eq!(t.packet(h(0, 1, 3)), None);
        assert_eq!(t.packet(h(0, 2, 3)), Some(0));
        t.finish(0, 0, 400);
        // A late duplicate of a done frame counts nothing.
        assert_eq!(t.packet(h(0, 2, 3)), None);
        // Frame 1 loses a packet: never complete.
        assert_eq!(t.packet(h(1, 0, 3)), None);
        assert_eq!(t.packet(h(1, 1, 3)), None);
        // Frame 3 (second 1) completes late.
        for i in 0..2 {
            let _ = t.packet(h(3, i, 3));
        }
        assert_eq!(t.packet(h(3, 2, 3)), Some(3));
        t.finish(3, 3000, 3000 + 501);
        assert_eq!(t.on_time_per_second(3), vec![1, 0, 0]);
        assert_eq!(t.late(), 1);
        assert_eq!(t.packets, 9);
        assert_eq!(t.frames_seen, 4);
    }

    #[test]
    fn old_incomplete_frames_are_forgotten() {
        let mut t = FrameTally::new(1, Duration::from_secs(1));
        let _ = t.packet(h(0, 0, 2));
        for f in 1..=20 {
            assert_eq!(t.packet(h(f, 0, 1)), Some(f));
            t.finish(f, f * 1000, f * 1000);
        }
        assert!(t.partial.is_empty());
        assert!(t.done.len() <= 11, "{}", t.done.len());
        assert_eq!(t.on_time_per_second(21).iter().sum::<u64>(), 20);
    }
}
