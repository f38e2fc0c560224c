//! The hooks a restored snapshot needs inside a coordinator (see
//! [`snapshot`](super::super::snapshot)): its units' tuned knobs and trigger
//! cool-downs read out and put back.

use std::time::Duration;

use super::super::types::UnitKnobs;
use super::{check_knobs, Coordinator};
use crate::spec::SchedPolicy;
use crate::Name;

/// A unit's state worth keeping across a restart, as a coordinator holds it.
pub(crate) struct UnitKept<'a> {
    pub name: &'a Name,
    pub overlay: Option<&'a Name>,
    pub base: UnitKnobs,
    pub knobs: UnitKnobs,
    pub cooldown_until: Duration,
}

impl Coordinator {
    /// Every unit's overlay, configured and steady knobs and cool-down.
    pub(crate) fn units_kept(&self) -> impl Iterator<Item = UnitKept<'_>> {
        self.units.iter().map(|u| UnitKept {
            name: &u.name,
            overlay: u.overlay.as_ref().map(|(o, _)| o),
            base: u.base,
            knobs: u.knobs,
            cooldown_until: u.cooldown_until,
        })
    }

    /// Puts back a unit's steady knobs and cool-down, if they are valid
    /// here: knobs in range and the island's RT budget not over-handed.
    /// `Err` says why not; nothing changes then.
    pub(crate) fn restore_unit(
        &mut self,
        unit: &Name,
        knobs: UnitKnobs,
        cooldown_until: Duration,
    ) -> Result<(), String> {
        let Some(i) = self.units.iter().position(|u| &u.name == unit) else {
            return Err(format!("island {} has no unit {unit}", self.name));
        };
        check_knobs(unit, &knobs, &self.policy).map_err(|e| e.to_string())?;
        if let SchedPolicy::Realtime(rt) = &self.policy {
            let others: u64 = self
                .units
                .iter()
                .enumerate()
                .filter(|(k, _)| *k != i)
                .map(|(_, u)| u.knobs.rt_runtime_us)
                .sum();
            if others + knobs.rt_runtime_us > rt.runtime_us {
                return Err(format!(
                    "its RT budget of {} us would hand out more than island {}'s {} us",
                    knobs.rt_runtime_us, self.name, rt.runtime_us
                ));
            }
        }
        let u = &mut self.units[i];
        u.knobs = knobs;
        u.cooldown_until = cooldown_until;
        Ok(())
    }
}
