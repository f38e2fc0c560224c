//! Keeping tasks' own CPU masks across a switch of the cpuset controller.
//!
//! Enabling (or disabling) `cpuset` in a cgroup's `cgroup.subtree_control`
//! moves every task below it to another cpuset. Before Linux 6.2 the kernel
//! then sets each task's CPU mask to its new cpuset's CPUs, so a process
//! that had set its own (`taskset`, `sched_setaffinity`, systemd's
//! `CPUAffinity=`) loses it. Measured in the VM rig: on 6.1 a `taskset -c
//! 2-3` process in another top-level cgroup went to 0-7 when atoll enabled
//! cpuset at the top; on 6.12 it kept 2-3 (the kernel remembers the mask
//! the task asked for).
//!
//! When atoll switches cpuset in a cgroup it does not own (its root's
//! parent), [`Masks::save`] reads the mask of every thread below that
//! cgroup, outside atoll's root, whose mask is narrower than the cgroup's
//! CPUs, and [`Masks::restore`] gives back each that changed. Kernels from
//! 6.2 on change none, and then nothing is written.

use std::path::Path;

use atoll_core::CpuSet;

use crate::fs::CgroupFs;

/// Threads' CPU masks, saved before a cpuset switch.
#[derive(Debug, Default)]
pub(crate) struct Masks {
    saved: Vec<(u32, CpuSet)>,
}

fn threads(fs: &dyn CgroupFs, dir: &Path, skip: &Path, out: &mut Vec<u32>) {
    if dir == skip {
        return;
    }
    if let Ok(text) = fs.read_to_string(&dir.join("cgroup.threads")) {
        out.extend(
            text.split_whitespace()
                .filter_map(|t| t.parse::<u32>().ok()),
        );
    }
    for child in fs.child_dirs(dir).unwrap_or_default() {
        threads(fs, &dir.join(child), skip, out);
    }
}

impl Masks {
    /// The masks of the threads in the cgroups below `parent` (not in
    /// `parent` itself, whose tasks do not move, nor under `skip`, atoll's
    /// root) that are narrower than `parent`'s effective CPUs.
    pub(crate) fn save(fs: &dyn CgroupFs, parent: &Path, skip: &Path) -> Self {
        let all = fs
            .read_to_string(&parent.join("cpuset.cpus.effective"))
            .ok()
            .and_then(|t| CpuSet::parse(t.trim()).ok());
        let mut tids = Vec::new();
        for child in fs.child_dirs(parent).unwrap_or_default() {
            threads(fs, &parent.join(child), skip, &mut tids);
        }
        let saved = tids
            .into_iter()
            .filter_map(|tid| {
                let mask = fs.affinity(tid)?;
                let narrower = all.as_ref().is_none_or(|a| mask != *a && mask.is_subset(a));
                narrower.then_some((tid, mask))
            })
            .collect();
        Self { saved }
    }

    /// Gives every saved thread whose mask changed its mask back; returns
    /// the thread ids restored. A thread that exited, or whose mask the
    /// kernel no longer accepts, is skipped.
    pub(crate) fn restore(&self, fs: &dyn CgroupFs) -> Vec<u32> {
        let mut restored = Vec::new();
        for (tid, mask) in &self.saved {
            let changed = fs.affinity(*tid).is_some_and(|now| now != *mask);
            if changed && fs.set_affinity(*tid, mask).is_ok() {
                restored.push(*tid);
            }
        }
        restored
    }
}

/// Runs `switch` (a write to `parent`'s `cgroup.subtree_control`) and, when
/// it switches cpuset (`cpuset`), gives the threads below `parent` (outside
/// `skip`) back the masks they had before. Logs the threads restored.
pub(crate) fn keeping_masks<T>(
    fs: &dyn CgroupFs,
    parent: &Path,
    skip: &Path,
    cpuset: bool,
    switch: impl FnOnce() -> T,
) -> T {
    if !cpuset {
        return switch();
    }
    let masks = Masks::save(fs, parent, skip);
    let out = switch();
    let restored = masks.restore(fs);
    if !restored.is_empty() {
        tracing::info!(
            "switching cpuset in {} reset the CPU masks of threads {restored:?} (Linux before 6.2 does): restored",
            parent.display()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutils::{FakeCgroupFs, FakeKernel};

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse(s).unwrap()
    }

    /// A v2 machine whose kernel resets masks on a cpuset switch (6.1),
    /// or not (6.2+), with thread 7 (mask 2-3) in `other`, thread 8 (no
    /// mask of its own) beside it, thread 9 (mask 1) in the top cgroup.
    fn machine(resets: bool) -> (FakeCgroupFs, std::path::PathBuf) {
        let kernel = FakeKernel {
            resets_affinity: resets,
            ..FakeKernel::default()
        };
        let fake = FakeCgroupFs::with_kernel(kernel);
        let mount = fake.add_v2_mount("cgroup2", &["cpuset", "cpu", "io", "memory"]);
        let other = mount.join("other");
        fake.mkdir(&other).unwrap();
        for t in [7, 8] {
            fake.write(&other.join("cgroup.procs"), &t.to_string())
                .unwrap();
        }
        fake.write(&mount.join("cgroup.procs"), "9").unwrap();
        fake.set_affinity(7, &cpus("2-3")).unwrap();
        fake.set_affinity(8, &cpus("0-3")).unwrap();
        fake.set_affinity(9, &cpus("1")).unwrap();
        (fake, mount)
    }

    #[test]
    fn masks_reset_by_a_cpuset_switch_are_given_back() {
        let (fake, mount) = machine(true);
        let ctl = mount.join("cgroup.subtree_control");
        let skip = mount.join("atoll");
        // Without keeping them, the fake kernel resets thread 7 (the
        // reason for this module), never thread 9 in the top cgroup.
        fake.write(&ctl, "+cpuset").unwrap();
        assert_eq!(fake.affinity(7), Some(cpus("0-3")));
        assert_eq!(fake.affinity(9), Some(cpus("1")));
        fake.write(&ctl, "-cpuset").unwrap();
        fake.set_affinity(7, &cpus("2-3")).unwrap();

        keeping_masks(&fake, &mount, &skip, true, || fake.write(&ctl, "+cpuset")).unwrap();
        assert_eq!(fake.affinity(7), Some(cpus("2-3")));
        assert_eq!(fake.affinity(8), Some(cpus("0-3")));
        keeping_masks(&fake, &mount, &skip, true, || fake.write(&ctl, "-cpuset")).unwrap();
        assert_eq!(fake.affinity(7), Some(cpus("2-3")));
        assert_eq!(fake.affinity(9), Some(cpus("1")));
    }

    #[test]
    fn the_v2_backend_keeps_masks_when_it_switches_cpuset_at_the_top() {
        use atoll_core::backend::Actuator;
        use atoll_core::plan::{GroupPath, GroupSettings};
        let (fake, mount) = machine(true);
        let mut b = crate::v2::Cgroup2Backend::new(&mount, "atoll", fake.clone()).unwrap();
        let s = GroupSettings {
            cpus: Some(cpus("0-3")),
            ..Default::default()
        };
        b.apply(&GroupPath::root(), &s).unwrap();
        assert!(fake
            .get(&mount.join("cgroup.subtree_control"))
            .contains("cpuset"));
        assert_eq!(fake.affinity(7), Some(cpus("2-3")));
        b.remove(&GroupPath::root()).unwrap();
        b.restore_parent_controllers().unwrap();
        assert!(!fake
            .get(&mount.join("cgroup.subtree_control"))
            .contains("cpuset"));
        assert_eq!(fake.affinity(7), Some(cpus("2-3")));
    }

    #[test]
    fn nothing_is_written_where_the_kernel_keeps_masks() {
        let (fake, mount) = machine(false);
        let ctl = mount.join("cgroup.subtree_control");
        let masks = Masks::save(&fake, &mount, &mount.join("atoll"));
        // Only thread 7 is narrower than the top's CPUs and not in the top.
        assert_eq!(masks.saved, [(7, cpus("2-3"))]);
        fake.write(&ctl, "+cpuset").unwrap();
        assert!(masks.restore(&fake).is_empty());
        assert_eq!(fake.affinity(7), Some(cpus("2-3")));
    }
}
