//! A reload of `[network.*]`: network islands that go give their interface
//! back exactly (their units' priorities first), new ones take theirs over,
//! changed ones start again from their configured shares with their tree
//! planned again and their steering as configured now. Each step is a
//! decision with the reload as its reason.

use std::time::Duration;

use atoll_core::decision::Reason;
use atoll_core::netisland::NetCoordinator;
use atoll_core::spec::PlatformSpec;

use super::{give_back, net_decision, steering_note, NetIslands};
use crate::decisions::DecisionLog;

impl NetIslands {
    /// Brings the network islands to `spec`'s (see the module docs);
    /// returns a warning for each step that failed.
    pub fn reload(
        &mut self,
        spec: &PlatformSpec,
        now: Duration,
        log: &mut DecisionLog,
    ) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut i = 0;
        while i < self.islands.len() {
            let setup = &self.islands[i].0;
            let new = spec.network.iter().find(|n| n.name == setup.name);
            let detail = match new {
                None => format!("network island {} is no longer configured", setup.name),
                Some(n) if n.interface != setup.interface => format!(
                    "network island {} moved from {} to {}",
                    setup.name, setup.interface, n.interface
                ),
                Some(_) => {
                    i += 1;
                    continue;
                }
            };
            let why = Reason::Reload { detail };
            let name = setup.name.clone();
            warnings.extend(self.unclassify(|c| c.island == name, now, &why, log));
            let (setup, _) = self.islands.remove(i);
            if self.ifs.snapshot(&setup.interface).is_some() {
                give_back(&mut self.ifs, &setup, now, &why, log, &mut warnings);
            }
            self.refused.retain(|(isl, _)| isl != &name);
            self.stats.remove(&setup.interface);
        }
        for new in &spec.network {
            let at = self.islands.iter().position(|(s, _)| s.name == new.name);
            if at.is_some_and(|i| self.islands[i].0 == *new) {
                continue;
            }
            let mut coord = match NetCoordinator::new(new.clone(), self.step) {
                Ok(c) => c,
                Err(e) => {
                    warnings.push(format!("network island {}: {e}", new.name));
                    continue;
                }
            };
            // Run-time units keep their classes on a rebuilt island.
            self.with_runtime_classes(&new.name, &mut coord, &mut warnings);
            self.refused.retain(|(isl, _)| isl != &new.name);
            match at {
                Some(i) => {
                    self.islands[i] = (new.clone(), coord);
                    let why = Reason::Reload {
                        detail: format!("network island {} changed", new.name),
                    };
                    self.rewrite_island(i, now, &why, log, &mut warnings);
                }
                None => {
                    self.islands.push((new.clone(), coord));
                    let why = Reason::Reload {
                        detail: format!("network island {} added", new.name),
                    };
                    let last = self.islands.len() - 1;
                    self.start_island(last, now, &why, log, &mut warnings);
                }
            }
        }
        // Groups that could not be written are tried again.
        self.class_failed.clear();
        warnings
    }

    /// Writes island `i`'s tree from its coordinator and its steering as
    /// configured (the files as found first, then the configured CPUs); an
    /// interface not held yet is taken over.
    fn rewrite_island(
        &mut self,
        i: usize,
        now: Duration,
        why: &Reason,
        log: &mut DecisionLog,
        warnings: &mut Vec<String>,
    ) {
        if self.ifs.snapshot(&self.islands[i].0.interface).is_none() {
            self.start_island(i, now, why, log, warnings);
            return;
        }
        self.write_tree(i, now, why, log, warnings);
        let setup = &self.islands[i].0;
        let iface = setup.interface.as_str();
        let (rx, tx) = (setup.rx_cpus.as_ref(), setup.tx_cpus.as_ref());
        let steered = self
            .ifs
            .restore_steering(iface)
            .and_then(|()| self.ifs.steer(iface, rx, tx));
        match steered {
            Ok(written) => log.record(net_decision(
                now,
                &setup.name,
                iface,
                steering_note(rx, tx, written.len()),
                why.clone(),
            )),
            Err(e) => warnings.push(format!("network island {}: {e}", setup.name)),
        }
    }
}
