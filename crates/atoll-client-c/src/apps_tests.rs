//! The `atoll_app_*` functions, called directly, against the fake daemon of
//! `tests` (every request line checked byte for byte).

use std::ffi::{c_char, CStr};
use std::ptr;

use atoll_client::apps::describe;
use atoll_proto::Reply;

use super::{connect, cs, message, Fake, Step};
use crate::apps::*;
use crate::wire::{app_running, exchange, SAMPLE_RECIPE, WAITING_REASON};
use crate::*;

fn text(p: *const c_char) -> String {
    // SAFETY: a NUL-terminated string of the library, copied at once.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .expect("UTF-8")
        .to_string()
}

/// The accessors, in one tuple: state, id, generation, mode, mode name,
/// island, cpus, quota, threads, parallelism, memory.
/// What the accessors say about a handle's assignment: state, app,
/// generation, mode, mode name, island, CPUs, quota, threads, parallelism,
/// memory.
type View = (
    c_int,
    u64,
    u64,
    c_int,
    String,
    String,
    String,
    f64,
    c_uint,
    c_uint,
    u64,
);

fn view(c: *const AtollClient) -> View {
    // SAFETY: a live handle or NULL.
    unsafe {
        (
            atoll_app_state(c),
            atoll_app_id(c),
            atoll_app_generation(c),
            atoll_app_mode(c),
            text(atoll_app_mode_name(c)),
            text(atoll_app_island(c)),
            text(atoll_app_cpus(c)),
            atoll_app_cpu_quota(c),
            atoll_app_threads(c),
            atoll_app_parallelism(c),
            atoll_app_memory_bytes(c),
        )
    }
}

fn none() -> View {
    (
        ATOLL_APP_NONE,
        0,
        0,
        -1,
        String::new(),
        String::new(),
        String::new(),
        0.0,
        0,
        0,
        0,
    )
}

#[test]
fn an_application_registers_follows_its_assignments_reports_and_is_done() {
    let fake = Fake::start(
        [
            "app_register_named",
            "app_poll_up",
            "app_poll_waiting",
            "app_poll_resumed",
            "app_poll_same4",
            "app_report_2",
            "app_report_3",
            "app_done",
        ]
        .into_iter()
        .map(Step::Exchange)
        .collect(),
    );
    let c = connect(&fake);
    assert_eq!(view(c), none());
    assert_eq!(view(ptr::null()), none());
    // SAFETY: NULL is allowed.
    assert_eq!(text(unsafe { atoll_app_reason(ptr::null()) }), "");
    let name = cs("awm_parallel");
    let mut app = 0u64;
    let mut gap = f64::NAN;
    // SAFETY: a live handle, NUL-terminated strings, writable out-pointers.
    unsafe {
        assert_eq!(atoll_app_register(c, name.as_ptr(), 0, &mut app), ATOLL_ACK);
        assert_eq!(app, 7);
        assert_eq!(
            view(c),
            (
                ATOLL_APP_RUNNING,
                7,
                1,
                1,
                "t2".into(),
                "b".into(),
                "0-7".into(),
                2.0,
                2,
                2,
                0
            )
        );
        assert_eq!(message(c), describe(&app_running(1, 1)));

        assert_eq!(atoll_app_poll(c, 7, 1), ATOLL_CHANGED);
        assert_eq!(
            (
                atoll_app_generation(c),
                atoll_app_mode(c),
                atoll_app_parallelism(c)
            ),
            (2, 2, 4)
        );

        assert_eq!(atoll_app_poll(c, 7, 2), ATOLL_CHANGED);
        assert_eq!(atoll_app_state(c), ATOLL_APP_WAITING);
        assert_eq!(
            message(c),
            format!("app 7 (generation 3): waiting: {WAITING_REASON}")
        );
        let mut want = none();
        (want.0, want.1, want.2) = (ATOLL_APP_WAITING, 7, 3);
        assert_eq!(view(c), want);
        assert_eq!(text(atoll_app_reason(c)), WAITING_REASON);

        assert_eq!(atoll_app_poll(c, 7, 3), ATOLL_CHANGED);
        assert_eq!(
            (atoll_app_state(c), atoll_app_mode(c), atoll_app_threads(c)),
            (ATOLL_APP_RUNNING, 0, 1)
        );
        assert_eq!(text(atoll_app_mode_name(c)), "t1");
        assert_eq!(text(atoll_app_reason(c)), "");
        assert_eq!(atoll_app_poll(c, 7, 4), ATOLL_ACK);
        assert_eq!(atoll_app_generation(c), 4);

        assert_eq!(atoll_app_report(c, 7, 2, 30.0, &mut gap), ATOLL_ACK);
        assert_eq!(gap, 0.25);
        assert_eq!(message(c), "app 7: 2 cycles reported; goal gap 0.25");
        assert_eq!(atoll_app_report(c, 7, 3, 30.0, ptr::null_mut()), ATOLL_ACK);
        assert_eq!(atoll_app_done(c, 7), ATOLL_ACK);
        assert_eq!(message(c), "app 7 is done");
        // The last assignment stays readable.
        assert_eq!(atoll_app_mode(c), 0);
        atoll_close(c);
    }
    fake.finish();
}

#[test]
fn a_recipe_goes_along_as_toml_or_json_and_a_pid_can_be_given() {
    let json = serde_json::to_string(
        &atoll_client::apps::parse_recipe(SAMPLE_RECIPE).expect("the sample recipe"),
    )
    .expect("JSON");
    let fake = Fake::start(
        [
            "app_register_inline",
            "app_register_inline",
            "app_register_pid",
            "app_poll_first",
            "app_report_no_goal",
        ]
        .into_iter()
        .map(Step::Exchange)
        .collect(),
    );
    let c = connect(&fake);
    let (toml, json, name) = (cs(SAMPLE_RECIPE), cs(&json), cs("awm_parallel"));
    let mut app = 0u64;
    let mut gap = f64::NAN;
    // SAFETY: a live handle, NUL-terminated strings, writable out-pointers.
    unsafe {
        let rc = atoll_app_register_recipe(c, toml.as_ptr(), 0, &mut app);
        assert_eq!(rc, ATOLL_ACK, "{}", message(c));
        let rc = atoll_app_register_recipe(c, json.as_ptr(), 0, &mut app);
        assert_eq!(rc, ATOLL_ACK, "{}", message(c));
        let rc = atoll_app_register(c, name.as_ptr(), 4242, &mut app);
        assert_eq!(rc, ATOLL_ACK, "{}", message(c));
        assert_eq!(atoll_app_poll(c, 7, ATOLL_NO_GENERATION), ATOLL_CHANGED);
        assert_eq!(atoll_app_report(c, 7, 10, 0.0, &mut gap), ATOLL_ACK);
        assert_eq!(gap, 0.0);
        atoll_close(c);
    }
    fake.finish();
}

#[test]
fn bad_arguments_are_refused_and_daemon_errors_have_their_codes() {
    let fake = Fake::start(vec![
        Step::Exchange("app_register_unknown"),
        Step::Exchange("app_poll_not_found"),
    ]);
    let c = connect(&fake);
    let bad_toml = cs(&SAMPLE_RECIPE.replace("threads = 4", "thread = 4"));
    let bad_value = cs(&SAMPLE_RECIPE.replace("value = 1.0", "value = 2.0"));
    let (spaced, nosuch) = (cs("a b"), cs("nosuch"));
    let mut app = 99u64;
    // SAFETY: a live handle, NUL-terminated strings or NULL, writable
    // out-pointers or NULL throughout.
    unsafe {
        let rc = atoll_app_register_recipe(c, bad_toml.as_ptr(), 0, &mut app);
        assert_eq!(rc, ATOLL_EINVAL);
        assert!(
            message(c).starts_with("recipe TOML text: ") && message(c).contains("thread"),
            "{}",
            message(c)
        );
        let rc = atoll_app_register_recipe(c, bad_value.as_ptr(), 0, &mut app);
        assert_eq!(rc, ATOLL_EINVAL);
        assert!(
            message(c).ends_with("value = 2: must be between 0 and 1"),
            "{}",
            message(c)
        );
        assert_eq!(
            atoll_app_register(c, ptr::null(), 0, &mut app),
            ATOLL_EINVAL
        );
        assert_eq!(message(c), "recipe_name is NULL");
        assert_eq!(
            atoll_app_register(c, spaced.as_ptr(), 0, &mut app),
            ATOLL_EINVAL
        );
        assert!(
            message(c).starts_with("recipe_name: name \"a b\""),
            "{}",
            message(c)
        );
        assert_eq!(
            atoll_app_register(c, nosuch.as_ptr(), 0, ptr::null_mut()),
            ATOLL_EINVAL
        );
        assert_eq!(message(c), "app is NULL");
        for goal in [f64::NAN, f64::INFINITY, -1.0] {
            assert_eq!(
                atoll_app_report(c, 7, 1, goal, ptr::null_mut()),
                ATOLL_EINVAL
            );
        }
        assert_eq!(app, 99, "untouched on failure");
        // Now the daemon answers.
        assert_eq!(
            atoll_app_register(c, nosuch.as_ptr(), 0, &mut app),
            ATOLL_ENOT_FOUND
        );
        assert_eq!(message(c), "not found: no recipe named nosuch");
        assert_eq!(atoll_app_poll(c, 9, ATOLL_NO_GENERATION), ATOLL_ENOT_FOUND);
        assert_eq!(atoll_app_state(c), ATOLL_APP_NONE);
        // No handle.
        assert_eq!(atoll_app_done(ptr::null_mut(), 7), ATOLL_EINVAL);
        atoll_close(c);
    }
    fake.finish();
}

#[test]
fn apps_come_back_as_a_json_array_and_wrong_kinds_are_protocol_errors() {
    let fake = Fake::start(vec![Step::Exchange("apps"), Step::Reply(Reply::Stopping)]);
    let c = connect(&fake);
    let mut out: *mut c_char = ptr::null_mut();
    // SAFETY: a live handle, a place for the string, freed once.
    unsafe {
        assert_eq!(atoll_apps_json(c, &mut out), ATOLL_ACK, "{}", message(c));
        let got: serde_json::Value = serde_json::from_str(&text(out)).expect("JSON");
        let want = match exchange("apps").reply {
            Ok(Reply::Apps { apps }) => serde_json::to_value(apps).expect("JSON"),
            _ => unreachable!(),
        };
        assert_eq!(got, want);
        assert_eq!(got[0]["assignment"]["threads"], 4);
        atoll_free_string(out);
        assert_eq!(atoll_app_poll(c, 7, 1), ATOLL_EPROTOCOL);
        assert!(
            message(c).ends_with("expected a app_assignment reply, got stopping"),
            "{}",
            message(c)
        );
        assert_eq!(atoll_apps_json(c, ptr::null_mut()), ATOLL_EINVAL);
        atoll_close(c);
    }
    fake.finish();
}
