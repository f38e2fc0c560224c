//! atoll's local API, version 1.
//!
//! A client connects to the daemon's Unix socket and writes one JSON object
//! per line; the daemon answers each with one JSON object per line, in order.
//! Every request carries the protocol version `v` and an `id` the reply
//! echoes. The caller's identity is the socket peer's credentials
//! (`SO_PEERCRED`), never anything in the message.
//!
//! ```text
//! → {"v":1,"id":1,"op":"status"}
//! ← {"v":1,"id":1,"ok":{"kind":"status", ...}}
//! → {"v":1,"id":2,"op":"adopt","unit":"batch","pid":4242}
//! ← {"v":1,"id":2,"err":{"code":"permission_denied","message":"..."}}
//! ```
//!
//! The full reference is `docs/api.md`; a test checks that every request and
//! reply kind named there exists here.

use serde::{Deserialize, Serialize};

pub mod apps;
pub mod coord;
pub mod energy;
pub mod net;
pub mod runtime;
pub mod slo;
pub mod status;
pub mod strict;

use atoll_core::decision::Decision;
use atoll_core::spec::Entitlement;
use atoll_core::CpuSet;
pub use status::*;
pub use strict::{MAX_ITEMS, MAX_NAME, MAX_TEXT};

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// Longest request line the daemon reads, bytes.
pub const MAX_LINE: usize = 64 * 1024;
/// Default socket path.
pub const DEFAULT_SOCKET: &str = "/run/atoll/atoll.sock";

/// A request line. Decoding refuses unknown fields (see [`decode_request`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestEnvelope {
    /// Protocol version; must equal [`PROTOCOL_VERSION`].
    pub v: u32,
    /// Echoed in the reply.
    pub id: u64,
    /// The request.
    #[serde(flatten)]
    pub request: Request,
}

/// What a client can ask.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Islands, units, processes and their usage. (Empty braces make serde
    /// refuse unknown fields here too.)
    Status {},
    /// Move a process into a unit, creating the unit (in `island`, or the
    /// default island) if it does not exist. `atoll run` starts its command
    /// paused, sends this, then lets it run.
    Adopt {
        /// The unit.
        unit: String,
        /// The process.
        pid: u32,
        /// Island for a new unit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        island: Option<String>,
        /// A network class for a new unit, as `unit_add`'s
        /// `settings.network` gives one (root only). A unit that exists
        /// must have this class already.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        network: Option<runtime::NetClassSettings>,
    },
    /// Recent decisions, newest last, optionally only those about a subject
    /// (a group path like `web/api`, a unit name, or `pid N`).
    Why {
        /// Filter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
        /// At most this many (default 50).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
    },
    /// Tear down and exit (root only). With `wait`, the reply comes once
    /// teardown is over and says what it left ([`Reply::Stopped`]);
    /// without, at once ([`Reply::Stopping`]).
    Stop {
        /// Answer after teardown.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        wait: bool,
    },
    /// Read the configuration file again and apply it as a diff (root
    /// only). A configuration that does not parse or validate changes
    /// nothing: the error names the line and column.
    Reload {},
    /// The overlays: units, property, last value, loans, nacks.
    Overlays {},
    /// One coordination message (see [`coord`]), sent by the coordinator of
    /// island `from`. Default sender: the island of the message's unit for
    /// `tune` and `trigger`, else the island of the overlay's first unit.
    Coordinate {
        /// The sending island.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// The message.
        message: coord::Message,
    },
    /// An application reports the current value of its overlay's property
    /// (its latency percentile in µs, or its throughput per second): the
    /// proactive policy. The overlay's policy answers with a coordination
    /// message when the property does not hold (or holds with room to spare).
    Report {
        /// The overlay.
        overlay: String,
        /// The value.
        value: f64,
    },
    /// A reconfigurable application registers (see [`apps`]): the daemon
    /// plans it and answers with its first assignment.
    AppRegister {
        /// Its recipe.
        recipe: apps::RecipeRef,
        /// Its process (default: the caller).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
    },
    /// An application asks for its assignment; with `after`, whether it
    /// changed since that generation.
    AppPoll {
        /// The application.
        app: u64,
        /// The generation it last acted on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<u64>,
    },
    /// An application reports its progress: cycles done since it
    /// registered (a counter), and its goal in cycles per second.
    AppReport {
        /// The application.
        app: u64,
        /// Cycles done so far.
        cycles: u64,
        /// Its goal, cycles per second.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        goal_cps: Option<f64>,
    },
    /// An application is done: its resources go back.
    AppDone {
        /// The application.
        app: u64,
    },
    /// The applications, their working modes, goal gaps and resources.
    Apps {},
    /// Create a unit with an entitlement (see [`runtime`]), in `island` or
    /// the default island, validated as the config file is.
    UnitAdd {
        /// The unit.
        unit: String,
        /// Its island (default: the default island).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        island: Option<String>,
        /// Its entitlement.
        #[serde(default)]
        settings: runtime::UnitSettings,
    },
    /// Change a run-time unit's entitlement: the keys given replace theirs.
    UnitSet {
        /// The unit.
        unit: String,
        /// What changes.
        settings: runtime::UnitSettings,
    },
    /// Remove a run-time unit: its processes go back where they came from.
    UnitRm {
        /// The unit.
        unit: String,
    },
    /// Register an overlay over units of any origin (see [`runtime`]).
    OverlayAdd {
        /// The overlay.
        overlay: String,
        /// Its units, property, priority and reactive policy.
        settings: runtime::OverlaySettings,
    },
    /// Change an overlay added at run time: the keys given replace theirs.
    OverlaySet {
        /// The overlay.
        overlay: String,
        /// What changes.
        settings: runtime::OverlaySettings,
    },
    /// One latency overlay as atoll measures it (see [`slo`]): the
    /// percentile over its window, the SLO and the slack, its source and
    /// what the source costs, its best-effort units' level.
    OverlayShow {
        /// The overlay.
        overlay: String,
    },
    /// Deregister an overlay added at run time.
    OverlayRm {
        /// The overlay.
        overlay: String,
    },
    /// The effective configuration (the file's description with the units
    /// and overlays added at run time) as a config file.
    ConfigDump {},
}

impl Request {
    /// A short form for logs and decision reasons.
    pub fn summary(&self) -> String {
        match self {
            Self::Status {} => "status".into(),
            Self::Adopt {
                unit,
                pid,
                island,
                network,
            } => {
                let mut s = format!("adopt pid {pid} into unit {unit}");
                if let Some(i) = island {
                    s.push_str(&format!(" (island {i})"));
                }
                if let Some(n) = network {
                    s.push_str(&format!(" with network {}", n.describe()));
                }
                s
            }
            Self::Why { subject, .. } => format!("why {}", subject.as_deref().unwrap_or("")),
            Self::Stop { .. } => "stop".into(),
            Self::Reload {} => "reload".into(),
            Self::Overlays {} => "overlays".into(),
            Self::Coordinate { from, message } => {
                let m = serde_json::to_value(message)
                    .ok()
                    .and_then(|v| v.get("msg").and_then(|m| m.as_str()).map(str::to_string))
                    .unwrap_or_default();
                let o = message.overlay().map(|o| o.to_string()).unwrap_or_default();
                match from {
                    Some(f) => format!("{m} for overlay {o} from island {f}"),
                    None => format!("{m} for overlay {o}"),
                }
            }
            Self::Report { overlay, value } => format!("report {value} for overlay {overlay}"),
            Self::AppRegister { recipe, pid } => {
                let r = match recipe {
                    apps::RecipeRef::Named(n) => n.clone(),
                    apps::RecipeRef::Inline(r) => r.name.to_string(),
                };
                match pid {
                    Some(p) => format!("register application {r} (pid {p})"),
                    None => format!("register application {r}"),
                }
            }
            Self::AppPoll { app, .. } => format!("poll application {app}"),
            Self::AppReport { app, cycles, .. } => {
                format!("application {app} reports {cycles} cycles")
            }
            Self::AppDone { app } => format!("application {app} is done"),
            Self::Apps {} => "apps".into(),
            Self::UnitAdd {
                unit,
                island,
                settings,
            } => {
                let mut s = format!("add unit {unit}");
                if let Some(i) = island {
                    s.push_str(&format!(" in island {i}"));
                }
                let d = settings.describe();
                if !d.is_empty() {
                    s.push_str(&format!(" with {d}"));
                }
                s
            }
            Self::UnitSet { unit, settings } => {
                format!("set unit {unit}: {}", settings.describe())
            }
            Self::UnitRm { unit } => format!("remove unit {unit}"),
            Self::OverlayAdd { overlay, .. } => format!("add overlay {overlay}"),
            Self::OverlaySet { overlay, .. } => format!("set overlay {overlay}"),
            Self::OverlayRm { overlay } => format!("remove overlay {overlay}"),
            Self::OverlayShow { overlay } => format!("show overlay {overlay}"),
            Self::ConfigDump {} => "config dump".into(),
        }
    }

    /// Whether answering it may change what atoll manages (when it
    /// succeeds): its reply waits until the change is saved, and a status
    /// built before it is old for whoever reads after it. The others only
    /// read.
    pub fn changes_state(&self) -> bool {
        match self {
            Self::Status {}
            | Self::Why { .. }
            | Self::Overlays {}
            | Self::OverlayShow { .. }
            | Self::Apps {}
            | Self::ConfigDump {} => false,
            Self::Adopt { .. }
            | Self::Stop { .. }
            | Self::Reload {}
            | Self::Coordinate { .. }
            | Self::Report { .. }
            | Self::AppRegister { .. }
            | Self::AppPoll { .. }
            | Self::AppReport { .. }
            | Self::AppDone { .. }
            | Self::UnitAdd { .. }
            | Self::UnitSet { .. }
            | Self::UnitRm { .. }
            | Self::OverlayAdd { .. }
            | Self::OverlaySet { .. }
            | Self::OverlayRm { .. } => true,
        }
    }
}

/// A reply line: exactly one of `ok` and `err`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseEnvelope {
    /// Protocol version of the daemon.
    pub v: u32,
    /// The request's id (0 when the request could not be parsed).
    pub id: u64,
    /// Success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<Reply>,
    /// Failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<ApiError>,
}

impl ResponseEnvelope {
    /// A success reply.
    pub fn ok(id: u64, reply: Reply) -> Self {
        Self {
            v: PROTOCOL_VERSION,
            id,
            ok: Some(reply),
            err: None,
        }
    }

    /// A failure reply.
    pub fn err(id: u64, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            v: PROTOCOL_VERSION,
            id,
            ok: None,
            err: Some(ApiError {
                code,
                message: message.into(),
            }),
        }
    }

    /// The reply, or the error.
    pub fn into_result(self) -> Result<Reply, ApiError> {
        match (self.ok, self.err) {
            (Some(r), None) => Ok(r),
            (_, Some(e)) => Err(e),
            (None, None) => Err(ApiError {
                code: ErrorCode::BadRequest,
                message: "reply has neither ok nor err".into(),
            }),
        }
    }
}

/// A successful reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// Answer to [`Request::Status`].
    Status(Box<StatusReport>),
    /// Answer to [`Request::Adopt`].
    Adopted {
        /// The unit.
        unit: String,
        /// Its island.
        island: String,
        /// Whether the unit was created by this request.
        created: bool,
    },
    /// Answer to [`Request::Why`].
    Decisions {
        /// Matching decisions, oldest first.
        decisions: Vec<Decision>,
    },
    /// Answer to [`Request::Stop`]: teardown has begun.
    Stopping,
    /// Answer to [`Request::Stop`] with `wait`: teardown is over.
    Stopped {
        /// What teardown could not remove or give back (empty: nothing
        /// left).
        left: Vec<String>,
    },
    /// Answer to [`Request::Reload`]: what changed, a line each (empty:
    /// the configuration was the same).
    Reloaded {
        /// The changes.
        changes: Vec<String>,
    },
    /// Answer to [`Request::Overlays`].
    Overlays {
        /// Every overlay, in name order.
        overlays: Vec<coord::OverlayStatus>,
    },
    /// Answer to [`Request::Coordinate`]: ack (with the effects applied) or
    /// nack (with the reason). A nack is an answer, not an error.
    Coordinated {
        /// The coordinator's answer.
        reply: coord::CoordReply,
        /// The same in words: the effects, or why not.
        text: String,
    },
    /// Answer to [`Request::Report`]: the value was recorded; `action` is the
    /// message the overlay's policy sent because of it, with its answer.
    Reported {
        /// The overlay.
        overlay: String,
        /// Whether the property holds at this value.
        holds: bool,
        /// What the policy did about it, if anything, in words.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<String>,
    },
    /// Answer to [`Request::AppRegister`].
    AppRegistered {
        /// The application's id.
        app: u64,
        /// Its first assignment.
        assignment: apps::AppAssignment,
    },
    /// Answer to [`Request::AppPoll`].
    AppAssignment(apps::AppAssignment),
    /// Answer to [`Request::AppReport`].
    AppReported {
        /// The application.
        app: u64,
        /// Its goal gap now (0 without a goal).
        goal_gap: f64,
    },
    /// Answer to [`Request::AppDone`].
    AppDone {
        /// The application.
        app: u64,
    },
    /// Answer to [`Request::Apps`].
    Apps {
        /// Every application, by id.
        apps: Vec<apps::AppStatus>,
    },
    /// Answer to [`Request::UnitAdd`] and [`Request::UnitSet`]: the unit
    /// as it is now.
    Unit {
        /// The unit.
        unit: String,
        /// Its island.
        island: String,
        /// Its entitlement now.
        entitlement: Entitlement,
    },
    /// Answer to [`Request::UnitRm`].
    UnitRemoved {
        /// The unit.
        unit: String,
        /// The processes given back to where they came from.
        returned: Vec<u32>,
    },
    /// Answer to [`Request::OverlayAdd`] and [`Request::OverlaySet`]: the
    /// overlay as it is now.
    Overlay {
        /// The overlay.
        overlay: coord::OverlayStatus,
    },
    /// Answer to [`Request::OverlayShow`].
    OverlayShown(Box<slo::SloStatus>),
    /// Answer to [`Request::OverlayRm`].
    OverlayRemoved {
        /// The overlay.
        overlay: String,
    },
    /// Answer to [`Request::ConfigDump`].
    Config {
        /// The configuration, as a TOML file.
        toml: String,
    },
}

/// A failed request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct ApiError {
    /// Machine-readable kind.
    pub code: ErrorCode,
    /// What went wrong, for people.
    pub message: String,
}

/// Error kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Not JSON, unknown op, unknown field, or a bad value.
    BadRequest,
    /// `v` is not this daemon's version.
    UnsupportedVersion,
    /// The caller may not do this (SO_PEERCRED uid).
    PermissionDenied,
    /// No such unit, island or process.
    NotFound,
    /// The kernel or backend refused.
    Backend,
    /// The daemon is shutting down.
    ShuttingDown,
    /// Too many connections or requests from this caller right now; try
    /// again later.
    Busy,
}

/// Why a line could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not valid JSON of the expected shape.
    #[error("line {line:?}: {source}")]
    Json {
        /// The line (cut to 200 bytes).
        line: String,
        /// The parser's error, with column.
        #[source]
        source: serde_json::Error,
    },
    /// Longer than [`MAX_LINE`].
    #[error("line of {len} bytes is longer than the limit of {MAX_LINE}")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// A key written twice in one object, or (in a request) a string, key
    /// or array over its limit (see [`strict`]).
    #[error("{violation} (at column {column})")]
    Strict {
        /// What was refused, with the field.
        violation: strict::Violation,
        /// Where the parser stopped, 1-based.
        column: usize,
    },
}

/// Decodes a reply: no key twice.
fn decode<T: for<'de> Deserialize<'de>>(line: &str) -> Result<T, DecodeError> {
    strict::check(line.trim_end(), false)
        .map_err(|(violation, column)| DecodeError::Strict { violation, column })?;
    serde_json::from_str(line.trim_end()).map_err(|source| json_error(line, source))
}

fn json_error(line: &str, source: serde_json::Error) -> DecodeError {
    DecodeError::Json {
        line: line.chars().take(200).collect(),
        source,
    }
}

/// Decodes a request line: `v` and `id` are required, the rest must be
/// exactly one [`Request`] with no unknown fields, no key written twice
/// (at any depth) and no field over its limit ([`MAX_NAME`], [`MAX_TEXT`],
/// [`MAX_ITEMS`]; see [`strict`]). The line is read once: one pass checks
/// it and builds its JSON value, from which `v`, `id` and then the request
/// are taken.
pub fn decode_request(line: &str) -> Result<RequestEnvelope, DecodeError> {
    if line.len() > MAX_LINE {
        return Err(DecodeError::TooLong { len: line.len() });
    }
    let value = strict::parse(line.trim_end(), true).map_err(|r| match r {
        strict::Refused::Strict(violation, column) => DecodeError::Strict { violation, column },
        strict::Refused::Json(source) => json_error(line, source),
    })?;
    let json = |source| json_error(line, source);
    let mut rest: serde_json::Map<String, serde_json::Value> =
        serde_json::from_value(value).map_err(json)?;
    let mut field = |name: &'static str| {
        rest.remove(name)
            .ok_or_else(|| json(serde::de::Error::missing_field(name)))
    };
    let v = serde_json::from_value(field("v")?).map_err(json)?;
    let id = serde_json::from_value(field("id")?).map_err(json)?;
    let request = serde_json::from_value(serde_json::Value::Object(rest)).map_err(json)?;
    Ok(RequestEnvelope { v, id, request })
}

/// Decodes a reply line. A key written twice is refused as in requests;
/// replies have no length or field limits (a status report of a large
/// machine is long); requests do.
pub fn decode_response(line: &str) -> Result<ResponseEnvelope, DecodeError> {
    decode(line)
}

/// Encodes a message as one line, newline included.
pub fn encode<T: Serialize>(msg: &T) -> String {
    let mut s = serde_json::to_string(msg).unwrap_or_else(|e| {
        // Our types serialize infallibly (string keys, finite floats are not
        // guaranteed: NaN becomes an error) — report rather than panic.
        format!("{{\"v\":{PROTOCOL_VERSION},\"id\":0,\"err\":{{\"code\":\"backend\",\"message\":\"encode: {e}\"}}}}")
    });
    s.push('\n');
    s
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_roundtrip_in_the_documented_shape() {
        let r = RequestEnvelope {
            v: 1,
            id: 7,
            request: Request::Adopt {
                unit: "batch".into(),
                pid: 42,
                island: None,
                network: None,
            },
        };
        let line = encode(&r);
        assert_eq!(
            line,
            "{\"v\":1,\"id\":7,\"op\":\"adopt\",\"unit\":\"batch\",\"pid\":42}\n"
        );
        assert_eq!(decode_request(&line).unwrap(), r);
        let s = decode_request(r#"{"v":1,"id":1,"op":"status"}"#).unwrap();
        assert_eq!(s.request, Request::Status {});
    }

    #[test]
    fn unknown_ops_and_fields_are_refused() {
        assert!(decode_request(r#"{"v":1,"id":1,"op":"reboot"}"#).is_err());
        assert!(decode_request(r#"{"v":1,"id":1,"op":"status","x":1}"#).is_err());
        assert!(decode_request(r#"{"v":1,"op":"status"}"#).is_err());
        assert!(decode_request(r#"{"v":1,"id":1,"op":"stop","force":true}"#).is_err());
        assert!(
            decode_request(r#"{"v":1,"id":1,"op":"adopt","unit":"u","pid":1,"uid":0}"#).is_err()
        );
        let long = "x".repeat(MAX_LINE + 1);
        assert!(matches!(
            decode_request(&long),
            Err(DecodeError::TooLong { .. })
        ));
    }

    #[test]
    fn replies_carry_ok_or_err() {
        let ok = ResponseEnvelope::ok(3, Reply::Stopping);
        let line = encode(&ok);
        assert_eq!(line, "{\"v\":1,\"id\":3,\"ok\":{\"kind\":\"stopping\"}}\n");
        assert_eq!(
            decode_response(&line).unwrap().into_result().unwrap(),
            Reply::Stopping
        );
        let err = ResponseEnvelope::err(
            4,
            ErrorCode::PermissionDenied,
            "uid 1000 does not own pid 1",
        );
        let back = decode_response(&encode(&err))
            .unwrap()
            .into_result()
            .unwrap_err();
        assert_eq!(back.code, ErrorCode::PermissionDenied);
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod decode_tests;
