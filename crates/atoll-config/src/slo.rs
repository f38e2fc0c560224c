//! An overlay's latency source and best-effort units: the keys
//! `latency_source`, `window_ms`, `stale_after_ms`, `probe*`,
//! `access_log`, `log_*`, `best_effort` and `be_*` of `[overlay.NAME]`, to
//! a [`SloConfig`] (checked in `atoll_core::spec`).
//!
//! Each key belongs to one source; a key of another source than the one
//! chosen is refused at its own key, so nothing written is ignored.

use std::path::PathBuf;
use std::time::Duration;

use atoll_core::slo::source::{DEFAULT_PROBE_EVERY, DEFAULT_PROBE_TIMEOUT, DEFAULT_WINDOW};
use atoll_core::slo::{
    AccessLogSpec, BeConfig, LatencySource, LogFormat, ProbeSpec, ProbeTarget, SloConfig, TimeUnit,
};
use atoll_core::Name;

use crate::error::Problem;
use crate::raw::RawOverlay;
use crate::spans::join;

/// An overlay's SLO keys, as a config file's `[overlay.NAME]` or the API's
/// `overlay_add` / `overlay_set` give them (each `None` or empty: not given).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SloKeys {
    /// `report` (default), `probe` or `access_log`.
    pub latency_source: Option<String>,
    /// Span of the percentile window, ms.
    pub window_ms: Option<u64>,
    /// Age of the newest sample past which the window is stale, ms.
    pub stale_after_ms: Option<u64>,
    /// `http://host:port/path` or `tcp://host:port`.
    pub probe: Option<String>,
    /// What a TCP probe sends.
    pub probe_send: Option<String>,
    /// Time between two probes, ms.
    pub probe_every_ms: Option<u64>,
    /// A probe's timeout, ms.
    pub probe_timeout_ms: Option<u64>,
    /// The log file.
    pub access_log: Option<PathBuf>,
    /// `nginx` (default) or `haproxy`.
    pub log_format: Option<String>,
    /// The field holding the request time.
    pub log_field: Option<i32>,
    /// `s` (default), `ms` or `us`.
    pub log_unit: Option<String>,
    /// Units run as best effort beside the overlay's.
    pub best_effort: Vec<Name>,
    /// Levels of the best-effort units above the floor.
    pub be_steps: Option<u32>,
    /// Slack above which they grow.
    pub be_grow_above: Option<f64>,
    /// Slack below which they are cut.
    pub be_cut_below: Option<f64>,
}

impl SloKeys {
    /// Whether any key is given.
    pub fn any(&self) -> bool {
        *self != Self::default()
    }
}

impl From<&RawOverlay> for SloKeys {
    fn from(raw: &RawOverlay) -> Self {
        Self {
            latency_source: raw.latency_source.clone(),
            window_ms: raw.window_ms,
            stale_after_ms: raw.stale_after_ms,
            probe: raw.probe.clone(),
            probe_send: raw.probe_send.clone(),
            probe_every_ms: raw.probe_every_ms,
            probe_timeout_ms: raw.probe_timeout_ms,
            access_log: raw.access_log.clone(),
            log_format: raw.log_format.clone(),
            log_field: raw.log_field,
            log_unit: raw.log_unit.clone(),
            best_effort: raw.best_effort.clone(),
            be_steps: raw.be_steps,
            be_grow_above: raw.be_grow_above,
            be_cut_below: raw.be_cut_below,
        }
    }
}

/// The [`SloConfig`] of the SLO keys of the overlay at `path`
/// (`overlay.NAME`), or what is wrong as `(key, problem)` (the platform
/// description's checks come after, in `atoll_core::spec`).
pub fn slo_config(path: &str, keys: &SloKeys) -> Result<SloConfig, Vec<(String, String)>> {
    let mut problems = Vec::new();
    match resolve_keys(path, keys, &mut problems) {
        Some(c) if problems.is_empty() => Ok(c),
        _ => Err(problems
            .into_iter()
            .map(|p| (p.key.unwrap_or_default(), p.message))
            .collect()),
    }
}

/// Resolves the SLO keys of the overlay table at `path`; `None` when one
/// is wrong (reported in `problems`).
pub(crate) fn resolve(
    path: &str,
    raw: &RawOverlay,
    problems: &mut Vec<Problem>,
) -> Option<SloConfig> {
    resolve_keys(path, &SloKeys::from(raw), problems)
}

fn resolve_keys(path: &str, raw: &SloKeys, problems: &mut Vec<Problem>) -> Option<SloConfig> {
    let before = problems.len();
    let kind = raw.latency_source.as_deref().unwrap_or("report");
    let mut stray = |key: &str, set: bool, owner: &str| {
        if set && kind != owner {
            problems.push(Problem::at_key(
                join(path, key),
                format!(
                    "`{key}` is for latency_source = \"{owner}\", and this overlay's is \"{kind}\""
                ),
            ));
        }
    };
    stray("probe", raw.probe.is_some(), "probe");
    stray("probe_send", raw.probe_send.is_some(), "probe");
    stray("probe_every_ms", raw.probe_every_ms.is_some(), "probe");
    stray("probe_timeout_ms", raw.probe_timeout_ms.is_some(), "probe");
    stray("access_log", raw.access_log.is_some(), "access_log");
    stray("log_format", raw.log_format.is_some(), "access_log");
    stray("log_field", raw.log_field.is_some(), "access_log");
    stray("log_unit", raw.log_unit.is_some(), "access_log");
    let source = match kind {
        "report" => LatencySource::Report,
        "probe" => probe(path, raw, problems)?,
        "access_log" => access_log(path, raw, problems)?,
        other => {
            problems.push(Problem::at_key(
                join(path, "latency_source"),
                format!(
                    "{other:?} is not a latency source: \"report\", \"probe\" or \"access_log\""
                ),
            ));
            return None;
        }
    };
    if problems.len() > before {
        return None;
    }
    let be = BeConfig::default();
    Some(SloConfig {
        source,
        window: raw.window_ms.map_or(DEFAULT_WINDOW, Duration::from_millis),
        best_effort: raw.best_effort.clone(),
        stale_after: raw.stale_after_ms.map(Duration::from_millis),
        be: BeConfig {
            steps: raw.be_steps.unwrap_or(be.steps),
            grow_above: raw.be_grow_above.unwrap_or(be.grow_above),
            cut_below: raw.be_cut_below.unwrap_or(be.cut_below),
            ..be
        },
    })
}

fn probe(path: &str, raw: &SloKeys, problems: &mut Vec<Problem>) -> Option<LatencySource> {
    let Some(url) = &raw.probe else {
        problems.push(Problem::at_key(
            join(path, "probe"),
            "latency_source = \"probe\" needs `probe`, the endpoint (http://host:port/path or tcp://host:port)",
        ));
        return None;
    };
    let target = ProbeTarget::parse(url, raw.probe_send.as_deref())
        .map_err(|e| problems.push(Problem::at_key(join(path, "probe"), e)))
        .ok()?;
    Some(LatencySource::Probe(ProbeSpec {
        target,
        every: raw
            .probe_every_ms
            .map_or(DEFAULT_PROBE_EVERY, Duration::from_millis),
        timeout: raw
            .probe_timeout_ms
            .map_or(DEFAULT_PROBE_TIMEOUT, Duration::from_millis),
    }))
}

fn access_log(path: &str, raw: &SloKeys, problems: &mut Vec<Problem>) -> Option<LatencySource> {
    let Some(file) = &raw.access_log else {
        problems.push(Problem::at_key(
            join(path, "access_log"),
            "latency_source = \"access_log\" needs `access_log`, the log file's path",
        ));
        return None;
    };
    let format = match raw.log_format.as_deref().unwrap_or("nginx") {
        "nginx" => {
            let unit = match raw.log_unit.as_deref().unwrap_or("s") {
                "s" => TimeUnit::S,
                "ms" => TimeUnit::Ms,
                "us" => TimeUnit::Us,
                other => {
                    problems.push(Problem::at_key(
                        join(path, "log_unit"),
                        format!("{other:?} is not \"s\", \"ms\" or \"us\""),
                    ));
                    return None;
                }
            };
            LogFormat::Field {
                index: raw.log_field.unwrap_or(-1),
                unit,
            }
        }
        "haproxy" => {
            for (key, set) in [
                ("log_field", raw.log_field.is_some()),
                ("log_unit", raw.log_unit.is_some()),
            ] {
                if set {
                    problems.push(Problem::at_key(
                        join(path, key),
                        format!("`{key}` is for log_format = \"nginx\"; HAProxy's total time is the last of its timers, in ms"),
                    ));
                }
            }
            LogFormat::Haproxy
        }
        other => {
            problems.push(Problem::at_key(
                join(path, "log_format"),
                format!("{other:?} is not a log format: \"nginx\" or \"haproxy\""),
            ));
            return None;
        }
    };
    Some(LatencySource::AccessLog(AccessLogSpec {
        path: file.clone(),
        format,
    }))
}
