//! A fake systemd for tests (feature `testutils`).
//!
//! [`FakeSystemd`] implements [`Manager`] over `atoll_cgroup`'s
//! [`FakeCgroupFs`] the way systemd behaves where atoll can see it:
//! - units have cgroups in the fake tree (slices enable the controllers
//!   for their children), with their processes in `cgroup.procs`;
//! - `SetUnitProperties` checks every property first and applies none if
//!   one is refused (unknown to the emulated version, out of range, or made
//!   to fail with [`FakeSystemd::refuse`]), then writes the unit's cgroup
//!   files as systemd would (`cpuset.cpus`, `cpu.weight`/`cpu.idle`,
//!   `cpu.max`, `memory.*`, `io.weight`, `io.max`);
//! - version gates: `AllowedCPUs` 244, `MemoryMin` 240, `CPUQuotaPeriodUSec`
//!   242, `FreezeUnit` 246, `CPUWeight` 0 (idle) 252, and nothing below 238
//!   for `AttachProcessesToUnit`;
//! - transient scopes: `StartTransientUnit` makes the cgroup in the slice
//!   and moves the `PIDs` in; `AttachProcessesToUnit` needs `Delegate=yes`
//!   and an active unit; a scope whose processes are all gone ends and is
//!   forgotten (checked at every call);
//! - `FreezeUnit`/`ThawUnit` write `cgroup.freeze`;
//! - a stopped service has no cgroup (its processes are killed).
//!
//! Every call is logged ([`FakeSystemd::calls`]) as a line such as
//! `SetUnitProperties nginx.service CPUWeight=200`. Clones share the same
//! state.

mod files;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use atoll_cgroup::testutils::FakeCgroupFs;
use atoll_core::backend::Backend;
use files::{check, defaults, merge, slice_cgroup, CONTROLLERS};

use crate::driver::{Options, SystemdDriver};
use crate::manager::{Manager, ManagerError, UnitInfo, NO_SUCH_UNIT, UNIT_EXISTS};
use crate::value::{describe, PropValue, FREEZE_SINCE};

const INVALID_ARGS: &str = "org.freedesktop.DBus.Error.InvalidArgs";
const UNKNOWN_METHOD: &str = "org.freedesktop.DBus.Error.UnknownMethod";

#[derive(Clone, Debug)]
struct FakeUnit {
    cgroup: String,
    active: bool,
    scope: bool,
    delegate: bool,
    props: BTreeMap<String, PropValue>,
}

#[derive(Debug)]
struct State {
    version: u32,
    units: BTreeMap<String, FakeUnit>,
    refusals: Vec<(String, String)>,
    calls: Vec<String>,
    bus_down: bool,
}

/// A fake systemd over a fake cgroup tree. See the module docs.
#[derive(Clone, Debug)]
pub struct FakeSystemd {
    fs: FakeCgroupFs,
    mount: PathBuf,
    state: Arc<Mutex<State>>,
}

impl FakeSystemd {
    /// systemd 252 over the cgroup2 mount `mount` of `fs`, with no units.
    pub fn new(fs: FakeCgroupFs, mount: impl Into<PathBuf>) -> Self {
        Self {
            fs,
            mount: mount.into(),
            state: Arc::new(Mutex::new(State {
                version: 252,
                units: BTreeMap::new(),
                refusals: Vec::new(),
                calls: Vec::new(),
                bus_down: false,
            })),
        }
    }

    /// A fake cgroup2 machine offering `cpuset cpu io memory` and systemd
    /// 252 on it; the fake filesystem and the mount come with it.
    pub fn v2_machine() -> Self {
        let (fs, mount) = FakeCgroupFs::v2_machine(&CONTROLLERS);
        Self::new(fs, mount)
    }

    /// Emulates systemd `version` (what it has and refuses).
    pub fn with_version(self, version: u32) -> Self {
        self.lock().version = version;
        self
    }

    /// Adds an active service whose cgroup is `cgroup` (below the mount,
    /// `/system.slice/nginx.service`), holding `pids`.
    pub fn with_service(self, name: &str, cgroup: &str, pids: &[u32]) -> Self {
        self.add_service(name, cgroup, pids);
        self
    }

    /// Gives a unit a property value before atoll comes (as its unit file
    /// or an administrator would).
    pub fn with_property(self, unit: &str, property: &str, value: PropValue) -> Self {
        self.set_property(unit, property, value);
        self
    }

    /// Makes a unit delegated (`Delegate=yes`): systemd then moves
    /// processes into it on request (`AttachProcessesToUnit`).
    pub fn with_delegate(self, unit: &str) -> Self {
        if let Some(u) = self.lock().units.get_mut(unit) {
            u.delegate = true;
        }
        self
    }

    /// [`Self::with_service`] on a shared fake.
    pub fn add_service(&self, name: &str, cgroup: &str, pids: &[u32]) {
        let version = self.lock().version;
        self.lock().units.insert(
            name.to_string(),
            FakeUnit {
                cgroup: cgroup.to_string(),
                active: false,
                scope: false,
                delegate: false,
                props: defaults(version),
            },
        );
        self.start(name, pids);
    }

    /// Adds a running, delegated scope in `slice` holding `pids`, as one
    /// started by someone else (or by an earlier run of atoll).
    pub fn add_scope(&self, name: &str, slice: &str, pids: &[u32]) {
        let props = vec![
            ("PIDs".to_string(), PropValue::Pids(pids.to_vec())),
            ("Slice".into(), PropValue::Str(slice.into())),
            ("Delegate".into(), PropValue::Bool(true)),
        ];
        if let Err(e) = self.start_scope(name, &props) {
            panic!("fake systemd: starting {name}: {e}");
        }
    }

    /// Starts a stopped unit again with `pids` (its cgroup is made and its
    /// properties written, as systemd does).
    pub fn start(&self, unit: &str, pids: &[u32]) {
        let Some(u) = self.lock().units.get(unit).cloned() else {
            return;
        };
        let dir = self.ensure_cgroup(&u.cgroup);
        for pid in pids {
            let _ = atoll_cgroup::CgroupFs::write(
                &self.fs,
                &dir.join("cgroup.procs"),
                &pid.to_string(),
            );
        }
        files::write_all(&self.fs, &dir, &u.props);
        if let Some(u) = self.lock().units.get_mut(unit) {
            u.active = true;
        }
    }

    /// Stops a unit: its processes are killed and its cgroup removed.
    pub fn stop(&self, unit: &str) {
        let Some(u) = self.lock().units.get(unit).cloned() else {
            return;
        };
        if let Some(dir) = self.dir_of(&u.cgroup) {
            for pid in atoll_cgroup::foreign::read_pids_below(&self.fs, &dir).unwrap_or_default() {
                self.fs.kill(pid);
            }
            files::remove_tree(&self.fs, &dir);
        }
        let mut st = self.lock();
        if u.scope {
            st.units.remove(unit);
        } else if let Some(u) = st.units.get_mut(unit) {
            u.active = false;
        }
    }

    /// Stops a unit and forgets it (its unit file was removed).
    pub fn remove_unit(&self, unit: &str) {
        self.stop(unit);
        self.lock().units.remove(unit);
    }

    /// Makes every `SetUnitProperties` or `StartTransientUnit` that sets
    /// `property` fail with `message` (`InvalidArgs`).
    pub fn refuse(&self, property: &str, message: &str) {
        self.lock()
            .refusals
            .push((property.to_string(), message.to_string()));
    }

    /// Drops every refusal.
    pub fn clear_refusals(&self) {
        self.lock().refusals.clear();
    }

    /// While `down`, every call fails as a broken bus would.
    pub fn set_bus_down(&self, down: bool) {
        self.lock().bus_down = down;
    }

    /// A unit's property as systemd holds it.
    pub fn property(&self, unit: &str, property: &str) -> Option<PropValue> {
        self.lock().units.get(unit)?.props.get(property).cloned()
    }

    /// Changes a property behind atoll's back (`systemctl set-property`).
    pub fn set_property(&self, unit: &str, property: &str, value: PropValue) {
        let u = {
            let mut st = self.lock();
            let Some(u) = st.units.get_mut(unit) else {
                return;
            };
            merge(&mut u.props, property, value);
            u.clone()
        };
        if let Some(dir) = self.dir_of(&u.cgroup).filter(|_| u.active) {
            files::write_all(&self.fs, &dir, &u.props);
        }
    }

    /// Whether systemd has the unit loaded.
    pub fn has_unit(&self, unit: &str) -> bool {
        self.lock().units.contains_key(unit)
    }

    /// Whether the unit's cgroup is frozen (`cgroup.freeze` is 1).
    pub fn is_frozen(&self, unit: &str) -> bool {
        self.cgroup_dir(unit)
            .is_some_and(|d| self.fs.get(&d.join("cgroup.freeze")).trim() == "1")
    }

    /// The unit's cgroup directory, while it has one.
    pub fn cgroup_dir(&self, unit: &str) -> Option<PathBuf> {
        let u = self.lock().units.get(unit).cloned()?;
        self.dir_of(&u.cgroup).filter(|_| u.active)
    }

    /// Every call so far, one line each.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// Returns and forgets the calls so far.
    pub fn take_calls(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().calls)
    }

    /// The calls so far whose line starts with `method`.
    pub fn calls_of(&self, method: &str) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| c.split(' ').next() == Some(method))
            .collect()
    }

    /// The fake cgroup filesystem.
    pub fn fs(&self) -> &FakeCgroupFs {
        &self.fs
    }

    /// The cgroup2 mount.
    pub fn mount(&self) -> &Path {
        &self.mount
    }

    /// A handle on this fake as a [`Manager`].
    pub fn manager(&self) -> Box<dyn Manager> {
        Box::new(self.clone())
    }

    /// Options for a driver over this fake: its mount, a short timeout, and
    /// no delay before a unit's cgroup is looked up again.
    pub fn options(&self) -> Options {
        Options {
            timeout: Duration::from_millis(500),
            refresh: Duration::ZERO,
            ..Options::for_mount(&self.mount)
        }
    }

    /// A [`SystemdDriver`] over this fake, wrapping `inner`.
    pub fn driver<B: Backend>(&self, inner: B) -> SystemdDriver<B> {
        self.driver_with(inner, self.options())
    }

    /// [`Self::driver`] with other options.
    pub fn driver_with<B: Backend>(&self, inner: B, options: Options) -> SystemdDriver<B> {
        match SystemdDriver::with_manager(inner, self.manager(), Arc::new(self.fs.clone()), options)
        {
            Ok(d) => d,
            Err(e) => panic!("fake systemd: {e}"),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn dir_of(&self, cgroup: &str) -> Option<PathBuf> {
        let rel = cgroup.trim_start_matches('/');
        (!rel.is_empty()).then(|| self.mount.join(rel))
    }

    /// Makes the cgroup `cgroup` and its parents; every parent enables the
    /// controllers for its children (as slices do).
    fn ensure_cgroup(&self, cgroup: &str) -> PathBuf {
        files::ensure_cgroup(&self.fs, &self.mount, cgroup, true)
    }

    /// Ends scopes left without processes (systemd stops and forgets them).
    fn reap(&self) {
        let scopes: Vec<(String, String)> = self
            .lock()
            .units
            .iter()
            .filter(|(_, u)| u.scope && u.active)
            .map(|(n, u)| (n.clone(), u.cgroup.clone()))
            .collect();
        for (name, cg) in scopes {
            let Some(dir) = self.dir_of(&cg) else {
                continue;
            };
            if atoll_cgroup::foreign::read_pids_below(&self.fs, &dir)
                .unwrap_or_default()
                .is_empty()
            {
                files::remove_tree(&self.fs, &dir);
                self.lock().units.remove(&name);
            }
        }
    }

    /// Logs a call; fails if the bus is down.
    fn begin(&self, line: String) -> Result<u32, ManagerError> {
        let mut st = self.lock();
        st.calls.push(line);
        if st.bus_down {
            return Err(ManagerError::Bus("the fake bus is down".into()));
        }
        let v = st.version;
        drop(st);
        self.reap();
        Ok(v)
    }

    fn existing(&self, name: &str) -> Result<FakeUnit, ManagerError> {
        self.lock()
            .units
            .get(name)
            .cloned()
            .ok_or_else(|| ManagerError::method(NO_SUCH_UNIT, format!("Unit {name} not loaded.")))
    }

    /// Checks `props` all, against the version and the refusals.
    fn check_all(
        &self,
        version: u32,
        props: &[(String, PropValue)],
        scope: bool,
    ) -> Result<(), ManagerError> {
        let refusals = self.lock().refusals.clone();
        for (name, v) in props {
            check(version, name, v, scope)?;
            if let Some((_, msg)) = refusals.iter().find(|(p, _)| p == name) {
                return Err(ManagerError::method(INVALID_ARGS, msg.clone()));
            }
        }
        Ok(())
    }

    fn set_freeze(&self, name: &str, frozen: bool) -> Result<(), ManagerError> {
        let method = if frozen { "FreezeUnit" } else { "ThawUnit" };
        let version = self.begin(format!("{method} {name}"))?;
        if version < FREEZE_SINCE {
            return Err(ManagerError::method(
                UNKNOWN_METHOD,
                format!("Unknown method {method} or interface org.freedesktop.systemd1.Manager."),
            ));
        }
        let u = self.existing(name)?;
        let Some(dir) = self.dir_of(&u.cgroup).filter(|_| u.active) else {
            return Err(ManagerError::method(
                "org.freedesktop.systemd1.UnitInactive",
                format!("Unit {name} is not active."),
            ));
        };
        let v = if frozen { "1" } else { "0" };
        atoll_cgroup::CgroupFs::write(&self.fs, &dir.join("cgroup.freeze"), v)
            .map_err(|e| ManagerError::method("System.Error.EIO", e.to_string()))
    }
}

impl Manager for FakeSystemd {
    fn version(&self) -> Result<String, ManagerError> {
        let v = self.begin("Version".into())?;
        Ok(format!("{v}.1-1~fake"))
    }

    fn unit(&self, name: &str) -> Result<UnitInfo, ManagerError> {
        self.begin(format!("LoadUnit {name}"))?;
        Ok(match self.lock().units.get(name) {
            Some(u) => UnitInfo {
                load_state: "loaded".into(),
                active_state: if u.active { "active" } else { "inactive" }.into(),
                control_group: if u.active {
                    u.cgroup.clone()
                } else {
                    String::new()
                },
            },
            None => UnitInfo {
                load_state: "not-found".into(),
                active_state: "inactive".into(),
                control_group: String::new(),
            },
        })
    }

    fn properties(
        &self,
        name: &str,
        properties: &[&str],
    ) -> Result<BTreeMap<String, PropValue>, ManagerError> {
        self.begin(format!("Get {name} {}", properties.join(",")))?;
        let u = self.existing(name)?;
        Ok(properties
            .iter()
            .filter_map(|p| Some((p.to_string(), u.props.get(*p)?.clone())))
            .collect())
    }

    fn set_properties(
        &self,
        name: &str,
        props: &[(String, PropValue)],
    ) -> Result<(), ManagerError> {
        let version = self.begin(format!(
            "SetUnitProperties {name} {}",
            describe(props.iter().map(|(k, v)| (k, v)))
        ))?;
        let u = self.existing(name)?;
        self.check_all(version, props, false)?;
        let mut st = self.lock();
        let Some(unit) = st.units.get_mut(name) else {
            return Err(ManagerError::method(
                NO_SUCH_UNIT,
                format!("Unit {name} not loaded."),
            ));
        };
        for (k, v) in props {
            merge(&mut unit.props, k, v.clone());
        }
        let all = unit.props.clone();
        drop(st);
        if let Some(dir) = self.dir_of(&u.cgroup).filter(|_| u.active) {
            files::write_all(&self.fs, &dir, &all);
        }
        Ok(())
    }

    fn start_scope(&self, name: &str, props: &[(String, PropValue)]) -> Result<(), ManagerError> {
        let version = self.begin(format!(
            "StartTransientUnit {name} {}",
            describe(props.iter().map(|(k, v)| (k, v)))
        ))?;
        if self.lock().units.contains_key(name) {
            return Err(ManagerError::method(
                UNIT_EXISTS,
                format!("Unit {name} was already loaded or has a fragment file."),
            ));
        }
        self.check_all(version, props, true)?;
        let get = |k: &str| props.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let slice = match get("Slice") {
            Some(PropValue::Str(s)) => s,
            _ => "system.slice".to_string(),
        };
        let pids = match get("PIDs") {
            Some(PropValue::Pids(p)) if !p.is_empty() => p,
            _ => {
                return Err(ManagerError::method(
                    INVALID_ARGS,
                    "No PIDs specified for scope.",
                ));
            }
        };
        let cgroup = format!("{}/{name}", slice_cgroup(&slice));
        let dir = self.ensure_cgroup(&cgroup);
        for pid in &pids {
            if let Err(e) =
                atoll_cgroup::CgroupFs::write(&self.fs, &dir.join("cgroup.procs"), &pid.to_string())
            {
                files::remove_tree(&self.fs, &dir);
                let name = if e.raw_os_error() == Some(libc_esrch()) {
                    "System.Error.ESRCH"
                } else {
                    "System.Error.EIO"
                };
                return Err(ManagerError::method(
                    name,
                    format!("Failed to add PID {pid} to scope: {e}"),
                ));
            }
        }
        let mut unit_props = defaults(version);
        for (k, v) in props {
            if files::is_resource(k) {
                merge(&mut unit_props, k, v.clone());
            }
        }
        files::write_all(&self.fs, &dir, &unit_props);
        self.lock().units.insert(
            name.to_string(),
            FakeUnit {
                cgroup,
                active: true,
                scope: true,
                delegate: get("Delegate") == Some(PropValue::Bool(true)),
                props: unit_props,
            },
        );
        Ok(())
    }

    fn attach(&self, name: &str, subcgroup: &str, pids: &[u32]) -> Result<(), ManagerError> {
        let list: Vec<String> = pids.iter().map(u32::to_string).collect();
        let version = self.begin(format!(
            "AttachProcessesToUnit {name}{subcgroup} {}",
            list.join(" ")
        ))?;
        if version < crate::value::MIN_VERSION {
            return Err(ManagerError::method(
                UNKNOWN_METHOD,
                "Unknown method AttachProcessesToUnit.",
            ));
        }
        let u = self.existing(name)?;
        if !u.delegate {
            return Err(ManagerError::method(
                INVALID_ARGS,
                "Process migration not available on non-delegated units.",
            ));
        }
        let dir = self
            .dir_of(&u.cgroup)
            .filter(|_| u.active)
            .ok_or_else(|| ManagerError::method(INVALID_ARGS, "Unit is not active, refusing."))?;
        let dir = files::ensure_cgroup(&self.fs, &dir, subcgroup, false);
        for pid in pids {
            atoll_cgroup::CgroupFs::write(&self.fs, &dir.join("cgroup.procs"), &pid.to_string())
                .map_err(|e| {
                    let n = if e.raw_os_error() == Some(libc_esrch()) {
                        "System.Error.ESRCH"
                    } else {
                        "System.Error.EIO"
                    };
                    ManagerError::method(n, format!("Failed to attach PID {pid}: {e}"))
                })?;
        }
        Ok(())
    }

    fn freeze(&self, name: &str) -> Result<(), ManagerError> {
        self.set_freeze(name, true)
    }

    fn thaw(&self, name: &str) -> Result<(), ManagerError> {
        self.set_freeze(name, false)
    }
}

/// `ESRCH` (3 on Linux), without a libc dependency here.
fn libc_esrch() -> i32 {
    3
}

#[cfg(test)]
mod tests;
