//! The `cgroup1` backend as a monitor: what exists, which processes a group
//! holds, its figures (usage, throttling, memory, IO, pressure where the
//! kernel has cgroup1 PSI), its freezer state and its CPUs read back.
//! Counter files are kept open between epochs ([`crate::kept`]).

use std::collections::BTreeSet;
use std::path::PathBuf;

use atoll_core::backend::{BackendError, FreezeState, GroupStats, Monitor, StatSelect};
use atoll_core::plan::GroupPath;
use atoll_core::CpuSet;

use super::Cgroup1Backend;
use crate::error::CgroupError;
use crate::fs::CgroupFs;
use crate::kept::Through;
use crate::knobs::parse_u64;
use crate::stats::{parse_blkio_bytes_full, parse_keyed, parse_psi, read_parsed};

impl<F: CgroupFs> Monitor for Cgroup1Backend<F> {
    fn exists(&self, path: &GroupPath) -> bool {
        self.fs.exists(&self.dir(path))
    }

    /// The sub-groups of `path` in any hierarchy (a directory someone made
    /// in one hierarchy only is a child too, so a walk of atoll's tree
    /// reaches everything [`remove`](Actuator::remove) must take away), by
    /// name; `NoGroup` when the group exists in none.
    fn children(&self, path: &GroupPath) -> Result<Vec<String>, BackendError> {
        let mut names = BTreeSet::new();
        let mut found = false;
        for (_, m) in self.paths.hierarchies() {
            match crate::common::list_children(&self.fs, &self.dir_in(m, path), path) {
                Ok(c) => {
                    found = true;
                    names.extend(c);
                }
                Err(BackendError::NoGroup(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if !found {
            return Err(BackendError::NoGroup(path.clone()));
        }
        Ok(names.into_iter().collect())
    }

    fn processes(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        crate::common::list_processes(&self.fs, &self.dir(path), path)
    }

    fn processes_anywhere(&self, path: &GroupPath) -> Result<Vec<u32>, BackendError> {
        let mut all = std::collections::BTreeSet::new();
        let mut found = false;
        for (_, m) in self.paths.hierarchies() {
            let dir = self.dir_in(m, path);
            if !self.fs.exists(&dir) {
                continue;
            }
            found = true;
            all.extend(crate::common::list_processes(&self.fs, &dir, path)?);
        }
        if !found {
            return Err(BackendError::NoGroup(path.clone()));
        }
        Ok(all.into_iter().collect())
    }

    fn stats_of(&self, path: &GroupPath, want: StatSelect) -> Result<GroupStats, BackendError> {
        // Read first: a figure read proves the group is there, which saves
        // looking it up every epoch; with none, a group that is gone is
        // told apart from one without the files, as before.
        let st = self.read_stats(path, want)?;
        if !crate::stats::has_figures(&st) && !self.fs.exists(&self.dir(path)) {
            return Err(BackendError::NoGroup(path.clone()));
        }
        Ok(st)
    }

    /// In the cpu hierarchy, where kernels booted with `cgroup1 psi` show
    /// it.
    fn cpu_pressure_file(&self, path: &GroupPath) -> Option<PathBuf> {
        let file = self.dir_in(&self.paths.cpu, path).join("cpu.pressure");
        self.fs.exists(&file).then_some(file)
    }

    fn freeze_state(&self, path: &GroupPath) -> Result<Option<FreezeState>, BackendError> {
        if !self.fs.exists(&self.dir(path)) {
            return Err(BackendError::NoGroup(path.clone()));
        }
        match &self.paths.freezer {
            Some(m) => Ok(crate::freezer::read_v1(&self.fs, &self.dir_in(m, path))?),
            None => Ok(None),
        }
    }

    fn cpuset(&self, path: &GroupPath) -> Result<Option<CpuSet>, BackendError> {
        let dir = self.dir(path);
        if !self.fs.exists(&dir) {
            return Err(BackendError::NoGroup(path.clone()));
        }
        Ok(self
            .read_set(&dir.join("cpuset.cpus"))?
            .filter(|s| !s.is_empty()))
    }
}

impl<F: CgroupFs> Cgroup1Backend<F> {
    /// The figures of `path` that `want` asks for, without looking up
    /// whether the group exists (an absent file reads as `None`).
    fn read_stats(&self, path: &GroupPath, want: StatSelect) -> Result<GroupStats, CgroupError> {
        let through = Through {
            fs: &self.fs,
            kept: &self.kept,
        };
        let fs: &dyn CgroupFs = &through;
        // v1 groups have *.pressure only on kernels that expose PSI for v1.
        let psi_files = self.psi_files.get().copied();
        // The cpu hierarchy's directory only when a file of it is read (an
        // epoch's island read on a kernel without v1 PSI needs none).
        let cpu = (want.cpu_throttling || (want.cpu_pressure() && psi_files != Some(false)))
            .then(|| self.dir_in(&self.paths.cpu, path));
        let in_ctrl = |on: bool, mount: &Option<PathBuf>| {
            mount.as_ref().filter(|_| on).map(|m| self.dir_in(m, path))
        };
        let acct = in_ctrl(want.cpu_usage, &self.paths.cpuacct);
        let mem = in_ctrl(want.memory, &self.paths.memory);
        let blk = in_ctrl(want.io, &self.paths.blkio);
        let usage = match &acct {
            Some(d) => read_parsed(fs, &d.join("cpuacct.usage"), parse_u64)?,
            None => None,
        };
        let st = match cpu.as_ref().filter(|_| want.cpu_throttling) {
            Some(cpu) => read_parsed(fs, &cpu.join("cpu.stat"), parse_keyed)?.unwrap_or_default(),
            None => Default::default(),
        };
        let throttled = st
            .get("throttled_usec")
            .copied()
            .or_else(|| st.get("throttled_time").map(|ns| ns / 1000));
        let memory_current = match &mem {
            Some(d) => read_parsed(fs, &d.join("memory.usage_in_bytes"), parse_u64)?,
            None => None,
        };
        let io = match &blk {
            Some(d) => {
                let r = read_parsed(
                    fs,
                    &d.join("blkio.throttle.io_service_bytes_recursive"),
                    parse_blkio_bytes_full,
                )?;
                match r {
                    Some(v) => Some(v),
                    None => read_parsed(
                        fs,
                        &d.join("blkio.throttle.io_service_bytes"),
                        parse_blkio_bytes_full,
                    )?,
                }
            }
            None => None,
        };
        let psi = |on: bool, dir: Option<&PathBuf>, file: &str| -> Result<_, CgroupError> {
            match dir.filter(|_| on && psi_files != Some(false)) {
                Some(d) => {
                    let read = read_parsed(fs, &d.join(file), parse_psi)?;
                    // Absent from a group that is still there: the kernel
                    // has none (a group removed meanwhile teaches nothing).
                    if psi_files.is_none() && (read.is_some() || self.fs.exists(d)) {
                        let _ = self.psi_files.set(read.is_some());
                    }
                    Ok(read)
                }
                None => Ok(None),
            }
        };
        Ok(GroupStats {
            cpu_usage_us: usage.map(|ns| ns / 1000),
            nr_periods: st.get("nr_periods").copied(),
            nr_throttled: st.get("nr_throttled").copied(),
            throttled_us: throttled,
            memory_current,
            io_read_bytes: io.as_ref().map(|t| t.read),
            io_write_bytes: io.as_ref().map(|t| t.write),
            io_devices: io.map(|t| t.devices).unwrap_or_default(),
            cpu_pressure: psi(want.cpu_pressure(), cpu.as_ref(), "cpu.pressure")?,
            memory_pressure: psi(want.memory_pressure(), mem.as_ref(), "memory.pressure")?,
            io_pressure: psi(want.io_pressure(), blk.as_ref(), "io.pressure")?,
        })
    }
}
