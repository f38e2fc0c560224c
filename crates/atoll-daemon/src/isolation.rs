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
//! 3. their grants are the `isolation` layer of the unit's settings (see
//!    [`crate::compose`]): `cpuset.cpus` = what the unit may run on; a unit
//!    running on borrowed CPUs is `cpu.idle` so an owner's task preempts it
//!    at wakeup (the mechanism measured in `docs/isolation.md`), and loses
//!    the CPUs at the next epoch; `cpu.max` for capped pool members;
//!    `memory.high` and `memory.low` for memory; `io.max` at a trickle on
//!    the devices it uses while a unit is held back on disk;
//! 4. the units whose grants changed are touched, with every lend,
//!    revocation and hold of the step as the reason, and the composer
//!    writes them with the layers above this one (coordination, comm,
//!    apps) laid over.
//!
//! An island's home CPUs are laid out over the CPUs it holds now, so the
//! lender starts again when coordination moves CPUs between islands.
//! In `smp` mode the layer lays nothing: the plan's settings stand.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use atoll_core::backend::{Monitor, StatSelect};
use atoll_core::decision::Reason;
use atoll_core::isolation::{home_cpus_with_guests, CpuLendConfig, CpuLender, CpuSample};
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings};
use atoll_core::process::ProcessTable;
use atoll_core::spec::{DeviceId, IoLimit, IsolationMode};
use atoll_core::topology::Topology;
use atoll_core::{CpuSet, Name};
use atoll_proto::UnitIsolation;

use crate::compose::{At, Composer, Layer};
use crate::cpu_wait::WaitTracker;
use crate::load::Loads;
use crate::registry::Registry;

mod quiet;
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

/// A unit as the lender was built for it: its name, its CPU entitlement,
/// and whether it is a guest (a unit created at run time without an
/// entitlement: no home CPUs, no share of the pool, it takes nothing from
/// the configured units; see `atoll_core::isolation::home_cpus_with_guests`).
type Member = (Name, Option<f64>, bool);

/// An island's units, the CPUs it held, and its lender (rebuilt when the
/// units or the CPUs change).
type IslandLender = (Vec<Member>, CpuSet, CpuLender);

/// The island's units as the lender sees them.
fn members(reg: &Registry, island: &Name) -> Vec<Member> {
    reg.units()
        .filter(|(u, _)| &u.island == island)
        .map(|(u, origin)| {
            let guest = origin == atoll_proto::UnitOrigin::Runtime && u.entitlement.cpus.is_none();
            (u.name.clone(), u.entitlement.cpus, guest)
        })
        .collect()
}

/// Whether unit `name` is a guest (see [`Member`]).
fn is_guest(reg: &Registry, name: &str) -> bool {
    reg.unit(name).is_some_and(|(u, origin)| {
        origin == atoll_proto::UnitOrigin::Runtime && u.entitlement.cpus.is_none()
    })
}

/// What the isolation layer lays on one unit's group.
#[derive(Clone, Debug, Default, PartialEq)]
struct UnitGrant {
    /// The CPUs it may run on.
    cpus: Option<CpuSet>,
    /// It runs on borrowed CPUs: at idle priority.
    borrowing: bool,
    /// `cpu.max` of a capped pool member.
    cap: Option<CpuMax>,
    /// Its memory grant.
    memory: Option<MemoryLay>,
    /// Devices it is held back on.
    held: Vec<DeviceId>,
}

/// A memory grant as knobs.
#[derive(Clone, Copy, Debug, PartialEq)]
struct MemoryLay {
    /// `memory.high`.
    limit: Option<u64>,
    /// `memory.low` (0: the plan's).
    protected: u64,
    /// A lending unit's `memory.max` is held by `memory.high` instead.
    drop_max: bool,
}

/// What the isolation step reads besides its own state.
pub struct Inputs<'a> {
    /// Now.
    pub now: Duration,
    /// Units and their entitlements.
    pub reg: &'a Registry,
    /// The groups' figures.
    pub mon: &'a dyn Monitor,
    /// Thread waits where the kernel has no per-group pressure.
    pub procs: &'a dyn ProcessTable,
    /// The machine.
    pub topo: &'a Topology,
    /// The CPUs each island holds now (coordination may move them).
    pub island_cpus: &'a BTreeMap<Name, CpuSet>,
    /// Each island's load over the last epoch: the units of an idle island
    /// are not read one by one.
    pub loads: &'a Loads,
}

/// The isolation model's state between epochs.
#[derive(Default)]
pub struct Isolation {
    lenders: BTreeMap<Name, IslandLender>,
    slow: slow::Slow,
    last: BTreeMap<GroupPath, Last>,
    /// CPU pressure from thread waits, where the kernel has none per group.
    waits: WaitTracker,
    /// Recent `cpu.pressure` totals per unit group, for [`PRESSURE_WINDOW`].
    psi: BTreeMap<GroupPath, VecDeque<(Duration, u64)>>,
    /// The layer: what each unit group is granted.
    grants: BTreeMap<GroupPath, UnitGrant>,
    /// What each unit has, lends and borrows, for status.
    accounts: BTreeMap<String, UnitIsolation>,
    /// Islands whose lender last stepped on an idle epoch: until the island
    /// is busy again nothing it decides can change (no unit uses, waits or
    /// borrows), so it is not stepped.
    settled: BTreeSet<Name>,
    /// What the lenders were last found built for (see `quiet`).
    members: quiet::Members,
    /// The last step found every island idle, changed no grant and left
    /// nothing lent: until an island is busy again it has nothing to act
    /// on (see [`Isolation::quiescent`]).
    quiescent: bool,
}

impl std::fmt::Debug for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Isolation")
            .field("units", &self.grants.len())
            .finish_non_exhaustive()
    }
}

pub(crate) struct UnitSample {
    pub(crate) name: Name,
    pub(crate) island: Name,
    pub(crate) group: GroupPath,
    pub(crate) usage_cpus: f64,
    pub(crate) cpu_pressure: Option<f64>,
}

impl Layer for Isolation {
    fn name(&self) -> &'static str {
        "isolation"
    }

    fn lay(&self, at: &At<'_>, s: &mut GroupSettings) {
        let Some(g) = self.grants.get(at.path) else {
            return;
        };
        if let Some(c) = &g.cpus {
            s.cpus = Some(c.clone());
        }
        // Borrowed CPUs are run at idle priority: the owner's tasks
        // preempt them at once, before the next epoch revokes them.
        s.cpu_idle |= g.borrowing;
        if let Some(m) = g.cap {
            s.cpu_max = Some(m);
        }
        if let Some(m) = g.memory {
            // memory.high throttles and reclaims instead of killing.
            s.memory.high = m.limit.or(s.memory.high);
            if m.drop_max {
                // A sharing unit's `memory_max` is its entitlement, held
                // by memory.high; a hard memory.max at the entitlement
                // would make borrowed memory unusable, and lowering it on
                // revocation could OOM-kill instead of reclaiming.
                s.memory.max = None;
            }
            if m.protected > 0 {
                s.memory.low = Some(m.protected);
            }
            if let (Some(low), Some(high)) = (s.memory.low, s.memory.high) {
                s.memory.low = Some(low.min(high));
            }
        }
        for dev in &g.held {
            if s.io_max.iter().any(|l| &l.device == dev) {
                continue;
            }
            s.io_max.push(IoLimit {
                device: *dev,
                rbps: Some(HELD_IO_BPS),
                wbps: Some(HELD_IO_BPS),
                riops: None,
                wiops: None,
            });
        }
    }
}

impl Isolation {
    /// What each unit has, lends and borrows.
    pub fn accounts(&self) -> &BTreeMap<String, UnitIsolation> {
        &self.accounts
    }

    /// One isolation step (see the module docs): the units whose grants
    /// changed are touched in `compose`.
    pub fn step(&mut self, inp: &Inputs<'_>, compose: &mut Composer) {
        let mode = inp.reg.spec().isolation.mode;
        self.quiescent = false;
        if mode == IsolationMode::Smp {
            self.quiescent = self.grants.is_empty();
            if !self.grants.is_empty() {
                self.lift(
                    compose,
                    Reason::Isolation {
                        detail: "mode smp: back to the planned settings".into(),
                    },
                );
            }
            return;
        }
        if self.quiet(inp) {
            self.quiescent = self.nothing_lent();
            return;
        }
        let samples = self.sample_units(inp, mode);
        let mut grants: BTreeMap<GroupPath, UnitGrant> = BTreeMap::new();
        let mut accounts: BTreeMap<String, UnitIsolation> = BTreeMap::new();
        let mut events: Vec<String> = Vec::new();
        for s in &samples {
            if inp.reg.planned(&s.group).is_some() {
                grants.insert(s.group.clone(), UnitGrant::default());
                accounts.insert(s.name.to_string(), UnitIsolation::default());
            }
        }
        self.step_cpu(inp, mode, &samples, &mut grants, &mut accounts, &mut events);
        self.slow.note_activity(inp);
        if self.slow.due(inp.now) {
            let slow: Vec<_> = samples
                .iter()
                .map(|s| (s, self.slow.sample(inp.mon, s)))
                .collect();
            self.slow.step(inp, mode, &slow, &mut events);
        }
        self.lay_slow(inp.reg, &samples, &mut grants, &mut accounts);
        let why = Reason::Isolation {
            detail: if events.is_empty() {
                format!("mode {mode:?}").to_lowercase()
            } else {
                events.join("; ")
            },
        };
        let mut changed = false;
        for (group, grant) in &grants {
            if self.grants.get(group) != Some(grant) {
                compose.touch(group.clone(), why.clone());
                changed = true;
            }
        }
        self.grants = grants;
        self.accounts = accounts;
        self.quiescent = !changed
            && inp
                .reg
                .spec()
                .islands
                .iter()
                .all(|i| inp.loads.idle(&i.name))
            && self.nothing_lent();
    }

    /// Whether the last step left nothing that needs the next epoch: every
    /// island idle, no grant changed, no CPU or memory lent (a lender whose
    /// load rises must get its CPUs back within one epoch, so a loan keeps
    /// the loop at one epoch).
    pub fn quiescent(&self) -> bool {
        self.quiescent
    }

    fn nothing_lent(&self) -> bool {
        self.accounts.values().all(|a| {
            a.lent_cpus.is_empty()
                && a.borrowed_cpus.is_empty()
                && a.memory_lent == 0
                && a.memory_borrowed == 0
        })
    }

    /// Lays nothing any more: every unit back on its planned settings (no
    /// borrowed CPUs, no idle priority, no disk holds), for `why`.
    pub fn lift(&mut self, compose: &mut Composer, why: Reason) {
        for group in std::mem::take(&mut self.grants).into_keys() {
            compose.touch(group, why.clone());
        }
        *self = Isolation::default();
    }

    fn sample_units(&mut self, inp: &Inputs<'_>, mode: IsolationMode) -> Vec<UnitSample> {
        let now = inp.now;
        let mut out = Vec::new();
        for (u, _) in inp.reg.units() {
            let (name, island) = (u.name.clone(), u.island.clone());
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
            if inp.loads.idle(&island) {
                // No task of the island ran or waited: neither did the
                // unit's. Its counters are not read; the windows move on.
                let hist = self.psi.get_mut(&group);
                let cpu_pressure = hist.and_then(|h| {
                    let total = h.back()?.1;
                    psi_over_window(h, now, total)
                });
                if let Some(l) = self.last.get_mut(&group) {
                    l.at = now;
                }
                self.waits.forget(&group);
                out.push(UnitSample {
                    name,
                    island,
                    group,
                    usage_cpus: 0.0,
                    cpu_pressure,
                });
                continue;
            }
            let st = inp
                .mon
                .stats_of(&group, StatSelect::CPU)
                .unwrap_or_default();
            let cpu_us = st.cpu_usage_us.unwrap_or(0);
            let last = self.last.insert(group.clone(), Last { at: now, cpu_us });
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
                        self.psi.entry(group.clone()).or_default(),
                        now,
                        p.some.total_us,
                    )
                    .unwrap_or(p.some.avg10),
                ),
                None => {
                    let allowed = self
                        .accounts
                        .get(name.as_str())
                        .map_or(0, |a| a.allowed_cpus.len());
                    self.waits
                        .pressure(&group, now, usage_cpus, allowed, inp.mon, inp.procs)
                }
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
        self.last.retain(|g, _| sampled.contains(g));
        self.waits.retain(|g| sampled.contains(g));
        self.psi.retain(|g, _| sampled.contains(g));
        out
    }

    fn step_cpu(
        &mut self,
        inp: &Inputs<'_>,
        mode: IsolationMode,
        samples: &[UnitSample],
        grants: &mut BTreeMap<GroupPath, UnitGrant>,
        accounts: &mut BTreeMap<String, UnitIsolation>,
        events: &mut Vec<String>,
    ) {
        for island in &inp.reg.spec().islands {
            let members = members(inp.reg, &island.name);
            if members.is_empty() {
                if self.lenders.remove(&island.name).is_some() {
                    self.members.lender_changed();
                }
                continue;
            }
            let cpus = inp
                .island_cpus
                .get(&island.name)
                .cloned()
                .unwrap_or_else(|| island.cpus.clone());
            let stale = self
                .lenders
                .get(&island.name)
                .is_none_or(|(m, c, l)| m != &members || c != &cpus || l.mode() != mode);
            if stale {
                let owners: Vec<(Name, Option<f64>)> = members
                    .iter()
                    .filter(|m| !m.2)
                    .map(|(n, e, _)| (n.clone(), *e))
                    .collect();
                let guests: Vec<Name> = members
                    .iter()
                    .filter(|m| m.2)
                    .map(|(n, _, _)| n.clone())
                    .collect();
                let layout = match home_cpus_with_guests(&cpus, inp.topo, &owners, &guests) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!("isolation: island {}: {e}", island.name);
                        continue;
                    }
                };
                match CpuLender::new(layout, inp.topo, mode, lend_config()) {
                    Ok(l) => {
                        self.lenders
                            .insert(island.name.clone(), (members.clone(), cpus.clone(), l));
                        self.members.lender_changed();
                    }
                    Err(e) => {
                        tracing::warn!("isolation: island {}: {e}", island.name);
                        continue;
                    }
                }
            }
            let idle = inp.loads.idle(&island.name);
            if idle && !stale && self.settled.contains(&island.name) {
                // Nothing moved: the grants stand as they are.
                for u in inp.reg.units_of(&island.name) {
                    let group = GroupPath::unit(&island.name, &u.name);
                    if let (Some(old), Some(g)) = (self.grants.get(&group), grants.get_mut(&group))
                    {
                        g.cpus = old.cpus.clone();
                        g.borrowing = old.borrowing;
                        g.cap = old.cap;
                    }
                    if let (Some(old), Some(a)) = (
                        self.accounts.get(u.name.as_str()),
                        accounts.get_mut(u.name.as_str()),
                    ) {
                        *a = old.clone();
                    }
                }
                continue;
            }
            if idle {
                self.settled.insert(island.name.clone());
            } else {
                self.settled.remove(&island.name);
            }
            let cpu_samples: Vec<CpuSample> = samples
                .iter()
                .filter(|s| mode == IsolationMode::Isolate && s.island == island.name)
                .filter_map(|s| {
                    let u = inp.reg.unit(s.name.as_str())?.0;
                    Some(CpuSample {
                        unit: s.name.clone(),
                        usage_cpus: s.usage_cpus,
                        pressure_some: s.cpu_pressure,
                        sharing: u.entitlement.sharing.cpu,
                        cap_cpus: u.entitlement.cpu_cap,
                    })
                })
                .collect();
            let Some((_, _, lender)) = self.lenders.get_mut(&island.name) else {
                continue;
            };
            let plan = match lender.step(inp.now, &cpu_samples) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!("isolation: island {}: {e}", island.name);
                    continue;
                }
            };
            events.extend(plan.events.iter().map(|e| e.to_string()));
            for (unit, grant) in &plan.units {
                let group = GroupPath::unit(&island.name, unit);
                let Some(g) = grants.get_mut(&group) else {
                    continue;
                };
                let allowed = grant.allowed();
                if allowed.is_empty() {
                    // A guest nobody lends to: it runs on the island's CPUs
                    // at idle priority, after every owner.
                    g.cpus = Some(cpus.clone());
                    g.borrowing = true;
                } else {
                    g.cpus = Some(allowed);
                    g.borrowing = !grant.borrowed.is_empty();
                }
                g.cap = grant.cap.map(cap_max);
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

/// `cpu.max` for a cap of `cap` CPUs (the kernel's least quota is 1 ms).
fn cap_max(cap: f64) -> CpuMax {
    CpuMax::for_cpus(cap)
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
