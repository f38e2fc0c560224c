//! Where the CPU pressure of a unit that `react_pressure` watches comes
//! from: a PSI trigger while the unit is quiet, the figures read every
//! epoch otherwise.
//!
//! The reactive policy ([`policy::pressure_step`](super::policy::pressure_step))
//! needs a unit's pressure every epoch only while it could act on it:
//!
//! - a unit **not tuned up** acts only when its pressure rises above the
//!   threshold `P`: a trigger is armed on its group's `cpu.pressure` (a
//!   `some` stall of `P` % of the window: [`StallTrigger::percent_of`]),
//!   and its pressure file is not read until the trigger fires;
//! - once it fired, the unit is read every epoch as before and the policy
//!   decides (a tune up, usually);
//! - a unit **tuned up** is read every epoch: a trigger cannot tell that
//!   pressure fell, and the policy tunes it back down below `P ×`
//!   [`RELAX_BELOW`](super::policy::RELAX_BELOW);
//! - a unit read every epoch is armed again once it has been quiet (not
//!   tuned up, its pressure at most `P`) for one trigger window: as long
//!   as the trigger looked, so a burst that fired it is over.
//!
//! A unit watched by several overlays gets one trigger, at the lowest
//! threshold. The window is [`WINDOW`], or the shortest the watch may arm
//! if longer (2 s without `CAP_SYS_RESOURCE`).
//!
//! **Fallback.** Without a watch (no PSI, the simulator) or once the backend
//! turns out to have no per-group pressure file (cgroup v1 without
//! `cgroup1 psi`), the kernel refuses the trigger's values, or polling
//! fails, every unit is read every epoch, as before triggers, and the
//! status says why. A group whose file could not take a trigger (not there
//! yet, no descriptor left, the watch full) is read every epoch and tried
//! again after [`RETRY`]. A group removed while armed (the watch reports it
//! gone) is forgotten: if the unit is still watched, it starts over.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use atoll_core::backend::Monitor;
use atoll_core::plan::GroupPath;
use atoll_core::pressure::{PressureWatch, PressureWatchError, StallTrigger};
use atoll_proto::coord::PressureSource;

/// The trigger window asked for; the watch may need a longer one.
pub const WINDOW: Duration = Duration::from_millis(500);

/// The longest window the kernel accepts.
const MAX_WINDOW: Duration = Duration::from_secs(10);

/// How long a group whose trigger could not be armed is read every epoch
/// before arming is tried again.
pub const RETRY: Duration = Duration::from_secs(10);

/// `source` when triggers are used.
pub const TRIGGERS: &str = "triggers";
/// `source` when every unit is read every epoch.
pub const AVERAGES: &str = "averages";

/// Where one group's pressure comes from now.
#[derive(Clone, Debug, PartialEq)]
enum Watch {
    /// A trigger is armed: not read until it fires.
    Armed(StallTrigger),
    /// Read every epoch; quiet since then, if it is.
    Reading { quiet_since: Option<Duration> },
    /// Read every epoch: no trigger could be armed, because `why`; tried
    /// again at `retry_at`.
    NoTrigger { why: String, retry_at: Duration },
}

/// What the step does with a unit's pressure this epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Its trigger is armed and has not fired: nothing to read.
    Wait,
    /// A trigger was armed just now: nothing to read, and the counters of
    /// the last read are stale (the next read starts a new window).
    Armed,
    /// Read it.
    Read,
}

/// The triggers and what each watched group waits for.
pub(crate) struct PressureWatcher {
    watch: Option<Box<dyn PressureWatch>>,
    /// Why every unit is read every epoch, when it is.
    off: Option<String>,
    /// Whether the backend was asked for the root's pressure file.
    checked: bool,
    groups: BTreeMap<GroupPath, Watch>,
    /// Groups watched at the last [`retain`](Self::retain).
    watched: usize,
    fired: u64,
}

impl std::fmt::Debug for PressureWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PressureWatcher")
            .field("watch", &self.watch.as_ref().map(|w| w.kind()))
            .field("off", &self.off)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl Default for PressureWatcher {
    fn default() -> Self {
        Self {
            watch: None,
            off: Some("no PSI trigger watch was set up".into()),
            checked: false,
            groups: BTreeMap::new(),
            watched: 0,
            fired: 0,
        }
    }
}

impl PressureWatcher {
    /// Units wait on triggers of `watch` from now on.
    pub fn set_watch(&mut self, watch: Box<dyn PressureWatch>) {
        self.watch = Some(watch);
        self.off = None;
        self.checked = false;
        self.groups.clear();
    }

    /// Every unit is read every epoch, because `why`.
    pub fn set_averages(&mut self, why: impl Into<String>) {
        self.watch = None;
        self.off = Some(why.into());
        self.groups.clear();
    }

    /// The window of the triggers armed.
    fn window(&self) -> Duration {
        let least = self.watch.as_ref().map_or(WINDOW, |w| w.min_window());
        WINDOW.max(least).min(MAX_WINDOW)
    }

    /// Gives up on triggers: every unit is read every epoch from now on.
    fn turn_off(&mut self, why: String) {
        tracing::warn!("CPU pressure: reading every unit every epoch: {why}");
        self.watch = None;
        self.off = Some(why);
        self.groups.clear();
    }

    /// The start of a step: polls the triggers (without waiting). Units
    /// whose trigger fired are read from now on. Returns the groups that
    /// are gone, whose last figures the caller forgets.
    pub fn begin(&mut self, mon: &dyn Monitor) -> Vec<GroupPath> {
        if self.watch.is_none() {
            return Vec::new();
        }
        if !self.checked {
            self.checked = true;
            if mon.cpu_pressure_file(&GroupPath::root()).is_none() {
                self.turn_off(
                    "atoll's root group has no cpu.pressure: the backend shows no per-group \
                     pressure (cgroup v1 without the cgroup1 psi boot option)"
                        .into(),
                );
                return Vec::new();
            }
        }
        let Some(watch) = self.watch.as_mut() else {
            return Vec::new();
        };
        let wake = match watch.poll() {
            Ok(w) => w,
            Err(e) => {
                self.turn_off(e.to_string());
                return Vec::new();
            }
        };
        for g in wake.fired {
            if let Some(w) = self.groups.get_mut(&g) {
                if matches!(w, Watch::Armed(_)) {
                    self.fired += 1;
                    watch.disarm(&g);
                    *w = Watch::Reading { quiet_since: None };
                }
            }
        }
        for g in &wake.gone {
            self.groups.remove(g);
        }
        wake.gone
    }

    /// Forgets (and disarms) every group not in `watched`.
    pub fn retain(&mut self, watched: &BTreeSet<GroupPath>) {
        self.watched = watched.len();
        let gone: Vec<GroupPath> = self
            .groups
            .keys()
            .filter(|g| !watched.contains(*g))
            .cloned()
            .collect();
        for g in gone {
            self.disarm(&g);
            self.groups.remove(&g);
        }
    }

    fn disarm(&mut self, group: &GroupPath) {
        if let (Some(w), Some(Watch::Armed(_))) = (self.watch.as_mut(), self.groups.get(group)) {
            w.disarm(group);
        }
    }

    /// Whether `group`'s pressure is read this epoch, for a unit watched
    /// at `percent` % that is (`above`) or is not tuned up; arms its
    /// trigger first where one serves.
    pub fn before_read(
        &mut self,
        group: &GroupPath,
        now: Duration,
        percent: f64,
        above: bool,
        mon: &dyn Monitor,
    ) -> Step {
        if self.watch.is_none() {
            return Step::Read;
        }
        let want = StallTrigger::percent_of(percent, self.window());
        let arm = match self.groups.get(group) {
            None => !above,
            Some(Watch::Armed(t)) => {
                if !above && *t == want {
                    return Step::Wait;
                }
                !above
            }
            Some(Watch::Reading { .. }) => false,
            Some(Watch::NoTrigger { retry_at, .. }) => !above && now >= *retry_at,
        };
        if arm {
            return self.arm(group, now, want, mon);
        }
        match self.groups.get(group) {
            // Quiet or not: `after_read` says.
            Some(Watch::Reading { .. } | Watch::NoTrigger { .. }) => {}
            _ => {
                // New and tuned up, or armed and tuned up since.
                self.disarm(group);
                self.groups
                    .insert(group.clone(), Watch::Reading { quiet_since: None });
            }
        }
        Step::Read
    }

    /// After `group` was read (`pressure`: `None` for the first read of a
    /// window): arms its trigger again once it has been quiet for a window.
    pub fn after_read(
        &mut self,
        group: &GroupPath,
        now: Duration,
        pressure: Option<f64>,
        percent: f64,
        above: bool,
        mon: &dyn Monitor,
    ) -> Step {
        let window = self.window();
        let Some(Watch::Reading { quiet_since }) = self.groups.get_mut(group) else {
            return Step::Read;
        };
        let Some(p) = pressure else {
            return Step::Read;
        };
        if above || p > percent {
            *quiet_since = None;
            return Step::Read;
        }
        let since = *quiet_since.get_or_insert(now);
        if now.saturating_sub(since) < window {
            return Step::Read;
        }
        let want = StallTrigger::percent_of(percent, window);
        self.arm(group, now, want, mon)
    }

    fn arm(
        &mut self,
        group: &GroupPath,
        now: Duration,
        want: StallTrigger,
        mon: &dyn Monitor,
    ) -> Step {
        let Some(watch) = self.watch.as_mut() else {
            return Step::Read;
        };
        let Some(file) = mon.cpu_pressure_file(group) else {
            self.groups.insert(
                group.clone(),
                Watch::NoTrigger {
                    why: format!("{group} has no cpu.pressure (not created yet?)"),
                    retry_at: now + RETRY,
                },
            );
            return Step::Read;
        };
        match watch.arm(group, &file, want) {
            Ok(()) => {
                self.groups.insert(group.clone(), Watch::Armed(want));
                Step::Armed
            }
            Err(e @ PressureWatchError::Group { .. }) => {
                tracing::debug!("CPU pressure: {e}; reading {group} every epoch");
                self.groups.insert(
                    group.clone(),
                    Watch::NoTrigger {
                        why: e.to_string(),
                        retry_at: now + RETRY,
                    },
                );
                Step::Read
            }
            Err(e) => {
                self.turn_off(e.to_string());
                Step::Read
            }
        }
    }

    /// For the status.
    pub fn status(&self) -> PressureSource {
        let armed = self
            .groups
            .values()
            .filter(|w| matches!(w, Watch::Armed(_)))
            .count();
        let without: Vec<&String> = self
            .groups
            .values()
            .filter_map(|w| match w {
                Watch::NoTrigger { why, .. } => Some(why),
                _ => None,
            })
            .collect();
        let all_without = !without.is_empty() && without.len() == self.watched;
        let (source, reason) = match (&self.off, without.first()) {
            (Some(why), _) => (AVERAGES, Some(why.clone())),
            (None, Some(why)) if all_without => (AVERAGES, Some((*why).clone())),
            (None, Some(why)) => (
                TRIGGERS,
                Some(format!(
                    "{} of {} units have no trigger: {why}",
                    without.len(),
                    self.watched
                )),
            ),
            (None, None) => (TRIGGERS, None),
        };
        PressureSource {
            source: source.to_string(),
            reason,
            armed: armed as u64,
            read: self.watched.saturating_sub(armed) as u64,
            fired: self.fired,
        }
    }
}
