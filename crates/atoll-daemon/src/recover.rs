//! Restart after a crash: the state file is checked against the kernel.
//!
//! The kernel's view wins. A saved process is kept only if it is alive with
//! the same start time and still in the group the state file says. Every
//! process found in atoll's groups without a record is kept too (it was
//! forked there, or adopted after the last save); it will go back where its
//! parent, or else the daemon, came from. A unit group found in the kernel
//! but in neither the config nor the state file is kept as a runtime unit
//! if it holds processes, so no managed process is lost or left behind.

use atoll_core::plan::GroupPath;
use atoll_core::Name;
use atoll_proto::UnitOrigin;

use crate::controller::{Controller, ControllerError};
use crate::registry::Managed;
use crate::state::{SavedProcess, SavedState, SavedUnit, FORMAT};

impl Controller {
    /// Rebuilds the registry from `saved` and the kernel.
    pub(crate) fn recover(&mut self, saved: Option<SavedState>) -> Result<(), ControllerError> {
        let mut kept = 0usize;
        let mut dropped = 0usize;
        if let Some(s) = saved {
            if !s.parent_controllers_added.is_empty() {
                self.env
                    .backend
                    .set_outside_changes(s.parent_controllers_added);
            }
            for u in s.units {
                if u.origin == UnitOrigin::Runtime
                    && self.reg.spec().island(&u.spec.island).is_some()
                {
                    self.reg.restore_runtime_unit(u.spec);
                }
            }
            for p in s.processes {
                match self.env.procs.info(p.pid) {
                    Ok(info)
                        if info.start_ticks == p.start_ticks
                            && self.in_atoll(&info.cgroups).as_ref() == Some(&p.group) =>
                    {
                        self.reg.manage(
                            p.pid,
                            Managed {
                                start_ticks: p.start_ticks,
                                group: p.group,
                                origin: Some(p.origin),
                                original_policy: None,
                                comm: info.comm,
                                uid: info.uid,
                                ppid: info.ppid,
                            },
                        );
                        kept += 1;
                    }
                    _ => dropped += 1,
                }
            }
        }
        // Unit groups in the kernel that nothing describes.
        for island in self
            .env
            .backend
            .children(&GroupPath::root())
            .unwrap_or_default()
        {
            let Ok(island_name) = Name::new(&island) else {
                continue;
            };
            if self.reg.spec().island(&island_name).is_none() {
                continue;
            }
            let ip = GroupPath::island(&island_name);
            for unit in self.env.backend.children(&ip).unwrap_or_default() {
                let Ok(unit_name) = Name::new(&unit) else {
                    continue;
                };
                if self.reg.unit(unit.as_str()).is_some() {
                    continue;
                }
                let up = GroupPath::unit(&island_name, &unit_name);
                if !self
                    .env
                    .backend
                    .processes(&up)
                    .unwrap_or_default()
                    .is_empty()
                {
                    self.reg.add_runtime_unit(unit_name, island_name.clone());
                    tracing::info!("recovered unit {up} from the kernel (not in the state file)");
                }
            }
        }
        // Processes in atoll's groups with no record.
        let mut found = 0usize;
        let leaves: Vec<GroupPath> = self
            .reg
            .plan()
            .groups
            .into_iter()
            .filter(|g| g.task_policy.is_some())
            .map(|g| g.path)
            .collect();
        for g in leaves {
            for pid in self.env.backend.processes(&g).unwrap_or_default() {
                if self.reg.managed(pid).is_some() {
                    continue;
                }
                let Ok(info) = self.env.procs.info(pid) else {
                    continue;
                };
                self.reg.manage(
                    pid,
                    Managed {
                        start_ticks: info.start_ticks,
                        group: g.clone(),
                        origin: None,
                        original_policy: None,
                        comm: info.comm,
                        uid: info.uid,
                        ppid: info.ppid,
                    },
                );
                found += 1;
            }
        }
        let detail = format!(
            "{kept} processes from the state file still in place, {dropped} gone, {found} found in atoll's groups without a record"
        );
        tracing::info!("recovery: {detail}");
        self.dirty = true;
        Ok(())
    }

    /// The registry as a state file.
    pub(crate) fn saved_state(&self) -> SavedState {
        SavedState {
            format: FORMAT,
            backend: self.env.backend.kind(),
            root: self.env.backend.root_name().to_string(),
            units: self
                .reg
                .units()
                .map(|(u, origin)| SavedUnit {
                    spec: u.clone(),
                    origin,
                })
                .collect(),
            processes: self
                .reg
                .all_managed()
                .filter_map(|(pid, m)| {
                    Some(SavedProcess {
                        pid,
                        start_ticks: m.start_ticks,
                        group: m.group.clone(),
                        origin: m.origin.clone()?,
                    })
                })
                .collect(),
            parent_controllers_added: self.env.backend.outside_changes(),
        }
    }
}
