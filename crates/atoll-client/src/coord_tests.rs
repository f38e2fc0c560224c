//! Coordination calls against the fake daemon.

use atoll_core::coord::{Change, Why};
use atoll_core::Name;

use super::*;
use crate::coord::*;

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

/// Acks tunes, triggers, releases, registrations and deregistrations with
/// one effect named after the message; nacks borrows (no idle capacity on
/// the island asked, or anywhere).
fn answer(message: &Message) -> CoordReply {
    let effect = |overlay: &Name| {
        Effect::new(
            Change::SetWeight {
                island: n("web"),
                unit: n("api"),
                weight: 125,
            },
            Why::Trigger {
                overlay: overlay.clone(),
            },
        )
    };
    match message {
        Message::BorrowPreferred { island, .. } => CoordReply::nack(NackReason::NoIdleCapacity {
            island: Some(island.clone()),
        }),
        Message::BorrowAny { .. } => CoordReply::nack(NackReason::NoIdleCapacity { island: None }),
        Message::Null => CoordReply::Ack { effects: vec![] },
        other => CoordReply::Ack {
            effects: vec![effect(other.overlay().unwrap())],
        },
    }
}

fn coordinating_fake() -> Fake {
    fake(|req| {
        let reply = match &req.request {
            Request::Coordinate { message, .. } => {
                let reply = answer(message);
                // The daemon's words: here the reply's own, prefixed so the
                // test sees that the client keeps them.
                let text = format!("daemon: {reply}");
                Reply::Coordinated { reply, text }
            }
            Request::Overlays {} => Reply::Overlays {
                overlays: vec![shop()],
            },
            Request::Report { overlay, value } => Reply::Reported {
                overlay: overlay.clone(),
                holds: *value <= 5000.0,
                action: (*value > 5000.0).then(|| format!("tune up after {value}")),
            },
            _ => return vec![err(req.id, ErrorCode::BadRequest, "unexpected")],
        };
        vec![ok(req.id, reply)]
    })
}

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
        value: Some(4200.0),
        holds: Some(true),
        loans: vec![LoanStatus {
            cpu: 3,
            owner: "db".into(),
            lender: "db".into(),
            borrower: "web".into(),
        }],
        nacks: vec![(Resource::Cores, 2)],
        acked: 7,
        nacked: 2,
    }
}

fn spec() -> OverlaySpec {
    OverlaySpec {
        name: n("cap"),
        priority: 1,
        units: vec![],
        property: Property::PlatformCpuCap { cpus: 1.5 },
    }
}

#[test]
fn every_convenience_call_sends_its_message_and_nacks_are_answers() {
    let f = coordinating_fake();
    let mut c = Client::connect(&f.path).unwrap();

    let t = c
        .tune("shop", "api", Resource::Memory, Direction::Down)
        .unwrap();
    assert!(t.is_ack());
    assert_eq!(t.effects().len(), 1);
    assert_eq!(t.reason(), None);
    assert!(t
        .text
        .starts_with("daemon: ack: set weight of web/api to 125"));
    assert_eq!(t.to_string(), t.text);

    assert!(c.trigger("shop", "api").unwrap().is_ack());
    assert!(c.trigger_overlay("shop").unwrap().is_ack());

    let b = c.borrow("shop", 2, Some("db"), Some("web")).unwrap();
    assert!(!b.is_ack());
    assert!(b.effects().is_empty());
    assert_eq!(
        b.reason(),
        Some(&NackReason::NoIdleCapacity {
            island: Some(n("db"))
        })
    );
    let b = c.borrow("shop", 1, None, None).unwrap();
    assert_eq!(
        b.reason(),
        Some(&NackReason::NoIdleCapacity { island: None })
    );
    assert_eq!(b.text, "daemon: nack: no idle capacity anywhere");

    assert!(c.release("shop", "db", Some("web")).unwrap().is_ack());
    assert!(c.register(spec()).unwrap().is_ack());
    assert!(c.deregister("cap").unwrap().is_ack());
    assert!(c.coordinate(Some("web"), Message::Null).unwrap().is_ack());
    drop(c);

    let seen: Vec<Request> = f
        .thread
        .join()
        .unwrap()
        .into_iter()
        .map(|r| r.request)
        .collect();
    let coordinate = |from: Option<&str>, message| Request::Coordinate {
        from: from.map(String::from),
        message,
    };
    assert_eq!(
        seen,
        [
            coordinate(
                None,
                Message::Tune {
                    resource: Resource::Memory,
                    dir: Direction::Down,
                    overlay: n("shop"),
                    unit: n("api"),
                }
            ),
            coordinate(
                None,
                Message::Trigger {
                    resource: Resource::CpuTime,
                    overlay: n("shop"),
                    unit: n("api"),
                }
            ),
            coordinate(
                None,
                Message::TriggerOverlay {
                    resource: Resource::CpuTime,
                    overlay: n("shop"),
                }
            ),
            coordinate(
                Some("web"),
                Message::BorrowPreferred {
                    resource: Resource::Cores,
                    overlay: n("shop"),
                    island: n("db"),
                    amount: 2,
                }
            ),
            coordinate(
                None,
                Message::BorrowAny {
                    resource: Resource::Cores,
                    overlay: n("shop"),
                    amount: 1,
                }
            ),
            coordinate(
                Some("web"),
                Message::Release {
                    resource: Resource::Cores,
                    overlay: n("shop"),
                    island: n("db"),
                }
            ),
            coordinate(None, Message::Register { overlay: spec() }),
            coordinate(None, Message::Deregister { overlay: n("cap") }),
            coordinate(Some("web"), Message::Null),
        ]
    );
}

#[test]
fn overlays_and_reports_decode() {
    let f = coordinating_fake();
    let mut c = Client::connect(&f.path).unwrap();
    assert_eq!(c.overlays().unwrap(), [shop()]);
    assert_eq!(
        c.report("shop", 4200.0).unwrap(),
        Reported {
            overlay: "shop".into(),
            holds: true,
            action: None
        }
    );
    let r = c.report("shop", 7300.5).unwrap();
    assert!(!r.holds);
    assert_eq!(r.action.as_deref(), Some("tune up after 7300.5"));
    drop(c);
    let seen = f.thread.join().unwrap();
    assert_eq!(
        seen[2].request,
        Request::Report {
            overlay: "shop".into(),
            value: 7300.5
        }
    );
}

#[test]
fn invalid_arguments_are_refused_before_sending() {
    let f = coordinating_fake();
    let mut c = Client::connect(&f.path).unwrap();
    let cases: Vec<(ClientError, &str)> = vec![
        (
            c.tune("a b", "api", Resource::CpuTime, Direction::Up)
                .unwrap_err(),
            "invalid overlay: name \"a b\"",
        ),
        (
            c.trigger("shop", "").unwrap_err(),
            "invalid unit: name \"\"",
        ),
        (
            c.borrow("shop", 1, Some("cpu.max"), None).unwrap_err(),
            "invalid lender island",
        ),
        (
            c.borrow("shop", 1, None, Some("-x")).unwrap_err(),
            "invalid borrowing island",
        ),
        (
            c.release("shop", "db", Some("a/b")).unwrap_err(),
            "invalid borrowing island",
        ),
        (c.deregister("é").unwrap_err(), "invalid overlay"),
        (
            c.report("shop", f64::NAN).unwrap_err(),
            "invalid value: NaN is not a finite number",
        ),
    ];
    refused_before_sending(&cases, c, |c| drop(c.overlays().unwrap()), f);
}

#[test]
fn a_reply_of_the_wrong_kind_is_a_protocol_error_and_empty_text_falls_back() {
    let f = fake(|req| {
        let reply = match req.id {
            1 => Reply::Stopping,
            2 => Reply::Overlays { overlays: vec![] },
            _ => Reply::Coordinated {
                reply: CoordReply::nack(NackReason::ZeroAmount),
                text: String::new(),
            },
        };
        vec![ok(req.id, reply)]
    });
    let mut c = Client::connect(&f.path).unwrap();
    let e = c.overlays().unwrap_err();
    assert!(
        e.to_string()
            .contains("expected reply kind overlays, got stopping"),
        "{e}"
    );
    let e = c.report("shop", 1.0).unwrap_err();
    assert!(
        e.to_string()
            .contains("expected reply kind reported, got overlays"),
        "{e}"
    );
    let z = c.borrow("shop", 0, None, None).unwrap();
    assert_eq!(
        z.to_string(),
        "nack: a borrow must ask for at least one CPU"
    );
    drop(c);
    assert_eq!(f.thread.join().unwrap().len(), 3);
}
