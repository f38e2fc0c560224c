//! The isolation model (seed 004) in the control loop.
//!
//! Every epoch in `quota` and `isolate` mode:
//!
//! 1. each unit's group is sampled: in `isolate` mode, CPU time since the
//!    last epoch and CPU pressure (see [`crate::cpu_wait`] for cgroup v1;
//!    `quota` grants do not depend on use, so nothing is read); every
//!    [`SLOW_INTERVAL`] also memory in use, memory pressure and IO bytes
//!    (see `slow`);
//! 2. the pure policies of `atoll_core::isolation` decide: per island a
//!    [`CpuLender`] (home CPUs, lending of idle ones, revocation), one
//!    `MemoryPolicy` for the machine, one `DiskFairness`;
//! 3. their grants become an *overlay* on the unit's planned settings:
//!    `cpuset.cpus` = what the unit may run on; a unit running on borrowed
//!    CPUs is `cpu.idle` so an owner's task preempts it at wakeup (the
//!    mechanism measured in `docs/isolation.md`), and loses the CPUs at the
//!    next epoch; `cpu.max` for capped pool members; `memory.high` and
//!    `memory.low` for memory; `io.max` at a trickle on the devices it uses
//!    while a unit is held back on disk;
//! 4. changed overlays are applied (with coordination's knobs over them,
//!    see [`crate::coord`]) and every lend, revocation and hold is a
//!    decision with its reason.
//!
//! An island's home CPUs are laid out over the CPUs it holds now, so the
//! lender starts again when coordination moves CPUs between islands.
//! In `smp` mode there is no overlay: the plan's settings stand.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use atoll_core::backend::StatSelect;
use atoll_core::decision::{Action, Reason};
use atoll_core::isolation::{home_cpus, CpuLendConfig, CpuLender, CpuSample};
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings};
use atoll_core::spec::IsolationMode;
use atoll_core::{CpuSet, Name};
use atoll_proto::UnitIsolation;

use crate::controller::Controller;
use crate::cpu_wait::WaitTracker;
use crate::reconcile::knob_diff;

mod slow;
pub use slow::SLOW_INTERVAL;

/// Bytes per second a unit held back on disk may still move (the paper
/// denies it the disk; a trickle keeps the kernel from stalling writeback
/// of pages it shares).
pub const HELD_IO_BPS: u64 = 1 << 20;

/// The lending constants the daemon uses: borrowed CPUs run at idle
/// priority, so a CPU its owner uses less than half of is lent (the owner
/// preempts the borrower at wakeup; revocation follows at the next epoch).
pub fn lend_config() -> CpuLendConfig {
    CpuLendConfig {
        headroom: -0.5,
        ..CpuLendConfig::default()
    }
}

/// Last sample of a unit's counters.
#[derive(Clone, Copy, Debug)]
struct Last {
    at: Duration,
    cpu_us: u64,
}

/// How far back CPU pressure is measured. One 30 ms epoch of PSI is noisy
/// (a single wakeup delay is a few % of it) and made borrowers flap in the
/// pmake scenario; this is `return_after` of the lending rules.
pub const PRESSURE_WINDOW: Duration = Duration::from_millis(150);

/// CPU pressure (%) over the last [`PRESSURE_WINDOW`] from the `some total`
/// counter (µs) sampled now and kept in `hist`; `None` until there is an
/// earlier sample.
fn psi_over_window(
    hist: &mut VecDeque<(Duration, u64)>,
    now: Duration,
    total_us: u64,
) -> Option<f64> {
    if hist.back().is_some_and(|(at, _)| *at >= now) {
        hist.clear();
    }
    hist.push_back((now, total_us));
    // Keep one sample at least a window old as the anchor.
    while hist.len() > 2 && now.saturating_sub(hist[1].0) >= PRESSURE_WINDOW {
        hist.pop_front();
    }
    let (at, before) = *hist.front()?;
    (now > at).then(|| {
        (total_us.saturating_sub(before) as f64 * 100.0 / (now - at).as_micros() as f64).min(100.0)
    })
}

/// An island's units with their CPU entitlements, the CPUs it held, and its
/// lender (rebuilt when the units or the CPUs change).
type IslandLender = (Vec<(Name, Option<f64>)>, CpuSet, CpuLender);

/// The isolation state the controller keeps between epochs.
#[derive(Default)]
pub struct Isolation {
    lenders: BTreeMap<Name, IslandLender>,
    slow: slow::Slow,
    last: BTreeMap<GroupPath, Last>,
    /// CPU pressure from thread waits, where the kernel has none per group.
    waits: WaitTracker,
    /// Recent `cpu.pressure` totals per unit group, for [`PRESSURE_WINDOW`].
    psi: BTreeMap<GroupPath, VecDeque<(Duration, u64)>>,
    /// Settings in force per unit group, replacing the plan's (without
    /// coordination's knobs, which every writer merges over them).
    pub(crate) overlay: BTreeMap<GroupPath, GroupSettings>,
    /// What each unit has, lends and borrows, for status.
    pub(crate) accounts: BTreeMap<String, UnitIsolation>,
}

pub(crate) struct UnitSample {
    pub(crate) name: Name,
    pub(crate) island: Name,
    pub(crate) group: GroupPath,
    pub(crate) usage_cpus: f64,
    pub(crate) cpu_pressure: Option<f64>,
}

impl Controller {
    /// One isolation step; see the module docs.
    pub(crate) fn isolate(&mut self) {
        let mode = self.reg.spec().isolation.mode;
        if mode == IsolationMode::Smp {
            if !self.iso.overlay.is_empty() {
                self.iso = Isolation::default();
                let _ = self.reconcile(Reason::Isolation {
                    detail: "mode smp: back to the planned settings".into(),
                });
            }
            return;
        }
        let now = self.now();
        let samples = self.sample_units(now, mode);
        let mut overlay: BTreeMap<GroupPath, GroupSettings> = BTreeMap::new();
        let mut events: Vec<String> = Vec::new();
        let mut accounts: BTreeMap<String, UnitIsolation> = BTreeMap::new();
        let plan = self.reg.plan();
        for s in &samples {
            if let Some(g) = plan.get(&s.group) {
                overlay.insert(s.group.clone(), g.settings.clone());
                accounts.insert(s.name.to_string(), UnitIsolation::default());
            }
        }
        self.isolate_cpu(
            now,
            mode,
            &samples,
            &mut overlay,
            &mut accounts,
            &mut events,
        );
        if self.iso.slow.due(now) {
            let slow: Vec<_> = samples
                .iter()
                .map(|s| (s, self.sample_slow(&s.group)))
                .collect();
            self.step_slow(now, mode, &slow, &mut events);
        }
        self.apply_slow(&samples, &mut overlay, &mut accounts);
        let why = Reason::Isolation {
            detail: if events.is_empty() {
                format!("mode {mode:?}").to_lowercase()
            } else {
                events.join("; ")
            },
        };
        for (path, settings) in overlay {
            let full = match self.reg.unit_at(&path) {
                Some(u) => match self.reg.spec().island(&u.island) {
                    Some(island) => self.coord.merge_unit(island, &u.name, settings.clone()),
                    None => settings.clone(),
                },
                None => settings.clone(),
            };
            let before = self.applied.get(&path);
            if before == Some(&full) {
                self.iso.overlay.insert(path, settings);
                continue;
            }
            let knobs = knob_diff(before, &full);
            match self.env.backend.apply(&path, &full) {
                Ok(_) => {
                    self.decide(
                        Action::ApplyGroup {
                            path: path.clone(),
                            knobs,
                        },
                        why.clone(),
                    );
                    self.applied.insert(path.clone(), full);
                    self.iso.overlay.insert(path, settings);
                }
                Err(e) => tracing::warn!("isolation: applying {path}: {e}"),
            }
        }
        self.iso.accounts = accounts;
    }

    /// Puts every unit group back on its planned settings, for teardown: no
    /// borrowed CPUs, no idle priority, no disk holds.
    pub(crate) fn lift_isolation(&mut self) {
        let overlay = std::mem::take(&mut self.iso.overlay);
        let plan = self.reg.plan();
        for (path, settings) in overlay {
            let Some(g) = plan.get(&path) else {
                continue;
            };
            if g.settings == settings {
                continue;
            }
            match self.env.backend.apply(&path, &g.settings) {
                Ok(_) => {
                    let knobs = knob_diff(Some(&settings), &g.settings);
                    self.decide(
                        Action::ApplyGroup {
                            path: path.clone(),
                            knobs,
                        },
                        Reason::Teardown,
                    );
                    self.applied.insert(path, g.settings.clone());
                }
                Err(e) => tracing::warn!("teardown: lifting isolation of {path}: {e}"),
            }
        }
    }

    fn sample_units(&mut self, now: Duration, mode: IsolationMode) -> Vec<UnitSample> {
        let units: Vec<(Name, Name)> = self
            .reg
            .units()
            .map(|(u, _)| (u.name.clone(), u.island.clone()))
            .collect();
        let mut out = Vec::new();
        for (name, island) in units {
            let group = GroupPath::unit(&island, &name);
            if mode != IsolationMode::Isolate {
                // Quota grants do not depend on use: nothing to read.
                out.push(UnitSample {
                    name,
                    island,
                    group,
                    usage_cpus: 0.0,
                    cpu_pressure: None,
                });
                continue;
            }
            let st = self
                .env
                .backend
                .stats_of(&group, StatSelect::CPU)
                .unwrap_or_default();
            let cpu_us = st.cpu_usage_us.unwrap_or(0);
            let last = self
                .iso
                .last
                .insert(group.clone(), Last { at: now, cpu_us });
            let window = last.filter(|l| now > l.at);
            let usage_cpus = window.map_or(0.0, |l| {
                cpu_us.saturating_sub(l.cpu_us) as f64 / (now - l.at).as_micros() as f64
            });
            // CPU pressure over the last PRESSURE_WINDOW: the kernel's
            // per-group total where it has one (avg10 lags by seconds),
            // else thread waits.
            let cpu_pressure = match st.cpu_pressure {
                Some(p) => Some(
                    psi_over_window(
                        self.iso.psi.entry(group.clone()).or_default(),
                        now,
                        p.some.total_us,
                    )
                    .unwrap_or(p.some.avg10),
                ),
                None if mode == IsolationMode::Isolate => {
                    let allowed = self
                        .iso
                        .accounts
                        .get(name.as_str())
                        .map_or(0, |a| a.allowed_cpus.len());
                    self.iso.waits.pressure(
                        &group,
                        now,
                        usage_cpus,
                        allowed,
                        &*self.env.backend,
                        &*self.env.procs,
                    )
                }
                None => None,
            };
            out.push(UnitSample {
                name,
                island,
                group,
                usage_cpus,
                cpu_pressure,
            });
        }
        let sampled: BTreeSet<&GroupPath> = out.iter().map(|s| &s.group).collect();
        self.iso.last.retain(|g, _| sampled.contains(g));
        self.iso.waits.retain(|g| sampled.contains(g));
        self.iso.psi.retain(|g, _| sampled.contains(g));
        out
    }

    fn isolate_cpu(
        &mut self,
        now: Duration,
        mode: IsolationMode,
        samples: &[UnitSample],
        overlay: &mut BTreeMap<GroupPath, GroupSettings>,
        accounts: &mut BTreeMap<String, UnitIsolation>,
        events: &mut Vec<String>,
    ) {
        let islands: Vec<_> = self.reg.spec().islands.clone();
        for island in islands {
            let members: Vec<(Name, Option<f64>)> = self
                .reg
                .units()
                .filter(|(u, _)| u.island == island.name)
                .map(|(u, _)| (u.name.clone(), u.entitlement.cpus))
                .collect();
            if members.is_empty() {
                self.iso.lenders.remove(&island.name);
                continue;
            }
            let cpus = self.island_cpus(&island);
            let stale = self
                .iso
                .lenders
                .get(&island.name)
                .is_none_or(|(m, c, l)| m != &members || c != &cpus || l.mode() != mode);
            if stale {
                let layout = match home_cpus(&cpus, &self.opts.topology, &members) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!("isolation: island {}: {e}", island.name);
                        continue;
                    }
                };
                match CpuLender::new(layout, &self.opts.topology, mode, lend_config()) {
                    Ok(l) => {
                        self.iso
                            .lenders
                            .insert(island.name.clone(), (members.clone(), cpus, l));
                    }
                    Err(e) => {
                        tracing::warn!("isolation: island {}: {e}", island.name);
                        continue;
                    }
                }
            }
            let cpu_samples: Vec<CpuSample> = samples
                .iter()
                .filter(|s| mode == IsolationMode::Isolate && s.island == island.name)
                .filter_map(|s| {
                    let u = self.reg.unit(s.name.as_str())?.0;
                    Some(CpuSample {
                        unit: s.name.clone(),
                        usage_cpus: s.usage_cpus,
                        pressure_some: s.cpu_pressure,
                        sharing: u.entitlement.sharing.cpu,
                        cap_cpus: u.entitlement.cpu_cap,
                    })
                })
                .collect();
            let Some((_, _, lender)) = self.iso.lenders.get_mut(&island.name) else {
                continue;
            };
            let plan = match lender.step(now, &cpu_samples) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!("isolation: island {}: {e}", island.name);
                    continue;
                }
            };
            events.extend(plan.events.iter().map(|e| e.to_string()));
            for (unit, grant) in &plan.units {
                let group = GroupPath::unit(&island.name, unit);
                let Some(settings) = overlay.get_mut(&group) else {
                    continue;
                };
                settings.cpus = Some(grant.allowed());
                // Borrowed CPUs are run at idle priority: the owner's tasks
                // preempt them at once, before the next epoch revokes them.
                settings.cpu_idle = settings.cpu_idle || !grant.borrowed.is_empty();
                if let Some(cap) = grant.cap {
                    settings.cpu_max = Some(CpuMax {
                        quota_us: ((cap * 100_000.0).round() as u64).max(1000),
                        period_us: 100_000,
                    });
                }
                if let Some(a) = accounts.get_mut(unit.as_str()) {
                    a.home_cpus = grant.home.clone();
                    a.allowed_cpus = grant.allowed();
                    a.lent_cpus = grant.lent.clone();
                    a.borrowed_cpus = grant.borrowed.clone();
                    a.cpu_revocations = grant.revocations;
                    a.cpu_lost = grant.lost;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn pressure_is_measured_over_the_window_not_the_epoch() {
        let mut h = VecDeque::new();
        assert_eq!(psi_over_window(&mut h, ms(0), 0), None);
        // 30 ms epochs; tasks wait 30 ms in the first epoch only.
        let p1 = psi_over_window(&mut h, ms(30), 30_000).unwrap();
        assert!((p1 - 100.0).abs() < 1e-9, "{p1}");
        let total = 30_000;
        let mut last = 0.0;
        for t in (60..=150).step_by(30) {
            last = psi_over_window(&mut h, ms(t), total).unwrap();
        }
        // Over the 150 ms window the one busy epoch is 20 %, not 0.
        assert!((last - 20.0).abs() < 1e-9, "{last}");
        // Once it has left the window, the pressure is 0.
        let p = psi_over_window(&mut h, ms(210), total).unwrap();
        assert_eq!(p, 0.0);
        // A clock that did not move starts over.
        assert_eq!(psi_over_window(&mut h, ms(210), total), None);
    }
}
