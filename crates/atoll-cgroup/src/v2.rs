//! The `cgroup2` backend: atoll's hierarchy in the unified tree.
//!
//! Groups live at `<mount>/<root name>/<group path>`. Before creating or
//! updating a group, [`Cgroup2Backend`] makes sure its parent's
//! `cgroup.subtree_control` enables the controllers atoll uses (`cpuset cpu
//! io memory`, those the parent offers). For atoll's root that parent is not
//! atoll's: only the missing controllers are added, the backend remembers
//! which ([`Cgroup2Backend::added_parent_controllers`]) and
//! [`Cgroup2Backend::restore_parent_controllers`] removes exactly those at
//! teardown. That file is the only one outside its root atoll writes, apart
//! from `cgroup.procs` when a process is restored to its origin.
//!
//! Every knob is read first and written only if it differs, so re-applying an
//! unchanged plan costs reads only; `apply_changed` syncs only the parts
//! whose wanted values changed since the group last took its settings (see
//! [`crate::parts`]), so a `trigger`'s boost reads `cpu.idle` and
//! `cpu.weight` and writes `cpu.weight`. `None` in the settings means the kernel's
//! default, so removing a setting from the spec resets it. A knob the kernel
//! refuses, or whose controller or file is missing, becomes a [`Fallback`].
//! A refused partition is remembered and not retried until the group's CPUs
//! or its parent's effective CPUs change, the group is removed, or
//! [`Cgroup2Backend::retry_refused`]. `frozen` is `cgroup.freeze` (see
//! [`crate::freezer`]); a frozen group is thawed before it is removed.
//!
//! Partitions. atoll's root is a member cgroup holding every CPU it manages
//! (the host's too), so an island under it cannot be a *local* partition
//! (one whose parent is a partition root). Kernels with
//! `cpuset.cpus.exclusive` (6.7+) allow *remote* partitions: the island's
//! CPUs are claimed in the `cpuset.cpus.exclusive` of each atoll group above
//! it, outermost first, then set as its own, then `root` is written (the
//! order Linux 6.12 needs; see `docs/backends.md`). Claims are kept equal to
//! what the children hold: a partition that shrinks, goes back to member or
//! is removed gives its CPUs back, and a valid partition's exclusive CPUs
//! follow its `cpuset.cpus`. On older kernels (6.1) the partition reads
//! `root invalid (Parent is not a partition root)`: `member` is written back
//! and a [`Fallback`] carries the kernel's words. Claims never go above
//! atoll's root.

use std::path::{Path, PathBuf};
use std::time::Duration;

use atoll_core::backend::{
    Actuator, BackendError, BackendKind, Capabilities, Fallback, FreezeState, GroupStats, Monitor,
    StatSelect,
};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::process::CgroupMembership;
use atoll_core::CpuSet;

use crate::affinity::keeping_masks;
use crate::common::{
    check_root_name, ensure_dir, group_dir, nearest_existing, rmdir_retry, sync, write, write_pid,
    Memo, Outcome, Report,
};
use crate::delegate::Delegation;
use crate::error::CgroupError;
use crate::fs::{CgroupFs, RealFs};
use crate::kept::{KeptFiles, Through};
use crate::knobs::{
    format_cpu_max, format_io_max, format_io_weight, format_memory, io_max_updates, memory_matches,
    parse_cpu_max, parse_i64, parse_io_max, parse_io_weight, parse_memory, DEFAULT_PERIOD_US,
};
use crate::parts::{Part, Parts, Reported, COUNT};
use crate::stats::read_opt;

/// Controllers atoll enables for its groups, in the kernel's order.
pub const CONTROLLERS: [&str; 4] = ["cpuset", "cpu", "io", "memory"];

const PARTITION: &str = "cpuset.cpus.partition";
const EXCLUSIVE: &str = "cpuset.cpus.exclusive";

/// The cgroup2 actuator and monitor.
#[derive(Debug)]
pub struct Cgroup2Backend<F: CgroupFs = RealFs> {
    mount: PathBuf,
    root: String,
    fs: F,
    added_to_parent: Vec<String>,
    delegation: Option<Delegation>,
    memo: Memo,
    /// Counter files kept open between epochs (see [`crate::kept`]).
    kept: KeptFiles,
    /// Knobs found different and rewritten, until taken.
    rewrites: Vec<atoll_core::backend::Rewrite>,
    rmdir_attempts: u32,
    rmdir_delay: Duration,
    /// What each part of a group reported at its last sync (see
    /// [`crate::parts`]).
    reported: Reported,
}

fn ids(text: &str) -> Option<CpuSet> {
    CpuSet::parse(text.trim()).ok()
}

impl<F: CgroupFs> Cgroup2Backend<F> {
    /// A backend for the hierarchy `<mount>/<root_name>` (e.g.
    /// `/sys/fs/cgroup` and `atoll`). Nothing is created until `apply`.
    pub fn new(mount: impl Into<PathBuf>, root_name: &str, fs: F) -> Result<Self, CgroupError> {
        check_root_name(root_name)?;
        Ok(Self {
            mount: mount.into(),
            root: root_name.to_string(),
            fs,
            added_to_parent: Vec::new(),
            delegation: None,
            memo: Memo::default(),
            kept: KeptFiles::default(),
            rewrites: Vec::new(),
            rmdir_attempts: 10,
            rmdir_delay: Duration::from_millis(20),
            reported: Reported::default(),
        })
    }

    /// The directory of a group.
    pub fn dir(&self, path: &GroupPath) -> PathBuf {
        group_dir(&self.mount, &self.root, path)
    }

    /// The cgroup2 mount point.
    pub fn mount(&self) -> &Path {
        &self.mount
    }

    /// The filesystem the backend works on.
    pub fn fs(&self) -> &F {
        &self.fs
    }

    /// Records that atoll's root lies in a subtree systemd delegated (for
    /// [`Actuator::root_location`]). The root must be below its top: the
    /// only file above the root the backend writes is then the top's
    /// `cgroup.subtree_control` (when the root is `<top>/managed`).
    pub fn set_delegation(&mut self, d: Option<Delegation>) -> Result<(), CgroupError> {
        if let Some(d) = &d {
            if !d.is_below(&self.root) {
                return Err(CgroupError::BadRootName(format!(
                    "{} (not below the delegated {})",
                    self.root,
                    d.top()
                )));
            }
        }
        self.delegation = d;
        Ok(())
    }

    fn root_parent(&self) -> PathBuf {
        let root = self.dir(&GroupPath::root());
        root.parent()
            .map_or_else(|| self.mount.clone(), Path::to_path_buf)
    }

    /// Controllers atoll enabled in the `cgroup.subtree_control` of its
    /// root's parent (which atoll does not own).
    pub fn added_parent_controllers(&self) -> &[String] {
        &self.added_to_parent
    }

    /// Tells a restarted backend which parent controllers an earlier run
    /// added (from the daemon's state file), so teardown can remove them.
    pub fn set_added_parent_controllers(&mut self, controllers: Vec<String>) {
        self.added_to_parent = controllers;
    }

    /// Disables in the root's parent the controllers atoll enabled there.
    /// Call after removing atoll's root. A controller the kernel keeps
    /// (`EBUSY`: another group now uses it) stays in the list and the first
    /// such error is returned.
    pub fn restore_parent_controllers(&mut self) -> Result<(), CgroupError> {
        let file = self.root_parent().join("cgroup.subtree_control");
        let mut first_err = None;
        let mut kept = Vec::new();
        let parent = self.root_parent();
        let skip = self.dir(&GroupPath::root());
        for c in self.added_to_parent.iter().rev() {
            let v = format!("-{c}");
            let done = keeping_masks(&self.fs, &parent, &skip, c == "cpuset", || {
                self.fs.write(&file, &v)
            });
            if let Err(e) = done {
                kept.push(c.clone());
                first_err.get_or_insert(CgroupError::io("write", &file, Some(&v), e));
            }
        }
        kept.reverse();
        self.added_to_parent = kept;
        first_err.map_or(Ok(()), Err)
    }

    /// Forgets remembered refusals so the next `apply` retries them.
    pub fn retry_refused(&mut self) {
        self.memo.clear();
        self.reported.clear();
    }

    /// How often and how long `remove` retries an `EBUSY` rmdir.
    pub fn set_rmdir_retry(&mut self, attempts: u32, delay: Duration) {
        self.rmdir_attempts = attempts;
        self.rmdir_delay = delay;
    }

    fn words(&self, path: &Path) -> Vec<String> {
        self.fs
            .read_to_string(path)
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// Enables in `parent`'s subtree_control the atoll controllers it offers
    /// but has not enabled. Returns controller -> why it could not be enabled.
    fn ensure_subtree(
        &mut self,
        parent: &Path,
        outside: bool,
    ) -> Result<Vec<(String, String)>, CgroupError> {
        let offered = self.words(&parent.join("cgroup.controllers"));
        let file = parent.join("cgroup.subtree_control");
        let enabled = self.words(&file);
        let missing: Vec<&str> = CONTROLLERS
            .iter()
            .copied()
            .filter(|c| offered.iter().any(|o| o == c) && !enabled.iter().any(|e| e == c))
            .collect();
        if missing.is_empty() {
            return Ok(Vec::new());
        }
        let all: Vec<String> = missing.iter().map(|c| format!("+{c}")).collect();
        let mut added = Vec::new();
        let mut failed = Vec::new();
        let skip = self.dir(&GroupPath::root());
        let whole = keeping_masks(
            &self.fs,
            parent,
            &skip,
            outside && missing.contains(&"cpuset"),
            || self.fs.write(&file, &all.join(" ")),
        );
        if whole.is_ok() {
            added = missing.iter().map(|c| c.to_string()).collect();
        } else {
            for c in &missing {
                let v = format!("+{c}");
                match self.fs.write(&file, &v) {
                    Ok(()) => added.push(c.to_string()),
                    Err(e) => failed.push((
                        c.to_string(),
                        format!("writing {v:?} to {} failed: {e}", file.display()),
                    )),
                }
            }
        }
        if outside {
            for c in added {
                if !self.added_to_parent.contains(&c) {
                    self.added_to_parent.push(c);
                }
            }
        }
        Ok(failed)
    }

    /// A missing controller: a fallback for each asked-for knob it carries.
    fn unavailable(
        &self,
        rep: &mut Report<'_>,
        controller: &str,
        asked: &[(&str, String)],
        why: &str,
    ) {
        for (knob, wanted) in asked {
            rep.push(
                knob,
                wanted,
                "n/a",
                format!("controller {controller} is not available: {why}"),
            );
        }
    }

    /// The CPU parts in `parts` ([`Part::CpuWeight`], [`Part::CpuMax`]),
    /// each reported in its own entry of `reps`.
    fn apply_cpu(
        &self,
        dir: &Path,
        s: &GroupSettings,
        parts: Parts,
        reps: &mut [Report<'_>; COUNT],
    ) -> Result<(), CgroupError> {
        let fs: &dyn CgroupFs = &self.fs;
        // An idle group has weight 1 and refuses cpu.weight writes (EINVAL):
        // leave idle first, and write no weight while idle.
        let idle = if s.cpu_idle { "1" } else { "0" };
        let weight = parts.has(Part::CpuWeight);
        if weight && !s.cpu_idle {
            let rep = &mut reps[Part::CpuWeight as usize];
            let o = sync(fs, dir, "cpu.idle", idle, |c| c.trim() == idle)?;
            rep.outcome("cpu.idle", idle, false, o, dir);
            let w = s.cpu_weight.unwrap_or(100);
            let o = sync(fs, dir, "cpu.weight", &w.to_string(), |c| {
                parse_i64(c).ok() == Some(i64::from(w))
            })?;
            rep.outcome("cpu.weight", &w.to_string(), s.cpu_weight.is_some(), o, dir);
        }

        if parts.has(Part::CpuMax) {
            let rep = &mut reps[Part::CpuMax as usize];
            let cur_period = read_opt(fs, &dir.join("cpu.max"))?
                .and_then(|c| parse_cpu_max(&c).ok())
                .map_or(DEFAULT_PERIOD_US, |(_, p)| p);
            let text = format_cpu_max(s.cpu_max, cur_period);
            let o = sync(fs, dir, "cpu.max", &text, |c| {
                match (parse_cpu_max(c), s.cpu_max) {
                    (Ok((q, p)), Some(m)) => q == Some(m.quota_us) && p == m.period_us,
                    (Ok((q, _)), None) => q.is_none(),
                    (Err(_), _) => false,
                }
            })?;
            rep.outcome("cpu.max", &text, s.cpu_max.is_some(), o, dir);
        }

        if weight && s.cpu_idle {
            let rep = &mut reps[Part::CpuWeight as usize];
            let o = sync(fs, dir, "cpu.idle", idle, |c| c.trim() == idle)?;
            rep.outcome("cpu.idle", idle, true, o, dir);
        }
        Ok(())
    }

    fn apply_memory(
        &self,
        dir: &Path,
        s: &GroupSettings,
        rep: &mut Report<'_>,
    ) -> Result<(), CgroupError> {
        let m = &s.memory;
        let knobs = [
            ("memory.min", m.min, Some(m.min.unwrap_or(0))),
            ("memory.low", m.low, Some(m.low.unwrap_or(0))),
            ("memory.high", m.high, m.high),
            ("memory.max", m.max, m.max),
        ];
        for (file, asked, want) in knobs {
            let text = format_memory(want);
            let o = sync(&self.fs, dir, file, &text, |c| {
                parse_memory(c).is_ok_and(|cur| memory_matches(cur, want))
            })?;
            rep.outcome(file, &text, asked.is_some(), o, dir);
        }
        Ok(())
    }

    fn apply_io(
        &self,
        dir: &Path,
        s: &GroupSettings,
        rep: &mut Report<'_>,
    ) -> Result<(), CgroupError> {
        let fs: &dyn CgroupFs = &self.fs;
        let w = s.io_weight.unwrap_or(100);
        let text = format_io_weight(w);
        let o = sync(fs, dir, "io.weight", &text, |c| {
            parse_io_weight(c).ok() == Some(w)
        })?;
        rep.outcome("io.weight", &text, s.io_weight.is_some(), o, dir);

        let file = dir.join("io.max");
        let Some(cur) = read_opt(fs, &file)? else {
            for l in &s.io_max {
                rep.outcome("io.max", &format_io_max(l), true, Outcome::Missing, dir);
            }
            return Ok(());
        };
        let cur_limits = parse_io_max(&cur).unwrap_or_default();
        for l in io_max_updates(&cur_limits, &s.io_max) {
            let line = format_io_max(&l);
            let o = write(fs, &file, &line, cur.trim())?;
            rep.outcome("io.max", &line, true, o, dir);
        }
        Ok(())
    }
}

impl<F: CgroupFs> Actuator for Cgroup2Backend<F> {
    fn kind(&self) -> BackendKind {
        BackendKind::Cgroup2
    }

    fn cgroup2_dir(&self, path: &GroupPath) -> Option<(PathBuf, PathBuf)> {
        Some((self.mount.clone(), self.dir(path)))
    }

    fn capabilities(&self) -> Capabilities {
        let root = self.dir(&GroupPath::root());
        let created = self.fs.exists(&root);
        let ctl = if created {
            self.words(&root.join("cgroup.controllers"))
        } else {
            self.words(&self.root_parent().join("cgroup.controllers"))
        };
        let has = |c: &str| ctl.iter().any(|x| x == c);
        let file = |f: &str| self.fs.exists(&root.join(f));
        Capabilities {
            cpuset: has("cpuset"),
            cpu: has("cpu"),
            partitions: has("cpuset") && (!created || file("cpuset.cpus.partition")),
            cpu_idle: has("cpu") && (!created || file("cpu.idle")),
            rt_groups: has("cpu") && created && file("cpu.rt_runtime_us"),
            memory: has("memory"),
            io: has("io"),
            psi: self.fs.exists(&self.root_parent().join("cpu.pressure")),
            freezer: !created || file(crate::freezer::V2_FREEZE),
            service_manager: false,
        }
    }

    fn root_name(&self) -> &str {
        &self.root
    }

    fn root_location(&self) -> String {
        let dir = self.dir(&GroupPath::root());
        match &self.delegation {
            Some(d) => format!("{} ({d})", dir.display()),
            None => dir.display().to_string(),
        }
    }

    fn apply(
        &mut self,
        path: &GroupPath,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        let dir = self.dir(path);
        let parent = dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.mount.clone());
        ensure_dir(&self.fs, &dir, path)?;
        let failed = self.ensure_subtree(&parent, path.is_root())?;
        let ctl = self.words(&dir.join("cgroup.controllers"));
        let missing = |c: &str| {
            if ctl.iter().any(|x| x == c) {
                return None;
            }
            Some(
                failed
                    .iter()
                    .find(|(f, _)| f == c)
                    .map(|(_, w)| w.clone())
                    .unwrap_or_else(|| {
                        format!(
                            "{} does not offer it",
                            parent.join("cgroup.controllers").display()
                        )
                    }),
            )
        };
        // A part whose controller is not enabled here is written whole
        // next time too: its controller is looked at only then.
        let mut whole = Parts::default();
        for p in Part::ALL {
            if controller(p).is_some_and(|c| missing(c).is_some()) {
                whole.insert(p);
            }
        }
        let synced = self.sync_parts(path, &dir, settings, Parts::ALL, &missing);
        let out = self
            .reported
            .finish(path, Parts::ALL, whole, synced, &mut self.rewrites);
        Ok(out?)
    }

    /// Syncs only the parts of `settings` that differ from `before` (see
    /// [`crate::parts`]): a weight's change reads `cpu.idle` and
    /// `cpu.weight` and writes `cpu.weight`, nothing else (and checks
    /// that the group's directory is there). The parents'
    /// `cgroup.subtree_control` and the group's `cgroup.controllers` are
    /// not read: the group is synced whole, as [`apply`](Self::apply) does,
    /// when it was not synced whole since it was made or last forgotten,
    /// when a changed setting is in no part, when a changed part's
    /// controller was not enabled at its last whole sync, or when its
    /// directory is gone.
    fn apply_changed(
        &mut self,
        path: &GroupPath,
        before: &GroupSettings,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        let Some(parts) = self.reported.plan(path, before, settings) else {
            return self.apply(path, settings);
        };
        let dir = self.dir(path);
        if parts != Parts::default() && !self.fs.exists(&dir) {
            return self.apply(path, settings);
        }
        let synced = self.sync_parts(path, &dir, settings, parts, &|_| None);
        let whole = Parts::default();
        let out = self
            .reported
            .finish(path, parts, whole, synced, &mut self.rewrites);
        Ok(out?)
    }

    fn take_rewrites(&mut self) -> Vec<atoll_core::backend::Rewrite> {
        std::mem::take(&mut self.rewrites)
    }

    fn remove(&mut self, path: &GroupPath) -> Result<(), BackendError> {
        let dir = self.dir(path);
        // Thaw first: a task left in a frozen group would stay stopped. If
        // the thaw fails but the group was empty, the rmdir still succeeds.
        let thawed = crate::freezer::thaw_v2(&self.fs, &dir);
        self.kept.forget_under(&dir);
        rmdir_retry(&self.fs, &dir, self.rmdir_attempts, self.rmdir_delay)
            .map_err(|e| thawed.err().unwrap_or(e))?;
        self.memo.forget_group(path);
        self.reported.forget(path);
        self.release_claims(path)?;
        Ok(())
    }

    fn move_process(&mut self, pid: u32, to: &GroupPath) -> Result<(), BackendError> {
        let dir = self.dir(to);
        if !self.fs.exists(&dir) {
            return Err(BackendError::NoGroup(to.clone()));
        }
        Ok(write_pid(&self.fs, &dir, pid)?)
    }

    fn restore_process(&mut self, pid: u32, origin: &CgroupMembership) -> Result<(), BackendError> {
        let target = nearest_existing(&self.fs, &self.mount, origin.unified().unwrap_or("/"));
        Ok(write_pid(&self.fs, &target, pid)?)
    }
}

impl<F: CgroupFs> Monitor for Cgroup2Backend<F> {
    fn exists(&self, path: &GroupPath) -> bool {
        self.fs.exists(&self.dir(path))
    }

    fn children(&self, path: &GroupPath) -> Result<Vec<String>, BackendError> {
        crate::common::list_children(&self.fs, &self.dir(path), path)
    }

    fn processes(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        crate::common::list_processes(&self.fs, &self.dir(path), path)
    }

    fn stats_of(&self, path: &GroupPath, want: StatSelect) -> Result<GroupStats, BackendError> {
        let dir = self.dir(path);
        let through = Through {
            fs: &self.fs,
            kept: &self.kept,
        };
        // Read first: a figure read proves the group is there (see the
        // v1 backend's).
        let st = crate::foreign::read_stats(&through, &dir, want)?;
        if !crate::stats::has_figures(&st) && !self.fs.exists(&dir) {
            return Err(BackendError::NoGroup(path.clone()));
        }
        Ok(st)
    }

    fn cpu_pressure_file(&self, path: &GroupPath) -> Option<PathBuf> {
        let file = self.dir(path).join("cpu.pressure");
        self.fs.exists(&file).then_some(file)
    }

    fn freeze_state(&self, path: &GroupPath) -> Result<Option<FreezeState>, BackendError> {
        let dir = self.dir(path);
        if !self.fs.exists(&dir) {
            return Err(BackendError::NoGroup(path.clone()));
        }
        Ok(crate::freezer::read_v2(&self.fs, &dir)?)
    }

    fn cpuset(&self, path: &GroupPath) -> Result<Option<CpuSet>, BackendError> {
        let dir = self.dir(path);
        if !self.fs.exists(&dir) {
            return Err(BackendError::NoGroup(path.clone()));
        }
        let set = self.read_ids(&dir.join("cpuset.cpus"))?;
        Ok((!set.is_empty()).then_some(set))
    }
}

#[path = "v2_cpuset.rs"]
mod cpuset;

#[path = "v2_parts.rs"]
mod partwise;
use partwise::controller;

#[cfg(test)]
#[path = "v2_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "v2_parts_tests.rs"]
mod parts_tests;
