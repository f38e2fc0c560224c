//! The compiled group tree: nodes in pre-order with their weights, CPU sets,
//! caps, RT limits, components and classes, rebuilt only when groups,
//! placements or policies change (not when threads block or wake).
//!
//! CPU sets are interned: the distinct sets, and the *atoms* (maximal CPU
//! sets every interned set either contains or misses) through which RT load
//! and overlaps are computed without touching single CPUs.

use std::collections::{BTreeMap, HashMap};

use atoll_core::plan::GroupPath;
use atoll_core::CpuSet;

use super::{ClassId, PolicyKind};
use crate::state::{SimState, IDLE_LOAD, NICE_0_LOAD, OUTSIDE_WEIGHT, RT_MACHINE_RATIO};

/// A member of a component.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Member {
    /// A child group's node.
    Node(usize),
    /// The node's own threads (its fair and idle classes).
    Local,
}

/// Members whose CPU sets overlap (transitively).
#[derive(Clone, Debug)]
pub(crate) struct Comp {
    pub members: Vec<Member>,
    /// Union of the members' sets.
    pub set: usize,
    /// Per allocation: summed weight and demand.
    pub weight: f64,
    pub demand: f64,
}

/// One group (or the machine, or the outside world).
#[derive(Clone, Debug)]
pub(crate) struct TNode {
    pub path: Option<GroupPath>,
    pub parent: Option<usize>,
    /// Weight against its siblings.
    pub weight: f64,
    pub set: usize,
    /// `cpu.max` in CPUs.
    pub cap: Option<f64>,
    pub comps: Vec<Comp>,
    /// Fair and idle classes of threads located here.
    pub classes: Vec<ClassId>,
    /// RT classes of threads located here.
    pub rt_classes: Vec<ClassId>,
    /// RT budget of the group in CPUs (infinite: none applies).
    pub rt_limit: f64,
    /// `cpu.idle` here or above.
    pub idle: bool,
    /// Frozen here or above (the cgroup freezer): its threads get no CPU.
    pub frozen: bool,
    // Results of the last allocation.
    pub local_n: f64,
    pub local_w: f64,
    pub uncapped: f64,
    pub demand: f64,
    pub alloc: f64,
    /// Fair CPU handed out in the subtree.
    pub fair: f64,
    /// RT CPU used in the subtree.
    pub rt: f64,
    /// A runnable thread here gets less than a CPU.
    pub own_stalled: bool,
    /// Children that are stalled.
    pub stalled_kids: u32,
    /// Own or below.
    pub stalled: bool,
    /// What the group's counters were last given: usage, fair, uncapped,
    /// stalled.
    pub sent: (f64, f64, f64, bool),
    /// Work flags of one allocation.
    pub need_demand: bool,
    pub need_dist: bool,
}

/// The compiled tree and its interned CPU sets.
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    /// Pre-order: 0 is the machine, 1 the outside world, then atoll's root.
    pub nodes: Vec<TNode>,
    pub set_len: Vec<f64>,
    pub atom_len: Vec<f64>,
    /// Atoms making up each set.
    pub set_atoms: Vec<Vec<usize>>,
    /// `inter[a][b]`: CPUs in both sets.
    pub inter: Vec<Vec<f64>>,
    /// RT classes with threads, highest priority first.
    pub rt_order: Vec<ClassId>,
    /// Per set: CPU capacity RT left for fair threads.
    pub cap_fair: Vec<f64>,
    /// Per atom: RT load per CPU.
    pub rt_load: Vec<f64>,
    /// Per set: runnable threads that delay wakers (not idle-like).
    pub set_busy: Vec<f64>,
}

fn intern(sets: &mut Vec<CpuSet>, s: &CpuSet) -> usize {
    sets.iter().position(|x| x == s).unwrap_or_else(|| {
        sets.push(s.clone());
        sets.len() - 1
    })
}

fn group_weight(idle: bool, weight: Option<u32>) -> f64 {
    if idle {
        IDLE_LOAD
    } else {
        f64::from(weight.unwrap_or(100)) * NICE_0_LOAD / 100.0
    }
}

/// Components of `members` (with their set ids) by overlap.
fn components(members: Vec<(Member, usize)>, sets: &mut Vec<CpuSet>) -> Vec<Comp> {
    let ids: Vec<usize> = {
        let mut v: Vec<usize> = members.iter().map(|m| m.1).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let mut parent: Vec<usize> = (0..ids.len()).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for a in 0..ids.len() {
        for b in a + 1..ids.len() {
            if !sets[ids[a]].is_disjoint(&sets[ids[b]]) {
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                parent[ra] = rb;
            }
        }
    }
    let mut by_root: BTreeMap<usize, (CpuSet, Vec<Member>)> = BTreeMap::new();
    for (m, s) in members {
        let i = ids.binary_search(&s).unwrap_or(0);
        let root = find(&mut parent, i);
        let slot = by_root.entry(root).or_default();
        slot.0 = slot.0.union(&sets[s]);
        slot.1.push(m);
    }
    by_root
        .into_values()
        .map(|(union, members)| Comp {
            members,
            set: intern(sets, &union),
            weight: 0.0,
            demand: 0.0,
        })
        .collect()
}

impl SimState {
    /// Compiles the tree from the groups, placements and classes.
    pub(crate) fn build_tree(&mut self) {
        self.model.stats.tree_builds += 1;
        let mut sets: Vec<CpuSet> = Vec::new();
        let online = intern(&mut sets, &self.online);
        let blank = |path, parent, weight, set| TNode {
            path,
            parent,
            weight,
            set,
            cap: None,
            comps: Vec::new(),
            classes: Vec::new(),
            rt_classes: Vec::new(),
            rt_limit: f64::INFINITY,
            idle: false,
            frozen: false,
            local_n: 0.0,
            local_w: 0.0,
            uncapped: 0.0,
            demand: 0.0,
            alloc: 0.0,
            fair: 0.0,
            rt: 0.0,
            own_stalled: false,
            stalled_kids: 0,
            stalled: false,
            sent: (f64::NAN, 0.0, 0.0, false),
            need_demand: false,
            need_dist: false,
        };
        let mut nodes = vec![
            blank(None, None, 0.0, online),
            blank(
                None,
                Some(0),
                f64::from(OUTSIDE_WEIGHT) * NICE_0_LOAD / 100.0,
                online,
            ),
        ];
        let mut children: HashMap<GroupPath, Vec<GroupPath>> = HashMap::new();
        for p in self.groups.keys() {
            if let Some(parent) = p.parent() {
                children.entry(parent).or_default().push(p.clone());
            }
        }
        let mut node_of = HashMap::new();
        let root = GroupPath::root();
        let mut stack: Vec<(GroupPath, usize)> = Vec::new();
        if self.groups.contains_key(&root) {
            stack.push((root, 0));
        }
        while let Some((path, parent)) = stack.pop() {
            let g = &self.groups[&path];
            let s = &g.settings;
            let set = intern(&mut sets, &g.effective_cpus);
            let mut n = blank(
                Some(path.clone()),
                Some(parent),
                group_weight(s.cpu_idle, s.cpu_weight),
                set,
            );
            n.cap = s
                .cpu_max
                .map(|m| m.quota_us as f64 / m.period_us.max(1) as f64);
            n.idle = s.cpu_idle || nodes[parent].idle;
            n.frozen = s.frozen || nodes[parent].frozen;
            if self.rt_groups {
                let ratio = s
                    .rt_budget
                    .filter(|b| b.period_us > 0)
                    .map_or(0.0, |b| b.runtime_us as f64 / b.period_us as f64);
                n.rt_limit = ratio * g.effective_cpus.len() as f64;
            }
            let id = nodes.len();
            nodes.push(n);
            node_of.insert(path.clone(), id);
            if let Some(kids) = children.get(&path) {
                // Reverse so that the pre-order visits children in order.
                for k in kids.iter().rev() {
                    stack.push((k.clone(), id));
                }
            }
        }
        // Classes with threads join their nodes.
        let mut rt_order = Vec::new();
        for (id, c) in self.model.classes.iter_mut().enumerate() {
            c.node = None;
            if c.threads == 0 {
                continue;
            }
            let node = match &c.loc {
                None => Some(1),
                Some(p) => node_of.get(p).copied(),
            };
            let Some(node) = node else { continue };
            c.node = Some(node);
            c.set = nodes[node].set;
            c.counts_busy = match c.kind {
                PolicyKind::Rt(_) => true,
                PolicyKind::Idle => false,
                PolicyKind::Fair => !nodes[node].idle,
            };
            match c.kind {
                PolicyKind::Rt(p) => {
                    rt_order.push((p, id));
                    nodes[node].rt_classes.push(id);
                }
                _ => nodes[node].classes.push(id),
            }
        }
        rt_order.sort_by_key(|&(p, id)| (std::cmp::Reverse(p), id));
        // Components: members are child nodes and the node's own threads.
        let mut members: Vec<Vec<(Member, usize)>> = vec![Vec::new(); nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            if let Some(p) = n.parent {
                members[p].push((Member::Node(i), n.set));
            }
        }
        for (i, n) in nodes.iter_mut().enumerate() {
            let mut m = std::mem::take(&mut members[i]);
            if !n.classes.is_empty() {
                m.push((Member::Local, n.set));
            }
            n.comps = components(m, &mut sets);
        }
        // Atoms: CPUs grouped by which sets contain them.
        let words = sets.len().div_ceil(64);
        let mut atom_of_sig: HashMap<Vec<u64>, usize> = HashMap::new();
        let mut atom_len: Vec<f64> = Vec::new();
        let mut atom_sig: Vec<Vec<u64>> = Vec::new();
        for cpu in self.online.iter() {
            let mut sig = vec![0u64; words];
            for (i, s) in sets.iter().enumerate() {
                if s.contains(cpu) {
                    sig[i / 64] |= 1 << (i % 64);
                }
            }
            let a = *atom_of_sig.entry(sig.clone()).or_insert_with(|| {
                atom_len.push(0.0);
                atom_sig.push(sig);
                atom_len.len() - 1
            });
            atom_len[a] += 1.0;
        }
        let set_atoms: Vec<Vec<usize>> = (0..sets.len())
            .map(|i| {
                (0..atom_len.len())
                    .filter(|&a| atom_sig[a][i / 64] & (1 << (i % 64)) != 0)
                    .collect()
            })
            .collect();
        let set_len: Vec<f64> = sets.iter().map(|s| s.len() as f64).collect();
        let inter: Vec<Vec<f64>> = sets
            .iter()
            .map(|a| {
                sets.iter()
                    .map(|b| a.intersection(b).len() as f64)
                    .collect()
            })
            .collect();
        let mut set_busy = vec![0.0; sets.len()];
        for c in &self.model.classes {
            if c.node.is_some() && c.counts_busy {
                set_busy[c.set] += f64::from(c.runnable);
            }
        }
        self.model.tree = Some(Tree {
            nodes,
            cap_fair: set_len.clone(),
            rt_load: vec![0.0; atom_len.len()],
            set_len,
            atom_len,
            set_atoms,
            inter,
            rt_order: rt_order.into_iter().map(|(_, id)| id).collect(),
            set_busy,
        });
    }
}

/// Per-CPU RT ceiling (the kernel's default RT throttling).
pub(crate) const RT_CPU_MAX: f64 = RT_MACHINE_RATIO;
