//! Drift repair: each epoch checks a slice of the groups against what atoll
//! wrote, and lets go of processes someone moved out of their unit.

use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::num::saturating_usize;
use atoll_core::plan::GroupPath;

use super::{Controller, REPAIR_RATE, REPAIR_RATE_WATCHED};

impl Controller {
    /// Checks this epoch's slice of the groups for drift (see
    /// [`crate::compose::Composer::repair_next`]): each group once per repair
    /// interval. A backend that watches writes ([`Backend::watches_writes`])
    /// names the groups someone wrote, checked at once; the round then only
    /// has to find what the kernel changed itself (or a process moved out),
    /// and goes at [`REPAIR_RATE_WATCHED`].
    ///
    /// [`Backend::watches_writes`]: atoll_core::backend::Actuator::watches_writes
    pub(super) fn repair(&mut self) {
        let watched = self.env.backend.watches_writes();
        if watched {
            let mut written = self.env.backend.written_behind();
            if !written.is_empty() {
                let plan = self.reg.plan();
                written.retain(|g| plan.groups.iter().any(|p| &p.path == g));
                self.check_groups(&written);
            }
        }
        let rate = if watched {
            REPAIR_RATE_WATCHED
        } else {
            REPAIR_RATE
        };
        let groups = self.reg.plan().groups.len() as f64;
        let round = self.repair_every.as_secs_f64().max(groups / rate).max(1e-3);
        self.repair_owed += groups * self.epoch_len().as_secs_f64() / round;
        let count = self.repair_owed.floor();
        if count < 1.0 {
            return;
        }
        self.repair_owed -= count;
        let now = self.now();
        let groups = self.compose.repair_next(
            &self.reg,
            &mut *self.env.backend,
            &mut self.log,
            now,
            saturating_usize(count),
        );
        self.after_check(&groups, now);
    }

    /// Checks `groups` now, out of the round's turn.
    fn check_groups(&mut self, groups: &[GroupPath]) {
        if groups.is_empty() {
            return;
        }
        let now = self.now();
        self.compose
            .repair(groups, &mut *self.env.backend, &mut self.log, now);
        self.after_check(groups, now);
    }

    fn after_check(&mut self, groups: &[GroupPath], now: Duration) {
        for g in groups {
            self.let_go_of_moved(g, now);
        }
        self.remove_strays_in(groups);
        if self.compose.pending() {
            self.settle();
        }
    }

    /// The processes recorded in unit group `g` that someone moved out of
    /// it are let go of (a decision): atoll does not fight whoever moved
    /// them, and does not report them as its own.
    fn let_go_of_moved(&mut self, g: &GroupPath, now: Duration) {
        if self.services.bound(g).is_some() {
            return; // its processes are where systemd keeps them
        }
        for pid in self.reg.managed_in(g) {
            let Ok(info) = self.env.procs.info(pid) else {
                continue; // gone: the next adoption step forgets it
            };
            let now_in = self.env.backend.group_of(&info.cgroups);
            if now_in.as_ref() == Some(g) {
                continue;
            }
            let to = info
                .cgroups
                .unified()
                .or_else(|| info.cgroups.controller("cpu"))
                .unwrap_or("?")
                .to_string();
            self.reg.forget(pid);
            self.log.record(atoll_core::decision::Decision {
                at: now,
                action: atoll_core::decision::Action::RestoreProcess {
                    pid,
                    to: to.clone(),
                },
                why: Reason::Housekeeping {
                    detail: format!(
                        "pid {pid} ({}) left {g}: someone moved it to {to}; atoll lets it go",
                        info.comm
                    ),
                },
            });
        }
    }
}
