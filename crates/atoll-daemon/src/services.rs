//! Units a service manager keeps: which groups of the plan are bound to
//! systemd units, and why the others could not be.
//!
//! A unit that names a systemd unit (`adopt = [{ systemd_unit =
//! "nginx.service" }]`) is enforced through that unit's properties: its
//! group is bound to it ([`Actuator::bind`]), so the composer's writes of
//! the group become property changes, and monitors read the unit's cgroup.
//! Where the backend has a service manager, every other unit outside an
//! exclusive island is bound to a transient scope of its own in atoll's
//! slice (`atoll-ISLAND-UNIT.scope`), started for the first process atoll
//! places in it: systemd then knows the processes atoll moved (`atoll run`,
//! adopt rules, applications), they are not part of atoll's own service,
//! and a crash of the daemon leaves them running where they are. Units of
//! exclusive islands stay in atoll's own (delegated) subtree, since a
//! partition's CPUs are outside every other cgroup.
//!
//! [`Services::sync`] runs whenever the plan changes, before the composer
//! writes it: it binds what the plan names and unbinds (putting back every
//! property changed) what it no longer names. Each is a decision. A unit
//! that cannot be bound is reported in the status and tried again every
//! [`RETRY_EVERY`]; until then its group is an ordinary (empty) group of
//! atoll's.

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_core::backend::{Backend, External};
use atoll_core::decision::{Action, Decision, Reason};
use atoll_core::plan::GroupPath;
use atoll_core::spec::UnitSpec;

use crate::compose::Composer;
use crate::decisions::DecisionLog;
use crate::registry::Registry;

/// How often a unit that could not be bound is tried again.
pub const RETRY_EVERY: Duration = Duration::from_secs(10);

/// The scope a unit's processes run in on a systemd host.
pub fn scope_name(unit: &UnitSpec) -> String {
    format!("atoll-{}-{}.scope", unit.island, unit.name)
}

/// What a unit's group should be bound to, if anything: the systemd unit
/// it names; else, where the backend has a service manager (`scopes`) and
/// its island is not exclusive, a scope of its own.
pub fn wanted(reg: &Registry, unit: &UnitSpec, scopes: bool) -> Option<External> {
    if let Some(name) = unit.systemd_unit() {
        return Some(External::SystemdUnit(name.to_string()));
    }
    let exclusive = reg.island(&unit.island).is_some_and(|i| i.exclusive);
    (scopes && !exclusive).then(|| External::Scope(scope_name(unit)))
}

/// A unit that could not be bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unbound {
    /// What it should be bound to.
    pub to: External,
    /// Why it is not.
    pub why: String,
    /// When it was last tried.
    pub tried: Duration,
}

/// The bindings the daemon asked for and those that failed.
#[derive(Debug, Default)]
pub struct Services {
    /// Groups bound, and to what.
    bound: BTreeMap<GroupPath, External>,
    /// Groups that should be bound and are not.
    unbound: BTreeMap<GroupPath, Unbound>,
    /// The registry's plan generation at the last sync.
    synced: Option<u64>,
}

impl Services {
    /// Takes the bindings the backend holds already (restored from the
    /// state file after a restart), so [`sync`](Self::sync) keeps those
    /// still wanted and puts back the rest.
    pub fn adopt_bindings(&mut self, backend: &dyn Backend) {
        self.bound = backend.bindings().into_iter().collect();
        self.synced = None;
    }

    /// What `group` is bound to.
    pub fn bound(&self, group: &GroupPath) -> Option<&External> {
        self.bound.get(group)
    }

    /// Why `group` is not bound as it should be.
    pub fn unbound(&self, group: &GroupPath) -> Option<&Unbound> {
        self.unbound.get(group)
    }

    /// Whether a sync is due: the plan changed, or a failed binding is due
    /// for another try.
    pub fn due(&self, reg: &Registry, now: Duration) -> bool {
        self.synced != Some(reg.generation())
            || self
                .unbound
                .values()
                .any(|u| now.saturating_sub(u.tried) >= RETRY_EVERY)
    }

    /// Binds every group the plan wants bound and unbinds the groups bound
    /// that it no longer wants so. A group of atoll's own that was written
    /// before its binding succeeded is removed first. Returns the groups
    /// whose binding changed: the composer forgets what it wrote to them and
    /// writes them again.
    pub fn sync(
        &mut self,
        reg: &Registry,
        backend: &mut dyn Backend,
        compose: &mut Composer,
        log: &mut DecisionLog,
        now: Duration,
    ) -> Vec<GroupPath> {
        let scopes = backend.capabilities().service_manager;
        let want: BTreeMap<GroupPath, External> = reg
            .units()
            .filter_map(|(u, _)| {
                let to = wanted(reg, u, scopes)?;
                Some((GroupPath::unit(&u.island, &u.name), to))
            })
            .collect();
        let mut changed = Vec::new();
        let held: BTreeMap<GroupPath, External> = backend.bindings().into_iter().collect();
        let stale: Vec<GroupPath> = self
            .bound
            .iter()
            .filter(|(g, to)| want.get(*g) != Some(*to))
            .map(|(g, _)| g.clone())
            .collect();
        for g in stale {
            let Some(to) = self.bound.remove(&g) else {
                continue;
            };
            changed.push(g.clone());
            if !held.contains_key(&g) {
                continue; // removed with its group: put back already
            }
            match backend.unbind(&g) {
                Ok(lines) => log.record(Decision {
                    at: now,
                    action: Action::ApplyGroup {
                        path: g.clone(),
                        knobs: lines,
                        layers: Vec::new(),
                    },
                    why: Reason::Housekeeping {
                        detail: format!(
                            "{g} is no longer bound to {to}: every property atoll changed is put back"
                        ),
                    },
                }),
                Err(e) => {
                    tracing::warn!("unbinding {g} from {to}: {e}");
                    log.record(Decision {
                        at: now,
                        action: Action::ApplyGroup {
                            path: g.clone(),
                            knobs: Vec::new(),
                            layers: Vec::new(),
                        },
                        why: Reason::KernelRefused {
                            error: format!("putting back {to}: {e}"),
                        },
                    });
                }
            }
        }
        self.unbound.retain(|g, _| want.contains_key(g));
        for (g, to) in want {
            if self.bound.get(&g) == Some(&to) {
                continue;
            }
            let retry = self.unbound.get(&g).filter(|u| u.to == to);
            if retry.is_some_and(|u| {
                self.synced == Some(reg.generation()) && now.saturating_sub(u.tried) < RETRY_EVERY
            }) {
                continue;
            }
            if compose.applied(&g).is_some() {
                // Written as a group of atoll's while it could not be bound.
                if let Err(e) = compose.remove(&g, backend, log, now, Reason::Config) {
                    tracing::warn!("{g}: removing atoll's own group before binding {to}: {e}");
                    continue;
                }
            }
            match backend.bind(&g, &to) {
                Ok(()) => {
                    self.unbound.remove(&g);
                    self.bound.insert(g.clone(), to.clone());
                    log.record(Decision {
                        at: now,
                        action: Action::ApplyGroup {
                            path: g.clone(),
                            knobs: vec![format!("bound={to}")],
                            layers: Vec::new(),
                        },
                        why: Reason::Config,
                    });
                    changed.push(g);
                }
                Err(e) => {
                    let why = e.to_string();
                    let first = retry.is_none_or(|u| u.why != why);
                    if first {
                        tracing::warn!("{g}: cannot bind {to}: {why}");
                        log.record(Decision {
                            at: now,
                            action: Action::ApplyGroup {
                                path: g.clone(),
                                knobs: vec![format!("bound={to}")],
                                layers: Vec::new(),
                            },
                            why: Reason::KernelRefused { error: why.clone() },
                        });
                    }
                    self.unbound.insert(
                        g,
                        Unbound {
                            to,
                            why,
                            tried: now,
                        },
                    );
                }
            }
        }
        self.synced = Some(reg.generation());
        changed
    }

    /// Status lines for the units that should be bound and are not.
    pub fn warnings(&self) -> Vec<String> {
        self.unbound
            .iter()
            .map(|(g, u)| format!("{g}: not bound to {}: {}", u.to, u.why))
            .collect()
    }
}
