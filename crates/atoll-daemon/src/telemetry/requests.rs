//! API requests counted by operation and result, from the API threads:
//! one relaxed atomic addition per reply, no lock.

use std::sync::atomic::{AtomicU64, Ordering};

use atoll_proto::{ErrorCode, Request, ResponseEnvelope};

/// Operations, as the wire's `op` names them; `invalid` for a line that is
/// no request (not JSON, unknown op, too long).
pub const OPS: [&str; 22] = [
    "status",
    "adopt",
    "why",
    "stop",
    "reload",
    "overlays",
    "coordinate",
    "report",
    "app_register",
    "app_poll",
    "app_report",
    "app_done",
    "apps",
    "unit_add",
    "unit_set",
    "unit_rm",
    "overlay_add",
    "overlay_set",
    "overlay_rm",
    "config_dump",
    "overlay_show",
    "invalid",
];

/// Results: `ok` or the error code.
pub const RESULTS: [&str; 8] = [
    "ok",
    "bad_request",
    "unsupported_version",
    "permission_denied",
    "not_found",
    "backend",
    "shutting_down",
    "busy",
];

/// The index in [`OPS`] of a line that is no request.
pub const INVALID: usize = OPS.len() - 1;

/// The index in [`OPS`] of `request`'s operation.
pub fn op_index(request: &Request) -> usize {
    match request {
        Request::Status {} => 0,
        Request::Adopt { .. } => 1,
        Request::Why { .. } => 2,
        Request::Stop { .. } => 3,
        Request::Reload {} => 4,
        Request::Overlays {} => 5,
        Request::Coordinate { .. } => 6,
        Request::Report { .. } => 7,
        Request::AppRegister { .. } => 8,
        Request::AppPoll { .. } => 9,
        Request::AppReport { .. } => 10,
        Request::AppDone { .. } => 11,
        Request::Apps {} => 12,
        Request::UnitAdd { .. } => 13,
        Request::UnitSet { .. } => 14,
        Request::UnitRm { .. } => 15,
        Request::OverlayAdd { .. } => 16,
        Request::OverlaySet { .. } => 17,
        Request::OverlayRm { .. } => 18,
        Request::ConfigDump {} => 19,
        Request::OverlayShow { .. } => 20,
    }
}

/// The index in [`OPS`] of the `op` a line names, when it names a known
/// one (for lines answered before they are decoded).
pub fn op_index_of_line(line: &[u8]) -> usize {
    let v = serde_json::from_slice::<serde_json::Value>(line).ok();
    op_index_of_name(v.as_ref().and_then(|v| v.get("op")?.as_str()))
}

/// The index in [`OPS`] of the operation named `op`, when it is a known
/// one.
pub fn op_index_of_name(op: Option<&str>) -> usize {
    op.and_then(|op| OPS[..INVALID].iter().position(|o| *o == op))
        .unwrap_or(INVALID)
}

/// The index in [`RESULTS`] of a reply.
pub fn result_index(reply: &ResponseEnvelope) -> usize {
    match reply.err.as_ref().map(|e| e.code) {
        None => 0,
        Some(ErrorCode::BadRequest) => 1,
        Some(ErrorCode::UnsupportedVersion) => 2,
        Some(ErrorCode::PermissionDenied) => 3,
        Some(ErrorCode::NotFound) => 4,
        Some(ErrorCode::Backend) => 5,
        Some(ErrorCode::ShuttingDown) => 6,
        Some(ErrorCode::Busy) => 7,
    }
}

/// Replies counted by (operation, result).
#[derive(Debug)]
pub struct RequestCounters {
    counts: [AtomicU64; OPS.len() * RESULTS.len()],
}

impl Default for RequestCounters {
    fn default() -> Self {
        Self {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl RequestCounters {
    /// Counts one reply to an `op` (an index in [`OPS`]).
    pub fn count(&self, op: usize, reply: &ResponseEnvelope) {
        let i = op.min(INVALID) * RESULTS.len() + result_index(reply);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Every (operation, result) counted at least once, with its count.
    pub fn snapshot(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out = Vec::new();
        for (o, op) in OPS.iter().enumerate() {
            for (r, result) in RESULTS.iter().enumerate() {
                let n = self.counts[o * RESULTS.len() + r].load(Ordering::Relaxed);
                if n > 0 {
                    out.push((*op, *result, n));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use atoll_proto::Reply;

    use super::*;

    #[test]
    fn names_are_the_wire_names() {
        // Each op's index names the tag the request serializes with.
        let requests = [
            Request::Status {},
            Request::Why {
                subject: None,
                limit: None,
            },
            Request::Reload {},
            Request::Overlays {},
            Request::Apps {},
            Request::Stop { wait: false },
            Request::UnitAdd {
                unit: "u".into(),
                island: None,
                settings: Default::default(),
            },
            Request::UnitSet {
                unit: "u".into(),
                settings: Default::default(),
            },
            Request::UnitRm { unit: "u".into() },
            Request::OverlayAdd {
                overlay: "o".into(),
                settings: Default::default(),
            },
            Request::OverlaySet {
                overlay: "o".into(),
                settings: Default::default(),
            },
            Request::OverlayRm {
                overlay: "o".into(),
            },
            Request::ConfigDump {},
            Request::OverlayShow {
                overlay: "o".into(),
            },
        ];
        for r in requests {
            let json = serde_json::to_value(&r).unwrap();
            assert_eq!(json["op"], OPS[op_index(&r)], "{json}");
            let line = serde_json::to_vec(&json).unwrap();
            assert_eq!(op_index_of_line(&line), op_index(&r));
        }
        assert_eq!(op_index_of_line(b"{\"op\":\"nonsense\"}"), INVALID);
        assert_eq!(op_index_of_line(b"not json"), INVALID);
        for code in [
            ErrorCode::BadRequest,
            ErrorCode::UnsupportedVersion,
            ErrorCode::PermissionDenied,
            ErrorCode::NotFound,
            ErrorCode::Backend,
            ErrorCode::ShuttingDown,
            ErrorCode::Busy,
        ] {
            let reply = ResponseEnvelope::err(1, code, "x");
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, RESULTS[result_index(&reply)]);
        }
    }

    #[test]
    fn counts_by_op_and_result() {
        let c = RequestCounters::default();
        let ok = ResponseEnvelope::ok(1, Reply::Stopping);
        let denied = ResponseEnvelope::err(2, ErrorCode::PermissionDenied, "no");
        c.count(op_index(&Request::Status {}), &ok);
        c.count(op_index(&Request::Status {}), &ok);
        c.count(op_index(&Request::Reload {}), &denied);
        c.count(
            INVALID,
            &ResponseEnvelope::err(0, ErrorCode::BadRequest, "?"),
        );
        assert_eq!(
            c.snapshot(),
            [
                ("status", "ok", 2),
                ("reload", "permission_denied", 1),
                ("invalid", "bad_request", 1),
            ]
        );
    }
}
