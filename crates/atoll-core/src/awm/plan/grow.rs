//! The idle-capacity pass of a planning run (see [`Planner::grow`]).

use super::{allowed_in, AppP, ModeP, Planner, State, MILLI};
use crate::awm::schedule::Outcome;
use crate::awm::score::{self, Score};

impl Planner {
    /// Idle capacity. The congestion index `L` scores a full island 0, so
    /// the selection leaves room for applications that might come; when
    /// nobody of this run is blocked, that room would only stay idle (an
    /// application alone on an island would run at half its speed next to
    /// an idle CPU). So, in priority order then id, each granted
    /// application takes, on its island (never a move), the mode of the
    /// highest value that fits in what is left with its own grant given
    /// back, if that is worth more than its grant by more than the
    /// hysteresis margin, and within its fair share (the fairness index
    /// stays 1: all the run's capacity over all its applications, times
    /// `fair_slack`); not one that reported more than it needs (a negative
    /// goal gap). The next registration makes a new plan, which starts
    /// from scratch.
    pub(super) fn grow(
        &self,
        apps: &[AppP],
        modes: &[ModeP],
        bits: &[u64],
        order: &[u32],
        st: &mut State,
        outcomes: &mut [Outcome],
    ) {
        let total = st.isl.iter().map(|i| i.cap).sum::<u64>() as f64 / MILLI;
        let total_mem = st.isl.iter().map(|i| u128::from(i.cap_mem)).sum::<u128>() as f64;
        let n = apps.len().max(1) as f64;
        for &ai in order {
            let a = &apps[ai as usize];
            let Outcome::Granted { mode, island, .. } = outcomes[a.input as usize] else {
                continue;
            };
            if a.wants_less {
                continue;
            }
            let ms = a.first..a.first + a.count;
            let Some(cur) = ms.clone().find(|&mi| modes[mi as usize].id == mode) else {
                continue;
            };
            let c = &modes[cur as usize];
            let i = &st.isl[island as usize];
            let (room, room_mem) = (i.cap - i.used + c.need, i.cap_mem - i.used_mem + c.mem);
            let margin = self.params.hysteresis * (1.0 - a.gap_strength);
            // With a power weight, a bigger mode must pay for the power it
            // adds: `a·ΔV + e·ΔE > 0` (no effect at `e = 0`).
            let (wv, we) = (self.weights.value, self.weights.power);
            let worth_its_power = |m: &ModeP, c: &ModeP| {
                we == 0.0 || wv * (m.value - c.value) + we * (m.power - c.power) > 0.0
            };
            let fair = |m: &ModeP| {
                let r = score::fair_ratio(
                    m.need as f64 / MILLI,
                    m.mem as f64,
                    total / n,
                    total_mem / n,
                );
                score::fairness(r, &self.params) >= 1.0
            };
            let best = ms
                .filter(|&mi| {
                    let m = &modes[mi as usize];
                    let allowed = m.allowed.map(|o| &bits[o as usize..o as usize + st.words]);
                    m.value > c.value + margin
                        && worth_its_power(m, c)
                        && fair(m)
                        && m.need <= room
                        && m.mem <= room_mem
                        && allowed_in(allowed, island)
                })
                .max_by(|&x, &y| {
                    let (mx, my) = (&modes[x as usize], &modes[y as usize]);
                    (mx.value.total_cmp(&my.value))
                        .then(my.need.cmp(&mx.need))
                        .then(my.id.cmp(&mx.id))
                });
            let Some(mi) = best else { continue };
            let m = &modes[mi as usize];
            st.give(island, c.need, c.mem);
            st.take(island, m.need, m.mem);
            let ratio = score::fair_ratio(
                m.need as f64 / MILLI,
                m.mem as f64,
                total / n,
                total_mem / n,
            );
            let same_island = a.running.then_some(Some(island) == a.cur_island);
            let mut s = Score {
                total: 0.0,
                value: m.value,
                reconfig: m.reconfig,
                migration: score::migration(same_island),
                balance: score::balance(st.usage_after(island, 0), &self.params),
                fairness: score::fairness(ratio, &self.params),
                power: m.power,
                idle: true,
            };
            s.total = self.weights.combine(&s);
            outcomes[a.input as usize] = Outcome::Granted {
                mode: m.id,
                island,
                score: s,
            };
        }
    }
}
