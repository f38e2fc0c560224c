//! Units and overlays changed at run time: `unit_add`, `unit_set`,
//! `unit_rm` here, `overlay_add`, `overlay_set`, `overlay_rm` in
//! `runtime_overlay`, and `config_dump`, which writes the platform as it
//! is now.
//!
//! A unit is checked as the config file's units are
//! ([`PlatformSpec::validate_runtime_unit`]), and may not overcommit its
//! island; an overlay as the config's overlays are, over the units of
//! either origin. A configured unit or overlay is changed by editing the
//! file and reloading: these requests refuse it with that advice. Every
//! change is a decision whose reason is the request; the registry keeps
//! what it changed, so the state file saves it before the reply.
//!
//! Who may: root anything. Another user may add units where the island
//! takes users' units (as `atoll run` may), and set or remove the units it
//! added; it may give them limits (`cpu_cap`, `memory_high`,
//! `memory_max`) and a weight or IO weight up to the default (100), but no
//! protection (`cpus`, `memory_min`, `memory_low`): what its units get
//! beyond their island's leftovers would come out of the configured
//! units' shares. Overlays are root's, as `register` is.

use atoll_core::decision::{Action, Decision, Reason};
use atoll_core::name::NameError;
use atoll_core::plan::GroupPath;
use atoll_core::spec::{is_app_unit_name, Entitlement, SchedPolicy, SpecError, UnitSpec};
use atoll_core::Name;
use atoll_proto::runtime::UnitSettings;
use atoll_proto::{ErrorCode, Reply, UnitOrigin};

use super::requests::MAX_RUNTIME_UNITS;
use super::{placement, Controller};
use crate::command::Caller;
use crate::compose::ComposeError;

/// Why a run-time change was refused. Nothing is left changed.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A name that is not a valid name.
    #[error("{what} {name:?}: {source}")]
    BadName {
        /// `unit`, `island` or `overlay`.
        what: &'static str,
        /// The name.
        name: String,
        /// Why.
        #[source]
        source: NameError,
    },
    /// `unit_add` of a unit that exists.
    #[error("unit {0} exists already (atoll unit set changes it)")]
    UnitExists(String),
    /// No such unit.
    #[error("no unit {0}")]
    NoUnit(String),
    /// No such island.
    #[error("no island {0}")]
    NoIsland(String),
    /// A unit of the configuration file.
    #[error("unit {0} is configured: change it in the configuration file and run `atoll reload`")]
    ConfiguredUnit(String),
    /// A unit that holds an application.
    #[error("unit {0} holds an application: the application policy manages it")]
    AppUnit(String),
    /// The unit or overlay would not validate; every problem, keyed as
    /// the config file would be.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<SpecError>),
    /// A unit another user (or root) added.
    #[error("unit {unit} was added by {by}, not by the caller (uid {uid})")]
    NotOwner {
        /// The unit.
        unit: String,
        /// Who added it.
        by: String,
        /// The caller.
        uid: u32,
    },
    /// A setting only root may give.
    #[error("uid {uid} may not set {what}: only root may give a unit {why}")]
    Setting {
        /// The caller.
        uid: u32,
        /// The key and value.
        what: String,
        /// What it would give.
        why: &'static str,
    },
    /// The island does not take users' units.
    #[error("island {island} does not take units of users other than root (user_units = false)")]
    NoUserUnits {
        /// The island.
        island: String,
    },
    /// The caller has its island's most units.
    #[error(
        "uid {uid} has {max} units in island {island} already, the most it may (user_units_max)"
    )]
    TooManyUnits {
        /// The caller.
        uid: u32,
        /// The island.
        island: String,
        /// The limit.
        max: u32,
    },
    /// Too many runtime units altogether.
    #[error("there are {max} runtime units already, the most users may add up to")]
    TooManyRuntimeUnits {
        /// The limit.
        max: usize,
    },
    /// A realtime island, and the caller is not one of its `rt_users`.
    #[error("island {island} is realtime and uid {uid} is not one of its rt_users")]
    Realtime {
        /// The island.
        island: String,
        /// The caller.
        uid: u32,
    },
    /// The unit belongs to an overlay.
    #[error("unit {unit} belongs to overlay {overlay}: take it out of the overlay first (atoll overlay set/rm {overlay})")]
    InOverlay {
        /// The unit.
        unit: String,
        /// The overlay.
        overlay: String,
    },
    /// Only root changes overlays.
    #[error("only root may add, change or remove overlays (caller uid {0})")]
    OverlayRootOnly(u32),
    /// `overlay_add` of an overlay that exists.
    #[error("overlay {0} exists already (atoll overlay set changes it)")]
    OverlayExists(String),
    /// No such overlay.
    #[error("no overlay {0}")]
    NoOverlay(String),
    /// An overlay of the configuration file.
    #[error(
        "overlay {0} is configured: change it in the configuration file and run `atoll reload`"
    )]
    ConfiguredOverlay(String),
    /// An overlay registered with a `register` message.
    #[error("overlay {0} was registered with a coordination message: remove it (atoll overlay rm) and add it again")]
    RegisteredOverlay(String),
    /// The settings do not make an overlay.
    #[error("overlay {overlay}: {problem}")]
    BadOverlay {
        /// The overlay.
        overlay: String,
        /// What is wrong.
        problem: String,
    },
    /// The coordinators refused it.
    #[error("overlay {overlay}: coordination refused it: {why}")]
    OverlayRefused {
        /// The overlay.
        overlay: String,
        /// The refusal.
        why: String,
    },
    /// A power cap on a machine whose power cannot be measured (the
    /// config path's refusal, [`crate::powercap::NoRapl`]).
    #[error(transparent)]
    PowerCap(#[from] crate::powercap::NoRapl),
    /// The network class asked for (`settings.network`) cannot be given.
    #[error("settings.network: {0}")]
    NetClass(#[from] crate::netisland::RuntimeClassError),
    /// The kernel refused the unit's group; the change was undone.
    #[error("the kernel refused: {0}; nothing was changed")]
    Refused(Box<ComposeError>),
    /// The effective configuration could not be written.
    #[error(transparent)]
    Dump(#[from] atoll_config::DumpError),
}

impl RuntimeError {
    /// The protocol's error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::BadName { .. }
            | Self::UnitExists(_)
            | Self::ConfiguredUnit(_)
            | Self::AppUnit(_)
            | Self::Invalid(_)
            | Self::InOverlay { .. }
            | Self::OverlayExists(_)
            | Self::ConfiguredOverlay(_)
            | Self::RegisteredOverlay(_)
            | Self::BadOverlay { .. }
            | Self::PowerCap(_)
            | Self::NetClass(_)
            | Self::OverlayRefused { .. } => ErrorCode::BadRequest,
            Self::NoUnit(_) | Self::NoIsland(_) | Self::NoOverlay(_) => ErrorCode::NotFound,
            Self::NotOwner { .. }
            | Self::Setting { .. }
            | Self::NoUserUnits { .. }
            | Self::TooManyUnits { .. }
            | Self::Realtime { .. }
            | Self::OverlayRootOnly(_) => ErrorCode::PermissionDenied,
            Self::TooManyRuntimeUnits { .. } => ErrorCode::Busy,
            Self::Refused(_) | Self::Dump(_) => ErrorCode::Backend,
        }
    }
}

pub(super) fn name(what: &'static str, s: &str) -> Result<Name, RuntimeError> {
    Name::new(s).map_err(|source| RuntimeError::BadName {
        what,
        name: s.to_string(),
        source,
    })
}

/// `e` with the keys `s` gives replaced.
fn apply_settings(mut e: Entitlement, s: &UnitSettings) -> Entitlement {
    fn set<T>(slot: &mut Option<T>, v: Option<T>) {
        if v.is_some() {
            *slot = v;
        }
    }
    set(&mut e.cpus, s.cpus);
    set(&mut e.weight, s.weight);
    set(&mut e.cpu_cap, s.cpu_cap);
    set(&mut e.memory.min, s.memory_min);
    set(&mut e.memory.low, s.memory_low);
    set(&mut e.memory.high, s.memory_high);
    set(&mut e.memory.max, s.memory_max);
    set(&mut e.io.weight, s.io_weight);
    e
}

/// What a user other than root may not give its units (see the module
/// docs).
fn check_user_settings(uid: u32, s: &UnitSettings) -> Result<(), RuntimeError> {
    let deny = |what: String, why| Err(RuntimeError::Setting { uid, what, why });
    let protection = "a protected share (it would come out of the configured units')";
    if let Some(c) = s.cpus {
        return deny(format!("cpus {c}"), protection);
    }
    if let Some(m) = s.memory_min {
        return deny(format!("memory_min {m}"), protection);
    }
    if let Some(m) = s.memory_low {
        return deny(format!("memory_low {m}"), protection);
    }
    if let Some(n) = &s.network {
        return deny(
            format!("network {}", n.describe()),
            "a class on a network island (its share would come out of the configured units')",
        );
    }
    let most = atoll_core::weight::DEFAULT_WEIGHT;
    for (k, w) in [("weight", s.weight), ("io_weight", s.io_weight)] {
        if let Some(w) = w.filter(|w| *w > most) {
            return deny(
                format!("{k} {w}"),
                "a weight above the default 100 (more than its share)",
            );
        }
    }
    Ok(())
}

/// `old -> new` for each entitlement key that differs.
fn entitlement_change(old: &Entitlement, new: &Entitlement) -> String {
    let show = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let mut parts = Vec::new();
    let mut cmp = |k: &str, a: Option<String>, b: Option<String>| {
        if a != b {
            parts.push(format!("{k} {} -> {}", show(a), show(b)));
        }
    };
    let s = |v: Option<f64>| v.map(|v| v.to_string());
    let i = |v: Option<u64>| v.map(|v| v.to_string());
    let w = |v: Option<u32>| v.map(|v| v.to_string());
    cmp("cpus", s(old.cpus), s(new.cpus));
    cmp("weight", w(old.weight), w(new.weight));
    cmp("cpu_cap", s(old.cpu_cap), s(new.cpu_cap));
    cmp("memory_min", i(old.memory.min), i(new.memory.min));
    cmp("memory_low", i(old.memory.low), i(new.memory.low));
    cmp("memory_high", i(old.memory.high), i(new.memory.high));
    cmp("memory_max", i(old.memory.max), i(new.memory.max));
    cmp("io_weight", w(old.io.weight), w(new.io.weight));
    if parts.is_empty() {
        "unchanged".into()
    } else {
        parts.join(", ")
    }
}

impl Controller {
    pub(super) fn api_reason(caller: Caller, summary: &str) -> Reason {
        Reason::Api {
            uid: caller.uid,
            request: summary.to_string(),
        }
    }

    pub(super) fn decide(&mut self, action: Action, why: Reason) {
        let at = self.now();
        self.log.record(Decision { at, action, why });
    }

    /// The runtime unit `unit`, when the caller may change it.
    fn changeable_unit(&self, caller: Caller, unit: &str) -> Result<UnitSpec, RuntimeError> {
        let Some((u, origin)) = self.reg.unit(unit) else {
            return Err(RuntimeError::NoUnit(unit.to_string()));
        };
        if origin == UnitOrigin::Config {
            return Err(RuntimeError::ConfiguredUnit(unit.to_string()));
        }
        if is_app_unit_name(unit) {
            return Err(RuntimeError::AppUnit(unit.to_string()));
        }
        if !caller.is_root() && self.reg.owner(unit) != Some(caller.uid) {
            return Err(RuntimeError::NotOwner {
                unit: unit.to_string(),
                by: match self.reg.owner(unit) {
                    Some(uid) => format!("uid {uid}"),
                    None => "root".into(),
                },
                uid: caller.uid,
            });
        }
        Ok(u.clone())
    }

    /// `unit_add`.
    pub(super) fn unit_add(
        &mut self,
        caller: Caller,
        summary: &str,
        unit: &str,
        island: Option<&str>,
        settings: &UnitSettings,
    ) -> Result<Reply, RuntimeError> {
        let unit_name = name("unit", unit)?;
        if is_app_unit_name(unit) {
            return Err(RuntimeError::AppUnit(unit.to_string()));
        }
        if self.reg.unit(unit).is_some() {
            return Err(RuntimeError::UnitExists(unit.to_string()));
        }
        let island_spec = match island {
            Some(i) => {
                let n = name("island", i)?;
                self.reg.island(&n)
            }
            None => self.reg.spec().default_island(),
        }
        .ok_or_else(|| RuntimeError::NoIsland(island.unwrap_or("(default)").to_string()))?;
        let island_name = island_spec.name.clone();
        if !caller.is_root() {
            check_user_settings(caller.uid, settings)?;
            if matches!(island_spec.policy, SchedPolicy::Realtime(_))
                && !island_spec.access.rt_users.contains(&caller.uid)
            {
                return Err(RuntimeError::Realtime {
                    island: island_name.to_string(),
                    uid: caller.uid,
                });
            }
            if !island_spec.access.user_units {
                return Err(RuntimeError::NoUserUnits {
                    island: island_name.to_string(),
                });
            }
            let max = island_spec.access.user_units_max;
            let have = self.reg.owned_in(caller.uid, &island_name);
            if u32::try_from(have).unwrap_or(u32::MAX) >= max {
                return Err(RuntimeError::TooManyUnits {
                    uid: caller.uid,
                    island: island_name.to_string(),
                    max,
                });
            }
            if self.reg.runtime_units().len() >= MAX_RUNTIME_UNITS {
                return Err(RuntimeError::TooManyRuntimeUnits {
                    max: MAX_RUNTIME_UNITS,
                });
            }
        }
        let spec = UnitSpec {
            name: unit_name.clone(),
            island: island_name.clone(),
            entitlement: apply_settings(Entitlement::default(), settings),
            adopt: Vec::new(),
            rt_priority: None,
        };
        self.reg
            .spec()
            .validate_runtime_unit(self.reg.runtime_units(), &spec, &self.opts.topology)
            .map_err(RuntimeError::Invalid)?;
        let class = self.settings_class(&unit_name, settings)?;
        let why = Self::api_reason(caller, summary);
        self.reg.set_runtime_unit(spec.clone());
        self.reg.keep(unit);
        if !caller.is_root() {
            self.reg.set_owner(unit, caller.uid);
        }
        self.decide(
            Action::CreateUnit {
                unit: unit.to_string(),
                island: island_name.to_string(),
            },
            why.clone(),
        );
        let group = GroupPath::unit(&island_name, &unit_name);
        self.compose.touch(group.clone(), why.clone());
        self.coord.sync_units(&self.reg);
        if let Some(source) = self.settle() {
            self.undo_unit(unit, &group, &why);
            self.coord.sync_units(&self.reg);
            return Err(RuntimeError::Refused(Box::new(source)));
        }
        if class.is_some() {
            self.give_runtime_class(&unit_name, class, &why);
        }
        Ok(Reply::Unit {
            unit: unit.to_string(),
            island: island_name.to_string(),
            entitlement: spec.entitlement,
        })
    }

    /// `unit_set`.
    pub(super) fn unit_set(
        &mut self,
        caller: Caller,
        summary: &str,
        unit: &str,
        settings: &UnitSettings,
    ) -> Result<Reply, RuntimeError> {
        let old = self.changeable_unit(caller, unit)?;
        if !caller.is_root() {
            check_user_settings(caller.uid, settings)?;
        }
        let mut new = old.clone();
        new.entitlement = apply_settings(old.entitlement.clone(), settings);
        self.reg
            .spec()
            .validate_runtime_unit(self.reg.runtime_units(), &new, &self.opts.topology)
            .map_err(RuntimeError::Invalid)?;
        let class = self.settings_class(&old.name, settings)?;
        let why = Self::api_reason(caller, summary);
        let group = GroupPath::unit(&new.island, &new.name);
        let change = entitlement_change(&old.entitlement, &new.entitlement);
        self.reg.set_runtime_unit(new.clone());
        self.decide(
            Action::SetUnit {
                unit: unit.to_string(),
                change,
            },
            why.clone(),
        );
        self.compose.touch(group.clone(), why.clone());
        self.coord.sync_units(&self.reg);
        if let Some(source) = self.settle() {
            let back = Reason::Api {
                uid: caller.uid,
                request: format!("{summary} (undone: the kernel refused it)"),
            };
            self.reg.set_runtime_unit(old.clone());
            self.decide(
                Action::SetUnit {
                    unit: unit.to_string(),
                    change: entitlement_change(&new.entitlement, &old.entitlement),
                },
                back.clone(),
            );
            self.compose.touch(group, back);
            self.coord.sync_units(&self.reg);
            if let Some(e) = self.settle() {
                tracing::warn!("putting unit {unit} back: {e}");
            }
            return Err(RuntimeError::Refused(Box::new(source)));
        }
        if class.is_some() {
            // The class asked for replaces the one it had.
            self.give_runtime_class(&new.name, class, &why);
        } else if settings.clear_network && self.has_runtime_class(&new.name) {
            // Taken off: the group's priority written back (or its rule
            // dropped), the tree written without it.
            self.give_runtime_class(&new.name, None, &why);
        }
        Ok(Reply::Unit {
            unit: unit.to_string(),
            island: new.island.to_string(),
            entitlement: new.entitlement,
        })
    }

    /// `unit_rm`: the unit's processes go back where they came from, as a
    /// reload does for a unit that goes, and its group is removed.
    pub(super) fn unit_rm(
        &mut self,
        caller: Caller,
        summary: &str,
        unit: &str,
    ) -> Result<Reply, RuntimeError> {
        let spec = self.changeable_unit(caller, unit)?;
        let held = self
            .reg
            .overlay_of(unit)
            .map(|o| o.name.to_string())
            .or_else(|| {
                let n = Name::new(unit).ok()?;
                let m = self.coord.manager()?;
                m.islands()
                    .iter()
                    .find_map(|c| c.overlay_of(&n).map(|o| o.to_string()))
            });
        if let Some(overlay) = held {
            return Err(RuntimeError::InOverlay {
                unit: unit.to_string(),
                overlay,
            });
        }
        let why = Self::api_reason(caller, summary);
        // Its class goes first, while its group is there to write back.
        if self.has_runtime_class(&spec.name) {
            self.give_runtime_class(&spec.name, None, &why);
        }
        let group = GroupPath::unit(&spec.island, &spec.name);
        let now = self.now();
        let returned = self.env.backend.processes(&group).unwrap_or_default();
        {
            let mut p = placement(
                &mut self.env,
                &mut self.reg,
                &mut self.log,
                now,
                &self.opts.self_origin,
            );
            self.compose
                .thaw(&group, p.backend, p.log, now, why.clone());
            p.release_group(&group, why.clone());
        }
        self.reg.remove_runtime_unit(unit);
        if self.env.backend.exists(&group) || self.compose.applied(&group).is_some() {
            if let Err(e) = self.compose.remove(
                &group,
                &mut *self.env.backend,
                &mut self.log,
                now,
                why.clone(),
            ) {
                tracing::warn!("removing {group}: {e}");
                self.compose.forget(&group);
            }
        }
        self.decide(
            Action::RemoveUnit {
                unit: unit.to_string(),
            },
            why.clone(),
        );
        self.coord.sync_units(&self.reg);
        if let Some(e) = self.settle() {
            tracing::warn!("after removing unit {unit}: {e}");
        }
        Ok(Reply::UnitRemoved {
            unit: unit.to_string(),
            returned,
        })
    }

    /// `config_dump`: the platform as it is now, as a config file, the
    /// run-time units' network classes in their islands' tables.
    pub(super) fn config_dump(&self) -> Result<Reply, RuntimeError> {
        let mut spec = self.reg.effective_spec();
        if let Some(net) = &self.net {
            net.dump_runtime_classes(&mut spec);
        }
        Ok(Reply::Config {
            toml: atoll_config::to_toml(&spec)?,
        })
    }
}
