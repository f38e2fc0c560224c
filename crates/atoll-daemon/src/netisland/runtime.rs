//! Classes of units made at run time (`atoll unit add --net-island`, the
//! request's `settings.network`): the same class a
//! `[network.NAME.units.UNIT]` table gives, added to the island's
//! coordinator (the lowest free class minor), written with the island's
//! tree, and classified by the same path as configured units (`classify`,
//! `nft`). They are kept apart from the configuration so that a reload that
//! rebuilds an island adds them again, and saved in the state file's
//! `network` part so that a restart gives them back. A class whose unit is
//! gone is removed (its group's priority written back, or its nftables
//! rule dropped, then the tree written without it).

use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::netisland::{NetCoordinator, NetIslandError, NetUnitSetup};
use atoll_core::spec::PlatformSpec;
use atoll_core::Name;
use atoll_net::TcPlan;
use serde::{Deserialize, Serialize};

use super::{describe, net_decision, NetIslands};
use crate::decisions::DecisionLog;

/// A run-time unit's class on a network island, as the state file keeps
/// it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeClass {
    /// The network island.
    pub island: Name,
    /// The unit's class (its name is the unit's).
    pub class: NetUnitSetup,
}

impl RuntimeClass {
    /// `a class on network island wire (share 200, ceil 5000000 bit/s,
    /// prio 1)`.
    pub fn describe(&self) -> String {
        format!(
            "a class on network island {} (share {}, ceil {}, prio {})",
            self.island,
            self.class.share,
            ceil_text(self.class.ceil_bps),
            self.class.prio
        )
    }
}

/// `5000000 bit/s`, or `the link rate` without a ceiling.
fn ceil_text(ceil_bps: Option<u64>) -> String {
    ceil_bps.map_or("the link rate".to_string(), |b| format!("{b} bit/s"))
}

/// Why a run-time unit cannot have the class asked for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuntimeClassError {
    /// No such network island is configured.
    #[error("network island {island:?} is not configured (the [network.NAME] tables name the network islands)")]
    NoIsland {
        /// The island asked for.
        island: String,
    },
    /// A class and `clear_network` in one request.
    #[error("a class (network) and clear_network together: give one or the other")]
    ClassAndClear,
    /// The class itself is refused (share, ceiling, priority, no minor
    /// left, a class of that name already there).
    #[error(transparent)]
    Class(#[from] NetIslandError),
}

impl NetIslands {
    /// The classes of units made at run time.
    pub fn runtime_classes(&self) -> impl Iterator<Item = &RuntimeClass> {
        self.runtime.iter()
    }

    /// The class unit `unit` has, configured (a `[network.NAME.units.UNIT]`
    /// table) or given at run time, on the first island that has one.
    pub fn class_of(&self, unit: &Name) -> Option<RuntimeClass> {
        let configured = self.islands.iter().find_map(|(setup, _)| {
            let class = setup.units.iter().find(|u| &u.name == unit)?;
            Some(RuntimeClass {
                island: setup.name.clone(),
                class: class.clone(),
            })
        });
        configured.or_else(|| self.runtime.iter().find(|c| &c.class.name == unit).cloned())
    }

    /// Writes the run-time classes into `spec`'s network islands as their
    /// units' tables (`[network.NAME.units.UNIT]`), for `atoll config
    /// dump`: those whose unit `spec` declares (the dump's run-time units;
    /// not applications' units, which it leaves out) on an island it
    /// configures. Loaded again, the dump gives each the same class.
    pub fn dump_runtime_classes(&self, spec: &mut PlatformSpec) {
        for c in &self.runtime {
            if !spec.units.iter().any(|u| u.name == c.class.name) {
                continue;
            }
            let Some(net) = spec.network.iter_mut().find(|n| n.name == c.island) else {
                continue;
            };
            if !net.units.iter().any(|u| u.name == c.class.name) {
                net.units.push(c.class.clone());
            }
        }
    }

    /// Checks that `class` can be given on `island` (the unit's old class,
    /// if any, is replaced, so it does not count) without changing
    /// anything.
    pub fn check_runtime_class(
        &self,
        island: &str,
        class: &NetUnitSetup,
    ) -> Result<(), RuntimeClassError> {
        let Some((setup, coord)) = self.islands.iter().find(|(s, _)| s.name.as_str() == island)
        else {
            return Err(RuntimeClassError::NoIsland {
                island: island.to_string(),
            });
        };
        class.validate(&setup.name, coord.rate_bps())?;
        if setup.units.iter().any(|u| u.name == class.name) {
            return Err(NetIslandError::DuplicateUnit {
                island: setup.name.clone(),
                unit: class.name.clone(),
            }
            .into());
        }
        Ok(())
    }

    /// Gives run-time unit `unit` the class `class` on `island`, or none
    /// (`None`), replacing the one it had: the old class is removed from its
    /// island and the new one added, each tree written again (a decision
    /// each with `why`). The groups' classification follows at the next
    /// [`classify`](Self::classify). Checked first: a refusal changes
    /// nothing.
    pub fn set_runtime_class(
        &mut self,
        unit: &Name,
        class: Option<RuntimeClass>,
        now: Duration,
        why: &Reason,
        log: &mut DecisionLog,
    ) -> Result<Vec<String>, RuntimeClassError> {
        if let Some(c) = &class {
            self.check_runtime_class(c.island.as_str(), &c.class)?;
        }
        let mut warnings = Vec::new();
        if let Some(at) = self.runtime.iter().position(|c| &c.class.name == unit) {
            let old = self.runtime.remove(at);
            if let Some(i) = self.island_index(&old.island) {
                let minor = self.islands[i].1.classid(unit);
                self.islands[i].1.remove_unit(unit);
                self.record_class(
                    i,
                    format!("run-time unit {unit}: class {} removed", class_text(minor)),
                    now,
                    why,
                    log,
                );
                self.write_tree(i, now, why, log, &mut warnings);
            }
        }
        if let Some(c) = class {
            let Some(i) = self.island_index(&c.island) else {
                return Err(RuntimeClassError::NoIsland {
                    island: c.island.to_string(),
                });
            };
            self.islands[i].1.add_unit(c.class.clone())?;
            let id = self.islands[i].1.classid(unit);
            let ceil = ceil_text(c.class.ceil_bps);
            self.record_class(
                i,
                format!(
                    "run-time unit {unit}: class {} added (share {}, ceil {ceil}, prio {})",
                    class_text(id),
                    c.class.share,
                    c.class.prio
                ),
                now,
                why,
                log,
            );
            self.runtime.push(c);
            self.write_tree(i, now, why, log, &mut warnings);
        }
        Ok(warnings)
    }

    /// Removes the classes of run-time units `exists` no longer knows (the
    /// unit was removed: `unit rm`, an empty unit's grace, an app's end),
    /// their groups' priority written back or their rule dropped at the
    /// next [`classify`](Self::classify); whether any was removed.
    pub fn drop_gone_classes(
        &mut self,
        exists: impl Fn(&Name) -> bool,
        now: Duration,
        log: &mut DecisionLog,
    ) -> (bool, Vec<String>) {
        let gone: Vec<Name> = self
            .runtime
            .iter()
            .filter(|c| !exists(&c.class.name))
            .map(|c| c.class.name.clone())
            .collect();
        let mut warnings = Vec::new();
        let dropped = !gone.is_empty();
        for unit in gone {
            // The unit's removal is its own decision, with its reason.
            if let Ok(w) = self.set_runtime_class(&unit, None, now, &Reason::Config, log) {
                warnings.extend(w);
            }
        }
        (dropped, warnings)
    }

    /// Adds the run-time classes of island `name` to `coord` (a coordinator
    /// a reload made from the configuration); a warning for each refused.
    pub(super) fn with_runtime_classes(
        &self,
        name: &Name,
        coord: &mut NetCoordinator,
        warnings: &mut Vec<String>,
    ) {
        for c in self.runtime.iter().filter(|c| &c.island == name) {
            if let Err(e) = coord.add_unit(c.class.clone()) {
                warnings.push(format!(
                    "network island {name}: run-time unit {}'s class is not given: {e}",
                    c.class.name
                ));
            }
        }
    }

    /// The run-time classes a previous run saved: kept, and added to their
    /// islands' coordinators before the trees are written at
    /// [`start`](Self::start).
    pub(super) fn restore_runtime_classes(&mut self, classes: Vec<RuntimeClass>) {
        for c in classes {
            if self.runtime.iter().any(|r| r.class.name == c.class.name) {
                continue;
            }
            if let Some(i) = self.island_index(&c.island) {
                if let Err(e) = self.islands[i].1.add_unit(c.class.clone()) {
                    tracing::warn!(
                        "network island {}: the saved class of unit {} is not given: {e}",
                        c.island,
                        c.class.name
                    );
                }
            }
            self.runtime.push(c);
        }
    }

    fn record_class(
        &self,
        i: usize,
        change: String,
        now: Duration,
        why: &Reason,
        log: &mut DecisionLog,
    ) {
        let setup = &self.islands[i].0;
        log.record(net_decision(
            now,
            &setup.name,
            &setup.interface,
            change,
            why.clone(),
        ));
    }

    fn island_index(&self, name: &Name) -> Option<usize> {
        self.islands.iter().position(|(s, _)| &s.name == name)
    }

    /// Writes island `i`'s tree from its coordinator, when its interface is
    /// held (one taken later is written whole then), a decision with `why`.
    pub(super) fn write_tree(
        &mut self,
        i: usize,
        now: Duration,
        why: &Reason,
        log: &mut DecisionLog,
        warnings: &mut Vec<String>,
    ) {
        let (setup, coord) = &self.islands[i];
        let iface = setup.interface.as_str();
        if self.ifs.snapshot(iface).is_none() {
            return;
        }
        let plan = TcPlan::from_rates(coord.rate_bps(), setup.leaf.into(), &coord.rates());
        let change = match self.ifs.apply(iface, &plan) {
            Ok(()) => describe(coord, &plan),
            Err(e) => {
                warnings.push(format!("network island {}: {e}", setup.name));
                format!("rewrite refused: {e}")
            }
        };
        log.record(net_decision(now, &setup.name, iface, change, why.clone()));
    }
}

/// `1:11` for the class id `0x0001_0011` (`?` when there is none).
fn class_text(classid: Option<u32>) -> String {
    classid.map_or("?".to_string(), |id| {
        format!("{:x}:{:x}", id >> 16, id & 0xffff)
    })
}
