//! How the platform power cap shares a cut (or a relaxation) among the
//! islands: by each island's draw and the priority of its overlays.
//!
//! The model: the measured power `P` is drawn by the islands in proportion
//! to their CPU time in the last epoch (island `i` draws `P · sᵢ`, `sᵢ` its
//! share of the busy CPU time, the same charge as [`super::learn`]), and an
//! island's draw scales linearly with its speed (its maximum frequency, or
//! its CPU cap). To come down to the budget `B` the islands must shed
//! `C = P − B` watts. The islands are taken tier by tier, lowest overlay
//! priority first (an island's priority is the highest of the overlays
//! whose units live in it; 0 without one): a tier sheds as much of `C` as
//! its islands can, each slowed by the same ratio `r = 1 − c / D` (`c` the
//! tier's part of the cut, `D` its draw), so each sheds in proportion to
//! its draw; an island already at its floor (lowest frequency, or
//! [`super::cap::MIN_CAP_CPUS`]) sheds what it can and the rest is shared
//! by the others of its tier; what a tier cannot shed goes to the next
//! one up. An island that draws nothing is not slowed (slowing it saves
//! nothing). With every island in one tier and none at its floor, every
//! island gets `r = B / P`, the equal cut of the model without shares.
//!
//! Under the budget (by more than the hysteresis) the headroom `B − P` is
//! given back the other way round: the highest tier's limited islands
//! first, in proportion to their draw, each up to its hardware maximum or
//! its full CPUs (then its limit is lifted); an island limited but drawing
//! nothing gets its limit lifted at once.
//!
//! When no share is known (no CPU time measured yet, or none in the last
//! epoch) the islands' CPUs stand for their draw.

/// Ratios this close to a bound are at it (float noise).
const EPS: f64 = 1e-9;

/// One island as the split sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slot {
    /// Its share of the measured power, `[0, 1]` (the shares sum to 1).
    pub share: f64,
    /// Its tier: the highest priority of its overlays.
    pub priority: u8,
    /// Its speed now relative to what it may least run at: the ratio of
    /// its floor to its current setting, `(0, 1]`.
    pub floor: f64,
    /// Its full speed relative to its current setting, `≥ 1`.
    pub ceiling: f64,
    /// Whether a limit is in force on it.
    pub limited: bool,
}

/// The shares of `draws` (each island's CPU time, or `None`), normalized;
/// `cpus` stand for the draws when none is known or they sum to 0.
pub fn shares(draws: &[Option<f64>], cpus: &[f64]) -> Vec<f64> {
    let ok = |v: &f64| v.is_finite() && *v >= 0.0;
    let known: Vec<f64> = draws.iter().map(|d| d.filter(ok).unwrap_or(0.0)).collect();
    let total: f64 = known.iter().sum();
    let base = if total > 0.0 {
        known
    } else {
        cpus.iter().map(|c| if ok(c) { *c } else { 0.0 }).collect()
    };
    let total: f64 = base.iter().sum();
    if total > 0.0 {
        base.iter().map(|v| v / total).collect()
    } else {
        vec![0.0; base.len()]
    }
}

/// The ratio each island's speed is multiplied by to bring `watts` to
/// `budget` (`< 1` over the budget, `> 1` under it; `1`: untouched).
pub fn ratios(watts: f64, budget: f64, slots: &[Slot]) -> Vec<f64> {
    let mut out = vec![1.0; slots.len()];
    if !(watts.is_finite() && watts > 0.0 && budget.is_finite()) {
        return out;
    }
    let over = watts > budget;
    let mut left = (watts - budget).abs();
    let mut tiers: Vec<u8> = slots.iter().map(|s| s.priority).collect();
    tiers.sort_unstable();
    tiers.dedup();
    if !over {
        tiers.reverse();
    }
    for tier in tiers {
        let members: Vec<usize> = (0..slots.len())
            .filter(|&i| slots[i].priority == tier)
            .filter(|&i| over || slots[i].limited)
            .collect();
        if !over {
            // Limited but drawing nothing: lifting it costs nothing now.
            for &i in &members {
                if slots[i].share <= 0.0 {
                    out[i] = slots[i].ceiling;
                }
            }
        }
        let mut free: Vec<usize> = members
            .into_iter()
            .filter(|&i| slots[i].share > 0.0)
            .collect();
        // Water-filling: one ratio for the tier, islands that hit their
        // bound fixed there and the rest shared by the others.
        while left > 1e-12 && !free.is_empty() {
            let draw: f64 = free.iter().map(|&i| watts * slots[i].share).sum();
            let r = if over {
                1.0 - left / draw
            } else {
                1.0 + left / draw
            };
            let bound = |i: usize| {
                if over {
                    slots[i].floor
                } else {
                    slots[i].ceiling
                }
            };
            let hit: Vec<usize> = free
                .iter()
                .copied()
                .filter(|&i| {
                    if over {
                        bound(i) >= r - EPS
                    } else {
                        bound(i) <= r + EPS
                    }
                })
                .collect();
            if hit.is_empty() {
                for &i in &free {
                    out[i] = r;
                }
                left = 0.0;
                break;
            }
            for &i in &hit {
                out[i] = bound(i);
                left -= watts * slots[i].share * (bound(i) - 1.0).abs();
            }
            free.retain(|i| !hit.contains(i));
        }
        if left <= 1e-12 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(share: f64, priority: u8) -> Slot {
        Slot {
            share,
            priority,
            floor: 0.2,
            ceiling: 1.0,
            limited: false,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn one_tier_without_floors_is_the_equal_cut() {
        let r = ratios(125.0, 100.0, &[slot(0.7, 0), slot(0.3, 0)]);
        assert!(r.iter().all(|r| close(*r, 0.8)), "{r:?}");
    }

    #[test]
    fn the_lower_priority_island_sheds_the_cut_first_by_its_draw() {
        // 125 W over 100: 25 W to shed. batch (priority 0) draws 50 W:
        // slowed to half; web (priority 5) untouched.
        let r = ratios(125.0, 100.0, &[slot(0.4, 0), slot(0.6, 5)]);
        assert!(close(r[0], 0.5) && close(r[1], 1.0), "{r:?}");
        // Its draw too small: at its floor (0.2) it sheds 0.8 · 12.5 W =
        // 10 W; the other 15 W come from web (75 W ⇒ 0.8).
        let r = ratios(125.0, 100.0, &[slot(0.1, 0), slot(0.6, 5), slot(0.3, 9)]);
        assert!(close(r[0], 0.2), "{r:?}");
        assert!(close(r[1], 1.0 - 15.0 / 75.0), "{r:?}");
        assert!(close(r[2], 1.0), "{r:?}");
        let shed: f64 = [(0.1, r[0]), (0.6, r[1]), (0.3, r[2])]
            .iter()
            .map(|(s, r)| 125.0 * s * (1.0 - r))
            .sum();
        assert!(close(shed, 25.0), "{shed}");
    }

    #[test]
    fn within_a_tier_an_island_at_its_floor_passes_the_rest_on() {
        let mut a = slot(0.5, 0);
        a.floor = 0.9;
        let mut b = slot(0.5, 0);
        b.floor = 0.05;
        let r = ratios(200.0, 100.0, &[a, b]);
        // a sheds 10 W at 0.9; b the other 90 W of its 100 W.
        assert!(close(r[0], 0.9) && close(r[1], 0.1), "{r:?}");
    }

    #[test]
    fn an_idle_island_is_not_slowed_and_an_idle_limited_one_is_lifted() {
        let r = ratios(125.0, 100.0, &[slot(0.0, 0), slot(1.0, 0)]);
        assert!(close(r[0], 1.0) && close(r[1], 0.8), "{r:?}");
        let mut idle = slot(0.0, 0);
        idle.limited = true;
        idle.ceiling = 2.0;
        let r = ratios(50.0, 100.0, &[idle, slot(1.0, 0)]);
        assert!(close(r[0], 2.0), "{r:?}");
        assert!(close(r[1], 1.0), "not limited: nothing to give back");
    }

    #[test]
    fn headroom_goes_to_the_highest_priority_first() {
        let mut low = slot(0.5, 0);
        let mut high = slot(0.5, 7);
        for s in [&mut low, &mut high] {
            s.limited = true;
            s.ceiling = 1.5;
        }
        // 60 W under 100: 40 W of headroom. high draws 30 W: up to 1.5
        // (15 W), the other 25 W to low (30 W ⇒ its ceiling too, 1.5).
        let r = ratios(60.0, 100.0, &[low, high]);
        assert!(close(r[1], 1.5) && close(r[0], 1.5), "{r:?}");
        // 80 W: 20 W; high takes 20 W of its 40 W draw: 1.5; low nothing.
        let r = ratios(80.0, 100.0, &[low, high]);
        assert!(close(r[1], 1.5) && close(r[0], 1.0 + 0.0), "{r:?}");
    }

    #[test]
    fn shares_follow_cpu_time_or_else_cpus() {
        let s = shares(&[Some(3.0), Some(1.0)], &[4.0, 4.0]);
        assert!(close(s[0], 0.75) && close(s[1], 0.25));
        let s = shares(&[None, Some(0.0)], &[3.0, 1.0]);
        assert!(close(s[0], 0.75) && close(s[1], 0.25));
        let s = shares(&[Some(f64::NAN), Some(2.0)], &[1.0, 1.0]);
        assert!(close(s[0], 0.0) && close(s[1], 1.0));
        assert_eq!(shares(&[None], &[0.0]), vec![0.0]);
        assert!(ratios(f64::NAN, 100.0, &[slot(1.0, 0)]) == vec![1.0]);
    }
}
