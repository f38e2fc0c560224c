//! How busy each island is: read once per epoch, used by every step.
//!
//! One read per island per epoch (CPU time, CPU pressure where the kernel
//! keeps it per group, throttled periods when a cap is in force) gives each
//! island's [`IslandLoad`] over the last epoch. Coordination watches it for
//! its overlays; the isolation model and communication-aware scheduling
//! use it to skip what an idle island cannot need: when no task of an
//! island ran and none waited, none of its units used CPU, waited for it or
//! received data it has not yet been scheduled to read, so their figures
//! are not read one by one (see [`IslandLoad::idle`]).

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_core::backend::{Monitor, StatSelect};
use atoll_core::plan::GroupPath;
use atoll_core::{CpuSet, Name};

use crate::registry::Registry;

/// Below this many CPUs used over an epoch, with no CPU pressure, an island
/// is idle.
pub const IDLE_CPUS: f64 = 0.01;

/// An island's load over the last epoch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IslandLoad {
    /// CPUs used.
    pub used: f64,
    /// CPUs it holds.
    pub cpus: usize,
    /// CPU pressure (%), where the kernel gives it.
    pub pressure: Option<f64>,
    /// Whether it was throttled at its cap.
    pub throttled: bool,
}

impl IslandLoad {
    /// Used ÷ held CPUs.
    pub fn utilization(&self) -> f64 {
        self.used / self.cpus.max(1) as f64
    }

    /// No task of the island ran (beyond [`IDLE_CPUS`]) and none waited
    /// for a CPU.
    pub fn idle(&self) -> bool {
        self.used < IDLE_CPUS && self.pressure.is_none_or(|p| p == 0.0)
    }
}

/// Counters of a group at the last sample.
#[derive(Clone, Copy, Debug)]
struct Counters {
    at: Duration,
    cpu_us: u64,
    throttled: Option<u64>,
    psi_us: Option<u64>,
}

/// An island being sampled: its group (built once) and its counters at the
/// last sample, if it was read.
#[derive(Debug)]
struct Tracked {
    group: GroupPath,
    last: Option<Counters>,
}

/// Every island's load, sampled each epoch. The maps are updated in place:
/// an idle epoch allocates nothing.
#[derive(Debug, Default)]
pub struct Loads {
    tracked: BTreeMap<Name, Tracked>,
    loads: BTreeMap<Name, IslandLoad>,
}

impl Loads {
    /// Samples every island (`throttling`: read throttled periods too, for
    /// a platform CPU cap). An island seen for the first time has no load
    /// until the next sample.
    pub fn sample(
        &mut self,
        now: Duration,
        reg: &Registry,
        mon: &dyn Monitor,
        island_cpus: &BTreeMap<Name, CpuSet>,
        throttling: bool,
    ) {
        let select = StatSelect {
            cpu_usage: true,
            cpu_throttling: throttling,
            memory: false,
            io: false,
            pressure: true,
        };
        let islands = &reg.spec().islands;
        for island in islands {
            let tracked = match self.tracked.get_mut(&island.name) {
                Some(t) => t,
                None => self
                    .tracked
                    .entry(island.name.clone())
                    .or_insert_with(|| Tracked {
                        group: GroupPath::island(&island.name),
                        last: None,
                    }),
            };
            let load = match mon.stats_of(&tracked.group, select) {
                Ok(st) => {
                    let cur = Counters {
                        at: now,
                        cpu_us: st.cpu_usage_us.unwrap_or(0),
                        throttled: st.nr_throttled,
                        psi_us: st.cpu_pressure.map(|p| p.some.total_us),
                    };
                    let cpus = island_cpus.get(&island.name).unwrap_or(&island.cpus).len();
                    tracked
                        .last
                        .replace(cur)
                        .filter(|l| now > l.at)
                        .map(|last| load_between(&last, &cur, cpus))
                }
                Err(_) => None,
            };
            match (load, self.loads.get_mut(&island.name)) {
                (Some(l), Some(old)) => *old = l,
                (Some(l), None) => {
                    self.loads.insert(island.name.clone(), l);
                }
                (None, _) => {
                    self.loads.remove(&island.name);
                }
            }
        }
        if self.tracked.len() != islands.len() {
            self.tracked
                .retain(|n, _| islands.iter().any(|i| &i.name == n));
        }
        self.loads
            .retain(|n, _| islands.iter().any(|i| &i.name == n));
    }

    /// `island`'s CPU time counter (µs) as read by the sample at `now`
    /// (none if it was not read then).
    pub fn cpu_usage_us(&self, island: &Name, now: Duration) -> Option<u64> {
        let last = self.tracked.get(island)?.last?;
        (last.at == now).then_some(last.cpu_us)
    }

    /// Each island's load over the last epoch.
    pub fn all(&self) -> &BTreeMap<Name, IslandLoad> {
        &self.loads
    }

    /// Whether `island` was idle over the last epoch (an island with no
    /// sample yet is not).
    pub fn idle(&self, island: &Name) -> bool {
        self.loads.get(island).is_some_and(IslandLoad::idle)
    }
}

/// An island's load between two samples of its counters (`last` before
/// `cur`), holding `cpus` CPUs.
fn load_between(last: &Counters, cur: &Counters, cpus: usize) -> IslandLoad {
    let window = (cur.at - last.at).as_micros() as f64;
    let used = cur.cpu_us.saturating_sub(last.cpu_us) as f64 / window;
    let pressure = match (cur.psi_us, last.psi_us) {
        (Some(a), Some(b)) => Some((a.saturating_sub(b) as f64 * 100.0 / window).min(100.0)),
        _ => None,
    };
    let throttled = matches!((cur.throttled, last.throttled), (Some(a), Some(b)) if a > b);
    IslandLoad {
        used,
        cpus,
        pressure,
        throttled,
    }
}
