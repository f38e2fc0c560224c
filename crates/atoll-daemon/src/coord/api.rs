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

use atoll_core::coord::{Direction, Message, OverlaySpec, Reply as CoordReply, Resource};
use atoll_core::plan::GroupPath;
use atoll_core::Name;
use atoll_proto::coord::{LoanStatus, OverlayOrigin, OverlayStatus};
use atoll_proto::{ErrorCode, Reply};

use super::policy::{self, ReportWant};
use super::{OverlayState, ReactPolicy};
use crate::adopt::ApiFailure;
use crate::command::Caller;
use crate::controller::Controller;

fn bad(m: String) -> ApiFailure {
    (ErrorCode::BadRequest, m)
}

impl Controller {
    fn coord_off(&self) -> Option<ApiFailure> {
        self.coord
            .manager
            .as_ref()
            .err()
            .map(|e| bad(format!("coordination is off: {e}")))
    }

    /// `overlays`: every overlay in name order.
    pub(crate) fn api_overlays(&self) -> Result<Reply, ApiFailure> {
        let Some(m) = self.coord.manager() else {
            return Err(self.coord_off().unwrap_or_else(|| bad(String::new())));
        };
        let loans = m.loans();
        let overlays = self
            .coord
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
        Ok(Reply::Overlays { overlays })
    }

    /// The island a message comes from when the caller names none: the
    /// island of the message's unit for `tune` and `trigger`, else the
    /// island of the overlay's first unit, else the first island.
    pub(crate) fn default_sender(&self, msg: &Message) -> Name {
        let first = || {
            self.reg
                .spec()
                .islands
                .first()
                .map(|i| i.name.clone())
                .unwrap_or_else(|| Name::new("main").expect("a valid name"))
        };
        let units_of = |o: &Name| -> Option<Vec<(Name, Name)>> {
            Some(self.coord.manager()?.overlay(o)?.units.clone())
        };
        match msg {
            Message::Tune { overlay, unit, .. } | Message::Trigger { overlay, unit, .. } => {
                units_of(overlay)
                    .and_then(|us| us.into_iter().find(|(_, u)| u == unit).map(|(i, _)| i))
                    .or_else(|| self.coord.island_of(unit).cloned())
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
    fn owns(&self, caller: Caller, overlay: &Name) -> Result<(), ApiFailure> {
        let denied = |why: String| {
            Err((
                ErrorCode::PermissionDenied,
                format!(
                    "uid {} may not coordinate overlay {overlay}: {why}",
                    caller.uid
                ),
            ))
        };
        let Some(spec) = self.coord.manager().and_then(|m| m.overlay(overlay)) else {
            return Ok(());
        };
        let mut seen = 0;
        for (island, unit) in &spec.units {
            let group = GroupPath::unit(island, unit);
            for pid in self.env.backend.processes(&group).unwrap_or_default() {
                if let Ok(info) = self.env.procs.info(pid) {
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

    /// `coordinate`: one message, served at once.
    pub(crate) fn api_coordinate(
        &mut self,
        caller: Caller,
        from: Option<&str>,
        msg: Message,
    ) -> Result<Reply, ApiFailure> {
        if let Some(e) = self.coord_off() {
            return Err(e);
        }
        if !caller.is_root() {
            match &msg {
                Message::Null => {}
                Message::Tune { overlay, .. } | Message::Trigger { overlay, .. } => {
                    self.owns(caller, overlay)?;
                }
                other => {
                    return Err((
                        ErrorCode::PermissionDenied,
                        format!(
                            "only root may {} (caller uid {}): it moves CPUs between islands or changes the overlays",
                            other, caller.uid
                        ),
                    ))
                }
            }
        }
        let from = match from {
            Some(f) => Name::new(f).map_err(|e| bad(format!("from: {e}")))?,
            None => self.default_sender(&msg),
        };
        let context = format!(" (asked by uid {})", caller.uid);
        let Some((reply, refused)) = self.send(&from, &msg, &context) else {
            return Err(self.coord_off().unwrap_or_else(|| bad(String::new())));
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
                    self.coord.overlays.insert(
                        overlay.name.clone(),
                        OverlayState::new(OverlayOrigin::Api, ReactPolicy::default()),
                    );
                    self.coord.count(Some(&overlay.name), true);
                }
                Message::Deregister { overlay } => {
                    tracing::info!("overlay {overlay} deregistered by uid {}", caller.uid);
                    self.coord.overlays.remove(overlay);
                    self.coord.next.retain(|(o, _), _| o != overlay);
                }
                _ => {}
            }
        }
        let text = if refused.is_empty() {
            reply.to_string()
        } else {
            format!("{reply}; the kernel refused: {}", refused.join("; "))
        };
        Ok(Reply::Coordinated { reply, text })
    }

    /// Sends one message at once, counts its reply and applies its effects;
    /// returns the reply and what the kernel refused (`None`: coordination
    /// is off).
    fn send(
        &mut self,
        from: &Name,
        msg: &Message,
        context: &str,
    ) -> Option<(CoordReply, Vec<String>)> {
        let now = self.now();
        let reply = self.coord.manager.as_mut().ok()?.handle(now, from, msg);
        self.coord.count(msg.overlay(), reply.is_ack());
        let effects = reply.effects().to_vec();
        let refused = self.apply_coord(&effects, context);
        Some((reply, refused))
    }

    /// `report`: records the value and runs the overlay's proactive policy.
    pub(crate) fn api_report(
        &mut self,
        caller: Caller,
        overlay: &str,
        value: f64,
    ) -> Result<Reply, ApiFailure> {
        if let Some(e) = self.coord_off() {
            return Err(e);
        }
        let name = Name::new(overlay).map_err(|e| bad(e.to_string()))?;
        if !value.is_finite() || value < 0.0 {
            return Err(bad(format!("value {value} is not a finite number >= 0")));
        }
        let Some(spec) = self.coord.manager().and_then(|m| m.overlay(&name)).cloned() else {
            return Err((ErrorCode::NotFound, format!("no overlay {overlay}")));
        };
        if !caller.is_root() {
            self.owns(caller, &name)?;
        }
        let (holds, want) = policy::report_step(&spec.property, value);
        if let Some(st) = self.coord.overlays.get_mut(&name) {
            st.value = Some(value);
            st.holds = Some(holds);
        }
        let context = format!(" ({})", policy::describe_value(&spec.property, value));
        let action = match want {
            None => None,
            Some(w) => self.report_action(&spec, w, &context),
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
        spec: &OverlaySpec,
        want: ReportWant,
        context: &str,
    ) -> Option<String> {
        let (overlay, units) = (&spec.name, &spec.units);
        let pressure = |c: &Self, island: &Name, unit: &Name| {
            let load = c.coord.loads.get(island);
            (
                c.coord
                    .unit_pressure
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
                let turn = self.coord.overlays.get_mut(overlay).map_or(0, |s| {
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
                    let (reply, _) = self.send(&island, &msg, context)?;
                    said.push(format!("{msg}: {reply}"));
                }
                // The first unit whose coordinator can still give it more:
                // one at its island's capacity refuses, the next is asked.
                for (_, _, island, unit) in &ranked {
                    let msg = tune(Direction::Up, unit);
                    let (reply, _) = self.send(island, &msg, context)?;
                    said.push(format!("{msg}: {reply}"));
                    if reply.is_ack() {
                        break;
                    }
                }
            }
            ReportWant::Less => {
                let (_, _, island, unit) = ranked
                    .iter()
                    .rev()
                    .find(|(_, _, _, u)| self.coord.cpu_above_base(u))?
                    .clone();
                let msg = tune(Direction::Down, &unit);
                let (reply, _) = self.send(&island, &msg, context)?;
                said.push(format!("{msg}: {reply}"));
            }
        }
        Some(said.join("; then "))
    }
}
