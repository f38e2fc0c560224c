//! The `cgroup1` backend: atoll's hierarchy mirrored in each v1 hierarchy.
//!
//! A group exists once per managed hierarchy (`cpuset`, `cpu`, and when
//! mounted `cpuacct`, `memory`, `blkio`, `freezer`; co-mounted ones such as
//! `cpu,cpuacct` count once) at `<mount>/<root name>/<group path>`. The
//! `cpuset` hierarchy is the reference for `exists` and `processes`;
//! `children` are the sub-groups found in any hierarchy (someone may make a
//! directory in one only), and `remove` removes the group from every
//! hierarchy it is in, naming each directory it could not remove.
//!
//! v1 quirks handled here:
//! - a new cpuset group starts with empty `cpuset.cpus`/`cpuset.mems` (and
//!   `cgroup.clone_children` 0), so a group without explicit CPUs or nodes
//!   copies its parent's, otherwise no task could join it;
//! - a parent's CPUs cannot shrink below a child's (`EBUSY`): children are
//!   shrunk first;
//! - `cpu_exclusive` needs an exclusive parent: atoll's groups between its
//!   root and an exclusive group are made exclusive too, and a group keeps
//!   exclusivity while a child needs it. atoll's root itself is made
//!   exclusive only if [`Cgroup1Backend::set_exclusive_root`] allows it,
//!   because that stops every cpuset outside atoll (a container runtime's,
//!   say) from using atoll's CPUs; otherwise islands fall back to shared
//!   CPUs with a reason saying so;
//! - a new cpu group has `cpu.rt_runtime_us` 0, so RT tasks cannot enter it
//!   until a budget is set (parents are applied before children);
//! - `memory.min`/`memory.high` do not exist (fallbacks); `memory.low` maps to
//!   the best-effort `memory.soft_limit_in_bytes`;
//! - `frozen` is the `freezer` hierarchy's `freezer.state` (see
//!   [`crate::freezer`]); without that hierarchy freezing is a fallback. A
//!   frozen group is thawed before it is removed.
//!
//! As in v2, knobs are read first and written only when they differ, and
//! `None` means the kernel's default. `apply_changed` syncs only the parts
//! whose wanted values changed since the group last took its settings (see
//! [`crate::parts`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use atoll_core::backend::{Actuator, BackendError, BackendKind, Capabilities, Fallback};
use atoll_core::plan::{GroupPath, GroupSettings, Partition};
use atoll_core::process::CgroupMembership;
use atoll_core::spec::DeviceId;
use atoll_core::weight::{io_weight_to_blkio, weight_to_shares};
use atoll_core::CpuSet;

use crate::common::{
    check_root_name, ensure_dir, group_dir, nearest_existing, rmdir_retry, sync, write, write_pid,
    Memo, Outcome, Report,
};
use crate::error::CgroupError;
use crate::fs::{CgroupFs, RealFs};
use crate::kept::KeptFiles;
use crate::knobs::{memory_matches, parse_blkio_device_file, parse_i64, parse_u64, v1_memory};
use crate::mounts::V1Paths;
use crate::parts::{reports, Part, Parts, Reported, COUNT};
use crate::rt::sync_rt;
use crate::stats::read_opt;

/// The cgroup1 actuator and monitor.
#[derive(Debug)]
pub struct Cgroup1Backend<F: CgroupFs = RealFs> {
    paths: V1Paths,
    root: String,
    fs: F,
    memo: Memo,
    /// Counter files kept open between epochs (see [`crate::kept`]).
    kept: KeptFiles,
    /// Whether v1 groups have `*.pressure` files (kernels booted with
    /// `cgroup1 psi`), learned at the first read of a group's: a kernel
    /// without them is not asked again every epoch.
    psi_files: std::sync::OnceLock<bool>,
    /// Knobs found different and rewritten, until taken.
    rewrites: Vec<atoll_core::backend::Rewrite>,
    rmdir_attempts: u32,
    rmdir_delay: Duration,
    exclusive_root: bool,
    /// Writes by others to the groups' files, once watched.
    watch: Option<crate::watch::Watch>,
    /// What each part of a group reported at its last sync (see
    /// [`crate::parts`]).
    reported: Reported,
}

fn ids(text: &str) -> Option<CpuSet> {
    CpuSet::parse(text.trim()).ok()
}

/// The v1 value for a v2 IO weight: `blkio.bfq.weight` shares v2's scale
/// around its default of 100 (1..=1000, clamped); CFQ's `blkio.weight` uses
/// [`io_weight_to_blkio`] (10..=1000, default 500).
pub fn blkio_weight(file: &str, weight: u32) -> u32 {
    if file == "blkio.bfq.weight" {
        weight.clamp(1, 1000)
    } else {
        io_weight_to_blkio(weight)
    }
}

impl<F: CgroupFs> Cgroup1Backend<F> {
    /// A backend for `<hierarchy>/<root_name>` in each of `paths`.
    pub fn new(paths: V1Paths, root_name: &str, fs: F) -> Result<Self, CgroupError> {
        check_root_name(root_name)?;
        Ok(Self {
            paths,
            root: root_name.to_string(),
            fs,
            memo: Memo::default(),
            kept: KeptFiles::default(),
            psi_files: std::sync::OnceLock::new(),
            rewrites: Vec::new(),
            rmdir_attempts: 10,
            rmdir_delay: Duration::from_millis(20),
            exclusive_root: false,
            watch: None,
            reported: Reported::default(),
        })
    }

    /// Allows making atoll's root `cpuset.cpu_exclusive` when an island asks
    /// for an exclusive partition (v1 requires an exclusive parent). Off by
    /// default: an exclusive root stops cpusets outside atoll from using any
    /// of atoll's CPUs.
    pub fn set_exclusive_root(&mut self, allow: bool) {
        self.exclusive_root = allow;
    }

    /// From now on, learns of writes by others to the files of the groups
    /// it applies from inotify (see [`crate::watch`]).
    pub fn watch_writes(&mut self) -> Result<(), CgroupError> {
        let w =
            crate::watch::Watch::new().map_err(|e| CgroupError::io("watch", "inotify", None, e))?;
        self.watch = Some(w);
        Ok(())
    }

    /// The hierarchies in use.
    pub fn paths(&self) -> &V1Paths {
        &self.paths
    }

    /// The filesystem the backend works on.
    pub fn fs(&self) -> &F {
        &self.fs
    }

    /// The group's directory in the hierarchy mounted at `mount`.
    pub fn dir_in(&self, mount: &Path, path: &GroupPath) -> PathBuf {
        group_dir(mount, &self.root, path)
    }

    /// The group's directory in the cpuset hierarchy.
    pub fn dir(&self, path: &GroupPath) -> PathBuf {
        self.dir_in(&self.paths.cpuset, path)
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

    fn read_set(&self, path: &Path) -> Result<Option<CpuSet>, CgroupError> {
        Ok(read_opt(&self.fs, path)?.and_then(|t| ids(&t)))
    }

    /// Syncs the parts of `settings` in `parts`, in order (the group's
    /// directories exist); returns the group's fallbacks, those of the
    /// other parts from their last sync (see [`Reported`]).
    fn apply_parts(
        &mut self,
        path: &GroupPath,
        settings: &GroupSettings,
        parts: Parts,
    ) -> Result<Vec<Fallback>, BackendError> {
        let synced = self.sync_parts(path, settings, parts);
        let whole = Parts::default();
        let out = self
            .reported
            .finish(path, parts, whole, synced, &mut self.rewrites);
        out.map_err(Into::into)
    }

    fn sync_parts<'a>(
        &mut self,
        path: &'a GroupPath,
        settings: &GroupSettings,
        parts: Parts,
    ) -> Result<[Report<'a>; COUNT], CgroupError> {
        let mut reps = reports(path);
        if parts.has(Part::Cpuset) {
            let cs = self.dir(path);
            self.apply_cpuset(path, &cs, settings, &mut reps[Part::Cpuset as usize])?;
        }
        let cpu = self.dir_in(&self.paths.cpu, path);
        self.apply_cpu(&cpu, settings, parts, &mut reps)?;
        if parts.has(Part::Memory) {
            let mem = self.paths.memory.as_ref().map(|m| self.dir_in(m, path));
            self.apply_memory(mem.as_deref(), settings, &mut reps[Part::Memory as usize])?;
        }
        if parts.has(Part::Io) {
            let blk = self.paths.blkio.as_ref().map(|m| self.dir_in(m, path));
            self.apply_blkio(blk.as_deref(), settings, &mut reps[Part::Io as usize])?;
        }
        if parts.has(Part::Freezer) {
            let fz = self.paths.freezer.as_ref().map(|m| self.dir_in(m, path));
            let rep = &mut reps[Part::Freezer as usize];
            crate::freezer::apply_v1(&self.fs, fz.as_deref(), settings.frozen, rep)?;
        }
        Ok(reps)
    }

    /// The directories of `path` that the parts in `parts` write.
    fn part_dirs(&self, path: &GroupPath, parts: Parts) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if parts.has(Part::Cpuset) {
            dirs.push(self.dir(path));
        }
        if parts.any(&[Part::CpuWeight, Part::CpuMax, Part::Rt]) {
            dirs.push(self.dir_in(&self.paths.cpu, path));
        }
        let others = [
            (Part::Memory, &self.paths.memory),
            (Part::Io, &self.paths.blkio),
            (Part::Freezer, &self.paths.freezer),
        ];
        for (p, mount) in others {
            if let Some(m) = mount.as_ref().filter(|_| parts.has(p)) {
                dirs.push(self.dir_in(m, path));
            }
        }
        dirs
    }

    /// Shrinks the CPU or node lists of `dir`'s descendants to fit `new`, so
    /// `dir` itself can shrink (best effort: the retry reports failures).
    fn shrink_children(&self, dir: &Path, file: &str, new: &CpuSet) {
        for child in self.fs.child_dirs(dir).unwrap_or_default() {
            let c = dir.join(child);
            let Ok(Some(have)) = self.read_set(&c.join(file)) else {
                continue;
            };
            if have.is_subset(new) {
                continue;
            }
            let mut fit = have.intersection(new);
            if fit.is_empty() {
                fit = new.clone();
            }
            self.shrink_children(&c, file, &fit);
            let _ = self.fs.write(&c.join(file), &fit.to_string());
        }
    }

    fn apply_cpuset(
        &mut self,
        path: &GroupPath,
        dir: &Path,
        s: &GroupSettings,
        rep: &mut Report<'_>,
    ) -> Result<(), CgroupError> {
        let parent = dir.parent().unwrap_or(dir).to_path_buf();
        for (file, want) in [("cpuset.cpus", &s.cpus), ("cpuset.mems", &s.mems)] {
            let target = match want {
                Some(w) => w.clone(),
                None => self.read_set(&parent.join(file))?.unwrap_or_default(),
            };
            let text = target.to_string();
            let mut o = sync(&self.fs, dir, file, &text, |c| {
                ids(c).as_ref() == Some(&target)
            })?;
            // The value `sync` found, which a refusal left in place: a
            // check that finds nothing to change reads the file once.
            if matches!(&o, Outcome::Refused { got, .. } if ids(got).is_some_and(|c| !c.is_subset(&target)))
            {
                self.shrink_children(dir, file, &target);
                o = sync(&self.fs, dir, file, &text, |c| {
                    ids(c).as_ref() == Some(&target)
                })?;
            }
            rep.outcome(file, &text, want.is_some(), o, dir);
        }
        let knob = "cpuset.cpu_exclusive";
        let file = dir.join(knob);
        let Some(cur) = read_opt(&self.fs, &file)? else {
            if s.partition == Some(Partition::Root) {
                rep.outcome(knob, "1", true, Outcome::Missing, dir);
            }
            return Ok(());
        };
        let cur = cur.trim().to_string();
        match s.partition.unwrap_or(Partition::Member) {
            Partition::Root if cur == "1" => {}
            Partition::Root => {
                let context = read_opt(&self.fs, &dir.join("cpuset.cpus"))?.unwrap_or_default();
                let context = context.trim().to_string();
                if let Some(f) = self.memo.get(path, knob, &context) {
                    rep.out.push(f);
                    return Ok(());
                }
                let mut reason = None;
                // atoll's ancestors, top down, must be exclusive first (the
                // root only if allowed).
                let mut chain = Vec::new();
                let mut p = path.parent();
                while let Some(a) = p {
                    p = a.parent();
                    if !a.is_root() || self.exclusive_root {
                        chain.push(a);
                    }
                }
                for a in chain.iter().rev() {
                    let adir = self.dir(a);
                    let o = sync(&self.fs, &adir, knob, "1", |c| c.trim() == "1")?;
                    if let Outcome::Refused { reason: r, .. } = o {
                        reason = Some(format!(
                            "its parent must be exclusive, and making {} exclusive failed: {r}",
                            adir.display()
                        ));
                        break;
                    }
                }
                let parent_excl =
                    read_opt(&self.fs, &parent.join(knob))?.is_some_and(|v| v.trim() == "1");
                if reason.is_none() && !parent_excl {
                    reason = Some(format!(
                        "the parent {} is not cpu_exclusive; atoll makes its own root exclusive only with `atoll daemon --v1-exclusive`, since that keeps cpusets outside atoll off these CPUs",
                        parent.display()
                    ));
                }
                if reason.is_none() {
                    if let Outcome::Refused { reason: r, .. } = write(&self.fs, &file, "1", &cur)? {
                        reason = Some(format!(
                            "{r} (a sibling's CPUs overlap, or the parent is not exclusive)"
                        ));
                    }
                }
                if let Some(r) = reason {
                    rep.push(knob, "1", &cur, r);
                    if let Some(f) = rep.out.last().cloned() {
                        self.memo.put(path, knob, context, f);
                    }
                }
            }
            Partition::Member => {
                self.memo.forget(path, knob);
                if cur != "0" {
                    let child_needs = self.fs.child_dirs(dir).unwrap_or_default().iter().any(|c| {
                        read_opt(&self.fs, &dir.join(c).join(knob))
                            .ok()
                            .flatten()
                            .is_some_and(|v| v.trim() == "1")
                    });
                    if !child_needs {
                        let o = write(&self.fs, &file, "0", &cur)?;
                        rep.outcome(knob, "0", true, o, dir);
                    }
                }
            }
        }
        Ok(())
    }

    /// The CPU parts in `parts` ([`Part::CpuWeight`], [`Part::CpuMax`],
    /// [`Part::Rt`]), each reported in its own entry of `reps`.
    fn apply_cpu(
        &self,
        dir: &Path,
        s: &GroupSettings,
        parts: Parts,
        reps: &mut [Report<'_>; COUNT],
    ) -> Result<(), CgroupError> {
        let fs: &dyn CgroupFs = &self.fs;
        // As on cgroup2, an idle group refuses cpu.shares: leave idle first,
        // and write no shares while idle.
        let idle = if s.cpu_idle { "1" } else { "0" };
        let weight = parts.has(Part::CpuWeight);
        let rep = &mut reps[Part::CpuWeight as usize];
        if weight && !s.cpu_idle {
            let o = sync(fs, dir, "cpu.idle", idle, |c| c.trim() == idle)?;
            rep.outcome("cpu.idle", idle, false, o, dir);
            let shares = weight_to_shares(s.cpu_weight.unwrap_or(100));
            let o = sync(fs, dir, "cpu.shares", &shares.to_string(), |c| {
                parse_i64(c).ok() == Some(shares as i64)
            })?;
            rep.outcome(
                "cpu.shares",
                &shares.to_string(),
                s.cpu_weight.is_some(),
                o,
                dir,
            );
        }

        let rep = &mut reps[Part::CpuMax as usize];
        match s.cpu_max.filter(|_| parts.has(Part::CpuMax)) {
            Some(m) => {
                let p = m.period_us.to_string();
                let o = sync(fs, dir, "cpu.cfs_period_us", &p, |c| {
                    parse_i64(c).ok() == Some(m.period_us as i64)
                })?;
                rep.outcome("cpu.cfs_period_us", &p, true, o, dir);
                let q = m.quota_us.to_string();
                let o = sync(fs, dir, "cpu.cfs_quota_us", &q, |c| {
                    parse_i64(c).ok() == Some(m.quota_us as i64)
                })?;
                rep.outcome("cpu.cfs_quota_us", &q, true, o, dir);
            }
            None if !parts.has(Part::CpuMax) => {}
            None => {
                let o = sync(fs, dir, "cpu.cfs_quota_us", "-1", |c| {
                    parse_i64(c).ok() == Some(-1)
                })?;
                rep.outcome("cpu.cfs_quota_us", "-1", false, o, dir);
            }
        }
        if weight && s.cpu_idle {
            let rep = &mut reps[Part::CpuWeight as usize];
            let o = sync(fs, dir, "cpu.idle", idle, |c| c.trim() == idle)?;
            rep.outcome("cpu.idle", idle, true, o, dir);
        }
        if !parts.has(Part::Rt) {
            return Ok(());
        }
        let rep = &mut reps[Part::Rt as usize];
        sync_rt(fs, dir, s.rt_budget, s.rt_budget_optional, rep)
    }

    fn apply_memory(
        &self,
        dir: Option<&Path>,
        s: &GroupSettings,
        rep: &mut Report<'_>,
    ) -> Result<(), CgroupError> {
        let m = &s.memory;
        for (knob, v) in [("memory.min", m.min), ("memory.high", m.high)] {
            if let Some(v) = v {
                rep.push(knob, &v.to_string(), "n/a", "cgroup v1 has no such knob");
            }
        }
        let knobs = [
            ("memory.limit_in_bytes", m.max),
            ("memory.soft_limit_in_bytes", m.low),
        ];
        let Some(dir) = dir else {
            for (knob, v) in knobs {
                if let Some(v) = v {
                    rep.push(
                        knob,
                        &v.to_string(),
                        "n/a",
                        "no writable memory hierarchy is mounted",
                    );
                }
            }
            return Ok(());
        };
        for (knob, want) in knobs {
            let text = want.map_or_else(|| "-1".to_string(), |v| v.to_string());
            let o = sync(&self.fs, dir, knob, &text, |c| {
                parse_u64(c).is_ok_and(|cur| memory_matches(v1_memory(cur), want))
            })?;
            rep.outcome(knob, &text, want.is_some(), o, dir);
        }
        Ok(())
    }

    fn apply_blkio(
        &self,
        dir: Option<&Path>,
        s: &GroupSettings,
        rep: &mut Report<'_>,
    ) -> Result<(), CgroupError> {
        let Some(dir) = dir else {
            if let Some(w) = s.io_weight {
                rep.push(
                    "blkio.weight",
                    &w.to_string(),
                    "n/a",
                    "no writable blkio hierarchy is mounted",
                );
            }
            for l in &s.io_max {
                let d = format!("{}:{}", l.device.major, l.device.minor);
                rep.push(
                    "blkio.throttle",
                    &d,
                    "n/a",
                    "no writable blkio hierarchy is mounted",
                );
            }
            return Ok(());
        };
        let fs: &dyn CgroupFs = &self.fs;
        let file = ["blkio.bfq.weight", "blkio.weight"]
            .into_iter()
            .find(|f| fs.exists(&dir.join(f)));
        match file {
            Some(f) => {
                let w = blkio_weight(f, s.io_weight.unwrap_or(100));
                let o = sync(fs, dir, f, &w.to_string(), |c| {
                    parse_i64(c).ok() == Some(i64::from(w))
                })?;
                rep.outcome(f, &w.to_string(), s.io_weight.is_some(), o, dir);
            }
            None => {
                if let Some(w) = s.io_weight {
                    rep.push(
                        "blkio.weight",
                        &w.to_string(),
                        "n/a",
                        format!(
                            "neither blkio.weight nor blkio.bfq.weight exists in {} (no CFQ/BFQ scheduler)",
                            dir.display()
                        ),
                    );
                }
            }
        }
        type Pick = fn(&atoll_core::spec::IoLimit) -> Option<u64>;
        let files: [(&str, Pick); 4] = [
            ("blkio.throttle.read_bps_device", |l| l.rbps),
            ("blkio.throttle.write_bps_device", |l| l.wbps),
            ("blkio.throttle.read_iops_device", |l| l.riops),
            ("blkio.throttle.write_iops_device", |l| l.wiops),
        ];
        for (f, pick) in files {
            let path = dir.join(f);
            let want: BTreeMap<DeviceId, u64> = s
                .io_max
                .iter()
                .filter_map(|l| pick(l).map(|v| (l.device, v)))
                .collect();
            let Some(cur_text) = read_opt(fs, &path)? else {
                for (d, v) in &want {
                    let line = format!("{}:{} {v}", d.major, d.minor);
                    rep.outcome(f, &line, true, Outcome::Missing, dir);
                }
                continue;
            };
            let cur = parse_blkio_device_file(&cur_text).unwrap_or_default();
            let mut lines: Vec<String> = want
                .iter()
                .filter(|(d, v)| cur.get(d) != Some(v))
                .map(|(d, v)| format!("{}:{} {v}", d.major, d.minor))
                .collect();
            lines.extend(
                cur.keys()
                    .filter(|d| !want.contains_key(d))
                    .map(|d| format!("{}:{} 0", d.major, d.minor)),
            );
            for line in lines {
                let o = write(fs, &path, &line, cur_text.trim())?;
                rep.outcome(f, &line, true, o, dir);
            }
        }
        Ok(())
    }
}

/// The error of a group left in the hierarchies of `failed` (the rmdir
/// errors): one directory is that rmdir's error, several are named each.
fn not_removed(path: &GroupPath, mut failed: Vec<CgroupError>) -> CgroupError {
    if failed.len() == 1 {
        return failed.remove(0);
    }
    let mut dirs = Vec::new();
    for e in failed {
        match e {
            CgroupError::Io {
                path: dir, source, ..
            } => dirs.push((dir, source)),
            // rmdir_retry fails only with a file error.
            other => return other,
        }
    }
    CgroupError::NotRemoved {
        group: path.clone(),
        failed: dirs,
    }
}

impl<F: CgroupFs> Actuator for Cgroup1Backend<F> {
    fn kind(&self) -> BackendKind {
        BackendKind::Cgroup1
    }

    fn capabilities(&self) -> Capabilities {
        let cpu = |f: &str| self.fs.exists(&self.paths.cpu.join(f));
        let cpuset_root = self.dir(&GroupPath::root());
        Capabilities {
            cpuset: true,
            cpu: true,
            partitions: true,
            cpu_idle: cpu("cpu.idle"),
            rt_groups: cpu("cpu.rt_runtime_us"),
            memory: self.paths.memory.is_some(),
            io: self.paths.blkio.is_some(),
            psi: cpu("cpu.pressure")
                || self.fs.exists(
                    &self
                        .dir_in(&self.paths.cpu, &GroupPath::root())
                        .join("cpu.pressure"),
                )
                || self.fs.exists(&cpuset_root.join("cpu.pressure")),
            freezer: self.paths.freezer.is_some(),
            service_manager: false,
        }
    }

    fn root_name(&self) -> &str {
        &self.root
    }

    fn root_location(&self) -> String {
        let dirs: Vec<String> = self
            .paths
            .hierarchies()
            .iter()
            .map(|(_, m)| self.dir_in(m, &GroupPath::root()).display().to_string())
            .collect();
        dirs.join(", ")
    }

    fn exclusive_root(&self) -> bool {
        self.exclusive_root
    }

    fn net_prio_dir(&self, path: &GroupPath) -> Option<PathBuf> {
        self.paths.net_prio.as_ref().map(|m| self.dir_in(m, path))
    }

    fn apply(
        &mut self,
        path: &GroupPath,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        let mounts: Vec<PathBuf> = self
            .paths
            .hierarchies()
            .into_iter()
            .map(|(_, p)| p.to_path_buf())
            .collect();
        if let Some(w) = &mut self.watch {
            w.drain(true); // others' writes so far are kept; the backend's own follow
        }
        for m in &mounts {
            ensure_dir(&self.fs, &self.dir_in(m, path), path)?;
        }
        let out = self.apply_parts(path, settings, Parts::ALL);
        if let Some(w) = &mut self.watch {
            w.drain(false);
            if !w.watches(path) {
                for m in &mounts {
                    let dir = group_dir(m, &self.root, path);
                    if let Err(e) = w.add(&dir, path) {
                        tracing::warn!("watching {}: {e}", dir.display());
                    }
                }
            }
        }
        out
    }

    /// Syncs only the parts of `settings` that differ from `before` (see
    /// [`crate::parts`]): a weight's change reads `cpu.idle` and
    /// `cpu.shares` and writes `cpu.shares`, nothing else. A group not
    /// synced whole since it was made or last forgotten, a changed setting
    /// that no part holds, or a directory of a changed part that is gone,
    /// is synced whole ([`apply`](Self::apply)).
    fn apply_changed(
        &mut self,
        path: &GroupPath,
        before: &GroupSettings,
        settings: &GroupSettings,
    ) -> Result<Vec<Fallback>, BackendError> {
        let Some(parts) = self.reported.plan(path, before, settings) else {
            return self.apply(path, settings);
        };
        let dirs_there = self
            .part_dirs(path, parts)
            .iter()
            .all(|d| self.fs.exists(d));
        if !dirs_there {
            return self.apply(path, settings);
        }
        if let Some(w) = &mut self.watch {
            w.drain(true);
        }
        let out = self.apply_parts(path, settings, parts);
        if let Some(w) = &mut self.watch {
            w.drain(false);
        }
        out
    }

    fn take_rewrites(&mut self) -> Vec<atoll_core::backend::Rewrite> {
        std::mem::take(&mut self.rewrites)
    }

    fn watches_writes(&self) -> bool {
        self.watch.is_some()
    }

    fn written_behind(&mut self) -> Vec<GroupPath> {
        self.watch
            .as_mut()
            .map(crate::watch::Watch::take)
            .unwrap_or_default()
    }

    fn remove(&mut self, path: &GroupPath) -> Result<(), BackendError> {
        let dirs: Vec<PathBuf> = self
            .paths
            .hierarchies()
            .into_iter()
            .map(|(_, m)| self.dir_in(m, path))
            .collect();
        // Thaw first: a task left in a frozen group would stay stopped. A
        // failed thaw is reported only if the group could not be removed.
        let thawed = match &self.paths.freezer {
            Some(m) => crate::freezer::thaw_v1(&self.fs, &self.dir_in(m, path)),
            None => Ok(()),
        };
        let mut failed = Vec::new();
        for d in dirs {
            self.kept.forget_under(&d);
            if let Err(e) = rmdir_retry(&self.fs, &d, self.rmdir_attempts, self.rmdir_delay) {
                failed.push(e);
            }
        }
        self.memo.forget_group(path);
        self.reported.forget(path);
        if failed.is_empty() {
            return Ok(());
        }
        if let Err(e) = thawed {
            return Err(e.into());
        }
        Err(not_removed(path, failed).into())
    }

    fn move_process(&mut self, pid: u32, to: &GroupPath) -> Result<(), BackendError> {
        if !self.fs.exists(&self.dir(to)) {
            return Err(BackendError::NoGroup(to.clone()));
        }
        for (_, m) in self.paths.hierarchies() {
            write_pid(&self.fs, &self.dir_in(m, to), pid)?;
        }
        Ok(())
    }

    fn restore_process(&mut self, pid: u32, origin: &CgroupMembership) -> Result<(), BackendError> {
        for (ctrl, m) in self.paths.hierarchies() {
            let target = nearest_existing(&self.fs, m, origin.controller(ctrl).unwrap_or("/"));
            write_pid(&self.fs, &target, pid)?;
        }
        Ok(())
    }
}

#[path = "v1_monitor.rs"]
mod monitor;

#[cfg(test)]
#[path = "v1_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "v1_parts_tests.rs"]
mod parts_tests;
