//! [`FakeNet`]: an in-memory [`NetBackend`] for tests.

use std::collections::BTreeMap;

use crate::backend::{LeafStats, NetBackend, RootQdisc};
use crate::plan::TcPlan;
use crate::NetError;

/// One fake interface.
#[derive(Clone, Debug)]
struct FakeIface {
    /// What the kernel attaches when the root is deleted.
    default_root: RootQdisc,
    root: RootQdisc,
    plan: Option<TcPlan>,
    stats: BTreeMap<u16, LeafStats>,
}

/// Interfaces held in memory; every call is logged.
#[derive(Clone, Debug, Default)]
pub struct FakeNet {
    ifaces: BTreeMap<String, FakeIface>,
    /// Each call, in order (`apply v0`, `remove v0`, ...).
    pub log: Vec<String>,
    /// The next `apply` writes the root qdisc, then fails (as a batch that
    /// stops half-way would).
    pub fail_next_apply: bool,
}

impl FakeNet {
    /// No interfaces.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an interface whose kernel default root qdisc is `kind`.
    pub fn add_iface(&mut self, name: &str, kind: &str) {
        let root = RootQdisc {
            kind: kind.to_string(),
            handle: "0:".to_string(),
        };
        self.ifaces.insert(
            name.to_string(),
            FakeIface {
                default_root: root.clone(),
                root,
                plan: None,
                stats: BTreeMap::new(),
            },
        );
    }

    /// Someone else configures `name`'s root qdisc.
    pub fn set_root(&mut self, name: &str, kind: &str, handle: &str) {
        if let Some(i) = self.ifaces.get_mut(name) {
            i.root = RootQdisc {
                kind: kind.to_string(),
                handle: handle.to_string(),
            };
        }
    }

    /// Sets a class's waiting bytes and packets.
    pub fn set_backlog(&mut self, name: &str, minor: u16, bytes: u64, packets: u64) {
        if let Some(i) = self.ifaces.get_mut(name) {
            let s = i.stats.entry(minor).or_insert(LeafStats {
                minor,
                ..LeafStats::default()
            });
            s.backlog_bytes = bytes;
            s.backlog_packets = packets;
        }
    }

    /// The plan `name` holds now, if our tree is on it.
    pub fn plan(&self, name: &str) -> Option<&TcPlan> {
        self.ifaces.get(name).and_then(|i| i.plan.as_ref())
    }

    fn iface(&mut self, name: &str) -> Result<&mut FakeIface, NetError> {
        self.ifaces
            .get_mut(name)
            .ok_or_else(|| NetError::NoInterface {
                iface: name.to_string(),
            })
    }
}

impl NetBackend for FakeNet {
    fn root_qdisc(&mut self, iface: &str) -> Result<RootQdisc, NetError> {
        self.log.push(format!("root {iface}"));
        Ok(self.iface(iface)?.root.clone())
    }

    fn apply(
        &mut self,
        iface: &str,
        plan: &TcPlan,
        removed: &[u16],
        with_root: bool,
    ) -> Result<(), NetError> {
        self.log.push(format!(
            "apply {iface} removed={removed:?} root={with_root}"
        ));
        let fail = std::mem::take(&mut self.fail_next_apply);
        let i = self.iface(iface)?;
        let ours = i.root.kind == "htb" && i.root.handle == "1:";
        if with_root == ours {
            // The real HTB refuses a change of its root, and classes need one.
            return Err(NetError::Command {
                command: format!("tc -batch - ({iface})"),
                status: "exit status: 2".to_string(),
                stderr: format!("root written: {with_root}, tree there: {ours}"),
            });
        }
        i.root = RootQdisc {
            kind: "htb".to_string(),
            handle: "1:".to_string(),
        };
        if fail {
            return Err(NetError::Command {
                command: format!("tc -batch - ({iface})"),
                status: "exit status: 1".to_string(),
                stderr: "injected failure".to_string(),
            });
        }
        for m in removed {
            i.stats.remove(m);
        }
        for c in &plan.classes {
            i.stats.entry(c.minor).or_insert(LeafStats {
                minor: c.minor,
                ..LeafStats::default()
            });
        }
        i.plan = Some(plan.clone());
        Ok(())
    }

    fn remove_root(&mut self, iface: &str) -> Result<(), NetError> {
        self.log.push(format!("remove {iface}"));
        let i = self.iface(iface)?;
        i.root = i.default_root.clone();
        i.plan = None;
        i.stats.clear();
        Ok(())
    }

    fn leaf_stats(&mut self, iface: &str) -> Result<Vec<LeafStats>, NetError> {
        Ok(self.iface(iface)?.stats.values().copied().collect())
    }
}
