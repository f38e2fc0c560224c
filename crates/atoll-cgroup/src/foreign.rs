//! Reading cgroup v2 groups atoll does not own, such as the cgroup of a
//! systemd unit whose properties atoll sets through systemd.
//!
//! Everything here only reads: atoll writes outside its own subtree only
//! through the manager that owns the group. The same readers serve
//! [`Cgroup2Backend`](crate::Cgroup2Backend)'s monitor, so a bound unit's
//! figures mean exactly what an atoll group's mean. A file that is absent
//! (a controller not enabled for the group, an older kernel) leaves its
//! figure `None`.

use std::io;
use std::path::Path;

use atoll_core::backend::{FreezeState, GroupStats, StatSelect};

use crate::error::CgroupError;
use crate::fs::CgroupFs;
use crate::knobs::parse_u64;
use crate::stats::{parse_io_stat_full, parse_keyed, parse_pids, parse_psi, read_parsed_if};

/// Deepest level below `dir` that [`read_pids_below`] descends to: services
/// nest a few levels (delegated subtrees, user managers), never hundreds.
pub const MAX_DEPTH: usize = 32;

/// The [`GroupStats`] of the v2 group at `dir` (what `select` asks for):
/// `cpu.stat`, `memory.current`, `io.stat` and the `*.pressure` files.
pub fn read_stats(
    fs: &dyn CgroupFs,
    dir: &Path,
    want: StatSelect,
) -> Result<GroupStats, CgroupError> {
    let cpu = read_parsed_if(
        want.cpu_usage || want.cpu_throttling,
        fs,
        &dir.join("cpu.stat"),
        parse_keyed,
    )?
    .unwrap_or_default();
    let throttling = |k: &str| cpu.get(k).copied().filter(|_| want.cpu_throttling);
    let io = read_parsed_if(want.io, fs, &dir.join("io.stat"), parse_io_stat_full)?;
    let psi = |on: bool, file: &str| read_parsed_if(on, fs, &dir.join(file), parse_psi);
    Ok(GroupStats {
        cpu_usage_us: cpu.get("usage_usec").copied().filter(|_| want.cpu_usage),
        nr_periods: throttling("nr_periods"),
        nr_throttled: throttling("nr_throttled"),
        throttled_us: throttling("throttled_usec"),
        memory_current: read_parsed_if(want.memory, fs, &dir.join("memory.current"), parse_u64)?,
        io_read_bytes: io.as_ref().map(|t| t.read),
        io_write_bytes: io.as_ref().map(|t| t.write),
        io_devices: io.map(|t| t.devices).unwrap_or_default(),
        cpu_pressure: psi(want.cpu_pressure(), "cpu.pressure")?,
        memory_pressure: psi(want.memory_pressure(), "memory.pressure")?,
        io_pressure: psi(want.io_pressure(), "io.pressure")?,
    })
}

/// Every pid in the v2 group at `dir` and in its sub-groups, at any depth
/// up to [`MAX_DEPTH`], sorted and without repeats. A sub-group removed
/// while it is read is skipped; `dir` itself missing is an error (`read`
/// with `NotFound`).
pub fn read_pids_below(fs: &dyn CgroupFs, dir: &Path) -> Result<Vec<u32>, CgroupError> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        let file = d.join("cgroup.procs");
        let text = match fs.read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound && d != dir => continue,
            Err(e) => return Err(CgroupError::io("read", file, None, e)),
        };
        out.extend(parse_pids(&text).map_err(|e| e.at(&file))?);
        if depth < MAX_DEPTH {
            let children = match fs.child_dirs(&d) {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(CgroupError::io("list", &d, None, e)),
            };
            stack.extend(children.into_iter().map(|c| (d.join(c), depth + 1)));
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Where the v2 freezer has the group at `dir`: `None` without
/// `cgroup.freeze` (the mount's root, kernels before 5.2).
pub fn read_freeze_state(
    fs: &dyn CgroupFs,
    dir: &Path,
) -> Result<Option<FreezeState>, CgroupError> {
    crate::freezer::read_v2(fs, dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutils::FakeCgroupFs;

    #[test]
    fn reads_a_foreign_group_and_its_subgroups_without_writing() {
        let (fake, mount) = FakeCgroupFs::v2_machine(&["cpuset", "cpu", "io", "memory"]);
        fake.write(&mount.join("cgroup.subtree_control"), "+cpu +memory")
            .unwrap();
        let svc = mount.join("nginx.service");
        fake.mkdir(&svc).unwrap();
        fake.mkdir(&svc.join("workers")).unwrap();
        fake.write(&svc.join("cgroup.procs"), "7").unwrap();
        fake.write(&svc.join("workers/cgroup.procs"), "9").unwrap();
        fake.write(&svc.join("workers/cgroup.procs"), "8").unwrap();
        fake.set(
            &svc.join("cpu.stat"),
            "usage_usec 500\nnr_periods 2\nnr_throttled 1\nthrottled_usec 30\n",
        );
        fake.set(&svc.join("memory.current"), "4096");
        fake.take_writes();

        assert_eq!(read_pids_below(&fake, &svc).unwrap(), [7, 8, 9]);
        let s = read_stats(&fake, &svc, StatSelect::ALL).unwrap();
        assert_eq!(s.cpu_usage_us, Some(500));
        assert_eq!(s.nr_throttled, Some(1));
        assert_eq!(s.memory_current, Some(4096));
        assert_eq!(s.io_read_bytes, None, "no io controller: no figure");
        assert!(s.cpu_pressure.is_some());
        let cpu_only = read_stats(&fake, &svc, StatSelect::CPU).unwrap();
        assert_eq!((cpu_only.memory_current, cpu_only.nr_periods), (None, None));
        assert_eq!(
            read_freeze_state(&fake, &svc).unwrap(),
            Some(FreezeState::Thawed)
        );
        assert!(fake.writes().is_empty(), "{:?}", fake.writes());
        let gone = read_pids_below(&fake, &mount.join("missing.service")).unwrap_err();
        assert_eq!(gone.errno(), Some(libc::ENOENT));
    }
}
