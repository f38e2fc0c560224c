//! `atoll bench api`: how the daemon's API holds up under many clients, and
//! whether its control loop keeps its epochs meanwhile, with one or two
//! daemon binaries side by side in one run.
//!
//! For each **mix** (`read`: `status` only; `mixed`: mostly reads with some
//! changing requests; `write`: changing requests only; [`load`]) and each
//! **binary** (the daemon measured, and with `--baseline-bin` a second one,
//! in alternating order), the benchmark starts that binary's `atoll
//! daemon` on a fresh cgroup root, socket and state dir with a config of
//! 10 units (each holding one idle process) and an overlay, and then:
//!
//! 1. measures the daemon **idle** (its epochs from `status`, [`epochs`];
//!    its CPU share);
//! 2. starts the clients: 32 by default, half of them as root and half as
//!    users other than root (uids 65534, 65533, ..., at most 4 clients
//!    each), each its own connection, running the mix's plan as fast as
//!    the daemon answers (`atoll __worker api-load`, one process per uid);
//! 3. measures the daemon under that **load** for the window: its epochs
//!    and CPU share, its memory at the end;
//! 4. collects what the clients counted: requests and replies per kind,
//!    latency (a histogram, [`hist`]), errors by code (`busy`, the pacing
//!    of users' changing requests, apart from failures) and **lost**
//!    requests (sent and never answered);
//! 5. stops the daemon.
//!
//! [`assemble`] turns a run into figures per kind; [`Goals::judge`] holds
//! them against the goals.

pub mod epochs;
pub mod hist;
pub mod load;
mod run;
mod table;

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use epochs::EpochWindow;
pub use load::{Kind, LoadReport, Mix};
pub use run::{accepts_user_units, config_here, run};
use serde::{Deserialize, Serialize};
pub use table::render_table;

use crate::machine::Machine;
use crate::overhead::{Binary, Which};
use crate::stats::{ratio, round};

/// The goal on `status` throughput, requests per second (read mix).
pub const GOAL_STATUS_PER_S: f64 = 10_000.0;
/// The goal on `status` p99 latency, ms (read mix).
pub const GOAL_STATUS_P99_MS: f64 = 5.0;
/// The epoch rate under load stays within this share of the idle rate.
pub const GOAL_EPOCH_TOLERANCE: f64 = 0.10;
/// At most this share of epochs late by more than one epoch.
pub const GOAL_LATE_SHARE: f64 = 0.01;

/// The first uid of the clients that are not root; the next ones count
/// down from it.
pub const USER_UID: u32 = 65534;
/// Most clients per uid other than root (the daemon admits 8 connections
/// per user).
pub const CLIENTS_PER_USER: usize = 4;

/// Which clients run as users other than root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Users {
    /// None: every client is root.
    Off,
    /// Half of them.
    Half,
    /// All of them (the attack of users alone).
    All,
}

impl std::str::FromStr for Users {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "off" => Ok(Self::Off),
            "on" | "half" => Ok(Self::Half),
            "only" | "all" => Ok(Self::All),
            _ => Err(format!("users {s:?}: expected on, off or only")),
        }
    }
}

/// Durations and sizes of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Short runs (a smoke test).
    pub quick: bool,
    /// The mixes, in order.
    pub mixes: Vec<Mix>,
    /// The load window, s.
    pub seconds: f64,
    /// The idle window before it, s.
    pub idle_s: f64,
    /// From the units holding their processes to the idle window, s.
    pub warmup_s: f64,
    /// From the clients' start to the daemon's load window (their
    /// connections are made), s.
    pub settle_s: f64,
    /// Clients in all.
    pub clients: usize,
    /// Which of them run as users other than root.
    pub users: Users,
    /// Requests each client keeps in flight.
    pub depth: usize,
    /// Units in the config.
    pub units: usize,
    /// The daemon's epoch, ms.
    pub epoch_ms: u64,
    /// How often the epochs are sampled, ms.
    pub sample_ms: u64,
    /// How long clients wait for replies after the window, s.
    pub drain_s: f64,
}

impl Settings {
    /// The defaults (`quick`: 8 clients, a 2 s window after 1 s idle).
    pub fn new(quick: bool) -> Self {
        Self {
            quick,
            mixes: Mix::ALL.to_vec(),
            seconds: if quick { 2.0 } else { 15.0 },
            idle_s: if quick { 1.0 } else { 5.0 },
            warmup_s: if quick { 0.5 } else { 2.0 },
            settle_s: if quick { 0.25 } else { 0.5 },
            clients: if quick { 8 } else { 32 },
            users: Users::Half,
            depth: 1,
            units: 10,
            epoch_ms: 30,
            sample_ms: 100,
            drain_s: 15.0,
        }
    }

    /// Clients as root and as other users.
    pub fn split(&self) -> (usize, usize) {
        let users = match self.users {
            Users::Off => 0,
            Users::Half => self.clients / 2,
            Users::All => self.clients,
        };
        (self.clients - users, users)
    }

    /// The uids other than root and their clients.
    pub fn user_groups(&self) -> Vec<(u32, usize)> {
        let (_, mut left) = self.split();
        let mut groups = Vec::new();
        let mut uid = USER_UID;
        while left > 0 {
            let n = left.min(CLIENTS_PER_USER);
            groups.push((uid, n));
            left -= n;
            uid -= 1;
        }
        groups
    }
}

/// What `atoll bench api` runs.
#[derive(Clone, Debug)]
pub struct ApiOptions {
    /// The `atoll` binary whose `__worker api-load` are the clients.
    pub exe: PathBuf,
    /// The daemon binary measured (A).
    pub daemon_bin: PathBuf,
    /// The one compared with it (B).
    pub baseline_bin: Option<PathBuf>,
    /// Durations and sizes.
    pub settings: Settings,
    /// The command line, for the report.
    pub command: String,
}

impl ApiOptions {
    /// Progress steps: the set-up and one per run.
    pub fn steps(&self) -> usize {
        1 + self.settings.mixes.len() * (1 + usize::from(self.baseline_bin.is_some()))
    }
}

/// One kind of request in one run, all clients together.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindFigures {
    /// Replies ÷ the window.
    pub per_s: f64,
    /// Latency, ms (nearest rank, within 0.8 % below the sample).
    pub p50_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// Largest, exact.
    pub max_ms: Option<f64>,
    /// Requests sent.
    pub sent: u64,
    /// Replies with `ok`.
    pub ok: u64,
    /// Replies with `busy` (users' changing requests paced: expected).
    pub busy: u64,
    /// Other errors, by code: failures.
    pub failed: BTreeMap<String, u64>,
}

impl KindFigures {
    /// The figures of `s` over a window of `window_s`.
    pub fn of(s: &load::KindStats, window_s: f64) -> Self {
        let ms = |p: f64| {
            s.latency
                .percentile(p)
                .map(|us| round(us as f64 / 1000.0, 3))
        };
        Self {
            per_s: round(s.answered as f64 / window_s.max(1e-9), 1),
            p50_ms: ms(50.0),
            p99_ms: ms(99.0),
            max_ms: ms(100.0),
            sent: s.sent,
            ok: s.ok,
            busy: s.errors_of("busy"),
            failed: s
                .errors
                .iter()
                .filter(|(c, _)| c.as_str() != "busy")
                .map(|(c, n)| (c.clone(), *n))
                .collect(),
        }
    }

    /// Failures in all.
    pub fn failures(&self) -> u64 {
        self.failed.values().sum()
    }
}

/// The daemon's own use of the machine over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonUse {
    /// `utime + stime` over the window, % of one CPU.
    pub cpu_pct: f64,
    /// Context switches of its threads per second.
    pub ctx_switches_per_s: f64,
    /// How busy all CPUs were (everything on them), %.
    pub machine_busy_pct: Option<f64>,
}

/// One mix on one binary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The mix.
    pub mix: Mix,
    /// Which binary.
    pub which: Which,
    /// Epochs idle.
    pub idle: Option<EpochWindow>,
    /// Epochs under load.
    pub load: Option<EpochWindow>,
    /// Load ÷ idle epoch rate.
    pub epoch_ratio: Option<f64>,
    /// The daemon idle.
    pub use_idle: DaemonUse,
    /// The daemon under load.
    pub use_load: DaemonUse,
    /// `VmRSS` at the end of the load, MiB.
    pub rss_mib: f64,
    /// `VmHWM` (its peak) then, MiB.
    pub hwm_mib: f64,
    /// Per kind of request, every client.
    pub kinds: BTreeMap<String, KindFigures>,
    /// Every client's counts together (histograms included).
    pub clients: LoadReport,
    /// Those of root's clients.
    pub root: LoadReport,
    /// Those of the other users' clients (none without them).
    pub users: Option<LoadReport>,
    /// What went wrong while sampling epochs.
    pub sampler_notes: Vec<String>,
    /// The 1-minute load average at the end.
    pub loadavg_1m: Option<f64>,
}

impl RunResult {
    /// Figures of `kind`, if it was sent.
    pub fn kind(&self, kind: &str) -> Option<&KindFigures> {
        self.kinds.get(kind)
    }

    /// Requests lost.
    pub fn lost(&self) -> u64 {
        self.clients.lost
    }

    /// Requests sent.
    pub fn sent(&self) -> u64 {
        self.kinds.values().map(|k| k.sent).sum()
    }
}

/// What one run measured, before [`assemble`].
#[derive(Clone, Debug)]
pub struct Measured {
    /// The mix.
    pub mix: Mix,
    /// Which binary.
    pub which: Which,
    /// Epochs idle and under load.
    pub idle: Option<EpochWindow>,
    /// Under load.
    pub load: Option<EpochWindow>,
    /// The daemon idle and under load.
    pub use_idle: DaemonUse,
    /// Under load.
    pub use_load: DaemonUse,
    /// `VmRSS`, `VmHWM` at the end, KiB.
    pub memory_kib: (u64, u64),
    /// Root's clients.
    pub root: LoadReport,
    /// Each other user's clients.
    pub users: Vec<LoadReport>,
    /// The sampler's problems.
    pub sampler_notes: Vec<String>,
}

/// The figures of a run.
pub fn assemble(m: Measured) -> RunResult {
    let users = m.users.iter().fold(None, |acc: Option<LoadReport>, r| {
        let mut a = acc.unwrap_or_else(|| LoadReport {
            uid: r.uid,
            mix: r.mix.clone(),
            depth: r.depth,
            ..LoadReport::default()
        });
        a.merge(r);
        Some(a)
    });
    let mut clients = m.root.clone();
    if let Some(u) = &users {
        clients.merge(u);
    }
    let kinds = clients
        .kinds
        .iter()
        .map(|(k, s)| (k.clone(), KindFigures::of(s, clients.window_s)))
        .collect();
    RunResult {
        mix: m.mix,
        which: m.which,
        epoch_ratio: ratio(m.load.map(|w| w.per_s), m.idle.map(|w| w.per_s)).map(|r| round(r, 3)),
        idle: m.idle,
        load: m.load,
        use_idle: m.use_idle,
        use_load: m.use_load,
        rss_mib: round(m.memory_kib.0 as f64 / 1024.0, 2),
        hwm_mib: round(m.memory_kib.1 as f64 / 1024.0, 2),
        kinds,
        clients,
        root: m.root,
        users,
        sampler_notes: m.sampler_notes,
        loadavg_1m: crate::overhead::measure::loadavg_1m(),
    }
}

/// One binary's verdict on each goal (`None`: not measured).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdicts {
    /// `status` throughput and p99 in the read mix.
    pub status: Option<bool>,
    /// Epochs on time in every mix.
    pub epochs: Option<bool>,
    /// No request lost in any mix.
    pub lost: Option<bool>,
}

/// The goals and each binary's verdicts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Goals {
    /// `status` req/s at least this (read mix).
    pub status_per_s: f64,
    /// ... with p99 under this, ms.
    pub status_p99_ms: f64,
    /// Epoch rate under load within this share of idle.
    pub epoch_tolerance: f64,
    /// At most this share of epochs late by more than one epoch.
    pub late_share: f64,
    /// The daemon's verdicts.
    pub daemon: Verdicts,
    /// The baseline's.
    pub baseline: Option<Verdicts>,
}

/// Whether every `Some` is true; `None` when there is none.
fn all(v: impl IntoIterator<Item = Option<bool>>) -> Option<bool> {
    v.into_iter()
        .flatten()
        .fold(None, |acc, x| Some(acc.unwrap_or(true) && x))
}

impl Verdicts {
    /// Judges `runs` (one binary's).
    pub fn judge(runs: &[&RunResult]) -> Self {
        let status = runs
            .iter()
            .find(|r| r.mix == Mix::Read)
            .and_then(|r| r.kind("status"))
            .map(|k| {
                k.per_s >= GOAL_STATUS_PER_S && k.p99_ms.is_some_and(|p| p < GOAL_STATUS_P99_MS)
            });
        let epochs = all(runs.iter().map(|r| {
            let ratio = r.epoch_ratio?;
            let late = r.load?.late_share;
            Some((ratio - 1.0).abs() <= GOAL_EPOCH_TOLERANCE && late <= GOAL_LATE_SHARE)
        }));
        let lost = all(runs.iter().map(|r| Some(r.lost() == 0)));
        Self {
            status,
            epochs,
            lost,
        }
    }
}

impl Goals {
    /// Judges every run of each binary.
    pub fn judge(runs: &[RunResult], baseline: bool) -> Self {
        let of = |w: Which| -> Vec<&RunResult> { runs.iter().filter(|r| r.which == w).collect() };
        Self {
            status_per_s: GOAL_STATUS_PER_S,
            status_p99_ms: GOAL_STATUS_P99_MS,
            epoch_tolerance: GOAL_EPOCH_TOLERANCE,
            late_share: GOAL_LATE_SHARE,
            daemon: Verdicts::judge(&of(Which::Daemon)),
            baseline: baseline.then(|| Verdicts::judge(&of(Which::Baseline))),
        }
    }
}

/// The config the daemons ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigInfo {
    /// Host CPUs.
    pub host: String,
    /// The island's CPUs.
    pub island: String,
    /// Units (each holding one idle process).
    pub units: usize,
    /// Their entitlement, CPUs.
    pub entitlement_cpus: f64,
    /// The overlay and its units.
    pub overlay: String,
    /// `epoch_ms`.
    pub epoch_ms: u64,
    /// Whether each binary's config let users create units in the island
    /// (`user_units = true`, given to binaries whose `check-config`
    /// accepts it).
    #[serde(default)]
    pub user_units: Vec<(Which, bool)>,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiReport {
    /// Every run, in the order they ran.
    pub runs: Vec<RunResult>,
    /// The goals, judged.
    pub goals: Goals,
    /// The daemon measured (A).
    pub daemon: Binary,
    /// The baseline (B).
    pub baseline: Option<Binary>,
    /// The config.
    pub config: ConfigInfo,
    /// The uids other than root and their clients.
    pub user_groups: Vec<(u32, usize)>,
    /// Durations and sizes.
    pub settings: Settings,
    /// The machine (load average at the start).
    pub machine: Machine,
    /// `/proc/loadavg` at the end.
    pub loadavg_end: String,
    /// The command line.
    pub command: String,
}

impl ApiReport {
    /// The run of `mix` on `which`.
    pub fn run_of(&self, mix: Mix, which: Which) -> Option<&RunResult> {
        self.runs.iter().find(|r| r.mix == mix && r.which == which)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::load::KindStats;
    use super::*;

    /// A report of `n` answered requests of `kind` at `us` each, `busy`
    /// of them busy, over 10 s.
    pub(crate) fn clients(kind: &str, n: u64, us: u64, busy: u64, lost: u64) -> LoadReport {
        let mut s = KindStats {
            sent: n + lost,
            answered: n,
            ok: n - busy,
            ..KindStats::default()
        };
        if busy > 0 {
            s.errors.insert("busy".into(), busy);
        }
        for _ in 0..n {
            s.latency.record(us);
        }
        let mut r = LoadReport {
            clients: 4,
            window_s: 10.0,
            lost,
            mix: "read".into(),
            depth: 1,
            ..LoadReport::default()
        };
        r.kinds.insert(kind.into(), s);
        r
    }

    pub(crate) fn epochs(per_s: f64, missed: f64) -> EpochWindow {
        EpochWindow {
            snapshots: 100,
            span_ms: 10_000,
            epochs: atoll_core::num::saturating_u64(per_s * 10.0),
            per_s,
            expected: 333.3,
            missed,
            late_share: missed.max(0.0) / 333.3,
            worst_stall: missed.max(0.0),
        }
    }

    pub(crate) fn measured(mix: Mix, which: Which, per_s: f64, load_per_s: f64) -> RunResult {
        let root = clients("status", 120_000, 900, 0, 0);
        let user = clients("status", 30_000, 1500, 0, 0);
        assemble(Measured {
            mix,
            which,
            idle: Some(epochs(per_s, 0.2)),
            load: Some(epochs(load_per_s, 33.3 - load_per_s)),
            use_idle: DaemonUse::default(),
            use_load: DaemonUse {
                cpu_pct: 80.0,
                ..DaemonUse::default()
            },
            memory_kib: (10240, 11264),
            root,
            users: vec![user.clone(), user],
            sampler_notes: vec![],
        })
    }

    #[test]
    fn settings_split_the_clients_among_uids() {
        let s = Settings::new(false);
        assert_eq!(s.split(), (16, 16));
        assert_eq!(
            s.user_groups(),
            [(65534, 4), (65533, 4), (65532, 4), (65531, 4)]
        );
        let mut q = Settings::new(true);
        assert_eq!(q.split(), (4, 4));
        q.clients = 7;
        assert_eq!(q.user_groups(), [(65534, 3)]);
        q.users = Users::Off;
        assert_eq!((q.split(), q.user_groups()), ((7, 0), vec![]));
        q.users = Users::All;
        assert_eq!(q.split(), (0, 7));
        assert_eq!(q.user_groups(), [(65534, 4), (65533, 3)]);
        assert_eq!("only".parse::<Users>(), Ok(Users::All));
        assert_eq!("on".parse::<Users>(), Ok(Users::Half));
        assert!("some".parse::<Users>().is_err());
        let o = ApiOptions {
            exe: "a".into(),
            daemon_bin: "a".into(),
            baseline_bin: Some("b".into()),
            settings: s,
            command: String::new(),
        };
        assert_eq!(o.steps(), 7);
    }

    #[test]
    fn a_run_adds_its_clients_up() {
        let r = measured(Mix::Read, Which::Daemon, 33.3, 33.2);
        let st = r.kind("status").unwrap();
        assert_eq!(st.sent, 180_000);
        assert_eq!(st.per_s, 18_000.0);
        assert_eq!((st.p50_ms, st.p99_ms), (Some(0.9), Some(1.496)));
        assert_eq!(r.epoch_ratio, Some(0.997));
        assert_eq!(r.users.as_ref().unwrap().clients, 8);
        assert_eq!((r.rss_mib, r.hwm_mib), (10.0, 11.0));
        assert_eq!((r.lost(), r.sent()), (0, 180_000));
    }

    #[test]
    fn goals_are_judged_per_binary() {
        let runs = vec![
            measured(Mix::Read, Which::Daemon, 33.3, 33.2),
            measured(Mix::Write, Which::Daemon, 33.3, 32.0),
            measured(Mix::Read, Which::Baseline, 33.3, 12.0),
        ];
        let g = Goals::judge(&runs, true);
        assert_eq!(
            g.daemon,
            Verdicts {
                status: Some(true),
                epochs: Some(true),
                lost: Some(true)
            }
        );
        let b = g.baseline.unwrap();
        assert_eq!(
            (b.status, b.epochs, b.lost),
            (Some(true), Some(false), Some(true))
        );
        // Too slow, a lost request, missed epochs.
        let mut slow = measured(Mix::Read, Which::Daemon, 33.3, 33.3);
        slow.kinds.get_mut("status").unwrap().per_s = 9000.0;
        slow.clients.lost = 1;
        slow.load = Some(epochs(33.3, 5.0));
        let v = Verdicts::judge(&[&slow]);
        assert_eq!(
            v,
            Verdicts {
                status: Some(false),
                epochs: Some(false),
                lost: Some(false)
            }
        );
        assert_eq!(Verdicts::judge(&[]), Verdicts::default());
        assert!(Goals::judge(&runs, false).baseline.is_none());
    }
}
