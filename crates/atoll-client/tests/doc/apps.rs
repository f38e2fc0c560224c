//! The application examples of `docs/api.md`, built from the real types.
//!
//! `examples()` builds real requests and replies; the doc must contain each
//! of them, compared after decoding (so the doc may pretty-print, and may
//! leave out recipe fields that have defaults, as a user would). To refresh
//! the doc after a type changed:
//! `cargo test -p atoll-client --test doc -- --ignored --nocapture print_application_examples`.

use atoll_core::awm::{Needs, Recipe, WorkingMode};
use atoll_core::{CpuSet, Name};
use atoll_proto::apps::{AppAssignment, AppRunState, AppStatus, RecipeRef};
use atoll_proto::{Reply, Request, RequestEnvelope, ResponseEnvelope, PROTOCOL_VERSION};

fn request(id: u64, request: Request) -> String {
    atoll_proto::encode(&RequestEnvelope {
        v: PROTOCOL_VERSION,
        id,
        request,
    })
}

fn reply(id: u64, reply: Reply) -> String {
    atoll_proto::encode(&ResponseEnvelope::ok(id, reply))
}

fn mode(id: u8, name: &str, value: f64, cpu_quota: f64, threads: u32) -> WorkingMode {
    WorkingMode {
        power_watts: None,
        id,
        name: name.into(),
        value,
        needs: Needs {
            cpu_quota,
            threads: Some(threads),
            exclusive_cpus: false,
            memory_bytes: 0,
            islands: None,
        },
    }
}

/// The recipe of the examples: four working modes, as in the paper's
/// Table VIII (five threads on four CPUs at the top).
fn bodytrack() -> Recipe {
    Recipe {
        name: Name::new("bodytrack").unwrap(),
        priority: 1,
        modes: vec![
            mode(0, "low", 0.25, 1.0, 1),
            mode(1, "mid", 0.5, 2.0, 2),
            mode(2, "high", 0.75, 3.0, 4),
            mode(3, "full", 1.0, 4.0, 5),
        ],
    }
}

fn running(generation: u64, mode: u8) -> AppAssignment {
    let m = bodytrack().mode(mode).unwrap().clone();
    AppAssignment {
        app: 7,
        generation,
        state: AppRunState::Running {
            mode,
            mode_name: m.name,
            island: "b".into(),
            cpu_quota: m.needs.cpu_quota,
            cpus: CpuSet::parse("4-7").unwrap(),
            threads: m.needs.threads,
            memory_bytes: 0,
        },
    }
}

fn waiting(generation: u64, reason: &str) -> AppAssignment {
    AppAssignment {
        app: 7,
        generation,
        state: AppRunState::Waiting {
            reason: reason.into(),
        },
    }
}

fn poll(id: u64, after: u64) -> String {
    request(
        id,
        Request::AppPoll {
            app: 7,
            after: Some(after),
        },
    )
}

/// The examples, by doc section, each one line.
pub fn examples() -> Vec<(&'static str, Vec<String>)> {
    let session = vec![
        request(
            30,
            Request::AppRegister {
                recipe: RecipeRef::Inline(bodytrack()),
                pid: Some(4242),
            },
        ),
        reply(
            30,
            Reply::AppRegistered {
                app: 7,
                assignment: running(1, 1),
            },
        ),
        poll(31, 1),
        reply(31, Reply::AppAssignment(running(1, 1))),
        request(
            32,
            Request::AppReport {
                app: 7,
                cycles: 120,
                goal_cps: Some(30.0),
            },
        ),
        reply(
            32,
            Reply::AppReported {
                app: 7,
                goal_gap: 0.25,
            },
        ),
        poll(33, 1),
        reply(33, Reply::AppAssignment(running(2, 2))),
        poll(34, 2),
        reply(
            34,
            Reply::AppAssignment(waiting(
                3,
                "priority level 0 needs the room: no island has 1 CPU free",
            )),
        ),
        poll(35, 3),
        reply(35, Reply::AppAssignment(running(4, 0))),
        request(36, Request::AppDone { app: 7 }),
        reply(36, Reply::AppDone { app: 7 }),
    ];
    let named = vec![
        request(
            40,
            Request::AppRegister {
                recipe: RecipeRef::Named("bodytrack".into()),
                pid: None,
            },
        ),
        reply(
            40,
            Reply::AppRegistered {
                app: 8,
                assignment: AppAssignment {
                    app: 8,
                    generation: 1,
                    state: AppRunState::Waiting {
                        reason: "not planned yet".into(),
                    },
                },
            },
        ),
    ];
    let status = AppStatus {
        app: 7,
        name: "bodytrack".into(),
        priority: 1,
        pid: 4242,
        unit: Some("b/bodytrack-7".into()),
        assignment: running(2, 2),
        goal_cps: Some(30.0),
        cycles_per_s: Some(24.0),
        goal_gap: 0.25,
        reconfigurations: 1,
        power: Some(atoll_proto::apps::AppPower {
            watts: 10.0,
            from: atoll_proto::energy::WattsFrom::Learned,
        }),
    };
    let apps = vec![
        request(41, Request::Apps {}),
        reply(41, Reply::Apps { apps: vec![status] }),
    ];
    vec![
        ("session", session),
        ("app_register", named),
        ("apps", apps),
    ]
}

/// Whether a documented request or reply is about applications.
pub fn is_application(value: &serde_json::Value) -> bool {
    let op = value.get("op").and_then(|v| v.as_str());
    let kind = value
        .get("ok")
        .and_then(|ok| ok.get("kind"))
        .and_then(|v| v.as_str());
    op.is_some_and(|o| o.starts_with("app")) || kind.is_some_and(|k| k.starts_with("app"))
}
