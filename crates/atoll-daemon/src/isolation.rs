//! The isolation model (seed 004) in the control loop.
//!
//! Every epoch in `quota` and `isolate` mode:
//!
//! 1. each unit's group is sampled: CPU time and IO bytes since the last
//!    epoch, memory in use, CPU and memory pressure;
//! 2. the pure policies of `atoll_core::isolation` decide: per island a
//!    [`CpuLender`] (home CPUs, lending of idle ones, revocation), one
//!    [`MemoryPolicy`] for the machine, one [`DiskFairness`];
//! 3. their grants become an *overlay* on the unit's planned settings:
//!    `cpuset.cpus` = what the unit may run on; a unit running on borrowed
//!    CPUs is `cpu.idle` so an owner's task preempts it at wakeup (the
//!    mechanism measured in `docs/isolation.md`), and loses the CPUs at the
//!    next epoch; `cpu.max` for capped pool members; `memory.high` and
//!    `memory.low` for memory; `io.max` at a trickle on the devices it uses
//!    while a unit is held back on disk;
//! 4. changed overlays are applied and every lend, revocation and hold is a
//!    decision with its reason.
//!
//! In `smp` mode there is no overlay: the plan's settings stand.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use atoll_core::decision::{Action, Reason};
use atoll_core::isolation::{
    home_cpus, memory_entitlements, CpuLendConfig, CpuLender, CpuSample, DiskFairness, DiskSample,
    MemConfig, MemSample, MemoryPolicy,
};
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings};
use atoll_core::spec::{IoLimit, IsolationMode};
use atoll_core::Name;
use atoll_proto::UnitIsolation;

use crate::controller::Controller;
use crate::reconcile::knob_diff;

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
    io_bytes: u64,
}

/// An island's units with their CPU entitlements, and its lender (rebuilt
/// when the units change).
type IslandLender = (Vec<(Name, Option<f64>)>, CpuLender);

/// The isolation state the controller keeps between epochs.
#[derive(Default)]
pub struct Isolation {
    lenders: BTreeMap<Name, IslandLender>,
    memory: Option<MemoryPolicy>,
    disk: Option<DiskFairness>,
    last: BTreeMap<GroupPath, Last>,
    /// Settings in force per unit group, replacing the plan's.
    pub(crate) overlay: BTreeMap<GroupPath, GroupSettings>,
    /// What each unit has, lends and borrows, for status.
    pub(crate) accounts: BTreeMap<String, UnitIsolation>,
}

struct UnitSample {
    name: Name,
    island: Name,
    group: GroupPath,
    usage_cpus: f64,
    cpu_pressure: Option<f64>,
    mem_used: u64,
    mem_pressure: Option<f64>,
    io_bytes: u64,
    io_devices: Vec<atoll_core::spec::DeviceId>,
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
        let samples = self.sample_units(now);
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
        self.isolate_memory(mode, &samples, &mut overlay, &mut accounts, &mut events);
        self.isolate_disk(
            now,
            mode,
            &samples,
            &mut overlay,
            &mut accounts,
            &mut events,
        );
        let why = Reason::Isolation {
            detail: if events.is_empty() {
                format!("mode {mode:?}").to_lowercase()
            } else {
                events.join("; ")
            },
        };
        for (path, settings) in overlay {
            let before = self
                .iso
                .overlay
                .get(&path)
                .or_else(|| self.applied.get(&path));
            if before == Some(&settings) {
                continue;
            }
            let knobs = knob_diff(before, &settings);
            match self.env.backend.apply(&path, &settings) {
                Ok(_) => {
                    self.decide(
                        Action::ApplyGroup {
                            path: path.clone(),
                            knobs,
                        },
                        why.clone(),
                    );
                    self.applied.insert(path.clone(), settings.clone());
                    self.iso.overlay.insert(path, settings);
                }
                Err(e) => tracing::warn!("isolation: applying {path}: {e}"),
            }
        }
        self.iso.accounts = accounts;
    }

    fn sample_units(&mut self, now: Duration) -> Vec<UnitSample> {
        let units: Vec<(Name, Name)> = self
            .reg
            .units()
            .map(|(u, _)| (u.name.clone(), u.island.clone()))
            .collect();
        let mut out = Vec::new();
        for (name, island) in units {
            let group = GroupPath::unit(&island, &name);
            let st = self.env.backend.stats(&group).unwrap_or_default();
            let cpu_us = st.cpu_usage_us.unwrap_or(0);
            let io_bytes = st.io_read_bytes.unwrap_or(0) + st.io_write_bytes.unwrap_or(0);
            let last = self.iso.last.insert(
                group.clone(),
                Last {
                    at: now,
                    cpu_us,
                    io_bytes,
                },
            );
            let (usage_cpus, io_delta) = match last {
                Some(l) if now > l.at => (
                    cpu_us.saturating_sub(l.cpu_us) as f64 / (now - l.at).as_micros() as f64,
                    io_bytes.saturating_sub(l.io_bytes),
                ),
                _ => (0.0, 0),
            };
            out.push(UnitSample {
                name,
                island,
                group,
                usage_cpus,
                cpu_pressure: st.cpu_pressure.map(|p| p.some.avg10),
                mem_used: st.memory_current.unwrap_or(0),
                mem_pressure: st.memory_pressure.map(|p| p.some.avg10),
                io_bytes: io_delta,
                io_devices: st.io_devices,
            });
        }
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
            let stale = self
                .iso
                .lenders
                .get(&island.name)
                .is_none_or(|(m, l)| m != &members || l.mode() != mode);
            if stale {
                let layout = match home_cpus(&island.cpus, &self.opts.topology, &members) {
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
                            .insert(island.name.clone(), (members.clone(), l));
                    }
                    Err(e) => {
                        tracing::warn!("isolation: island {}: {e}", island.name);
                        continue;
                    }
                }
            }
            let cpu_samples: Vec<CpuSample> = samples
                .iter()
                .filter(|s| s.island == island.name)
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
            let Some((_, lender)) = self.iso.lenders.get_mut(&island.name) else {
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

    fn isolate_memory(
        &mut self,
        mode: IsolationMode,
        samples: &[UnitSample],
        overlay: &mut BTreeMap<GroupPath, GroupSettings>,
        accounts: &mut BTreeMap<String, UnitIsolation>,
        events: &mut Vec<String>,
    ) {
        let spec = self.reg.spec();
        let total = self
            .opts
            .topology
            .memory_of(&self.opts.topology.all_nodes());
        if total == 0 || samples.is_empty() {
            return;
        }
        let maxes: Vec<Option<u64>> = samples
            .iter()
            .map(|s| {
                self.reg
                    .unit(s.name.as_str())
                    .and_then(|(u, _)| u.entitlement.memory.max)
            })
            .collect();
        let entitled = memory_entitlements(total, &maxes);
        let mem_samples: Vec<MemSample> = samples
            .iter()
            .zip(entitled)
            .map(|(s, entitled)| MemSample {
                unit: s.name.clone(),
                entitled,
                used: s.mem_used,
                pressure_some: s.mem_pressure,
                sharing: self
                    .reg
                    .unit(s.name.as_str())
                    .map(|(u, _)| u.entitlement.sharing.memory)
                    .unwrap_or_default(),
            })
            .collect();
        let reserve = spec.isolation.memory_reserve;
        let policy = self.iso.memory.get_or_insert_with(|| {
            MemoryPolicy::new(MemConfig::default()).expect("default memory config is valid")
        });
        let plan = match policy.plan(total, reserve, mode, &mem_samples) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("isolation: memory: {e}");
                return;
            }
        };
        events.extend(plan.events.iter().map(|e| e.to_string()));
        for s in samples {
            let Some(grant) = plan.units.get(&s.name) else {
                continue;
            };
            if let Some(settings) = overlay.get_mut(&s.group) {
                // memory.high throttles and reclaims instead of killing.
                settings.memory.high = grant.limit.or(settings.memory.high);
                settings.memory.low = Some(grant.protected)
                    .filter(|p| *p > 0)
                    .or(settings.memory.low);
                if let (Some(low), Some(high)) = (settings.memory.low, settings.memory.high) {
                    settings.memory.low = Some(low.min(high));
                }
            }
            if let Some(a) = accounts.get_mut(s.name.as_str()) {
                a.memory_limit = grant.limit;
                a.memory_lent = grant.lent;
                a.memory_borrowed = grant.borrowed;
                a.memory_revocations = grant.revocations;
            }
        }
    }

    fn isolate_disk(
        &mut self,
        now: Duration,
        mode: IsolationMode,
        samples: &[UnitSample],
        overlay: &mut BTreeMap<GroupPath, GroupSettings>,
        accounts: &mut BTreeMap<String, UnitIsolation>,
        events: &mut Vec<String>,
    ) {
        let spec = self.reg.spec().isolation.clone();
        if self.iso.disk.is_none() {
            match DiskFairness::new(mode, spec.io_threshold_bytes, spec.io_decay) {
                Ok(d) => self.iso.disk = Some(d),
                Err(e) => {
                    tracing::warn!("isolation: disk: {e}");
                    return;
                }
            }
        }
        let disk_samples: Vec<DiskSample> = samples
            .iter()
            .map(|s| {
                let u = self.reg.unit(s.name.as_str()).map(|(u, _)| u);
                DiskSample {
                    unit: s.name.clone(),
                    bytes: s.io_bytes,
                    weight: u.and_then(|u| u.entitlement.io.weight).unwrap_or(100),
                    sharing: u.map(|u| u.entitlement.sharing.io).unwrap_or_default(),
                }
            })
            .collect();
        let Some(disk) = self.iso.disk.as_mut() else {
            return;
        };
        disk.set_mode(mode);
        match disk.update(now, &disk_samples) {
            Ok(ev) => events.extend(ev.iter().map(|e| e.to_string())),
            Err(e) => {
                tracing::warn!("isolation: disk: {e}");
                return;
            }
        }
        let held: BTreeSet<Name> = disk.held();
        for s in samples {
            let is_held = held.contains(&s.name);
            if let Some(a) = accounts.get_mut(s.name.as_str()) {
                a.io_held = is_held;
            }
            if !is_held {
                continue;
            }
            if let Some(settings) = overlay.get_mut(&s.group) {
                for dev in &s.io_devices {
                    if settings.io_max.iter().any(|l| &l.device == dev) {
                        continue;
                    }
                    settings.io_max.push(IoLimit {
                        device: *dev,
                        rbps: Some(HELD_IO_BPS),
                        wbps: Some(HELD_IO_BPS),
                        riops: None,
                        wiops: None,
                    });
                }
            }
        }
    }
}
