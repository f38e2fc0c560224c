//! Classification on cgroup v2: the unit groups' sockets get their class
//! id as priority from rules in atoll's own nftables table
//! ([`atoll_net::nft`], `docs/netisland.md`, "Classification"). The table
//! is rewritten whole, in one transaction, only when the set of rules
//! changes; the first write replaces a table of the same name a crashed
//! run left; teardown deletes it. Each rule added or dropped is a decision.

use std::path::PathBuf;
use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::Name;
use atoll_net::nft::{NftClassifier, NftRule, NftRunner};

use super::{net_decision, NetIslands};
use crate::decisions::DecisionLog;

/// The runner the daemon's classifier uses.
pub type BoxedRunner = Box<dyn NftRunner + Send>;

/// Where a unit's group is, for classification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupDir {
    /// In a cgroup v1 `net_prio` hierarchy: its `ifpriomap` is written.
    NetPrio(PathBuf),
    /// In a cgroup v2 hierarchy mounted at `mount`: an nftables rule.
    Cgroup2 {
        /// The hierarchy's mount.
        mount: PathBuf,
        /// The group's directory.
        dir: PathBuf,
    },
}

/// How cgroup v2 groups are classified.
#[derive(Debug, Default)]
pub(super) enum NftRoute {
    /// Not set up (a v1 or simulated backend).
    #[default]
    Off,
    /// `nft` cannot be used, and why.
    Missing(String),
    /// atoll's table.
    On {
        classifier: NftClassifier<BoxedRunner>,
        /// (island, unit, interface, rule) the table holds.
        held: Vec<(Name, Name, String, NftRule)>,
        /// The last refusal, warned about once.
        failed: Option<String>,
    },
}

fn class_name(classid: u32) -> String {
    format!("{:x}:{:x}", classid >> 16, classid & 0xffff)
}

impl NetIslands {
    /// Classifies cgroup v2 unit groups with `classifier` (a table named
    /// after the daemon's root).
    pub fn set_nft(&mut self, classifier: NftClassifier<BoxedRunner>) {
        self.nft = NftRoute::On {
            classifier,
            held: Vec::new(),
            failed: None,
        };
    }

    /// cgroup v2 unit groups cannot be classified: `why` (e.g. no `nft`).
    pub fn set_nft_missing(&mut self, why: &str) {
        self.nft = NftRoute::Missing(why.to_string());
    }

    /// Makes atoll's table hold exactly `want` (island, unit, interface,
    /// rule); a decision for each rule added or dropped, with `why`; a
    /// warning when nft refuses (once per distinct refusal). Does nothing
    /// before the first rule unless an island exists (so a machine without
    /// network islands never sees nft run).
    pub(super) fn write_nft(
        &mut self,
        want: Vec<(Name, Name, String, NftRule)>,
        now: Duration,
        why: &Reason,
        log: &mut DecisionLog,
    ) -> Vec<String> {
        let has_islands = !self.islands.is_empty();
        let NftRoute::On {
            classifier,
            held,
            failed,
        } = &mut self.nft
        else {
            return Vec::new();
        };
        if want.is_empty() && held.is_empty() && !has_islands {
            return Vec::new();
        }
        let rules = want.iter().map(|w| w.3.clone()).collect();
        match classifier.set(rules) {
            Ok(false) => Vec::new(),
            Ok(true) => {
                let table = classifier.table().to_string();
                for (island, unit, iface, rule) in &want {
                    if !held.iter().any(|h| h.1 == *unit && h.3 == *rule) {
                        log.record(net_decision(now, &island, iface, format!(
                                    "unit {unit}: the sockets of its group get class {} on {iface} (nftables table inet {table}: socket cgroupv2 level {} \"{}\")",
                                    class_name(rule.classid),
                                    rule.level,
                                    rule.path
                                ), why.clone()));
                    }
                }
                for (island, unit, iface, rule) in held.iter() {
                    if !want.iter().any(|w| w.1 == *unit && w.3 == *rule) {
                        log.record(net_decision(now, &island, iface, format!(
                                    "unit {unit}: its nftables rule for class {} dropped (table inet {table})",
                                    class_name(rule.classid)
                                ), why.clone()));
                    }
                }
                *held = want;
                *failed = None;
                Vec::new()
            }
            Err(e) => {
                let text = e.to_string();
                if failed.as_deref() == Some(text.as_str()) {
                    return Vec::new();
                }
                *failed = Some(text.clone());
                vec![format!(
                    "network islands: the units' nftables rules are not written: {text}"
                )]
            }
        }
    }

    /// Deletes atoll's table if this run wrote it (teardown).
    pub(super) fn remove_nft(&mut self, now: Duration, log: &mut DecisionLog) -> Vec<String> {
        let NftRoute::On {
            classifier, held, ..
        } = &mut self.nft
        else {
            return Vec::new();
        };
        if !classifier.written() {
            return Vec::new();
        }
        let table = classifier.table().to_string();
        match classifier.remove() {
            Ok(()) => {
                for (island, unit, iface, _) in held.drain(..) {
                    log.record(net_decision(
                        now,
                        &island,
                        &iface,
                        format!(
                            "unit {unit}: its nftables rule dropped (table inet {table} deleted)"
                        ),
                        Reason::Teardown,
                    ));
                }
                Vec::new()
            }
            Err(e) => vec![format!(
                "network islands: the nftables table inet {table} is not deleted: {e}"
            )],
        }
    }

    /// The status words for the nftables route, if it is the route.
    pub(super) fn nft_classification(&self, island: &Name) -> Option<String> {
        match &self.nft {
            NftRoute::Off => None,
            NftRoute::Missing(why) => Some(format!(
                "none by cgroup: the unit groups are cgroup v2 ones and nftables cannot be used ({why}); a unit's sockets reach its class only when they set the class id as SO_PRIORITY"
            )),
            NftRoute::On {
                classifier,
                held,
                failed,
            } => {
                let units: Vec<&str> = held
                    .iter()
                    .filter(|h| &h.0 == island)
                    .map(|h| h.1.as_str())
                    .collect();
                let mut text = format!(
                    "by cgroup (v2, nftables table inet {} `socket cgroupv2 ... meta priority set`): {}",
                    classifier.table(),
                    if units.is_empty() {
                        "no unit's group yet".to_string()
                    } else {
                        format!("the groups of {}", units.join(", "))
                    }
                );
                if let Some(f) = failed {
                    text.push_str(&format!("; last write refused: {f}"));
                }
                Some(text)
            }
        }
    }
}
