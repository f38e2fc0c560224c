//! Seed 001's web tier over TCP: `web-back` (the back end) serves two
//! classes of request, `web-front` (the front end, [`super::webfront`])
//! sends them at a set rate.
//!
//! **Protocol.** A request is 16 bytes: magic `ATLQ`, the class (u8: 0
//! light, 1 heavy), three zero bytes, the CPU work in chunks (u32, ~0.2 ms
//! each) and the reply's length in bytes (u32), little endian. The back end
//! does the work, then answers with 8 bytes, magic `ATLR` and the length
//! (u32), followed by that many bytes. A connection carries one request at
//! a time; anything else closes it.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{cpu::cpu_chunks, stopping, ArgError, Opts};

const REQUEST_MAGIC: &[u8; 4] = b"ATLQ";
const REPLY_MAGIC: &[u8; 4] = b"ATLR";
/// Bytes of a request.
pub const REQUEST_LEN: usize = 16;
/// Bytes of a reply's header.
pub const REPLY_HEADER_LEN: usize = 8;
/// The largest reply a request may ask for (16 MiB).
pub const MAX_REPLY: u32 = 16 << 20;
/// The most CPU work a request may ask for (chunks, ~20 s).
pub const MAX_WORK: u32 = 100_000;

/// A request's class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Small reply, little CPU.
    Light,
    /// Large reply, more CPU (001's RUBiS heavy request).
    Heavy,
}

/// One request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Its class.
    pub class: Class,
    /// CPU work on the back end, chunks.
    pub work: u32,
    /// Reply bytes.
    pub reply_bytes: u32,
}

/// Why bytes are not a request or a reply header.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// Not this protocol's magic.
    #[error("bad magic {0:?}")]
    Magic([u8; 4]),
    /// A class byte other than 0 and 1.
    #[error("unknown class {0}")]
    Class(u8),
    /// Asks for more than the limits.
    #[error("{what} {value} over the limit {limit}")]
    TooLarge {
        /// Which field.
        what: &'static str,
        /// Its value.
        value: u32,
        /// The limit.
        limit: u32,
    },
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn magic(b: &[u8]) -> [u8; 4] {
    [b[0], b[1], b[2], b[3]]
}

impl Request {
    /// The request's bytes.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut b = [0u8; REQUEST_LEN];
        b[..4].copy_from_slice(REQUEST_MAGIC);
        b[4] = match self.class {
            Class::Light => 0,
            Class::Heavy => 1,
        };
        b[8..12].copy_from_slice(&self.work.to_le_bytes());
        b[12..16].copy_from_slice(&self.reply_bytes.to_le_bytes());
        b
    }

    /// Reads a request, within the limits.
    pub fn decode(b: &[u8; REQUEST_LEN]) -> Result<Self, ProtoError> {
        if &b[..4] != REQUEST_MAGIC {
            return Err(ProtoError::Magic(magic(b)));
        }
        let class = match b[4] {
            0 => Class::Light,
            1 => Class::Heavy,
            c => return Err(ProtoError::Class(c)),
        };
        let (work, reply_bytes) = (u32_at(b, 8), u32_at(b, 12));
        if work > MAX_WORK {
            return Err(ProtoError::TooLarge {
                what: "work",
                value: work,
                limit: MAX_WORK,
            });
        }
        if reply_bytes > MAX_REPLY {
            return Err(ProtoError::TooLarge {
                what: "reply bytes",
                value: reply_bytes,
                limit: MAX_REPLY,
            });
        }
        Ok(Self {
            class,
            work,
            reply_bytes,
        })
    }
}

/// A reply's header for `len` bytes.
pub fn reply_header(len: u32) -> [u8; REPLY_HEADER_LEN] {
    let mut b = [0u8; REPLY_HEADER_LEN];
    b[..4].copy_from_slice(REPLY_MAGIC);
    b[4..].copy_from_slice(&len.to_le_bytes());
    b
}

/// The length a reply header announces.
pub fn read_reply_header(b: &[u8; REPLY_HEADER_LEN]) -> Result<u32, ProtoError> {
    if &b[..4] != REPLY_MAGIC {
        return Err(ProtoError::Magic(magic(b)));
    }
    let len = u32_at(b, 4);
    if len > MAX_REPLY {
        return Err(ProtoError::TooLarge {
            what: "reply bytes",
            value: len,
            limit: MAX_REPLY,
        });
    }
    Ok(len)
}

/// Sends `req` on `s` and reads the whole reply; the reply's length.
pub fn call(s: &mut TcpStream, req: &Request, buf: &mut [u8]) -> io::Result<u32> {
    s.write_all(&req.encode())?;
    let mut h = [0u8; REPLY_HEADER_LEN];
    s.read_exact(&mut h)?;
    let len = read_reply_header(&h).map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
    let mut left = len as usize;
    while left > 0 {
        let take = left.min(buf.len());
        let n = s.read(&mut buf[..take])?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        left -= n;
    }
    if len != req.reply_bytes {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            format!("reply of {len} bytes, asked {}", req.reply_bytes),
        ));
    }
    Ok(len)
}

/// The options of `web-back`.
pub(super) const BACK_OPTIONS: &[&str] = &["--port", "--seconds"];

/// `web-back`'s arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct WebBackArgs {
    /// The TCP port it listens on (all addresses).
    pub port: u16,
    /// How long it serves.
    pub seconds: f64,
}

impl WebBackArgs {
    pub(super) fn from_opts(o: &Opts) -> Result<Self, ArgError> {
        Ok(Self {
            port: o.required("--port", o.positive("--port")?)?,
            seconds: o.required("--seconds", o.positive("--seconds")?)?,
        })
    }
}

#[derive(Default)]
struct Served {
    light: AtomicU64,
    heavy: AtomicU64,
    refused: AtomicU64,
    bytes: AtomicU64,
}

/// Serves one connection until it closes, errs or the end.
fn serve(mut s: TcpStream, end: Instant, served: &Served) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = s.set_nodelay(true);
    let body = vec![0xa5u8; 64 << 10];
    let mut req = [0u8; REQUEST_LEN];
    let mut seed = 1u64;
    while Instant::now() < end && !stopping() {
        // A timeout between requests is the time to look at the clock;
        // one inside a request keeps what was read.
        let mut got = 0;
        while got < REQUEST_LEN {
            match s.read(&mut req[got..]) {
                Ok(0) => return,
                Ok(n) => got += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if got == 0 && (Instant::now() >= end || stopping()) {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
        let Ok(r) = Request::decode(&req) else {
            served.refused.fetch_add(1, Ordering::Relaxed);
            return;
        };
        seed = cpu_chunks(u64::from(r.work), seed);
        if s.write_all(&reply_header(r.reply_bytes)).is_err() {
            return;
        }
        let mut left = r.reply_bytes as usize;
        while left > 0 {
            let n = left.min(body.len());
            if s.write_all(&body[..n]).is_err() {
                return;
            }
            left -= n;
        }
        served
            .bytes
            .fetch_add(u64::from(r.reply_bytes), Ordering::Relaxed);
        match r.class {
            Class::Light => served.light.fetch_add(1, Ordering::Relaxed),
            Class::Heavy => served.heavy.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// `web-back`: a thread per connection; see the module docs.
pub(super) fn web_back(a: &WebBackArgs) -> io::Result<serde_json::Value> {
    let l = TcpListener::bind(("0.0.0.0", a.port))?;
    l.set_nonblocking(true)?;
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    let served = Served::default();
    let mut conns = 0u64;
    std::thread::scope(|sc| -> io::Result<()> {
        while Instant::now() < end && !stopping() {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    conns += 1;
                    let served = &served;
                    sc.spawn(move || serve(s, end, served));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })?;
    Ok(json!({
        "kind": "web-back",
        "connections": conns,
        "light": served.light.load(Ordering::Relaxed),
        "heavy": served.heavy.load(Ordering::Relaxed),
        "refused": served.refused.load(Ordering::Relaxed),
        "bytes": served.bytes.load(Ordering::Relaxed),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_strangers_are_refused() {
        for r in [
            Request {
                class: Class::Light,
                work: 1,
                reply_bytes: 512,
            },
            Request {
                class: Class::Heavy,
                work: 20,
                reply_bytes: 48 << 10,
            },
        ] {
            assert_eq!(Request::decode(&r.encode()), Ok(r));
        }
        let mut b = Request {
            class: Class::Heavy,
            work: 1,
            reply_bytes: 1,
        }
        .encode();
        b[4] = 7;
        assert_eq!(Request::decode(&b), Err(ProtoError::Class(7)));
        b[0] = b'X';
        assert!(matches!(Request::decode(&b), Err(ProtoError::Magic(_))));
        let big = Request {
            class: Class::Light,
            work: MAX_WORK + 1,
            reply_bytes: 0,
        };
        assert!(matches!(
            Request::decode(&big.encode()),
            Err(ProtoError::TooLarge { what: "work", .. })
        ));
    }

    #[test]
    fn reply_headers_round_trip_within_the_limit() {
        assert_eq!(read_reply_header(&reply_header(40_960)), Ok(40_960));
        assert!(read_reply_header(&reply_header(MAX_REPLY + 1)).is_err());
        let mut h = reply_header(1);
        h[3] = 0;
        assert!(matches!(read_reply_header(&h), Err(ProtoError::Magic(_))));
    }

    /// A back end on loopback answers both classes with the asked bytes,
    /// one request after another on one connection.
    #[test]
    fn a_back_end_serves_both_classes_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let served = Served::default();
        std::thread::scope(|sc| {
            let served = &served;
            sc.spawn(move || {
                let (s, _) = l.accept().unwrap();
                serve(s, Instant::now() + Duration::from_secs(60), served);
            });
            let mut c = TcpStream::connect(addr).unwrap();
            let mut buf = vec![0u8; 8192];
            for (class, n) in [(Class::Light, 100), (Class::Heavy, 70_000)] {
                let r = Request {
                    class,
                    work: 1,
                    reply_bytes: n,
                };
                assert_eq!(call(&mut c, &r, &mut buf).unwrap(), n);
            }
            drop(c);
        });
        assert_eq!(served.light.load(Ordering::Relaxed), 1);
        assert_eq!(served.heavy.load(Ordering::Relaxed), 1);
        assert_eq!(served.bytes.load(Ordering::Relaxed), 70_100);
    }
}
