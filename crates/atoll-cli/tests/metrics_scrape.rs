//! The metrics endpoint as its consumers see it: the Grafana dashboard's
//! queries name only metrics a running daemon exports (scraped from a sim
//! daemon), and a real Prometheus (Debian's `prometheus`, run by the test
//! with a temporary configuration and storage) scrapes a daemon and answers
//! PromQL over it: a unit's CPU usage rate and the 99th percentile of the
//! epoch durations.
//!
//! The Prometheus test uses a real cgroup v1 daemon (unique root, a busy
//! process of its own in a capped unit) when it runs as root with writable
//! v1 hierarchies, else a sim daemon (whose units use no CPU: the rate is
//! there, and 0). It skips, saying why, only when the `prometheus` binary is
//! not installed (`scripts/test.sh` installs it).

use std::collections::BTreeSet;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_atoll");
const V1: &str = "/sys/fs/cgroup";
const HIERARCHIES: [&str; 6] = ["cpuset", "cpu", "cpuacct", "memory", "blkio", "freezer"];
/// How long a daemon or Prometheus may take to come up or to have data.
const READY: Duration = Duration::from_secs(60);

const CONFIG: &str = r#"
[host]
cpus = "0"

[island.work]
cpus = "1"

[unit.busy]
island = "work"
cpus = 0.1
cpu_cap = 0.2
"#;

/// A latency overlay probing a port nothing listens on (each refused
/// probe is a sample at the 1 s timeout), so that the `atoll_slo_*`
/// families have series. Its SLO of 10 s is far above what is measured:
/// the overlay's policy never tunes `busy` up (its cap stays as configured).
const SLO_OVERLAY: &str = r#"
[overlay.shop]
units = ["busy"]
latency_us = 10000000
latency_source = "probe"
probe = "tcp://127.0.0.1:1"
probe_every_ms = 50
"#;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Why the real cgroup v1 backend cannot be used here, if it cannot.
fn v1_unusable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    for h in ["cpuset", "cpu", "cpuacct"] {
        let p = Path::new(V1).join(h).join("cgroup.procs");
        if !p.exists() {
            return Some(format!("no cgroup v1 {h} hierarchy at {}", p.display()));
        }
    }
    None
}

/// A daemon with a metrics address; killed, and (cgroup v1) everything
/// under its unique root removed, when dropped.
struct Daemon {
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// The unique root, for the cgroup v1 backend.
    v1_root: Option<String>,
    metrics: u16,
}

impl Daemon {
    fn start(v1: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("atoll.toml");
        fs::write(&config, format!("{CONFIG}{SLO_OVERLAY}")).unwrap();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let v1_root = v1.then(|| format!("atoll-test-prom-{}-{nanos}", std::process::id()));
        let metrics = free_port();
        let mut cmd = Command::new(BIN);
        cmd.arg("daemon")
            .arg("--config")
            .arg(&config)
            .arg("--socket")
            .arg(dir.path().join("atoll.sock"))
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--metrics-addr")
            .arg(format!("127.0.0.1:{metrics}"))
            .stdout(Stdio::null())
            .stderr(fs::File::create(dir.path().join("daemon.log")).unwrap());
        match &v1_root {
            Some(root) => cmd.args(["--backend", "cgroup1", "--cgroup-root", root]),
            None => cmd.args(["--backend", "sim"]),
        };
        let mut d = Self {
            child: Some(cmd.spawn().unwrap()),
            dir,
            v1_root,
            metrics,
        };
        let t = Instant::now();
        while !d.atoll(&["status"]).status.success() {
            if let Some(st) = d.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("daemon exited with {st}: {}", d.log());
            }
            assert!(t.elapsed() < READY, "daemon did not come up: {}", d.log());
            sleep(Duration::from_millis(50));
        }
        d
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    fn atoll(&self, args: &[&str]) -> std::process::Output {
        Command::new(BIN)
            .arg(args[0])
            .arg("--socket")
            .arg(self.dir.path().join("atoll.sock"))
            .args(&args[1..])
            .output()
            .unwrap()
    }

    fn scrape(&self) -> String {
        http_get(self.metrics, "/metrics").1
    }

    /// Stops the daemon with SIGTERM (any user may signal their own
    /// daemon; `atoll stop` is root's), so that it tears down.
    fn stop(mut self) {
        let mut c = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        assert!(c.wait().unwrap().success(), "{}", self.log());
        if let Some(root) = &self.v1_root {
            for h in HIERARCHIES {
                let top = Path::new(V1).join(h).join(root);
                assert!(!top.exists(), "teardown left {}", top.display());
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let Some(root) = &self.v1_root else {
            return;
        };
        // After a failure: move what is left under our own root to the
        // hierarchy's top and remove our directories, deepest first.
        for h in HIERARCHIES {
            let mut dirs = vec![];
            let mut stack = vec![Path::new(V1).join(h).join(root)];
            while let Some(d) = stack.pop() {
                if !d.is_dir() {
                    continue;
                }
                for e in fs::read_dir(&d).into_iter().flatten().flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(e.path());
                    }
                }
                dirs.push(d);
            }
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for d in dirs {
                let procs = fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
                for pid in procs.split_whitespace() {
                    let _ = fs::write(Path::new(V1).join(h).join("cgroup.procs"), pid);
                }
                let _ = fs::remove_dir(&d);
            }
        }
    }
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` on 127.0.0.1:`port`: the status code and the body.
fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    (code, if chunked { unchunk(body) } else { body.into() })
}

/// The body of a chunked response.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The names of the series in an exposition (`x_bucket`, `x_sum` and
/// `x_count` for a histogram `x`).
fn series_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// The metric names a PromQL expression names: its identifiers that start
/// like atoll's or the standard process metrics.
fn metric_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| t.starts_with("atoll_") || t.starts_with("process_"))
        .map(str::to_string)
        .collect()
}

/// Every `expr` in the dashboard, and the variables' queries.
fn dashboard_queries() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/grafana/atoll.json"
    );
    let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    let mut out = vec![];
    let mut stack = vec![&v];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("expr" | "definition", serde_json::Value::String(s)) => {
                            out.push(s.clone())
                        }
                        _ => stack.push(x),
                    }
                }
            }
            serde_json::Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    out
}

#[test]
fn the_dashboard_queries_only_metrics_a_daemon_exports() {
    let d = Daemon::start(false);
    // A request and an epoch or two, so that every family has a series.
    let mut exported = BTreeSet::new();
    let t = Instant::now();
    while !exported.contains("atoll_api_requests_total")
        || !exported.contains("atoll_epoch_duration_seconds_bucket")
        || !exported.contains("atoll_slo_latency_us")
    {
        assert!(t.elapsed() < READY, "no full scrape: {exported:?}");
        assert!(d.atoll(&["status"]).status.success());
        exported = series_names(&d.scrape());
    }
    let queries = dashboard_queries();
    assert!(queries.len() >= 10, "{queries:?}");
    let mut named = BTreeSet::new();
    for q in &queries {
        let names = metric_names(q);
        assert!(!names.is_empty(), "a query that names no metric: {q}");
        for n in names {
            assert!(
                exported.contains(&n),
                "{n} (in {q}) is not exported; exported: {exported:?}"
            );
            named.insert(n);
        }
    }
    // The new families are on the dashboard.
    for n in [
        "atoll_epoch_duration_seconds_bucket",
        "atoll_epoch_step_duration_seconds_sum",
        "atoll_api_requests_total",
        "atoll_decisions_total",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
        "atoll_unit_cpu_usage_seconds_total",
        "atoll_slo_latency_us",
        "atoll_slo_slack",
        "atoll_slo_source_cpu_seconds_total",
        "atoll_slo_stale",
    ] {
        assert!(named.contains(n), "{n} is not on the dashboard");
    }
    assert_eq!(
        metric_names("rate(foo[1m]) / atoll_x{a=\"b\"}"),
        ["atoll_x"]
    );
    d.stop();
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs `promql` against Prometheus at `port`: the result vector, or the
/// error Prometheus gave.
fn query(port: u16, promql: &str) -> Result<Vec<serde_json::Value>, String> {
    let (code, body) = http_get(port, &format!("/api/v1/query?query={}", encode(promql)));
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("HTTP {code}: {e}: {body}"))?;
    if v["status"] != "success" {
        return Err(body);
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

/// The value of a result sample.
fn value(sample: &serde_json::Value) -> f64 {
    sample["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Waits until `promql` returns a sample whose value `ok` accepts, and
/// returns that result.
fn await_query(
    port: u16,
    promql: &str,
    ok: impl Fn(f64) -> bool,
    log: &dyn Fn() -> String,
) -> Vec<serde_json::Value> {
    let t = Instant::now();
    let mut last = Err("not asked yet".to_string());
    while t.elapsed() < READY {
        last = query(port, promql);
        if let Ok(r) = &last {
            if r.iter().any(|s| ok(value(s))) {
                return r.clone();
            }
        }
        sleep(Duration::from_millis(500));
    }
    panic!(
        "{promql}: no acceptable value; last answer {last:?}\n{}",
        log()
    );
}

fn prometheus_binary() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
}

#[test]
fn prometheus_scrapes_the_daemon_and_answers_promql() {
    let Some(prometheus) = prometheus_binary() else {
        eprintln!(
            "skipped: the prometheus binary is not installed (scripts/test.sh installs Debian's package: apt-get install prometheus)"
        );
        return;
    };
    let v1 = match v1_unusable() {
        None => true,
        Some(why) => {
            eprintln!("cgroup v1 unusable ({why}): scraping a sim daemon, whose units use no CPU");
            false
        }
    };
    let d = Daemon::start(v1);
    // A busy process of our own, in the capped unit.
    let busy = v1.then(|| {
        let child = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let busy = Killed(child);
        let pid = busy.0.id().to_string();
        let out = d.atoll(&["adopt", "--unit", "busy", "--pid", &pid]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        busy
    });

    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = dir.path().join("prometheus.yml");
    fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: atoll\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
            d.metrics
        ),
    )
    .unwrap();
    let prom = Killed(
        Command::new(&prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let prom_log = dir.path().join("prometheus.log");
    let log = || {
        format!(
            "prometheus log:\n{}\ndaemon log:\n{}",
            fs::read_to_string(&prom_log).unwrap_or_default(),
            d.log()
        )
    };
    // Prometheus answers once it is up; until then the connection fails.
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t.elapsed() < READY, "prometheus did not listen: {}", log());
        sleep(Duration::from_millis(100));
    }

    let cpu = "rate(atoll_unit_cpu_usage_seconds_total{unit=\"busy\"}[5s])";
    let want_cpu = |v: f64| if v1 { v > 0.0 } else { v >= 0.0 };
    let r = await_query(port, cpu, want_cpu, &log);
    println!("PromQL {cpu} -> {}", serde_json::to_string(&r).unwrap());
    if v1 {
        // Capped at 0.2 CPU: the rate cannot be far above it.
        assert!(r.iter().all(|s| value(s) < 0.5), "{r:?}");
    }
    let p99 = "histogram_quantile(0.99, rate(atoll_epoch_duration_seconds_bucket[5s]))";
    let r = await_query(port, p99, |v| v.is_finite() && v > 0.0, &log);
    println!("PromQL {p99} -> {}", serde_json::to_string(&r).unwrap());

    // Every query of the dashboard is valid PromQL with data behind it.
    for q in dashboard_queries() {
        if q.starts_with("label_values(") {
            continue; // Grafana's, not PromQL
        }
        let q = q
            .replace("$__rate_interval", "5s")
            .replace("$instance", ".*");
        let r = query(port, &q).unwrap_or_else(|e| panic!("{q}: {e}"));
        assert!(!r.is_empty(), "{q}: no data");
    }

    drop(prom);
    drop(busy);
    d.stop();
}
