//! What an epoch costs: its duration and each step's, measured on the loop
//! thread with the stopwatch clock (the daemon's is monotonic; tests and the
//! simulator may inject their own).

use std::time::Duration;

use super::histogram::Histogram;

/// The steps of an epoch, in the order they run (see `Controller::epoch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// New processes matched and moved, exited ones forgotten.
    Adoption,
    /// Realtime units' budgets enforced.
    RtGuard,
    /// Every island's counters read.
    Load,
    /// Overlays and the platform cap.
    Coordination,
    /// Lending and taking back CPUs, memory, disk.
    Isolation,
    /// Communication-aware boosts.
    Comm,
    /// Reconfigurable applications.
    Apps,
    /// Empty runtime units swept, touched groups written, the moves that
    /// waited, drift repair.
    Compose,
    /// The state file saved.
    State,
}

impl Step {
    /// Every step, in order.
    pub const ALL: [Step; 9] = [
        Step::Adoption,
        Step::RtGuard,
        Step::Load,
        Step::Coordination,
        Step::Isolation,
        Step::Comm,
        Step::Apps,
        Step::Compose,
        Step::State,
    ];

    /// Its label value.
    pub fn name(self) -> &'static str {
        match self {
            Step::Adoption => "adoption",
            Step::RtGuard => "rt_guard",
            Step::Load => "load",
            Step::Coordination => "coordination",
            Step::Isolation => "isolation",
            Step::Comm => "comm",
            Step::Apps => "apps",
            Step::Compose => "compose",
            Step::State => "state",
        }
    }
}

/// Times one epoch: each [`lap`](Stopwatch::lap) charges the time since the
/// previous one to a step. It holds no clock: the [`Meter`](super::Meter)
/// that owns it reads its own, so starting an epoch costs no reference
/// count.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stopwatch {
    start: Duration,
    last: Duration,
    laps: [Duration; Step::ALL.len()],
}

impl Stopwatch {
    /// Starts at `now`.
    pub fn start(now: Duration) -> Self {
        Self {
            start: now,
            last: now,
            laps: [Duration::ZERO; Step::ALL.len()],
        }
    }

    /// Charges the time from the last lap (or the start) to `now` to `step`.
    pub fn lap(&mut self, now: Duration, step: Step) {
        self.laps[step as usize] += now.saturating_sub(self.last);
        self.last = now;
    }
}

/// Durations of every epoch and of each of its steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochStats {
    /// Whole epochs.
    pub epoch: Histogram,
    /// Each step, in [`Step::ALL`] order.
    pub steps: [Histogram; Step::ALL.len()],
}

impl EpochStats {
    /// Records a finished epoch: its length up to the last lap, and every
    /// step (one that did not run counts as zero, so every step's count is
    /// the number of epochs).
    pub fn record(&mut self, w: &Stopwatch) {
        self.epoch.observe(w.last.saturating_sub(w.start));
        for (h, d) in self.steps.iter_mut().zip(w.laps) {
            h.observe(d);
        }
    }

    /// Each step with its histogram.
    pub fn steps(&self) -> impl Iterator<Item = (Step, &Histogram)> {
        Step::ALL.into_iter().zip(&self.steps)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::Arc;

    use atoll_core::clock::Clock;

    use super::*;

    /// A clock that moves by the next of `steps` (µs) each time it is read.
    struct Scripted {
        steps: Vec<u64>,
        reads: AtomicUsize,
        now_us: AtomicU64,
    }

    impl Clock for Scripted {
        fn now(&self) -> Duration {
            let i = self.reads.fetch_add(1, Ordering::SeqCst);
            let by = self.steps.get(i).copied().unwrap_or(0);
            Duration::from_micros(self.now_us.fetch_add(by, Ordering::SeqCst) + by)
        }
    }

    #[test]
    fn laps_are_charged_to_their_steps_and_the_epoch_is_their_sum() {
        // Start, then adoption 20 µs, load 3000 µs, adoption again 5 µs,
        // state 300 µs.
        let clock = Arc::new(Scripted {
            steps: vec![0, 20, 3000, 5, 300],
            reads: AtomicUsize::new(0),
            now_us: AtomicU64::new(1_000_000),
        });
        let mut w = Stopwatch::start(clock.now());
        w.lap(clock.now(), Step::Adoption);
        w.lap(clock.now(), Step::Load);
        w.lap(clock.now(), Step::Adoption);
        w.lap(clock.now(), Step::State);
        let mut stats = EpochStats::default();
        stats.record(&w);
        assert_eq!(stats.epoch.count(), 1);
        assert_eq!(stats.epoch.sum(), Duration::from_micros(3325));
        let sums: Vec<(&str, u64)> = stats
            .steps()
            .map(|(s, h)| (s.name(), u64::try_from(h.sum().as_micros()).unwrap()))
            .collect();
        assert_eq!(
            sums,
            [
                ("adoption", 25),
                ("rt_guard", 0),
                ("load", 3000),
                ("coordination", 0),
                ("isolation", 0),
                ("comm", 0),
                ("apps", 0),
                ("compose", 0),
                ("state", 300),
            ]
        );
        assert!(stats.steps().all(|(_, h)| h.count() == 1));
        // The epoch's 3325 µs fall in le="5000", not below.
        let le = |h: &Histogram, bound: u64| {
            h.cumulative()
                .find(|(b, _)| *b == Some(bound))
                .map(|(_, n)| n)
                .unwrap()
        };
        assert_eq!(le(&stats.epoch, 2500), 0);
        assert_eq!(le(&stats.epoch, 5000), 1);
    }
}
