//! The part of systemd's D-Bus API (`org.freedesktop.systemd1`) the driver
//! uses, as a trait: [`DbusManager`](crate::dbus::DbusManager) talks to
//! systemd over zbus; `testutils::FakeSystemd` (feature `testutils`)
//! emulates it over a fake cgroup tree.
//!
//! | method | D-Bus |
//! | --- | --- |
//! | [`Manager::version`] | Manager property `Version` |
//! | [`Manager::unit`] | `LoadUnit`, then the unit's `LoadState`, `ActiveState`, `ControlGroup` |
//! | [`Manager::properties`] | `org.freedesktop.DBus.Properties.Get` on the unit's type interface |
//! | [`Manager::set_properties`] | `SetUnitProperties(name, runtime = true, props)` |
//! | [`Manager::start_scope`] | `StartTransientUnit(name, "fail", props, [])` |
//! | [`Manager::attach`] | `AttachProcessesToUnit(name, subcgroup, pids)` (238+) |
//! | [`Manager::freeze`], [`Manager::thaw`] | `FreezeUnit`, `ThawUnit` (246+) |

use std::collections::BTreeMap;

use crate::value::PropValue;

/// systemd's error for a unit it does not know.
pub const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";
/// systemd's error for a transient unit whose name is taken.
pub const UNIT_EXISTS: &str = "org.freedesktop.systemd1.UnitExists";
/// An errno error for a process that does not exist.
pub const ESRCH: &str = "System.Error.ESRCH";
/// D-Bus's error for a process id it cannot find.
pub const PID_UNKNOWN: &str = "org.freedesktop.DBus.Error.UnixProcessIdUnknown";

/// A unit as the manager reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitInfo {
    /// `loaded`, `not-found`, `masked`, `error`, `bad-setting`.
    pub load_state: String,
    /// `active`, `inactive`, `activating`, `deactivating`, `failed`,
    /// `reloading`.
    pub active_state: String,
    /// The unit's cgroup below the cgroup mount (`/system.slice/x.service`);
    /// empty while it has none (an inactive unit).
    pub control_group: String,
}

impl UnitInfo {
    /// The unit is loaded (a unit file or a transient unit exists).
    pub fn is_loaded(&self) -> bool {
        self.load_state == "loaded"
    }

    /// The unit is running or starting (not `inactive` or `failed`).
    pub fn is_active(&self) -> bool {
        matches!(
            self.active_state.as_str(),
            "active" | "activating" | "reloading" | "deactivating"
        )
    }
}

/// Why a call to the manager failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManagerError {
    /// The manager answered with an error: it refused the call.
    #[error("{message} ({name})")]
    Method {
        /// The D-Bus error name (`org.freedesktop.DBus.Error.InvalidArgs`).
        name: String,
        /// What the manager said.
        message: String,
    },
    /// The bus failed: no answer, a broken connection, a reply of the wrong
    /// type.
    #[error("D-Bus: {0}")]
    Bus(String),
}

impl ManagerError {
    /// A method error.
    pub fn method(name: &str, message: impl Into<String>) -> Self {
        Self::Method {
            name: name.to_string(),
            message: message.into(),
        }
    }

    /// The D-Bus error name, for a method error.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Method { name, .. } => Some(name),
            Self::Bus(_) => None,
        }
    }

    /// The unit does not exist (any more).
    pub fn is_no_such_unit(&self) -> bool {
        self.name() == Some(NO_SUCH_UNIT)
    }

    /// A process named in the call does not exist.
    pub fn is_no_process(&self) -> bool {
        matches!(self.name(), Some(ESRCH | PID_UNKNOWN))
    }
}

/// The subset of `org.freedesktop.systemd1` atoll uses. Unit names are
/// full names (`nginx.service`). Implementations must be usable from the
/// daemon's thread (`Send`).
pub trait Manager: Send {
    /// The manager's `Version` property (`"252.39-1~deb12u2"`).
    fn version(&self) -> Result<String, ManagerError>;
    /// Loads the unit (`LoadUnit`, which also answers for units with no
    /// file: `not-found`) and reads its state and cgroup.
    fn unit(&self, name: &str) -> Result<UnitInfo, ManagerError>;
    /// Reads properties of the unit (of its type's interface:
    /// `org.freedesktop.systemd1.Service` for a service). A property the
    /// manager does not have is left out of the answer.
    fn properties(
        &self,
        name: &str,
        properties: &[&str],
    ) -> Result<BTreeMap<String, PropValue>, ManagerError>;
    /// `SetUnitProperties` with `runtime = true` (the change is lost at
    /// reboot). systemd checks every property of the call before it applies
    /// any: all are set, or none.
    fn set_properties(&self, name: &str, props: &[(String, PropValue)])
        -> Result<(), ManagerError>;
    /// `StartTransientUnit` of a scope in mode `fail`, with `props` (which
    /// carry `PIDs` and `Slice`) and no auxiliary units. Returns once the
    /// job is queued; the caller waits for the unit.
    fn start_scope(&self, name: &str, props: &[(String, PropValue)]) -> Result<(), ManagerError>;
    /// `AttachProcessesToUnit`: moves `pids` into the unit's cgroup, or
    /// into `subcgroup` below it (`""`, or an absolute path such as
    /// `/app.slice/x.scope`). The unit must be delegated and active.
    fn attach(&self, name: &str, subcgroup: &str, pids: &[u32]) -> Result<(), ManagerError>;
    /// `FreezeUnit`.
    fn freeze(&self, name: &str) -> Result<(), ManagerError>;
    /// `ThawUnit`.
    fn thaw(&self, name: &str) -> Result<(), ManagerError>;
}

impl<M: Manager + ?Sized> Manager for Box<M> {
    fn version(&self) -> Result<String, ManagerError> {
        (**self).version()
    }
    fn unit(&self, name: &str) -> Result<UnitInfo, ManagerError> {
        (**self).unit(name)
    }
    fn properties(
        &self,
        name: &str,
        properties: &[&str],
    ) -> Result<BTreeMap<String, PropValue>, ManagerError> {
        (**self).properties(name, properties)
    }
    fn set_properties(
        &self,
        name: &str,
        props: &[(String, PropValue)],
    ) -> Result<(), ManagerError> {
        (**self).set_properties(name, props)
    }
    fn start_scope(&self, name: &str, props: &[(String, PropValue)]) -> Result<(), ManagerError> {
        (**self).start_scope(name, props)
    }
    fn attach(&self, name: &str, subcgroup: &str, pids: &[u32]) -> Result<(), ManagerError> {
        (**self).attach(name, subcgroup, pids)
    }
    fn freeze(&self, name: &str) -> Result<(), ManagerError> {
        (**self).freeze(name)
    }
    fn thaw(&self, name: &str) -> Result<(), ManagerError> {
        (**self).thaw(name)
    }
}

/// The D-Bus interface of a unit's type, which carries its cgroup and
/// resource properties: `org.freedesktop.systemd1.Service` for
/// `x.service`. `None` for a type without a cgroup.
pub fn type_interface(unit: &str) -> Option<&'static str> {
    Some(match unit.rsplit_once('.')?.1 {
        "service" => "org.freedesktop.systemd1.Service",
        "scope" => "org.freedesktop.systemd1.Scope",
        "slice" => "org.freedesktop.systemd1.Slice",
        "socket" => "org.freedesktop.systemd1.Socket",
        "mount" => "org.freedesktop.systemd1.Mount",
        "swap" => "org.freedesktop.systemd1.Swap",
        _ => return None,
    })
}

/// The unit of systemd's whose cgroup `cgroup` is, and the path below it:
/// the first component that is not a slice names the unit
/// (`/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope` is
/// `user@1000.service` and `/app.slice/x.scope`). `None` for the root or a
/// slice's own cgroup, which hold no processes of a unit.
pub fn unit_of_cgroup(cgroup: &str) -> Option<(&str, String)> {
    let mut parts = cgroup.split('/').filter(|p| !p.is_empty());
    let unit = parts.find(|p| !p.ends_with(".slice"))?;
    type_interface(unit)?;
    let rest: Vec<&str> = parts.collect();
    let sub = if rest.is_empty() {
        String::new()
    } else {
        format!("/{}", rest.join("/"))
    };
    Some((unit, sub))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_of_cgroups() {
        assert_eq!(
            unit_of_cgroup("/user.slice/user-1000.slice/session-3.scope"),
            Some(("session-3.scope", String::new()))
        );
        assert_eq!(
            unit_of_cgroup("/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope"),
            Some(("user@1000.service", "/app.slice/x.scope".to_string()))
        );
        assert_eq!(
            unit_of_cgroup("/system.slice/nginx.service"),
            Some(("nginx.service", String::new()))
        );
        assert_eq!(unit_of_cgroup("/"), None);
        assert_eq!(unit_of_cgroup("/user.slice"), None);
        assert_eq!(unit_of_cgroup("/atoll/web/api"), None, "not a unit");
    }

    #[test]
    fn interfaces_and_errors() {
        assert_eq!(
            type_interface("getty@tty1.service"),
            Some("org.freedesktop.systemd1.Service")
        );
        assert_eq!(
            type_interface("web.slice"),
            Some("org.freedesktop.systemd1.Slice")
        );
        assert_eq!(type_interface("x.timer"), None);
        assert_eq!(type_interface("noext"), None);
        assert!(ManagerError::method(ESRCH, "No such process").is_no_process());
        assert!(ManagerError::method(NO_SUCH_UNIT, "x").is_no_such_unit());
        assert!(!ManagerError::Bus("gone".into()).is_no_such_unit());
        let e = ManagerError::method(
            "org.freedesktop.DBus.Error.InvalidArgs",
            "Value specified in CPUWeight is out of range",
        );
        assert_eq!(
            e.to_string(),
            "Value specified in CPUWeight is out of range (org.freedesktop.DBus.Error.InvalidArgs)"
        );
        let info = UnitInfo {
            load_state: "loaded".into(),
            active_state: "failed".into(),
            control_group: String::new(),
        };
        assert!(info.is_loaded() && !info.is_active());
    }
}
