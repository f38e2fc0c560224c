//! `NetIslands`: the daemon's network islands (issue 17,
//! `docs/netisland.md`). It owns their coordinators and the interfaces it
//! took over; at start it takes each interface (snapshot first), writes its
//! HTB tree from the coordinator's shares and its steering CPUs; at
//! teardown it gives every interface back as found. It gives each unit's
//! group its class id as socket priority: on cgroup v1 in `net_prio`
//! (`classify`), on cgroup v2 with atoll's nftables table (`nft`); what it
//! found on each interface is kept for the state file so that a run after a
//! crash adopts the interface and still gives it back exactly (`saved`); a
//! reload adds, changes and gives back islands (`lifecycle`). Every write
//! is a [`Decision`] (`atoll why wire`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use atoll_core::decision::{Action, Decision, Reason};
use atoll_core::netisland::{NetCoordinator, NetIslandError, NetIslandSetup};
use atoll_core::spec::PlatformSpec;
use atoll_core::CpuSet;
use atoll_core::Name;
use atoll_net::{Interfaces, LeafStats, NetBackend, Steering, TcPlan};

use crate::coord::RecvQueues;
use crate::decisions::DecisionLog;

mod classify;
mod coord;
mod lifecycle;
mod nft;
mod runtime;
mod saved;
mod status;

pub use coord::IslandTrigger;
pub use nft::{BoxedRunner, GroupDir};
pub use runtime::{RuntimeClass, RuntimeClassError};
pub use saved::{SavedFile, SavedInterface, SavedNetwork};

/// The network islands and their interfaces.
pub struct NetIslands {
    ifs: Interfaces<Box<dyn NetBackend + Send>>,
    islands: Vec<(NetIslandSetup, NetCoordinator)>,
    /// Overlays a network island refused (island, overlay): not asked again.
    refused: BTreeSet<(Name, Name)>,
    /// Each interface's leaf figures, as last read.
    stats: BTreeMap<String, Vec<LeafStats>>,
    /// Reads the units' socket receive queues (none: socket backlogs are
    /// not watched).
    recv: Option<Box<dyn RecvQueues>>,
    /// The coordination's weight step (for islands a reload adds).
    step: f64,
    /// Unit groups whose `net_prio.ifpriomap` atoll wrote, with what they
    /// held.
    classified: Vec<classify::Classified>,
    /// (island, unit) whose group could not be written: not tried again
    /// until a reload.
    class_failed: BTreeSet<(Name, Name)>,
    /// Whether the backend keeps unit groups in a `net_prio` hierarchy
    /// (`None`: not asked yet).
    net_prio: Option<bool>,
    /// cgroup v2 classification through atoll's nftables table.
    nft: nft::NftRoute,
    /// What a previous run found on its interfaces (from the state file),
    /// for adopting them after a crash.
    saved: BTreeMap<String, atoll_net::Snapshot>,
    /// The classes of units made at run time (`runtime`).
    runtime: Vec<RuntimeClass>,
}

/// Where a unit's group is: in a cgroup v1 `net_prio` hierarchy or a
/// cgroup v2 one (`None`: neither, or no such unit).
pub type GroupDirs<'a> = &'a dyn Fn(&Name) -> Option<GroupDir>;

impl std::fmt::Debug for NetIslands {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetIslands")
            .field("islands", &self.islands.len())
            .finish_non_exhaustive()
    }
}

impl NetIslands {
    /// The spec's network islands over `backend` and the steering files
    /// under `steering`; `step` is the coordination's weight step.
    pub fn new(
        backend: Box<dyn NetBackend + Send>,
        steering: Steering,
        spec: &PlatformSpec,
        step: f64,
    ) -> Result<Self, NetIslandError> {
        let islands = spec
            .network
            .iter()
            .map(|s| Ok((s.clone(), NetCoordinator::new(s.clone(), step)?)))
            .collect::<Result<_, NetIslandError>>()?;
        Ok(Self {
            ifs: Interfaces::new(backend, steering),
            islands,
            refused: BTreeSet::new(),
            stats: BTreeMap::new(),
            recv: None,
            step,
            classified: Vec::new(),
            class_failed: BTreeSet::new(),
            net_prio: None,
            nft: nft::NftRoute::Off,
            saved: BTreeMap::new(),
            runtime: Vec::new(),
        })
    }

    /// Takes every interface over and writes it; returns a warning for each
    /// island that could not be (its interface is left as it was, or given
    /// back at once if the write failed half-way). An interface a previous
    /// run left with its tree on it is adopted when the state file has what
    /// that run found there ([`Self::set_saved`]).
    pub fn start(&mut self, now: Duration, log: &mut DecisionLog) -> Vec<String> {
        let mut warnings = Vec::new();
        for i in 0..self.islands.len() {
            self.start_island(i, now, &Reason::Config, log, &mut warnings);
        }
        warnings
    }

    /// Takes island `i`'s interface over (or adopts it) and writes its
    /// tree and steering, each a decision with `why`.
    fn start_island(
        &mut self,
        i: usize,
        now: Duration,
        why: &Reason,
        log: &mut DecisionLog,
        warnings: &mut Vec<String>,
    ) {
        let (setup, coord) = &self.islands[i];
        let iface = setup.interface.as_str();
        let record = |log: &mut DecisionLog, change: String| {
            log.record(net_decision(now, &setup.name, iface, change, why.clone()));
        };
        let adopted = match self.saved.remove(iface) {
            None => Ok(false),
            Some(snap) => self.ifs.adopt(iface, snap),
        };
        let taken = match adopted {
            Ok(true) => Ok(self.ifs.snapshot(iface).map_or_else(String::new, |snap| {
                format!(
                    "adopted from the run before (its tree htb 1: replaced; root qdisc {} and {} steering files as that run found them, from the state file)",
                    snap.root,
                    snap.steer.files.len()
                )
            })),
            Ok(false) => self.ifs.take(iface).map(|snap| {
                format!(
                    "taken over (root qdisc {}, {} steering files saved)",
                    snap.root,
                    snap.steer.files.len()
                )
            }),
            Err(e) => Err(e),
        };
        match taken {
            Ok(text) => record(log, text),
            Err(e) => {
                warnings.push(format!("network island {}: {e}", setup.name));
                return;
            }
        }
        let plan = TcPlan::from_rates(coord.rate_bps(), setup.leaf.into(), &coord.rates());
        if let Err(e) = self.ifs.apply(iface, &plan) {
            warnings.push(format!("network island {}: {e}", setup.name));
            give_back(&mut self.ifs, setup, now, why, log, warnings);
            return;
        }
        record(log, describe(coord, &plan));
        let (rx, tx) = (setup.rx_cpus.as_ref(), setup.tx_cpus.as_ref());
        if rx.is_some() || tx.is_some() {
            match self.ifs.steer(iface, rx, tx) {
                Ok(written) => record(log, steering_note(rx, tx, written.len())),
                Err(e) => warnings.push(format!("network island {}: {e}", setup.name)),
            }
        }
    }

    /// Gives every interface back as found (the unit groups' priorities
    /// first); a warning for each that could not be.
    pub fn teardown(&mut self, now: Duration, log: &mut DecisionLog) -> Vec<String> {
        let mut warnings = self.unclassify(|_| true, now, &Reason::Teardown, log);
        warnings.extend(self.remove_nft(now, log));
        for (setup, _) in &self.islands {
            if self.ifs.snapshot(&setup.interface).is_some() {
                give_back(
                    &mut self.ifs,
                    setup,
                    now,
                    &Reason::Teardown,
                    log,
                    &mut warnings,
                );
            }
        }
        warnings
    }

    /// Sets the reader of the units' socket receive queues (the socket
    /// backlog of the backlog triggers).
    pub fn set_recv_queues(&mut self, reader: Box<dyn RecvQueues>) {
        self.recv = Some(reader);
    }

    /// Takes the reader of socket receive queues back.
    pub fn take_recv_queues(&mut self) -> Option<Box<dyn RecvQueues>> {
        self.recv.take()
    }

    /// Whether the next epoch can be late without missing anything: no
    /// network island is set up (none configured: nothing is read or
    /// written; units made at run time come with a command, which wakes
    /// the loop).
    pub fn quiescent(&self) -> bool {
        self.islands.is_empty()
    }

    /// The interfaces taken over now.
    pub fn managed(&self) -> Vec<String> {
        self.ifs.managed().map(str::to_string).collect()
    }
}

fn give_back(
    ifs: &mut Interfaces<Box<dyn NetBackend + Send>>,
    setup: &NetIslandSetup,
    now: Duration,
    why: &Reason,
    log: &mut DecisionLog,
    warnings: &mut Vec<String>,
) {
    let change = match ifs.restore(&setup.interface) {
        Ok(()) => "restored as found".to_string(),
        Err(e) => {
            warnings.push(format!("network island {}: {e}", setup.name));
            format!("restore failed: {e}")
        }
    };
    log.record(net_decision(
        now,
        &setup.name,
        &setup.interface,
        change,
        why.clone(),
    ));
}

/// The decision that a change was made on network island `island`'s
/// interface (`why` says why): every network-island decision is one.
fn net_decision(
    at: Duration,
    island: &impl std::fmt::Display,
    interface: &str,
    change: String,
    why: Reason,
) -> Decision {
    Decision {
        at,
        action: Action::SetNetwork {
            island: island.to_string(),
            interface: interface.to_string(),
            change,
        },
        why,
    }
}

/// What a steering write did, for the decision log.
fn steering_note(rx: Option<&CpuSet>, tx: Option<&CpuSet>, files: usize) -> String {
    let cpus = |c: Option<&CpuSet>| c.map_or("as found".to_string(), ToString::to_string);
    format!(
        "steering: rx CPUs {}, tx CPUs {} ({files} files)",
        cpus(rx),
        cpus(tx)
    )
}

/// The tree written, for the decision log: `HTB tree: 1:2 (default)
/// 20000000 bit/s, 1:10 (api) ...`.
fn describe(coord: &NetCoordinator, plan: &TcPlan) -> String {
    let classes: Vec<String> = coord
        .rates()
        .iter()
        .map(|r| {
            format!(
                "1:{:x} ({}) rate {} ceil {} prio {}",
                r.minor,
                r.unit.as_ref().map_or("default", |u| u.as_str()),
                r.rate_bps,
                r.ceil_bps,
                r.prio
            )
        })
        .collect();
    format!(
        "HTB tree at {} bit/s, {} leaves: {}",
        plan.rate_bps,
        plan.leaf.kind(),
        classes.join(", ")
    )
}
