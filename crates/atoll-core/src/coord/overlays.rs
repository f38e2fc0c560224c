//! Overlays coming and going: registration checks everything before it
//! changes anything; deregistration ends the overlay's loans and boosts and
//! puts its units' knobs back.

use std::collections::BTreeMap;
use std::time::Duration;

use super::effect::{Change, Effect, Why};
use super::message::NackReason;
use super::platform::{OverlayRec, PlatformManager};
use super::types::{OverlaySpec, Property, Resource};
use super::CoordError;
use crate::{CpuSet, Name};

impl PlatformManager {
    pub(crate) fn register(&mut self, spec: &OverlaySpec) -> Result<Vec<Effect>, NackReason> {
        let name = &spec.name;
        spec.validate().map_err(|e| match e {
            CoordError::BadProperty { field, value, .. } => NackReason::InvalidOverlay {
                overlay: name.clone(),
                field: field.into(),
                value,
            },
            CoordError::DuplicateUnit { unit } => NackReason::UnitTaken {
                unit,
                overlay: name.clone(),
            },
            _ => NackReason::InvalidOverlay {
                overlay: name.clone(),
                field: "units".into(),
                value: 0.0,
            },
        })?;
        if self.overlays.contains_key(name) {
            return Err(NackReason::AlreadyRegistered {
                overlay: name.clone(),
            });
        }
        let mut unit_islands = Vec::with_capacity(spec.units.len());
        for (island, unit) in &spec.units {
            let i = self.island_idx(island)?;
            self.islands[i].check_register(name, unit)?;
            unit_islands.push(i);
        }
        let cap = match spec.property {
            Property::PlatformCpuCap { cpus } => {
                Some(
                    self.split_cap(cpus)
                        .map_err(|_| NackReason::InvalidOverlay {
                            overlay: name.clone(),
                            field: "cpus".into(),
                            value: cpus,
                        })?,
                )
            }
            _ => None,
        };
        for ((_, unit), i) in spec.units.iter().zip(&unit_islands) {
            self.islands[*i].register_unit(name, spec.priority, unit);
        }
        self.overlays.insert(
            name.clone(),
            OverlayRec {
                spec: spec.clone(),
                unit_islands,
                backoff: Vec::new(),
                nacks: [0; Resource::ALL.len()],
            },
        );
        Ok(match (cap, spec.property) {
            (Some(split), Property::PlatformCpuCap { cpus }) => {
                self.install_cap(split, cpus, Some(name.clone()))
            }
            _ => Vec::new(),
        })
    }

    pub(crate) fn deregister(
        &mut self,
        now: Duration,
        overlay: &Name,
    ) -> Result<Vec<Effect>, NackReason> {
        if self.overlays.remove(overlay).is_none() {
            return Err(NackReason::NotRegistered {
                overlay: overlay.clone(),
            });
        }
        let mut out = Vec::new();
        let mut groups: BTreeMap<(usize, usize), CpuSet> = BTreeMap::new();
        for (cpu, stack) in &self.loans {
            if let Some(h) = stack.last().filter(|h| &h.overlay == overlay) {
                groups
                    .entry((h.borrower, h.lender))
                    .or_default()
                    .insert(*cpu);
            }
        }
        for ((borrower, lender), cpus) in groups {
            out.push(Effect::new(
                Change::MoveCores {
                    from_island: self.islands[borrower].name().clone(),
                    to_island: self.islands[lender].name().clone(),
                    cpus: cpus.clone(),
                },
                Why::Deregistered {
                    overlay: overlay.clone(),
                },
            ));
            for cpu in cpus.iter() {
                self.pop_loan(now, cpu, &mut out);
            }
        }
        for c in &mut self.islands {
            if c.overlays().any(|(o, _)| o == overlay) {
                c.deregister(now, overlay, &mut out);
            }
        }
        if self
            .cap
            .as_ref()
            .is_some_and(|c| c.set_by.as_ref() == Some(overlay))
        {
            out.extend(self.clear_cpu_cap());
        }
        Ok(out)
    }
}
