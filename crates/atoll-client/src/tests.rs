//! The client against a fake daemon on a temp-dir socket.

use std::os::unix::net::UnixListener;
use std::thread::{self, JoinHandle};

use atoll_core::decision::{Action, Reason};
use atoll_core::plan::GroupPath;
use atoll_proto::{decode_request, ApiError};

use super::*;

#[path = "apps_tests.rs"]
mod apps;
#[path = "coord_tests.rs"]
mod coord;
#[path = "runtime_tests.rs"]
mod runtime;

/// A reply that makes the fake close the connection.
const HANG_UP: &str = "hang up";

/// A fake daemon serving one connection: for each request line it records
/// the request and writes whatever lines `handler` returns.
struct Fake {
    _dir: tempfile::TempDir,
    path: PathBuf,
    thread: JoinHandle<Vec<RequestEnvelope>>,
}

/// Checks that every error of `cases` is an invalid argument whose text
/// starts as given (none from the daemon), then that none of those calls
/// sent anything: `next` (a valid request on `c`) still gets id 1, and it
/// is all `f` saw.
fn refused_before_sending(
    cases: &[(ClientError, &str)],
    c: Client,
    next: impl FnOnce(&mut Client),
    f: Fake,
) {
    for (e, want) in cases {
        assert!(e.is_invalid_argument(), "{e}");
        assert_eq!(e.api_code(), None);
        assert!(e.to_string().starts_with(want), "{e} vs {want}");
    }
    let mut c = c;
    next(&mut c);
    drop(c);
    let seen = f.thread.join().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].id, 1);
}

fn fake(mut handler: impl FnMut(&RequestEnvelope) -> Vec<String> + Send + 'static) -> Fake {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("atoll.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let thread = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut out = stream.try_clone().unwrap();
        let mut seen = Vec::new();
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let req = decode_request(&line).unwrap();
            let replies = handler(&req);
            seen.push(req);
            for reply in replies {
                if reply == HANG_UP {
                    return seen;
                }
                if out.write_all(reply.as_bytes()).is_err() {
                    break;
                }
            }
        }
        seen
    });
    Fake {
        _dir: dir,
        path,
        thread,
    }
}

fn ok(id: u64, reply: Reply) -> String {
    atoll_proto::encode(&ResponseEnvelope::ok(id, reply))
}

fn err(id: u64, code: ErrorCode, message: &str) -> String {
    atoll_proto::encode(&ResponseEnvelope::err(id, code, message))
}

#[test]
fn a_missing_socket_means_not_running_and_says_how_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.sock");
    let e = Client::connect(&path).unwrap_err();
    assert!(e.is_not_running());
    assert!(!e.is_permission_denied());
    assert_eq!(e.api_code(), None);
    assert_eq!(
        e.to_string(),
        format!(
            "atoll daemon is not running (no socket at {}); start it with `atoll daemon`",
            path.display()
        )
    );
    assert_eq!(e.path(), path);
}

#[test]
fn a_stale_socket_means_not_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.sock");
    drop(UnixListener::bind(&path).unwrap());
    let e = Client::connect(&path).unwrap_err();
    assert!(e.is_not_running(), "{e}");
    assert!(e.to_string().contains("nothing listens on"), "{e}");
}

#[test]
fn typed_calls_send_sequential_ids_and_decode_replies() {
    let f = fake(|req| {
        let reply = match &req.request {
            Request::Adopt { unit, island, .. } => Reply::Adopted {
                unit: unit.clone(),
                island: island.clone().unwrap_or_else(|| "web".into()),
                created: island.is_none(),
            },
            Request::Why { .. } => Reply::Decisions {
                decisions: vec![Decision {
                    at: Duration::from_millis(5),
                    action: Action::RemoveGroup {
                        path: GroupPath::from_relative("web/a"),
                    },
                    why: Reason::Teardown,
                }],
            },
            Request::Stop { .. } => Reply::Stopping,
            Request::Reload {} => Reply::Reloaded {
                changes: vec!["unit b2 added".into()],
            },
            Request::Status {} => return vec![err(req.id, ErrorCode::Backend, "boom")],
            Request::Overlays {}
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
            | Request::ConfigDump {} => unreachable!("not sent by this test"),
        };
        vec![ok(req.id, reply)]
    });
    let mut c = Client::connect(&f.path).unwrap();
    assert_eq!(
        c.adopt("batch", 42, None).unwrap(),
        Adopted {
            unit: "batch".into(),
            island: "web".into(),
            created: true
        }
    );
    assert!(!c.adopt("b2", 43, Some("rt")).unwrap().created);
    let d = c.why(Some("web/a"), Some(3)).unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].why, Reason::Teardown);
    let e = c.status().unwrap_err();
    assert_eq!(e.api_code(), Some(ErrorCode::Backend));
    assert_eq!(e.to_string(), "the atoll daemon could not do it: boom");
    assert_eq!(c.reload().unwrap(), ["unit b2 added"]);
    c.stop().unwrap();
    drop(c);
    let seen = f.thread.join().unwrap();
    let ids: Vec<u64> = seen.iter().map(|r| r.id).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    assert!(seen.iter().all(|r| r.v == PROTOCOL_VERSION));
    assert_eq!(
        seen[2].request,
        Request::Why {
            subject: Some("web/a".into()),
            limit: Some(3)
        }
    );
    assert_eq!(
        seen[1].request,
        Request::Adopt {
            unit: "b2".into(),
            pid: 43,
            island: Some("rt".into()),
            network: None,
        }
    );
}

#[test]
fn error_replies_have_predicates_and_readable_messages() {
    let f = fake(|req| {
        vec![match req.id {
            1 => err(
                1,
                ErrorCode::PermissionDenied,
                "uid 1000 does not own pid 1",
            ),
            2 => err(2, ErrorCode::NotFound, "no island named \"gpu\""),
            _ => err(0, ErrorCode::BadRequest, "not JSON"),
        }]
    });
    let mut c = Client::connect(&f.path).unwrap();
    let e = c.adopt("u", 1, None).unwrap_err();
    assert!(e.is_permission_denied());
    assert!(!e.is_not_found() && !e.is_not_running());
    assert_eq!(
        e.to_string(),
        "permission denied: uid 1000 does not own pid 1"
    );
    assert_eq!(e.api_message(), Some("uid 1000 does not own pid 1"));
    let e = c.adopt("u", 2, Some("gpu")).unwrap_err();
    assert!(e.is_not_found());
    assert!(!e.is_permission_denied());
    // An id-0 error is the daemon's answer to whatever was sent.
    let e = c.status().unwrap_err();
    assert_eq!(e.api_code(), Some(ErrorCode::BadRequest));
    let source = std::error::Error::source(&e).unwrap();
    assert!(source.downcast_ref::<ApiError>().is_some());
}

#[test]
fn a_late_reply_to_a_timed_out_request_is_skipped() {
    let mut pending = None;
    let f = fake(move |req| match req.id {
        1 => {
            pending = Some(ok(1, Reply::Stopping));
            vec![]
        }
        _ => vec![pending.take().unwrap(), ok(req.id, Reply::Stopping)],
    });
    let mut c = Client::connect(&f.path).unwrap();
    c.set_timeout(Some(Duration::from_millis(50))).unwrap();
    let e = c.stop().unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(
        e.to_string().contains("did not answer within 0.05 s"),
        "{e}"
    );
    c.set_timeout(None).unwrap();
    c.stop().unwrap();
    drop(c);
    assert_eq!(f.thread.join().unwrap().len(), 2);
}

#[test]
fn protocol_violations_and_closed_connections_are_errors() {
    let f = fake(|req| match req.id {
        1 => vec![ok(1, Reply::Stopping)],
        2 => vec![ok(9, Reply::Stopping)],
        3 => vec!["{\"v\":1,\"id\":3,\"ok\":{\"kind\":\"teleported\"}}\n".into()],
        _ => vec!["{\"v\":1,\"id\":4,\"ok\":".into(), HANG_UP.into()],
    });
    let mut c = Client::connect(&f.path).unwrap();
    let e = c.status().unwrap_err();
    assert!(
        e.to_string()
            .contains("expected reply kind status, got stopping"),
        "{e}"
    );
    let e = c.stop().unwrap_err();
    assert!(e.to_string().contains("reply to request 9"), "{e}");
    let e = c.stop().unwrap_err();
    assert!(e.to_string().contains("undecodable reply"), "{e}");
    // Half a reply, then the daemon hangs up.
    let e = c.stop().unwrap_err();
    assert!(e.to_string().contains("closed the connection"), "{e}");
    assert!(!e.is_not_running());
    assert_eq!(f.thread.join().unwrap().len(), 4);
    // Writing to a closed connection says the same.
    let e = c.stop().unwrap_err();
    assert!(e.to_string().contains("closed the connection"), "{e}");
}
