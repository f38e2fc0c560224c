//! The `cgroup2` backend's sync of a group part by part (see
//! [`crate::parts`]): the whole `apply` syncs every part, `apply_changed`
//! those whose wanted values changed. A part whose controller is not
//! enabled in the group gives a fallback for each knob asked of it.

use std::path::Path;

use atoll_core::plan::{GroupPath, GroupSettings, Partition};

use super::Cgroup2Backend;
use crate::common::Report;
use crate::error::CgroupError;
use crate::fs::CgroupFs;
use crate::knobs::{format_cpu_max, format_io_max, format_io_weight, DEFAULT_PERIOD_US};
use crate::parts::{reports, Part, Parts, COUNT};
use crate::rt::sync_rt;

/// The controller a part's knobs belong to; `None` for the knobs every
/// cgroup2 group has or that are looked for file by file (RT budgets,
/// `cgroup.freeze`).
pub(super) fn controller(p: Part) -> Option<&'static str> {
    match p {
        Part::Cpuset => Some("cpuset"),
        Part::CpuWeight | Part::CpuMax => Some("cpu"),
        Part::Memory => Some("memory"),
        Part::Io => Some("io"),
        Part::Rt | Part::Freezer => None,
    }
}

/// The knobs asked of part `p` in `s`, as (file, value) for fallbacks.
fn asked(p: Part, s: &GroupSettings) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    match p {
        Part::Cpuset => {
            if let Some(c) = &s.cpus {
                out.push(("cpuset.cpus", c.to_string()));
            }
            if let Some(m) = &s.mems {
                out.push(("cpuset.mems", m.to_string()));
            }
            if s.partition == Some(Partition::Root) {
                out.push(("cpuset.cpus.partition", "root".to_string()));
            }
        }
        Part::CpuWeight => {
            if let Some(w) = s.cpu_weight {
                out.push(("cpu.weight", w.to_string()));
            }
            if s.cpu_idle {
                out.push(("cpu.idle", "1".to_string()));
            }
        }
        Part::CpuMax => {
            if s.cpu_max.is_some() {
                out.push(("cpu.max", format_cpu_max(s.cpu_max, DEFAULT_PERIOD_US)));
            }
        }
        Part::Memory => {
            let m = &s.memory;
            for (k, v) in [
                ("memory.min", m.min),
                ("memory.low", m.low),
                ("memory.high", m.high),
                ("memory.max", m.max),
            ] {
                if let Some(v) = v {
                    out.push((k, v.to_string()));
                }
            }
        }
        Part::Io => {
            if let Some(w) = s.io_weight {
                out.push(("io.weight", format_io_weight(w)));
            }
            out.extend(s.io_max.iter().map(|l| ("io.max", format_io_max(l))));
        }
        Part::Rt | Part::Freezer => {}
    }
    out
}

impl<F: CgroupFs> Cgroup2Backend<F> {
    /// Syncs the parts of `s` in `parts` in `dir` (which exists), in
    /// order, each reported in its own entry. `missing(controller)` says
    /// why a controller is not enabled in the group (`None`: it is).
    pub(super) fn sync_parts<'a>(
        &mut self,
        path: &'a GroupPath,
        dir: &Path,
        s: &GroupSettings,
        parts: Parts,
        missing: &dyn Fn(&str) -> Option<String>,
    ) -> Result<[Report<'a>; COUNT], CgroupError> {
        let mut reps = reports(path);
        // Parts whose controller is not enabled: a fallback per asked knob.
        let mut usable = Parts::default();
        for p in Part::ALL.into_iter().filter(|p| parts.has(*p)) {
            match controller(p).and_then(|c| missing(c).map(|why| (c, why))) {
                Some((c, why)) => {
                    self.unavailable(&mut reps[p as usize], c, &asked(p, s), &why);
                }
                None => usable.insert(p),
            }
        }
        if usable.has(Part::Cpuset) {
            self.apply_cpuset(path, dir, s, &mut reps[Part::Cpuset as usize])?;
        }
        self.apply_cpu(dir, s, usable, &mut reps)?;
        if usable.has(Part::Rt) {
            let rep = &mut reps[Part::Rt as usize];
            sync_rt(&self.fs, dir, s.rt_budget, s.rt_budget_optional, rep)?;
        }
        if usable.has(Part::Memory) {
            self.apply_memory(dir, s, &mut reps[Part::Memory as usize])?;
        }
        if usable.has(Part::Io) {
            self.apply_io(dir, s, &mut reps[Part::Io as usize])?;
        }
        if usable.has(Part::Freezer) {
            let rep = &mut reps[Part::Freezer as usize];
            crate::freezer::apply_v2(&self.fs, dir, s.frozen, rep)?;
        }
        Ok(reps)
    }
}
