//! `to_toml` and `parse` are inverses on valid specs: every example config,
//! and random valid platforms (islands of every policy, units with every
//! entitlement key, overlays of every property, `[comm]`, `[apps]`), dump to
//! a file that parses back to the same spec.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use atoll_config::{parse, to_toml};
use atoll_core::coord::{ArbitrationPolicy, Property};
use atoll_core::slo::{
    AccessLogSpec, BeConfig, LatencySource, LogFormat, ProbeSpec, ProbeTarget, SloConfig, TimeUnit,
};
use atoll_core::spec::{
    AdoptRule, CapTiming, DeviceId, Entitlement, HostSpec, IoEntitlement, IoLimit, IslandAccess,
    IslandSpec, IsolationMode, IsolationSpec, MemoryEntitlement, OverlayConfig, PlatformSpec,
    ReactPolicy, RealtimePolicy, RtClass, SchedPolicy, SharePolicy, Sharing, UnitSpec,
};
use atoll_core::topology::Topology;
use atoll_core::{CpuSet, Name};
use common::*;
use proptest::prelude::*;

fn roundtrip(spec: &PlatformSpec, topo: &Topology) -> PlatformSpec {
    let text = to_toml(spec).unwrap_or_else(|e| panic!("{e}"));
    parse(&text, "dump.toml", topo).unwrap_or_else(|e| panic!("{e}\n--- the dump:\n{text}"))
}

#[test]
fn every_example_dumps_to_itself() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let machines = [
        ("minimal.toml", smt2()),
        ("web-batch.toml", shape(1, 1, 1, 8, 2)),
        ("realtime.toml", shape(2, 1, 1, 4, 1)),
        ("vm-8cpu.toml", vm8()),
    ];
    for (file, topo) in machines {
        let spec = atoll_config::load(&dir.join(file), &topo).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(roundtrip(&spec, &topo), spec, "{file}");
    }
    let default = atoll_config::embedded_default(&two_socket()).unwrap();
    assert_eq!(roundtrip(&default, &two_socket()), default);
}

#[test]
fn a_dump_names_everything_the_machine_filled_in() {
    let topo = two_socket();
    let spec = parse(
        "[host]\ncpus = \"auto\"\n[auto]\nlayout = \"per_node\"\n[unit.a]\ncpus = 1\nmemory_max = \"1G\"\n",
        "t.toml",
        &topo,
    )
    .unwrap();
    let text = to_toml(&spec).unwrap();
    for want in [
        "[host]\ncpus = \"0,16\"",
        "[island.node0]",
        "[island.node1]",
        "[unit.a]\nisland = \"node0\"",
        "memory_max = \"1G\"",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    assert!(!text.contains("[auto]"), "{text}");
}

/// A small deterministic generator: proptest picks the seed (and reports
/// it when a case fails), the spec is built from it so that it is valid by
/// construction.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn coin(&mut self) -> bool {
        self.below(2) == 0
    }
    /// A quarter in (0, max].
    fn quarters(&mut self, max: f64) -> f64 {
        let n = atoll_core::num::saturating_u64(max * 4.0);
        self.range(1, n.max(1)) as f64 / 4.0
    }
    /// A `u32` in `lo..=hi`.
    fn u32_in(&mut self, lo: u32, hi: u32) -> u32 {
        u32::try_from(self.range(u64::from(lo), u64::from(hi))).expect("within u32")
    }
    /// A `u8` in `lo..=hi`.
    fn u8_in(&mut self, lo: u8, hi: u8) -> u8 {
        u8::try_from(self.range(u64::from(lo), u64::from(hi))).expect("within u8")
    }
    /// An index below `n`.
    fn index(&mut self, n: usize) -> usize {
        let n64 = u64::try_from(n).expect("a small count");
        usize::try_from(self.below(n64)).expect("below a usize")
    }
}

fn name(s: impl AsRef<str>) -> Name {
    Name::new(s.as_ref()).unwrap()
}

fn random_island(g: &mut Gen, i: usize, cpus: CpuSet) -> IslandSpec {
    let realtime = g.below(4) == 0;
    let policy = if realtime {
        let lo = g.u8_in(1, 99);
        let hi = g.u8_in(lo, 99);
        let period = g.range(2, 1_000_000);
        SchedPolicy::Realtime(RealtimePolicy {
            class: if g.coin() { RtClass::Fifo } else { RtClass::Rr },
            priority_min: lo,
            priority_max: hi,
            runtime_us: g.range(1, period - 1),
            period_us: period,
        })
    } else {
        [SchedPolicy::Fair, SchedPolicy::Batch, SchedPolicy::Idle][g.index(3)].clone()
    };
    IslandSpec {
        name: name(format!("isl{i}")),
        mems: [CpuSet::parse("0"), CpuSet::parse("1"), CpuSet::parse("0-1")][g.index(3)]
            .clone()
            .unwrap(),
        cpus,
        policy,
        arbitration: if g.coin() {
            ArbitrationPolicy::RoundRobin
        } else {
            ArbitrationPolicy::Priority
        },
        exclusive: g.coin(),
        access: IslandAccess {
            user_units: g.coin(),
            user_units_max: g.u32_in(1, 8),
            rt_users: if realtime && g.coin() {
                vec![g.u32_in(1, 60_000), 1000]
            } else {
                Vec::new()
            },
        },
    }
}

fn random_unit(g: &mut Gen, i: usize, island: &IslandSpec) -> UnitSpec {
    let ncpus = island.cpus.len() as f64;
    let cpus = g.coin().then(|| g.quarters(ncpus));
    let cpu_cap = g
        .coin()
        .then(|| cpus.unwrap_or(0.25).max(g.quarters(ncpus)));
    // Sometimes a whole number of MiB, so the dump writes a suffix; sorted
    // after rounding, so that min <= low <= high <= max still holds.
    let mut sizes: Vec<u64> = (0..4)
        .map(|_| {
            let v = g.range(1, 8 << 30);
            if g.coin() {
                (v & !((1 << 20) - 1)).max(1)
            } else {
                v
            }
        })
        .collect();
    sizes.sort_unstable();
    let mut memory = MemoryEntitlement::default();
    for (k, slot) in [
        &mut memory.min,
        &mut memory.low,
        &mut memory.high,
        &mut memory.max,
    ]
    .into_iter()
    .enumerate()
    {
        if g.coin() {
            *slot = Some(sizes[k]);
        }
    }
    let limits = (0..g.below(3))
        .map(|d| IoLimit {
            device: DeviceId {
                major: 8,
                minor: u32::try_from(d).expect("below 3") * 16,
            },
            rbps: Some(g.range(1, 1 << 40)),
            wbps: g.coin().then(|| g.range(1, 1 << 30)),
            riops: g.coin().then(|| g.range(1, 100_000)),
            wiops: g.coin().then(|| g.range(1, 100_000)),
        })
        .collect();
    let share = |g: &mut Gen| {
        if g.coin() {
            SharePolicy::Lend
        } else {
            SharePolicy::None
        }
    };
    let rules = [
        AdoptRule::Comm(format!("w{i}")),
        AdoptRule::Exe(format!("/usr/bin/w{i}").into()),
        AdoptRule::Uid(g.u32_in(0, 70_000)),
        AdoptRule::Cgroup(format!("/system.slice/w{i}.service")),
        AdoptRule::Pid(g.u32_in(1, 4_000_000)),
    ];
    let adopt = rules.into_iter().filter(|_| g.below(3) == 0).collect();
    let rt_priority = match &island.policy {
        SchedPolicy::Realtime(rt) if g.coin() => Some(g.u8_in(rt.priority_min, rt.priority_max)),
        _ => None,
    };
    UnitSpec {
        name: name(format!("u{i}")),
        island: island.name.clone(),
        entitlement: Entitlement {
            cpus,
            weight: g.coin().then(|| g.u32_in(1, 10_000)),
            cpu_cap,
            memory,
            io: IoEntitlement {
                weight: g.coin().then(|| g.u32_in(1, 10_000)),
                limits,
            },
            sharing: Sharing {
                cpu: share(g),
                memory: share(g),
                io: share(g),
            },
        },
        adopt,
        rt_priority,
    }
}

/// A latency overlay's source (any of the three) and maybe a best-effort
/// unit taken from `free`; the default for other properties.
fn random_slo(g: &mut Gen, property: &Property, free: &mut Vec<Name>) -> SloConfig {
    if !matches!(property, Property::LatencyPercentile { .. }) {
        return SloConfig::default();
    }
    let source = match g.below(3) {
        0 => LatencySource::Report,
        1 => LatencySource::Probe(ProbeSpec {
            target: if g.coin() {
                ProbeTarget::Http {
                    addr: format!("127.0.0.1:{}", g.range(1, 65535)),
                    path: format!("/p{}", g.below(9)),
                }
            } else {
                ProbeTarget::Tcp {
                    addr: format!("localhost:{}", g.range(1, 65535)),
                    send: "PING\r\n".into(),
                }
            },
            every: Duration::from_millis(g.range(1, 10_000)),
            timeout: Duration::from_millis(g.range(1, 10_000)),
        }),
        _ => LatencySource::AccessLog(AccessLogSpec {
            path: PathBuf::from(format!("/var/log/w{}/access.log", g.below(9))),
            format: if g.coin() {
                LogFormat::Haproxy
            } else {
                LogFormat::Field {
                    index: [-1, -2, 1, 7][g.index(4)],
                    unit: [TimeUnit::S, TimeUnit::Ms, TimeUnit::Us][g.index(3)],
                }
            },
        }),
    };
    let best_effort = if g.coin() && !free.is_empty() {
        vec![free.remove(0)]
    } else {
        Vec::new()
    };
    let measured = source != LatencySource::Report;
    let be = if !best_effort.is_empty() && g.coin() {
        let cut = [0.0, 0.05, 0.25][g.index(3)];
        BeConfig {
            steps: g.u32_in(1, 100),
            grow_above: cut + [0.1, 0.375, 0.5][g.index(3)],
            cut_below: cut,
            ..BeConfig::default()
        }
    } else {
        BeConfig::default()
    };
    SloConfig {
        source,
        window: Duration::from_millis(g.range(1, 100_000)),
        best_effort,
        stale_after: (measured && g.coin()).then(|| Duration::from_millis(g.range(1, 60_000))),
        be,
    }
}

fn random_spec(seed: u64) -> PlatformSpec {
    let mut g = Gen(seed);
    // two_socket(): CPUs 0-31, nodes 0 and 1.
    let host_empty = g.below(4) == 0;
    let first = if host_empty { 0 } else { 1 };
    let count = g.u32_in(1, 3);
    let mut bounds: Vec<u32> = (1..count).map(|_| g.u32_in(1, 30) + first).collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut islands = Vec::new();
    let mut start = first;
    for (i, end) in bounds.into_iter().chain([32]).enumerate() {
        if end <= start {
            continue;
        }
        let cpus = CpuSet::parse(&format!("{start}-{}", end - 1)).unwrap();
        islands.push(random_island(&mut g, i, cpus));
        start = end;
    }
    let units: Vec<UnitSpec> = (0..g.index(6))
        .map(|i| {
            let island = islands[g.index(islands.len())].clone();
            random_unit(&mut g, i, &island)
        })
        .collect();
    let mut overlays = Vec::new();
    let mut free: Vec<Name> = units.iter().map(|u| u.name.clone()).collect();
    for o in 0..g.below(3) {
        let take = 1 + g.index(2);
        if free.len() < take {
            break;
        }
        let members: Vec<Name> = free.drain(..take).collect();
        let property = if g.coin() {
            Property::LatencyPercentile {
                percentile: g.quarters(100.0),
                bound_us: g.range(1, 1_000_000),
            }
        } else {
            Property::ThroughputFloor {
                per_s: g.quarters(10_000.0),
            }
        };
        overlays.push(OverlayConfig {
            name: name(format!("o{o}")),
            priority: g.u8_in(0, 255),
            units: members,
            slo: random_slo(&mut g, &property, &mut free),
            cap_timing: Default::default(),
            property,
            react: ReactPolicy {
                pressure: g.coin().then(|| g.quarters(100.0)),
                utilization: g.coin().then(|| g.range(1, 100) as f64 / 100.0),
                recv_queue: g.coin().then(|| g.range(1, 1 << 20)),
            },
        });
    }
    if g.coin() {
        overlays.push(OverlayConfig {
            name: name("power"),
            priority: 0,
            units: Vec::new(),
            property: Property::PlatformCpuCap {
                cpus: islands.len() as f64 * 0.5 + g.below(4) as f64,
            },
            slo: Default::default(),
            cap_timing: random_cap_timing(&mut g),
            react: ReactPolicy::default(),
        });
    }
    let comm = g.coin().then(|| {
        let mut c = atoll_core::comm::CommSpec {
            recipient: g.coin(),
            anticipate: g.coin(),
            period: Duration::from_millis(g.range(10, 10_000)),
            boost_slice: Duration::from_micros(g.range(100, 100_000)),
            boost_weight: g.u32_in(1, 100),
            max_boosted: 1 + g.index(8),
            ..Default::default()
        };
        if let Some(u) = units.first() {
            c.netpath = vec![u.name.clone()];
            if g.coin() {
                c.units = Some(units.iter().map(|u| u.name.clone()).collect());
            }
        }
        c
    });
    let network = (0..g.below(3))
        .map(|k| {
            let rate_mbit = g.range(1, 100_000);
            let mut unit_names: Vec<Name> = units
                .iter()
                .filter(|_| g.coin())
                .map(|u| u.name.clone())
                .collect();
            // The file gives units in name order.
            unit_names.sort();
            atoll_core::netisland::NetIslandSetup {
                name: name(format!("net{k}")),
                interface: format!("eth{k}"),
                rate_bps: rate_mbit * 1_000_000,
                default_share: g.u32_in(1, 10_000),
                units: unit_names
                    .into_iter()
                    .map(|u| atoll_core::netisland::NetUnitSetup {
                        name: u,
                        share: g.u32_in(1, 10_000),
                        ceil_bps: g.coin().then(|| g.range(1, rate_mbit) * 1_000_000),
                        prio: g.u8_in(0, 7),
                    })
                    .collect(),
                triggers: atoll_core::netisland::TriggerConfig {
                    socket_backlog_bytes: g.coin().then(|| g.range(1, 1 << 30)),
                    class_backlog_bytes: g.coin().then(|| g.range(1, 1 << 30)),
                    cooldown: Duration::from_millis(g.range(1, 10_000)),
                },
                leaf: if g.coin() {
                    atoll_core::netisland::Leaf::FqCodel
                } else {
                    atoll_core::netisland::Leaf::Pfifo
                },
                rx_cpus: g.coin().then(|| CpuSet::parse("0-1").unwrap()),
                tx_cpus: g.coin().then(|| CpuSet::parse("31").unwrap()),
            }
        })
        .collect();
    let mut frequency = std::collections::BTreeMap::new();
    for i in &islands {
        if g.coin() {
            continue;
        }
        let min = if g.coin() {
            Some(g.range(100_000, 2_000_000))
        } else {
            None
        };
        let max = if g.coin() {
            Some(min.unwrap_or(100_000) + g.range(0, 3_000_000))
        } else {
            None
        };
        let governor = if g.coin() {
            Some(["performance", "powersave", "schedutil"][g.index(3)].to_string())
        } else {
            None
        };
        let policy = atoll_core::power::FreqPolicy {
            governor,
            min_khz: min,
            max_khz: max,
        };
        frequency.insert(i.name.clone(), policy);
    }
    let mut apps = atoll_core::spec::AppsSpec::default();
    if g.coin() {
        apps.islands = Some(vec![islands[0].name.clone()]);
        apps.batch_quiet = Duration::from_millis(g.range(1, 50));
        apps.batch_max = Duration::from_millis(g.range(50, 500));
        apps.gap_deadband = g.range(0, 20) as f64 / 100.0;
    }
    PlatformSpec {
        host: HostSpec {
            cpus: if host_empty {
                CpuSet::new()
            } else {
                CpuSet::parse("0").unwrap()
            },
            mems: CpuSet::parse(if g.coin() { "0" } else { "0-1" }).unwrap(),
            adopt_all: !host_empty && g.coin(),
        },
        default_island: g
            .coin()
            .then(|| islands[g.index(islands.len())].name.clone()),
        islands,
        units,
        epoch: Duration::from_millis(g.range(1, 60_000)),
        isolation: IsolationSpec {
            mode: [
                IsolationMode::Smp,
                IsolationMode::Quota,
                IsolationMode::Isolate,
            ][g.index(3)],
            memory_reserve: g.range(0, 99) as f64 / 100.0,
            io_threshold_bytes: g.range(0, 1 << 30),
            io_decay: Duration::from_millis(g.range(10, 60_000)),
        },
        overlays,
        comm,
        apps,
        network,
        frequency,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_valid_specs_dump_to_themselves(seed in any::<u64>()) {
        let topo = two_socket();
        let spec = random_spec(seed);
        // Built valid; a check that it is, so the test says so if not.
        if let Err(errs) = spec.validate(&topo) {
            return Err(TestCaseError::fail(format!("generator made an invalid spec: {errs:?}")));
        }
        let back = roundtrip(&spec, &topo);
        prop_assert_eq!(back, spec);
    }
}

/// A valid timing of the platform cap: each key set or not, the window at
/// least two periods.
fn random_cap_timing(g: &mut Gen) -> CapTiming {
    let period = g.coin().then(|| g.range(10, 1000));
    let least = 2 * period.unwrap_or(20);
    // The default window (200 ms) serves only periods up to 100 ms.
    let interval = (g.coin() || least > 200).then(|| g.range(least, 60_000));
    CapTiming {
        period: period.map(Duration::from_millis),
        interval: interval.map(Duration::from_millis),
    }
}
