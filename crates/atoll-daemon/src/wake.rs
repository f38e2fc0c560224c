//! The waker thread: what cuts a quiescent loop's wait short besides
//! commands (see [`crate::pace`]).
//!
//! It polls two descriptors and sends [`Command::Wake`] to the loop:
//!
//! - the proc connector's socket (a copy of it), readable when process
//!   events wait. The loop reads them in its next epoch; until then the
//!   socket stays readable, so the thread waits for the loop's word after
//!   that epoch before it polls again (one wake per epoch at most);
//! - a CPU pressure (PSI) trigger on `/proc/pressure/cpu`: some task waited
//!   for a CPU [`PSI_SHARE`] of a window. The kernel marks it once per
//!   window and `poll` takes the mark, so no word is needed. The window is
//!   500 ms where the kernel allows it; a process without
//!   `CAP_SYS_RESOURCE` may only use multiples of 2 s, which it then uses
//!   (the trigger then fires up to 2 s late). Without PSI (no
//!   `CONFIG_PSI`, `psi=0`) there is no trigger, and the loop's stretched
//!   wait stays bounded by its `max`.
//!
//! The file is the whole machine's (cgroup v1 has no per-group
//! `cpu.pressure` unless the kernel was booted with `cgroup1 psi`): on a
//! busy machine it fires whoever waits, which only keeps the loop at its
//! normal pace.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::command::Command;
use crate::controller::Controller;
use crate::pace::Wake;

/// The share of the window some task must wait for a CPU to fire the
/// trigger: 10 %, contention that lending or a boost could relieve.
pub const PSI_SHARE: u32 = 10;

/// How often the thread looks at the stop flag while nothing happens.
const STOP_CHECK: Duration = Duration::from_secs(1);

/// Why no PSI trigger could be set on a pressure file.
#[derive(Debug, thiserror::Error)]
pub enum PsiError {
    /// The file could not be opened (no `CONFIG_PSI`, `psi=0`).
    #[error("{path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The kernel refused every window tried (the last refusal).
    #[error("{path}: the trigger {line:?} was refused: {source}")]
    Refused {
        path: PathBuf,
        line: String,
        source: std::io::Error,
    },
}

/// A PSI trigger on `file`: the 500 ms window, else 2 s. Returns the open
/// file and what it is.
pub fn psi_trigger(file: &Path) -> Result<(File, String), PsiError> {
    let mut refused = None;
    for window_us in [500_000u32, 2_000_000] {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(file)
            .map_err(|source| PsiError::Open {
                path: file.to_path_buf(),
                source,
            })?;
        let line = format!("some {} {window_us}", window_us / 100 * PSI_SHARE);
        match f.write_all(format!("{line}\0").as_bytes()) {
            Ok(()) => {
                return Ok((
                    f,
                    format!(
                        "trigger on {}: some {} % of {} ms",
                        file.display(),
                        PSI_SHARE,
                        window_us / 1000
                    ),
                ))
            }
            Err(source) => refused = Some((line, source)),
        }
    }
    let (line, source) = refused.expect("at least one window was tried");
    Err(PsiError::Refused {
        path: file.to_path_buf(),
        line,
        source,
    })
}

/// Starts the waker for `ctrl`'s loop, when it may stretch its waits.
/// The thread ends once `stop` is set (within [`STOP_CHECK`]) or the loop
/// is gone.
pub fn start(
    ctrl: &mut Controller,
    tx: Sender<Command>,
    stop: Arc<AtomicBool>,
) -> Option<JoinHandle<()>> {
    if ctrl.idle_max_epochs() <= 1 {
        return None;
    }
    let proc_fd = ctrl.proc_event_fd().and_then(|fd| {
        // SAFETY: `fd` is open (the controller owns it); dup gives this
        // thread its own descriptor of the same socket, so it stays valid
        // whatever the controller does with its own.
        let copy = unsafe { libc::dup(fd) };
        // SAFETY: a fresh descriptor no one else owns.
        (copy >= 0).then(|| unsafe { OwnedFd::from_raw_fd(copy) })
    });
    let (psi, said) = match psi_trigger(Path::new("/proc/pressure/cpu")) {
        Ok((f, said)) => (Some(f), said),
        Err(why) => (None, format!("none ({why})")),
    };
    tracing::info!(
        "idle loop: waits up to {} epochs; wakes on commands{}, CPU pressure {said}",
        ctrl.idle_max_epochs(),
        if proc_fd.is_some() {
            ", process events"
        } else {
            ""
        }
    );
    let (ack_tx, ack_rx) = mpsc::sync_channel(1);
    ctrl.set_waker(ack_tx, said);
    std::thread::Builder::new()
        .name("atoll-waker".into())
        .spawn(move || run(proc_fd, psi, &tx, &ack_rx, &stop))
        .ok()
}

fn run(
    proc_fd: Option<OwnedFd>,
    psi: Option<File>,
    tx: &Sender<Command>,
    ack: &Receiver<()>,
    stop: &AtomicBool,
) {
    let mut fds: Vec<(libc::pollfd, Wake)> = Vec::new();
    if let Some(fd) = &proc_fd {
        fds.push((
            libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            Wake::ProcEvent,
        ));
    }
    if let Some(f) = &psi {
        fds.push((
            libc::pollfd {
                fd: f.as_raw_fd(),
                events: libc::POLLPRI,
                revents: 0,
            },
            Wake::Pressure,
        ));
    }
    let mut pfds: Vec<libc::pollfd> = fds.iter().map(|(p, _)| *p).collect();
    let timeout = i32::try_from(STOP_CHECK.as_millis()).unwrap_or(1000);
    while !stop.load(Ordering::Relaxed) {
        for p in &mut pfds {
            p.revents = 0;
        }
        let n = libc::nfds_t::try_from(pfds.len()).unwrap_or(0);
        // SAFETY: `pfds` is a valid array of `n` pollfds this thread owns.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), n, timeout) };
        if rc <= 0 {
            // Nothing within the timeout, or a signal: look at `stop`.
            continue;
        }
        let mut wait_for_epoch = false;
        for (p, (_, why)) in pfds.iter_mut().zip(&fds) {
            if p.revents == 0 {
                continue;
            }
            if p.revents & (libc::POLLERR | libc::POLLNVAL | libc::POLLHUP) != 0 {
                // Gone (a trigger the kernel dropped, a closed socket):
                // poll skips a negative descriptor from now on.
                tracing::warn!("idle loop: {} no longer watched", why.as_str());
                p.fd = -1;
                continue;
            }
            if tx.send(Command::Wake(*why)).is_err() {
                return;
            }
            wait_for_epoch |= *why == Wake::ProcEvent;
        }
        if wait_for_epoch {
            loop {
                match ack.recv_timeout(STOP_CHECK) {
                    Ok(()) => break,
                    Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => {}
                    Err(_) => return,
                }
            }
        }
    }
}
