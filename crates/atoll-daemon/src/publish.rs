//! What the control loop publishes for the API and metrics threads, so that
//! reading never waits for the loop and never slows it.
//!
//! The loop publishes a [`View`] on a [`Board`] after every epoch and every
//! request it handles: the overlays, the applications (with their owners,
//! for `app_poll`'s permission check) and, when someone asked for it, the
//! status. The decision log is shared through its own reader
//! ([`crate::decisions::DecisionReader`]).
//!
//! The status is the expensive part (it reads every group's figures), so it
//! is built only when wanted and served while fresh:
//!
//! - a status no older than [`FRESH`], with no request handled since it was
//!   built, is served as it is;
//! - an older one (up to [`STALE`]) is served as it is too, and a new one is
//!   asked for (one request for all the readers that find it old);
//! - past [`STALE`], or when a request changed something since (a client
//!   that adopts a process and then asks for the status sees it), the
//!   reader waits for the new one, at most [`WAIT`]. Reads and refused
//!   requests change nothing, so they never make the status old.
//!
//! So a flood of `status` requests costs the loop one status per [`FRESH`]
//! at most.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use atoll_proto::apps::AppStatus;
use atoll_proto::coord::OverlayStatus;
use atoll_proto::StatusReport;

use crate::decisions::DecisionReader;
use crate::telemetry::requests::RequestCounters;
use crate::telemetry::Telemetry;

/// A status this young is served without asking for a new one.
pub const FRESH: Duration = Duration::from_millis(250);
/// A status this old is not served while a new one can be had.
pub const STALE: Duration = Duration::from_secs(2);
/// How long a reader waits for a new status.
pub const WAIT: Duration = Duration::from_secs(2);

/// An application as readers see it.
#[derive(Clone, Debug)]
pub struct AppView {
    /// Its status (with its assignment).
    pub status: AppStatus,
    /// Its owner: who may poll it.
    pub uid: u32,
}

/// What the loop last published.
#[derive(Clone, Debug, Default)]
pub struct View {
    /// The overlays, or why coordination is off.
    pub overlays: Option<Result<Vec<OverlayStatus>, String>>,
    /// Every application.
    pub apps: Vec<AppView>,
}

/// A status and when it was built.
#[derive(Clone, Debug)]
struct Built {
    report: Arc<StatusReport>,
    /// The daemon's own figures, copied with it.
    telemetry: Arc<Telemetry>,
    at: Instant,
    /// Requests handled before it was built.
    requests: u64,
}

#[derive(Debug, Default)]
struct Shelf {
    view: Arc<View>,
    status: Option<Built>,
}

#[derive(Debug)]
struct Inner {
    shelf: Mutex<Shelf>,
    fresh: Condvar,
    /// A reader asked for a new status.
    wanted: AtomicBool,
    /// Requests the loop has handled.
    requests: AtomicU64,
    decisions: DecisionReader,
    /// API replies by operation and result, counted by the API threads.
    counters: RequestCounters,
}

/// Where the loop publishes and readers read. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Board {
    inner: Arc<Inner>,
}

impl Board {
    /// A board sharing `decisions`, with nothing published yet.
    pub fn new(decisions: DecisionReader) -> Self {
        Self {
            inner: Arc::new(Inner {
                shelf: Mutex::default(),
                fresh: Condvar::new(),
                wanted: AtomicBool::new(false),
                requests: AtomicU64::new(0),
                decisions,
                counters: RequestCounters::default(),
            }),
        }
    }

    fn shelf(&self) -> std::sync::MutexGuard<'_, Shelf> {
        self.inner
            .shelf
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The decision log.
    pub fn decisions(&self) -> &DecisionReader {
        &self.inner.decisions
    }

    /// API replies by operation and result.
    pub fn request_counters(&self) -> &RequestCounters {
        &self.inner.counters
    }

    /// The last view.
    pub fn view(&self) -> Arc<View> {
        Arc::clone(&self.shelf().view)
    }

    /// The loop handled a request (what it changed is not in the status
    /// built before).
    pub fn handled_request(&self) {
        self.inner.requests.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether a reader asked for a new status since the last call.
    pub fn take_wanted(&self) -> bool {
        self.inner.wanted.swap(false, Ordering::AcqRel)
    }

    /// Publishes `view`, and `status` (with the daemon's own figures) if
    /// one was built.
    pub fn publish(&self, view: View, status: Option<(StatusReport, Telemetry)>) {
        let requests = self.inner.requests.load(Ordering::Acquire);
        let mut shelf = self.shelf();
        shelf.view = Arc::new(view);
        if let Some((report, telemetry)) = status {
            shelf.status = Some(Built {
                report: Arc::new(report),
                telemetry: Arc::new(telemetry),
                at: Instant::now(),
                requests,
            });
            drop(shelf);
            self.inner.fresh.notify_all();
        }
    }

    /// The status on the shelf, whether it may be served as it is (no
    /// request handled since it was built, younger than [`STALE`]), and
    /// whether a newer one is to be asked for (not current, or older than
    /// [`FRESH`]).
    fn check(&self, shelf: &Shelf) -> (Option<Built>, bool, bool) {
        let requests = self.inner.requests.load(Ordering::Acquire);
        match &shelf.status {
            Some(b) => {
                let age = b.at.elapsed();
                let current = b.requests == requests;
                (
                    Some(b.clone()),
                    current && age <= STALE,
                    !current || age > FRESH,
                )
            }
            None => (None, false, true),
        }
    }

    /// Asks for a new status; `wake` runs when this reader is the first to
    /// ask since the loop last looked.
    fn ask(&self, wake: &dyn Fn()) {
        if !self.inner.wanted.swap(true, Ordering::AcqRel) {
            wake();
        }
    }

    /// A status to serve: at once when fresh enough, else after waiting for
    /// the loop (at most [`WAIT`]; then the last one, if any). `wake` wakes
    /// the loop; it runs only for the first of the readers asking.
    pub fn status(&self, wake: &dyn Fn()) -> Option<Arc<StatusReport>> {
        self.built(wake).map(|b| b.report)
    }

    /// A status to serve, as [`status`](Self::status), with the daemon's
    /// own figures built with it.
    pub fn scrape(&self, wake: &dyn Fn()) -> Option<(Arc<StatusReport>, Arc<Telemetry>)> {
        self.built(wake).map(|b| (b.report, b.telemetry))
    }

    fn built(&self, wake: &dyn Fn()) -> Option<Built> {
        let since = Instant::now();
        let mut shelf = self.shelf();
        loop {
            let (report, usable, old) = self.check(&shelf);
            if old {
                self.ask(wake);
            }
            if usable {
                return report;
            }
            let left = WAIT.saturating_sub(since.elapsed());
            if left.is_zero() {
                return report;
            }
            shelf = self
                .inner
                .fresh
                .wait_timeout(shelf, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decisions::DecisionLog;

    fn report(epochs: u64) -> StatusReport {
        StatusReport {
            version: "t".into(),
            backend: "sim".into(),
            service_manager: None,
            root: "r".into(),
            root_info: None,
            epoch_ms: 30,
            uptime_ms: 0,
            epochs,
            host: atoll_proto::HostStatus {
                cpus: Default::default(),
                mems: Default::default(),
                adopt_all: false,
                processes: 0,
                stats: Default::default(),
            },
            islands: vec![],
            units: vec![],
            fallbacks: vec![],
            isolation_mode: None,
            accounts: None,
            comm: None,
            discovery: None,
            pressure: None,
            pace: None,
            coord_restored: None,
            energy: None,
            network: Vec::new(),
            slo: Vec::new(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn a_fresh_status_is_served_without_the_loop_and_a_request_makes_it_old() {
        let log = DecisionLog::default();
        let b = Board::new(log.reader());
        // Nothing yet: the first reader asks, and waits for it.
        let loop_side = b.clone();
        let waiter = std::thread::spawn(move || {
            let woken = std::sync::atomic::AtomicU32::new(0);
            let s = loop_side.status(&|| {
                woken.fetch_add(1, Ordering::SeqCst);
            });
            (s.map(|s| s.epochs), woken.into_inner())
        });
        while !b.take_wanted() {
            std::thread::yield_now();
        }
        b.publish(View::default(), Some((report(1), Telemetry::default())));
        assert_eq!(waiter.join().unwrap(), (Some(1), 1));
        // Fresh: served as it is, nobody is woken.
        let woken = AtomicBool::new(false);
        assert_eq!(
            b.status(&|| woken.store(true, Ordering::SeqCst))
                .unwrap()
                .epochs,
            1
        );
        assert!(!woken.into_inner());
        assert!(!b.take_wanted());
        // A request was handled since: the reader wakes the loop and waits.
        b.handled_request();
        let loop_side = b.clone();
        let waiter = std::thread::spawn(move || loop_side.status(&|| {}).map(|s| s.epochs));
        while !b.take_wanted() {
            std::thread::yield_now();
        }
        b.publish(View::default(), Some((report(2), Telemetry::default())));
        assert_eq!(waiter.join().unwrap(), Some(2));
    }
}
