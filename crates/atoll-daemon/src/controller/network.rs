//! The network islands in the control loop: their overlays kept in step
//! with the platform manager's, `tune bandwidth` served by them, and each
//! epoch's backlog triggers sent to the units' CPU islands
//! (`docs/netisland.md`).

use std::time::Duration;

use atoll_core::coord::{Message, OverlaySpec};
use atoll_core::plan::GroupPath;

use super::{monitor, Controller};

impl Controller {
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
