//! `atoll bench api` and the attack it measures, through the built binary.
//!
//! - Its command line refuses bad arguments.
//! - A real `--quick --json` run as root: the report's shape, no request
//!   lost, nothing left behind (skipped, with a note, when not root).
//! - The security review's attack: users other than root loop
//!   `{"v":1,"id":1,"op":"status"}` (and one loops `why`) on a real daemon
//!   (real cgroups under a root of its own, as the benchmark runs it), and
//!   the daemon's epoch rate under that load must stay at least 0.9 × its
//!   rate idle, measured just before in the same run (three cycles of 2 s
//!   idle and 3 s flooded; the median cycle's ratio). That ratio is the
//!   only number asserted; nothing is timed. `ATOLL_TEST_DAEMON_BIN=PATH`
//!   runs the same test against another daemon binary (e.g. main before
//!   the API rework, `/work/bench-bins/atoll-main-5952eb1`, which fails it).
//! - The same with one user adopting its own process over and over, within
//!   the daemon's pace for a uid: ignored, since main fails it in about
//!   half the runs (a daemon bug; run it with `--ignored`).
//!
//! Root is needed for all but the first two (real cgroups; clients as
//! other uids).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use atoll_bench::api::epochs::{window, EpochWindow, Sampler};
use atoll_bench::isolation::daemon::Daemon;
use common::{assert_refused, is_root, BIN};

/// The tests that load the machine run one at a time, so that one does
/// not skew the other's ratio.
static HEAVY: Mutex<()> = Mutex::new(());

fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn bad_arguments_are_refused() {
    assert_refused(
        "api",
        &[
            &["--clients", "0"][..],
            &["--clients", "49"],
            &["--mixes", "reads"],
            &["--users", "maybe"],
            &["--depth", "0"],
            &["--seconds", "0"],
            &["--idle-seconds=-1"],
            &["--units", "1"],
            &["--epoch-ms", "0"],
        ],
    );
}

#[test]
fn a_saved_report_that_is_not_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("r.json");
    std::fs::write(&f, "{}").unwrap();
    let out = Command::new(BIN)
        .args(["bench", "api", "--table"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a report of atoll bench api"));
}

/// Nothing named after `pid` is left in any cgroup mount.
fn no_roots_left(pid: u32) {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mine = format!("atoll-bench-api-{pid}-");
    for line in mounts.lines().filter(|l| l.contains(" - cgroup")) {
        let dir = line.split_whitespace().nth(4).unwrap();
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                assert!(!name.starts_with(&mine), "left behind: {dir}/{name}");
            }
        }
    }
}

#[test]
fn quick_json_run_on_the_real_kernel() {
    if !is_root() {
        eprintln!("skipped: `atoll bench api` runs the daemon on real cgroups and clients as other users: needs root");
        return;
    }
    let _one = heavy();
    let child = Command::new(BIN)
        .args(["bench", "api", "--quick", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = r["runs"].as_array().unwrap();
    let mixes: Vec<&str> = runs.iter().map(|x| x["mix"].as_str().unwrap()).collect();
    assert_eq!(mixes, ["read", "mixed", "write"]);
    for run in runs {
        assert_eq!(run["which"], "daemon");
        // One reply per request is the daemon's contract, not a timing.
        assert_eq!(run["clients"]["lost"], 0, "{}", run["clients"]);
        assert_eq!(run["clients"]["mismatched"], 0, "{}", run["clients"]);
        for key in ["idle", "load"] {
            let w = &run[key];
            assert!(w["epochs"].as_u64().unwrap() > 0, "{key}: {w}");
            assert!(w["per_s"].as_f64().unwrap() > 0.0, "{key}: {w}");
        }
        assert!(run["epoch_ratio"].as_f64().is_some(), "{run}");
        assert!(run["rss_mib"].as_f64().unwrap() > 0.0);
        let kinds = run["kinds"].as_object().unwrap();
        assert!(!kinds.is_empty());
        for (k, f) in kinds {
            assert!(f["sent"].as_u64().unwrap() > 0, "{k}: {f}");
            assert!(f["p50_ms"].as_f64() <= f["max_ms"].as_f64(), "{k}: {f}");
        }
        // Half the clients ran as another user.
        assert_eq!(run["users"]["uid"], 65534, "{}", run["users"]);
        assert_eq!(run["users"]["clients"], 4);
    }
    assert!(runs[0]["kinds"].get("why").is_none());
    assert!(runs[2]["kinds"].get("status").is_none());
    for k in ["status", "why", "adopt"] {
        assert!(runs[1]["kinds"].get(k).is_some(), "mixed lacks {k}");
    }
    assert!(r["goals"]["daemon"]["lost"].as_bool().unwrap());
    assert!(r["goals"]["baseline"].is_null());
    assert_eq!(r["settings"]["clients"], 8);
    no_roots_left(pid);
}

/// Clients of `api-load` (`ARGS`) as `uid`; killed when dropped.
struct Flood(Option<Child>);

impl Flood {
    fn start(socket: &Path, uid: u32, clients: usize, seconds: f64, args: &[&str]) -> Self {
        let child = Command::new(BIN)
            .args(["__worker", "api-load", "--socket"])
            .arg(socket)
            .args(["--clients", &clients.to_string()])
            .args(["--seconds", &seconds.to_string()])
            .args(args)
            .uid(uid)
            .gid(uid)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Self(Some(child))
    }

    fn report(mut self) -> serde_json::Value {
        let out = self.0.take().unwrap().wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Replies of `kind` in a client report.
fn answered(r: &serde_json::Value, kind: &str) -> u64 {
    r["kinds"][kind]["answered"].as_u64().unwrap_or(0)
}

/// Idle and flooded windows: this many cycles of each.
const CYCLES: usize = 3;
/// An idle window, s.
const IDLE_S: f64 = 2.0;
/// The clients' time in a cycle, s (the window starts 0.5 s into it).
const FLOOD_S: f64 = 3.0;

/// One cycle: the epoch rate idle, then under the clients, and their
/// reports.
struct Cycle {
    idle: EpochWindow,
    load: Option<EpochWindow>,
    reports: Vec<serde_json::Value>,
}

impl Cycle {
    /// Load ÷ idle (0: no epoch at all under load).
    fn ratio(&self) -> f64 {
        self.load.map_or(0.0, |w| w.per_s) / self.idle.per_s
    }
}

/// Runs the daemon under test (`ATOLL_TEST_DAEMON_BIN`, else this build)
/// with the benchmark's config (real cgroups under a root of its own,
/// swept when it is dropped; 10 units and an overlay) and measures its
/// epoch rate in [`CYCLES`] cycles of 2 s idle, then 3 s under the clients
/// `floods` starts (each `(uid, clients, args)`). Idle and load alternate,
/// so that the machine's other load falls on both, and the tests judge the
/// median cycle's ratio, so that one burst of someone else's work on a
/// shared machine does not decide.
fn epochs_idle_and_flooded(floods: &[(u32, usize, &[&str])]) -> Vec<Cycle> {
    let bin = std::env::var_os("ATOLL_TEST_DAEMON_BIN")
        .filter(|b| !b.is_empty())
        .map_or_else(|| PathBuf::from(BIN), PathBuf::from);
    let dir = tempfile::tempdir().unwrap();
    // Other users reach the socket through the directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    // Users may create units in the island where the daemon knows how to
    // say so (main after 7e30bac needs it for users' adopts).
    let user_units = atoll_bench::api::accepts_user_units(&bin, dir.path()).unwrap();
    let config = atoll_bench::api::config_here(10, 30, user_units).unwrap();
    let daemon = Daemon::start(&bin, "apitest", &config, dir.path()).unwrap();
    let socket = daemon.socket().to_path_buf();
    let sampler = Sampler::start(&socket, Duration::from_millis(100)).unwrap();
    let settle = |s: f64| std::thread::sleep(Duration::from_secs_f64(s));
    settle(1.0);
    let mut windows = Vec::new();
    let mut reports = Vec::new();
    for _ in 0..CYCLES {
        let idle0 = sampler.now();
        settle(IDLE_S);
        let idle1 = sampler.now();
        let clients: Vec<Flood> = floods
            .iter()
            .map(|(uid, n, args)| Flood::start(&socket, *uid, *n, FLOOD_S, args))
            .collect();
        settle(0.5);
        let load0 = sampler.now();
        settle(FLOOD_S - 0.5);
        let load1 = sampler.now();
        reports.push(clients.into_iter().map(Flood::report).collect::<Vec<_>>());
        windows.push(((idle0, idle1), (load0, load1)));
    }
    let (snaps, notes) = sampler.finish();
    daemon.stop().unwrap();
    let cycles: Vec<Cycle> = windows
        .into_iter()
        .zip(reports)
        .map(|(((i0, i1), (l0, l1)), reports)| Cycle {
            idle: window(&snaps, i0, i1, 30).unwrap_or_else(|| panic!("{snaps:?} {notes:?}")),
            load: window(&snaps, l0, l1, 30),
            reports,
        })
        .collect();
    for (n, c) in cycles.iter().enumerate() {
        let summary: Vec<String> = c
            .reports
            .iter()
            .map(|r| {
                let kinds: Vec<String> = r["kinds"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k} {} answered {}", v["answered"], v["errors"]))
                    .collect();
                format!("uid {}: {}, lost {}", r["uid"], kinds.join(", "), r["lost"])
            })
            .collect();
        eprintln!(
            "daemon {}, cycle {}: idle {:.2} epochs/s, under load {} (ratio {:.3}); {}",
            bin.display(),
            n + 1,
            c.idle.per_s,
            c.load.map_or_else(
                || "no epochs measured".to_string(),
                |w| format!("{:.2} epochs/s, {:.1} periods missed", w.per_s, w.missed)
            ),
            c.ratio(),
            summary.join("; "),
        );
    }
    if !notes.is_empty() {
        eprintln!("sampler: {notes:?}");
    }
    cycles
}

/// The median cycle's load ÷ idle ratio.
fn median_ratio(cycles: &[Cycle]) -> f64 {
    let mut r: Vec<f64> = cycles.iter().map(Cycle::ratio).collect();
    r.sort_by(f64::total_cmp);
    r[r.len() / 2]
}

#[test]
fn unprivileged_status_flood_keeps_the_epoch_rate() {
    if !is_root() {
        eprintln!("skipped: clients run as uids 65534 and 65533, which needs root");
        return;
    }
    let _one = heavy();
    // The review's attack: each client loops the line, its reply, the
    // line again (the same id every time).
    let cycles = epochs_idle_and_flooded(&[
        (65534, 4, &["--request", r#"{"v":1,"id":1,"op":"status"}"#]),
        (65533, 1, &["--request", r#"{"v":1,"id":1,"op":"why"}"#]),
    ]);
    // The flood really ran: its clients got answers.
    for c in &cycles {
        assert!(answered(&c.reports[0], "status") > 0, "{}", c.reports[0]);
        assert!(answered(&c.reports[1], "why") > 0, "{}", c.reports[1]);
    }
    let ratio = median_ratio(&cycles);
    assert!(
        ratio >= 0.9,
        "under 4 status and 1 why clients of other users the epoch rate was {ratio:.3} of idle (median of {CYCLES} cycles)"
    );
}

/// A user's changing requests, within the daemon's pace for one uid: its
/// own process adopted into its own units, over and over. Fails in about
/// half the runs on main (7e30bac, 0b6ffa2; cycles down to 0.30 of idle):
/// every request is applied and saved (with fsyncs) on the control loop,
/// and the loop serves 4 queued requests after every epoch even when the
/// next one is due (see docs/bench.md, `atoll bench api`, daemon issues).
#[test]
#[ignore = "fails in about half the runs on main (7e30bac, 0b6ffa2): one user's paced adopts make the control loop miss epochs"]
fn unprivileged_adopt_flood_keeps_the_epoch_rate() {
    if !is_root() {
        eprintln!("skipped: clients run as uid 65534, which needs root");
        return;
    }
    let _one = heavy();
    let cycles = epochs_idle_and_flooded(&[(65534, 4, &["--mix", "write", "--units", "flood"])]);
    for c in &cycles {
        assert!(answered(&c.reports[0], "adopt") > 0, "{}", c.reports[0]);
    }
    let ratio = median_ratio(&cycles);
    assert!(
        ratio >= 0.9,
        "under 4 clients of one user adopting its own process the epoch rate was {ratio:.3} of idle (median of {CYCLES} cycles)"
    );
}
