//! The control loop's pace: quiescent epochs.
//!
//! After every epoch the loop asks each component whether it needs the
//! next tick ([`crate::controller::Controller`] gathers the answers; each
//! component keeps its own reason). When none does, nothing any step would
//! act on can change without an input, and the wait before the next epoch
//! doubles, up to `max` epochs. Any input cuts the wait: an API command, a
//! process event, a CPU pressure trigger ([`Wake`]); so does an epoch after
//! a long wait that finds work (`busy`). Then the loop runs at one epoch
//! again, and the doubling starts over once it is quiescent again.
//!
//! With `max` 1 (the default; tests and the simulator) the loop never
//! stretches and nothing here changes what it does.

use std::collections::BTreeMap;
use std::sync::mpsc::SyncSender;
use std::time::Duration;

use atoll_proto::LoopPace;

/// The default longest wait of the real daemon, in epochs: 240 ms at the
/// default 30 ms epoch. Chosen so that what an idle loop costs falls by
/// about 8× while a change nothing signals (a unit's load rising with no
/// pressure, a drifted knob) is seen at most 7 epochs later than before.
pub const DEFAULT_MAX_EPOCHS: u32 = 8;

/// The longest wait `--idle-max-epochs` accepts.
pub const MAX_EPOCHS_LIMIT: u32 = 64;

/// What cut a wait short.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wake {
    /// An API request or a reload.
    Command,
    /// The proc connector has events.
    ProcEvent,
    /// The CPU pressure (PSI) trigger fired.
    Pressure,
    /// An epoch after a long wait found work.
    Busy,
}

impl Wake {
    /// The name in the status and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Wake::Command => "command",
            Wake::ProcEvent => "proc_event",
            Wake::Pressure => "pressure",
            Wake::Busy => "busy",
        }
    }
}

/// The loop's pace (see the module docs).
#[derive(Debug)]
pub struct Pace {
    max: u32,
    /// The wait before the next epoch, in epochs.
    stretch: u32,
    quiet_since: Option<Duration>,
    stretched_epochs: u64,
    wakes: BTreeMap<Wake, u64>,
    /// Told after an epoch that followed a wake from the waker thread, so
    /// it polls its descriptors again (see [`crate::run`]).
    ack: Option<SyncSender<()>>,
    ack_owed: bool,
    pressure_wake: Option<String>,
    /// The component that needed the last epoch's next tick.
    held_by: Option<&'static str>,
}

impl Default for Pace {
    fn default() -> Self {
        Self {
            max: 1,
            stretch: 1,
            quiet_since: None,
            stretched_epochs: 0,
            wakes: BTreeMap::new(),
            ack: None,
            ack_owed: false,
            pressure_wake: None,
            held_by: None,
        }
    }
}

impl Pace {
    /// Waits stretch up to `max` epochs (at least 1: never).
    pub fn set_max(&mut self, max: u32) {
        self.max = max.max(1);
        self.stretch = self.stretch.min(self.max);
    }

    /// The longest wait, in epochs.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// The waker thread to tell after each epoch that followed its wake,
    /// and whether a pressure trigger feeds it (or why not).
    pub fn set_waker(&mut self, ack: SyncSender<()>, pressure_wake: String) {
        self.ack = Some(ack);
        self.pressure_wake = Some(pressure_wake);
    }

    /// The wait before the next epoch, in epochs.
    pub fn stretch(&self) -> u32 {
        self.stretch
    }

    /// After an epoch at `now`: the component that needs the next tick
    /// (`None`: every one is quiescent). Returns the wait before the next
    /// epoch, in epochs.
    pub fn after_epoch(&mut self, held_by: Option<&'static str>, now: Duration) -> u32 {
        let quiescent = held_by.is_none();
        self.held_by = held_by;
        if self.stretch > 1 {
            self.stretched_epochs += 1;
        }
        if self.ack_owed {
            self.ack_owed = false;
            if let Some(a) = &self.ack {
                let _ = a.try_send(());
            }
        }
        if quiescent && self.max > 1 {
            self.quiet_since.get_or_insert(now);
            self.stretch = (self.stretch * 2).min(self.max);
        } else {
            if self.stretch > 1 {
                *self.wakes.entry(Wake::Busy).or_default() += 1;
            }
            self.stretch = 1;
            self.quiet_since = None;
        }
        self.stretch
    }

    /// An input arrived: the next epoch comes one epoch after the last.
    /// Returns whether that cut a longer wait short.
    pub fn wake(&mut self, why: Wake) -> bool {
        if why == Wake::ProcEvent {
            self.ack_owed = true;
        }
        self.quiet_since = None;
        if self.stretch == 1 {
            return false;
        }
        *self.wakes.entry(why).or_default() += 1;
        self.stretch = 1;
        true
    }

    /// For the status: `epoch` is the loop's period, `started` when the
    /// daemon started.
    pub fn status(&self, epoch: Duration, started: Duration) -> LoopPace {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        LoopPace {
            interval_ms: ms(epoch.saturating_mul(self.stretch)),
            max_epochs: self.max,
            quiescent_since_ms: self.quiet_since.map(|t| ms(t.saturating_sub(started))),
            stretched_epochs: self.stretched_epochs,
            wakes: self
                .wakes
                .iter()
                .map(|(w, n)| (w.as_str().to_string(), *n))
                .collect(),
            pressure_wake: self.pressure_wake.clone(),
            held_by: self.held_by.map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_millis(30);

    fn quiet_for(p: &mut Pace, n: u32) -> u32 {
        let mut s = 0;
        for i in 0..n {
            s = p.after_epoch(None, T * i);
        }
        s
    }

    #[test]
    fn a_quiescent_loop_doubles_its_wait_up_to_the_bound() {
        let mut p = Pace::default();
        p.set_max(8);
        let waits: Vec<u32> = (0..5).map(|i| p.after_epoch(None, T * i)).collect();
        assert_eq!(waits, vec![2, 4, 8, 8, 8]);
        assert_eq!(p.status(T, Duration::ZERO).interval_ms, 240);
        assert_eq!(p.status(T, Duration::ZERO).quiescent_since_ms, Some(0));
        assert_eq!(p.status(T, Duration::ZERO).stretched_epochs, 4);
    }

    #[test]
    fn without_a_bound_the_loop_never_stretches() {
        let mut p = Pace::default();
        assert_eq!(quiet_for(&mut p, 10), 1);
        assert!(!p.wake(Wake::Command));
        assert!(p.status(T, Duration::ZERO).wakes.is_empty());
    }

    #[test]
    fn every_wake_source_brings_the_wait_back_to_one_epoch() {
        for why in [Wake::Command, Wake::ProcEvent, Wake::Pressure] {
            let mut p = Pace::default();
            p.set_max(8);
            assert_eq!(quiet_for(&mut p, 4), 8);
            assert!(p.wake(why), "{why:?}");
            assert_eq!(p.stretch(), 1, "{why:?}");
            let st = p.status(T, Duration::ZERO);
            assert_eq!(st.interval_ms, 30);
            assert_eq!(st.quiescent_since_ms, None);
            assert_eq!(st.wakes.get(why.as_str()), Some(&1));
            // Quiescent again: the doubling starts over.
            assert_eq!(p.after_epoch(None, T * 10), 2);
        }
    }

    #[test]
    fn a_component_that_needs_ticks_brings_the_wait_back_at_once() {
        let mut p = Pace::default();
        p.set_max(8);
        assert_eq!(quiet_for(&mut p, 3), 8);
        assert_eq!(p.after_epoch(Some("isolation"), T * 20), 1);
        assert_eq!(p.status(T, Duration::ZERO).wakes.get("busy"), Some(&1));
        // Busy while already at one epoch is no wake.
        assert_eq!(p.after_epoch(Some("isolation"), T * 21), 1);
        assert_eq!(p.status(T, Duration::ZERO).wakes.get("busy"), Some(&1));
    }

    #[test]
    fn the_waker_is_told_after_the_epoch_that_followed_its_wake() {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let mut p = Pace::default();
        p.set_max(8);
        p.set_waker(tx, "off".into());
        p.after_epoch(None, T);
        assert!(rx.try_recv().is_err(), "no wake, no ack");
        p.wake(Wake::ProcEvent);
        assert!(rx.try_recv().is_err(), "not before the epoch");
        p.after_epoch(None, T * 2);
        assert!(rx.try_recv().is_ok());
        p.wake(Wake::Command);
        p.after_epoch(None, T * 3);
        assert!(
            rx.try_recv().is_err(),
            "commands do not come from the waker"
        );
    }
}
