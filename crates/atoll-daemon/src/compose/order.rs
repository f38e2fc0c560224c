//! The order groups are written in: parents first, as the plan lists them
//! (a group's parent must exist before it), or deepest first (a child's
//! CPUs must leave before its parent's do).

use atoll_core::plan::GroupPath;

use crate::registry::Registry;

/// Groups to write, in plan order.
#[derive(Debug)]
pub(super) struct Order {
    groups: Vec<GroupPath>,
}

impl Order {
    /// `groups` sorted parents first: by depth, then by their place in the
    /// plan (groups the plan does not hold come last).
    pub(super) fn new(reg: &Registry, mut groups: Vec<GroupPath>) -> Self {
        groups.sort_by_key(|g| (g.depth(), reg.plan_order(g).unwrap_or(usize::MAX)));
        groups.dedup();
        Self { groups }
    }

    /// Parents before children.
    pub(super) fn parents_first(&self) -> impl Iterator<Item = &GroupPath> {
        self.groups.iter()
    }

    /// Children before parents.
    pub(super) fn deepest_first(&self) -> impl Iterator<Item = &GroupPath> {
        self.groups.iter().rev()
    }
}
