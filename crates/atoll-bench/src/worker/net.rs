//! The latency pair: `echo-server` and `latency-client` talk over a Unix
//! stream socket in fixed 64-byte messages.
//!
//! Each round trip wakes two processes (the server blocked in `read`, then
//! the client blocked in `read`), so its time is mostly scheduling latency:
//! how quickly a sleeping task of the unit gets a CPU. The client sleeps
//! `interval` between round trips, like an interactive service, and reports
//! a summary of the round-trip times in µs.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{stopping, tight_timer_slack};
use crate::stats::Summary;

/// Bytes per message.
pub const MESSAGE: usize = 64;
/// How long the client waits for the server's socket to appear.
const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// Serves until stopped; every connection gets its own thread. The socket
/// file is created here and removed on exit; an existing file is an error
/// (it is never removed, since it may not be ours).
pub(crate) fn echo_server(socket: &Path) -> std::io::Result<serde_json::Value> {
    let listener = UnixListener::bind(socket)?;
    listener.set_nonblocking(true)?;
    let mut served = 0u64;
    while !stopping() {
        match listener.accept() {
            Ok((stream, _)) => {
                served += 1;
                stream.set_nonblocking(false)?;
                std::thread::spawn(move || echo(stream));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = std::fs::remove_file(socket);
                return Err(e);
            }
        }
    }
    let _ = std::fs::remove_file(socket);
    Ok(json!({ "kind": "echo-server", "connections": served }))
}

fn echo(mut s: UnixStream) {
    let mut buf = [0u8; MESSAGE];
    while s.read_exact(&mut buf).is_ok() {
        if s.write_all(&buf).is_err() {
            return;
        }
    }
}

fn connect(socket: &Path) -> std::io::Result<UnixStream> {
    let t0 = Instant::now();
    loop {
        match UnixStream::connect(socket) {
            Ok(s) => return Ok(s),
            Err(e) if t0.elapsed() >= CONNECT_WAIT || stopping() => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// `count` round trips `interval_us` apart; reports their summary in µs.
pub(crate) fn latency_client(
    socket: &Path,
    count: usize,
    interval_us: u64,
    raw: bool,
) -> std::io::Result<serde_json::Value> {
    tight_timer_slack();
    let mut s = connect(socket)?;
    let mut samples = Vec::with_capacity(count);
    let mut msg = [0u8; MESSAGE];
    let mut back = [0u8; MESSAGE];
    for i in 0..count {
        if stopping() {
            break;
        }
        if interval_us > 0 {
            std::thread::sleep(Duration::from_micros(interval_us));
        }
        msg[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let t0 = Instant::now();
        s.write_all(&msg)?;
        s.read_exact(&mut back)?;
        samples.push(t0.elapsed().as_secs_f64() * 1e6);
        if back != msg {
            return Err(std::io::Error::new(
                ErrorKind::InvalidData,
                format!("round trip {i}: the server sent back something else"),
            ));
        }
    }
    let mut report = json!({
        "kind": "latency-client",
        "count": samples.len(),
        "interval_us": interval_us,
        "rtt_us": Summary::of(&samples),
    });
    if raw {
        report["raw_us"] = json!(samples);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_and_server_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("echo.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            echo(s);
        });
        let r = latency_client(&sock, 5, 0, true).unwrap();
        assert_eq!(r["count"], 5);
        assert_eq!(r["raw_us"].as_array().unwrap().len(), 5);
        assert_eq!(r["rtt_us"]["count"], 5);
        server.join().unwrap();
    }

    #[test]
    fn the_server_refuses_an_existing_path() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("taken");
        std::fs::write(&sock, "not ours").unwrap();
        assert!(echo_server(&sock).is_err());
        assert_eq!(std::fs::read_to_string(&sock).unwrap(), "not ours");
    }
}
