//! The `cgroup2` backend's cpusets and partitions: writing a group's CPUs
//! and memory nodes, claiming an island's CPUs in `cpuset.cpus.exclusive`
//! above it, and turning it into a (remote) partition root or back (see the
//! partition notes in [`super::v2`]).

use std::path::Path;

use atoll_core::plan::{GroupPath, GroupSettings, Partition};
use atoll_core::CpuSet;

use super::{ids, Cgroup2Backend, EXCLUSIVE, PARTITION};
use crate::common::{sync, write, Outcome, Report};
use crate::error::CgroupError;
use crate::fs::CgroupFs;
use crate::stats::read_opt;

impl<F: CgroupFs> Cgroup2Backend<F> {
    pub(super) fn apply_cpuset(
        &mut self,
        path: &GroupPath,
        dir: &Path,
        s: &GroupSettings,
        rep: &mut Report<'_>,
    ) -> Result<(), CgroupError> {
        let fs: &dyn CgroupFs = &self.fs;
        for (file, want) in [("cpuset.cpus", &s.cpus), ("cpuset.mems", &s.mems)] {
            let text = want.as_ref().map(ToString::to_string).unwrap_or_default();
            let target = want.clone().unwrap_or_default();
            let o = sync(fs, dir, file, &text, |cur| {
                ids(cur).as_ref() == Some(&target)
            })?;
            rep.outcome(file, &text, want.is_some(), o, dir);
        }
        let cur = read_opt(fs, &dir.join(PARTITION))?;
        let cur = cur.as_deref().map(str::trim);
        match s.partition.unwrap_or(Partition::Member) {
            Partition::Member => {
                self.memo.forget(path, PARTITION);
                if let Some(c) = cur.filter(|c| *c != "member") {
                    let o = write(fs, &dir.join(PARTITION), "member", c)?;
                    rep.outcome(PARTITION, "member", true, o, dir);
                }
                if self.trim_exclusive(dir)? {
                    self.release_claims(path)?;
                }
            }
            Partition::Root => {
                let Some(c) = cur else {
                    rep.outcome(PARTITION, "root", true, Outcome::Missing, dir);
                    return Ok(());
                };
                let cpus = self.read_ids(&dir.join("cpuset.cpus"))?;
                if c == "root" {
                    return self.resize_partition(path, dir, &cpus, rep);
                }
                // What a refusal depends on: the group's CPUs, and the CPUs
                // its parent has left (they change when a sibling partition
                // shrinks or goes away).
                let parent_eff = path
                    .parent()
                    .map(|p| read_opt(fs, &self.dir(&p).join("cpuset.cpus.effective")))
                    .transpose()?
                    .flatten()
                    .unwrap_or_default();
                let context = format!("{cpus} of {}", parent_eff.trim());
                if let Some(f) = self.memo.get(path, PARTITION, &context) {
                    rep.out.push(f);
                    return Ok(());
                }
                if let Some(reason) = self.try_root_partition(path, dir, &cpus)? {
                    let back = write(&self.fs, &dir.join(PARTITION), "member", "")?;
                    if let Outcome::Refused { reason: r, .. } = back {
                        return Err(CgroupError::parse(dir.join(PARTITION), "member", r));
                    }
                    self.trim_exclusive(dir)?;
                    self.release_claims(path)?;
                    let got = read_opt(&self.fs, &dir.join(PARTITION))?.unwrap_or_default();
                    rep.push(PARTITION, "root", got.trim(), reason);
                    if let Some(f) = rep.out.last().cloned() {
                        self.memo.put(path, PARTITION, context, f);
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn read_ids(&self, file: &Path) -> Result<CpuSet, CgroupError> {
        Ok(read_opt(&self.fs, file)?
            .and_then(|t| ids(&t))
            .unwrap_or_default())
    }

    /// Whether the group's parent (inside atoll's hierarchy) is a valid
    /// partition root, which makes the group a local partition.
    fn parent_is_partition(&self, path: &GroupPath) -> Result<bool, CgroupError> {
        let Some(p) = path.parent() else {
            return Ok(false);
        };
        let shown = read_opt(&self.fs, &self.dir(&p).join(PARTITION))?;
        Ok(shown.is_some_and(|s| matches!(s.trim(), "root" | "isolated")))
    }

    /// Adds `cpus` to the `cpuset.cpus.exclusive` of each of atoll's groups
    /// above `path`, outermost first (a child's exclusive CPUs must be its
    /// parent's). `Some(reason)` if the kernel refused one.
    fn claim(&self, path: &GroupPath, cpus: &CpuSet) -> Result<Option<String>, CgroupError> {
        let mut chain = Vec::new();
        let mut p = path.parent();
        while let Some(a) = p {
            p = a.parent();
            chain.push(a);
        }
        for a in chain.iter().rev() {
            let file = self.dir(a).join(EXCLUSIVE);
            let have = self.read_ids(&file)?;
            if cpus.is_subset(&have) {
                continue;
            }
            let v = have.union(cpus).to_string();
            if let Outcome::Refused { reason, .. } = write(&self.fs, &file, &v, "")? {
                return Ok(Some(format!(
                    "claiming CPUs {v} in {}: {reason}",
                    file.display()
                )));
            }
        }
        Ok(None)
    }

    /// Shrinks a member group's `cpuset.cpus.exclusive` to what its
    /// children hold (nothing, for a leaf or a former partition), so CPUs no
    /// partition uses are not kept from other cgroups; a partition's own is
    /// left alone. True if it wrote.
    /// Best effort: an exclusive set too wide takes no CPU from anyone inside
    /// atoll, so a refusal is ignored.
    fn trim_exclusive(&self, dir: &Path) -> Result<bool, CgroupError> {
        let have = self.read_ids(&dir.join(EXCLUSIVE))?;
        if have.is_empty() {
            return Ok(false);
        }
        // A partition's exclusive CPUs are its own, not claims.
        let part = read_opt(&self.fs, &dir.join(PARTITION))?.unwrap_or_default();
        if part.trim() != "member" {
            return Ok(false);
        }
        let mut held = CpuSet::default();
        for child in self.fs.child_dirs(dir).unwrap_or_default() {
            held = held.union(&self.read_ids(&dir.join(child).join(EXCLUSIVE))?);
        }
        if held == have {
            return Ok(false);
        }
        Ok(self
            .fs
            .write(&dir.join(EXCLUSIVE), &held.to_string())
            .is_ok())
    }

    /// [`Self::trim_exclusive`] for each of atoll's groups above `path`,
    /// innermost first.
    pub(super) fn release_claims(&self, path: &GroupPath) -> Result<(), CgroupError> {
        let mut p = path.parent();
        while let Some(a) = p {
            self.trim_exclusive(&self.dir(&a))?;
            p = a.parent();
        }
        Ok(())
    }

    /// Makes `dir` a partition root; `Some(reason)` if the kernel would not.
    ///
    /// With `cpuset.cpus.exclusive` (Linux 6.7+) and a parent that is not a
    /// partition root (atoll's root never is), the group becomes a *remote*
    /// partition: its CPUs are first claimed in the `cpuset.cpus.exclusive`
    /// of every atoll group above it, then set as its own exclusive CPUs,
    /// then `root` is written. This is the sequence Linux 6.12 accepts; without
    /// the claims it shows `root invalid (Invalid cpu list in
    /// cpuset.cpus.exclusive)`. Older kernels (6.1) have no such file and
    /// accept only local partitions: the write succeeds but the file reads
    /// `root invalid (Parent is not a partition root)`, which is the reason
    /// returned.
    fn try_root_partition(
        &mut self,
        path: &GroupPath,
        dir: &Path,
        cpus: &CpuSet,
    ) -> Result<Option<String>, CgroupError> {
        let knob = dir.join(PARTITION);
        if self.fs.exists(&dir.join(EXCLUSIVE))
            && !cpus.is_empty()
            && !self.parent_is_partition(path)?
        {
            if let Some(reason) = self.claim(path, cpus)? {
                return Ok(Some(reason));
            }
            let v = cpus.to_string();
            let o = sync(&self.fs, dir, EXCLUSIVE, &v, |c| {
                ids(c).as_ref() == Some(cpus)
            })?;
            if let Outcome::Refused { reason, .. } = o {
                return Ok(Some(format!("{EXCLUSIVE} {v}: {reason}")));
            }
        }
        match write(&self.fs, &knob, "root", "")? {
            Outcome::Refused { reason, .. } => return Ok(Some(reason)),
            Outcome::Missing => return Ok(Some(format!("{} does not exist", knob.display()))),
            Outcome::Written { .. } | Outcome::Unchanged => {}
        }
        let shown = read_opt(&self.fs, &knob)?.unwrap_or_default();
        let shown = shown.trim();
        if shown == "root" {
            Ok(None)
        } else {
            Ok(Some(format!("the kernel shows {shown:?}")))
        }
    }

    /// Keeps a valid remote partition's exclusive CPUs equal to its
    /// `cpuset.cpus`: once `cpuset.cpus.exclusive` is set the kernel takes
    /// the partition's CPUs from it, not from `cpuset.cpus`. A refused
    /// change (the CPUs are still a sibling's) leaves the partition on its
    /// old CPUs and is reported on `cpuset.cpus.exclusive`; it is retried
    /// every apply, as a refused write changes nothing.
    fn resize_partition(
        &mut self,
        path: &GroupPath,
        dir: &Path,
        cpus: &CpuSet,
        rep: &mut Report<'_>,
    ) -> Result<(), CgroupError> {
        let file = dir.join(EXCLUSIVE);
        let have = self.read_ids(&file)?;
        // No such file, or a local partition using cpuset.cpus itself.
        if have.is_empty() || &have == cpus || cpus.is_empty() {
            return Ok(());
        }
        let v = cpus.to_string();
        let refused = match self.claim(path, cpus)? {
            Some(reason) => Some(reason),
            None => match write(&self.fs, &file, &v, "")? {
                Outcome::Refused { reason, .. } => Some(format!(
                    "{EXCLUSIVE} {v}: {reason} (a sibling may still hold some of these CPUs)"
                )),
                _ => None,
            },
        };
        self.release_claims(path)?;
        if let Some(reason) = refused {
            rep.push(EXCLUSIVE, &v, &have.to_string(), reason);
        }
        Ok(())
    }
}
