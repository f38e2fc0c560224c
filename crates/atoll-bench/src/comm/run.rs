//! Running `atoll bench comm`: one daemon per run, real servers in units,
//! hogs beside them, a load generator on the host CPUs.
//!
//! Each run is self-contained: it starts the daemon with the variant's
//! config (a unique cgroup root), starts nginx (and the streaming server)
//! with `atoll run --unit U`, checks they answer, starts the five hogs the
//! same way, runs the load, reads the counters, stops everything and the
//! daemon. Processes are [`Proc`]s (their whole group killed on drop) and
//! declared after the [`Daemon`] (stopped and swept on drop), so an error,
//! a panic or Ctrl-C leaves nothing behind, in that order. A daemon that
//! refuses an `[comm]` config makes that variant *unavailable* (with the
//! reason) and the run goes on with the others.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use atoll_core::CpuSet;

use super::config::{daemon_config, hog_name, page_text, tag, Layout, HOG_SHARE};
use super::procstat::{
    busy_now, clock_ticks_per_s, delta, group_members, snapshot, Counters, Snapshot,
};
use super::{
    assemble, best_mechanism, headline, rep_order, two_tier_variants, CommOptions, CommReport,
    Mechanism, Settings, StreamProbe, TwoTierSample, UnitComm, Variant,
};
use crate::error::BenchError;
use crate::interrupt;
use crate::isolation::daemon::Daemon;
use crate::machine;
use crate::procs::{worker_command, Proc};
use crate::progress::Progress;
use crate::worker::http_get;

/// The script that installs what the benchmark needs.
pub const DEPS_SCRIPT: &str = "scripts/bench-deps.sh";
/// How long servers get to answer after they start.
const READY_WAIT: Duration = Duration::from_secs(15);
/// A run during which processes that are not the benchmark's used more of
/// the island than this (CPUs) is run again (other load takes CPU from the
/// hogs too: 0.07 CPUs of it cost them 7-10 % of their work rate in a
/// measured run, far more than the 2 % goal resolves) ...
pub const MAX_OUTSIDE_CPU: f64 = 0.03;
/// ... up to this many more times; the quietest run is kept.
pub const NOISY_RETRIES: usize = 2;
/// After this many disturbed runs in a row the machine is taken to be
/// busy for a while, and runs are no longer repeated (until a quiet one).
const BUSY_STREAK: usize = 4;
/// Before a run, the benchmark waits up to this long for the island to be
/// quiet (others using at most [`MAX_OUTSIDE_CPU`] over a second) ...
const QUIET_WAIT: Duration = Duration::from_secs(30);
/// ... or this long while the machine stays busy.
const QUIET_WAIT_BUSY: Duration = Duration::from_secs(3);

/// A sample that knows how much other load it saw.
pub(super) trait Outside {
    fn outside(&self) -> f64;
}

impl Outside for TwoTierSample {
    fn outside(&self) -> f64 {
        self.outside_cpu.unwrap_or(0.0)
    }
}

impl Outside for StreamProbe {
    fn outside(&self) -> f64 {
        self.outside_cpu.unwrap_or(0.0)
    }
}

/// Why a run did not give a sample.
pub(super) enum RunError {
    /// The daemon would not start with this variant's `[comm]`.
    Refused(String),
    /// Anything else: the benchmark stops.
    Bench(BenchError),
}

impl From<BenchError> for RunError {
    fn from(e: BenchError) -> Self {
        Self::Bench(e)
    }
}

/// Where programs are looked for: `PATH`, then the sbin directories
/// (nginx lives in `/usr/sbin`, which a user's `PATH` may lack).
pub fn search_dirs() -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .collect()
}

/// The first executable `program` in `dirs`.
pub fn find_program(program: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(program)).find(|p| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The programs the benchmark needs, found in `dirs`, or an error naming
/// the missing one and the script that installs it.
pub fn check_dependencies(dirs: &[PathBuf]) -> Result<PathBuf, BenchError> {
    find_program("nginx", dirs).ok_or_else(|| {
        BenchError::Unusable(format!(
            "nginx not found (on PATH or in /usr/sbin): install it with `sudo {DEPS_SCRIPT}` \
             (apt-get install nginx)"
        ))
    })
}

/// Runs every variant; see the module docs.
pub fn run(opts: &CommOptions, progress: &Progress) -> Result<CommReport, BenchError> {
    progress.phase("", "checking the machine");
    let nginx = check_dependencies(&search_dirs())?;
    let (machine, online) = machine::for_real_cgroups()?;
    let layout =
        Layout::for_cpus(&online).ok_or_else(|| BenchError::Unusable("no online CPU".into()))?;
    let mut settings = opts.settings.clone();
    settings.hog_threads = layout.island.len();
    settings.island_cpus = layout.island.to_string();
    settings.load_cpus = layout.load_cpus().to_string();
    let dir = prepare_dir(&settings)?;
    let first = opts.mechanisms.first().copied().unwrap_or(Mechanism::Slice);
    let on = Variant::all(first);
    let mut b = Bench {
        exe: opts.exe.clone(),
        nginx,
        dir: dir.path().to_path_buf(),
        layout,
        s: settings,
        progress,
        unavailable: BTreeMap::new(),
        noisy_streak: 0,
    };

    let variants = two_tier_variants(&opts.mechanisms);
    let mut measured: Vec<(Variant, Vec<TwoTierSample>)> =
        variants.iter().map(|v| (*v, Vec::new())).collect();
    for rep in 0..b.s.reps {
        for v in rep_order(&variants, rep) {
            let what = format!("two-tier, rep {}/{}", rep + 1, b.s.reps);
            if let Some(s) = b.attempt(&v, &what, |b| b.two_tier(&v, rep))? {
                if let Some(m) = measured.iter_mut().find(|(x, _)| *x == v) {
                    m.1.push(s);
                }
            }
        }
    }
    measured.retain(|(_, s)| !s.is_empty());
    let two_tier = assemble(measured);
    let headline = match (two_tier.get("off"), two_tier.get(&on.name())) {
        (Some(off), Some(o)) => headline(off, o),
        _ => Vec::new(),
    };
    let stream = if opts.skip_stream {
        None
    } else {
        Some(b.stream_all(on, first)?)
    };
    Ok(CommReport {
        on: on.name(),
        headline,
        best_mechanism: best_mechanism(&two_tier),
        two_tier,
        stream,
        unavailable: b.unavailable,
        settings: b.s,
        machine,
        command: opts.command.clone(),
    })
}

/// The run's temp dir: readable by nginx's workers (which drop to
/// `nobody`), with the page and a dir for nginx's temp files.
fn prepare_dir(s: &Settings) -> Result<tempfile::TempDir, BenchError> {
    let io = |op, path: &Path| {
        let path = path.to_path_buf();
        move |source| BenchError::Io { op, path, source }
    };
    let dir = crate::temp_dir("comm")?;
    let p = dir.path();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).map_err(io("chmod", p))?;
    for sub in ["www", "tmp"] {
        std::fs::create_dir(p.join(sub)).map_err(io("create", &p.join(sub)))?;
    }
    let page = p.join("www/page.txt");
    std::fs::write(&page, page_text(s.page_kib * 1024)).map_err(io("write", &page))?;
    Ok(dir)
}

/// Three free loopback ports (held together while chosen, so distinct).
pub(super) fn free_ports() -> Result<[u16; 3], BenchError> {
    let bind = || {
        TcpListener::bind("127.0.0.1:0").map_err(|e| BenchError::Setup {
            what: "choosing a loopback port".into(),
            reason: e.to_string(),
        })
    };
    let ls = [bind()?, bind()?, bind()?];
    let port = |l: &TcpListener| l.local_addr().map_or(0, |a| a.port());
    Ok([port(&ls[0]), port(&ls[1]), port(&ls[2])])
}

/// Pins `cmd` to `cpus` before it runs.
pub(crate) fn pin(cmd: &mut Command, cpus: &CpuSet) {
    let list: Vec<usize> = cpus.iter().map(|c| c as usize).collect();
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls sched_setaffinity on a set built on its stack.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in &list {
                libc::CPU_SET(c, &mut set);
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The threads' counters of a unit started as `p`.
fn unit_snapshot(p: &Proc) -> Snapshot {
    let proc_root = Path::new("/proc");
    snapshot(proc_root, &group_members(proc_root, p.pid()))
}

/// A measured window: the counters of some units' processes and the
/// island's busy time at its start.
pub(super) struct Window {
    pub(super) start: Instant,
    pub(super) units: Vec<Snapshot>,
    pub(super) busy: Option<u64>,
}

/// What a window measured.
pub(super) struct Measured {
    /// The growth per unit, in the order given.
    pub(super) units: Vec<Counters>,
    pub(super) window_s: f64,
    /// CPU of the island used by others, CPUs.
    pub(super) outside_cpu: Option<f64>,
}

impl Window {
    pub(super) fn start(units: &[&Proc], island: &[u32]) -> Self {
        Self {
            units: units.iter().map(|p| unit_snapshot(p)).collect(),
            busy: busy_now(island),
            start: Instant::now(),
        }
    }

    pub(super) fn end(self, units: &[&Proc], island: &[u32]) -> Measured {
        let after: Vec<Snapshot> = units.iter().map(|p| unit_snapshot(p)).collect();
        let busy = busy_now(island);
        let window_s = self.start.elapsed().as_secs_f64();
        let units: Vec<Counters> = self
            .units
            .iter()
            .zip(&after)
            .map(|(b, a)| delta(b, a))
            .collect();
        let ours: f64 = units.iter().map(|c| c.run_ns as f64 / 1e9).sum();
        let outside_cpu = self.busy.zip(busy).map(|(b, a)| {
            let busy_s = a.saturating_sub(b) as f64 / clock_ticks_per_s();
            ((busy_s - ours) / window_s).max(0.0)
        });
        Measured {
            units,
            window_s,
            outside_cpu,
        }
    }
}

/// The daemon's comm accounting by unit; `None` when it reports none.
pub(super) fn comm_status(socket: &Path) -> Option<BTreeMap<String, UnitComm>> {
    let mut c = atoll_client::Client::connect(socket).ok()?;
    let st = c.status().ok()?;
    let m: BTreeMap<String, UnitComm> = st
        .units
        .iter()
        .filter_map(|u| {
            let c = u.comm.as_ref()?;
            Some((
                u.name.clone(),
                UnitComm {
                    boosts: c.boosts,
                    boosted_us: c.boosted_us,
                    over_reservation: c.over_reservation,
                    recipient: c.recipient,
                    sender: c.sender,
                    netpath: c.netpath,
                },
            ))
        })
        .collect();
    (!m.is_empty()).then_some(m)
}

/// The spin hogs of a run.
pub(super) struct Hogs(pub(super) Vec<Proc>);

impl Hogs {
    /// Stops them; their summed work rate (`None` if one gave none).
    pub(super) fn finish(self) -> Result<Option<f64>, BenchError> {
        let mut sum = Some(0.0);
        for (i, p) in self.0.into_iter().enumerate() {
            let what = format!("cpu hog ({})", hog_name(i + 1));
            let rate = p.finish(Duration::from_secs(30))?.report(&what)?["chunks_per_s"].as_f64();
            sum = sum.zip(rate).map(|(a, b)| a + b);
        }
        Ok(sum)
    }
}

pub(super) struct Bench<'a> {
    pub(super) exe: PathBuf,
    pub(super) nginx: PathBuf,
    pub(super) dir: PathBuf,
    pub(super) layout: Layout,
    pub(super) s: Settings,
    pub(super) progress: &'a Progress,
    pub(super) unavailable: BTreeMap<String, String>,
    /// Disturbed runs in a row.
    pub(super) noisy_streak: usize,
}

impl Bench<'_> {
    /// Runs `f` as one progress step of `v`, unless `v` is unavailable; a
    /// refusal marks it so. A run that other load disturbed (more than
    /// [`MAX_OUTSIDE_CPU`] of the island) is repeated, and the quietest of
    /// the tries kept.
    pub(super) fn attempt<T: Outside>(
        &mut self,
        v: &Variant,
        what: &str,
        f: impl Fn(&Self) -> Result<T, RunError>,
    ) -> Result<Option<T>, BenchError> {
        let name = v.name();
        if self.unavailable.contains_key(&name) {
            return Ok(None);
        }
        self.progress.phase(&name, what);
        let mut kept: Option<T> = None;
        let mut attempt = 0;
        loop {
            self.wait_quiet()?;
            match f(self) {
                Ok(t) => {
                    let outside = t.outside();
                    if kept.as_ref().is_none_or(|k| outside < k.outside()) {
                        kept = Some(t);
                    }
                    if outside <= MAX_OUTSIDE_CPU {
                        self.noisy_streak = 0;
                        break;
                    }
                    self.noisy_streak += 1;
                    let again = attempt < NOISY_RETRIES && self.noisy_streak < BUSY_STREAK;
                    self.progress.note(&format!(
                        "{name} ({what}): other processes used {outside:.2} CPUs of the \
                         island; {}",
                        if again {
                            "running it again"
                        } else if self.noisy_streak >= BUSY_STREAK {
                            "the machine stays busy: keeping it"
                        } else {
                            "keeping the quietest try"
                        }
                    ));
                    if !again {
                        break;
                    }
                    attempt += 1;
                }
                Err(RunError::Refused(why)) => {
                    self.progress.note(&format!(
                        "{name}: unavailable (the daemon refused it): {why}"
                    ));
                    self.unavailable.insert(name, why);
                    return Ok(None);
                }
                Err(RunError::Bench(e)) => return Err(e),
            }
        }
        Ok(kept)
    }

    /// Waits (up to [`QUIET_WAIT`]) until the island's CPUs were busy less
    /// than [`MAX_OUTSIDE_CPU`] over a second. Between runs none of the
    /// benchmark's processes is on the island, so what is busy there is
    /// other load.
    fn wait_quiet(&self) -> Result<(), BenchError> {
        let island: Vec<u32> = self.layout.island.iter().collect();
        let limit = if self.noisy_streak >= BUSY_STREAK {
            QUIET_WAIT_BUSY
        } else {
            QUIET_WAIT
        };
        let t0 = Instant::now();
        loop {
            let before = busy_now(&island);
            interrupt::sleep(Duration::from_secs(1))?;
            let Some(busy) = before
                .zip(busy_now(&island))
                .map(|(b, a)| a.saturating_sub(b) as f64 / clock_ticks_per_s())
            else {
                return Ok(());
            };
            if busy <= MAX_OUTSIDE_CPU || t0.elapsed() >= limit {
                return Ok(());
            }
        }
    }

    /// The daemon for `v`; a start-up failure of a policy-on variant is a
    /// refusal (carrying the daemon's last words).
    pub(super) fn daemon(&self, v: &Variant) -> Result<Daemon, RunError> {
        let config = daemon_config(&self.layout, v, &self.s);
        match Daemon::start(&self.exe, &tag(v), &config, &self.dir) {
            Ok(d) => Ok(d),
            Err(BenchError::Daemon { reason, log, .. }) if v.is_on() => {
                let last = log
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim()
                    .to_string();
                Err(RunError::Refused(format!("{reason}: {last}")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `atoll run --unit UNIT -- PROGRAM ARGS...` against `d`.
    fn in_unit(&self, d: &Daemon, unit: &str, program: &Path, args: &[String]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("run")
            .arg("--socket")
            .arg(d.socket())
            .args(["--unit", unit, "--"])
            .arg(program)
            .args(args);
        cmd
    }

    /// nginx in `unit` with `conf` (written to the run dir).
    pub(super) fn nginx(&self, d: &Daemon, unit: &str, conf: &str) -> Result<Proc, BenchError> {
        let path = self.dir.join(format!("{unit}.conf"));
        std::fs::write(&path, conf).map_err(|source| BenchError::Io {
            op: "write",
            path: path.clone(),
            source,
        })?;
        let args = crate::procs::nginx_args(
            &self.dir,
            &path,
            &self.dir.join(format!("{unit}-error.log")),
        );
        Proc::spawn(
            format!("nginx ({unit})"),
            self.in_unit(d, unit, &self.nginx, &args),
        )
    }

    /// The last lines of nginx's error log for `unit`.
    fn nginx_log(&self, unit: &str) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(format!("{unit}-error.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    /// Waits until `GET path` on `port` answers 200; a server that exits
    /// meanwhile is an error with what it printed and its error log.
    pub(super) fn wait_http(
        &self,
        port: u16,
        path: &str,
        servers: &mut [(&str, &mut Proc)],
    ) -> Result<(), BenchError> {
        let addr = format!("127.0.0.1:{port}");
        let t0 = Instant::now();
        loop {
            interrupt::check()?;
            for (unit, p) in servers.iter_mut() {
                if p.exited() {
                    return Err(BenchError::Setup {
                        what: format!("server in unit {unit}"),
                        reason: format!("exited during start-up\n{}", self.nginx_log(unit)),
                    });
                }
            }
            let last = match http_get(&addr, path) {
                Ok(r) if r.status == 200 => return Ok(()),
                Ok(r) => format!("status {}", r.status),
                Err(e) => e.to_string(),
            };
            if t0.elapsed() > READY_WAIT {
                let logs: Vec<String> = servers.iter().map(|(u, _)| self.nginx_log(u)).collect();
                return Err(BenchError::Setup {
                    what: format!("GET {path} on {addr}"),
                    reason: format!(
                        "no answer within {READY_WAIT:?} ({last})\n{}",
                        logs.join("\n")
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The hogs, one `spin` per unit.
    pub(super) fn hogs(&self, d: &Daemon) -> Result<Hogs, BenchError> {
        let args = vec!["--threads".to_string(), self.s.hog_threads.to_string()];
        let mut v = Vec::new();
        for i in 1..=self.s.hogs {
            let unit = hog_name(i);
            let cmd = d.run_worker(&unit, "spin", &args);
            v.push(Proc::spawn(format!("cpu hog ({unit})"), cmd)?);
        }
        Ok(Hogs(v))
    }

    /// A worker on the host CPUs, outside every unit.
    pub(super) fn load(&self, kind: &str, args: &[String]) -> Result<Proc, BenchError> {
        let mut cmd = worker_command(&self.exe, kind, args);
        pin(&mut cmd, self.layout.load_cpus());
        Proc::spawn(format!("{kind} (load)"), cmd)
    }

    /// Each hog's reservation, CPUs.
    pub(super) fn hog_reservation(&self) -> f64 {
        HOG_SHARE * self.layout.island.len() as f64
    }
}

/// Stops a server; its exit status does not matter (it was asked to stop).
pub(super) fn stop_quietly(p: Proc) {
    let _ = p.finish(Duration::from_secs(15));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_on_path_or_in_sbin() {
        assert!(find_program("sh", &search_dirs()).is_some());
        assert!(find_program("surely-not-a-program-atoll", &search_dirs()).is_none());
        let d = tempfile::tempdir().unwrap();
        let nginx = d.path().join("nginx");
        std::fs::write(&nginx, "#!/bin/sh\n").unwrap();
        let dirs = vec![d.path().to_path_buf()];
        // Not executable: not found.
        let e = check_dependencies(&dirs).unwrap_err().to_string();
        assert!(
            e.contains("nginx not found") && e.contains(DEPS_SCRIPT),
            "{e}"
        );
        std::fs::set_permissions(&nginx, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(check_dependencies(&dirs).unwrap(), nginx);
    }

    #[test]
    fn three_distinct_ports() {
        let [a, b, c] = free_ports().unwrap();
        assert!(a != b && b != c && a != c && a > 0);
    }

    #[test]
    fn pinning_restricts_the_child() {
        let one = CpuSet::range(0, 0);
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "grep Cpus_allowed_list /proc/self/status"]);
        pin(&mut cmd, &one);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.trim().ends_with("\t0"), "{text}");
    }

    #[test]
    fn the_run_dir_is_readable_and_holds_the_page() {
        let s = Settings::new(true, None, None, None);
        let d = prepare_dir(&s).unwrap();
        let mode = d.path().metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        let page = std::fs::read(d.path().join("www/page.txt")).unwrap();
        assert_eq!(page.len(), s.page_kib * 1024);
        assert!(d.path().join("tmp").is_dir());
    }
}
