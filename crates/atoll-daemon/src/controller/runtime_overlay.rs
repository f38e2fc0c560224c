//! Overlays changed at run time: `overlay_add`, `overlay_set`,
//! `overlay_rm` (see [`super::runtime`] for the rules they share with the
//! units'). An overlay is checked as the config file's `[overlay.NAME]`
//! tables are, over the units of either origin, and registered with the
//! coordinators like a configured one; the registry keeps it for the state
//! file, so it is registered again after a restart or a reload.

use atoll_core::coord::Property;
use atoll_core::decision::Action;
use atoll_core::spec::{OverlayConfig, PlatformSpec, SpecError};
use atoll_core::Name;
use atoll_proto::runtime::{OverlaySettings, SloSettings};
use atoll_proto::Reply;

use super::runtime::{name, RuntimeError};
use super::Controller;
use crate::command::Caller;

/// An overlay from `s` over `base` (its current form, for `overlay_set`).
fn overlay_config(
    overlay: &Name,
    base: Option<&OverlayConfig>,
    s: &OverlaySettings,
) -> Result<OverlayConfig, RuntimeError> {
    let bad = |problem: String| RuntimeError::BadOverlay {
        overlay: overlay.to_string(),
        problem,
    };
    let keys = [
        ("latency_us", s.latency_us.is_some()),
        ("throughput_floor", s.throughput_floor.is_some()),
        ("cpu_cap", s.cpu_cap.is_some()),
        ("power_cap_watts", s.power_cap_watts.is_some()),
    ];
    let given: Vec<&str> = keys.iter().filter(|(_, g)| *g).map(|(k, _)| *k).collect();
    if given.len() > 1 {
        return Err(bad(format!(
            "{} are two properties; an overlay has exactly one",
            given.join(" and ")
        )));
    }
    let property = if let Some(bound_us) = s.latency_us {
        Property::LatencyPercentile {
            percentile: s.percentile.unwrap_or(atoll_config::DEFAULT_PERCENTILE),
            bound_us,
        }
    } else if let Some(per_s) = s.throughput_floor {
        Property::ThroughputFloor { per_s }
    } else if let Some(cpus) = s.cpu_cap {
        Property::PlatformCpuCap { cpus }
    } else if let Some(watts) = s.power_cap_watts {
        Property::PlatformPowerCap { watts }
    } else {
        match (base.map(|b| b.property), s.percentile) {
            (None, _) => {
                return Err(bad(
                    "an overlay needs one property: latency_us, throughput_floor, cpu_cap or power_cap_watts".into(),
                ))
            }
            (Some(Property::LatencyPercentile { bound_us, .. }), Some(percentile)) => {
                Property::LatencyPercentile {
                    percentile,
                    bound_us,
                }
            }
            (Some(_), Some(_)) => {
                return Err(bad(
                    "percentile qualifies latency_us, which the overlay does not have".into(),
                ))
            }
            (Some(p), None) => p,
        }
    };
    if s.percentile.is_some() && given.iter().any(|k| *k != "latency_us") {
        return Err(bad(
            "percentile qualifies latency_us, which is not set".into()
        ));
    }
    let units = match &s.units {
        Some(list) => list
            .iter()
            .map(|u| name("unit", u))
            .collect::<Result<Vec<_>, _>>()?,
        None => base.map(|b| b.units.clone()).unwrap_or_default(),
    };
    let mut react = base.map(|b| b.react).unwrap_or_default();
    if s.react_pressure.is_some() {
        react.pressure = s.react_pressure;
    }
    if s.react_utilization.is_some() {
        react.utilization = s.react_utilization;
    }
    if s.react_recv_queue.is_some() {
        react.recv_queue = s.react_recv_queue;
    }
    let slo = if let Some(keys) = &s.slo {
        let keys = slo_keys(keys)?;
        atoll_config::slo_config(&format!("overlay.{overlay}"), &keys).map_err(|problems| {
            bad(problems
                .into_iter()
                .map(|(k, p)| format!("{k}: {p}"))
                .collect::<Vec<_>>()
                .join("; "))
        })?
    } else {
        base.map(|b| b.slo.clone()).unwrap_or_default()
    };
    Ok(OverlayConfig {
        name: overlay.clone(),
        priority: s.priority.or(base.map(|b| b.priority)).unwrap_or(0),
        units,
        property,
        react,
        slo,
        cap_timing: Default::default(),
    })
}

/// The SLO keys of a request's settings, as the config file's.
fn slo_keys(s: &SloSettings) -> Result<atoll_config::SloKeys, RuntimeError> {
    Ok(atoll_config::SloKeys {
        latency_source: s.latency_source.clone(),
        window_ms: s.window_ms,
        stale_after_ms: s.stale_after_ms,
        probe: s.probe.clone(),
        probe_send: s.probe_send.clone(),
        probe_every_ms: s.probe_every_ms,
        probe_timeout_ms: s.probe_timeout_ms,
        access_log: s.access_log.as_ref().map(std::path::PathBuf::from),
        log_format: s.log_format.clone(),
        log_field: s.log_field,
        log_unit: s.log_unit.clone(),
        best_effort: s
            .best_effort
            .iter()
            .flatten()
            .map(|u| name("unit", u))
            .collect::<Result<Vec<_>, _>>()?,
        be_steps: s.be_steps,
        be_grow_above: s.be_grow_above,
        be_cut_below: s.be_cut_below,
    })
}

/// The problems of `spec` about the overlay `o` (keys `overlay.NAME...`).
fn overlay_problems(
    spec: &PlatformSpec,
    o: &Name,
    topo: &atoll_core::topology::Topology,
) -> Vec<SpecError> {
    let key = format!("overlay.{o}");
    match spec.validate(topo) {
        Ok(()) => Vec::new(),
        Err(errs) => errs
            .into_iter()
            .filter(|e| e.key == key || e.key.starts_with(&format!("{key}.")))
            .collect(),
    }
}

impl Controller {
    /// The overlay's status now, for a reply.
    fn overlay_reply(&self, overlay: &Name) -> Result<Reply, RuntimeError> {
        let statuses = self
            .coord
            .overlay_statuses()
            .map_err(|e| RuntimeError::OverlayRefused {
                overlay: overlay.to_string(),
                why: e.to_string(),
            })?;
        statuses
            .into_iter()
            .find(|s| s.name == overlay.as_str())
            .map(|overlay| Reply::Overlay { overlay })
            .ok_or_else(|| RuntimeError::NoOverlay(overlay.to_string()))
    }

    /// Validates `o` on the platform as it is now, without `replacing`.
    fn check_overlay(
        &self,
        o: &OverlayConfig,
        replacing: Option<&Name>,
    ) -> Result<PlatformSpec, RuntimeError> {
        let mut spec = self.reg.effective_spec();
        if let Some(r) = replacing {
            spec.overlays.retain(|x| &x.name != r);
        }
        spec.overlays.push(o.clone());
        let errs = overlay_problems(&spec, &o.name, &self.opts.topology);
        if errs.is_empty() {
            Ok(spec)
        } else {
            Err(RuntimeError::Invalid(errs))
        }
    }

    /// `overlay_add`.
    pub(super) fn overlay_add(
        &mut self,
        caller: Caller,
        summary: &str,
        overlay: &str,
        settings: &OverlaySettings,
    ) -> Result<Reply, RuntimeError> {
        if !caller.is_root() {
            return Err(RuntimeError::OverlayRootOnly(caller.uid));
        }
        let oname = name("overlay", overlay)?;
        if self.reg.spec().overlays.iter().any(|o| o.name == oname) {
            return Err(RuntimeError::ConfiguredOverlay(overlay.to_string()));
        }
        if self.coord.overlays.contains_key(&oname)
            || self.reg.runtime_overlays().iter().any(|o| o.name == oname)
        {
            return Err(RuntimeError::OverlayExists(overlay.to_string()));
        }
        let config = overlay_config(&oname, None, settings)?;
        let spec = self.check_overlay(&config, None)?;
        self.check_power_cap(&spec)?;
        let old_cap = self.power_cap_now();
        let now = self.now();
        self.coord.sync_units(&self.reg);
        self.coord
            .register_overlay(&spec, &config, now, &mut self.compose)
            .map_err(|why| RuntimeError::OverlayRefused {
                overlay: overlay.to_string(),
                why,
            })?;
        let units: Vec<&str> = config.units.iter().map(Name::as_str).collect();
        let change = format!("added over units {}: {}", units.join(" "), config.property);
        self.reg.set_runtime_overlay(config);
        self.reload_power_cap(old_cap);
        self.decide(
            Action::SetOverlay {
                overlay: overlay.to_string(),
                change,
            },
            Self::api_reason(caller, summary),
        );
        self.carry_out_priorities(now);
        self.overlay_reply(&oname)
    }

    /// `overlay_set`: the overlay is registered again with its new form
    /// (what it had tuned or borrowed ends); if the coordinators refuse
    /// the new form, the old one is registered again.
    pub(super) fn overlay_set(
        &mut self,
        caller: Caller,
        summary: &str,
        overlay: &str,
        settings: &OverlaySettings,
    ) -> Result<Reply, RuntimeError> {
        if !caller.is_root() {
            return Err(RuntimeError::OverlayRootOnly(caller.uid));
        }
        let oname = name("overlay", overlay)?;
        let Some(old) = self
            .reg
            .runtime_overlays()
            .iter()
            .find(|o| o.name == oname)
            .cloned()
        else {
            return Err(self.not_runtime_overlay(&oname));
        };
        let new = overlay_config(&oname, Some(&old), settings)?;
        let spec = self.check_overlay(&new, Some(&oname))?;
        self.check_power_cap(&spec)?;
        let old_cap = self.power_cap_now();
        let now = self.now();
        self.coord.sync_units(&self.reg);
        if let Err(why) = self
            .coord
            .deregister_overlay(&oname, now, &mut self.compose)
        {
            return Err(RuntimeError::OverlayRefused {
                overlay: overlay.to_string(),
                why,
            });
        }
        if let Err(why) = self
            .coord
            .register_overlay(&spec, &new, now, &mut self.compose)
        {
            let old_spec = self.reg.effective_spec();
            if let Err(e) = self
                .coord
                .register_overlay(&old_spec, &old, now, &mut self.compose)
            {
                tracing::warn!("overlay {overlay}: registering its old form again: {e}");
            }
            return Err(RuntimeError::OverlayRefused {
                overlay: overlay.to_string(),
                why,
            });
        }
        let units: Vec<&str> = new.units.iter().map(Name::as_str).collect();
        let change = format!(
            "changed: units {}, priority {}, {}",
            units.join(" "),
            new.priority,
            new.property
        );
        self.reg.set_runtime_overlay(new);
        self.reload_power_cap(old_cap);
        self.decide(
            Action::SetOverlay {
                overlay: overlay.to_string(),
                change,
            },
            Self::api_reason(caller, summary),
        );
        self.carry_out_priorities(now);
        self.overlay_reply(&oname)
    }

    /// Why `overlay` is not one `overlay_set` may change.
    fn not_runtime_overlay(&self, overlay: &Name) -> RuntimeError {
        if self.reg.spec().overlays.iter().any(|o| &o.name == overlay) {
            RuntimeError::ConfiguredOverlay(overlay.to_string())
        } else if self.coord.overlays.contains_key(overlay) {
            RuntimeError::RegisteredOverlay(overlay.to_string())
        } else {
            RuntimeError::NoOverlay(overlay.to_string())
        }
    }

    /// `overlay_rm`: deregisters an overlay added at run time (or
    /// registered with a message); its loans, tunes and boosts end.
    pub(super) fn overlay_rm(
        &mut self,
        caller: Caller,
        summary: &str,
        overlay: &str,
    ) -> Result<Reply, RuntimeError> {
        if !caller.is_root() {
            return Err(RuntimeError::OverlayRootOnly(caller.uid));
        }
        let oname = name("overlay", overlay)?;
        let runtime = self.reg.runtime_overlays().iter().any(|o| o.name == oname);
        if !runtime {
            match self.not_runtime_overlay(&oname) {
                RuntimeError::RegisteredOverlay(_) => {}
                other => return Err(other),
            }
        }
        let old_cap = self.power_cap_now();
        let now = self.now();
        self.coord
            .deregister_overlay(&oname, now, &mut self.compose)
            .map_err(|why| RuntimeError::OverlayRefused {
                overlay: overlay.to_string(),
                why,
            })?;
        self.reg.remove_runtime_overlay(overlay);
        self.reload_power_cap(old_cap);
        self.decide(
            Action::SetOverlay {
                overlay: overlay.to_string(),
                change: "removed".into(),
            },
            Self::api_reason(caller, summary),
        );
        self.carry_out_priorities(now);
        Ok(Reply::OverlayRemoved {
            overlay: overlay.to_string(),
        })
    }
}
