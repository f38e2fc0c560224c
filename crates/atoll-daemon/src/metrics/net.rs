//! Network islands' classes (`docs/netisland.md`): each class leaf's
//! figures as last read, labels `island` (the network island),
//! `interface`, `class` and `unit` (`default` for the default class).

use atoll_proto::net::{NetClassStats, NetIslandStatus};

use super::text::{labels, Out};
use super::{COUNTER, GAUGE};

/// Reads one figure of a class.
pub(super) type ClassGet = fn(&NetClassStats) -> u64;

/// `(name, kind, help, get)` of each family.
pub(super) const NET: &[(&str, &str, &str, ClassGet)] = &[
    (
        "atoll_net_class_bytes_total",
        COUNTER,
        "Bytes the class's leaf sent.",
        |s| s.bytes,
    ),
    (
        "atoll_net_class_packets_total",
        COUNTER,
        "Packets the class's leaf sent.",
        |s| s.packets,
    ),
    (
        "atoll_net_class_drops_total",
        COUNTER,
        "Packets the class's leaf dropped.",
        |s| s.drops,
    ),
    (
        "atoll_net_class_backlog_bytes",
        GAUGE,
        "Bytes waiting in the class's leaf at the last read.",
        |s| s.backlog_bytes,
    ),
    (
        "atoll_net_class_backlog_packets",
        GAUGE,
        "Packets waiting in the class's leaf at the last read.",
        |s| s.backlog_packets,
    ),
];

/// Renders the classes' families.
pub(super) fn render(out: &mut Out, islands: &[NetIslandStatus]) {
    for (name, kind, help, get) in NET {
        let mut samples = Vec::new();
        for i in islands {
            for c in &i.classes {
                let Some(s) = &c.stats else { continue };
                samples.push((
                    labels(&[
                        ("island", &i.island),
                        ("interface", &i.interface),
                        ("class", &c.class),
                        ("unit", c.unit.as_deref().unwrap_or("default")),
                    ]),
                    get(s).to_string(),
                ));
            }
        }
        out.family(name, kind, help, samples);
    }
    let rates = islands
        .iter()
        .flat_map(|i| {
            i.classes.iter().map(move |c| {
                (
                    labels(&[
                        ("island", &i.island),
                        ("interface", &i.interface),
                        ("class", &c.class),
                        ("unit", c.unit.as_deref().unwrap_or("default")),
                    ]),
                    c.rate_bps.to_string(),
                )
            })
        })
        .collect();
    out.family(
        "atoll_net_class_rate_bits",
        GAUGE,
        "The class's guaranteed rate now, bit/s.",
        rates,
    );
}
