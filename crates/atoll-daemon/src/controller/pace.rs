//! The loop's pace (see [`crate::pace`]): whether any component needs the
//! next tick, and what the driver and the waker thread tell the pace.

use super::Controller;

impl Controller {
    /// Whether no step has anything to act on until an input arrives
    /// (see [`crate::pace`]): each component says so of itself, from what
    /// its last step saw.
    pub fn quiescent(&self) -> bool {
        self.needs_ticks().is_none()
    }

    /// The first component that needs the next tick, if any.
    pub fn needs_ticks(&self) -> Option<&'static str> {
        let rt_quiet = self.caps.is_some_and(|c| c.rt_groups)
            || crate::rt_guard::rt_units(&self.reg, &self.coord).is_empty();
        let net_quiet = self
            .net
            .as_ref()
            .is_none_or(crate::netisland::NetIslands::quiescent);
        [
            (self.unsaved.is_empty(), "replies"),
            (
                !self.compose.pending() && self.reg.generation() == self.flushed_generation,
                "composer",
            ),
            (self.adoption.quiescent(), "adoption"),
            (rt_quiet, "rt_guard"),
            (self.coord.quiescent(), "coordination"),
            (net_quiet, "network"),
            (!self.powercap.is_held(), "power_cap"),
            (self.slo.idle(&self.reg), "slo"),
            (self.iso.quiescent(), "isolation"),
            (self.comm.quiescent(&self.reg), "comm"),
            (self.apps.quiescent(), "apps"),
        ]
        .into_iter()
        .find_map(|(quiet, who)| (!quiet).then_some(who))
    }

    /// After an epoch: how many epochs the loop waits before the next
    /// (1 unless the loop may stretch and [`quiescent`](Self::quiescent)).
    pub fn after_epoch(&mut self) -> u32 {
        let held_by = if self.pace.max() > 1 {
            self.needs_ticks()
        } else {
            None
        };
        let now = self.now();
        self.pace.after_epoch(held_by, now)
    }

    /// An input arrived: returns whether it cut a longer wait short (the
    /// next epoch is then due one epoch after the last).
    pub fn wake(&mut self, why: crate::pace::Wake) -> bool {
        self.pace.wake(why)
    }

    /// Lets the loop wait up to `max` epochs while it is quiescent (1, the
    /// default: never).
    pub fn set_idle_max_epochs(&mut self, max: u32) {
        self.pace.set_max(max);
    }

    /// The longest wait between epochs, in epochs.
    pub fn idle_max_epochs(&self) -> u32 {
        self.pace.max()
    }

    /// The thread that wakes the loop on process events and CPU pressure
    /// (see [`crate::run`]), and whether pressure is among them.
    pub fn set_waker(&mut self, ack: std::sync::mpsc::SyncSender<()>, pressure: String) {
        self.pace.set_waker(ack, pressure);
    }

    /// The process event source's descriptor, if the kernel reports them.
    pub fn proc_event_fd(&self) -> Option<i32> {
        self.adoption.wake_fd()
    }
}
