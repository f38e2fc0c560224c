//! The power term of the policy: weight 0 changes nothing, a positive
//! weight moves choices toward modes that draw less.

use std::sync::Arc;

use super::plan_tests::{isl, mode, n};
use super::*;

fn recipe(modes: Vec<WorkingMode>) -> Arc<Recipe> {
    Arc::new(Recipe {
        name: n("r"),
        priority: 0,
        modes,
    })
}

/// The paper's Table VIII modes (0.5, 1, 2, 4 CPUs) with `watts` each.
fn paper(watts: Option<[f64; 4]>) -> Arc<Recipe> {
    let q = [(0, 0.25, 0.5), (1, 0.5, 1.0), (2, 0.75, 2.0), (3, 1.0, 4.0)];
    recipe(
        q.iter()
            .enumerate()
            .map(|(i, &(id, v, cpus))| WorkingMode {
                power_watts: watts.map(|w| w[i]),
                ..mode(id, v, cpus)
            })
            .collect(),
    )
}

fn planner(power: f64) -> Planner {
    Planner::new(
        Weights {
            power,
            ..Weights::default()
        },
        PolicyParams::default(),
    )
    .unwrap()
}

fn chosen(p: &Planner, r: &Arc<Recipe>, apps: u64, cpus: f64) -> Vec<u8> {
    let list: Vec<AppState> = (0..apps)
        .map(|i| AppState::new(AppId(i), r.clone()))
        .collect();
    let s = p.plan(&[isl("a", cpus, 64)], &list).unwrap();
    (0..apps)
        .map(|i| s.grant(AppId(i)).map_or(u8::MAX, |g| g.mode))
        .collect()
}

/// Sum of the chosen modes' quotas.
fn cpus(r: &Recipe, modes: &[u8]) -> f64 {
    modes
        .iter()
        .filter_map(|&m| r.mode(m))
        .map(|m| m.needs.cpu_quota)
        .sum()
}

#[test]
fn weight_zero_is_the_four_term_policy_bit_for_bit() {
    let declared = paper(Some([5.0, 9.0, 20.0, 60.0]));
    let plain = paper(None);
    for apps in [1, 3, 6, 12] {
        let list = |r: &Arc<Recipe>| -> Vec<AppState> {
            (0..apps)
                .map(|i| AppState::new(AppId(i), r.clone()))
                .collect()
        };
        let islands = [isl("a", 12.0, 64)];
        let a = Planner::default().plan(&islands, &list(&plain)).unwrap();
        let b = planner(0.0).plan(&islands, &list(&declared)).unwrap();
        assert_eq!(a.grants.len(), b.grants.len());
        for (x, y) in a.grants.iter().zip(&b.grants) {
            assert_eq!((x.app, x.mode, &x.island), (y.app, y.mode, &y.island));
            assert_eq!(x.score.total.to_bits(), y.score.total.to_bits());
        }
        assert_eq!(a.blocked, b.blocked);
    }
}

#[test]
fn a_power_weight_picks_modes_that_draw_less() {
    // Power grows faster than the CPUs (higher modes also run the
    // memory system harder): the per-CPU cost rises with the mode.
    let r = paper(Some([4.0, 9.0, 22.0, 60.0]));
    for apps in [1, 2, 4] {
        let mut last = f64::INFINITY;
        for w in [0.0, 0.5, 1.0, 2.0, 4.0] {
            let got = chosen(&planner(w), &r, apps, 12.0);
            let c = cpus(&r, &got);
            assert!(
                c <= last,
                "{apps} apps, weight {w}: {got:?} uses more than before"
            );
            last = c;
        }
        let none = cpus(&r, &chosen(&planner(0.0), &r, apps, 12.0));
        let heavy = cpus(&r, &chosen(&planner(4.0), &r, apps, 12.0));
        assert!(heavy < none, "{apps} apps: {heavy} vs {none}");
    }
}

#[test]
fn undeclared_power_is_estimated_from_the_cpus() {
    let r = paper(None);
    let none = chosen(&planner(0.0), &r, 1, 12.0);
    let heavy = chosen(&planner(4.0), &r, 1, 12.0);
    assert!(cpus(&r, &heavy) < cpus(&r, &none), "{heavy:?} vs {none:?}");
    // A learned per-CPU figure is a common factor: same choice.
    let mut learned = planner(4.0);
    learned.set_watts_per_cpu(7.5);
    assert_eq!(chosen(&learned, &r, 1, 12.0), heavy);
    learned.set_watts_per_cpu(f64::NAN);
    assert_eq!(learned.watts_per_cpu(), 7.5);
}

#[test]
fn a_bigger_mode_the_recipe_says_costs_nothing_more_is_still_chosen() {
    // Same power for every mode: the power term cannot tell them apart.
    let r = paper(Some([30.0; 4]));
    assert_eq!(
        chosen(&planner(4.0), &r, 1, 12.0),
        chosen(&planner(0.0), &r, 1, 12.0)
    );
}

#[test]
fn power_watts_must_be_finite_and_not_negative() {
    let r = paper(Some([4.0, -1.0, 22.0, 60.0]));
    let e = r.validate().unwrap_err();
    assert!(e.to_string().contains("power_watts = -1"), "{e}");
    let r = paper(Some([4.0, f64::INFINITY, 22.0, 60.0]));
    assert!(r.validate().is_err());
}
