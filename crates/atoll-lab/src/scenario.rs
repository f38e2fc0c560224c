//! Scenarios: a machine, a run length, an atoll platform config, a
//! workload, and variants of the platform config to compare.
//!
//! ```toml
//! name = "pmake"
//! [machine]                 # the synthetic topology
//! packages = 1
//! cores = 8                 # per LLC
//! [run]
//! seconds = 30
//! seed = 7
//! epoch_ms = 30             # the control loop's period (default: the config's)
//! sample_ms = 250           # time-series resolution (0: none)
//! [platform]                # an atoll config, as in /etc/atoll/atoll.toml
//! host = { cpus = "" }
//! island.all = { cpus = "0-7" }
//! [workload]                # the engine's WorkloadSpec
//! [[workload.apps]]
//! ...
//! [[variant]]
//! name = "quota"
//! platform = { isolation = { mode = "quota" } }   # merged over [platform]
//! remove = ["comm"]         # dotted platform keys dropped first
//! ```
//!
//! Reconfigurable applications: `[managed]` maps `malleable` apps of the
//! workload to recipes of the platform config, and a variant with
//! `managed = true` registers every instance of them with its recipe and
//! follows its assignments (see [`crate::apps`]); in other variants they
//! run unmanaged, with all their threads.
//!
//! ```toml
//! [managed]
//! bodytrack = "bodytrack"   # app name = recipe name
//! [[variant]]
//! name = "managed"
//! managed = true
//! ```
//!
//! Parsing is strict (unknown keys are refused) and errors carry the line
//! and column. The platform config of every variant is checked by
//! `atoll_config::parse` when the scenario is loaded, so a bad variant is
//! refused before anything runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use atoll_core::spec::PlatformSpec;
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_sim::WorkloadSpec;
use serde::{Deserialize, Serialize};

use crate::LabError;

/// The simulated machine's shape (see `Topology::synthetic`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    /// Sockets.
    #[serde(default = "one")]
    pub packages: u32,
    /// NUMA nodes per package.
    #[serde(default = "one")]
    pub nodes: u32,
    /// LLC groups per node.
    #[serde(default = "one")]
    pub llcs: u32,
    /// Cores per LLC group.
    pub cores: u32,
    /// SMT threads per core.
    #[serde(default = "one")]
    pub threads: u32,
    /// Memory per node, GiB.
    #[serde(default = "default_memory")]
    pub memory_gb: u64,
}

fn one() -> u32 {
    1
}
fn default_memory() -> u64 {
    16
}

impl MachineSpec {
    /// CPUs in all.
    pub fn cpus(&self) -> u32 {
        self.packages * self.nodes * self.llcs * self.cores * self.threads
    }

    /// The synthetic topology.
    pub fn topology(&self) -> Topology {
        Topology::synthetic(SyntheticShape {
            packages: self.packages,
            nodes_per_package: self.nodes,
            llcs_per_node: self.llcs,
            cores_per_llc: self.cores,
            threads_per_core: self.threads,
            memory_per_node: self.memory_gb << 30,
        })
    }
}

/// How long and how finely a scenario runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Simulated seconds at most (the run ends earlier when every finite
    /// app has finished).
    pub seconds: f64,
    /// The engine's random seed.
    #[serde(default)]
    pub seed: u64,
    /// The control loop's period, ms (default: the platform config's).
    #[serde(default)]
    pub epoch_ms: Option<u64>,
    /// Time-series resolution, ms (0: no series).
    #[serde(default = "default_sample_ms")]
    pub sample_ms: u64,
}

fn default_sample_ms() -> u64 {
    500
}

/// One `[[variant]]`: the platform config with keys replaced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// Its name (unique in the scenario).
    pub name: String,
    /// Dotted platform keys removed before merging (e.g. `comm`,
    /// `overlay.power`).
    #[serde(default)]
    pub remove: Vec<String>,
    /// Platform keys merged over the base (tables merge, values replace).
    #[serde(default)]
    pub platform: toml::Table,
    /// Whether the runner plays the runtime library for the `[managed]`
    /// apps.
    #[serde(default)]
    pub managed: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    machine: MachineSpec,
    run: RunSpec,
    #[serde(default)]
    platform: Option<toml::Table>,
    #[serde(default)]
    platform_file: Option<String>,
    workload: WorkloadSpec,
    #[serde(default)]
    managed: BTreeMap<String, String>,
    #[serde(default)]
    variant: Vec<Variant>,
}

/// A parsed, checked scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name (the file stem if not given).
    pub name: String,
    /// What it shows.
    pub description: String,
    /// The machine.
    pub machine: MachineSpec,
    /// The run.
    pub run: RunSpec,
    /// The base platform config.
    pub platform: toml::Table,
    /// The workload.
    pub workload: WorkloadSpec,
    /// Reconfigurable apps: app name to recipe name.
    pub managed: BTreeMap<String, String>,
    /// Variants (empty: the base config alone, as variant `base`).
    pub variants: Vec<Variant>,
}

fn remove_key(t: &mut toml::Table, dotted: &str) {
    let mut parts: Vec<&str> = dotted.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut cur = t;
    for p in parts {
        match cur.get_mut(p) {
            Some(toml::Value::Table(next)) => cur = next,
            _ => return,
        }
    }
    cur.remove(last);
}

fn merge(base: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

impl Scenario {
    /// Parses a scenario; `source` names it in errors and `dir` resolves
    /// `platform_file`.
    pub fn parse(text: &str, source: &str, dir: &Path) -> Result<Self, LabError> {
        let raw: Raw = toml::from_str(text).map_err(|e| LabError::Parse {
            source_name: source.to_string(),
            message: e.to_string(),
        })?;
        let platform = match (raw.platform, raw.platform_file) {
            (Some(_), Some(_)) => {
                return Err(LabError::Invalid {
                    source_name: source.into(),
                    message: "give [platform] or platform_file, not both".into(),
                })
            }
            (Some(t), None) => t,
            (None, Some(f)) => {
                let path: PathBuf = dir.join(&f);
                let text = std::fs::read_to_string(&path).map_err(|e| LabError::Read {
                    path: path.clone(),
                    source: e,
                })?;
                toml::from_str(&text).map_err(|e| LabError::Parse {
                    source_name: path.display().to_string(),
                    message: e.to_string(),
                })?
            }
            (None, None) => toml::Table::new(),
        };
        raw.workload.validate().map_err(|e| LabError::Invalid {
            source_name: source.into(),
            message: format!("[workload]: {e}"),
        })?;
        if raw.machine.cpus() == 0 || raw.machine.cpus() > 4096 {
            return Err(LabError::Invalid {
                source_name: source.into(),
                message: format!("[machine] gives {} CPUs (1..=4096)", raw.machine.cpus()),
            });
        }
        if !(raw.run.seconds > 0.0 && raw.run.seconds.is_finite()) {
            return Err(LabError::Invalid {
                source_name: source.into(),
                message: format!("run.seconds = {} (must be > 0)", raw.run.seconds),
            });
        }
        if raw.run.epoch_ms == Some(0) {
            return Err(LabError::Invalid {
                source_name: source.into(),
                message: "run.epoch_ms = 0 (must be > 0)".into(),
            });
        }
        let mut names = std::collections::BTreeSet::new();
        for v in &raw.variant {
            if !names.insert(v.name.clone()) {
                return Err(LabError::Invalid {
                    source_name: source.into(),
                    message: format!("variant {:?} given twice", v.name),
                });
            }
        }
        let name = raw.name.unwrap_or_else(|| {
            Path::new(source)
                .file_stem()
                .map_or_else(|| source.to_string(), |s| s.to_string_lossy().into())
        });
        let s = Self {
            name,
            description: raw.description.unwrap_or_default(),
            machine: raw.machine,
            run: raw.run,
            platform,
            workload: raw.workload,
            managed: raw.managed,
            variants: raw.variant,
        };
        let invalid = |message: String| LabError::Invalid {
            source_name: source.into(),
            message,
        };
        for app in s.managed.keys() {
            match s.workload.app(app).map(|a| &a.program) {
                Some(atoll_sim::workload::Program::Malleable { .. }) => {}
                Some(p) => {
                    return Err(invalid(format!(
                        "[managed] {app}: the app is a {} app; only malleable apps can follow working modes",
                        p.kind()
                    )))
                }
                None => {
                    return Err(invalid(format!(
                        "[managed] {app}: the workload has no such app"
                    )))
                }
            }
        }
        for v in s.variant_names() {
            let spec = s.platform_spec(&v)?;
            if s.is_managed(&v) {
                if s.managed.is_empty() {
                    return Err(invalid(format!(
                        "variant {v}: managed = true, but [managed] names no app"
                    )));
                }
                for (app, recipe) in &s.managed {
                    if spec.apps.recipe(recipe).is_none() {
                        return Err(invalid(format!(
                            "[managed] {app} = {recipe:?}: the platform config of variant {v} has no [recipe.{recipe}]"
                        )));
                    }
                }
            }
        }
        Ok(s)
    }

    /// Reads and parses the scenario at `path`.
    pub fn load(path: &Path) -> Result<Self, LabError> {
        let text = std::fs::read_to_string(path).map_err(|e| LabError::Read {
            path: path.to_path_buf(),
            source: e,
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, &path.display().to_string(), dir)
    }

    /// The variants' names in order (`base` when there are none).
    pub fn variant_names(&self) -> Vec<String> {
        if self.variants.is_empty() {
            vec!["base".into()]
        } else {
            self.variants.iter().map(|v| v.name.clone()).collect()
        }
    }

    /// Whether `variant` plays the runtime library for the `[managed]`
    /// apps.
    pub fn is_managed(&self, variant: &str) -> bool {
        self.variants.iter().any(|v| v.name == variant && v.managed)
    }

    /// The platform config of `variant` as TOML text.
    pub fn platform_text(&self, variant: &str) -> Result<String, LabError> {
        let mut t = self.platform.clone();
        if !(self.variants.is_empty() && variant == "base") {
            let v = self
                .variants
                .iter()
                .find(|v| v.name == variant)
                .ok_or_else(|| LabError::NoVariant {
                    scenario: self.name.clone(),
                    variant: variant.into(),
                    known: self.variant_names(),
                })?;
            for k in &v.remove {
                remove_key(&mut t, k);
            }
            merge(&mut t, &v.platform);
        }
        toml::to_string(&t).map_err(|e| LabError::Invalid {
            source_name: self.name.clone(),
            message: format!("platform of variant {variant}: {e}"),
        })
    }

    /// The checked platform spec of `variant`, with `run.epoch_ms` in force.
    pub fn platform_spec(&self, variant: &str) -> Result<PlatformSpec, LabError> {
        let text = self.platform_text(variant)?;
        let src = format!("{}[{variant}].platform", self.name);
        let mut spec = atoll_config::parse(&text, &src, &self.machine.topology()).map_err(|e| {
            LabError::Config {
                variant: variant.into(),
                message: e.to_string(),
                text: text.clone(),
            }
        })?;
        if let Some(ms) = self.run.epoch_ms {
            spec.epoch = Duration::from_millis(ms);
        }
        Ok(spec)
    }
}
