use super::*;

const GOOD: &str = r#"
[network]
latency_us = 40

[disk]
queue = "weighted"

[[apps]]
name = "solver"
unit = "solver"
instances = 2
threads = 4
memory_mb = 64
program = { kind = "barrier", compute_ms = 10, rounds = 5, jitter = 0.1 }

[[apps]]
name = "front"
unit = "front"
program = { kind = "service", cpu_us = 200, next = "db" }

[[apps]]
name = "db"
unit = "db"
threads = 2
program = { kind = "service", cpu_us = 500, exponential = true }

[[apps]]
name = "users"
unit = "users"
program = { kind = "client", target = "front", rate_per_s = 100, requests = 50 }

[[apps]]
name = "tv"
unit = "tv"
program = { kind = "stream_server", clients = "viewer", rate_kbps = 4000, chunk_kb = 64, cpu_us = 300, duration_ms = 1000 }

[[apps]]
name = "viewer"
unit = "viewer"
instances = 3
program = { kind = "stream_client", prefill_ms = 200 }

[[apps]]
name = "scan"
unit = "scan"
policy = "idle"
program = { kind = "disk", pattern = "sequential", request_kb = 128, requests = 10 }
"#;

#[test]
fn a_full_workload_parses_and_validates() {
    let w = WorkloadSpec::from_toml(GOOD).unwrap();
    assert_eq!(w.apps.len(), 7);
    assert_eq!(w.network.latency_us, 40.0);
    assert_eq!(w.network.bandwidth_gbps, 10.0);
    assert_eq!(w.disk.as_ref().unwrap().queue, DiskQueue::Weighted);
    assert_eq!(w.app("solver").unwrap().instances, 2);
    assert!(w.app("solver").unwrap().program.finite());
    assert!(!w.app("front").unwrap().program.finite());
    // It round-trips through TOML.
    let again: WorkloadSpec = toml::from_str(&toml::to_string(&w).unwrap()).unwrap();
    assert_eq!(again, w);
}

fn err(text: &str) -> WorkloadError {
    WorkloadSpec::from_toml(text).unwrap_err()
}

fn with_app(program: &str, extra: &str) -> String {
    format!("[[apps]]\nname = \"a\"\nunit = \"a\"\n{extra}\nprogram = {program}\n")
}

#[test]
fn unknown_fields_are_refused_with_a_position() {
    let e = err(&with_app("{ kind = \"hog\", speed = 3 }", ""));
    assert!(
        matches!(&e, WorkloadError::Parse { message } if message.contains("speed")),
        "{e}"
    );
    let e = err("[[apps]]\nname = \"a\"\nunit = \"a\"\ncolour = 1\nprogram = { kind = \"hog\" }\n");
    assert!(
        e.to_string().contains("colour") && e.to_string().contains("line"),
        "{e}"
    );
    let e = err(&with_app("{ kind = \"dance\" }", ""));
    assert!(matches!(e, WorkloadError::Parse { .. }));
}

#[test]
fn values_are_checked_and_named() {
    let cases = [
        (
            with_app("{ kind = \"barrier\", compute_ms = 0, rounds = 1 }", ""),
            "compute_ms",
            "0",
        ),
        (
            with_app("{ kind = \"barrier\", compute_ms = 1, rounds = 0 }", ""),
            "rounds",
            "0",
        ),
        (
            with_app(
                "{ kind = \"barrier\", compute_ms = 1, rounds = 1, jitter = 1.5 }",
                "",
            ),
            "jitter",
            "1.5",
        ),
        (
            with_app(
                "{ kind = \"malleable\", work_ms = 1, rounds = 1, cache_penalty = 1.5 }",
                "",
            ),
            "cache_penalty",
            "1.5",
        ),
        (
            with_app(
                "{ kind = \"malleable\", work_ms = 1, rounds = 1, cache_penalty = -0.1 }",
                "",
            ),
            "cache_penalty",
            "-0.1",
        ),
        (
            with_app("{ kind = \"hog\" }", "threads = 0"),
            "threads",
            "0",
        ),
        (
            with_app("{ kind = \"hog\" }", "policy = \"fifo:0\""),
            "policy",
            "\"fifo:0\"",
        ),
        (
            with_app("{ kind = \"hog\" }", "start_ms = -1"),
            "start_ms",
            "-1",
        ),
    ];
    for (text, field, v) in cases {
        match err(&text) {
            WorkloadError::Value {
                app,
                field: f,
                value,
                ..
            } => {
                assert_eq!((app.as_str(), f, value.as_str()), ("a", field, v));
            }
            other => panic!("{field}: {other}"),
        }
    }
    let long =
        "[[apps]]\nname = \"a\"\nunit = \"a-very-long-comm-name\"\nprogram = { kind = \"hog\" }\n";
    assert!(matches!(
        err(long),
        WorkloadError::Value { field: "unit", .. }
    ));
    let net = format!(
        "[network]\nbandwidth_gbps = 0\n{}",
        with_app("{ kind = \"hog\" }", "")
    );
    assert!(matches!(
        err(&net),
        WorkloadError::Setting {
            section: "network",
            field: "bandwidth_gbps",
            ..
        }
    ));
}

#[test]
fn references_must_exist_have_the_right_kind_and_not_loop() {
    let client = with_app("{ kind = \"client\", target = \"nope\" }", "");
    assert!(matches!(
        err(&client),
        WorkloadError::UnknownApp {
            field: "target",
            ..
        }
    ));
    let wrong = format!(
        "{}[[apps]]\nname = \"b\"\nunit = \"b\"\nprogram = {{ kind = \"client\", target = \"a\" }}\n",
        with_app("{ kind = \"hog\" }", "")
    );
    assert!(matches!(
        err(&wrong),
        WorkloadError::WrongKind {
            found: "hog",
            expected: "service",
            ..
        }
    ));
    let cycle = "[[apps]]\nname = \"a\"\nunit = \"a\"\nprogram = { kind = \"service\", cpu_us = 1, next = \"b\" }\n\
                 [[apps]]\nname = \"b\"\nunit = \"b\"\nprogram = { kind = \"service\", cpu_us = 1, next = \"a\" }\n";
    assert!(matches!(err(cycle), WorkloadError::Cycle { path } if path == "a -> b -> a"));
    let dup = format!("{0}{0}", with_app("{ kind = \"hog\" }", ""));
    assert!(matches!(err(&dup), WorkloadError::Duplicate { .. }));
    let orphan = with_app("{ kind = \"stream_client\", prefill_ms = 10 }", "");
    assert!(matches!(
        err(&orphan),
        WorkloadError::Served { servers: 0, .. }
    ));
    let disk = with_app(
        "{ kind = \"disk\", pattern = \"random\", request_kb = 4 }",
        "",
    );
    assert!(matches!(err(&disk), WorkloadError::NoDisk { .. }));
}

#[test]
fn policies_parse() {
    use atoll_core::plan::TaskPolicy;
    assert_eq!(validate::parse_policy("rr:5"), Some(TaskPolicy::Rr(5)));
    assert_eq!(
        validate::parse_policy("fifo:99"),
        Some(TaskPolicy::Fifo(99))
    );
    assert_eq!(validate::parse_policy("idle"), Some(TaskPolicy::Idle));
    assert_eq!(validate::parse_policy("fifo:100"), None);
    assert_eq!(validate::parse_policy("deadline"), None);
}

#[test]
fn the_module_docs_example_is_valid() {
    let docs = include_str!("mod.rs");
    let start = docs.find("//! ```toml\n").unwrap() + "//! ```toml\n".len();
    let end = start + docs[start..].find("//! ```\n").unwrap();
    let text: String = docs[start..end]
        .lines()
        .map(|l| l.trim_start_matches("//!").trim_start())
        .collect::<Vec<_>>()
        .join("\n");
    let w = WorkloadSpec::from_toml(&text).unwrap();
    assert_eq!(w.apps.len(), 3);
}
