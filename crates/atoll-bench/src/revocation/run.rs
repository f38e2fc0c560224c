//! The real part of the revocation benchmark: groups, workers, the cpuset
//! loop.
//!
//! ```text
//! atoll-bench-rev-<pid>-<ns>/     all online CPUs
//! ├── lender/                     cpus L: the probe
//! └── borrower/                   cpus L (cpuset loop: L or H): spin hogs
//! ```
//!
//! Both groups are created fresh for each mechanism and removed after it;
//! the [`Rig`] guard kills workers and removes everything (then sweeps the
//! root by name) also on an error, a panic or Ctrl-C.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use atoll_cgroup::CgroupBackend;
use atoll_core::backend::{Actuator, Monitor};
use atoll_core::plan::{GroupPath, GroupSettings, TaskPolicy};
use atoll_core::process::TaskControl;
use atoll_core::{CpuSet, NodeSet};

use super::{Mechanism, MechanismResult, RevocationOptions, RevocationReport};
use crate::cgroups::{open_here, sweep, unique_root};
use crate::error::BenchError;
use crate::interrupt;
use crate::machine;
use crate::procs::{worker_command, Proc};
use crate::progress::Progress;

const LENDER: &str = "lender";
const BORROWER: &str = "borrower";

/// The cgroups of one run; removes them when dropped.
struct Rig {
    backend: Mutex<CgroupBackend>,
    root: String,
    mems: NodeSet,
    lent: CpuSet,
    home: Option<CpuSet>,
}

impl Rig {
    fn with<T>(&self, f: impl FnOnce(&mut CgroupBackend) -> T) -> T {
        let mut b = self.backend.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut b)
    }

    fn settings(&self, cpus: &CpuSet, weight: Option<u32>, idle: bool) -> GroupSettings {
        GroupSettings {
            cpus: Some(cpus.clone()),
            mems: Some(self.mems.clone()),
            cpu_weight: weight,
            cpu_idle: idle,
            ..Default::default()
        }
    }

    /// Applies `settings` to `group`; any knob the kernel refused makes the
    /// mechanism unavailable (`Ok(Err(reason))`).
    fn apply(
        &self,
        group: &str,
        settings: &GroupSettings,
    ) -> Result<Result<(), String>, BenchError> {
        let path = GroupPath::from_relative(group);
        let fallbacks = self
            .with(|b| b.apply(&path, settings))
            .map_err(BenchError::backend(format!("apply {group}")))?;
        Ok(match fallbacks.first() {
            None => Ok(()),
            Some(f) => Err(format!(
                "{} {}: wanted {}, got {}: {}",
                f.path, f.knob, f.wanted, f.got, f.reason
            )),
        })
    }

    fn remove_groups(&self) {
        for g in [LENDER, BORROWER] {
            let path = GroupPath::from_relative(g);
            self.with(|b| {
                if b.exists(&path) {
                    let _ = b.remove(&path);
                }
            });
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.remove_groups();
        self.with(|b| {
            let _ = b.remove(&GroupPath::root());
            let _ = b.release();
        });
        for left in sweep(&self.root) {
            eprintln!("atoll bench: could not remove {}", left.display());
        }
    }
}

/// Runs every mechanism of `opts`; `progress` gets one step per mechanism.
pub fn run(opts: &RevocationOptions, progress: &Progress) -> Result<RevocationReport, BenchError> {
    let topo = atoll_topology::read_topology(Path::new(atoll_topology::DEFAULT_SYSFS_ROOT))?;
    let online = topo.online();
    let lender_cpu = online
        .last()
        .ok_or_else(|| BenchError::Unusable("no online CPU".into()))?;
    // The cpuset loop's home for the borrowers: preferably not an SMT
    // sibling of L, so the lender's core is really free after revocation.
    let others = online.difference(&CpuSet::range(lender_cpu, lender_cpu));
    let home_cpu = others
        .difference(&topo.siblings(lender_cpu))
        .first()
        .or_else(|| others.first());
    let root = unique_root("rev");
    let backend = open_here(&root)?;
    let backend_name = backend.kind().as_str().to_string();
    let rig = Rig {
        backend: Mutex::new(backend),
        root,
        mems: topo.memory_nodes(),
        lent: CpuSet::range(lender_cpu, lender_cpu),
        home: home_cpu.map(|h| CpuSet::range(h, h)),
    };
    let root_settings = rig.settings(&online, None, false);
    if let Err(why) = rig.apply("", &root_settings)? {
        return Err(BenchError::Unusable(why));
    }
    let mut report = RevocationReport {
        mechanisms: Default::default(),
        unavailable: Default::default(),
        lender_cpu,
        home_cpu,
        settings: opts.settings.clone(),
        machine: machine::describe(&backend_name),
        command: opts.command.clone(),
    };
    for &m in &opts.mechanisms {
        progress.phase(m.as_str(), "revocation");
        let outcome = measure(&rig, opts, m);
        rig.remove_groups();
        match outcome? {
            Ok(r) => {
                report.mechanisms.insert(m.as_str().into(), r);
            }
            Err(why) => {
                progress.note(&format!("{m}: unavailable: {why}"));
                report.unavailable.insert(m.as_str().into(), why);
            }
        }
    }
    Ok(report)
}

/// One mechanism. `Ok(Err(reason))` when this machine cannot do it.
fn measure(
    rig: &Rig,
    opts: &RevocationOptions,
    m: Mechanism,
) -> Result<Result<MechanismResult, String>, BenchError> {
    let s = &opts.settings;
    let (lender_w, borrower_w) = match m {
        Mechanism::Weight => (Some(10_000), Some(1)),
        // An idle group has no weight of its own (the kernel refuses one).
        Mechanism::CpuIdle => (Some(100), None),
        _ => (Some(100), Some(100)),
    };
    if m == Mechanism::Cpuset && rig.home.is_none() {
        return Ok(Err("needs a second CPU to move the borrowers to".into()));
    }
    if m == Mechanism::CpuIdle && !rig.with(|b| b.capabilities().cpu_idle) {
        return Ok(Err("the kernel has no cpu.idle".into()));
    }
    let lender = rig.settings(&rig.lent, lender_w, false);
    let borrower = rig.settings(&rig.lent, borrower_w, m == Mechanism::CpuIdle);
    for (g, st) in [(LENDER, &lender), (BORROWER, &borrower)] {
        if let Err(why) = rig.apply(g, st)? {
            return Ok(Err(why));
        }
    }
    let mut hogs = Vec::new();
    let n = if m == Mechanism::Alone { 0 } else { s.hogs };
    for i in 0..n {
        let p = Proc::spawn(
            format!("borrower hog {i}"),
            worker_command(&opts.exe, "spin", &[]),
        )?;
        rig.with(|b| b.move_process(p.pid(), &GroupPath::from_relative(BORROWER)))
            .map_err(BenchError::backend("move a borrower hog"))?;
        if m == Mechanism::SchedIdle {
            if let Err(e) =
                atoll_procfs::LinuxTaskControl::new().set_policy(p.pid(), TaskPolicy::Idle)
            {
                return Ok(Err(format!("SCHED_IDLE: {e}")));
            }
        }
        hogs.push(p);
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let looper = (m == Mechanism::Cpuset).then(|| {
            let stop = &stop;
            scope.spawn(move || cpuset_loop(rig, Duration::from_millis(s.poll_ms), stop))
        });
        // Ends the loop however this closure is left (a panic included), so
        // the scope can join it.
        let stopper = StopOnDrop(&stop);
        let measured = lend_and_probe(rig, opts, &hogs);
        drop(stopper);
        let revocations = match looper.map(|h| h.join()) {
            Some(Ok(r)) => Some(r?),
            Some(Err(_)) => {
                return Err(BenchError::Unusable("the cpuset loop panicked".into()));
            }
            None => None,
        };
        let (share, probe) = measured?;
        drop(hogs);
        Ok(MechanismResult::from_probe(&probe, share).map(|mut r| {
            r.revocations = revocations;
            r
        }))
    })
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The borrowers' share of `L` with the lender idle (`None` without
/// borrowers), then the probe's run.
fn lend_and_probe(
    rig: &Rig,
    opts: &RevocationOptions,
    hogs: &[Proc],
) -> Result<(Option<f64>, serde_json::Value), BenchError> {
    let s = &opts.settings;
    let mut share = None;
    if !hogs.is_empty() {
        interrupt::sleep(Duration::from_millis(300))?;
        let u0 = borrower_usage_us(rig, hogs);
        let t0 = Instant::now();
        interrupt::sleep(Duration::from_millis(s.lend_window_ms))?;
        let u1 = borrower_usage_us(rig, hogs);
        share = Some(u1.saturating_sub(u0) as f64 / (t0.elapsed().as_secs_f64() * 1e6));
    }
    let args: Vec<String> = [
        ("--period-us", s.period_us),
        ("--samples", s.samples as u64),
        ("--burst-us", s.burst_us),
        ("--jitter-us", s.jitter_us),
        ("--start-delay-ms", 100),
    ]
    .iter()
    .flat_map(|(k, v)| [k.to_string(), v.to_string()])
    .collect();
    let probe = Proc::spawn("probe", worker_command(&opts.exe, "probe", &args))?;
    rig.with(|b| b.move_process(probe.pid(), &GroupPath::from_relative(LENDER)))
        .map_err(BenchError::backend("move the probe"))?;
    let report = probe.wait(s.probe_timeout())?.report("probe")?;
    Ok((share, report))
}

/// CPU time the borrowers used so far, µs: the group's usage where the
/// backend reports it, else the hogs' own `schedstat`.
fn borrower_usage_us(rig: &Rig, hogs: &[Proc]) -> u64 {
    let group = rig
        .with(|b| b.stats(&GroupPath::from_relative(BORROWER)))
        .ok()
        .and_then(|s| s.cpu_usage_us);
    group.unwrap_or_else(|| {
        hogs.iter()
            .filter_map(|h| {
                let text = std::fs::read_to_string(format!("/proc/{}/schedstat", h.pid())).ok()?;
                text.split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum::<u64>()
            / 1000
    })
}

/// Whether any task of the lender is runnable right now.
fn lender_runnable(rig: &Rig) -> bool {
    let pids = rig
        .with(|b| b.processes(&GroupPath::from_relative(LENDER)))
        .unwrap_or_default();
    pids.iter().any(|pid| {
        let path = format!("/proc/{pid}/stat");
        std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| atoll_procfs::parse_stat(Path::new(&path), &t).ok())
            .is_some_and(|st| st.state == 'R')
    })
}

/// What a daemon epoch can do: every `poll`, take `L` from the borrowers if
/// the lender used CPU since the last poll or is runnable now; give it back
/// after a poll without either. Returns how often it took `L` back.
fn cpuset_loop(rig: &Rig, poll: Duration, stop: &AtomicBool) -> Result<u64, BenchError> {
    let home = rig.home.clone().expect("checked before starting the loop");
    let lender = GroupPath::from_relative(LENDER);
    let mut last = None;
    let mut lent = true;
    let mut revocations = 0;
    while !stop.load(Ordering::SeqCst) {
        let usage = rig
            .with(|b| b.stats(&lender))
            .ok()
            .and_then(|s| s.cpu_usage_us);
        let used = matches!((last, usage), (Some(a), Some(b)) if b > a);
        last = usage;
        let active = used || lender_runnable(rig);
        if active == lent {
            let cpus = if active { &home } else { &rig.lent };
            if let Err(why) = rig.apply(BORROWER, &rig.settings(cpus, Some(100), false))? {
                return Err(BenchError::Unusable(format!("cpuset loop: {why}")));
            }
            lent = !active;
            revocations += u64::from(active);
        }
        std::thread::sleep(poll);
    }
    Ok(revocations)
}

#[cfg(test)]
mod tests {
    use super::super::Settings;

    #[test]
    fn quick_settings_are_shorter_than_full_ones() {
        let (q, f) = (Settings::new(true), Settings::new(false));
        assert!(q.samples < f.samples && q.lend_window_ms < f.lend_window_ms);
        assert!(q.probe_timeout() < f.probe_timeout());
        // The probe sleeps long enough for the loop to lend L again.
        assert!(f.period_us > 2 * f.poll_ms * 1000);
    }
}
