//! The coordination examples of `docs/api.md`, built from the real types.
//!
//! `examples()` serializes real requests and replies; the doc must contain
//! each of them (compared as JSON values, so the doc may pretty-print). To
//! refresh the doc after a type changed:
//! `cargo test -p atoll-client --test doc -- --ignored --nocapture print_coordination_examples`.

use std::time::Duration;

use atoll_core::coord::{
    BoostKind, Change, Direction, Effect, Limit, Message, NackReason, Op, Resource, Why,
};
use atoll_core::Name;
use atoll_proto::coord::{
    CoordReply, LoanStatus, OverlayOrigin, OverlaySpec, OverlayStatus, Property,
};
use atoll_proto::{Reply, Request, RequestEnvelope, ResponseEnvelope, PROTOCOL_VERSION};

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

/// One of each message; a new `Message` variant fails to compile here.
pub fn every_message() -> Vec<Message> {
    let all = vec![
        Message::Null,
        Message::Tune {
            resource: Resource::CpuTime,
            dir: Direction::Up,
            overlay: n("shop"),
            unit: n("api"),
        },
        Message::Trigger {
            resource: Resource::CpuTime,
            overlay: n("shop"),
            unit: n("api"),
        },
        Message::BorrowPreferred {
            resource: Resource::Cores,
            overlay: n("shop"),
            island: n("batch"),
            amount: 1,
        },
        Message::BorrowAny {
            resource: Resource::Cores,
            overlay: n("shop"),
            amount: 2,
        },
        Message::Release {
            resource: Resource::Cores,
            overlay: n("shop"),
            island: n("batch"),
        },
        Message::Register {
            overlay: OverlaySpec {
                name: n("shop"),
                priority: 5,
                units: vec![(n("web"), n("api")), (n("db"), n("pg"))],
                property: Property::LatencyPercentile {
                    percentile: 99.0,
                    bound_us: 5000,
                },
            },
        },
        Message::Deregister { overlay: n("shop") },
        Message::Revoke {
            resource: Resource::Cores,
            overlay: n("shop"),
            island: n("web"),
        },
        Message::TriggerOverlay {
            resource: Resource::CpuTime,
            overlay: n("shop"),
        },
    ];
    for m in &all {
        match m {
            Message::Null
            | Message::Tune { .. }
            | Message::Trigger { .. }
            | Message::BorrowPreferred { .. }
            | Message::BorrowAny { .. }
            | Message::Release { .. }
            | Message::Register { .. }
            | Message::Deregister { .. }
            | Message::Revoke { .. }
            | Message::TriggerOverlay { .. } => {}
        }
    }
    all
}

/// One of each nack reason; a new `NackReason` variant fails to compile
/// here.
pub fn every_nack_reason() -> Vec<NackReason> {
    let t = Duration::from_millis(1530);
    let all = vec![
        NackReason::AtCapacity {
            island: n("web"),
            unit: n("api"),
            resource: Resource::CpuTime,
            limit: Limit::MaxWeight { weight: 10_000 },
        },
        NackReason::AtMinimum {
            unit: n("api"),
            resource: Resource::Memory,
        },
        NackReason::NoIdleCapacity { island: None },
        NackReason::LastCore { island: n("batch") },
        NackReason::Damped {
            island: n("batch"),
            cpu: 3,
            until: t,
        },
        NackReason::BackingOff { until: t },
        NackReason::CoolingDown {
            unit: n("api"),
            until: t,
        },
        NackReason::AlreadyBoosted {
            unit: n("api"),
            until: t,
        },
        NackReason::BoostSlotsBusy {
            island: n("web"),
            until: t,
        },
        NackReason::NotRegistered { overlay: n("shop") },
        NackReason::AlreadyRegistered { overlay: n("shop") },
        NackReason::UnknownUnit {
            overlay: n("shop"),
            unit: n("pg"),
        },
        NackReason::UnknownIsland { island: n("gpu") },
        NackReason::UnitTaken {
            unit: n("api"),
            overlay: n("search"),
        },
        NackReason::InvalidOverlay {
            overlay: n("shop"),
            field: "percentile".into(),
            value: 120.0,
        },
        NackReason::ZeroAmount,
        NackReason::LostArbitration {
            winner: n("search"),
        },
        NackReason::Unsupported {
            resource: Resource::Cores,
            op: Op::Tune,
        },
        NackReason::SelfBorrow { island: n("web") },
        NackReason::NothingToRelease {
            island: n("batch"),
            overlay: n("shop"),
        },
        NackReason::NotForIsland { island: n("web") },
        NackReason::NothingLent {
            island: n("web"),
            overlay: n("shop"),
        },
        NackReason::PlatformRefused {
            overlay: n("shop"),
            resource: Resource::Cores,
            nacks: 5,
        },
    ];
    for r in &all {
        match r {
            NackReason::AtCapacity { .. }
            | NackReason::AtMinimum { .. }
            | NackReason::NoIdleCapacity { .. }
            | NackReason::LastCore { .. }
            | NackReason::Damped { .. }
            | NackReason::BackingOff { .. }
            | NackReason::CoolingDown { .. }
            | NackReason::AlreadyBoosted { .. }
            | NackReason::BoostSlotsBusy { .. }
            | NackReason::NotRegistered { .. }
            | NackReason::AlreadyRegistered { .. }
            | NackReason::UnknownUnit { .. }
            | NackReason::UnknownIsland { .. }
            | NackReason::UnitTaken { .. }
            | NackReason::InvalidOverlay { .. }
            | NackReason::ZeroAmount
            | NackReason::LostArbitration { .. }
            | NackReason::Unsupported { .. }
            | NackReason::SelfBorrow { .. }
            | NackReason::NothingToRelease { .. }
            | NackReason::NotForIsland { .. }
            | NackReason::NothingLent { .. }
            | NackReason::PlatformRefused { .. } => {}
        }
    }
    all
}

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

fn coordinated(id: u64, reply: CoordReply) -> String {
    let text = reply.to_string();
    self::reply(id, Reply::Coordinated { reply, text })
}

/// The overlay of the `overlays` example.
fn shop() -> OverlayStatus {
    OverlayStatus {
        name: "shop".into(),
        priority: 5,
        units: vec!["web/api".into(), "db/pg".into()],
        property: Property::LatencyPercentile {
            percentile: 99.0,
            bound_us: 5000,
        },
        origin: OverlayOrigin::Config,
        value: Some(7300.0),
        holds: Some(false),
        loans: vec![LoanStatus {
            cpu: 3,
            owner: "batch".into(),
            lender: "batch".into(),
            borrower: "web".into(),
        }],
        nacks: vec![(Resource::Cores, 0), (Resource::CpuTime, 2)],
        acked: 14,
        nacked: 3,
    }
}

/// The examples, by doc section, each one line.
pub fn examples() -> Vec<(&'static str, Vec<String>)> {
    let mut coordinate = Vec::new();
    for (i, message) in every_message().into_iter().enumerate() {
        let from = match message {
            Message::BorrowPreferred { .. } | Message::Release { .. } => Some("web".to_string()),
            Message::Revoke { .. } => Some("batch".to_string()),
            _ => None,
        };
        coordinate.push(request(
            11 + i as u64,
            Request::Coordinate { from, message },
        ));
    }
    let tune_ack = CoordReply::Ack {
        effects: vec![Effect::new(
            Change::SetWeight {
                island: n("web"),
                unit: n("api"),
                weight: 125,
            },
            Why::Tune {
                overlay: n("shop"),
                resource: Resource::CpuTime,
                dir: Direction::Up,
            },
        )],
    };
    let trigger_ack = CoordReply::Ack {
        effects: vec![Effect::new(
            Change::Boost {
                island: n("web"),
                unit: n("api"),
                kind: BoostKind::Weight { weight: 10_000 },
                until: Duration::from_millis(61_530),
            },
            Why::Trigger { overlay: n("shop") },
        )],
    };
    let borrow_ack = CoordReply::Ack {
        effects: vec![Effect::new(
            Change::MoveCores {
                from_island: n("batch"),
                to_island: n("web"),
                cpus: "3".parse().unwrap(),
            },
            Why::Borrow { overlay: n("shop") },
        )],
    };
    let acks = vec![
        coordinated(11, CoordReply::Ack { effects: vec![] }),
        coordinated(12, tune_ack),
        coordinated(13, trigger_ack),
        coordinated(14, borrow_ack),
    ];
    let nacks = vec![
        coordinated(
            15,
            CoordReply::nack(NackReason::NoIdleCapacity { island: None }),
        ),
        coordinated(
            12,
            CoordReply::nack(NackReason::AtCapacity {
                island: n("web"),
                unit: n("api"),
                resource: Resource::CpuTime,
                limit: Limit::MaxWeight { weight: 10_000 },
            }),
        ),
        coordinated(
            13,
            CoordReply::nack(NackReason::CoolingDown {
                unit: n("api"),
                until: Duration::from_millis(61_650),
            }),
        ),
    ];
    vec![
        (
            "overlays",
            vec![
                request(10, Request::Overlays {}),
                reply(
                    10,
                    Reply::Overlays {
                        overlays: vec![shop()],
                    },
                ),
            ],
        ),
        ("coordinate", coordinate),
        ("ack", acks),
        ("nack", nacks),
        (
            "report",
            vec![
                request(
                    20,
                    Request::Report {
                        overlay: "shop".into(),
                        value: 7300.0,
                    },
                ),
                reply(
                    20,
                    Reply::Reported {
                        overlay: "shop".into(),
                        holds: false,
                        action: Some(
                            "tune CPU time up for unit api of overlay shop: ack: set weight of \
                             web/api to 125: overlay shop asked to tune CPU time up"
                                .into(),
                        ),
                    },
                ),
            ],
        ),
    ]
}

/// Whether a documented request or reply is about coordination.
pub fn is_coordination(value: &serde_json::Value) -> bool {
    let op = value.get("op").and_then(|v| v.as_str());
    let kind = value
        .get("ok")
        .and_then(|ok| ok.get("kind"))
        .and_then(|v| v.as_str());
    matches!(op, Some("overlays" | "coordinate" | "report"))
        || matches!(kind, Some("overlays" | "coordinated" | "reported"))
}
