//! The planner: ordering and selection per priority level (see the module
//! docs of [`awm`](super) for the algorithm and its cost).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::recipe::RecipeError;
use super::schedule::{self, BlockInfo, Outcome, Schedule};
use super::score::{self, GoalShift, PolicyError, PolicyParams, Score, Weights};
use super::{AppId, AppState, IslandCapacity};
use crate::num::saturating_u64;
use crate::Name;

mod grow;

/// Milli-CPUs per CPU: CPU is accounted in integers.
const MILLI: f64 = 1000.0;

/// CPUs a pair needs, in milli-CPUs, rounded up (with slack for the
/// rounding noise of decimal quotas such as 1.1); at least 1 for any
/// positive quota, 0 for none.
pub(super) fn need_millis(cpus: f64) -> u64 {
    if cpus.is_nan() || cpus <= 0.0 {
        return 0;
    }
    // Integer ceiling: `f64::ceil` is a libm call on baseline x86-64.
    let x = cpus * MILLI - 1e-6;
    let t = saturating_u64(x);
    let t = if (t as f64) < x { t + 1 } else { t };
    t.max(1)
}

/// CPUs an island has, in milli-CPUs, rounded down.
pub(super) fn cap_millis(cpus: f64) -> u64 {
    saturating_u64((cpus * MILLI + 1e-6).floor())
}

/// An index into (or a count of) the planner's islands, applications,
/// modes or bitset words, as the `u32` it stores. It always fits: `plan`
/// refuses more than `u32::MAX / 2` islands, and 2^32 applications, modes
/// or `u64` bitset words would be at least 32 GiB of input in memory.
#[inline]
pub(super) fn ix(n: usize) -> u32 {
    u32::try_from(n)
        .expect("planner indexes fit in u32 (islands checked on entry, the rest bounded by memory)")
}

/// FNV-1a: island names are short and trusted, SipHash is not needed.
#[derive(Default)]
pub(super) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// Island name to index.
pub(super) type Index<'a> = HashMap<&'a str, u32, BuildHasherDefault<Fnv>>;

/// Why a plan could not be made (the input is inconsistent).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// Two applications with the same id.
    #[error("app {app}: listed twice")]
    DuplicateApp {
        /// The id.
        app: AppId,
    },
    /// Two islands with the same name.
    #[error("island {name}: listed twice")]
    DuplicateIsland {
        /// The name.
        name: Name,
    },
    /// An island's CPUs negative, not finite, or absurdly large.
    #[error("island {name}: cpus = {cpus}: must be a finite number of CPUs between 0 and 1e6")]
    IslandCpus {
        /// The island.
        name: Name,
        /// The value.
        cpus: f64,
    },
    /// More islands than the planner indexes.
    #[error("{count} islands: at most {max} are supported")]
    TooManyIslands {
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// An application's recipe is invalid.
    #[error("app {app}: {source}")]
    Recipe {
        /// The application.
        app: AppId,
        /// What is wrong.
        #[source]
        source: RecipeError,
    },
}

/// The allocation policy: weights and parameters, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Planner {
    weights: Weights,
    params: PolicyParams,
    /// Watts a charged CPU draws, for modes whose recipe gives no power
    /// (see [`score::mode_power`]).
    watts_per_cpu: f64,
}

impl Default for Planner {
    fn default() -> Self {
        Self {
            weights: Weights::default(),
            params: PolicyParams::default(),
            watts_per_cpu: 1.0,
        }
    }
}

/// One island during a run.
struct Isl {
    cap: u64,
    cap_mem: u64,
    used: u64,
    used_mem: u64,
    class: u32,
    /// Position in its class's order.
    pos: u32,
}

/// Islands of equal CPU capacity, sorted by (CPU in use, index).
struct Class {
    cap: u64,
    order: Vec<u32>,
}

/// Usage during a run.
struct State {
    isl: Vec<Isl>,
    classes: Vec<Class>,
    free: u64,
    free_mem: u128,
    words: usize,
}

fn allowed_in(bits: Option<&[u64]>, y: u32) -> bool {
    bits.is_none_or(|b| b[(y / 64) as usize] >> (y % 64) & 1 == 1)
}

impl State {
    fn new(islands: &[IslandCapacity]) -> Self {
        let mut isl: Vec<Isl> = islands
            .iter()
            .map(|i| Isl {
                cap: cap_millis(i.cpus),
                cap_mem: i.memory_bytes,
                used: 0,
                used_mem: 0,
                class: 0,
                pos: 0,
            })
            .collect();
        let mut caps: Vec<u64> = isl.iter().map(|i| i.cap).collect();
        caps.sort_unstable();
        caps.dedup();
        let mut classes: Vec<Class> = caps
            .iter()
            .map(|&cap| Class {
                cap,
                order: Vec::new(),
            })
            .collect();
        for (y, i) in isl.iter_mut().enumerate() {
            let c = caps.binary_search(&i.cap).unwrap_or(0);
            i.class = ix(c);
            i.pos = ix(classes[c].order.len());
            classes[c].order.push(ix(y));
        }
        let free = isl.iter().map(|i| i.cap).sum();
        let free_mem = isl.iter().map(|i| u128::from(i.cap_mem)).sum();
        Self {
            isl,
            classes,
            free,
            free_mem,
            words: islands.len().div_ceil(64),
        }
    }

    fn fits(&self, y: u32, need: u64, mem: u64) -> bool {
        let i = &self.isl[y as usize];
        need <= i.cap - i.used && mem <= i.cap_mem - i.used_mem
    }

    fn usage_after(&self, y: u32, need: u64) -> f64 {
        let i = &self.isl[y as usize];
        (i.used + need) as f64 / i.cap as f64
    }

    /// The allowed island with the lowest CPU usage after taking `need` and
    /// `mem`, among those that fit; ties to the lowest index.
    fn best(&self, need: u64, mem: u64, allowed: Option<&[u64]>) -> Option<(u32, f64)> {
        let mut best: Option<(u32, f64)> = None;
        for c in &self.classes {
            if c.cap < need {
                continue;
            }
            for &y in &c.order {
                let i = &self.isl[y as usize];
                if !allowed_in(allowed, y) || mem > i.cap_mem - i.used_mem {
                    continue;
                }
                if need > c.cap - i.used {
                    // Every later island of the class uses at least as much.
                    break;
                }
                let u = (i.used + need) as f64 / c.cap as f64;
                if best.is_none_or(|(by, bu)| u < bu || (u == bu && y < by)) {
                    best = Some((y, u));
                }
                break;
            }
        }
        best
    }

    fn take(&mut self, y: u32, need: u64, mem: u64) {
        let i = &mut self.isl[y as usize];
        i.used += need;
        i.used_mem += mem;
        self.free -= need;
        self.free_mem -= u128::from(mem);
        let (c, mut p) = (i.class as usize, i.pos as usize);
        let key = (i.used, y);
        let order = &mut self.classes[c].order;
        while p + 1 < order.len() {
            let z = order[p + 1];
            if (self.isl[z as usize].used, z) < key {
                order[p] = z;
                self.isl[z as usize].pos = ix(p);
                p += 1;
            } else {
                break;
            }
        }
        order[p] = y;
        self.isl[y as usize].pos = ix(p);
    }
}

impl State {
    /// Gives back what [`take`](Self::take) took.
    fn give(&mut self, y: u32, need: u64, mem: u64) {
        let i = &mut self.isl[y as usize];
        i.used -= need;
        i.used_mem -= mem;
        self.free += need;
        self.free_mem += u128::from(mem);
        let (c, mut p) = (i.class as usize, i.pos as usize);
        let key = (i.used, y);
        let order = &mut self.classes[c].order;
        while p > 0 {
            let z = order[p - 1];
            if (self.isl[z as usize].used, z) > key {
                order[p] = z;
                self.isl[z as usize].pos = ix(p);
                p -= 1;
            } else {
                break;
            }
        }
        order[p] = y;
        self.isl[y as usize].pos = ix(p);
    }
}

/// A mode, prepared for a run.
struct ModeP {
    id: u8,
    need: u64,
    mem: u64,
    value: f64,
    reconfig: f64,
    /// `E`, its power index.
    power: f64,
    /// Offset of its allowed-island bitset, if constrained.
    allowed: Option<u32>,
}

/// An application, prepared for a run.
struct AppP {
    input: u32,
    id: AppId,
    priority: u8,
    aging: f64,
    first: u32,
    count: u32,
    /// Flat index of its current mode, if the recipe still has it.
    cur_mode: Option<u32>,
    /// Index of its current island, if the platform still has it.
    cur_island: Option<u32>,
    running: bool,
    /// `min(1, |goal gap|)`.
    gap_strength: f64,
    /// It reported more than it needs (a negative goal gap).
    wants_less: bool,
}

/// The applications of a run, flattened.
struct Prepared {
    apps: Vec<AppP>,
    /// All modes, each application's sorted by id.
    modes: Vec<ModeP>,
    /// Allowed-island bitsets, `words` per constrained mode.
    bits: Vec<u64>,
}

/// An application's place in its level's order.
struct Entry {
    /// 0: running, its current pair reserved; 1: running, pair lost;
    /// 2: new or waiting.
    tier: u8,
    key: f64,
    id: AppId,
    ai: u32,
    /// Its reserved current pair: island, milli-CPUs, bytes.
    reserved: Option<(u32, u64, u64)>,
}

/// A chosen pair.
#[derive(Clone, Copy)]
struct Pick {
    mode: u32,
    island: u32,
    score: Score,
}

impl Planner {
    /// A policy with these weights and parameters.
    pub fn new(weights: Weights, params: PolicyParams) -> Result<Self, PolicyError> {
        weights.validate()?;
        params.validate()?;
        Ok(Self {
            weights,
            params,
            watts_per_cpu: 1.0,
        })
    }

    /// Sets the watts a charged CPU draws (learned from RAPL), for modes
    /// whose recipe gives no `power_watts`. Ignored unless finite and above
    /// 0. Only matters when the power weight is above 0.
    pub fn set_watts_per_cpu(&mut self, watts: f64) {
        if watts.is_finite() && watts > 0.0 {
            self.watts_per_cpu = watts;
        }
    }

    /// The watts a charged CPU is assumed to draw.
    pub fn watts_per_cpu(&self) -> f64 {
        self.watts_per_cpu
    }

    /// The weights.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// The parameters.
    pub fn params(&self) -> &PolicyParams {
        &self.params
    }

    /// Plans a new schedule for `apps` (every active application) on
    /// `islands`, from scratch: all capacity is free, current pairs count
    /// only through the reconfiguration and migration costs and hysteresis.
    /// Deterministic: the same input gives the same schedule; ties go to
    /// the lower application id, mode id and island index.
    pub fn plan(
        &self,
        islands: &[IslandCapacity],
        apps: &[AppState],
    ) -> Result<Schedule, PlanError> {
        if islands.len() > u32::MAX as usize / 2 {
            return Err(PlanError::TooManyIslands {
                count: islands.len(),
                max: u32::MAX as usize / 2,
            });
        }
        let mut index: Index = Index::with_capacity_and_hasher(islands.len(), Default::default());
        for (y, i) in islands.iter().enumerate() {
            if !i.cpus.is_finite() || i.cpus < 0.0 || i.cpus > 1e6 {
                return Err(PlanError::IslandCpus {
                    name: i.name.clone(),
                    cpus: i.cpus,
                });
            }
            if index.insert(i.name.as_str(), ix(y)).is_some() {
                return Err(PlanError::DuplicateIsland {
                    name: i.name.clone(),
                });
            }
        }
        let mut ids: Vec<AppId> = apps.iter().map(|a| a.app).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(PlanError::DuplicateApp { app: w[0] });
        }

        let mut st = State::new(islands);
        let Prepared {
            apps: prepared,
            modes,
            bits,
        } = self.prepare(apps, &index, st.words)?;
        let mut outcomes: Vec<Option<Outcome>> = apps.iter().map(|_| None).collect();

        let mut by_level: Vec<u32> = (0..ix(prepared.len())).collect();
        by_level.sort_by_key(|&i| (prepared[i as usize].priority, prepared[i as usize].id));
        let mut order: Vec<Entry> = Vec::new();
        for level in by_level
            .chunk_by(|&x, &y| prepared[x as usize].priority == prepared[y as usize].priority)
        {
            // Ordering: each application's best pair in the state the level
            // starts from, plus aging; running applications first.
            order.clear();
            let n = level.len() as f64;
            let share = (st.free as f64 / MILLI / n, st.free_mem as f64 / n);
            for &ai in level {
                let a = &prepared[ai as usize];
                match self.eval(a, &modes, &bits, &st, share) {
                    Some(p) => {
                        let bonus = (self.params.aging * a.aging).min(self.params.aging_cap);
                        order.push(Entry {
                            tier: if a.running { 0 } else { 2 },
                            key: p.score.total + bonus,
                            id: a.id,
                            ai,
                            reserved: None,
                        });
                    }
                    None => {
                        outcomes[a.input as usize] =
                            Some(Outcome::Blocked(block_info(a, &modes, &bits, &st)));
                    }
                }
            }
            order.sort_by(|x, y| {
                (x.tier.cmp(&y.tier))
                    .then(y.key.total_cmp(&x.key))
                    .then(x.id.cmp(&y.id))
            });
            // Incumbency: reserve the current pairs of the running
            // applications, in that order, so that none of them loses its
            // pair to a peer of its level; those whose pair no longer fits
            // go after the reserved ones.
            let mut reserved = (0u64, 0u128);
            for e in order.iter_mut().filter(|e| e.tier == 0) {
                let a = &prepared[e.ai as usize];
                e.reserved = a.cur_mode.zip(a.cur_island).and_then(|(mi, y)| {
                    let m = &modes[mi as usize];
                    let allowed = m.allowed.map(|o| &bits[o as usize..o as usize + st.words]);
                    (allowed_in(allowed, y) && st.fits(y, m.need, m.mem)).then(|| {
                        st.take(y, m.need, m.mem);
                        (y, m.need, m.mem)
                    })
                });
                match e.reserved {
                    Some((_, c, mem)) => {
                        reserved.0 += c;
                        reserved.1 += u128::from(mem);
                    }
                    None => e.tier = 1,
                }
            }
            order.sort_by_key(|e| e.tier);
            // Selection: in that order, each takes its best pair now.
            let mut remaining = order.len() as f64;
            for e in &order {
                let a = &prepared[e.ai as usize];
                if let Some((y, c, mem)) = e.reserved {
                    st.give(y, c, mem);
                    reserved.0 -= c;
                    reserved.1 -= u128::from(mem);
                }
                // The fair share counts reserved resources as free: they are
                // the level's to share.
                let share = (
                    (st.free + reserved.0) as f64 / MILLI / remaining,
                    (st.free_mem + reserved.1) as f64 / remaining,
                );
                remaining -= 1.0;
                outcomes[a.input as usize] = Some(match self.eval(a, &modes, &bits, &st, share) {
                    Some(p) => {
                        let m = &modes[p.mode as usize];
                        st.take(p.island, m.need, m.mem);
                        Outcome::Granted {
                            mode: m.id,
                            island: p.island,
                            score: p.score,
                        }
                    }
                    None => Outcome::Blocked(block_info(a, &modes, &bits, &st)),
                });
            }
        }
        let mut outcomes: Vec<Outcome> = outcomes
            .into_iter()
            .map(|o| o.expect("every application is planned"))
            .collect();
        if self.params.grow_into_idle
            && outcomes
                .iter()
                .all(|o| matches!(o, Outcome::Granted { .. }))
        {
            self.grow(&prepared, &modes, &bits, &by_level, &mut st, &mut outcomes);
        }
        Ok(schedule::build(apps, islands, &index, &outcomes))
    }

    /// Validates the recipes and flattens what the evaluation needs.
    fn prepare(
        &self,
        apps: &[AppState],
        index: &Index,
        words: usize,
    ) -> Result<Prepared, PlanError> {
        let mut prepared = Vec::with_capacity(apps.len());
        let mut modes: Vec<ModeP> = Vec::with_capacity(apps.len() * 8);
        let mut bits: Vec<u64> = Vec::new();
        let mut sorted: Vec<usize> = Vec::new();
        for (input, a) in apps.iter().enumerate() {
            let r = &a.recipe;
            r.validate()
                .map_err(|source| PlanError::Recipe { app: a.app, source })?;
            let cur = a.current.as_ref();
            let cur_recipe_mode = cur.and_then(|c| r.mode(c.mode));
            let shift = cur_recipe_mode.map(|m| {
                let qs = r.modes.iter().map(|m| m.needs.cpu_quota);
                GoalShift {
                    gap: a.goal_gap,
                    current_quota: m.needs.cpu_quota,
                    min_quota: qs.clone().fold(f64::INFINITY, f64::min),
                    max_quota: qs.fold(0.0, f64::max),
                }
            });
            sorted.clear();
            sorted.extend(0..r.modes.len());
            if !r.modes.is_sorted_by_key(|m| m.id) {
                sorted.sort_unstable_by_key(|&i| r.modes[i].id);
            }
            let first = ix(modes.len());
            let mut cur_mode = None;
            let watts = |m: &super::WorkingMode| {
                score::mode_power(m.power_watts, m.needs.charged_cpus(), self.watts_per_cpu)
            };
            let max_watts = r.modes.iter().map(watts).fold(0.0, f64::max);
            // Modes of a recipe often share one list of allowed islands.
            let mut last: Option<(&[Name], u32)> = None;
            for &i in &sorted {
                let m = &r.modes[i];
                if cur.is_some_and(|c| c.mode == m.id) {
                    cur_mode = Some(ix(modes.len()));
                }
                let allowed = m.needs.islands.as_deref().map(|list| match last {
                    Some((l, off)) if l == list => off,
                    _ => {
                        let off = bits.len();
                        bits.resize(off + words, 0);
                        for n in list {
                            if let Some(&y) = index.get(n.as_str()) {
                                bits[off + (y / 64) as usize] |= 1 << (y % 64);
                            }
                        }
                        last = Some((list, ix(off)));
                        ix(off)
                    }
                });
                modes.push(ModeP {
                    id: m.id,
                    need: need_millis(m.needs.charged_cpus()),
                    mem: m.needs.memory_bytes,
                    value: score::value(m.value, m.needs.cpu_quota, shift.as_ref()),
                    reconfig: score::reconfiguration(cur.map(|c| c.mode == m.id), a.goal_gap),
                    power: score::power(watts(m), max_watts),
                    allowed,
                });
            }
            prepared.push(AppP {
                input: ix(input),
                id: a.app,
                priority: r.priority,
                aging: f64::from(a.waiting),
                first,
                count: ix(r.modes.len()),
                cur_mode,
                cur_island: cur.and_then(|c| index.get(c.island.as_str()).copied()),
                running: cur.is_some(),
                gap_strength: GoalShift::strength(a.goal_gap),
                wants_less: a.goal_gap < 0.0,
            });
        }
        Ok(Prepared {
            apps: prepared,
            modes,
            bits,
        })
    }

    /// The best pair of `a` in state `st`, with `share` the fair share
    /// (CPUs, bytes); `None` if no pair fits. Hysteresis: the current pair
    /// wins if it fits and is within the margin of the best (the margin
    /// shrinks as the goal gap grows).
    fn eval(
        &self,
        a: &AppP,
        modes: &[ModeP],
        bits: &[u64],
        st: &State,
        share: (f64, f64),
    ) -> Option<Pick> {
        let (w, p) = (&self.weights, &self.params);
        let mut best: Option<Pick> = None;
        let mut current: Option<Pick> = None;
        for mi in a.first..a.first + a.count {
            let m = &modes[mi as usize];
            let allowed = m.allowed.map(|o| &bits[o as usize..o as usize + st.words]);
            let ratio = score::fair_ratio(m.need as f64 / MILLI, m.mem as f64, share.0, share.1);
            let fairness = score::fairness(ratio, p);
            let mut consider = |y: u32, usage: f64| {
                let same_island = a.running.then_some(Some(y) == a.cur_island);
                let mut s = Score {
                    total: 0.0,
                    value: m.value,
                    reconfig: m.reconfig,
                    migration: score::migration(same_island),
                    balance: score::balance(usage, p),
                    fairness,
                    power: m.power,
                    idle: false,
                };
                s.total = w.combine(&s);
                let pick = Pick {
                    mode: mi,
                    island: y,
                    score: s,
                };
                if a.cur_mode == Some(mi) && a.cur_island == Some(y) {
                    current = Some(pick);
                }
                let better = best.is_none_or(|b| {
                    s.total > b.score.total
                        || (s.total == b.score.total
                            && (m.id, y) < (modes[b.mode as usize].id, b.island))
                });
                if better {
                    best = Some(pick);
                }
            };
            let top = st.best(m.need, m.mem, allowed);
            if let Some((y, u)) = top {
                consider(y, u);
            }
            if let Some(y0) = a.cur_island {
                if top.map(|t| t.0) != Some(y0)
                    && allowed_in(allowed, y0)
                    && st.fits(y0, m.need, m.mem)
                {
                    consider(y0, st.usage_after(y0, m.need));
                }
            }
        }
        let margin = p.hysteresis * (1.0 - a.gap_strength);
        match (current, best) {
            (Some(c), Some(b)) if c.score.total + margin >= b.score.total => Some(c),
            _ => best,
        }
    }
}

/// Why `a` cannot run in state `st`.
fn block_info(a: &AppP, modes: &[ModeP], bits: &[u64], st: &State) -> BlockInfo {
    let ms = &modes[a.first as usize..(a.first + a.count) as usize];
    let mut info = BlockInfo {
        smallest_cpus: ms.iter().map(|m| m.need).min().unwrap_or(0) as f64 / MILLI,
        smallest_memory: ms.iter().map(|m| m.mem).min().unwrap_or(0),
        free_cpus: 0.0,
        free_memory: 0,
    };
    // Islands some mode may use: all, or the union of the modes' lists.
    let union: Option<Vec<u64>> = ms.iter().try_fold(vec![0u64; st.words], |mut acc, m| {
        let o = m.allowed? as usize;
        for (a, b) in acc.iter_mut().zip(&bits[o..o + st.words]) {
            *a |= b;
        }
        Some(acc)
    });
    let mut free = 0;
    for (y, i) in st.isl.iter().enumerate() {
        if allowed_in(union.as_deref(), ix(y)) {
            free = free.max(i.cap - i.used);
            info.free_memory = info.free_memory.max(i.cap_mem - i.used_mem);
        }
    }
    info.free_cpus = free as f64 / MILLI;
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milli_cpus_round_needs_up_and_capacities_down() {
        assert_eq!(need_millis(1.1), 1100);
        assert_eq!(need_millis(0.7), 700);
        assert_eq!(need_millis(1.0005), 1001);
        assert_eq!(need_millis(1e-9), 1);
        assert_eq!(need_millis(0.0), 0);
        assert_eq!(need_millis(f64::NAN), 0);
        assert_eq!(cap_millis(3.3), 3300);
        assert_eq!(cap_millis(1.0005), 1000);
        assert_eq!(cap_millis(0.0), 0);
    }

    #[test]
    fn island_classes_stay_sorted_by_usage() {
        let n = |s: &str| Name::new(s).unwrap();
        let isl = [
            IslandCapacity::new(n("a"), 4.0, 100),
            IslandCapacity::new(n("b"), 8.0, 100),
            IslandCapacity::new(n("c"), 4.0, 100),
            IslandCapacity::new(n("d"), 4.0, 100),
        ];
        let mut st = State::new(&isl);
        assert_eq!(st.classes.len(), 2);
        // Lowest usage after the grant: the bigger island.
        assert_eq!(st.best(1000, 0, None), Some((1, 0.125)));
        // Equal usage: lowest index first.
        assert_eq!(st.best(5000, 0, None), Some((1, 0.625)));
        assert_eq!(st.best(4000, 0, Some(&[0b1101])), Some((0, 1.0)));
        st.take(0, 1000, 0);
        st.take(1, 4000, 0);
        // a is at 1/4, b at 4/8: c (empty) is best, then d.
        assert_eq!(st.best(1000, 0, None), Some((2, 0.25)));
        st.take(2, 2000, 0);
        assert_eq!(st.best(1000, 0, None), Some((3, 0.25)));
        // Memory rules an island out, constraints too.
        st.take(3, 500, 90);
        assert_eq!(st.best(500, 20, None), Some((0, 0.375)));
        let only_c = [1u64 << 2];
        assert_eq!(st.best(500, 0, Some(&only_c)), Some((2, 0.625)));
        st.give(2, 2000, 0);
        assert_eq!(st.best(500, 0, None), Some((2, 0.125)));
        for c in &st.classes {
            let keys: Vec<_> = c
                .order
                .iter()
                .map(|&y| (st.isl[y as usize].used, y))
                .collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
            for (p, &y) in c.order.iter().enumerate() {
                assert_eq!(st.isl[y as usize].pos as usize, p);
            }
        }
        // Nothing fits: None.
        assert_eq!(st.best(9000, 0, None), None);
        assert_eq!(st.free, 20_000 - 5500);
    }
}
