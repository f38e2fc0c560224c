//! What the state file holds, taken from the registry and the backend.
//!
//! The file itself (format, checksum, crash-safe writes) is
//! [`crate::state`]'s; this module decides what goes in it and when it is
//! written: whenever the registry says it changed
//! ([`Registry::take_dirty`]). The write itself is the [`Saver`]'s thread's:
//! the loop builds the state and hands it over (see [`crate::saver`]).

use std::path::PathBuf;

use atoll_core::backend::Backend;
use atoll_core::coord::CoordSnapshot;

use crate::registry::Registry;
use crate::saver::{Done, SaveError, Saver};
use crate::state::{self, SavedCoord, SavedProcess, SavedState, SavedUnit, StateError, FORMAT};

/// Where the state file lives (`None`: no state file, as in tests).
#[derive(Debug, Default)]
pub struct Persist {
    dir: Option<PathBuf>,
    /// The thread writing the file (with `dir`).
    saver: Option<Saver>,
    /// The coordination state to save with the next write, and the wall
    /// clock (ms since the Unix epoch) when it was taken.
    coord: Option<(CoordSnapshot, u64)>,
    /// The coordination state last staged, without its times.
    coord_key: CoordSnapshot,
    /// The coordination state changed since the last save.
    coord_dirty: bool,
    /// The network islands' interfaces as found, saved with every write.
    network: Option<crate::netisland::SavedNetwork>,
    /// They changed since the last save.
    network_dirty: bool,
    /// The cpufreq originals to save (see [`Persist::stage_frequency`]).
    frequency: Vec<atoll_core::power::FreqOriginal>,
    /// They changed since the last save.
    frequency_dirty: bool,
}

/// The wall clock, ms since the Unix epoch (0 before it).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Persist {
    /// State kept in `dir`, or nowhere.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self {
            saver: dir.clone().map(Saver::new),
            dir,
            ..Self::default()
        }
    }

    /// The coordination state as it is now, saved with the next write.
    /// Only a change of what it holds (loans, knobs, counts, not the time
    /// left on a backoff or the age of a loan) asks for a write of its own
    /// ([`save_if_changed`](Self::save_if_changed)); the times are those of
    /// the last call when a write happens.
    pub fn stage_coord(&mut self, snap: CoordSnapshot) {
        if self.dir.is_none() {
            return;
        }
        let key = snap.timeless();
        if key != self.coord_key {
            self.coord_key = key;
            self.coord_dirty = true;
        }
        self.coord = (!snap.is_empty()).then(|| (snap, unix_ms()));
    }

    /// The interfaces the network islands hold, as found: saved with the
    /// next write (which this asks for when they changed).
    pub fn stage_network(&mut self, network: Option<crate::netisland::SavedNetwork>) {
        if self.network != network {
            self.network = network;
            self.network_dirty = true;
        }
    }

    /// The cpufreq originals the frequency actuator keeps, saved with the
    /// next write; a change asks for a write of its own.
    pub fn stage_frequency(&mut self, originals: Vec<atoll_core::power::FreqOriginal>) {
        if self.dir.is_none() || originals == self.frequency {
            return;
        }
        self.frequency = originals;
        self.frequency_dirty = true;
    }

    /// How many times the state file was written, once every state
    /// handed over is written.
    pub fn saves(&self) -> u64 {
        let _ = self.flush();
        self.saver.as_ref().map_or(0, Saver::saves)
    }

    /// Waits for every state handed over to be written: the error of the
    /// last write if it failed.
    pub fn flush(&self) -> Result<(), SaveError> {
        self.saver.as_ref().map_or(Ok(()), Saver::flush)
    }

    /// Waits for the write covering `ticket` (from
    /// [`submit`](Self::submit)); `Ok` once it is on disk.
    pub fn wait(&self, ticket: u64) -> Result<(), SaveError> {
        match &self.saver {
            Some(s) if ticket > 0 => s.wait(ticket),
            _ => Ok(()),
        }
    }

    /// The state directory, if any.
    pub fn dir(&self) -> Option<&PathBuf> {
        self.dir.as_ref()
    }

    /// The state a previous run left, never failing: the newest good
    /// file (`state.json`, else the one before it, `state.json.1`); a
    /// damaged file is moved aside (`<name>.damaged-<seconds>`) and said so
    /// in [`Loaded::notes`].
    pub fn load(&self) -> Loaded {
        let now_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut out = Loaded::default();
        let Some(dir) = &self.dir else {
            return out;
        };
        for name in [state::FILE_NAME, state::PREV_NAME] {
            let file = dir.join(name);
            match state::load_file(&file) {
                Ok(Some(s)) => {
                    out.damaged = !out.notes.is_empty();
                    if name == state::PREV_NAME {
                        out.notes.push(format!(
                            "recovered from the state before the last save ({})",
                            file.display()
                        ));
                    }
                    out.state = Some(s);
                    return out;
                }
                Ok(None) => {}
                Err(e) => {
                    let aside = dir.join(format!("{name}.damaged-{now_unix}"));
                    let moved = std::fs::rename(&file, &aside);
                    out.notes.push(match moved {
                        Ok(()) => format!(
                            "the state file was damaged ({e}); kept at {}",
                            aside.display()
                        ),
                        Err(m) => format!(
                            "the state file was damaged ({e}) and could not be moved aside ({m})"
                        ),
                    });
                    tracing::warn!("{}", out.notes.last().map(String::as_str).unwrap_or(""));
                }
            }
        }
        out
    }

    /// Hands the state over to be written if the registry changed since
    /// the last hand-over (or the last write failed), or if `done` waits
    /// and an earlier state is still being written. `done` runs once the
    /// write covering this state is over (at once when none is needed).
    /// Returns the state's ticket, if one was handed over.
    pub fn save_if_changed(
        &mut self,
        reg: &mut Registry,
        backend: &dyn Backend,
        done: Vec<Done>,
    ) -> Option<u64> {
        let dirty = reg.take_dirty();
        let (failed, behind) = self
            .saver
            .as_ref()
            .map_or((false, false), |s| (s.failed().is_some(), s.pending()));
        // A reply waiting while an earlier state (which may hold its change)
        // is in flight waits for a write of its own.
        let behind = behind && !done.is_empty();
        if dirty
            || self.coord_dirty
            || self.network_dirty
            || self.frequency_dirty
            || failed
            || behind
        {
            Some(self.submit(reg, backend, done))
        } else {
            for d in done {
                d(Ok(()));
            }
            None
        }
    }

    /// Writes the state file now and waits for it.
    pub fn save(&mut self, reg: &Registry, backend: &dyn Backend) -> Result<(), SaveError> {
        let ticket = self.submit(reg, backend, Vec::new());
        self.wait(ticket)
    }

    /// Hands the state as it is now to the saver thread, which writes it
    /// and then runs `done` (at once, with `Ok`, without a state
    /// directory). Returns its ticket (0 without a state directory). A
    /// failed write is logged by the saver and handed over again at the
    /// next [`save_if_changed`](Self::save_if_changed).
    pub fn submit(&mut self, reg: &Registry, backend: &dyn Backend, done: Vec<Done>) -> u64 {
        if self.saver.is_none() {
            for d in done {
                d(Ok(()));
            }
            return 0;
        }
        let mut s = saved_state(reg, backend);
        s.network.clone_from(&self.network);
        s.coordination = match &self.coord {
            None => None,
            Some((snap, at)) => match SavedCoord::new(snap, *at) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::error!("saving state: {e}; saved without it");
                    None
                }
            },
        };
        s.frequency_originals = (!self.frequency.is_empty()).then(|| self.frequency.clone());
        self.coord_dirty = false;
        self.network_dirty = false;
        self.frequency_dirty = false;
        match &mut self.saver {
            Some(saver) => saver.submit(s, done),
            None => 0,
        }
    }

    /// Removes the state file (a clean teardown).
    /// Waits for the states handed over first, so none lands after it.
    pub fn remove(&self) -> Result<(), StateError> {
        if let Err(e) = self.flush() {
            tracing::warn!("removing the state file after a failed save: {e}");
        }
        match &self.dir {
            Some(d) => state::remove(d),
            None => Ok(()),
        }
    }
}

/// What [`Persist::load`] found.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The state, if a good file was found.
    pub state: Option<SavedState>,
    /// What went wrong with the files, in words.
    pub notes: Vec<String>,
    /// A newer file was damaged: `state` is the one before it, whose
    /// coordination state is not to be trusted (the CPUs moved since).
    pub damaged: bool,
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
                owner: reg.owner(u.name.as_str()),
                kept: reg.is_kept(u.name.as_str()),
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
                    placed_by: m.placed_by,
                })
            })
            .collect(),
        parent_controllers_added: backend.outside_changes(),
        overlays: reg.runtime_overlays().to_vec(),
        coordination: None,
        network: None,
        frequency_originals: None,
    }
}
