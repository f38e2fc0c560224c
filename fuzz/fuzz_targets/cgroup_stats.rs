//! Text from cgroupfs and mountinfo, every parser on every input:
//! `atoll_cgroup::stats` (`cpu.stat`/`memory.stat` as keyed files, PSI
//! `*.pressure`, v2 `io.stat`, v1 `blkio.throttle.io_service_bytes`,
//! `cgroup.procs`), the knob readers of `atoll_cgroup::knobs` (`cpu.max`,
//! `memory.max`, `io.max`, `io.weight`, v1 `blkio.throttle.*_device`,
//! integers), the cpuset lists (`CpuSet::parse`, `NodeSet::parse`,
//! atoll-core) and `atoll_cgroup::mounts::parse_mountinfo`.
//!
//! Properties: no panic; a parsed CPU list prints back to a list that parses
//! to the same set; parsed `io.max` limits print back to lines that parse
//! to the same limits; PSI averages are finite.
#![no_main]

use std::path::Path;

use atoll_cgroup::knobs::{
    format_io_max, parse_blkio_device_file, parse_cpu_max, parse_device, parse_i64, parse_io_max,
    parse_io_weight, parse_memory, parse_u64,
};
use atoll_cgroup::mounts::parse_mountinfo;
use atoll_cgroup::stats::{
    parse_blkio_bytes_full, parse_io_stat_full, parse_keyed, parse_pids, parse_psi,
};
use atoll_core::{CpuSet, NodeSet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Every one of these files is read with `read_to_string`.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_keyed(text);
    if let Ok(psi) = parse_psi(text) {
        for l in std::iter::once(&psi.some).chain(psi.full.as_ref()) {
            assert!(l.avg10.is_finite() && l.avg60.is_finite() && l.avg300.is_finite());
        }
    }
    let _ = parse_io_stat_full(text);
    let _ = parse_blkio_bytes_full(text);
    let _ = parse_pids(text);

    let _ = parse_cpu_max(text);
    let _ = parse_memory(text);
    let _ = parse_device(text);
    let _ = parse_io_weight(text);
    let _ = parse_blkio_device_file(text);
    let _ = parse_i64(text);
    let _ = parse_u64(text);
    if let Ok(limits) = parse_io_max(text) {
        let again: String = limits.iter().map(|l| format_io_max(l) + "\n").collect();
        assert_eq!(parse_io_max(&again).as_ref(), Ok(&limits), "{again:?}");
    }

    if let Ok(set) = CpuSet::parse(text) {
        let printed = set.to_string();
        assert_eq!(CpuSet::parse(&printed).as_ref(), Ok(&set), "{printed:?}");
    }
    let _ = NodeSet::parse(text);

    let _ = parse_mountinfo(text, Path::new("/proc/self/mountinfo"));
});
