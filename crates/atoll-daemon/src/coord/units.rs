//! The units and overlays coordination knows, kept in step with the
//! registry: units added at run time (`atoll run`, `adopt --island`,
//! `unit add`) are learned by the platform manager as the configured ones
//! were when it was built, units removed are forgotten, and a unit whose
//! entitlement changed (`unit set`) starts again from its new knobs. Then
//! run-time overlays (`overlay add`) register over them like configured
//! ones.

use std::time::Duration;

use atoll_core::coord::{Message, PlatformManager, UnitSetup};
use atoll_core::spec::OverlayConfig;
use atoll_core::Name;
use atoll_proto::coord::OverlayOrigin;

use super::{Coordination, OverlayState};
use crate::compose::Composer;
use crate::registry::Registry;

impl Coordination {
    /// Whether an overlay holds `unit` now.
    pub fn holds(&self, unit: &str) -> bool {
        let Ok(name) = Name::new(unit) else {
            return false;
        };
        self.manager()
            .is_some_and(|m| m.islands().iter().any(|c| c.overlay_of(&name).is_some()))
    }

    /// Brings the manager's units in step with the registry's (see the
    /// module docs); does nothing when the registry's plan did not change
    /// since the last call.
    pub fn sync_units(&mut self, reg: &Registry) {
        if self.synced == Some(reg.generation()) {
            return;
        }
        self.synced = Some(reg.generation());
        let Ok(m) = self.manager.as_mut() else {
            return;
        };
        let gone: Vec<Name> = self
            .base
            .iter()
            .filter(|(u, (island, _))| {
                reg.unit(u.as_str())
                    .is_none_or(|(spec, _)| &spec.island != island)
            })
            .map(|(u, _)| u.clone())
            .collect();
        for u in gone {
            match m.remove_unit(&u) {
                Ok(_) => {
                    self.base.remove(&u);
                    self.units.remove(&u);
                    self.unit_pressure.remove(&u);
                }
                Err(e) => tracing::warn!("coordination keeps unit {u}: {e}"),
            }
        }
        for (u, _) in reg.units() {
            let Some(island) = reg.island(&u.island) else {
                continue;
            };
            let count = reg.units_of(&u.island).count();
            let knobs = PlatformManager::unit_knobs(island, u, count);
            match self.base.get(&u.name) {
                None => {
                    let setup = UnitSetup {
                        name: u.name.clone(),
                        knobs,
                    };
                    match m.add_unit(&u.island, setup) {
                        Ok(()) => {
                            let learned = m
                                .island(&u.island)
                                .and_then(|c| c.knobs(&u.name))
                                .copied()
                                .unwrap_or(knobs);
                            self.base
                                .insert(u.name.clone(), (u.island.clone(), learned));
                        }
                        Err(e) => tracing::warn!("coordination cannot learn unit {}: {e}", u.name),
                    }
                }
                Some((_, old))
                    if (old.weight, old.cap, old.memory_high, old.rt_priority)
                        != (
                            knobs.weight,
                            knobs.cap,
                            knobs.memory_high,
                            knobs.rt_priority,
                        ) =>
                {
                    match m.set_unit_base(&u.name, knobs) {
                        Ok(()) => {
                            let rt = old.rt_runtime_us;
                            let mut k = knobs;
                            k.rt_runtime_us = rt;
                            self.base.insert(u.name.clone(), (u.island.clone(), k));
                            // What overlays had tuned gives way to the new
                            // entitlement.
                            self.units.remove(&u.name);
                        }
                        Err(e) => tracing::warn!("coordination keeps unit {}'s knobs: {e}", u.name),
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// Registers the run-time overlays of `reg` (at start, after a reload);
    /// one refused is logged and left out.
    pub fn register_runtime_overlays(
        &mut self,
        reg: &Registry,
        now: Duration,
        compose: &mut Composer,
    ) {
        self.sync_units(reg);
        let spec = reg.effective_spec();
        for o in reg.runtime_overlays() {
            if let Err(why) = self.register_overlay(&spec, o, now, compose) {
                tracing::warn!("overlay {}: registration refused: {why}", o.name);
            }
        }
    }

    /// Registers one overlay of `spec` (the effective platform, so that its
    /// run-time units are found); the refusal in words when the manager
    /// refuses it.
    pub(crate) fn register_overlay(
        &mut self,
        spec: &atoll_core::spec::PlatformSpec,
        o: &OverlayConfig,
        now: Duration,
        compose: &mut Composer,
    ) -> Result<(), String> {
        let msg = Message::Register {
            overlay: o.to_overlay_spec(spec),
        };
        let from = self.default_sender(spec, &msg);
        let Ok(m) = self.manager.as_mut() else {
            return Err("coordination is off".into());
        };
        let reply = m.handle(now, &from, &msg);
        match reply.reason() {
            None => {
                self.overlays.insert(
                    o.name.clone(),
                    OverlayState::new(OverlayOrigin::Api, o.react),
                );
                self.count(Some(&o.name), true);
                let effects = reply.effects().to_vec();
                self.apply_coord(&effects, " (overlay added at run time)", compose);
                Ok(())
            }
            Some(r) => Err(r.to_string()),
        }
    }

    /// Deregisters an overlay: its loans, tunes and boosts end.
    pub(crate) fn deregister_overlay(
        &mut self,
        overlay: &Name,
        now: Duration,
        compose: &mut Composer,
    ) -> Result<(), String> {
        let from = self.first_island();
        let Ok(m) = self.manager.as_mut() else {
            return Err("coordination is off".into());
        };
        let reply = m.handle(
            now,
            &from,
            &Message::Deregister {
                overlay: overlay.clone(),
            },
        );
        match reply.reason() {
            None => {
                let effects = reply.effects().to_vec();
                self.apply_coord(&effects, " (overlay removed at run time)", compose);
                self.overlays.remove(overlay);
                self.next.retain(|(o, _), _| o != overlay);
                Ok(())
            }
            Some(r) => Err(r.to_string()),
        }
    }

    fn first_island(&self) -> Name {
        self.island_cpus
            .keys()
            .next()
            .cloned()
            .unwrap_or_else(|| Name::new("main").expect("a valid name"))
    }
}
