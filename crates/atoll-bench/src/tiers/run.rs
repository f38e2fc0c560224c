//! Running `atoll bench slo --scenario tiers`: per configuration, MariaDB
//! (`db`), the `auction-app` worker (`app`) and nginx (`front`) with the
//! spin (`hogs`) beside them, loaded by `http-load --heavy` from the host
//! CPU. Under `linux` the tiers and the hogs are pinned to the island's
//! CPUs and no daemon runs; the saturation is measured there first.
//!
//! Every load ends at a wall-time limit, so that tiers slower than their
//! load (a TCG guest) end the run instead of working off a backlog: the
//! saturation is a closed loop of `connections` requests in flight for
//! `max_seconds`, its throughput the responses within that time; a
//! measured phase is the open loop at `load` of it, and what is not
//! answered [`DRAIN`] after its last release is counted as not served.
//!
//! Processes are [`Proc`]s (their group killed on drop) declared after the
//! [`Daemon`], so an error or Ctrl-C leaves nothing behind. MariaDB runs
//! from the run's own datadir (`mariadb-install-db`), on a unix socket in
//! the run dir, `--skip-networking --skip-grant-tables`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::config::{daemon_config, layout, APP, DB, FRONT, HOGS};
use super::mix::{data, schema, DataSize};
use super::mysql::Conn;
use super::stats::{fill_ratios, offered, TierRow, Times};
use crate::comm::{find_program, pin, search_dirs};
use crate::error::BenchError;
use crate::interrupt;
use crate::isolation::daemon::Daemon;
use crate::machine::{self, Machine};
use crate::procs::{worker_command, Proc};
use crate::progress::Progress;
use crate::slo::config::Layout;
use crate::slo::{Common, Config};
use crate::worker::Pace;

/// How long after a measured phase http-load waits for the answers to the
/// requests released in it; what is not answered by then is not served
/// (a bound, so that tiers behind their load end the phase: under TCG the
/// backlog of a phase could take many minutes).
pub const DRAIN: Duration = Duration::from_secs(10);
/// How long a server gets to start (a bound, not an expectation: under
/// TCG in the VM, on a busy host, mariadbd's start takes well over a
/// minute).
const READY_WAIT: Duration = Duration::from_secs(300);
/// How long `mariadb-install-db` gets: it bootstraps the system tables
/// with a mariadbd of its own, which did not finish within 60 s in the
/// 8-vCPU TCG guest on a host at load 17.
const INSTALL_WAIT: Duration = Duration::from_secs(900);
/// How much longer than its phase a worker may take to report.
const GRACE: Duration = Duration::from_secs(60);

/// How a run is set up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TiersSettings {
    /// What `tiers` shares with `slo`: the configurations (`linux` first:
    /// the saturation and ratios), measured seconds per configuration,
    /// warm-up, CPU work rounds per `putbid` and the SLO (µs; `None`: half
    /// of `linux`'s p99).
    #[serde(flatten)]
    pub common: Common,
    /// Seconds of the saturation measurement (a closed loop of
    /// `connections`).
    pub max_seconds: f64,
    /// The offered rate as a share of the saturation (measured without the
    /// hogs, which take about half the island under `linux`).
    pub load: f64,
    /// The share of `putbid` requests.
    pub heavy: f64,
    /// http-load's connections.
    pub connections: usize,
    /// The generated data.
    pub size: DataSize,
    /// Island CPUs (filled in by the run).
    pub island_cpus: String,
    /// Load generator CPUs (filled in by the run).
    pub load_cpus: String,
}

impl TiersSettings {
    /// The defaults, shorter with `quick`.
    pub fn new(quick: bool) -> Self {
        Self {
            common: Common {
                configs: Config::ALL.to_vec(),
                seconds: if quick { 4.0 } else { 20.0 },
                warmup_s: if quick { 2.0 } else { 5.0 },
                work: 200_000,
                slo_us: None,
            },
            max_seconds: if quick { 3.0 } else { 10.0 },
            load: 0.5,
            heavy: 0.15,
            connections: 32,
            size: DataSize::default(),
            island_cpus: String::new(),
            load_cpus: String::new(),
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TiersReport {
    /// Throughput at saturation (linux, no hogs), req/s.
    pub saturated_per_s: f64,
    /// The rate offered to every configuration.
    pub offered_per_s: f64,
    /// The overlay's SLO, µs.
    pub slo_us: u64,
    /// How long after a measured phase its answers were waited for
    /// ([`DRAIN`]); `None` in reports from before the limit (their
    /// saturation was an open loop whose backlog was served, and nothing
    /// was counted as unserved).
    #[serde(default)]
    pub drain_s: Option<f64>,
    /// One row per configuration run.
    pub rows: Vec<TierRow>,
    /// Configurations whose daemon would not start, with why.
    pub unavailable: BTreeMap<String, String>,
    /// The settings.
    pub settings: TiersSettings,
    /// The machine.
    pub machine: Machine,
    /// The command line.
    pub command: String,
}

/// The programs the scenario needs: nginx, mariadbd, mariadb-install-db.
pub fn check_dependencies(dirs: &[PathBuf]) -> Result<[PathBuf; 3], BenchError> {
    let find = |p: &str| {
        find_program(p, dirs).ok_or_else(|| {
            BenchError::Unusable(format!(
                "{p} not found (on PATH or in /usr/sbin): install it with `sudo \
                 scripts/bench-deps.sh` (apt-get install nginx mariadb-server)"
            ))
        })
    };
    Ok([
        find("nginx")?,
        find("mariadbd")?,
        find("mariadb-install-db")?,
    ])
}

/// nginx's config: the front end routing `/browse` and `/putbid` to the
/// application tier on `app_port`, logging `$request_time` last.
pub fn nginx_conf(dir: &Path, port: u16, app_port: u16, log: &Path) -> String {
    let d = dir.display();
    let mut t = format!(
        "# Generated by `atoll bench slo --scenario tiers`.\n\
         daemon off;\nmaster_process on;\nworker_processes 1;\n\
         pid {d}/front.pid;\nerror_log {d}/front-error.log warn;\n\
         events {{ worker_connections 4096; }}\nhttp {{\n\
         \x20   log_format timed '$request_uri $status $request_time';\n\
         \x20   access_log {} timed;\n",
        log.display()
    );
    for kind in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let _ = writeln!(t, "    {kind}_temp_path {d}/tmp/front-{kind};");
    }
    let _ = write!(
        t,
        "    upstream app {{\n        server 127.0.0.1:{app_port};\n        keepalive 64;\n    }}\n\
         \x20   server {{\n        listen 127.0.0.1:{port};\n"
    );
    for route in ["browse", "putbid"] {
        let _ = writeln!(
            t,
            "        location /{route} {{\n            proxy_pass http://app;\n            \
             proxy_http_version 1.1;\n            proxy_set_header Connection \"\";\n        }}"
        );
    }
    t.push_str("        location / { return 404; }\n    }\n}\n");
    t
}

/// The arguments of `mariadbd` on `datadir` with its socket `sock`.
pub fn mariadbd_args(datadir: &Path, sock: &Path, log: &Path) -> Vec<String> {
    [
        "--no-defaults".to_string(),
        format!("--datadir={}", datadir.display()),
        format!("--socket={}", sock.display()),
        "--skip-networking".into(),
        "--skip-grant-tables".into(),
        "--user=root".into(),
        format!("--pid-file={}.pid", sock.display()),
        format!("--log-error={}", log.display()),
        "--skip-log-bin".into(),
        "--innodb-buffer-pool-size=64M".into(),
        "--max-connections=200".into(),
    ]
    .into()
}

/// Reads a `http-load --heavy` report into a row.
pub fn parse_load(config: Config, offered_per_s: f64, r: &serde_json::Value) -> TierRow {
    let times = |v: &serde_json::Value| {
        let f = |k: &str| v[k].as_f64();
        Some(Times {
            count: usize::try_from(v["count"].as_u64()?).ok()?,
            mean_ms: f("mean")?,
            p99_ms: f("p99")?,
            stddev_ms: f("stddev")?,
        })
    };
    TierRow {
        config,
        offered_per_s,
        throughput_per_s: r["throughput_rps"].as_f64().unwrap_or(0.0),
        errors: r["errors"].as_u64().unwrap_or(0),
        unserved: r["unserved"].as_u64().unwrap_or(0),
        last_error: r["last_error"].as_str().map(String::from),
        all: times(&r["rt_ms"]),
        heavy: times(&r["heavy_rt_ms"]),
        vs_linux: None,
    }
}

/// Runs every configuration; see the module docs.
pub fn run(
    exe: &Path,
    s: &TiersSettings,
    command: String,
    progress: &Progress,
) -> Result<TiersReport, BenchError> {
    progress.phase("", "checking the machine");
    let [nginx, mariadbd, install_db] = check_dependencies(&search_dirs())?;
    let (machine, online) = machine::for_real_cgroups()?;
    let layout = layout(&online).ok_or_else(|| BenchError::Unusable("no online CPU".into()))?;
    let mut s = s.clone();
    s.island_cpus = layout.island.to_string();
    s.load_cpus = layout.load_cpus().to_string();
    let dir = crate::temp_dir("tiers")?;
    let io = |op, path: &Path| {
        let path = path.to_path_buf();
        move |source| BenchError::Io { op, path, source }
    };
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(io("chmod", dir.path()))?;
    std::fs::create_dir(dir.path().join("tmp")).map_err(io("create", dir.path()))?;
    let b = Bench {
        exe: exe.to_path_buf(),
        nginx,
        mariadbd,
        dir: dir.path().to_path_buf(),
        layout,
        s,
    };
    progress.phase("", "mariadb-install-db");
    b.install_db(&install_db)?;
    let mut saturated = None;
    let mut rows = Vec::new();
    let mut unavailable = BTreeMap::new();
    let mut slo_us = b.s.common.slo_us;
    for &config in &b.s.common.configs {
        let name = config.as_str();
        let log = b.dir.join(format!("access-{name}.log"));
        std::fs::write(&log, "").map_err(io("write", &log))?;
        let slo = slo_us.unwrap_or(1_000_000);
        let daemon = match daemon_config(config, &b.layout, slo, &log) {
            None => None,
            Some(text) => match Daemon::start(&b.exe, name, &text, &b.dir) {
                Ok(d) => Some(d),
                Err(BenchError::Daemon { reason, log, .. }) => {
                    let last = log.lines().rev().find(|l| !l.trim().is_empty());
                    let why = format!("{reason}: {}", last.unwrap_or("").trim());
                    progress.note(&format!("{name}: unavailable: {why}"));
                    unavailable.insert(name.to_string(), why);
                    continue;
                }
                Err(e) => return Err(e),
            },
        };
        progress.phase(name, "starting MariaDB, the app and nginx");
        let d = daemon.as_ref();
        let sock = b.dir.join(format!("db-{name}.sock"));
        let _db = b.start_db(d, &sock, name)?;
        let [app_port, port] = two_ports()?;
        let _app = b.start_app(d, app_port, &sock)?;
        let mut front = b.start_front(d, port, app_port, &log)?;
        b.wait_http(port, &mut front)?;
        let addr = format!("127.0.0.1:{port}");
        let sat = match saturated {
            Some(v) => v,
            None => {
                progress.phase(name, "saturation (no hogs, closed loop)");
                let r = b.load(&addr, Pace::Closed, b.s.max_seconds, 0.0, b.s.max_seconds)?;
                let v = r["throughput_rps"].as_f64().unwrap_or(0.0);
                if v <= 0.0 {
                    return Err(BenchError::Setup {
                        what: "the saturation".into(),
                        reason: format!("no request completed: {r}"),
                    });
                }
                saturated = Some(v);
                v
            }
        };
        let rate = offered(sat, b.s.load);
        progress.phase(name, &format!("{rate:.0} req/s + hogs"));
        let total = b.s.common.warmup_s + b.s.common.seconds;
        let hogs = b.start_hogs(d, total)?;
        let limit = total + DRAIN.as_secs_f64();
        let r = b.load(&addr, Pace::Open(rate), total, b.s.common.warmup_s, limit)?;
        let _ = hogs.wait(GRACE + Duration::from_secs_f64(total));
        let row = parse_load(config, rate, &r);
        if slo_us.is_none() && config == Config::Linux {
            slo_us = row
                .all
                .map(|t| atoll_core::num::saturating_u64(t.p99_ms * 1000.0 / 2.0).max(1));
        }
        rows.push(row);
        drop(front);
        if let Some(d) = daemon {
            d.stop()?;
        }
    }
    fill_ratios(&mut rows);
    Ok(TiersReport {
        saturated_per_s: saturated.unwrap_or(0.0),
        offered_per_s: saturated.map_or(0.0, |v| offered(v, b.s.load)),
        slo_us: slo_us.unwrap_or(0),
        drain_s: Some(DRAIN.as_secs_f64()),
        rows,
        unavailable,
        settings: b.s,
        machine,
        command,
    })
}

/// The arguments of `http-load`: the auction's mix over the settings'
/// connections, `pace` for `seconds` (the first `warmup` not recorded),
/// nothing sent or counted after `limit`.
pub fn load_args(
    addr: &str,
    pace: Pace,
    seconds: f64,
    warmup: f64,
    limit: f64,
    s: &TiersSettings,
) -> Vec<String> {
    let mut args: Vec<String> = vec!["--addr".into(), addr.into()];
    match pace {
        Pace::Open(rate) => args.extend(["--rate".into(), format!("{rate:.3}")]),
        Pace::Closed => args.push("--closed".into()),
    }
    for (k, v) in [
        ("--seconds", seconds.to_string()),
        ("--warmup", warmup.to_string()),
        ("--limit", limit.max(seconds).to_string()),
        ("--connections", s.connections.to_string()),
        ("--heavy", s.heavy.to_string()),
    ] {
        args.extend([k.into(), v]);
    }
    args
}

/// Two distinct free loopback ports.
fn two_ports() -> Result<[u16; 2], BenchError> {
    let bind = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| Ok((l.local_addr()?.port(), l)))
            .map_err(|e| BenchError::Setup {
                what: "choosing a loopback port".into(),
                reason: e.to_string(),
            })
    };
    let (a, _la) = bind()?;
    let (b, _lb) = bind()?;
    Ok([a, b])
}

struct Bench {
    exe: PathBuf,
    nginx: PathBuf,
    mariadbd: PathBuf,
    dir: PathBuf,
    layout: Layout,
    s: TiersSettings,
}

impl Bench {
    fn datadir(&self) -> PathBuf {
        self.dir.join("db-data")
    }

    fn install_db(&self, program: &Path) -> Result<(), BenchError> {
        let mut cmd = Command::new(program);
        cmd.args([
            "--no-defaults".to_string(),
            format!("--datadir={}", self.datadir().display()),
            "--auth-root-authentication-method=normal".into(),
            "--skip-test-db".into(),
            "--user=root".into(),
        ]);
        let out = Proc::spawn("mariadb-install-db", cmd)?.wait(INSTALL_WAIT)?;
        if !out.status.success() {
            return Err(BenchError::Setup {
                what: "mariadb-install-db".into(),
                reason: out.stderr,
            });
        }
        Ok(())
    }

    /// `program args` in `unit` under `d`, or pinned to the island.
    fn command(&self, d: Option<&Daemon>, unit: &str, program: &Path, args: &[String]) -> Command {
        match d {
            Some(d) => {
                let mut c = Command::new(&self.exe);
                c.arg("run")
                    .arg("--socket")
                    .arg(d.socket())
                    .args(["--unit", unit, "--"])
                    .arg(program)
                    .args(args);
                c
            }
            None => {
                let mut c = Command::new(program);
                c.args(args);
                pin(&mut c, &self.layout.island);
                c
            }
        }
    }

    /// MariaDB, waited for and loaded with the generated data.
    fn start_db(&self, d: Option<&Daemon>, sock: &Path, tag: &str) -> Result<Proc, BenchError> {
        let log = self.dir.join(format!("db-{tag}.log"));
        let args = mariadbd_args(&self.datadir(), sock, &log);
        let mut p = Proc::spawn("mariadbd", self.command(d, DB, &self.mariadbd, &args))?;
        let t0 = Instant::now();
        let mut conn = loop {
            interrupt::check()?;
            let tail = || {
                let t = std::fs::read_to_string(&log).unwrap_or_default();
                let l: Vec<&str> = t.lines().collect();
                l[l.len().saturating_sub(10)..].join("\n")
            };
            if p.exited() {
                return Err(BenchError::Setup {
                    what: "mariadbd".into(),
                    reason: format!("exited\n{}", tail()),
                });
            }
            if let Ok(s) = UnixStream::connect(sock) {
                if let Ok(c) = Conn::handshake(s, "atoll") {
                    break c;
                }
            }
            if t0.elapsed() > READY_WAIT {
                return Err(BenchError::Setup {
                    what: "mariadbd".into(),
                    reason: format!("not ready within {READY_WAIT:?}\n{}", tail()),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        for q in schema().iter().chain(&data(&self.s.size, 16, 500)) {
            conn.query(q).map_err(|e| BenchError::Setup {
                what: "loading the auction data".into(),
                reason: format!("{e}: {}", &q[..q.len().min(80)]),
            })?;
        }
        Ok(p)
    }

    fn start_app(&self, d: Option<&Daemon>, port: u16, sock: &Path) -> Result<Proc, BenchError> {
        let args: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--db-socket".into(),
            sock.display().to_string(),
            "--work".into(),
            self.s.common.work.to_string(),
        ];
        let cmd = match d {
            Some(d) => d.run_worker(APP, "auction-app", &args),
            None => {
                let mut c = worker_command(&self.exe, "auction-app", &args);
                pin(&mut c, &self.layout.island);
                c
            }
        };
        Proc::spawn("auction-app", cmd)
    }

    fn start_front(
        &self,
        d: Option<&Daemon>,
        port: u16,
        app_port: u16,
        log: &Path,
    ) -> Result<Proc, BenchError> {
        let conf = self.dir.join("front.conf");
        std::fs::write(&conf, nginx_conf(&self.dir, port, app_port, log)).map_err(|source| {
            BenchError::Io {
                op: "write",
                path: conf.clone(),
                source,
            }
        })?;
        let args = crate::procs::nginx_args(&self.dir, &conf, &self.dir.join("front-error.log"));
        Proc::spawn("nginx (front)", self.command(d, FRONT, &self.nginx, &args))
    }

    fn wait_http(&self, port: u16, front: &mut Proc) -> Result<(), BenchError> {
        let addr = format!("127.0.0.1:{port}");
        let t0 = Instant::now();
        loop {
            interrupt::check()?;
            if front.exited() {
                return Err(BenchError::Setup {
                    what: "nginx (front)".into(),
                    reason: std::fs::read_to_string(self.dir.join("front-error.log"))
                        .unwrap_or_default(),
                });
            }
            let last = match crate::worker::http_get(&addr, "/browse?item=1") {
                Ok(r) if r.status == 200 => return Ok(()),
                Ok(r) => format!("status {}", r.status),
                Err(e) => e.to_string(),
            };
            if t0.elapsed() > READY_WAIT {
                return Err(BenchError::Setup {
                    what: format!("GET /browse on {addr}"),
                    reason: format!("no answer within {READY_WAIT:?} ({last})"),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn start_hogs(&self, d: Option<&Daemon>, seconds: f64) -> Result<Proc, BenchError> {
        let args: Vec<String> = vec![
            "--threads".into(),
            self.layout.island.len().to_string(),
            "--seconds".into(),
            seconds.to_string(),
        ];
        let cmd = match d {
            Some(d) => d.run_worker(HOGS, "spin", &args),
            None => {
                let mut c = worker_command(&self.exe, "spin", &args);
                pin(&mut c, &self.layout.island);
                c
            }
        };
        Proc::spawn("spin (hogs)", cmd)
    }

    /// `http-load --heavy` from the host CPUs, ending at `limit` s of wall
    /// time ([`load_args`]); its report.
    fn load(
        &self,
        addr: &str,
        pace: Pace,
        seconds: f64,
        warmup: f64,
        limit: f64,
    ) -> Result<serde_json::Value, BenchError> {
        let args = load_args(addr, pace, seconds, warmup, limit, &self.s);
        let mut cmd = worker_command(&self.exe, "http-load", &args);
        pin(&mut cmd, self.layout.load_cpus());
        Proc::spawn("http-load", cmd)?
            .wait(GRACE + Duration::from_secs_f64(limit))?
            .report("http-load")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_routes_both_kinds_and_logs_request_time_last() {
        let c = nginx_conf(Path::new("/tmp/r"), 9000, 9001, Path::new("/tmp/r/a.log"));
        assert!(
            c.contains("log_format timed '$request_uri $status $request_time';"),
            "{c}"
        );
        assert!(c.contains("access_log /tmp/r/a.log timed;"), "{c}");
        assert!(c.contains("listen 127.0.0.1:9000;"), "{c}");
        assert!(c.contains("server 127.0.0.1:9001;"), "{c}");
        assert!(
            c.contains("location /browse {") && c.contains("location /putbid {"),
            "{c}"
        );
        assert_eq!(c.matches('{').count(), c.matches('}').count(), "{c}");
        assert!(!c.contains("/etc/nginx") && !c.contains("/var/"), "{c}");
    }

    #[test]
    fn mariadbd_runs_on_its_socket_without_network_or_grants() {
        let a = mariadbd_args(Path::new("/d"), Path::new("/r/s.sock"), Path::new("/r/l"));
        for want in [
            "--no-defaults",
            "--datadir=/d",
            "--socket=/r/s.sock",
            "--skip-networking",
            "--skip-grant-tables",
        ] {
            assert!(a.iter().any(|x| x == want), "{want}: {a:?}");
        }
        assert_eq!(a[0], "--no-defaults", "must be first");
    }

    #[test]
    fn a_load_report_becomes_a_row() {
        let r = serde_json::json!({
            "throughput_rps": 120.5, "errors": 2, "unserved": 7,
            "rt_ms": {"count": 100, "mean": 3.0, "p99": 9.0, "stddev": 1.5},
            "heavy_rt_ms": {"count": 15, "mean": 6.0, "p99": 11.0, "stddev": 2.0},
        });
        let row = parse_load(Config::Slo, 130.0, &r);
        assert_eq!(row.throughput_per_s, 120.5);
        assert_eq!((row.errors, row.unserved), (2, 7));
        assert_eq!(row.all.unwrap().stddev_ms, 1.5);
        assert_eq!(row.heavy.unwrap().count, 15);
        let empty = parse_load(Config::Linux, 1.0, &serde_json::json!({"rt_ms": null}));
        assert_eq!((empty.all, empty.heavy), (None, None));
    }

    #[test]
    fn every_load_has_a_wall_time_limit() {
        let s = TiersSettings::new(true);
        let sat = load_args("h:1", Pace::Closed, 3.0, 0.0, 3.0, &s).join(" ");
        assert_eq!(
            sat,
            "--addr h:1 --closed --seconds 3 --warmup 0 --limit 3 --connections 32 --heavy 0.15"
        );
        let phase = load_args("h:1", Pace::Open(12.5), 6.0, 2.0, 16.0, &s).join(" ");
        assert!(
            phase.starts_with("--addr h:1 --rate 12.500 --seconds 6 --warmup 2 --limit 16 "),
            "{phase}"
        );
        let short = load_args("h:1", Pace::Closed, 3.0, 0.0, 1.0, &s).join(" ");
        assert!(
            short.contains("--limit 3 "),
            "never below --seconds: {short}"
        );
        // The worker takes what the bench gives it.
        for args in [sat, phase, short] {
            let mut w = vec!["http-load".to_string()];
            w.extend(args.split(' ').map(String::from));
            crate::worker::Worker::parse(&w).unwrap_or_else(|e| panic!("{e}: {args}"));
        }
    }

    #[test]
    fn missing_programs_are_named_with_the_script() {
        let d = tempfile::tempdir().unwrap();
        let e = check_dependencies(&[d.path().to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not found") && e.contains("bench-deps.sh"),
            "{e}"
        );
    }
}
