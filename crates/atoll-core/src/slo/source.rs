//! Where an overlay's latency comes from, as the platform description
//! says (`[overlay.NAME]`'s `latency_source` and its keys), and how a line
//! of an access log carries a request's time.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::BeConfig;
use crate::Name;

/// Default span of the percentile window.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
/// Default time between two probes.
pub const DEFAULT_PROBE_EVERY: Duration = Duration::from_millis(100);
/// Default time a probe waits for its answer.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// A measured window is never stale sooner than this after its newest
/// sample (the loop reports a percentile once a second).
pub const MIN_STALE_AFTER: Duration = Duration::from_secs(2);

/// What an overlay measures, and which units run beside it as best effort.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SloConfig {
    /// Where its latency comes from.
    #[serde(default)]
    pub source: LatencySource,
    /// Span of the window its percentile is computed over.
    #[serde(default = "default_window")]
    pub window: Duration,
    /// Units run as best effort beside its (latency-critical) units: they
    /// get more while the SLO has slack and are cut back when it has not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub best_effort: Vec<Name>,
    /// A measured window whose newest sample is older than this gives no
    /// percentile: the latency is unknown (`None`: derived from the
    /// source, [`SloConfig::stale_after`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_after: Option<Duration>,
    /// How the best-effort units' level moves with the slack.
    #[serde(default, skip_serializing_if = "BeConfig::is_default")]
    pub be: BeConfig,
}

fn default_window() -> Duration {
    DEFAULT_WINDOW
}

impl Default for SloConfig {
    fn default() -> Self {
        Self {
            source: LatencySource::Report,
            window: DEFAULT_WINDOW,
            best_effort: Vec::new(),
            stale_after: None,
            be: BeConfig::default(),
        }
    }
}

impl SloConfig {
    /// Whether it is the default: app-reported latency, nothing beside.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// How old the newest sample of a measured window may be before the
    /// window is stale (`None` for `report`: nothing is measured). Unless
    /// configured: a probe's three rounds (`3 × (every + timeout)`), an
    /// access log's half window; at least [`MIN_STALE_AFTER`] either way.
    pub fn stale_after(&self) -> Option<Duration> {
        let derived = match &self.source {
            LatencySource::Report => return None,
            LatencySource::Probe(p) => (p.every + p.timeout) * 3,
            LatencySource::AccessLog(_) => self.window / 2,
        };
        Some(
            self.stale_after
                .unwrap_or_else(|| derived.max(MIN_STALE_AFTER)),
        )
    }
}

/// Where an overlay's latency comes from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatencySource {
    /// The application reports it through the API (`report`).
    #[default]
    Report,
    /// atoll sends requests to an endpoint and times the answers.
    Probe(ProbeSpec),
    /// atoll tails a web server's access log.
    AccessLog(AccessLogSpec),
}

impl LatencySource {
    /// Its name in the configuration (`report`, `probe`, `access_log`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Report => "report",
            Self::Probe(_) => "probe",
            Self::AccessLog(_) => "access_log",
        }
    }
}

/// A probe: what to ask, how often, how long to wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeSpec {
    /// The endpoint and the request.
    pub target: ProbeTarget,
    /// Time between two probes.
    pub every: Duration,
    /// A probe not answered in this long counts as a sample of this long.
    pub timeout: Duration,
}

/// A probe's endpoint and request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeTarget {
    /// `GET path` over HTTP/1.1 to `addr` (`host:port`); the answer is its
    /// status line and headers and the body (until the connection closes).
    Http {
        /// `host:port`.
        addr: String,
        /// The path, starting with `/`.
        path: String,
    },
    /// Connect to `addr`, send `send`, and wait for the first bytes back.
    Tcp {
        /// `host:port`.
        addr: String,
        /// What to send.
        send: String,
    },
}

impl ProbeTarget {
    /// Reads `http://host:port/path` or `tcp://host:port` (then `send` is
    /// what a TCP probe sends).
    pub fn parse(url: &str, send: Option<&str>) -> Result<Self, String> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| {
            format!(
                "{url:?} is not a URL like http://127.0.0.1:8080/health or tcp://127.0.0.1:6379"
            )
        })?;
        let (addr, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        if !port_ok {
            return Err(format!("{addr:?} is not host:port with a port above 0"));
        }
        match scheme {
            "http" => {
                if send.is_some() {
                    return Err(
                        "`probe_send` is for tcp:// probes; an http:// probe sends a GET".into(),
                    );
                }
                Ok(Self::Http {
                    addr: addr.to_string(),
                    path: if path.is_empty() {
                        "/".into()
                    } else {
                        path.to_string()
                    },
                })
            }
            "tcp" => {
                if !path.is_empty() && path != "/" {
                    return Err(format!("a tcp:// probe has no path ({path:?})"));
                }
                Ok(Self::Tcp {
                    addr: addr.to_string(),
                    send: send.unwrap_or("PING\r\n").to_string(),
                })
            }
            other => Err(format!("scheme {other:?} is not http or tcp")),
        }
    }

    /// Its URL as the configuration writes it.
    pub fn url(&self) -> String {
        match self {
            Self::Http { addr, path } => format!("http://{addr}{path}"),
            Self::Tcp { addr, .. } => format!("tcp://{addr}"),
        }
    }

    /// `host:port`.
    pub fn addr(&self) -> &str {
        match self {
            Self::Http { addr, .. } | Self::Tcp { addr, .. } => addr,
        }
    }
}

/// An access log to tail.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AccessLogSpec {
    /// The log file (followed across rotation).
    pub path: PathBuf,
    /// Where a line carries the request's time.
    pub format: LogFormat,
}

/// Where a line of an access log carries the request's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// A whitespace-separated field: 1-based from the start, or from the
    /// end when negative (-1 is the last). nginx's `$request_time` at the
    /// end of the line is `{ field: -1, unit: s }`.
    Field {
        /// Which field.
        index: i32,
        /// Its unit.
        unit: TimeUnit,
    },
    /// HAProxy's HTTP log: the timers field `TR/Tw/Tc/Tr/Ta` (or
    /// `Tq/Tw/Tc/Tr/Tt`), whose last value is the total time in ms.
    Haproxy,
}

impl LogFormat {
    /// nginx with `$request_time` last on the line.
    pub const NGINX: Self = Self::Field {
        index: -1,
        unit: TimeUnit::S,
    };

    /// The request time of one line, µs; `None` when the line has none
    /// (a line of another format, `-`, a negative HAProxy timer).
    pub fn request_time_us(&self, line: &str) -> Option<u64> {
        match *self {
            Self::Field { index, unit } => {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let i = match usize::try_from(index) {
                    Ok(0) => return None,
                    Ok(i) => i - 1,
                    Err(_) => fields
                        .len()
                        .checked_sub(usize::try_from(index.unsigned_abs()).ok()?)?,
                };
                let raw = fields.get(i)?.trim_matches('"');
                let v: f64 = raw.parse().ok()?;
                (v.is_finite() && v >= 0.0).then(|| crate::num::saturating_u64(v * unit.micros()))
            }
            Self::Haproxy => line.split_whitespace().find_map(|f| {
                let timers: Vec<&str> = f.split('/').collect();
                if timers.len() != 5 || !timers.iter().all(|t| t.parse::<i64>().is_ok()) {
                    return None;
                }
                let total: i64 = timers[4].trim_start_matches('+').parse().ok()?;
                u64::try_from(total).ok().map(|ms| ms.saturating_mul(1000))
            }),
        }
    }
}

/// A unit of time in a log field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeUnit {
    /// Seconds.
    S,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
}

impl TimeUnit {
    /// µs in one of it.
    pub fn micros(self) -> f64 {
        match self {
            Self::S => 1e6,
            Self::Ms => 1e3,
            Self::Us => 1.0,
        }
    }

    /// Its name in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::S => "s",
            Self::Ms => "ms",
            Self::Us => "us",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_request_time_is_the_last_field_in_seconds() {
        let line = r#"127.0.0.1 - - [26/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 612 "-" "curl/8" 0.004"#;
        assert_eq!(LogFormat::NGINX.request_time_us(line), Some(4000));
        assert_eq!(LogFormat::NGINX.request_time_us("a b -"), None);
        assert_eq!(LogFormat::NGINX.request_time_us(""), None);
        let second = LogFormat::Field {
            index: 2,
            unit: TimeUnit::Ms,
        };
        assert_eq!(second.request_time_us("x 12.5 y"), Some(12_500));
        let far = LogFormat::Field {
            index: -4,
            unit: TimeUnit::Us,
        };
        assert_eq!(far.request_time_us("1 2 3"), None);
    }

    #[test]
    fn haproxy_total_time_is_the_last_timer_in_ms() {
        let line = "Nov 26 10:00:00 lb haproxy[1]: 10.0.0.1:4242 [26/Nov/2026:10:00:00.123] fe be/s1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 \"GET / HTTP/1.1\"";
        assert_eq!(LogFormat::Haproxy.request_time_us(line), Some(109_000));
        let aborted = "fe be/s1 10/0/-1/-1/-1 503 0";
        assert_eq!(LogFormat::Haproxy.request_time_us(aborted), None);
    }

    #[test]
    fn a_window_goes_stale_after_what_is_configured_or_its_sources_rounds() {
        let probe = |every_ms, timeout_ms| SloConfig {
            source: LatencySource::Probe(ProbeSpec {
                target: ProbeTarget::parse("tcp://a:1", None).unwrap(),
                every: Duration::from_millis(every_ms),
                timeout: Duration::from_millis(timeout_ms),
            }),
            ..SloConfig::default()
        };
        assert_eq!(SloConfig::default().stale_after(), None, "report");
        assert_eq!(
            probe(100, 1000).stale_after(),
            Some(Duration::from_millis(3300))
        );
        assert_eq!(probe(10, 100).stale_after(), Some(MIN_STALE_AFTER));
        let log = SloConfig {
            source: LatencySource::AccessLog(AccessLogSpec {
                path: "/l".into(),
                format: LogFormat::NGINX,
            }),
            window: Duration::from_secs(30),
            ..SloConfig::default()
        };
        assert_eq!(log.stale_after(), Some(Duration::from_secs(15)));
        let set = SloConfig {
            stale_after: Some(Duration::from_millis(500)),
            ..log
        };
        assert_eq!(set.stale_after(), Some(Duration::from_millis(500)));
    }

    #[test]
    fn probe_urls() {
        assert_eq!(
            ProbeTarget::parse("http://127.0.0.1:8080", None).unwrap(),
            ProbeTarget::Http {
                addr: "127.0.0.1:8080".into(),
                path: "/".into()
            }
        );
        let t = ProbeTarget::parse("tcp://localhost:6379", Some("PING\n")).unwrap();
        assert_eq!(t.url(), "tcp://localhost:6379");
        assert_eq!(t.addr(), "localhost:6379");
        for bad in [
            "127.0.0.1:80",
            "ftp://a:1",
            "http://a",
            "http://a:0/",
            "tcp://a:1/x",
        ] {
            assert!(ProbeTarget::parse(bad, None).is_err(), "{bad}");
        }
        assert!(ProbeTarget::parse("http://a:1/", Some("x")).is_err());
    }
}
