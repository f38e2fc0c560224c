//! Classification of the units' traffic by their cgroup: on cgroup v1,
//! each unit group's `net_prio.ifpriomap` gets the unit's class id for the
//! island's interface, so that every socket of the group reaches the
//! unit's HTB class with no `SO_PRIORITY` of its own and no tc filter
//! (`docs/netisland.md`, "Classification"). The network island is the one
//! writer of these files (as of the interface's tree); what each group had
//! is written back when the unit loses its class or at teardown. On
//! cgroup v2 the groups get rules in atoll's nftables table instead
//! (`nft.rs`).

use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::Name;
use atoll_net::classify::{self as netprio, SavedPrio};
use atoll_net::nft::NftRule;

use super::{net_decision, GroupDir, GroupDirs, NetIslands};
use crate::decisions::DecisionLog;

/// A unit group atoll gave a class id on an interface.
#[derive(Clone, Debug)]
pub(super) struct Classified {
    pub island: Name,
    pub unit: Name,
    pub interface: String,
    pub classid: u32,
    /// What the group had for the interface.
    pub saved: SavedPrio,
}

/// `1:10` for the class id `0x0001_0010`.
fn class_name(classid: u32) -> String {
    format!("{:x}:{:x}", classid >> 16, classid & 0xffff)
}

impl NetIslands {
    /// Gives the group of every unit with a class on a managed interface
    /// its class id as priority there (`dirs` says where each unit's group
    /// is: in a `net_prio` hierarchy, or a v2 one where atoll's nftables
    /// table gets a rule for it), a decision each with `why`. A group
    /// already given that class is left alone, so this runs every epoch
    /// and reaches groups made later; one that cannot be written is a
    /// warning, once. A unit whose class changed or went has its old
    /// priority written back first.
    pub fn classify(
        &mut self,
        now: Duration,
        dirs: GroupDirs<'_>,
        why: &Reason,
        log: &mut DecisionLog,
    ) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut want: Vec<(Name, Name, String, u32)> = Vec::new();
        for (setup, coord) in &self.islands {
            if self.ifs.snapshot(&setup.interface).is_none() {
                continue;
            }
            for r in coord.rates() {
                if let Some(unit) = r.unit {
                    let classid = (1 << 16) | u32::from(r.minor);
                    want.push((setup.name.clone(), unit, setup.interface.clone(), classid));
                }
            }
        }
        // Groups whose class changed or went get their priority back.
        let stale = |c: &Classified| {
            !want.iter().any(|(i, u, f, id)| {
                *i == c.island && *u == c.unit && *f == c.interface && *id == c.classid
            })
        };
        warnings.extend(self.unclassify(stale, now, why, log));
        let mut rules = Vec::new();
        for (island, unit, iface, classid) in want {
            let done = self
                .classified
                .iter()
                .any(|c| c.island == island && c.unit == unit);
            let key = (island.clone(), unit.clone());
            if done || self.class_failed.contains(&key) {
                continue;
            }
            let dir = match dirs(&unit) {
                Some(GroupDir::NetPrio(dir)) => dir,
                Some(GroupDir::Cgroup2 { mount, dir }) => {
                    // Not made yet: tried again next epoch.
                    if dir.is_dir() {
                        match NftRule::for_group(&mount, &dir, classid) {
                            Ok(rule) => rules.push((island, unit, iface, rule)),
                            Err(e) => {
                                warnings.push(format!(
                                    "network island {island}: unit {unit}'s traffic is not classified: {e}"
                                ));
                                self.class_failed.insert(key);
                            }
                        }
                    }
                    continue;
                }
                None => {
                    if self.net_prio.is_none() {
                        self.net_prio = Some(false);
                    }
                    continue;
                }
            };
            self.net_prio = Some(true);
            if !dir.is_dir() {
                // The group is not made yet: tried again next epoch.
                continue;
            }
            match netprio::set_class(&dir, &iface, classid) {
                Ok(saved) => {
                    log.record(net_decision(now, &island, &iface, format!(
                                "unit {unit}: the sockets of its group get class {} on {iface} ({}, priority {} before)",
                                class_name(classid),
                                netprio::IFPRIOMAP,
                                saved.prio
                            ), why.clone()));
                    self.classified.push(Classified {
                        island,
                        unit,
                        interface: iface,
                        classid,
                        saved,
                    });
                }
                Err(e) => {
                    warnings.push(format!(
                        "network island {island}: unit {unit}'s traffic is not classified: {e}"
                    ));
                    self.class_failed.insert(key);
                }
            }
        }
        warnings.extend(self.write_nft(rules, now, why, log));
        warnings
    }

    /// Writes back the priority of every classified group `which` picks,
    /// a decision each with `why`; a warning for each that failed.
    pub(super) fn unclassify(
        &mut self,
        which: impl Fn(&Classified) -> bool,
        now: Duration,
        why: &Reason,
        log: &mut DecisionLog,
    ) -> Vec<String> {
        let (gone, kept): (Vec<Classified>, Vec<Classified>) = std::mem::take(&mut self.classified)
            .into_iter()
            .partition(which);
        self.classified = kept;
        let mut warnings = Vec::new();
        for c in gone {
            let group_gone = c.saved.path.parent().is_some_and(|d| !d.exists());
            let change = match netprio::restore(&c.saved) {
                Err(_) if group_gone => {
                    format!("unit {}: its group is gone (nothing to put back)", c.unit)
                }
                Ok(()) => format!(
                    "unit {}: its group's priority on {} back to {}",
                    c.unit, c.interface, c.saved.prio
                ),
                Err(e) => {
                    warnings.push(format!("network island {}: {e}", c.island));
                    format!("unit {}: its group's priority not put back: {e}", c.unit)
                }
            };
            log.record(net_decision(
                now,
                &c.island,
                &c.interface,
                change,
                why.clone(),
            ));
        }
        warnings
    }

    /// How the units' traffic of island `island` reaches its classes, in
    /// words (the status).
    pub(super) fn classification(&self, island: &Name) -> String {
        let units: Vec<&str> = self
            .classified
            .iter()
            .filter(|c| &c.island == island)
            .map(|c| c.unit.as_str())
            .collect();
        if let Some(text) = self.nft_classification(island) {
            return text;
        }
        match self.net_prio {
            Some(true) => format!(
                "by cgroup (v1 net_prio.ifpriomap): the sockets of {} get their class id as priority; a socket that sets SO_PRIORITY itself keeps its own",
                if units.is_empty() {
                    "no unit's group yet".to_string()
                } else {
                    format!("the groups of {}", units.join(", "))
                }
            ),
            _ => "by socket priority only: there is no cgroup v1 net_prio hierarchy for the unit groups (nor a cgroup v2 one classified with nftables), so a unit's sockets reach its class only when they set the class id as SO_PRIORITY".to_string(),
        }
    }
}
