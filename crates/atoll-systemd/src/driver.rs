//! [`SystemdDriver`]: set-up, bindings, and applying settings to bound
//! groups through systemd.
//!
//! Applying to a bound group makes one `SetUnitProperties` call holding
//! only the properties whose value differs from what the driver last set
//! there, and those atoll no longer asks for (set back to their
//! originals). systemd checks a whole call before it applies any of it
//! (`bus_unit_set_properties` walks the properties twice: first only
//! checking, then applying), so a refusal leaves the unit as it was: the
//! driver reports [`BackendError::Refused`] and its record of what is set
//! does not change. Before a property of an existing unit is first changed,
//! its value is read and kept as the original; ending the binding puts back
//! every changed property in one call and thaws what atoll froze.
//!
//! A bound group's cgroup is not below its island's, so it does not
//! inherit the island's CPUs and memory nodes: where a bound group's
//! settings leave `cpus` or `mems` unset, the driver uses those last
//! applied to its nearest ancestor (normally the island).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use atoll_cgroup::{CgroupFs, RealFs};
use atoll_core::backend::{Backend, BackendError, External, Fallback};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::spec::check_unit_name;
use atoll_core::{CpuSet, NodeSet};

use crate::dbus::{BusAddress, DbusManager};
use crate::error::{refused, unavailable, SystemdError};
use crate::manager::{Manager, ManagerError};
use crate::record::{default_of, default_property, Binding};
use crate::translate::{translate, Context, Wanted};
use crate::value::{
    assemble, describe, io_key, parse_version, property_of, show, since, value_of_key, PropValue,
    ALL, IO_LIMITS, MIN_VERSION,
};

/// The slice atoll's scopes are started in by default.
pub const DEFAULT_SLICE: &str = "atoll.slice";

/// How the driver reaches systemd and where things are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Where systemd is.
    pub bus: BusAddress,
    /// The slice atoll's scopes are started in ([`DEFAULT_SLICE`]).
    pub slice: String,
    /// The cgroup2 mount, below which units' `ControlGroup` paths lie.
    pub cgroup_mount: PathBuf,
    /// The longest a call to systemd, or a scope's start, may take.
    pub timeout: Duration,
    /// How often at most the driver asks systemd again for the cgroup of
    /// a bound unit that has none (a stopped service), when monitoring.
    pub refresh: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            bus: BusAddress::System,
            slice: DEFAULT_SLICE.to_string(),
            cgroup_mount: PathBuf::from("/sys/fs/cgroup"),
            timeout: Duration::from_secs(10),
            refresh: Duration::from_secs(1),
        }
    }
}

impl Options {
    /// The defaults, with the cgroup2 mount at `mount`.
    pub fn for_mount(mount: impl Into<PathBuf>) -> Self {
        Self {
            cgroup_mount: mount.into(),
            ..Self::default()
        }
    }
}

/// Whether systemd runs this machine (it is PID 1 and has booted it:
/// `/run/systemd/system` exists, as `sd_booted()` checks).
pub fn detect() -> bool {
    detect_in(Path::new("/run"))
}

/// [`detect`] with another `/run`.
pub fn detect_in(run: &Path) -> bool {
    run.join("systemd/system").is_dir()
}

/// Where a bound unit's cgroup was last found.
#[derive(Debug, Default)]
pub(crate) struct CgroupCache {
    pub dir: Option<PathBuf>,
    pub checked: Option<Instant>,
}

/// A [`Backend`] that sets the resources of groups bound to systemd units
/// through systemd's D-Bus API and hands every other group to the backend
/// it wraps (normally `Cgroup2Backend`), unchanged.
pub struct SystemdDriver<B: Backend> {
    pub(crate) inner: B,
    pub(crate) manager: Box<dyn Manager>,
    pub(crate) fs: Arc<dyn CgroupFs>,
    pub(crate) options: Options,
    version: u32,
    version_text: String,
    pub(crate) bindings: BTreeMap<GroupPath, Binding>,
    /// `cpus` and `mems` last applied to each group, for bound groups to
    /// inherit.
    sets: BTreeMap<GroupPath, (Option<CpuSet>, Option<NodeSet>)>,
    /// Records given back that could not be read, kept as they were.
    pub(crate) unreadable: Vec<String>,
    pub(crate) cgroups: Mutex<BTreeMap<GroupPath, CgroupCache>>,
}

impl<B: Backend> std::fmt::Debug for SystemdDriver<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemdDriver")
            .field("version", &self.version_text)
            .field("options", &self.options)
            .field("bindings", &self.bindings)
            .finish_non_exhaustive()
    }
}

fn check_slice(slice: &str) -> Result<(), SystemdError> {
    let bad = |reason: String| SystemdError::BadSlice {
        slice: slice.to_string(),
        reason,
    };
    check_unit_name(slice).map_err(bad)?;
    if !slice.ends_with(".slice") || slice == "-.slice" {
        return Err(bad("not a slice below the root slice".into()));
    }
    Ok(())
}

impl<B: Backend> SystemdDriver<B> {
    /// Connects to systemd (see [`BusAddress`]) and wraps `inner`. Fails
    /// when systemd cannot be reached or is older than
    /// [`MIN_VERSION`](crate::value::MIN_VERSION).
    pub fn connect(inner: B, options: Options) -> Result<Self, SystemdError> {
        let m = DbusManager::connect(options.bus.clone(), options.timeout).map_err(|reason| {
            SystemdError::Connect {
                address: options.bus.to_string(),
                reason,
            }
        })?;
        Self::with_manager(inner, Box::new(m), Arc::new(RealFs), options)
    }

    /// Wraps `inner` with a given manager and cgroup filesystem (tests use
    /// `testutils::FakeSystemd` over a `FakeCgroupFs`).
    pub fn with_manager(
        inner: B,
        manager: Box<dyn Manager>,
        fs: Arc<dyn CgroupFs>,
        options: Options,
    ) -> Result<Self, SystemdError> {
        check_slice(&options.slice)?;
        let version_text = manager.version().map_err(|source| SystemdError::Call {
            call: "Version".into(),
            source,
        })?;
        let version = parse_version(&version_text)
            .ok_or_else(|| SystemdError::Version(version_text.clone()))?;
        if version < MIN_VERSION {
            return Err(SystemdError::TooOld {
                version: version_text,
                needs: MIN_VERSION,
            });
        }
        Ok(Self {
            inner,
            manager,
            fs,
            options,
            version,
            version_text,
            bindings: BTreeMap::new(),
            sets: BTreeMap::new(),
            unreadable: Vec::new(),
            cgroups: Mutex::new(BTreeMap::new()),
        })
    }

    /// The backend every unbound group goes to.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The wrapped backend, to reach its own calls (e.g. `retry_refused`).
    pub fn inner_mut(&mut self) -> &mut B {
        &mut self.inner
    }

    /// systemd's major version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// `systemd 252`, as status and refusals name the manager.
    pub fn manager_name(&self) -> String {
        format!("systemd {}", self.version)
    }

    /// The options it was made with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// What the driver records of a bound group.
    pub fn binding(&self, path: &GroupPath) -> Option<&Binding> {
        self.bindings.get(path)
    }

    /// Records given back by `set_outside_changes` that could not be read
    /// (each line as given, and why); they are kept in `outside_changes`.
    pub fn unreadable_records(&self) -> &[String] {
        &self.unreadable
    }

    pub(crate) fn lock_cgroups(&self) -> MutexGuard<'_, BTreeMap<GroupPath, CgroupCache>> {
        self.cgroups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers the CPUs and nodes applied to a group.
    pub(crate) fn note_sets(&mut self, path: &GroupPath, s: &GroupSettings) {
        self.sets
            .insert(path.clone(), (s.cpus.clone(), s.mems.clone()));
    }

    pub(crate) fn forget_sets(&mut self, path: &GroupPath) {
        self.sets.remove(path);
    }

    /// `s` with unset `cpus` and `mems` taken from the nearest ancestor.
    fn inherit(&self, path: &GroupPath, s: &GroupSettings) -> GroupSettings {
        let mut out = s.clone();
        let mut p = path.parent();
        while let Some(a) = p {
            if out.cpus.is_some() && out.mems.is_some() {
                break;
            }
            if let Some((c, m)) = self.sets.get(&a) {
                if out.cpus.is_none() {
                    out.cpus.clone_from(c);
                }
                if out.mems.is_none() {
                    out.mems.clone_from(m);
                }
            }
            p = a.parent();
        }
        out
    }

    fn refused(
        &self,
        b: &Binding,
        call: &BTreeMap<String, PropValue>,
        e: ManagerError,
    ) -> BackendError {
        match e {
            ManagerError::Method { .. } => refused(
                self.manager_name(),
                &b.group,
                b.unit(),
                describe(call),
                e.to_string(),
            ),
            ManagerError::Bus(why) => unavailable(
                format!(
                    "setting {} on {} (group {})",
                    describe(call),
                    b.unit(),
                    b.group
                ),
                why,
            ),
        }
    }

    /// Binds `path` (see [`Actuator::bind`]).
    pub(crate) fn bind_group(
        &mut self,
        path: &GroupPath,
        to: &External,
    ) -> Result<(), BackendError> {
        let what = || format!("binding group {path} to {to}");
        if let Some(b) = self.bindings.get(path) {
            if &b.external == to {
                return Ok(());
            }
            return Err(unavailable(
                what(),
                format!("it is bound to {}: unbind it first", b.external),
            ));
        }
        if path.is_root() {
            return Err(unavailable(what(), "atoll's root cannot be bound"));
        }
        let name = match to {
            External::SystemdUnit(n) | External::Scope(n) => n,
        };
        check_unit_name(name).map_err(|why| unavailable(what(), why))?;
        if let Some(other) = self.bindings.values().find(|b| b.unit() == name) {
            return Err(unavailable(
                what(),
                format!("{name} is bound to group {}", other.group),
            ));
        }
        match to {
            External::Scope(_) if !name.ends_with(".scope") => {
                return Err(unavailable(
                    what(),
                    format!("{name:?} is not a scope name (NAME.scope)"),
                ));
            }
            External::Scope(_) => {}
            External::SystemdUnit(_) => {
                let info = self
                    .manager
                    .unit(name)
                    .map_err(|e| unavailable(what(), format!("systemd: {e}")))?;
                if !info.is_loaded() {
                    return Err(unavailable(
                        what(),
                        format!("systemd has no such unit (LoadState={})", info.load_state),
                    ));
                }
            }
        }
        let mut binding = Binding::new(path.clone(), to.clone());
        if !binding.is_scope() {
            binding.found = self.read_found(&binding)?;
        }
        self.bindings.insert(path.clone(), binding);
        self.lock_cgroups().remove(path);
        Ok(())
    }

    /// Every property this systemd has that the driver may set, as the
    /// unit of `b` has it now (see [`Binding::found`]).
    fn read_found(&self, b: &Binding) -> Result<BTreeMap<String, PropValue>, BackendError> {
        let names: Vec<&str> = ALL
            .iter()
            .copied()
            .filter(|p| since(p) <= self.version)
            .collect();
        let read = self.manager.properties(b.unit(), &names).map_err(|e| {
            unavailable(
                format!(
                    "binding group {} to {}: reading its properties",
                    b.group, b.external
                ),
                e.to_string(),
            )
        })?;
        Ok(names
            .into_iter()
            .map(|p| {
                let v = read.get(p).cloned().unwrap_or_else(|| default_property(p));
                (p.to_string(), v)
            })
            .collect())
    }

    /// The originals of `keys`: as the unit had them when it was bound
    /// ([`Binding::found`]), else (a binding recorded before that existed)
    /// read from the unit now.
    fn read_originals(
        &self,
        b: &Binding,
        keys: &[&String],
    ) -> Result<BTreeMap<String, PropValue>, BackendError> {
        let mut out = BTreeMap::new();
        let mut rest = Vec::new();
        for k in keys {
            match b.found.get(property_of(k)) {
                Some(v) => {
                    out.insert((*k).clone(), value_of_key(k, v));
                }
                None => rest.push(*k),
            }
        }
        if rest.is_empty() {
            return Ok(out);
        }
        let keys = rest;
        let mut names: Vec<&str> = keys.iter().map(|k| property_of(k)).collect();
        names.dedup();
        let read = self.manager.properties(b.unit(), &names).map_err(|e| {
            unavailable(
                format!(
                    "reading {} of {} (group {})",
                    names.join(", "),
                    b.unit(),
                    b.group
                ),
                e.to_string(),
            )
        })?;
        out.extend(keys.iter().map(|k| {
            let v = read
                .get(property_of(k))
                .map_or_else(|| default_of(k), |v| value_of_key(k, v));
            ((*k).clone(), v)
        }));
        Ok(out)
    }

    /// Applies `settings` to the bound group `path`.
    pub(crate) fn apply_bound(
        &mut self,
        path: &GroupPath,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        let settings = self.inherit(path, settings);
        let Some(b) = self.bindings.get(path) else {
            return Err(BackendError::NoGroup(path.clone()));
        };
        // The wrapped backend's capabilities read files; only an optional
        // RT budget needs one of them.
        let rt_groups = settings.rt_budget.is_some()
            && settings.rt_budget_optional
            && self.inner.capabilities().rt_groups;
        let cx = Context {
            unit: b.unit(),
            version: self.version,
            rt_groups,
        };
        let Wanted {
            props,
            frozen,
            mut fallbacks,
        } = translate(path, &settings, &cx);
        if b.is_scope() && !b.started {
            let b = self
                .bindings
                .get_mut(path)
                .ok_or_else(|| BackendError::NoGroup(path.clone()))?;
            b.pending = props;
            b.pending_frozen = frozen;
            return Ok(fallbacks);
        }
        let mut call: BTreeMap<String, PropValue> = props
            .iter()
            .filter(|(k, v)| b.set.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let dropped: Vec<String> = b
            .set
            .keys()
            .filter(|k| !props.contains_key(*k))
            .cloned()
            .collect();
        let need: Vec<&String> = if b.is_scope() {
            Vec::new()
        } else {
            call.keys()
                .filter(|k| !b.originals.contains_key(*k))
                .collect()
        };
        let new_originals = if need.is_empty() {
            BTreeMap::new()
        } else {
            self.read_originals(b, &need)?
        };
        for k in &dropped {
            let back = b.originals.get(k).cloned().unwrap_or_else(|| default_of(k));
            call.insert(k.clone(), back);
        }
        if !call.is_empty() {
            self.manager
                .set_properties(b.unit(), &assemble(&call))
                .map_err(|e| self.refused(b, &call, e))?;
        }
        let freeze = (frozen != b.frozen).then(|| {
            if frozen {
                self.manager.freeze(b.unit())
            } else {
                self.manager.thaw(b.unit())
            }
        });
        let unit = b.unit().to_string();
        let b = self
            .bindings
            .get_mut(path)
            .ok_or_else(|| BackendError::NoGroup(path.clone()))?;
        b.originals.extend(new_originals);
        for k in &dropped {
            b.set.remove(k);
            b.originals.remove(k);
        }
        b.set.extend(props);
        match freeze {
            None => {}
            Some(Ok(())) => b.frozen = frozen,
            Some(Err(e)) => fallbacks.push(Fallback {
                path: path.clone(),
                knob: "cgroup.freeze".into(),
                wanted: if frozen { "1" } else { "0" }.into(),
                got: if b.frozen { "1" } else { "0" }.into(),
                reason: format!(
                    "systemd {} refused to {} {unit}: {e}",
                    self.version,
                    if frozen { "freeze" } else { "thaw" }
                ),
            }),
        }
        Ok(fallbacks)
    }

    /// Ends the binding of `path`: an existing unit gets back every
    /// property atoll changed (one call) and is thawed if atoll froze it; a
    /// scope is left to end with its processes. The binding is forgotten
    /// only once that worked.
    pub(crate) fn end_binding(&mut self, path: &GroupPath) -> Result<Vec<String>, BackendError> {
        let Some(b) = self.bindings.get(path).cloned() else {
            return Ok(Vec::new());
        };
        let mut lines = Vec::new();
        if !b.is_scope() {
            let mut back: BTreeMap<String, PropValue> = b
                .set
                .keys()
                .map(|k| {
                    (
                        k.clone(),
                        b.originals.get(k).cloned().unwrap_or_else(|| default_of(k)),
                    )
                })
                .collect();
            if b.restored {
                back.extend(self.unrecorded_changes(&b));
            }
            let gone = |e: &ManagerError| e.is_no_such_unit();
            if !back.is_empty() {
                match self.manager.set_properties(b.unit(), &assemble(&back)) {
                    Ok(()) => lines.extend(back.iter().map(|(k, v)| {
                        format!(
                            "{}: {} put back to {}",
                            b.unit(),
                            property_of(k),
                            show(k, v)
                        )
                    })),
                    Err(e) if gone(&e) => lines.push(format!(
                        "{} no longer exists: nothing to put back ({})",
                        b.unit(),
                        describe(&back)
                    )),
                    Err(e) => return Err(self.refused(&b, &back, e)),
                }
            }
            if b.frozen {
                let unit = b.unit().to_string();
                if let Some(b) = self.bindings.get_mut(path) {
                    b.set.clear();
                    b.originals.clear();
                }
                match self.manager.thaw(&unit) {
                    Ok(()) => lines.push(format!("{unit}: thawed")),
                    Err(e) if gone(&e) => {}
                    Err(e) => {
                        return Err(unavailable(
                            format!("thawing {unit} (group {path})"),
                            e.to_string(),
                        ))
                    }
                }
            }
        }
        self.bindings.remove(path);
        self.lock_cgroups().remove(path);
        Ok(lines)
    }

    /// After a restart, the properties of `b`'s unit that differ from its
    /// values at binding (`found`) without a record of atoll's setting them
    /// (`set`): a run that crashed after a change and before its state
    /// file was saved again. Returns each with its value at binding. None
    /// when the unit cannot be read (a unit that is gone has nothing to put
    /// back).
    fn unrecorded_changes(&self, b: &Binding) -> BTreeMap<String, PropValue> {
        let mut out = BTreeMap::new();
        let names: Vec<&str> = b.found.keys().map(String::as_str).collect();
        let Ok(now) = self.manager.properties(b.unit(), &names) else {
            return out;
        };
        for (p, was) in &b.found {
            let is = now.get(p).cloned().unwrap_or_else(|| default_property(p));
            if &is == was {
                continue;
            }
            match &is {
                PropValue::DeviceLimits(limits) if IO_LIMITS.contains(&p.as_str()) => {
                    for (dev, _) in limits {
                        let key = io_key(p, dev);
                        let back = value_of_key(&key, was);
                        if !b.set.contains_key(&key) && value_of_key(&key, &is) != back {
                            out.insert(key, back);
                        }
                    }
                }
                _ if !b.set.contains_key(p) => {
                    out.insert(p.clone(), was.clone());
                }
                _ => {}
            }
        }
        out
    }

    /// Every binding's record line.
    pub(crate) fn record_lines(&self) -> Vec<String> {
        self.bindings.values().map(Binding::to_line).collect()
    }

    /// Takes the driver's lines out of `changes` (the rest are the wrapped
    /// backend's).
    pub(crate) fn take_records(&mut self, changes: Vec<String>) -> Vec<String> {
        let mut rest = Vec::new();
        for line in changes {
            match Binding::from_line(&line) {
                None => rest.push(line),
                Some(Ok(mut b)) => {
                    b.restored = true;
                    self.lock_cgroups().remove(&b.group);
                    self.bindings.insert(b.group.clone(), b);
                }
                Some(Err(_)) => self.unreadable.push(line),
            }
        }
        rest
    }
}

impl<B: Backend> SystemdDriver<B> {
    /// Whether `path` is bound.
    pub fn is_bound(&self, path: &GroupPath) -> bool {
        self.bindings.contains_key(path)
    }
}

#[cfg(test)]
#[path = "driver_tests.rs"]
pub(crate) mod tests;
