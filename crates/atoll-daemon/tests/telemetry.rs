//! What the controller measures about itself: every epoch times each of its
//! steps once (checked with a stopwatch clock that moves 100 µs a read), and
//! decisions are counted by action and reason.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use atoll_core::clock::{Clock, ManualClock};
use atoll_sim::SimPlatform;

use crate::common::sim::{controller, epochs, topo8};

/// Moves 100 µs every time it is read.
#[derive(Default)]
struct Ticking(AtomicU64);

impl Clock for Ticking {
    fn now(&self) -> Duration {
        Duration::from_micros(self.0.fetch_add(100, Ordering::SeqCst) + 100)
    }
}

const CONFIG: &str = r#"
[host]
cpus = "0"

[island.work]
cpus = "1-3"

[unit.jobs]
island = "work"
cpus = 1
adopt = [{ comm = "job" }]
"#;

#[test]
fn every_epoch_times_each_step_once_and_decisions_are_counted() {
    let sim = SimPlatform::new(topo8(), "atoll-telemetry", ManualClock::new());
    let spec = atoll_config::parse(CONFIG, "test.toml", &topo8()).unwrap();
    let job = sim.spawn("job", 1000, None);
    let mut c = controller(&sim, spec, topo8());
    c.set_stopwatch(Arc::new(Ticking::default()));
    c.set_self_reader(std::path::Path::new("/proc"));
    c.start().unwrap();
    assert!(c.telemetry().epochs.is_none(), "no epoch yet");

    epochs(&sim, &mut c, 5);
    let t = c.telemetry();
    let e = t.epochs.expect("epochs measured");
    // Nine steps of one read each: 900 µs an epoch.
    assert_eq!(e.epoch.count(), 5);
    assert_eq!(e.epoch.sum(), Duration::from_micros(5 * 900));
    let steps: Vec<(&str, u64, Duration)> = e
        .steps()
        .map(|(s, h)| (s.name(), h.count(), h.sum()))
        .collect();
    assert_eq!(steps.len(), 9);
    for (name, count, sum) in steps {
        assert_eq!((count, sum), (5, Duration::from_micros(500)), "{name}");
    }

    // The job was moved by its rule; the groups were created for the config.
    assert!(
        t.decisions.contains(&("move_process", "rule", 1)),
        "{:?}",
        t.decisions
    );
    assert!(
        t.decisions
            .iter()
            .any(|(a, r, n)| (*a, *r) == ("apply_group", "config") && *n >= 3),
        "{:?}",
        t.decisions
    );
    let recorded: u64 = t.decisions.iter().map(|(_, _, n)| n).sum();
    assert_eq!(Ok(recorded), u64::try_from(c.decisions().len()));
    assert!(t.process.is_some_and(|p| p.open_fds > 0));
    let _ = job;
}
