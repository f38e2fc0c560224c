//! Running `atoll bench api`: the units' idle processes, then one daemon
//! per mix and binary, its idle window, the clients, its load window.
//!
//! Guards end everything in order on an error, a panic or Ctrl-C: the
//! clients' processes (killed with their process group; their idle
//! processes die with them), the epoch sampler, the [`Daemon`] (stopped,
//! its cgroup root swept), the units' [`IdleHerd`], the temp dir.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use atoll_core::CpuSet;

use super::epochs::{window, Sampler};
use super::load::LoadReport;
use super::{
    assemble, ApiOptions, ApiReport, ConfigInfo, DaemonUse, Goals, Measured, Mix, RunResult,
    Settings,
};
use crate::cgroups::choose_here;
use crate::comm::rep_order;
use crate::error::BenchError;
use crate::interrupt;
use crate::isolation::daemon::Daemon;
use crate::machine::{self, Machine};
use crate::overhead::config::{
    config_text, entitlement, layout, process_name, run_tag, unit_name, ISLAND,
};
use crate::overhead::idle::IdleHerd;
use crate::overhead::measure::{self, Reading, Window};
use crate::overhead::{existing, Binary, Features, Scenario, Which};
use crate::procs::{worker_command, Proc};
use crate::progress::Progress;

/// The tag of the daemons' files and cgroup roots
/// (`atoll-bench-api-<pid>-<ns>`).
const TAG: &str = "api";
/// The overlay of the config.
const OVERLAY: &str = "api";
/// Its latency bound, µs.
const OVERLAY_BOUND_US: u64 = 5000;
/// How long the units may take to hold their processes, and the clients
/// to be ready.
const WAIT: Duration = Duration::from_secs(30);

/// The config: the overhead benchmark's (host on the first CPU, one
/// island on the rest, `units` units each adopting one named idle
/// process, `smp`) and an overlay over the first two units; with
/// `user_units`, users may create units in the island (daemons with an
/// authorization model need it for users' `adopt`s; older ones refuse the
/// key).
pub(crate) fn config(
    layout: &crate::isolation::config::Layout,
    units: usize,
    epoch_ms: u64,
    tag: &str,
    user_units: bool,
) -> String {
    let sc = Scenario {
        units,
        features: Features::Off,
    };
    let mut t = config_text(&sc, layout, epoch_ms, tag).replacen(
        "atoll bench overhead",
        "atoll bench api",
        1,
    );
    if user_units {
        let island = format!("[island.{ISLAND}]\n");
        t = t.replacen(&island, &format!("{island}user_units = true\n"), 1);
    }
    let members: Vec<String> = (1..=units.min(2))
        .map(|i| format!("\"{}\"", unit_name(i)))
        .collect();
    t.push_str(&format!(
        "\n[overlay.{OVERLAY}]\nunits = [{}]\nlatency_us = {OVERLAY_BOUND_US}\n",
        members.join(", ")
    ));
    t
}

/// The config of [`config`] for this machine, its units adopting processes
/// named after this process (`ao<pid>u001`, ...).
pub fn config_here(units: usize, epoch_ms: u64, user_units: bool) -> Result<String, BenchError> {
    let machine = machine::describe("");
    let online = CpuSet::parse(&machine.online)
        .map_err(|e| BenchError::Unusable(format!("online CPUs {:?}: {e}", machine.online)))?;
    let layout = layout(&online).ok_or_else(|| BenchError::Unusable("no online CPU".into()))?;
    Ok(config(&layout, units, epoch_ms, &run_tag(), user_units))
}

/// Whether `bin check-config` accepts the config with `user_units` (a
/// file written in `dir`).
pub fn accepts_user_units(bin: &Path, dir: &Path) -> Result<bool, BenchError> {
    let path = dir.join("check-user-units.toml");
    let text = config_here(2, 30, true)?;
    std::fs::write(&path, text).map_err(|source| BenchError::Io {
        op: "write",
        path: path.clone(),
        source,
    })?;
    let out = std::process::Command::new(bin)
        .arg("check-config")
        .arg(&path)
        .output()
        .map_err(|source| BenchError::Spawn {
            what: "check-config".into(),
            program: bin.to_path_buf(),
            source,
        })?;
    let _ = std::fs::remove_file(&path);
    Ok(out.status.success())
}

struct Bench<'a> {
    dir: PathBuf,
    sync: PathBuf,
    exe: PathBuf,
    /// The config without and with `user_units`.
    configs: [String; 2],
    s: &'a Settings,
    cpus: Vec<u32>,
    herd_pids: Vec<u32>,
}

/// What one run gives, and what its daemon said it is.
struct Outcome {
    measured: Measured,
    version: Option<String>,
    backend: Option<String>,
}

fn set_mode(path: &Path, mode: u32) -> Result<(), BenchError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        BenchError::Io {
            op: "chmod",
            path: path.to_path_buf(),
            source,
        }
    })
}

fn use_of(before: &Reading, after: &Reading, cpus: usize) -> DaemonUse {
    let s = measure::sample(
        before,
        after,
        Window {
            rep: 0,
            epochs: (0, 0),
            epochs_s: 1.0,
            memory_kib: (0, 0),
            units_held: 0,
            cpus,
        },
    );
    DaemonUse {
        cpu_pct: s.cpu_pct,
        ctx_switches_per_s: s.ctx_switches_per_s,
        machine_busy_pct: s.machine_busy_pct,
    }
}

impl Bench<'_> {
    /// Waits until every unit holds its process (and only processes the
    /// benchmark started); returns the last status.
    fn wait_adopted(&self, d: &Daemon) -> Result<serde_json::Value, BenchError> {
        let poll = (TAG, WAIT, Duration::from_millis(50));
        measure::wait_adopted(d, &self.herd_pids, self.s.units, false, poll)
    }

    /// The clients' processes of run `n`: root's, then one per other uid.
    fn start_clients(
        &self,
        d: &Daemon,
        mix: Mix,
        n: usize,
    ) -> Result<Vec<(u32, Proc, PathBuf)>, BenchError> {
        let s = self.s;
        let (root, _) = s.split();
        let mut groups = vec![(0u32, root)];
        groups.extend(s.user_groups());
        let go = self.sync.join(format!("go-{n}"));
        let mut procs = Vec::new();
        for (i, (uid, clients)) in groups.into_iter().enumerate() {
            if clients == 0 {
                continue;
            }
            let ready = self.sync.join(format!("ready-{n}-{i}"));
            let units = if uid == 0 {
                "bapi-root".to_string()
            } else {
                format!("bapi-u{uid}")
            };
            let args: Vec<String> = [
                "--socket",
                &d.socket().display().to_string(),
                "--clients",
                &clients.to_string(),
                "--seconds",
                &s.seconds.to_string(),
                "--mix",
                mix.as_str(),
                "--depth",
                &s.depth.to_string(),
                "--units",
                &units,
                "--overlay",
                OVERLAY,
                "--overlay-unit",
                &unit_name(1),
                "--ready",
                &ready.display().to_string(),
                "--go",
                &go.display().to_string(),
                "--drain-s",
                &s.drain_s.to_string(),
            ]
            .iter()
            .map(|a| a.to_string())
            .collect();
            let mut cmd = worker_command(&self.exe, "api-load", &args);
            if uid != 0 {
                cmd.uid(uid).gid(uid);
            }
            // SAFETY: the closure runs in the child between fork and exec
            // (after the uid change) and calls only prctl(2), which is
            // async-signal-safe; it allocates nothing.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let p = Proc::spawn(format!("api clients (uid {uid})"), cmd)?;
            procs.push((uid, p, ready));
        }
        Ok(procs)
    }

    /// Waits until every client process is ready (its idle processes up).
    fn wait_ready(&self, procs: &mut [(u32, Proc, PathBuf)]) -> Result<(), BenchError> {
        let t0 = Instant::now();
        loop {
            if procs.iter().all(|(_, _, r)| r.exists()) {
                return Ok(());
            }
            if let Some(uid) = procs
                .iter_mut()
                .find_map(|(uid, p, _)| p.exited().then_some(*uid))
            {
                return Err(BenchError::Worker {
                    what: format!("api clients (uid {uid})"),
                    reason: "exited before it was ready".into(),
                    output: String::new(),
                });
            }
            if t0.elapsed() > WAIT {
                return Err(BenchError::Setup {
                    what: "api clients".into(),
                    reason: format!("not ready after {WAIT:?}"),
                });
            }
            interrupt::sleep(Duration::from_millis(10))?;
        }
    }

    /// One daemon of `bin` under `mix`: start, idle window, clients, load
    /// window, stop. `n` numbers the run.
    fn run_one(
        &self,
        bin: &Path,
        user_units: bool,
        mix: Mix,
        which: Which,
        n: usize,
    ) -> Result<Outcome, BenchError> {
        let s = self.s;
        let _ = std::fs::remove_dir_all(self.dir.join(format!("state-{TAG}")));
        let config = &self.configs[usize::from(user_units)];
        let d = Daemon::start_with(bin, TAG, config, &self.dir, &[])?;
        let pid = d.pid();
        let first = self.wait_adopted(&d)?;
        let sampler = Sampler::start(d.socket(), Duration::from_millis(s.sample_ms))?;
        interrupt::sleep(Duration::from_secs_f64(s.warmup_s))?;
        // Idle.
        let i0 = measure::read(pid, &self.cpus)?;
        let ti0 = sampler.now();
        interrupt::sleep(Duration::from_secs_f64(s.idle_s))?;
        let ti1 = sampler.now();
        let i1 = measure::read(pid, &self.cpus)?;
        // The clients, ready and then off.
        let mut procs = self.start_clients(&d, mix, n)?;
        self.wait_ready(&mut procs)?;
        let go = self.sync.join(format!("go-{n}"));
        std::fs::write(&go, b"").map_err(|source| BenchError::Io {
            op: "create",
            path: go.clone(),
            source,
        })?;
        let t_go = Instant::now();
        interrupt::sleep(Duration::from_secs_f64(s.settle_s))?;
        let l0 = measure::read(pid, &self.cpus)?;
        let tl0 = sampler.now();
        let end = t_go + Duration::from_secs_f64(s.seconds);
        interrupt::sleep(end.saturating_duration_since(Instant::now()))?;
        let tl1 = sampler.now();
        let l1 = measure::read(pid, &self.cpus)?;
        let memory_kib = measure::memory(pid)?;
        // What the clients counted.
        let wait = Duration::from_secs_f64(s.drain_s + 30.0);
        let mut root = LoadReport::default();
        let mut users = Vec::new();
        for (uid, p, _) in procs {
            let what = format!("api clients (uid {uid})");
            let value = p.wait(wait)?.report(&what)?;
            let r: LoadReport = serde_json::from_value(value).map_err(|e| BenchError::Worker {
                what: what.clone(),
                reason: format!("report: {e}"),
                output: String::new(),
            })?;
            if uid == 0 {
                root = r;
            } else {
                users.push(r);
            }
        }
        let (snaps, sampler_notes) = sampler.finish();
        d.stop()?;
        let text = |v: &serde_json::Value, k: &str| v.get(k)?.as_str().map(str::to_string);
        let cpus = self.cpus.len();
        Ok(Outcome {
            measured: Measured {
                mix,
                which,
                idle: window(&snaps, ti0, ti1, s.epoch_ms),
                load: window(&snaps, tl0, tl1, s.epoch_ms),
                use_idle: use_of(&i0, &i1, cpus),
                use_load: use_of(&l0, &l1, cpus),
                memory_kib,
                root,
                users,
                sampler_notes,
            },
            version: text(&first, "version"),
            backend: text(&first, "backend"),
        })
    }
}

/// The machine's description; refuses to run without root (the daemons
/// run on real cgroups, and clients run as other users).
fn check_machine() -> Result<Machine, BenchError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(BenchError::Unusable(
            "needs root: the daemons run on real cgroups and half the clients as other users"
                .into(),
        ));
    }
    Ok(machine::describe(choose_here()?.kind().as_str()))
}

/// Runs every mix on each binary; see the module docs.
pub fn run(opts: &ApiOptions, progress: &Progress) -> Result<ApiReport, BenchError> {
    let s = &opts.settings;
    progress.phase("", "checking the machine");
    let exe = existing(&opts.exe, "the atoll binary")?;
    let daemon_bin = existing(&opts.daemon_bin, "--daemon-bin")?;
    let baseline_bin = opts
        .baseline_bin
        .as_deref()
        .map(|b| existing(b, "--baseline-bin"))
        .transpose()?;
    let machine = check_machine()?;
    let online = CpuSet::parse(&machine.online)
        .map_err(|e| BenchError::Unusable(format!("online CPUs {:?}: {e}", machine.online)))?;
    let layout = layout(&online).ok_or_else(|| BenchError::Unusable("no online CPU".into()))?;
    let dir = crate::temp_dir("api")?;
    // Clients that are not root reach the socket through it, and leave
    // their ready files in `sync`.
    set_mode(dir.path(), 0o711)?;
    let sync = dir.path().join("sync");
    std::fs::create_dir(&sync).map_err(|source| BenchError::Io {
        op: "create",
        path: sync.clone(),
        source,
    })?;
    set_mode(&sync, 0o1777)?;
    let tag = run_tag();
    let names: Vec<String> = (1..=s.units).map(|i| process_name(&tag, i)).collect();
    progress.note(&format!(
        "starting {} idle processes for the units",
        s.units
    ));
    let herd = IdleHerd::start(&dir.path().join("bin"), &names, s.units)?;
    let b = Bench {
        dir: dir.path().to_path_buf(),
        sync,
        exe,
        configs: [
            config(&layout, s.units, s.epoch_ms, &tag, false),
            config(&layout, s.units, s.epoch_ms, &tag, true),
        ],
        s,
        cpus: online.iter().collect(),
        herd_pids: herd.named().iter().map(|(_, p)| *p).collect(),
    };
    let mut bins = vec![(Which::Daemon, daemon_bin.clone())];
    if let Some(p) = &baseline_bin {
        bins.push((Which::Baseline, p.clone()));
    }
    let user_units: Vec<(Which, bool)> = bins
        .iter()
        .map(|(w, p)| Ok((*w, accepts_user_units(p, dir.path())?)))
        .collect::<Result<_, BenchError>>()?;
    let uu = |w: Which| user_units.iter().any(|(x, on)| *x == w && *on);
    let mut runs: Vec<RunResult> = Vec::new();
    let mut seen: Vec<(Which, Option<String>, Option<String>)> = Vec::new();
    let mut n = 0;
    for (i, mix) in s.mixes.iter().enumerate() {
        for (which, bin) in rep_order(&bins, i) {
            progress.phase(which.as_str(), &format!("{} mix", mix.as_str()));
            let out = b.run_one(&bin, uu(which), *mix, which, n)?;
            n += 1;
            if !seen.iter().any(|(w, ..)| *w == which) {
                seen.push((which, out.version, out.backend));
            }
            runs.push(assemble(out.measured));
        }
    }
    drop(herd);
    let binary = |which: Which, path: &Path| {
        let said = seen.iter().find(|(w, ..)| *w == which);
        Binary {
            path: path.display().to_string(),
            version: said.and_then(|(_, v, _)| v.clone()),
            backend: said.and_then(|(_, _, b)| b.clone()),
        }
    };
    Ok(ApiReport {
        goals: Goals::judge(&runs, baseline_bin.is_some()),
        runs,
        daemon: binary(Which::Daemon, &daemon_bin),
        baseline: baseline_bin.as_deref().map(|p| binary(Which::Baseline, p)),
        config: ConfigInfo {
            host: layout.host.to_string(),
            island: layout.island.to_string(),
            units: s.units,
            entitlement_cpus: entitlement(layout.island.len(), s.units),
            overlay: format!(
                "{OVERLAY}: units {} and {}, p99 latency within {OVERLAY_BOUND_US} us",
                unit_name(1),
                unit_name(2)
            ),
            epoch_ms: s.epoch_ms,
            user_units,
        },
        user_groups: s.user_groups(),
        settings: s.clone(),
        machine,
        loadavg_end: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string(),
        command: opts.command.clone(),
    })
}

#[cfg(test)]
mod tests {
    use atoll_core::topology::{SyntheticShape, Topology};

    use super::*;

    #[test]
    fn the_config_validates_with_its_overlay() {
        let topo = Topology::synthetic(SyntheticShape {
            packages: 1,
            nodes_per_package: 1,
            llcs_per_node: 1,
            cores_per_llc: 2,
            threads_per_core: 1,
            memory_per_node: 1 << 30,
        });
        let l = layout(&CpuSet::parse("0-1").unwrap()).unwrap();
        let text = config(&l, 10, 30, "ao42", false);
        assert!(
            text.starts_with("# Generated by `atoll bench api`"),
            "{text}"
        );
        let spec =
            atoll_config::parse(&text, "api.toml", &topo).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(spec.units.len(), 10);
        assert!(text.contains("[overlay.api]\nunits = [\"u001\", \"u002\"]\nlatency_us = 5000"));
        assert!(!spec.islands[0].access.user_units);
        let text = config(&l, 10, 30, "ao42", true);
        assert!(
            text.contains("[island.bench]\nuser_units = true\ncpus = \"1\""),
            "{text}"
        );
        let spec =
            atoll_config::parse(&text, "api.toml", &topo).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(spec.islands[0].access.user_units);
    }
}
