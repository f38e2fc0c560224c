//! The incremental allocation against a full one, on random churn.

use std::time::Duration;

use atoll_core::clock::ManualClock;
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings, RtBudget, TaskPolicy};
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::CpuSet;

use crate::state::SimState;
use crate::workload::Rng;

fn machine() -> SimState {
    let topo = Topology::synthetic(SyntheticShape {
        packages: 1,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: 8,
        threads_per_core: 1,
        memory_per_node: 1 << 30,
    });
    SimState::new(topo, "atoll", ManualClock::new())
}

fn apply(s: &mut SimState, path: &str, f: impl FnOnce(&mut GroupSettings)) {
    let mut g = GroupSettings::default();
    f(&mut g);
    s.apply(&GroupPath::from_relative(path), &g).unwrap();
}

/// A group's usage, fair usage, uncapped demand and stall.
type GroupFigures = (f64, f64, f64, bool);

/// Class rates and group figures now.
fn snapshot(s: &SimState) -> (Vec<f64>, Vec<GroupFigures>) {
    let rates = s.model.classes.iter().map(|c| c.rate).collect();
    let groups = s
        .groups
        .values()
        .map(|g| {
            (
                g.cpu.seg.rate,
                g.cpu.seg.fair,
                g.cpu.seg.uncapped,
                g.cpu.seg.stalled,
            )
        })
        .collect();
    (rates, groups)
}

#[test]
fn incremental_allocations_match_full_ones() {
    let mut s = machine();
    apply(&mut s, "", |g| {
        g.rt_budget = Some(RtBudget {
            runtime_us: 500_000,
            period_us: 1_000_000,
        })
    });
    apply(&mut s, "a", |g| {
        g.cpus = Some(CpuSet::parse("0-3").unwrap());
        g.cpu_weight = Some(300);
    });
    apply(&mut s, "a/x", |g| {
        g.cpu_max = Some(CpuMax {
            quota_us: 150_000,
            period_us: 100_000,
        })
    });
    apply(&mut s, "a/y", |g| g.cpu_idle = true);
    apply(&mut s, "b", |g| {
        g.cpus = Some(CpuSet::parse("2-7").unwrap());
        g.rt_budget = Some(RtBudget {
            runtime_us: 400_000,
            period_us: 1_000_000,
        });
    });
    apply(&mut s, "b/z", |_| {});
    apply(&mut s, "b/w", |g| {
        g.cpus = Some(CpuSet::parse("6-7").unwrap());
        g.rt_budget = Some(RtBudget {
            runtime_us: 300_000,
            period_us: 1_000_000,
        });
    });
    let mut tids = Vec::new();
    for (k, place) in ["a/x", "a/y", "b/z", "b/w", "", "a/x", "b/z"]
        .iter()
        .enumerate()
    {
        let pid = s.spawn(&format!("p{k}"), 1000, None);
        if !place.is_empty() {
            s.move_process(pid, &GroupPath::from_relative(place))
                .unwrap();
        }
        tids.push(pid);
        for _ in 0..3 {
            tids.push(s.spawn_thread(pid).unwrap());
        }
    }
    s.set_policy(tids[1], TaskPolicy::Idle).unwrap();
    s.set_policy(tids[13], TaskPolicy::Fifo(5)).unwrap();
    s.set_policy(tids[20], TaskPolicy::Batch).unwrap();
    let mut rng = Rng::new(9);
    let mut incremental = 0;
    for step in 0..400 {
        for _ in 0..1 + rng.below(3) {
            let t = tids[usize::try_from(rng.below(tids.len() as u64)).unwrap()];
            let on = !s.threads[&t].acct.runnable;
            s.set_thread_runnable(t, on);
        }
        let full_before = s.model.full;
        s.clock.advance(Duration::from_micros(1 + rng.below(500)));
        s.sync();
        if !full_before {
            incremental += 1;
        }
        let inc = snapshot(&s);
        s.model.dirty = true;
        s.model.full = true;
        s.refresh();
        let full = snapshot(&s);
        for (i, (a, b)) in inc.0.iter().zip(&full.0).enumerate() {
            assert!((a - b).abs() < 1e-9, "step {step}, class {i}: {a} vs {b}");
        }
        for (i, (a, b)) in inc.1.iter().zip(&full.1).enumerate() {
            let close = (a.0 - b.0).abs() < 1e-9
                && (a.1 - b.1).abs() < 1e-9
                && (a.2 - b.2).abs() < 1e-9
                && a.3 == b.3;
            assert!(close, "step {step}, group {i}: {a:?} vs {b:?}");
        }
    }
    assert!(incremental > 100, "{incremental}");
}
