//! atoll's systemd driver.
//!
//! On a host that runs systemd with cgroup v2, the cgroups of services
//! belong to systemd: atoll must not move their processes or write their
//! files. Like kubelet's `cgroupDriver: systemd`, atoll then sets those
//! services' resources through systemd's D-Bus API. [`SystemdDriver`] is a
//! [`Backend`](atoll_core::backend::Backend) that wraps another (normally
//! `atoll_cgroup::Cgroup2Backend`): a group bound to a systemd unit
//! ([`Actuator::bind`](atoll_core::backend::Actuator::bind)) is enforced
//! through systemd, every other group goes to the wrapped backend
//! unchanged.
//!
//! - [`translate`] turns `GroupSettings` into unit properties (pure), and
//!   [`value`] holds their names, D-Bus values and systemd versions.
//! - [`manager`] is the subset of `org.freedesktop.systemd1` used, as a
//!   trait; [`dbus`] implements it with zbus; `testutils::FakeSystemd`
//!   (feature `testutils`) emulates systemd over a fake cgroup tree.
//! - [`driver`] binds groups and applies their settings (one all-or-nothing
//!   call of only what changed; originals kept and put back), [`scope`]
//!   starts atoll's transient scopes and moves processes into them,
//!   [`record`] keeps the bindings in the daemon's state file across a
//!   crash.
//!
//! `docs/systemd.md` describes the driver for users and the daemon.

#![deny(missing_docs)]

mod backend;
pub mod dbus;
pub mod driver;
pub mod error;
pub mod manager;
pub mod record;
pub mod scope;
#[cfg(any(test, feature = "testutils"))]
pub mod testutils;
pub mod translate;
pub mod value;

pub use dbus::{BusAddress, DbusManager};
pub use driver::{detect, detect_in, Options, SystemdDriver, DEFAULT_SLICE};
pub use error::SystemdError;
pub use manager::{Manager, ManagerError, UnitInfo};
pub use record::Binding;
pub use value::PropValue;
