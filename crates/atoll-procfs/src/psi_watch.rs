//! [`PressureWatch`] with PSI triggers: one trigger per group on its
//! `cpu.pressure`, all polled together without waiting.
//!
//! Each armed group holds one open file, so the watch holds at most
//! [`PsiGroupWatch::limit`] of them (the daemon sets it from its descriptor
//! limit, leaving room for API connections); past it, or when the process
//! has no descriptor left (`EMFILE`, `ENFILE`), arming fails for that group
//! only ([`PressureWatchError::Group`]) and the daemon reads its pressure
//! every epoch instead. Values the kernel refuses whatever the group (see
//! [`TriggerSpec::check`]; `EINVAL` from the kernel) are
//! [`PressureWatchError::Refused`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use atoll_core::plan::GroupPath;
use atoll_core::pressure::{PressureWake, PressureWatch, PressureWatchError, StallTrigger};

use crate::psi::{
    privileged, unprivileged_window, PsiError, PsiTrigger, PsiWatch, Stall, TriggerSpec, MIN_WINDOW,
};

#[cfg(any(test, feature = "testutils"))]
#[path = "psi_watch_fake.rs"]
mod fake;
#[cfg(any(test, feature = "testutils"))]
pub use fake::{FakePressureHandle, FakePressureWatch};

/// [`PressureWatch::kind`] of this watch.
pub const KIND: &str = "psi";

/// Triggers armed by default at most (see [`PsiGroupWatch::with_limit`]).
pub const DEFAULT_LIMIT: usize = 256;

/// PSI triggers on groups' `cpu.pressure`, keyed by group.
#[derive(Debug)]
pub struct PsiGroupWatch {
    watch: PsiWatch<GroupPath>,
    privileged: bool,
    limit: usize,
}

impl PsiGroupWatch {
    /// A watch for this process: whether it may use windows shorter than
    /// 2 s comes from `<proc_root>/self/status` (`CAP_SYS_RESOURCE`;
    /// unreadable counts as not). `None` when the machine has no PSI
    /// (`<proc_root>/pressure/cpu` is missing: a kernel without it, or
    /// booted with `psi=0`).
    pub fn open(proc_root: &Path) -> Option<Self> {
        if !crate::psi::Resource::Cpu.system_path(proc_root).exists() {
            return None;
        }
        Some(Self::new(privileged(proc_root) == Some(true)))
    }

    /// A watch that may (`privileged`) or may not use windows shorter than
    /// 2 s, with the [`DEFAULT_LIMIT`].
    pub fn new(privileged: bool) -> Self {
        Self {
            watch: PsiWatch::new(),
            privileged,
            limit: DEFAULT_LIMIT,
        }
    }

    /// At most `limit` triggers armed at once.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Most triggers armed at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The file a group's trigger is armed on.
    pub fn file(&self, group: &GroupPath) -> Option<&Path> {
        self.watch.get(group).map(PsiTrigger::path)
    }
}

/// A [`PsiError`] of arming as the daemon acts on it.
fn classify(e: PsiError) -> PressureWatchError {
    match e {
        PsiError::Invalid {
            path,
            value,
            reason,
        } => PressureWatchError::Refused {
            path,
            value,
            reason,
        },
        PsiError::Write {
            path,
            value,
            source,
            hint,
        } if source.raw_os_error() == Some(libc::EINVAL) => PressureWatchError::Refused {
            path,
            value,
            reason: format!("{source}{hint}"),
        },
        PsiError::Write {
            path,
            value,
            source,
            hint,
        } => PressureWatchError::Group {
            path,
            reason: format!("write {value:?}: {source}{hint}"),
        },
        PsiError::Open { path, source } => PressureWatchError::Group {
            path,
            reason: format!("open read-write: {source}"),
        },
        PsiError::Poll { count, source } => PressureWatchError::Poll {
            count,
            reason: source.to_string(),
        },
    }
}

impl PressureWatch for PsiGroupWatch {
    fn arm(
        &mut self,
        group: &GroupPath,
        file: &Path,
        trigger: StallTrigger,
    ) -> Result<(), PressureWatchError> {
        // A group armed again gives its old file back first.
        self.watch.remove(group);
        if self.watch.len() >= self.limit {
            return Err(PressureWatchError::Group {
                path: file.to_path_buf(),
                reason: format!(
                    "{} triggers armed, the most this watch holds (one open file each)",
                    self.limit
                ),
            });
        }
        let spec = TriggerSpec {
            stall: Stall::Some,
            threshold: trigger.threshold,
            window: trigger.window,
        };
        if !self.privileged {
            if let Err(reason) = spec.check_unprivileged() {
                return Err(PressureWatchError::Refused {
                    path: file.to_path_buf(),
                    value: spec.text(),
                    reason,
                });
            }
        }
        let t = PsiTrigger::open(
            PathBuf::from(file),
            Stall::Some,
            spec.threshold,
            spec.window,
        )
        .map_err(classify)?;
        self.watch.insert(group.clone(), t);
        Ok(())
    }

    fn disarm(&mut self, group: &GroupPath) {
        self.watch.remove(group);
    }

    fn poll(&mut self) -> Result<PressureWake, PressureWatchError> {
        if self.watch.is_empty() {
            return Ok(PressureWake::default());
        }
        let count = self.watch.len();
        let wake = self
            .watch
            .wait(Duration::ZERO)
            .map_err(|e| PressureWatchError::Poll {
                count,
                reason: e.to_string(),
            })?;
        Ok(PressureWake {
            fired: wake.fired,
            gone: wake.gone,
        })
    }

    fn armed(&self) -> usize {
        self.watch.len()
    }

    fn min_window(&self) -> Duration {
        if self.privileged {
            MIN_WINDOW
        } else {
            unprivileged_window(MIN_WINDOW)
        }
    }

    fn kind(&self) -> &'static str {
        KIND
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(ms: u64, window_ms: u64) -> StallTrigger {
        StallTrigger {
            threshold: Duration::from_millis(ms),
            window: Duration::from_millis(window_ms),
        }
    }

    #[test]
    fn windows_follow_the_privilege() {
        assert_eq!(PsiGroupWatch::new(true).min_window(), MIN_WINDOW);
        assert_eq!(
            PsiGroupWatch::new(false).min_window(),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn no_psi_no_watch() {
        let dir = tempfile::tempdir().unwrap();
        assert!(PsiGroupWatch::open(dir.path()).is_none());
        std::fs::create_dir(dir.path().join("pressure")).unwrap();
        std::fs::write(dir.path().join("pressure/cpu"), "").unwrap();
        let w = PsiGroupWatch::open(dir.path()).expect("PSI is there");
        assert!(!w.privileged, "no self/status: not privileged");
        assert_eq!(w.kind(), KIND);
        assert_eq!(w.limit(), DEFAULT_LIMIT);
    }

    #[test]
    fn values_refused_anywhere_are_refused_not_group_errors() {
        let g = GroupPath::from_relative("web/api");
        let mut w = PsiGroupWatch::new(false);
        let e = w
            .arm(
                &g,
                Path::new("/nonexistent/cpu.pressure"),
                trigger(100, 500),
            )
            .unwrap_err();
        assert!(
            matches!(&e, PressureWatchError::Refused { value, .. } if value == "some 100000 500000"),
            "{e}"
        );
        assert!(e.to_string().contains("multiple of 2000000 us"), "{e}");
        let mut w = PsiGroupWatch::new(true);
        let e = w
            .arm(
                &g,
                Path::new("/nonexistent/cpu.pressure"),
                trigger(100, 11_000),
            )
            .unwrap_err();
        assert!(matches!(e, PressureWatchError::Refused { .. }), "{e}");
        assert_eq!(w.armed(), 0);
    }

    #[test]
    fn a_missing_file_or_a_full_watch_is_the_groups_problem() {
        let g = GroupPath::from_relative("web/api");
        let mut w = PsiGroupWatch::new(true);
        let e = w
            .arm(
                &g,
                Path::new("/nonexistent/cpu.pressure"),
                trigger(100, 1000),
            )
            .unwrap_err();
        assert!(matches!(&e, PressureWatchError::Group { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/cpu.pressure"), "{e}");
        let mut w = PsiGroupWatch::new(true).with_limit(0);
        let e = w
            .arm(&g, Path::new("/proc/pressure/cpu"), trigger(100, 1000))
            .unwrap_err();
        assert!(e.to_string().contains("0 triggers armed"), "{e}");
        // A file that takes no trigger: /dev/full refuses every write.
        let mut w = PsiGroupWatch::new(true);
        let e = w
            .arm(&g, Path::new("/dev/full"), trigger(100, 1000))
            .unwrap_err();
        assert!(matches!(e, PressureWatchError::Group { .. }), "{e}");
        assert!(w.poll().unwrap().is_empty());
    }
}
