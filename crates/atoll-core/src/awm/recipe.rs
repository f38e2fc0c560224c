//! Recipes: an application's working modes and what each one needs.
//!
//! A recipe is written by a user (TOML through the config crate, or JSON
//! through the API), so every type a user writes rejects unknown fields, and
//! [`Recipe::validate`] names the recipe, the mode and the value that is
//! wrong. [`Recipe::validate_for`] also checks a recipe against the islands
//! of a platform (unknown island names, modes that fit no island).

use serde::{Deserialize, Serialize};

use super::IslandCapacity;
use crate::Name;

/// Most working modes one recipe may declare.
pub const MAX_MODES: usize = 64;

/// An application's recipe: its working modes and its priority.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// The application's name (also the stem of its group's name).
    pub name: Name,
    /// Priority level, 0 highest (as in BarbequeRTRM). All applications of a
    /// level are planned before any application of the next level.
    #[serde(default)]
    pub priority: u8,
    /// The working modes, in any order.
    pub modes: Vec<WorkingMode>,
}

/// One application working mode (AWM): a quality level and what it needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkingMode {
    /// Identifier, unique within the recipe; what the application is told.
    pub id: u8,
    /// Free-form label for logs (may be empty).
    #[serde(default)]
    pub name: String,
    /// How good this mode is for the user, normalized to `0..=1` (1 best).
    /// The policy's value contribution `V` starts from it.
    pub value: f64,
    /// What the mode needs.
    pub needs: Needs,
    /// The mode's power draw, watts, when the recipe knows it (measured
    /// once, or from a datasheet). Without it the policy estimates the
    /// mode's power from its CPUs (see [`mode_power`](super::score::mode_power)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_watts: Option<f64>,
}

/// What a working mode needs.
///
/// CPU is a *quota*: CPUs' worth of time, what the daemon writes to
/// `cpu.max` (1.5 = one and a half CPUs). By default the quota is shared:
/// the application runs on its island's CPUs next to others and is capped
/// at its quota. With `exclusive_cpus` it is given `ceil(cpu_quota)` whole
/// CPUs of its own and is charged for all of them. `threads` is only a hint
/// handed back to the application with its grant (its parallelism level,
/// e.g. 5 threads on a quota of 4 CPUs as in the paper's Table VIII); the
/// policy does not account for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Needs {
    /// CPU time, in CPUs (must be finite and above 0).
    pub cpu_quota: f64,
    /// Parallelism hint returned to the application (at least 1 if set).
    #[serde(default)]
    pub threads: Option<u32>,
    /// Give the mode `ceil(cpu_quota)` whole CPUs of its own.
    #[serde(default)]
    pub exclusive_cpus: bool,
    /// Memory limit, bytes (0: the mode asks for no memory reservation).
    #[serde(default)]
    pub memory_bytes: u64,
    /// Islands the mode may run on; `None`: any island.
    #[serde(default)]
    pub islands: Option<Vec<Name>>,
}

impl Needs {
    /// The CPUs this mode is charged on its island: the quota, or
    /// `ceil(quota)` whole CPUs when exclusive.
    pub fn charged_cpus(&self) -> f64 {
        if self.exclusive_cpus {
            self.cpu_quota.ceil()
        } else {
            self.cpu_quota
        }
    }

    /// Whether the mode may run on `island`.
    pub fn allows(&self, island: &Name) -> bool {
        self.islands.as_ref().is_none_or(|l| l.contains(island))
    }
}

/// What is wrong with a recipe.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecipeError {
    /// No working mode.
    #[error("recipe {recipe}: modes: at least one working mode is needed")]
    NoModes {
        /// The recipe.
        recipe: Name,
    },
    /// More than [`MAX_MODES`] modes.
    #[error("recipe {recipe}: modes: {count} working modes, at most {max} allowed")]
    TooManyModes {
        /// The recipe.
        recipe: Name,
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// Two modes with the same id.
    #[error("recipe {recipe}: modes[{index}].id = {id}: already used by another mode")]
    DuplicateMode {
        /// The recipe.
        recipe: Name,
        /// Position of the second one.
        index: usize,
        /// The id.
        id: u8,
    },
    /// `value` outside `0..=1` or not a number.
    #[error("recipe {recipe}: mode {mode}: value = {value}: must be between 0 and 1")]
    Value {
        /// The recipe.
        recipe: Name,
        /// The mode id.
        mode: u8,
        /// The value.
        value: f64,
    },
    /// `cpu_quota` zero, negative or not finite.
    #[error("recipe {recipe}: mode {mode}: needs.cpu_quota = {value}: must be a finite number of CPUs above 0")]
    CpuQuota {
        /// The recipe.
        recipe: Name,
        /// The mode id.
        mode: u8,
        /// The quota.
        value: f64,
    },
    /// `power_watts` negative, not finite or absurd.
    #[error("recipe {recipe}: mode {mode}: power_watts = {value}: must be a finite number of watts between 0 and 1e6")]
    Power {
        /// The recipe.
        recipe: Name,
        /// The mode id.
        mode: u8,
        /// The value.
        value: f64,
    },
    /// `threads = 0`.
    #[error("recipe {recipe}: mode {mode}: needs.threads = 0: must be at least 1 (or left out)")]
    ZeroThreads {
        /// The recipe.
        recipe: Name,
        /// The mode id.
        mode: u8,
    },
    /// `islands = []`: the mode could never run.
    #[error("recipe {recipe}: mode {mode}: needs.islands is empty: list at least one island (or leave it out)")]
    NoIslands {
        /// The recipe.
        recipe: Name,
        /// The mode id.
        mode: u8,
    },
    /// An allowed island the platform does not have.
    #[error("recipe {recipe}: mode {mode}: needs.islands: no island named {island}")]
    UnknownIsland {
        /// The recipe.
        recipe: Name,
        /// The mode id.
        mode: u8,
        /// The island.
        island: Name,
    },
    /// A mode that does not fit any allowed island even when it is empty.
    #[error("recipe {recipe}: mode {mode}: needs {cpus} CPUs and {memory_bytes} bytes, more than any allowed island has")]
    NeverFits {
        /// The recipe.
        recipe: Name,
        /// The mode id.
        mode: u8,
        /// Charged CPUs.
        cpus: f64,
        /// Memory.
        memory_bytes: u64,
    },
}

impl Recipe {
    /// Checks the recipe on its own: at least one and at most [`MAX_MODES`]
    /// modes, unique ids, values in `0..=1`, quotas finite and above 0,
    /// threads at least 1, allowed-island lists not empty. Returns the first
    /// problem found.
    pub fn validate(&self) -> Result<(), RecipeError> {
        let recipe = || self.name.clone();
        if self.modes.is_empty() {
            return Err(RecipeError::NoModes { recipe: recipe() });
        }
        if self.modes.len() > MAX_MODES {
            return Err(RecipeError::TooManyModes {
                recipe: recipe(),
                count: self.modes.len(),
                max: MAX_MODES,
            });
        }
        let mut seen = [0u64; 4];
        for (index, m) in self.modes.iter().enumerate() {
            let (word, bit) = (usize::from(m.id / 64), m.id % 64);
            if seen[word] & (1 << bit) != 0 {
                return Err(RecipeError::DuplicateMode {
                    recipe: recipe(),
                    index,
                    id: m.id,
                });
            }
            seen[word] |= 1 << bit;
            if !(0.0..=1.0).contains(&m.value) {
                return Err(RecipeError::Value {
                    recipe: recipe(),
                    mode: m.id,
                    value: m.value,
                });
            }
            let q = m.needs.cpu_quota;
            // Above 1e6 CPUs is a typo, and keeps milli-CPU sums in u64.
            if !q.is_finite() || q <= 0.0 || q > 1e6 {
                return Err(RecipeError::CpuQuota {
                    recipe: recipe(),
                    mode: m.id,
                    value: q,
                });
            }
            if let Some(w) = m.power_watts {
                if !w.is_finite() || !(0.0..=1e6).contains(&w) {
                    return Err(RecipeError::Power {
                        recipe: recipe(),
                        mode: m.id,
                        value: w,
                    });
                }
            }
            if m.needs.threads == Some(0) {
                return Err(RecipeError::ZeroThreads {
                    recipe: recipe(),
                    mode: m.id,
                });
            }
            if m.needs.islands.as_ref().is_some_and(|l| l.is_empty()) {
                return Err(RecipeError::NoIslands {
                    recipe: recipe(),
                    mode: m.id,
                });
            }
        }
        Ok(())
    }

    /// [`validate`](Self::validate), then checks the recipe against a
    /// platform's islands: every allowed island exists, and every mode fits
    /// at least one allowed island when that island is empty.
    pub fn validate_for(&self, islands: &[IslandCapacity]) -> Result<(), RecipeError> {
        self.validate()?;
        for m in &self.modes {
            if let Some(list) = &m.needs.islands {
                if let Some(missing) = list.iter().find(|n| !islands.iter().any(|i| &i.name == *n))
                {
                    return Err(RecipeError::UnknownIsland {
                        recipe: self.name.clone(),
                        mode: m.id,
                        island: missing.clone(),
                    });
                }
            }
            let cpus = m.needs.charged_cpus();
            let fits = islands.iter().any(|i| {
                m.needs.allows(&i.name) && cpus <= i.cpus && m.needs.memory_bytes <= i.memory_bytes
            });
            if !fits {
                return Err(RecipeError::NeverFits {
                    recipe: self.name.clone(),
                    mode: m.id,
                    cpus,
                    memory_bytes: m.needs.memory_bytes,
                });
            }
        }
        Ok(())
    }

    /// The mode with this id.
    pub fn mode(&self, id: u8) -> Option<&WorkingMode> {
        self.modes.iter().find(|m| m.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    fn mode(id: u8, value: f64, q: f64) -> WorkingMode {
        WorkingMode {
            power_watts: None,
            id,
            name: String::new(),
            value,
            needs: Needs {
                cpu_quota: q,
                threads: None,
                exclusive_cpus: false,
                memory_bytes: 0,
                islands: None,
            },
        }
    }

    fn recipe(modes: Vec<WorkingMode>) -> Recipe {
        Recipe {
            name: n("app"),
            priority: 0,
            modes,
        }
    }

    #[test]
    fn accepts_a_sane_recipe() {
        let r = recipe(vec![mode(0, 0.25, 0.5), mode(1, 1.0, 4.0)]);
        assert_eq!(r.validate(), Ok(()));
        assert_eq!(r.mode(1).unwrap().needs.cpu_quota, 4.0);
        assert!(r.mode(2).is_none());
    }

    #[test]
    fn names_the_field_and_value_that_fail() {
        let e = recipe(vec![]).validate().unwrap_err();
        assert!(matches!(e, RecipeError::NoModes { .. }));

        let e = recipe(vec![mode(3, 0.5, 1.0), mode(3, 0.6, 2.0)])
            .validate()
            .unwrap_err();
        assert_eq!(
            e,
            RecipeError::DuplicateMode {
                recipe: n("app"),
                index: 1,
                id: 3
            }
        );
        assert!(e.to_string().contains("modes[1].id = 3"), "{e}");

        for v in [1.5, -0.1, f64::NAN] {
            let e = recipe(vec![mode(0, v, 1.0)]).validate().unwrap_err();
            assert!(matches!(e, RecipeError::Value { mode: 0, .. }), "{v}");
        }
        for q in [0.0, -1.0, f64::INFINITY, f64::NAN, 2e6] {
            let e = recipe(vec![mode(7, 0.5, q)]).validate().unwrap_err();
            assert!(matches!(e, RecipeError::CpuQuota { mode: 7, .. }), "{q}");
            assert!(e.to_string().contains("needs.cpu_quota"), "{e}");
        }
        let mut m = mode(1, 0.5, 1.0);
        m.needs.threads = Some(0);
        assert!(matches!(
            recipe(vec![m]).validate(),
            Err(RecipeError::ZeroThreads { mode: 1, .. })
        ));
        let mut m = mode(1, 0.5, 1.0);
        m.needs.islands = Some(vec![]);
        assert!(matches!(
            recipe(vec![m]).validate(),
            Err(RecipeError::NoIslands { mode: 1, .. })
        ));
        let many = (0..=u8::try_from(MAX_MODES).unwrap())
            .map(|i| mode(i, 0.5, 1.0))
            .collect();
        assert!(matches!(
            recipe(many).validate(),
            Err(RecipeError::TooManyModes { count: 65, .. })
        ));
    }

    #[test]
    fn checks_islands_of_the_platform() {
        let islands = [
            IslandCapacity::new(n("a"), 4.0, 1 << 30),
            IslandCapacity::new(n("b"), 2.0, 4 << 30),
        ];
        let mut m = mode(0, 0.5, 1.0);
        m.needs.islands = Some(vec![n("a"), n("zz")]);
        let e = recipe(vec![m]).validate_for(&islands).unwrap_err();
        assert_eq!(
            e,
            RecipeError::UnknownIsland {
                recipe: n("app"),
                mode: 0,
                island: n("zz")
            }
        );
        // 3 CPUs and 2 GiB: a has the CPUs, b the memory, neither both.
        let mut m = mode(2, 0.5, 3.0);
        m.needs.memory_bytes = 2 << 30;
        let e = recipe(vec![m.clone()]).validate_for(&islands).unwrap_err();
        assert!(matches!(e, RecipeError::NeverFits { mode: 2, .. }), "{e}");
        m.needs.memory_bytes = 1 << 30;
        assert_eq!(recipe(vec![m.clone()]).validate_for(&islands), Ok(()));
        // Exclusive 1.5 CPUs is charged 2 whole CPUs: fits b (2 CPUs).
        let mut m = mode(0, 0.5, 1.5);
        m.needs.exclusive_cpus = true;
        m.needs.islands = Some(vec![n("b")]);
        assert_eq!(m.needs.charged_cpus(), 2.0);
        assert_eq!(recipe(vec![m.clone()]).validate_for(&islands), Ok(()));
        m.needs.cpu_quota = 2.5;
        assert!(recipe(vec![m]).validate_for(&islands).is_err());
    }

    #[test]
    fn toml_recipe_rejects_unknown_fields_with_position() {
        let good = r#"
            name = "bodytrack"
            priority = 1
            [[modes]]
            id = 0
            value = 0.25
            needs = { cpu_quota = 0.5, threads = 2 }
            [[modes]]
            id = 3
            name = "full"
            value = 1.0
            needs = { cpu_quota = 4.0, threads = 5, memory_bytes = 1073741824, islands = ["node1"] }
        "#;
        let r: Recipe = toml::from_str(good).unwrap();
        assert_eq!(r.priority, 1);
        assert_eq!(r.modes[1].needs.islands.as_deref(), Some(&[n("node1")][..]));
        assert_eq!(r.validate(), Ok(()));

        let bad =
            "name = \"x\"\n[[modes]]\nid = 0\nvalue = 0.5\nneeds = { cpu_quota = 1.0, cpus = 2 }\n";
        let e = toml::from_str::<Recipe>(bad).unwrap_err();
        assert!(e.to_string().contains("cpus"), "{e}");
        assert!(e.span().is_some());
    }
}
