//! What the state file holds, taken from the registry and the backend.
//!
//! The file itself (format, checksum, crash-safe writes) is
//! [`crate::state`]'s; this module decides what goes in it and when it is
//! written: whenever the registry says it changed
//! ([`Registry::take_dirty`]).

use std::path::PathBuf;

use atoll_core::backend::Backend;

use crate::registry::Registry;
use crate::state::{self, SavedProcess, SavedState, SavedUnit, StateError, FORMAT};

/// Where the state file lives (`None`: no state file, as in tests).
#[derive(Clone, Debug, Default)]
pub struct Persist {
    dir: Option<PathBuf>,
    /// The last save failed: try again even if nothing changed.
    retry: bool,
}

impl Persist {
    /// State kept in `dir`, or nowhere.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir, retry: false }
    }

    /// The state directory, if any.
    pub fn dir(&self) -> Option<&PathBuf> {
        self.dir.as_ref()
    }

    /// The state file as a previous run left it; `Ok(None)` when there is
    /// none (or no state directory).
    pub fn load(&self) -> Result<Option<SavedState>, StateError> {
        match &self.dir {
            Some(d) => state::load(d),
            None => Ok(None),
        }
    }

    /// Writes the state file if the registry changed since the last save
    /// (or the last save failed).
    pub fn save_if_changed(&mut self, reg: &mut Registry, backend: &dyn Backend) {
        if reg.take_dirty() || self.retry {
            self.save(reg, backend);
        }
    }

    /// Writes the state file now; a failure is logged and retried at the
    /// next [`save_if_changed`](Self::save_if_changed).
    pub fn save(&mut self, reg: &Registry, backend: &dyn Backend) {
        let Some(dir) = &self.dir else {
            return;
        };
        match state::save(dir, &saved_state(reg, backend)) {
            Ok(()) => self.retry = false,
            Err(e) => {
                tracing::error!("saving state: {e}");
                self.retry = true;
            }
        }
    }

    /// Removes the state file (a clean teardown).
    pub fn remove(&self) -> Result<(), StateError> {
        match &self.dir {
            Some(d) => state::remove(d),
            None => Ok(()),
        }
    }
}

/// The registry as a state file.
pub fn saved_state(reg: &Registry, backend: &dyn Backend) -> SavedState {
    SavedState {
        format: FORMAT,
        backend: backend.kind(),
        root: backend.root_name().to_string(),
        units: reg
            .units()
            .map(|(u, origin)| SavedUnit {
                spec: u.clone(),
                origin,
            })
            .collect(),
        processes: reg
            .all_managed()
            .filter_map(|(pid, m)| {
                Some(SavedProcess {
                    pid,
                    start_ticks: m.start_ticks,
                    group: m.group.clone(),
                    origin: m.origin.clone()?,
                })
            })
            .collect(),
        parent_controllers_added: backend.outside_changes(),
    }
}
