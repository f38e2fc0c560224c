//! Drift repair: each epoch checks a slice of the groups against what atoll
//! wrote, and lets go of processes someone moved out of their unit.

use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::num::saturating_usize;
use atoll_core::plan::GroupPath;

use super::{Controller, REPAIR_RATE};

impl Controller {
    /// Checks this epoch's slice of the groups for drift (see
    /// [`crate::compose::Composer::repair_next`]): each group once per repair interval.
    pub(super) fn repair(&mut self) {
        let groups = self.reg.plan().groups.len() as f64;
        let round = self
            .repair_every
            .as_secs_f64()
            .max(groups / REPAIR_RATE)
            .max(1e-3);
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
        for g in &groups {
            self.let_go_of_moved(g, now);
        }
        self.remove_strays_in(&groups);
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
