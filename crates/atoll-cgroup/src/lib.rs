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
//! - [`freezer`] stops and resumes a group's tasks (`GroupSettings::frozen`)
//!   in both versions, and thaws a group before it is removed.
//! - [`foreign`] reads, and only reads, v2 groups atoll does not own (a
//!   systemd unit's cgroup, for `atoll-systemd`).
//!
//! `docs/backends.md` lists every knob's mapping for both versions.

mod affinity;
mod common;
pub mod delegate;
pub mod error;
pub mod foreign;
pub mod freezer;
pub mod fs;
pub mod kept;
pub mod knobs;
pub mod mounts;
mod parts;
mod rt;
pub mod stats;
#[cfg(any(test, feature = "testutils"))]
pub mod testutils;
pub mod v1;
pub mod v2;
pub mod watch;

use atoll_core::backend::{
    Actuator, BackendError, BackendKind, Capabilities, Fallback, FreezeState, GroupStats, Monitor,
    StatSelect,
};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::process::CgroupMembership;
pub use delegate::Delegation;
pub use error::CgroupError;
pub use fs::{can_write, CgroupFs, RealFs};
pub use mounts::{choose, detect, Choice, Mounts, Requested, V1Paths};
pub use v1::Cgroup1Backend;
pub use v2::Cgroup2Backend;

/// Either cgroup backend, as [`open`] returns it: implements
/// [`Actuator`] and [`Monitor`] and keeps the version-specific calls a
/// daemon needs at start-up and teardown.
#[derive(Debug)]
pub enum CgroupBackend<F: CgroupFs = RealFs> {
    /// The unified hierarchy.
    V2(Cgroup2Backend<F>),
    /// The v1 hierarchies.
    V1(Cgroup1Backend<F>),
}

/// Opens the backend `choice` names, rooted at `root_name`, over `fs`.
pub fn open<F: CgroupFs>(
    choice: &Choice,
    root_name: &str,
    fs: F,
) -> Result<CgroupBackend<F>, CgroupError> {
    Ok(match choice {
        Choice::Cgroup2 { mount, .. } => {
            CgroupBackend::V2(Cgroup2Backend::new(mount, root_name, fs)?)
        }
        Choice::Cgroup1(paths) => {
            CgroupBackend::V1(Cgroup1Backend::new(paths.clone(), root_name, fs)?)
        }
    })
}

impl<F: CgroupFs> CgroupBackend<F> {
    /// v2: controllers atoll enabled in its root's parent (to persist across
    /// restarts). v1: none.
    pub fn added_parent_controllers(&self) -> &[String] {
        match self {
            Self::V2(b) => b.added_parent_controllers(),
            Self::V1(_) => &[],
        }
    }

    /// v2: restores [`Self::added_parent_controllers`] after a restart.
    pub fn set_added_parent_controllers(&mut self, controllers: Vec<String>) {
        if let Self::V2(b) = self {
            b.set_added_parent_controllers(controllers);
        }
    }

    /// v2: disables the controllers atoll enabled in its root's parent; call
    /// after removing atoll's root. v1: nothing to do.
    pub fn restore_parent_controllers(&mut self) -> Result<(), CgroupError> {
        match self {
            Self::V2(b) => b.restore_parent_controllers(),
            Self::V1(_) => Ok(()),
        }
    }

    /// v1: allow making atoll's root `cpu_exclusive` (see
    /// [`Cgroup1Backend::set_exclusive_root`]). v2: no effect.
    pub fn set_exclusive_root(&mut self, allow: bool) {
        if let Self::V1(b) = self {
            b.set_exclusive_root(allow);
        }
    }

    /// v2: records the subtree systemd delegated (see
    /// [`Cgroup2Backend::set_delegation`]). v1: delegation is a v2 matter;
    /// an error if one is given.
    pub fn set_delegation(&mut self, d: Option<Delegation>) -> Result<(), CgroupError> {
        match (self, d) {
            (Self::V2(b), d) => b.set_delegation(d),
            (Self::V1(_), None) => Ok(()),
            (Self::V1(b), Some(d)) => Err(CgroupError::BadRootName(format!(
                "{} (systemd delegates {} on cgroup v2 only)",
                atoll_core::backend::Actuator::root_name(b),
                d.top()
            ))),
        }
    }

    /// v1: learns of writes by others to the groups' files from inotify
    /// (see [`Cgroup1Backend::watch_writes`]). v2: not yet; an error.
    pub fn watch_writes(&mut self) -> Result<(), CgroupError> {
        match self {
            Self::V1(b) => b.watch_writes(),
            Self::V2(_) => Err(CgroupError::io(
                "watch",
                "inotify",
                None,
                std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "watching writes is implemented for cgroup v1 only",
                ),
            )),
        }
    }

    /// Forgets remembered refusals so the next `apply` retries them.
    pub fn retry_refused(&mut self) {
        match self {
            Self::V2(b) => b.retry_refused(),
            Self::V1(b) => b.retry_refused(),
        }
    }
}

macro_rules! both {
    ($self:ident, $b:ident => $e:expr) => {
        match $self {
            CgroupBackend::V2($b) => $e,
            CgroupBackend::V1($b) => $e,
        }
    };
}

impl<F: CgroupFs> Actuator for CgroupBackend<F> {
    fn kind(&self) -> BackendKind {
        both!(self, b => b.kind())
    }
    fn capabilities(&self) -> Capabilities {
        both!(self, b => b.capabilities())
    }
    fn root_name(&self) -> &str {
        both!(self, b => b.root_name())
    }
    fn root_location(&self) -> String {
        both!(self, b => b.root_location())
    }
    fn exclusive_root(&self) -> bool {
        both!(self, b => b.exclusive_root())
    }
    fn net_prio_dir(&self, path: &GroupPath) -> Option<std::path::PathBuf> {
        both!(self, b => b.net_prio_dir(path))
    }
    fn cgroup2_dir(&self, path: &GroupPath) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
        both!(self, b => b.cgroup2_dir(path))
    }
    fn apply(
        &mut self,
        path: &GroupPath,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        both!(self, b => b.apply(path, settings))
    }
    fn apply_changed(
        &mut self,
        path: &GroupPath,
        before: &GroupSettings,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        both!(self, b => b.apply_changed(path, before, settings))
    }
    fn remove(&mut self, path: &GroupPath) -> Result<(), BackendError> {
        both!(self, b => b.remove(path))
    }
    fn move_process(&mut self, pid: u32, to: &GroupPath) -> Result<(), BackendError> {
        both!(self, b => b.move_process(pid, to))
    }
    fn restore_process(&mut self, pid: u32, origin: &CgroupMembership) -> Result<(), BackendError> {
        both!(self, b => b.restore_process(pid, origin))
    }
    fn release(&mut self) -> Result<Vec<String>, BackendError> {
        let undone: Vec<String> = self
            .added_parent_controllers()
            .iter()
            .map(|c| format!("disabled controller {c} in the parent's cgroup.subtree_control"))
            .collect();
        self.restore_parent_controllers()?;
        Ok(undone)
    }
    fn outside_changes(&self) -> Vec<String> {
        self.added_parent_controllers().to_vec()
    }
    fn set_outside_changes(&mut self, changes: Vec<String>) {
        self.set_added_parent_controllers(changes);
    }
    fn take_rewrites(&mut self) -> Vec<atoll_core::backend::Rewrite> {
        both!(self, b => b.take_rewrites())
    }
    fn watches_writes(&self) -> bool {
        both!(self, b => b.watches_writes())
    }
    fn written_behind(&mut self) -> Vec<GroupPath> {
        both!(self, b => b.written_behind())
    }
}

impl<F: CgroupFs> Monitor for CgroupBackend<F> {
    fn processes_anywhere(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        both!(self, b => b.processes_anywhere(path))
    }
    fn exists(&self, path: &GroupPath) -> bool {
        both!(self, b => b.exists(path))
    }
    fn children(&self, path: &GroupPath) -> Result<Vec<String>, BackendError> {
        both!(self, b => b.children(path))
    }
    fn processes(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        both!(self, b => b.processes(path))
    }
    fn stats_of(&self, path: &GroupPath, select: StatSelect) -> Result<GroupStats, BackendError> {
        both!(self, b => b.stats_of(path, select))
    }
    fn freeze_state(&self, path: &GroupPath) -> Result<Option<FreezeState>, BackendError> {
        both!(self, b => b.freeze_state(path))
    }
    fn cpu_pressure_file(&self, path: &GroupPath) -> Option<std::path::PathBuf> {
        both!(self, b => b.cpu_pressure_file(path))
    }
    fn cpuset(&self, path: &GroupPath) -> Result<Option<atoll_core::CpuSet>, BackendError> {
        both!(self, b => b.cpuset(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutils::{FakeCgroupFs, FakeKernel};

    fn settings() -> GroupSettings {
        GroupSettings {
            cpus: Some(atoll_core::CpuSet::parse("0-1").unwrap()),
            mems: Some(atoll_core::CpuSet::parse("0").unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn detect_choose_open_on_a_fake_v2_machine() {
        let (fake, mount) = FakeCgroupFs::v2_machine(&["cpuset", "cpu", "io", "memory"]);
        let mounts = detect(&fake.write_mountinfo()).unwrap();
        let choice = choose(Requested::Auto, &mounts, &fake, &|_| true).unwrap();
        let mut b = open(&choice, "atoll", fake.clone()).unwrap();
        assert_eq!(b.kind(), BackendKind::Cgroup2);
        assert!(b.apply(&GroupPath::root(), &settings()).unwrap().is_empty());
        assert_eq!(b.added_parent_controllers().len(), 4);
        b.remove(&GroupPath::root()).unwrap();
        b.restore_parent_controllers().unwrap();
        assert_eq!(fake.get(&mount.join("cgroup.subtree_control")).trim(), "");
        let boxed: Box<dyn atoll_core::backend::Backend> = Box::new(b);
        assert!(!boxed.exists(&GroupPath::root()));
    }

    #[test]
    fn detect_choose_open_on_a_fake_v1_machine() {
        let (fake, paths) = FakeCgroupFs::v1_machine(FakeKernel::default(), true);
        fake.add_v2_mount("unified", &[]);
        let mounts = detect(&fake.write_mountinfo()).unwrap();
        let choice = choose(Requested::Auto, &mounts, &fake, &|_| true).unwrap();
        assert_eq!(choice, Choice::Cgroup1(paths));
        let mut b = open(&choice, "atoll", fake).unwrap();
        b.set_exclusive_root(true);
        assert_eq!(b.kind(), BackendKind::Cgroup1);
        assert!(b.added_parent_controllers().is_empty());
        assert!(b.apply(&GroupPath::root(), &settings()).unwrap().is_empty());
        b.move_process(5, &GroupPath::root()).unwrap();
        assert_eq!(b.processes(&GroupPath::root()).unwrap(), [5]);
        assert!(b.restore_parent_controllers().is_ok());
    }
}
