//! One allocation: RT first, then fair demands bottom-up and weighted
//! max-min fair shares top-down; then classes whose rate changed are
//! rebased and groups' counters folded and restarted.
//!
//! Most allocations are incremental: when threads block or wake, demands
//! are recomputed only on the path from their classes up to the first
//! group whose demand does not change, and shares only below the groups
//! whose members changed, descending into a child only if its allocation
//! changed. A change of groups, placements or policies, or of an RT class,
//! recomputes everything.

use super::tree::{Member, Tree, RT_CPU_MAX};
use super::{Class, PolicyKind, EPS};
use crate::state::{Seg, SimState, IDLE_LOAD, NICE_0_LOAD};

/// Shares of `amount` for entities with `(weight, demand)`: weighted max-min
/// fair. The total handed out is `min(amount, sum of demands)`.
#[cfg(test)]
pub(crate) fn water_fill(amount: f64, items: &[(f64, f64)]) -> Vec<f64> {
    let (mut out, mut order) = (Vec::new(), Vec::new());
    fill(amount, items, &mut out, &mut order);
    out
}

/// [`water_fill`] into `out`, with `order` as scratch.
fn fill(amount: f64, items: &[(f64, f64)], out: &mut Vec<f64>, order: &mut Vec<usize>) {
    out.clear();
    out.resize(items.len(), 0.0);
    order.clear();
    order.extend((0..items.len()).filter(|&i| items[i].0 > 0.0 && items[i].1 > 0.0));
    // Entities saturate in order of demand per unit of weight.
    order.sort_by(|&a, &b| {
        let (ra, rb) = (items[a].1 / items[a].0, items[b].1 / items[b].0);
        ra.total_cmp(&rb).then(a.cmp(&b))
    });
    let mut left = amount.max(0.0);
    let mut weight: f64 = order.iter().map(|&i| items[i].0).sum();
    for (k, &i) in order.iter().enumerate() {
        if left <= EPS || weight <= 0.0 {
            break;
        }
        let level = left / weight;
        let (w, d) = items[i];
        if d <= w * level + EPS {
            out[i] = d;
            left -= d;
            weight -= w;
        } else {
            for &j in &order[k..] {
                out[j] = items[j].0 * level;
            }
            break;
        }
    }
}

fn class_weight(c: &Class) -> f64 {
    match c.kind {
        PolicyKind::Idle => IDLE_LOAD,
        _ => NICE_0_LOAD,
    }
}

/// RT classes take CPU first; returns each RT class's per-thread rate.
fn allocate_rt(tree: &mut Tree, classes: &[Class], rates: &mut [f64]) {
    tree.rt_load.iter_mut().for_each(|l| *l = 0.0);
    for n in tree.nodes.iter_mut() {
        n.rt = 0.0;
    }
    let mut any = false;
    for &c in &tree.rt_order {
        let class = &classes[c];
        let n = f64::from(class.runnable);
        let Some(node) = class
            .node
            .filter(|&n| class.runnable > 0 && !tree.nodes[n].frozen)
        else {
            rates[c] = 0.0;
            continue;
        };
        any = true;
        let set = tree.nodes[node].set;
        let free: f64 = tree.set_atoms[set]
            .iter()
            .map(|&a| tree.atom_len[a] * (RT_CPU_MAX - tree.rt_load[a]).max(0.0))
            .sum();
        let mut limit = f64::INFINITY;
        let mut at = Some(node);
        while let Some(i) = at {
            limit = limit.min(tree.nodes[i].rt_limit - tree.nodes[i].rt);
            at = tree.nodes[i].parent;
        }
        let total = n.min(free).min(limit).max(0.0);
        if free > EPS {
            for &a in &tree.set_atoms[set] {
                let room = (RT_CPU_MAX - tree.rt_load[a]).max(0.0);
                tree.rt_load[a] += total * room / free;
            }
        }
        let mut at = Some(node);
        while let Some(i) = at {
            tree.nodes[i].rt += total;
            at = tree.nodes[i].parent;
        }
        rates[c] = total / n;
    }
    for (s, cap) in tree.cap_fair.iter_mut().enumerate() {
        *cap = if any {
            tree.set_atoms[s]
                .iter()
                .map(|&a| tree.atom_len[a] * (1.0 - tree.rt_load[a]))
                .sum()
        } else {
            tree.set_len[s]
        };
    }
}

/// Recomputes node `i`'s fair demand from its members'; returns whether
/// it changed.
fn node_demand(tree: &mut Tree, classes: &[Class], i: usize) -> bool {
    let (mut local_n, mut local_w) = (0.0, 0.0);
    for &c in &tree.nodes[i].classes {
        let n = f64::from(classes[c].runnable);
        local_n += n;
        local_w += n * class_weight(&classes[c]);
    }
    let mut total = 0.0;
    let mut comps = std::mem::take(&mut tree.nodes[i].comps);
    for comp in comps.iter_mut() {
        let (mut w, mut d) = (0.0, 0.0);
        for m in &comp.members {
            match *m {
                Member::Node(j) => {
                    w += tree.nodes[j].weight;
                    d += tree.nodes[j].demand;
                }
                Member::Local => {
                    w += local_w;
                    d += local_n;
                }
            }
        }
        comp.weight = w;
        comp.demand = d.min(tree.cap_fair[comp.set]);
        total += comp.demand;
    }
    let n = &mut tree.nodes[i];
    n.comps = comps;
    n.local_n = local_n;
    n.local_w = local_w;
    n.uncapped = if n.frozen {
        0.0
    } else {
        total.min(tree.cap_fair[n.set])
    };
    let demand = n.cap.map_or(n.uncapped, |c| n.uncapped.min(c));
    let changed = (demand - n.demand).abs() > EPS;
    n.demand = demand;
    changed
}

/// Scratch for [`node_distribute`].
#[derive(Default)]
struct Scratch {
    items: Vec<(f64, f64)>,
    comp_shares: Vec<f64>,
    member_shares: Vec<f64>,
    shares: Vec<f64>,
    order: Vec<usize>,
}

/// Splits node `i`'s allocation among its members: children whose
/// allocation changes are flagged for their own split; its classes' new
/// rates go to `rates` as `(class, rate)`.
fn node_distribute(
    tree: &mut Tree,
    classes: &[Class],
    i: usize,
    x: &mut Scratch,
    rates: &mut Vec<(usize, f64)>,
) {
    let comps = std::mem::take(&mut tree.nodes[i].comps);
    x.items.clear();
    x.items.extend(comps.iter().map(|c| (c.weight, c.demand)));
    fill(
        tree.nodes[i].alloc,
        &x.items,
        &mut x.comp_shares,
        &mut x.order,
    );
    let mut given = 0.0;
    let mut local = 0.0;
    for (comp, &share) in comps.iter().zip(&x.comp_shares) {
        x.items.clear();
        for m in &comp.members {
            x.items.push(match *m {
                Member::Node(j) => (tree.nodes[j].weight, tree.nodes[j].demand),
                Member::Local => (tree.nodes[i].local_w, tree.nodes[i].local_n),
            });
        }
        fill(share, &x.items, &mut x.member_shares, &mut x.order);
        for (m, &s) in comp.members.iter().zip(&x.member_shares) {
            given += s;
            match *m {
                Member::Node(j) => {
                    let child = &mut tree.nodes[j];
                    if child.alloc != s {
                        child.alloc = s;
                        child.need_dist = true;
                    }
                }
                Member::Local => local += s,
            }
        }
    }
    tree.nodes[i].comps = comps;
    tree.nodes[i].fair = given;
    // The node's own threads split `local` by class.
    x.items.clear();
    for &c in &tree.nodes[i].classes {
        let n = f64::from(classes[c].runnable);
        x.items.push((n * class_weight(&classes[c]), n));
    }
    fill(local, &x.items, &mut x.shares, &mut x.order);
    for (k, &c) in tree.nodes[i].classes.iter().enumerate() {
        let n = f64::from(classes[c].runnable);
        rates.push((c, if n > 0.0 { x.shares[k] / n } else { 0.0 }));
    }
}

/// Whether a runnable thread of node `i` gets less than a CPU.
fn own_stalled(tree: &Tree, classes: &[Class], i: usize) -> bool {
    let n = &tree.nodes[i];
    !n.frozen
        && n.classes
            .iter()
            .chain(&n.rt_classes)
            .any(|&c| classes[c].runnable > 0 && classes[c].rate < 1.0 - EPS)
}

impl SimState {
    /// Recomputes rates as of `at` (ns): all of them (`full`), or only
    /// where the classes in `model.dirty_classes` lead. Rebases the classes
    /// whose rate changed and restarts the counters of the groups whose
    /// figures changed.
    pub(crate) fn recompute(&mut self, at: u64, full: bool) {
        let Some(mut tree) = self.model.tree.take() else {
            return;
        };
        let n = tree.nodes.len();
        let mut rates: Vec<(usize, f64)> = Vec::new();
        // Demands, bottom-up (children have larger indices).
        if full {
            let mut rt = vec![0.0; self.model.classes.len()];
            allocate_rt(&mut tree, &self.model.classes, &mut rt);
            rates.extend(tree.rt_order.iter().map(|&c| (c, rt[c])));
            for i in (0..n).rev() {
                node_demand(&mut tree, &self.model.classes, i);
                tree.nodes[i].need_dist = true;
            }
            tree.nodes[0].alloc = tree.nodes[0].demand;
        } else {
            let mut pending = std::collections::BinaryHeap::new();
            for &c in &self.model.dirty_classes {
                if let Some(i) = self.model.classes[c].node {
                    if !tree.nodes[i].need_demand {
                        tree.nodes[i].need_demand = true;
                        pending.push(i);
                    }
                }
            }
            while let Some(i) = pending.pop() {
                tree.nodes[i].need_demand = false;
                tree.nodes[i].need_dist = true;
                if node_demand(&mut tree, &self.model.classes, i) {
                    match tree.nodes[i].parent {
                        Some(p) if !tree.nodes[p].need_demand => {
                            tree.nodes[p].need_demand = true;
                            pending.push(p);
                        }
                        Some(_) => {}
                        None => tree.nodes[0].alloc = tree.nodes[0].demand,
                    }
                }
            }
        }
        // Shares, top-down; nodes whose figures may have changed.
        let mut scratch = Scratch::default();
        let mut touched: Vec<usize> = Vec::new();
        let first = (0..n).find(|&i| tree.nodes[i].need_dist).unwrap_or(n);
        for i in first..n {
            if !std::mem::take(&mut tree.nodes[i].need_dist) {
                continue;
            }
            node_distribute(&mut tree, &self.model.classes, i, &mut scratch, &mut rates);
            touched.push(i);
        }
        for &(c, r) in &rates {
            let r = if self.model.classes[c].node.is_some() {
                r
            } else {
                0.0
            };
            if r != self.model.classes[c].rate {
                self.model.rebase(c, at, r);
            }
        }
        // Stalls: own flags of the touched nodes, counts up the tree.
        let classes = &self.model.classes;
        if full {
            for i in (0..n).rev() {
                tree.nodes[i].stalled_kids = 0;
            }
            for i in (0..n).rev() {
                let own = own_stalled(&tree, classes, i);
                let node = &mut tree.nodes[i];
                node.own_stalled = own;
                node.stalled = own || node.stalled_kids > 0;
                if let (true, Some(p)) = (node.stalled, node.parent) {
                    tree.nodes[p].stalled_kids += 1;
                }
            }
            touched = (0..n).collect();
        } else {
            for k in 0..touched.len() {
                let mut i = touched[k];
                tree.nodes[i].own_stalled = own_stalled(&tree, classes, i);
                loop {
                    let node = &mut tree.nodes[i];
                    let stalled = node.own_stalled || node.stalled_kids > 0;
                    if stalled == node.stalled {
                        break;
                    }
                    node.stalled = stalled;
                    let Some(p) = node.parent else { break };
                    if stalled {
                        tree.nodes[p].stalled_kids += 1;
                    } else {
                        tree.nodes[p].stalled_kids -= 1;
                    }
                    touched.push(p);
                    i = p;
                }
            }
        }
        // Groups whose figures changed restart their counters.
        for i in touched {
            let node = &mut tree.nodes[i];
            let now = (node.fair + node.rt, node.fair, node.uncapped, node.stalled);
            if now == node.sent {
                continue;
            }
            node.sent = now;
            let Some(path) = &node.path else { continue };
            let Some(g) = self.groups.get_mut(path) else {
                continue;
            };
            g.cpu.fold(at);
            let period_ns = g
                .settings
                .cpu_max
                .map_or(0, |m| m.period_us.max(1).saturating_mul(1000));
            g.cpu.seg = Seg {
                t0: at,
                rate: now.0,
                fair: now.1,
                uncapped: now.2,
                cap: node.cap,
                period_ns,
                stalled: now.3,
            };
        }
        self.model.tree = Some(tree);
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
