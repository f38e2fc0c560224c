//! [`DiagMonitor`]: the [`NetMonitor`] of atoll on Linux.
//!
//! One [`NetMonitor::sample`]:
//!
//! 1. the [`OwnerMap`] starts the epoch with every pid of every unit
//!    (scanning new pids, and those whose periodic rescan is due);
//! 2. the pids are grouped by network namespace, and the [`SocketSource`]
//!    dumps each namespace that has a readable pid once (a namespace that
//!    cannot be entered is skipped and counted in
//!    [`MonitorStats::namespaces_skipped`]; any other source error fails the
//!    sample);
//! 3. the owner map looks for the holders of sockets new in the dump;
//! 4. each unit gets the sum of the figures of the sockets its pids hold,
//!    each socket once per unit even when several of its processes share
//!    it. A socket shared by processes of two units counts for both.
//!
//! [`DiagMonitor::new`] picks the source: sock_diag netlink if a
//! `NETLINK_SOCK_DIAG` socket opens and a TCP dump of the monitor's own
//! namespace works, else `/proc/net`. [`DiagMonitor::source_kind`] and
//! [`DiagMonitor::fallback_reason`] say which one runs and why.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use atoll_core::comm::{NetError, NetMonitor, UnitNetSample};
use atoll_core::Name;

use crate::netlink::{NetlinkError, NetlinkSource};
use crate::owners::{OwnerMap, OwnerStats};
use crate::procnet::{ProcNetError, ProcNetSource};
use crate::wire::WireError;
use crate::{NetNs, Protocols, SocketFigures, SocketSource, SourceError, SourceKind};

/// How a [`DiagMonitor`] is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorOptions {
    /// The procfs root (default `/proc`).
    pub proc_root: PathBuf,
    /// Which sockets to dump (default: TCP, UDP and Unix).
    pub protocols: Protocols,
    /// Rescan every pid's fds every this many samples (default 33: about
    /// 1 s at the 30 ms epoch; 0: never). See [`crate::owners`].
    pub full_rescan_every: u32,
    /// Shortest gap, in samples, between two blind rescans of a pid whose
    /// fd count did not change (default 4). See [`crate::owners`].
    pub churn_rescan_every: u32,
}

impl Default for MonitorOptions {
    fn default() -> Self {
        Self {
            proc_root: PathBuf::from("/proc"),
            protocols: Protocols::default(),
            full_rescan_every: 33,
            churn_rescan_every: 4,
        }
    }
}

/// Counters of a monitor's work since it was made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MonitorStats {
    /// Samples taken.
    pub samples: u64,
    /// Namespace dumps done.
    pub dumps: u64,
    /// Sockets the last sample's dumps returned (all of them, not only the
    /// units').
    pub last_sockets: usize,
    /// Namespace dumps skipped because the namespace could not be dumped.
    pub namespaces_skipped: u64,
    /// Why the last skip happened.
    pub last_skip: Option<String>,
    /// The owner map's counters.
    pub owners: OwnerStats,
}

/// Why a sample failed.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// The source could not dump a namespace.
    #[error("network namespace {ns}: {source}", ns = ns_name(*.ns))]
    Source {
        /// The namespace.
        ns: NetNs,
        /// What failed.
        #[source]
        source: SourceError,
    },
}

fn ns_name(ns: NetNs) -> String {
    ns.map_or_else(|| "(own)".to_string(), |n| format!("net:[{n}]"))
}

impl From<MonitorError> for NetError {
    fn from(e: MonitorError) -> Self {
        let what_ns = match &e {
            MonitorError::Source { ns, .. } => ns_name(*ns),
        };
        let MonitorError::Source { source, .. } = e;
        match source {
            SourceError::Netlink(NetlinkError::Io { op, source }) => NetError::Io {
                what: format!("sock_diag {op} ({what_ns})"),
                source,
            },
            SourceError::Netlink(NetlinkError::Netns { path, source }) => NetError::Io {
                what: path.display().to_string(),
                source,
            },
            SourceError::Netlink(NetlinkError::Wire(w)) => {
                let value = match &w {
                    WireError::Truncated { request, .. }
                    | WireError::Kernel { request, .. }
                    | WireError::UnexpectedType { request, .. }
                    | WireError::WrongFamily { request, .. } => request.to_string(),
                };
                NetError::Parse {
                    what: format!("sock_diag ({what_ns})"),
                    value,
                    reason: w.to_string(),
                }
            }
            SourceError::Netlink(e @ NetlinkError::Oversized { .. }) => NetError::Parse {
                what: format!("sock_diag ({what_ns})"),
                value: String::new(),
                reason: e.to_string(),
            },
            SourceError::ProcNet(ProcNetError::Read { path, source }) => NetError::Io {
                what: path.display().to_string(),
                source,
            },
            SourceError::ProcNet(ProcNetError::Parse {
                path,
                line,
                value,
                reason,
            }) => NetError::Parse {
                what: format!("{}:{line}", path.display()),
                value,
                reason: reason.to_string(),
            },
            SourceError::ProcNet(e @ ProcNetError::Gone { .. }) => NetError::Io {
                what: what_ns,
                source: std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string()),
            },
        }
    }
}

/// The network monitor: socket figures per unit (see the module docs).
pub struct DiagMonitor {
    source: Box<dyn SocketSource>,
    owners: OwnerMap,
    fallback_reason: Option<String>,
    figures: Vec<SocketFigures>,
    by_inode: HashMap<u64, SocketFigures>,
    stats: MonitorStats,
}

impl std::fmt::Debug for DiagMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiagMonitor")
            .field("source", &self.source.kind())
            .field("fallback_reason", &self.fallback_reason)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl DiagMonitor {
    /// A monitor on the best source available: sock_diag, else `/proc/net`.
    pub fn new(options: MonitorOptions) -> Self {
        match Self::probe_netlink(&options) {
            Ok(src) => Self::with_source(options, Box::new(src)),
            Err(reason) => {
                let src = ProcNetSource::new(options.proc_root.clone(), options.protocols);
                let mut m = Self::with_source(options, Box::new(src));
                m.fallback_reason = Some(reason);
                m
            }
        }
    }

    /// A monitor on the `/proc/net` tables, whatever the kernel offers.
    pub fn proc_net(options: MonitorOptions) -> Self {
        let src = ProcNetSource::new(options.proc_root.clone(), options.protocols);
        Self::with_source(options, Box::new(src))
    }

    /// A monitor on a given source (tests, or a caller that chose).
    pub fn with_source(options: MonitorOptions, source: Box<dyn SocketSource>) -> Self {
        Self {
            source,
            owners: OwnerMap::new(options.proc_root, options.full_rescan_every)
                .with_churn_rescan_every(options.churn_rescan_every),
            fallback_reason: None,
            figures: Vec::new(),
            by_inode: HashMap::new(),
            stats: MonitorStats::default(),
        }
    }

    fn probe_netlink(options: &MonitorOptions) -> Result<NetlinkSource, String> {
        let mut src = NetlinkSource::open(options.proc_root.clone(), options.protocols)
            .map_err(|e| e.to_string())?;
        let mut scratch = Vec::new();
        src.dump(None, &[], &mut scratch)
            .map_err(|e| e.to_string())?;
        if options.protocols.tcp && src.unavailable().contains(&"tcp4") {
            return Err("sock_diag has no TCP dump (inet_diag/tcp_diag missing)".to_string());
        }
        Ok(src)
    }

    /// Which source this monitor reads.
    pub fn source_kind(&self) -> SourceKind {
        self.source.kind()
    }

    /// Why sock_diag is not used, when [`DiagMonitor::new`] fell back.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    /// Work counters.
    pub fn stats(&self) -> MonitorStats {
        MonitorStats {
            owners: *self.owners.stats(),
            ..self.stats.clone()
        }
    }

    /// One sample per unit; the error keeps this crate's detail (the
    /// [`NetMonitor`] impl maps it into [`NetError`]).
    pub fn sample_units(
        &mut self,
        units: &BTreeMap<Name, Vec<u32>>,
    ) -> Result<BTreeMap<Name, UnitNetSample>, MonitorError> {
        self.stats.samples += 1;
        let mut pids: Vec<u32> = units.values().flatten().copied().collect();
        pids.sort_unstable();
        pids.dedup();
        let full = self.owners.begin(&pids);

        let mut by_ns: BTreeMap<NetNs, Vec<u32>> = BTreeMap::new();
        for &pid in &pids {
            if self.owners.readable(pid) {
                by_ns
                    .entry(self.owners.namespace(pid))
                    .or_default()
                    .push(pid);
            }
        }
        if full {
            let live: Vec<NetNs> = by_ns.keys().copied().collect();
            self.source.retain_namespaces(&live);
        }

        self.figures.clear();
        for (&ns, ns_pids) in &by_ns {
            self.stats.dumps += 1;
            match self.source.dump(ns, ns_pids, &mut self.figures) {
                Ok(()) => {}
                Err(e) if e.skips_namespace() => {
                    self.stats.namespaces_skipped += 1;
                    self.stats.last_skip = Some(format!("{}: {e}", ns_name(ns)));
                }
                Err(source) => return Err(MonitorError::Source { ns, source }),
            }
        }
        self.stats.last_sockets = self.figures.len();
        self.owners.reconcile(self.figures.iter().map(|f| f.inode));

        self.by_inode.clear();
        self.by_inode
            .extend(self.figures.iter().map(|f| (f.inode, *f)));
        let mut out = BTreeMap::new();
        let mut held: Vec<u64> = Vec::new();
        for (name, unit_pids) in units {
            held.clear();
            for &pid in unit_pids {
                held.extend_from_slice(self.owners.inodes(pid));
            }
            held.sort_unstable();
            held.dedup();
            let mut s = UnitNetSample::default();
            for inode in &held {
                if let Some(f) = self.by_inode.get(inode) {
                    s.add(&UnitNetSample {
                        recv_queued: f.rqueue,
                        send_queued: f.wqueue,
                        bytes_received: f.bytes_read.unwrap_or(0),
                        bytes_sent: f.bytes_written.unwrap_or(0),
                        sockets: 1,
                    });
                }
            }
            out.insert(name.clone(), s);
        }
        Ok(out)
    }
}

impl NetMonitor for DiagMonitor {
    fn sample(
        &mut self,
        units: &BTreeMap<Name, Vec<u32>>,
    ) -> Result<BTreeMap<Name, UnitNetSample>, NetError> {
        self.sample_units(units).map_err(NetError::from)
    }
}

#[cfg(test)]
#[path = "monitor_tests.rs"]
mod tests;
