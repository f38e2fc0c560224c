//! What the driver knows of each binding, and how it survives a crash.
//!
//! A [`Binding`] holds, for an existing unit, the value each property had
//! before atoll first changed it (`originals`) and what atoll set
//! (`set`). The daemon's state file keeps them: the driver's share of
//! [`Actuator::outside_changes`](atoll_core::backend::Actuator::outside_changes)
//! is one line per binding, [`PREFIX`] and the binding as JSON; the other
//! lines are the wrapped backend's. After a restart,
//! [`Actuator::set_outside_changes`](atoll_core::backend::Actuator::set_outside_changes)
//! gives them back, the bindings reappear in `bindings()`, and an `unbind`
//! puts back the originals recorded by the run that changed them: a
//! restarted driver never reads atoll's own values as originals.

use std::collections::BTreeMap;

use atoll_core::backend::External;
use atoll_core::plan::GroupPath;
use serde::{Deserialize, Serialize};

use crate::value::{
    split_io_key, PropValue, ALLOWED_CPUS, ALLOWED_MEMORY_NODES, IO_LIMITS, MEMORY_LOW, MEMORY_MIN,
};

/// The start of the driver's lines in `outside_changes`.
pub const PREFIX: &str = "systemd:";

/// One group bound to a systemd unit or scope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// atoll's group.
    pub group: GroupPath,
    /// What it is bound to.
    pub external: External,
    /// Property (or IO key) to the value it had before atoll first changed
    /// it. Existing units only: a scope atoll started has no originals.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub originals: BTreeMap<String, PropValue>,
    /// Every property the driver may set, as the unit had it when it was
    /// bound (existing units only; a property systemd did not show is
    /// recorded with its default). The originals of the properties atoll
    /// changes later come from here, so the state file, saved right after
    /// the binding, knows them before any is changed: a crash between a
    /// change and the next save cannot make atoll's value pass for the
    /// original.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub found: BTreeMap<String, PropValue>,
    /// Property (or IO key) to the value atoll set, in force now.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, PropValue>,
    /// atoll froze the unit (`FreezeUnit`); it is thawed when the binding
    /// ends.
    #[serde(default, skip_serializing_if = "is_false")]
    pub frozen: bool,
    /// A scope: atoll started it (it may have ended since with its last
    /// process).
    #[serde(default, skip_serializing_if = "is_false")]
    pub started: bool,
    /// A scope not started yet: the properties of the settings last
    /// applied, which it is started with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pending: BTreeMap<String, PropValue>,
    /// A scope not started yet: it is to be frozen once started.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pending_frozen: bool,
    /// Read back from a record after a restart: the run that wrote it may
    /// have changed properties it did not live to record in `set`.
    #[serde(skip)]
    pub restored: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Binding {
    /// A new binding with nothing changed yet.
    pub fn new(group: GroupPath, external: External) -> Self {
        Self {
            group,
            external,
            originals: BTreeMap::new(),
            found: BTreeMap::new(),
            set: BTreeMap::new(),
            frozen: false,
            started: false,
            pending: BTreeMap::new(),
            pending_frozen: false,
            restored: false,
        }
    }

    /// The systemd unit's name (`nginx.service`, `atoll-web-job.scope`).
    pub fn unit(&self) -> &str {
        match &self.external {
            External::SystemdUnit(n) | External::Scope(n) => n,
        }
    }

    /// Whether this is a scope atoll starts.
    pub fn is_scope(&self) -> bool {
        matches!(self.external, External::Scope(_))
    }

    /// The binding's line for the state file.
    pub fn to_line(&self) -> String {
        // A struct of strings, maps and enums always serialises.
        let json = serde_json::to_string(self).unwrap_or_default();
        format!("{PREFIX}{json}")
    }

    /// A binding from its line; `None` for a line of the wrapped backend.
    pub fn from_line(line: &str) -> Option<Result<Self, String>> {
        let json = line.strip_prefix(PREFIX)?;
        Some(serde_json::from_str(json).map_err(|e| format!("{e}")))
    }
}

/// The value a whole property has when systemd shows none: an IO limit
/// property has no device, any other is [`default_of`] it.
pub fn default_property(property: &str) -> PropValue {
    if IO_LIMITS.contains(&property) {
        PropValue::DeviceLimits(Vec::new())
    } else {
        default_of(property)
    }
}

/// The value systemd gives a property nobody set: what a scope atoll
/// started goes back to when atoll stops asking for a property.
pub fn default_of(key: &str) -> PropValue {
    if split_io_key(key).is_some() {
        return PropValue::U64(u64::MAX);
    }
    match key {
        ALLOWED_CPUS | ALLOWED_MEMORY_NODES => PropValue::Bytes(Vec::new()),
        MEMORY_MIN | MEMORY_LOW => PropValue::U64(0),
        _ => PropValue::U64(u64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{io_key, CPU_WEIGHT, IO_READ_BPS};

    #[test]
    fn lines_round_trip_and_are_told_apart() {
        let mut b = Binding::new(
            GroupPath::from_relative("web/nginx"),
            External::SystemdUnit("nginx.service".into()),
        );
        b.originals
            .insert(CPU_WEIGHT.into(), PropValue::U64(u64::MAX));
        b.set.insert(CPU_WEIGHT.into(), PropValue::U64(200));
        b.set
            .insert(io_key(IO_READ_BPS, "/dev/block/8:0"), PropValue::U64(1));
        b.frozen = true;
        let line = b.to_line();
        assert!(
            line.starts_with("systemd:{\"group\":\"web/nginx\""),
            "{line}"
        );
        assert!(!line.contains('\n'));
        assert_eq!(Binding::from_line(&line), Some(Ok(b)));
        assert_eq!(Binding::from_line("cpuset"), None);
        assert!(matches!(Binding::from_line("systemd:{bad"), Some(Err(_))));
        let s = Binding::new(
            GroupPath::from_relative("a/b"),
            External::Scope("x.scope".into()),
        );
        assert_eq!(
            s.to_line(),
            "systemd:{\"group\":\"a/b\",\"external\":{\"scope\":\"x.scope\"}}"
        );
        assert!(s.is_scope());
        assert_eq!(s.unit(), "x.scope");
    }

    #[test]
    fn defaults() {
        assert_eq!(default_of(CPU_WEIGHT), PropValue::U64(u64::MAX));
        assert_eq!(default_of(MEMORY_LOW), PropValue::U64(0));
        assert_eq!(default_of(ALLOWED_CPUS), PropValue::Bytes(vec![]));
        assert_eq!(
            default_of(&io_key(IO_READ_BPS, "/dev/block/8:0")),
            PropValue::U64(u64::MAX)
        );
    }
}
