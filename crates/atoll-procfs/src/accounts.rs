//! The `kernel` and `shared` accounts of seed 004 from `/proc`.
//!
//! - kernel CPU: the CPU time of kernel threads (`PF_KTHREAD`, from each
//!   `/proc/PID/stat`) plus interrupt handling (`irq` and `softirq` of the
//!   `cpu` line of `/proc/stat`);
//! - kernel memory: `Slab`, `KernelStack`, `PageTables` and `VmallocUsed`
//!   of `/proc/meminfo`;
//! - shared memory: `Shmem` and `Buffers` of `/proc/meminfo` (Linux charges
//!   a page to the first group that touched it, so memory shared by units
//!   is not visible as such; what the kernel keeps for everyone is).
//!
//! Reading every process's `stat` costs one read per process, so this is
//! done for status and metrics requests, never in the epoch.

use std::path::Path;

use atoll_core::process::{ProcessError, ProcessTable, SystemAccounts, SystemMonitor};

use crate::ProcFs;

/// Clock ticks per second of `/proc` times (`USER_HZ`, 100 on Linux).
pub const USER_HZ: u64 = 100;

/// `irq + softirq` of the aggregate `cpu` line of `/proc/stat`, ticks.
pub fn parse_proc_stat_irq(path: &Path, text: &str) -> Result<u64, ProcessError> {
    let line = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or_else(|| ProcessError::Parse {
            path: path.to_path_buf(),
            value: text.lines().next().unwrap_or("").to_string(),
            reason: "no aggregate \"cpu\" line".into(),
        })?;
    // cpu user nice system idle iowait irq softirq ...
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| ProcessError::Parse {
            path: path.to_path_buf(),
            value: line.to_string(),
            reason: "a field is not a number".into(),
        })?;
    if f.len() < 7 {
        return Err(ProcessError::Parse {
            path: path.to_path_buf(),
            value: line.to_string(),
            reason: "fewer than 7 fields".into(),
        });
    }
    f[5].checked_add(f[6]).ok_or_else(|| ProcessError::Parse {
        path: path.to_path_buf(),
        value: line.to_string(),
        reason: "irq + softirq does not fit in 64 bits".into(),
    })
}

/// Kernel and shared memory from `/proc/meminfo`, bytes.
pub fn parse_meminfo(path: &Path, text: &str) -> Result<(u64, u64), ProcessError> {
    let kib = |key: &str| -> Result<u64, ProcessError> {
        let Some(line) = text.lines().find(|l| l.split(':').next() == Some(key)) else {
            return Ok(0); // absent on some kernels (e.g. VmallocUsed on old ones)
        };
        line.split(':')
            .nth(1)
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| ProcessError::Parse {
                path: path.to_path_buf(),
                value: line.to_string(),
                reason: format!("{key} is not \"N kB\""),
            })
    };
    let too_large = |keys: &[&str]| ProcessError::Parse {
        path: path.to_path_buf(),
        value: keys.join(" + "),
        reason: "the sum in bytes does not fit in 64 bits".into(),
    };
    // The sum of `keys` in bytes; an error (naming the keys) when it does
    // not fit in 64 bits, which no real meminfo comes near.
    let bytes = |keys: &[&str]| -> Result<u64, ProcessError> {
        let mut kib_sum = 0u64;
        for key in keys {
            kib_sum = kib_sum
                .checked_add(kib(key)?)
                .ok_or_else(|| too_large(keys))?;
        }
        kib_sum.checked_mul(1024).ok_or_else(|| too_large(keys))
    };
    let kernel = bytes(&["Slab", "KernelStack", "PageTables", "VmallocUsed"])?;
    let shared = bytes(&["Shmem", "Buffers"])?;
    Ok((kernel, shared))
}

impl SystemMonitor for ProcFs {
    fn accounts(&self) -> Result<SystemAccounts, ProcessError> {
        let read = |name: &str| {
            let path = self.root().join(name);
            std::fs::read_to_string(&path)
                .map(|t| (path.clone(), t))
                .map_err(|source| ProcessError::Io { path, source })
        };
        let (stat_path, stat) = read("stat")?;
        let irq = parse_proc_stat_irq(&stat_path, &stat)?;
        let (mem_path, mem) = read("meminfo")?;
        let (kernel_mem, shared) = parse_meminfo(&mem_path, &mem)?;
        let mut kthread_ticks = 0u64;
        for pid in self.pids()? {
            if let Ok(s) = self.stat(pid) {
                if s.is_kernel_thread() {
                    kthread_ticks = kthread_ticks.saturating_add(s.cpu_ticks);
                }
            }
        }
        Ok(SystemAccounts {
            kernel_cpu_us: irq
                .saturating_add(kthread_ticks)
                .saturating_mul(1_000_000 / USER_HZ),
            kernel_memory_bytes: kernel_mem,
            shared_memory_bytes: shared,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_irq_time_and_memory() {
        let p = Path::new("/proc/stat");
        let stat = "cpu  100 0 50 1000 5 7 3 0 0 0\ncpu0 50 0 25 500 2 3 1 0 0 0\n";
        assert_eq!(parse_proc_stat_irq(p, stat).unwrap(), 10);
        assert!(parse_proc_stat_irq(p, "intr 1\n").is_err());
        assert!(parse_proc_stat_irq(p, "cpu  1 2 x\n").is_err());
        let mem = "MemTotal: 1000 kB\nBuffers: 10 kB\nShmem: 5 kB\nSlab: 100 kB\nKernelStack: 8 kB\nPageTables: 2 kB\n";
        assert_eq!(
            parse_meminfo(Path::new("m"), mem).unwrap(),
            (110 * 1024, 15 * 1024)
        );
        assert!(parse_meminfo(Path::new("m"), "Slab: lots\n").is_err());
    }

    /// Found by the `procfs` fuzz target: sums and the conversion to bytes
    /// overflowed (a panic in debug builds, a wrong figure in release).
    #[test]
    fn values_too_large_for_64_bits_are_errors_not_overflows() {
        let p = Path::new("/proc/meminfo");
        let e = parse_meminfo(p, "KernelStack: 000000667921401735632214    0\n").unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
        let max = u64::MAX;
        assert!(parse_meminfo(p, &format!("Slab: {max} kB\nPageTables: 1 kB\n")).is_err());
        assert!(parse_meminfo(p, &format!("Shmem: {} kB\n", max / 1024 + 1)).is_err());
        let ok = format!("Shmem: {} kB\n", max / 1024);
        assert_eq!(parse_meminfo(p, &ok).unwrap(), (0, max / 1024 * 1024));
        let p = Path::new("/proc/stat");
        let stat = format!("cpu  0 0 0 0 0 {max} 1 0 0 0\n");
        let e = parse_proc_stat_irq(p, &stat).unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
        let stat = format!("cpu  0 0 0 0 0 {} 1 0 0 0\n", max - 1);
        assert_eq!(parse_proc_stat_irq(p, &stat).unwrap(), max);
    }

    #[test]
    fn reads_this_machine() {
        let a = ProcFs::system().accounts().unwrap();
        assert!(a.kernel_memory_bytes > 0, "{a:?}");
    }
}
