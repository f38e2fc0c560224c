//! The runtime library of simulated reconfigurable applications.
//!
//! In a managed variant, after every epoch [`Runtime::step`] does for each
//! process of the scenario's `[managed]` apps what atoll's client library
//! does for a real one, through the same API requests
//! (`Controller::handle` with a root caller):
//!
//! - a new process is registered with its recipe (`app_register`) and
//!   paused until its first assignment (it waits for a working mode);
//! - its assignment is polled (`app_poll`): running in a mode sets the
//!   simulated app's thread count to the mode's `threads` (or its quota
//!   rounded up, if the mode gives none), from its next round on; waiting
//!   (not planned yet, or blocked and frozen) pauses it at its next round
//!   boundary;
//! - its progress is reported (`app_report`) as the rounds it completed;
//! - a process that finished leaves (`app_done`).
//!
//! The engine knows nothing of the daemon: it only has
//! [`Engine::set_threads`] and [`Engine::malleable`].

use std::collections::BTreeMap;
use std::sync::mpsc;

use atoll_daemon::command::{Caller, Command};
use atoll_daemon::controller::Controller;
use atoll_proto::apps::{AppAssignment, AppRunState, RecipeRef};
use atoll_proto::{Reply, Request};
use atoll_sim::Engine;
use serde::{Deserialize, Serialize};

/// What the runtime did over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeStats {
    /// Processes registered.
    pub registered: u64,
    /// Changes of thread count applied (pauses and resumes included).
    pub thread_changes: u64,
    /// Requests the daemon refused (each is also logged as a warning in
    /// `errors`).
    pub refused: u64,
    /// The first few refusals, in words.
    pub errors: Vec<String>,
    /// The first changes of thread count: (simulated s, pid, threads).
    pub changes: Vec<(f64, u32, u32)>,
}

/// How many changes [`RuntimeStats::changes`] keeps.
const KEEP_CHANGES: usize = 256;

#[derive(Debug)]
struct Reg {
    app: u64,
    generation: Option<u64>,
    threads: u32,
    reported: u32,
    done: bool,
}

/// The runtime library for the managed apps of one run.
#[derive(Debug)]
pub struct Runtime {
    recipes: Vec<(String, String)>,
    regs: BTreeMap<u32, Reg>,
    stats: RuntimeStats,
    next_id: u64,
}

const ROOT: Caller = Caller {
    uid: 0,
    gid: 0,
    pid: 0,
};

impl Runtime {
    /// A runtime for `managed` (app name to recipe name).
    pub fn new(managed: &BTreeMap<String, String>) -> Self {
        Self {
            recipes: managed
                .iter()
                .map(|(a, r)| (a.clone(), r.clone()))
                .collect(),
            regs: BTreeMap::new(),
            stats: RuntimeStats::default(),
            next_id: 1,
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> RuntimeStats {
        self.stats.clone()
    }

    fn ask(&mut self, c: &mut Controller, request: Request) -> Option<Reply> {
        let (tx, rx) = mpsc::channel();
        let id = self.next_id;
        self.next_id += 1;
        c.handle(Command::Api {
            caller: ROOT,
            id,
            request,
            reply: tx,
        });
        let resp = rx.try_recv().ok()?;
        match (resp.ok, resp.err) {
            (Some(r), _) => Some(r),
            (None, e) => {
                self.stats.refused += 1;
                if self.stats.errors.len() < 8 {
                    self.stats.errors.push(format!("{e:?}"));
                }
                None
            }
        }
    }

    /// One pass after an epoch: register new processes, follow their
    /// assignments, report progress, leave when finished.
    pub fn step(&mut self, c: &mut Controller, e: &mut Engine) {
        for (app, recipe) in self.recipes.clone() {
            for pid in e.pids(&app) {
                if self.regs.contains_key(&pid) {
                    continue;
                }
                let request = Request::AppRegister {
                    recipe: RecipeRef::Named(recipe.clone()),
                    pid: Some(pid),
                };
                if let Some(Reply::AppRegistered { app, assignment }) = self.ask(c, request) {
                    self.stats.registered += 1;
                    let max = e.malleable(pid).map_or(0, |m| m.max_threads);
                    self.regs.insert(
                        pid,
                        Reg {
                            app,
                            generation: None,
                            threads: max,
                            reported: 0,
                            done: false,
                        },
                    );
                    self.apply(e, pid, &assignment);
                }
            }
        }
        let pids: Vec<u32> = self.regs.keys().copied().collect();
        for pid in pids {
            let Some(state) = e.malleable(pid) else {
                continue;
            };
            let Some((id, reported, after)) = self
                .regs
                .get(&pid)
                .filter(|r| !r.done)
                .map(|r| (r.app, r.reported, r.generation))
            else {
                continue;
            };
            if !state.alive {
                // The daemon may have seen the exit first (it checks every
                // epoch) and removed it: a refusal here is expected.
                let (tx, _rx) = mpsc::channel();
                c.handle(Command::Api {
                    caller: ROOT,
                    id: 0,
                    request: Request::AppDone { app: id },
                    reply: tx,
                });
                if let Some(r) = self.regs.get_mut(&pid) {
                    r.done = true;
                }
                continue;
            }
            if state.rounds_done != reported {
                let request = Request::AppReport {
                    app: id,
                    cycles: u64::from(state.rounds_done),
                    goal_cps: None,
                };
                self.ask(c, request);
                if let Some(r) = self.regs.get_mut(&pid) {
                    r.reported = state.rounds_done;
                }
            }
            if let Some(Reply::AppAssignment(a)) = self.ask(c, Request::AppPoll { app: id, after })
            {
                self.apply(e, pid, &a);
            }
        }
    }

    /// Acts on an assignment it has not acted on yet.
    fn apply(&mut self, e: &mut Engine, pid: u32, a: &AppAssignment) {
        let Some(reg) = self.regs.get_mut(&pid) else {
            return;
        };
        if reg.generation == Some(a.generation) {
            return;
        }
        reg.generation = Some(a.generation);
        let n = match &a.state {
            AppRunState::Waiting { .. } => 0,
            AppRunState::Running {
                threads, cpu_quota, ..
            } => threads
                .unwrap_or_else(|| atoll_core::num::saturating_u32(cpu_quota.ceil().max(1.0))),
        };
        if n != reg.threads {
            reg.threads = n;
            self.stats.thread_changes += 1;
            if self.stats.changes.len() < KEEP_CHANGES {
                let t = e.sim().now().as_secs_f64();
                self.stats.changes.push((t, pid, n));
            }
        }
        e.set_threads(pid, n);
    }
}
