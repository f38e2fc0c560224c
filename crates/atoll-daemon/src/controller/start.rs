//! Starting: the hierarchy built fresh, or taken over from a previous run
//! (the state file checked against the kernel), then the first adoption
//! scan, the platform description's overlays and those added at run time.

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_core::coord::CoordSnapshot;
use atoll_core::decision::Reason;
use atoll_core::plan::GroupPath;
use atoll_core::{CpuSet, Name};

use super::{placement, Controller, ControllerError};
use crate::coord::restore::{Origin, ToRestore};
use crate::state::SavedCoord;

/// The saved coordination part, opened: the snapshot and the time since it
/// was taken (on the wall clock; a clock that went back counts as no
/// time), or why it is not restored. `None`: nothing was saved.
fn open_coord(
    saved: Option<SavedCoord>,
    damaged: bool,
) -> Option<Result<(CoordSnapshot, Duration), String>> {
    if damaged {
        return Some(Err(
            "the state file was damaged (see the warnings): what is on loan is not known".into(),
        ));
    }
    let saved = saved?;
    Some(match saved.open() {
        Ok(snap) => {
            let ms = crate::persist::unix_ms().saturating_sub(saved.taken_at_unix_ms);
            Ok((snap, Duration::from_millis(ms)))
        }
        Err(e) => Err(e.to_string()),
    })
}

impl Controller {
    /// Builds the hierarchy, or takes over the one a previous run left
    /// (checking the state file against the kernel), then adopts processes.
    pub fn start(&mut self) -> Result<(), ControllerError> {
        let root = GroupPath::root();
        let loaded = self.persist.load();
        self.warnings.extend(loaded.notes);
        let damaged = loaded.damaged;
        let mut saved = loaded.state;
        let root_name = self.env.backend.root_name().to_string();
        let kind = self.env.backend.kind();
        // Coordination state only from a state file of this root.
        let coord_saved = saved
            .as_mut()
            .filter(|s| s.root == root_name && s.backend == kind)
            .and_then(|s| s.coordination.take());
        let mut coord_saved = open_coord(coord_saved, damaged);
        // What the network islands of the last run found on their
        // interfaces (a crash left their trees there).
        let net_saved = saved
            .as_mut()
            .filter(|s| s.root == root_name && s.backend == kind)
            .and_then(|s| s.network.take());
        // The cpufreq originals a run that did not tear down kept: what
        // teardown gives back, whatever this run writes.
        let freq_saved = saved
            .as_mut()
            .filter(|s| s.root == root_name && s.backend == kind)
            .and_then(|s| s.frequency_originals.take());
        self.adopt_frequency_originals(freq_saved);
        let registered = if self.env.backend.exists(&root) {
            let saved = saved.filter(|s| s.root == root_name && s.backend == kind);
            let ours = saved.is_some()
                || self.env.backend.exists(&GroupPath::host())
                || self.layout_is_ours();
            if !ours {
                return Err(ControllerError::NotOurs { root: root_name });
            }
            let had_state = saved.is_some();
            crate::recover::recover(
                &mut self.reg,
                &mut *self.env.backend,
                &*self.env.procs,
                saved,
            );
            self.services.adopt_bindings(&*self.env.backend);
            let unknown: Vec<u32> = self
                .reg
                .all_managed()
                .filter(|(_, m)| m.origin.is_none())
                .map(|(p, _)| p)
                .collect();
            if !unknown.is_empty() {
                let shown: Vec<String> = unknown.iter().take(20).map(u32::to_string).collect();
                self.warnings.push(format!(
                    "{} processes found in atoll's groups without a record of where they came from{} (pids {}{}): at teardown they go to their parent's cgroup, else to the daemon's",
                    unknown.len(),
                    if had_state { "" } else { ", the state file being missing or damaged" },
                    shown.join(" "),
                    if unknown.len() > shown.len() { " ..." } else { "" }
                ));
            }
            // Coordination before the first write, so that CPUs on loan
            // stay where they are.
            let holding = self.island_holding();
            let now = self.now();
            self.start_coordination(now, coord_saved.take(), Some(&holding));
            self.compose.touch_all(Reason::Recover {
                detail: "re-applying the platform description".into(),
            });
            self.flushed_generation = self.reg.generation();
            self.first_flush()?;
            self.remove_strays();
            true
        } else {
            if let Some(s) = saved {
                tracing::info!(
                    "a state file exists but cgroup {root_name:?} does not: starting fresh"
                );
                if s.root == root_name && s.backend == kind {
                    // Under systemd a crash takes atoll's cgroups with it,
                    // but not what lives outside them: the processes in
                    // bound groups (scopes), the runtime units holding
                    // them, and what the last run changed outside its root
                    // (controllers enabled above it, units' properties),
                    // which this run puts back when it stops.
                    crate::recover::recover(
                        &mut self.reg,
                        &mut *self.env.backend,
                        &*self.env.procs,
                        Some(s),
                    );
                } else if !s.parent_controllers_added.is_empty() {
                    self.env
                        .backend
                        .set_outside_changes(s.parent_controllers_added);
                }
            }
            self.services.adopt_bindings(&*self.env.backend);
            self.compose.touch_all(Reason::Config);
            self.flushed_generation = self.reg.generation();
            if let Err(e) = self.first_flush() {
                // Bad input changes nothing: undo what was made.
                let _ = self.teardown();
                return Err(e.into());
            }
            false
        };
        self.stage_coord();
        self.stage_frequency();
        if let Err(e) = self.persist.save(&self.reg, &*self.env.backend) {
            self.warnings.push(format!(
                "the state file cannot be saved ({e}): changes asked for are made but answered with an error, since a restart would not know them"
            ));
        }
        self.caps = Some(self.env.backend.capabilities());
        let nets = &self.reg.spec().network;
        if let Some(net) = &mut self.net {
            let now = self.env.clock.now();
            net.set_saved(net_saved);
            let warnings = net.start(now, &mut self.log);
            self.warnings.extend(warnings);
            self.classify_units(now, &Reason::Config);
            self.save_network();
        } else if !nets.is_empty() {
            // Safe by default: nothing the daemon cannot give back is touched.
            let names: Vec<String> = nets
                .iter()
                .map(|n| format!("{} ({})", n.name, n.interface))
                .collect();
            self.warnings.push(format!(
                "network islands {} are configured but this daemon does not manage network islands yet: their interfaces are left as they are (docs/netisland.md)",
                names.join(", ")
            ));
        }
        self.start_frequencies();
        self.start_power_cap();
        self.stage_frequency();
        let _ = self
            .persist
            .save_if_changed(&mut self.reg, &*self.env.backend, Vec::new());
        let now = self.now();
        {
            let epoch = self.epoch_len();
            let mut p = placement(
                &mut self.env,
                &mut self.reg,
                &mut self.log,
                now,
                &self.opts.self_origin,
            );
            self.adoption.step(&mut p, self.opts.self_pid, epoch, true);
        }
        if !registered {
            self.start_coordination(now, coord_saved, None);
        }
        self.carry_out_priorities(now);
        self.sync_net_overlays(now);
        self.settle();
        self.stage_coord();
        let _ = self
            .persist
            .save_if_changed(&mut self.reg, &*self.env.backend, Vec::new());
        Ok(())
    }

    /// Registers the overlays (the platform description's, then those added
    /// at run time), then puts back the saved coordination state, checked
    /// against `holding`, the CPUs each island's cpuset holds in the kernel
    /// (`None`: atoll's groups were not there, so nothing is on loan).
    fn start_coordination(
        &mut self,
        now: Duration,
        saved: Option<Result<(CoordSnapshot, Duration), String>>,
        holding: Option<&BTreeMap<Name, CpuSet>>,
    ) {
        self.coord.sync_units(&self.reg);
        self.coord
            .register_config_overlays(self.reg.spec(), now, &mut self.compose);
        self.coord
            .register_runtime_overlays(&self.reg, now, &mut self.compose);
        match (saved, holding) {
            (None, _) => {}
            (Some(Err(why)), _) => self.coord.not_restored(&why, now, &mut self.log),
            (Some(Ok(_)), None) => self.coord.not_restored(
                "atoll's groups were gone, so no CPU is on loan",
                now,
                &mut self.log,
            ),
            (Some(Ok((snap, elapsed))), Some(h)) => {
                let saved = ToRestore {
                    snap: &snap,
                    elapsed,
                    holding: h,
                    origin: Origin::Restart,
                };
                self.coord
                    .restore(saved, now, &mut self.log, &mut self.compose);
            }
        }
    }

    /// The CPUs each island's cpuset lists in the kernel, as the backend
    /// reads them back; an island it cannot read is left out.
    fn island_holding(&self) -> BTreeMap<Name, CpuSet> {
        let mut out = BTreeMap::new();
        for i in &self.reg.spec().islands {
            match self.env.backend.cpuset(&GroupPath::island(&i.name)) {
                Ok(Some(set)) => {
                    out.insert(i.name.clone(), set);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("reading island {}'s CPUs back: {e}", i.name),
            }
        }
        out
    }

    /// Stages the cpufreq originals for the next save of the state file.
    pub(super) fn stage_frequency(&mut self) {
        if let Some(f) = &self.freq {
            self.persist.stage_frequency(f.originals());
        }
    }

    /// Hands the originals of a previous run to the frequency actuator;
    /// without one (the simulated backend) says what is left written.
    fn adopt_frequency_originals(
        &mut self,
        originals: Option<Vec<atoll_core::power::FreqOriginal>>,
    ) {
        let Some(o) = originals.filter(|o| !o.is_empty()) else {
            return;
        };
        match &mut self.freq {
            Some(f) => f.adopt(o),
            None => self.warnings.push(format!(
                "the state file keeps the cpufreq values of {} CPUs from before the last run, but this daemon writes no cpufreq files: left as they are",
                o.len()
            )),
        }
    }

    /// Stages the coordination state for the next save of the state file.
    pub(super) fn stage_coord(&mut self) {
        if self.persist.dir().is_none() {
            return;
        }
        let now = self.now();
        self.persist.stage_coord(self.coord.snapshot(now));
    }

    /// The first write of the plan. What a service manager refused for a
    /// bound unit (nothing of it was made) does not stop the start: the
    /// unit's status says why, and the write is tried again (see
    /// [`Composer::repair_next`](crate::compose::Composer::repair_next)).
    fn first_flush(&mut self) -> Result<(), crate::compose::ComposeError> {
        match self.flush() {
            Err(e) if e.is_refusal() => {
                tracing::warn!("{e}");
                Ok(())
            }
            r => r,
        }
    }

    /// Whether atoll's root, found without a state file, holds atoll's own
    /// layout: its groups are the platform's islands (a group of another
    /// name means someone else's cgroup, which atoll never takes over).
    fn layout_is_ours(&self) -> bool {
        let Ok(children) = self.env.backend.children(&GroupPath::root()) else {
            return false;
        };
        !children.is_empty()
            && children
                .iter()
                .all(|c| atoll_core::Name::new(c).is_ok_and(|n| self.reg.island(&n).is_some()))
    }

    /// Removes groups under atoll's root that the plan no longer has, after
    /// giving their processes back. Used after recovery.
    fn remove_strays(&mut self) {
        let mut all = vec![GroupPath::root()];
        all.extend(self.reg.plan().groups.iter().map(|g| g.path.clone()));
        self.remove_strays_in(&all);
    }

    /// Removes the sub-groups of `groups` that the plan does not have (and
    /// everything below them), after giving their processes back: someone
    /// made them inside atoll's tree, or a previous run left them.
    pub(super) fn remove_strays_in(&mut self, groups: &[GroupPath]) {
        let mut strays = Vec::new();
        for g in groups {
            let mut stack = vec![g.clone()];
            while let Some(parent) = stack.pop() {
                for child in self.env.backend.children(&parent).unwrap_or_default() {
                    let path = if parent.is_root() {
                        GroupPath::from_relative(&child)
                    } else {
                        GroupPath::from_relative(&format!("{}/{child}", parent.as_str()))
                    };
                    if self.reg.planned(&path).is_none() {
                        strays.push(path.clone());
                        if path.depth() < 6 {
                            stack.push(path);
                        }
                    }
                }
            }
        }
        // Deepest first.
        strays.sort_by_key(|g| std::cmp::Reverse(g.depth()));
        strays.dedup();
        let now = self.now();
        for path in strays {
            let why = Reason::Housekeeping {
                detail: format!("group {path} is not in the platform description"),
            };
            let mut p = placement(
                &mut self.env,
                &mut self.reg,
                &mut self.log,
                now,
                &self.opts.self_origin,
            );
            p.release_group(&path, why.clone());
            if let Err(e) =
                self.compose
                    .remove(&path, &mut *self.env.backend, &mut self.log, now, why)
            {
                tracing::warn!("removing stray group {path}: {e}");
            }
        }
    }
}

impl Controller {
    /// Writes the islands' frequency policies (each a decision); without
    /// an actuator (the simulated backend), names them in a warning.
    fn start_frequencies(&mut self) {
        let now = self.env.clock.now();
        if let Some(freq) = &mut self.freq {
            let warnings = freq.start(now, &mut self.log);
            self.warnings.extend(warnings);
            return;
        }
        let named: Vec<String> = self
            .reg
            .spec()
            .frequency
            .iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(n, _)| n.to_string())
            .collect();
        if !named.is_empty() {
            self.warnings.push(format!(
                "frequency policies of islands {} are configured but this daemon writes no cpufreq files (simulated backend): left as they are",
                named.join(", ")
            ));
        }
    }
}
