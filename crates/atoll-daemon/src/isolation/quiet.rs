//! Whether an isolation step can change nothing ([`Isolation::quiet`]),
//! decided without walking every unit each epoch.
//!
//! A step is quiet when every island with units was idle and its lender
//! settled on idle input, the lenders were built for exactly the units the
//! registry has now, and the memory and disk step is not due. The middle
//! condition compares every unit with what its island's lender was built
//! for; its answer depends only on the registry's units (which change only
//! with its plan generation, [`Registry::generation`]) and on the lenders
//! (which change only where a step builds or drops one, counted in
//! [`Members::lenders_built`]). So it is computed once per pair of those
//! and kept; the rest, which can change every epoch (the island's load, its
//! CPUs, whether its lender settled), is checked every time.

use atoll_core::Name;

use super::{Inputs, Isolation};
use crate::registry::Registry;

/// The islands with units and what their lenders were built for, as last
/// compared with the registry.
#[derive(Debug, Default)]
pub(super) struct Members {
    /// Lenders built or dropped so far: part of what the comparison holds
    /// for.
    pub(super) lenders_built: u64,
    /// The registry's plan generation and `lenders_built` at the last
    /// comparison.
    key: Option<(u64, u64)>,
    /// What it found: the islands with units, and how many units they
    /// hold, when every such island's lender was built for exactly its
    /// units; `None` when one was not.
    matched: Option<(Vec<Name>, usize)>,
}

impl Members {
    /// A lender was built or dropped: the comparison must be made again.
    pub(super) fn lender_changed(&mut self) {
        self.lenders_built += 1;
    }
}

impl Isolation {
    /// Whether this step can change nothing (see the module docs).
    pub(super) fn quiet(&mut self, inp: &Inputs<'_>) -> bool {
        if self.grants.is_empty() || self.slow.is_due(inp.now) {
            return false;
        }
        let key = (inp.reg.generation(), self.members.lenders_built);
        if self.members.key != Some(key) {
            self.members.matched = self.match_members(inp.reg);
            self.members.key = Some(key);
        }
        let Some((islands, units)) = &self.members.matched else {
            return false;
        };
        for name in islands {
            let (Some((_, cpus, _)), Some(island)) = (self.lenders.get(name), inp.reg.island(name))
            else {
                return false;
            };
            let now_cpus = inp.island_cpus.get(name).unwrap_or(&island.cpus);
            if cpus != now_cpus || !inp.loads.idle(name) || !self.settled.contains(name) {
                return false;
            }
        }
        *units == self.grants.len()
    }

    /// The islands with units and how many units they hold, if every such
    /// island has a lender built for exactly its units, in order.
    fn match_members(&self, reg: &Registry) -> Option<(Vec<Name>, usize)> {
        let mut islands = Vec::new();
        let mut units = 0;
        for island in &reg.spec().islands {
            let mut here = reg
                .units()
                .filter(|(u, _)| u.island == island.name)
                .peekable();
            if here.peek().is_none() {
                continue;
            }
            let (built_for, _, _) = self.lenders.get(&island.name)?;
            let mut same = 0;
            for (u, origin) in here {
                let guest =
                    origin == atoll_proto::UnitOrigin::Runtime && u.entitlement.cpus.is_none();
                match built_for.get(same) {
                    Some((n, e, g)) if *n == u.name && *e == u.entitlement.cpus && *g == guest => {
                        same += 1
                    }
                    _ => return None,
                }
            }
            if same != built_for.len() {
                return None;
            }
            units += same;
            islands.push(island.name.clone());
        }
        Some((islands, units))
    }
}
