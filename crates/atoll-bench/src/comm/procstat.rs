//! Per-thread counters of the benchmark's own processes, from `/proc`:
//! context switches (`voluntary_ctxt_switches` and
//! `nonvoluntary_ctxt_switches` of `/proc/PID/task/TID/status`) and CPU
//! time (the first field of `/proc/PID/task/TID/schedstat`, ns).
//!
//! Every process the benchmark starts leads its own process group, and
//! what it starts (`atoll run`'s child, nginx's workers) stays in it; the
//! members of a group other than its leader (`atoll run`, which only waits)
//! are the unit's processes. A [`Snapshot`] holds every thread's counters;
//! [`delta`] sums the growth between two, counting a thread that appeared
//! in between from zero. A thread that ended in between is lost (the
//! servers' and hogs' threads live through the window).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One thread's counters (or a sum of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Voluntary context switches (it blocked).
    pub voluntary: u64,
    /// Involuntary context switches (it was preempted).
    pub involuntary: u64,
    /// CPU time, ns.
    pub run_ns: u64,
}

impl Counters {
    /// Both kinds of context switches.
    pub fn switches(&self) -> u64 {
        self.voluntary + self.involuntary
    }

    fn add(&mut self, o: &Counters) {
        self.voluntary += o.voluntary;
        self.involuntary += o.involuntary;
        self.run_ns += o.run_ns;
    }
}

/// Counters by thread id.
pub type Snapshot = BTreeMap<u32, Counters>;

/// `(pid, process group)` from the text of `/proc/PID/stat`.
pub fn parse_stat(text: &str) -> Option<(u32, u32)> {
    let pid = text.split_whitespace().next()?.parse().ok()?;
    // The command name is in parentheses and may hold anything; the fields
    // after the last ')' are: state, ppid, pgrp, ...
    let rest = &text[text.rfind(')')? + 1..];
    let pgrp = rest.split_whitespace().nth(2)?.parse().ok()?;
    Some((pid, pgrp))
}

/// The context switch counts of a `status` file (0 when absent).
pub fn parse_status(text: &str) -> (u64, u64) {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim_start_matches(':').trim().parse().ok())
            .unwrap_or(0)
    };
    (
        field("voluntary_ctxt_switches"),
        field("nonvoluntary_ctxt_switches"),
    )
}

/// CPU time in ns from a `schedstat` file.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Busy time of `cpus` from the text of `/proc/stat`, in clock ticks:
/// `user`, `nice`, `system` and `steal`, summed over those CPUs (`None` if
/// one of them has no line). Interrupt time (`irq`, `softirq`) is left
/// out: on loopback it is mostly the benchmark's own traffic (about 0.05
/// CPUs at 56 streams of 1 MiB/s), which task CPU times do not include.
pub fn cpu_busy_ticks(stat: &str, cpus: &[u32]) -> Option<u64> {
    let mut sum = 0u64;
    for cpu in cpus {
        let name = format!("cpu{cpu}");
        let line = stat
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is
        // already in user and nice).
        let busy: u64 = [0, 1, 2, 7].iter().filter_map(|&i| f.get(i)).sum();
        sum += busy;
    }
    Some(sum)
}

/// Clock ticks per second (`/proc/stat`'s unit).
pub fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The busy ticks of `cpus` now (`None` if `/proc/stat` is unreadable).
pub fn busy_now(cpus: &[u32]) -> Option<u64> {
    cpu_busy_ticks(&std::fs::read_to_string("/proc/stat").ok()?, cpus)
}

/// The processes of group `pgid` other than its leader.
pub fn group_members(proc_root: &Path, pgid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != pgid)
        .filter(|pid| {
            std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat"))
                .ok()
                .and_then(|t| parse_stat(&t))
                .is_some_and(|(_, g)| g == pgid)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// The counters of every thread of `pids` now.
pub fn snapshot(proc_root: &Path, pids: &[u32]) -> Snapshot {
    let mut s = Snapshot::new();
    for pid in pids {
        let tasks = proc_root.join(pid.to_string()).join("task");
        let Ok(rd) = std::fs::read_dir(&tasks) else {
            continue;
        };
        for e in rd.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
                continue;
            };
            let dir = e.path();
            let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
                continue;
            };
            let (voluntary, involuntary) = parse_status(&status);
            let run_ns = std::fs::read_to_string(dir.join("schedstat"))
                .ok()
                .and_then(|t| parse_schedstat(&t))
                .unwrap_or(0);
            s.insert(
                tid,
                Counters {
                    voluntary,
                    involuntary,
                    run_ns,
                },
            );
        }
    }
    s
}

/// The growth from `before` to `after`, summed over the threads of
/// `after` (a thread new in `after` counts from zero).
pub fn delta(before: &Snapshot, after: &Snapshot) -> Counters {
    let mut sum = Counters::default();
    for (tid, a) in after {
        let b = before.get(tid).copied().unwrap_or_default();
        sum.add(&Counters {
            voluntary: a.voluntary.saturating_sub(b.voluntary),
            involuntary: a.involuntary.saturating_sub(b.involuntary),
            run_ns: a.run_ns.saturating_sub(b.run_ns),
        });
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn thread(root: &Path, pid: u32, tid: u32, vol: u64, invol: u64, ns: u64) {
        write(
            root,
            &format!("{pid}/task/{tid}/status"),
            &format!(
                "Name:\tx\nvoluntary_ctxt_switches:\t{vol}\nnonvoluntary_ctxt_switches:\t{invol}\n"
            ),
        );
        write(
            root,
            &format!("{pid}/task/{tid}/schedstat"),
            &format!("{ns} 10 3\n"),
        );
    }

    #[test]
    fn parses_stat_with_awkward_command_names() {
        assert_eq!(parse_stat("42 (nginx) S 1 40 40 0 -1"), Some((42, 40)));
        assert_eq!(
            parse_stat("7 (a) b (c)) R 1 3 3 0"),
            Some((7, 3)),
            "the last ')' ends the name"
        );
        assert_eq!(parse_stat("x (y) S 1 2"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn busy_ticks_leave_out_idle_iowait_and_interrupts() {
        let stat = "cpu  10 0 10 100 5 0 0 0 0 0\n\
                    cpu0 1 2 3 1000 50 4 5 6 7 8\n\
                    cpu1 10 0 20 900 30 1 2 0 0 0\n\
                    intr 123\n";
        assert_eq!(cpu_busy_ticks(stat, &[0]), Some(1 + 2 + 3 + 6));
        assert_eq!(cpu_busy_ticks(stat, &[1]), Some(30));
        assert_eq!(cpu_busy_ticks(stat, &[0, 1]), Some(12 + 30));
        assert_eq!(cpu_busy_ticks(stat, &[2]), None);
        assert_eq!(cpu_busy_ticks(stat, &[]), Some(0));
        assert!(clock_ticks_per_s() > 0.0);
    }

    #[test]
    fn parses_status_and_schedstat() {
        let s = "Name:\tnginx\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(parse_status(s), (120, 7));
        assert_eq!(parse_status("Name: x\n"), (0, 0));
        assert_eq!(
            parse_schedstat("2268173928 308595169 5509\n"),
            Some(2268173928)
        );
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn members_of_a_group_without_its_leader() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "100/stat", "100 (atoll) S 1 100 100 0");
        write(r, "101/stat", "101 (nginx) S 100 100 100 0");
        write(r, "102/stat", "102 (nginx: worker) S 101 100 100 0");
        write(r, "200/stat", "200 (other) S 1 200 200 0");
        write(r, "self/stat", "100 (atoll) S 1 100 100 0");
        assert_eq!(group_members(r, 100), [101, 102]);
        assert!(group_members(r, 300).is_empty());
        assert!(group_members(&r.join("missing"), 100).is_empty());
    }

    #[test]
    fn deltas_sum_threads_and_count_new_ones_from_zero() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        thread(r, 101, 101, 10, 1, 1_000);
        thread(r, 101, 103, 5, 0, 500);
        let before = snapshot(r, &[101, 999]);
        assert_eq!(before.len(), 2);
        thread(r, 101, 101, 30, 4, 3_000);
        thread(r, 101, 103, 5, 2, 900);
        thread(r, 101, 104, 7, 1, 100);
        let after = snapshot(r, &[101]);
        let c = delta(&before, &after);
        assert_eq!(
            c,
            Counters {
                voluntary: 20 + 7,
                involuntary: 3 + 2 + 1,
                run_ns: 2_000 + 400 + 100
            }
        );
        assert_eq!(c.switches(), 33);
        // A counter that went backwards (a reused tid) adds nothing.
        assert_eq!(delta(&after, &before).switches(), 0);
    }
}
