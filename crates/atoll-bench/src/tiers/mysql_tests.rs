//! The client against bytes recorded from MariaDB 10.11.19 (Debian 12),
//! `mariadbd --skip-grant-tables --skip-networking` on a unix socket.

use std::io::{Cursor, Read, Write};

use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The server's greeting, header included.
const GREETING: &str = "640000000a352e352e352d31302e31312e31392d4d6172696144422d302b64656231327531\
    0003000000402845603833375b00fef7080200ff81150000000000001d000000442321785c447c676e716f57006d79\
    73716c5f6e61746976655f70617373776f726400";
/// `OK` to the handshake response.
const AUTH_OK: &str = "0700000200000002000000";
/// `SELECT 1 AS a, NULL AS b, 'x' AS c`.
const SELECT: &str = "0100000103 17000002036465660000000161000c3f0001000000038100000000 \
    17000003036465660000000162000c3f0000000000068000000000 \
    17000004036465660000000163000c210003000000fd0100270000 05000005fe00000200 \
    050000060131fb0178 05000007fe00000200";
/// `SELECT nope`.
const ERR: &str = "2a000001ff1e04233432533232556e6b6e6f776e20636f6c756d6e20276e6f70652720696e20\
    2753454c45435427";
/// `INSERT INTO t.k (v) VALUES (5),(6)` into an empty `AUTO_INCREMENT` table.
const INSERT: &str =
    "2e00000100020102000000265265636f7264733a203220204475706c6963617465733a20302020\
    5761726e696e67733a2030";

/// Server bytes in, client bytes out.
struct Fake {
    input: Cursor<Vec<u8>>,
    output: Vec<u8>,
}

impl Read for Fake {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Fake {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.output.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn fake(parts: &[&str]) -> Fake {
    Fake {
        input: Cursor::new(parts.iter().flat_map(|p| hex(p)).collect()),
        output: Vec::new(),
    }
}

#[test]
fn the_greeting_is_read() {
    let g = hex(GREETING);
    let (n, seq) = header([g[0], g[1], g[2], g[3]]);
    assert_eq!((n, seq), (g.len() - 4, 0));
    let g = parse_greeting(&g[4..]).unwrap();
    assert_eq!(g.protocol, 10);
    assert_eq!(g.version, "5.5.5-10.11.19-MariaDB-0+deb12u1");
    assert_eq!(g.connection_id, 3);
    assert_eq!(g.capabilities, 0x81ff_f7fe);
    assert_ne!(g.capabilities & PROTOCOL_41, 0);
    assert!(parse_greeting(&hex("0a352e35")).is_err());
    assert!(parse_greeting(&hex("09")).is_err());
}

#[test]
fn the_handshake_response_has_the_documented_layout() {
    let p = handshake_response("atoll");
    assert_eq!(&p[..4], &CLIENT_CAPS.to_le_bytes());
    assert_eq!(&p[4..8], &[0, 0, 0, 1]);
    assert_eq!(p[8], 33);
    assert!(p[9..32].iter().all(|&b| b == 0));
    assert_eq!(&p[32..], b"atoll\0\0");
    let f = frame(1, &p).unwrap();
    assert_eq!(&f[..4], &[39, 0, 0, 1]);
}

#[test]
fn a_login_and_a_select_end_to_end() {
    let mut conn = Conn::handshake(fake(&[GREETING, AUTH_OK, SELECT]), "atoll").unwrap();
    let a = conn.query("SELECT 1 AS a, NULL AS b, 'x' AS c").unwrap();
    assert_eq!(
        a,
        Answer::Rows {
            columns: vec!["a".into(), "b".into(), "c".into()],
            rows: vec![vec![Some("1".into()), None, Some("x".into())]],
        }
    );
    // What the client wrote: the response at sequence 1, the query at 0.
    let out = &conn.s.output;
    let resp = frame(1, &handshake_response("atoll")).unwrap();
    assert_eq!(&out[..resp.len()], &resp[..]);
    let q = frame(0, &query_payload("SELECT 1 AS a, NULL AS b, 'x' AS c")).unwrap();
    assert_eq!(&out[resp.len()..], &q[..]);
    assert_eq!(q[4], 0x03);
}

#[test]
fn ok_and_error_answers() {
    let mut conn = Conn::handshake(fake(&[GREETING, AUTH_OK, INSERT, ERR]), "atoll").unwrap();
    assert_eq!(
        conn.query("INSERT INTO t.k (v) VALUES (5),(6)").unwrap(),
        Answer::Ok {
            affected: 2,
            insert_id: 1
        }
    );
    match conn.query("SELECT nope").unwrap_err() {
        MysqlError::Server {
            code,
            state,
            message,
        } => {
            assert_eq!(code, 1054);
            assert_eq!(state, "42S22");
            assert_eq!(message, "Unknown column 'nope' in 'SELECT'");
        }
        e => panic!("{e}"),
    }
}

#[test]
fn a_refused_login_is_the_servers_error() {
    let e = Conn::handshake(fake(&[GREETING, ERR]), "atoll")
        .err()
        .unwrap();
    assert!(matches!(e, MysqlError::Server { code: 1054, .. }), "{e}");
}

#[test]
fn a_cut_stream_is_an_io_error() {
    let e = Conn::handshake(fake(&[&GREETING[..40]]), "atoll")
        .err()
        .unwrap();
    assert!(matches!(e, MysqlError::Io { op: "read", .. }), "{e}");
}

#[test]
fn length_encoded_values() {
    let p = [0xfc, 0x01, 0x02, 0xfb, 0x03, b'a', b'b', b'c'];
    let mut c = Cur::new(&p, "t");
    assert_eq!(c.lenenc().unwrap(), Some(0x0201));
    assert_eq!(c.lenenc().unwrap(), None);
    assert_eq!(c.lenenc_str().unwrap().as_deref(), Some("abc"));
    assert!(c.u8().is_err());
    let big = [0xfd, 1, 2, 3];
    assert_eq!(Cur::new(&big, "t").lenenc().unwrap(), Some(0x030201));
    assert!(parse_row(&[0x05, b'a'], 1).is_err());
    assert!(is_eof(&hex("fe00000200")));
    assert!(!is_eof(&hex("fe0000000000000000")));
}

#[test]
fn a_query_too_long_for_one_packet_is_refused() {
    assert!(matches!(
        frame(0, &vec![0; MAX_PACKET]),
        Err(MysqlError::TooLong(_))
    ));
}
