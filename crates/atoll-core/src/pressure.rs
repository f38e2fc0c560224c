//! Pressure triggers: the kernel says when a group's CPU pressure rises,
//! instead of the daemon reading it every epoch.
//!
//! A [`PressureWatch`] arms one trigger per group on the group's CPU
//! pressure file (which the backend names:
//! [`Monitor::cpu_pressure_file`](crate::backend::Monitor::cpu_pressure_file)):
//! "tell me when the time at least one of its tasks waited for a CPU
//! reaches [`StallTrigger::threshold`] within a [`StallTrigger::window`]".
//! The daemon then polls the watch once an epoch, without waiting, and
//! reads the pressure of a group only after its trigger fired. A trigger
//! says nothing about pressure falling: a group that must notice a fall is
//! read every epoch, with no trigger armed.
//!
//! On Linux the watch is PSI triggers (`atoll_procfs::psi_watch`); tests use
//! a fake. Where none can be had (no PSI, the simulator, cgroup v1 groups
//! without pressure files), the daemon reads the pressure every epoch.

use std::path::PathBuf;
use std::time::Duration;

use crate::plan::GroupPath;

/// What a trigger waits for: `some` CPU stall of at least `threshold`
/// within any `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StallTrigger {
    /// Stall time within a window that fires the trigger.
    pub threshold: Duration,
    /// The window.
    pub window: Duration,
}

impl StallTrigger {
    /// A trigger that fires when the stall reaches `percent` % of `window`
    /// (at least 1 µs, at most the whole window; NaN counts as 0).
    pub fn percent_of(percent: f64, window: Duration) -> Self {
        let share = if percent.is_nan() {
            0.0
        } else {
            (percent / 100.0).clamp(0.0, 1.0)
        };
        let threshold = window
            .mul_f64(share)
            .clamp(Duration::from_micros(1), window);
        Self { threshold, window }
    }
}

/// What one [`PressureWatch::poll`] saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PressureWake {
    /// Groups whose trigger fired since the last poll (still armed).
    pub fired: Vec<GroupPath>,
    /// Groups whose pressure file went away (the group was removed): no
    /// longer armed.
    pub gone: Vec<GroupPath>,
}

impl PressureWake {
    /// Whether nothing happened.
    pub fn is_empty(&self) -> bool {
        self.fired.is_empty() && self.gone.is_empty()
    }
}

/// Why a trigger could not be armed or the watch polled.
#[derive(Debug, thiserror::Error)]
pub enum PressureWatchError {
    /// The trigger's values are refused whatever the group (the window or
    /// threshold is out of range, or not allowed without privilege): no
    /// trigger of this kind can be armed.
    #[error("PSI trigger {value:?} on {path}: refused: {reason}")]
    Refused {
        /// The pressure file.
        path: PathBuf,
        /// The trigger, as written to it.
        value: String,
        /// Why.
        reason: String,
    },
    /// This group's file could not take a trigger now (the group is gone,
    /// pressure is off for it, no descriptor left, the watch is full);
    /// another group's may, and this one later.
    #[error("PSI trigger on {path}: {reason}")]
    Group {
        /// The pressure file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The armed triggers could not be polled.
    #[error("polling {count} PSI trigger(s): {reason}")]
    Poll {
        /// How many were armed.
        count: usize,
        /// Why.
        reason: String,
    },
}

/// Waits for groups' CPU pressure to rise.
pub trait PressureWatch: Send {
    /// Arms `trigger` for `group` on its pressure file `file`, replacing
    /// any trigger the group had.
    fn arm(
        &mut self,
        group: &GroupPath,
        file: &std::path::Path,
        trigger: StallTrigger,
    ) -> Result<(), PressureWatchError>;
    /// Removes the group's trigger, if it has one.
    fn disarm(&mut self, group: &GroupPath);
    /// The groups whose trigger fired or whose file went away since the
    /// last call; does not wait.
    fn poll(&mut self) -> Result<PressureWake, PressureWatchError>;
    /// How many triggers are armed.
    fn armed(&self) -> usize;
    /// The shortest window this watch may arm (the kernel wants longer
    /// ones from an unprivileged process).
    fn min_window(&self) -> Duration;
    /// A short name for status and logs (`psi`, `fake`).
    fn kind(&self) -> &'static str;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_a_share_of_the_window() {
        let w = Duration::from_secs(2);
        let t = StallTrigger::percent_of(20.0, w);
        assert_eq!(t.threshold, Duration::from_millis(400));
        assert_eq!(t.window, w);
        assert_eq!(StallTrigger::percent_of(100.0, w).threshold, w);
        assert_eq!(StallTrigger::percent_of(250.0, w).threshold, w);
        assert_eq!(
            StallTrigger::percent_of(0.0, w).threshold,
            Duration::from_micros(1)
        );
        assert_eq!(
            StallTrigger::percent_of(f64::NAN, w).threshold,
            Duration::from_micros(1)
        );
    }

    #[test]
    fn an_empty_wake_is_empty() {
        assert!(PressureWake::default().is_empty());
        let w = PressureWake {
            fired: vec![GroupPath::root()],
            gone: Vec::new(),
        };
        assert!(!w.is_empty());
    }
}
