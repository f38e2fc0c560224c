//! Status structs for the model and view tests, written as the daemon's
//! JSON (docs/api.md) so they stay in the documented shape.

use atoll_core::decision::Decision;
use atoll_proto::apps::AppStatus;
use atoll_proto::coord::OverlayStatus;
use serde_json::{json, Value};

use super::model::Snapshot;

fn stats(cpu_us: u64, periods: u64, throttled: u64, cpu_psi: f64, mem: u64) -> Value {
    json!({
        "cpu_usage_us": cpu_us, "nr_periods": periods, "nr_throttled": throttled,
        "throttled_us": null, "memory_current": mem, "io_read_bytes": null,
        "io_write_bytes": null,
        "cpu_pressure": { "some": { "avg10": cpu_psi, "avg60": 0.0, "avg300": 0.0, "total_us": 0 }, "full": null },
        "memory_pressure": { "some": { "avg10": cpu_psi / 2.0, "avg60": 0.0, "avg300": 0.0, "total_us": 0 }, "full": null },
        "io_pressure": null
    })
}

fn entitlement() -> Value {
    json!({
        "cpus": 1.0, "weight": null, "cpu_cap": null,
        "memory": { "min": null, "low": null, "high": null, "max": null },
        "io": { "weight": null, "limits": [] },
        "sharing": { "cpu": "lend", "memory": "lend", "io": "lend" }
    })
}

fn isolation(home: &str, lent: &str, borrowed: &str) -> Value {
    json!({
        "home_cpus": home, "allowed_cpus": home, "lent_cpus": lent,
        "borrowed_cpus": borrowed, "cpu_revocations": 0, "cpu_lost": 0,
        "memory_limit": null, "memory_lent": 0, "memory_borrowed": 0,
        "memory_revocations": 0, "io_held": false
    })
}

/// A unit; `usage` is (cpu µs, periods, throttled, cpu psi, memory).
fn unit(name: &str, island: &str, iso: Option<Value>, usage: (u64, u64, u64, f64, u64)) -> Value {
    let (c, p, t, psi, m) = usage;
    json!({
        "name": name, "island": island, "origin": "config",
        "entitlement": entitlement(), "task_policy": { "policy": "other" },
        "pids": [100, 101], "stats": stats(c, p, t, psi, m),
        "isolation": iso,
        "comm": if name == "api" { json!({
            "boosted": true, "reservation_cpus": 0.1, "recv_queued": 0,
            "bytes_received": 0, "bytes_sent": 0, "boosts": 1, "boosted_us": 0,
            "over_reservation": 0, "recipient": 1, "sender": 0, "netpath": 0
        }) } else { Value::Null }
    })
}

/// The status at `uptime_ms`; `cpu` is added to every unit's CPU time, so
/// two readings give rates.
pub fn status(uptime_ms: u64, cpu: u64) -> Value {
    json!({
        "version": "0.1.0", "backend": "sim", "root": "atoll-test",
        "epoch_ms": 30, "uptime_ms": uptime_ms, "epochs": uptime_ms / 30,
        "host": { "cpus": "0", "mems": "0", "adopt_all": false, "processes": 0,
                  "stats": stats(0, 0, 0, 0.0, 0) },
        "islands": [
            { "name": "web", "cpus": "1-3", "mems": "0", "policy": { "kind": "fair" },
              "units": ["api", "cache"], "stats": stats(cpu * 2, 100, 10, 4.0, 3 << 20) },
            { "name": "batch", "cpus": "4-7", "mems": "0", "policy": { "kind": "batch" },
              "units": ["jobs"], "stats": stats(cpu, 100, 0, 1.0, 1 << 30) }
        ],
        "units": [
            unit("api", "web", Some(isolation("1-2", "", "4")), (cpu * 3, 100 + cpu / 10_000, 10 + cpu / 20_000, 7.5, 2 << 20)),
            unit("cache", "web", Some(isolation("3", "3", "")), (cpu / 2, 100, 0, 0.5, 64 << 20)),
            unit("jobs", "batch", None, (cpu, 100, 0, 2.0, 1 << 30))
        ],
        "fallbacks": [],
        "isolation_mode": "isolate",
        "comm": { "mechanism": "slice", "features": [], "source": "sim", "boosted": ["api"],
                  "last_cost_us": 3, "epochs": 10, "sample_errors": 0 }
    })
}

pub fn overlays() -> Vec<OverlayStatus> {
    serde_json::from_value(json!([
        { "name": "shop", "priority": 5, "units": ["web/api", "web/cache"],
          "property": { "kind": "latency_percentile", "percentile": 99.0, "bound_us": 5000 },
          "origin": "config", "value": 7300.0, "holds": false,
          "loans": [ { "cpu": 4, "owner": "batch", "lender": "batch", "borrower": "web" } ],
          "nacks": [], "acked": 3, "nacked": 1 }
    ]))
    .unwrap()
}

pub fn apps() -> Vec<AppStatus> {
    serde_json::from_value(json!([
        { "app": 7, "name": "bodytrack", "priority": 1, "pid": 4242, "unit": "batch/jobs",
          "assignment": { "app": 7, "generation": 2, "state": "running", "mode": 2,
                          "mode_name": "high", "island": "batch", "cpu_quota": 3.0,
                          "cpus": "4-7", "threads": 4, "memory_bytes": 0 },
          "goal_cps": 30.0, "cycles_per_s": 24.0, "goal_gap": 0.25, "reconfigurations": 1 }
    ]))
    .unwrap()
}

/// `n` decisions about unit `unit`, at 1 s, 2 s, ...
pub fn decisions(unit: &str, n: u64) -> Vec<Decision> {
    (1..=n)
        .map(|i| {
            serde_json::from_value(json!({
                "at": i * 1000, "action": "create_unit", "unit": format!("{unit}{i}"),
                "island": "web", "why": { "reason": "config" }
            }))
            .unwrap()
        })
        .collect()
}

pub fn snapshot(uptime_ms: u64, cpu: u64) -> Snapshot {
    Snapshot {
        status: serde_json::from_value(status(uptime_ms, cpu)).unwrap(),
        overlays: overlays(),
        apps: apps(),
        decisions: decisions("d", 3),
    }
}
