//! Running `atoll bench overhead`: the idle processes, then one daemon per
//! scenario, binary and rep.
//!
//! Guards end everything in order on an error, a panic or Ctrl-C: the
//! [`Daemon`] of a run (declared inside [`Bench::run_one`]) is stopped and
//! its root swept first, which moves the units' processes back where they
//! came from; then the [`IdleHerd`] kills and reaps every idle process;
//! then the temp dir goes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use atoll_core::CpuSet;

use super::config::{config_text, entitlement, layout, process_name, run_tag, ConfigSummary};
use super::idle::IdleHerd;
use super::measure::{self, Window};
use super::{
    assemble, Backend, Binary, Goal, OverheadOptions, OverheadReport, Sample, Scenario, Settings,
    Which,
};
use crate::cgroups::choose_here;
use crate::comm::rep_order;
use crate::error::BenchError;
use crate::interrupt;
use crate::isolation::config::Layout;
use crate::isolation::daemon::Daemon;
use crate::machine;
use crate::progress::Progress;

/// How long the units may take to hold their processes.
const ADOPT_WAIT: Duration = Duration::from_secs(30);
/// The tag of the daemons' files and cgroup roots
/// (`atoll-bench-overhead-<pid>-<ns>`).
const TAG: &str = "overhead";

struct Bench<'a> {
    dir: PathBuf,
    layout: Layout,
    tag: String,
    s: &'a Settings,
    cpus: Vec<u32>,
    herd_pids: Vec<u32>,
}

/// What one run gives: its sample and what its daemon said it is.
struct RunOutcome {
    sample: Sample,
    version: Option<String>,
    backend: Option<String>,
}

impl Bench<'_> {
    /// Waits until every unit holds a process, and checks that units hold
    /// only processes the benchmark started; returns the last status.
    fn wait_adopted(&self, d: &Daemon, units: usize) -> Result<serde_json::Value, BenchError> {
        let sim = self.s.backend == Backend::Sim;
        let poll = (TAG, ADOPT_WAIT, Duration::from_millis(100));
        measure::wait_adopted(d, &self.herd_pids, units, sim, poll)
    }

    /// One daemon of `bin` on scenario `sc`: start, warm up, measure, stop.
    fn run_one(&self, bin: &Path, sc: Scenario, rep: usize) -> Result<RunOutcome, BenchError> {
        let config = config_text(&sc, &self.layout, self.s.epoch_ms, &self.tag);
        // A fresh daemon each run: no state from the last one.
        let _ = std::fs::remove_dir_all(self.dir.join(format!("state-{TAG}")));
        let extra: Vec<String> = match self.s.backend {
            Backend::Cgroup => Vec::new(),
            Backend::Sim => vec!["--backend".into(), "sim".into()],
        };
        let d = Daemon::start_with(bin, TAG, &config, &self.dir, &extra)?;
        let pid = d.pid();
        let first = self.wait_adopted(&d, sc.units)?;
        interrupt::sleep(Duration::from_secs_f64(self.s.warmup_s))?;
        let epochs = |v: &serde_json::Value| {
            measure::status_figures(v)
                .0
                .ok_or_else(|| BenchError::Daemon {
                    mode: TAG.into(),
                    reason: "`status --json` has no `epochs`".into(),
                    log: String::new(),
                })
        };
        let e0 = epochs(&d.status_json()?)?;
        let te0 = Instant::now();
        let before = measure::read(pid, &self.cpus)?;
        interrupt::sleep(Duration::from_secs_f64(self.s.seconds))?;
        let after = measure::read(pid, &self.cpus)?;
        let memory_kib = measure::memory(pid)?;
        let last = d.status_json()?;
        let te1 = Instant::now();
        let e1 = epochs(&last)?;
        let (_, units_held) = measure::status_figures(&last);
        d.stop()?;
        let text = |v: &serde_json::Value, k: &str| v.get(k)?.as_str().map(str::to_string);
        Ok(RunOutcome {
            sample: measure::sample(
                &before,
                &after,
                Window {
                    rep,
                    epochs: (e0, e1),
                    epochs_s: te1.duration_since(te0).as_secs_f64(),
                    memory_kib,
                    units_held,
                    cpus: self.cpus.len(),
                },
            ),
            version: text(&first, "version"),
            backend: text(&first, "backend"),
        })
    }
}

/// An absolute path to an existing file.
pub(crate) fn existing(path: &Path, what: &str) -> Result<PathBuf, BenchError> {
    let p = std::fs::canonicalize(path).map_err(|source| BenchError::Io {
        op: "read",
        path: path.to_path_buf(),
        source,
    })?;
    if !p.is_file() {
        return Err(BenchError::Unusable(format!(
            "{what} {} is not a file",
            p.display()
        )));
    }
    Ok(p)
}

/// The machine's description for `backend`; refuses the cgroup backend
/// without root.
fn check_machine(backend: Backend) -> Result<machine::Machine, BenchError> {
    let name = match backend {
        Backend::Sim => "sim".to_string(),
        Backend::Cgroup => {
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                return Err(BenchError::Unusable(
                    "needs root: the daemons run on real cgroups (or pass --backend sim)".into(),
                ));
            }
            choose_here()?.kind().as_str().to_string()
        }
    };
    Ok(machine::describe(&name))
}

/// Runs every scenario for each binary; see the module docs.
pub fn run(opts: &OverheadOptions, progress: &Progress) -> Result<OverheadReport, BenchError> {
    let s = &opts.settings;
    progress.phase("", "checking the machine");
    let daemon_bin = existing(&opts.daemon_bin, "--daemon-bin")?;
    let baseline_bin = opts
        .baseline_bin
        .as_deref()
        .map(|b| existing(b, "--baseline-bin"))
        .transpose()?;
    let machine = check_machine(s.backend)?;
    let online = CpuSet::parse(&machine.online)
        .map_err(|e| BenchError::Unusable(format!("online CPUs {:?}: {e}", machine.online)))?;
    let layout = layout(&online).ok_or_else(|| BenchError::Unusable("no online CPU".into()))?;
    let dir = crate::temp_dir("overhead")?;
    let tag = run_tag();
    let most = s.units.iter().copied().max().unwrap_or(0);
    let names: Vec<String> = (1..=most).map(|i| process_name(&tag, i)).collect();
    progress.note(&format!(
        "starting {} idle processes ({} of them for the units)",
        s.idle.max(most),
        most
    ));
    let mut herd = IdleHerd::start(&dir.path().join("bin"), &names, s.idle)?;
    let b = Bench {
        dir: dir.path().to_path_buf(),
        layout: layout.clone(),
        tag,
        s,
        cpus: online.iter().collect(),
        herd_pids: herd.named().iter().map(|(_, p)| *p).collect(),
    };
    let mut bins = vec![(Which::Daemon, daemon_bin.clone())];
    if let Some(p) = &baseline_bin {
        bins.push((Which::Baseline, p.clone()));
    }
    let order: Vec<(Scenario, Which, PathBuf)> = s
        .scenarios()
        .into_iter()
        .flat_map(|sc| bins.iter().map(move |(w, p)| (sc, *w, p.clone())))
        .collect();
    let mut samples: Vec<(Scenario, Which, Sample)> = Vec::new();
    let mut seen: Vec<(Which, Option<String>, Option<String>)> = Vec::new();
    for rep in 0..s.reps {
        for (sc, which, bin) in rep_order(&order, rep) {
            progress.phase(
                which.as_str(),
                &format!("{}, rep {}/{}", sc.name(), rep + 1, s.reps),
            );
            let out = b.run_one(&bin, sc, rep)?;
            if !seen.iter().any(|(w, ..)| *w == which) {
                seen.push((which, out.version, out.backend));
            }
            samples.push((sc, which, out.sample));
        }
    }
    let idle_processes = herd.running();
    drop(herd);
    let pick = |sc: Scenario, which: Which| -> Vec<Sample> {
        samples
            .iter()
            .filter(|(c, w, _)| *c == sc && *w == which)
            .map(|(_, _, x)| x.clone())
            .collect()
    };
    let scenarios: Vec<_> = s
        .scenarios()
        .into_iter()
        .map(|sc| {
            assemble(
                sc,
                entitlement(layout.island.len(), sc.units),
                pick(sc, Which::Daemon),
                baseline_bin.as_ref().map(|_| pick(sc, Which::Baseline)),
            )
        })
        .collect();
    let binary = |which: Which, path: &Path| {
        let said = seen.iter().find(|(w, ..)| *w == which);
        Binary {
            path: path.display().to_string(),
            version: said.and_then(|(_, v, _)| v.clone()),
            backend: said.and_then(|(_, _, b)| b.clone()),
        }
    };
    Ok(OverheadReport {
        goal: Goal::judge(&scenarios),
        scenarios,
        daemon: binary(Which::Daemon, &daemon_bin),
        baseline: baseline_bin.as_deref().map(|p| binary(Which::Baseline, p)),
        config: ConfigSummary::new(&layout, s.epoch_ms),
        idle_processes,
        settings: s.clone(),
        machine,
        loadavg_end: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string(),
        command: opts.command.clone(),
    })
}

/// The config the daemon gets in `sc` on this machine (for `atoll
/// check-config`): process names carry this process's tag.
pub fn config_here(sc: Scenario, epoch_ms: u64) -> Result<String, BenchError> {
    let machine = machine::describe("");
    let online = CpuSet::parse(&machine.online)
        .map_err(|e| BenchError::Unusable(format!("online CPUs {:?}: {e}", machine.online)))?;
    let layout = layout(&online).ok_or_else(|| BenchError::Unusable("no online CPU".into()))?;
    Ok(config_text(&sc, &layout, epoch_ms, &run_tag()))
}
