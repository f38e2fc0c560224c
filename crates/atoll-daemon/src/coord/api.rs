//! The coordination API: `overlays`, `coordinate` and `report`.
//!
//! # Who may do what
//!
//! Anyone may list the overlays (as anyone may read the status). Root may
//! send any message. Another uid *owns* an overlay when the overlay's units
//! hold at least one process and every one of them is that uid's (the rule
//! `adopt` uses for units); the owner may send `null`, `tune` and `trigger`
//! messages about its overlay and `report` its property's value. Borrowing,
//! releasing, registering and deregistering move CPUs between islands or
//! change who arbitrates against whom: root only.
//!
//! A refused message is an answer (`Coordinated` with a nack), not an error.

use std::time::Duration;

use atoll_core::coord::{Direction, Message, OverlaySpec, Reply as CoordReply, Resource};
use atoll_core::name::NameError;
use atoll_core::plan::GroupPath;
use atoll_core::spec::PlatformSpec;
use atoll_core::Name;
use atoll_proto::coord::{LoanStatus, OverlayOrigin, OverlayStatus};
use atoll_proto::Reply;

use super::policy::{self, ReportWant};
use super::{Coordination, Inputs, OverlayState, ReactPolicy};
use crate::command::Caller;
use crate::compose::Composer;

/// Why a coordination request failed.
#[derive(Debug, thiserror::Error)]
pub enum CoordApiError {
    /// The platform manager could not be built from the platform.
    #[error("coordination is off: {0}")]
    Off(String),
    /// A name in the request is not a valid name.
    #[error("{what}: {source}")]
    BadName {
        /// Which field.
        what: &'static str,
        /// Why.
        #[source]
        source: NameError,
    },
    /// A reported value that is not a finite number >= 0.
    #[error("value {0} is not a finite number >= 0")]
    BadValue(f64),
    /// No such overlay.
    #[error("no overlay {0}")]
    NoOverlay(String),
    /// The caller does not own the overlay.
    #[error("uid {uid} may not coordinate overlay {overlay}: {why}")]
    NotOwner {
        /// The caller.
        uid: u32,
        /// The overlay.
        overlay: String,
        /// What makes it not the caller's.
        why: String,
    },
    /// A trigger would raise the RT priority of a realtime island's tasks.
    #[error("island {island} is realtime: a trigger raises its tasks' RT priority, which only root or its rt_users may do (uid {uid} is not one)")]
    Realtime {
        /// The island.
        island: String,
        /// The caller.
        uid: u32,
    },
    /// Only root may send this message.
    #[error("only root may {message} (caller uid {uid}): it moves CPUs between islands or changes the overlays")]
    RootOnly {
        /// The message, in words.
        message: String,
        /// The caller.
        uid: u32,
    },
}

impl Coordination {
    /// An error saying why coordination is off, if it is.
    pub(crate) fn off(&self) -> Result<(), CoordApiError> {
        match &self.manager {
            Ok(_) => Ok(()),
            Err(e) => Err(CoordApiError::Off(e.to_string())),
        }
    }

    /// `overlays`: every overlay in name order.
    pub fn overlay_list(&self) -> Result<Reply, CoordApiError> {
        Ok(Reply::Overlays {
            overlays: self.overlay_statuses()?,
        })
    }

    /// Every overlay in name order, with its loans and counts.
    pub fn overlay_statuses(&self) -> Result<Vec<OverlayStatus>, CoordApiError> {
        self.off()?;
        let Some(m) = self.manager() else {
            return Err(CoordApiError::Off(String::new()));
        };
        let loans = m.loans();
        let overlays = self
            .overlays
            .iter()
            .filter_map(|(name, st)| {
                let spec = m.overlay(name)?;
                Some(OverlayStatus {
                    name: name.to_string(),
                    priority: spec.priority,
                    units: spec.units.iter().map(|(i, u)| format!("{i}/{u}")).collect(),
                    property: spec.property,
                    origin: st.origin,
                    value: st.value,
                    holds: st.holds,
                    loans: loans
                        .iter()
                        .filter(|l| &l.overlay == name)
                        .map(|l| LoanStatus {
                            cpu: l.cpu,
                            owner: l.owner.to_string(),
                            lender: l.lender.to_string(),
                            borrower: l.borrower.to_string(),
                        })
                        .collect(),
                    nacks: Resource::ALL
                        .iter()
                        .map(|r| (*r, m.nack_count(name, *r)))
                        .collect(),
                    acked: st.acked,
                    nacked: st.nacked,
                })
            })
            .collect();
        Ok(overlays)
    }

    /// The island a message comes from when the caller names none: the
    /// island of the message's unit for `tune` and `trigger`, else the
    /// island of the overlay's first unit, else the first island.
    pub(crate) fn default_sender(&self, spec: &PlatformSpec, msg: &Message) -> Name {
        let first = || {
            spec.islands
                .first()
                .map(|i| i.name.clone())
                .unwrap_or_else(|| Name::new("main").expect("a valid name"))
        };
        let units_of = |o: &Name| -> Option<Vec<(Name, Name)>> {
            Some(self.manager()?.overlay(o)?.units.clone())
        };
        match msg {
            Message::Tune { overlay, unit, .. } | Message::Trigger { overlay, unit, .. } => {
                units_of(overlay)
                    .and_then(|us| us.into_iter().find(|(_, u)| u == unit).map(|(i, _)| i))
                    .or_else(|| self.island_of(unit).cloned())
                    .unwrap_or_else(first)
            }
            Message::Register { overlay } => overlay
                .units
                .first()
                .map(|(i, _)| i.clone())
                .unwrap_or_else(first),
            other => other
                .overlay()
                .and_then(units_of)
                .and_then(|us| us.first().map(|(i, _)| i.clone()))
                .unwrap_or_else(first),
        }
    }

    /// Whether `caller` owns `overlay` (see the module docs). An overlay
    /// that is not registered is left to the coordinator to refuse.
    fn owns(&self, inp: &Inputs<'_>, caller: Caller, overlay: &Name) -> Result<(), CoordApiError> {
        let denied = |why: String| {
            Err(CoordApiError::NotOwner {
                uid: caller.uid,
                overlay: overlay.to_string(),
                why,
            })
        };
        let Some(spec) = self.manager().and_then(|m| m.overlay(overlay)) else {
            return Ok(());
        };
        let mut seen = 0;
        for (island, unit) in &spec.units {
            let group = GroupPath::unit(island, unit);
            for pid in inp.mon.processes(&group).unwrap_or_default() {
                if let Ok(info) = inp.procs.info(pid) {
                    if info.uid != caller.uid {
                        return denied(format!(
                            "unit {unit} holds pid {pid} ({}) of uid {}",
                            info.comm, info.uid
                        ));
                    }
                    seen += 1;
                }
            }
        }
        if seen == 0 {
            return denied("its units hold no process of the caller".into());
        }
        Ok(())
    }

    /// Whether `caller` may boost `unit`: on a realtime island a boost
    /// raises its tasks' RT priority, which only root or the island's
    /// `rt_users` may do.
    fn may_boost(
        &self,
        inp: &Inputs<'_>,
        caller: Caller,
        unit: &Name,
    ) -> Result<(), CoordApiError> {
        let island = self.island_of(unit).and_then(|i| inp.reg.island(i));
        match island.filter(|i| {
            matches!(i.policy, atoll_core::spec::SchedPolicy::Realtime(_))
                && !i.access.rt_users.contains(&caller.uid)
        }) {
            Some(i) => Err(CoordApiError::Realtime {
                island: i.name.to_string(),
                uid: caller.uid,
            }),
            None => Ok(()),
        }
    }

    /// Whether `caller` may send `msg`: root may send anything; others may
    /// tune and trigger the overlays whose units hold only their
    /// processes, and send `null`.
    pub fn authorize(
        &self,
        inp: &Inputs<'_>,
        caller: Caller,
        msg: &Message,
    ) -> Result<(), CoordApiError> {
        if !caller.is_root() {
            match msg {
                Message::Null => {}
                Message::Tune { overlay, .. } => self.owns(inp, caller, overlay)?,
                Message::Trigger { overlay, unit, .. } => {
                    self.owns(inp, caller, overlay)?;
                    self.may_boost(inp, caller, unit)?;
                }
                Message::TriggerOverlay { overlay, .. } => {
                    self.owns(inp, caller, overlay)?;
                    let units = self
                        .manager()
                        .and_then(|m| m.overlay(overlay))
                        .map(|s| s.units.clone())
                        .unwrap_or_default();
                    for (_, unit) in &units {
                        self.may_boost(inp, caller, unit)?;
                    }
                }
                other => {
                    return Err(CoordApiError::RootOnly {
                        message: other.to_string(),
                        uid: caller.uid,
                    })
                }
            }
        }
        Ok(())
    }

    /// `coordinate`: one message, served at once. Returns the coordinator's
    /// reply; the groups it changed are touched in `compose`.
    pub fn coordinate(
        &mut self,
        inp: &Inputs<'_>,
        caller: Caller,
        from: Option<&str>,
        msg: Message,
        compose: &mut Composer,
    ) -> Result<CoordReply, CoordApiError> {
        self.off()?;
        self.sync_units(inp.reg);
        self.authorize(inp, caller, &msg)?;
        let from = match from {
            Some(f) => Name::new(f).map_err(|source| CoordApiError::BadName {
                what: "from",
                source,
            })?,
            None => self.default_sender(inp.reg.spec(), &msg),
        };
        let context = format!(" (asked by uid {})", caller.uid);
        let Some(reply) = self.send(inp.now, &from, &msg, &context, compose) else {
            return Err(CoordApiError::Off(String::new()));
        };
        if reply.is_ack() {
            match &msg {
                Message::Register { overlay } => {
                    tracing::info!(
                        "overlay {} registered by uid {}: {}",
                        overlay.name,
                        caller.uid,
                        overlay.property
                    );
                    self.overlays.insert(
                        overlay.name.clone(),
                        OverlayState::new(OverlayOrigin::Api, ReactPolicy::default()),
                    );
                    self.count(Some(&overlay.name), true);
                }
                Message::Deregister { overlay } => {
                    tracing::info!("overlay {overlay} deregistered by uid {}", caller.uid);
                    self.overlays.remove(overlay);
                    self.next.retain(|(o, _), _| o != overlay);
                }
                _ => {}
            }
        }
        Ok(reply)
    }

    /// Sends one message at once, counts its reply and applies its effects;
    /// `None`: coordination is off.
    pub(crate) fn send(
        &mut self,
        now: Duration,
        from: &Name,
        msg: &Message,
        context: &str,
        compose: &mut Composer,
    ) -> Option<CoordReply> {
        let reply = self.manager.as_mut().ok()?.handle(now, from, msg);
        self.count(msg.overlay(), reply.is_ack());
        let effects = reply.effects().to_vec();
        self.apply_coord(&effects, context, compose);
        Some(reply)
    }

    /// `report`: records the value and runs the overlay's proactive policy.
    pub fn report(
        &mut self,
        inp: &Inputs<'_>,
        caller: Caller,
        overlay: &str,
        value: f64,
        compose: &mut Composer,
    ) -> Result<Reply, CoordApiError> {
        self.off()?;
        let name = Name::new(overlay).map_err(|source| CoordApiError::BadName {
            what: "overlay",
            source,
        })?;
        if !value.is_finite() || value < 0.0 {
            return Err(CoordApiError::BadValue(value));
        }
        let Some(spec) = self.manager().and_then(|m| m.overlay(&name)).cloned() else {
            return Err(CoordApiError::NoOverlay(overlay.to_string()));
        };
        if !caller.is_root() {
            self.owns(inp, caller, &name)?;
        }
        let (holds, want) = policy::report_step(&spec.property, value);
        if let Some(st) = self.overlays.get_mut(&name) {
            st.value = Some(value);
            st.holds = Some(holds);
        }
        let context = format!(" ({})", policy::describe_value(&spec.property, value));
        let action = match want {
            None => None,
            Some(w) => self.report_action(inp.now, &spec, w, &context, compose),
        };
        Ok(Reply::Reported {
            overlay: overlay.to_string(),
            holds,
            action,
        })
    }

    /// Sends what a report asks for; returns it and its answer in words.
    fn report_action(
        &mut self,
        now: Duration,
        spec: &OverlaySpec,
        want: ReportWant,
        context: &str,
        compose: &mut Composer,
    ) -> Option<String> {
        let (overlay, units) = (&spec.name, &spec.units);
        let pressure = |c: &Self, island: &Name, unit: &Name| {
            let load = c.loads.get(island);
            (
                c.unit_pressure
                    .get(unit)
                    .copied()
                    .or(load.and_then(|l| l.pressure))
                    .unwrap_or(0.0),
                load.map_or(0.0, |l| l.utilization()),
            )
        };
        let mut ranked: Vec<(f64, f64, Name, Name)> = units
            .iter()
            .map(|(i, u)| {
                let (p, util) = pressure(self, i, u);
                (p, util, i.clone(), u.clone())
            })
            .collect();
        // Most pressured first (then the busiest island, then config order).
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)));
        let tune = |dir, unit: &Name| Message::Tune {
            resource: Resource::CpuTime,
            dir,
            overlay: overlay.clone(),
            unit: unit.clone(),
        };
        let mut said = Vec::new();
        match want {
            ReportWant::More { urgent } => {
                // Units tied for the most pressure (their island's, when
                // their own is not measured) take turns.
                let top = ranked.first()?;
                let tied = ranked
                    .iter()
                    .take_while(|r| r.0 == top.0 && r.1 == top.1)
                    .count();
                let turn = self.overlays.get_mut(overlay).map_or(0, |s| {
                    s.report_turn += 1;
                    s.report_turn - 1
                });
                ranked[..tied].rotate_left(turn % tied);
                if urgent {
                    // Far off: an immediate, bounded boost, and a lasting
                    // step below.
                    let (_, _, island, unit) = ranked[0].clone();
                    let msg = Message::Trigger {
                        resource: Resource::CpuTime,
                        overlay: overlay.clone(),
                        unit,
                    };
                    let reply = self.send(now, &island, &msg, context, compose)?;
                    said.push(format!("{msg}: {reply}"));
                }
                // The first unit whose coordinator can still give it more:
                // one at its island's capacity refuses, the next is asked.
                // Once every unit is at capacity, the overlay borrows
                // CPUs instead (see `stages`).
                let stage = self
                    .overlays
                    .get(overlay)
                    .map_or_else(Default::default, |s| s.stage);
                let mut at_capacity = stage != policy::Stage::Tune;
                if !at_capacity {
                    let mut refusals = 0;
                    for (_, _, island, unit) in &ranked {
                        let msg = tune(Direction::Up, unit);
                        let reply = self.send(now, island, &msg, context, compose)?;
                        said.push(format!("{msg}: {reply}"));
                        match reply.reason() {
                            None => break,
                            Some(r) if policy::tune_at_capacity(r) => refusals += 1,
                            Some(_) => {}
                        }
                    }
                    at_capacity = refusals == ranked.len();
                }
                if at_capacity {
                    let (_, _, island, _) = ranked[0].clone();
                    self.borrow_stage(now, spec, &island, context, compose, &mut said)?;
                }
            }
            ReportWant::Less => {
                // Borrowed CPUs go back before any knob is tuned down.
                if let Some(text) = self.relax_stage(now, overlay, context, compose) {
                    said.push(text);
                    return Some(said.join("; then "));
                }
                let (_, _, island, unit) = ranked
                    .iter()
                    .rev()
                    .find(|(_, _, _, u)| self.cpu_above_base(u))?
                    .clone();
                let msg = tune(Direction::Down, &unit);
                let reply = self.send(now, &island, &msg, context, compose)?;
                said.push(format!("{msg}: {reply}"));
            }
        }
        Some(said.join("; then "))
    }
}
