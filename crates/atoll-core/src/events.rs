//! Process events: what the kernel says happened to processes, as policies
//! see it.
//!
//! An event source ([`ProcEventSource`]) tells the daemon about new
//! processes, `exec`s, renames, uid/gid changes and exits as they happen,
//! instead of the daemon listing `/proc` every epoch to find out. On Linux
//! the source is the proc connector (`atoll_procfs::connector`); tests use a
//! fake queue. Sources hand out [`ProcEventBatch`]es: the events in the
//! order the kernel sent them, and a flag saying that some were lost.
//!
//! **Processes, not threads.** Every event here is about a process, named
//! by its pid (the thread-group id). Sources drop what happens to other
//! threads: creating a thread is not a [`ProcEvent::Fork`], a thread ending
//! is not a [`ProcEvent::Exit`], and a thread renaming itself or changing
//! only its own credentials is not a [`ProcEvent::Comm`] or
//! [`ProcEvent::Id`] (adoption rules look at the process's `comm` and real
//! uid, which are its main thread's).
//!
//! **Losing events.** A source that cannot deliver everything (the kernel
//! dropped events because the daemon read too slowly, or a message could not
//! be read) sets [`ProcEventBatch::overflowed`]. The events in such a batch
//! are still true, but others are missing; the caller lists `/proc` once to
//! catch up, as it did every epoch without events.
//!
//! [`ProcChanges`] folds batches into what a caller acts on: the pids to
//! (re)match against the adoption rules, the pids that are gone, and whether
//! to rescan.

use std::collections::BTreeSet;
use std::time::Duration;

/// Which credentials a [`ProcEvent::Id`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IdChange {
    /// The user ids changed (`setuid(2)` and friends).
    Uid {
        /// The real uid now (what adoption rules match).
        real: u32,
        /// The effective uid now.
        effective: u32,
    },
    /// The group ids changed (`setgid(2)` and friends).
    Gid {
        /// The real gid now.
        real: u32,
        /// The effective gid now.
        effective: u32,
    },
}

/// One thing that happened to a process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProcEvent {
    /// A new process `child`, forked by a thread of process `parent`. It
    /// runs the parent's program until it `exec`s.
    Fork {
        /// The forking process (its pid, even when another of its threads
        /// forked).
        parent: u32,
        /// The new process.
        child: u32,
    },
    /// Process `pid` called `execve(2)`: its `exe`, `cmdline` and `comm`
    /// changed (read them from `/proc`; the event carries none of them).
    Exec {
        /// The process.
        pid: u32,
    },
    /// Process `pid` ended: its main thread exited. This arrives when the
    /// process exits, before its parent reaps it (it may still show in
    /// `/proc` as a zombie for a while). In two rare cases the main thread
    /// ends alone and the process lives on: it called `pthread_exit`, or
    /// another of its threads is in `execve`, which is followed by an
    /// [`Exec`](Self::Exec) of the same pid ([`ProcChanges`] handles that
    /// order).
    Exit {
        /// The process.
        pid: u32,
    },
    /// Process `pid` renamed itself (`prctl(PR_SET_NAME)` in its main
    /// thread, or a write to `/proc/PID/comm`). Not sent on `exec`.
    Comm {
        /// The process.
        pid: u32,
        /// Its new `comm` (at most 15 bytes, lossily decoded).
        comm: String,
    },
    /// Process `pid` changed its user or group ids.
    Id {
        /// The process.
        pid: u32,
        /// The new ids.
        change: IdChange,
    },
}

impl ProcEvent {
    /// The process the event is about (the child for a fork).
    pub fn pid(&self) -> u32 {
        match *self {
            ProcEvent::Fork { child, .. } => child,
            ProcEvent::Exec { pid }
            | ProcEvent::Exit { pid }
            | ProcEvent::Comm { pid, .. }
            | ProcEvent::Id { pid, .. } => pid,
        }
    }
}

/// What one call to [`ProcEventSource::next_batch`] returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcEventBatch {
    /// The events, in the order the kernel sent them (per CPU; events of one
    /// process come in the order they happened).
    pub events: Vec<ProcEvent>,
    /// Some events were lost before or among these (the kernel dropped
    /// them, or a message could not be read). The caller should list
    /// `/proc` to catch up.
    pub overflowed: bool,
}

impl ProcEventBatch {
    /// Whether there is nothing to act on: no events and no loss.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && !self.overflowed
    }
}

/// Why an event source could not deliver events.
#[derive(Debug, thiserror::Error)]
pub enum ProcEventError {
    /// A system call on the source failed (other than the kernel saying it
    /// dropped events, which is [`ProcEventBatch::overflowed`]).
    #[error("{source_kind}: {op}: {error}")]
    Io {
        /// The source's [`kind`](ProcEventSource::kind).
        source_kind: &'static str,
        /// What was being done (`poll`, `recvmmsg`, ...).
        op: &'static str,
        /// The OS error.
        #[source]
        error: std::io::Error,
    },
    /// The source has ended and will deliver nothing more (a fake source
    /// that was closed).
    #[error("{source_kind}: closed")]
    Closed {
        /// The source's [`kind`](ProcEventSource::kind).
        source_kind: &'static str,
    },
}

/// Delivers process events.
pub trait ProcEventSource: Send {
    /// Waits up to `timeout` for events and returns those available (up to a
    /// limit of the source's choosing; the rest come with the next call).
    /// Returns as soon as there is at least one event or a loss to report;
    /// after `timeout` with nothing, returns an empty batch.
    /// `Duration::ZERO` does not wait.
    fn next_batch(&mut self, timeout: Duration) -> Result<ProcEventBatch, ProcEventError>;

    /// A short name for status and logs (`proc-connector`, `fake`).
    fn kind(&self) -> &'static str;

    /// A file descriptor that polls readable when events are waiting, for
    /// a loop that sleeps between epochs to wake on them; `None` (the
    /// default) when there is none.
    fn wake_fd(&self) -> Option<i32> {
        None
    }
}

/// Batches folded into what to do: which pids to look at, which to forget.
///
/// Events are applied in order, so a pid that exits and is reused within
/// the same batches ends up in [`changed`](Self::changed), and one that is
/// forked and exits ends up only in [`exited`](Self::exited).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcChanges {
    /// Pids that are new, `exec`ed, renamed or changed ids, and did not exit
    /// afterwards: read them and match the adoption rules again.
    pub changed: BTreeSet<u32>,
    /// Pids whose process ended and was not replaced: forget them.
    pub exited: BTreeSet<u32>,
    /// Events were lost: list `/proc` to catch up.
    pub rescan: bool,
}

impl ProcChanges {
    /// Applies the events of `batch` in order.
    pub fn absorb(&mut self, batch: &ProcEventBatch) {
        self.rescan |= batch.overflowed;
        for e in &batch.events {
            match *e {
                ProcEvent::Exit { pid } => {
                    self.changed.remove(&pid);
                    self.exited.insert(pid);
                }
                // Anything after an exit means the pid names a live process
                // again: reused by a fork, or (exec from a non-main thread)
                // the same process after its main thread ended.
                _ => {
                    let pid = e.pid();
                    self.exited.remove(&pid);
                    self.changed.insert(pid);
                }
            }
        }
    }

    /// The changes of one batch.
    pub fn from_batch(batch: &ProcEventBatch) -> Self {
        let mut c = Self::default();
        c.absorb(batch);
        c
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.exited.is_empty() && !self.rescan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(events: Vec<ProcEvent>) -> ProcEventBatch {
        ProcEventBatch {
            events,
            overflowed: false,
        }
    }

    #[test]
    fn fork_exec_exit_in_one_batch_leaves_only_the_exit() {
        let c = ProcChanges::from_batch(&batch(vec![
            ProcEvent::Fork {
                parent: 1,
                child: 10,
            },
            ProcEvent::Exec { pid: 10 },
            ProcEvent::Exit { pid: 10 },
        ]));
        assert!(c.changed.is_empty());
        assert_eq!(c.exited, BTreeSet::from([10]));
        assert!(!c.rescan);
    }

    #[test]
    fn reused_pid_and_exec_after_main_thread_exit_are_live() {
        let mut c = ProcChanges::default();
        c.absorb(&batch(vec![
            ProcEvent::Exit { pid: 10 },
            ProcEvent::Fork {
                parent: 1,
                child: 10,
            },
            // The main thread of 20 ends while another thread execs.
            ProcEvent::Exit { pid: 20 },
            ProcEvent::Exec { pid: 20 },
            ProcEvent::Comm {
                pid: 30,
                comm: "x".into(),
            },
            ProcEvent::Id {
                pid: 40,
                change: IdChange::Uid {
                    real: 5,
                    effective: 5,
                },
            },
            ProcEvent::Exit { pid: 50 },
        ]));
        assert_eq!(c.changed, BTreeSet::from([10, 20, 30, 40]));
        assert_eq!(c.exited, BTreeSet::from([50]));
        assert!(!c.rescan && !c.is_empty());
    }

    #[test]
    fn an_overflow_anywhere_asks_for_a_rescan() {
        let mut c = ProcChanges::default();
        c.absorb(&ProcEventBatch {
            events: vec![],
            overflowed: true,
        });
        c.absorb(&batch(vec![]));
        assert!(c.rescan);
        assert!(!c.is_empty());
        assert!(ProcChanges::from_batch(&batch(vec![])).is_empty());
        assert!(ProcEventBatch::default().is_empty());
    }

    #[test]
    fn pid_of_an_event_is_the_process_it_is_about() {
        let f = ProcEvent::Fork {
            parent: 1,
            child: 2,
        };
        assert_eq!(f.pid(), 2);
        assert_eq!(ProcEvent::Exit { pid: 3 }.pid(), 3);
    }
}
