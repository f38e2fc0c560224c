//! Reconfigurable applications in the platform description (seed 002,
//! BarbequeRTRM): the recipes an application may register with
//! (`[recipe.NAME]`) and the settings of the allocation policy (`[apps]`).
//!
//! Applications share what the config's own units leave: an island offers
//! them its CPUs minus the `cpus` its config units are entitled to, and its
//! share of memory minus their protected memory
//! ([`PlatformSpec::app_capacities`]). That is the "default recipe" of
//! processes that do not use the runtime library: they stay in their units,
//! managed by the rules, and keep their entitlement. [`validate_apps`] checks
//! every recipe against those capacities and reports each problem at its key
//! as the config file spells it (`recipe.bodytrack.mode[1].cpu_quota`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{PlatformSpec, SpecError};
use crate::awm::{IslandCapacity, PolicyError, PolicyParams, Recipe, RecipeError, Weights};
use crate::topology::Topology;
use crate::Name;

/// Default quiet time before a burst of application events is planned.
pub const DEFAULT_BATCH_QUIET: Duration = Duration::from_millis(20);
/// Default longest wait between the first pending event and its plan.
pub const DEFAULT_BATCH_MAX: Duration = Duration::from_millis(100);
/// Default goal gap below which a report does not ask for a new plan.
pub const DEFAULT_GAP_DEADBAND: f64 = 0.05;
/// Prefix of the units that hold applications (`app-<id>`).
pub const APP_UNIT_PREFIX: &str = "app-";

/// Reconfigurable applications: recipes and the policy's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppsSpec {
    /// Recipes applications may register with by name, in config order.
    pub recipes: Vec<Recipe>,
    /// Weights of the score's contributions.
    pub weights: Weights,
    /// Shape parameters of the policy.
    pub params: PolicyParams,
    /// Islands applications may use; `None`: every island.
    pub islands: Option<Vec<Name>>,
    /// A plan is made once no application event came for this long...
    pub batch_quiet: Duration,
    /// ...or this long after the first pending event, whichever is first.
    pub batch_max: Duration,
    /// A reported goal gap within `±gap_deadband` asks for no new plan.
    pub gap_deadband: f64,
}

impl Default for AppsSpec {
    fn default() -> Self {
        Self {
            recipes: Vec::new(),
            weights: Weights::default(),
            params: PolicyParams::default(),
            islands: None,
            batch_quiet: DEFAULT_BATCH_QUIET,
            batch_max: DEFAULT_BATCH_MAX,
            gap_deadband: DEFAULT_GAP_DEADBAND,
        }
    }
}

impl AppsSpec {
    /// The recipe named `name`.
    pub fn recipe(&self, name: &str) -> Option<&Recipe> {
        self.recipes.iter().find(|r| r.name.as_str() == name)
    }

    /// Whether applications may use `island`.
    pub fn allows(&self, island: &Name) -> bool {
        self.islands.as_ref().is_none_or(|l| l.contains(island))
    }
}

/// Whether `name` is the name of an application's unit: `app-` and digits.
pub fn is_app_unit_name(name: &str) -> bool {
    name.strip_prefix(APP_UNIT_PREFIX)
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

impl PlatformSpec {
    /// What each island applications may use offers them, in config order:
    /// its CPUs minus the `cpus` entitlements of its config units, and its
    /// share of memory (each memory node split evenly among the islands
    /// that list it) minus their `memory_min` (else `memory_low`). Memory
    /// is not metered (`u64::MAX`) when the topology knows none.
    pub fn app_capacities(&self, topo: &Topology) -> Vec<IslandCapacity> {
        let sharing = |node: u32| {
            self.islands
                .iter()
                .filter(|i| i.mems.contains(node))
                .count()
                .max(1) as u64
        };
        self.islands
            .iter()
            .filter(|i| self.apps.allows(&i.name))
            .map(|i| {
                let units = self.units.iter().filter(|u| u.island == i.name);
                let taken: f64 = units
                    .clone()
                    .filter_map(|u| u.entitlement.cpus)
                    .filter(|c| c.is_finite() && *c > 0.0)
                    .sum();
                let cpus = (i.cpus.len() as f64 - taken).max(0.0);
                let share: u64 = topo
                    .nodes
                    .iter()
                    .filter(|n| i.mems.contains(n.id))
                    .map(|n| n.memory_bytes / sharing(n.id))
                    .sum();
                let memory = if share == 0 {
                    u64::MAX
                } else {
                    let kept: u64 = units
                        .filter_map(|u| u.entitlement.memory.min.or(u.entitlement.memory.low))
                        .fold(0u64, u64::saturating_add);
                    share.saturating_sub(kept)
                };
                IslandCapacity::new(i.name.clone(), cpus, memory)
            })
            .collect()
    }
}

/// `[apps]` and `[recipe.NAME]`: the policy's settings, the islands named,
/// unit names kept for applications, and every recipe against what the
/// islands offer applications.
pub(super) fn validate_apps(spec: &PlatformSpec, topo: &Topology, errs: &mut Vec<SpecError>) {
    let a = &spec.apps;
    if let Some(list) = &a.islands {
        if list.is_empty() {
            errs.push(SpecError::new(
                "apps.islands",
                "an empty list lets applications run nowhere: list islands, or leave it out for all",
            ));
        }
        for (k, name) in list.iter().enumerate() {
            if spec.island(name).is_none() {
                errs.push(SpecError::new(
                    "apps.islands",
                    format!("no island named {:?}", name.as_str()),
                ));
            } else if list[..k].contains(name) {
                errs.push(SpecError::new(
                    "apps.islands",
                    format!("island {name} is listed twice"),
                ));
            }
        }
    }
    for e in [a.weights.validate().err(), a.params.validate().err()]
        .into_iter()
        .flatten()
    {
        errs.push(policy_error(e));
    }
    let ms = |d: Duration| d.as_millis();
    if a.batch_quiet > Duration::from_secs(60) {
        errs.push(SpecError::new(
            "apps.batch_quiet_ms",
            format!("{} ms is outside 0..=60000", ms(a.batch_quiet)),
        ));
    }
    if a.batch_max < Duration::from_millis(1) || a.batch_max > Duration::from_secs(60) {
        errs.push(SpecError::new(
            "apps.batch_max_ms",
            format!("{} ms is outside 1..=60000", ms(a.batch_max)),
        ));
    } else if a.batch_max < a.batch_quiet {
        errs.push(SpecError::new(
            "apps.batch_max_ms",
            format!(
                "{} ms is below batch_quiet_ms ({} ms): a plan could never wait for the quiet time",
                ms(a.batch_max),
                ms(a.batch_quiet)
            ),
        ));
    }
    if !(0.0..=crate::awm::trigger::MAX_GAP).contains(&a.gap_deadband) {
        errs.push(SpecError::new(
            "apps.gap_deadband",
            format!(
                "{} is outside 0..={}",
                a.gap_deadband,
                crate::awm::trigger::MAX_GAP
            ),
        ));
    }
    for u in &spec.units {
        if is_app_unit_name(u.name.as_str()) {
            errs.push(SpecError::new(
                format!("unit.{}", u.name),
                "names app-<digits> are kept for the units of reconfigurable applications",
            ));
        }
    }
    let caps = spec.app_capacities(topo);
    for (k, r) in a.recipes.iter().enumerate() {
        if a.recipes[..k].iter().any(|o| o.name == r.name) {
            errs.push(SpecError::new(
                format!("recipe.{}", r.name),
                "recipe defined twice",
            ));
            continue;
        }
        if let Err(e) = r.validate_for(&caps) {
            errs.push(recipe_error(spec, r, e));
        }
    }
}

/// A policy error at its `[apps]` key.
fn policy_error(e: PolicyError) -> SpecError {
    match e {
        PolicyError::Weight { field, value } => SpecError::new(
            format!("apps.weights.{field}"),
            format!("{value}: a weight must be a finite number >= 0"),
        ),
        PolicyError::AllZero => {
            SpecError::new("apps.weights", "at least one weight must be above 0")
        }
        PolicyError::Param {
            field,
            value,
            range,
        } => SpecError::new(
            format!("apps.params.{field}"),
            format!("{value} is outside {range}"),
        ),
    }
}

/// A recipe error at its key, as the config file spells it.
fn recipe_error(spec: &PlatformSpec, r: &Recipe, e: RecipeError) -> SpecError {
    let key = format!("recipe.{}", r.name);
    let at = |id: u8, field: &str| {
        let i = r.modes.iter().position(|m| m.id == id).unwrap_or(0);
        if field.is_empty() {
            format!("{key}.mode[{i}]")
        } else {
            format!("{key}.mode[{i}].{field}")
        }
    };
    match e {
        RecipeError::NoModes { .. } => SpecError::new(
            &key,
            "a recipe needs at least one working mode: add [[recipe.NAME.mode]] tables",
        ),
        RecipeError::TooManyModes { count, max, .. } => SpecError::new(
            format!("{key}.mode"),
            format!("{count} working modes, at most {max} are allowed"),
        ),
        RecipeError::DuplicateMode { index, id, .. } => SpecError::new(
            format!("{key}.mode[{index}].id"),
            format!("{id} is already the id of another mode of this recipe"),
        ),
        RecipeError::Value { mode, value, .. } => SpecError::new(
            at(mode, "value"),
            format!("{value} is outside 0..=1"),
        ),
        RecipeError::CpuQuota { mode, value, .. } => SpecError::new(
            at(mode, "cpu_quota"),
            format!("{value}: must be a finite number of CPUs above 0 (at most 1e6)"),
        ),
        RecipeError::Power { mode, value, .. } => SpecError::new(
            at(mode, "power_watts"),
            format!("{value}: must be a finite number of watts between 0 and 1e6"),
        ),
        RecipeError::ZeroThreads { mode, .. } => SpecError::new(
            at(mode, "threads"),
            "0: must be at least 1 (or left out)",
        ),
        RecipeError::NoIslands { mode, .. } => SpecError::new(
            at(mode, "islands"),
            "an empty list lets the mode run nowhere: list islands, or leave it out for all",
        ),
        RecipeError::UnknownIsland { mode, island, .. } => SpecError::new(
            at(mode, "islands"),
            if spec.island(&island).is_some() {
                format!("island {island} is not open to applications ([apps] islands)")
            } else {
                format!("no island named {:?}", island.as_str())
            },
        ),
        RecipeError::NeverFits {
            mode,
            cpus,
            memory_bytes,
            ..
        } => SpecError::new(
            at(mode, ""),
            format!(
                "needs {cpus} CPUs and {memory_bytes} bytes of memory: no island it may use offers that much to applications (their CPUs and memory minus what the config's units are entitled to)"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awm::{Needs, WorkingMode};
    use crate::spec::tests::{n, spec16};
    use crate::topology::SyntheticShape;

    fn topo() -> Topology {
        Topology::synthetic(SyntheticShape {
            packages: 1,
            nodes_per_package: 2,
            llcs_per_node: 1,
            cores_per_llc: 8,
            threads_per_core: 1,
            memory_per_node: 8 << 30,
        })
    }

    fn recipe(q: f64) -> Recipe {
        Recipe {
            name: n("r"),
            priority: 0,
            modes: vec![WorkingMode {
                power_watts: None,
                id: 4,
                name: String::new(),
                value: 0.5,
                needs: Needs {
                    cpu_quota: q,
                    threads: None,
                    exclusive_cpus: false,
                    memory_bytes: 0,
                    islands: None,
                },
            }],
        }
    }

    #[test]
    fn unit_names_of_applications() {
        assert!(is_app_unit_name("app-7"));
        assert!(is_app_unit_name("app-123"));
        for no in ["app-", "app", "app-x", "app-7a", "apps-7"] {
            assert!(!is_app_unit_name(no), "{no}");
        }
    }

    #[test]
    fn capacities_leave_the_units_entitlements() {
        let mut spec = spec16();
        spec.units[0].entitlement.cpus = None;
        let caps = spec.app_capacities(&topo());
        // web: 6 CPUs on node 0 (8 GiB, web's alone); rt: 8 CPUs on node 1.
        assert_eq!(caps[0].cpus, 6.0);
        assert_eq!(caps[0].memory_bytes, 8 << 30);
        assert_eq!(caps.len(), spec.islands.len());
        let before: Vec<f64> = caps.iter().map(|c| c.cpus).collect();
        let island = spec.units[0].island.clone();
        spec.units[0].entitlement.cpus = Some(1.5);
        spec.units[0].entitlement.memory.min = Some(1 << 30);
        let after = spec.app_capacities(&topo());
        let y = spec.islands.iter().position(|i| i.name == island).unwrap();
        assert_eq!(after[y].cpus, before[y] - 1.5);
        assert_eq!(after[y].memory_bytes, caps[y].memory_bytes - (1 << 30));
        spec.apps.islands = Some(vec![island.clone()]);
        let only = spec.app_capacities(&topo());
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].name, island);
    }

    #[test]
    fn recipes_are_checked_at_their_keys() {
        let mut spec = spec16();
        spec.apps.recipes = vec![recipe(1.0)];
        let mut errs = Vec::new();
        validate_apps(&spec, &topo(), &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        spec.apps.recipes = vec![recipe(1e9)];
        validate_apps(&spec, &topo(), &mut errs);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].key, "recipe.r.mode[0].cpu_quota");
        errs.clear();
        spec.apps.recipes = vec![recipe(1000.0)];
        validate_apps(&spec, &topo(), &mut errs);
        assert_eq!(errs[0].key, "recipe.r.mode[0]", "{errs:?}");
        errs.clear();
        spec.apps.recipes = vec![];
        spec.apps.weights.value = -1.0;
        spec.apps.batch_max = Duration::from_millis(5);
        spec.apps.islands = Some(vec![n("nowhere")]);
        validate_apps(&spec, &topo(), &mut errs);
        let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            ["apps.islands", "apps.weights.value", "apps.batch_max_ms"]
        );
    }
}
