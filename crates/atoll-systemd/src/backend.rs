//! [`Actuator`] and [`Monitor`] for [`SystemdDriver`]: bound groups to
//! systemd and the unit's cgroup, every other call to the wrapped backend
//! unchanged.
//!
//! Monitoring a bound group reads its unit's cgroup, found from the unit's
//! `ControlGroup` property and read only (`atoll_cgroup::foreign`). The
//! path is remembered and asked again when its directory is gone (a
//! service restarted or stopped), at most once per `Options::refresh`. A
//! unit without a cgroup (stopped) has no processes and no figures, which
//! is not an error. A bound group exists while its unit has a cgroup; a
//! scope group exists from `bind` on (it is ready for its first process,
//! which starts the scope). Bound groups are not listed as children: they
//! are not in atoll's tree.

use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use atoll_cgroup::foreign::{read_freeze_state, read_pids_below, read_stats};
use atoll_cgroup::CgroupError;
use atoll_core::backend::{
    Actuator, Backend, BackendError, BackendKind, Capabilities, External, Fallback, FreezeState,
    GroupStats, Monitor, Rewrite, StatSelect,
};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::process::CgroupMembership;

use crate::driver::SystemdDriver;

/// `mount` joined with a unit's `ControlGroup`, if that is an absolute
/// path of plain components.
fn under_mount(mount: &Path, control_group: &str) -> Option<PathBuf> {
    let rel = Path::new(control_group).strip_prefix("/").ok()?;
    if rel.as_os_str().is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return None;
    }
    Some(mount.join(rel))
}

fn missing(e: &CgroupError) -> bool {
    matches!(e, CgroupError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
}

impl<B: Backend> SystemdDriver<B> {
    /// The cgroup directory of a bound group's unit, if it has one now.
    pub(crate) fn cgroup_dir(&self, path: &GroupPath) -> Option<PathBuf> {
        let b = self.bindings.get(path)?;
        if b.is_scope() && !b.started {
            return None;
        }
        let mut cache = self.lock_cgroups();
        let entry = cache.entry(path.clone()).or_default();
        if let Some(dir) = &entry.dir {
            if self.fs.exists(dir) {
                return Some(dir.clone());
            }
        }
        if entry
            .checked
            .is_some_and(|t| t.elapsed() < self.options.refresh)
        {
            return None;
        }
        let found = self
            .manager
            .unit(b.unit())
            .ok()
            .filter(|i| i.is_loaded())
            .and_then(|i| under_mount(&self.options.cgroup_mount, &i.control_group))
            .filter(|d| self.fs.exists(d));
        // Only a lookup that found nothing waits for the next one; the
        // path last seen stays known (a service's comes back when it
        // starts again).
        entry.checked = found.is_none().then(Instant::now);
        if found.is_some() {
            entry.dir.clone_from(&found);
        }
        found
    }

    /// The directory last found for a bound group, without checking it is
    /// still there.
    fn known_dir(&self, path: &GroupPath) -> Option<PathBuf> {
        self.lock_cgroups().get(path).and_then(|c| c.dir.clone())
    }

    fn bound(&self, path: &GroupPath) -> bool {
        self.bindings.contains_key(path)
    }
}

impl<B: Backend> Actuator for SystemdDriver<B> {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            service_manager: true,
            ..self.inner.capabilities()
        }
    }

    fn root_name(&self) -> &str {
        self.inner.root_name()
    }

    fn service_manager(&self) -> Option<String> {
        Some(self.manager_name())
    }

    fn root_location(&self) -> String {
        self.inner.root_location()
    }

    fn exclusive_root(&self) -> bool {
        self.inner.exclusive_root()
    }

    fn net_prio_dir(&self, path: &GroupPath) -> Option<std::path::PathBuf> {
        self.inner.net_prio_dir(path)
    }

    /// A bound group is its unit's cgroup (under the v2 mount systemd
    /// uses); any other is the inner backend's.
    fn cgroup2_dir(&self, path: &GroupPath) -> Option<(PathBuf, PathBuf)> {
        if self.bound(path) {
            let dir = self.cgroup_dir(path)?;
            return Some((self.options.cgroup_mount.clone(), dir));
        }
        self.inner.cgroup2_dir(path)
    }

    fn apply(
        &mut self,
        path: &GroupPath,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        self.note_sets(path, settings);
        if self.bound(path) {
            self.apply_bound(path, settings)
        } else {
            self.inner.apply(path, settings)
        }
    }

    fn apply_changed(
        &mut self,
        path: &GroupPath,
        before: &GroupSettings,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        self.note_sets(path, settings);
        if self.bound(path) {
            self.apply_bound(path, settings)
        } else {
            self.inner.apply_changed(path, before, settings)
        }
    }

    fn remove(&mut self, path: &GroupPath) -> Result<(), BackendError> {
        if !self.bound(path) {
            self.forget_sets(path);
            return self.inner.remove(path);
        }
        self.end_binding(path)?;
        self.forget_sets(path);
        // A directory of the same path in atoll's own tree (from before the
        // group was bound) goes too.
        if self.inner.exists(path) {
            self.inner.remove(path)?;
        }
        Ok(())
    }

    fn move_process(&mut self, pid: u32, to: &GroupPath) -> Result<(), BackendError> {
        if self.bound(to) {
            self.move_bound(pid, to)
        } else {
            self.inner.move_process(pid, to)
        }
    }

    fn restore_process(&mut self, pid: u32, origin: &CgroupMembership) -> Result<(), BackendError> {
        match self.restore_bound(pid, origin) {
            Some(r) => r,
            None => self.inner.restore_process(pid, origin),
        }
    }

    /// Ends every binding (existing units get their properties back, scopes
    /// are left to their processes), then releases the wrapped backend. A
    /// binding that could not be ended stays recorded and the first such
    /// error is returned.
    fn release(&mut self) -> Result<Vec<String>, BackendError> {
        let mut lines = Vec::new();
        let mut first = None;
        let groups: Vec<GroupPath> = self.bindings.keys().cloned().collect();
        for g in groups {
            match self.end_binding(&g) {
                Ok(mut l) => lines.append(&mut l),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        match self.inner.release() {
            Ok(mut l) => lines.append(&mut l),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(lines), Err)
    }

    fn outside_changes(&self) -> Vec<String> {
        let mut out = self.inner.outside_changes();
        out.extend(self.record_lines());
        out.extend(self.unreadable.iter().cloned());
        out
    }

    fn set_outside_changes(&mut self, changes: Vec<String>) {
        let rest = self.take_records(changes);
        self.inner.set_outside_changes(rest);
    }

    fn take_rewrites(&mut self) -> Vec<Rewrite> {
        self.inner.take_rewrites()
    }

    fn watches_writes(&self) -> bool {
        self.inner.watches_writes()
    }

    fn written_behind(&mut self) -> Vec<GroupPath> {
        self.inner.written_behind()
    }

    fn bind(&mut self, path: &GroupPath, to: &External) -> Result<(), BackendError> {
        self.bind_group(path, to)
    }

    fn unbind(&mut self, path: &GroupPath) -> Result<Vec<String>, BackendError> {
        self.end_binding(path)
    }

    fn bindings(&self) -> Vec<(GroupPath, External)> {
        self.bindings
            .values()
            .map(|b| (b.group.clone(), b.external.clone()))
            .collect()
    }

    /// A bound group when the process's unified cgroup is its unit's (at
    /// any depth), else the wrapped backend's answer.
    fn group_of(&self, m: &CgroupMembership) -> Option<GroupPath> {
        if let Some(p) = m.unified() {
            for g in self.bindings.keys() {
                let Some(dir) = self.known_dir(g).or_else(|| self.cgroup_dir(g)) else {
                    continue;
                };
                let Ok(rel) = dir.strip_prefix(&self.options.cgroup_mount) else {
                    continue;
                };
                let rel = format!("/{}", rel.display());
                if p == rel || p.strip_prefix(&rel).is_some_and(|r| r.starts_with('/')) {
                    return Some(g.clone());
                }
            }
        }
        self.inner.group_of(m)
    }
}

impl<B: Backend> Monitor for SystemdDriver<B> {
    fn exists(&self, path: &GroupPath) -> bool {
        match self.bindings.get(path) {
            None => self.inner.exists(path),
            Some(b) if b.is_scope() => true,
            Some(_) => self.cgroup_dir(path).is_some(),
        }
    }

    /// The wrapped backend's child groups: those of atoll's own tree. A
    /// bound group is not one (its cgroup is systemd's, elsewhere), so its
    /// parent does not list it and it has none: walks of atoll's tree
    /// (strays, recovery, teardown) never take a systemd unit for a group
    /// of atoll's; [`Actuator::bindings`] names the bound groups.
    fn children(&self, path: &GroupPath) -> Result<Vec<String>, BackendError> {
        if self.bound(path) {
            return Ok(Vec::new());
        }
        self.inner.children(path)
    }

    /// For a bound group: every process in its unit's cgroup, at any depth.
    fn processes(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        if !self.bound(path) {
            return self.inner.processes(path);
        }
        let Some(dir) = self.cgroup_dir(path) else {
            return Ok(Vec::new());
        };
        match read_pids_below(&*self.fs, &dir) {
            Ok(p) => Ok(p),
            Err(e) if missing(&e) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    fn processes_anywhere(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        if self.bound(path) {
            self.processes(path)
        } else {
            self.inner.processes_anywhere(path)
        }
    }

    /// For a bound group: its unit's cgroup's figures; none (not an error)
    /// while the unit has no cgroup.
    fn stats_of(&self, path: &GroupPath, select: StatSelect) -> Result<GroupStats, BackendError> {
        if !self.bound(path) {
            return self.inner.stats_of(path, select);
        }
        let Some(dir) = self.cgroup_dir(path) else {
            return Ok(GroupStats::default());
        };
        Ok(read_stats(&*self.fs, &dir, select)?)
    }

    fn freeze_state(&self, path: &GroupPath) -> Result<Option<FreezeState>, BackendError> {
        if !self.bound(path) {
            return self.inner.freeze_state(path);
        }
        match self.cgroup_dir(path) {
            None => Ok(None),
            Some(dir) => Ok(read_freeze_state(&*self.fs, &dir)?),
        }
    }

    /// Islands are never bound: the wrapped backend's answer; a bound
    /// group's CPUs are systemd's to say (`None`).
    fn cpuset(&self, path: &GroupPath) -> Result<Option<atoll_core::CpuSet>, BackendError> {
        if self.bound(path) {
            return Ok(None);
        }
        self.inner.cpuset(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_groups_stay_below_the_mount() {
        let m = Path::new("/sys/fs/cgroup");
        assert_eq!(
            under_mount(m, "/system.slice/nginx.service"),
            Some(m.join("system.slice/nginx.service"))
        );
        for bad in ["", "/", "system.slice/x.service", "/a/../b", "/.."] {
            assert_eq!(under_mount(m, bad), None, "{bad:?}");
        }
    }
}
