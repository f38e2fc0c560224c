//! Coordination between islands (inTune, seeds 000 and 001) in the control
//! loop.
//!
//! The pure rules live in `atoll_core::coord`: a coordinator per island, the
//! [`PlatformManager`] owning them. Here the controller
//!
//! - builds the manager from the platform description (islands with their
//!   arbitration policy, units with their configured knobs) and registers
//!   the `[overlay.NAME]` overlays when it starts;
//! - answers the API: `overlays`, `coordinate` (one message; who may send what is in `api`)
//!   and `report` (an application reports its property's value: the
//!   *proactive* policy, see [`policy`]);
//! - every epoch (`Controller::coordinate`): ends expired boosts (`tick`);
//!   then, if any overlay is registered, samples each island's CPU use from
//!   its group (`observe`), rebalances the platform CPU cap when there is
//!   one, and runs the overlays' *reactive* policies (CPU pressure, island
//!   utilization, socket receive queues), submitted together and arbitrated
//!   as one round;
//! - turns every effect into its layer's state (`apply`) and touches the
//!   groups it changed, with `Reason::Coordination`; the composer writes
//!   them. RT boosts change task priorities instead: those are handed to the
//!   loop ([`Coordination::take_priorities`]).
//!
//! # What coordination keeps, and how it composes
//!
//! Effects become the `coordination` layer (see [`crate::compose`]): per
//! unit the knobs an overlay changed away from their configured value
//! (weight, cap, RT budget, `memory.high`, a boost), per island its CPUs
//! (after borrows and releases) and its share of the platform CPU cap. It
//! is laid over the plan and the isolation layer. So where the isolation
//! model and coordination set the same knob (`cpu.max`, `memory.high`)
//! **coordination wins** while it holds a value other than the configured
//! one; a knob tuned back to its configured value (or an overlay that
//! leaves) hands the knob back to isolation. Isolation's other knobs (the
//! units' cpusets, `cpu.idle`, `memory.low`/`max`, `io.max`) are untouched,
//! and its CPU lender lays an island's home CPUs out again when
//! coordination changes the island's CPUs; until it does, the composer
//! keeps every unit's CPUs within its island's.
//!
//! After a restart the daemon registers the configured overlays and the
//! run-time ones (`overlay add`, kept in the registry and the state file)
//! anew, then puts back the coordination state the state file holds (loans,
//! tuned knobs, backoff, escalation counts), checked against the kernel
//! ([`restore`]); a reload keeps it for what is still configured. Units
//! added at run time are learned by the manager as they come (`units`), so
//! overlays may span them.

mod api;
mod apply;
pub mod policy;
pub mod pressure;
mod react;
pub mod recv;
pub(crate) mod restore;
mod stages;
mod units;

use std::collections::BTreeMap;
use std::time::Duration;

pub use api::CoordApiError;
pub use apply::boost_policy;
use atoll_core::backend::Monitor;
use atoll_core::coord::{CoordConfig, CoordError, Message, NackReason, PlatformManager, UnitKnobs};
use atoll_core::decision::Reason;
use atoll_core::plan::{CpuMax, GroupSettings, RtBudget, RT_PERIOD_US};
use atoll_core::process::ProcessTable;
use atoll_core::spec::{IslandSpec, PlatformSpec, ReactPolicy, SchedPolicy};
use atoll_core::topology::Topology;
use atoll_core::{CpuSet, Name};
use atoll_proto::coord::OverlayOrigin;
pub use recv::{ProcRecvQueues, RecvQueues};

use crate::compose::{At, Composer, Layer};
use crate::cpu_wait::WaitTracker;
use crate::load::IslandLoad;
use crate::registry::Registry;

/// An overlay as the daemon tracks it, beside the manager's record.
#[derive(Clone, Debug)]
pub(crate) struct OverlayState {
    pub origin: OverlayOrigin,
    /// Its reactive policy (config overlays only).
    pub react: ReactPolicy,
    /// The last value reported, and whether the property held then.
    pub value: Option<f64>,
    pub holds: Option<bool>,
    pub acked: u64,
    pub nacked: u64,
    /// Reports asking for more so far: units tied for the most pressure
    /// take turns by it.
    pub report_turn: usize,
    /// How far its proactive policy has escalated (tune, then borrow).
    pub stage: policy::Stage,
}

impl OverlayState {
    fn new(origin: OverlayOrigin, react: ReactPolicy) -> Self {
        Self {
            origin,
            react,
            value: None,
            holds: None,
            acked: 0,
            nacked: 0,
            report_turn: 0,
            stage: policy::Stage::Tune,
        }
    }
}

/// What coordination changed on one unit, over the plan's settings. `None`
/// leaves the knob to the plan (and the isolation model).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct UnitCoord {
    /// Steady `cpu.weight`.
    pub weight: Option<u32>,
    /// `cpu.max` in CPUs; `Some(None)` lifts the cap.
    pub cap: Option<Option<f64>>,
    /// RT runtime per island period, µs.
    pub rt_runtime_us: Option<u64>,
    /// `memory.high`; `Some(None)` lifts it.
    pub memory_high: Option<Option<u64>>,
    /// `cpu.weight` while a trigger's boost lasts.
    pub boost_weight: Option<u32>,
    /// RT priority of its tasks while a boost lasts.
    pub boost_rt: Option<u8>,
}

/// Counters of a group at the last sample.
#[derive(Clone, Copy, Debug)]
struct Counters {
    at: Duration,
    cpu_us: u64,
    psi_us: Option<u64>,
}

/// What coordination reads besides its own state.
pub struct Inputs<'a> {
    /// Now.
    pub now: Duration,
    /// Units, islands and overlays of the platform.
    pub reg: &'a Registry,
    /// The groups' figures and processes.
    pub mon: &'a dyn Monitor,
    /// Processes (owners, thread waits).
    pub procs: &'a dyn ProcessTable,
    /// Each island's load over the last epoch.
    pub loads: &'a BTreeMap<Name, IslandLoad>,
}

/// An RT boost to carry out: the tasks of a realtime unit get `priority`
/// (`None`: their own again).
#[derive(Clone, Debug, PartialEq)]
pub struct RtBoost {
    /// The unit's island.
    pub island: Name,
    /// The unit.
    pub unit: Name,
    /// The boost's priority, or `None` to end it.
    pub priority: Option<u8>,
    /// Why.
    pub why: Reason,
}

/// The coordination state between epochs.
pub struct Coordination {
    /// The platform manager, or why coordination is off.
    pub(crate) manager: Result<PlatformManager, CoordError>,
    pub(crate) overlays: BTreeMap<Name, OverlayState>,
    /// Unit → what coordination changed on it.
    pub(crate) units: BTreeMap<Name, UnitCoord>,
    /// Unit → (island, configured knobs): what tunes return to.
    pub(crate) base: BTreeMap<Name, (Name, UnitKnobs)>,
    /// Island → the CPUs it holds now, as written.
    pub(crate) island_cpus: BTreeMap<Name, CpuSet>,
    /// Island → its share of the platform CPU cap, CPUs.
    pub(crate) island_caps: BTreeMap<Name, f64>,
    /// Island → overlay → the CPUs it holds on loan for that overlay: they
    /// serve the overlay's units on the island only (see `merge_unit`).
    pub(crate) borrowed: BTreeMap<Name, BTreeMap<Name, CpuSet>>,
    /// Island → its load over the last epoch.
    pub(crate) loads: BTreeMap<Name, IslandLoad>,
    /// Unit → its CPU pressure (%) over the last epoch it was sampled
    /// (while its trigger is armed: the last figure read, at most its
    /// threshold).
    pub(crate) unit_pressure: BTreeMap<Name, f64>,
    /// Where the pressure of watched units comes from.
    psi: pressure::PressureWatcher,
    counters: BTreeMap<atoll_core::plan::GroupPath, Counters>,
    waits: WaitTracker,
    recv: Option<Box<dyn RecvQueues>>,
    /// (overlay, what) → no reactive message before this.
    pub(crate) next: BTreeMap<(Name, String), Duration>,
    /// RT boosts decided and not yet carried out.
    priorities: Vec<RtBoost>,
    /// The registry's plan generation its units were last brought in step
    /// with (see [`Coordination::sync_units`]).
    synced: Option<u64>,
    /// What the last start or reload put back of a saved state, in words.
    restored: Option<String>,
}

impl std::fmt::Debug for Coordination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordination")
            .field("on", &self.manager.is_ok())
            .field("overlays", &self.overlays.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Coordination {
    /// The manager for `spec` (every island with its arbitration policy,
    /// the constants of [`PlatformSpec::coord_config`]: the platform cap's
    /// timing as configured), nothing registered yet. A spec the core
    /// refuses turns coordination off with the reason.
    pub fn new(spec: &PlatformSpec, topo: &Topology) -> Self {
        let manager =
            PlatformManager::from_spec(spec, topo, Default::default(), spec.coord_config())
                .and_then(|mut m| {
                    for i in &spec.islands {
                        m.set_arbitration(&i.name, i.arbitration)?;
                    }
                    Ok(m)
                });
        if let Err(e) = &manager {
            tracing::warn!("coordination is off: {e}");
        }
        let mut base = BTreeMap::new();
        if let Ok(m) = &manager {
            for c in m.islands() {
                for (u, k) in c.units() {
                    base.insert(u.clone(), (c.name().clone(), *k));
                }
            }
        }
        Self {
            manager,
            overlays: BTreeMap::new(),
            units: BTreeMap::new(),
            base,
            island_cpus: spec
                .islands
                .iter()
                .map(|i| (i.name.clone(), i.cpus.clone()))
                .collect(),
            island_caps: BTreeMap::new(),
            borrowed: BTreeMap::new(),
            loads: BTreeMap::new(),
            unit_pressure: BTreeMap::new(),
            psi: pressure::PressureWatcher::default(),
            counters: BTreeMap::new(),
            waits: WaitTracker::default(),
            recv: None,
            next: BTreeMap::new(),
            priorities: Vec::new(),
            synced: None,
            restored: None,
        }
    }

    /// Sets the reader of socket receive queues (for `react_recv_queue`);
    /// without one that policy watches nothing.
    pub fn set_recv_queues(&mut self, reader: Box<dyn RecvQueues>) {
        self.recv = Some(reader);
    }

    /// Units whose pressure `react_pressure` watches wait on triggers of
    /// `watch` where that serves (see [`pressure`]).
    pub fn set_pressure_watch(&mut self, watch: Box<dyn atoll_core::pressure::PressureWatch>) {
        self.psi.set_watch(watch);
    }

    /// The pressure of watched units is read every epoch, because `why`.
    pub fn set_pressure_averages(&mut self, why: impl Into<String>) {
        self.psi.set_averages(why);
    }

    /// How the pressure of watched units is followed, for the status.
    pub fn pressure_source(&self) -> atoll_proto::coord::PressureSource {
        self.psi.status()
    }

    /// Takes back the reader of socket receive queues (to give it to the
    /// coordination of a reloaded configuration).
    pub fn take_recv_queues(&mut self) -> Option<Box<dyn RecvQueues>> {
        self.recv.take()
    }

    /// Takes back how the pressure of watched units is followed, its
    /// triggers armed (to give it to the coordination of a reloaded
    /// configuration: the next step disarms the groups no longer watched).
    pub(crate) fn take_pressure_watcher(&mut self) -> pressure::PressureWatcher {
        std::mem::take(&mut self.psi)
    }

    /// Follows the pressure of watched units as `watcher` did.
    pub(crate) fn set_pressure_watcher(&mut self, watcher: pressure::PressureWatcher) {
        self.psi = watcher;
    }

    /// The CPUs every island holds now.
    pub fn all_island_cpus(&self) -> &BTreeMap<Name, CpuSet> {
        &self.island_cpus
    }

    /// A unit's RT budget as tuned by an overlay, if one moved it.
    pub fn tuned_rt_budget(&self, island: &IslandSpec, unit: &Name) -> Option<RtBudget> {
        self.merge_unit(island, unit, GroupSettings::default(), None)
            .rt_budget
    }

    /// Whether a platform CPU cap is in force (the islands' throttling is
    /// then read).
    pub fn capped(&self) -> bool {
        self.manager().is_some_and(|m| m.cpu_cap().is_some())
    }

    /// Whether the next epoch can be late without missing anything: no
    /// overlay watches, no platform cap holds, nothing is on loan, no boost
    /// or task priority is in force or waiting.
    pub fn quiescent(&self) -> bool {
        !self.watching()
            && !self.capped()
            && self.priorities.is_empty()
            && self.borrowed.values().all(BTreeMap::is_empty)
            && self
                .units
                .values()
                .all(|u| u.boost_weight.is_none() && u.boost_rt.is_none())
    }

    /// Whether any overlay is registered (islands are then watched).
    pub fn watching(&self) -> bool {
        self.manager.is_ok() && !self.overlays.is_empty()
    }

    /// The RT boosts decided since the last call, to carry out in order.
    pub fn take_priorities(&mut self) -> Vec<RtBoost> {
        std::mem::take(&mut self.priorities)
    }

    /// The manager, if coordination is on.
    pub fn manager(&self) -> Option<&PlatformManager> {
        self.manager.as_ref().ok()
    }

    /// The CPUs `island` holds now (its configured ones unless coordination
    /// moved some).
    pub fn island_cpus(&self, island: &Name) -> Option<&CpuSet> {
        self.island_cpus.get(island)
    }

    /// Brings [`Self::borrowed`] in step with the manager's loans.
    pub(crate) fn sync_borrowed(&mut self) {
        let mut out: BTreeMap<Name, BTreeMap<Name, CpuSet>> = BTreeMap::new();
        if let Some(m) = self.manager() {
            for l in m.loans() {
                out.entry(l.borrower)
                    .or_default()
                    .entry(l.overlay)
                    .or_default()
                    .insert(l.cpu);
            }
        }
        self.borrowed = out;
    }

    /// A unit's CPUs where its island holds CPUs on loan: the loans of the
    /// unit's own overlay are added to what it has, everyone else's taken
    /// out, so a borrowed CPU serves the units it was borrowed for and not
    /// whatever else runs on the island. `base` is what the layers below
    /// give it (its island's CPUs when they give nothing).
    fn borrowed_cpus(&self, island: &Name, unit: &Name, base: Option<&CpuSet>) -> Option<CpuSet> {
        let loans = self.borrowed.get(island)?;
        let base = base.or_else(|| self.island_cpus.get(island))?;
        let own = self
            .manager()
            .and_then(|m| m.island(island)?.overlay_of(unit).cloned());
        let mut out = base.clone();
        for (overlay, cpus) in loans {
            out = if own.as_ref() == Some(overlay) {
                out.union(cpus)
            } else {
                out.difference(cpus)
            };
        }
        (!out.is_empty()).then_some(out)
    }

    /// A unit group's settings with coordination's knobs over `s`;
    /// `parent`: its island group's effective settings.
    pub(crate) fn merge_unit(
        &self,
        island: &IslandSpec,
        unit: &Name,
        mut s: GroupSettings,
        parent: Option<&GroupSettings>,
    ) -> GroupSettings {
        let base = s.cpus.as_ref().or(parent.and_then(|p| p.cpus.as_ref()));
        if let Some(cpus) = self.borrowed_cpus(&island.name, unit, base) {
            s.cpus = Some(cpus);
        }
        let Some(c) = self.units.get(unit) else {
            return s;
        };
        if let Some(w) = c.boost_weight.or(c.weight) {
            s.cpu_weight = Some(w);
        }
        if let Some(cap) = c.cap {
            s.cpu_max = cap.map(CpuMax::for_cpus);
        }
        if let (Some(r), SchedPolicy::Realtime(rt)) = (c.rt_runtime_us, &island.policy) {
            s.rt_budget = Some(RtBudget {
                runtime_us: r * RT_PERIOD_US / rt.period_us.max(1),
                period_us: RT_PERIOD_US,
            });
        }
        if let Some(h) = c.memory_high {
            s.memory.high = h;
        }
        s
    }

    /// An island group's settings with coordination's CPUs and cap over `s`.
    pub(crate) fn merge_island(&self, island: &Name, mut s: GroupSettings) -> GroupSettings {
        if let Some(c) = self.island_cpus.get(island) {
            s.cpus = Some(c.clone());
        }
        if let Some(cap) = self.island_caps.get(island) {
            let period = self
                .manager()
                .map_or(CoordConfig::default().cap_period, |m| m.config().cap_period);
            s.cpu_max = Some(island_cap_max(*cap, period));
        }
        s
    }

    /// The value last reported for `overlay` (by the application or by the
    /// `slo` component's measurement).
    pub fn reported(&self, overlay: &Name) -> Option<f64> {
        self.overlays.get(overlay).and_then(|o| o.value)
    }

    /// The island of a unit the manager knows.
    pub(crate) fn island_of(&self, unit: &Name) -> Option<&Name> {
        self.base.get(unit).map(|(i, _)| i)
    }

    /// Whether `unit`'s steady CPU knobs are above their configured values.
    pub(crate) fn cpu_above_base(&self, unit: &Name) -> bool {
        let (Some(m), Some((island, base))) = (self.manager(), self.base.get(unit)) else {
            return false;
        };
        let Some(k) = m.island(island).and_then(|c| c.knobs(unit)) else {
            return false;
        };
        let looser = match (k.cap, base.cap) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(c), Some(b)) => c > b + 1e-9,
        };
        k.weight > base.weight || looser || k.rt_runtime_us > base.rt_runtime_us
    }

    /// Counts a reply for `overlay`.
    pub(crate) fn count(&mut self, overlay: Option<&Name>, acked: bool) {
        if let Some(o) = overlay.and_then(|o| self.overlays.get_mut(o)) {
            if acked {
                o.acked += 1;
            } else {
                o.nacked += 1;
            }
        }
    }
}

/// `cpu.max` of an island's share of the platform cap: `cpus` over the
/// period `cap_period` (the kernel's least quota is 1 ms).
pub(crate) fn island_cap_max(cpus: f64, period: Duration) -> CpuMax {
    let us = u64::try_from(period.as_micros()).unwrap_or(u64::MAX);
    CpuMax::for_cpus_over(cpus, us.clamp(1000, 1_000_000))
}

/// When a refused message may be sent again, if the reason says.
pub(crate) fn retry_at(reason: &NackReason) -> Option<Duration> {
    match reason {
        NackReason::BackingOff { until }
        | NackReason::CoolingDown { until, .. }
        | NackReason::AlreadyBoosted { until, .. }
        | NackReason::BoostSlotsBusy { until, .. }
        | NackReason::Damped { until, .. } => Some(*until),
        _ => None,
    }
}

impl Layer for Coordination {
    fn name(&self) -> &'static str {
        "coordination"
    }

    fn lay(&self, at: &At<'_>, s: &mut GroupSettings) {
        match (at.unit, at.island) {
            (Some(u), Some(island)) => {
                *s = self.merge_unit(island, &u.name, s.clone(), at.parent);
            }
            (None, Some(island)) => *s = self.merge_island(&island.name, s.clone()),
            _ => {}
        }
    }
}

impl Coordination {
    /// The CPUs `island` holds now.
    pub fn island_cpus_of(&self, island: &IslandSpec) -> CpuSet {
        self.island_cpus(&island.name)
            .cloned()
            .unwrap_or_else(|| island.cpus.clone())
    }

    /// Registers the overlays of the platform description (at start).
    pub fn register_config_overlays(
        &mut self,
        spec: &PlatformSpec,
        now: Duration,
        compose: &mut Composer,
    ) {
        for o in &spec.overlays {
            let msg = Message::Register {
                overlay: o.to_overlay_spec(spec),
            };
            self.overlays.insert(
                o.name.clone(),
                OverlayState::new(OverlayOrigin::Config, o.react),
            );
            let from = self.default_sender(spec, &msg);
            let Ok(m) = self.manager.as_mut() else {
                return;
            };
            let reply = m.handle(now, &from, &msg);
            self.count(Some(&o.name), reply.is_ack());
            match reply.reason() {
                None => {
                    let effects = reply.effects().to_vec();
                    self.apply_coord(&effects, " (from the platform description)", compose);
                }
                Some(r) => {
                    tracing::warn!("overlay {}: registration refused: {r}", o.name);
                    self.overlays.remove(&o.name);
                }
            }
        }
    }

    /// One coordination step of the control loop; see the module docs.
    pub fn step(&mut self, inp: &Inputs<'_>, compose: &mut Composer) {
        self.sync_units(inp.reg);
        let now = inp.now;
        let expired = match self.manager.as_mut() {
            Ok(m) => m.tick(now),
            Err(_) => return,
        };
        self.apply_coord(&expired, "", compose);
        if self.overlays.is_empty() {
            // Nothing to observe for: keep the epoch as cheap as without
            // coordination (and hold no trigger).
            self.psi.retain(&Default::default());
            return;
        }
        let samples = self.observe(inp);
        let capped = self.capped();
        if capped {
            let usage: Vec<(Name, f64, bool)> = samples
                .iter()
                .map(|(n, l)| (n.clone(), l.used, l.throttled))
                .collect();
            let moved = match self.manager.as_mut() {
                Ok(m) => m.rebalance(now, &usage),
                Err(_) => return,
            };
            match moved {
                Ok(effects) => self.apply_coord(&effects, "", compose),
                Err(e) => tracing::warn!("coordination: rebalancing the CPU cap: {e}"),
            }
        }
        self.react(inp, compose);
    }
}
