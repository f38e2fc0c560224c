//! Time as an injected dependency.
//!
//! The control loop, coordinators and policies never read the system clock:
//! they are handed a [`Clock`]. The daemon passes a monotonic clock; tests and
//! the simulator pass a [`ManualClock`] that they advance themselves.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A monotonic clock: time since an arbitrary origin fixed at creation.
pub trait Clock: Send + Sync {
    /// Time elapsed since the clock's origin.
    fn now(&self) -> Duration;
}

/// A clock that moves only when told to. Cloning shares the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.nanos.fetch_add(
            u64::try_from(by.as_nanos()).unwrap_or(u64::MAX),
            Ordering::SeqCst,
        );
    }

    /// Sets the time to `to` if that is later than now (time never runs back).
    pub fn set(&self, to: Duration) {
        let to = u64::try_from(to.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_max(to, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_forward_and_is_shared() {
        let c = ManualClock::new();
        let c2 = c.clone();
        c.advance(Duration::from_millis(30));
        assert_eq!(c2.now(), Duration::from_millis(30));
        c.set(Duration::from_millis(10));
        assert_eq!(c.now(), Duration::from_millis(30));
        c.set(Duration::from_secs(1));
        assert_eq!(c2.now(), Duration::from_secs(1));
    }
}
