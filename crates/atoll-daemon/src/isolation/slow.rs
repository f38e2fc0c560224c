//! The slow half of the isolation step: memory and disk.
//!
//! CPU lending must follow load within an epoch, but memory and disk move
//! slower: memory pressure builds over seconds and the disk policy works on
//! counts that decay with a half-life of seconds. Their figures (memory in
//! use, IO bytes, memory pressure: three or four file reads per unit) are
//! therefore read and their policies stepped every [`SLOW_INTERVAL`], not
//! every epoch. Between steps the last grants stay in force: they are kept
//! here and laid over each epoch's settings.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use atoll_core::backend::{Monitor, StatSelect};
use atoll_core::isolation::{
    memory_entitlements, DiskFairness, DiskSample, MemConfig, MemGrant, MemSample, MemoryPolicy,
};
use atoll_core::plan::GroupPath;
use atoll_core::spec::{DeviceId, IsolationMode, SharePolicy};
use atoll_core::Name;
use atoll_proto::UnitIsolation;

use super::{Inputs, Isolation, MemoryLay, UnitGrant, UnitSample};
use crate::registry::Registry;

/// How often memory and disk are sampled and their policies stepped.
pub const SLOW_INTERVAL: Duration = Duration::from_secs(1);

/// The slow half's state between steps.
#[derive(Default)]
pub(crate) struct Slow {
    /// When the last slow step ran.
    at: Option<Duration>,
    memory: Option<MemoryPolicy>,
    disk: Option<DiskFairness>,
    /// IO bytes per unit group at the last slow step.
    io_last: BTreeMap<GroupPath, u64>,
    /// The memory grants of the last step, per unit.
    mem_grants: BTreeMap<Name, MemGrant>,
    /// Units held back on disk, with the devices to throttle them on.
    held: BTreeMap<Name, Vec<DeviceId>>,
    /// Islands some task of which ran since the last slow step.
    active: BTreeSet<Name>,
    /// Each unit's last memory figures, for units of islands that stayed
    /// idle since (nothing of theirs ran, so nothing they hold changed).
    last: BTreeMap<GroupPath, SlowSample>,
}

/// What the slow step reads of one unit.
#[derive(Clone, Debug)]
pub(crate) struct SlowSample {
    pub(crate) mem_used: u64,
    pub(crate) mem_pressure: Option<f64>,
    pub(crate) io_bytes: u64,
    pub(crate) io_devices: Vec<DeviceId>,
}

/// The stats the slow step reads.
pub(crate) const SLOW_STATS: StatSelect = StatSelect {
    cpu_usage: false,
    cpu_throttling: false,
    memory: true,
    io: true,
    pressure: true,
};

impl Slow {
    /// Whether the slow step would be due at `now`.
    pub(crate) fn is_due(&self, now: Duration) -> bool {
        self.at
            .is_none_or(|at| now.saturating_sub(at) >= SLOW_INTERVAL)
    }

    /// Whether the slow step is due at `now` (and if so, that it ran).
    pub(crate) fn due(&mut self, now: Duration) -> bool {
        let due = self
            .at
            .is_none_or(|at| now.saturating_sub(at) >= SLOW_INTERVAL);
        if due {
            self.at = Some(now);
        }
        due
    }

    /// Notes the islands that were not idle over the last epoch.
    pub(crate) fn note_activity(&mut self, inp: &Inputs<'_>) {
        for island in &inp.reg.spec().islands {
            if !inp.loads.idle(&island.name) {
                self.active.insert(island.name.clone());
            }
        }
    }

    /// Reads memory and IO of a unit's group; IO bytes are counted since
    /// the last slow step. A unit of an island that stayed idle since the
    /// last slow step is not read: its last figures stand, with no IO (the
    /// bytes its pages see meanwhile count at its next read).
    pub(crate) fn sample(&mut self, mon: &dyn Monitor, unit: &UnitSample) -> SlowSample {
        let group = &unit.group;
        if !self.active.contains(&unit.island) {
            if let Some(last) = self.last.get(group) {
                return SlowSample {
                    io_bytes: 0,
                    ..last.clone()
                };
            }
        }
        let st = mon.stats_of(group, SLOW_STATS).unwrap_or_default();
        let io_bytes = st.io_read_bytes.unwrap_or(0) + st.io_write_bytes.unwrap_or(0);
        let before = self.io_last.insert(group.clone(), io_bytes);
        let s = SlowSample {
            mem_used: st.memory_current.unwrap_or(0),
            mem_pressure: st.memory_pressure.map(|p| p.some.avg10),
            io_bytes: before.map_or(0, |b| io_bytes.saturating_sub(b)),
            io_devices: st.io_devices,
        };
        self.last.insert(group.clone(), s.clone());
        s
    }

    /// Steps the memory and disk policies with `samples` (each with its
    /// slow part) and keeps their grants.
    pub(crate) fn step(
        &mut self,
        inp: &Inputs<'_>,
        mode: IsolationMode,
        samples: &[(&UnitSample, SlowSample)],
        events: &mut Vec<String>,
    ) {
        let groups: BTreeSet<&GroupPath> = samples.iter().map(|(s, _)| &s.group).collect();
        self.io_last.retain(|g, _| groups.contains(g));
        self.last.retain(|g, _| groups.contains(g));
        self.active.clear();
        self.step_memory(inp, mode, samples, events);
        self.step_disk(inp, mode, samples, events);
    }

    fn step_memory(
        &mut self,
        inp: &Inputs<'_>,
        mode: IsolationMode,
        samples: &[(&UnitSample, SlowSample)],
        events: &mut Vec<String>,
    ) {
        let total = inp.topo.memory_of(&inp.topo.all_nodes());
        // Guests (units created at run time without an entitlement) are
        // left out: they have no memory of their own to lend or protect,
        // and counting them would shrink every configured unit's share.
        let samples: Vec<&(&UnitSample, SlowSample)> = samples
            .iter()
            .filter(|(s, _)| !super::is_guest(inp.reg, s.name.as_str()))
            .collect();
        if total == 0 || samples.is_empty() {
            self.mem_grants.clear();
            return;
        }
        let unit = |s: &UnitSample| inp.reg.unit(s.name.as_str()).map(|(u, _)| u);
        let maxes: Vec<Option<u64>> = samples
            .iter()
            .map(|(s, _)| unit(s).and_then(|u| u.entitlement.memory.max))
            .collect();
        let entitled = memory_entitlements(total, &maxes);
        let mem_samples: Vec<MemSample> = samples
            .iter()
            .zip(entitled)
            .map(|(&(s, slow), entitled)| MemSample {
                unit: s.name.clone(),
                entitled,
                used: slow.mem_used,
                pressure_some: slow.mem_pressure,
                sharing: unit(s)
                    .map(|u| u.entitlement.sharing.memory)
                    .unwrap_or_default(),
            })
            .collect();
        let reserve = inp.reg.spec().isolation.memory_reserve;
        let policy = self.memory.get_or_insert_with(|| {
            MemoryPolicy::new(MemConfig::default()).expect("default memory config is valid")
        });
        match policy.plan(total, reserve, mode, &mem_samples) {
            Ok(plan) => {
                events.extend(plan.events.iter().map(|e| e.to_string()));
                self.mem_grants = plan.units;
            }
            Err(e) => tracing::warn!("isolation: memory: {e}"),
        }
    }

    fn step_disk(
        &mut self,
        inp: &Inputs<'_>,
        mode: IsolationMode,
        samples: &[(&UnitSample, SlowSample)],
        events: &mut Vec<String>,
    ) {
        let spec = &inp.reg.spec().isolation;
        if self.disk.is_none() {
            match DiskFairness::new(mode, spec.io_threshold_bytes, spec.io_decay) {
                Ok(d) => self.disk = Some(d),
                Err(e) => {
                    tracing::warn!("isolation: disk: {e}");
                    return;
                }
            }
        }
        let disk_samples: Vec<DiskSample> = samples
            .iter()
            .map(|(s, slow)| {
                let u = inp.reg.unit(s.name.as_str()).map(|(u, _)| u);
                DiskSample {
                    unit: s.name.clone(),
                    bytes: slow.io_bytes,
                    weight: u.and_then(|u| u.entitlement.io.weight).unwrap_or(100),
                    sharing: u.map(|u| u.entitlement.sharing.io).unwrap_or_default(),
                }
            })
            .collect();
        let Some(disk) = self.disk.as_mut() else {
            return;
        };
        disk.set_mode(mode);
        match disk.update(inp.now, &disk_samples) {
            Ok(ev) => events.extend(ev.iter().map(|e| e.to_string())),
            Err(e) => {
                tracing::warn!("isolation: disk: {e}");
                return;
            }
        }
        let held: BTreeSet<Name> = disk.held();
        // A held unit stays throttled on every device it used while held.
        let mut next: BTreeMap<Name, Vec<DeviceId>> = BTreeMap::new();
        for (s, slow) in samples {
            if !held.contains(&s.name) {
                continue;
            }
            let mut devices = self.held.remove(&s.name).unwrap_or_default();
            for d in &slow.io_devices {
                if !devices.contains(d) {
                    devices.push(*d);
                }
            }
            next.insert(s.name.clone(), devices);
        }
        self.held = next;
    }
}

impl Isolation {
    /// Lays the kept memory and disk grants into this epoch's grants.
    pub(super) fn lay_slow(
        &self,
        reg: &Registry,
        samples: &[UnitSample],
        grants: &mut BTreeMap<GroupPath, UnitGrant>,
        accounts: &mut BTreeMap<String, UnitIsolation>,
    ) {
        let slow = &self.slow;
        let isolate = reg.spec().isolation.mode == IsolationMode::Isolate;
        for s in samples {
            let lends = isolate
                && reg
                    .unit(s.name.as_str())
                    .is_some_and(|(u, _)| u.entitlement.sharing.memory == SharePolicy::Lend);
            if let (Some(grant), Some(g)) = (slow.mem_grants.get(&s.name), grants.get_mut(&s.group))
            {
                g.memory = Some(MemoryLay {
                    limit: grant.limit,
                    protected: grant.protected,
                    drop_max: lends && grant.limit.is_some(),
                });
            }
            if let (Some(devices), Some(g)) = (slow.held.get(&s.name), grants.get_mut(&s.group)) {
                g.held = devices.clone();
            }
            if let Some(a) = accounts.get_mut(s.name.as_str()) {
                if let Some(grant) = slow.mem_grants.get(&s.name) {
                    a.memory_limit = grant.limit;
                    a.memory_lent = grant.lent;
                    a.memory_borrowed = grant.borrowed;
                    a.memory_revocations = grant.revocations;
                }
                a.io_held = slow.held.contains_key(&s.name);
            }
        }
    }
}
