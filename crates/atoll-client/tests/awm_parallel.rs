//! The sample application `examples/awm_parallel.rs`, included as a module
//! and run against a scripted fake daemon (polling and reporting at every
//! step, so the requests it sends depend only on the answers), and
//! unmanaged. Small amounts of work; no timing is checked.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::thread::{self, JoinHandle};

use atoll_client::apps::{AppAssignment, AppRunState};
use atoll_client::atoll_proto::{self, decode_request, Reply, Request, ResponseEnvelope};
use atoll_core::CpuSet;

#[allow(dead_code)]
#[path = "../examples/awm_parallel.rs"]
mod app;

use app::{Args, RecipeSource};

fn running(generation: u64, mode: u8, threads: u32) -> AppAssignment {
    AppAssignment {
        app: 3,
        generation,
        state: AppRunState::Running {
            mode,
            mode_name: String::new(),
            island: "a".into(),
            cpu_quota: f64::from(threads),
            cpus: CpuSet::parse("0-1").unwrap(),
            threads: Some(threads),
            memory_bytes: 0,
        },
    }
}

/// Serves one connection: registers app 3, answers polls with `polls` in
/// turn (the last one again after), acknowledges reports and done. Returns
/// the requests.
fn daemon(polls: Vec<AppAssignment>) -> (tempfile::TempDir, PathBuf, JoinHandle<Vec<Request>>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("atoll.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let thread = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut out = stream.try_clone().unwrap();
        let mut seen = Vec::new();
        let mut polls = polls.into_iter();
        let mut last = running(1, 0, 1);
        for line in BufReader::new(stream).lines() {
            let req = decode_request(&line.unwrap()).unwrap();
            let reply = match &req.request {
                Request::AppRegister { .. } => Reply::AppRegistered {
                    app: 3,
                    assignment: last.clone(),
                },
                Request::AppPoll { .. } => {
                    last = polls.next().unwrap_or(last);
                    Reply::AppAssignment(last.clone())
                }
                Request::AppReport { app, .. } => Reply::AppReported {
                    app: *app,
                    goal_gap: 0.5,
                },
                Request::AppDone { app } => Reply::AppDone { app: *app },
                other => panic!("unexpected {other:?}"),
            };
            seen.push(req.request);
            let line = atoll_proto::encode(&ResponseEnvelope::ok(req.id, reply));
            out.write_all(line.as_bytes()).unwrap();
        }
        seen
    });
    (dir, path, thread)
}

fn args(list: &[&str]) -> Args {
    let v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    Args::parse(&v).unwrap()
}

#[test]
fn managed_it_follows_its_working_modes_and_suspends_when_told() {
    let (_dir, socket, thread) = daemon(vec![
        running(1, 1, 2),
        AppAssignment {
            app: 3,
            generation: 2,
            state: AppRunState::Waiting {
                reason: "no room".into(),
            },
        },
        running(3, 2, 4),
    ]);
    let socket = socket.to_str().unwrap().to_string();
    let a = args(&[
        "--socket",
        &socket,
        "--max-cpus",
        "4",
        "--cycles",
        "4",
        "--work",
        "12",
        "--goal-cps",
        "50",
        "--poll-ms",
        "0",
        "--report-ms",
        "0",
    ]);
    let out = app::run(&a).unwrap();
    let seen = thread.join().unwrap();

    assert_eq!(out["mode"], "managed");
    assert_eq!(out["app"], 3);
    assert_eq!(out["cycles"], 4);
    let threads: Vec<u64> = out["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["threads"].as_u64().unwrap())
        .collect();
    assert_eq!(threads, [2, 4]);
    assert_eq!(out["threads_final"], 4);
    assert_eq!(out["reconfigurations"], 1);
    assert_eq!(out["configurations"], 2);
    assert_eq!(out["suspensions"], 1);
    assert_eq!(out["goal_gap"], 0.5);

    // The recipe went inline without the 8-CPU mode; progress was
    // reported as a counter with the goal; done came last.
    let Request::AppRegister {
        recipe: atoll_client::apps::RecipeRef::Inline(r),
        pid: None,
    } = &seen[0]
    else {
        panic!("{:?}", seen[0]);
    };
    assert_eq!(r.name.as_str(), "awm_parallel");
    assert_eq!(r.modes.len(), 3);
    let reports: Vec<u64> = seen
        .iter()
        .filter_map(|r| match r {
            Request::AppReport {
                cycles,
                goal_cps: Some(g),
                ..
            } if *g == 50.0 => Some(*cycles),
            _ => None,
        })
        .collect();
    assert_eq!(reports.last(), Some(&4));
    assert!(reports.windows(2).all(|w| w[0] < w[1]), "{reports:?}");
    assert_eq!(seen.last(), Some(&Request::AppDone { app: 3 }));

    // The same work unmanaged, on 3 threads: the same checksum.
    let un = app::run(&args(&[
        "--unmanaged",
        "--threads",
        "3",
        "--cycles",
        "4",
        "--work",
        "12",
    ]))
    .unwrap();
    assert_eq!(un["mode"], "unmanaged");
    assert_eq!(un["cycles"], 4);
    assert_eq!(un["threads_final"], 3);
    assert_eq!(un["reconfigurations"], 0);
    assert_eq!(un["checksum"], out["checksum"]);
    assert_ne!(un["checksum"], 0);
}

#[test]
fn the_command_line_is_checked() {
    let parse = |l: &[&str]| Args::parse(&l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let a = parse(&["--recipe-name", "crunch", "--cycles", "7"]).unwrap();
    assert_eq!(a.recipe, RecipeSource::Named("crunch".into()));
    assert_eq!((a.cycles, a.unmanaged), (7, None));
    assert_eq!(
        parse(&["--unmanaged"]).unwrap_err(),
        "--unmanaged needs --threads"
    );
    assert_eq!(
        parse(&["--threads", "2"]).unwrap_err(),
        "--threads goes with --unmanaged"
    );
    assert_eq!(
        parse(&["--cycles", "0"]).unwrap_err(),
        "--cycles \"0\": must be above 0"
    );
    assert_eq!(parse(&["--work"]).unwrap_err(), "--work needs a value");
    assert_eq!(
        parse(&["--color", "x"]).unwrap_err(),
        "unknown option --color"
    );
    // No daemon: the error says so.
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("none.sock");
    let e = app::run(&parse(&["--socket", sock.to_str().unwrap()]).unwrap()).unwrap_err();
    assert!(e.contains("atoll daemon is not running"), "{e}");
    // Every mode above the cap: refused before connecting anywhere (the
    // socket does not exist, yet that is not the error).
    let e = app::run(&parse(&["--socket", sock.to_str().unwrap(), "--max-cpus", "0.5"]).unwrap())
        .unwrap_err();
    assert_eq!(
        e,
        "recipe awm_parallel: no working mode needs at most 0.5 CPUs"
    );
}
