//! Property tests of the planner on random platforms and workloads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;

use super::plan::{cap_millis, need_millis};
use super::plan_tests::{isl, mode, n};
use super::*;

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

fn islands() -> impl Strategy<Value = Vec<IslandCapacity>> {
    let cpus = prop::sample::select(vec![0.0, 0.5, 1.0, 2.0, 3.3, 4.0, 8.0]);
    prop::collection::vec((cpus, 0u64..16, any::<bool>()), 1..=NAMES.len()).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (c, g, unmetered))| {
                let mut x = isl(NAMES[i], c, g);
                if unmetered {
                    x.memory_bytes = u64::MAX;
                }
                x
            })
            .collect()
    })
}

/// (value, quota, exclusive, memory MiB, allowed islands)
type ModeSpec = (f64, f64, bool, u64, Option<Vec<usize>>);

fn mode_spec() -> impl Strategy<Value = ModeSpec> {
    let q = prop::sample::select(vec![0.1, 0.5, 1.0, 1.1, 1.5, 2.0, 3.0, 4.7]);
    let allowed = prop::option::weighted(0.25, prop::collection::vec(0usize..7, 1..3));
    (
        0.0..=1.0f64,
        q,
        prop::bool::weighted(0.2),
        0u64..4096,
        allowed,
    )
}

/// (priority, modes, current (mode index or 9, island index or 7), gap, waiting)
type AppSpec = (u8, Vec<ModeSpec>, Option<(usize, usize)>, f64, u32);

fn app_spec() -> impl Strategy<Value = AppSpec> {
    (
        0u8..3,
        prop::collection::vec(mode_spec(), 1..5),
        prop::option::of((0usize..10, 0usize..8)),
        prop_oneof![Just(0.0), -1.5..1.5f64],
        0u32..4,
    )
}

fn build(specs: &[AppSpec]) -> Vec<AppState> {
    // "zz" (index 6) and "gone" (7) are names the platform lacks.
    let name = |i: usize| {
        n(NAMES
            .get(i)
            .copied()
            .unwrap_or(if i == 6 { "zz" } else { "gone" }))
    };
    specs
        .iter()
        .enumerate()
        .map(|(i, (prio, modes, cur, gap, waiting))| {
            let modes: Vec<WorkingMode> = modes
                .iter()
                .enumerate()
                .map(|(k, (v, q, ex, mib, allowed))| {
                    let mut m = mode(2 * u8::try_from(k).unwrap() + 1, *v, *q);
                    m.needs.exclusive_cpus = *ex;
                    m.needs.memory_bytes = mib << 20;
                    m.needs.islands = allowed
                        .as_ref()
                        .map(|l| l.iter().map(|&y| name(y)).collect());
                    m
                })
                .collect();
            let current = cur.map(|(m, y)| Current {
                // Mode ids are odd; an index past the modes gives an id the
                // recipe lacks.
                mode: 2 * u8::try_from(m).unwrap() + 1,
                island: name(y),
            });
            AppState {
                app: AppId(1000 - i as u64),
                recipe: Arc::new(Recipe {
                    name: n("app"),
                    priority: *prio,
                    modes,
                }),
                current,
                goal_gap: *gap,
                waiting: *waiting,
            }
        })
        .collect()
}

/// (milli-CPUs, bytes) used per island by a set of placements.
fn usage_of<'a>(
    islands: &[IslandCapacity],
    placements: impl Iterator<Item = (&'a Name, f64, u64)>,
) -> BTreeMap<Name, (u64, u128)> {
    let mut u: BTreeMap<Name, (u64, u128)> =
        islands.iter().map(|i| (i.name.clone(), (0, 0))).collect();
    for (y, cpus, mem) in placements {
        if let Some(e) = u.get_mut(y) {
            e.0 += need_millis(cpus);
            e.1 += u128::from(mem);
        }
    }
    u
}

fn phase(k: ChangeKind) -> u8 {
    match k {
        ChangeKind::Release | ChangeKind::Wait => 0,
        ChangeKind::Shrink => 1,
        ChangeKind::Move | ChangeKind::Reshape => 2,
        ChangeKind::Grow => 3,
        ChangeKind::Grant => 4,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn never_overcommits_and_accounts_for_everyone(
        islands in islands(),
        specs in prop::collection::vec(app_spec(), 0..30),
    ) {
        let apps = build(&specs);
        let s = Planner::default().plan(&islands, &apps).unwrap();

        // Capacity, exactly (milli-CPUs) and in floating point.
        let new_use = usage_of(&islands, s.grants.iter().map(|g| (&g.island, g.charged_cpus(), g.memory_bytes)));
        for i in &islands {
            let (c, m) = new_use[&i.name];
            prop_assert!(c <= cap_millis(i.cpus), "{} over CPU: {c}", i.name);
            prop_assert!(m <= u128::from(i.memory_bytes), "{} over memory", i.name);
            let f: f64 = s.grants.iter().filter(|g| g.island == i.name).map(Grant::charged_cpus).sum();
            prop_assert!(f <= i.cpus + 1e-9);
        }

        // Everyone exactly once, granted or blocked.
        let granted: BTreeSet<AppId> = s.grants.iter().map(|g| g.app).collect();
        let blocked: BTreeSet<AppId> = s.blocked.iter().copied().collect();
        prop_assert_eq!(granted.len(), s.grants.len());
        prop_assert_eq!(blocked.len(), s.blocked.len());
        prop_assert!(granted.is_disjoint(&blocked));
        let all: BTreeSet<AppId> = apps.iter().map(|a| a.app).collect();
        prop_assert_eq!(&granted | &blocked, all);
        prop_assert!(s.grants.windows(2).all(|w| w[0].app < w[1].app));

        // Grants are modes of the recipe, on allowed islands.
        for g in &s.grants {
            let a = apps.iter().find(|a| a.app == g.app).unwrap();
            let m = a.recipe.mode(g.mode).unwrap();
            prop_assert!(m.needs.allows(&g.island));
            prop_assert_eq!(g.cpu_quota, m.needs.cpu_quota);
            prop_assert_eq!(g.memory_bytes, m.needs.memory_bytes);
            prop_assert!((0.0..=1.0).contains(&g.score.total));
        }

        // Nobody is blocked who could still run in what is left.
        for id in &s.blocked {
            let a = apps.iter().find(|a| a.app == *id).unwrap();
            for m in &a.recipe.modes {
                for i in islands.iter().filter(|i| m.needs.allows(&i.name)) {
                    let (c, mem) = new_use[&i.name];
                    let fits = c + need_millis(m.needs.charged_cpus()) <= cap_millis(i.cpus)
                        && mem + u128::from(m.needs.memory_bytes) <= u128::from(i.memory_bytes);
                    prop_assert!(!fits, "app {} mode {} would fit {}", id, m.id, i.name);
                }
            }
        }

        // Deterministic, whatever the input order.
        prop_assert_eq!(&s, &Planner::default().plan(&islands, &apps).unwrap());
        let mut rev = apps.clone();
        rev.reverse();
        prop_assert_eq!(&s, &Planner::default().plan(&islands, &rev).unwrap());
    }

    #[test]
    fn changes_free_first_and_lead_to_the_schedule(
        islands in islands(),
        specs in prop::collection::vec(app_spec(), 0..30),
    ) {
        let apps = build(&specs);
        let s = Planner::default().plan(&islands, &apps).unwrap();
        prop_assert!(s.changes.windows(2).all(|w| phase(w[0].kind) <= phase(w[1].kind)));
        let ids: BTreeSet<AppId> = s.changes.iter().map(|c| c.app).collect();
        prop_assert_eq!(ids.len(), s.changes.len());

        // Replay from the previous usage.
        let prev = apps.iter().filter_map(|a| {
            let c = a.current.as_ref()?;
            let m = a.recipe.mode(c.mode)?;
            Some((&c.island, m.needs.charged_cpus(), m.needs.memory_bytes))
        });
        let mut used = usage_of(&islands, prev);
        for c in &s.changes {
            let before = used.clone();
            if let Some(f) = &c.from {
                if let Some(e) = used.get_mut(&f.island) {
                    e.0 -= need_millis(f.cpus);
                    e.1 -= u128::from(f.memory_bytes);
                }
            }
            if let Some(t) = &c.to {
                let e = used.get_mut(&t.island).unwrap();
                e.0 += need_millis(t.cpus);
                e.1 += u128::from(t.memory_bytes);
            }
            match phase(c.kind) {
                0 | 1 => {
                    for (k, v) in &used {
                        prop_assert!(v.0 <= before[k].0 && v.1 <= before[k].1, "{} grew: {}", k, c);
                    }
                }
                3 | 4 => {
                    for i in &islands {
                        let v = used[&i.name];
                        prop_assert!(v.0 <= cap_millis(i.cpus), "{}", c);
                        prop_assert!(v.1 <= u128::from(i.memory_bytes), "{}", c);
                    }
                }
                _ => {}
            }
            let text = c.to_string();
            let prefix = format!("app {} (app): ", c.app);
            prop_assert!(text.starts_with(&prefix));
        }
        let new_use = usage_of(&islands, s.grants.iter().map(|g| (&g.island, g.charged_cpus(), g.memory_bytes)));
        prop_assert_eq!(used, new_use);

        // Blocked apps are released or told to wait, unchanged ones do not
        // appear.
        for a in &apps {
            let change = s.changes.iter().find(|c| c.app == a.app);
            if s.is_blocked(a.app) {
                let want = if a.current.is_some() { ChangeKind::Release } else { ChangeKind::Wait };
                prop_assert_eq!(change.map(|c| c.kind), Some(want));
            } else {
                let g = s.grant(a.app).unwrap();
                let same = a.current.as_ref().is_some_and(|c| c.mode == g.mode && c.island == g.island && a.recipe.mode(c.mode).is_some());
                prop_assert_eq!(change.is_none(), same);
            }
        }
    }

    #[test]
    fn replanning_a_plan_without_gaps_is_stable(
        islands in islands(),
        specs in prop::collection::vec(app_spec(), 0..20),
    ) {
        let p = Planner::default();
        let mut apps = build(&specs);
        for a in &mut apps {
            a.goal_gap = 0.0;
            a.current = None;
            // Across levels a higher one may take a lower one's room.
            Arc::make_mut(&mut a.recipe).priority = 0;
        }
        let s = p.plan(&islands, &apps).unwrap();
        let next: Vec<AppState> = apps
            .iter()
            .map(|a| AppState {
                current: s.grant(a.app).map(|g| Current { mode: g.mode, island: g.island.clone() }),
                ..a.clone()
            })
            .collect();
        let s2 = p.plan(&islands, &next).unwrap();
        // Incumbency: every app that ran keeps running (its current pair is
        // reserved until its turn), whoever else is waiting.
        for g in &s.grants {
            prop_assert!(s2.grant(g.app).is_some(), "app {} lost its grant", g.app);
        }
    }
}
