//! Processes and bound groups: atoll's transient scopes, and giving
//! processes back.
//!
//! A group bound to [`External::Scope`](atoll_core::backend::External::Scope)
//! has no cgroup until its first process: `move_process` then starts the
//! scope with `StartTransientUnit` (in atoll's slice, with the properties
//! of the settings last applied, so it is born confined, `Delegate=yes`
//! because systemd moves later processes only into delegated units, and
//! `CollectMode=inactive-or-failed` so it is gone once it ends). Later
//! processes are attached with `AttachProcessesToUnit`; a scope that ended
//! with its last process is started again.
//!
//! Scopes are never stopped by atoll: stopping one kills its processes.
//! When the binding ends (and when the daemon stops), a scope is left to
//! end with its processes, keeping the properties it has.
//!
//! Giving a process of a scope back (`restore_process`): into atoll's own
//! hierarchy, where atoll may write, the wrapped backend moves it. Any other
//! origin is a cgroup systemd owns, which only systemd may move processes
//! into, and only into delegated units: the driver asks systemd to
//! (`AttachProcessesToUnit` to the unit the origin's cgroup belongs to, with
//! the path below it, e.g. `user@1000.service` and `/app.slice/x.scope`),
//! and if systemd refuses (a session scope or an ordinary service is not
//! delegated) the process stays in its scope and the call fails naming why:
//! writing it into the origin's `cgroup.procs` would break systemd's rule
//! that it alone moves processes into its cgroups. Processes of a bound
//! existing unit are systemd's: they are never moved.

use std::collections::BTreeMap;
use std::thread::sleep;
use std::time::{Duration, Instant};

use atoll_core::backend::{Backend, BackendError};
use atoll_core::plan::GroupPath;
use atoll_core::process::CgroupMembership;

use crate::driver::SystemdDriver;
use crate::error::{refused, unavailable};
use crate::manager::{unit_of_cgroup, ManagerError};
use crate::value::{assemble, describe, PropValue};

impl<B: Backend> SystemdDriver<B> {
    /// `move_process` into a bound group.
    pub(crate) fn move_bound(&mut self, pid: u32, path: &GroupPath) -> Result<(), BackendError> {
        let b = self
            .bindings
            .get(path)
            .cloned()
            .ok_or_else(|| BackendError::NoGroup(path.clone()))?;
        let name = b.unit();
        if !b.is_scope() {
            return Err(unavailable(
                format!("moving process {pid} into group {path}"),
                format!(
                    "the group is bound to systemd unit {name}, whose processes systemd places"
                ),
            ));
        }
        let running = || {
            self.manager
                .unit(name)
                .is_ok_and(|i| i.is_loaded() && i.is_active())
        };
        if b.started || running() {
            match self.manager.attach(name, "", &[pid]) {
                Ok(()) => {
                    if !b.started {
                        self.adopt_running_scope(path)?;
                    }
                    return Ok(());
                }
                Err(e) if e.is_no_process() => return Err(BackendError::NoProcess(pid)),
                // It ended with its last process: start it again.
                Err(_) if !running() => {}
                Err(e) => {
                    return Err(unavailable(
                        format!("attaching process {pid} to {name} (group {path})"),
                        e.to_string(),
                    ))
                }
            }
        }
        self.start_scope(pid, path)
    }

    /// A scope of the group's name runs already (an earlier run started it
    /// and its record was lost): take it, and give it the settings last
    /// applied.
    fn adopt_running_scope(&mut self, path: &GroupPath) -> Result<(), BackendError> {
        let Some(b) = self.bindings.get(path).cloned() else {
            return Ok(());
        };
        if !b.pending.is_empty() {
            self.manager
                .set_properties(b.unit(), &assemble(&b.pending))
                .map_err(|e| self.start_error(&b.pending, b.unit(), path, e))?;
        }
        if let Some(b) = self.bindings.get_mut(path) {
            b.started = true;
            b.set = std::mem::take(&mut b.pending);
        }
        Ok(())
    }

    fn start_error(
        &self,
        props: &BTreeMap<String, PropValue>,
        name: &str,
        path: &GroupPath,
        e: ManagerError,
    ) -> BackendError {
        match e {
            ManagerError::Method { .. } => refused(
                self.manager_name(),
                path,
                name,
                describe(props),
                e.to_string(),
            ),
            ManagerError::Bus(why) => {
                unavailable(format!("starting scope {name} (group {path})"), why)
            }
        }
    }

    /// Starts the group's scope with `pid` in it, and waits until systemd
    /// has it running.
    fn start_scope(&mut self, pid: u32, path: &GroupPath) -> Result<(), BackendError> {
        let Some(b) = self.bindings.get(path).cloned() else {
            return Err(BackendError::NoGroup(path.clone()));
        };
        let name = b.unit();
        let (wanted, frozen) = if b.started {
            (b.set.clone(), b.frozen)
        } else {
            (b.pending.clone(), b.pending_frozen)
        };
        let mut props = assemble(&wanted);
        props.extend([
            ("PIDs".to_string(), PropValue::Pids(vec![pid])),
            ("Slice".into(), PropValue::Str(self.options.slice.clone())),
            ("Delegate".into(), PropValue::Bool(true)),
            (
                "CollectMode".into(),
                PropValue::Str("inactive-or-failed".into()),
            ),
            (
                "Description".into(),
                PropValue::Str(format!("atoll group {path}")),
            ),
        ]);
        if let Err(e) = self.manager.start_scope(name, &props) {
            if e.is_no_process() {
                return Err(BackendError::NoProcess(pid));
            }
            return Err(self.start_error(&wanted, name, path, e));
        }
        self.wait_active(name, path)?;
        let froze = frozen && self.manager.freeze(name).is_ok();
        if let Some(b) = self.bindings.get_mut(path) {
            b.started = true;
            b.set = wanted;
            b.frozen = froze;
            b.pending.clear();
            b.pending_frozen = false;
        }
        self.lock_cgroups().remove(path);
        Ok(())
    }

    /// Waits for a scope's start job: until it is `active`, for at most the
    /// call timeout.
    fn wait_active(&self, name: &str, path: &GroupPath) -> Result<(), BackendError> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            let state = match self.manager.unit(name) {
                Ok(i) if i.active_state == "active" => return Ok(()),
                Ok(i) if i.active_state == "failed" => {
                    return Err(unavailable(
                        format!("starting scope {name} (group {path})"),
                        "systemd shows it failed",
                    ))
                }
                Ok(i) => format!("ActiveState={}", i.active_state),
                Err(e) => e.to_string(),
            };
            if start.elapsed() >= self.options.timeout {
                return Err(unavailable(
                    format!("starting scope {name} (group {path})"),
                    format!("not active after {:?} ({state})", self.options.timeout),
                ));
            }
            sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// `restore_process` for a process in a bound group; `None` when it is
    /// in none (the wrapped backend gives it back), or in a scope and from
    /// atoll's own hierarchy (likewise). See the module docs.
    pub(crate) fn restore_bound(
        &self,
        pid: u32,
        origin: &CgroupMembership,
    ) -> Option<Result<(), BackendError>> {
        let b = self.bindings.values().find(|b| {
            self.cgroup_dir(&b.group).is_some_and(|dir| {
                atoll_cgroup::foreign::read_pids_below(&*self.fs, &dir)
                    .unwrap_or_default()
                    .contains(&pid)
            })
        })?;
        let to = origin.unified().unwrap_or("/");
        let what = || format!("giving process {pid} back to {to}");
        if !b.is_scope() {
            return Some(Err(unavailable(
                what(),
                format!(
                    "it is a process of systemd unit {} (group {}), which systemd places: atoll never moves it",
                    b.unit(),
                    b.group
                ),
            )));
        }
        let root = format!("/{}", self.inner.root_name().trim_matches('/'));
        if to == root || to.starts_with(&format!("{root}/")) {
            return None;
        }
        let stays = |why: String| {
            Some(Err(unavailable(
                what(),
                format!("it stays in scope {}: {why}", b.unit()),
            )))
        };
        let Some((unit, sub)) = unit_of_cgroup(to) else {
            return stays(format!(
                "{to} is not the cgroup of a unit systemd could move it into"
            ));
        };
        match self.manager.attach(unit, &sub, &[pid]) {
            Ok(()) => Some(Ok(())),
            Err(e) if e.is_no_process() => Some(Err(BackendError::NoProcess(pid))),
            Err(e) => stays(format!(
                "only systemd may move processes into {unit}'s cgroup, and it did not: {e}"
            )),
        }
    }
}

#[cfg(test)]
#[path = "scope_tests.rs"]
mod tests;
