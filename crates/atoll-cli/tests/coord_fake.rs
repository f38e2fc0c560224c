//! The coordination commands of the built `atoll` binary against a fake
//! daemon on a temp-dir socket: what they send, what they print, and their
//! exit status (0 ack, 3 nack, 1 error, 2 bad arguments). The real daemon is
//! exercised by the end-to-end tests.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::thread;

use atoll_core::coord::{Change, Effect, Why};
use atoll_core::Name;
use atoll_proto::coord::{
    CoordReply, LoanStatus, Message, NackReason, OverlayOrigin, OverlayStatus, Property, Resource,
};
use atoll_proto::{ErrorCode, Reply, Request, ResponseEnvelope};

const BIN: &str = env!("CARGO_BIN_EXE_atoll");

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

/// A fake daemon: answers every request of every connection with
/// `answer`, and records the requests.
struct Fake {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    seen: Arc<Mutex<Vec<Request>>>,
}

fn fake(answer: fn(&Request) -> Result<Reply, (ErrorCode, &'static str)>) -> Fake {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("atoll.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut out = stream.try_clone().unwrap();
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                let req = atoll_proto::decode_request(&line).unwrap();
                let reply = match answer(&req.request) {
                    Ok(r) => ResponseEnvelope::ok(req.id, r),
                    Err((code, m)) => ResponseEnvelope::err(req.id, code, m),
                };
                record.lock().unwrap().push(req.request);
                if out
                    .write_all(atoll_proto::encode(&reply).as_bytes())
                    .is_err()
                {
                    break;
                }
            }
        }
    });
    Fake {
        _dir: dir,
        socket,
        seen,
    }
}

impl Fake {
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .arg("--socket")
            .arg(&self.socket)
            .output()
            .unwrap()
    }

    fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Acks tunes and releases; nacks borrows from anywhere and triggers.
fn coordinator(req: &Request) -> Result<Reply, (ErrorCode, &'static str)> {
    let Request::Coordinate { message, .. } = req else {
        return Err((ErrorCode::BadRequest, "not a coordination request"));
    };
    let reply = match message {
        Message::Tune { overlay, unit, .. } => CoordReply::Ack {
            effects: vec![Effect::new(
                Change::SetWeight {
                    island: n("web"),
                    unit: unit.clone(),
                    weight: 125,
                },
                Why::Trigger {
                    overlay: overlay.clone(),
                },
            )],
        },
        Message::Release { .. } => CoordReply::Ack { effects: vec![] },
        Message::BorrowPreferred { .. } => return Err((ErrorCode::PermissionDenied, "uid 1000")),
        Message::Trigger { unit, .. } => CoordReply::nack(NackReason::AlreadyBoosted {
            unit: unit.clone(),
            until: std::time::Duration::from_millis(2500),
        }),
        _ => CoordReply::nack(NackReason::NoIdleCapacity { island: None }),
    };
    let text = reply.to_string();
    Ok(Reply::Coordinated { reply, text })
}

#[test]
fn an_ack_exits_zero_a_nack_three_and_an_error_one() {
    let f = fake(coordinator);

    let o = f.run(&["tune", "shop", "api", "up"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "ack: set weight of web/api to 125: overlay shop triggered it\n"
    );

    let o = f.run(&["borrow", "shop", "--amount", "2", "--into", "web"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(stdout(&o), "nack: no idle capacity anywhere\n");
    assert_eq!(stderr(&o), "");

    let o = f.run(&["trigger", "shop", "api", "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(j["reply"]["reason"]["nack"], "already_boosted");
    assert_eq!(j["text"], "nack: unit api is boosted until t=2.500s");

    let o = f.run(&["release", "shop", "--lender", "batch", "--from", "web"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "ack\n");

    let o = f.run(&["borrow", "shop", "--from", "batch"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).contains("permission denied: uid 1000"),
        "{}",
        stderr(&o)
    );

    // Bad arguments never reach the daemon.
    let o = f.run(&["borrow", "shop", "--amount", "0"]);
    assert_eq!(o.status.code(), Some(2));

    let coordinate = |from: Option<&str>, message| Request::Coordinate {
        from: from.map(String::from),
        message,
    };
    assert_eq!(
        f.seen(),
        [
            coordinate(
                None,
                Message::Tune {
                    resource: Resource::CpuTime,
                    dir: atoll_proto::coord::Direction::Up,
                    overlay: n("shop"),
                    unit: n("api"),
                }
            ),
            coordinate(
                Some("web"),
                Message::BorrowAny {
                    resource: Resource::Cores,
                    overlay: n("shop"),
                    amount: 2,
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
                Some("web"),
                Message::Release {
                    resource: Resource::Cores,
                    overlay: n("shop"),
                    island: n("batch"),
                }
            ),
            coordinate(
                None,
                Message::BorrowPreferred {
                    resource: Resource::Cores,
                    overlay: n("shop"),
                    island: n("batch"),
                    amount: 1,
                }
            ),
        ]
    );
}

fn overlays(req: &Request) -> Result<Reply, (ErrorCode, &'static str)> {
    match req {
        Request::Overlays {} => Ok(Reply::Overlays {
            overlays: vec![OverlayStatus {
                name: "shop".into(),
                priority: 5,
                units: vec!["web/api".into()],
                property: Property::ThroughputFloor { per_s: 900.0 },
                origin: OverlayOrigin::Api,
                value: Some(950.0),
                holds: Some(true),
                loans: vec![LoanStatus {
                    cpu: 1,
                    owner: "batch".into(),
                    lender: "batch".into(),
                    borrower: "web".into(),
                }],
                nacks: vec![(Resource::Cores, 1)],
                acked: 4,
                nacked: 1,
            }],
        }),
        Request::Report { overlay, value } if overlay == "shop" => Ok(Reply::Reported {
            overlay: overlay.clone(),
            holds: *value >= 900.0,
            action: (*value < 900.0).then(|| "tune CPU time up: ack".to_string()),
        }),
        Request::Report { .. } => Err((ErrorCode::NotFound, "no overlay")),
        _ => Err((ErrorCode::BadRequest, "unexpected")),
    }
}

#[test]
fn overlay_ls_show_and_report_print_what_the_daemon_says() {
    let f = fake(overlays);

    let o = f.run(&["overlay", "ls"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("NAME  PRIORITY  PROPERTY"), "{out}");
    let cells: Vec<&str> = lines[1].split("  ").filter(|c| !c.is_empty()).collect();
    assert_eq!(
        cells.iter().map(|c| c.trim()).collect::<Vec<_>>(),
        [
            "shop",
            "5",
            "at least 900 operations per second",
            "950",
            "yes",
            "1",
            "cores 1"
        ]
    );

    let o = f.run(&["overlay", "show", "shop", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let j: OverlayStatus = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(j.loans[0].owner, "batch");
    assert_eq!(j.value, Some(950.0));

    let o = f.run(&["overlay", "show", "shop"]);
    assert!(
        stdout(&o).contains("  loans     CPU 1 of island batch, now on web\n"),
        "{}",
        stdout(&o)
    );

    let o = f.run(&["overlay", "show", "cart"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no overlay cart (overlays: shop)"),
        "{}",
        stderr(&o)
    );

    let o = f.run(&["report", "shop", "850"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout(&o),
        "overlay shop: the property does not hold\naction: tune CPU time up: ack\n"
    );
    let o = f.run(&["report", "cart", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not found: no overlay"),
        "{}",
        stderr(&o)
    );

    let seen = f.seen();
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert_eq!(
        seen[4],
        Request::Report {
            overlay: "shop".into(),
            value: 850.0
        }
    );
}
