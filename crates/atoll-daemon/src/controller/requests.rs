//! API requests: each is handed to the component it is about, the groups
//! it touched are written, and its error becomes an error code here, in one
//! place ([`RequestError::code`]).

use atoll_core::decision::{Action, Reason};
use atoll_core::plan::GroupPath;
use atoll_core::Name;
use atoll_proto::runtime::NetClassSettings;
use atoll_proto::{ErrorCode, Reply, Request, ResponseEnvelope};

use super::{monitor, placement, Controller, Flow};
use crate::adopt::{process_of, AdoptError};
use crate::apps::{AppsError, Kit};
use crate::command::Caller;
use crate::coord::CoordApiError;
use crate::netisland::RuntimeClass;

/// Most units created at run time that users other than root may add up
/// to (root may add more).
pub const MAX_RUNTIME_UNITS: usize = 256;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// `adopt`.
    #[error(transparent)]
    Adopt(#[from] AdoptError),
    /// `coordinate`, `report`, `overlays`.
    #[error(transparent)]
    Coord(#[from] CoordApiError),
    /// `app_*`, `apps`.
    #[error(transparent)]
    Apps(#[from] AppsError),
    /// `stop` from another uid than root.
    #[error("only root may stop atoll (caller uid {0})")]
    StopDenied(u32),
    /// `reload` from another uid than root.
    #[error("only root may reload atoll's configuration (caller uid {0})")]
    ReloadDenied(u32),
    /// `reload`.
    #[error(transparent)]
    Reload(#[from] super::ReloadError),
    /// `unit_*`, `overlay_*`, `config_dump`.
    #[error(transparent)]
    Runtime(#[from] super::runtime::RuntimeError),
    /// `overlay_show`.
    #[error(transparent)]
    Slo(#[from] crate::slo::SloError),
}

impl RequestError {
    /// The protocol's error code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Adopt(e) | Self::Apps(AppsError::Process(e)) => match e {
                AdoptError::NoProcess { .. } | AdoptError::NoIsland(_) => ErrorCode::NotFound,
                AdoptError::KernelThread { .. }
                | AdoptError::BadName { .. }
                | AdoptError::Reserved(_)
                | AdoptError::OtherIsland { .. }
                | AdoptError::NetClass(_)
                | AdoptError::OtherNetClass { .. }
                | AdoptError::SystemdPlaced { .. } => ErrorCode::BadRequest,
                AdoptError::NotOwner { .. }
                | AdoptError::UnitNotOwned { .. }
                | AdoptError::ConfiguredUnit { .. }
                | AdoptError::NotYourUnit { .. }
                | AdoptError::NoUserUnits { .. }
                | AdoptError::TooManyUnits { .. }
                | AdoptError::Realtime { .. }
                | AdoptError::NetClassRootOnly(_)
                | AdoptError::PlacedByRoot { .. } => ErrorCode::PermissionDenied,
                AdoptError::TooManyRuntimeUnits { .. } => ErrorCode::Busy,
                AdoptError::CreateUnit { .. } => ErrorCode::Backend,
                AdoptError::Move { source, .. } if source.is_gone() => ErrorCode::NotFound,
                AdoptError::Move { .. } => ErrorCode::Backend,
            },
            Self::Coord(e) => match e {
                CoordApiError::Off(_)
                | CoordApiError::BadName { .. }
                | CoordApiError::BadValue(_) => ErrorCode::BadRequest,
                CoordApiError::NoOverlay(_) => ErrorCode::NotFound,
                CoordApiError::NotOwner { .. }
                | CoordApiError::RootOnly { .. }
                | CoordApiError::Realtime { .. } => ErrorCode::PermissionDenied,
            },
            Self::Apps(e) => match e {
                AppsError::NoPid
                | AppsError::SelfPid(_)
                | AppsError::AlreadyRegistered { .. }
                | AppsError::BadRecipe(_)
                | AppsError::BadGoal(_) => ErrorCode::BadRequest,
                AppsError::NoRecipe(_) | AppsError::NoApp(_) => ErrorCode::NotFound,
                AppsError::NotOwner { .. } => ErrorCode::PermissionDenied,
                AppsError::Process(_) => unreachable!("matched above"),
            },
            Self::StopDenied(_) | Self::ReloadDenied(_) => ErrorCode::PermissionDenied,
            Self::Slo(crate::slo::SloError::NoOverlay(_)) => ErrorCode::NotFound,
            Self::Slo(crate::slo::SloError::NotLatency(_)) => ErrorCode::BadRequest,
            Self::Reload(super::ReloadError::Refused { .. }) => ErrorCode::Backend,
            Self::Reload(_) => ErrorCode::BadRequest,
            Self::Runtime(e) => e.code(),
        }
    }
}

impl Controller {
    /// Answers one request; the groups it changed are written first.
    pub(super) fn request(
        &mut self,
        caller: Caller,
        id: u64,
        request: Request,
    ) -> (ResponseEnvelope, Flow) {
        let summary = request.summary();
        tracing::debug!(uid = caller.uid, pid = caller.pid, "api: {summary}");
        let mut flow = Flow::Continue;
        let result = match request {
            Request::Status {} => Ok(Reply::Status(Box::new(self.status()))),
            Request::Why { subject, limit } => Ok(Reply::Decisions {
                decisions: self.log.query(subject.as_deref(), limit.unwrap_or(50)),
            }),
            Request::Stop { .. } if !caller.is_root() => Err(RequestError::StopDenied(caller.uid)),
            Request::Stop { .. } => {
                flow = Flow::Stop;
                Ok(Reply::Stopping)
            }
            Request::Reload {} if !caller.is_root() => Err(RequestError::ReloadDenied(caller.uid)),
            Request::Reload {} => self
                .reload_from_source()
                .map(|changes| Reply::Reloaded { changes })
                .map_err(Into::into),
            Request::Adopt {
                unit,
                pid,
                island,
                network,
            } => self
                .adopt(
                    caller,
                    &summary,
                    &unit,
                    pid,
                    island.as_deref(),
                    network.as_ref(),
                )
                .map_err(Into::into),
            Request::Overlays {} => self.coord.overlay_list().map_err(Into::into),
            Request::Coordinate { from, message } => {
                self.coordinate_request(caller, from.as_deref(), message)
            }
            Request::Report { overlay, value } => self.report_request(caller, &overlay, value),
            request @ (Request::AppRegister { .. }
            | Request::AppPoll { .. }
            | Request::AppReport { .. }
            | Request::AppDone { .. }
            | Request::Apps {}) => self.apps_request(caller, &summary, request),
            Request::UnitAdd {
                unit,
                island,
                settings,
            } => self
                .unit_add(caller, &summary, &unit, island.as_deref(), &settings)
                .map_err(Into::into),
            Request::UnitSet { unit, settings } => self
                .unit_set(caller, &summary, &unit, &settings)
                .map_err(Into::into),
            Request::UnitRm { unit } => self.unit_rm(caller, &summary, &unit).map_err(Into::into),
            Request::OverlayAdd { overlay, settings } => self
                .overlay_add(caller, &summary, &overlay, &settings)
                .map_err(Into::into),
            Request::OverlaySet { overlay, settings } => self
                .overlay_set(caller, &summary, &overlay, &settings)
                .map_err(Into::into),
            Request::OverlayRm { overlay } => self
                .overlay_rm(caller, &summary, &overlay)
                .map_err(Into::into),
            Request::OverlayShow { overlay } => self.overlay_show(&overlay).map_err(Into::into),
            Request::ConfigDump {} => self.config_dump().map_err(Into::into),
        };
        self.settle();
        let resp = match result {
            Ok(reply) => ResponseEnvelope::ok(id, reply),
            Err(e) => ResponseEnvelope::err(id, e.code(), e.to_string()),
        };
        (resp, flow)
    }

    /// `adopt`: checks the caller may, creates the unit if needed (with
    /// the network class `network` asked for, as `unit_add` gives one),
    /// moves the process. On failure nothing is left changed.
    fn adopt(
        &mut self,
        caller: Caller,
        summary: &str,
        unit: &str,
        pid: u32,
        island: Option<&str>,
        network: Option<&NetClassSettings>,
    ) -> Result<Reply, AdoptError> {
        let bad_name = |name: &str, source| AdoptError::BadName {
            name: name.to_string(),
            source,
        };
        let unit_name = Name::new(unit).map_err(|e| bad_name(unit, e))?;
        if unit_name.is_reserved() {
            return Err(AdoptError::Reserved(unit.to_string()));
        }
        let info = process_of(&*self.env.procs, caller, pid)?;
        let (island_name, created) = match self.reg.unit(unit) {
            Some((u, _)) => {
                if let Some(i) = island.filter(|i| *i != u.island.as_str()) {
                    return Err(AdoptError::OtherIsland {
                        unit: unit.to_string(),
                        island: u.island.to_string(),
                        asked: i.to_string(),
                    });
                }
                if let Some(systemd_unit) = u.systemd_unit() {
                    return Err(AdoptError::SystemdPlaced {
                        unit: unit.to_string(),
                        systemd_unit: systemd_unit.to_string(),
                    });
                }
                (u.island.clone(), false)
            }
            None => {
                let found = match island {
                    Some(i) => {
                        let name = Name::new(i).map_err(|e| bad_name(i, e))?;
                        self.reg.island(&name)
                    }
                    None => self.reg.spec().default_island(),
                };
                let found = found.ok_or_else(|| {
                    AdoptError::NoIsland(island.unwrap_or("(default)").to_string())
                })?;
                (found.name.clone(), true)
            }
        };
        let group = GroupPath::unit(&island_name, &unit_name);
        if !caller.is_root() {
            self.authorize_adopt(caller, unit, &island_name, created, pid)?;
            if !created {
                self.check_unit_owner(caller, unit, &group)?;
            }
        }
        if created && self.reg.runtime_units().len() >= MAX_RUNTIME_UNITS && !caller.is_root() {
            return Err(AdoptError::TooManyRuntimeUnits {
                max: MAX_RUNTIME_UNITS,
            });
        }
        if network.is_some() && !caller.is_root() {
            return Err(AdoptError::NetClassRootOnly(caller.uid));
        }
        // The class is checked before anything changes; a unit that exists
        // keeps its own (`unit set` changes it), which must be the one asked.
        let class = self.runtime_class(&unit_name, network)?;
        if let (Some(asked), false) = (&class, created) {
            let has = self.runtime_class_of(&unit_name);
            if has != Some(asked) {
                return Err(AdoptError::OtherNetClass {
                    unit: unit.to_string(),
                    has: has.map_or("no network class".into(), RuntimeClass::describe),
                    asked: asked.describe(),
                });
            }
        }
        let why = Reason::Api {
            uid: caller.uid,
            request: summary.to_string(),
        };
        if created {
            self.reg
                .add_runtime_unit(unit_name.clone(), island_name.clone());
            if !caller.is_root() {
                self.reg.set_owner(unit, caller.uid);
            }
            self.log.record(atoll_core::decision::Decision {
                at: self.now(),
                action: Action::CreateUnit {
                    unit: unit.to_string(),
                    island: island_name.to_string(),
                },
                why: why.clone(),
            });
            self.compose.touch(group.clone(), why.clone());
            if let Some(source) = self.settle() {
                self.undo_unit(unit, &group, &why);
                return Err(AdoptError::CreateUnit {
                    unit: unit.to_string(),
                    source: Box::new(source),
                });
            }
        }
        let now = self.now();
        let mut p = placement(
            &mut self.env,
            &mut self.reg,
            &mut self.log,
            now,
            &self.opts.self_origin,
        );
        if let Err(source) = p.move_into(&info, &group, why.clone()) {
            if created {
                self.undo_unit(unit, &group, &why);
            }
            return Err(AdoptError::Move {
                pid,
                group,
                source: Box::new(source),
            });
        }
        self.adoption.settle(pid);
        if created && class.is_some() {
            self.give_runtime_class(&unit_name, class, &why);
        }
        Ok(Reply::Adopted {
            unit: unit.to_string(),
            island: island_name.to_string(),
            created,
        })
    }

    /// Removes a unit this request created, when the request fails.
    pub(super) fn undo_unit(&mut self, unit: &str, group: &GroupPath, why: &Reason) {
        self.reg.remove_runtime_unit(unit);
        let now = self.now();
        if let Err(e) = self.compose.remove(
            group,
            &mut *self.env.backend,
            &mut self.log,
            now,
            why.clone(),
        ) {
            tracing::debug!("removing {group} after a failed request: {e}");
            self.compose.forget(group);
        }
        self.log.record(atoll_core::decision::Decision {
            at: now,
            action: Action::RemoveUnit {
                unit: unit.to_string(),
            },
            why: why.clone(),
        });
        if let Some(e) = self.settle() {
            tracing::warn!("re-applying after a failed request: {e}");
        }
    }

    /// What a user other than root may place where (see
    /// `docs/security.md`): only into units it created, in islands that
    /// take users' units (at most `user_units_max` each), realtime islands
    /// only for their `rt_users`, and never a process root placed.
    fn authorize_adopt(
        &self,
        caller: Caller,
        unit: &str,
        island: &Name,
        created: bool,
        pid: u32,
    ) -> Result<(), AdoptError> {
        let Some(spec) = self.reg.island(island) else {
            return Err(AdoptError::NoIsland(island.to_string()));
        };
        if matches!(spec.policy, atoll_core::spec::SchedPolicy::Realtime(_))
            && !spec.access.rt_users.contains(&caller.uid)
        {
            return Err(AdoptError::Realtime {
                island: island.to_string(),
                uid: caller.uid,
            });
        }
        if let Some(m) = self.reg.managed(pid) {
            if m.placed_by != Some(caller.uid) {
                return Err(AdoptError::PlacedByRoot {
                    pid,
                    group: m.group.clone(),
                });
            }
        }
        if created {
            if !spec.access.user_units {
                return Err(AdoptError::NoUserUnits {
                    island: island.to_string(),
                });
            }
            let max = spec.access.user_units_max;
            let have = self.reg.owned_in(caller.uid, island);
            if u32::try_from(have).unwrap_or(u32::MAX) >= max {
                return Err(AdoptError::TooManyUnits {
                    uid: caller.uid,
                    island: island.to_string(),
                    max,
                });
            }
            return Ok(());
        }
        match self.reg.unit(unit) {
            Some((_, atoll_proto::UnitOrigin::Config)) => Err(AdoptError::ConfiguredUnit {
                unit: unit.to_string(),
            }),
            _ => match self.reg.owner(unit) {
                Some(uid) if uid == caller.uid => Ok(()),
                Some(uid) => Err(AdoptError::NotYourUnit {
                    unit: unit.to_string(),
                    by: format!("uid {uid}"),
                    caller: caller.uid,
                }),
                None => Err(AdoptError::NotYourUnit {
                    unit: unit.to_string(),
                    by: if atoll_core::spec::is_app_unit_name(unit) {
                        "the application policy".into()
                    } else {
                        "root".into()
                    },
                    caller: caller.uid,
                }),
            },
        }
    }

    /// A uid other than root may act only on units whose processes it
    /// owns.
    fn check_unit_owner(
        &self,
        caller: Caller,
        unit: &str,
        group: &GroupPath,
    ) -> Result<(), AdoptError> {
        for p in self.env.backend.processes(group).unwrap_or_default() {
            if let Ok(i) = self.env.procs.info(p) {
                if i.uid != caller.uid {
                    return Err(AdoptError::UnitNotOwned {
                        unit: unit.to_string(),
                        pid: p,
                        comm: i.comm,
                        owner: i.uid,
                        caller: caller.uid,
                    });
                }
            }
        }
        Ok(())
    }

    /// `coordinate`: the coordinator's reply, with what the kernel refused
    /// when its effects were written.
    fn coordinate_request(
        &mut self,
        caller: Caller,
        from: Option<&str>,
        message: atoll_core::coord::Message,
    ) -> Result<Reply, RequestError> {
        let now = self.now();
        if self.net.is_some()
            && matches!(
                message,
                atoll_core::coord::Message::Tune {
                    resource: atoll_core::coord::Resource::Bandwidth,
                    ..
                }
            )
        {
            // A unit's share of a link: its network island's coordinator
            // answers, after the same checks as any tune (coordination on,
            // the caller allowed to tune the overlay).
            self.coord.off()?;
            let inp = crate::coord::Inputs {
                now,
                reg: &self.reg,
                mon: monitor(&self.env),
                procs: &*self.env.procs,
                loads: self.loads.all(),
            };
            self.coord.authorize(&inp, caller, &message)?;
            if let Some((reply, text)) = self.bandwidth_tune(now, &message) {
                return Ok(Reply::Coordinated { reply, text });
            }
        }
        let inp = crate::coord::Inputs {
            now,
            reg: &self.reg,
            mon: monitor(&self.env),
            procs: &*self.env.procs,
            loads: self.loads.all(),
        };
        let reply = self
            .coord
            .coordinate(&inp, caller, from, message, &mut self.compose)?;
        self.carry_out_priorities(now);
        let refused = self.settle();
        let mut text = match refused {
            None => reply.to_string(),
            Some(e) => format!("{reply}; the kernel refused: {e}"),
        };
        for r in self.sync_net_overlays(now) {
            text.push_str("; ");
            text.push_str(&r);
        }
        Ok(Reply::Coordinated { reply, text })
    }

    /// `report`: the overlay's proactive policy.
    fn report_request(
        &mut self,
        caller: Caller,
        overlay: &str,
        value: f64,
    ) -> Result<Reply, RequestError> {
        let now = self.now();
        let inp = crate::coord::Inputs {
            now,
            reg: &self.reg,
            mon: monitor(&self.env),
            procs: &*self.env.procs,
            loads: self.loads.all(),
        };
        let reply = self
            .coord
            .report(&inp, caller, overlay, value, &mut self.compose)?;
        self.carry_out_priorities(now);
        Ok(reply)
    }

    /// `app_*` and `apps`.
    fn apps_request(
        &mut self,
        caller: Caller,
        summary: &str,
        request: Request,
    ) -> Result<Reply, RequestError> {
        let now = self.now();
        let island_cpus = self.island_cpus().clone();
        let mut p = placement(
            &mut self.env,
            &mut self.reg,
            &mut self.log,
            now,
            &self.opts.self_origin,
        );
        let mut kit = Kit {
            p: &mut p,
            compose: &mut self.compose,
            island_cpus: &island_cpus,
            topo: &self.opts.topology,
        };
        self.apps.sweep_stale_units(&mut kit);
        let reply = match request {
            Request::AppRegister { recipe, pid } => {
                let caps = self
                    .apps
                    .capacities(kit.p.reg.spec(), kit.topo, kit.island_cpus);
                let reg = &*kit.p.reg;
                let taken = |name: &str| reg.unit(name).is_some();
                let unit_of = |pid: u32| {
                    let group = &reg.managed(pid)?.group;
                    reg.unit_at(group).map(|u| u.name.clone())
                };
                let r = crate::apps::Registering {
                    procs: kit.p.procs,
                    spec: reg.spec(),
                    caps: &caps,
                    self_pid: self.opts.self_pid,
                    taken: &taken,
                    now,
                    unit_of: &unit_of,
                };
                self.apps.register(caller, recipe, pid, &r)
            }
            Request::AppPoll { app, after: _ } => self.apps.poll(caller, app),
            Request::AppReport {
                app,
                cycles,
                goal_cps,
            } => self.apps.report(caller, app, cycles, goal_cps, now),
            Request::AppDone { app } => {
                let why = Reason::Api {
                    uid: caller.uid,
                    request: summary.to_string(),
                };
                self.apps.done(caller, app, why, &mut kit)
            }
            _ => Ok(Reply::Apps {
                apps: self.apps.statuses(),
            }),
        };
        Ok(reply?)
    }
}
