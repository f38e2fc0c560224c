//! Scenario tests of the planner.

use std::sync::Arc;

use super::*;

pub(super) fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

pub(super) fn isl(name: &str, cpus: f64, mem_gib: u64) -> IslandCapacity {
    IslandCapacity::new(n(name), cpus, mem_gib << 30)
}

pub(super) fn mode(id: u8, value: f64, q: f64) -> WorkingMode {
    WorkingMode {
        power_watts: None,
        id,
        name: format!("wm{id}"),
        value,
        needs: Needs {
            cpu_quota: q,
            threads: Some(crate::num::saturating_u32(q.ceil())),
            exclusive_cpus: false,
            memory_bytes: 0,
            islands: None,
        },
    }
}

fn recipe(name: &str, priority: u8, modes: &[(u8, f64, f64)]) -> Arc<Recipe> {
    Arc::new(Recipe {
        name: n(name),
        priority,
        modes: modes.iter().map(|&(i, v, q)| mode(i, v, q)).collect(),
    })
}

/// The paper's Table VIII: 0.5, 1, 2, 4 CPUs.
const PAPER: &[(u8, f64, f64)] = &[(0, 0.25, 0.5), (1, 0.5, 1.0), (2, 0.75, 2.0), (3, 1.0, 4.0)];

fn app(id: u64, r: &Arc<Recipe>) -> AppState {
    AppState::new(AppId(id), r.clone())
}

fn running(id: u64, r: &Arc<Recipe>, mode: u8, island: &str) -> AppState {
    AppState {
        current: Some(Current {
            mode,
            island: n(island),
        }),
        ..app(id, r)
    }
}

/// The default policy without its idle-capacity pass: the selection alone.
fn selection_only() -> Planner {
    Planner::new(
        Weights::default(),
        PolicyParams {
            grow_into_idle: false,
            ..PolicyParams::default()
        },
    )
    .unwrap()
}

fn plan(islands: &[IslandCapacity], apps: &[AppState]) -> Schedule {
    Planner::default().plan(islands, apps).unwrap()
}

/// Charged CPUs per island.
fn usage(s: &Schedule, island: &str) -> f64 {
    s.grants
        .iter()
        .filter(|g| g.island.as_str() == island)
        .map(Grant::charged_cpus)
        .sum()
}

fn mode_of(s: &Schedule, id: u64) -> Option<u8> {
    s.grant(AppId(id)).map(|g| g.mode)
}

#[test]
fn paper_mixed_workload_runs_everyone_below_the_top_mode() {
    // L1: 2 Bodytrack + 2 Ferret on three quad-core nodes. Running all in
    // the top mode would need 16 CPUs; fairness keeps everyone below it.
    let islands = [
        isl("node1", 4.0, 6),
        isl("node2", 4.0, 6),
        isl("node3", 4.0, 6),
    ];
    let body = recipe("bodytrack", 0, PAPER);
    let ferret = recipe("ferret", 0, PAPER);
    let apps = [
        app(1, &body),
        app(2, &body),
        app(3, &ferret),
        app(4, &ferret),
    ];
    let s = plan(&islands, &apps);
    assert!(s.blocked.is_empty(), "{s:?}");
    for g in &s.grants {
        assert!(g.mode < 3, "{g:?}");
        assert!(g.mode >= 1, "{g:?}");
    }
    // The three first take AWM2 on a node of their own (L spreads them);
    // the fourth is selected at AWM1, then grows into its node's idle room,
    // up to its fair share of 3 CPUs: AWM2, not AWM3.
    let islands_used: std::collections::BTreeSet<_> =
        s.grants.iter().map(|g| g.island.clone()).collect();
    assert_eq!(islands_used.len(), 3);
    let selected = s.grants.iter().filter(|g| g.mode == 2 && !g.score.idle);
    assert_eq!(selected.count(), 3, "{s:?}");
    let grown: Vec<_> = s.grants.iter().filter(|g| g.score.idle).collect();
    assert_eq!(grown.len(), 1, "{s:?}");
    assert_eq!((grown[0].app, grown[0].mode), (AppId(4), 2), "{s:?}");
}

#[test]
fn grants_spread_over_islands_as_usage_accumulates() {
    // Four identical apps, four identical islands: the paper's static L
    // would send all of them to the same (least loaded) island first.
    let islands: Vec<_> = (0..4).map(|i| isl(&format!("i{i}"), 4.0, 8)).collect();
    let r = recipe("web", 0, &[(0, 0.5, 1.0), (1, 1.0, 2.0)]);
    let apps: Vec<_> = (1..=4).map(|i| app(i, &r)).collect();
    let s = plan(&islands, &apps);
    for i in &islands {
        assert_eq!(
            s.grants.iter().filter(|g| g.island == i.name).count(),
            1,
            "{s:?}"
        );
    }
}

#[test]
fn high_priority_gets_its_best_mode_before_lower_levels() {
    let islands = [isl("a", 4.0, 8)];
    let big = |prio| recipe("big", prio, &[(0, 0.3, 1.0), (1, 1.0, 3.0)]);
    let small = recipe("small", 1, &[(0, 1.0, 1.0)]);
    let mut apps = vec![app(9, &big(0))];
    apps.extend((1..=3).map(|i| app(i, &small)));
    let s = plan(&islands, &apps);
    assert_eq!(mode_of(&s, 9), Some(1), "{s:?}");
    // One small app gets the last CPU, two wait.
    assert_eq!(s.grants.len(), 2);
    assert_eq!(s.blocked, vec![AppId(2), AppId(3)]);
    // Control: at the same level, fairness would have cut the big app down.
    apps[0] = app(9, &big(1));
    let s = plan(&islands, &apps);
    assert_eq!(mode_of(&s, 9), Some(0), "{s:?}");
    assert!(s.blocked.is_empty());
}

#[test]
fn blocked_rather_than_below_the_smallest_mode() {
    let islands = [isl("a", 2.0, 8)];
    let r = recipe("heavy", 0, &[(0, 0.5, 1.5), (1, 1.0, 2.0)]);
    let s = plan(&islands, &[app(1, &r), app(2, &r)]);
    assert_eq!(s.grants.len(), 1);
    assert_eq!(s.grants[0].app, AppId(1));
    assert!(s.grants[0].cpu_quota >= 1.5);
    assert_eq!(s.blocked, vec![AppId(2)]);
    let wait = s.changes.iter().find(|c| c.app == AppId(2)).unwrap();
    assert_eq!(wait.kind, ChangeKind::Wait);
    let why = wait.reason();
    assert!(why.contains("blocked") && why.contains("1.5 CPUs"), "{why}");
    assert!(why.contains("0.5 CPUs"), "{why}");
}

#[test]
fn new_schedule_frees_before_it_grants() {
    let islands = [isl("a", 4.0, 8)];
    let low = recipe("low", 1, &[(0, 0.2, 1.0), (1, 1.0, 4.0)]);
    let high = recipe("high", 0, &[(0, 1.0, 3.0)]);
    let apps = [running(1, &low, 1, "a"), app(2, &high)];
    let s = plan(&islands, &apps);
    let kinds: Vec<_> = s.changes.iter().map(|c| (c.app, c.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            (AppId(1), ChangeKind::Shrink),
            (AppId(2), ChangeKind::Grant)
        ]
    );
    let why = s.changes[0].reason();
    assert!(why.contains("mode 1 → 0 on island a"), "{why}");
    assert!(why.contains("score") && why.contains("V "), "{why}");

    // No room at all for the low one: it is released first.
    let high = recipe("high", 0, &[(0, 1.0, 4.0)]);
    let s = plan(&islands, &[running(1, &low, 1, "a"), app(2, &high)]);
    let kinds: Vec<_> = s.changes.iter().map(|c| (c.app, c.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            (AppId(1), ChangeKind::Release),
            (AppId(2), ChangeKind::Grant)
        ]
    );
    assert!(s.changes[0]
        .reason()
        .contains("releases mode 1 on island a"));
}

#[test]
fn moves_are_ordered_so_each_destination_has_room() {
    // App 1 must go a → b, app 2 b → c (constraints changed): b is full
    // until app 2 has left, so app 2 moves first.
    let islands = [isl("a", 2.0, 8), isl("b", 2.0, 8), isl("c", 2.0, 8)];
    let only = |island: &str| {
        let mut m = mode(0, 1.0, 2.0);
        m.needs.islands = Some(vec![n(island)]);
        Arc::new(Recipe {
            name: n("pinned"),
            priority: 0,
            modes: vec![m],
        })
    };
    let apps = [
        running(1, &only("b"), 0, "a"),
        running(2, &only("c"), 0, "b"),
    ];
    let s = plan(&islands, &apps);
    let kinds: Vec<_> = s.changes.iter().map(|c| (c.app, c.kind)).collect();
    assert_eq!(
        kinds,
        vec![(AppId(2), ChangeKind::Move), (AppId(1), ChangeKind::Move)]
    );
    assert!(s.changes[0]
        .reason()
        .contains("mode 0 on island b → mode 0 on island c"));
}

#[test]
fn allowed_islands_and_memory_are_respected() {
    let islands = [
        isl("big", 16.0, 1),
        isl("fat", 4.0, 64),
        isl("other", 16.0, 64),
    ];
    let mut m = mode(0, 1.0, 2.0);
    m.needs.memory_bytes = 8 << 30;
    m.needs.islands = Some(vec![n("big"), n("fat")]);
    let r = Arc::new(Recipe {
        name: n("db"),
        priority: 0,
        modes: vec![m],
    });
    // "big" lacks the memory, "other" is not allowed: "fat" it is.
    let s = plan(&islands, &[app(1, &r), app(2, &r)]);
    assert_eq!(s.grant(AppId(1)).unwrap().island, n("fat"));
    assert_eq!(s.grant(AppId(2)).unwrap().island, n("fat"));
    // "fat" has the memory for 8 of them but the CPUs for 2.
    let apps: Vec<_> = (1..=4).map(|i| app(i, &r)).collect();
    let s = plan(&islands, &apps);
    assert_eq!(s.grants.len(), 2);
    assert_eq!(s.blocked, vec![AppId(3), AppId(4)]);
}

#[test]
fn exclusive_cpus_are_charged_whole() {
    let islands = [isl("a", 4.0, 8)];
    let mut m = mode(0, 1.0, 1.5);
    m.needs.exclusive_cpus = true;
    let r = Arc::new(Recipe {
        name: n("rt"),
        priority: 0,
        modes: vec![m],
    });
    let s = plan(&islands, &[app(1, &r), app(2, &r), app(3, &r)]);
    assert_eq!(s.grants.len(), 2);
    assert_eq!(s.grants[0].exclusive_cpus, 2);
    assert_eq!(s.grants[0].cpu_quota, 1.5);
    assert_eq!(usage(&s, "a"), 4.0);
    assert_eq!(s.blocked, vec![AppId(3)]);
}

#[test]
fn deterministic_and_independent_of_input_order() {
    let islands: Vec<_> = (0..3).map(|i| isl(&format!("i{i}"), 3.0, 8)).collect();
    let r = recipe("w", 0, PAPER);
    let mut apps: Vec<_> = (1..=7).map(|i| app(i, &r)).collect();
    let s1 = plan(&islands, &apps);
    assert_eq!(s1, plan(&islands, &apps));
    apps.reverse();
    assert_eq!(s1, plan(&islands, &apps));
    // Ties go to the lower id: identical apps, room for one.
    let one = [isl("a", 1.0, 8)];
    let r = recipe("w", 0, &[(0, 1.0, 1.0)]);
    let s = plan(&one, &[app(5, &r), app(3, &r), app(4, &r)]);
    assert_eq!(s.grants[0].app, AppId(3));
    assert_eq!(s.blocked, vec![AppId(4), AppId(5)]);
}

#[test]
fn hysteresis_keeps_a_nearly_as_good_current_pair() {
    let islands = [isl("a", 8.0, 8)];
    let value_only = Weights {
        value: 1.0,
        reconfig: 0.0,
        migration: 0.0,
        balance: 0.0,
        fairness: 0.0,
        power: 0.0,
    };
    let with = |h| {
        Planner::new(
            value_only,
            PolicyParams {
                hysteresis: h,
                ..PolicyParams::default()
            },
        )
        .unwrap()
    };
    let close = recipe("x", 0, &[(0, 0.50, 1.0), (1, 0.53, 2.0)]);
    let apps = [running(1, &close, 0, "a")];
    assert_eq!(
        mode_of(&with(0.05).plan(&islands, &apps).unwrap(), 1),
        Some(0)
    );
    assert_eq!(
        mode_of(&with(0.0).plan(&islands, &apps).unwrap(), 1),
        Some(1)
    );
    let far = recipe("x", 0, &[(0, 0.50, 1.0), (1, 0.60, 2.0)]);
    let apps = [running(1, &far, 0, "a")];
    assert_eq!(
        mode_of(&with(0.05).plan(&islands, &apps).unwrap(), 1),
        Some(1)
    );
    // Stable: planning the result again changes nothing.
    let s = plan(&[isl("a", 4.0, 8), isl("b", 4.0, 8)], &[app(1, &far)]);
    let g = &s.grants[0];
    let again = plan(
        &[isl("a", 4.0, 8), isl("b", 4.0, 8)],
        &[running(1, &far, g.mode, g.island.as_str())],
    );
    assert!(again.changes.is_empty(), "{again:?}");
}

#[test]
fn running_apps_stay_when_another_island_empties() {
    // Migration cost: app 1 stays on the busier island.
    let islands = [isl("a", 4.0, 8), isl("b", 4.0, 8)];
    let r = recipe("w", 0, &[(0, 1.0, 1.0)]);
    let apps = [running(1, &r, 0, "a"), running(2, &r, 0, "a")];
    let s = plan(&islands, &apps);
    assert!(s.changes.is_empty(), "{s:?}");
    // New ones go to the empty island.
    let s = plan(&islands, &[apps[0].clone(), apps[1].clone(), app(3, &r)]);
    assert_eq!(s.grant(AppId(3)).unwrap().island, n("b"));
}

#[test]
fn goal_gap_moves_the_mode_up_or_down() {
    // On 3 CPUs mode 1 and mode 2 score about the same without a gap (the
    // selection alone: without the idle-capacity pass, which would grow a
    // lone application; see `lone_app_grows_into_idle_capacity`).
    let islands = [isl("a", 3.0, 8)];
    let r = recipe("w", 0, PAPER);
    let selection = selection_only();
    let plan =
        |islands: &[IslandCapacity], apps: &[AppState]| selection.plan(islands, apps).unwrap();
    let with_gap = |gap| AppState {
        goal_gap: gap,
        ..running(1, &r, 1, "a")
    };
    let m = |gap| mode_of(&plan(&islands, &[with_gap(gap)]), 1).unwrap();
    assert_eq!(m(0.0), 1);
    assert_eq!(m(1.0), 2, "gap +1");
    assert_eq!(m(0.05), 1, "a small gap is within the dead band");
    let from2 = |gap| AppState {
        goal_gap: gap,
        ..running(1, &r, 2, "a")
    };
    let m2 = |gap| mode_of(&plan(&islands, &[from2(gap)]), 1).unwrap();
    assert_eq!(m2(0.0), 2);
    assert_eq!(m2(-0.6), 1);
    assert_eq!(m2(-0.9), 0);
}

#[test]
fn aging_lets_a_waiting_app_go_first_in_its_level() {
    let islands = [isl("a", 1.0, 8)];
    let r = recipe("w", 0, &[(0, 1.0, 1.0)]);
    let waited = AppState {
        waiting: 3,
        ..app(7, &r)
    };
    let s = plan(&islands, &[app(2, &r), waited.clone()]);
    assert_eq!(s.grants[0].app, AppId(7));
    // Aging off: the lower id wins.
    let p = Planner::new(
        Weights::default(),
        PolicyParams {
            aging: 0.0,
            ..PolicyParams::default()
        },
    )
    .unwrap();
    let s = p.plan(&islands, &[app(2, &r), waited]).unwrap();
    assert_eq!(s.grants[0].app, AppId(2));
}

#[test]
fn vanished_islands_and_modes_are_handled() {
    let islands = [isl("a", 4.0, 8)];
    let r = recipe("w", 0, &[(0, 1.0, 1.0)]);
    // Current island gone: a move. Current mode gone: a grow from 0.
    let s = plan(
        &islands,
        &[running(1, &r, 0, "gone"), running(2, &r, 9, "a")],
    );
    let kinds: Vec<_> = s.changes.iter().map(|c| (c.app, c.kind)).collect();
    assert_eq!(
        kinds,
        vec![(AppId(1), ChangeKind::Move), (AppId(2), ChangeKind::Grow)]
    );
    assert_eq!(s.changes[1].from.as_ref().unwrap().cpus, 0.0);
}

#[test]
fn inconsistent_input_is_refused() {
    let islands = [isl("a", 4.0, 8)];
    let r = recipe("w", 0, &[(0, 1.0, 1.0)]);
    let p = Planner::default();
    assert_eq!(
        p.plan(&islands, &[app(1, &r), app(1, &r)]),
        Err(PlanError::DuplicateApp { app: AppId(1) })
    );
    assert!(matches!(
        p.plan(&[isl("a", 1.0, 1), isl("a", 2.0, 1)], &[]),
        Err(PlanError::DuplicateIsland { .. })
    ));
    assert!(matches!(
        p.plan(&[isl("a", f64::NAN, 1)], &[]),
        Err(PlanError::IslandCpus { .. })
    ));
    let bad = recipe("w", 0, &[(0, 2.0, 1.0)]);
    let e = p.plan(&islands, &[app(4, &bad)]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("app 4: recipe w: mode 0: value = 2"),
        "{e}"
    );
    assert!(Planner::new(
        Weights {
            value: f64::NAN,
            ..Weights::default()
        },
        PolicyParams::default()
    )
    .is_err());
    // Nothing to plan is fine.
    assert_eq!(p.plan(&[], &[]).unwrap(), Schedule::default());
}

#[test]
fn zero_capacity_island_blocks_and_reports_free_room() {
    let islands = [isl("a", 0.0, 0)];
    let r = recipe("w", 0, &[(0, 1.0, 0.5)]);
    let s = plan(&islands, &[app(1, &r)]);
    assert_eq!(s.blocked, vec![AppId(1)]);
    let b = s.changes[0].blocked.unwrap();
    assert_eq!((b.smallest_cpus, b.free_cpus), (0.5, 0.0));
}

#[test]
fn running_apps_are_not_preempted_by_waiting_peers() {
    // No thrashing: however long app 2 has waited, app 1 (same level)
    // keeps its pair; app 2 waits for room.
    let islands = [isl("a", 2.0, 8)];
    let r = recipe("w", 0, &[(0, 1.0, 2.0)]);
    let old_waiter = AppState {
        waiting: 1000,
        ..app(2, &r)
    };
    let s = plan(&islands, &[running(1, &r, 0, "a"), old_waiter]);
    assert_eq!(mode_of(&s, 1), Some(0));
    assert_eq!(s.blocked, vec![AppId(2)]);
    assert_eq!(s.changes.len(), 1);
    assert_eq!(s.changes[0].kind, ChangeKind::Wait);
    // A higher level does preempt.
    let high = recipe("w", 0, &[(0, 1.0, 2.0)]);
    let low = recipe("w", 1, &[(0, 1.0, 2.0)]);
    let s = plan(&islands, &[running(1, &low, 0, "a"), app(2, &high)]);
    assert_eq!(s.blocked, vec![AppId(1)]);
    assert_eq!(s.changes[0].kind, ChangeKind::Release);
}

#[test]
fn fairness_shrinks_an_incumbent_to_let_a_newcomer_in() {
    let islands = [isl("a", 4.0, 8)];
    let r = recipe("w", 0, &[(0, 0.5, 2.0), (1, 1.0, 4.0)]);
    // Alone, it keeps the whole island.
    let s = plan(&islands, &[running(1, &r, 1, "a")]);
    assert!(s.changes.is_empty(), "{s:?}");
    // With a newcomer its fair share is 2 CPUs: it shrinks, both run.
    let s = plan(&islands, &[running(1, &r, 1, "a"), app(2, &r)]);
    assert_eq!(mode_of(&s, 1), Some(0), "{s:?}");
    assert_eq!(mode_of(&s, 2), Some(0), "{s:?}");
    let kinds: Vec<_> = s.changes.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, vec![ChangeKind::Shrink, ChangeKind::Grant]);
}

#[test]
fn lone_app_grows_into_idle_capacity() {
    // The congestion index scores a full island 0, so the selection keeps a
    // lone application at mode 1 of 2 CPUs' island (half of it idle).
    let islands = [isl("a", 2.0, 8)];
    let r = recipe("w", 0, &[(0, 0.55, 1.0), (1, 1.0, 2.0)]);
    let selection = selection_only();
    let alone = [running(1, &r, 0, "a")];
    assert_eq!(
        mode_of(&selection.plan(&islands, &alone).unwrap(), 1),
        Some(0)
    );
    // With the pass (the default) it takes the whole island, and says why.
    let s = plan(&islands, &alone);
    assert_eq!(mode_of(&s, 1), Some(1), "{s:?}");
    let change = s.changes.iter().find(|c| c.app == AppId(1)).unwrap();
    assert!(
        change.reason().contains("grown into idle capacity"),
        "{change}"
    );
    // Stable: planning the result again changes nothing.
    let again = plan(&islands, &[running(1, &r, 1, "a")]);
    assert!(again.changes.is_empty(), "{again:?}");
    // Two of them share the island: nobody grows past the fair share.
    let two = [running(1, &r, 0, "a"), running(2, &r, 0, "a")];
    let s = plan(&islands, &two);
    assert_eq!(
        (mode_of(&s, 1), mode_of(&s, 2)),
        (Some(0), Some(0)),
        "{s:?}"
    );
    // One more than fits waits, so nobody grows into what is left.
    let big = recipe("big", 0, &[(0, 1.0, 1.5)]);
    let s = plan(&islands, &[running(1, &r, 0, "a"), app(2, &big)]);
    assert!(s.is_blocked(AppId(2)), "{s:?}");
    assert_eq!(mode_of(&s, 1), Some(0), "{s:?}");
    // An application that reported more than it needs does not grow.
    let s = plan(
        &islands,
        &[AppState {
            goal_gap: -0.3,
            ..running(1, &r, 0, "a")
        }],
    );
    assert_eq!(mode_of(&s, 1), Some(0), "{s:?}");
}
