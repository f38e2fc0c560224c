//! The C functions, called directly, against a fake daemon thread on a
//! temp-dir socket that checks every request line byte for byte against the
//! one the `atoll-proto` types encode, and answers with canned replies.

use std::ffi::{CStr, CString};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::ptr;
use std::thread::{self, JoinHandle};

use atoll_proto::{encode, Reply, ResponseEnvelope};

use crate::wire::{exchange, Exchange};
use crate::*;

#[path = "apps_tests.rs"]
mod apps;

/// What the fake daemon does with one request line.
enum Step {
    /// Expect the exchange's request, send its reply.
    Exchange(&'static str),
    /// Accept any request, answer with this reply.
    Reply(Reply),
    /// Read the request, then close the connection.
    Close,
}

struct Fake {
    _dir: tempfile::TempDir,
    path: CString,
    thread: JoinHandle<Vec<String>>,
}

impl Fake {
    /// Listens on a new socket and serves one connection with `steps`.
    fn start(steps: Vec<Step>) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path: PathBuf = dir.path().join("atoll.sock");
        let listener = UnixListener::bind(&path).expect("bind");
        let thread = thread::spawn(move || serve(&listener, steps));
        Self {
            _dir: dir,
            path: CString::new(path.to_str().expect("UTF-8")).expect("no NUL"),
            thread,
        }
    }

    /// Waits for the connection to end; panics with every problem seen.
    fn finish(self) {
        let problems = self.thread.join().expect("the fake daemon panicked");
        assert!(problems.is_empty(), "fake daemon: {problems:#?}");
    }
}

fn serve(listener: &UnixListener, steps: Vec<Step>) -> Vec<String> {
    let mut problems = Vec::new();
    let (stream, _) = listener.accept().expect("accept");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    let mut last_id = 0;
    for step in steps {
        let mut line = String::new();
        if reader.read_line(&mut line).expect("read") == 0 {
            problems.push("the client hung up before sending every request".to_string());
            return problems;
        }
        let id = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v.get("id").and_then(serde_json::Value::as_u64))
            .unwrap_or(0);
        if id <= last_id {
            problems.push(format!("id {id} after id {last_id}: {line:?}"));
        }
        last_id = id;
        let reply = match step {
            Step::Exchange(name) => {
                let e: Exchange = exchange(name);
                let want = e.request_line(id);
                if line != want {
                    problems.push(format!("{name}: sent {line:?}, want {want:?}"));
                }
                e.reply_line(id)
            }
            Step::Reply(r) => encode(&ResponseEnvelope::ok(id, r)),
            Step::Close => return problems,
        };
        writer.write_all(reply.as_bytes()).expect("write");
    }
    let mut extra = String::new();
    while reader.read_line(&mut extra).expect("read") > 0 {
        problems.push(format!("unexpected request {extra:?}"));
        extra.clear();
    }
    problems
}

fn connect(fake: &Fake) -> *mut AtollClient {
    // SAFETY: a NUL-terminated path.
    let c = unsafe { atoll_connect(fake.path.as_ptr()) };
    assert!(!c.is_null(), "connect: {}", orphan_message());
    c
}

fn message(c: *const AtollClient) -> String {
    // SAFETY: a live handle (or NULL); the text is copied at once.
    unsafe { CStr::from_ptr(atoll_last_message(c)) }
        .to_str()
        .expect("UTF-8")
        .to_string()
}

fn orphan_message() -> String {
    message(ptr::null())
}

fn cs(s: &str) -> CString {
    CString::new(s).expect("no NUL")
}

/// The daemon's `text` of a coordination exchange.
fn reply_text(name: &str) -> String {
    match exchange(name).reply {
        Ok(Reply::Coordinated { text, .. }) => text,
        _ => panic!("{name} is not coordinated"),
    }
}

#[test]
fn tune_and_trigger_send_the_protocol_lines_and_map_ack_and_nack() {
    let fake = Fake::start(vec![
        Step::Exchange("tune_ack"),
        Step::Exchange("tune_nack"),
        Step::Exchange("trigger_ack"),
    ]);
    let c = connect(&fake);
    let (shop, api) = (cs("shop"), cs("api"));
    // SAFETY: a live handle and NUL-terminated strings, here and below.
    let rc = unsafe { atoll_tune(c, shop.as_ptr(), api.as_ptr(), ATOLL_CPU_TIME, ATOLL_UP) };
    assert_eq!(rc, ATOLL_ACK, "{}", message(c));
    assert_eq!(message(c), reply_text("tune_ack"));
    assert!(message(c).contains("set weight of web/api to 125"));
    // SAFETY: as above.
    let rc = unsafe { atoll_tune(c, shop.as_ptr(), api.as_ptr(), ATOLL_MEMORY, ATOLL_DOWN) };
    assert_eq!(rc, ATOLL_NACK, "{}", message(c));
    assert_eq!(
        message(c),
        "nack: unit api is already at its minimum memory"
    );
    // SAFETY: as above.
    let rc = unsafe { atoll_trigger(c, shop.as_ptr(), api.as_ptr()) };
    assert_eq!(rc, ATOLL_ACK, "{}", message(c));
    assert!(
        message(c).starts_with("ack: boost web/api"),
        "{}",
        message(c)
    );
    // SAFETY: closed once.
    unsafe { atoll_close(c) };
    fake.finish();
}

#[test]
fn borrow_and_release_choose_the_message_and_the_sender() {
    let fake = Fake::start(vec![
        Step::Exchange("borrow_any_ack"),
        Step::Exchange("borrow_preferred_nack"),
        Step::Exchange("release_ack"),
    ]);
    let c = connect(&fake);
    let (shop, db, web) = (cs("shop"), cs("db"), cs("web"));
    // SAFETY: a live handle, NUL-terminated strings or NULL, here and below.
    let rc = unsafe { atoll_borrow(c, shop.as_ptr(), 1, ptr::null(), ptr::null()) };
    assert_eq!(rc, ATOLL_ACK, "{}", message(c));
    assert!(message(c).contains("move CPUs 3 from island db to island web"));
    // SAFETY: as above.
    let rc = unsafe { atoll_borrow(c, shop.as_ptr(), 2, db.as_ptr(), web.as_ptr()) };
    assert_eq!(rc, ATOLL_NACK);
    assert_eq!(message(c), "nack: no idle capacity on island db");
    // SAFETY: as above.
    let rc = unsafe { atoll_release(c, shop.as_ptr(), db.as_ptr(), web.as_ptr()) };
    assert_eq!(rc, ATOLL_ACK, "{}", message(c));
    // SAFETY: closed once.
    unsafe { atoll_close(c) };
    fake.finish();
}

#[test]
fn any_message_goes_as_json() {
    let fake = Fake::start(vec![
        Step::Exchange("register_ack"),
        Step::Exchange("deregister_ack"),
        Step::Exchange("null_ack"),
        Step::Reply(Reply::Coordinated {
            reply: atoll_proto::coord::CoordReply::Ack { effects: vec![] },
            text: String::new(),
        }),
    ]);
    let c = connect(&fake);
    let register = cs(r#"{"msg":"register","overlay":{"name":"batch","priority":1,
        "units":[["db","etl"]],"property":{"kind":"throughput_floor","per_s":100.0}}}"#);
    let deregister = cs(r#"{"msg":"deregister","overlay":"batch"}"#);
    let (null, web) = (cs(r#"{"msg":"null"}"#), cs("web"));
    // SAFETY: a live handle, NUL-terminated strings or NULL, here and below.
    let rc = unsafe { atoll_coordinate_json(c, register.as_ptr(), ptr::null()) };
    assert_eq!(rc, ATOLL_ACK, "{}", message(c));
    // SAFETY: as above.
    let rc = unsafe { atoll_coordinate_json(c, deregister.as_ptr(), ptr::null()) };
    assert_eq!(rc, ATOLL_ACK, "{}", message(c));
    assert_eq!(message(c), "ack");
    // SAFETY: as above.
    let rc = unsafe { atoll_coordinate_json(c, null.as_ptr(), web.as_ptr()) };
    assert_eq!(rc, ATOLL_ACK, "{}", message(c));
    // Without a text from the daemon, the reply's own words.
    // SAFETY: as above.
    let rc = unsafe { atoll_coordinate_json(c, null.as_ptr(), ptr::null()) };
    assert_eq!(rc, ATOLL_ACK, "{}", message(c));
    assert_eq!(message(c), "ack");
    // SAFETY: closed once.
    unsafe { atoll_close(c) };
    fake.finish();
}

#[test]
fn report_maps_holds_not_holding_and_errors() {
    let fake = Fake::start(vec![
        Step::Exchange("report_holds"),
        Step::Exchange("report_not_holding"),
        Step::Exchange("report_not_found"),
    ]);
    let c = connect(&fake);
    let (shop, nosuch) = (cs("shop"), cs("nosuch"));
    // SAFETY: a live handle and NUL-terminated strings, here and below.
    let rc = unsafe { atoll_report(c, shop.as_ptr(), 1234.5) };
    assert_eq!(rc, ATOLL_ACK, "{}", message(c));
    assert_eq!(message(c), "the property of overlay shop holds");
    // SAFETY: as above.
    let rc = unsafe { atoll_report(c, shop.as_ptr(), 7500.0) };
    assert_eq!(rc, ATOLL_NOT_HOLDING, "{}", message(c));
    assert!(
        message(c).starts_with("the property of overlay shop does not hold; tune CPU time up"),
        "{}",
        message(c)
    );
    // SAFETY: as above.
    let rc = unsafe { atoll_report(c, nosuch.as_ptr(), 1.0) };
    assert_eq!(rc, ATOLL_ENOT_FOUND);
    assert!(message(c).contains("no overlay nosuch"), "{}", message(c));
    // SAFETY: closed once.
    unsafe { atoll_close(c) };
    fake.finish();
}

#[test]
fn overlays_come_back_as_a_json_array_to_free() {
    let fake = Fake::start(vec![Step::Exchange("overlays")]);
    let c = connect(&fake);
    let mut out: *mut c_char = ptr::null_mut();
    // SAFETY: a live handle and a place for the string.
    let rc = unsafe { atoll_overlays_json(c, &mut out) };
    assert_eq!(rc, ATOLL_ACK, "{}", message(c));
    assert!(!out.is_null());
    // SAFETY: a string from the library, read before it is freed.
    let json = unsafe { CStr::from_ptr(out) }.to_str().expect("UTF-8");
    let got: serde_json::Value = serde_json::from_str(json).expect("JSON");
    let want = match exchange("overlays").reply {
        Ok(Reply::Overlays { overlays }) => serde_json::to_value(overlays).expect("JSON"),
        _ => unreachable!(),
    };
    assert_eq!(got, want);
    assert_eq!(got[0]["units"][1], "db/pg");
    // SAFETY: freed once; then NULL is fine too.
    unsafe {
        atoll_free_string(out);
        atoll_free_string(ptr::null_mut());
    }
    // SAFETY: closed once.
    unsafe { atoll_close(c) };
    fake.finish();
}

#[test]
fn bad_arguments_are_refused_before_anything_is_sent() {
    let fake = Fake::start(vec![]);
    let c = connect(&fake);
    let (shop, api, bad) = (cs("shop"), cs("api"), cs("web/api"));
    let not_utf8 = CString::new(vec![0xff, 0xfe]).expect("no NUL");
    // SAFETY: a live handle, NUL-terminated strings or NULL throughout.
    unsafe {
        let rc = atoll_tune(c, ptr::null(), api.as_ptr(), ATOLL_CPU_TIME, ATOLL_UP);
        assert_eq!(rc, ATOLL_EINVAL);
        assert_eq!(message(c), "overlay is NULL");
        let rc = atoll_tune(c, shop.as_ptr(), bad.as_ptr(), ATOLL_CPU_TIME, ATOLL_UP);
        assert_eq!(rc, ATOLL_EINVAL);
        assert!(
            message(c).starts_with("unit: name \"web/api\""),
            "{}",
            message(c)
        );
        let rc = atoll_tune(
            c,
            shop.as_ptr(),
            not_utf8.as_ptr(),
            ATOLL_CPU_TIME,
            ATOLL_UP,
        );
        assert_eq!(rc, ATOLL_EINVAL);
        assert!(message(c).contains("not UTF-8"), "{}", message(c));
        assert_eq!(
            atoll_tune(c, shop.as_ptr(), api.as_ptr(), 3, ATOLL_UP),
            ATOLL_EINVAL
        );
        assert!(message(c).starts_with("resource 3 "), "{}", message(c));
        assert_eq!(
            atoll_tune(c, shop.as_ptr(), api.as_ptr(), ATOLL_CORES, -1),
            ATOLL_EINVAL
        );
        assert_eq!(atoll_report(c, shop.as_ptr(), f64::NAN), ATOLL_EINVAL);
        assert_eq!(atoll_report(c, shop.as_ptr(), f64::INFINITY), ATOLL_EINVAL);
        assert_eq!(
            atoll_release(c, shop.as_ptr(), ptr::null(), ptr::null()),
            ATOLL_EINVAL
        );
        assert_eq!(
            atoll_borrow(c, shop.as_ptr(), 1, bad.as_ptr(), ptr::null()),
            ATOLL_EINVAL
        );
        let junk = cs(r#"{"msg":"reboot"}"#);
        assert_eq!(
            atoll_coordinate_json(c, junk.as_ptr(), ptr::null()),
            ATOLL_EINVAL
        );
        assert!(message(c).starts_with("message_json: "), "{}", message(c));
        assert_eq!(atoll_overlays_json(c, ptr::null_mut()), ATOLL_EINVAL);
        // No handle: the text is kept per thread.
        let rc = atoll_trigger(ptr::null_mut(), shop.as_ptr(), api.as_ptr());
        assert_eq!(rc, ATOLL_EINVAL);
        assert_eq!(orphan_message(), "the atoll_client handle is NULL");
        let mut out: *mut c_char = ptr::dangling_mut();
        assert_eq!(atoll_overlays_json(ptr::null_mut(), &mut out), ATOLL_EINVAL);
        assert!(out.is_null(), "*out is NULL on failure");
        atoll_close(c);
        atoll_close(ptr::null_mut());
    }
    // The fake saw no request at all.
    fake.finish();
}

#[test]
fn connection_failures_and_odd_replies_have_their_codes() {
    let fake = Fake::start(vec![
        Step::Exchange("tune_shutting_down"),
        Step::Reply(Reply::Stopping),
        Step::Close,
    ]);
    let c = connect(&fake);
    let (shop, api) = (cs("shop"), cs("api"));
    // SAFETY: a live handle and NUL-terminated strings throughout.
    unsafe {
        let rc = atoll_tune(c, shop.as_ptr(), api.as_ptr(), ATOLL_CPU_TIME, ATOLL_UP);
        assert_eq!(rc, ATOLL_ESHUTTING_DOWN, "{}", message(c));
        let rc = atoll_trigger(c, shop.as_ptr(), api.as_ptr());
        assert_eq!(rc, ATOLL_EPROTOCOL, "{}", message(c));
        assert!(message(c).ends_with("expected a coordinated reply, got stopping"));
        let rc = atoll_report(c, shop.as_ptr(), 1.0);
        assert_eq!(rc, ATOLL_EIO, "{}", message(c));
        assert!(
            message(c).contains("closed the connection"),
            "{}",
            message(c)
        );
        atoll_close(c);
    }
    fake.finish();
}

#[test]
fn a_failed_connect_says_why_in_the_thread_message() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = cs(dir.path().join("none.sock").to_str().expect("UTF-8"));
    // SAFETY: a NUL-terminated path.
    let c = unsafe { atoll_connect(path.as_ptr()) };
    assert!(c.is_null());
    assert!(
        orphan_message().contains("atoll daemon is not running"),
        "{}",
        orphan_message()
    );
}

#[test]
fn timeouts_can_be_set_and_the_handle_says_where_it_is() {
    let fake = Fake::start(vec![]);
    let c = connect(&fake);
    assert!(message(c).starts_with("connected to "), "{}", message(c));
    // SAFETY: a live handle, then closed once.
    unsafe {
        assert_eq!(atoll_set_timeout_ms(c, 1500), ATOLL_ACK);
        assert_eq!(atoll_set_timeout_ms(c, 0), ATOLL_ACK);
        assert_eq!(atoll_set_timeout_ms(ptr::null_mut(), 5), ATOLL_EINVAL);
        atoll_close(c);
    }
    fake.finish();
}
