//! The network islands' part of coordination: `tune bandwidth` from the
//! API, overlays kept registered with the platform manager's, and each
//! epoch's backlog triggers (`docs/netisland.md`).

use std::collections::BTreeSet;
use std::time::Duration;

use atoll_core::coord::{Message, NackReason, OverlaySpec, Reply as CoordReply, Resource};
use atoll_core::decision::Reason;
use atoll_core::netisland::{NetChange, NetReply, NetSample, NetTrigger};
use atoll_core::Name;
use atoll_net::TcPlan;

use super::{describe, net_decision, NetIslands};
use crate::decisions::DecisionLog;

/// A backlog trigger and the network island that raised it.
#[derive(Clone, Debug, PartialEq)]
pub struct IslandTrigger {
    /// The network island.
    pub island: Name,
    /// The trigger (its message goes to the unit's CPU island).
    pub trigger: NetTrigger,
}

impl NetIslands {
    /// Serves `tune(bandwidth, …)`: the network islands that have a class
    /// for the unit answer it, and an ack rewrites their class rates (a
    /// decision per change). `None`: the message is not a bandwidth tune.
    /// The reply and its words, a nack as the coordinator gave it.
    pub fn tune(
        &mut self,
        now: Duration,
        msg: &Message,
        log: &mut DecisionLog,
    ) -> Option<(CoordReply, String)> {
        let Message::Tune {
            resource: Resource::Bandwidth,
            overlay,
            unit,
            ..
        } = msg
        else {
            return None;
        };
        let targets: Vec<usize> = (0..self.islands.len())
            .filter(|&i| self.islands[i].1.has_unit(unit))
            .collect();
        if targets.is_empty() {
            let reply = CoordReply::nack(NackReason::UnknownUnit {
                overlay: overlay.clone(),
                unit: unit.clone(),
            });
            let text = format!("{reply} (no network island has a class for it)");
            return Some((reply, text));
        }
        let mut said = Vec::new();
        for i in targets {
            match self.islands[i].1.handle(msg) {
                NetReply::Nack { reason } => {
                    let reply = CoordReply::nack(reason);
                    return Some((reply.clone(), reply.to_string()));
                }
                NetReply::Ack { changes } => {
                    said.extend(changes.iter().map(ToString::to_string));
                    if let Some(e) = self.rewrite(i, &changes, now, log) {
                        said.push(format!("the interface refused: {e}"));
                    }
                }
            }
        }
        let reply = CoordReply::Ack {
            effects: Vec::new(),
        };
        let text = format!("{reply}: {}", said.join("; "));
        Some((reply, text))
    }

    /// Keeps each network coordinator's overlays those of the platform
    /// manager (`overlays`) that name a unit with a class there: missing
    /// ones are registered, gone ones deregistered (their shares go back,
    /// the rates are rewritten). Returns a refusal for each overlay a
    /// network island refused, once.
    pub fn sync_overlays(
        &mut self,
        now: Duration,
        overlays: &[OverlaySpec],
        log: &mut DecisionLog,
    ) -> Vec<String> {
        let mut refusals = Vec::new();
        for i in 0..self.islands.len() {
            let coord = &self.islands[i].1;
            let island = coord.name().clone();
            let registered: BTreeSet<Name> = coord.overlays().map(|(n, _)| n.clone()).collect();
            let gone: Vec<Name> = registered
                .iter()
                .filter(|n| !overlays.iter().any(|o| &o.name == *n))
                .cloned()
                .collect();
            for overlay in gone {
                let reply = self.islands[i].1.handle(&Message::Deregister {
                    overlay: overlay.clone(),
                });
                self.record(
                    i,
                    now,
                    log,
                    format!("overlay {overlay} deregistered"),
                    overlay.as_str(),
                );
                let changes = reply.changes().to_vec();
                self.rewrite(i, &changes, now, log);
            }
            self.refused
                .retain(|(isl, o)| isl != &island || overlays.iter().any(|s| &s.name == o));
            for o in overlays {
                let coord = &self.islands[i].1;
                let here = o.units.iter().any(|(_, u)| coord.has_unit(u));
                let key = (island.clone(), o.name.clone());
                if !here || registered.contains(&o.name) || self.refused.contains(&key) {
                    continue;
                }
                let reply = self.islands[i]
                    .1
                    .handle(&Message::Register { overlay: o.clone() });
                match reply {
                    NetReply::Ack { .. } => {
                        let units: Vec<&str> = o
                            .units
                            .iter()
                            .filter(|(_, u)| self.islands[i].1.has_unit(u))
                            .map(|(_, u)| u.as_str())
                            .collect();
                        let text =
                            format!("overlay {} registered (units {})", o.name, units.join(", "));
                        self.record(i, now, log, text, o.name.as_str());
                    }
                    NetReply::Nack { reason } => {
                        refusals.push(format!(
                            "network island {island} refused overlay {}: {reason}",
                            o.name
                        ));
                        self.refused.insert(key);
                    }
                }
            }
        }
        refusals
    }

    /// Rewrites island `i`'s class rates after `changes` (nothing if none),
    /// a decision for each change and one for the tree; the error if the
    /// interface refused.
    fn rewrite(
        &mut self,
        i: usize,
        changes: &[NetChange],
        now: Duration,
        log: &mut DecisionLog,
    ) -> Option<String> {
        if changes.is_empty() {
            return None;
        }
        let (setup, coord) = &self.islands[i];
        let plan = TcPlan::from_rates(coord.rate_bps(), setup.leaf.into(), &coord.rates());
        let tree = describe(coord, &plan);
        let iface = setup.interface.clone();
        for c in changes {
            let overlay = overlay_of(c).unwrap_or_default();
            log.record(net_decision(
                now,
                &c.island,
                &iface,
                format!("unit {} bandwidth share {}", c.unit, c.share),
                Reason::Coordination {
                    overlay,
                    detail: c.why.to_string(),
                },
            ));
        }
        if self.ifs.snapshot(&iface).is_none() {
            return Some(format!("interface {iface} is not managed"));
        }
        let err = self.ifs.apply(&iface, &plan).err().map(|e| e.to_string());
        let change = match &err {
            None => tree,
            Some(e) => format!("rewrite refused: {e}"),
        };
        let overlay = changes.first().and_then(overlay_of).unwrap_or_default();
        self.record(i, now, log, change, &overlay);
        err
    }

    fn record(
        &self,
        i: usize,
        now: Duration,
        log: &mut DecisionLog,
        change: String,
        overlay: &str,
    ) {
        let setup = &self.islands[i].0;
        log.record(net_decision(
            now,
            &setup.name,
            &setup.interface,
            change,
            Reason::Coordination {
                overlay: overlay.to_string(),
                detail: "network island coordination".to_string(),
            },
        ));
    }

    /// This epoch's backlog triggers: each managed interface's class
    /// backlogs (its leaves' figures) and each unit's socket backlog
    /// (`socket_backlog`, bytes its processes have not read; 0 when
    /// unknown), through each coordinator's thresholds and cooldown.
    /// Interfaces whose figures cannot be read are skipped.
    pub fn backlog_triggers(
        &mut self,
        now: Duration,
        mut socket_backlog: impl FnMut(&Name) -> Option<u64>,
    ) -> Vec<IslandTrigger> {
        let mut out = Vec::new();
        for i in 0..self.islands.len() {
            let iface = self.islands[i].0.interface.clone();
            if self.ifs.snapshot(&iface).is_none() {
                continue;
            }
            let Ok(stats) = self.ifs.leaf_stats(&iface) else {
                continue;
            };
            self.stats.insert(iface.clone(), stats.clone());
            let coord = &mut self.islands[i].1;
            let samples: Vec<NetSample> = coord
                .rates()
                .iter()
                .filter_map(|r| {
                    let unit = r.unit.clone()?;
                    let class = stats
                        .iter()
                        .find(|s| s.minor == r.minor)
                        .map_or(0, |s| s.backlog_bytes);
                    let socket = socket_backlog(&unit).unwrap_or(0);
                    Some(NetSample {
                        unit,
                        socket_backlog_bytes: socket,
                        class_backlog_bytes: class,
                    })
                })
                .collect();
            let island = coord.name().clone();
            out.extend(
                coord
                    .backlog_triggers(now, &samples)
                    .into_iter()
                    .map(|trigger| IslandTrigger {
                        island: island.clone(),
                        trigger,
                    }),
            );
        }
        out
    }
}

fn overlay_of(c: &NetChange) -> Option<String> {
    match &c.why {
        atoll_core::coord::Why::Tune { overlay, .. }
        | atoll_core::coord::Why::Deregistered { overlay } => Some(overlay.to_string()),
        _ => None,
    }
}
