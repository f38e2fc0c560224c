//! `[recipe.NAME]` and `[apps]`: reconfigurable applications (seed 002),
//! from the tables as written to an [`AppsSpec`].
//!
//! A recipe's working modes are an array of tables, one per mode, with the
//! mode's needs written flat next to its id and value:
//!
//! ```toml
//! [recipe.bodytrack]
//! priority = 1
//! [[recipe.bodytrack.mode]]
//! id = 0
//! value = 0.25
//! cpu_quota = 0.5
//! threads = 1
//! power_watts = 9.5   # optional: the mode's power draw (the power term)
//! ```
//!
//! Shapes and types are checked while deserializing (unknown keys refused
//! with their position); ranges, islands and whether each mode fits an
//! island are checked by
//! [`PlatformSpec::validate`](atoll_core::spec::PlatformSpec::validate)
//! against what the islands offer applications, and reported at the key
//! (`recipe.bodytrack.mode[1].cpu_quota`).

use std::fmt::Write as _;
use std::time::Duration;

use atoll_core::awm::{Needs, PolicyParams, Recipe, Weights, WorkingMode};
use atoll_core::spec::AppsSpec;
use atoll_core::Name;
use serde::Deserialize;

use crate::size::{format_size, Size};

/// `[apps]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an [apps] table")]
pub(crate) struct RawApps {
    /// Islands applications may use (default: all).
    pub islands: Option<Vec<Name>>,
    /// Weights of the score's contributions.
    pub weights: Option<Weights>,
    /// Shape parameters of the policy.
    pub params: Option<PolicyParams>,
    /// Quiet time before a burst is planned, ms.
    pub batch_quiet_ms: Option<u64>,
    /// Longest wait for a plan, ms.
    pub batch_max_ms: Option<u64>,
    /// Goal gaps within this band ask for no plan.
    pub gap_deadband: Option<f64>,
}

/// `[recipe.NAME]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [recipe.NAME] table")]
pub(crate) struct RawRecipe {
    /// Priority level, 0 highest (default 0).
    pub priority: Option<u8>,
    /// The working modes.
    #[serde(default)]
    pub mode: Vec<RawMode>,
}

/// One `[[recipe.NAME.mode]]`.
#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a working mode table like { id = 0, value = 0.5, cpu_quota = 1.0 }"
)]
pub(crate) struct RawMode {
    pub id: u8,
    pub name: Option<String>,
    pub value: f64,
    pub cpu_quota: f64,
    pub threads: Option<u32>,
    #[serde(default)]
    pub exclusive_cpus: bool,
    pub memory: Option<Size>,
    pub islands: Option<Vec<Name>>,
    pub power_watts: Option<f64>,
}

/// The spec `[apps]` and the recipe tables ask for; recipe tables that could
/// not be read (already reported) are left out.
pub(crate) fn resolve(raw: Option<RawApps>, recipes: Vec<(Name, Option<RawRecipe>)>) -> AppsSpec {
    let d = AppsSpec::default();
    let raw = raw.unwrap_or_default();
    let ms = Duration::from_millis;
    AppsSpec {
        recipes: recipes
            .into_iter()
            .filter_map(|(name, r)| Some(recipe(name, r?)))
            .collect(),
        weights: raw.weights.unwrap_or(d.weights),
        params: raw.params.unwrap_or(d.params),
        islands: raw.islands,
        batch_quiet: raw.batch_quiet_ms.map_or(d.batch_quiet, ms),
        batch_max: raw.batch_max_ms.map_or(d.batch_max, ms),
        gap_deadband: raw.gap_deadband.unwrap_or(d.gap_deadband),
    }
}

fn recipe(name: Name, raw: RawRecipe) -> Recipe {
    Recipe {
        name,
        priority: raw.priority.unwrap_or(0),
        modes: raw
            .mode
            .into_iter()
            .map(|m| WorkingMode {
                power_watts: m.power_watts,
                id: m.id,
                name: m.name.unwrap_or_default(),
                value: m.value,
                needs: Needs {
                    cpu_quota: m.cpu_quota,
                    threads: m.threads,
                    exclusive_cpus: m.exclusive_cpus,
                    memory_bytes: m.memory.map_or(0, |s| s.0),
                    islands: m.islands,
                },
            })
            .collect(),
    }
}

/// The summary's lines for applications: the policy (when anything is set)
/// and every recipe with its modes.
pub(crate) fn summary(a: &AppsSpec, out: &mut String) {
    if a.recipes.is_empty() && *a == AppsSpec::default() {
        return;
    }
    let w = &a.weights;
    let islands = match &a.islands {
        Some(l) => l.iter().map(Name::as_str).collect::<Vec<_>>().join(" "),
        None => "all".into(),
    };
    let _ = writeln!(
        out,
        "apps: islands {islands}; weights value {} reconfig {} migration {} balance {} fairness {}{}; plan {}-{} ms after events; gap deadband {}",
        w.value,
        w.reconfig,
        w.migration,
        w.balance,
        w.fairness,
        if w.power > 0.0 {
            format!(" power {}", w.power)
        } else {
            String::new()
        },
        a.batch_quiet.as_millis(),
        a.batch_max.as_millis(),
        a.gap_deadband
    );
    if a.params != PolicyParams::default() {
        let p = &a.params;
        let _ = writeln!(
            out,
            "  params: knee {}, balance at knee {}, fair slack {}, hysteresis {}, aging {} (cap {}), grow into idle {}",
            p.knee, p.balance_at_knee, p.fair_slack, p.hysteresis, p.aging, p.aging_cap, p.grow_into_idle
        );
    }
    let _ = writeln!(out, "recipes: {}", a.recipes.len());
    for r in &a.recipes {
        let _ = writeln!(
            out,
            "  {}  priority {}, {} working mode{}",
            r.name,
            r.priority,
            r.modes.len(),
            if r.modes.len() == 1 { "" } else { "s" }
        );
        for m in &r.modes {
            let _ = writeln!(out, "    {}", mode(m));
        }
    }
}

/// `mode 1 (mid): value 0.5, 1 CPUs, 2 threads, memory 512M, islands a b`.
fn mode(m: &WorkingMode) -> String {
    let n = &m.needs;
    let label = if m.name.is_empty() {
        String::new()
    } else {
        format!(" ({})", m.name)
    };
    let mut parts = vec![
        format!("value {}", m.value),
        if n.exclusive_cpus {
            format!("{} CPUs of its own", n.charged_cpus())
        } else {
            format!("{} CPUs", n.cpu_quota)
        },
    ];
    if let Some(t) = n.threads {
        parts.push(format!("{t} thread{}", if t == 1 { "" } else { "s" }));
    }
    if n.memory_bytes > 0 {
        parts.push(format!("memory {}", format_size(n.memory_bytes)));
    }
    if let Some(l) = &n.islands {
        let l: Vec<&str> = l.iter().map(Name::as_str).collect();
        parts.push(format!("islands {}", l.join(" ")));
    }
    if let Some(w) = m.power_watts {
        parts.push(format!("{w} W"));
    }
    format!("mode {}{label}: {}", m.id, parts.join(", "))
}
