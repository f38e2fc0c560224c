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
//! The scan lists `/proc` but reads details only of pids it has not settled
//! yet, so its cost follows the rate of new processes, not their number. A
//! young process is looked at again after 1, 2, 4, ... epochs, with one
//! small read (`comm`), and matched again only if it `exec`ed. Without
//! rules and without `adopt_all` it only prunes exited processes.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::name::NameError;
use atoll_core::plan::GroupPath;
use atoll_core::process::{match_rule, ProcessError, ProcessInfo, ProcessTable};
use atoll_core::spec::AdoptRule;
use atoll_core::Name;

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

/// The adoption step's state: the processes seen and how far each is.
#[derive(Debug, Default)]
pub struct Adoption {
    seen: HashMap<u32, Seen>,
}

/// Whether the platform asks for any adoption at all.
pub fn has_rules(reg: &Registry) -> bool {
    reg.spec().host.adopt_all || reg.units().any(|(u, _)| !u.adopt.is_empty())
}

impl Adoption {
    /// `pid` is placed (by a request): rules never move it.
    pub fn settle(&mut self, pid: u32) {
        if let Some(s) = self.seen.get_mut(&pid) {
            s.settled = true;
        }
    }

    /// Finds processes to adopt and forgets exited ones. `prune` forces a
    /// listing even when there is nothing to adopt. `self_pid` is the
    /// daemon's own; `epoch` the loop's period.
    pub fn scan(&mut self, p: &mut Placement<'_>, self_pid: u32, epoch: Duration, prune: bool) {
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
