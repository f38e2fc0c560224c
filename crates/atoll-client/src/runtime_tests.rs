//! The execution loop against a scripted fake daemon, on a manual clock:
//! which requests it sends at which step, never how long anything takes.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use atoll_core::clock::{Clock, ManualClock};
use atoll_proto::apps::{AppAssignment, RecipeRef};

use super::apps::{recipe, running, waiting};
use super::*;
use crate::apps::{
    AppRuntime, Grant, Progress, Reconfigurable, RunError, RuntimeOptions, Step, StopHandle,
    Summary, Timer, Workload,
};

/// A clock that moves only when told to or slept on; it can stop a runtime
/// on its `n`th sleep.
#[derive(Clone, Debug, Default)]
struct FakeTimer {
    clock: ManualClock,
    stop_on_sleep: Rc<RefCell<Option<(u32, StopHandle)>>>,
}

impl FakeTimer {
    fn advance_ms(&self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
    }

    fn ms(&self) -> u128 {
        self.clock.now().as_millis()
    }
}

impl Timer for FakeTimer {
    fn now(&self) -> Duration {
        self.clock.now()
    }

    fn sleep(&self, d: Duration) {
        self.clock.advance(d);
        if let Some((n, stop)) = self.stop_on_sleep.borrow_mut().as_mut() {
            *n -= 1;
            if *n == 0 {
                stop.stop();
            }
        }
    }
}

/// Registers app 7 with `first`; answers polls with `polls` in turn (the
/// last one again once they run out), reports with the gap `cycles / 100`,
/// and refuses polls with `not_found` after `polls_ok` polls.
fn scripted(first: AppAssignment, polls: Vec<AppAssignment>, polls_ok: usize) -> Fake {
    let mut polls = VecDeque::from(polls);
    let mut last = first.clone();
    let mut polled = 0;
    fake(move |req| {
        let reply = match &req.request {
            Request::AppRegister { .. } => Reply::AppRegistered {
                app: first.app,
                assignment: first.clone(),
            },
            Request::AppPoll { app, .. } => {
                polled += 1;
                if polled > polls_ok {
                    return vec![err(req.id, ErrorCode::NotFound, &format!("no app {app}"))];
                }
                if let Some(a) = polls.pop_front() {
                    last = a;
                }
                Reply::AppAssignment(last.clone())
            }
            Request::AppReport { app, cycles, .. } => Reply::AppReported {
                app: *app,
                goal_gap: *cycles as f64 / 100.0,
            },
            Request::AppDone { app } => Reply::AppDone { app: *app },
            _ => return vec![err(req.id, ErrorCode::BadRequest, "unexpected")],
        };
        vec![ok(req.id, reply)]
    })
}

/// The requests the fake saw, in short.
fn requests(f: Fake) -> Vec<String> {
    f.thread
        .join()
        .unwrap()
        .into_iter()
        .map(|r| match r.request {
            Request::AppRegister { .. } => "register".to_string(),
            Request::AppPoll { app, after } => format!("poll {app} after {after:?}"),
            Request::AppReport {
                app,
                cycles,
                goal_cps,
            } => format!("report {app} {cycles} goal {goal_cps:?}"),
            Request::AppDone { app } => format!("done {app}"),
            other => format!("{other:?}"),
        })
        .collect()
}

fn options(poll_ms: u64, report_ms: u64, goal_cps: Option<f64>) -> RuntimeOptions {
    RuntimeOptions {
        pid: None,
        poll_every: Duration::from_millis(poll_ms),
        report_every: Duration::from_millis(report_ms),
        goal_cps,
    }
}

fn start(f: &Fake, options: RuntimeOptions, timer: &FakeTimer) -> AppRuntime<FakeTimer> {
    let c = Client::connect(&f.path).unwrap();
    AppRuntime::with_timer(c, RecipeRef::Inline(recipe()), options, timer.clone()).unwrap()
}

fn grant(a: &AppAssignment) -> Grant {
    Grant::of(&a.state).unwrap()
}

#[test]
fn polls_and_reports_at_most_as_often_as_asked_and_configures_on_news() {
    let f = scripted(
        running(7, 1, 0),
        vec![running(7, 1, 0), running(7, 2, 1)],
        99,
    );
    let timer = FakeTimer::default();
    let mut rt = start(&f, options(100, 250, Some(10.0)), &timer);
    let mut configured = Vec::new();
    for _ in 0..12 {
        // Each cycle takes 40 ms.
        match rt.next_step().unwrap() {
            Step::Configure(g) => configured.push((g.mode, timer.ms())),
            Step::Run => {
                timer.advance_ms(40);
                rt.cycles_done(1);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(configured, [(0, 0), (1, 240)]);
    assert_eq!(rt.grant(), Some(grant(&running(7, 2, 1))));
    assert_eq!(rt.assignment(), &running(7, 2, 1));
    assert_eq!(
        rt.progress(),
        Progress {
            app: 7,
            cycles: 10,
            goal_gap: Some(0.07),
            generation: 2
        }
    );
    let summary = rt.done().unwrap();
    assert_eq!(
        summary,
        Summary {
            app: 7,
            cycles: 10,
            configurations: 2,
            suspensions: 0,
            polls: 3,
            reports: 2,
            goal_gap: Some(0.1),
        }
    );
    assert_eq!(
        requests(f),
        [
            "register",
            "poll 7 after Some(1)",
            "poll 7 after Some(1)",
            "report 7 7 goal Some(10.0)",
            "poll 7 after Some(2)",
            "report 7 10 goal Some(10.0)",
            "done 7",
        ]
    );
}

#[test]
fn a_waiting_application_is_suspended_and_blocks_polling_until_resumed() {
    let no_room = "no island has room for its smallest working mode";
    let f = scripted(
        waiting(7, 1, no_room),
        vec![
            waiting(7, 1, no_room),
            waiting(7, 1, no_room),
            running(7, 2, 0),
        ],
        99,
    );
    let timer = FakeTimer::default();
    let mut rt = start(&f, options(100, 1000, None), &timer);
    assert_eq!(rt.grant(), None);
    assert_eq!(rt.next_step().unwrap(), Step::Suspend(no_room.into()));
    assert_eq!(rt.grant(), None);
    // Blocks: three pauses of 100 ms, a poll after each.
    assert_eq!(
        rt.next_step().unwrap(),
        Step::Configure(grant(&running(7, 2, 0)))
    );
    assert_eq!(timer.ms(), 300);
    assert_eq!(rt.next_step().unwrap(), Step::Run);
    let s = rt.done().unwrap();
    assert_eq!((s.suspensions, s.configurations, s.polls), (1, 1, 3));
    assert_eq!(
        requests(f),
        [
            "register",
            "poll 7 after Some(1)",
            "poll 7 after Some(1)",
            "poll 7 after Some(1)",
            "done 7",
        ]
    );
}

#[test]
fn a_new_generation_of_the_same_state_is_not_acted_on_again() {
    let f = scripted(running(7, 1, 0), vec![running(7, 3, 0)], 99);
    let timer = FakeTimer::default();
    let mut rt = start(&f, options(100, 10_000, None), &timer);
    assert!(matches!(rt.next_step().unwrap(), Step::Configure(_)));
    for _ in 0..2 {
        timer.advance_ms(100);
        assert_eq!(rt.next_step().unwrap(), Step::Run);
    }
    assert_eq!(rt.progress().generation, 3);
    assert_eq!(rt.summary().configurations, 1);
    drop(rt);
    assert_eq!(
        requests(f),
        [
            "register",
            "poll 7 after Some(1)",
            "poll 7 after Some(3)",
            "done 7"
        ]
    );
}

#[test]
fn stopping_releases_and_done_reports_what_is_left() {
    let f = scripted(running(7, 1, 2), vec![], 99);
    let timer = FakeTimer::default();
    let mut rt = start(&f, options(100, 1000, None), &timer);
    let stop = rt.stop_handle();
    assert!(matches!(rt.next_step().unwrap(), Step::Configure(g) if g.threads == Some(4)));
    rt.cycles_done(3);
    rt.cycles_done(2);
    assert!(!stop.is_stopped());
    std::thread::spawn(move || stop.stop()).join().unwrap();
    timer.advance_ms(5000);
    assert_eq!(rt.next_step().unwrap(), Step::Release);
    assert_eq!(rt.next_step().unwrap(), Step::Release);
    let s = rt.done().unwrap();
    assert_eq!(
        (s.cycles, s.reports, s.polls, s.goal_gap),
        (5, 1, 0, Some(0.05))
    );
    assert_eq!(requests(f), ["register", "report 7 5 goal None", "done 7"]);
}

#[test]
fn a_stop_while_suspended_ends_the_wait_and_a_drop_says_done() {
    let f = scripted(waiting(7, 1, "later"), vec![], 99);
    let timer = FakeTimer::default();
    let mut rt = start(&f, options(50, 1000, None), &timer);
    *timer.stop_on_sleep.borrow_mut() = Some((2, rt.stop_handle()));
    assert_eq!(rt.next_step().unwrap(), Step::Suspend("later".into()));
    assert_eq!(rt.next_step().unwrap(), Step::Release);
    assert_eq!(timer.ms(), 100);
    drop(rt);
    assert_eq!(requests(f), ["register", "poll 7 after Some(1)", "done 7"]);
}

#[test]
fn a_changed_goal_is_reported_even_without_new_cycles() {
    let f = scripted(running(7, 1, 0), vec![], 99);
    let timer = FakeTimer::default();
    let mut rt = start(&f, options(1000, 0, None), &timer);
    assert!(matches!(rt.next_step().unwrap(), Step::Configure(_)));
    assert_eq!(rt.next_step().unwrap(), Step::Run);
    rt.set_goal_cps(Some(5.0)).unwrap();
    assert_eq!(rt.next_step().unwrap(), Step::Run);
    let e = rt.set_goal_cps(Some(f64::INFINITY)).unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    rt.set_goal_cps(None).unwrap();
    drop(rt);
    assert_eq!(
        requests(f),
        ["register", "report 7 0 goal Some(5.0)", "done 7"]
    );
}

/// Records the callbacks; finishes after `cycles` cycles, each 60 ms long.
struct Recorder {
    timer: FakeTimer,
    cycles: u64,
    events: Vec<String>,
    fail_configure: bool,
}

impl Reconfigurable for Recorder {
    type Error = String;

    fn setup(&mut self) -> Result<(), String> {
        self.events.push("setup".into());
        Ok(())
    }

    fn configure(&mut self, grant: &Grant) -> Result<(), String> {
        self.events.push(format!("configure {}", grant.mode));
        if self.fail_configure {
            return Err(format!("no room for {} threads", grant.parallelism()));
        }
        Ok(())
    }

    fn suspend(&mut self, reason: &str) -> Result<(), String> {
        self.events.push(format!("suspend: {reason}"));
        Ok(())
    }

    fn run(&mut self) -> Result<Workload, String> {
        if self.cycles == 0 {
            self.events.push("finished".into());
            return Ok(Workload::Finished);
        }
        self.cycles -= 1;
        self.timer.advance_ms(60);
        self.events.push("run".into());
        Ok(Workload::Continue)
    }

    fn monitor(&mut self, p: &Progress) -> Result<(), String> {
        self.events.push(format!("monitor {}", p.cycles));
        Ok(())
    }

    fn release(&mut self) -> Result<(), String> {
        self.events.push("release".into());
        Ok(())
    }
}

fn recorder(timer: &FakeTimer, cycles: u64) -> Recorder {
    Recorder {
        timer: timer.clone(),
        cycles,
        events: Vec::new(),
        fail_configure: false,
    }
}

#[test]
fn run_calls_back_in_the_order_of_the_papers_execution_loop() {
    let busy = "a higher priority level needs the room";
    let f = scripted(
        running(7, 1, 0),
        vec![waiting(7, 2, busy), running(7, 3, 2)],
        99,
    );
    let timer = FakeTimer::default();
    let rt = start(&f, options(100, 1000, None), &timer);
    let mut app = recorder(&timer, 4);
    let s = rt.run(&mut app).unwrap();
    assert_eq!(
        app.events,
        [
            "setup",
            "configure 0",
            "run",
            "monitor 1",
            "run",
            "monitor 2",
            &format!("suspend: {busy}"),
            "configure 2",
            "run",
            "monitor 3",
            "run",
            "monitor 4",
            "finished",
            "release",
        ]
    );
    assert_eq!(
        s,
        Summary {
            app: 7,
            cycles: 4,
            configurations: 2,
            suspensions: 1,
            polls: 3,
            reports: 1,
            goal_gap: Some(0.04),
        }
    );
    assert_eq!(
        requests(f),
        [
            "register",
            "poll 7 after Some(1)",
            "poll 7 after Some(2)",
            "poll 7 after Some(3)",
            "report 7 4 goal None",
            "done 7",
        ]
    );
}

#[test]
fn failures_of_the_daemon_and_of_the_application_end_the_loop() {
    // Polling at every step, the daemon forgets the application at the
    // third poll.
    let f = scripted(running(7, 1, 0), vec![], 2);
    let timer = FakeTimer::default();
    let rt = start(&f, options(0, 1000, None), &timer);
    let mut app = recorder(&timer, 10);
    let e = rt.run(&mut app).unwrap_err();
    assert!(matches!(&e, RunError::Client(c) if c.is_not_found()), "{e}");
    assert_eq!(e.to_string(), "not found: no app 7");
    assert_eq!(app.events, ["setup", "configure 0", "run", "monitor 1"]);
    // The runtime, dropped, still said done.
    assert_eq!(
        requests(f),
        [
            "register",
            "poll 7 after None",
            "poll 7 after Some(1)",
            "poll 7 after Some(1)",
            "done 7"
        ]
    );

    let f = scripted(running(7, 1, 3), vec![], 99);
    let rt = start(&f, options(100, 1000, None), &timer);
    let mut app = recorder(&timer, 10);
    app.fail_configure = true;
    let e = rt.run(&mut app).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the application failed: no room for 8 threads"
    );
    assert!(matches!(e, RunError::App(_)));
    assert_eq!(requests(f), ["register", "done 7"]);
}

#[test]
fn a_bad_goal_is_refused_before_registering() {
    let f = scripted(running(7, 1, 0), vec![], 99);
    let c = Client::connect(&f.path).unwrap();
    let e = AppRuntime::with_timer(
        c,
        RecipeRef::Named("crunch".into()),
        options(100, 100, Some(0.0)),
        FakeTimer::default(),
    )
    .unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(requests(f).is_empty());
}
