//! One probe: an HTTP GET or a TCP request, timed from before the connect
//! to the end of the answer. A probe not answered within its timeout is a
//! sample at the timeout (a missed SLO is not dropped); one that fails
//! (refused, reset) is too, with the error.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use atoll_core::num::micros_u64;
use atoll_core::slo::ProbeTarget;

/// What one probe measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// µs from the connect to the end of the answer, or the timeout.
    pub latency_us: u64,
    /// Whether it is the timeout.
    pub timed_out: bool,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// Sends one probe to `target`, waiting at most `timeout` in all.
pub fn once(target: &ProbeTarget, timeout: Duration) -> Measured {
    let start = Instant::now();
    match exchange(target, timeout, start) {
        Ok(()) => {
            let took = start.elapsed();
            if took > timeout {
                return missed(timeout, None);
            }
            Measured {
                latency_us: micros_u64(took),
                timed_out: false,
                error: None,
            }
        }
        Err(e) => missed(timeout, Some(format!("{}: {e}", target.url()))),
    }
}

fn missed(timeout: Duration, error: Option<String>) -> Measured {
    Measured {
        latency_us: micros_u64(timeout),
        timed_out: true,
        error,
    }
}

/// The time left of `timeout` since `start`, or a timeout error.
fn left(timeout: Duration, start: Instant) -> std::io::Result<Duration> {
    timeout
        .checked_sub(start.elapsed())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"))
}

fn exchange(target: &ProbeTarget, timeout: Duration, start: Instant) -> std::io::Result<()> {
    let addr = target
        .addr()
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, left(timeout, start)?)?;
    s.set_nodelay(true)?;
    s.set_write_timeout(Some(left(timeout, start)?))?;
    match target {
        ProbeTarget::Http { addr, path } => {
            let req = format!(
                "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: atoll-probe\r\nConnection: close\r\n\r\n"
            );
            s.write_all(req.as_bytes())?;
            let mut buf = [0u8; 4096];
            let mut head = Vec::new();
            loop {
                s.set_read_timeout(Some(left(timeout, start)?))?;
                let n = s.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                if head.len() < 16 {
                    head.extend_from_slice(&buf[..n]);
                }
            }
            if !head.starts_with(b"HTTP/") {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "the answer is not HTTP",
                ));
            }
            Ok(())
        }
        ProbeTarget::Tcp { send, .. } => {
            s.write_all(send.as_bytes())?;
            s.set_read_timeout(Some(left(timeout, start)?))?;
            let mut buf = [0u8; 512];
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "closed without an answer",
                ));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    /// A server on 127.0.0.1:0 answering `conns` connections with `answer`
    /// (after reading the request), or never answering when `None`.
    fn server(conns: usize, answer: Option<&'static str>) -> (String, thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = thread::spawn(move || {
            let mut held = Vec::new();
            for _ in 0..conns {
                let (s, _) = l.accept().unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                match answer {
                    Some(a) => {
                        // Read the rest of an HTTP request's head.
                        if line.starts_with("GET ") {
                            while line != "\r\n" {
                                line.clear();
                                r.read_line(&mut line).unwrap();
                            }
                        }
                        (&s).write_all(a.as_bytes()).unwrap();
                    }
                    None => held.push(s),
                }
            }
            // Held connections are closed when the test is done with them.
            thread::sleep(Duration::from_millis(300));
        });
        (addr, t)
    }

    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn an_http_get_is_timed_to_the_end_of_the_answer() {
        let (addr, t) = server(
            2,
            Some("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"),
        );
        let target = ProbeTarget::parse(&format!("http://{addr}/health"), None).unwrap();
        for _ in 0..2 {
            let m = once(&target, LONG);
            assert_eq!(m.error, None);
            assert!(!m.timed_out);
            assert!(m.latency_us < micros_u64(LONG));
        }
        t.join().unwrap();
    }

    #[test]
    fn a_tcp_request_waits_for_the_first_bytes_back() {
        let (addr, t) = server(1, Some("+PONG\r\n"));
        let target = ProbeTarget::parse(&format!("tcp://{addr}"), Some("PING\r\n")).unwrap();
        let m = once(&target, LONG);
        assert_eq!((m.error, m.timed_out), (None, false));
        t.join().unwrap();
    }

    #[test]
    fn no_answer_is_a_sample_at_the_timeout() {
        let (addr, t) = server(1, None);
        let target = ProbeTarget::parse(&format!("tcp://{addr}"), None).unwrap();
        let timeout = Duration::from_millis(100);
        let m = once(&target, timeout);
        assert!(m.timed_out, "{m:?}");
        assert_eq!(m.latency_us, 100_000, "counted at the timeout, not dropped");
        assert!(m.error.is_some());
        t.join().unwrap();
    }

    #[test]
    fn a_refused_connection_is_a_miss_with_its_error() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let target = ProbeTarget::parse(&format!("http://{addr}/"), None).unwrap();
        let m = once(&target, Duration::from_secs(2));
        assert!(m.timed_out);
        assert_eq!(m.latency_us, 2_000_000);
        assert!(m.error.unwrap().contains(&addr));
    }

    #[test]
    fn an_answer_that_is_not_http_is_a_miss() {
        let (addr, t) = server(1, Some("SSH-2.0-nope\r\n"));
        let target = ProbeTarget::parse(&format!("http://{addr}/"), None).unwrap();
        let m = once(&target, LONG);
        assert!(m.timed_out);
        assert!(m.error.unwrap().contains("not HTTP"));
        t.join().unwrap();
    }
}
