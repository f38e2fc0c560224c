//! [`Interfaces`]: the interfaces a network island took over, each with
//! what it held before the first change, and the way back.

use std::collections::BTreeMap;
use std::path::PathBuf;

use atoll_core::IdSet;

use crate::backend::{LeafStats, NetBackend, RootQdisc};
use crate::plan::TcPlan;
use crate::steer::{SteerSnapshot, Steering};
use crate::NetError;

/// What an interface held when it was taken over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Its root qdisc (always the kernel's default: others are refused).
    pub root: RootQdisc,
    /// Its steering files.
    pub steer: SteerSnapshot,
}

#[derive(Debug)]
struct Managed {
    snapshot: Snapshot,
    applied: Option<TcPlan>,
}

/// The interfaces taken over, over a backend and the steering files.
#[derive(Debug)]
pub struct Interfaces<B> {
    backend: B,
    steering: Steering,
    managed: BTreeMap<String, Managed>,
}

impl<B: NetBackend> Interfaces<B> {
    /// None taken yet.
    pub fn new(backend: B, steering: Steering) -> Self {
        Self {
            backend,
            steering,
            managed: BTreeMap::new(),
        }
    }

    /// The backend (tests read the fake's state through it).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend, mutably.
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The interfaces taken over.
    pub fn managed(&self) -> impl Iterator<Item = &str> {
        self.managed.keys().map(String::as_str)
    }

    /// The snapshot of a taken interface.
    pub fn snapshot(&self, iface: &str) -> Option<&Snapshot> {
        self.managed.get(iface).map(|m| &m.snapshot)
    }

    /// Takes `iface` over: records its root qdisc and steering files before
    /// anything is written. Refuses an interface whose root qdisc someone
    /// configured (only the kernel's default is replaced). Taking an
    /// interface twice keeps the first snapshot.
    pub fn take(&mut self, iface: &str) -> Result<&Snapshot, NetError> {
        if !self.managed.contains_key(iface) {
            let root = self.backend.root_qdisc(iface)?;
            if !root.is_kernel_default() {
                return Err(NetError::ForeignQdisc {
                    iface: iface.to_string(),
                    kind: root.kind,
                    handle: root.handle,
                });
            }
            let steer = self.steering.snapshot(iface)?;
            self.managed.insert(
                iface.to_string(),
                Managed {
                    snapshot: Snapshot { root, steer },
                    applied: None,
                },
            );
        }
        Ok(&self.managed[iface].snapshot)
    }

    /// Takes `iface` over again after a run that did not give it back (a
    /// crash): `snapshot` is what that run recorded when it took the
    /// interface, the root qdisc found now must be atoll's tree (`htb 1:`).
    /// That tree is deleted (the kernel attaches its default again) so the
    /// next [`apply`](Self::apply) writes a whole new one, and
    /// [`restore`](Self::restore) puts back what the snapshot says, not
    /// what the crashed run left. Returns `false`, adopting nothing, when
    /// the root is the kernel's default (the interface was reset since:
    /// [`take`](Self::take) it afresh); a root someone else configured is
    /// refused as by `take`.
    pub fn adopt(&mut self, iface: &str, snapshot: Snapshot) -> Result<bool, NetError> {
        if self.managed.contains_key(iface) {
            return Ok(true);
        }
        let root = self.backend.root_qdisc(iface)?;
        if root.is_kernel_default() {
            return Ok(false);
        }
        if !root.is_atolls_tree() || !snapshot.root.is_kernel_default() {
            return Err(NetError::ForeignQdisc {
                iface: iface.to_string(),
                kind: root.kind,
                handle: root.handle,
            });
        }
        self.backend.remove_root(iface)?;
        self.managed.insert(
            iface.to_string(),
            Managed {
                snapshot,
                applied: None,
            },
        );
        Ok(true)
    }

    /// Writes `iface`'s steering files back as they were taken, keeping
    /// the interface managed (before steering it otherwise).
    pub fn restore_steering(&mut self, iface: &str) -> Result<(), NetError> {
        let snap = self.entry(iface)?.snapshot.steer.clone();
        self.steering.restore(&snap)
    }

    fn entry(&mut self, iface: &str) -> Result<&mut Managed, NetError> {
        self.managed
            .get_mut(iface)
            .ok_or_else(|| NetError::NotManaged {
                iface: iface.to_string(),
            })
    }

    /// Brings a taken interface to `plan`: classes no longer in it are
    /// deleted; a new default class or leaf kind builds the tree again. If
    /// a new tree fails half-way, it is removed again (the interface is
    /// back to its default) and the error returned.
    pub fn apply(&mut self, iface: &str, plan: &TcPlan) -> Result<(), NetError> {
        plan.validate().map_err(|source| NetError::Plan {
            iface: iface.to_string(),
            source,
        })?;
        let m = self.entry(iface)?;
        if m.applied
            .as_ref()
            .is_some_and(|old| old.needs_rebuild(plan))
        {
            m.applied = None;
            self.backend.remove_root(iface)?;
        }
        let m = self.entry(iface)?;
        let first = m.applied.is_none();
        let removed: Vec<u16> = m.applied.as_ref().map_or_else(Vec::new, |old| {
            old.classes
                .iter()
                .map(|c| c.minor)
                .filter(|minor| plan.classes.iter().all(|c| c.minor != *minor))
                .collect()
        });
        match self.backend.apply(iface, plan, &removed, first) {
            Ok(()) => {
                self.entry(iface)?.applied = Some(plan.clone());
                Ok(())
            }
            Err(e) => {
                if first {
                    // Best effort: the error that matters is the apply's.
                    let _ = self.backend.remove_root(iface);
                }
                Err(e)
            }
        }
    }

    /// The plan last applied to `iface`.
    pub fn applied(&self, iface: &str) -> Option<&TcPlan> {
        self.managed.get(iface).and_then(|m| m.applied.as_ref())
    }

    /// Steers a taken interface's receive (`rx`) and transmit (`tx`)
    /// processing; returns the files written with their new text.
    pub fn steer(
        &mut self,
        iface: &str,
        rx: Option<&IdSet>,
        tx: Option<&IdSet>,
    ) -> Result<Vec<(PathBuf, String)>, NetError> {
        let snap = self.entry(iface)?.snapshot.steer.clone();
        self.steering.apply(iface, &snap, rx, tx)
    }

    /// The leaf figures of a taken interface's classes.
    pub fn leaf_stats(&mut self, iface: &str) -> Result<Vec<LeafStats>, NetError> {
        self.entry(iface)?;
        self.backend.leaf_stats(iface)
    }

    /// Gives `iface` back as it was taken: our root qdisc deleted (the
    /// kernel attaches its default again), every steering file rewritten,
    /// and the root read back and compared with the snapshot. Everything
    /// is tried; the first error is returned. The interface is no longer
    /// managed afterwards, whatever the outcome.
    pub fn restore(&mut self, iface: &str) -> Result<(), NetError> {
        let m = self
            .managed
            .remove(iface)
            .ok_or_else(|| NetError::NotManaged {
                iface: iface.to_string(),
            })?;
        let mut first: Option<NetError> = None;
        match self.backend.root_qdisc(iface) {
            Ok(now) if now == m.snapshot.root => {}
            Ok(_) => {
                if let Err(e) = self.backend.remove_root(iface) {
                    first.get_or_insert(e);
                }
            }
            Err(e) => {
                first.get_or_insert(e);
            }
        }
        if let Err(e) = self.steering.restore(&m.snapshot.steer) {
            first.get_or_insert(e);
        }
        if first.is_none() {
            let now = self.backend.root_qdisc(iface)?;
            if now != m.snapshot.root {
                first = Some(NetError::NotRestored {
                    iface: iface.to_string(),
                    before: m.snapshot.root.to_string(),
                    now: now.to_string(),
                });
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Restores every taken interface; the failures, by interface.
    pub fn restore_all(&mut self) -> Vec<(String, NetError)> {
        let names: Vec<String> = self.managed.keys().cloned().collect();
        names
            .into_iter()
            .filter_map(|n| self.restore(&n).err().map(|e| (n, e)))
            .collect()
    }
}

#[cfg(test)]
#[path = "island_tests.rs"]
mod tests;
