//! [`NetCoordinator`]: a network island's coordinator.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::rates::{class_rates, ClassInput, ClassRate, DEFAULT_MINOR, FIRST_UNIT_MINOR};
use super::{NetIslandError, NetIslandSetup, NetUnitSetup, TriggerConfig};
use crate::coord::{
    Direction, Limit, Message, NackReason, Op, Resource, Why, MAX_WEIGHT, MIN_WEIGHT,
};
use crate::Name;

/// A unit's class and its share now.
#[derive(Clone, Debug)]
struct NetUnit {
    setup: NetUnitSetup,
    minor: u16,
    share: u32,
    overlay: Option<Name>,
    last_trigger: Option<Duration>,
}

/// A change a network island's coordinator decided.
#[derive(Clone, Debug, PartialEq)]
pub struct NetChange {
    /// The network island.
    pub island: Name,
    /// The unit.
    pub unit: Name,
    /// Its new share: every class's rate is computed again from it.
    pub share: u32,
    /// Why.
    pub why: Why,
}

impl fmt::Display for NetChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "set the bandwidth share of unit {} on network island {} to {}, because {}",
            self.unit, self.island, self.share, self.why
        )
    }
}

/// A network island's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum NetReply {
    /// Done; these shares change (possibly none).
    Ack {
        /// The changes.
        changes: Vec<NetChange>,
    },
    /// Refused.
    Nack {
        /// Why.
        reason: NackReason,
    },
}

impl NetReply {
    /// Whether the message was acknowledged.
    pub fn is_ack(&self) -> bool {
        matches!(self, Self::Ack { .. })
    }

    /// The changes of an ack (none for a nack).
    pub fn changes(&self) -> &[NetChange] {
        match self {
            Self::Ack { changes } => changes,
            Self::Nack { .. } => &[],
        }
    }
}

/// One unit's figures in an epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetSample {
    /// The unit.
    pub unit: Name,
    /// Bytes waiting in its sockets' receive queues.
    pub socket_backlog_bytes: u64,
    /// Bytes waiting in its class's queue.
    pub class_backlog_bytes: u64,
}

/// Which backlog crossed its threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerCause {
    /// The unit's sockets hold data its CPU has not read.
    SocketBacklog {
        /// Bytes waiting.
        bytes: u64,
        /// The threshold.
        threshold: u64,
    },
    /// The unit's class queue holds data.
    ClassBacklog {
        /// Bytes waiting.
        bytes: u64,
        /// The threshold.
        threshold: u64,
    },
}

impl fmt::Display for TriggerCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SocketBacklog { bytes, threshold } => write!(
                f,
                "{bytes} bytes wait in its sockets (threshold {threshold})"
            ),
            Self::ClassBacklog { bytes, threshold } => write!(
                f,
                "{bytes} bytes wait in its traffic class (threshold {threshold})"
            ),
        }
    }
}

/// A trigger to send to the unit's CPU island.
#[derive(Clone, Debug, PartialEq)]
pub struct NetTrigger {
    /// The message: `trigger(cpu time, overlay, unit)`.
    pub message: Message,
    /// Why it is sent.
    pub cause: TriggerCause,
}

/// A network island's coordinator (see the [module docs](super)).
#[derive(Clone, Debug)]
pub struct NetCoordinator {
    name: Name,
    interface: String,
    rate_bps: u64,
    default_share: u32,
    units: Vec<NetUnit>,
    /// Overlays with a unit here, and their priority.
    overlays: BTreeMap<Name, u8>,
    triggers: TriggerConfig,
    step: f64,
}

impl NetCoordinator {
    /// A coordinator for `setup`; tunes multiply or divide shares by `step`
    /// (the coordination's `weight_step`).
    pub fn new(setup: NetIslandSetup, step: f64) -> Result<Self, NetIslandError> {
        setup.validate()?;
        let mut c = Self {
            name: setup.name,
            interface: setup.interface,
            rate_bps: setup.rate_bps,
            default_share: setup.default_share,
            units: Vec::new(),
            overlays: BTreeMap::new(),
            triggers: setup.triggers,
            step,
        };
        for u in setup.units {
            c.add_unit(u)?;
        }
        Ok(c)
    }

    /// The island.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// Its interface.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The link rate, bits per second.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Whether `unit` has a class here.
    pub fn has_unit(&self, unit: &Name) -> bool {
        self.units.iter().any(|u| &u.setup.name == unit)
    }

    /// A unit's share now.
    pub fn share(&self, unit: &Name) -> Option<u32> {
        self.unit(unit).map(|u| u.share)
    }

    /// The overlays registered here, with their priority.
    pub fn overlays(&self) -> impl Iterator<Item = (&Name, u8)> {
        self.overlays.iter().map(|(n, p)| (n, *p))
    }

    /// Adds a unit's class (a runtime unit), with the lowest free minor.
    pub fn add_unit(&mut self, setup: NetUnitSetup) -> Result<(), NetIslandError> {
        if self.has_unit(&setup.name) {
            return Err(NetIslandError::DuplicateUnit {
                island: self.name.clone(),
                unit: setup.name,
            });
        }
        setup.validate(&self.name, self.rate_bps)?;
        let minor = (FIRST_UNIT_MINOR..=u16::MAX)
            .find(|m| self.units.iter().all(|u| u.minor != *m))
            .ok_or_else(|| NetIslandError::NoClassLeft {
                island: self.name.clone(),
                unit: setup.name.clone(),
            })?;
        self.units.push(NetUnit {
            share: setup.share,
            setup,
            minor,
            overlay: None,
            last_trigger: None,
        });
        Ok(())
    }

    /// Removes a unit's class; whether it had one.
    pub fn remove_unit(&mut self, unit: &Name) -> bool {
        let before = self.units.len();
        self.units.retain(|u| &u.setup.name != unit);
        before != self.units.len()
    }

    /// Every class's rates now: the default class first, then the units in
    /// the order they were added.
    pub fn rates(&self) -> Vec<ClassRate> {
        let mut inputs = vec![ClassInput {
            unit: None,
            minor: DEFAULT_MINOR,
            share: self.default_share,
            ceil_bps: None,
            prio: 7,
        }];
        inputs.extend(self.units.iter().map(|u| ClassInput {
            unit: Some(&u.setup.name),
            minor: u.minor,
            share: u.share,
            ceil_bps: u.setup.ceil_bps,
            prio: u.setup.prio,
        }));
        class_rates(self.rate_bps, &inputs)
    }

    /// A unit's class id as `skb->priority` and `net_prio` carry it
    /// (`0x0001_<minor>`).
    pub fn classid(&self, unit: &Name) -> Option<u32> {
        self.unit(unit).map(|u| 0x0001_0000 | u32::from(u.minor))
    }

    fn unit(&self, unit: &Name) -> Option<&NetUnit> {
        self.units.iter().find(|u| &u.setup.name == unit)
    }

    /// Serves a message (see the [module docs](super)).
    pub fn handle(&mut self, msg: &Message) -> NetReply {
        let out = match msg {
            Message::Null => Ok(Vec::new()),
            Message::Tune {
                resource: Resource::Bandwidth,
                dir,
                overlay,
                unit,
            } => self.tune(overlay, unit, *dir).map(|c| vec![c]),
            Message::Tune { resource, .. } => Err(NackReason::Unsupported {
                resource: *resource,
                op: Op::Tune,
            }),
            Message::Trigger { resource, .. } | Message::TriggerOverlay { resource, .. } => {
                Err(NackReason::Unsupported {
                    resource: *resource,
                    op: Op::Trigger,
                })
            }
            Message::BorrowPreferred { resource, .. }
            | Message::BorrowAny { resource, .. }
            | Message::Release { resource, .. }
            | Message::Revoke { resource, .. } => Err(NackReason::Unsupported {
                resource: *resource,
                op: Op::Borrow,
            }),
            Message::Register { overlay } => self
                .register(&overlay.name, overlay.priority, &overlay.units)
                .map(|()| Vec::new()),
            Message::Deregister { overlay } => Ok(self.deregister(overlay)),
        };
        match out {
            Ok(changes) => NetReply::Ack { changes },
            Err(reason) => NetReply::Nack { reason },
        }
    }

    fn tune(
        &mut self,
        overlay: &Name,
        unit: &Name,
        dir: Direction,
    ) -> Result<NetChange, NackReason> {
        if !self.overlays.contains_key(overlay) {
            return Err(NackReason::NotRegistered {
                overlay: overlay.clone(),
            });
        }
        let island = self.name.clone();
        let step = self.step;
        let u = self
            .units
            .iter_mut()
            .find(|u| &u.setup.name == unit && u.overlay.as_ref() == Some(overlay))
            .ok_or_else(|| NackReason::UnknownUnit {
                overlay: overlay.clone(),
                unit: unit.clone(),
            })?;
        let share = u.share;
        let next = match dir {
            Direction::Up => {
                if share >= MAX_WEIGHT {
                    return Err(NackReason::AtCapacity {
                        island,
                        unit: unit.clone(),
                        resource: Resource::Bandwidth,
                        limit: Limit::MaxWeight { weight: MAX_WEIGHT },
                    });
                }
                scaled(share, step).max(share + 1).min(MAX_WEIGHT)
            }
            Direction::Down => {
                if share <= MIN_WEIGHT {
                    return Err(NackReason::AtMinimum {
                        unit: unit.clone(),
                        resource: Resource::Bandwidth,
                    });
                }
                scaled(share, 1.0 / step).min(share - 1).max(MIN_WEIGHT)
            }
        };
        u.share = next;
        Ok(NetChange {
            island,
            unit: unit.clone(),
            share: next,
            why: Why::Tune {
                overlay: overlay.clone(),
                resource: Resource::Bandwidth,
                dir,
            },
        })
    }

    /// Records the overlay's units that have a class here. Checks them all
    /// before it changes anything; an overlay with none here is
    /// acknowledged and not recorded.
    fn register(
        &mut self,
        overlay: &Name,
        priority: u8,
        units: &[(Name, Name)],
    ) -> Result<(), NackReason> {
        if self.overlays.contains_key(overlay) {
            return Err(NackReason::AlreadyRegistered {
                overlay: overlay.clone(),
            });
        }
        let here: Vec<&Name> = units
            .iter()
            .map(|(_, u)| u)
            .filter(|u| self.has_unit(u))
            .collect();
        for name in &here {
            if let Some(other) = self.unit(name).and_then(|u| u.overlay.as_ref()) {
                return Err(NackReason::UnitTaken {
                    unit: (*name).clone(),
                    overlay: other.clone(),
                });
            }
        }
        if here.is_empty() {
            return Ok(());
        }
        for u in &mut self.units {
            if here.contains(&&u.setup.name) {
                u.overlay = Some(overlay.clone());
            }
        }
        self.overlays.insert(overlay.clone(), priority);
        Ok(())
    }

    /// Takes the overlay out; its units' shares go back to their
    /// configured values.
    fn deregister(&mut self, overlay: &Name) -> Vec<NetChange> {
        self.overlays.remove(overlay);
        let mut out = Vec::new();
        for u in &mut self.units {
            if u.overlay.as_ref() != Some(overlay) {
                continue;
            }
            u.overlay = None;
            u.last_trigger = None;
            if u.share != u.setup.share {
                u.share = u.setup.share;
                out.push(NetChange {
                    island: self.name.clone(),
                    unit: u.setup.name.clone(),
                    share: u.share,
                    why: Why::Deregistered {
                        overlay: overlay.clone(),
                    },
                });
            }
        }
        out
    }

    /// The triggers to send for this epoch's samples: a unit of a
    /// registered overlay whose socket backlog (checked first) or class
    /// backlog reached its threshold, and that was not triggered within
    /// the cooldown. Samples of units without a class here are ignored.
    pub fn backlog_triggers(&mut self, now: Duration, samples: &[NetSample]) -> Vec<NetTrigger> {
        let cfg = self.triggers;
        let mut out = Vec::new();
        for s in samples {
            let Some(u) = self.units.iter_mut().find(|u| u.setup.name == s.unit) else {
                continue;
            };
            let Some(overlay) = u.overlay.clone() else {
                continue;
            };
            if u.last_trigger
                .is_some_and(|t| now < t.saturating_add(cfg.cooldown))
            {
                continue;
            }
            let socket = cfg
                .socket_backlog_bytes
                .filter(|t| s.socket_backlog_bytes >= *t)
                .map(|threshold| TriggerCause::SocketBacklog {
                    bytes: s.socket_backlog_bytes,
                    threshold,
                });
            let class = cfg
                .class_backlog_bytes
                .filter(|t| s.class_backlog_bytes >= *t)
                .map(|threshold| TriggerCause::ClassBacklog {
                    bytes: s.class_backlog_bytes,
                    threshold,
                });
            if let Some(cause) = socket.or(class) {
                u.last_trigger = Some(now);
                out.push(NetTrigger {
                    message: Message::Trigger {
                        resource: Resource::CpuTime,
                        overlay,
                        unit: s.unit.clone(),
                    },
                    cause,
                });
            }
        }
        out
    }
}

/// `share × factor`, rounded to the nearest, saturating.
fn scaled(share: u32, factor: f64) -> u32 {
    crate::num::saturating_u32((f64::from(share) * factor).round())
}
