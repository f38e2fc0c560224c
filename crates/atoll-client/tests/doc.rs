//! Keeps `docs/api.md` honest: every JSON example decodes with
//! `atoll_proto`, and every request op, reply kind and error code the
//! protocol defines is documented. Coordination examples also re-encode to
//! exactly what they say, every message kind has one, and every nack reason
//! is in the table. Application examples are what the types encode (their
//! requests compared once decoded, so a recipe may leave out defaults).

use std::collections::BTreeSet;

use atoll_core::coord::Message;
use atoll_proto::apps::RecipeRef;
use atoll_proto::{
    decode_request, decode_response, ErrorCode, Reply, Request, RequestEnvelope, PROTOCOL_VERSION,
};
use serde_json::Value;

#[path = "doc/apps.rs"]
mod apps;
#[path = "doc/coord.rs"]
mod coord;

fn doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md"))
        .expect("docs/api.md")
}

/// The bodies of the doc's ```json blocks.
fn json_blocks(doc: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```json") => current = Some(String::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap()),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "unterminated ```json block");
    blocks
}

/// One of each request; adding a variant to `Request` breaks the match
/// below until it is listed here (and documented).
fn every_request() -> Vec<Request> {
    let all = vec![
        Request::Status {},
        Request::Adopt {
            unit: "u".into(),
            pid: 1,
            island: None,
            network: None,
        },
        Request::Why {
            subject: None,
            limit: None,
        },
        Request::Stop { wait: false },
        Request::Stop { wait: true },
        Request::Reload {},
        Request::Overlays {},
        Request::Coordinate {
            from: None,
            message: Message::Null,
        },
        Request::Report {
            overlay: "o".into(),
            value: 1.0,
        },
        Request::AppRegister {
            recipe: RecipeRef::Named("r".into()),
            pid: None,
        },
        Request::AppPoll {
            app: 1,
            after: None,
        },
        Request::AppReport {
            app: 1,
            cycles: 1,
            goal_cps: None,
        },
        Request::AppDone { app: 1 },
        Request::Apps {},
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
        Request::OverlayShow {
            overlay: "o".into(),
        },
        Request::ConfigDump {},
    ];
    for r in &all {
        match r {
            Request::Status {}
            | Request::Adopt { .. }
            | Request::Why { .. }
            | Request::Stop { .. }
            | Request::Reload {}
            | Request::Overlays {}
            | Request::Coordinate { .. }
            | Request::Report { .. }
            | Request::AppRegister { .. }
            | Request::AppPoll { .. }
            | Request::AppReport { .. }
            | Request::AppDone { .. }
            | Request::Apps {}
            | Request::UnitAdd { .. }
            | Request::UnitSet { .. }
            | Request::UnitRm { .. }
            | Request::OverlayAdd { .. }
            | Request::OverlaySet { .. }
            | Request::OverlayRm { .. }
            | Request::OverlayShow { .. }
            | Request::ConfigDump {} => {}
        }
    }
    all
}

fn every_reply_kind() -> Vec<&'static str> {
    // Same trick: a new `Reply` variant fails to compile here.
    let kind = |r: &Reply| match r {
        Reply::Status(_) => "status",
        Reply::Adopted { .. } => "adopted",
        Reply::Decisions { .. } => "decisions",
        Reply::Stopping => "stopping",
        Reply::Stopped { .. } => "stopped",
        Reply::Reloaded { .. } => "reloaded",
        Reply::Overlays { .. } => "overlays",
        Reply::Coordinated { .. } => "coordinated",
        Reply::Reported { .. } => "reported",
        Reply::AppRegistered { .. } => "app_registered",
        Reply::AppAssignment(_) => "app_assignment",
        Reply::AppReported { .. } => "app_reported",
        Reply::AppDone { .. } => "app_done",
        Reply::Apps { .. } => "apps",
        Reply::Unit { .. } => "unit",
        Reply::UnitRemoved { .. } => "unit_removed",
        Reply::Overlay { .. } => "overlay",
        Reply::OverlayRemoved { .. } => "overlay_removed",
        Reply::OverlayShown(_) => "overlay_shown",
        Reply::Config { .. } => "config",
    };
    let stopping = Reply::Stopping;
    assert_eq!(
        serde_json::to_value(&stopping).unwrap()["kind"],
        kind(&stopping)
    );
    vec![
        "status",
        "adopted",
        "decisions",
        "stopping",
        "stopped",
        "reloaded",
        "overlays",
        "coordinated",
        "reported",
        "app_registered",
        "app_assignment",
        "app_reported",
        "app_done",
        "apps",
        "unit",
        "unit_removed",
        "overlay",
        "overlay_removed",
        "overlay_shown",
        "config",
    ]
}

fn every_error_code() -> Vec<ErrorCode> {
    let all = vec![
        ErrorCode::BadRequest,
        ErrorCode::UnsupportedVersion,
        ErrorCode::PermissionDenied,
        ErrorCode::NotFound,
        ErrorCode::Backend,
        ErrorCode::ShuttingDown,
        ErrorCode::Busy,
    ];
    for c in &all {
        match c {
            ErrorCode::BadRequest
            | ErrorCode::UnsupportedVersion
            | ErrorCode::PermissionDenied
            | ErrorCode::NotFound
            | ErrorCode::Backend
            | ErrorCode::ShuttingDown
            | ErrorCode::Busy => {}
        }
    }
    all
}

fn name_of<T: serde::Serialize>(v: &T, field: &str) -> String {
    let v = serde_json::to_value(v).unwrap();
    match v.get(field) {
        Some(Value::String(s)) => s.clone(),
        _ => v.as_str().expect("a string").to_string(),
    }
}

struct Examples {
    ops: BTreeSet<String>,
    kinds: BTreeSet<String>,
    codes: BTreeSet<String>,
    /// `msg` of every documented `coordinate` request.
    messages: BTreeSet<String>,
    /// Every documented request and reply, as JSON.
    values: Vec<Value>,
    /// Every documented request, decoded.
    requests: Vec<RequestEnvelope>,
}

fn examples() -> Examples {
    let mut ex = Examples {
        ops: BTreeSet::new(),
        kinds: BTreeSet::new(),
        codes: BTreeSet::new(),
        messages: BTreeSet::new(),
        values: Vec::new(),
        requests: Vec::new(),
    };
    let blocks = json_blocks(&doc());
    assert!(blocks.len() >= 8, "found only {} json blocks", blocks.len());
    for block in blocks {
        for value in serde_json::Deserializer::from_str(&block).into_iter::<Value>() {
            let value =
                value.unwrap_or_else(|e| panic!("invalid JSON in docs/api.md: {e}\n{block}"));
            let line = serde_json::to_string(&value).unwrap();
            if value.get("op").is_some() {
                let r = decode_request(&line)
                    .unwrap_or_else(|e| panic!("documented request does not decode: {e}"));
                assert_eq!(r.v, PROTOCOL_VERSION, "{line}");
                ex.ops.insert(name_of(&r.request, "op"));
                if let Request::Coordinate { message, .. } = &r.request {
                    ex.messages.insert(name_of(message, "msg"));
                }
                if coord::is_coordination(&value) {
                    let again = serde_json::to_value(&r).unwrap();
                    assert_eq!(again, value, "documented request re-encodes differently");
                }
                ex.requests.push(r);
            } else if value.get("ok").is_some() || value.get("err").is_some() {
                let r = decode_response(&line)
                    .unwrap_or_else(|e| panic!("documented reply does not decode: {e}"));
                if coord::is_coordination(&value) || apps::is_application(&value) {
                    let again = serde_json::to_value(&r).unwrap();
                    assert_eq!(again, value, "documented reply re-encodes differently");
                }
                match (r.ok, r.err) {
                    (Some(ok), None) => {
                        ex.kinds.insert(name_of(&ok, "kind"));
                    }
                    (None, Some(err)) => {
                        ex.codes.insert(name_of(&err.code, "code"));
                    }
                    _ => panic!("a reply must have exactly one of ok and err: {line}"),
                }
            } else {
                panic!("a json block in docs/api.md is neither a request nor a reply: {line}");
            }
            ex.values.push(value);
        }
    }
    ex
}

#[test]
fn every_documented_example_decodes_and_every_op_has_one() {
    let ex = examples();
    let ops: BTreeSet<String> = every_request().iter().map(|r| name_of(r, "op")).collect();
    assert_eq!(
        ex.ops, ops,
        "request ops with an example vs. the protocol's"
    );
    let kinds: BTreeSet<String> = every_reply_kind().into_iter().map(String::from).collect();
    assert_eq!(
        ex.kinds, kinds,
        "reply kinds with an example vs. the protocol's"
    );
}

#[test]
fn every_error_code_is_documented_with_an_example() {
    let doc = doc();
    let ex = examples();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Error codes"))
        .expect("an `## Error codes` section");
    for code in every_error_code() {
        let name = name_of(&code, "code");
        assert!(
            section.contains(&format!("| `{name}`")),
            "error code {name} is not in the table"
        );
        assert!(ex.codes.contains(&name), "error code {name} has no example");
    }
}

#[test]
fn every_op_mentioned_anywhere_exists() {
    let known: BTreeSet<String> = every_request().iter().map(|r| name_of(r, "op")).collect();
    let doc = doc();
    let compact = doc.replace("\"op\": \"", "\"op\":\"");
    for piece in compact.split("\"op\":\"").skip(1) {
        let op = piece.split('"').next().unwrap();
        assert!(known.contains(op), "docs/api.md mentions unknown op {op:?}");
    }
    for op in &known {
        assert!(
            doc.contains(&format!("### `{op}`")),
            "op {op} has no section"
        );
    }
}

#[test]
fn every_message_kind_has_an_example_and_every_nack_reason_is_listed() {
    let ex = examples();
    let kinds: BTreeSet<String> = coord::every_message()
        .iter()
        .map(|m| name_of(m, "msg"))
        .collect();
    assert_eq!(
        ex.messages, kinds,
        "message kinds with an example vs. the protocol's"
    );
    let doc = doc();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Coordination"))
        .expect("a `## Coordination` section");
    for reason in coord::every_nack_reason() {
        let name = name_of(&reason, "nack");
        assert!(
            section.contains(&format!("| `{name}`")),
            "nack reason {name} is not in the table"
        );
    }
    for m in coord::every_message() {
        let name = name_of(&m, "msg");
        assert!(
            section.contains(&format!("| `{name}`")),
            "message {name} is not in the table"
        );
    }
    assert!(matches!(coord::every_message()[0], Message::Null));
}

#[test]
fn the_coordination_examples_are_what_the_types_serialize_to() {
    let ex = examples();
    for (section, lines) in coord::examples() {
        for line in lines {
            let value: Value = serde_json::from_str(&line).unwrap();
            assert!(
                ex.values.contains(&value),
                "docs/api.md lacks this {section} example (refresh with the ignored \
                 print_coordination_examples test):\n{line}"
            );
        }
    }
}

#[test]
fn the_application_examples_are_what_the_types_serialize_to() {
    let ex = examples();
    let doc = doc();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Applications"))
        .expect("an `## Applications` section");
    for op in ["app_register", "app_poll", "app_report", "app_done", "apps"] {
        assert!(
            section.contains(&format!("### `{op}`")),
            "op {op} is not in the Applications section"
        );
    }
    for (section, lines) in apps::examples() {
        for line in lines {
            let value: Value = serde_json::from_str(&line).unwrap();
            let found = if value.get("op").is_some() {
                let r = decode_request(&line).unwrap();
                ex.requests.contains(&r)
            } else {
                ex.values.contains(&value)
            };
            assert!(
                found,
                "docs/api.md lacks this {section} example (refresh with the ignored \
                 print_application_examples test):\n{line}"
            );
        }
    }
}

/// Prints the application examples for pasting into docs/api.md.
#[test]
#[ignore = "prints the doc's application examples"]
fn print_application_examples() {
    for (section, lines) in apps::examples() {
        println!("--- {section}");
        for line in lines {
            print!("{line}");
        }
    }
}

/// Prints the coordination examples for pasting into docs/api.md.
#[test]
#[ignore = "prints the doc's coordination examples"]
fn print_coordination_examples() {
    for (section, lines) in coord::examples() {
        println!("--- {section}");
        for line in lines {
            print!("{line}");
        }
    }
}
