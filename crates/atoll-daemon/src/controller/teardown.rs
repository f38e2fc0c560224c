//! Giving everything back: processes to the cgroups they came from, groups
//! removed deepest first, then whatever the backend changed outside the
//! root, then the state file.

use std::time::Duration;

use atoll_core::backend::{Backend, External};
use atoll_core::decision::Reason;
use atoll_core::plan::GroupPath;

use super::{placement, Controller, ControllerError};

/// Rounds of emptying groups before giving up (a process may fork while
/// its parent is being moved).
const ROUNDS: usize = 10;

/// How long teardown waits for groups whose tasks are still exiting.
pub const BUSY_WAIT: Duration = Duration::from_secs(5);
const BUSY_PAUSE: Duration = Duration::from_millis(100);

/// Deepest group teardown looks for under atoll's root (atoll makes three
/// levels; someone may have made more inside them).
const MAX_DEPTH: usize = 32;

/// Every group under atoll's root that exists in the kernel, deepest
/// first, the root last.
pub fn kernel_groups(backend: &dyn Backend) -> Vec<GroupPath> {
    let mut out = Vec::new();
    let mut stack = vec![(GroupPath::root(), 0usize)];
    while let Some((g, depth)) = stack.pop() {
        if depth < MAX_DEPTH {
            for child in backend.children(&g).unwrap_or_default() {
                let p = if g.is_root() {
                    GroupPath::from_relative(&child)
                } else {
                    GroupPath::from_relative(&format!("{}/{child}", g.as_str()))
                };
                stack.push((p, depth + 1));
            }
        }
        out.push(g);
    }
    out.sort_by_key(|g| std::cmp::Reverse(g.depth()));
    out
}

impl Controller {
    /// Every process back where it came from, every group atoll made
    /// removed.
    ///
    /// The layers are lifted first (the isolation model's disk holds and
    /// idle CPU priority, the communication boosts): a task killed while
    /// held on disk finishes its queued IO before it leaves its group, and
    /// at the trickle rate that keeps the group busy for seconds. A group
    /// that is still busy (a task is exiting) is tried again for up to
    /// [`BUSY_WAIT`].
    pub fn teardown(&mut self) -> Result<(), ControllerError> {
        if let Some(net) = &mut self.net {
            let now = self.env.clock.now();
            for w in net.teardown(now, &mut self.log) {
                tracing::warn!("teardown: {w}");
            }
            self.persist.stage_network(net.saved_state());
        }
        // The frequency limits go back with the policies just below; the
        // CPU caps with the groups.
        let _ = self.powercap.lift();
        if let Some(freq) = &mut self.freq {
            let now = self.env.clock.now();
            for w in freq.teardown(now, &mut self.log) {
                tracing::warn!("teardown: {w}");
            }
        }
        self.iso.lift(&mut self.compose, Reason::Teardown);
        self.comm
            .end_boosts(&mut *self.env.tasks, &mut self.compose);
        if let Err(e) = self.flush() {
            tracing::warn!("teardown: lifting the layers: {e}");
        }
        for _ in 0..ROUNDS {
            if self.release_all() == 0 {
                break;
            }
        }
        let mut left = Vec::new();
        let started = std::time::Instant::now();
        loop {
            left.clear();
            let mut busy = false;
            let now = self.now();
            for g in kernel_groups(&*self.env.backend) {
                if let Err(e) = self.compose.remove(
                    &g,
                    &mut *self.env.backend,
                    &mut self.log,
                    now,
                    Reason::Teardown,
                ) {
                    busy |= e.is_busy();
                    left.push(format!("{g} ({e})"));
                }
            }
            if !busy || started.elapsed() >= BUSY_WAIT {
                break;
            }
            std::thread::sleep(BUSY_PAUSE);
            self.release_all();
        }
        match self.env.backend.release() {
            Ok(lines) => lines.iter().for_each(|l| tracing::info!("teardown: {l}")),
            Err(e) => left.push(format!("backend release ({e})")),
        }
        if left.is_empty() {
            self.persist.remove()?;
            Ok(())
        } else {
            // The layers were lifted: nothing is on loan or tuned any more.
            self.persist
                .stage_coord(atoll_core::coord::CoordSnapshot::default());
            if let Err(e) = self.persist.save(&self.reg, &*self.env.backend) {
                left.push(format!("the state file ({e})"));
            }
            Err(ControllerError::Leftover(left))
        }
    }

    /// Moves every process of every group of atoll's back to its origin
    /// (those in scopes atoll started too; never those of a systemd unit
    /// atoll only sets properties of); returns how many moved.
    fn release_all(&mut self) -> usize {
        let now = self.now();
        let mut groups = kernel_groups(&*self.env.backend);
        groups.extend(
            self.env
                .backend
                .bindings()
                .into_iter()
                .filter(|(_, to)| matches!(to, External::Scope(_)))
                .map(|(g, _)| g),
        );
        let mut p = placement(
            &mut self.env,
            &mut self.reg,
            &mut self.log,
            now,
            &self.opts.self_origin,
        );
        groups
            .iter()
            .map(|g| p.release_group(g, Reason::Teardown))
            .sum()
    }
}
