//! The driver of `atoll daemon`: signals, the API and metrics threads, and
//! the epoch loop.
//!
//! The main thread runs the control loop: it serves commands until the
//! next epoch is due, then runs the epoch, which always starts on time: a
//! command is served only while no epoch is due, so however many arrive,
//! they get the time between epochs and no more. After every epoch and
//! every command it publishes what readers may see ([`crate::publish`]):
//! `status`, `why`, `overlays`, `apps` and `app_poll` are answered by the
//! API threads from that, without the loop.
//!
//! Every signal that would end the process ([`SHUTDOWN_SIGNALS`]: SIGTERM,
//! SIGINT, SIGHUP, SIGQUIT, SIGUSR1, ...) is blocked in every thread and
//! taken by one thread with `sigwait`, which turns SIGHUP into
//! [`Command::Reload`] (read the configuration again) and every other into
//! [`Command::Shutdown`], so teardown always happens on the control-loop
//! thread.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::command::Command;
use crate::controller::{Controller, ControllerError, Flow};
use crate::pace::Wake;
use crate::publish::Board;

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Setting up the signal mask failed.
    #[error("blocking signals: {0}")]
    Signals(std::io::Error),
    /// The API socket could not be bound.
    #[error(transparent)]
    Api(#[from] crate::api::ApiError),
    /// The metrics address could not be bound.
    #[error("binding metrics on {addr}")]
    Metrics {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The controller failed.
    #[error(transparent)]
    Controller(#[from] ControllerError),
}

/// Where the daemon listens.
#[derive(Clone, Debug)]
pub struct Endpoints {
    /// The API socket.
    pub socket: PathBuf,
    /// The metrics address, if any.
    pub metrics: Option<SocketAddr>,
}

/// The signals whose default action ends the process and that another
/// process may send: each is taken by the signal thread and turned into a
/// teardown (SIGHUP: a reload), so none ends the daemon without one (SIGKILL cannot be
/// caught: every change is in the state file before it is acknowledged, so
/// a restart recovers).
pub const SHUTDOWN_SIGNALS: [libc::c_int; 12] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGPWR,
    libc::SIGXCPU,
    libc::SIGXFSZ,
];

/// Blocks the shutdown signals in the calling thread and every thread it
/// spawns after. Call it before any thread is started (the simulator's
/// clock, say): a thread started before would take a signal and die of it.
pub fn block_shutdown_signals() -> Result<(), RunError> {
    let set = signal_set();
    // SAFETY: `set` is a valid, initialized sigset_t; a null old-set pointer
    // is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(RunError::Signals(std::io::Error::from_raw_os_error(rc)));
    }
    Ok(())
}

/// Blocks the shutdown signals (see [`block_shutdown_signals`]) and starts a
/// thread that turns them into commands.
pub fn shutdown_on_signals(tx: Sender<Command>) -> Result<JoinHandle<()>, RunError> {
    block_shutdown_signals()?;
    let set = signal_set();
    std::thread::Builder::new()
        .name("atoll-signals".into())
        .spawn(move || loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: `set` is valid and `sig` is a valid out-pointer.
            let rc = unsafe { libc::sigwait(&set, &mut sig) };
            if rc == 0 {
                let cmd = if sig == libc::SIGHUP {
                    tracing::info!("signal {sig} (SIGHUP): reloading the configuration");
                    Command::Reload
                } else {
                    tracing::info!("signal {sig}: shutting down");
                    Command::Shutdown
                };
                if tx.send(cmd).is_err() {
                    return;
                }
            }
        })
        .map_err(RunError::Signals)
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initializes the set we own; sigaddset with valid
    // signal numbers on an initialized set cannot fail.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SHUTDOWN_SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Runs the daemon until a stop request or a signal, then tears down.
/// `ctrl` must not have been started yet.
pub fn run(mut ctrl: Controller, endpoints: &Endpoints) -> Result<(), RunError> {
    let (tx, rx) = mpsc::channel();
    shutdown_on_signals(tx.clone())?;
    let listener = crate::api::bind(&endpoints.socket)?;
    let metrics = match endpoints.metrics {
        Some(addr) => {
            Some(TcpListener::bind(addr).map_err(|source| RunError::Metrics { addr, source })?)
        }
        None => None,
    };
    ctrl.start()?;
    crate::notify::tell("READY=1");
    let board = Board::new(ctrl.decisions().reader());
    publish(&ctrl, Some(&board));
    let stop = Arc::new(AtomicBool::new(false));
    let api = crate::api::serve(listener, tx.clone(), stop.clone(), board.clone());
    // Where to knock so the accept loops see `stop` at once.
    let metrics_knock = metrics
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map(|mut a| {
            if a.ip().is_unspecified() {
                a.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            a
        });
    let metrics = metrics.map(|l| {
        tracing::info!(
            "metrics on http://{}/metrics",
            endpoints.metrics.unwrap_or(([0, 0, 0, 0], 0).into())
        );
        crate::metrics::serve_metrics(l, tx.clone(), stop.clone(), board.clone())
    });
    let waker = crate::wake::start(&mut ctrl, tx.clone(), stop.clone());
    tracing::info!("atoll running; API on {}", endpoints.socket.display());
    drop(tx);
    drive(&mut ctrl, &rx, Some(&board));
    // Answer whatever is still queued so clients do not hang.
    while let Ok(cmd) = rx.try_recv() {
        ctrl.handle(cmd);
    }
    // Requests that arrive from now on are answered `shutting_down` at once.
    drop(rx);
    crate::notify::tell("STOPPING=1");
    let result = ctrl.teardown();
    ctrl.finish_stop(&result);
    // Only now does the socket go away, so `atoll stop` can wait for it.
    stop.store(true, Ordering::SeqCst);
    // The accept loops wait up to seconds while idle: a connection wakes
    // them to see `stop`.
    let _ = std::os::unix::net::UnixStream::connect(&endpoints.socket);
    if let Some(a) = metrics_knock {
        let _ = std::net::TcpStream::connect_timeout(&a, Duration::from_millis(200));
    }
    let _ = api.join();
    if let Some(m) = metrics {
        let _ = m.join();
    }
    if let Some(w) = waker {
        let _ = w.join();
    }
    result.map_err(Into::into)
}

/// The epoch loop: an epoch when due, commands in the time between; what
/// readers may see is published on `board` after each. Commands that are
/// queued together are served together, and the changes they made are
/// saved once before any of them is answered ([`Controller::commit`]).
///
/// After each epoch the controller says how many epochs to wait (more than
/// one only while it is quiescent and may stretch, see [`crate::pace`]);
/// a command or a [`Command::Wake`] that cuts such a wait short makes the
/// next epoch due one epoch after the last.
pub fn drive(ctrl: &mut Controller, rx: &Receiver<Command>, board: Option<&Board>) {
    let mut last = ctrl.now();
    let mut next = last + ctrl.epoch_len();
    let mut batch = 0usize;
    loop {
        // Read each time: a reload may change it.
        let epoch = ctrl.epoch_len();
        let now = ctrl.now();
        if now >= next {
            ctrl.epoch();
            ctrl.commit();
            batch = 0;
            publish(ctrl, board);
            let wait = epoch.saturating_mul(ctrl.after_epoch());
            last = next;
            next += wait;
            if next <= now {
                // We fell behind (a slow backend): skip, don't burst.
                last = now;
                next = now + wait;
            }
            // Epochs that overrun must not starve the API: a few queued
            // commands are served after each, even when the next is due.
            for _ in 0..AFTER_EPOCH {
                match rx.try_recv() {
                    Ok(cmd) => {
                        woken(ctrl, &cmd, &mut next, last + epoch);
                        if serve(ctrl, cmd, board) == Flow::Stop {
                            ctrl.commit();
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            ctrl.commit();
            continue;
        }
        let cmd = if ctrl.uncommitted() && batch < BATCH {
            match rx.try_recv() {
                Ok(cmd) => cmd,
                Err(TryRecvError::Empty) => {
                    ctrl.commit();
                    batch = 0;
                    continue;
                }
                Err(TryRecvError::Disconnected) => {
                    ctrl.commit();
                    return;
                }
            }
        } else {
            if ctrl.uncommitted() {
                ctrl.commit();
                batch = 0;
            }
            match rx.recv_timeout(next - now) {
                Ok(cmd) => cmd,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        };
        woken(ctrl, &cmd, &mut next, last + epoch);
        if matches!(cmd, Command::Wake(_)) {
            continue;
        }
        batch += 1;
        if serve(ctrl, cmd, board) == Flow::Stop {
            ctrl.commit();
            return;
        }
    }
}

/// What `cmd` says to the loop's pace: a request, a reload or a
/// [`Command::Wake`] brings the next epoch to `soon` (one epoch after the
/// last) if the loop was waiting longer.
fn woken(ctrl: &mut Controller, cmd: &Command, next: &mut Duration, soon: Duration) {
    let why = match cmd {
        Command::Api { .. } | Command::Reload => Wake::Command,
        Command::Wake(w) => *w,
        Command::Snapshot { .. } | Command::Refresh | Command::Shutdown => return,
    };
    if ctrl.wake(why) {
        *next = (*next).min(soon);
    }
}

/// Commands served after an epoch even when the next one is already due.
pub const AFTER_EPOCH: usize = 4;

/// Most commands whose replies wait for one save of the state file.
pub const BATCH: usize = 64;

/// Handles one command and publishes what changed.
fn serve(ctrl: &mut Controller, cmd: Command, board: Option<&Board>) -> Flow {
    let (flow, changed) = ctrl.take(cmd);
    if changed {
        // Marked before the reply goes out (at the commit): a status built
        // before the change is old for whoever reads after the reply.
        if let Some(b) = board {
            b.handled_request();
        }
    }
    publish(ctrl, board);
    flow
}

/// Publishes what readers may see, with a new status if one was asked for.
fn publish(ctrl: &Controller, board: Option<&Board>) {
    if let Some(b) = board {
        let status = b.take_wanted().then(|| (ctrl.status(), ctrl.telemetry()));
        b.publish(ctrl.view(), status);
    }
}
