//! Tests of the `kvfront` worker: RESP, windows, back ends that fail.

use std::io::Cursor;
use std::net::TcpListener;

use super::*;

fn parse(bytes: &[u8]) -> io::Result<Resp> {
    read_reply(&mut Cursor::new(bytes.to_vec()))
}

#[test]
fn encodes_commands_as_arrays_of_bulk_strings() {
    let mut out = Vec::new();
    encode(&[b"SET", b"key:1", b""], &mut out);
    assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$5\r\nkey:1\r\n$0\r\n\r\n");
    encode(&[b"PING"], &mut out);
    assert!(out.ends_with(b"*1\r\n$4\r\nPING\r\n"));
}

#[test]
fn parses_every_reply_type() {
    assert_eq!(parse(b"+OK\r\n").unwrap(), Resp::Simple("OK".into()));
    assert_eq!(
        parse(b"-ERR no such key\r\n").unwrap(),
        Resp::Error("ERR no such key".into())
    );
    assert_eq!(parse(b":-42\r\n").unwrap(), Resp::Int(-42));
    assert_eq!(
        parse(b"$5\r\na\r\nbc\r\n").unwrap(),
        Resp::Bulk(Some(b"a\r\nbc".to_vec()))
    );
    assert_eq!(parse(b"$-1\r\n").unwrap(), Resp::Bulk(None));
    assert_eq!(parse(b"*-1\r\n").unwrap(), Resp::Array(None));
    assert_eq!(
        parse(b"*2\r\n:1\r\n*1\r\n$0\r\n\r\n").unwrap(),
        Resp::Array(Some(vec![
            Resp::Int(1),
            Resp::Array(Some(vec![Resp::Bulk(Some(Vec::new()))]))
        ]))
    );
    // Two replies back to back are read one at a time.
    let mut c = Cursor::new(b"+PONG\r\n:7\r\n".to_vec());
    assert_eq!(read_reply(&mut c).unwrap(), Resp::Simple("PONG".into()));
    assert_eq!(read_reply(&mut c).unwrap(), Resp::Int(7));
}

#[test]
fn refuses_malformed_replies() {
    let kind = |b: &[u8]| parse(b).unwrap_err().kind();
    assert_eq!(kind(b"?x\r\n"), ErrorKind::InvalidData);
    assert_eq!(kind(b":12a\r\n"), ErrorKind::InvalidData);
    assert_eq!(kind(b"+OK\n"), ErrorKind::InvalidData);
    assert_eq!(kind(b"\r\n"), ErrorKind::InvalidData);
    assert_eq!(kind(b"$-2\r\n"), ErrorKind::InvalidData);
    assert_eq!(kind(b"$3\r\nabcd\r\n"), ErrorKind::InvalidData);
    assert_eq!(kind(b"$99999999999\r\n"), ErrorKind::InvalidData);
    assert_eq!(kind(b""), ErrorKind::UnexpectedEof);
    assert_eq!(kind(b"$5\r\nab"), ErrorKind::UnexpectedEof);
    assert_eq!(kind(b"*2\r\n:1\r\n"), ErrorKind::UnexpectedEof);
    let deep = "*1\r\n".repeat(MAX_DEPTH + 1) + ":1\r\n";
    assert_eq!(kind(deep.as_bytes()), ErrorKind::InvalidData);
    let ok = "*1\r\n".repeat(MAX_DEPTH) + ":1\r\n";
    assert!(parse(ok.as_bytes()).is_ok());
}

#[test]
fn a_window_gives_its_percentile_then_starts_empty() {
    let mut w = Window::default();
    for l in [5.0, 1.0, 4.0, 2.0, 3.0, f64::NAN] {
        w.add(Some(l));
    }
    w.add(None);
    let v = w.close(80.0, Some(1e6));
    assert_eq!(
        v,
        WindowValue {
            n: 5,
            errors: 1,
            value_us: Some(4.0),
            stalled: false
        }
    );
    assert_eq!(w.close(99.0, Some(1e6)).n, 0);
    // Nothing completed: the oldest outstanding request's age stands in.
    assert_eq!(
        w.close(99.0, Some(250.0)),
        WindowValue {
            n: 0,
            errors: 0,
            value_us: Some(250.0),
            stalled: true
        }
    );
    assert_eq!(w.close(99.0, None).value_us, None);
    w.add(Some(7.0));
    assert_eq!(w.close(99.0, None).value_us, Some(7.0));
}

#[test]
fn parses_back_end_lists() {
    assert_eq!(
        parse_backends("6379, 10.0.0.2:7000").unwrap(),
        vec![
            SocketAddr::from(([127, 0, 0, 1], 6379)),
            SocketAddr::from(([10, 0, 0, 2], 7000))
        ]
    );
    assert!(parse_backends("localhost:6379").is_err());
    assert!(parse_backends("0").is_err());
    assert!(parse_backends("").is_err());
}

/// A RESP server for one test: answers every command of a connection
/// with `+OK` (or `$-1` for a GET), and closes the first connection
/// after its first command, as a back end that restarts would.
fn fake_server() -> (SocketAddr, std::thread::JoinHandle<usize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut conns = 0;
        for (i, s) in l.incoming().enumerate() {
            let Ok(s) = s else { break };
            conns += 1;
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            while let Ok(Resp::Array(Some(cmd))) = read_reply(&mut r) {
                let reply: &[u8] = match &cmd[0] {
                    Resp::Bulk(Some(c)) if c == b"GET" => b"$-1\r\n",
                    Resp::Bulk(Some(c)) if c == b"QUIT" => return conns,
                    _ => b"+OK\r\n",
                };
                if i == 0 || w.write_all(reply).is_err() {
                    let _ = w.shutdown(std::net::Shutdown::Both);
                    break;
                }
            }
        }
        conns
    });
    (addr, h)
}

#[test]
fn a_back_end_that_drops_the_connection_is_an_error_then_reconnected() {
    let (addr, server) = fake_server();
    let mut b = vec![Backend::new(addr, Duration::from_secs(10))];
    // The first connection is closed without an answer.
    assert_eq!(request(&mut b, 0, 10, 0), Outcome::Io);
    assert!(b[0].conn.is_none());
    // The next request connects again; its GET finds nothing.
    assert_eq!(request(&mut b, 1, 10, 5), Outcome::Done { misses: 1 });
    assert_eq!(
        b[0].call(&[b"QUIT"]).unwrap_err().kind(),
        ErrorKind::UnexpectedEof
    );
    assert_eq!(server.join().unwrap(), 2);
}

#[test]
fn an_unreachable_back_end_is_an_io_error() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let mut b = vec![Backend::new(addr, Duration::from_secs(1))];
    assert_eq!(request(&mut b, 0, 1, 0), Outcome::Io);
}

#[test]
fn preparing_waits_longer_than_a_request_may() {
    // A back end that answers PING at once and every later command only
    // after 300 ms, six times the requests' limit of 50 ms: the keys are
    // still prepared (before, the first batch of SETs failed the run with
    // EAGAIN).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            while let Ok(Resp::Array(Some(cmd))) = read_reply(&mut r) {
                let reply: &[u8] = match &cmd[0] {
                    Resp::Bulk(Some(c)) if c == b"PING" => b"+PONG\r\n",
                    _ => {
                        std::thread::sleep(Duration::from_millis(300));
                        b"+OK\r\n"
                    }
                };
                if w.write_all(reply).is_err() {
                    return;
                }
            }
        }
    });
    let args: Vec<String> = format!("kvfront --backends {addr} --rate 1 --timeout-ms 50 --keys 2")
        .split(' ')
        .map(String::from)
        .collect();
    let super::super::Worker::KvFront(a) = super::super::Worker::parse(&args).unwrap() else {
        panic!("not kvfront")
    };
    assert_eq!(a.timeout_ms, 50);
    prepare_all(&a).unwrap();
}
