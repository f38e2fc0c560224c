//! The planner's output: grants, blocked applications, and the changes the
//! daemon applies, frees first, each rendering its reason.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::plan::{cap_millis, ix, need_millis, Index};
use super::score::Score;
use super::{AppId, AppState, IslandCapacity};
use crate::num::saturating_u32;
use crate::Name;

/// A new schedule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// One grant per application that runs, sorted by application id.
    pub grants: Vec<Grant>,
    /// Applications that wait (suspended) because not even their smallest
    /// mode fits, sorted by id.
    pub blocked: Vec<AppId>,
    /// What to do to get from the current pairs to this schedule, in order:
    /// releases and waits, shrinks, moves and reshapes, grows, new grants.
    pub changes: Vec<Change>,
}

impl Schedule {
    /// The grant of `app`, if it runs.
    pub fn grant(&self, app: AppId) -> Option<&Grant> {
        self.grants
            .binary_search_by_key(&app, |g| g.app)
            .ok()
            .map(|i| &self.grants[i])
    }

    /// Whether `app` waits.
    pub fn is_blocked(&self, app: AppId) -> bool {
        self.blocked.binary_search(&app).is_ok()
    }
}

/// An application's working mode and island in the new schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    /// The application.
    pub app: AppId,
    /// Its working mode.
    pub mode: u8,
    /// Its island.
    pub island: Name,
    /// CPU quota, CPUs (what goes to `cpu.max`).
    pub cpu_quota: f64,
    /// Whole CPUs of its own (`ceil(cpu_quota)`), 0 when it shares.
    pub exclusive_cpus: u32,
    /// The mode's parallelism hint.
    pub threads: Option<u32>,
    /// Memory limit, bytes.
    pub memory_bytes: u64,
    /// Why this pair: its contributions.
    pub score: Score,
}

impl Grant {
    /// CPUs charged on the island.
    pub fn charged_cpus(&self) -> f64 {
        if self.exclusive_cpus > 0 {
            f64::from(self.exclusive_cpus)
        } else {
            self.cpu_quota
        }
    }
}

/// A pair with the resources it holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Working mode.
    pub mode: u8,
    /// Island.
    pub island: Name,
    /// CPUs charged (the quota, or whole CPUs when exclusive; 0 for a mode
    /// the recipe no longer has).
    pub cpus: f64,
    /// Memory, bytes.
    pub memory_bytes: u64,
}

/// What a change does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A running application is blocked: suspend it, free its resources.
    Release,
    /// A new or waiting application stays suspended (nothing to free).
    Wait,
    /// Another mode on the same island that needs no more of anything.
    Shrink,
    /// Another island (and maybe mode).
    Move,
    /// Another mode on the same island that needs more of one resource
    /// (CPU or memory) and less of the other.
    Reshape,
    /// Another mode on the same island that needs more of something.
    Grow,
    /// A new or waiting application starts (resume it).
    Grant,
}

/// Why an application waits.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockInfo {
    /// CPUs of its smallest mode.
    pub smallest_cpus: f64,
    /// Memory of its smallest mode (by memory).
    pub smallest_memory: u64,
    /// Most free CPUs on an island it may use, when it was blocked.
    pub free_cpus: f64,
    /// Most free memory on an island it may use.
    pub free_memory: u64,
}

/// One step from the current pairs to the new schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The application.
    pub app: AppId,
    /// Its recipe's name.
    pub name: Name,
    /// What happens.
    pub kind: ChangeKind,
    /// Its pair before (`None`: new or waiting).
    pub from: Option<Placement>,
    /// Its pair after (`None`: blocked).
    pub to: Option<Placement>,
    /// The new pair's score.
    pub score: Option<Score>,
    /// Why it waits.
    pub blocked: Option<BlockInfo>,
}

impl Change {
    /// The reason for the decision log (same as `Display`).
    pub fn reason(&self) -> String {
        self.to_string()
    }
}

/// `1.5 GiB`, `512 MiB`, `300 B`.
pub(super) fn bytes(b: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    if b == u64::MAX {
        return "unmetered memory".into();
    }
    for (u, n) in UNITS {
        if b >= n {
            return format!("{:.1} {u}", b as f64 / n as f64);
        }
    }
    format!("{b} B")
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "score {:.2} (V {:.2} Rr {:.2} Rm {:.2} L {:.2} F {:.2})",
            self.total, self.value, self.reconfig, self.migration, self.balance, self.fairness
        )?;
        if self.idle {
            write!(f, ", grown into idle capacity")?;
        }
        Ok(())
    }
}

impl fmt::Display for BlockInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "blocked: its smallest mode needs {} CPUs and {}; the most free island it may use has {} CPUs and {} free",
            self.smallest_cpus,
            bytes(self.smallest_memory),
            self.free_cpus,
            bytes(self.free_memory)
        )
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "app {} ({}): ", self.app, self.name)?;
        match (&self.from, &self.to) {
            (Some(a), None) => write!(
                f,
                "releases mode {} on island {} and waits",
                a.mode, a.island
            )?,
            (None, None) => write!(f, "waits")?,
            (None, Some(b)) => write!(
                f,
                "mode {} on island {} ({} CPUs, {})",
                b.mode,
                b.island,
                b.cpus,
                bytes(b.memory_bytes)
            )?,
            (Some(a), Some(b)) if a.island == b.island => write!(
                f,
                "mode {} → {} on island {} ({} → {} CPUs, {} → {})",
                a.mode,
                b.mode,
                b.island,
                a.cpus,
                b.cpus,
                bytes(a.memory_bytes),
                bytes(b.memory_bytes)
            )?,
            (Some(a), Some(b)) => write!(
                f,
                "mode {} on island {} → mode {} on island {} ({} → {} CPUs)",
                a.mode, a.island, b.mode, b.island, a.cpus, b.cpus
            )?,
        }
        if let Some(s) = &self.score {
            write!(f, ": {s}")?;
        }
        if let Some(b) = &self.blocked {
            write!(f, ": {b}")?;
        }
        Ok(())
    }
}

/// What the planner decided for one application.
pub(super) enum Outcome {
    /// It runs in `mode` on island `island` (index).
    Granted {
        /// Mode id.
        mode: u8,
        /// Island index.
        island: u32,
        /// Score.
        score: Score,
    },
    /// It waits.
    Blocked(BlockInfo),
}

/// Resources on an island: index, milli-CPUs, bytes.
type Held = (u32, u64, u64);

/// A change before it is rendered: small, so ordering moves little.
struct Step {
    app: AppId,
    input: u32,
    kind: ChangeKind,
    src: Option<Held>,
    dst: Option<Held>,
}

/// The current pair of `app` with its resources (CPUs charged, bytes): 0
/// for a mode the recipe no longer has.
fn current_of(app: &AppState) -> Option<(u8, &Name, f64, u64)> {
    let cur = app.current.as_ref()?;
    let (cpus, mem) = app
        .recipe
        .mode(cur.mode)
        .map_or((0.0, 0), |m| (m.needs.charged_cpus(), m.needs.memory_bytes));
    Some((cur.mode, &cur.island, cpus, mem))
}

/// Builds the schedule from the planner's outcomes (one per app, in input
/// order).
pub(super) fn build(
    apps: &[AppState],
    islands: &[IslandCapacity],
    index: &Index,
    outcomes: &[Outcome],
) -> Schedule {
    let mut grants = Vec::new();
    let mut blocked = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    // Usage of the previous schedule, milli-CPUs and bytes per island.
    let mut used: Vec<(u64, u64)> = vec![(0, 0); islands.len()];

    for (input, (app, outcome)) in apps.iter().zip(outcomes).enumerate() {
        let before = current_of(app);
        let src = before.and_then(|(_, y, cpus, mem)| {
            index.get(y.as_str()).map(|&y| (y, need_millis(cpus), mem))
        });
        if let Some((y, m, mem)) = src {
            used[y as usize].0 += m;
            used[y as usize].1 = used[y as usize].1.saturating_add(mem);
        }
        let mut step = |kind, dst| {
            steps.push(Step {
                app: app.app,
                input: ix(input),
                kind,
                src,
                dst,
            })
        };
        match *outcome {
            Outcome::Blocked(_) => {
                blocked.push(app.app);
                step(
                    if before.is_some() {
                        ChangeKind::Release
                    } else {
                        ChangeKind::Wait
                    },
                    None,
                );
            }
            Outcome::Granted {
                mode,
                island,
                score,
            } => {
                let Some(m) = app.recipe.mode(mode) else {
                    continue;
                };
                let needs = &m.needs;
                let g = Grant {
                    app: app.app,
                    mode,
                    island: islands[island as usize].name.clone(),
                    cpu_quota: needs.cpu_quota,
                    exclusive_cpus: if needs.exclusive_cpus {
                        // Whole CPUs (rounded up), at most 1e6 (validated).
                        saturating_u32(needs.charged_cpus())
                    } else {
                        0
                    },
                    threads: needs.threads,
                    memory_bytes: needs.memory_bytes,
                    score,
                };
                let (cpus, mem) = (g.charged_cpus(), g.memory_bytes);
                grants.push(g);
                let kind = match before {
                    None => Some(ChangeKind::Grant),
                    Some((_, y, _, _)) if *y != islands[island as usize].name => {
                        Some(ChangeKind::Move)
                    }
                    Some((fm, _, fc, fmem)) if fm == mode && fc == cpus && fmem == mem => None,
                    Some((_, _, fc, fmem)) if cpus <= fc && mem <= fmem => Some(ChangeKind::Shrink),
                    Some((_, _, fc, fmem)) if cpus >= fc && mem >= fmem => Some(ChangeKind::Grow),
                    Some(_) => Some(ChangeKind::Reshape),
                };
                if let Some(kind) = kind {
                    step(kind, Some((island, need_millis(cpus), mem)));
                }
            }
        }
    }
    grants.sort_by_key(|g| g.app);
    blocked.sort_unstable();
    steps.sort_unstable_by_key(|s| (phase(s.kind), s.app));
    let steps = order_moves(steps, islands, used);
    let changes = steps
        .iter()
        .map(|s| {
            render(
                s,
                &apps[s.input as usize],
                &outcomes[s.input as usize],
                islands,
            )
        })
        .collect();
    Schedule {
        grants,
        blocked,
        changes,
    }
}

/// The change a step stands for.
fn render(s: &Step, app: &AppState, outcome: &Outcome, islands: &[IslandCapacity]) -> Change {
    let from = current_of(app).map(|(mode, y, cpus, memory_bytes)| Placement {
        mode,
        island: y.clone(),
        cpus,
        memory_bytes,
    });
    let (to, score, blocked) = match *outcome {
        Outcome::Blocked(info) => (None, None, Some(info)),
        Outcome::Granted {
            mode,
            island,
            score,
        } => {
            let needs = app.recipe.mode(mode).map(|m| &m.needs);
            let to = Placement {
                mode,
                island: islands[island as usize].name.clone(),
                cpus: needs.map_or(0.0, |n| n.charged_cpus()),
                memory_bytes: needs.map_or(0, |n| n.memory_bytes),
            };
            (Some(to), Some(score), None)
        }
    };
    Change {
        app: s.app,
        name: app.recipe.name.clone(),
        kind: s.kind,
        from,
        to,
        score,
        blocked,
    }
}

/// Frees first: releases and waits, shrinks, moves and reshapes, grows,
/// grants.
pub(super) fn phase(k: ChangeKind) -> u8 {
    match k {
        ChangeKind::Release | ChangeKind::Wait => 0,
        ChangeKind::Shrink => 1,
        ChangeKind::Move | ChangeKind::Reshape => 2,
        ChangeKind::Grow => 3,
        ChangeKind::Grant => 4,
    }
}

/// Orders the moves and reshapes (already grouped between shrinks and
/// grows) so that, replaying the changes from the previous usage `used`, a
/// move is emitted only once its destination has room; moves that never
/// get room (a cycle with no slack, or an island already over capacity)
/// come last, by app id. `O(m²)` worst case for `m` moves (a chain), `O(m)`
/// when all fit at once.
fn order_moves(
    steps: Vec<Step>,
    islands: &[IslandCapacity],
    mut used: Vec<(u64, u64)>,
) -> Vec<Step> {
    let cap: Vec<(u64, u64)> = islands
        .iter()
        .map(|i| (cap_millis(i.cpus), i.memory_bytes))
        .collect();
    let release = |used: &mut Vec<(u64, u64)>, s: Option<Held>| {
        if let Some((y, m, mem)) = s {
            let u = &mut used[y as usize];
            u.0 = u.0.saturating_sub(m);
            u.1 = u.1.saturating_sub(mem);
        }
    };
    let take = |used: &mut Vec<(u64, u64)>, d: Option<Held>| {
        if let Some((y, m, mem)) = d {
            let u = &mut used[y as usize];
            u.0 += m;
            u.1 = u.1.saturating_add(mem);
        }
    };
    let mut out = Vec::with_capacity(steps.len());
    let mut moves = Vec::new();
    let mut rest = Vec::new();
    for s in steps {
        match phase(s.kind) {
            0 | 1 => {
                release(&mut used, s.src);
                take(&mut used, s.dst);
                out.push(s);
            }
            2 => moves.push(s),
            _ => rest.push(s),
        }
    }
    loop {
        let before = moves.len();
        let mut waiting = Vec::with_capacity(moves.len());
        for s in moves {
            let saved = s.src.map(|(y, _, _)| (y, used[y as usize]));
            release(&mut used, s.src);
            let fits = s.dst.is_none_or(|(y, m, mem)| {
                let (u, k) = (used[y as usize], cap[y as usize]);
                u.0 + m <= k.0 && mem <= k.1.saturating_sub(u.1)
            });
            if fits {
                take(&mut used, s.dst);
                out.push(s);
            } else {
                if let Some((y, u)) = saved {
                    used[y as usize] = u;
                }
                waiting.push(s);
            }
        }
        moves = waiting;
        if moves.is_empty() || moves.len() == before {
            break;
        }
    }
    out.extend(moves);
    out.extend(rest);
    out
}
