//! C bindings of atoll's client library (issue 4: inTune's client library
//! for applications; seed 002: the runtime library of reconfigurable
//! applications, in [`apps`]): `libatoll_client.so` / `libatoll_client.a`
//! and the hand-written header `include/atoll.h`.
//!
//! Design:
//!
//! * An opaque handle (`atoll_client *`, [`AtollClient`] here) owns one
//!   [`atoll_client::Client`]: one connection to the daemon's socket, calls
//!   sequential, ids numbered by the Rust client. The coordination requests
//!   (`overlays`, `coordinate`, `report`) go through its generic
//!   [`Client::request`] with the [`atoll_proto`] types, so the bytes on the
//!   wire are exactly what the daemon decodes.
//! * Every call returns an `int`: [`ATOLL_ACK`] (0) for an ack (or a
//!   success), [`ATOLL_NACK`] (1) for a nack, [`ATOLL_NOT_HOLDING`] (2) for
//!   a report whose property does not hold, and a negative `ATOLL_E*` code
//!   for an error. The text of the last answer (the daemon's description of
//!   the effects, the nack reason, the error) stays in the handle until the
//!   next call: [`atoll_last_message`]. Without a handle (a failed
//!   [`atoll_connect`], a NULL handle) the text is kept per thread.
//! * Arguments are checked before anything is sent: NULL or non-UTF-8
//!   strings, names outside atoll's alphabet, unknown enum values and
//!   non-finite numbers return [`ATOLL_EINVAL`].
//! * A handle may be used by one thread at a time. Nothing here panics on
//!   bad input; strings returned to C are freed with [`atoll_free_string`].
//! * Reconfigurable applications ([`apps`]): register, poll, report, done;
//!   the handle keeps the last assignment received and accessors read it.
//!
//! A test (`header_tests`) checks that every `atoll_*` function and
//! `ATOLL_*` constant of the header exists here (or in [`apps`]) with the
//! same value, and the other way round.

use std::cell::RefCell;
use std::ffi::{c_char, c_double, c_int, c_uint, CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::ptr;
use std::time::Duration;

use atoll_client::{Client, ClientError};
use atoll_core::Name;
use atoll_proto::coord::{Direction, Message, Resource};
use atoll_proto::{ErrorCode, Reply, Request, DEFAULT_SOCKET};

/// Acknowledged (or, for calls that are not coordination, succeeded).
pub const ATOLL_ACK: c_int = 0;
/// Refused by the coordinator; the reason is in [`atoll_last_message`].
pub const ATOLL_NACK: c_int = 1;
/// A report was recorded and the overlay's property does not hold at it.
pub const ATOLL_NOT_HOLDING: c_int = 2;
/// An application's poll: its assignment changed since the generation it
/// gave.
pub const ATOLL_CHANGED: c_int = 3;
/// A bad argument: NULL, not UTF-8, not a valid name, unknown enum value,
/// not finite, or a message that is not valid JSON of a message.
pub const ATOLL_EINVAL: c_int = -1;
/// The connection failed: socket error, or the daemon closed it or sent a
/// line that is not a reply.
pub const ATOLL_EIO: c_int = -2;
/// The daemon did not answer in time.
pub const ATOLL_ETIMEOUT: c_int = -3;
/// The daemon answered with a reply of the wrong kind.
pub const ATOLL_EPROTOCOL: c_int = -4;
/// Error reply `bad_request`.
pub const ATOLL_EBAD_REQUEST: c_int = -10;
/// Error reply `unsupported_version`.
pub const ATOLL_EUNSUPPORTED_VERSION: c_int = -11;
/// Error reply `permission_denied`.
pub const ATOLL_EPERMISSION_DENIED: c_int = -12;
/// Error reply `not_found`.
pub const ATOLL_ENOT_FOUND: c_int = -13;
/// Error reply `backend`.
pub const ATOLL_EBACKEND: c_int = -14;
/// Error reply `shutting_down`.
pub const ATOLL_ESHUTTING_DOWN: c_int = -15;
/// Error reply `busy`.
pub const ATOLL_EBUSY: c_int = -16;

/// `resource` argument: whole CPUs, moved between islands.
pub const ATOLL_CORES: c_int = 0;
/// `resource` argument: CPU time inside an island.
pub const ATOLL_CPU_TIME: c_int = 1;
/// `resource` argument: a unit's memory limit.
pub const ATOLL_MEMORY: c_int = 2;
/// `dir` argument: more.
pub const ATOLL_UP: c_int = 0;
/// `dir` argument: less.
pub const ATOLL_DOWN: c_int = 1;

/// `atoll_app_state`: no assignment received yet.
pub const ATOLL_APP_NONE: c_int = 0;
/// `atoll_app_state`: the application waits (is suspended).
pub const ATOLL_APP_WAITING: c_int = 1;
/// `atoll_app_state`: the application runs in a working mode.
pub const ATOLL_APP_RUNNING: c_int = 2;

/// The handle C holds as `atoll_client *`.
#[derive(Debug)]
pub struct AtollClient {
    client: Client,
    last: CString,
    /// The last application assignment received.
    app: apps::AppCache,
}

/// A call that failed, with its code and text.
#[derive(Debug)]
struct Fail {
    code: c_int,
    message: String,
}

impl Fail {
    fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: ATOLL_EINVAL,
            message: message.into(),
        }
    }

    fn client(e: &ClientError) -> Self {
        let code = match e.api_code() {
            Some(ErrorCode::BadRequest) => ATOLL_EBAD_REQUEST,
            Some(ErrorCode::UnsupportedVersion) => ATOLL_EUNSUPPORTED_VERSION,
            Some(ErrorCode::PermissionDenied) => ATOLL_EPERMISSION_DENIED,
            Some(ErrorCode::NotFound) => ATOLL_ENOT_FOUND,
            Some(ErrorCode::Backend) => ATOLL_EBACKEND,
            Some(ErrorCode::ShuttingDown) => ATOLL_ESHUTTING_DOWN,
            Some(ErrorCode::Busy) => ATOLL_EBUSY,
            None if e.is_timeout() => ATOLL_ETIMEOUT,
            None if e.is_invalid_argument() => ATOLL_EINVAL,
            None => ATOLL_EIO,
        };
        Self {
            code,
            message: e.to_string(),
        }
    }

    fn unexpected(want: &str, got: &Reply) -> Self {
        let kind = serde_json::to_value(got)
            .ok()
            .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
            .unwrap_or_else(|| "?".into());
        Self {
            code: ATOLL_EPROTOCOL,
            message: format!(
                "bad reply from the atoll daemon: expected a {want} reply, got {kind}"
            ),
        }
    }
}

/// `s` as a C string; NUL bytes (never in the daemon's text) become spaces.
fn c_text(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

thread_local! {
    /// The text of the last call on this thread that had no handle.
    static ORPHAN: RefCell<CString> = RefCell::new(CString::default());
}

fn set_orphan(s: &str) {
    ORPHAN.with(|m| *m.borrow_mut() = c_text(s));
}

/// A string argument: NULL and non-UTF-8 are refused, naming `what`.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that lives through the
/// call.
unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, Fail> {
    if p.is_null() {
        return Err(Fail::invalid(format!("{what} is NULL")));
    }
    // SAFETY: not NULL, and NUL-terminated by the caller's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map_err(|e| Fail::invalid(format!("{what} is not UTF-8: {e}")))
}

/// A name argument (island, unit or overlay).
///
/// # Safety
/// As [`str_arg`].
unsafe fn name_arg(p: *const c_char, what: &str) -> Result<Name, Fail> {
    // SAFETY: the caller's contract is `str_arg`'s.
    let s = unsafe { str_arg(p, what) }?;
    Name::new(s).map_err(|e| Fail::invalid(format!("{what}: {e}")))
}

/// An optional name argument: NULL is `None`.
///
/// # Safety
/// As [`str_arg`].
unsafe fn opt_name_arg(p: *const c_char, what: &str) -> Result<Option<Name>, Fail> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract is `str_arg`'s.
    unsafe { name_arg(p, what) }.map(Some)
}

fn resource_arg(r: c_int) -> Result<Resource, Fail> {
    match r {
        ATOLL_CORES => Ok(Resource::Cores),
        ATOLL_CPU_TIME => Ok(Resource::CpuTime),
        ATOLL_MEMORY => Ok(Resource::Memory),
        _ => Err(Fail::invalid(format!(
            "resource {r} is not ATOLL_CORES (0), ATOLL_CPU_TIME (1) or ATOLL_MEMORY (2)"
        ))),
    }
}

fn dir_arg(d: c_int) -> Result<Direction, Fail> {
    match d {
        ATOLL_UP => Ok(Direction::Up),
        ATOLL_DOWN => Ok(Direction::Down),
        _ => Err(Fail::invalid(format!(
            "dir {d} is not ATOLL_UP (0) or ATOLL_DOWN (1)"
        ))),
    }
}

/// Runs `f` on the handle behind `c`; a failure's text is kept in the
/// handle (or per thread when `c` is NULL).
///
/// # Safety
/// `c` is NULL or a handle from [`atoll_connect`] that is not closed and
/// that no other thread uses during the call.
unsafe fn call(
    c: *mut AtollClient,
    f: impl FnOnce(&mut AtollClient) -> Result<c_int, Fail>,
) -> c_int {
    // SAFETY: NULL or a live handle used by this thread only (contract).
    let Some(h) = (unsafe { c.as_mut() }) else {
        set_orphan("the atoll_client handle is NULL");
        return ATOLL_EINVAL;
    };
    match f(h) {
        Ok(code) => code,
        Err(fail) => {
            h.last = c_text(&fail.message);
            fail.code
        }
    }
}

impl AtollClient {
    fn say(&mut self, s: &str) {
        self.last = c_text(s);
    }

    fn request(&mut self, request: Request) -> Result<Reply, Fail> {
        self.client.request(request).map_err(|e| Fail::client(&e))
    }

    /// Sends one coordination message; ack → 0, nack → 1.
    fn coordinate(&mut self, from: Option<Name>, message: Message) -> Result<c_int, Fail> {
        let request = Request::Coordinate {
            from: from.map(|n| n.to_string()),
            message,
        };
        match self.request(request)? {
            Reply::Coordinated { reply, text } => {
                let text = if text.is_empty() {
                    reply.to_string()
                } else {
                    text
                };
                self.say(&text);
                Ok(if reply.is_ack() {
                    ATOLL_ACK
                } else {
                    ATOLL_NACK
                })
            }
            other => Err(Fail::unexpected("coordinated", &other)),
        }
    }
}

/// The version of this library, `MAJOR.MINOR.PATCH` (the crate's version:
/// `ATOLL_VERSION_STRING` of the header it was built with). A static
/// string.
#[no_mangle]
pub extern "C" fn atoll_version() -> *const c_char {
    VERSION.as_ptr()
}

/// [`atoll_version`]'s string.
const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("the crate version has no NUL"),
    };

/// Connects to the daemon's socket (`NULL`: the default socket,
/// `/run/atoll/atoll.sock`). Returns NULL on failure, with the reason in
/// `atoll_last_message(NULL)`.
///
/// # Safety
/// `socket_path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn atoll_connect(socket_path: *const c_char) -> *mut AtollClient {
    let path = if socket_path.is_null() {
        PathBuf::from(DEFAULT_SOCKET)
    } else {
        // SAFETY: not NULL, so NUL-terminated by the caller's contract.
        let bytes = unsafe { CStr::from_ptr(socket_path) }.to_bytes();
        PathBuf::from(OsStr::from_bytes(bytes))
    };
    match Client::connect(&path) {
        Ok(client) => {
            set_orphan("");
            let last = c_text(&format!("connected to {}", path.display()));
            Box::into_raw(Box::new(AtollClient {
                client,
                last,
                app: apps::AppCache::default(),
            }))
        }
        Err(e) => {
            set_orphan(&e.to_string());
            ptr::null_mut()
        }
    }
}

/// Closes the connection and frees the handle (NULL: nothing).
///
/// # Safety
/// `c` is NULL or a handle from [`atoll_connect`] not closed before; it is
/// invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn atoll_close(c: *mut AtollClient) {
    if !c.is_null() {
        // SAFETY: a handle from `atoll_connect` (a leaked Box) closed once.
        drop(unsafe { Box::from_raw(c) });
    }
}

/// The text of the last answer on `c` (effects, nack reason, error), or for
/// `c` NULL of the last call on this thread without a handle (such as a
/// failed `atoll_connect`). Valid until the next call with the same handle
/// (or, for NULL, the next such call on this thread). Never NULL.
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn atoll_last_message(c: *const AtollClient) -> *const c_char {
    // SAFETY: NULL or a live handle (contract).
    match unsafe { c.as_ref() } {
        Some(h) => h.last.as_ptr(),
        // The thread-local lives as long as the thread and is replaced only
        // by the next call without a handle, as documented.
        None => ORPHAN.with(|m| m.borrow().as_ptr()),
    }
}

/// Sets how long each call waits for the daemon, in milliseconds (0: wait
/// forever). The default is 30 s.
///
/// # Safety
/// `c` is NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn atoll_set_timeout_ms(c: *mut AtollClient, ms: c_uint) -> c_int {
    let timeout = (ms > 0).then(|| Duration::from_millis(u64::from(ms)));
    let f = |h: &mut AtollClient| {
        h.client
            .set_timeout(timeout)
            .map_err(|e| Fail::client(&e))?;
        h.say(&format!("timeout set to {ms} ms"));
        Ok(ATOLL_ACK)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Asks `unit`'s island to tune the unit's share of `resource` one step
/// (`ATOLL_UP`/`ATOLL_DOWN`) for `overlay`.
///
/// # Safety
/// `c` is NULL or a live handle used by this thread only; the strings are
/// NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn atoll_tune(
    c: *mut AtollClient,
    overlay: *const c_char,
    unit: *const c_char,
    resource: c_int,
    dir: c_int,
) -> c_int {
    let f = |h: &mut AtollClient| {
        // SAFETY: NULL or NUL-terminated strings (contract).
        let (overlay, unit) = unsafe { (name_arg(overlay, "overlay")?, name_arg(unit, "unit")?) };
        let message = Message::Tune {
            resource: resource_arg(resource)?,
            dir: dir_arg(dir)?,
            overlay,
            unit,
        };
        h.coordinate(None, message)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Asks for an immediate, bounded CPU-time boost of `unit` for `overlay`.
///
/// # Safety
/// As [`atoll_tune`].
#[no_mangle]
pub unsafe extern "C" fn atoll_trigger(
    c: *mut AtollClient,
    overlay: *const c_char,
    unit: *const c_char,
) -> c_int {
    let f = |h: &mut AtollClient| {
        // SAFETY: NULL or NUL-terminated strings (contract).
        let (overlay, unit) = unsafe { (name_arg(overlay, "overlay")?, name_arg(unit, "unit")?) };
        let message = Message::Trigger {
            resource: Resource::CpuTime,
            overlay,
            unit,
        };
        h.coordinate(None, message)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Borrows up to `amount` CPUs for `overlay` from island `from_island`
/// (NULL: whichever island can lend) into island `into` (NULL: the island
/// of the overlay's first unit).
///
/// # Safety
/// As [`atoll_tune`].
#[no_mangle]
pub unsafe extern "C" fn atoll_borrow(
    c: *mut AtollClient,
    overlay: *const c_char,
    amount: c_uint,
    from_island: *const c_char,
    into: *const c_char,
) -> c_int {
    let f = |h: &mut AtollClient| {
        // SAFETY: NULL or NUL-terminated strings (contract).
        let (overlay, lender, into) = unsafe {
            (
                name_arg(overlay, "overlay")?,
                opt_name_arg(from_island, "from_island")?,
                opt_name_arg(into, "into")?,
            )
        };
        let message = match lender {
            Some(island) => Message::BorrowPreferred {
                resource: Resource::Cores,
                overlay,
                island,
                amount,
            },
            None => Message::BorrowAny {
                resource: Resource::Cores,
                overlay,
                amount,
            },
        };
        h.coordinate(into, message)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Gives back to island `lender` the CPUs island `into` (NULL: the island
/// of the overlay's first unit) borrowed from it for `overlay`.
///
/// # Safety
/// As [`atoll_tune`].
#[no_mangle]
pub unsafe extern "C" fn atoll_release(
    c: *mut AtollClient,
    overlay: *const c_char,
    lender: *const c_char,
    into: *const c_char,
) -> c_int {
    let f = |h: &mut AtollClient| {
        // SAFETY: NULL or NUL-terminated strings (contract).
        let (overlay, island, into) = unsafe {
            (
                name_arg(overlay, "overlay")?,
                name_arg(lender, "lender")?,
                opt_name_arg(into, "into")?,
            )
        };
        let message = Message::Release {
            resource: Resource::Cores,
            overlay,
            island,
        };
        h.coordinate(into, message)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Sends any coordination message, given as its JSON object (such as
/// `{"msg":"deregister","overlay":"shop"}`), from island `from` (NULL: the
/// daemon's default sender).
///
/// # Safety
/// As [`atoll_tune`].
#[no_mangle]
pub unsafe extern "C" fn atoll_coordinate_json(
    c: *mut AtollClient,
    message_json: *const c_char,
    from: *const c_char,
) -> c_int {
    let f = |h: &mut AtollClient| {
        // SAFETY: NULL or NUL-terminated strings (contract).
        let (json, from) = unsafe {
            (
                str_arg(message_json, "message_json")?,
                opt_name_arg(from, "from")?,
            )
        };
        let message: Message =
            serde_json::from_str(json).map_err(|e| Fail::invalid(format!("message_json: {e}")))?;
        h.coordinate(from, message)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Reports the current value of `overlay`'s property (latency in µs, or
/// operations per second). Returns `ATOLL_ACK` when the property holds at
/// it, `ATOLL_NOT_HOLDING` when it does not; what the overlay's policy did
/// about it is in `atoll_last_message`.
///
/// # Safety
/// As [`atoll_tune`].
#[no_mangle]
pub unsafe extern "C" fn atoll_report(
    c: *mut AtollClient,
    overlay: *const c_char,
    value: c_double,
) -> c_int {
    let f = |h: &mut AtollClient| {
        // SAFETY: NULL or a NUL-terminated string (contract).
        let overlay = unsafe { name_arg(overlay, "overlay") }?;
        if !value.is_finite() {
            return Err(Fail::invalid(format!("value {value} is not finite")));
        }
        let request = Request::Report {
            overlay: overlay.to_string(),
            value,
        };
        match h.request(request)? {
            Reply::Reported {
                overlay,
                holds,
                action,
            } => {
                let verdict = if holds { "holds" } else { "does not hold" };
                let mut text = format!("the property of overlay {overlay} {verdict}");
                if let Some(a) = action {
                    text.push_str("; ");
                    text.push_str(&a);
                }
                h.say(&text);
                Ok(if holds { ATOLL_ACK } else { ATOLL_NOT_HOLDING })
            }
            other => Err(Fail::unexpected("reported", &other)),
        }
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// The overlays as a JSON array (the `overlays` of the daemon's reply), in
/// a new string stored in `*out` and freed with `atoll_free_string`.
/// `*out` is NULL on failure.
///
/// # Safety
/// As [`atoll_tune`]; `out` is NULL or points to writable storage for a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn atoll_overlays_json(c: *mut AtollClient, out: *mut *mut c_char) -> c_int {
    if !out.is_null() {
        // SAFETY: not NULL, so writable storage for a pointer (contract).
        unsafe { out.write(ptr::null_mut()) };
    }
    let f = |h: &mut AtollClient| {
        if out.is_null() {
            return Err(Fail::invalid("out is NULL"));
        }
        let overlays = match h.request(Request::Overlays {})? {
            Reply::Overlays { overlays } => overlays,
            other => return Err(Fail::unexpected("overlays", &other)),
        };
        let json = serde_json::to_string(&overlays)
            .map_err(|e| Fail::invalid(format!("cannot encode the overlays: {e}")))?;
        h.say(&format!("{} overlays", overlays.len()));
        // SAFETY: checked not NULL above; writable by contract.
        unsafe { out.write(c_text(&json).into_raw()) };
        Ok(ATOLL_ACK)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Frees a string returned by this library (NULL: nothing).
///
/// # Safety
/// `s` is NULL or a string from `atoll_overlays_json` not freed before.
#[no_mangle]
pub unsafe extern "C" fn atoll_free_string(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: made by `CString::into_raw` in this library, freed once.
        drop(unsafe { CString::from_raw(s) });
    }
}

pub mod apps;

#[cfg(test)]
mod header_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wire;
