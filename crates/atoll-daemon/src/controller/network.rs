//! The network islands in the control loop: their overlays kept in step
//! with the platform manager's, `tune bandwidth` served by them, and each
//! epoch's backlog triggers sent to the units' CPU islands
//! (`docs/netisland.md`).

use std::time::Duration;

use atoll_core::coord::{Message, OverlaySpec};
use atoll_core::decision::Reason;
use atoll_core::netisland::{NetUnitSetup, DEFAULT_PRIO, DEFAULT_SHARE};
use atoll_core::plan::GroupPath;
use atoll_core::Name;
use atoll_proto::runtime::{NetClassSettings, UnitSettings};

use super::{monitor, Controller};
use crate::netisland::{GroupDir, RuntimeClass, RuntimeClassError};

/// Bits per second in a megabit (the config's `ceil_mbit`).
const MBIT: u64 = 1_000_000;

impl Controller {
    /// Gives each unit group its class id as socket priority where the
    /// backend keeps groups in a cgroup v1 `net_prio` hierarchy, or a v2
    /// one with atoll's nftables table (see
    /// [`crate::netisland::NetIslands::classify`]); failures become status
    /// warnings.
    pub(super) fn classify_units(&mut self, now: Duration, why: &Reason) {
        let Some(net) = &mut self.net else {
            return;
        };
        // Classes of run-time units removed since go first (a unit of
        // that name the file declares now is not the one that had it).
        let reg = &self.reg;
        let runtime = |u: &Name| {
            reg.unit(u.as_str())
                .is_some_and(|(_, o)| o == atoll_proto::UnitOrigin::Runtime)
        };
        let (dropped, warnings) = net.drop_gone_classes(runtime, now, &mut self.log);
        self.warnings.extend(warnings);
        if dropped {
            self.save_network();
        }
        let Some(net) = &mut self.net else {
            return;
        };
        let (reg, backend) = (&self.reg, &*self.env.backend);
        let dirs = |unit: &Name| {
            let g = reg.unit_group(unit.as_str())?;
            backend.net_prio_dir(&g).map(GroupDir::NetPrio).or_else(|| {
                backend
                    .cgroup2_dir(&g)
                    .map(|(mount, dir)| GroupDir::Cgroup2 { mount, dir })
            })
        };
        let warnings = net.classify(now, &dirs, why, &mut self.log);
        self.warnings.extend(warnings);
    }

    /// The class a request's settings give run-time unit `unit` (see
    /// [`Self::runtime_class`]); `clear_network` with a class is refused.
    pub(super) fn settings_class(
        &self,
        unit: &Name,
        settings: &UnitSettings,
    ) -> Result<Option<RuntimeClass>, RuntimeClassError> {
        if settings.clear_network && settings.network.is_some() {
            return Err(RuntimeClassError::ClassAndClear);
        }
        self.runtime_class(unit, settings.network.as_ref())
    }

    /// The class `asked` (a request's `settings.network`) gives run-time
    /// unit `unit`, checked against its network island (`None`: none
    /// asked). Its defaults are the config's (`share` 100, `prio` 3, the
    /// link rate as ceiling).
    pub(super) fn runtime_class(
        &self,
        unit: &Name,
        asked: Option<&NetClassSettings>,
    ) -> Result<Option<RuntimeClass>, RuntimeClassError> {
        let Some(asked) = asked else {
            return Ok(None);
        };
        let no_island = || RuntimeClassError::NoIsland {
            island: asked.island.clone(),
        };
        let net = self.net.as_ref().ok_or_else(no_island)?;
        let class = NetUnitSetup {
            name: unit.clone(),
            share: asked.share.unwrap_or(DEFAULT_SHARE),
            ceil_bps: asked.ceil_mbit.map(|m| m.saturating_mul(MBIT)),
            prio: asked.prio.unwrap_or(DEFAULT_PRIO),
        };
        net.check_runtime_class(&asked.island, &class)?;
        let island = Name::new(&asked.island).map_err(|_| no_island())?;
        Ok(Some(RuntimeClass { island, class }))
    }

    /// Whether run-time unit `unit` has a network class.
    pub(super) fn has_runtime_class(&self, unit: &Name) -> bool {
        self.runtime_class_of(unit).is_some()
    }

    /// Run-time unit `unit`'s network class.
    pub(super) fn runtime_class_of(&self, unit: &Name) -> Option<&RuntimeClass> {
        self.net
            .as_ref()?
            .runtime_classes()
            .find(|c| &c.class.name == unit)
    }

    /// Gives run-time unit `unit` the class `class` (checked by
    /// [`Self::runtime_class`]) or none, then classifies its group (or
    /// writes its priority back) and saves the classes in the state file.
    pub(super) fn give_runtime_class(
        &mut self,
        unit: &Name,
        class: Option<RuntimeClass>,
        why: &Reason,
    ) {
        let Some(net) = &mut self.net else {
            return;
        };
        let now = self.env.clock.now();
        match net.set_runtime_class(unit, class, now, why, &mut self.log) {
            Ok(w) => self.warnings.extend(w),
            Err(e) => self
                .warnings
                .push(format!("unit {unit}: network class not given: {e}")),
        }
        self.classify_units(now, why);
        self.save_network();
    }

    /// Applications' units take the network class of the unit their
    /// process was in when it registered (`atoll run --unit job
    /// --net-island wire -- app`: the app's traffic keeps job's share,
    /// ceiling and prio), as a run-time class of their own on that island,
    /// given once their unit exists (the class goes with the unit). Only
    /// root's applications: a class is root's to give, and a user's
    /// applications registered from one classified unit would each take
    /// its share again. A refusal (no class minor left) is a status
    /// warning.
    fn inherit_app_classes(&mut self) {
        let Some(net) = &self.net else {
            return;
        };
        let mut give = Vec::new();
        for app in self.apps.list.values().filter(|a| a.uid == 0) {
            let Some(from) = &app.came_from else {
                continue;
            };
            let unit = crate::apps::unit_name(app.id);
            let exists = self
                .reg
                .unit(unit.as_str())
                .is_some_and(|(_, o)| o == atoll_proto::UnitOrigin::Runtime);
            if !exists || net.class_of(&unit).is_some() {
                continue;
            }
            let Some(mut class) = net.class_of(from) else {
                continue;
            };
            class.class.name = unit;
            let why = Reason::Api {
                uid: app.uid,
                request: format!(
                    "register application {} (pid {}) from unit {from}, whose network class its unit takes",
                    app.recipe.name, app.pid
                ),
            };
            give.push((class, why));
        }
        for (class, why) in give {
            let unit = class.class.name.clone();
            if let Err(e) = self.net.as_ref().map_or(Ok(()), |n| {
                n.check_runtime_class(class.island.as_str(), &class.class)
            }) {
                // Once: the app's unit is not tried again until it changes.
                let w = format!("unit {unit}: network class not given: {e}");
                if !self.warnings.contains(&w) {
                    self.warnings.push(w);
                }
                continue;
            }
            self.give_runtime_class(&unit, Some(class), &why);
        }
    }

    /// Saves what the network islands found on their interfaces in the
    /// state file, at once (before anything else can fail), when it
    /// changed.
    pub(super) fn save_network(&mut self) {
        let Some(net) = &self.net else {
            return;
        };
        self.persist.stage_network(net.saved_state());
        let ticket = self
            .persist
            .save_if_changed(&mut self.reg, &*self.env.backend, Vec::new());
        if let Err(e) = ticket.map_or(Ok(()), |t| self.persist.wait(t)) {
            self.warnings.push(format!(
                "the state file cannot be saved ({e}): after a crash the network islands' interfaces would not be given back"
            ));
        }
    }

    /// Applies a reloaded description's `[network.*]` (see
    /// [`crate::netisland::NetIslands::reload`]).
    pub(super) fn reload_network(&mut self) {
        let Some(net) = &mut self.net else {
            return;
        };
        let now = self.env.clock.now();
        let warnings = net.reload(self.reg.spec(), now, &mut self.log);
        self.warnings.extend(warnings);
        let why = Reason::Reload {
            detail: "network islands reloaded".into(),
        };
        self.classify_units(now, &why);
        self.save_network();
        self.sync_net_overlays(now);
    }

    /// Registers with the network islands the overlays the platform
    /// manager holds, deregisters the ones it no longer holds; refusals
    /// become status warnings (once each).
    pub(super) fn sync_net_overlays(&mut self, now: Duration) -> Vec<String> {
        let Some(net) = &mut self.net else {
            return Vec::new();
        };
        let overlays: Vec<OverlaySpec> = self
            .coord
            .manager()
            .map(|m| m.overlay_specs().cloned().collect())
            .unwrap_or_default();
        let refusals = net.sync_overlays(now, &overlays, &mut self.log);
        self.warnings.extend(refusals.iter().cloned());
        refusals
    }

    /// `tune(bandwidth, …)` for the network islands: `None` if `msg` is
    /// not one or the daemon manages no network island.
    pub(super) fn bandwidth_tune(
        &mut self,
        now: Duration,
        msg: &Message,
    ) -> Option<(atoll_core::coord::Reply, String)> {
        self.sync_net_overlays(now);
        self.net.as_mut()?.tune(now, msg, &mut self.log)
    }

    /// One epoch of the network islands: overlays in step, then each
    /// unit's socket and class backlog; a backlog over its threshold sends
    /// `trigger(cpu time)` to the unit's CPU island through the platform
    /// manager, with the backlog and threshold as its reason.
    pub(super) fn network_step(&mut self, now: Duration) {
        if self.net.is_none() {
            return;
        }
        self.sync_net_overlays(now);
        self.inherit_app_classes();
        // Unit groups made since (or not yet classified) get their class.
        self.classify_units(now, &Reason::Config);
        let Some(net) = self.net.as_mut() else {
            return;
        };
        let (coord, env) = (&self.coord, &self.env);
        let mut recv = net.take_recv_queues();
        let triggers = net.backlog_triggers(now, |unit| {
            let reader = recv.as_mut()?;
            let island = coord.island_of(unit)?;
            let group = GroupPath::unit(island, unit);
            let pids = monitor(env).processes(&group).ok()?;
            reader.queued_bytes(&pids)
        });
        if let Some(r) = recv {
            net.set_recv_queues(r);
        }
        for t in triggers {
            let Message::Trigger { unit, .. } = &t.trigger.message else {
                continue;
            };
            let Some(from) = self.coord.island_of(unit).cloned() else {
                continue;
            };
            let context = format!(
                " (network island {}: unit {unit}: {})",
                t.island, t.trigger.cause
            );
            if let Some(reply) =
                self.coord
                    .send(now, &from, &t.trigger.message, &context, &mut self.compose)
            {
                if let Some(r) = reply.reason() {
                    tracing::info!(
                        "network island {}: trigger of {unit} refused: {r}",
                        t.island
                    );
                }
            }
        }
        self.carry_out_priorities(now);
    }
}
