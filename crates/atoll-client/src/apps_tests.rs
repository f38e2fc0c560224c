//! Application calls and recipes against the fake daemon.

use atoll_core::awm::{Needs, Recipe, WorkingMode};
use atoll_core::{CpuSet, Name};
use atoll_proto::apps::{AppAssignment, AppRunState, AppStatus, RecipeRef};

use super::*;
use crate::apps::{describe, load_recipe, parse_recipe, Grant, RecipeLoadError};

pub(super) fn mode(id: u8, threads: u32) -> WorkingMode {
    WorkingMode {
        power_watts: None,
        id,
        name: format!("t{threads}"),
        value: f64::from(threads) / 8.0,
        needs: Needs {
            cpu_quota: f64::from(threads),
            threads: Some(threads),
            exclusive_cpus: false,
            memory_bytes: 0,
            islands: None,
        },
    }
}

/// Four working modes: 1, 2, 4 and 8 threads on as many CPUs.
pub(super) fn recipe() -> Recipe {
    Recipe {
        name: Name::new("crunch").unwrap(),
        priority: 1,
        modes: vec![mode(0, 1), mode(1, 2), mode(2, 4), mode(3, 8)],
    }
}

/// Running in working mode `mode` (threads `2^mode`) on island `b`.
pub(super) fn running(app: u64, generation: u64, mode: u8) -> AppAssignment {
    let threads = 1u32 << mode;
    AppAssignment {
        app,
        generation,
        state: AppRunState::Running {
            mode,
            mode_name: format!("t{threads}"),
            island: "b".into(),
            cpu_quota: f64::from(threads),
            cpus: CpuSet::parse("0-7").unwrap(),
            threads: Some(threads),
            memory_bytes: 0,
        },
    }
}

pub(super) fn waiting(app: u64, generation: u64, reason: &str) -> AppAssignment {
    AppAssignment {
        app,
        generation,
        state: AppRunState::Waiting {
            reason: reason.into(),
        },
    }
}

fn status(app: u64) -> AppStatus {
    AppStatus {
        app,
        name: "crunch".into(),
        priority: 1,
        pid: 4242,
        unit: Some("b/crunch-7".into()),
        assignment: running(app, 3, 2),
        goal_cps: Some(20.0),
        cycles_per_s: Some(16.0),
        goal_gap: 0.25,
        reconfigurations: 2,
        power: None,
    }
}

/// A daemon that registers every application as app 7 in mode 1, answers
/// polls with mode 2 at generation `after + 1`, and reports with the gap
/// `goal / cycles - 1`.
fn apps_fake() -> Fake {
    fake(|req| {
        let reply = match &req.request {
            Request::AppRegister { .. } => Reply::AppRegistered {
                app: 7,
                assignment: running(7, 1, 1),
            },
            Request::AppPoll { app, after } => {
                Reply::AppAssignment(running(*app, after.map_or(1, |a| a + 1), 2))
            }
            Request::AppReport {
                app,
                cycles,
                goal_cps,
            } => Reply::AppReported {
                app: *app,
                goal_gap: goal_cps.map_or(0.0, |g| g / *cycles as f64 - 1.0),
            },
            Request::AppDone { app } => Reply::AppDone { app: *app },
            Request::Apps {} => Reply::Apps {
                apps: vec![status(7)],
            },
            _ => return vec![err(req.id, ErrorCode::BadRequest, "unexpected")],
        };
        vec![ok(req.id, reply)]
    })
}

#[test]
fn every_call_sends_its_request_and_decodes_its_reply() {
    let f = apps_fake();
    let mut c = Client::connect(&f.path).unwrap();
    let (app, first) = c
        .app_register(RecipeRef::Inline(recipe()), Some(4242))
        .unwrap();
    assert_eq!((app, &first), (7, &running(7, 1, 1)));
    let (_, named) = c
        .app_register(RecipeRef::Named("crunch".into()), None)
        .unwrap();
    assert_eq!(Grant::of(&named.state).unwrap().threads, Some(2));

    let a = c.app_poll(7, Some(1)).unwrap();
    assert_eq!(a.generation, 2);
    assert_eq!(c.app_poll(7, None).unwrap().generation, 1);
    let g = Grant::of(&a.state).unwrap();
    assert_eq!((g.mode, g.threads, g.cpu_quota), (2, Some(4), 4.0));

    assert_eq!(c.app_report(7, 16, Some(20.0)).unwrap(), 0.25);
    assert_eq!(c.app_report(7, 40, None).unwrap(), 0.0);
    assert_eq!(c.apps().unwrap(), [status(7)]);
    c.app_done(7).unwrap();
    drop(c);

    let seen: Vec<Request> = f
        .thread
        .join()
        .unwrap()
        .into_iter()
        .map(|r| r.request)
        .collect();
    assert_eq!(
        seen,
        [
            Request::AppRegister {
                recipe: RecipeRef::Inline(recipe()),
                pid: Some(4242),
            },
            Request::AppRegister {
                recipe: RecipeRef::Named("crunch".into()),
                pid: None,
            },
            Request::AppPoll {
                app: 7,
                after: Some(1)
            },
            Request::AppPoll {
                app: 7,
                after: None
            },
            Request::AppReport {
                app: 7,
                cycles: 16,
                goal_cps: Some(20.0)
            },
            Request::AppReport {
                app: 7,
                cycles: 40,
                goal_cps: None
            },
            Request::Apps {},
            Request::AppDone { app: 7 },
        ]
    );
}

#[test]
fn invalid_arguments_are_refused_before_sending() {
    let f = apps_fake();
    let mut c = Client::connect(&f.path).unwrap();
    let mut no_modes = recipe();
    no_modes.modes.clear();
    let mut twice = recipe();
    twice.modes[1].id = 0;
    let cases: Vec<(ClientError, &str)> = vec![
        (
            c.app_register(RecipeRef::Named("a b".into()), None)
                .unwrap_err(),
            "invalid recipe name: name \"a b\"",
        ),
        (
            c.app_register(RecipeRef::Inline(no_modes), None)
                .unwrap_err(),
            "invalid recipe crunch: modes: at least one working mode is needed",
        ),
        (
            c.app_register(RecipeRef::Inline(twice), None).unwrap_err(),
            "invalid recipe crunch: modes[1].id = 0",
        ),
        (
            c.app_register(RecipeRef::Inline(recipe()), Some(0))
                .unwrap_err(),
            "invalid pid: 0 is not a process",
        ),
        (
            c.app_report(7, 1, Some(f64::NAN)).unwrap_err(),
            "invalid goal_cps: NaN is not a finite number",
        ),
        (
            c.app_report(7, 1, Some(0.0)).unwrap_err(),
            "invalid goal_cps: 0 ",
        ),
        (
            c.app_report(7, 1, Some(-3.0)).unwrap_err(),
            "invalid goal_cps: -3 ",
        ),
    ];
    refused_before_sending(&cases, c, |c| drop(c.apps().unwrap()), f);
}

#[test]
fn answers_about_another_application_or_of_another_kind_are_refused() {
    let f = fake(|req| {
        let reply = match req.id {
            1 => Reply::AppRegistered {
                app: 7,
                assignment: running(8, 1, 0),
            },
            2 => Reply::AppAssignment(running(9, 1, 0)),
            3 => Reply::AppReported {
                app: 9,
                goal_gap: 0.0,
            },
            4 => Reply::AppDone { app: 9 },
            5 => Reply::AppDone { app: 7 },
            _ => return vec![err(req.id, ErrorCode::NotFound, "no application 7")],
        };
        vec![ok(req.id, reply)]
    });
    let mut c = Client::connect(&f.path).unwrap();
    let e = c
        .app_register(RecipeRef::Named("crunch".into()), None)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("an assignment about application 8, asked about 7"),
        "{e}"
    );
    let e = c.app_poll(7, None).unwrap_err();
    assert!(e.to_string().contains("about application 9"), "{e}");
    let e = c.app_report(7, 1, None).unwrap_err();
    assert!(
        e.to_string().contains("a report about application 9"),
        "{e}"
    );
    let e = c.app_done(7).unwrap_err();
    assert!(
        e.to_string().contains("an answer about application 9"),
        "{e}"
    );
    let e = c.apps().unwrap_err();
    assert!(
        e.to_string()
            .contains("expected reply kind apps, got app_done"),
        "{e}"
    );
    let e = c.app_poll(7, Some(3)).unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert_eq!(e.to_string(), "not found: no application 7");
    drop(c);
    assert_eq!(f.thread.join().unwrap().len(), 6);
}

#[test]
fn assignments_decode_from_the_documented_wire_form() {
    // What docs/api.md shows: the state's fields flattened into the reply.
    let line = concat!(
        r#"{"v":1,"id":3,"ok":{"kind":"app_assignment","app":7,"generation":4,"#,
        r#""state":"running","mode":2,"mode_name":"t4","island":"b","cpu_quota":4.0,"#,
        r#""cpus":"0-7","threads":4,"memory_bytes":0}}"#,
        "\n"
    );
    let waiting_line = concat!(
        r#"{"v":1,"id":4,"ok":{"kind":"app_assignment","app":7,"generation":5,"#,
        r#""state":"waiting","reason":"no room"}}"#,
        "\n"
    );
    let f = fake(move |req| {
        vec![match req.id {
            3 => line.to_string(),
            _ => waiting_line.to_string(),
        }]
    });
    let mut c = Client::connect(&f.path).unwrap();
    c.next_id = 3;
    let a = c.app_poll(7, None).unwrap();
    let mut want = running(7, 4, 2);
    want.generation = 4;
    assert_eq!(a, want);
    assert_eq!(c.app_poll(7, Some(4)).unwrap(), waiting(7, 5, "no room"));
    drop(c);
    f.thread.join().unwrap();
    // And the types encode to exactly that line.
    assert_eq!(
        atoll_proto::encode(&ResponseEnvelope::ok(3, Reply::AppAssignment(want))),
        line
    );
}

#[test]
fn grants_say_how_many_threads_and_read_in_words() {
    let g = Grant::of(&running(7, 4, 3).state).unwrap();
    assert_eq!(g.parallelism(), 8);
    assert_eq!(
        g.to_string(),
        "mode 3 (t8) on island b: 8 CPUs' time on CPUs 0-7, 8 threads"
    );
    let mut g = g;
    g.threads = None;
    g.cpu_quota = 2.5;
    assert_eq!(g.parallelism(), 3);
    g.cpu_quota = 0.2;
    assert_eq!(g.parallelism(), 1);
    g.threads = Some(0);
    assert_eq!(g.parallelism(), 1);
    g.mode_name.clear();
    g.memory_bytes = 1 << 20;
    assert_eq!(
        g.to_string(),
        "mode 3 on island b: 0.2 CPUs' time on CPUs 0-7, 0 threads, 1048576 bytes of memory"
    );
    assert!(Grant::of(&waiting(7, 5, "x").state).is_none());
    assert_eq!(
        describe(&waiting(7, 5, "no room on any island")),
        "app 7 (generation 5): waiting: no room on any island"
    );
    assert!(describe(&running(7, 2, 0)).starts_with("app 7 (generation 2): mode 0 (t1) on"));
}

const TOML_RECIPE: &str = r#"
name = "crunch"
priority = 1

[[modes]]
id = 0
name = "t1"
value = 0.125
needs = { cpu_quota = 1.0, threads = 1 }

[[modes]]
id = 1
name = "t2"
value = 0.25
needs = { cpu_quota = 2.0, threads = 2 }

[[modes]]
id = 2
name = "t4"
value = 0.5
needs = { cpu_quota = 4.0, threads = 4 }

[[modes]]
id = 3
name = "t8"
value = 1.0
needs = { cpu_quota = 8.0, threads = 8 }
"#;

#[test]
fn recipes_parse_from_toml_and_json_text_and_files() {
    assert_eq!(parse_recipe(TOML_RECIPE).unwrap(), recipe());
    let json = serde_json::to_string_pretty(&recipe()).unwrap();
    assert_eq!(parse_recipe(&format!("\n  {json}")).unwrap(), recipe());

    let dir = tempfile::tempdir().unwrap();
    let toml_path = dir.path().join("crunch.toml");
    std::fs::write(&toml_path, TOML_RECIPE).unwrap();
    assert_eq!(load_recipe(&toml_path).unwrap(), recipe());
    let json_path = dir.path().join("crunch.json");
    std::fs::write(&json_path, &json).unwrap();
    assert_eq!(load_recipe(&json_path).unwrap(), recipe());

    let e = load_recipe(&dir.path().join("none.toml")).unwrap_err();
    assert!(matches!(e, RecipeLoadError::Read { .. }), "{e}");
    assert!(e.to_string().starts_with("cannot read recipe "), "{e}");
}

#[test]
fn bad_recipes_say_where_and_what() {
    let typo = TOML_RECIPE.replace("threads = 4", "thread = 4");
    let e = parse_recipe(&typo).unwrap_err();
    assert!(matches!(e, RecipeLoadError::Syntax { .. }), "{e}");
    let text = e.to_string();
    assert!(text.starts_with("recipe TOML text: "), "{text}");
    assert!(text.contains("line 21"), "{text}");
    assert!(text.contains("thread"), "{text}");

    let e = parse_recipe(r#"{"name":"crunch","modes":[],"color":1}"#).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("recipe JSON text: unknown field `color`"),
        "{e}"
    );

    let e = parse_recipe(&TOML_RECIPE.replace("value = 1.0", "value = 1.5")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "TOML text: recipe crunch: mode 3: value = 1.5: must be between 0 and 1"
    );
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn the_sample_recipe_has_four_modes_of_1_2_4_and_8_threads() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../clients/recipes/awm_parallel.toml");
    let r = load_recipe(&path).unwrap_or_else(|e| panic!("{e}"));
    let threads: Vec<Option<u32>> = r.modes.iter().map(|m| m.needs.threads).collect();
    assert_eq!(threads, [Some(1), Some(2), Some(4), Some(8)]);
    for m in &r.modes {
        assert_eq!(
            Some(atoll_core::num::saturating_u32(m.needs.cpu_quota)),
            m.needs.threads,
            "{m:?}"
        );
    }
}
