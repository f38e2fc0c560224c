//! Text from `/proc`, every parser on every input: a process's `stat` line
//! (`atoll_procfs::parse_stat`), `status` (`parse_uid`), `schedstat`
//! (`parse_schedstat`), `cgroup` (`CgroupMembership::parse`, atoll-core),
//! `/proc/stat` (`accounts::parse_proc_stat_irq`), `/proc/meminfo`
//! (`accounts::parse_meminfo`), and the `/proc/net` socket tables of the
//! netdiag fallback (`procnet::parse_inet_table`, `parse_unix_table`).
//!
//! Properties: no panic (arithmetic overflow included: the targets build
//! with debug assertions); a parsed `stat` keeps its comm as written; a
//! parsed cgroup membership has at most one entry per line.
#![no_main]

use std::path::Path;

use atoll_core::process::CgroupMembership;
use atoll_netdiag::procnet::{parse_inet_table, parse_unix_table};
use atoll_netdiag::SockProto;
use atoll_procfs::accounts::{parse_meminfo, parse_proc_stat_irq};
use atoll_procfs::{parse_schedstat, parse_stat, parse_uid};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("/proc/fuzz");
    // The /proc/net tables are read as bytes.
    let mut out = Vec::new();
    let _ = parse_inet_table(data, SockProto::Tcp, path, &mut out);
    let _ = parse_inet_table(data, SockProto::Udp, path, &mut out);
    let _ = parse_unix_table(data, path, &mut out);
    assert!(out.iter().all(|s| s.inode != 0));

    // The others with `read_to_string`: only UTF-8 reaches them.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(stat) = parse_stat(path, text) {
        assert!(text.contains(&format!("({})", stat.comm)));
    }
    let _ = parse_uid(path, text);
    let _ = parse_schedstat(path, text);
    if let Some(m) = CgroupMembership::parse(text) {
        assert!(m.entries.len() <= text.lines().count());
        let _ = (m.unified(), m.controller("cpu"));
    }
    let _ = parse_proc_stat_irq(path, text);
    let _ = parse_meminfo(path, text);
});
