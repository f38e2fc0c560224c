//! Checks a [`WorkloadSpec`]: values in range, names unique, references to
//! apps of the right kind, no request cycles, every stream client served
//! once, a disk for disk apps.

use std::collections::{BTreeMap, BTreeSet};

use atoll_core::plan::TaskPolicy;

use super::{AppSpec, Program, WorkloadSpec};

/// Why a workload is refused. Each names the app (or section), the field
/// and the value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    /// The TOML did not parse (the message has the line and column).
    #[error("workload: {message}")]
    Parse {
        /// The parser's message.
        message: String,
    },
    /// A value out of range.
    #[error("app {app:?}: {field} = {value}: {reason}")]
    Value {
        /// The app.
        app: String,
        /// The field.
        field: &'static str,
        /// The value, as written.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// A `[network]` or `[disk]` value out of range.
    #[error("{section}.{field} = {value}: {reason}")]
    Setting {
        /// `network` or `disk`.
        section: &'static str,
        /// The field.
        field: &'static str,
        /// The value.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// Two apps with one name.
    #[error("app {app:?} is defined twice")]
    Duplicate {
        /// The name.
        app: String,
    },
    /// A reference to an app that does not exist.
    #[error("app {app:?}: {field} = {target:?}: there is no such app")]
    UnknownApp {
        /// The referring app.
        app: String,
        /// The field.
        field: &'static str,
        /// The name referred to.
        target: String,
    },
    /// A reference to an app of the wrong kind.
    #[error("app {app:?}: {field} = {target:?} is a {found} app, not a {expected} one")]
    WrongKind {
        /// The referring app.
        app: String,
        /// The field.
        field: &'static str,
        /// The name referred to.
        target: String,
        /// Its program.
        found: &'static str,
        /// The program needed.
        expected: &'static str,
    },
    /// Services calling each other in a loop.
    #[error("services call each other in a cycle: {path}")]
    Cycle {
        /// The cycle, `a -> b -> a`.
        path: String,
    },
    /// A stream client served by no server or by several.
    #[error("stream client app {app:?} is served by {servers} stream servers; it needs exactly 1")]
    Served {
        /// The client app.
        app: String,
        /// How many servers name it.
        servers: usize,
    },
    /// A disk app without a disk.
    #[error("app {app:?} uses the disk, but the workload has no [disk]")]
    NoDisk {
        /// The app.
        app: String,
    },
    /// More threads than the engine will create.
    #[error("the workload has {threads} threads; at most {max} are allowed")]
    TooManyThreads {
        /// Threads asked for.
        threads: u64,
        /// The limit.
        max: u64,
    },
}

/// The most threads a workload may have (the simulated machine's pid space
/// is 4 M; this leaves room for the daemon's own).
pub const MAX_THREADS: u64 = 1_000_000;

/// Parses a policy as written in specs: `other`, `batch`, `idle`,
/// `fifo:P`, `rr:P` (P in 1..=99).
pub fn parse_policy(s: &str) -> Option<TaskPolicy> {
    let prio = |p: &str| p.parse::<u8>().ok().filter(|p| (1..=99).contains(p));
    match s.split_once(':') {
        None => match s {
            "other" => Some(TaskPolicy::Other),
            "batch" => Some(TaskPolicy::Batch),
            "idle" => Some(TaskPolicy::Idle),
            _ => None,
        },
        Some(("fifo", p)) => prio(p).map(TaskPolicy::Fifo),
        Some(("rr", p)) => prio(p).map(TaskPolicy::Rr),
        Some(_) => None,
    }
}

fn value(app: &AppSpec, field: &'static str, v: impl ToString, reason: &str) -> WorkloadError {
    WorkloadError::Value {
        app: app.name.clone(),
        field,
        value: v.to_string(),
        reason: reason.into(),
    }
}

/// `v` is finite and at least `min` (strictly above it if `strict`).
fn check(
    app: &AppSpec,
    field: &'static str,
    v: f64,
    min: f64,
    strict: bool,
) -> Result<(), WorkloadError> {
    let ok = v.is_finite() && if strict { v > min } else { v >= min };
    if ok {
        Ok(())
    } else {
        let op = if strict { ">" } else { ">=" };
        Err(value(
            app,
            field,
            v,
            &format!("must be finite and {op} {min}"),
        ))
    }
}

fn setting(
    section: &'static str,
    field: &'static str,
    v: f64,
    strict: bool,
) -> Result<(), WorkloadError> {
    let ok = v.is_finite() && if strict { v > 0.0 } else { v >= 0.0 };
    if ok {
        Ok(())
    } else {
        Err(WorkloadError::Setting {
            section,
            field,
            value: v.to_string(),
            reason: format!("must be finite and {} 0", if strict { ">" } else { ">=" }),
        })
    }
}

impl WorkloadSpec {
    /// Checks the spec (see the module docs).
    pub fn validate(&self) -> Result<(), WorkloadError> {
        setting("network", "latency_us", self.network.latency_us, false)?;
        setting(
            "network",
            "bandwidth_gbps",
            self.network.bandwidth_gbps,
            true,
        )?;
        if let Some(d) = &self.disk {
            setting("disk", "capacity_gb", d.capacity_gb, true)?;
            setting("disk", "bandwidth_mb_s", d.bandwidth_mb_s, true)?;
            setting("disk", "seek_min_ms", d.seek_min_ms, false)?;
            setting("disk", "seek_full_ms", d.seek_full_ms, false)?;
            if d.seek_full_ms < d.seek_min_ms {
                return Err(WorkloadError::Setting {
                    section: "disk",
                    field: "seek_full_ms",
                    value: d.seek_full_ms.to_string(),
                    reason: format!("must be at least seek_min_ms ({})", d.seek_min_ms),
                });
            }
        }
        let mut by_name: BTreeMap<&str, &AppSpec> = BTreeMap::new();
        let mut threads = 0u64;
        for app in &self.apps {
            if by_name.insert(app.name.as_str(), app).is_some() {
                return Err(WorkloadError::Duplicate {
                    app: app.name.clone(),
                });
            }
            self.check_app(app)?;
            threads += u64::from(app.instances) * u64::from(app.threads);
        }
        if threads > MAX_THREADS {
            return Err(WorkloadError::TooManyThreads {
                threads,
                max: MAX_THREADS,
            });
        }
        let refer = |app: &AppSpec, field, target: &str, expected| {
            let t = by_name
                .get(target)
                .ok_or_else(|| WorkloadError::UnknownApp {
                    app: app.name.clone(),
                    field,
                    target: target.into(),
                })?;
            if t.program.kind() != expected {
                return Err(WorkloadError::WrongKind {
                    app: app.name.clone(),
                    field,
                    target: target.into(),
                    found: t.program.kind(),
                    expected,
                });
            }
            Ok(())
        };
        let mut served: BTreeMap<&str, usize> = BTreeMap::new();
        for app in &self.apps {
            match &app.program {
                Program::Client { target, .. } => refer(app, "target", target, "service")?,
                Program::Service { next: Some(n), .. } => refer(app, "next", n, "service")?,
                Program::StreamServer { clients, .. } => {
                    refer(app, "clients", clients, "stream_client")?;
                    *served.entry(clients.as_str()).or_default() += 1;
                }
                Program::Disk { .. } if self.disk.is_none() => {
                    return Err(WorkloadError::NoDisk {
                        app: app.name.clone(),
                    })
                }
                _ => {}
            }
        }
        for app in &self.apps {
            if let Program::StreamClient { .. } = app.program {
                let servers = served.get(app.name.as_str()).copied().unwrap_or(0);
                if servers != 1 {
                    return Err(WorkloadError::Served {
                        app: app.name.clone(),
                        servers,
                    });
                }
            }
        }
        self.check_cycles(&by_name)
    }

    fn check_app(&self, app: &AppSpec) -> Result<(), WorkloadError> {
        if app.name.is_empty() {
            return Err(value(app, "name", "\"\"", "must not be empty"));
        }
        let u = &app.unit;
        if u.is_empty() || u.len() > 15 || u.contains(['/', '\0', '\n']) {
            return Err(value(
                app,
                "unit",
                format!("{u:?}"),
                "must be 1 to 15 bytes (a comm) without '/'",
            ));
        }
        check(app, "start_ms", app.start_ms, 0.0, false)?;
        check(app, "memory_mb", app.memory_mb, 0.0, false)?;
        if app.instances == 0 {
            return Err(value(app, "instances", 0, "must be at least 1"));
        }
        if app.threads == 0 {
            return Err(value(app, "threads", 0, "must be at least 1"));
        }
        if let Some(p) = &app.policy {
            if parse_policy(p).is_none() {
                return Err(value(
                    app,
                    "policy",
                    format!("{p:?}"),
                    "must be other, batch, idle, fifo:P or rr:P with P in 1..=99",
                ));
            }
        }
        let positive = |field, n: Option<u64>| match n {
            Some(0) => Err(value(app, field, 0, "must be at least 1 (or absent)")),
            _ => Ok(()),
        };
        match &app.program {
            Program::Barrier {
                compute_ms,
                rounds,
                jitter,
            } => {
                check(app, "compute_ms", *compute_ms, 0.0, true)?;
                positive("rounds", Some(u64::from(*rounds)))?;
                if !(0.0..1.0).contains(jitter) {
                    return Err(value(app, "jitter", jitter, "must be in [0, 1)"));
                }
            }
            Program::Malleable {
                work_ms,
                rounds,
                jitter,
                spin_us,
                cache_penalty,
            } => {
                check(app, "work_ms", *work_ms, 0.0, true)?;
                positive("rounds", Some(u64::from(*rounds)))?;
                if !(0.0..1.0).contains(jitter) {
                    return Err(value(app, "jitter", jitter, "must be in [0, 1)"));
                }
                check(app, "spin_us", *spin_us, 0.0, false)?;
                if !(0.0..=1.0).contains(cache_penalty) {
                    return Err(value(
                        app,
                        "cache_penalty",
                        cache_penalty,
                        "must be in [0, 1]",
                    ));
                }
            }
            Program::Hog { cpu_ms } => {
                if let Some(c) = cpu_ms {
                    check(app, "cpu_ms", *c, 0.0, true)?;
                }
            }
            Program::Client {
                rate_per_s,
                think_ms,
                requests,
                cpu_us,
                ..
            } => {
                if let Some(r) = rate_per_s {
                    check(app, "rate_per_s", *r, 0.0, true)?;
                }
                check(app, "think_ms", *think_ms, 0.0, false)?;
                check(app, "cpu_us", *cpu_us, 0.0, false)?;
                positive("requests", *requests)?;
            }
            Program::Service { cpu_us, .. } => check(app, "cpu_us", *cpu_us, 0.0, false)?,
            Program::StreamServer {
                rate_kbps,
                chunk_kb,
                cpu_us,
                duration_ms,
                ..
            } => {
                check(app, "rate_kbps", *rate_kbps, 0.0, true)?;
                check(app, "chunk_kb", *chunk_kb, 0.0, true)?;
                check(app, "cpu_us", *cpu_us, 0.0, false)?;
                check(app, "duration_ms", *duration_ms, 0.0, true)?;
            }
            Program::StreamClient { prefill_ms, cpu_us } => {
                check(app, "prefill_ms", *prefill_ms, 0.0, false)?;
                check(app, "cpu_us", *cpu_us, 0.0, false)?;
            }
            Program::Disk {
                request_kb,
                requests,
                cpu_us,
                ..
            } => {
                check(app, "request_kb", *request_kb, 0.0, true)?;
                check(app, "cpu_us", *cpu_us, 0.0, false)?;
                positive("requests", *requests)?;
                if let Some(d) = &self.disk {
                    if request_kb * 1024.0 > d.capacity_gb * 1e9 {
                        return Err(value(
                            app,
                            "request_kb",
                            request_kb,
                            "is larger than the disk",
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_cycles(&self, by_name: &BTreeMap<&str, &AppSpec>) -> Result<(), WorkloadError> {
        let next = |name: &str| match by_name.get(name).map(|a| &a.program) {
            Some(Program::Service { next: Some(n), .. }) => Some(n.clone()),
            _ => None,
        };
        for app in &self.apps {
            let mut seen = BTreeSet::new();
            let mut path = vec![app.name.clone()];
            let mut at = app.name.clone();
            seen.insert(at.clone());
            while let Some(n) = next(&at) {
                path.push(n.clone());
                if !seen.insert(n.clone()) {
                    return Err(WorkloadError::Cycle {
                        path: path.join(" -> "),
                    });
                }
                at = n;
            }
        }
        Ok(())
    }
}
