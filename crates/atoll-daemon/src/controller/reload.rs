//! Reload: a new platform description applied to the running daemon as a
//! diff, with nothing lost.
//!
//! The new description has been parsed and validated before it gets here
//! (a bad one never reaches the controller: the daemon keeps the old one).
//! Applying it:
//!
//! 1. the units that go (no longer configured, moved to another island, or
//!    in an island that goes; runtime units whose island goes or whose name
//!    a configured unit now takes in another island) are thawed and give
//!    their processes back where they came from, each a decision;
//! 2. the isolation grants and communication boosts are lifted (they are
//!    recomputed from the new description in the next epochs);
//! 3. the registry takes the new description, so the plan changes;
//! 4. the groups that went are removed, deepest first;
//! 5. coordination is set up again for the new islands and overlays, and
//!    keeps the state of those still there (loans, tuned knobs, backoff,
//!    escalation counts, checked as after a restart; see
//!    [`crate::coord::restore`]): a loan of an island, overlay or unit that
//!    went is released, its CPU back with its owner, each a decision; the
//!    application policy takes its new weights, and every process is
//!    matched against the new adoption rules;
//! 6. every group is written from the new plan, CPUs in the safe order of
//!    [`crate::compose`], and the state file is saved.
//!
//! A change the kernel refuses while writing the new plan is put back: the
//! old description is applied again the same way, and the reload answers
//! with the refusal.

use std::collections::BTreeSet;

use atoll_core::decision::{Action, Reason};
use atoll_core::plan::GroupPath;
use atoll_core::spec::PlatformSpec;
use atoll_core::Name;

use super::{placement, Controller};
use crate::compose::ComposeError;
use crate::coord::restore::{Origin, ToRestore};
use crate::coord::Coordination;
use crate::isolation::Isolation;

/// Reads the configuration again: the validated description, or the error
/// to answer with (file, line, column and what is wrong).
pub type ConfigSource = Box<dyn FnMut() -> Result<PlatformSpec, String> + Send>;

/// Why a reload changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The daemon was started without a configuration it can read again.
    #[error("this daemon has no configuration file to read again (it was started with {0})")]
    NoSource(String),
    /// The configuration does not parse or validate; the old one stays.
    #[error("{0}; the daemon keeps running on the configuration it had")]
    Config(String),
    /// The kernel refused the new plan; the old one was put back.
    #[error("applying the new configuration: {source}; the previous configuration was put back")]
    Refused {
        /// The refusal.
        #[source]
        source: Box<ComposeError>,
    },
    /// An island's frequency policy is one the machine cannot follow;
    /// nothing was changed.
    #[error("{0}; the daemon keeps running on the configuration it had")]
    Frequency(#[from] crate::frequency::FrequencyError),
    /// A power cap on a machine without RAPL; nothing was changed.
    #[error("{0}; the daemon keeps running on the configuration it had")]
    PowerCap(#[from] crate::powercap::NoRapl),
}

impl Controller {
    /// Where [`reload_from_source`](Self::reload_from_source) reads the
    /// configuration; `None` with why there is none (`the embedded
    /// default`).
    pub fn set_config_source(&mut self, source: Result<ConfigSource, String>) {
        self.config_source = Some(source);
    }

    /// Reads the configuration again and applies it (see the module docs).
    pub fn reload_from_source(&mut self) -> Result<Vec<String>, ReloadError> {
        let spec = match self.config_source.as_mut() {
            None => return Err(ReloadError::NoSource("no configuration source".into())),
            Some(Err(why)) => return Err(ReloadError::NoSource(why.clone())),
            Some(Ok(read)) => read().map_err(ReloadError::Config)?,
        };
        self.reload(spec)
    }

    /// Applies `new` as a diff (see the module docs); returns what changed,
    /// a line each (empty when nothing did).
    pub fn reload(&mut self, new: PlatformSpec) -> Result<Vec<String>, ReloadError> {
        self.coord_staged = false;
        let old = self.reg.spec().clone();
        let old_cap = self.power_cap_now();
        let changes = describe(&old, &new);
        if changes.is_empty() {
            return Ok(changes);
        }
        if let Some(freq) = &self.freq {
            // Refused before anything moves: bad input changes nothing.
            freq.check(&new)?;
        }
        self.check_power_cap(&new)?;
        for c in &changes {
            tracing::info!("reload: {c}");
        }
        match self.apply_spec(new, &changes) {
            None => {
                self.reload_frequencies();
                self.reload_network();
                self.reload_power_cap(old_cap);
                Ok(changes)
            }
            Some(source) => {
                tracing::warn!("reload: {source}; putting the previous configuration back");
                let back = describe(self.reg.spec(), &old);
                if let Some(e) = self.apply_spec(old, &back) {
                    tracing::error!("reload: putting the previous configuration back: {e}");
                }
                Err(ReloadError::Refused {
                    source: Box::new(source),
                })
            }
        }
    }

    /// Steps 1 to 6 of the module docs; returns the first refusal.
    fn apply_spec(&mut self, new: PlatformSpec, changes: &[String]) -> Option<ComposeError> {
        let now = self.now();
        let why = Reason::Reload {
            detail: summary(changes),
        };
        let going = self.going_units(&new);
        let going_islands: Vec<Name> = self
            .reg
            .spec()
            .islands
            .iter()
            .filter(|i| new.island(&i.name).is_none())
            .map(|i| i.name.clone())
            .collect();
        self.iso.lift(&mut self.compose, why.clone());
        self.iso = Isolation::default();
        self.comm
            .end_boosts(&mut *self.env.tasks, &mut self.compose);
        let adopt_all_ends = self.reg.spec().host.adopt_all && !new.host.adopt_all;
        {
            let mut p = placement(
                &mut self.env,
                &mut self.reg,
                &mut self.log,
                now,
                &self.opts.self_origin,
            );
            for (_, group, gone_why) in &going {
                self.compose
                    .thaw(group, p.backend, p.log, now, gone_why.clone());
                p.release_group(group, gone_why.clone());
            }
            if adopt_all_ends {
                p.release_group(
                    &GroupPath::host(),
                    Reason::Reload {
                        detail: "[host] adopt_all is off".into(),
                    },
                );
            }
        }
        let dropped = self.reg.set_spec(new);
        tracing::debug!("reload: {} runtime units dropped", dropped.len());
        // The groups that went, deepest first: units, then islands.
        let mut remove: Vec<(GroupPath, Reason)> = going
            .iter()
            .map(|(_, g, w)| (g.clone(), w.clone()))
            .collect();
        remove.extend(going_islands.iter().map(|i| {
            (
                GroupPath::island(i),
                Reason::Reload {
                    detail: format!("island {i} is no longer configured"),
                },
            )
        }));
        for (g, w) in remove {
            if self.reg.planned(&g).is_some() {
                continue; // planned again (a unit that came back the same)
            }
            if self.env.backend.exists(&g) || self.compose.applied(&g).is_some() {
                let mut p = placement(
                    &mut self.env,
                    &mut self.reg,
                    &mut self.log,
                    now,
                    &self.opts.self_origin,
                );
                // A process forked while its parent was given back.
                p.release_group(&g, w.clone());
                if let Err(e) =
                    self.compose
                        .remove(&g, &mut *self.env.backend, &mut self.log, now, w.clone())
                {
                    tracing::warn!("reload: removing {g}: {e}");
                }
            }
        }
        for (unit, group, w) in &going {
            if self.reg.unit_group(unit.as_str()).as_ref() != Some(group) {
                self.log.record(atoll_core::decision::Decision {
                    at: now,
                    action: Action::RemoveUnit {
                        unit: unit.to_string(),
                    },
                    why: w.clone(),
                });
            }
        }
        // Coordination is set up for the new description, then keeps what
        // the old one held for the overlays, islands and units still there;
        // loans left out give their CPUs back with the write below.
        let kept = self.coord.snapshot(now);
        let holding = self.coord.all_island_cpus().clone();
        let recv = self.coord.take_recv_queues();
        let psi = self.coord.take_pressure_watcher();
        let old = std::mem::replace(
            &mut self.coord,
            Coordination::new(self.reg.spec(), &self.opts.topology),
        );
        if let Some(r) = recv {
            self.coord.set_recv_queues(r);
        }
        self.coord.set_pressure_watcher(psi);
        self.coord.sync_units(&self.reg);
        self.coord
            .register_config_overlays(self.reg.spec(), now, &mut self.compose);
        self.coord
            .register_runtime_overlays(&self.reg, now, &mut self.compose);
        self.coord.keep_overlay_states(old);
        let saved = ToRestore {
            snap: &kept,
            elapsed: std::time::Duration::ZERO,
            holding: &holding,
            origin: Origin::Reload,
        };
        self.coord
            .restore(saved, now, &mut self.log, &mut self.compose);
        self.apps.reconfigure(self.reg.spec());
        self.adoption.rescan();
        // Every group is written again for the reload (not as a plain
        // change of plan), so each decision names it.
        self.flushed_generation = self.reg.generation();
        self.compose.touch_all(why);
        // What systemd refuses of a bound unit's settings changes nothing
        // and shows in the unit's status; only the kernel's refusals undo
        // the reload.
        let refused = self.settle().filter(|e| !e.is_refusal());
        self.carry_out_priorities(now);
        refused
    }

    /// The unit groups `new` no longer has, with why: configured units
    /// gone or moved, and runtime units that lose their island or their
    /// name.
    fn going_units(&self, new: &PlatformSpec) -> Vec<(Name, GroupPath, Reason)> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for (u, origin) in self.reg.units() {
            let group = GroupPath::unit(&u.island, &u.name);
            let detail = match new.units.iter().find(|n| n.name == u.name) {
                Some(n) if n.island == u.island => continue,
                Some(n) => format!(
                    "unit {} moved from island {} to {}",
                    u.name, u.island, n.island
                ),
                None if origin == atoll_proto::UnitOrigin::Config => {
                    format!("unit {} is no longer configured", u.name)
                }
                None if new.island(&u.island).is_none() => format!(
                    "island {} of unit {} is no longer configured",
                    u.island, u.name
                ),
                None => continue, // a runtime unit that stays
            };
            if seen.insert(group.clone()) {
                out.push((u.name.clone(), group, Reason::Reload { detail }));
            }
        }
        out
    }
}

impl Controller {
    /// Writes the new description's frequency policies (checked already),
    /// each a decision; a write that fails is a warning.
    fn reload_frequencies(&mut self) {
        let Some(freq) = &mut self.freq else {
            return;
        };
        let now = self.env.clock.now();
        match freq.reload(self.reg.spec(), now, &mut self.log) {
            Ok(warnings) => self.warnings.extend(warnings),
            Err(e) => self.warnings.push(e.to_string()),
        }
    }
}

/// What differs between two descriptions, a line per change, in the words
/// of the config file.
pub fn describe(old: &PlatformSpec, new: &PlatformSpec) -> Vec<String> {
    let mut out = Vec::new();
    if old.host != new.host {
        out.push("[host] changed".to_string());
    }
    if old.epoch != new.epoch {
        out.push(format!(
            "epoch_ms {} -> {}",
            old.epoch.as_millis(),
            new.epoch.as_millis()
        ));
    }
    diff_named(&mut out, "island", &old.islands, &new.islands, |i| &i.name);
    diff_named(&mut out, "unit", &old.units, &new.units, |u| &u.name);
    diff_named(&mut out, "overlay", &old.overlays, &new.overlays, |o| {
        &o.name
    });
    diff_named(&mut out, "network", &old.network, &new.network, |n| &n.name);
    for (name, policy) in &new.frequency {
        if old.frequency.get(name) != Some(policy) {
            out.push(format!("island.{name}.frequency changed"));
        }
    }
    for name in old.frequency.keys() {
        if !new.frequency.contains_key(name) {
            out.push(format!("island.{name}.frequency removed"));
        }
    }
    let named = [
        ("[isolation]", old.isolation != new.isolation),
        ("[comm]", old.comm != new.comm),
        ("[apps]", old.apps != new.apps),
        ("default_island", old.default_island != new.default_island),
    ];
    for (what, changed) in named {
        if changed {
            out.push(format!("{what} changed"));
        }
    }
    if out.is_empty() && old != new {
        out.push("the configuration changed".to_string());
    }
    out
}

/// `KIND NAME added|changed|removed` for each item of `new` and `old`
/// that differs, items matched by name: new ones in `new`'s order, then
/// the removed in `old`'s.
fn diff_named<T: PartialEq>(
    out: &mut Vec<String>,
    kind: &str,
    old: &[T],
    new: &[T],
    name: impl Fn(&T) -> &Name,
) {
    for n in new {
        match old.iter().find(|o| name(o) == name(n)) {
            None => out.push(format!("{kind} {} added", name(n))),
            Some(o) if o != n => out.push(format!("{kind} {} changed", name(n))),
            Some(_) => {}
        }
    }
    for o in old {
        if !new.iter().any(|n| name(n) == name(o)) {
            out.push(format!("{kind} {} removed", name(o)));
        }
    }
}

/// The changes in one line for a decision's reason.
fn summary(changes: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut s = changes
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if changes.len() > SHOWN {
        s.push_str(&format!(" and {} more", changes.len() - SHOWN));
    }
    s
}
