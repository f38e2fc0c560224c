//! The actuator trait of the traffic-control tree.

use crate::plan::TcPlan;
use crate::NetError;

/// An interface's root qdisc as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootQdisc {
    /// Its kind (`noqueue`, `pfifo_fast`, `mq`, `fq_codel`, `htb`, ...).
    pub kind: String,
    /// Its handle as `tc` prints it (`0:` for the kernel's default).
    pub handle: String,
}

impl RootQdisc {
    /// Whether the kernel attached it by itself (nobody configured it):
    /// the kernel's default qdiscs have handle `0:`.
    pub fn is_kernel_default(&self) -> bool {
        self.handle == "0:"
    }

    /// Whether it is the root of a tree atoll writes (`htb 1:`), as a
    /// previous run that did not give the interface back left it.
    pub fn is_atolls_tree(&self) -> bool {
        self.kind == "htb" && self.handle == "1:"
    }
}

impl std::fmt::Display for RootQdisc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.handle)
    }
}

/// The figures of one class's leaf qdisc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeafStats {
    /// The class minor.
    pub minor: u16,
    /// Bytes sent so far.
    pub bytes: u64,
    /// Packets sent so far.
    pub packets: u64,
    /// Packets dropped so far.
    pub drops: u64,
    /// Bytes waiting now.
    pub backlog_bytes: u64,
    /// Packets waiting now.
    pub backlog_packets: u64,
}

/// Writes and reads an interface's traffic-control tree.
pub trait NetBackend {
    /// The interface's root qdisc.
    fn root_qdisc(&mut self, iface: &str) -> Result<RootQdisc, NetError>;
    /// Brings the interface to `plan`, deleting the classes `removed`;
    /// `with_root` when there is no tree of ours on it yet.
    fn apply(
        &mut self,
        iface: &str,
        plan: &TcPlan,
        removed: &[u16],
        with_root: bool,
    ) -> Result<(), NetError>;
    /// Deletes the root qdisc (with its classes and leaves); the kernel
    /// attaches its default again.
    fn remove_root(&mut self, iface: &str) -> Result<(), NetError>;
    /// The leaf qdiscs' figures, by class minor.
    fn leaf_stats(&mut self, iface: &str) -> Result<Vec<LeafStats>, NetError>;
}

impl<B: NetBackend + ?Sized> NetBackend for Box<B> {
    fn root_qdisc(&mut self, iface: &str) -> Result<RootQdisc, NetError> {
        (**self).root_qdisc(iface)
    }

    fn apply(
        &mut self,
        iface: &str,
        plan: &TcPlan,
        removed: &[u16],
        with_root: bool,
    ) -> Result<(), NetError> {
        (**self).apply(iface, plan, removed, with_root)
    }

    fn remove_root(&mut self, iface: &str) -> Result<(), NetError> {
        (**self).remove_root(iface)
    }

    fn leaf_stats(&mut self, iface: &str) -> Result<Vec<LeafStats>, NetError> {
        (**self).leaf_stats(iface)
    }
}

/// A backend shared with whoever holds another handle (tests read a fake's
/// state while the daemon owns it).
impl<B: NetBackend> NetBackend for std::sync::Arc<std::sync::Mutex<B>> {
    fn root_qdisc(&mut self, iface: &str) -> Result<RootQdisc, NetError> {
        lock(self).root_qdisc(iface)
    }

    fn apply(
        &mut self,
        iface: &str,
        plan: &TcPlan,
        removed: &[u16],
        with_root: bool,
    ) -> Result<(), NetError> {
        lock(self).apply(iface, plan, removed, with_root)
    }

    fn remove_root(&mut self, iface: &str) -> Result<(), NetError> {
        lock(self).remove_root(iface)
    }

    fn leaf_stats(&mut self, iface: &str) -> Result<Vec<LeafStats>, NetError> {
        lock(self).leaf_stats(iface)
    }
}

fn lock<B>(m: &std::sync::Mutex<B>) -> std::sync::MutexGuard<'_, B> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
