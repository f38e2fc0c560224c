//! A fake [`ProcEventSource`] for tests (feature `testutils`): a queue that
//! a test fills through a handle while the code under test reads it,
//! possibly from another thread.
//!
//! ```ignore
//! let (source, events) = FakeEvents::new();
//! spawn_loop(Box::new(source));                     // the code under test
//! events.push(ProcEvent::Fork { parent: 1, child: 42 });
//! events.overflow();                                // the next batch says "rescan"
//! events.fail(std::io::ErrorKind::Other);           // then a read error
//! events.close();                                   // then `Closed` forever
//! ```
//!
//! A batch holds everything queued up to the first injected error (at most
//! [`FakeEvents::with_max_batch`] events); an injected overflow sets the
//! flag of the batch that holds the events queued before it.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use atoll_core::events::{ProcEvent, ProcEventBatch, ProcEventError, ProcEventSource};

/// [`ProcEventSource::kind`] of the fake.
pub const FAKE_KIND: &str = "fake";

#[derive(Debug)]
enum Item {
    Event(ProcEvent),
    Overflow,
    Error(io::ErrorKind),
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Item>,
    closed: bool,
    /// Calls to `next_batch` so far.
    calls: u64,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    ready: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock: the queue is still
        // usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The reading end: give it to the code under test.
#[derive(Debug)]
pub struct FakeEvents {
    shared: Arc<Shared>,
    max_batch: usize,
}

/// The writing end: keep it in the test. Clones share the queue.
#[derive(Clone, Debug)]
pub struct FakeEventsHandle {
    shared: Arc<Shared>,
}

impl FakeEvents {
    /// An empty queue and its handle.
    pub fn new() -> (Self, FakeEventsHandle) {
        let shared = Arc::new(Shared::default());
        (
            Self {
                shared: shared.clone(),
                max_batch: usize::MAX,
            },
            FakeEventsHandle { shared },
        )
    }

    /// Caps the events per batch (to test callers that get a burst in
    /// several batches).
    pub fn with_max_batch(mut self, max: usize) -> Self {
        self.max_batch = max.max(1);
        self
    }
}

impl FakeEventsHandle {
    /// Queues one event.
    pub fn push(&self, event: ProcEvent) {
        self.extend([event]);
    }

    /// Queues events in order.
    pub fn extend(&self, events: impl IntoIterator<Item = ProcEvent>) {
        let mut s = self.shared.lock();
        s.queue.extend(events.into_iter().map(Item::Event));
        drop(s);
        self.shared.ready.notify_all();
    }

    /// Queues a loss: the batch holding the events queued so far says
    /// `overflowed`.
    pub fn overflow(&self) {
        self.put(Item::Overflow);
    }

    /// Queues a read error: the batch before it ends there, and the next
    /// call fails with an [`ProcEventError::Io`] of this kind.
    pub fn fail(&self, kind: io::ErrorKind) {
        self.put(Item::Error(kind));
    }

    /// Ends the source: once the queue is empty, every call fails with
    /// [`ProcEventError::Closed`].
    pub fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
    }

    /// Items (events, overflows, errors) not yet read.
    pub fn pending(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// How many times the source was asked for a batch.
    pub fn calls(&self) -> u64 {
        self.shared.lock().calls
    }

    fn put(&self, item: Item) {
        self.shared.lock().queue.push_back(item);
        self.shared.ready.notify_all();
    }
}

impl ProcEventSource for FakeEvents {
    fn next_batch(&mut self, timeout: Duration) -> Result<ProcEventBatch, ProcEventError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut s = self.shared.lock();
        s.calls += 1;
        while s.queue.is_empty() && !s.closed {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return Ok(ProcEventBatch::default());
            }
            s = self
                .shared
                .ready
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if s.queue.is_empty() {
            return Err(ProcEventError::Closed {
                source_kind: FAKE_KIND,
            });
        }
        let mut batch = ProcEventBatch::default();
        while let Some(item) = s.queue.front() {
            match item {
                Item::Error(kind) => {
                    if batch.is_empty() {
                        let kind = *kind;
                        s.queue.pop_front();
                        return Err(ProcEventError::Io {
                            source_kind: FAKE_KIND,
                            op: "fake read",
                            error: io::Error::from(kind),
                        });
                    }
                    break;
                }
                Item::Event(_) if batch.events.len() >= self.max_batch => break,
                Item::Event(e) => {
                    batch.events.push(e.clone());
                    s.queue.pop_front();
                }
                Item::Overflow => {
                    batch.overflowed = true;
                    s.queue.pop_front();
                }
            }
        }
        Ok(batch)
    }

    fn kind(&self) -> &'static str {
        FAKE_KIND
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fork(child: u32) -> ProcEvent {
        ProcEvent::Fork { parent: 1, child }
    }

    #[test]
    fn batches_hold_what_was_queued_and_errors_split_them() {
        let (mut src, h) = FakeEvents::new();
        assert_eq!(src.kind(), "fake");
        assert!(src.next_batch(Duration::ZERO).unwrap().is_empty());
        h.extend([fork(2), fork(3)]);
        h.overflow();
        h.push(ProcEvent::Exit { pid: 2 });
        h.fail(io::ErrorKind::ConnectionReset);
        h.push(ProcEvent::Exit { pid: 3 });
        let b = src.next_batch(Duration::ZERO).unwrap();
        assert_eq!(b.events, vec![fork(2), fork(3), ProcEvent::Exit { pid: 2 }]);
        assert!(b.overflowed);
        let e = src.next_batch(Duration::ZERO).unwrap_err();
        assert!(
            matches!(&e, ProcEventError::Io { error, .. } if error.kind() == io::ErrorKind::ConnectionReset),
            "{e}"
        );
        let b = src.next_batch(Duration::ZERO).unwrap();
        assert_eq!(
            (b.events, b.overflowed),
            (vec![ProcEvent::Exit { pid: 3 }], false)
        );
        h.close();
        assert!(matches!(
            src.next_batch(Duration::from_secs(5)),
            Err(ProcEventError::Closed { .. })
        ));
        assert_eq!(h.calls(), 5);
        assert_eq!(h.pending(), 0);
    }

    #[test]
    fn max_batch_splits_a_burst() {
        let (src, h) = FakeEvents::new();
        let mut src = src.with_max_batch(2);
        h.extend((10..15).map(fork));
        let sizes: Vec<usize> = (0..4)
            .map(|_| src.next_batch(Duration::ZERO).unwrap().events.len())
            .collect();
        assert_eq!(sizes, vec![2, 2, 1, 0]);
    }

    #[test]
    fn a_waiting_reader_wakes_when_another_thread_pushes() {
        let (mut src, h) = FakeEvents::new();
        let reader = std::thread::spawn(move || src.next_batch(Duration::from_secs(30)));
        // Whether the push comes before or during the wait, the reader gets
        // it (and long before its 30 s timeout, but that is not asserted).
        h.push(fork(7));
        let b = reader.join().unwrap().unwrap();
        assert_eq!(b.events, vec![fork(7)]);
    }
}
