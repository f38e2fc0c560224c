//! A minimal MySQL/MariaDB client: the handshake (protocol 10, answered
//! with a `HandshakeResponse41` carrying an empty password, which a server
//! started with `--skip-grant-tables` accepts), `COM_QUERY` and text result
//! sets (without `CLIENT_DEPRECATE_EOF`, so columns and rows each end with
//! an EOF packet). Nothing else: no TLS, no prepared statements, no
//! compression. Written from the protocol's documentation, tested on bytes
//! recorded from MariaDB 10.11 (`mariadbd --skip-grant-tables` on a unix
//! socket).
//!
//! Why hand-written: the benchmark needs four packets' worth of protocol,
//! and the client crates pull in TLS stacks, async runtimes or a C library
//! (`mysqlclient-sys`), each a long build on a shared two-CPU machine and
//! more licenses for `cargo deny` to check.

use std::io::{self, Read, Write};

use thiserror::Error;

/// `CLIENT_LONG_PASSWORD`.
const LONG_PASSWORD: u32 = 0x1;
/// `CLIENT_PROTOCOL_41`.
const PROTOCOL_41: u32 = 0x200;
/// `CLIENT_TRANSACTIONS`.
const TRANSACTIONS: u32 = 0x2000;
/// `CLIENT_SECURE_CONNECTION` (a length-prefixed auth response).
const SECURE_CONNECTION: u32 = 0x8000;
/// `CLIENT_MULTI_RESULTS`.
const MULTI_RESULTS: u32 = 0x2_0000;
/// What this client announces.
pub const CLIENT_CAPS: u32 =
    LONG_PASSWORD | PROTOCOL_41 | TRANSACTIONS | SECURE_CONNECTION | MULTI_RESULTS;
/// The connection's character set: 33, `utf8_general_ci`, which every
/// server knows.
const CHARSET: u8 = 33;
/// The largest packet this client sends or accepts whole (16 MiB - 1: one
/// physical packet; longer ones would be split, which it does not do).
const MAX_PACKET: usize = 0xff_ffff;
/// `COM_QUERY`.
const COM_QUERY: u8 = 0x03;

/// What went wrong talking to the server.
#[derive(Debug, Error)]
pub enum MysqlError {
    /// Reading or writing the socket.
    #[error("mysql {op}: {source}")]
    Io {
        /// `read` or `write`.
        op: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A packet this client does not understand.
    #[error("mysql: malformed {what} packet ({bytes} bytes)")]
    Malformed {
        /// Which packet.
        what: &'static str,
        /// Its payload length.
        bytes: usize,
    },
    /// An `ERR` packet from the server.
    #[error("mysql error {code} ({state}): {message}")]
    Server {
        /// The error code.
        code: u16,
        /// The SQL state.
        state: String,
        /// The message.
        message: String,
    },
    /// A query longer than one packet.
    #[error("mysql: a query of {0} bytes is longer than one packet")]
    TooLong(usize),
}

/// What the server said in its greeting (the parts this client reads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Greeting {
    /// The protocol version (10).
    pub protocol: u8,
    /// The server's version string.
    pub version: String,
    /// The connection's id.
    pub connection_id: u32,
    /// The server's capability flags (lower and upper halves).
    pub capabilities: u32,
}

/// The answer to a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// An `OK` packet.
    Ok {
        /// Rows changed.
        affected: u64,
        /// The last `AUTO_INCREMENT` value inserted.
        insert_id: u64,
    },
    /// A text result set.
    Rows {
        /// The columns' names.
        columns: Vec<String>,
        /// Each row's values, `None` for SQL `NULL`.
        rows: Vec<Vec<Option<String>>>,
    },
}

/// Splits a packet header: payload length and sequence id.
pub fn header(h: [u8; 4]) -> (usize, u8) {
    (
        usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16,
        h[3],
    )
}

/// One packet (header and payload) with sequence id `seq`.
pub fn frame(seq: u8, payload: &[u8]) -> Result<Vec<u8>, MysqlError> {
    if payload.len() >= MAX_PACKET {
        return Err(MysqlError::TooLong(payload.len()));
    }
    let n = payload.len();
    let mut out = Vec::with_capacity(n + 4);
    let len = u32::try_from(n)
        .map_err(|_| MysqlError::TooLong(n))?
        .to_le_bytes();
    out.extend_from_slice(&len[..3]);
    out.push(seq);
    out.extend_from_slice(payload);
    Ok(out)
}

/// A cursor over a payload.
struct Cur<'a> {
    b: &'a [u8],
    what: &'static str,
    len: usize,
}

impl<'a> Cur<'a> {
    fn new(b: &'a [u8], what: &'static str) -> Self {
        Self {
            b,
            what,
            len: b.len(),
        }
    }
    fn bad(&self) -> MysqlError {
        MysqlError::Malformed {
            what: self.what,
            bytes: self.len,
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], MysqlError> {
        if self.b.len() < n {
            return Err(self.bad());
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, MysqlError> {
        Ok(self.take(1)?[0])
    }
    fn uint(&mut self, n: usize) -> Result<u64, MysqlError> {
        Ok(self
            .take(n)?
            .iter()
            .rev()
            .fold(0u64, |a, &b| a << 8 | u64::from(b)))
    }
    fn u16(&mut self) -> Result<u16, MysqlError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, MysqlError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn nul_str(&mut self) -> Result<String, MysqlError> {
        let end = self
            .b
            .iter()
            .position(|&c| c == 0)
            .ok_or_else(|| self.bad())?;
        let s = String::from_utf8_lossy(&self.b[..end]).into_owned();
        self.b = &self.b[end + 1..];
        Ok(s)
    }
    /// A length-encoded integer; `None` for `0xfb` (NULL in a row).
    fn lenenc(&mut self) -> Result<Option<u64>, MysqlError> {
        Ok(match self.u8()? {
            0xfb => None,
            0xfc => Some(self.uint(2)?),
            0xfd => Some(self.uint(3)?),
            0xfe => Some(self.uint(8)?),
            0xff => return Err(self.bad()),
            b => Some(u64::from(b)),
        })
    }
    /// A length-encoded string; `None` for NULL.
    fn lenenc_str(&mut self) -> Result<Option<String>, MysqlError> {
        let Some(n) = self.lenenc()? else {
            return Ok(None);
        };
        let n = usize::try_from(n).map_err(|_| self.bad())?;
        Ok(Some(String::from_utf8_lossy(self.take(n)?).into_owned()))
    }
}

/// Parses the server's greeting (`Initial Handshake Packet`, protocol 10).
pub fn parse_greeting(p: &[u8]) -> Result<Greeting, MysqlError> {
    if p.first() == Some(&0xff) {
        return Err(parse_err(p));
    }
    let mut c = Cur::new(p, "greeting");
    let protocol = c.u8()?;
    if protocol != 10 {
        return Err(c.bad());
    }
    let version = c.nul_str()?;
    let connection_id = c.u32()?;
    c.take(8 + 1)?; // auth data part 1, filler
    let low = u32::from(c.u16()?);
    c.take(1 + 2)?; // charset, status
    let high = u32::from(c.u16()?);
    Ok(Greeting {
        protocol,
        version,
        connection_id,
        capabilities: low | high << 16,
    })
}

/// The `HandshakeResponse41` of user `user` with an empty password.
pub fn handshake_response(user: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(32 + user.len() + 2);
    p.extend_from_slice(&CLIENT_CAPS.to_le_bytes());
    p.extend_from_slice(&(1u32 << 24).to_le_bytes());
    p.push(CHARSET);
    p.extend_from_slice(&[0; 23]);
    p.extend_from_slice(user.as_bytes());
    p.push(0);
    p.push(0); // an empty auth response
    p
}

/// The `COM_QUERY` payload of `sql`.
pub fn query_payload(sql: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(sql.len() + 1);
    p.push(COM_QUERY);
    p.extend_from_slice(sql.as_bytes());
    p
}

/// Parses an `ERR` packet into its error.
pub fn parse_err(p: &[u8]) -> MysqlError {
    let mut c = Cur::new(p, "error");
    let parsed = (|| {
        c.u8()?;
        let code = c.u16()?;
        let rest = c.take(c.b.len())?;
        let (state, msg) = match rest.strip_prefix(b"#") {
            Some(r) if r.len() >= 5 => (String::from_utf8_lossy(&r[..5]).into_owned(), &r[5..]),
            _ => (String::new(), rest),
        };
        Ok::<_, MysqlError>(MysqlError::Server {
            code,
            state,
            message: String::from_utf8_lossy(msg).into_owned(),
        })
    })();
    parsed.unwrap_or_else(|e| e)
}

/// Parses an `OK` packet.
pub fn parse_ok(p: &[u8]) -> Result<Answer, MysqlError> {
    let mut c = Cur::new(p, "OK");
    c.u8()?;
    let affected = c.lenenc()?.ok_or_else(|| c.bad())?;
    let insert_id = c.lenenc()?.ok_or_else(|| c.bad())?;
    Ok(Answer::Ok {
        affected,
        insert_id,
    })
}

/// Whether `p` is an `EOF` packet (`0xfe`, shorter than 9 bytes).
pub fn is_eof(p: &[u8]) -> bool {
    p.first() == Some(&0xfe) && p.len() < 9
}

/// The column's name from a `ColumnDefinition41` packet (its fifth
/// string, after catalog, schema, table and original table).
pub fn column_name(p: &[u8]) -> Result<String, MysqlError> {
    let mut c = Cur::new(p, "column definition");
    for _ in 0..4 {
        c.lenenc_str()?;
    }
    c.lenenc_str()?.ok_or_else(|| c.bad())
}

/// A text row of `n` values.
pub fn parse_row(p: &[u8], n: usize) -> Result<Vec<Option<String>>, MysqlError> {
    let mut c = Cur::new(p, "row");
    (0..n).map(|_| c.lenenc_str()).collect()
}

/// The column count that opens a result set.
pub fn column_count(p: &[u8]) -> Result<usize, MysqlError> {
    let mut c = Cur::new(p, "column count");
    let n = c.lenenc()?.ok_or_else(|| c.bad())?;
    usize::try_from(n).map_err(|_| c.bad())
}

/// A connection to a server over any byte stream (a `UnixStream`).
pub struct Conn<S> {
    s: S,
    seq: u8,
    /// The server's greeting.
    pub greeting: Greeting,
}

impl<S: Read + Write> Conn<S> {
    /// Reads the greeting and logs in as `user` with no password.
    pub fn handshake(mut s: S, user: &str) -> Result<Self, MysqlError> {
        let (seq, g) = read_packet(&mut s)?;
        let greeting = parse_greeting(&g)?;
        let mut c = Self {
            s,
            seq: seq.wrapping_add(1),
            greeting,
        };
        c.send(&handshake_response(user))?;
        let p = c.recv()?;
        match p.first() {
            Some(0x00) => Ok(c),
            Some(0xff) => Err(parse_err(&p)),
            _ => Err(MysqlError::Malformed {
                what: "handshake answer",
                bytes: p.len(),
            }),
        }
    }

    /// Runs `sql` and reads its answer whole.
    pub fn query(&mut self, sql: &str) -> Result<Answer, MysqlError> {
        self.seq = 0;
        self.send(&query_payload(sql))?;
        let first = self.recv()?;
        match first.first() {
            Some(0x00) => return parse_ok(&first),
            Some(0xff) => return Err(parse_err(&first)),
            _ => {}
        }
        let n = column_count(&first)?;
        let mut columns = Vec::with_capacity(n);
        for _ in 0..n {
            columns.push(column_name(&self.recv()?)?);
        }
        let eof = self.recv()?;
        if !is_eof(&eof) {
            return Err(MysqlError::Malformed {
                what: "end of columns",
                bytes: eof.len(),
            });
        }
        let mut rows = Vec::new();
        loop {
            let p = self.recv()?;
            if is_eof(&p) {
                break;
            }
            if p.first() == Some(&0xff) {
                return Err(parse_err(&p));
            }
            rows.push(parse_row(&p, n)?);
        }
        Ok(Answer::Rows { columns, rows })
    }

    fn send(&mut self, payload: &[u8]) -> Result<(), MysqlError> {
        let f = frame(self.seq, payload)?;
        self.seq = self.seq.wrapping_add(1);
        self.s.write_all(&f).map_err(|source| MysqlError::Io {
            op: "write",
            source,
        })
    }

    fn recv(&mut self) -> Result<Vec<u8>, MysqlError> {
        let (seq, p) = read_packet(&mut self.s)?;
        self.seq = seq.wrapping_add(1);
        Ok(p)
    }
}

/// Reads one packet: its sequence id and payload.
pub fn read_packet<R: Read>(r: &mut R) -> Result<(u8, Vec<u8>), MysqlError> {
    let io = |source| MysqlError::Io { op: "read", source };
    let mut h = [0u8; 4];
    r.read_exact(&mut h).map_err(io)?;
    let (n, seq) = header(h);
    let mut p = vec![0u8; n];
    r.read_exact(&mut p).map_err(io)?;
    Ok((seq, p))
}

#[cfg(test)]
#[path = "mysql_tests.rs"]
mod tests;
