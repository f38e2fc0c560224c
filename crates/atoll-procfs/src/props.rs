//! Property tests of the `/proc` text parsers: arbitrary text never panics,
//! and lines built from arbitrary fields parse back to those fields. The fuzz
//! target `procfs` runs the same parsers coverage-guided.

use std::path::Path;

use proptest::prelude::*;

use crate::accounts::{parse_meminfo, parse_proc_stat_irq};
use crate::{parse_schedstat, parse_stat, parse_uid};

fn all_parsers(text: &str) {
    let p = Path::new("/proc/1/x");
    let _ = parse_stat(p, text);
    let _ = parse_uid(p, text);
    let _ = parse_schedstat(p, text);
    let _ = parse_proc_stat_irq(p, text);
    let _ = parse_meminfo(p, text);
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(
        text in any::<String>(),
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        fields in proptest::collection::vec("[0-9a-zA-Z():]{0,22}", 0..30),
    ) {
        all_parsers(&text);
        all_parsers(&String::from_utf8_lossy(&bytes));
        // Shapes close to the real files: numbers, names, colons, parens.
        all_parsers(&fields.join(" "));
        all_parsers(&fields.join("\n"));
        all_parsers(&format!("cpu  {}", fields.join(" ")));
    }

    #[test]
    fn stat_lines_parse_back(
        pid in any::<u32>(),
        comm in "\\PC{0,15}",
        state in "[RSDZTtXIP]",
        ppid in any::<u32>(),
        flags in any::<u64>(),
        utime in any::<u64>(),
        stime in any::<u64>(),
        threads in any::<u64>(),
        start in any::<u64>(),
    ) {
        let line = format!(
            "{pid} ({comm}) {state} {ppid} 1 1 0 -1 {flags} 0 0 0 0 {utime} {stime} 0 0 20 0 \
             {threads} 0 {start} 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1\n"
        );
        let s = parse_stat(Path::new("stat"), &line)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(s.pid, pid);
        prop_assert_eq!(s.comm, comm);
        prop_assert_eq!(s.state.to_string(), state);
        prop_assert_eq!(s.ppid, ppid);
        prop_assert_eq!(s.flags, flags);
        prop_assert_eq!(s.cpu_ticks, utime.saturating_add(stime));
        prop_assert_eq!(s.num_threads, threads);
        prop_assert_eq!(s.start_ticks, start);
    }

    #[test]
    fn status_schedstat_and_stat_figures_parse_back(
        uid in any::<u32>(),
        name in "[a-z]{1,15}",
        on_cpu in any::<u64>(),
        wait in any::<u64>(),
        cpu in proptest::collection::vec(any::<u64>(), 7..11),
    ) {
        let p = Path::new("x");
        let status = format!("Name:\t{name}\nUmask:\t0022\nUid:\t{uid}\t{uid}\t0\t0\nGid:\t0\t0\t0\t0\n");
        prop_assert_eq!(parse_uid(p, &status).ok(), Some(uid));
        prop_assert_eq!(parse_schedstat(p, &format!("{on_cpu} {wait} 3\n")).ok(), Some(wait));
        let line: Vec<String> = cpu.iter().map(u64::to_string).collect();
        let stat = format!("cpu  {}\ncpu0 1 2 3 4 5 6 7\nintr 1 2\n", line.join(" "));
        prop_assert_eq!(parse_proc_stat_irq(p, &stat).ok(), cpu[5].checked_add(cpu[6]));
    }

    #[test]
    fn meminfo_sums_parse_back_or_fail_on_overflow(
        slab in any::<u64>(),
        stack in 0u64..1 << 40,
        shmem in 0u64..1 << 40,
        buffers in any::<u64>(),
    ) {
        let text = format!(
            "MemTotal:       16000000 kB\nBuffers: {buffers} kB\nShmem: {shmem} kB\n\
             Slab: {slab} kB\nKernelStack: {stack} kB\n"
        );
        let bytes = |a: u64, b: u64| a.checked_add(b).and_then(|s| s.checked_mul(1024));
        let want = bytes(slab, stack).zip(bytes(shmem, buffers));
        prop_assert_eq!(parse_meminfo(Path::new("m"), &text).ok(), want);
    }
}
