//! The network islands in `atoll status` and the metrics.

use atoll_proto::net::{NetClassStats, NetClassStatus, NetIslandStatus};

use super::NetIslands;

impl NetIslands {
    /// Each network island: its interface, its classes with their rates
    /// and shares now, and their leaves' figures as last read.
    pub fn status(&self) -> Vec<NetIslandStatus> {
        self.islands
            .iter()
            .map(|(setup, coord)| {
                let stats = self.stats.get(&setup.interface);
                let classes = coord
                    .rates()
                    .iter()
                    .map(|r| NetClassStatus {
                        class: format!("1:{:x}", r.minor),
                        unit: r.unit.as_ref().map(ToString::to_string),
                        share: r
                            .unit
                            .as_ref()
                            .and_then(|u| coord.share(u))
                            .unwrap_or(setup.default_share),
                        rate_bps: r.rate_bps,
                        ceil_bps: r.ceil_bps,
                        stats: stats
                            .and_then(|s| s.iter().find(|l| l.minor == r.minor))
                            .map(|l| NetClassStats {
                                bytes: l.bytes,
                                packets: l.packets,
                                drops: l.drops,
                                backlog_bytes: l.backlog_bytes,
                                backlog_packets: l.backlog_packets,
                            }),
                    })
                    .collect();
                NetIslandStatus {
                    island: setup.name.to_string(),
                    interface: setup.interface.clone(),
                    managed: self.ifs.snapshot(&setup.interface).is_some(),
                    rate_bps: coord.rate_bps(),
                    classification: format!(
                        "{}; a unit without a class here (a run-time unit made without `--net-island {}` among them) sends in the default class 1:{:x}",
                        self.classification(&setup.name),
                        setup.name,
                        atoll_core::netisland::DEFAULT_MINOR
                    ),
                    classes,
                }
            })
            .collect()
    }
}
