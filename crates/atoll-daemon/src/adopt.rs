//! Moving processes into units and the host partition.
//!
//! Three ways in:
//! - adoption rules in the config, matched against processes the scan finds
//!   (a new process keeps being matched for [`YOUNG_FOR`], since it may still
//!   `exec` into the program a rule names);
//! - `[host] adopt_all`, which sends every other user-space task to the host
//!   partition;
//! - the API (`adopt`, and `atoll run`, which starts its command paused and
//!   adopts it before it runs): see [`crate::controller`]'s requests.
//!
//! # Finding processes
//!
//! Where the kernel reports process events (the proc connector, see
//! `atoll_procfs::connector`), the daemon does not list `/proc` at all
//! after the first scan: every epoch it takes the events that arrived (a
//! non-blocking read), matches the new, `exec`ed, renamed and re-credentialed
//! processes against the rules, and forgets the exited ones. When events
//! were lost (the kernel's buffer overflowed) it lists `/proc` once to
//! catch up.
//!
//! Without events (not permitted, no `CONFIG_PROC_EVENTS`, the simulator,
//! a source that failed), it scans: the scan lists `/proc` every epoch but
//! reads details only of pids it has not settled yet, so its cost follows
//! the rate of new processes, not their number. A young process is looked
//! at again after 1, 2, 4, ... epochs, with one small read (`comm`), and
//! matched again only if it `exec`ed. Without rules and without
//! `adopt_all` it only prunes exited processes, once a second.
//!
//! `status` says which is in use, and why it scans.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::events::{ProcChanges, ProcEventSource};
use atoll_core::name::NameError;
use atoll_core::plan::GroupPath;
use atoll_core::process::{match_rule, ProcessError, ProcessInfo, ProcessTable};
use atoll_core::spec::AdoptRule;
use atoll_core::Name;
use atoll_proto::Discovery;

use crate::command::Caller;
use crate::placement::Placement;
use crate::registry::Registry;

/// How long a newly seen process keeps being matched against adoption rules
/// (it may still `exec` into the program a rule names).
pub const YOUNG_FOR: Duration = Duration::from_secs(1);

/// Why an `adopt` request (or another request naming a process) failed.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    /// No such process.
    #[error("pid {pid}: {source}")]
    NoProcess {
        /// The pid.
        pid: u32,
        /// What reading it said.
        #[source]
        source: ProcessError,
    },
    /// A kernel thread cannot be placed.
    #[error("pid {pid} ({comm}) is a kernel thread")]
    KernelThread {
        /// The pid.
        pid: u32,
        /// Its name.
        comm: String,
    },
    /// The process is not the caller's.
    #[error("pid {pid} ({comm}) belongs to uid {owner}, not to the caller (uid {caller})")]
    NotOwner {
        /// The pid.
        pid: u32,
        /// Its name.
        comm: String,
        /// Its owner.
        owner: u32,
        /// The caller.
        caller: u32,
    },
    /// The unit name is not a valid name.
    #[error("unit {name:?}: {source}")]
    BadName {
        /// The name asked for.
        name: String,
        /// Why it is not valid.
        #[source]
        source: NameError,
    },
    /// The unit name is reserved.
    #[error("{0:?} is reserved")]
    Reserved(String),
    /// The unit exists in another island.
    #[error("unit {unit} is in island {island}, not {asked}")]
    OtherIsland {
        /// The unit.
        unit: String,
        /// Its island.
        island: String,
        /// The island asked for.
        asked: String,
    },
    /// No such island.
    #[error("no island {0:?}")]
    NoIsland(String),
    /// The unit is a systemd unit's: systemd places its processes.
    #[error("unit {unit} is {systemd_unit}, whose processes systemd places: start the process in {systemd_unit}, or pick another unit")]
    SystemdPlaced {
        /// The unit.
        unit: String,
        /// The systemd unit it names.
        systemd_unit: String,
    },
    /// The unit holds another user's process.
    #[error("unit {unit} holds pid {pid} ({comm}) of uid {owner}; uid {caller} may act only on units whose processes it owns")]
    UnitNotOwned {
        /// The unit.
        unit: String,
        /// A process in it.
        pid: u32,
        /// Its name.
        comm: String,
        /// Its owner.
        owner: u32,
        /// The caller.
        caller: u32,
    },
    /// The unit's group could not be made.
    #[error("creating unit {unit}: {source}")]
    CreateUnit {
        /// The unit.
        unit: String,
        /// What the kernel said.
        #[source]
        source: Box<crate::compose::ComposeError>,
    },
    /// A configured unit takes processes only from root and its rules.
    #[error("unit {unit} is in the platform description: only root (or its adoption rules) may place processes in it")]
    ConfiguredUnit {
        /// The unit.
        unit: String,
    },
    /// A unit created at run time by someone else (root, another user, an
    /// application).
    #[error("unit {unit} was created by {by}; uid {caller} may place processes only in units it created")]
    NotYourUnit {
        /// The unit.
        unit: String,
        /// Who created it, in words.
        by: String,
        /// The caller.
        caller: u32,
    },
    /// The island takes no units from users.
    #[error("island {island} takes no units from users (set user_units = true in [island.{island}] to allow it)")]
    NoUserUnits {
        /// The island.
        island: String,
    },
    /// The user has as many units in the island as it may.
    #[error("uid {uid} has {max} units in island {island} already, the most one user may (user_units_max)")]
    TooManyUnits {
        /// The caller.
        uid: u32,
        /// The island.
        island: String,
        /// The limit.
        max: u32,
    },
    /// Too many units created at run time altogether.
    #[error("atoll holds {max} units created at run time already; remove some first")]
    TooManyRuntimeUnits {
        /// The limit.
        max: usize,
    },
    /// A realtime island takes tasks only from root and its RT users.
    #[error("island {island} is realtime: only root or its rt_users may place tasks there (uid {uid} is not one)")]
    Realtime {
        /// The island.
        island: String,
        /// The caller.
        uid: u32,
    },
    /// The process was placed by root or the config: it stays there.
    #[error("pid {pid} was placed in {group} by root or the platform description; only root may move it")]
    PlacedByRoot {
        /// The process.
        pid: u32,
        /// Where it is.
        group: GroupPath,
    },
    /// The network class asked for cannot be given.
    #[error("network class: {0}")]
    NetClass(#[from] crate::netisland::RuntimeClassError),
    /// Only root gives a unit a network class.
    #[error("uid {0} may not give a unit a class on a network island: only root may (its share would come out of the configured units')")]
    NetClassRootOnly(u32),
    /// The unit exists with another network class (or none).
    #[error("unit {unit} exists with {has}, not the class asked for ({asked}): `atoll unit set {unit} --net-island ...` changes a run-time unit's class")]
    OtherNetClass {
        /// The unit.
        unit: String,
        /// Its class, in words.
        has: String,
        /// The class asked for, in words.
        asked: String,
    },
    /// The process could not be moved.
    #[error("moving pid {pid} into {group}: {source}")]
    Move {
        /// The pid.
        pid: u32,
        /// Where to.
        group: GroupPath,
        /// What the kernel said.
        #[source]
        source: Box<atoll_core::backend::BackendError>,
    },
}

/// Process `pid` for a request of `caller`: it must exist, not be a kernel
/// thread, and belong to the caller (root may name any).
pub fn process_of(
    procs: &dyn ProcessTable,
    caller: Caller,
    pid: u32,
) -> Result<ProcessInfo, AdoptError> {
    let info = procs
        .info(pid)
        .map_err(|source| AdoptError::NoProcess { pid, source })?;
    if info.kernel_thread {
        return Err(AdoptError::KernelThread {
            pid,
            comm: info.comm,
        });
    }
    if !caller.is_root() && info.uid != caller.uid {
        return Err(AdoptError::NotOwner {
            pid,
            comm: info.comm,
            owner: info.uid,
            caller: caller.uid,
        });
    }
    Ok(info)
}

/// A process first seen at some time, still being matched.
#[derive(Clone, Debug)]
struct Seen {
    first: Duration,
    settled: bool,
    /// `comm` when last matched; a young process is matched again only
    /// when it changes (it `exec`ed).
    comm: Option<String>,
    /// When to look at it next: checks back off exponentially while it is
    /// young (after 1, 2, 4, ... epochs).
    next: Duration,
}

/// The adoption step's state: where processes come from, the processes
/// seen and how far each is.
#[derive(Default)]
pub struct Adoption {
    seen: HashMap<u32, Seen>,
    /// The kernel's process events, when it reports them.
    events: Option<Box<dyn ProcEventSource>>,
    /// Why `/proc` is scanned instead (`None`: never said).
    scan_reason: Option<String>,
    /// What arrived and waits for the next step.
    pending: ProcChanges,
    /// Events received so far.
    received: u64,
    /// Full listings of `/proc` so far.
    rescans: u64,
}

impl std::fmt::Debug for Adoption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adoption")
            .field("seen", &self.seen.len())
            .field("events", &self.events.as_ref().map(|e| e.kind()))
            .finish_non_exhaustive()
    }
}

/// Whether the platform asks for any adoption at all.
pub fn has_rules(reg: &Registry) -> bool {
    reg.spec().host.adopt_all || reg.units().any(|(u, _)| !u.adopt.is_empty())
}

impl Adoption {
    /// New processes come from `source` from now on; the first step lists
    /// `/proc` once.
    pub fn use_events(&mut self, source: Box<dyn ProcEventSource>) {
        self.events = Some(source);
        self.scan_reason = None;
        self.pending = ProcChanges {
            rescan: true,
            ..ProcChanges::default()
        };
    }

    /// `/proc` is scanned every epoch, because `why`.
    pub fn use_scan(&mut self, why: impl Into<String>) {
        self.events = None;
        self.scan_reason = Some(why.into());
    }

    /// Whether the next epoch can be late without missing anything: the
    /// kernel reports new processes (their events wake the loop) and no
    /// listing of `/proc` is owed. A scan finds them only by looking, so
    /// the loop keeps its pace.
    pub fn quiescent(&self) -> bool {
        self.events.is_some() && self.pending == ProcChanges::default()
    }

    /// The process event source's descriptor, for the loop to wait on.
    pub fn wake_fd(&self) -> Option<i32> {
        self.events.as_ref().and_then(|e| e.wake_fd())
    }

    /// How processes are found, for the status.
    pub fn discovery(&self) -> Discovery {
        Discovery {
            source: match &self.events {
                Some(e) => e.kind().to_string(),
                None => "scan".to_string(),
            },
            reason: self.scan_reason.clone(),
            events: self.received,
            rescans: self.rescans,
        }
    }

    /// Every process is matched against the rules again at the next step
    /// (the rules changed: a reload).
    pub fn rescan(&mut self) {
        self.seen.clear();
        if self.events.is_some() {
            self.pending.rescan = true;
        }
    }

    /// `pid` is placed (by a request): rules never move it.
    pub fn settle(&mut self, pid: u32) {
        if let Some(s) = self.seen.get_mut(&pid) {
            s.settled = true;
        }
    }

    /// One adoption step: events where the kernel gives them, else a scan
    /// (`periodic`: the once-a-second listing that prunes exited
    /// processes when there are no rules).
    pub fn step(&mut self, p: &mut Placement<'_>, self_pid: u32, epoch: Duration, periodic: bool) {
        let Some(source) = self.events.as_mut() else {
            self.scan(p, self_pid, epoch, periodic);
            return;
        };
        match source.next_batch(Duration::ZERO) {
            Ok(batch) => {
                self.received += batch.events.len() as u64;
                self.pending.absorb(&batch);
            }
            Err(e) => {
                tracing::warn!("process events: {e}; scanning /proc from now on");
                self.use_scan(format!("the event source failed: {e}"));
                self.scan(p, self_pid, epoch, true);
                return;
            }
        }
        let changes = std::mem::take(&mut self.pending);
        if changes.rescan {
            self.rescans += 1;
            self.seen.clear();
            self.scan(p, self_pid, epoch, true);
            // Matched once now: later events say what changes.
            for s in self.seen.values_mut() {
                s.settled = true;
            }
            return;
        }
        for pid in &changes.exited {
            self.seen.remove(pid);
            p.reg.forget(*pid);
        }
        if !has_rules(p.reg) {
            return;
        }
        for pid in changes.changed {
            consider(p, pid, self_pid);
        }
    }

    /// Finds processes to adopt and forgets exited ones. `prune` forces a
    /// listing even when there is nothing to adopt. `self_pid` is the
    /// daemon's own; `epoch` the loop's period.
    fn scan(&mut self, p: &mut Placement<'_>, self_pid: u32, epoch: Duration, prune: bool) {
        let rules = has_rules(p.reg);
        if !rules && !prune {
            return;
        }
        let pids = match p.procs.pids() {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!("listing processes: {e}");
                return;
            }
        };
        let live: HashSet<u32> = pids.iter().copied().collect();
        self.seen.retain(|pid, _| live.contains(pid));
        let gone: Vec<u32> = p
            .reg
            .all_managed()
            .filter(|(pid, _)| !live.contains(pid))
            .map(|(pid, _)| pid)
            .collect();
        for pid in gone {
            p.reg.forget(pid);
        }
        if !rules {
            return;
        }
        let now = p.now;
        for pid in pids {
            let seen = self.seen.entry(pid).or_insert(Seen {
                first: now,
                settled: false,
                comm: None,
                next: now,
            });
            if seen.settled || now < seen.next {
                continue;
            }
            seen.next =
                (now + now.saturating_sub(seen.first).max(epoch)).min(seen.first + YOUNG_FOR);
            let old = now.saturating_sub(seen.first) >= YOUNG_FOR;
            let last_comm = seen.comm.clone();
            // A young process seen before is matched again only if it
            // exec'd since: one small read instead of four.
            let comm = match p.procs.comm(pid) {
                Ok(c) => c,
                Err(_) => {
                    self.seen.remove(&pid);
                    continue;
                }
            };
            let settled = if last_comm.as_ref() == Some(&comm) {
                old
            } else {
                consider(p, pid, self_pid) || old
            };
            if let Some(s) = self.seen.get_mut(&pid) {
                s.settled = settled;
                s.comm = Some(comm);
            }
        }
    }
}

/// Matches one process against the rules; returns whether it is settled
/// (placed in a unit, gone, or not to be touched).
fn consider(p: &mut Placement<'_>, pid: u32, self_pid: u32) -> bool {
    let adopt_all = p.reg.spec().host.adopt_all;
    if pid == self_pid && !adopt_all {
        return true;
    }
    if !adopt_all {
        // One small read first: most new processes match no rule by their
        // name or pid, and then nothing more of them is read.
        let Ok(comm) = p.procs.comm(pid) else {
            return true;
        };
        let could = p.reg.units().any(|(u, _)| {
            u.adopt
                .iter()
                .any(|r| atoll_core::process::rule_could_match(r, pid, &comm))
        });
        if !could {
            return false;
        }
    }
    let Ok(info) = p.procs.info(pid) else {
        return true;
    };
    if info.kernel_thread {
        return true;
    }
    let current = p.in_atoll(&info.cgroups);
    if current.as_ref().is_some_and(|g| g != &GroupPath::host()) {
        return true; // already in a unit: rules never move it again
    }
    let units: Vec<(Name, Vec<AdoptRule>)> = p
        .reg
        .units()
        .map(|(u, _)| (u.name.clone(), u.adopt.clone()))
        .collect();
    let matched = match_rule(units.iter().map(|(n, r)| (n, r.as_slice())), &info)
        .map(|(n, r)| (n.clone(), r.clone()));
    if let Some((unit, rule)) = matched {
        let Some(group) = p.reg.unit_group(unit.as_str()) else {
            return true;
        };
        let why = Reason::Rule {
            unit: unit.to_string(),
            rule,
        };
        let _ = p.move_into(&info, &group, why);
        return true;
    }
    if adopt_all && current.is_none() {
        let _ = p.move_into(&info, &GroupPath::host(), Reason::HostAdoptAll);
    }
    false
}
