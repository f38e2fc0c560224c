//! Units created at run time that nobody uses any more are removed.
//!
//! A unit made by `atoll run` or `atoll adopt` outlives its processes in
//! the kernel: left alone, such units pile up (each costs a group and a
//! slice of every epoch's work). Once a second, each runtime unit other
//! than an application's (the application policy removes those) is looked
//! at: one that has held no process for [`EMPTY_GRACE`] is removed, a
//! decision with its reason. Units declared with `atoll unit add` stay
//! until `atoll unit rm`, and so does a unit an overlay holds.

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_core::decision::{Action, Reason};
use atoll_core::plan::GroupPath;
use atoll_core::spec::is_app_unit_name;

use crate::compose::Composer;
use crate::placement::Placement;

/// How long a runtime unit may hold no process before it is removed.
pub const EMPTY_GRACE: Duration = Duration::from_secs(30);

/// When each runtime unit was first seen empty.
#[derive(Debug, Default)]
pub struct RuntimeUnits {
    empty_since: BTreeMap<String, Duration>,
}

impl RuntimeUnits {
    /// Removes the runtime units that stayed empty for [`EMPTY_GRACE`]
    /// (not those declared with `unit add`, nor those `in_overlay` says an
    /// overlay holds); returns how many.
    pub fn sweep(
        &mut self,
        p: &mut Placement<'_>,
        compose: &mut Composer,
        in_overlay: &dyn Fn(&str) -> bool,
    ) -> usize {
        let now = p.now;
        let units: Vec<(String, GroupPath)> = p
            .reg
            .runtime_units()
            .iter()
            .filter(|u| !is_app_unit_name(u.name.as_str()))
            .filter(|u| !p.reg.is_kept(u.name.as_str()) && !in_overlay(u.name.as_str()))
            .map(|u| (u.name.to_string(), GroupPath::unit(&u.island, &u.name)))
            .collect();
        self.empty_since
            .retain(|name, _| units.iter().any(|(n, _)| n == name));
        let mut removed = 0;
        for (name, group) in units {
            let empty = p
                .backend
                .processes(&group)
                .map(|pids| pids.is_empty())
                .unwrap_or(false);
            if !empty {
                self.empty_since.remove(&name);
                continue;
            }
            let since = *self.empty_since.entry(name.clone()).or_insert(now);
            if now.saturating_sub(since) < EMPTY_GRACE {
                continue;
            }
            self.empty_since.remove(&name);
            let why = Reason::Housekeeping {
                detail: format!(
                    "unit {name} has held no process for {} s",
                    now.saturating_sub(since).as_secs()
                ),
            };
            if let Err(e) = compose.remove(&group, p.backend, p.log, now, why.clone()) {
                tracing::warn!("removing empty unit {name}: {e}");
                continue;
            }
            p.reg.remove_runtime_unit(&name);
            p.decide(Action::RemoveUnit { unit: name }, why);
            removed += 1;
        }
        removed
    }
}
