//! Canned exchanges of the coordination and application API, made from the
//! real `atoll-proto` types, and the fixture file the Python client's tests and
//! `clients/test.sh` replay (`clients/fixtures/wire.json`).
//!
//! Each exchange is a request and the daemon's reply. In the fixture file
//! both lines carry id 0, which stands for the id of the request actually
//! sent: the fake daemons put that id into both before comparing and
//! answering. `fixture_file_is_up_to_date` fails when the file and these
//! types disagree; `ATOLL_BLESS=1 cargo test -p atoll-client-c` rewrites it.

use std::path::PathBuf;
use std::time::Duration;

use atoll_core::awm::Recipe;
use atoll_core::backend::GroupStats;
use atoll_core::coord::{BoostKind, Change, Limit, NackReason, Why};
use atoll_core::plan::TaskPolicy;
use atoll_core::spec::{Entitlement, SchedPolicy};
use atoll_core::{CpuSet, Name, NodeSet};
use atoll_proto::apps::{AppAssignment, AppRunState, AppStatus, RecipeRef};
use atoll_proto::coord::{
    CoordReply, Direction, Effect, LoanStatus, Message, OverlayOrigin, OverlaySpec, OverlayStatus,
    Property, Resource,
};
use atoll_proto::{
    encode, ErrorCode, HostStatus, IslandStatus, Reply, Request, RequestEnvelope, ResponseEnvelope,
    StatusReport, UnitOrigin, UnitStatus, PROTOCOL_VERSION,
};

/// One request and its reply.
pub(crate) struct Exchange {
    /// Name in the fixture file.
    pub name: &'static str,
    /// What the client sends.
    pub request: Request,
    /// What the daemon answers.
    pub reply: Result<Reply, (ErrorCode, &'static str)>,
}

impl Exchange {
    /// The request line (newline included) with `id`.
    pub fn request_line(&self, id: u64) -> String {
        encode(&RequestEnvelope {
            v: PROTOCOL_VERSION,
            id,
            request: self.request.clone(),
        })
    }

    /// The reply line (newline included) with `id`.
    pub fn reply_line(&self, id: u64) -> String {
        encode(&match &self.reply {
            Ok(r) => ResponseEnvelope::ok(id, r.clone()),
            Err((code, message)) => ResponseEnvelope::err(id, *code, *message),
        })
    }
}

pub(crate) fn name(s: &str) -> Name {
    Name::new(s).expect("a valid name")
}

fn coordinate(from: Option<&str>, message: Message) -> Request {
    Request::Coordinate {
        from: from.map(str::to_string),
        message,
    }
}

/// The reply to a coordination message, with the text the way the daemon
/// words it (docs/api.md): the reply displayed, `ack: effects` or
/// `nack: reason`.
fn coordinated(reply: CoordReply) -> Result<Reply, (ErrorCode, &'static str)> {
    let text = reply.to_string();
    Ok(Reply::Coordinated { reply, text })
}

fn tune_up_api() -> Message {
    Message::Tune {
        resource: Resource::CpuTime,
        dir: Direction::Up,
        overlay: name("shop"),
        unit: name("api"),
    }
}

fn weight_effect() -> Effect {
    Effect::new(
        Change::SetWeight {
            island: name("web"),
            unit: name("api"),
            weight: 125,
        },
        Why::Tune {
            overlay: name("shop"),
            resource: Resource::CpuTime,
            dir: Direction::Up,
        },
    )
}

fn move_cores(from: &str, to: &str, cpus: &str, why: Why) -> Effect {
    Effect::new(
        Change::MoveCores {
            from_island: name(from),
            to_island: name(to),
            cpus: CpuSet::parse(cpus).expect("a CPU list"),
        },
        why,
    )
}

fn overlay_status() -> OverlayStatus {
    OverlayStatus {
        name: "shop".into(),
        priority: 5,
        units: vec!["web/api".into(), "db/pg".into()],
        property: Property::LatencyPercentile {
            percentile: 99.0,
            bound_us: 5000,
        },
        origin: OverlayOrigin::Config,
        value: Some(1234.5),
        holds: Some(true),
        loans: vec![LoanStatus {
            cpu: 3,
            owner: "db".into(),
            lender: "db".into(),
            borrower: "web".into(),
        }],
        nacks: vec![(Resource::CpuTime, 2)],
        acked: 3,
        nacked: 1,
    }
}

fn status_report() -> StatusReport {
    StatusReport {
        version: "0.1.0".into(),
        backend: "cgroup2".into(),
        service_manager: Some("systemd 252".into()),
        root: "atoll".into(),
        root_info: Some(atoll_proto::RootInfo {
            location: "/sys/fs/cgroup/atoll".into(),
            effects: vec![
                "island web: exclusive: CPUs 1-3 are taken from every task atoll does not manage"
                    .into(),
            ],
        }),
        epoch_ms: 100,
        uptime_ms: 5000,
        epochs: 50,
        host: HostStatus {
            cpus: CpuSet::parse("0").expect("a CPU list"),
            mems: NodeSet::parse("0").expect("a node list"),
            adopt_all: false,
            processes: 3,
            stats: GroupStats::default(),
        },
        islands: vec![IslandStatus {
            name: "web".into(),
            cpus: CpuSet::parse("1").expect("a CPU list"),
            mems: NodeSet::parse("0").expect("a node list"),
            policy: SchedPolicy::Fair,
            units: vec!["api".into()],
            stats: GroupStats::default(),
        }],
        units: vec![UnitStatus {
            name: "api".into(),
            island: "web".into(),
            origin: UnitOrigin::Config,
            entitlement: Entitlement::default(),
            task_policy: TaskPolicy::Other,
            pids: vec![4242],
            stats: GroupStats::default(),
            isolation: None,
            comm: None,
            service: Some(atoll_proto::UnitService {
                external: atoll_core::backend::External::SystemdUnit("nginx.service".into()),
                bound: true,
                problem: None,
            }),
        }],
        fallbacks: vec![],
        isolation_mode: None,
        accounts: None,
        comm: None,
        discovery: None,
        pressure: Some(atoll_proto::coord::PressureSource {
            source: "triggers".into(),
            reason: None,
            armed: 1,
            read: 0,
            fired: 2,
        }),
        pace: None,
        coord_restored: None,
        energy: None,
        network: Vec::new(),
        slo: Vec::new(),
        warnings: Vec::new(),
    }
}

/// Every canned exchange: coordination, then applications.
pub(crate) fn exchanges() -> Vec<Exchange> {
    let mut all = coordination_exchanges();
    all.extend(app_exchanges());
    all
}

fn coordination_exchanges() -> Vec<Exchange> {
    let not_holding_action = format!(
        "{}: {}",
        tune_up_api(),
        CoordReply::Ack {
            effects: vec![weight_effect()]
        }
    );
    vec![
        Exchange {
            name: "overlays",
            request: Request::Overlays {},
            reply: Ok(Reply::Overlays {
                overlays: vec![overlay_status()],
            }),
        },
        Exchange {
            name: "status",
            request: Request::Status {},
            reply: Ok(Reply::Status(Box::new(status_report()))),
        },
        Exchange {
            name: "tune_ack",
            request: coordinate(None, tune_up_api()),
            reply: coordinated(CoordReply::Ack {
                effects: vec![weight_effect()],
            }),
        },
        Exchange {
            name: "tune_nack",
            request: coordinate(
                None,
                Message::Tune {
                    resource: Resource::Memory,
                    dir: Direction::Down,
                    overlay: name("shop"),
                    unit: name("api"),
                },
            ),
            reply: coordinated(CoordReply::nack(NackReason::AtMinimum {
                unit: name("api"),
                resource: Resource::Memory,
            })),
        },
        Exchange {
            name: "tune_at_capacity",
            request: coordinate(None, tune_up_api()),
            reply: coordinated(CoordReply::nack(NackReason::AtCapacity {
                island: name("web"),
                unit: name("api"),
                resource: Resource::CpuTime,
                limit: Limit::MaxWeight { weight: 10000 },
            })),
        },
        Exchange {
            name: "tune_shutting_down",
            request: coordinate(None, tune_up_api()),
            reply: Err((ErrorCode::ShuttingDown, "the daemon is shutting down")),
        },
        Exchange {
            name: "trigger_ack",
            request: coordinate(
                None,
                Message::Trigger {
                    resource: Resource::CpuTime,
                    overlay: name("shop"),
                    unit: name("api"),
                },
            ),
            reply: coordinated(CoordReply::Ack {
                effects: vec![Effect::new(
                    Change::Boost {
                        island: name("web"),
                        unit: name("api"),
                        kind: BoostKind::Weight { weight: 10000 },
                        until: Duration::from_millis(12_030),
                    },
                    Why::Trigger {
                        overlay: name("shop"),
                    },
                )],
            }),
        },
        Exchange {
            name: "borrow_any_ack",
            request: coordinate(
                None,
                Message::BorrowAny {
                    resource: Resource::Cores,
                    overlay: name("shop"),
                    amount: 1,
                },
            ),
            reply: coordinated(CoordReply::Ack {
                effects: vec![move_cores(
                    "db",
                    "web",
                    "3",
                    Why::Borrow {
                        overlay: name("shop"),
                    },
                )],
            }),
        },
        Exchange {
            name: "borrow_preferred_nack",
            request: coordinate(
                Some("web"),
                Message::BorrowPreferred {
                    resource: Resource::Cores,
                    overlay: name("shop"),
                    island: name("db"),
                    amount: 2,
                },
            ),
            reply: coordinated(CoordReply::nack(NackReason::NoIdleCapacity {
                island: Some(name("db")),
            })),
        },
        Exchange {
            name: "release_ack",
            request: coordinate(
                Some("web"),
                Message::Release {
                    resource: Resource::Cores,
                    overlay: name("shop"),
                    island: name("db"),
                },
            ),
            reply: coordinated(CoordReply::Ack {
                effects: vec![move_cores(
                    "web",
                    "db",
                    "3",
                    Why::Release {
                        overlay: name("shop"),
                    },
                )],
            }),
        },
        Exchange {
            name: "register_ack",
            request: coordinate(
                None,
                Message::Register {
                    overlay: OverlaySpec {
                        name: name("batch"),
                        priority: 1,
                        units: vec![(name("db"), name("etl"))],
                        property: Property::ThroughputFloor { per_s: 100.0 },
                    },
                },
            ),
            reply: coordinated(CoordReply::Ack { effects: vec![] }),
        },
        Exchange {
            name: "deregister_ack",
            request: coordinate(
                None,
                Message::Deregister {
                    overlay: name("batch"),
                },
            ),
            reply: coordinated(CoordReply::Ack { effects: vec![] }),
        },
        Exchange {
            name: "null_ack",
            request: coordinate(Some("web"), Message::Null),
            reply: coordinated(CoordReply::Ack { effects: vec![] }),
        },
        Exchange {
            name: "report_holds",
            request: Request::Report {
                overlay: "shop".into(),
                value: 1234.5,
            },
            reply: Ok(Reply::Reported {
                overlay: "shop".into(),
                holds: true,
                action: None,
            }),
        },
        Exchange {
            name: "report_not_holding",
            request: Request::Report {
                overlay: "shop".into(),
                value: 7500.0,
            },
            reply: Ok(Reply::Reported {
                overlay: "shop".into(),
                holds: false,
                action: Some(not_holding_action),
            }),
        },
        Exchange {
            name: "report_not_found",
            request: Request::Report {
                overlay: "nosuch".into(),
                value: 1.0,
            },
            reply: Err((ErrorCode::NotFound, "no overlay nosuch")),
        },
    ]
}

/// The sample recipe, `clients/recipes/awm_parallel.toml`: working modes
/// `t1`, `t2`, `t4`, `t8` of 1, 2, 4 and 8 threads.
pub(crate) const SAMPLE_RECIPE: &str = include_str!("../../../clients/recipes/awm_parallel.toml");

fn sample_recipe() -> Recipe {
    atoll_client::apps::parse_recipe(SAMPLE_RECIPE).expect("the sample recipe")
}

/// App 7 running in working mode `mode` of the sample recipe on island b.
pub(crate) fn app_running(generation: u64, mode: u8) -> AppAssignment {
    let m = sample_recipe().mode(mode).expect("a mode").clone();
    AppAssignment {
        app: 7,
        generation,
        state: AppRunState::Running {
            mode,
            mode_name: m.name,
            island: "b".into(),
            cpu_quota: m.needs.cpu_quota,
            cpus: CpuSet::parse("0-7").expect("a CPU list"),
            threads: m.needs.threads,
            memory_bytes: 0,
        },
    }
}

/// The reason of the waiting assignment.
pub(crate) const WAITING_REASON: &str = "priority level 0 needs the room";

fn register(recipe: RecipeRef, pid: Option<u32>) -> Request {
    Request::AppRegister { recipe, pid }
}

fn registered(assignment: AppAssignment) -> Result<Reply, (ErrorCode, &'static str)> {
    Ok(Reply::AppRegistered {
        app: assignment.app,
        assignment,
    })
}

fn app_poll(name: &'static str, after: Option<u64>, a: AppAssignment) -> Exchange {
    Exchange {
        name,
        request: Request::AppPoll { app: 7, after },
        reply: Ok(Reply::AppAssignment(a)),
    }
}

fn app_report(name: &'static str, cycles: u64, goal_cps: Option<f64>, gap: f64) -> Exchange {
    Exchange {
        name,
        request: Request::AppReport {
            app: 7,
            cycles,
            goal_cps,
        },
        reply: Ok(Reply::AppReported {
            app: 7,
            goal_gap: gap,
        }),
    }
}

fn app_status() -> AppStatus {
    AppStatus {
        app: 7,
        name: "awm_parallel".into(),
        priority: 2,
        pid: 4242,
        unit: Some("b/awm_parallel-7".into()),
        assignment: app_running(2, 2),
        goal_cps: Some(30.0),
        cycles_per_s: Some(24.0),
        goal_gap: 0.25,
        reconfigurations: 1,
        power: None,
    }
}

/// The application exchanges. `app_poll_up`, `app_poll_waiting`,
/// `app_poll_resumed` and `app_poll_same4` follow one another (generations
/// 2, 3, 4, 4): the daemon plans the application up, has it wait, resumes
/// it in its smallest mode.
fn app_exchanges() -> Vec<Exchange> {
    let named = || RecipeRef::Named("awm_parallel".into());
    vec![
        Exchange {
            name: "app_register_named",
            request: register(named(), None),
            reply: registered(app_running(1, 1)),
        },
        Exchange {
            name: "app_register_pid",
            request: register(named(), Some(4242)),
            reply: registered(app_running(1, 1)),
        },
        Exchange {
            name: "app_register_inline",
            request: register(RecipeRef::Inline(sample_recipe()), None),
            reply: registered(app_running(1, 1)),
        },
        Exchange {
            name: "app_register_unknown",
            request: register(RecipeRef::Named("nosuch".into()), None),
            reply: Err((ErrorCode::NotFound, "no recipe named nosuch")),
        },
        app_poll("app_poll_first", None, app_running(1, 1)),
        app_poll("app_poll_same", Some(1), app_running(1, 1)),
        app_poll("app_poll_up", Some(1), app_running(2, 2)),
        app_poll(
            "app_poll_waiting",
            Some(2),
            AppAssignment {
                app: 7,
                generation: 3,
                state: AppRunState::Waiting {
                    reason: WAITING_REASON.into(),
                },
            },
        ),
        app_poll("app_poll_resumed", Some(3), app_running(4, 0)),
        app_poll("app_poll_same4", Some(4), app_running(4, 0)),
        Exchange {
            name: "app_poll_not_found",
            request: Request::AppPoll {
                app: 9,
                after: None,
            },
            reply: Err((ErrorCode::NotFound, "no application 9")),
        },
        app_report("app_report_2", 2, Some(30.0), 0.25),
        app_report("app_report_3", 3, Some(30.0), -0.1),
        app_report("app_report_no_goal", 10, None, 0.0),
        Exchange {
            name: "app_done",
            request: Request::AppDone { app: 7 },
            reply: Ok(Reply::AppDone { app: 7 }),
        },
        Exchange {
            name: "apps",
            request: Request::Apps {},
            reply: Ok(Reply::Apps {
                apps: vec![app_status()],
            }),
        },
    ]
}

/// The exchange called `name`.
pub(crate) fn exchange(name: &str) -> Exchange {
    exchanges()
        .into_iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no exchange {name}"))
}

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../clients/fixtures/wire.json")
}

/// The fixture file's text.
fn render() -> String {
    let mut map = serde_json::Map::new();
    for e in exchanges() {
        let entry = serde_json::json!({
            "request": e.request_line(0).trim_end(),
            "reply": e.reply_line(0).trim_end(),
        });
        assert!(
            map.insert(e.name.to_string(), entry).is_none(),
            "{}",
            e.name
        );
    }
    let doc = serde_json::json!({
        "comment": "Generated from the atoll-proto types by crates/atoll-client-c/src/wire.rs; \
                    do not edit, regenerate with ATOLL_BLESS=1 cargo test -p atoll-client-c. \
                    Id 0 stands for the id of the request actually sent.",
        "exchanges": map,
    });
    let mut s = serde_json::to_string_pretty(&doc).expect("JSON");
    s.push('\n');
    s
}

#[test]
fn fixture_file_is_up_to_date() {
    let want = render();
    let path = fixture_path();
    if std::env::var_os("ATOLL_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, &want).expect("write the fixtures");
    }
    let have = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (regenerate with ATOLL_BLESS=1)", path.display()));
    assert!(
        have == want,
        "{} is stale: regenerate with ATOLL_BLESS=1 cargo test -p atoll-client-c",
        path.display()
    );
}

#[test]
fn every_canned_request_decodes_as_the_daemon_decodes_it() {
    for e in exchanges() {
        let line = e.request_line(7);
        let back =
            atoll_proto::decode_request(&line).unwrap_or_else(|err| panic!("{}: {err}", e.name));
        assert_eq!(back.request, e.request, "{}", e.name);
        let reply = atoll_proto::decode_response(&e.reply_line(7)).expect("a reply");
        assert_eq!(reply.id, 7);
    }
}
