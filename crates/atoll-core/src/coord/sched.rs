//! Scheduler stubs: how an island's policy turns tune and trigger into knob
//! changes (rules 1–3 of the [module docs](super)).

use std::time::Duration;

use super::effect::{BoostKind, Change};
use super::message::{Limit, NackReason, Op};
use super::types::{Direction, Resource, UnitKnobs};
use super::{CoordConfig, MAX_WEIGHT, MIN_WEIGHT};
use crate::num::{saturating_u32, saturating_u64};
use crate::spec::{RealtimePolicy, SchedPolicy};
use crate::Name;

/// Tolerance for comparing CPU amounts.
pub(crate) const EPS: f64 = 1e-9;

/// Rounds CPUs to thousandths, so repeated steps do not drift.
pub(crate) fn milli(cpus: f64) -> f64 {
    (cpus * 1000.0).round() / 1000.0
}

/// A boost in force.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ActiveBoost {
    /// When it ends.
    pub until: Duration,
    /// Boosted with the rest of its overlay (`trigger_overlay`): such
    /// boosts of one overlay ending together take one slot.
    pub together: bool,
}

/// A unit as its coordinator tracks it.
#[derive(Clone, Debug)]
pub(crate) struct UnitState {
    pub name: Name,
    /// Steady knobs (a boost is on top of these).
    pub knobs: UnitKnobs,
    /// Configured knobs.
    pub base: UnitKnobs,
    /// Its overlay and that overlay's priority.
    pub overlay: Option<(Name, u8)>,
    pub boost: Option<ActiveBoost>,
    /// No trigger before this.
    pub cooldown_until: Duration,
}

impl UnitState {
    pub fn new(name: Name, knobs: UnitKnobs) -> Self {
        Self {
            name,
            knobs,
            base: knobs,
            overlay: None,
            boost: None,
            cooldown_until: Duration::ZERO,
        }
    }

    /// The boost in force at `now`, if any.
    pub fn boosted(&self, now: Duration) -> Option<Duration> {
        self.boost.map(|b| b.until).filter(|u| *u > now)
    }

    pub fn in_overlay(&self, overlay: &Name) -> bool {
        self.overlay.as_ref().is_some_and(|(o, _)| o == overlay)
    }
}

/// What a stub needs to know about the island.
pub(crate) struct IslandView<'a> {
    pub name: &'a Name,
    pub policy: &'a SchedPolicy,
    /// CPUs it holds now.
    pub cpus: u32,
    /// Its share of the platform CPU cap.
    pub cap: Option<f64>,
    /// Its memory, bytes (0: unknown).
    pub memory_bytes: u64,
}

impl IslandView<'_> {
    /// Most CPU time one unit can use: the island's CPUs, or its cap.
    fn cpu_limit(&self) -> f64 {
        let cpus = f64::from(self.cpus);
        self.cap.map_or(cpus, |c| c.min(cpus))
    }

    fn unsupported(&self, resource: Resource, op: Op) -> NackReason {
        NackReason::Unsupported { resource, op }
    }

    fn at_capacity(&self, unit: &Name, resource: Resource, limit: Limit) -> NackReason {
        NackReason::AtCapacity {
            island: self.name.clone(),
            unit: unit.clone(),
            resource,
            limit,
        }
    }

    /// What a boost writes to a unit with `knobs`, or `None` if the policy
    /// has no boost.
    pub fn boost_kind(&self, knobs: &UnitKnobs, cfg: &CoordConfig) -> Option<BoostKind> {
        match self.policy {
            SchedPolicy::Fair | SchedPolicy::Batch => Some(BoostKind::Weight {
                weight: cfg.boost_weight.max(knobs.weight),
            }),
            SchedPolicy::Realtime(rt) => Some(BoostKind::RtPriority {
                priority: rt.priority_max,
            }),
            SchedPolicy::Idle => None,
        }
    }

    /// The steady value a boost overrides, to write back when it ends.
    pub fn restore_kind(&self, knobs: &UnitKnobs) -> BoostKind {
        match self.policy {
            SchedPolicy::Realtime(_) => BoostKind::RtPriority {
                priority: knobs.rt_priority,
            },
            _ => BoostKind::Weight {
                weight: knobs.weight,
            },
        }
    }
}

/// One tune step of `units[i]`. `Ok(None)`: the knob changed but nothing is
/// written now (the weight of a boosted unit: the boost's end writes it).
pub(crate) fn tune(
    v: &IslandView<'_>,
    units: &mut [UnitState],
    i: usize,
    resource: Resource,
    dir: Direction,
    now: Duration,
    cfg: &CoordConfig,
) -> Result<Option<Change>, NackReason> {
    match resource {
        Resource::Cores | Resource::Bandwidth => Err(v.unsupported(resource, Op::Tune)),
        Resource::Memory => tune_memory(v, &mut units[i], dir, cfg).map(Some),
        Resource::CpuTime => match v.policy {
            SchedPolicy::Fair | SchedPolicy::Batch => tune_fair(v, units, i, dir, now, cfg),
            SchedPolicy::Realtime(rt) => tune_rt(v, rt, units, i, dir, cfg).map(Some),
            SchedPolicy::Idle => Err(v.unsupported(resource, Op::Tune)),
        },
    }
}

fn tune_fair(
    v: &IslandView<'_>,
    units: &mut [UnitState],
    i: usize,
    dir: Direction,
    now: Duration,
    cfg: &CoordConfig,
) -> Result<Option<Change>, NackReason> {
    let others: u64 = units
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, u)| u64::from(u.knobs.weight))
        .sum();
    let limit = v.cpu_limit();
    let u = &mut units[i];
    let set_cap = |u: &mut UnitState, cpus: Option<f64>| {
        u.knobs.cap = cpus;
        Change::SetCap {
            island: v.name.clone(),
            unit: u.name.clone(),
            cpus,
        }
    };
    let w = u.knobs.weight;
    let weight = match (dir, u.knobs.cap) {
        (Direction::Up, Some(c)) => {
            let next = milli(c + cfg.cap_step);
            let cpus = (next < limit - EPS).then_some(next);
            return Ok(Some(set_cap(u, cpus)));
        }
        (Direction::Down, Some(c)) => {
            if c <= cfg.cap_step + EPS {
                return Err(NackReason::AtMinimum {
                    unit: u.name.clone(),
                    resource: Resource::CpuTime,
                });
            }
            let next = milli((c - cfg.cap_step).max(cfg.cap_step));
            return Ok(Some(set_cap(u, Some(next))));
        }
        (Direction::Up, None) => {
            if w >= MAX_WEIGHT {
                return Err(v.at_capacity(
                    &u.name,
                    Resource::CpuTime,
                    Limit::MaxWeight { weight: MAX_WEIGHT },
                ));
            }
            if others == 0 {
                return Err(v.at_capacity(
                    &u.name,
                    Resource::CpuTime,
                    Limit::WholeIsland { cpus: v.cpus },
                ));
            }
            saturating_u32((f64::from(w) * cfg.weight_step).ceil())
                .max(w + 1)
                .min(MAX_WEIGHT)
        }
        (Direction::Down, None) => {
            if w <= MIN_WEIGHT {
                return Err(NackReason::AtMinimum {
                    unit: u.name.clone(),
                    resource: Resource::CpuTime,
                });
            }
            saturating_u32((f64::from(w) / cfg.weight_step).floor())
                .min(w - 1)
                .max(MIN_WEIGHT)
        }
    };
    u.knobs.weight = weight;
    if u.boosted(now).is_some() {
        return Ok(None);
    }
    Ok(Some(Change::SetWeight {
        island: v.name.clone(),
        unit: u.name.clone(),
        weight,
    }))
}

/// One budget step, in µs, of a realtime island.
pub(crate) fn rt_step_us(rt: &RealtimePolicy, cfg: &CoordConfig) -> u64 {
    saturating_u64((cfg.rt_step * rt.period_us as f64).round()).max(1)
}

fn tune_rt(
    v: &IslandView<'_>,
    rt: &RealtimePolicy,
    units: &mut [UnitState],
    i: usize,
    dir: Direction,
    cfg: &CoordConfig,
) -> Result<Change, NackReason> {
    let step = rt_step_us(rt, cfg);
    let used: u64 = units.iter().map(|u| u.knobs.rt_runtime_us).sum();
    let u = &mut units[i];
    let cur = u.knobs.rt_runtime_us;
    let next = match dir {
        Direction::Up => {
            let room = rt.runtime_us.saturating_sub(used);
            if room == 0 {
                return Err(v.at_capacity(
                    &u.name,
                    Resource::CpuTime,
                    Limit::RtBudget {
                        runtime_us: rt.runtime_us,
                    },
                ));
            }
            cur + step.min(room)
        }
        Direction::Down => {
            if cur <= step {
                return Err(NackReason::AtMinimum {
                    unit: u.name.clone(),
                    resource: Resource::CpuTime,
                });
            }
            cur - step
        }
    };
    u.knobs.rt_runtime_us = next;
    Ok(Change::SetRtBudget {
        island: v.name.clone(),
        unit: u.name.clone(),
        runtime_us: next,
    })
}

fn tune_memory(
    v: &IslandView<'_>,
    u: &mut UnitState,
    dir: Direction,
    cfg: &CoordConfig,
) -> Result<Change, NackReason> {
    let total = v.memory_bytes;
    if total == 0 {
        return Err(v.unsupported(Resource::Memory, Op::Tune));
    }
    let cur = u.knobs.memory_high.unwrap_or(total).min(total);
    let next = match dir {
        Direction::Up => {
            if cur >= total {
                return Err(v.at_capacity(
                    &u.name,
                    Resource::Memory,
                    Limit::IslandMemory { bytes: total },
                ));
            }
            let n = cur.saturating_add(cfg.memory_step);
            (n < total).then_some(n)
        }
        Direction::Down => {
            if cur <= cfg.memory_step {
                return Err(NackReason::AtMinimum {
                    unit: u.name.clone(),
                    resource: Resource::Memory,
                });
            }
            Some(cur - cfg.memory_step)
        }
    };
    u.knobs.memory_high = next;
    Ok(Change::SetMemoryHigh {
        island: v.name.clone(),
        unit: u.name.clone(),
        bytes: next,
    })
}

/// Starts a boost of `units[i]` (rule 3).
pub(crate) fn trigger(
    v: &IslandView<'_>,
    units: &mut [UnitState],
    i: usize,
    resource: Resource,
    now: Duration,
    cfg: &CoordConfig,
    together: bool,
) -> Result<Change, NackReason> {
    if resource != Resource::CpuTime {
        return Err(v.unsupported(resource, Op::Trigger));
    }
    let Some(kind) = v.boost_kind(&units[i].knobs, cfg) else {
        return Err(v.unsupported(resource, Op::Trigger));
    };
    let u = &units[i];
    if let Some(until) = u.boosted(now) {
        return Err(NackReason::AlreadyBoosted {
            unit: u.name.clone(),
            until,
        });
    }
    if now < u.cooldown_until {
        return Err(NackReason::CoolingDown {
            unit: u.name.clone(),
            until: u.cooldown_until,
        });
    }
    // Boosts of one overlay started together (`trigger_overlay`) take
    // one slot; any other boost takes one of its own.
    let until = now + cfg.boost_len;
    let own = u.overlay.as_ref().map(|(o, _)| o);
    let mut slots: Vec<(Option<&Name>, Duration)> = Vec::new();
    let mut active = 0u32;
    let mut first_free = Duration::MAX;
    for w in units.iter() {
        let Some(b) = w.boost.filter(|b| now < b.until) else {
            continue;
        };
        first_free = first_free.min(b.until);
        let key = (w.overlay.as_ref().map(|(o, _)| o), b.until);
        if !b.together || !slots.contains(&key) {
            active += 1;
        }
        if b.together {
            slots.push(key);
        }
    }
    let shared = together && own.is_some() && slots.contains(&(own, until));
    if !shared && active >= cfg.max_boosts {
        return Err(NackReason::BoostSlotsBusy {
            island: v.name.clone(),
            until: first_free,
        });
    }
    let u = &mut units[i];
    u.boost = Some(ActiveBoost { until, together });
    u.cooldown_until = until + cfg.trigger_cooldown;
    Ok(Change::Boost {
        island: v.name.clone(),
        unit: u.name.clone(),
        kind,
        until,
    })
}

/// Whether `u`'s knob for `resource` is looser than configured.
pub(crate) fn above_base(policy: &SchedPolicy, u: &UnitState, resource: Resource) -> bool {
    let (k, b) = (&u.knobs, &u.base);
    match resource {
        Resource::Cores | Resource::Bandwidth => false,
        Resource::Memory => looser(
            k.memory_high.map(|v| v as f64),
            b.memory_high.map(|v| v as f64),
        ),
        Resource::CpuTime => match policy {
            SchedPolicy::Realtime(_) => k.rt_runtime_us > b.rt_runtime_us,
            SchedPolicy::Idle => false,
            _ => k.weight > b.weight || looser(k.cap, b.cap),
        },
    }
}

/// Whether limit `cur` is looser than `base` (`None` is no limit).
fn looser(cur: Option<f64>, base: Option<f64>) -> bool {
    match (cur, base) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(c), Some(b)) => c > b + EPS,
    }
}

/// Puts `u`'s knobs for `resource` (all of them for `None`) back to their
/// configured values; returns the writes. A boosted unit's weight is not
/// written: the end of the boost writes it.
pub(crate) fn reset_to_base(
    v: &IslandView<'_>,
    u: &mut UnitState,
    resource: Option<Resource>,
    now: Duration,
    out: &mut Vec<Change>,
) {
    let all = resource.is_none();
    let cpu = all || resource == Some(Resource::CpuTime);
    let (island, unit) = (v.name, &u.name);
    let (k, b) = (&mut u.knobs, &u.base);
    let boosted = u.boost.is_some_and(|x| x.until > now);
    if cpu {
        if k.weight != b.weight {
            k.weight = b.weight;
            if !boosted {
                out.push(Change::SetWeight {
                    island: island.clone(),
                    unit: unit.clone(),
                    weight: b.weight,
                });
            }
        }
        if k.cap != b.cap {
            k.cap = b.cap;
            out.push(Change::SetCap {
                island: island.clone(),
                unit: unit.clone(),
                cpus: b.cap,
            });
        }
        if k.rt_runtime_us != b.rt_runtime_us {
            k.rt_runtime_us = b.rt_runtime_us;
            out.push(Change::SetRtBudget {
                island: island.clone(),
                unit: unit.clone(),
                runtime_us: b.rt_runtime_us,
            });
        }
    }
    if (all || resource == Some(Resource::Memory)) && k.memory_high != b.memory_high {
        k.memory_high = b.memory_high;
        out.push(Change::SetMemoryHigh {
            island: island.clone(),
            unit: unit.clone(),
            bytes: b.memory_high,
        });
    }
}
