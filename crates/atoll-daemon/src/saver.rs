//! The thread that writes the state file, off the control loop.
//!
//! A save ([`crate::state::save`]: a temporary file, `fsync`, `rename`,
//! `fsync` of the directory) takes 10-30 ms on a slow disk; done on the
//! loop thread it delays whatever arrives meanwhile (a `trigger`'s boost).
//! The loop hands a [`Saver`] the state as a value (building it copies the
//! registry; serializing it is the thread's); the thread writes the newest
//! state it was given, skipping older ones still queued behind it (each
//! state is whole, so the newest holds every change before it).
//!
//! Each hand-over gets a ticket (a sequence number). A ticket is on disk
//! once a write of it or of a later state succeeded; [`Saver::wait`] blocks
//! until then (or until such a write failed). What must be durable before
//! it is acknowledged (a reply) rides with its state as a [`Done`], run on
//! the thread once the write that covers it is over, with its outcome.
//! Dropping the saver waits for the last state to be written.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::state::{self, SavedState, StateError};

/// Run once the write covering its state is over: `Ok` when it is on disk.
pub type Done = Box<dyn FnOnce(Result<(), &SaveError>) + Send>;

/// Why a state handed to the [`Saver`] is not on disk.
#[derive(Clone, Debug, thiserror::Error)]
pub enum SaveError {
    /// The write failed (the error names the file).
    #[error("{0}")]
    Write(Arc<StateError>),
    /// The saver thread could not start.
    #[error("cannot start the thread that saves {dir}: {source}")]
    Spawn {
        /// The state directory.
        dir: PathBuf,
        /// The error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The saver thread ended (it panicked) before writing the state.
    #[error("the thread that saves {dir} is gone")]
    Gone {
        /// The state directory.
        dir: PathBuf,
    },
}

/// One state handed over.
struct Job {
    ticket: u64,
    state: Box<SavedState>,
    done: Vec<Done>,
}

/// What the thread did, read by the loop.
#[derive(Debug, Default)]
struct Progress {
    /// The newest ticket a write was tried for.
    tried: u64,
    /// The newest ticket on disk.
    written: u64,
    /// Successful writes.
    saves: u64,
    /// The last write's error, cleared by a success.
    error: Option<SaveError>,
    /// The thread ended.
    gone: bool,
}

type Shared = Arc<(Mutex<Progress>, Condvar)>;

fn lock(shared: &Shared) -> MutexGuard<'_, Progress> {
    shared
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Owns the state file's writes (see the module docs).
pub struct Saver {
    dir: PathBuf,
    tx: Option<Sender<Job>>,
    shared: Shared,
    thread: Option<JoinHandle<()>>,
    /// The last ticket handed out.
    sent: u64,
    spawn_error: Option<SaveError>,
}

impl std::fmt::Debug for Saver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Saver")
            .field("dir", &self.dir)
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl Saver {
    /// A saver writing `dir/state.json` with [`state::save`].
    pub fn new(dir: PathBuf) -> Self {
        Self::with_writer(dir, state::save)
    }

    /// A saver writing with `write` (tests give one that fails or blocks).
    pub fn with_writer<W>(dir: PathBuf, write: W) -> Self
    where
        W: Fn(&Path, &SavedState) -> Result<(), StateError> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel();
        let shared: Shared = Arc::default();
        let thread = {
            let shared = shared.clone();
            let dir = dir.clone();
            std::thread::Builder::new()
                .name("atoll-saver".into())
                .spawn(move || run(&dir, &rx, &shared, &write))
        };
        let (thread, spawn_error) = match thread {
            Ok(t) => (Some(t), None),
            Err(e) => {
                tracing::error!("cannot start the state saver thread: {e}");
                let err = SaveError::Spawn {
                    dir: dir.clone(),
                    source: Arc::new(e),
                };
                (None, Some(err))
            }
        };
        Self {
            dir,
            tx: thread.is_some().then_some(tx),
            shared,
            thread,
            sent: 0,
            spawn_error,
        }
    }

    /// Hands `state` over; `done` runs once the write covering it is over.
    /// Returns its ticket (see [`wait`](Self::wait)).
    pub fn submit(&mut self, state: SavedState, done: Vec<Done>) -> u64 {
        self.sent += 1;
        let job = Job {
            ticket: self.sent,
            state: Box::new(state),
            done,
        };
        let refused = match &self.tx {
            Some(tx) => tx.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = refused {
            let err = self.dead();
            for d in job.done {
                d(Err(&err));
            }
        }
        self.sent
    }

    fn dead(&self) -> SaveError {
        self.spawn_error.clone().unwrap_or_else(|| SaveError::Gone {
            dir: self.dir.clone(),
        })
    }

    /// Blocks until the write covering `ticket` is over: `Ok` once it is on
    /// disk, else the error of the last write tried.
    pub fn wait(&self, ticket: u64) -> Result<(), SaveError> {
        if self.tx.is_none() {
            return Err(self.dead());
        }
        let mut p = lock(&self.shared);
        while p.tried < ticket && p.written < ticket && !p.gone {
            p = self
                .shared
                .1
                .wait(p)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        if p.written >= ticket {
            Ok(())
        } else {
            Err(p.error.clone().unwrap_or_else(|| self.dead()))
        }
    }

    /// Blocks until every state handed over is written (or failed).
    pub fn flush(&self) -> Result<(), SaveError> {
        if self.sent == 0 {
            return Ok(());
        }
        self.wait(self.sent)
    }

    /// Whether a state handed over is still to be written.
    pub fn pending(&self) -> bool {
        let p = lock(&self.shared);
        self.tx.is_some() && !p.gone && p.tried < self.sent
    }

    /// Successful writes so far.
    pub fn saves(&self) -> u64 {
        lock(&self.shared).saves
    }

    /// The last write's error, if it failed (a later success clears it).
    pub fn failed(&self) -> Option<SaveError> {
        if self.tx.is_none() {
            return Some(self.dead());
        }
        lock(&self.shared).error.clone()
    }
}

impl Drop for Saver {
    /// Waits for the last state handed over to be written.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: takes the newest state queued, writes it, reports.
fn run<W>(dir: &Path, rx: &Receiver<Job>, shared: &Shared, write: &W)
where
    W: Fn(&Path, &SavedState) -> Result<(), StateError>,
{
    struct Gone<'a>(&'a Shared);
    impl Drop for Gone<'_> {
        fn drop(&mut self) {
            lock(self.0).gone = true;
            self.0 .1.notify_all();
        }
    }
    let _gone = Gone(shared);
    while let Ok(first) = rx.recv() {
        let mut newest = first;
        let mut done = std::mem::take(&mut newest.done);
        while let Ok(mut later) = rx.try_recv() {
            done.append(&mut later.done);
            newest = later;
        }
        let result = write(dir, &newest.state).map_err(|e| SaveError::Write(Arc::new(e)));
        if let Err(e) = &result {
            tracing::error!("saving state: {e}");
        }
        {
            let mut p = lock(shared);
            p.tried = newest.ticket;
            match &result {
                Ok(()) => {
                    p.written = newest.ticket;
                    p.saves += 1;
                    p.error = None;
                }
                Err(e) => p.error = Some(e.clone()),
            }
        }
        shared.1.notify_all();
        for d in done {
            d(result.as_ref().map(|_| ()));
        }
    }
}

#[cfg(test)]
#[path = "saver_tests.rs"]
mod tests;
