//! A [`PressureWatch`] for tests: triggers are entries in a table, fired
//! and removed by a handle, and arming or polling fails when told to.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use atoll_core::plan::GroupPath;
use atoll_core::pressure::{PressureWake, PressureWatch, PressureWatchError, StallTrigger};

/// What the fake was told and what it holds.
#[derive(Debug, Default)]
struct State {
    armed: BTreeMap<GroupPath, (PathBuf, StallTrigger)>,
    wake: PressureWake,
    /// Groups whose arming fails with [`PressureWatchError::Group`].
    refuse_group: BTreeMap<GroupPath, String>,
    /// Every arming fails with [`PressureWatchError::Refused`].
    refuse_all: Option<String>,
    /// The next poll fails.
    fail_poll: Option<String>,
    arms: u64,
    disarms: u64,
    polls: u64,
}

/// A fake watch; a [`FakePressureHandle`] drives it from the test.
#[derive(Debug)]
pub struct FakePressureWatch {
    state: Arc<Mutex<State>>,
    min_window: Duration,
}

/// The test's side of a [`FakePressureWatch`].
#[derive(Clone, Debug)]
pub struct FakePressureHandle {
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A test that panicked while holding the lock has failed already.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl FakePressureWatch {
    /// A watch whose shortest window is `min_window`, and its handle.
    pub fn new(min_window: Duration) -> (Self, FakePressureHandle) {
        let state = Arc::new(Mutex::new(State::default()));
        (
            Self {
                state: state.clone(),
                min_window,
            },
            FakePressureHandle { state },
        )
    }
}

impl FakePressureHandle {
    /// The armed triggers: group → (file, trigger).
    pub fn armed(&self) -> BTreeMap<GroupPath, (PathBuf, StallTrigger)> {
        lock(&self.state).armed.clone()
    }

    /// Whether `group` has a trigger.
    pub fn is_armed(&self, group: &GroupPath) -> bool {
        lock(&self.state).armed.contains_key(group)
    }

    /// Fires `group`'s trigger (if armed): the next poll reports it.
    pub fn fire(&self, group: &GroupPath) {
        let mut s = lock(&self.state);
        if s.armed.contains_key(group) && !s.wake.fired.contains(group) {
            s.wake.fired.push(group.clone());
        }
    }

    /// `group`'s file goes away (the group was removed): the next poll
    /// reports it gone, and it is no longer armed.
    pub fn remove(&self, group: &GroupPath) {
        let mut s = lock(&self.state);
        if s.armed.remove(group).is_some() {
            s.wake.fired.retain(|g| g != group);
            s.wake.gone.push(group.clone());
        }
    }

    /// Arming `group` fails with a [`PressureWatchError::Group`] saying
    /// `reason` until [`allow`](Self::allow)ed.
    pub fn refuse_group(&self, group: &GroupPath, reason: &str) {
        lock(&self.state)
            .refuse_group
            .insert(group.clone(), reason.to_string());
    }

    /// Arming `group` works again.
    pub fn allow(&self, group: &GroupPath) {
        lock(&self.state).refuse_group.remove(group);
    }

    /// Every arming fails with a [`PressureWatchError::Refused`].
    pub fn refuse_all(&self, reason: &str) {
        lock(&self.state).refuse_all = Some(reason.to_string());
    }

    /// The next poll fails with `reason`.
    pub fn fail_poll(&self, reason: &str) {
        lock(&self.state).fail_poll = Some(reason.to_string());
    }

    /// Successful armings so far.
    pub fn arms(&self) -> u64 {
        lock(&self.state).arms
    }

    /// Triggers removed by the daemon so far.
    pub fn disarms(&self) -> u64 {
        lock(&self.state).disarms
    }

    /// Polls so far.
    pub fn polls(&self) -> u64 {
        lock(&self.state).polls
    }
}

impl PressureWatch for FakePressureWatch {
    fn arm(
        &mut self,
        group: &GroupPath,
        file: &Path,
        trigger: StallTrigger,
    ) -> Result<(), PressureWatchError> {
        let mut s = lock(&self.state);
        s.armed.remove(group);
        if let Some(reason) = s.refuse_all.clone() {
            return Err(PressureWatchError::Refused {
                path: file.to_path_buf(),
                value: format!(
                    "some {} {}",
                    trigger.threshold.as_micros(),
                    trigger.window.as_micros()
                ),
                reason,
            });
        }
        if let Some(reason) = s.refuse_group.get(group).cloned() {
            return Err(PressureWatchError::Group {
                path: file.to_path_buf(),
                reason,
            });
        }
        s.arms += 1;
        s.armed.insert(group.clone(), (file.to_path_buf(), trigger));
        Ok(())
    }

    fn disarm(&mut self, group: &GroupPath) {
        let mut s = lock(&self.state);
        if s.armed.remove(group).is_some() {
            s.disarms += 1;
        }
        s.wake.fired.retain(|g| g != group);
    }

    fn poll(&mut self) -> Result<PressureWake, PressureWatchError> {
        let mut s = lock(&self.state);
        s.polls += 1;
        if let Some(reason) = s.fail_poll.take() {
            return Err(PressureWatchError::Poll {
                count: s.armed.len(),
                reason,
            });
        }
        Ok(std::mem::take(&mut s.wake))
    }

    fn armed(&self) -> usize {
        lock(&self.state).armed.len()
    }

    fn min_window(&self) -> Duration {
        self.min_window
    }

    fn kind(&self) -> &'static str {
        "fake"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_and_removals_come_with_the_next_poll() {
        let (mut w, h) = FakePressureWatch::new(Duration::from_secs(2));
        let g = GroupPath::from_relative("web/api");
        let t = StallTrigger::percent_of(20.0, w.min_window());
        h.fire(&g);
        assert!(w.poll().unwrap().is_empty(), "not armed: nothing fires");
        w.arm(&g, Path::new("/x/cpu.pressure"), t).unwrap();
        assert!(h.is_armed(&g));
        h.fire(&g);
        h.fire(&g);
        assert_eq!(w.poll().unwrap().fired, std::slice::from_ref(&g));
        assert!(w.poll().unwrap().is_empty());
        h.remove(&g);
        let wake = w.poll().unwrap();
        assert_eq!((wake.fired.len(), wake.gone), (0, vec![g.clone()]));
        assert_eq!(w.armed(), 0);
        assert_eq!((h.arms(), h.disarms(), h.polls()), (1, 0, 4));
    }

    #[test]
    fn failures_happen_when_told() {
        let (mut w, h) = FakePressureWatch::new(Duration::from_secs(2));
        let g = GroupPath::from_relative("web/api");
        let t = StallTrigger::percent_of(20.0, w.min_window());
        h.refuse_group(&g, "too many open files");
        let e = w.arm(&g, Path::new("/x"), t).unwrap_err();
        assert!(matches!(e, PressureWatchError::Group { .. }), "{e}");
        h.allow(&g);
        w.arm(&g, Path::new("/x"), t).unwrap();
        h.fail_poll("EBADF");
        assert!(w.poll().is_err());
        assert!(w.poll().is_ok(), "once");
        h.refuse_all("window");
        let e = w.arm(&g, Path::new("/x"), t).unwrap_err();
        assert!(matches!(e, PressureWatchError::Refused { .. }), "{e}");
        w.disarm(&g);
        assert_eq!(h.disarms(), 0, "refused arming dropped the old trigger");
    }
}
