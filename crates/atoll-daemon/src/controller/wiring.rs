//! What the daemon's setup plugs into a [`Controller`] after
//! [`Controller::new`]: the kernel interfaces a real machine has (process
//! events, socket and pressure readers, network islands, cpufreq, RAPL)
//! and the drift-repair pace. Without them the controller falls back to
//! what needs nothing (scans, averages, warnings), as the simulator does.

use std::time::Duration;

use atoll_core::comm::NetMonitor;

use super::Controller;
use crate::coord::RecvQueues;

impl Controller {
    /// Manages the spec's network islands with `net` (taken over at start,
    /// given back at teardown). Without it, configured network islands are
    /// only named in a warning.
    pub fn set_network(&mut self, net: crate::netisland::NetIslands) {
        self.net = Some(net);
    }

    /// Writes the islands' frequency policies with `freq` (at start and
    /// on reload; given back at teardown). Without it, configured
    /// policies are only named in a warning.
    pub fn set_frequencies(&mut self, freq: crate::frequency::Frequencies) {
        self.freq = Some(freq);
    }

    /// Every group is checked for drift once in `every`, or more slowly on
    /// a large platform (see [`super::REPAIR_EVERY`], [`super::REPAIR_RATE`]).
    pub fn set_repair_interval(&mut self, every: Duration) {
        self.repair_every = every.max(self.epoch_len());
    }

    /// Sets the reader of units' sockets; `source` names it in the status
    /// (`sock_diag`, `procfs`, ...).
    pub fn set_net_monitor(&mut self, monitor: Box<dyn NetMonitor>, source: &str) {
        self.comm.set_monitor(monitor, source);
    }

    /// New processes come from the kernel's process events from now on
    /// (see [`crate::adopt`]); without, `/proc` is scanned every epoch.
    pub fn set_process_events(&mut self, source: Box<dyn atoll_core::events::ProcEventSource>) {
        self.adoption.use_events(source);
    }

    /// Samples RAPL every epoch and reports it and cpufreq in the status.
    pub fn set_power(&mut self, power: crate::power::Power) {
        self.power = Some(power);
    }

    /// `/proc` is scanned every epoch, because `why` (for the status).
    pub fn set_process_scan(&mut self, why: impl Into<String>) {
        self.adoption.use_scan(why);
    }

    /// Sets the reader of socket receive queues (for `react_recv_queue`).
    pub fn set_recv_queues(&mut self, reader: Box<dyn RecvQueues>) {
        self.coord.set_recv_queues(reader);
    }

    /// Units whose CPU pressure an overlay watches (`react_pressure`) wait
    /// on triggers of `watch` while they are quiet, instead of being read
    /// every epoch (see [`crate::coord::pressure`]).
    pub fn set_pressure_watch(&mut self, watch: Box<dyn atoll_core::pressure::PressureWatch>) {
        self.coord.set_pressure_watch(watch);
    }

    /// The CPU pressure of watched units is read every epoch, because
    /// `why` (for the status).
    pub fn set_pressure_averages(&mut self, why: impl Into<String>) {
        self.coord.set_pressure_averages(why);
    }
}
