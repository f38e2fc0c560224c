//! Home CPUs: space-partitioning an island by entitlement.
//!
//! The paper space-partitions CPUs: each SPU gets an integral number of
//! CPUs, its *home*, and a CPU runs only its home SPU's processes unless it
//! is idle. Fractions of a CPU were served by periodically moving CPUs
//! between SPUs. atoll keeps the homes and serves fractions from a small
//! time-shared *pool* instead, because moving CPUs between cpusets every few
//! hundred milliseconds costs migrations and cache warmth, while the kernel's
//! fair scheduler already time-shares a CPU by weight at a fine grain.
//!
//! [`home_cpus`] works in four steps:
//!
//! 1. **Entitlements.** A unit's entitlement is its `cpus`; a unit without
//!    one counts as an equal share of the island (`island CPUs / units`), as
//!    in the paper's prototype where every SPU gets an equal share. If the
//!    entitlements add up to more than the island, all are scaled down by
//!    the same factor and the layout says so ([`Oversubscription`]).
//! 2. **Whole cores first.** In unit order, each unit takes whole free cores
//!    (all SMT siblings that lie in the island) in CPU order while a whole
//!    core still fits in the integral part of its entitlement. Units given
//!    first get the lowest CPUs; consecutive cores share caches more often.
//! 3. **Then threads.** What a unit still needs is taken one CPU at a time:
//!    first from a core it already holds part of, then from a core another
//!    unit already split, and only then by splitting a free core. This keeps
//!    the number of cores shared between units to a minimum.
//! 4. **Pool and spare.** The fractional parts are summed and rounded up to
//!    give the pool's size. The pool takes free CPUs on already split cores
//!    first, then free cores in order; its members (the units with a
//!    fractional part) time-share it, each entitled to its fraction. Free
//!    CPUs beyond the pool belong to nobody: they are *spare*, lent to
//!    overloaded units in `isolate` mode and left idle in `quota` mode.
//!
//! The result is deterministic: the same island, topology and unit list give
//! the same layout. Homes never overlap each other, the pool or the spare
//! CPUs, and together they make up the island.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::IsolationError;
use crate::num::saturating_usize;
use crate::topology::Topology;
use crate::{CpuSet, Name};

/// Below this, a fraction of a CPU is rounding noise.
pub(crate) const EPS: f64 = 1e-9;

/// How an island's CPUs are divided among its units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HomeLayout {
    /// The units, in the order they were given (ties are broken in this order).
    pub units: Vec<Name>,
    /// Each unit's entitlement in CPUs, after scaling for over-subscription.
    pub entitled: BTreeMap<Name, f64>,
    /// Each unit's home CPUs (possibly empty for an entitlement below one CPU).
    pub homes: BTreeMap<Name, CpuSet>,
    /// CPUs time-shared by the units with a fractional entitlement.
    pub pool: CpuSet,
    /// Each pool member's share of the pool, in CPUs (only members appear).
    pub pool_shares: BTreeMap<Name, f64>,
    /// CPUs nobody is entitled to.
    pub spare: CpuSet,
    /// Set when the entitlements added up to more than the island.
    pub oversubscribed: Option<Oversubscription>,
}

/// Entitlements that did not fit, and how they were scaled.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Oversubscription {
    /// Sum of the entitlements asked for, CPUs.
    pub asked: f64,
    /// CPUs in the island.
    pub cpus: usize,
    /// Factor every entitlement was multiplied by (`cpus / asked`).
    pub factor: f64,
}

impl HomeLayout {
    /// Every CPU of the island: homes, pool and spare.
    pub fn island(&self) -> CpuSet {
        self.homes
            .values()
            .fold(self.pool.union(&self.spare), |acc, h| acc.union(h))
    }

    /// A unit's home, empty for a unit the layout does not know.
    pub fn home(&self, unit: &Name) -> CpuSet {
        self.homes.get(unit).cloned().unwrap_or_default()
    }

    /// A unit's share of the pool in CPUs (0 for non-members).
    pub fn pool_share(&self, unit: &Name) -> f64 {
        self.pool_shares.get(unit).copied().unwrap_or(0.0)
    }
}

/// [`home_cpus`] for `units`, then `guests` added with nothing of their
/// own: no home CPUs, no share of the pool. Guests are units that came
/// without an entitlement (units created at run time): laid out as equals
/// they would shrink every configured unit's home; as guests they run on
/// what nobody is entitled to and on what owners lend, and take nothing
/// from anyone.
pub fn home_cpus_with_guests(
    island: &CpuSet,
    topo: &Topology,
    units: &[(Name, Option<f64>)],
    guests: &[Name],
) -> Result<HomeLayout, IsolationError> {
    let mut l = home_cpus(island, topo, units)?;
    for g in guests {
        if l.units.contains(g) {
            return Err(IsolationError::DuplicateUnit { unit: g.clone() });
        }
        l.units.push(g.clone());
        l.entitled.insert(g.clone(), 0.0);
        l.homes.insert(g.clone(), CpuSet::new());
    }
    Ok(l)
}

/// Partitions `island` among `units` (name, entitled CPUs or `None` for an
/// equal share), as described in the [module docs](self).
pub fn home_cpus(
    island: &CpuSet,
    topo: &Topology,
    units: &[(Name, Option<f64>)],
) -> Result<HomeLayout, IsolationError> {
    if island.is_empty() {
        return Err(IsolationError::EmptyIsland);
    }
    let mut seen = BTreeSet::new();
    for (name, cpus) in units {
        if !seen.insert(name) {
            return Err(IsolationError::DuplicateUnit { unit: name.clone() });
        }
        if let Some(c) = *cpus {
            if !(c.is_finite() && c > 0.0) {
                return Err(IsolationError::BadEntitlement {
                    unit: name.clone(),
                    cpus: c,
                });
            }
        }
    }
    let n = island.len();
    let equal = n as f64 / units.len().max(1) as f64;
    let asked: Vec<f64> = units.iter().map(|(_, c)| c.unwrap_or(equal)).collect();
    let sum: f64 = asked.iter().sum();
    let oversubscribed = (sum > n as f64 + EPS).then(|| Oversubscription {
        asked: sum,
        cpus: n,
        factor: n as f64 / sum,
    });
    let factor = oversubscribed.map_or(1.0, |o| o.factor);
    let entitled: Vec<f64> = asked.iter().map(|a| a * factor).collect();
    let whole: Vec<usize> = entitled
        .iter()
        .map(|e| saturating_usize((e + EPS).floor()))
        .collect();
    let frac: Vec<f64> = entitled
        .iter()
        .zip(&whole)
        .map(|(e, w)| {
            let f = e - *w as f64;
            if f < EPS {
                0.0
            } else {
                f
            }
        })
        .collect();

    let groups = core_groups(island, topo);
    let mut free = groups.clone();
    let mut homes = vec![CpuSet::new(); units.len()];
    let mut need = whole;
    // Step 2: whole cores that fit.
    for (i, home) in homes.iter_mut().enumerate() {
        for (g, group) in groups.iter().enumerate() {
            if need[i] == 0 {
                break;
            }
            if !free[g].is_empty() && free[g] == *group && group.len() <= need[i] {
                *home = home.union(group);
                need[i] -= group.len();
                free[g] = CpuSet::new();
            }
        }
    }
    // Step 3: single threads, own cores first, then split cores, then fresh.
    for i in 0..units.len() {
        while need[i] > 0 {
            let pick = (0..groups.len())
                .filter(|&g| !free[g].is_empty())
                .min_by_key(|&g| {
                    let rank = if !groups[g].is_disjoint(&homes[i]) {
                        0
                    } else if free[g] != groups[g] {
                        1
                    } else {
                        2
                    };
                    (rank, g)
                });
            // Σ whole ≤ island size, so a free CPU is always left here.
            let Some(g) = pick else { break };
            let Some(cpu) = free[g].first() else { break };
            free[g].remove(cpu);
            homes[i].insert(cpu);
            need[i] -= 1;
        }
    }
    // Step 4: pool from split cores first, spare is what is left.
    let pool_size = saturating_usize((frac.iter().sum::<f64>() - EPS).ceil());
    let mut order: Vec<u32> = Vec::new();
    for split in [true, false] {
        for (g, group) in groups.iter().enumerate() {
            if !free[g].is_empty() && (free[g] != *group) == split {
                order.extend(free[g].iter());
            }
        }
    }
    let pool: CpuSet = order.iter().copied().take(pool_size).collect();
    let spare: CpuSet = order.iter().copied().skip(pool_size).collect();

    Ok(HomeLayout {
        units: units.iter().map(|(n, _)| n.clone()).collect(),
        entitled: units
            .iter()
            .zip(&entitled)
            .map(|((n, _), e)| (n.clone(), *e))
            .collect(),
        homes: units
            .iter()
            .zip(homes)
            .map(|((n, _), h)| (n.clone(), h))
            .collect(),
        pool,
        pool_shares: units
            .iter()
            .zip(&frac)
            .filter(|(_, f)| **f > 0.0)
            .map(|((n, _), f)| (n.clone(), *f))
            .collect(),
        spare,
        oversubscribed,
    })
}

/// `cpus` grouped by physical core (SMT siblings together), groups in order
/// of their first CPU. A CPU the topology does not know is its own group.
pub(crate) fn core_groups(cpus: &CpuSet, topo: &Topology) -> Vec<CpuSet> {
    let mut by_core: BTreeMap<(usize, u32), CpuSet> = BTreeMap::new();
    for cpu in cpus.iter() {
        let key = match topo.cpus.get(&cpu) {
            Some(c) => (c.core, 0),
            None => (usize::MAX, cpu),
        };
        by_core.entry(key).or_default().insert(cpu);
    }
    let mut groups: Vec<CpuSet> = by_core.into_values().collect();
    groups.sort_by_key(|g| g.first());
    groups
}

/// The order in which a set of CPUs is lent: CPUs on cores the set shares
/// with others first (their siblings already run someone else's work), then
/// whole cores from the highest down, so that a unit keeps its lowest,
/// whole cores longest and a borrower tends to get both siblings of a core.
pub(crate) fn lend_order(cpus: &CpuSet, topo: &Topology) -> Vec<u32> {
    let mut groups: Vec<(bool, CpuSet)> = core_groups(cpus, topo)
        .into_iter()
        .map(|g| {
            let whole = g
                .first()
                .map(|c| topo.siblings(c))
                .is_some_and(|s| !s.is_empty() && s.is_subset(&g));
            (whole, g)
        })
        .collect();
    groups.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.first().cmp(&a.1.first())));
    groups
        .into_iter()
        .flat_map(|(_, g)| {
            let mut v: Vec<u32> = g.iter().collect();
            v.reverse();
            v
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::topology::SyntheticShape;

    pub(crate) fn n(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    pub(crate) fn set(s: &str) -> CpuSet {
        CpuSet::parse(s).unwrap()
    }

    /// `cores` cores with `threads` threads each; siblings are `c` and
    /// `c + cores`, as Linux numbers most x86 machines.
    pub(crate) fn topo(cores: u32, threads: u32) -> Topology {
        Topology::synthetic(SyntheticShape {
            packages: 1,
            nodes_per_package: 1,
            llcs_per_node: 1,
            cores_per_llc: cores,
            threads_per_core: threads,
            memory_per_node: 1 << 30,
        })
    }

    fn show(l: &HomeLayout) -> String {
        let homes: Vec<String> = l
            .units
            .iter()
            .map(|u| format!("{u}={}", l.homes[u]))
            .collect();
        format!("{} pool={} spare={}", homes.join(" "), l.pool, l.spare)
    }

    #[test]
    fn layouts_on_synthetic_machines() {
        type Case<'a> = (u32, u32, &'a str, &'a [(&'a str, Option<f64>)], &'a str);
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // cores, threads, island, units, layout
            // 4 cores x 2 threads, siblings c and c+4: whole cores first.
            (4, 2, "0-7", &[("a", Some(4.0)), ("b", Some(2.0)), ("c", Some(2.0))],
             "a=0-1,4-5 b=2,6 c=3,7 pool= spare="),
            // Odd sizes: whole cores, then the odd threads share one core.
            (4, 2, "0-7", &[("a", Some(3.0)), ("b", Some(3.0)), ("c", Some(2.0))],
             "a=0,3-4 b=1,5,7 c=2,6 pool= spare="),
            // Equal shares of 8 CPUs among 3 units: 2 each and a pool of 2
            // (the last whole core) for the thirds.
            (4, 2, "0-7", &[("a", None), ("b", None), ("c", None)],
             "a=0,4 b=1,5 c=2,6 pool=3,7 spare="),
            // Fractions: the pool takes the free thread of the split core first.
            (4, 2, "0-7", &[("a", Some(2.5)), ("b", Some(1.5))],
             "a=0,4 b=1 pool=5 spare=2-3,6-7"),
            // Under-subscription leaves whole spare cores.
            (4, 2, "0-7", &[("a", Some(2.0))],
             "a=0,4 pool= spare=1-3,5-7"),
            // A unit below one CPU lives in the pool only.
            (4, 2, "0-7", &[("a", Some(0.5)), ("b", Some(0.25))],
             "a= b= pool=0 spare=1-7"),
            // No SMT.
            (4, 1, "0-3", &[("a", Some(1.0)), ("b", Some(3.0))],
             "a=0 b=1-3 pool= spare="),
            // 4 threads per core (siblings c, c+2, c+4, c+6): a core of 4
            // does not fit a unit of 3; b takes its whole core first, then
            // a takes 3 threads of the other and b the last one.
            (2, 4, "0-7", &[("a", Some(3.0)), ("b", Some(5.0))],
             "a=1,3,5 b=0,2,4,6-7 pool= spare="),
            // An island that cuts a core (CPU 0's sibling 4 is elsewhere):
            // the lone thread is a core of its own size 1.
            (4, 2, "1-4,5-7", &[("a", Some(2.0)), ("b", Some(2.0)), ("c", Some(3.0))],
             "a=1,5 b=2,6 c=3-4,7 pool= spare="),
            // Unit order decides who gets the lowest CPUs.
            (4, 2, "0-7", &[("b", Some(2.0)), ("a", Some(2.0))],
             "b=0,4 a=1,5 pool= spare=2-3,6-7"),
        ];
        for (cores, threads, island, units, want) in cases {
            let t = topo(*cores, *threads);
            let units: Vec<(Name, Option<f64>)> = units.iter().map(|(u, c)| (n(u), *c)).collect();
            let l = home_cpus(&set(island), &t, &units).unwrap();
            assert_eq!(show(&l), *want, "{units:?} on {island}");
            assert_eq!(l.island(), set(island));
            assert!(l.oversubscribed.is_none());
        }
    }

    #[test]
    fn guests_take_no_home_from_anyone() {
        let t = topo(4, 1);
        let units = [(n("a"), Some(2.0)), (n("b"), Some(2.0))];
        let alone = home_cpus(&set("0-3"), &t, &units).unwrap();
        let with = home_cpus_with_guests(&set("0-3"), &t, &units, &[n("g1"), n("g2")]).unwrap();
        for u in ["a", "b"] {
            assert_eq!(with.homes[&n(u)], alone.homes[&n(u)], "{u}");
            assert_eq!(with.entitled[&n(u)], 2.0);
        }
        assert!(with.oversubscribed.is_none());
        for g in ["g1", "g2"] {
            assert!(with.homes[&n(g)].is_empty());
            assert_eq!(with.entitled[&n(g)], 0.0);
            assert_eq!(with.pool_share(&n(g)), 0.0);
        }
        assert_eq!(with.units.len(), 4);
        assert!(home_cpus_with_guests(&set("0-3"), &t, &units, &[n("a")]).is_err());
        // An island of guests only: everything is spare.
        let only = home_cpus_with_guests(&set("0-3"), &t, &[], &[n("g")]).unwrap();
        assert_eq!(only.spare, set("0-3"));
    }

    #[test]
    fn pool_shares_are_the_fractions() {
        let t = topo(4, 2);
        let l = home_cpus(
            &set("0-7"),
            &t,
            &[
                (n("a"), Some(2.5)),
                (n("b"), Some(1.25)),
                (n("c"), Some(3.0)),
            ],
        )
        .unwrap();
        assert_eq!(l.pool_share(&n("a")), 0.5);
        assert_eq!(l.pool_share(&n("b")), 0.25);
        assert!(!l.pool_shares.contains_key(&n("c")));
        assert_eq!(l.pool.len(), 1);
        assert_eq!(l.home(&n("c")).len(), 3);
        assert_eq!(l.home(&n("zzz")), CpuSet::new());
    }

    #[test]
    fn oversubscription_scales_down_and_says_so() {
        let t = topo(4, 2);
        let l = home_cpus(
            &set("0-7"),
            &t,
            &[
                (n("a"), Some(8.0)),
                (n("b"), Some(4.0)),
                (n("c"), Some(4.0)),
            ],
        )
        .unwrap();
        let o = l.oversubscribed.unwrap();
        assert_eq!((o.asked, o.cpus, o.factor), (16.0, 8, 0.5));
        assert_eq!(l.entitled[&n("a")], 4.0);
        assert_eq!(show(&l), "a=0-1,4-5 b=2,6 c=3,7 pool= spare=");
        // A unit without an entitlement counts as an equal share (8 / 2).
        let l = home_cpus(&set("0-7"), &t, &[(n("a"), Some(8.0)), (n("b"), None)]).unwrap();
        assert_eq!(l.oversubscribed.unwrap().asked, 12.0);
        let a = l.entitled[&n("a")];
        assert!((a - 16.0 / 3.0).abs() < 1e-9, "{a}");
    }

    #[test]
    fn bad_input_is_refused_with_the_value() {
        let t = topo(2, 1);
        for (units, want) in [
            (
                vec![(n("a"), Some(0.0))],
                IsolationError::BadEntitlement {
                    unit: n("a"),
                    cpus: 0.0,
                },
            ),
            (
                vec![(n("a"), Some(-1.0))],
                IsolationError::BadEntitlement {
                    unit: n("a"),
                    cpus: -1.0,
                },
            ),
            (
                vec![(n("a"), None), (n("a"), None)],
                IsolationError::DuplicateUnit { unit: n("a") },
            ),
        ] {
            assert_eq!(home_cpus(&set("0-1"), &t, &units), Err(want));
        }
        assert!(matches!(
            home_cpus(&set("0"), &t, &[(n("a"), Some(f64::NAN))]),
            Err(IsolationError::BadEntitlement { .. })
        ));
        assert_eq!(
            home_cpus(&CpuSet::new(), &t, &[]),
            Err(IsolationError::EmptyIsland)
        );
        let e = home_cpus(&set("0-1"), &t, &[(n("a"), Some(-1.0))]).unwrap_err();
        assert!(e.to_string().contains("-1"), "{e}");
    }

    #[test]
    fn lend_order_gives_split_cores_then_whole_cores_from_the_top() {
        let t = topo(4, 2); // siblings c, c+4
        for (cpus, want) in [
            ("0-1,4-5", vec![5, 1, 4, 0]),
            ("0,3-4", vec![3, 4, 0]),
            ("0-7", vec![7, 3, 6, 2, 5, 1, 4, 0]),
            ("", vec![]),
        ] {
            assert_eq!(lend_order(&set(cpus), &t), want, "{cpus}");
        }
    }

    proptest! {
        #[test]
        fn homes_partition_the_island(
            cores in 1u32..6,
            threads in 1u32..4,
            drop in proptest::collection::btree_set(0u32..24, 0..4),
            ents in proptest::collection::vec(proptest::option::of(1u32..40), 0..6),
        ) {
            let t = topo(cores, threads);
            let island = t.online().difference(&drop.into_iter().collect());
            prop_assume!(!island.is_empty());
            let units: Vec<(Name, Option<f64>)> = ents
                .iter()
                .enumerate()
                .map(|(i, e)| (n(&format!("u{i}")), e.map(|q| f64::from(q) / 4.0)))
                .collect();
            let l = home_cpus(&island, &t, &units).unwrap();
            // Disjoint, and together the island.
            let mut seen = CpuSet::new();
            for part in l.homes.values().chain([&l.pool, &l.spare]) {
                prop_assert!(part.is_disjoint(&seen), "{l:?}");
                seen = seen.union(part);
            }
            prop_assert_eq!(&seen, &island);
            let total: f64 = l.entitled.values().sum();
            prop_assert!(total <= island.len() as f64 + 1e-6);
            for (u, e) in &l.entitled {
                let h = l.homes[u].len() as f64;
                let p = l.pool_share(u);
                prop_assert!((h + p - e).abs() < 1e-6, "{u}: {h} + {p} != {e}");
                prop_assert!(p < 1.0);
            }
            let pool_need: f64 = l.pool_shares.values().sum();
            prop_assert!(l.pool.len() as f64 >= pool_need - 1e-6);
            prop_assert!((l.pool.len() as f64) < pool_need + 1.0);
            // Whole cores first: a unit is split across a core with another
            // owner only for the odd threads of its entitlement.
            for (u, home) in &l.homes {
                let split = core_groups(home, &t)
                    .iter()
                    .filter(|g| g.first().is_some_and(|c| !t.siblings(c).intersection(&island).is_subset(g)))
                    .count();
                prop_assert!(split <= threads as usize, "{u} split on {split} cores: {l:?}");
            }
        }
    }
}
