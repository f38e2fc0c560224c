//! Restart after a crash: the state file is checked against the kernel.
//!
//! The kernel's view wins. A saved process is kept only if it is alive with
//! the same start time and still in the group the state file says. Every
//! process found in atoll's groups without a record is kept too (it was
//! forked there, or adopted after the last save); it will go back where its
//! parent, or else the daemon, came from. A unit group found in the kernel
//! but in neither the config nor the state file is kept as a runtime unit
//! if it holds processes, so no managed process is lost or left behind.

use atoll_core::backend::{Backend, External};
use atoll_core::plan::GroupPath;
use atoll_core::process::ProcessTable;
use atoll_core::Name;
use atoll_proto::UnitOrigin;

use crate::registry::{Managed, Registry};
use crate::state::SavedState;

/// Rebuilds the registry from `saved` and the kernel; returns what was
/// found, in words.
pub fn recover(
    reg: &mut Registry,
    backend: &mut dyn Backend,
    procs: &dyn ProcessTable,
    saved: Option<SavedState>,
) -> String {
    let mut kept = 0usize;
    let mut dropped = 0usize;
    let mut overlays = Vec::new();
    if let Some(s) = saved {
        if !s.parent_controllers_added.is_empty() {
            backend.set_outside_changes(s.parent_controllers_added);
        }
        for u in s.units {
            if u.origin == UnitOrigin::Runtime && reg.island(&u.spec.island).is_some() {
                let name = u.spec.name.to_string();
                reg.restore_runtime_unit(u.spec);
                if let Some(uid) = u.owner {
                    reg.set_owner(&name, uid);
                }
                if u.kept {
                    reg.keep(&name);
                }
            }
        }
        overlays = s.overlays;
        for p in s.processes {
            match procs.info(p.pid) {
                Ok(info)
                    if info.start_ticks == p.start_ticks
                        && backend.group_of(&info.cgroups).as_ref() == Some(&p.group) =>
                {
                    reg.manage(
                        p.pid,
                        Managed {
                            start_ticks: p.start_ticks,
                            group: p.group,
                            origin: Some(p.origin),
                            original_policy: None,
                            comm: info.comm,
                            uid: info.uid,
                            ppid: info.ppid,
                            placed_by: p.placed_by,
                        },
                    );
                    kept += 1;
                }
                _ => dropped += 1,
            }
        }
    }
    // Unit groups in the kernel that nothing describes.
    for island in backend.children(&GroupPath::root()).unwrap_or_default() {
        let Ok(island_name) = Name::new(&island) else {
            continue;
        };
        if reg.island(&island_name).is_none() {
            continue;
        }
        let ip = GroupPath::island(&island_name);
        for unit in backend.children(&ip).unwrap_or_default() {
            let Ok(unit_name) = Name::new(&unit) else {
                continue;
            };
            if reg.unit(unit.as_str()).is_some() {
                continue;
            }
            let up = GroupPath::unit(&island_name, &unit_name);
            if !backend.processes(&up).unwrap_or_default().is_empty() {
                reg.add_runtime_unit(unit_name, island_name.clone());
                tracing::info!("recovered unit {up} from the kernel (not in the state file)");
            }
        }
    }
    // Processes in atoll's groups with no record. Those of a systemd unit
    // atoll only sets properties of are systemd's, never atoll's to give
    // back.
    let mut found = 0usize;
    let units_of_systemd: Vec<GroupPath> = backend
        .bindings()
        .into_iter()
        .filter(|(_, to)| matches!(to, External::SystemdUnit(_)))
        .map(|(g, _)| g)
        .collect();
    let leaves: Vec<GroupPath> = reg
        .plan()
        .groups
        .iter()
        .filter(|g| g.task_policy.is_some() && !units_of_systemd.contains(&g.path))
        .map(|g| g.path.clone())
        .collect();
    for g in leaves {
        for pid in backend.processes(&g).unwrap_or_default() {
            if reg.managed(pid).is_some() {
                continue;
            }
            let Ok(info) = procs.info(pid) else {
                continue;
            };
            reg.manage(
                pid,
                Managed {
                    start_ticks: info.start_ticks,
                    group: g.clone(),
                    origin: None,
                    original_policy: None,
                    comm: info.comm,
                    uid: info.uid,
                    ppid: info.ppid,
                    placed_by: None,
                },
            );
            found += 1;
        }
    }
    // Run-time overlays whose units are all back, and whose name the
    // description does not take.
    let mut overlays_dropped = Vec::new();
    for o in overlays {
        let missing = o.units.iter().find(|u| reg.unit(u.as_str()).is_none());
        let taken = reg.spec().overlays.iter().any(|c| c.name == o.name);
        match (missing, taken) {
            (None, false) => reg.set_runtime_overlay(o),
            (Some(u), _) => {
                tracing::warn!(
                    "recovery: overlay {} not restored: its unit {u} is gone",
                    o.name
                );
                overlays_dropped.push(o.name.to_string());
            }
            (None, true) => {
                tracing::warn!(
                    "recovery: overlay {} not restored: the platform description has an overlay of that name",
                    o.name
                );
                overlays_dropped.push(o.name.to_string());
            }
        }
    }
    let mut detail = format!(
        "{kept} processes from the state file still in place, {dropped} gone, {found} found in atoll's groups without a record"
    );
    if !overlays_dropped.is_empty() {
        detail.push_str(&format!(
            "; run-time overlays not restored: {}",
            overlays_dropped.join(", ")
        ));
    }
    tracing::info!("recovery: {detail}");
    reg.mark_dirty();
    detail
}
