//! The working-mode policy's power term, learned (issue 17): each epoch,
//! while the policy weighs power (`weights.power > 0`) and the machine has
//! RAPL, the package energy of the epoch is shared among the applications
//! by their CPU time ([`atoll_core::power::learn`]); a planning run then
//! gives each mode whose recipe has no `power_watts` its learned figure,
//! and the machine's learned watts per busy CPU to the modes never seen.
//!
//! The busy CPU time is that of atoll's root group (every unit and the
//! host partition); what runs outside atoll's groups is not seen, and its
//! energy is charged to the units (see the model's limits).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use atoll_core::awm::Recipe;
use atoll_core::backend::{Monitor, StatSelect};
use atoll_core::plan::GroupPath;
use atoll_core::power::learn::{Interval, ModeShare};
use atoll_proto::apps::AppPower;
use atoll_proto::energy::{LearnedWatts, ModeWatts, WattsFrom};

use super::Apps;

/// What the last epoch's sample saw.
#[derive(Clone, Debug, Default)]
pub(crate) struct PowerMarks {
    /// When, and the energy counter then, J.
    at: Option<(Duration, f64)>,
    /// atoll's root group's CPU time then, µs.
    busy_us: Option<u64>,
    /// Each application's CPU time then, µs.
    apps: BTreeMap<u64, u64>,
}

const CPU: StatSelect = StatSelect {
    cpu_usage: true,
    cpu_throttling: false,
    memory: false,
    io: false,
    pressure: false,
};

fn cpu_us(mon: &dyn Monitor, g: &GroupPath) -> Option<u64> {
    mon.stats_of(g, CPU).ok()?.cpu_usage_us
}

fn delta_s(now: u64, then: Option<u64>) -> Option<f64> {
    then.map(|t| now.saturating_sub(t) as f64 / 1e6)
}

impl Apps {
    /// Whether the policy weighs power (the only time learning is worth
    /// its reads).
    pub(crate) fn weighs_power(&self) -> bool {
        self.planner.weights().power > 0.0 && !self.list.is_empty()
    }

    /// One epoch of learning: `joules_total` is the RAPL counter at `now`
    /// (`None`: no RAPL, nothing learned).
    pub(crate) fn learn_power(
        &mut self,
        now: Duration,
        joules_total: Option<f64>,
        mon: &dyn Monitor,
    ) {
        let Some(joules) = joules_total.filter(|_| self.weighs_power()) else {
            self.marks = PowerMarks::default();
            return;
        };
        let busy_now = cpu_us(mon, &GroupPath::root());
        let mut apps_now = BTreeMap::new();
        let mut units = Vec::new();
        for a in self.list.values() {
            let (Some(g), Some(grant)) = (a.group(), a.grant.as_ref()) else {
                continue;
            };
            let Some(us) = cpu_us(mon, &g) else {
                continue;
            };
            apps_now.insert(a.id, us);
            if let Some(cpu_seconds) = delta_s(us, self.marks.apps.get(&a.id).copied()) {
                units.push(ModeShare {
                    recipe: a.recipe.name.to_string(),
                    mode: u32::from(grant.mode),
                    cpu_seconds,
                });
            }
        }
        if let (Some((then, j0)), Some(busy)) = (self.marks.at, busy_now) {
            let busy_cpu_seconds = delta_s(busy, self.marks.busy_us).unwrap_or(0.0);
            self.watts.learn(&Interval {
                seconds: now.saturating_sub(then).as_secs_f64(),
                joules: joules - j0,
                busy_cpu_seconds,
                units,
            });
        }
        self.marks = PowerMarks {
            at: Some((now, joules)),
            busy_us: busy_now,
            apps: apps_now,
        };
    }

    /// `recipe` with the learned power of each mode that gives none (the
    /// same recipe when there is nothing to add).
    pub(crate) fn with_learned_power(&self, recipe: &Arc<Recipe>) -> Arc<Recipe> {
        let learned = |m: &atoll_core::awm::WorkingMode| {
            m.power_watts
                .is_none()
                .then(|| self.watts.mode_watts(recipe.name.as_str(), u32::from(m.id)))
                .flatten()
        };
        if !self.weighs_power() || !recipe.modes.iter().any(|m| learned(m).is_some()) {
            return Arc::clone(recipe);
        }
        let mut r = Recipe::clone(recipe);
        for m in &mut r.modes {
            if let Some(w) = learned(m) {
                m.power_watts = Some(w);
            }
        }
        Arc::new(r)
    }

    /// The learned figures, for planning: watts per busy CPU to the
    /// planner.
    /// The watts the power term uses, for the status: each mode of the
    /// registered applications' recipes with the recipe's `power_watts` or
    /// a learned figure (and which), learned modes of recipes no longer
    /// registered, and the watts per busy CPU. `None` while nothing is
    /// learned.
    pub(crate) fn watts_status(&self) -> Option<LearnedWatts> {
        let per_cpu = self.watts.watts_per_cpu();
        if per_cpu.is_none() && self.watts.modes_learned() == 0 {
            return None;
        }
        let mut modes: BTreeMap<(String, u32), (f64, WattsFrom)> = self
            .watts
            .learned_modes()
            .map(|(r, m, w)| ((r.to_string(), m), (w, WattsFrom::Learned)))
            .collect();
        for a in self.list.values() {
            for m in &a.recipe.modes {
                if let Some(w) = m.power_watts {
                    let key = (a.recipe.name.to_string(), u32::from(m.id));
                    modes.insert(key, (w, WattsFrom::Recipe));
                }
            }
        }
        Some(LearnedWatts {
            watts_per_cpu: per_cpu,
            modes: modes
                .into_iter()
                .map(|((recipe, mode), (watts, from))| ModeWatts {
                    recipe,
                    mode,
                    watts,
                    from,
                })
                .collect(),
        })
    }

    /// The watts of the mode `a` runs in: its recipe's, or else the
    /// learned figure; `None` when it waits or neither is known.
    pub(crate) fn mode_power(&self, a: &super::App) -> Option<AppPower> {
        let mode = a.grant.as_ref()?.mode;
        let m = a.recipe.modes.iter().find(|m| m.id == mode)?;
        if let Some(watts) = m.power_watts {
            return Some(AppPower {
                watts,
                from: WattsFrom::Recipe,
            });
        }
        let watts = self
            .watts
            .mode_watts(a.recipe.name.as_str(), u32::from(mode))?;
        Some(AppPower {
            watts,
            from: WattsFrom::Learned,
        })
    }

    pub(crate) fn prepare_power(&mut self) {
        if let Some(w) = self.watts.watts_per_cpu() {
            self.planner.set_watts_per_cpu(w);
        }
    }
}

#[cfg(test)]
mod tests;
