//! The `atoll_app_*` functions: reconfigurable applications (seed 002)
//! from C.
//!
//! The calls map one to one onto the requests (`app_register`, `app_poll`,
//! `app_report`, `app_done`, `apps`), sent with the `atoll-proto` types
//! like the coordination calls (so a reply of the wrong kind, or about
//! another application, is `ATOLL_EPROTOCOL`). The handle keeps the last assignment
//! it received (from a register or a poll) and the accessors read it, so a
//! C program never parses JSON:
//!
//! ```c
//! uint64_t app;
//! if (atoll_app_register(c, "bodytrack", 0, &app) != ATOLL_ACK) { ... }
//! uint64_t gen = atoll_app_generation(c);
//! for (;;) {
//!     if (atoll_app_poll(c, app, gen) == ATOLL_CHANGED) {
//!         gen = atoll_app_generation(c);
//!         if (atoll_app_state(c) == ATOLL_APP_RUNNING)
//!             set_threads(atoll_app_parallelism(c));
//!     }
//!     ...
//! }
//! ```
//!
//! The strings the accessors return live in the handle until the next call
//! that receives an assignment. With a NULL handle, or before any
//! assignment, the accessors return 0, -1 or "".

use std::ffi::{c_char, c_double, c_int, c_uint, CString};
use std::ptr;

use atoll_client::apps::{describe, parse_recipe, AppAssignment, AppRunState, Grant, RecipeRef};
use atoll_proto::{Reply, Request};

use crate::{
    c_text, call, name_arg, str_arg, AtollClient, Fail, ATOLL_ACK, ATOLL_APP_NONE,
    ATOLL_APP_RUNNING, ATOLL_APP_WAITING, ATOLL_CHANGED, ATOLL_EPROTOCOL,
};

/// `after` of [`atoll_app_poll`] when the application has acted on no
/// generation yet (the poll is then always `ATOLL_CHANGED`).
pub const ATOLL_NO_GENERATION: u64 = u64::MAX;

/// The last assignment a handle received, with its strings as C strings.
#[derive(Debug, Default)]
pub(crate) struct AppCache {
    assignment: Option<AppAssignment>,
    grant: Option<Grant>,
    island: CString,
    mode_name: CString,
    cpus: CString,
    reason: CString,
}

impl AppCache {
    fn set(&mut self, a: AppAssignment) {
        let grant = Grant::of(&a.state);
        let text = |f: fn(&Grant) -> String| grant.as_ref().map(|g| c_text(&f(g)));
        self.island = text(|g| g.island.clone()).unwrap_or_default();
        self.mode_name = text(|g| g.mode_name.clone()).unwrap_or_default();
        self.cpus = text(|g| g.cpus.to_string()).unwrap_or_default();
        self.reason = match &a.state {
            AppRunState::Waiting { reason } => c_text(reason),
            AppRunState::Running { .. } => CString::default(),
        };
        self.grant = grant;
        self.assignment = Some(a);
    }
}

impl AtollClient {
    /// Keeps `a`, says it in words, and returns it.
    fn keep(&mut self, a: AppAssignment) -> AppAssignment {
        self.say(&describe(&a));
        self.app.set(a.clone());
        a
    }

    fn register(&mut self, recipe: RecipeRef, pid: c_uint, app: *mut u64) -> Result<c_int, Fail> {
        if app.is_null() {
            return Err(Fail::invalid("app is NULL"));
        }
        let pid = (pid != 0).then_some(pid);
        match self.request(Request::AppRegister { recipe, pid })? {
            Reply::AppRegistered {
                app: id,
                assignment,
            } => {
                check_app(id, assignment.app)?;
                self.keep(assignment);
                // SAFETY: checked not NULL above; writable by the caller's
                // contract.
                unsafe { app.write(id) };
                Ok(ATOLL_ACK)
            }
            other => Err(Fail::unexpected("app_registered", &other)),
        }
    }
}

/// A reply about another application than the one asked about.
fn check_app(asked: u64, got: u64) -> Result<(), Fail> {
    if asked == got {
        Ok(())
    } else {
        Err(Fail {
            code: ATOLL_EPROTOCOL,
            message: format!(
                "bad reply from the atoll daemon: about application {got}, asked about {asked}"
            ),
        })
    }
}

/// The handle's cache, if the handle is not NULL.
///
/// # Safety
/// `c` is NULL or a live handle.
unsafe fn cache<'a>(c: *const AtollClient) -> Option<&'a AppCache> {
    // SAFETY: NULL or a live handle (contract).
    unsafe { c.as_ref() }.map(|h| &h.app)
}

/// # Safety
/// `c` is NULL or a live handle.
unsafe fn grant<'a>(c: *const AtollClient) -> Option<&'a Grant> {
    // SAFETY: the caller's contract is `cache`'s.
    unsafe { cache(c) }.and_then(|a| a.grant.as_ref())
}

/// Registers process `pid` (0: the caller) as a reconfigurable application
/// with the recipe `recipe_name` of the platform description; stores its id
/// in `*app` and keeps its first assignment in the handle (see the
/// accessors; `atoll_last_message` says it in words).
///
/// # Safety
/// `c` is NULL or a live handle used by this thread only; `recipe_name` is
/// NULL or NUL-terminated; `app` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_register(
    c: *mut AtollClient,
    recipe_name: *const c_char,
    pid: c_uint,
    app: *mut u64,
) -> c_int {
    let f = |h: &mut AtollClient| {
        // SAFETY: NULL or a NUL-terminated string (contract).
        let name = unsafe { name_arg(recipe_name, "recipe_name") }?;
        h.register(RecipeRef::Named(name.to_string()), pid, app)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// As [`atoll_app_register`], with a recipe sent along: `recipe_text` is
/// the recipe in TOML (`name`, `priority`, `[[modes]]` tables), or in JSON
/// when it starts with `{`. A recipe that does not parse or is invalid is
/// `ATOLL_EINVAL`, with the line, field and value in
/// `atoll_last_message`.
///
/// # Safety
/// As [`atoll_app_register`].
#[no_mangle]
pub unsafe extern "C" fn atoll_app_register_recipe(
    c: *mut AtollClient,
    recipe_text: *const c_char,
    pid: c_uint,
    app: *mut u64,
) -> c_int {
    let f = |h: &mut AtollClient| {
        // SAFETY: NULL or a NUL-terminated string (contract).
        let text = unsafe { str_arg(recipe_text, "recipe_text") }?;
        let recipe = parse_recipe(text).map_err(|e| Fail::invalid(e.to_string()))?;
        h.register(RecipeRef::Inline(recipe), pid, app)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Asks for application `app`'s assignment and keeps it in the handle.
/// `after` is the generation the application last acted on
/// (`ATOLL_NO_GENERATION`: none). Returns `ATOLL_CHANGED` when the
/// assignment's generation differs from `after`, `ATOLL_ACK` when it does
/// not.
///
/// # Safety
/// `c` is NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_poll(c: *mut AtollClient, app: u64, after: u64) -> c_int {
    let f = |h: &mut AtollClient| {
        let after = (after != ATOLL_NO_GENERATION).then_some(after);
        let a = match h.request(Request::AppPoll { app, after })? {
            Reply::AppAssignment(a) => a,
            other => return Err(Fail::unexpected("app_assignment", &other)),
        };
        check_app(app, a.app)?;
        let a = h.keep(a);
        Ok(if Some(a.generation) == after {
            ATOLL_ACK
        } else {
            ATOLL_CHANGED
        })
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Reports application `app`'s progress: `cycles` done since it registered
/// (a counter) and its goal, `goal_cps` cycles per second (0: no goal).
/// Stores the goal gap the daemon computed in `*goal_gap` (may be NULL).
///
/// # Safety
/// `c` is NULL or a live handle used by this thread only; `goal_gap` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_report(
    c: *mut AtollClient,
    app: u64,
    cycles: u64,
    goal_cps: c_double,
    goal_gap: *mut c_double,
) -> c_int {
    let f = |h: &mut AtollClient| {
        if !goal_cps.is_finite() || goal_cps < 0.0 {
            return Err(Fail::invalid(format!(
                "goal_cps {goal_cps} is not a finite number of cycles per second (0: no goal)"
            )));
        }
        let goal_cps = (goal_cps > 0.0).then_some(goal_cps);
        let request = Request::AppReport {
            app,
            cycles,
            goal_cps,
        };
        let gap = match h.request(request)? {
            Reply::AppReported { app: got, goal_gap } => {
                check_app(app, got)?;
                goal_gap
            }
            other => return Err(Fail::unexpected("app_reported", &other)),
        };
        h.say(&format!(
            "app {app}: {cycles} cycles reported; goal gap {gap}"
        ));
        if !goal_gap.is_null() {
            // SAFETY: not NULL, so writable by the caller's contract.
            unsafe { goal_gap.write(gap) };
        }
        Ok(ATOLL_ACK)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Tells the daemon application `app` is done: its resources go back.
///
/// # Safety
/// `c` is NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_done(c: *mut AtollClient, app: u64) -> c_int {
    let f = |h: &mut AtollClient| {
        match h.request(Request::AppDone { app })? {
            Reply::AppDone { app: got } => check_app(app, got)?,
            other => return Err(Fail::unexpected("app_done", &other)),
        }
        h.say(&format!("app {app} is done"));
        Ok(ATOLL_ACK)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// Every application as a JSON array (the `apps` of the daemon's reply) in
/// a new string stored in `*out`, freed with `atoll_free_string`; `*out`
/// is NULL on failure.
///
/// # Safety
/// As [`atoll_app_done`]; `out` is NULL or writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn atoll_apps_json(c: *mut AtollClient, out: *mut *mut c_char) -> c_int {
    if !out.is_null() {
        // SAFETY: not NULL, so writable storage for a pointer (contract).
        unsafe { out.write(ptr::null_mut()) };
    }
    let f = |h: &mut AtollClient| {
        if out.is_null() {
            return Err(Fail::invalid("out is NULL"));
        }
        let apps = match h.request(Request::Apps {})? {
            Reply::Apps { apps } => apps,
            other => return Err(Fail::unexpected("apps", &other)),
        };
        let json = serde_json::to_string(&apps)
            .map_err(|e| Fail::invalid(format!("cannot encode the applications: {e}")))?;
        h.say(&format!("{} applications", apps.len()));
        // SAFETY: checked not NULL above; writable by contract.
        unsafe { out.write(c_text(&json).into_raw()) };
        Ok(ATOLL_ACK)
    };
    // SAFETY: the caller's contract is `call`'s.
    unsafe { call(c, f) }
}

/// The application of the last assignment received (0: none).
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_id(c: *const AtollClient) -> u64 {
    // SAFETY: the caller's contract is `cache`'s.
    unsafe { cache(c) }
        .and_then(|a| a.assignment.as_ref())
        .map_or(0, |a| a.app)
}

/// The generation of the last assignment received (0: none).
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_generation(c: *const AtollClient) -> u64 {
    // SAFETY: the caller's contract is `cache`'s.
    unsafe { cache(c) }
        .and_then(|a| a.assignment.as_ref())
        .map_or(0, |a| a.generation)
}

/// `ATOLL_APP_RUNNING`, `ATOLL_APP_WAITING` (the reason is in
/// `atoll_last_message` after the call that received it), or
/// `ATOLL_APP_NONE` before any assignment.
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_state(c: *const AtollClient) -> c_int {
    // SAFETY: the caller's contract is `cache`'s.
    match unsafe { cache(c) }.and_then(|a| a.assignment.as_ref()) {
        None => ATOLL_APP_NONE,
        Some(a) => match a.state {
            AppRunState::Waiting { .. } => ATOLL_APP_WAITING,
            AppRunState::Running { .. } => ATOLL_APP_RUNNING,
        },
    }
}

/// Why the application waits, while it waits, else "".
///
/// # Safety
/// As [`atoll_app_mode_name`].
#[no_mangle]
pub unsafe extern "C" fn atoll_app_reason(c: *const AtollClient) -> *const c_char {
    // SAFETY: the caller's contract is `cache`'s.
    unsafe { cache(c) }.map_or(c"".as_ptr(), |a| a.reason.as_ptr())
}

/// The working mode's id while running, else -1.
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_mode(c: *const AtollClient) -> c_int {
    // SAFETY: the caller's contract is `grant`'s.
    unsafe { grant(c) }.map_or(-1, |g| c_int::from(g.mode))
}

/// The working mode's name while running (may be ""), else "".
///
/// # Safety
/// `c` is NULL or a live handle. The string lives until the next call that
/// receives an assignment on `c`.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_mode_name(c: *const AtollClient) -> *const c_char {
    // SAFETY: the caller's contract is `cache`'s.
    unsafe { cache(c) }.map_or(c"".as_ptr(), |a| a.mode_name.as_ptr())
}

/// The island while running, else "".
///
/// # Safety
/// As [`atoll_app_mode_name`].
#[no_mangle]
pub unsafe extern "C" fn atoll_app_island(c: *const AtollClient) -> *const c_char {
    // SAFETY: the caller's contract is `cache`'s.
    unsafe { cache(c) }.map_or(c"".as_ptr(), |a| a.island.as_ptr())
}

/// The CPUs it may run on while running, as a CPU list (`4-7`), else "".
///
/// # Safety
/// As [`atoll_app_mode_name`].
#[no_mangle]
pub unsafe extern "C" fn atoll_app_cpus(c: *const AtollClient) -> *const c_char {
    // SAFETY: the caller's contract is `cache`'s.
    unsafe { cache(c) }.map_or(c"".as_ptr(), |a| a.cpus.as_ptr())
}

/// CPUs' worth of time it may use while running, else 0.
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_cpu_quota(c: *const AtollClient) -> c_double {
    // SAFETY: the caller's contract is `grant`'s.
    unsafe { grant(c) }.map_or(0.0, |g| g.cpu_quota)
}

/// The threads its working mode asks for while running, else 0 (also when
/// the mode does not say; see `atoll_app_parallelism`).
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_threads(c: *const AtollClient) -> c_uint {
    // SAFETY: the caller's contract is `grant`'s.
    unsafe { grant(c) }.and_then(|g| g.threads).unwrap_or(0)
}

/// How many threads to run while running: the mode's threads, else the CPU
/// quota rounded up, at least 1; 0 unless running.
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_parallelism(c: *const AtollClient) -> c_uint {
    // SAFETY: the caller's contract is `grant`'s.
    unsafe { grant(c) }.map_or(0, Grant::parallelism)
}

/// Memory it may use while running, bytes (0: no reservation), else 0.
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn atoll_app_memory_bytes(c: *const AtollClient) -> u64 {
    // SAFETY: the caller's contract is `grant`'s.
    unsafe { grant(c) }.map_or(0, |g| g.memory_bytes)
}
