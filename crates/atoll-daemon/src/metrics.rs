//! The Prometheus endpoint: a status snapshot rendered in the text
//! exposition format (version 0.0.4), served over a minimal HTTP/1.1 server.
//!
//! [`render`] is pure. Groups appear at two levels that are never mixed in
//! one metric, so sums stay meaningful: `atoll_island_*` (label `island`;
//! the host partition appears as island `host`, a name no island may take)
//! and `atoll_unit_*` (labels `island`, `unit`). A value the backend cannot
//! read is omitted, never reported as zero; a family with no sample is not
//! rendered at all. Times are in seconds, sizes in bytes. Beside the
//! groups, the daemon's own figures ([`crate::telemetry`]): what epochs and
//! their steps cost (histograms), API requests by operation and result,
//! decisions by action and reason, and the standard `process_*` metrics.
//!
//! [`serve_metrics`] answers `GET /metrics` (and `HEAD`) from the status the
//! control loop publishes ([`crate::publish`]) and the API threads' reply
//! counters; it never reads the kernel itself, and a flood of scrapes costs the loop one status per
//! [`crate::publish::FRESH`] at most. Every response closes its connection.
//! At most [`MAX_CONNECTIONS`] connections are served at once, at most
//! [`MAX_PER_PEER`] from one address; a connection that has not sent its
//! whole request head within [`REQUEST_DEADLINE`] is closed.

use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use atoll_core::backend::GroupStats;
use atoll_proto::StatusReport;
use text::{decimal, labels, Out};

use crate::api::{serve_connections, Admission, Admitted};
use crate::command::Command;
use crate::publish::Board;
use crate::telemetry::Telemetry;

const COUNTER: &str = "counter";
const GAUGE: &str = "gauge";

/// A value as the backend reports it.
#[derive(Clone, Copy)]
enum Val {
    /// A plain number.
    Int(u64),
    /// Microseconds, rendered as seconds.
    Micros(u64),
}

/// One per-group statistic; becomes `atoll_island_<suffix>` and
/// `atoll_unit_<suffix>`.
struct Stat {
    suffix: &'static str,
    kind: &'static str,
    help: &'static str,
    get: fn(&GroupStats) -> Option<Val>,
}

const STATS: &[Stat] = &[
    Stat {
        suffix: "cpu_usage_seconds_total",
        kind: COUNTER,
        help: "CPU time used.",
        get: |s| s.cpu_usage_us.map(Val::Micros),
    },
    Stat {
        suffix: "cpu_periods_total",
        kind: COUNTER,
        help: "CPU bandwidth enforcement periods elapsed.",
        get: |s| s.nr_periods.map(Val::Int),
    },
    Stat {
        suffix: "cpu_throttled_periods_total",
        kind: COUNTER,
        help: "Enforcement periods in which the group was throttled.",
        get: |s| s.nr_throttled.map(Val::Int),
    },
    Stat {
        suffix: "cpu_throttled_seconds_total",
        kind: COUNTER,
        help: "Time the group was throttled.",
        get: |s| s.throttled_us.map(Val::Micros),
    },
    Stat {
        suffix: "memory_bytes",
        kind: GAUGE,
        help: "Memory in use.",
        get: |s| s.memory_current.map(Val::Int),
    },
    Stat {
        suffix: "io_read_bytes_total",
        kind: COUNTER,
        help: "Bytes read from block devices.",
        get: |s| s.io_read_bytes.map(Val::Int),
    },
    Stat {
        suffix: "io_write_bytes_total",
        kind: COUNTER,
        help: "Bytes written to block devices.",
        get: |s| s.io_write_bytes.map(Val::Int),
    },
    Stat {
        suffix: "cpu_pressure_some_seconds_total",
        kind: COUNTER,
        help: "Time some tasks were stalled waiting for CPU (PSI).",
        get: |s| s.cpu_pressure.map(|p| Val::Micros(p.some.total_us)),
    },
    Stat {
        suffix: "cpu_pressure_full_seconds_total",
        kind: COUNTER,
        help: "Time all non-idle tasks were stalled waiting for CPU (PSI).",
        get: |s| {
            s.cpu_pressure
                .and_then(|p| p.full)
                .map(|l| Val::Micros(l.total_us))
        },
    },
    Stat {
        suffix: "memory_pressure_some_seconds_total",
        kind: COUNTER,
        help: "Time some tasks were stalled on memory (PSI).",
        get: |s| s.memory_pressure.map(|p| Val::Micros(p.some.total_us)),
    },
    Stat {
        suffix: "memory_pressure_full_seconds_total",
        kind: COUNTER,
        help: "Time all non-idle tasks were stalled on memory (PSI).",
        get: |s| {
            s.memory_pressure
                .and_then(|p| p.full)
                .map(|l| Val::Micros(l.total_us))
        },
    },
    Stat {
        suffix: "io_pressure_some_seconds_total",
        kind: COUNTER,
        help: "Time some tasks were stalled on IO (PSI).",
        get: |s| s.io_pressure.map(|p| Val::Micros(p.some.total_us)),
    },
    Stat {
        suffix: "io_pressure_full_seconds_total",
        kind: COUNTER,
        help: "Time all non-idle tasks were stalled on IO (PSI).",
        get: |s| {
            s.io_pressure
                .and_then(|p| p.full)
                .map(|l| Val::Micros(l.total_us))
        },
    },
];

/// Families that are not per-group statistics: (name, type, help).
const OTHERS: &[(&str, &str, &str)] = &[
    (
        "atoll_info",
        GAUGE,
        "Constant 1, labelled with the backend, version and root group.",
    ),
    (
        "atoll_uptime_seconds",
        GAUGE,
        "Time since the daemon started.",
    ),
    ("atoll_epochs_total", COUNTER, "Control-loop iterations."),
    (
        "atoll_epoch_seconds",
        GAUGE,
        "Configured control-loop period (what an epoch takes is atoll_epoch_duration_seconds).",
    ),
    (
        "atoll_loop_interval_seconds",
        GAUGE,
        "The wait before the next epoch now (longer than the period while the loop is quiescent).",
    ),
    (
        "atoll_loop_quiescent",
        GAUGE,
        "1 while every epoch since the last wake found nothing to act on.",
    ),
    (
        "atoll_loop_wakes_total",
        COUNTER,
        "Stretched waits cut short, by source (command, proc_event, pressure, busy).",
    ),
    (
        "atoll_fallbacks",
        GAUGE,
        "Knobs the kernel refused, now replaced by a fallback.",
    ),
    ("atoll_island_cpus", GAUGE, "CPUs of the island."),
    (
        "atoll_island_processes",
        GAUGE,
        "Processes in the island's units (or in the host partition).",
    ),
    ("atoll_unit_processes", GAUGE, "Processes in the unit."),
];

/// Per-unit isolation figures (seed 004), for units under `quota` or
/// `isolate`.
type IsoGet = fn(&atoll_proto::UnitIsolation) -> Option<u64>;
const ISOLATION: &[(&str, &str, &str, IsoGet)] = &[
    (
        "atoll_unit_home_cpus",
        GAUGE,
        "Home CPUs of the unit.",
        |i| Some(i.home_cpus.len() as u64),
    ),
    (
        "atoll_unit_lent_cpus",
        GAUGE,
        "Home CPUs the unit lends now.",
        |i| Some(i.lent_cpus.len() as u64),
    ),
    (
        "atoll_unit_borrowed_cpus",
        GAUGE,
        "CPUs the unit borrows now.",
        |i| Some(i.borrowed_cpus.len() as u64),
    ),
    (
        "atoll_unit_cpu_revocations_total",
        COUNTER,
        "Times the unit took back CPUs it had lent.",
        |i| Some(i.cpu_revocations),
    ),
    (
        "atoll_unit_cpu_lost_total",
        COUNTER,
        "Times CPUs the unit borrowed were taken back by their owner.",
        |i| Some(i.cpu_lost),
    ),
    (
        "atoll_unit_memory_limit_bytes",
        GAUGE,
        "The unit's memory limit now.",
        |i| i.memory_limit,
    ),
    (
        "atoll_unit_memory_lent_bytes",
        GAUGE,
        "Memory the unit lends now.",
        |i| Some(i.memory_lent),
    ),
    (
        "atoll_unit_memory_borrowed_bytes",
        GAUGE,
        "Memory the unit borrows now.",
        |i| Some(i.memory_borrowed),
    ),
    (
        "atoll_unit_memory_revocations_total",
        COUNTER,
        "Times memory the unit borrowed was taken back.",
        |i| Some(i.memory_revocations),
    ),
    (
        "atoll_unit_io_held",
        GAUGE,
        "1 while the unit is held back on disk.",
        |i| Some(u64::from(i.io_held)),
    ),
];

/// The `kernel` and `shared` accounts (seed 004).
type AccGet = fn(&atoll_core::process::SystemAccounts) -> Val;
const ACCOUNTS: &[(&str, &str, &str, AccGet)] = &[
    (
        "atoll_kernel_cpu_seconds_total",
        COUNTER,
        "CPU time of kernel threads and interrupts (the kernel account).",
        |a| Val::Micros(a.kernel_cpu_us),
    ),
    (
        "atoll_kernel_memory_bytes",
        GAUGE,
        "Kernel memory: slab, stacks, page tables, vmalloc (the kernel account).",
        |a| Val::Int(a.kernel_memory_bytes),
    ),
    (
        "atoll_shared_memory_bytes",
        GAUGE,
        "Shared memory and buffers (the shared account).",
        |a| Val::Int(a.shared_memory_bytes),
    ),
];

/// Every metric family [`render`] can produce, with its type.
pub fn families() -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> =
        OTHERS.iter().map(|(n, k, _)| (n.to_string(), *k)).collect();
    out.extend(ISOLATION.iter().map(|(n, k, _, _)| (n.to_string(), *k)));
    out.extend(comm::COMM.iter().map(|(n, k, _, _)| (n.to_string(), *k)));
    out.extend(ACCOUNTS.iter().map(|(n, k, _, _)| (n.to_string(), *k)));
    out.extend(
        energy::ENERGY
            .iter()
            .map(|(n, k, _, _)| (n.to_string(), *k)),
    );
    out.push((energy::BUDGET.0.to_string(), energy::BUDGET.1));
    out.push((energy::PER_CPU.0.to_string(), energy::PER_CPU.1));
    out.push((energy::MODE_WATTS.0.to_string(), energy::MODE_WATTS.1));
    out.extend(
        energy::CAP_ISLANDS
            .iter()
            .map(|(n, k, _, _)| (n.to_string(), *k)),
    );
    out.extend(net::NET.iter().map(|(n, k, _, _)| (n.to_string(), *k)));
    out.push(("atoll_net_class_rate_bits".to_string(), GAUGE));
    out.extend(slo::SLO.iter().map(|(n, k, _, _)| (n.to_string(), *k)));
    out.extend(own::OWN.iter().map(|(n, k, _)| (n.to_string(), *k)));
    for level in ["island", "unit"] {
        for s in STATS {
            out.push((format!("atoll_{level}_{}", s.suffix), s.kind));
        }
    }
    out
}

impl Val {
    fn render(self) -> String {
        match self {
            Self::Int(n) => n.to_string(),
            Self::Micros(us) => decimal(us, 6),
        }
    }
}

fn help_of(name: &str) -> &'static str {
    OTHERS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, h)| *h)
        .unwrap_or("")
}

fn other(out: &mut Out, name: &str, samples: Vec<(String, String)>) {
    let kind = OTHERS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, k, _)| *k)
        .unwrap_or(GAUGE);
    out.family(name, kind, help_of(name), samples);
}

/// Renders a status snapshot and the daemon's own figures in the
/// Prometheus text format.
pub fn render(status: &StatusReport, telemetry: &Telemetry) -> String {
    let mut out = Out {
        text: String::new(),
    };
    let info = labels(&[
        ("backend", &status.backend),
        ("version", &status.version),
        ("root", &status.root),
    ]);
    other(&mut out, "atoll_info", vec![(info, "1".into())]);
    let one = |v: String| vec![(String::new(), v)];
    other(
        &mut out,
        "atoll_uptime_seconds",
        one(decimal(status.uptime_ms, 3)),
    );
    other(
        &mut out,
        "atoll_epochs_total",
        one(status.epochs.to_string()),
    );
    other(
        &mut out,
        "atoll_epoch_seconds",
        one(decimal(status.epoch_ms, 3)),
    );
    if let Some(p) = &status.pace {
        other(
            &mut out,
            "atoll_loop_interval_seconds",
            one(decimal(p.interval_ms, 3)),
        );
        other(
            &mut out,
            "atoll_loop_quiescent",
            one(u8::from(p.quiescent_since_ms.is_some()).to_string()),
        );
        other(
            &mut out,
            "atoll_loop_wakes_total",
            ["command", "proc_event", "pressure", "busy"]
                .iter()
                .map(|w| {
                    (
                        labels(&[("source", w)]),
                        p.wakes.get(*w).copied().unwrap_or(0).to_string(),
                    )
                })
                .collect(),
        );
    }
    other(
        &mut out,
        "atoll_fallbacks",
        one(status.fallbacks.len().to_string()),
    );

    // Island level: the host partition first, then islands in config order.
    let mut islands: Vec<(String, &GroupStats, usize, usize)> = vec![(
        labels(&[("island", "host")]),
        &status.host.stats,
        status.host.cpus.len(),
        status.host.processes,
    )];
    for i in &status.islands {
        let procs = status
            .units
            .iter()
            .filter(|u| u.island == i.name)
            .map(|u| u.pids.len())
            .sum();
        islands.push((
            labels(&[("island", &i.name)]),
            &i.stats,
            i.cpus.len(),
            procs,
        ));
    }
    let units: Vec<(String, &GroupStats, usize)> = status
        .units
        .iter()
        .map(|u| {
            (
                labels(&[("island", &u.island), ("unit", &u.name)]),
                &u.stats,
                u.pids.len(),
            )
        })
        .collect();

    other(
        &mut out,
        "atoll_island_cpus",
        islands
            .iter()
            .map(|(l, _, cpus, _)| (l.clone(), cpus.to_string()))
            .collect(),
    );
    other(
        &mut out,
        "atoll_island_processes",
        islands
            .iter()
            .map(|(l, _, _, p)| (l.clone(), p.to_string()))
            .collect(),
    );
    other(
        &mut out,
        "atoll_unit_processes",
        units
            .iter()
            .map(|(l, _, p)| (l.clone(), p.to_string()))
            .collect(),
    );
    let groups = |rows: Vec<(&String, &GroupStats)>, level: &str, out: &mut Out| {
        for s in STATS {
            let samples = rows
                .iter()
                .filter_map(|(l, st)| (s.get)(st).map(|v| ((*l).clone(), v.render())))
                .collect();
            out.family(
                &format!("atoll_{level}_{}", s.suffix),
                s.kind,
                s.help,
                samples,
            );
        }
    };
    groups(
        islands.iter().map(|(l, s, _, _)| (l, *s)).collect(),
        "island",
        &mut out,
    );
    groups(
        units.iter().map(|(l, s, _)| (l, *s)).collect(),
        "unit",
        &mut out,
    );
    for (name, kind, help, get) in ISOLATION {
        let samples = status
            .units
            .iter()
            .filter_map(|u| {
                let v = get(u.isolation.as_ref()?)?;
                Some((
                    labels(&[("island", &u.island), ("unit", &u.name)]),
                    v.to_string(),
                ))
            })
            .collect();
        out.family(name, kind, help, samples);
    }
    for (name, kind, help, get) in comm::COMM {
        let samples = status
            .units
            .iter()
            .filter_map(|u| {
                Some((
                    labels(&[("island", &u.island), ("unit", &u.name)]),
                    get(u.comm.as_ref()?),
                ))
            })
            .collect();
        out.family(name, kind, help, samples);
    }
    if let Some(a) = &status.accounts {
        for (name, kind, help, get) in ACCOUNTS {
            out.family(name, kind, help, vec![(String::new(), get(a).render())]);
        }
    }
    if let Some(e) = &status.energy {
        energy::render(&mut out, e);
    }
    if !status.network.is_empty() {
        net::render(&mut out, &status.network);
    }
    slo::render(&mut out, &status.slo);
    own::render(&mut out, telemetry);
    out.text
}

/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 16;
/// Most connections from one address.
pub const MAX_PER_PEER: usize = 4;
const MAX_REQUEST_HEAD: usize = 8192;
const TICK: Duration = Duration::from_millis(200);
/// A request head must arrive whole within this long.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(5);
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `GET /metrics` on `listener` until `stop` is set: a thread per
/// connection, one response per connection, the status from `board`
/// (without one, asked of the loop through `tx`).
pub fn serve_metrics(
    listener: TcpListener,
    tx: Sender<Command>,
    stop: Arc<AtomicBool>,
    board: Board,
) -> JoinHandle<()> {
    serve_metrics_with(listener, tx, stop, Some(board))
}

/// [`serve_metrics`] with or without a board.
pub fn serve_metrics_with(
    listener: TcpListener,
    tx: Sender<Command>,
    stop: Arc<AtomicBool>,
    board: Option<Board>,
) -> JoinHandle<()> {
    thread::Builder::new()
        .name("atoll-metrics".into())
        .spawn(move || accept_loop(listener, tx, stop, board))
        .expect("spawn the metrics thread")
}

fn accept_loop(
    listener: TcpListener,
    tx: Sender<Command>,
    stop: Arc<AtomicBool>,
    board: Option<Board>,
) {
    let stop2 = Arc::clone(&stop);
    let admission: Admission<IpAddr> = Admission::new(MAX_CONNECTIONS, MAX_PER_PEER, 0);
    serve_connections(
        &listener,
        "metrics",
        TICK,
        &stop,
        |s: &TcpStream| {
            let peer = s.peer_addr().map_err(|e| e.to_string())?.ip();
            admission.admit(peer, false).map_err(|e| e.to_string())
        },
        |mut s: TcpStream, why| {
            let _ = s.set_nonblocking(false);
            let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
            let _ = respond(&mut s, 503, &format!("{why}\n"), true);
        },
        move |stream, _: &Admitted<IpAddr>| {
            if let Err(e) = connection(stream, &tx, &stop2, board.as_ref()) {
                tracing::debug!(error = %e, "metrics connection failed");
            }
        },
    );
}

/// A parsed request line.
#[derive(Debug, PartialEq, Eq)]
struct RequestLine {
    method: String,
    path: String,
}

/// Parses the request head (up to the blank line).
fn parse_head(head: &[u8]) -> Option<RequestLine> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        || !target.starts_with('/')
        || !matches!(version, "HTTP/1.0" | "HTTP/1.1")
    {
        return None;
    }
    if !lines.all(|h| h.is_empty() || h.contains(':')) {
        return None;
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    Some(RequestLine {
        method: method.to_string(),
        path: path.to_string(),
    })
}

/// Reads the request head: `Ok(None)` when the peer gave up, sent too much
/// or took too long, or `stop` was set.
fn read_head(stream: &mut TcpStream, stop: &AtomicBool) -> io::Result<Option<Vec<u8>>> {
    let started = Instant::now();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.truncate(end);
            return Ok(Some(buf));
        }
        if buf.len() > MAX_REQUEST_HEAD {
            return Ok(Some(Vec::new())); // unparseable: answered with 400
        }
        if stop.load(Ordering::Acquire) || started.elapsed() > REQUEST_DEADLINE {
            return Ok(None);
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(None),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

fn connection(
    mut stream: TcpStream,
    tx: &Sender<Command>,
    stop: &AtomicBool,
    board: Option<&Board>,
) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(TICK))?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let Some(head) = read_head(&mut stream, stop)? else {
        return Ok(());
    };
    let Some(req) = parse_head(&head) else {
        return respond(&mut stream, 400, "bad request\n", true);
    };
    if req.path != "/metrics" {
        return respond(
            &mut stream,
            404,
            "not found; metrics are at /metrics\n",
            true,
        );
    }
    let with_body = match req.method.as_str() {
        "GET" => true,
        "HEAD" => false,
        _ => return respond(&mut stream, 405, "method not allowed\n", true),
    };
    if let Some(board) = board {
        let wake = || {
            let _ = tx.send(Command::Refresh);
        };
        return match board.scrape(&wake) {
            Some((status, telemetry)) => {
                let mut telemetry = (*telemetry).clone();
                telemetry.requests = board.request_counters().snapshot();
                respond(&mut stream, 200, &render(&status, &telemetry), with_body)
            }
            None => respond(
                &mut stream,
                503,
                "the control loop did not publish a status in time\n",
                with_body,
            ),
        };
    }
    let (reply_tx, reply_rx) = mpsc::channel();
    if tx.send(Command::Snapshot { reply: reply_tx }).is_err() {
        return respond(&mut stream, 503, "the daemon is shutting down\n", with_body);
    }
    match reply_rx.recv_timeout(SNAPSHOT_TIMEOUT) {
        Ok(status) => respond(
            &mut stream,
            200,
            &render(&status, &Telemetry::default()),
            with_body,
        ),
        Err(_) => respond(
            &mut stream,
            503,
            "the control loop did not answer\n",
            with_body,
        ),
    }
}

fn respond(stream: &mut TcpStream, code: u16, body: &str, with_body: bool) -> io::Result<()> {
    let (reason, content_type) = match code {
        200 => ("OK", "text/plain; version=0.0.4; charset=utf-8"),
        400 => ("Bad Request", "text/plain; charset=utf-8"),
        404 => ("Not Found", "text/plain; charset=utf-8"),
        405 => ("Method Not Allowed", "text/plain; charset=utf-8"),
        _ => ("Service Unavailable", "text/plain; charset=utf-8"),
    };
    let allow = if code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut msg = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    );
    if with_body {
        msg.push_str(body);
    }
    stream.write_all(msg.as_bytes())?;
    stream.flush()?;
    linger(stream);
    Ok(())
}

/// Closes our side and drains what the peer still sends (briefly), so that
/// closing with unread input does not reset the connection and destroy the
/// response before the peer reads it.
fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut chunk = [0u8; 4096];
    let mut drained = 0;
    while drained < 64 * 1024 {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

mod comm;
mod energy;
mod net;
mod own;
mod slo;
#[cfg(test)]
mod tests;
mod text;
