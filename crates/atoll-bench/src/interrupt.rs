//! Ctrl-C handling for the benchmarks.
//!
//! [`install`] turns SIGINT, SIGTERM and SIGHUP into a flag; every wait in
//! the benchmarks goes through [`check`] or [`sleep`], which return
//! [`BenchError::Interrupted`] once it is set. The error unwinds through the
//! drop guards, which stop daemons, kill workers and remove cgroups. A second
//! signal is not special: cleanup always runs to the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::BenchError;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catches SIGINT, SIGTERM and SIGHUP for the rest of the process.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// `Err(Interrupted)` once a signal arrived.
pub fn check() -> Result<(), BenchError> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        Err(BenchError::Interrupted)
    } else {
        Ok(())
    }
}

/// Sleeps `d` in short steps, returning early with `Err(Interrupted)`.
pub fn sleep(d: Duration) -> Result<(), BenchError> {
    let t0 = Instant::now();
    loop {
        check()?;
        let left = d.saturating_sub(t0.elapsed());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}
