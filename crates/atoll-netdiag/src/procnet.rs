//! The fallback [`SocketSource`]: the socket tables of `/proc/<pid>/net`,
//! for kernels without sock_diag (or a daemon that may not open it).
//!
//! Each dump reads, through one process of the namespace (the tables show
//! the namespace of the process they are read through), the text tables
//! `tcp`, `tcp6`, `udp`, `udp6` and `unix` that [`Protocols`] selects. From
//! the `tcp`/`udp` tables: `tx_queue:rx_queue` (hex) and `inode`; listening
//! TCP sockets (state `0A`, whose queues count connections) and sockets
//! without inode (TIME_WAIT) are left out. The `unix` table has no queue
//! columns: its sockets are counted with empty queues (listening ones,
//! flag `__SO_ACCEPTCON`, left out). No table has byte counters.
//!
//! This costs more than sock_diag: the kernel formats every socket of the
//! namespace as text, listening and TIME_WAIT ones included, and has no
//! state filter; `docs/comm.md` has the measured ratio.
//!
//! A table that does not exist (IPv6 disabled) is skipped. A line that
//! does not parse is an error naming the file, line and text: the format
//! has not changed in decades, so a surprise there is worth reporting.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::{NetNs, Protocols, SockProto, SocketFigures, SocketSource, SourceError, SourceKind};

/// Why a `/proc/<pid>/net` table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcNetError {
    /// A table could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The table.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A line of a table does not have the expected columns.
    #[error("{path}:{line}: {value:?}: {reason}")]
    Parse {
        /// The table.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The line's text.
        value: String,
        /// What was expected.
        reason: &'static str,
    },
    /// None of the namespace's processes could be read (they exited).
    #[error("{root}: no process of the namespace left among pids {pids:?}")]
    Gone {
        /// The procfs root.
        root: PathBuf,
        /// The processes tried.
        pids: Vec<u32>,
    },
}

impl ProcNetError {
    /// Whether only one namespace is affected (see [`SourceError`]).
    pub fn skips_namespace(&self) -> bool {
        matches!(self, ProcNetError::Gone { .. })
    }
}

/// [`SocketSource`] from `/proc/<pid>/net/*` under an injected procfs root.
#[derive(Debug)]
pub struct ProcNetSource {
    root: PathBuf,
    tables: Vec<(&'static str, SockProto)>,
    buf: Vec<u8>,
}

impl ProcNetSource {
    /// A source reading the procfs at `root` (usually `/proc`).
    pub fn new(root: impl Into<PathBuf>, protocols: Protocols) -> Self {
        let mut tables = Vec::new();
        if protocols.tcp {
            tables.push(("tcp", SockProto::Tcp));
            tables.push(("tcp6", SockProto::Tcp));
        }
        if protocols.udp {
            tables.push(("udp", SockProto::Udp));
            tables.push(("udp6", SockProto::Udp));
        }
        if protocols.unix {
            tables.push(("unix", SockProto::Unix));
        }
        Self {
            root: root.into(),
            tables,
            buf: Vec::with_capacity(64 * 1024),
        }
    }

    fn read_table(&mut self, path: &Path) -> Result<bool, ProcNetError> {
        self.buf.clear();
        let res = std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut self.buf));
        match res {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(ProcNetError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }
}

impl SocketSource for ProcNetSource {
    fn kind(&self) -> SourceKind {
        SourceKind::ProcNet
    }

    fn dump(
        &mut self,
        _ns: NetNs,
        pids: &[u32],
        out: &mut Vec<SocketFigures>,
    ) -> Result<(), SourceError> {
        for pid in pids {
            let dir = self.root.join(pid.to_string()).join("net");
            if !dir.is_dir() {
                continue;
            }
            for i in 0..self.tables.len() {
                let (name, proto) = self.tables[i];
                let path = dir.join(name);
                if !self.read_table(&path)? {
                    continue;
                }
                match proto {
                    SockProto::Unix => parse_unix_table(&self.buf, &path, out)?,
                    _ => parse_inet_table(&self.buf, proto, &path, out)?,
                }
            }
            return Ok(());
        }
        Err(ProcNetError::Gone {
            root: self.root.clone(),
            pids: pids.to_vec(),
        }
        .into())
    }
}

/// Parses a `tcp`/`tcp6`/`udp`/`udp6` table (header line first).
pub fn parse_inet_table(
    text: &[u8],
    proto: SockProto,
    path: &Path,
    out: &mut Vec<SocketFigures>,
) -> Result<(), ProcNetError> {
    for (i, line) in text.split(|&c| c == b'\n').enumerate().skip(1) {
        let mut f = line
            .split(u8::is_ascii_whitespace)
            .filter(|s| !s.is_empty());
        let Some(first) = f.next() else { continue };
        let err = |reason| ProcNetError::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            value: String::from_utf8_lossy(line).into_owned(),
            reason,
        };
        if !first.ends_with(b":") {
            return Err(err("a slot number ending in ':' first"));
        }
        // local, remote, st, tx:rx, tr:when, retrnsmt, uid, timeout, inode
        let cols: Vec<&[u8]> = f.by_ref().take(9).collect();
        if cols.len() < 9 {
            return Err(err("at least 10 columns"));
        }
        let st = hex(cols[2]).ok_or_else(|| err("a hex state in column 4"))?;
        let (tx, rx) = split_once(cols[3], b':')
            .and_then(|(t, r)| Some((hex(t)?, hex(r)?)))
            .ok_or_else(|| err("tx_queue:rx_queue in hex in column 5"))?;
        let inode = dec(cols[8]).ok_or_else(|| err("a decimal inode in column 10"))?;
        if inode == 0 || (proto == SockProto::Tcp && st == 0x0a) {
            continue;
        }
        out.push(SocketFigures {
            inode,
            proto,
            rqueue: rx,
            wqueue: tx,
            bytes_read: None,
            bytes_written: None,
        });
    }
    Ok(())
}

/// `__SO_ACCEPTCON` in the `Flags` column: a listening socket.
const SO_ACCEPTCON: u64 = 0x10000;

/// Parses the `unix` table: `Num RefCount Protocol Flags Type St Inode
/// [Path]`.
pub fn parse_unix_table(
    text: &[u8],
    path: &Path,
    out: &mut Vec<SocketFigures>,
) -> Result<(), ProcNetError> {
    for (i, line) in text.split(|&c| c == b'\n').enumerate().skip(1) {
        let cols: Vec<&[u8]> = line
            .split(u8::is_ascii_whitespace)
            .filter(|s| !s.is_empty())
            .take(7)
            .collect();
        if cols.is_empty() {
            continue;
        }
        let err = |reason| ProcNetError::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            value: String::from_utf8_lossy(line).into_owned(),
            reason,
        };
        if cols.len() < 7 || !cols[0].ends_with(b":") {
            return Err(err("Num: RefCount Protocol Flags Type St Inode"));
        }
        let flags = hex(cols[3]).ok_or_else(|| err("hex flags in column 4"))?;
        let inode = dec(cols[6]).ok_or_else(|| err("a decimal inode in column 7"))?;
        if inode == 0 || flags & SO_ACCEPTCON != 0 {
            continue;
        }
        out.push(SocketFigures {
            inode,
            proto: SockProto::Unix,
            rqueue: 0,
            wqueue: 0,
            bytes_read: None,
            bytes_written: None,
        });
    }
    Ok(())
}

fn split_once(s: &[u8], sep: u8) -> Option<(&[u8], &[u8])> {
    let at = s.iter().position(|&c| c == sep)?;
    Some((&s[..at], &s[at + 1..]))
}

fn hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        v = (v << 4) | u64::from((c as char).to_digit(16)?);
    }
    Some(v)
}

fn dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
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

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000003 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D2F0 01 00000010:00020000 00:00000000 00000000  1000        0 4243 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:0016 0100007F:D2F1 06 00000000:00000000 03:00001000 00000000     0        0 0 3 0000000000000000
";
    const UDP: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  7: 00000000:1388 00000000:0000 07 00000000:00001000 00:00000000 00000000  1000        0 5151 2 0000000000000000 0
";
    const UNIX: &str = "Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 700 /run/listen.sock
0000000000000000: 00000003 00000000 00000000 0001 03 701 /run/listen.sock
0000000000000000: 00000003 00000000 00000000 0001 03 702
";

    #[test]
    fn inet_tables() {
        let mut out = Vec::new();
        parse_inet_table(TCP.as_bytes(), SockProto::Tcp, Path::new("tcp"), &mut out).unwrap();
        assert_eq!(out.len(), 1, "listening and time-wait lines are left out");
        assert_eq!(
            (out[0].inode, out[0].rqueue, out[0].wqueue),
            (4243, 0x20000, 0x10)
        );
        assert_eq!(out[0].bytes_read, None);
        out.clear();
        parse_inet_table(UDP.as_bytes(), SockProto::Udp, Path::new("udp"), &mut out).unwrap();
        assert_eq!(
            (out[0].inode, out[0].rqueue, out[0].proto),
            (5151, 0x1000, SockProto::Udp)
        );
        // A listening UDP-like state 0A is not special for UDP.
        out.clear();
        parse_inet_table(TCP.as_bytes(), SockProto::Udp, Path::new("udp"), &mut out).unwrap();
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn unix_table() {
        let mut out = Vec::new();
        parse_unix_table(UNIX.as_bytes(), Path::new("unix"), &mut out).unwrap();
        let inodes: Vec<u64> = out.iter().map(|f| f.inode).collect();
        assert_eq!(inodes, vec![701, 702]);
        assert!(out
            .iter()
            .all(|f| f.rqueue == 0 && f.proto == SockProto::Unix));
    }

    #[test]
    fn bad_lines_name_file_line_and_text() {
        let p = Path::new("/proc/9/net/tcp");
        let bad = [
            "hdr\n   0: 0100007F:1F90 00000000:0000 0A\n",
            "hdr\n   0: a b ZZ 00000000:00000003 x y z w 4242\n",
            "hdr\n   0: a b 01 00000000000000000:00000003 x y z w 4242\n",
            "hdr\n   0: a b 01 00000000-00000003 x y z w 4242\n",
            "hdr\n   0: a b 01 00000000:00000003 x y z w 42x\n",
            "hdr\n   X a b 01 00000000:00000003 x y z w 42\n",
        ];
        for text in bad {
            let e =
                parse_inet_table(text.as_bytes(), SockProto::Tcp, p, &mut Vec::new()).unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with("/proc/9/net/tcp:2: "), "{msg}");
        }
        let e = parse_unix_table(
            b"hdr\n0000: 2 0 zz 1 1 5\n",
            Path::new("u"),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("flags"), "{e}");
        let e =
            parse_unix_table(b"hdr\n0000: 2 0 0\n", Path::new("u"), &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("u:2"), "{e}");
    }

    #[test]
    fn dumps_through_the_first_live_process() {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path().join("20/net");
        std::fs::create_dir_all(&net).unwrap();
        std::fs::write(net.join("tcp"), TCP).unwrap();
        std::fs::write(net.join("udp"), UDP).unwrap();
        std::fs::write(net.join("unix"), UNIX).unwrap();
        let mut src = ProcNetSource::new(dir.path(), Protocols::default());
        assert_eq!(src.kind(), SourceKind::ProcNet);
        let mut out = Vec::new();
        // pid 19 is gone: 20 is read; tcp6/udp6 are absent and skipped.
        src.dump(None, &[19, 20], &mut out).unwrap();
        let mut inodes: Vec<u64> = out.iter().map(|f| f.inode).collect();
        inodes.sort();
        assert_eq!(inodes, vec![701, 702, 4243, 5151]);
        let e = src.dump(None, &[19], &mut out).unwrap_err();
        assert!(e.skips_namespace(), "{e}");

        let only_tcp = Protocols {
            tcp: true,
            udp: false,
            unix: false,
        };
        let mut out = Vec::new();
        ProcNetSource::new(dir.path(), only_tcp)
            .dump(None, &[20], &mut out)
            .unwrap();
        assert_eq!(out.len(), 1);
    }

    mod props {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            #[test]
            fn arbitrary_tables_never_panic(
                text in proptest::collection::vec(any::<u8>(), 0..600),
                lines in proptest::collection::vec("[0-9A-Fa-f: x-]{0,60}", 0..6),
            ) {
                let path = Path::new("/proc/1/net/x");
                let joined = lines.join("\n").into_bytes();
                for t in [&text, &joined] {
                    let mut out = Vec::new();
                    let _ = parse_inet_table(t, SockProto::Tcp, path, &mut out);
                    let _ = parse_inet_table(t, SockProto::Udp, path, &mut out);
                    let _ = parse_unix_table(t, path, &mut out);
                    prop_assert!(out.iter().all(|f| f.inode != 0));
                }
            }

            #[test]
            fn inet_lines_carry_their_queues(
                st in 1u8..12, tx in any::<u32>(), rx in any::<u32>(), inode in 1u64..,
            ) {
                let text = format!(
                    "header\n   0: 0100007F:1F90 00000000:0000 {st:02X} {tx:08X}:{rx:08X} \
                     00:00000000 00000000  1000        0 {inode} 1 0000000000000000\n"
                );
                let mut out = Vec::new();
                parse_inet_table(text.as_bytes(), SockProto::Tcp, Path::new("t"), &mut out)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                if st == 0x0a {
                    prop_assert!(out.is_empty());
                } else {
                    prop_assert_eq!(out, vec![SocketFigures {
                        inode,
                        proto: SockProto::Tcp,
                        rqueue: u64::from(rx),
                        wqueue: u64::from(tx),
                        bytes_read: None,
                        bytes_written: None,
                    }]);
                }
            }
        }
    }
}
