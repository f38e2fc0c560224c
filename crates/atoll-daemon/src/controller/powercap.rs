//! The platform power cap in the control loop: held each epoch from the
//! RAPL reading, set up at start, changed on reload (see
//! [`crate::powercap`]).

use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::plan::GroupPath;
use atoll_core::power::Knob;
use atoll_core::spec::PlatformSpec;
use atoll_core::Name;

use super::Controller;
use crate::powercap::{configured, NoRapl};

impl Controller {
    /// Holds the configured power cap, if any: with a RAPL monitor, over
    /// the islands (frequency limits where cpufreq allows); without one
    /// (the simulated backend, or no RAPL) the status says it is not held.
    pub(super) fn start_power_cap(&mut self) {
        let spec = self.reg.effective_spec();
        let Some((overlay, _)) = configured(&spec) else {
            self.powercap = Default::default();
            return;
        };
        match &self.power {
            Some(p) if p.has_rapl() => {
                let ranges = self
                    .freq
                    .as_ref()
                    .map(crate::frequency::Frequencies::ranges)
                    .unwrap_or_default();
                self.powercap.start(&spec, &ranges);
            }
            Some(_)
                if self
                    .reg
                    .runtime_overlays()
                    .iter()
                    .any(|o| o.name == overlay) =>
            {
                // Only a cap set over the API gets here on a real daemon
                // (the file's is refused at start and reload, the API's
                // when asked): one the state file brought back to a
                // machine without RAPL. It is kept, not enforced.
                self.power_cap_not_enforced(&spec, &overlay);
            }
            Some(_) => {
                self.powercap
                    .set_unavailable(&spec, "no RAPL on this machine".into());
                self.warnings.push(format!(
                    "overlay {overlay}: the power cap is not held: no RAPL on this machine"
                ));
            }
            None => {
                self.powercap.set_unavailable(
                    &spec,
                    "this daemon reads no RAPL (simulated backend)".into(),
                );
                self.warnings.push(format!(
                    "overlay {overlay}: the power cap is configured but this daemon reads no RAPL (simulated backend): not held"
                ));
            }
        }
    }

    /// A power cap set over the API and restored from the state file on a
    /// machine without RAPL: the daemon starts (refusing a start for a
    /// saved run-time setting would keep every unit unmanaged), the
    /// overlay stays as saved, and the status, a warning and a decision
    /// say that it is not enforced and why.
    fn power_cap_not_enforced(&mut self, spec: &PlatformSpec, overlay: &Name) {
        let watts = configured(spec).map_or(0.0, |(_, w)| w);
        let why = format!(
            "no RAPL zone on this machine, so its power cannot be measured (the cap was set over the API and restored from the state file; `atoll overlay rm {overlay}` removes it)"
        );
        self.powercap.set_unavailable(spec, why.clone());
        self.warnings.push(format!(
            "overlay {overlay}: power cap {watts:.1} W not enforced: {why}"
        ));
        self.log.record(atoll_core::decision::Decision {
            at: self.env.clock.now(),
            action: atoll_core::decision::Action::SetOverlay {
                overlay: overlay.to_string(),
                change: format!("power cap {watts:.1} W not enforced: {why}"),
            },
            why: Reason::Recover {
                detail: "a run-time overlay restored from the state file".into(),
            },
        });
    }

    /// One step of the power cap on the last RAPL reading: each move is
    /// carried out (a frequency limit through the actuator, a CPU cap
    /// through the composer) and recorded with the measured watts and the
    /// budget.
    pub(super) fn hold_power_cap(&mut self, now: Duration) {
        if !self.powercap.is_held() {
            return;
        }
        // The counters the island loads were sampled from this epoch (one
        // read of each island per epoch; see `sample_loads`).
        let usage: std::collections::BTreeMap<Name, u64> = self
            .powercap
            .islands()
            .into_iter()
            .filter_map(|i| {
                let us = self.loads.cpu_usage_us(&i, now)?;
                Some((i, us))
            })
            .collect();
        self.powercap.sample_busy(&usage);
        let watts = self.power.as_ref().and_then(crate::power::Power::watts);
        let overlay = self
            .powercap
            .overlay()
            .map(ToString::to_string)
            .unwrap_or_default();
        for mv in self.powercap.step(watts) {
            let why = Reason::Coordination {
                overlay: overlay.clone(),
                detail: mv.reason(),
            };
            match mv.knob {
                Knob::MaxFrequency(k) => {
                    let Some(freq) = &mut self.freq else {
                        self.powercap.without_frequency(&mv.island);
                        continue;
                    };
                    match freq.limit(&mv.island, k, now, &mut self.log, why) {
                        Ok(()) => self.powercap.applied(&mv),
                        Err(e) => {
                            let w = format!(
                                "power cap: island {}: frequency limit not written ({e}); held by a CPU cap from now on",
                                mv.island
                            );
                            tracing::warn!("{w}");
                            self.warnings.push(w);
                            self.powercap.without_frequency(&mv.island);
                        }
                    }
                }
                Knob::CpuCap(_) => {
                    self.powercap.applied(&mv);
                    self.compose.touch(GroupPath::island(&mv.island), why);
                }
            }
        }
    }

    /// Refuses a power cap the machine cannot measure (a real daemon on a
    /// machine without RAPL) when `new` adds or changes it: a cap the state
    /// file brought back unenforced does not block other changes.
    pub(super) fn check_power_cap(&self, new: &PlatformSpec) -> Result<(), NoRapl> {
        let cap = configured(new);
        if cap.is_some()
            && cap == self.power_cap_now()
            && self
                .powercap
                .status()
                .is_some_and(|s| s.unavailable.is_some())
        {
            return Ok(());
        }
        match (&self.power, cap) {
            (Some(p), Some((overlay, _))) if !p.has_rapl() => Err(NoRapl {
                overlay,
                powercap: "the machine's powercap class".into(),
            }),
            _ => Ok(()),
        }
    }

    /// The power cap of the effective configuration (the file's overlays
    /// and those added over the API): its overlay and budget.
    pub(super) fn power_cap_now(&self) -> Option<(Name, f64)> {
        configured(&self.reg.effective_spec())
    }

    /// After a reload or an overlay added, changed or removed over the API
    /// (`old`: [`Self::power_cap_now`] before it): a power cap whose overlay
    /// or budget changed is lifted (its frequency limits given back, its
    /// composer contribution gone) and the new one, if any, held from
    /// scratch; an unchanged one takes the islands' new priority tiers.
    pub(super) fn reload_power_cap(&mut self, old: Option<(Name, f64)>) {
        if old == self.power_cap_now() {
            // The same cap; the overlays' priorities may have moved.
            let spec = self.reg.effective_spec();
            self.powercap.set_priorities(&spec);
            return;
        }
        self.lift_power_cap();
        self.start_power_cap();
    }

    /// Gives back every limit the power cap set.
    fn lift_power_cap(&mut self) {
        let now = self.env.clock.now();
        let overlay = self
            .powercap
            .overlay()
            .map(ToString::to_string)
            .unwrap_or_default();
        let (freq, caps) = self.powercap.lift();
        let why = Reason::Coordination {
            overlay,
            detail: "power cap removed or changed: limits lifted".into(),
        };
        for island in freq {
            if let Some(f) = &mut self.freq {
                if let Err(e) = f.limit(&island, None, now, &mut self.log, why.clone()) {
                    self.warnings
                        .push(format!("power cap: island {island}: lifting: {e}"));
                }
            }
        }
        for island in caps {
            self.compose.touch(GroupPath::island(&island), why.clone());
        }
    }
}
