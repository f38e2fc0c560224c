//! A simple CPU model: hierarchical weighted fair sharing with cpusets and
//! caps, at rates that stay constant between events.
//!
//! The machine is a tree. At the top, the rest of the machine (every busy
//! process outside atoll, as one group of weight [`OUTSIDE_WEIGHT`]) and
//! atoll's root compete for the online CPUs. Below, each group's entities are
//! its busy threads (each can use one CPU; weight 1024, or 3 for
//! `SCHED_IDLE`) and its child groups (weight `cpu.weight * 1024 / 100`, or 3
//! with `cpu.idle`). RT policies get the nice-0 weight: this model has no RT
//! class.
//!
//! A group's *demand* is what it could use: the sum over its components (see
//! below) capped by its effective CPU count and by `cpu.max`
//! (`quota / period` CPUs). Its allocation is split among its entities by
//! weighted max-min fairness (water-filling: shares in proportion to weight,
//! no entity above its demand, leftovers to the rest), recursively.
//!
//! cpusets enter through *components*: entities whose CPU sets overlap
//! (transitively) compete with each other; disjoint components do not share
//! CPUs. The group's allocation is first water-filled among components
//! (weight = sum of members', demand = min(CPUs in the component's union,
//! members' demands)), then within each component among its members. This is
//! exact for siblings with identical or disjoint CPU sets and an
//! approximation for partial overlaps.
//!
//! Bandwidth accounting for a group with `cpu.max` follows `cpu.stat`: every
//! period boundary crossed while it has runnable tasks counts in
//! `nr_periods`; if its uncapped demand exceeds the quota and it is given the
//! whole quota, the period also counts in `nr_throttled`, and the CPU time
//! the cap denied (uncapped demand minus quota, per unit time, i.e. summed
//! over the CPUs that sat throttled) goes to `throttled_us`. Usage is
//! hierarchical: a group's `cpu_usage_us` includes its descendants'.
//!
//! CPU pressure follows PSI's `some` line: a group stalls while any busy
//! thread in it or below gets less than a whole CPU; only the `total` is
//! kept (the averages are left at 0).

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_core::plan::{GroupPath, TaskPolicy};
use atoll_core::CpuSet;

use crate::state::{Location, SimState, IDLE_LOAD, NICE_0_LOAD, OUTSIDE_WEIGHT};

/// Slack for floating-point comparisons, in CPUs.
const EPS: f64 = 1e-9;

/// Shares of `amount` for entities with `(weight, demand)`: weighted max-min
/// fair. The total handed out is `min(amount, sum of demands)`.
pub(crate) fn water_fill(amount: f64, items: &[(f64, f64)]) -> Vec<f64> {
    let mut shares = vec![0.0; items.len()];
    let mut active: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].0 > 0.0 && items[i].1 > 0.0)
        .collect();
    let mut left = amount.max(0.0);
    while !active.is_empty() && left > EPS {
        let level = left / active.iter().map(|&i| items[i].0).sum::<f64>();
        let (full, rest): (Vec<usize>, Vec<usize>) = active
            .iter()
            .partition(|&&i| items[i].1 <= items[i].0 * level + EPS);
        if full.is_empty() {
            for &i in &rest {
                shares[i] = items[i].0 * level;
            }
            break;
        }
        for &i in &full {
            shares[i] = items[i].1;
            left -= items[i].1;
        }
        active = rest;
    }
    shares
}

/// One competitor inside a group.
struct Entity {
    weight: f64,
    demand: f64,
    kind: Kind,
}

enum Kind {
    Thread(u32),
    Group(Node),
}

/// Entities that share CPUs.
struct Component {
    members: Vec<Entity>,
    weight: f64,
    demand: f64,
}

/// A group (or the machine, or the outside world) in the model.
struct Node {
    /// atoll's group, `None` for the machine and the outside.
    path: Option<GroupPath>,
    /// Demand without the group's own cap.
    uncapped: f64,
    /// The cap, CPUs.
    cap: Option<f64>,
    /// What it can use: `min(uncapped, cap)`.
    demand: f64,
    components: Vec<Component>,
}

impl Node {
    fn new(
        path: Option<GroupPath>,
        cpus: &CpuSet,
        cap: Option<f64>,
        members: Vec<(CpuSet, Entity)>,
    ) -> Self {
        let components = components(members);
        let uncapped = (cpus.len() as f64).min(components.iter().map(|c| c.demand).sum());
        let demand = cap.map_or(uncapped, |c| uncapped.min(c));
        Self {
            path,
            uncapped,
            cap,
            demand,
            components,
        }
    }
}

/// Groups entities into components of transitively overlapping CPU sets.
fn components(members: Vec<(CpuSet, Entity)>) -> Vec<Component> {
    // Union-find over the distinct CPU sets (few), not over entities (many
    // threads share one set).
    let mut sets: Vec<CpuSet> = Vec::new();
    let mut set_of = Vec::with_capacity(members.len());
    for (cpus, _) in &members {
        let i = sets.iter().position(|s| s == cpus).unwrap_or_else(|| {
            sets.push(cpus.clone());
            sets.len() - 1
        });
        set_of.push(i);
    }
    let mut parent: Vec<usize> = (0..sets.len()).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for a in 0..sets.len() {
        for b in a + 1..sets.len() {
            if !sets[a].is_disjoint(&sets[b]) {
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                parent[ra] = rb;
            }
        }
    }
    let mut by_root: BTreeMap<usize, (CpuSet, Vec<Entity>)> = BTreeMap::new();
    for ((cpus, entity), s) in members.into_iter().zip(set_of) {
        let root = find(&mut parent, s);
        let slot = by_root.entry(root).or_default();
        slot.0 = slot.0.union(&cpus);
        slot.1.push(entity);
    }
    by_root
        .into_values()
        .map(|(union, members)| Component {
            weight: members.iter().map(|e| e.weight).sum(),
            demand: (union.len() as f64).min(members.iter().map(|e| e.demand).sum()),
            members,
        })
        .collect()
}

fn thread_weight(policy: TaskPolicy) -> f64 {
    match policy {
        TaskPolicy::Idle => IDLE_LOAD,
        _ => NICE_0_LOAD,
    }
}

/// The rates found by one allocation, CPUs.
#[derive(Default)]
struct Rates {
    threads: BTreeMap<u32, f64>,
    /// Per atoll group: (rate, uncapped demand, cap).
    groups: BTreeMap<GroupPath, (f64, f64, Option<f64>)>,
}

fn distribute(node: &Node, amount: f64, rates: &mut Rates) {
    let comp_shares = water_fill(
        amount,
        &node
            .components
            .iter()
            .map(|c| (c.weight, c.demand))
            .collect::<Vec<_>>(),
    );
    let mut given = 0.0;
    for (comp, share) in node.components.iter().zip(comp_shares) {
        let items: Vec<(f64, f64)> = comp.members.iter().map(|e| (e.weight, e.demand)).collect();
        for (e, s) in comp.members.iter().zip(water_fill(share, &items)) {
            given += s;
            match &e.kind {
                Kind::Thread(tid) => {
                    rates.threads.insert(*tid, s);
                }
                Kind::Group(child) => distribute(child, s, rates),
            }
        }
    }
    if let Some(p) = &node.path {
        rates
            .groups
            .insert(p.clone(), (given, node.uncapped, node.cap));
    }
}

impl SimState {
    /// Busy threads of the processes at `location`, with their CPU sets.
    fn busy_threads(&self, in_group: Option<&GroupPath>, cpus: &CpuSet) -> Vec<(CpuSet, Entity)> {
        self.procs
            .values()
            .filter(|p| p.busy)
            .filter(|p| match (&p.location, in_group) {
                (Location::Group(g), Some(want)) => g == want,
                (Location::Outside(_), None) => true,
                _ => false,
            })
            .flat_map(|p| p.threads.iter())
            .filter_map(|tid| self.threads.get(tid).map(|t| (*tid, t.policy)))
            .map(|(tid, policy)| {
                let e = Entity {
                    weight: thread_weight(policy),
                    demand: 1.0,
                    kind: Kind::Thread(tid),
                };
                (cpus.clone(), e)
            })
            .collect()
    }

    fn group_node(&self, path: &GroupPath) -> Node {
        let g = &self.groups[path];
        let mut members = self.busy_threads(Some(path), &g.effective_cpus);
        for child in self.children_of(path) {
            let c = &self.groups[&child];
            let weight = if c.settings.cpu_idle {
                IDLE_LOAD
            } else {
                f64::from(c.settings.cpu_weight.unwrap_or(100)) * NICE_0_LOAD / 100.0
            };
            let node = self.group_node(&child);
            let e = Entity {
                weight,
                demand: node.demand,
                kind: Kind::Group(node),
            };
            members.push((c.effective_cpus.clone(), e));
        }
        let cap = g
            .settings
            .cpu_max
            .map(|m| m.quota_us as f64 / m.period_us.max(1) as f64);
        Node::new(Some(path.clone()), &g.effective_cpus, cap, members)
    }

    fn machine_node(&self) -> Node {
        let outside = Node::new(
            None,
            &self.online,
            None,
            self.busy_threads(None, &self.online),
        );
        let mut members = vec![(
            self.online.clone(),
            Entity {
                weight: f64::from(OUTSIDE_WEIGHT) * NICE_0_LOAD / 100.0,
                demand: outside.demand,
                kind: Kind::Group(outside),
            },
        )];
        let root = GroupPath::root();
        if let Some(g) = self.groups.get(&root) {
            let node = self.group_node(&root);
            let weight = if g.settings.cpu_idle {
                IDLE_LOAD
            } else {
                f64::from(g.settings.cpu_weight.unwrap_or(100)) * NICE_0_LOAD / 100.0
            };
            let e = Entity {
                weight,
                demand: node.demand,
                kind: Kind::Group(node),
            };
            members.push((g.effective_cpus.clone(), e));
        }
        Node::new(None, &self.online, None, members)
    }

    /// Runs the model for `dt` at the current rates.
    pub fn run_cpu_model(&mut self, dt: Duration) {
        let machine = self.machine_node();
        let mut rates = Rates::default();
        distribute(&machine, machine.demand, &mut rates);
        let dt_ns = dt.as_nanos() as f64;
        let dt_whole_ns = u64::try_from(dt.as_nanos()).unwrap_or(u64::MAX);
        for (tid, rate) in &rates.threads {
            if let Some(t) = self.threads.get_mut(tid) {
                t.cpu_ns += rate * dt_ns;
            }
        }
        // PSI `some`: a group stalls while any busy thread below it waits.
        let mut stalled: std::collections::BTreeSet<GroupPath> = Default::default();
        for p in self.procs.values().filter(|p| p.busy) {
            let Location::Group(g) = &p.location else {
                continue;
            };
            let waits = p
                .threads
                .iter()
                .any(|tid| rates.threads.get(tid).is_some_and(|r| *r < 1.0 - EPS));
            if waits {
                let mut at = Some(g.clone());
                while let Some(g) = at {
                    at = g.parent();
                    stalled.insert(g);
                }
            }
        }
        for g in &stalled {
            if let Some(g) = self.groups.get_mut(g) {
                g.cpu.pressure_ns += dt_ns;
            }
        }
        for (path, g) in self.groups.iter_mut() {
            let (rate, uncapped, cap) = rates.groups.get(path).copied().unwrap_or((0.0, 0.0, None));
            g.cpu.usage_ns += rate * dt_ns;
            let (Some(cap), Some(max)) = (cap, g.settings.cpu_max) else {
                continue;
            };
            let period_ns = max.period_us.max(1) * 1000;
            let elapsed = g.cpu.period_phase_ns.saturating_add(dt_whole_ns);
            let crossed = elapsed / period_ns;
            g.cpu.period_phase_ns = elapsed % period_ns;
            if uncapped > EPS {
                g.cpu.nr_periods += crossed;
            }
            if uncapped > cap + EPS && rate >= cap - EPS {
                g.cpu.nr_throttled += crossed;
                g.cpu.throttled_ns += (uncapped - cap) * dt_ns;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn water_fill_is_weighted_and_redistributes_leftovers() {
        assert!(close(
            &water_fill(1.0, &[(1.0, 1.0), (3.0, 1.0)]),
            &[0.25, 0.75]
        ));
        // The light entity needs less than its share; the rest goes on.
        assert!(close(
            &water_fill(4.0, &[(1.0, 0.5), (1.0, 10.0), (2.0, 10.0)]),
            &[0.5, 7.0 / 6.0, 7.0 / 3.0]
        ));
        // Not enough demand: everyone gets what they ask.
        assert!(close(
            &water_fill(8.0, &[(1.0, 1.0), (5.0, 2.0)]),
            &[1.0, 2.0]
        ));
        // Zero weight or demand gets nothing.
        assert!(close(
            &water_fill(2.0, &[(0.0, 1.0), (1.0, 0.0), (1.0, 1.0)]),
            &[0.0, 0.0, 1.0]
        ));
        assert!(water_fill(1.0, &[]).is_empty());
    }
}
