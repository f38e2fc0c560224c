//! atoll's cgroup backends: `cgroup2` and `cgroup1`.
//!
//! Both implement [`Actuator`](atoll_core::backend::Actuator) and
//! [`Monitor`](atoll_core::backend::Monitor) over the hierarchy atoll owns,
//! rooted at a name they are given (`<mount>/<root>/...`).
//!
//! - [`mounts`] finds the cgroup mounts (from an injected mountinfo path) and
//!   [`choose`]s a backend, explaining any refusal.
//! - [`fs`] is the seam to the kernel: every file operation goes through
//!   [`CgroupFs`], so unit tests run the real backend code on fake trees
//!   ([`testutils::FakeCgroupFs`], feature `testutils`).
//! - [`v2`] and [`v1`] translate [`GroupSettings`](atoll_core::plan::GroupSettings)
//!   into interface files, write only what differs, and report what the
//!   kernel refused as [`Fallback`](atoll_core::backend::Fallback)s.
//! - [`knobs`] and [`stats`] hold the value formatters and the total parsers.
//!
//! `docs/backends.md` lists every knob's mapping for both versions.

mod common;
pub mod error;
pub mod fs;
pub mod knobs;
pub mod mounts;
pub mod stats;
#[cfg(any(test, feature = "testutils"))]
pub mod testutils;
pub mod v1;
pub mod v2;

use atoll_core::backend::Backend;

pub use error::CgroupError;
pub use fs::{can_write, CgroupFs, RealFs};
pub use mounts::{choose, detect, Choice, Mounts, Requested, V1Paths};
pub use v1::Cgroup1Backend;
pub use v2::Cgroup2Backend;

/// Opens the backend `choice` names, rooted at `root_name`, over `fs`.
pub fn open<F: CgroupFs + 'static>(
    choice: &Choice,
    root_name: &str,
    fs: F,
) -> Result<Box<dyn Backend>, CgroupError> {
    Ok(match choice {
        Choice::Cgroup2 { mount, .. } => Box::new(Cgroup2Backend::new(mount, root_name, fs)?),
        Choice::Cgroup1(paths) => Box::new(Cgroup1Backend::new(paths.clone(), root_name, fs)?),
    })
}
