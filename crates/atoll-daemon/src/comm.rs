//! Communication-aware scheduling (seed 003) in the control loop.
//!
//! Every epoch, when the platform has a `[comm]` section:
//!
//! 1. the [`NetMonitor`] samples the sockets of each watched unit's
//!    processes (queues now, bytes received and sent so far), and the
//!    backend each unit's CPU time;
//! 2. one pure [`CommPolicy`] per island (boosts compete for the island's
//!    CPUs) decides which units are boosted for the coming epoch: the most
//!    intense receivers, anticipated senders and network-path units, each
//!    only while it has used less than its slice of the period;
//! 3. the mechanism carries the boosts out:
//!    - `slice`: the boosted unit's threads get the custom EEVDF slice
//!      `boost_slice` (picked sooner at wakeup, same share), back to the
//!      default when the boost ends; threads that appear while it lasts get
//!      it at the next epoch;
//!    - `weight`: the unit's `cpu.weight` is multiplied by `boost_weight`;
//!    - `idle_others`: every other unit of the island is `cpu.idle` while a
//!      unit of the island is boosted;
//! 4. every start and end is a decision (`atoll why UNIT`) with the figures
//!    that made it. Boosts come and go every few epochs, so they are logged
//!    at debug level; the ring keeps them.
//!
//! The weight and idle knobs are the `comm` layer of the unit's settings
//! (see [`crate::compose`]): a boost touches its unit, and the composer
//! writes it with every other layer laid, so nothing else undoes a boost
//! while it lasts.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use atoll_core::backend::Monitor;
use atoll_core::backend::StatSelect;
use atoll_core::comm::{
    reservations, CommDecision, CommPolicy, CommSpec, Mechanism, NetMonitor, UnitInput,
    UnitNetSample,
};
use atoll_core::decision::{Action, Decision, Reason};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::process::{ProcessTable, TaskControl};
use atoll_core::{CpuSet, Name};
use atoll_proto::{CommStatus, UnitComm};

use crate::compose::{At, Composer, Layer};
use crate::decisions::DecisionLog;
use crate::load::Loads;
use crate::registry::Registry;

/// The most a boosted weight may be (the kernel's `cpu.weight` range).
const MAX_WEIGHT: u32 = 10_000;

/// Communication-aware scheduling's state in the daemon.
#[derive(Default)]
pub struct Comm {
    monitor: Option<Box<dyn NetMonitor>>,
    source: String,
    /// One policy per island with watched units.
    policies: BTreeMap<Name, CommPolicy>,
    /// Boosted units, with the threads given a custom slice.
    boosted: BTreeMap<Name, Boosted>,
    /// Units made idle for others' boosts (`idle_others`).
    idle: BTreeSet<Name>,
    /// Last sample per watched unit, and its reservation.
    last: BTreeMap<Name, (UnitNetSample, f64)>,
    epochs: u64,
    sample_errors: u64,
    last_cost_us: u64,
    /// The registry's plan generation when removed units were last dropped.
    known_units: u64,
    /// The last step found no boost in force and every island idle.
    quiescent: bool,
}

/// A unit boosted now.
#[derive(Clone, Debug)]
struct Boosted {
    island: Name,
    /// Threads given the boost slice (`slice` mechanism).
    tids: BTreeSet<u32>,
    /// Threads that refused it (so they are not retried every epoch).
    refused: BTreeSet<u32>,
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("source", &self.source)
            .field("boosted", &self.boosted.keys().collect::<Vec<_>>())
            .field("idle", &self.idle)
            .field("epochs", &self.epochs)
            .finish()
    }
}

impl Comm {
    /// A unit group's settings with the boost's knobs over `s`.
    fn merge_unit(
        &self,
        spec: Option<&CommSpec>,
        unit: &Name,
        mut s: GroupSettings,
    ) -> GroupSettings {
        let Some(spec) = spec else {
            return s;
        };
        match spec.mechanism {
            Mechanism::Weight if self.boosted.contains_key(unit) => {
                let base = s.cpu_weight.unwrap_or(100);
                s.cpu_weight = Some(base.saturating_mul(spec.boost_weight).clamp(1, MAX_WEIGHT));
            }
            Mechanism::IdleOthers if self.idle.contains(unit) => s.cpu_idle = true,
            _ => {}
        }
        s
    }
}

impl Layer for Comm {
    fn name(&self) -> &'static str {
        "comm"
    }

    fn lay(&self, at: &At<'_>, s: &mut GroupSettings) {
        if let Some(u) = at.unit {
            *s = self.merge_unit(at.spec.comm.as_ref(), &u.name, s.clone());
        }
    }
}

/// What the communication step reads besides its own state.
pub struct Inputs<'a> {
    /// Now.
    pub now: Duration,
    /// Units and the `[comm]` section.
    pub reg: &'a Registry,
    /// The units' processes and CPU time.
    pub mon: &'a dyn Monitor,
    /// Threads of the boosted units (`slice`).
    pub procs: &'a dyn ProcessTable,
    /// The CPUs each island holds now.
    pub island_cpus: &'a BTreeMap<Name, CpuSet>,
    /// Each island's load over the last epoch.
    pub loads: &'a Loads,
}

/// How a boost is carried out, in words.
fn how(spec: &CommSpec, threads: usize) -> String {
    match spec.mechanism {
        Mechanism::Slice => format!(
            "slice {}us on {threads} thread{}",
            spec.boost_slice.as_micros(),
            if threads == 1 { "" } else { "s" }
        ),
        Mechanism::Weight => format!("cpu.weight x{}", spec.boost_weight),
        Mechanism::IdleOthers => "the island's other units idle".into(),
    }
}

/// A unit of the platform as this module sees it.
struct UnitRow {
    name: Name,
    group: GroupPath,
    entitled: Option<f64>,
}

impl Comm {
    /// Sets the reader of units' sockets; `source` names it in the status
    /// (`sock_diag`, `procfs`, ...).
    pub fn set_monitor(&mut self, monitor: Box<dyn NetMonitor>, source: &str) {
        self.monitor = Some(monitor);
        self.source = source.to_string();
    }

    /// Whether the next epoch can be late without missing anything: comm is
    /// off, or the last step found no boost and every island idle (a unit
    /// that talks runs, so its island is busy first).
    pub fn quiescent(&self, reg: &Registry) -> bool {
        reg.spec().comm.is_none() || self.monitor.is_none() || self.quiescent
    }

    /// One epoch of communication-aware scheduling (see the module docs):
    /// boosts start and end as decisions in `log`, their units are touched
    /// in `compose`, slices are set through `tasks`.
    pub fn step(
        &mut self,
        inp: &Inputs<'_>,
        tasks: &mut dyn TaskControl,
        compose: &mut Composer,
        log: &mut DecisionLog,
    ) {
        let Some(spec) = inp.reg.spec().comm.as_ref() else {
            return;
        };
        if self.monitor.is_none() {
            return;
        }
        // Nothing to read where no watched island is busy and no boost is
        // in force (see below).
        self.quiescent = self.boosted.is_empty()
            && inp
                .reg
                .spec()
                .islands
                .iter()
                .all(|i| inp.loads.idle(&i.name));
        if self.quiescent {
            if self.known_units != inp.reg.generation() {
                self.known_units = inp.reg.generation();
                self.forget_removed_units(inp.reg);
            }
            return;
        }
        let started = Instant::now();
        let now = inp.now;
        // Units by island (islands with no watched unit left out).
        let mut islands: BTreeMap<Name, Vec<UnitRow>> = BTreeMap::new();
        for (u, _) in inp.reg.units() {
            islands.entry(u.island.clone()).or_default().push(UnitRow {
                name: u.name.clone(),
                group: GroupPath::unit(&u.island, &u.name),
                entitled: u.entitlement.cpus,
            });
        }
        // An island none of whose tasks ran or waited over the last epoch
        // is not contended: nothing there needs a boost, and none of its
        // units has data it could not be scheduled to read. Its sockets are
        // not read until it is busy again (a boost in force runs its
        // course).
        let boosting: BTreeSet<&Name> = self.boosted.values().map(|b| &b.island).collect();
        islands.retain(|island, units| {
            units.iter().any(|u| spec.watches(&u.name))
                && (!inp.loads.idle(island) || boosting.contains(island))
        });
        if islands.is_empty() {
            self.forget_removed_units(inp.reg);
            return;
        }
        let mut pids = BTreeMap::new();
        for u in islands.values().flatten().filter(|u| spec.watches(&u.name)) {
            pids.insert(
                u.name.clone(),
                inp.mon.processes(&u.group).unwrap_or_default(),
            );
        }
        let samples = match self.monitor.as_mut().map(|m| m.sample(&pids)) {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                self.sample_errors += 1;
                if self.sample_errors == 1 || self.sample_errors.is_power_of_two() {
                    tracing::warn!(
                        "comm: reading sockets failed ({} times so far): {e}",
                        self.sample_errors
                    );
                }
                BTreeMap::new()
            }
            None => return,
        };
        let cpu_only = StatSelect {
            pressure: false,
            ..StatSelect::CPU
        };
        let mut decisions = Vec::new();
        for (island, units) in &islands {
            let Some(ispec) = inp.reg.island(island) else {
                continue;
            };
            let capacity = inp
                .island_cpus
                .get(island)
                .unwrap_or(&ispec.cpus)
                .len()
                .max(1) as f64;
            let entitled: Vec<(Name, Option<f64>)> =
                units.iter().map(|u| (u.name.clone(), u.entitled)).collect();
            let res = reservations(capacity, &entitled);
            let inputs: Vec<UnitInput> = units
                .iter()
                .map(|u| {
                    let net = samples.get(&u.name).copied().unwrap_or_default();
                    let reservation_cpus = res.get(&u.name).copied().unwrap_or(0.0);
                    if spec.watches(&u.name) {
                        self.last.insert(u.name.clone(), (net, reservation_cpus));
                    }
                    UnitInput {
                        unit: u.name.clone(),
                        net,
                        cpu_usage_us: inp
                            .mon
                            .stats_of(&u.group, cpu_only)
                            .ok()
                            .and_then(|s| s.cpu_usage_us)
                            .unwrap_or(0),
                        reservation_cpus,
                    }
                })
                .collect();
            let policy = match self.policies.entry(island.clone()) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    match CommPolicy::new(spec.clone()) {
                        Ok(p) => v.insert(p),
                        Err(e) => {
                            tracing::error!("comm: {e}");
                            return;
                        }
                    }
                }
            };
            match policy.step(now, &inputs) {
                Ok(d) => decisions.push((island.clone(), d)),
                Err(e) => tracing::warn!("comm: island {island}: {e}"),
            }
        }
        self.forget_removed_units(inp.reg);
        let mut out = Out {
            now,
            reg: inp.reg,
            mon: inp.mon,
            procs: inp.procs,
            tasks,
            compose,
            log,
        };
        for (island, d) in decisions {
            self.carry_out(spec, &island, d, &mut out);
        }
        self.epochs += 1;
        self.last_cost_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    }

    /// Drops the state of units that no longer exist.
    fn forget_removed_units(&mut self, reg: &Registry) {
        let live: BTreeSet<Name> = reg.units().map(|(u, _)| u.name.clone()).collect();
        for p in self.policies.values_mut() {
            let gone: Vec<Name> = p
                .accounts()
                .keys()
                .filter(|u| !live.contains(*u))
                .cloned()
                .collect();
            for u in gone {
                p.forget(&u);
            }
        }
        self.boosted.retain(|u, _| live.contains(u));
        self.idle.retain(|u| live.contains(u));
        self.last.retain(|u, _| live.contains(u));
    }

    /// Applies one island's decision: ends first, then starts, then the
    /// slice for threads that appeared in boosted units.
    fn carry_out(
        &mut self,
        spec: &CommSpec,
        island: &Name,
        d: CommDecision,
        out: &mut Out<'_, '_>,
    ) {
        for (unit, why) in &d.ended {
            let Some(b) = self.boosted.remove(unit) else {
                continue;
            };
            let threads = b.tids.len();
            for tid in b.tids {
                // A thread that exited took its slice with it.
                let _ = out.tasks.set_slice(tid, Duration::ZERO);
            }
            let reason = Reason::Comm {
                detail: why.to_string(),
            };
            if spec.mechanism == Mechanism::Weight {
                out.compose
                    .touch(GroupPath::unit(island, unit), reason.clone());
            }
            out.decide(
                Action::Boost {
                    unit: unit.to_string(),
                    how: how(spec, threads),
                    start: false,
                },
                reason,
            );
        }
        for b in &d.started {
            self.boosted.insert(
                b.unit.clone(),
                Boosted {
                    island: island.clone(),
                    tids: BTreeSet::new(),
                    refused: BTreeSet::new(),
                },
            );
            let reasons: Vec<String> = b.reasons.iter().map(|r| r.to_string()).collect();
            let reason = Reason::Comm {
                detail: format!("intensity {} bytes: {}", b.intensity, reasons.join("; ")),
            };
            let threads = match spec.mechanism {
                Mechanism::Slice => self.slice_threads(spec, &b.unit, out),
                Mechanism::Weight => {
                    out.compose
                        .touch(GroupPath::unit(island, &b.unit), reason.clone());
                    0
                }
                Mechanism::IdleOthers => 0,
            };
            out.decide(
                Action::Boost {
                    unit: b.unit.to_string(),
                    how: how(spec, threads),
                    start: true,
                },
                reason,
            );
        }
        match spec.mechanism {
            Mechanism::Slice => {
                let still: Vec<Name> = d
                    .boosted
                    .iter()
                    .filter(|b| !d.started.iter().any(|s| s.unit == b.unit))
                    .map(|b| b.unit.clone())
                    .collect();
                for unit in still {
                    self.slice_threads(spec, &unit, out);
                }
            }
            Mechanism::IdleOthers => self.idle_others(island, !d.boosted.is_empty(), out),
            Mechanism::Weight => {}
        }
    }

    /// Gives the boost slice to the unit's threads that do not have it yet;
    /// returns how many threads have it.
    fn slice_threads(&mut self, spec: &CommSpec, unit: &Name, out: &mut Out<'_, '_>) -> usize {
        let Some(b) = self.boosted.get_mut(unit) else {
            return 0;
        };
        let group = GroupPath::unit(&b.island, unit);
        let mut tids = Vec::new();
        for pid in out.mon.processes(&group).unwrap_or_default() {
            tids.extend(out.procs.threads(pid).unwrap_or_default());
        }
        let new: Vec<u32> = tids
            .into_iter()
            .filter(|t| !b.tids.contains(t) && !b.refused.contains(t))
            .collect();
        for tid in new {
            match out.tasks.set_slice(tid, spec.boost_slice) {
                Ok(()) => {
                    b.tids.insert(tid);
                }
                Err(e) => {
                    tracing::debug!("comm: slice for thread {tid} of unit {unit}: {e}");
                    b.refused.insert(tid);
                }
            }
        }
        b.tids.len()
    }

    /// `idle_others`: while `any` unit of `island` is boosted, every unit of
    /// the island that is not boosted is idle; otherwise none is.
    fn idle_others(&mut self, island: &Name, any: bool, out: &mut Out<'_, '_>) {
        let boosted: Vec<String> = self
            .boosted
            .iter()
            .filter(|(_, b)| &b.island == island)
            .map(|(u, _)| u.to_string())
            .collect();
        for unit in out.reg.units_of(island) {
            let unit = &unit.name;
            let want = any && !self.boosted.contains_key(unit);
            let has = self.idle.contains(unit);
            if want == has {
                continue;
            }
            let detail = if want {
                self.idle.insert(unit.clone());
                format!("idle while {} is boosted", boosted.join(", "))
            } else {
                self.idle.remove(unit);
                "no boost in its island any more".to_string()
            };
            out.compose
                .touch(GroupPath::unit(island, unit), Reason::Comm { detail });
        }
    }

    /// Ends every boost (teardown): boosted threads get their default
    /// slice back, and the units whose knobs a boost set are touched.
    pub fn end_boosts(&mut self, tasks: &mut dyn TaskControl, compose: &mut Composer) {
        for (unit, b) in std::mem::take(&mut self.boosted) {
            for tid in b.tids {
                let _ = tasks.set_slice(tid, Duration::ZERO);
            }
            compose.touch(GroupPath::unit(&b.island, &unit), Reason::Teardown);
        }
        self.idle.clear();
    }

    /// The status of communication-aware scheduling, if configured.
    pub fn status(&self, spec: Option<&CommSpec>) -> Option<CommStatus> {
        let spec = spec?;
        let mut features = Vec::new();
        if spec.recipient {
            features.push("recipient".to_string());
        }
        if spec.anticipate {
            features.push("anticipate".to_string());
        }
        if !spec.netpath.is_empty() {
            features.push("netpath".to_string());
        }
        let mechanism = match spec.mechanism {
            Mechanism::Slice => "slice",
            Mechanism::Weight => "weight",
            Mechanism::IdleOthers => "idle_others",
        };
        Some(CommStatus {
            mechanism: mechanism.into(),
            features,
            source: if self.monitor.is_some() {
                self.source.clone()
            } else {
                "none".into()
            },
            boosted: self.boosted.keys().map(|u| u.to_string()).collect(),
            last_cost_us: self.last_cost_us,
            epochs: self.epochs,
            sample_errors: self.sample_errors,
        })
    }

    /// One unit's figures and boosts, if watched.
    pub fn unit_status(&self, unit: &Name) -> Option<UnitComm> {
        let (net, reservation_cpus) = *self.last.get(unit)?;
        let account = self
            .policies
            .values()
            .find_map(|p| p.accounts().get(unit))
            .cloned()
            .unwrap_or_default();
        Some(UnitComm {
            boosted: self.boosted.contains_key(unit),
            reservation_cpus,
            recv_queued: net.recv_queued,
            bytes_received: net.bytes_received,
            bytes_sent: net.bytes_sent,
            boosts: account.boosts,
            boosted_us: account.boosted_us,
            over_reservation: account.over_reservation,
            recipient: account.reasons.recipient,
            sender: account.reasons.sender,
            netpath: account.reasons.netpath,
        })
    }
}

/// What carrying out a decision takes.
struct Out<'a, 'b> {
    now: Duration,
    reg: &'a Registry,
    mon: &'a dyn Monitor,
    procs: &'a dyn ProcessTable,
    tasks: &'b mut dyn TaskControl,
    compose: &'b mut Composer,
    log: &'b mut DecisionLog,
}

impl Out<'_, '_> {
    fn decide(&mut self, action: Action, why: Reason) {
        self.log.record(Decision {
            at: self.now,
            action,
            why,
        });
    }
}
