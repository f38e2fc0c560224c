//! Telling systemd how the daemon is doing (`sd_notify(3)`'s protocol).
//!
//! A service of `Type=notify` gets `$NOTIFY_SOCKET`, a Unix datagram socket
//! (a path, or an abstract name written with a leading `@`). The daemon
//! sends newline-separated `KEY=VALUE` lines: `READY=1` once atoll's
//! hierarchy is built, `STOPPING=1` when teardown starts, `RELOADING=1`
//! around a reload, `STATUS=...` for `systemctl status`. Without the
//! variable (started from a shell) every call does nothing.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable systemd sets for `Type=notify` services.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Sends `state` (e.g. `"READY=1"` or `"STOPPING=1\nSTATUS=tearing down"`)
/// to `$NOTIFY_SOCKET`. `Ok(false)` without the variable, `Ok(true)` once
/// sent.
pub fn notify(state: &str) -> io::Result<bool> {
    match std::env::var_os(NOTIFY_SOCKET) {
        Some(addr) if !addr.is_empty() => {
            send_to(&addr.to_string_lossy(), state)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Sends `state` to the socket `addr` names: a path, or an abstract name
/// with a leading `@`.
pub fn send_to(addr: &str, state: &str) -> io::Result<()> {
    let target = match addr.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
        None if addr.starts_with('/') => SocketAddr::from_pathname(addr)?,
        None => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{NOTIFY_SOCKET}={addr:?} is neither a path nor an abstract @name"),
            ))
        }
    };
    let sock = UnixDatagram::unbound()?;
    let n = sock.send_to_addr(state.as_bytes(), &target)?;
    if n != state.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short datagram to {addr}: {n} of {} bytes", state.len()),
        ));
    }
    Ok(())
}

/// [`notify`], with a failure logged rather than returned: systemd's view
/// must never stop the daemon.
pub fn tell(state: &str) {
    if let Err(e) = notify(state) {
        tracing::warn!("sd_notify {state:?}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn recv(sock: &UnixDatagram) -> String {
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn sends_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = UnixDatagram::bind(&path).unwrap();
        send_to(path.to_str().unwrap(), "READY=1\nSTATUS=running").unwrap();
        assert_eq!(recv(&sock), "READY=1\nSTATUS=running");
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        let name = format!("atoll-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let sock = UnixDatagram::bind_addr(&addr).unwrap();
        send_to(&format!("@{name}"), "STOPPING=1").unwrap();
        assert_eq!(recv(&sock), "STOPPING=1");
    }

    #[test]
    fn refuses_what_is_no_socket_address() {
        let e = send_to("relative/path", "READY=1").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let dir = tempfile::tempdir().unwrap();
        // Nobody listens there.
        assert!(send_to(dir.path().join("none").to_str().unwrap(), "READY=1").is_err());
    }

    #[test]
    fn the_variable_decides() {
        // The only test that touches the environment (tests run on threads
        // of one process): set, send, unset, no-op.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = UnixDatagram::bind(&path).unwrap();
        std::env::set_var(NOTIFY_SOCKET, &path);
        let sent = notify("RELOADING=1");
        std::env::remove_var(NOTIFY_SOCKET);
        assert!(sent.unwrap());
        assert_eq!(recv(&sock), "RELOADING=1");
        assert!(!notify("READY=1").unwrap());
    }
}
