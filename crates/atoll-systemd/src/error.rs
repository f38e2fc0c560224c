//! Errors of the driver's setup. Errors of the backend calls are
//! [`BackendError`]s: a property systemd refused is
//! [`BackendError::Refused`], a binding that cannot be made or a bus that
//! fails is [`BackendError::Unavailable`], each naming the group, the unit
//! and what systemd said.

use atoll_core::backend::{BackendError, Refusal};
use atoll_core::plan::GroupPath;

use crate::manager::ManagerError;

/// Why the driver could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    /// No connection to systemd.
    #[error("cannot connect to systemd at {address}: {reason}")]
    Connect {
        /// Where it tried.
        address: String,
        /// Why it failed.
        reason: String,
    },
    /// A call made while setting up failed.
    #[error("systemd {call}: {source}")]
    Call {
        /// What was asked (`Version`).
        call: String,
        /// What the bus or systemd said.
        #[source]
        source: ManagerError,
    },
    /// systemd's `Version` does not start with a number.
    #[error("systemd's version {0:?} cannot be read")]
    Version(String),
    /// systemd is older than the driver needs.
    #[error("systemd {version} is too old: atoll's systemd driver needs systemd {needs} or later (AttachProcessesToUnit)")]
    TooOld {
        /// systemd's version.
        version: String,
        /// The oldest it works with.
        needs: u32,
    },
    /// The slice for atoll's scopes is not a slice name.
    #[error("slice {slice:?}: {reason}")]
    BadSlice {
        /// The name given.
        slice: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A binding that cannot be made or ended, or a call the bus failed:
/// [`BackendError::Unavailable`] naming what was attempted.
pub(crate) fn unavailable(what: impl Into<String>, why: impl Into<String>) -> BackendError {
    BackendError::Unavailable {
        what: what.into(),
        why: why.into(),
    }
}

/// Properties systemd refused: [`BackendError::Refused`].
pub(crate) fn refused(
    manager: String,
    group: &GroupPath,
    unit: &str,
    properties: String,
    reason: String,
) -> BackendError {
    BackendError::Refused(Box::new(Refusal {
        manager,
        group: group.clone(),
        unit: unit.to_string(),
        properties,
        reason,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_failed() {
        let e = SystemdError::TooOld {
            version: "237".into(),
            needs: 238,
        };
        assert!(e.to_string().contains("237") && e.to_string().contains("238"));
        let e = SystemdError::Call {
            call: "Version".into(),
            source: ManagerError::Bus("connection reset".into()),
        };
        assert_eq!(e.to_string(), "systemd Version: D-Bus: connection reset");
        assert!(matches!(
            unavailable("binding x", "why"),
            BackendError::Unavailable { .. }
        ));
    }
}
