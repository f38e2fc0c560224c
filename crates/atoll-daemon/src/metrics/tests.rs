//! Rendering checked line by line, the docs kept honest, and the HTTP server
//! over a real loopback socket with a fake control loop.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::Receiver;

use atoll_core::backend::{Fallback, Psi, PsiLine};
use atoll_core::plan::{GroupPath, TaskPolicy};
use atoll_core::spec::{Entitlement, SchedPolicy};
use atoll_core::CpuSet;
use atoll_proto::{HostStatus, IslandStatus, UnitOrigin, UnitStatus};

use super::*;
use crate::telemetry::Telemetry;

fn psi(some_us: u64, full_us: Option<u64>) -> Psi {
    let line = |us| PsiLine {
        avg10: 1.0,
        avg60: 2.0,
        avg300: 3.0,
        total_us: us,
    };
    Psi {
        some: line(some_us),
        full: full_us.map(line),
    }
}

fn report() -> StatusReport {
    StatusReport {
        version: "0.1.0".into(),
        backend: "cgroup1".into(),
        service_manager: None,
        root: "atoll".into(),
        root_info: None,
        epoch_ms: 30,
        uptime_ms: 61_500,
        epochs: 2050,
        host: HostStatus {
            cpus: CpuSet::parse("0").unwrap(),
            mems: CpuSet::parse("0").unwrap(),
            adopt_all: false,
            processes: 3,
            stats: GroupStats {
                cpu_usage_us: Some(2_000_000),
                memory_current: Some(1_048_576),
                ..Default::default()
            },
        },
        islands: vec![IslandStatus {
            name: "web".into(),
            cpus: CpuSet::parse("1-3").unwrap(),
            mems: CpuSet::parse("0").unwrap(),
            policy: SchedPolicy::Fair,
            units: vec!["api".into()],
            stats: GroupStats {
                cpu_usage_us: Some(1_500_000),
                nr_periods: Some(100),
                nr_throttled: Some(5),
                throttled_us: Some(250_000),
                memory_current: Some(4096),
                io_read_bytes: Some(10),
                io_write_bytes: Some(20),
                cpu_pressure: Some(psi(1_000_001, None)),
                memory_pressure: Some(psi(7, Some(3))),
                io_pressure: None,
                io_devices: Vec::new(),
            },
        }],
        isolation_mode: None,
        accounts: None,
        comm: None,
        discovery: None,
        pressure: None,
        pace: None,
        coord_restored: None,
        energy: None,
        network: Vec::new(),
        slo: Vec::new(),
        warnings: Vec::new(),
        units: vec![UnitStatus {
            name: "api".into(),
            island: "web".into(),
            origin: UnitOrigin::Config,
            entitlement: Entitlement::default(),
            task_policy: TaskPolicy::Other,
            pids: vec![10, 11],
            stats: GroupStats {
                cpu_usage_us: Some(1_000_000),
                ..Default::default()
            },
            isolation: None,
            comm: None,
            service: None,
        }],
        fallbacks: vec![Fallback {
            path: GroupPath::from_relative("web"),
            knob: "cpuset.cpu_exclusive".into(),
            wanted: "1".into(),
            got: "0".into(),
            reason: "busy".into(),
        }],
    }
}

/// Every stat of every group set, so that every family appears.
fn full_report() -> StatusReport {
    let full = GroupStats {
        cpu_usage_us: Some(1),
        nr_periods: Some(2),
        nr_throttled: Some(3),
        throttled_us: Some(4),
        memory_current: Some(5),
        io_read_bytes: Some(6),
        io_write_bytes: Some(7),
        cpu_pressure: Some(psi(8, Some(9))),
        memory_pressure: Some(psi(10, Some(11))),
        io_pressure: Some(psi(12, Some(13))),
        io_devices: Vec::new(),
    };
    let mut r = report();
    r.pace = Some(atoll_proto::LoopPace {
        interval_ms: 30,
        max_epochs: 8,
        ..Default::default()
    });
    r.host.stats = full.clone();
    r.islands[0].stats = full.clone();
    r.units[0].stats = full;
    r.accounts = Some(atoll_core::process::SystemAccounts {
        kernel_cpu_us: 1_500_000,
        kernel_memory_bytes: 2048,
        shared_memory_bytes: 4096,
    });
    r.units[0].isolation = Some(atoll_proto::UnitIsolation {
        memory_limit: Some(1 << 30),
        ..Default::default()
    });
    r.units[0].comm = Some(atoll_proto::UnitComm {
        boosted: true,
        boosted_us: 1_500_000,
        ..Default::default()
    });
    r.network = vec![atoll_proto::net::NetIslandStatus {
        island: "wire".into(),
        interface: "eth1".into(),
        managed: true,
        rate_bps: 10_000_000,
        classification: String::new(),
        classes: vec![atoll_proto::net::NetClassStatus {
            class: "1:10".into(),
            unit: Some("api".into()),
            share: 300,
            rate_bps: 7_500_000,
            ceil_bps: 10_000_000,
            stats: Some(atoll_proto::net::NetClassStats {
                bytes: 1000,
                packets: 10,
                drops: 1,
                backlog_bytes: 1500,
                backlog_packets: 1,
            }),
        }],
    }];
    r.energy = Some(atoll_proto::energy::EnergyStatus {
        zones: vec![atoll_proto::energy::ZoneEnergy {
            zone: "package-0".into(),
            watts: Some(12.5),
            joules_total: 250.0,
        }],
        cpufreq_cpus: 0,
        error: None,
        frequency: Vec::new(),
        power_cap: Some(atoll_proto::energy::PowerCapStatus {
            overlay: "budget".into(),
            budget_watts: 95.0,
            measured_watts: Some(101.0),
            islands: vec![
                atoll_proto::energy::PowerCapIsland {
                    island: "batch".into(),
                    max_khz: Some(2_000_000),
                    cap_cpus: None,
                },
                atoll_proto::energy::PowerCapIsland {
                    island: "vm".into(),
                    max_khz: None,
                    cap_cpus: Some(1.5),
                },
            ],
            unavailable: None,
        }),
        learned: Some(atoll_proto::energy::LearnedWatts {
            watts_per_cpu: Some(20.0),
            modes: vec![
                atoll_proto::energy::ModeWatts {
                    recipe: "bodytrack".into(),
                    mode: 0,
                    watts: 10.0,
                    from: atoll_proto::energy::WattsFrom::Learned,
                },
                atoll_proto::energy::ModeWatts {
                    recipe: "bodytrack".into(),
                    mode: 1,
                    watts: 7.5,
                    from: atoll_proto::energy::WattsFrom::Recipe,
                },
            ],
        }),
    });
    r.slo = vec![slo_status("shop", "probe")];
    r
}

/// A latency overlay measured by `source`, with everything known.
fn slo_status(overlay: &str, source: &str) -> atoll_proto::slo::SloStatus {
    atoll_proto::slo::SloStatus {
        overlay: overlay.into(),
        source: source.into(),
        percentile: 99.0,
        slo_us: 1000,
        measured_us: Some(750.0),
        slack: Some(0.25),
        samples: 10,
        samples_total: 40,
        timeouts: 0,
        probe_cpu_us: 2_500_000,
        source_running_us: 10_000_000,
        error: None,
        stale: false,
        sample_age_ms: Some(100),
        stale_after_ms: Some(3300),
        best_effort: vec!["batch".into()],
        be_level: Some(3),
        be_steps: 8,
    }
}

/// Figures for every family of the daemon's own.
pub(super) fn full_telemetry() -> Telemetry {
    let mut epochs = crate::telemetry::epoch::EpochStats::default();
    epochs.epoch.observe(std::time::Duration::from_micros(700));
    epochs.steps[0].observe(std::time::Duration::from_micros(40));
    Telemetry {
        epochs: Some(epochs),
        decisions: vec![("apply_group", "config", 3)],
        requests: vec![("status", "ok", 2)],
        process: Some(crate::telemetry::process::ProcessStats {
            cpu_seconds: 0.25,
            resident_bytes: 4096,
            open_fds: 7,
            start_time_seconds: 1.5e9,
        }),
    }
}

#[test]
fn renders_families_with_help_type_and_labelled_samples() {
    let text = render(&report(), &Telemetry::default());
    let expected = "\
# HELP atoll_info Constant 1, labelled with the backend, version and root group.
# TYPE atoll_info gauge
atoll_info{backend=\"cgroup1\",version=\"0.1.0\",root=\"atoll\"} 1
# HELP atoll_uptime_seconds Time since the daemon started.
# TYPE atoll_uptime_seconds gauge
atoll_uptime_seconds 61.5
# HELP atoll_epochs_total Control-loop iterations.
# TYPE atoll_epochs_total counter
atoll_epochs_total 2050
# HELP atoll_epoch_seconds Configured control-loop period (what an epoch takes is atoll_epoch_duration_seconds).
# TYPE atoll_epoch_seconds gauge
atoll_epoch_seconds 0.03
# HELP atoll_fallbacks Knobs the kernel refused, now replaced by a fallback.
# TYPE atoll_fallbacks gauge
atoll_fallbacks 1
# HELP atoll_island_cpus CPUs of the island.
# TYPE atoll_island_cpus gauge
atoll_island_cpus{island=\"host\"} 1
atoll_island_cpus{island=\"web\"} 3
# HELP atoll_island_processes Processes in the island's units (or in the host partition).
# TYPE atoll_island_processes gauge
atoll_island_processes{island=\"host\"} 3
atoll_island_processes{island=\"web\"} 2
# HELP atoll_unit_processes Processes in the unit.
# TYPE atoll_unit_processes gauge
atoll_unit_processes{island=\"web\",unit=\"api\"} 2
# HELP atoll_island_cpu_usage_seconds_total CPU time used.
# TYPE atoll_island_cpu_usage_seconds_total counter
atoll_island_cpu_usage_seconds_total{island=\"host\"} 2
atoll_island_cpu_usage_seconds_total{island=\"web\"} 1.5
# HELP atoll_island_cpu_periods_total CPU bandwidth enforcement periods elapsed.
# TYPE atoll_island_cpu_periods_total counter
atoll_island_cpu_periods_total{island=\"web\"} 100
# HELP atoll_island_cpu_throttled_periods_total Enforcement periods in which the group was throttled.
# TYPE atoll_island_cpu_throttled_periods_total counter
atoll_island_cpu_throttled_periods_total{island=\"web\"} 5
# HELP atoll_island_cpu_throttled_seconds_total Time the group was throttled.
# TYPE atoll_island_cpu_throttled_seconds_total counter
atoll_island_cpu_throttled_seconds_total{island=\"web\"} 0.25
# HELP atoll_island_memory_bytes Memory in use.
# TYPE atoll_island_memory_bytes gauge
atoll_island_memory_bytes{island=\"host\"} 1048576
atoll_island_memory_bytes{island=\"web\"} 4096
# HELP atoll_island_io_read_bytes_total Bytes read from block devices.
# TYPE atoll_island_io_read_bytes_total counter
atoll_island_io_read_bytes_total{island=\"web\"} 10
# HELP atoll_island_io_write_bytes_total Bytes written to block devices.
# TYPE atoll_island_io_write_bytes_total counter
atoll_island_io_write_bytes_total{island=\"web\"} 20
# HELP atoll_island_cpu_pressure_some_seconds_total Time some tasks were stalled waiting for CPU (PSI).
# TYPE atoll_island_cpu_pressure_some_seconds_total counter
atoll_island_cpu_pressure_some_seconds_total{island=\"web\"} 1.000001
# HELP atoll_island_memory_pressure_some_seconds_total Time some tasks were stalled on memory (PSI).
# TYPE atoll_island_memory_pressure_some_seconds_total counter
atoll_island_memory_pressure_some_seconds_total{island=\"web\"} 0.000007
# HELP atoll_island_memory_pressure_full_seconds_total Time all non-idle tasks were stalled on memory (PSI).
# TYPE atoll_island_memory_pressure_full_seconds_total counter
atoll_island_memory_pressure_full_seconds_total{island=\"web\"} 0.000003
# HELP atoll_unit_cpu_usage_seconds_total CPU time used.
# TYPE atoll_unit_cpu_usage_seconds_total counter
atoll_unit_cpu_usage_seconds_total{island=\"web\",unit=\"api\"} 1
";
    let (got, want): (Vec<_>, Vec<_>) = (text.lines().collect(), expected.lines().collect());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "line {}", i + 1);
    }
    assert_eq!(got.len(), want.len(), "{text}");
}

#[test]
fn unknown_values_are_omitted_not_zero() {
    let mut r = report();
    r.host.stats = GroupStats::default();
    r.islands[0].stats = GroupStats::default();
    r.units[0].stats = GroupStats::default();
    let text = render(&r, &Telemetry::default());
    for (name, _) in families() {
        // Stats the backend does not give, and isolation and comm figures
        // of units without any (smp mode, no `[comm]`), must be absent.
        let is_stat = STATS.iter().any(|s| name.ends_with(s.suffix))
            || ISOLATION.iter().any(|(n, ..)| *n == name)
            || super::comm::COMM.iter().any(|(n, ..)| *n == name)
            || ACCOUNTS.iter().any(|(n, ..)| *n == name)
            || super::own::OWN.iter().any(|(n, ..)| *n == name)
            || super::energy::ENERGY.iter().any(|(n, ..)| *n == name)
            || name.starts_with("atoll_net_class_")
            || name.starts_with("atoll_power_cap_")
            || name.starts_with("atoll_loop_")
            || name == super::energy::PER_CPU.0
            || name == super::energy::MODE_WATTS.0
            || super::slo::SLO.iter().any(|(n, ..)| *n == name);
        assert_eq!(
            text.contains(&format!("\n{name}")),
            !is_stat,
            "{name} in:\n{text}"
        );
    }
}

/// Checks the series of histogram `name` that follow its TYPE line: per
/// label set, buckets with increasing `le` and non-decreasing counts, ending
/// with `le="+Inf"` equal to `_count`, then `_sum`.
fn check_histogram(name: &str, lines: &mut std::iter::Peekable<std::str::Lines<'_>>) {
    let mut series = 0;
    while lines.peek().is_some_and(|l| !l.starts_with('#')) {
        let (mut last_le, mut last_n, mut inf) = (-1.0f64, 0u64, None);
        while let Some(l) = lines
            .peek()
            .filter(|l| l.starts_with(&format!("{name}_bucket{{")))
        {
            let (le, n) = bucket(l);
            assert!(le > last_le, "le not increasing at {l:?}");
            assert!(n >= last_n, "count decreasing at {l:?}");
            (last_le, last_n) = (le, n);
            if le.is_infinite() {
                inf = Some(n);
            }
            lines.next();
        }
        let inf = inf.unwrap_or_else(|| panic!("{name}: no le=\"+Inf\" bucket"));
        let sum = lines.next().expect("_sum");
        assert!(sum.starts_with(&format!("{name}_sum")), "{sum}");
        assert!(sum.rsplit(' ').next().unwrap().parse::<f64>().is_ok());
        let count = lines.next().expect("_count");
        assert!(count.starts_with(&format!("{name}_count")), "{count}");
        assert_eq!(
            count.rsplit(' ').next().unwrap(),
            inf.to_string(),
            "{count}"
        );
        series += 1;
    }
    assert!(series > 0, "{name} has no series");
}

/// The `le` and count of a bucket line.
fn bucket(line: &str) -> (f64, u64) {
    let le = line
        .split("le=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let le = if le == "+Inf" {
        f64::INFINITY
    } else {
        le.parse().unwrap()
    };
    (le, line.rsplit(' ').next().unwrap().parse().unwrap())
}

/// The metric families in `text`, checking that each one's samples come
/// right after its HELP and TYPE lines.
fn rendered_families(text: &str) -> BTreeSet<(String, String)> {
    let mut seen = BTreeSet::new();
    let mut current: Option<(String, String)> = None;
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap().to_string();
            let ty = lines.next().expect("TYPE after HELP");
            let kind = ty
                .strip_prefix(&format!("# TYPE {name} "))
                .unwrap_or_else(|| panic!("TYPE for {name}, got {ty:?}"));
            assert!(matches!(kind, "counter" | "gauge" | "histogram"), "{ty}");
            assert!(
                name.ends_with("_total") == (kind == "counter"),
                "{name} is a {kind}"
            );
            if kind == "histogram" {
                check_histogram(&name, &mut lines);
            }
            let fam = (name.clone(), kind.to_string());
            assert!(seen.insert(fam.clone()), "{name} rendered twice");
            current = Some(fam);
            continue;
        }
        let (name, kind) = current.as_ref().expect("a sample before any HELP");
        assert_ne!(kind, "histogram", "{line:?} after the histogram's series");
        let sample = line.split(['{', ' ']).next().unwrap();
        assert_eq!(sample, name, "sample {line:?} outside its family");
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "value of {line:?}");
    }
    seen
}

fn documented_metrics() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md"))
        .expect("docs/api.md");
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Metrics"))
        .expect("a `## Metrics` section in docs/api.md");
    section
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            (t.starts_with("atoll_") || t.starts_with("process_"))
                && t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_family_has_help_and_type_and_is_documented() {
    let rendered = rendered_families(&render(&full_report(), &full_telemetry()));
    let all: BTreeSet<(String, String)> = families()
        .into_iter()
        .map(|(n, k)| (n, k.to_string()))
        .collect();
    assert_eq!(rendered, all, "a full report renders every family");
    let names: BTreeSet<String> = all.into_iter().map(|(n, _)| n).collect();
    let documented = documented_metrics();
    let missing: Vec<_> = names.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&names).collect();
    assert!(missing.is_empty(), "undocumented metrics: {missing:?}");
    assert!(stale.is_empty(), "documented but not rendered: {stale:?}");
    // The partial report's families are well-formed too.
    rendered_families(&render(&report(), &Telemetry::default()));
}

#[test]
fn energy_families_per_zone_and_none_without_rapl() {
    let text = render(&full_report(), &Telemetry::default());
    assert!(
        text.contains("atoll_power_watts{zone=\"package-0\"} 12.5\n"),
        "{text}"
    );
    assert!(text.contains("atoll_energy_joules_total{zone=\"package-0\"} 250\n"));
    assert!(text.contains("atoll_power_cap_budget_watts{overlay=\"budget\"} 95\n"));
    assert!(text.contains("atoll_power_cap_max_khz{island=\"batch\"} 2000000\n"));
    assert!(!text.contains("atoll_power_cap_max_khz{island=\"vm\"}"));
    assert!(text.contains("atoll_power_cap_cpus{island=\"vm\"} 1.5\n"));
    assert!(
        text.contains("atoll_learned_watts_per_busy_cpu 20\n"),
        "{text}"
    );
    assert!(
        text.contains("atoll_mode_watts{recipe=\"bodytrack\",mode=\"0\",from=\"learned\"} 10\n")
    );
    assert!(
        text.contains("atoll_mode_watts{recipe=\"bodytrack\",mode=\"1\",from=\"recipe\"} 7.5\n")
    );
    let mut r = full_report();
    r.energy = Some(atoll_proto::energy::EnergyStatus::default());
    let text = render(&r, &Telemetry::default());
    assert!(!text.contains("atoll_power_watts"), "{text}");
    assert!(!text.contains("atoll_energy_joules_total"));
    assert!(
        !text.contains("atoll_learned_watts_per_busy_cpu"),
        "nothing learned"
    );
    assert!(!text.contains("atoll_mode_watts"));
}

#[test]
fn slo_families_per_overlay_and_the_source_cost_only_for_threads() {
    let mut r = report();
    let mut reported = slo_status("api", "report");
    reported.measured_us = None;
    reported.slack = None;
    reported.be_level = None;
    r.slo = vec![slo_status("shop", "probe"), reported];
    let text = render(&r, &Telemetry::default());
    for line in [
        "atoll_slo_source_cpu_seconds_total{overlay=\"shop\",source=\"probe\"} 2.5\n",
        "atoll_slo_latency_us{overlay=\"shop\",percentile=\"99\"} 750\n",
        "atoll_slo_slack{overlay=\"shop\"} 0.25\n",
        "atoll_slo_best_effort_level{overlay=\"shop\"} 3\n",
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
    assert!(
        !text.contains("overlay=\"api\""),
        "a reported overlay with nothing yet has no sample:\n{text}"
    );
    assert!(
        text.contains("atoll_slo_stale{overlay=\"shop\"} 0\n"),
        "{text}"
    );
    r.slo[1] = slo_status("api", "report");
    let text = render(&r, &Telemetry::default());
    assert!(text.contains("atoll_slo_slack{overlay=\"api\"} 0.25\n"));
    assert!(
        !text.contains("source=\"report\""),
        "no thread, no cost:\n{text}"
    );
    // A stale window: no latency, no slack, the stale gauge at 1.
    r.slo[0].stale = true;
    r.slo[0].measured_us = None;
    r.slo[0].slack = None;
    let text = render(&r, &Telemetry::default());
    assert!(
        text.contains("atoll_slo_stale{overlay=\"shop\"} 1\n"),
        "{text}"
    );
    assert!(
        !text.contains("atoll_slo_latency_us{overlay=\"shop\""),
        "{text}"
    );
    assert!(!text.contains("atoll_slo_slack{overlay=\"shop\""), "{text}");
}

#[test]
fn label_values_are_escaped() {
    let mut r = report();
    r.root = "a\"b\\c\nd".into();
    let text = render(&r, &Telemetry::default());
    assert!(text.contains("root=\"a\\\"b\\\\c\\nd\"} 1\n"), "{text}");
    assert_eq!(decimal(1_000_000, 6), "1");
    assert_eq!(decimal(1_234_500, 6), "1.2345");
    assert_eq!(decimal(5, 3), "0.005");
}

#[test]
fn parses_request_heads_strictly() {
    let ok = parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*").unwrap();
    assert_eq!(ok.method, "GET");
    assert_eq!(ok.path, "/metrics");
    for bad in [
        &b"GET /metrics"[..],
        b"GET  /metrics HTTP/1.1",
        b"GET metrics HTTP/1.1",
        b"GET /metrics HTTP/2",
        b"get /metrics HTTP/1.1",
        b"GET /metrics HTTP/1.1\r\nno colon",
        b"\xff /metrics HTTP/1.1",
    ] {
        assert!(
            parse_head(bad).is_none(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

/// Answers every snapshot with `report()` and counts them.
fn fake_loop(rx: Receiver<Command>) -> JoinHandle<usize> {
    thread::spawn(move || {
        let mut n = 0;
        for cmd in rx {
            if let Command::Snapshot { reply } = cmd {
                n += 1;
                let _ = reply.send(Box::new(report()));
            }
        }
        n
    })
}

fn http(addr: std::net::SocketAddr, request: &[u8]) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request).unwrap();
    let _ = s.shutdown(Shutdown::Write);
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("a response head");
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, head.to_string(), body.to_string())
}

#[test]
fn serves_metrics_over_http() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    let fake = fake_loop(rx);
    let stop = Arc::new(AtomicBool::new(false));
    let h = serve_metrics_with(listener, tx, Arc::clone(&stop), None);

    let (code, head, body) = http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(code, 200);
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    assert!(head.contains("Connection: close"), "{head}");
    assert_eq!(body, render(&report(), &Telemetry::default()));

    let (code, _, body) = http(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n");
    assert_eq!((code, body.as_str()), (200, ""));
    assert_eq!(http(addr, b"GET / HTTP/1.1\r\n\r\n").0, 404);
    assert_eq!(http(addr, b"GET /metricsx HTTP/1.1\r\n\r\n").0, 404);
    let (code, head, _) = http(addr, b"POST /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(code, 405);
    assert!(head.contains("Allow: GET, HEAD"), "{head}");
    assert_eq!(http(addr, b"hello\r\n\r\n").0, 400);
    let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(10_000));
    assert_eq!(http(addr, huge.as_bytes()).0, 400);

    stop.store(true, Ordering::Release);
    h.join().unwrap();
    assert_eq!(
        fake.join().unwrap(),
        2,
        "only GET and HEAD /metrics ask the loop"
    );
}

#[test]
fn a_closed_loop_gives_503() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel::<Command>();
    drop(rx);
    let stop = Arc::new(AtomicBool::new(false));
    let h = serve_metrics_with(listener, tx, Arc::clone(&stop), None);
    assert_eq!(http(addr, b"GET /metrics HTTP/1.1\r\n\r\n").0, 503);
    stop.store(true, Ordering::Release);
    h.join().unwrap();
}

#[test]
fn the_loop_pace_is_rendered_when_the_status_has_it() {
    let mut r = report();
    assert!(!render(&r, &Default::default()).contains("atoll_loop_"));
    r.pace = Some(atoll_proto::LoopPace {
        interval_ms: 240,
        max_epochs: 8,
        quiescent_since_ms: Some(1_500),
        stretched_epochs: 12,
        wakes: [("command".to_string(), 3)].into_iter().collect(),
        pressure_wake: None,
        held_by: None,
    });
    let text = render(&r, &Default::default());
    assert!(
        text.contains("atoll_loop_interval_seconds 0.24\n"),
        "{text}"
    );
    assert!(text.contains("atoll_loop_quiescent 1\n"), "{text}");
    assert!(
        text.contains("atoll_loop_wakes_total{source=\"command\"} 3\n"),
        "{text}"
    );
    assert!(
        text.contains("atoll_loop_wakes_total{source=\"busy\"} 0\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE atoll_loop_wakes_total counter"),
        "{text}"
    );
}
