//! The platform power cap (`[overlay.NAME] power_cap_watts = W`, issue
//! 17): a power budget held across islands.
//!
//! Every epoch the daemon reads RAPL ([`crate::power`]) and runs the pure
//! [`PowerCap::step`](atoll_core::power::PowerCap::step) on the measured
//! watts and each island's knobs. An island whose CPUs all have cpufreq is
//! slowed through a limit on its maximum frequency (written by the
//! frequency actuator, [`crate::frequency::Frequencies::limit`], which
//! gives it back at teardown); an island without cpufreq through a CPU cap
//! on its group, which this component lays as the composer layer `power`
//! (the one write path). Each move is a decision whose reason carries the
//! measured watts and the budget (`atoll why ISLAND`).
//!
//! Without RAPL the budget cannot be measured: a real daemon refuses such a
//! configuration at start ([`crate::setup`]) and on reload; with the
//! simulated backend (no power monitor) the status says the cap is not
//! held.

use std::collections::BTreeMap;

use atoll_core::coord::Property;
use atoll_core::plan::{CpuMax, GroupSettings};
use atoll_core::power::{IslandKnobs, Knob, PowerCap, PowerMove};
use atoll_core::spec::PlatformSpec;
use atoll_core::Name;
use atoll_proto::energy::{PowerCapIsland, PowerCapStatus};

use crate::compose::{At, Layer};

/// A power cap configured on a machine whose power cannot be measured.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("overlay.{overlay}.power_cap_watts: no RAPL zone under {}: this machine's power cannot be measured, so a power budget cannot be held (remove the overlay)", powercap.display())]
pub struct NoRapl {
    /// The overlay.
    pub overlay: Name,
    /// The powercap directory looked at.
    pub powercap: std::path::PathBuf,
}

/// Refuses `spec`'s power cap when the machine has no RAPL zone under
/// `sysfs_root`.
pub fn check_rapl(spec: &PlatformSpec, sysfs_root: &std::path::Path) -> Result<(), NoRapl> {
    let Some((overlay, _)) = configured(spec) else {
        return Ok(());
    };
    let zones = atoll_power::rapl::discover(sysfs_root).unwrap_or_default();
    if zones.is_empty() {
        return Err(NoRapl {
            overlay,
            powercap: sysfs_root.join(atoll_power::rapl::POWERCAP_DIR),
        });
    }
    Ok(())
}

/// The power-cap overlay of `spec`: its name and budget, W.
pub fn configured(spec: &PlatformSpec) -> Option<(Name, f64)> {
    spec.overlays.iter().find_map(|o| match o.property {
        Property::PlatformPowerCap { watts } => Some((o.name.clone(), watts)),
        _ => None,
    })
}

/// The highest priority of the overlays with a unit in `island` (0: none).
pub fn island_priority(spec: &PlatformSpec, island: &Name) -> u8 {
    spec.overlays
        .iter()
        .filter(|o| {
            o.units.iter().any(|u| {
                spec.units
                    .iter()
                    .any(|s| &s.name == u && &s.island == island)
            })
        })
        .map(|o| o.priority)
        .max()
        .unwrap_or(0)
}

/// A power cap in force.
#[derive(Clone, Debug)]
struct Held {
    overlay: Name,
    cap: PowerCap,
    knobs: Vec<IslandKnobs>,
    measured: Option<f64>,
    /// Each island's CPU-time counter at the last sample, µs.
    busy_marks: BTreeMap<Name, u64>,
}

/// The power cap: its state and its composer layer (`power`), which lays
/// nothing while no cap is held.
#[derive(Clone, Debug, Default)]
pub struct PowerCapping {
    held: Option<Held>,
    /// Why a configured cap is not held (no RAPL), for the status.
    unavailable: Option<(Name, f64, String)>,
}

impl PowerCapping {
    /// Holds the power cap of `spec`, if it has one, over its islands;
    /// `ranges` gives the hardware frequency range of each island whose
    /// CPUs all have cpufreq (the others are held by CPU caps). Replaces
    /// what was held: call [`lift`](Self::lift) first to give it back.
    pub fn start(&mut self, spec: &PlatformSpec, ranges: &BTreeMap<Name, (u64, u64)>) {
        self.unavailable = None;
        self.held = configured(spec).map(|(overlay, watts)| Held {
            overlay,
            cap: PowerCap {
                budget_watts: watts,
                hysteresis: atoll_core::power::cap::DEFAULT_HYSTERESIS,
            },
            knobs: spec
                .islands
                .iter()
                .map(|i| IslandKnobs {
                    name: i.name.clone(),
                    cpus: i.cpus.len() as f64,
                    freq_range_khz: ranges.get(&i.name).copied(),
                    max_khz: None,
                    cap_cpus: None,
                    busy_cpu_seconds: None,
                    priority: island_priority(spec, &i.name),
                })
                .collect(),
            measured: None,
            busy_marks: BTreeMap::new(),
        });
    }

    /// Records that `spec`'s power cap cannot be held, and why.
    pub fn set_unavailable(&mut self, spec: &PlatformSpec, why: String) {
        self.held = None;
        self.unavailable = configured(spec).map(|(o, w)| (o, w, why));
    }

    /// Whether a cap is held.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// The overlay holding the cap.
    pub fn overlay(&self) -> Option<&Name> {
        self.held.as_ref().map(|h| &h.overlay)
    }

    /// The moves for a measurement (`None`: no figure yet, nothing moves).
    /// The moves are not in force until [`applied`](Self::applied).
    pub fn step(&mut self, watts: Option<f64>) -> Vec<PowerMove> {
        let Some(h) = &mut self.held else {
            return Vec::new();
        };
        h.measured = watts;
        match watts {
            Some(w) => h.cap.step(w, &h.knobs),
            None => Vec::new(),
        }
    }

    /// Each island's CPU-time counter now, µs (an island missing: not
    /// read): the time since the last sample is its draw in the next step's
    /// split ([`atoll_core::power::split`]).
    pub fn sample_busy(&mut self, usage_us: &BTreeMap<Name, u64>) {
        let Some(h) = &mut self.held else {
            return;
        };
        for k in &mut h.knobs {
            let now = usage_us.get(&k.name).copied();
            let then = h.busy_marks.get(&k.name).copied();
            k.busy_cpu_seconds = match (now, then) {
                (Some(n), Some(t)) => Some(n.saturating_sub(t) as f64 / 1e6),
                _ => None,
            };
        }
        h.busy_marks = usage_us.clone();
    }

    /// Each island's tier again from `spec`'s overlays (after an overlay
    /// was added, changed or removed).
    pub fn set_priorities(&mut self, spec: &PlatformSpec) {
        if let Some(h) = &mut self.held {
            for k in &mut h.knobs {
                k.priority = island_priority(spec, &k.name);
            }
        }
    }

    /// The islands the cap weighs.
    pub fn islands(&self) -> Vec<Name> {
        self.held
            .as_ref()
            .map(|h| h.knobs.iter().map(|k| k.name.clone()).collect())
            .unwrap_or_default()
    }

    /// `mv` was carried out.
    pub fn applied(&mut self, mv: &PowerMove) {
        let Some(k) = self.knobs_mut(&mv.island) else {
            return;
        };
        match mv.knob {
            Knob::MaxFrequency(m) => k.max_khz = m,
            Knob::CpuCap(c) => k.cap_cpus = c,
        }
    }

    /// The island's frequency cannot be limited (the write failed): from
    /// now on it is held by a CPU cap.
    pub fn without_frequency(&mut self, island: &Name) {
        if let Some(k) = self.knobs_mut(island) {
            k.freq_range_khz = None;
            k.max_khz = None;
        }
    }

    fn knobs_mut(&mut self, island: &Name) -> Option<&mut IslandKnobs> {
        self.held
            .as_mut()
            .and_then(|h| h.knobs.iter_mut().find(|k| &k.name == island))
    }

    /// Stops holding the cap; returns the islands whose frequency limit
    /// and those whose CPU cap are to be lifted.
    pub fn lift(&mut self) -> (Vec<Name>, Vec<Name>) {
        let Some(h) = self.held.take() else {
            return (Vec::new(), Vec::new());
        };
        let freq = h
            .knobs
            .iter()
            .filter(|k| k.max_khz.is_some())
            .map(|k| k.name.clone())
            .collect();
        let caps = h
            .knobs
            .iter()
            .filter(|k| k.cap_cpus.is_some())
            .map(|k| k.name.clone())
            .collect();
        (freq, caps)
    }

    /// The status part: budget, measured watts, limits in force.
    pub fn status(&self) -> Option<PowerCapStatus> {
        if let Some((overlay, watts, why)) = &self.unavailable {
            return Some(PowerCapStatus {
                overlay: overlay.to_string(),
                budget_watts: *watts,
                measured_watts: None,
                islands: Vec::new(),
                unavailable: Some(why.clone()),
            });
        }
        let h = self.held.as_ref()?;
        Some(PowerCapStatus {
            overlay: h.overlay.to_string(),
            budget_watts: h.cap.budget_watts,
            measured_watts: h.measured,
            islands: h
                .knobs
                .iter()
                .map(|k| PowerCapIsland {
                    island: k.name.to_string(),
                    max_khz: k.max_khz,
                    cap_cpus: k.cap_cpus,
                })
                .collect(),
            unavailable: None,
        })
    }
}

impl Layer for PowerCapping {
    fn name(&self) -> &'static str {
        "power"
    }

    /// An island's group gets the power cap's CPU cap, unless a tighter
    /// one is laid already (the platform CPU cap's share).
    fn lay(&self, at: &At<'_>, s: &mut GroupSettings) {
        let (None, Some(island), Some(h)) = (at.unit, at.island, &self.held) else {
            return;
        };
        let Some(cap) = h
            .knobs
            .iter()
            .find(|k| k.name == island.name)
            .and_then(|k| k.cap_cpus)
        else {
            return;
        };
        let ours = CpuMax::for_cpus(cap);
        let tighter = s.cpu_max.is_some_and(|m| {
            (m.quota_us as f64 / m.period_us as f64) <= ours.quota_us as f64 / ours.period_us as f64
        });
        if !tighter {
            s.cpu_max = Some(ours);
        }
    }
}

#[cfg(test)]
mod tests;
