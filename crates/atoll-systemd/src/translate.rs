//! From [`GroupSettings`] to systemd unit properties (pure).
//!
//! | setting | property |
//! | --- | --- |
//! | `cpus`, `mems` | `AllowedCPUs`, `AllowedMemoryNodes` (bitmasks; 244+) |
//! | `cpu_weight` | `CPUWeight` |
//! | `cpu_idle` | `CPUWeight` 0, i.e. `idle` (252+; older: 1 and a fallback) |
//! | `cpu_max` | `CPUQuotaPerSecUSec` = quota per second, `CPUQuotaPeriodUSec` (242+) |
//! | `memory` min, low, high, max | `MemoryMin` (240+), `MemoryLow`, `MemoryHigh`, `MemoryMax` |
//! | `io_weight` | `IOWeight` |
//! | `io_max` | `IO{Read,Write}{BandwidthMax,IOPSMax}` per `/dev/block/MAJ:MIN` |
//! | `frozen` | `FreezeUnit` / `ThawUnit` (246+) |
//! | `partition`, `rt_budget` | none: a [`Fallback`] |
//!
//! `None` (and a limit component that is `None`) means "not atoll's
//! business": the property keeps the value the unit had before atoll
//! changed it, not the kernel's default as in atoll's own groups. What
//! systemd cannot express on this version is a [`Fallback`] named after the
//! cgroup file it would have been, never dropped in silence.

use std::collections::BTreeMap;

use atoll_core::backend::Fallback;
use atoll_core::plan::{GroupPath, GroupSettings, Partition};
use atoll_core::CpuSet;

use crate::value::{
    device_path, io_key, since, to_mask, PropValue, ALLOWED_CPUS, ALLOWED_MEMORY_NODES, CPU_QUOTA,
    CPU_QUOTA_PERIOD, CPU_WEIGHT, FREEZE_SINCE, IDLE_WEIGHT_SINCE, IO_READ_BPS, IO_READ_IOPS,
    IO_WEIGHT, IO_WRITE_BPS, IO_WRITE_IOPS, MEMORY_HIGH, MEMORY_LOW, MEMORY_MAX, MEMORY_MIN,
};

/// What the translation depends on besides the settings.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The unit (for the fallbacks' words).
    pub unit: &'a str,
    /// systemd's major version.
    pub version: u32,
    /// The kernel has RT group scheduling (then even an optional RT budget
    /// cannot be given to a unit systemd owns).
    pub rt_groups: bool,
}

/// The properties a group's settings ask for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wanted {
    /// Property (or [`io_key`]) to value.
    pub props: BTreeMap<String, PropValue>,
    /// The unit is to be frozen (and systemd can).
    pub frozen: bool,
    /// What cannot be set as asked.
    pub fallbacks: Vec<Fallback>,
}

impl Wanted {
    fn fallback(&mut self, path: &GroupPath, knob: &str, wanted: &str, got: &str, reason: String) {
        self.fallbacks.push(Fallback {
            path: path.clone(),
            knob: knob.to_string(),
            wanted: wanted.to_string(),
            got: got.to_string(),
            reason,
        });
    }

    /// Sets `property` if this systemd has it, else a fallback on `knob`.
    fn put(
        &mut self,
        path: &GroupPath,
        cx: &Context<'_>,
        knob: &str,
        property: &str,
        v: PropValue,
        shown: &str,
    ) {
        let need = since(property);
        if cx.version >= need {
            self.props.insert(property.to_string(), v);
        } else {
            self.fallback(
                path,
                knob,
                shown,
                "n/a",
                format!(
                    "systemd {} has no {property} (systemd {need} and later): {} keeps its own",
                    cx.version, cx.unit
                ),
            );
        }
    }
}

/// `CPUQuotaPerSecUSec` for a quota per period, at least 1 µs (systemd
/// refuses 0).
pub fn quota_per_sec(quota_us: u64, period_us: u64) -> u64 {
    let per_sec = u128::from(quota_us) * 1_000_000 / u128::from(period_us.max(1));
    u64::try_from(per_sec).unwrap_or(u64::MAX - 1).max(1)
}

fn cpuset(
    path: &GroupPath,
    cx: &Context<'_>,
    w: &mut Wanted,
    knob: &str,
    property: &str,
    set: &CpuSet,
) {
    if set.is_empty() {
        w.fallback(
            path,
            knob,
            "",
            "n/a",
            format!(
                "an empty {property} means every CPU or node to systemd: {} keeps its own",
                cx.unit
            ),
        );
        return;
    }
    w.put(
        path,
        cx,
        knob,
        property,
        PropValue::Bytes(to_mask(set)),
        &set.to_string(),
    );
}

/// The properties for `s` on a bound group at `path`.
pub fn translate(path: &GroupPath, s: &GroupSettings, cx: &Context<'_>) -> Wanted {
    let mut w = Wanted::default();
    if let Some(c) = &s.cpus {
        cpuset(path, cx, &mut w, "cpuset.cpus", ALLOWED_CPUS, c);
    }
    if let Some(m) = &s.mems {
        cpuset(path, cx, &mut w, "cpuset.mems", ALLOWED_MEMORY_NODES, m);
    }
    if s.partition == Some(Partition::Root) {
        w.fallback(
            path,
            "cpuset.cpus.partition",
            "root",
            "member",
            format!(
                "systemd has no property for cpuset partitions: {}'s cgroup stays a member, sharing its CPUs",
                cx.unit
            ),
        );
    }
    if s.cpu_idle {
        if cx.version >= IDLE_WEIGHT_SINCE {
            w.props.insert(CPU_WEIGHT.into(), PropValue::U64(0));
        } else {
            w.props.insert(CPU_WEIGHT.into(), PropValue::U64(1));
            w.fallback(
                path,
                "cpu.idle",
                "1",
                "CPUWeight=1",
                format!(
                    "systemd {} has no idle CPU weight (systemd {IDLE_WEIGHT_SINCE} and later): {} gets the lowest weight, 1",
                    cx.version, cx.unit
                ),
            );
        }
    } else if let Some(weight) = s.cpu_weight {
        w.props
            .insert(CPU_WEIGHT.into(), PropValue::U64(u64::from(weight)));
    }
    if let Some(m) = s.cpu_max {
        w.props.insert(
            CPU_QUOTA.into(),
            PropValue::U64(quota_per_sec(m.quota_us, m.period_us)),
        );
        if cx.version >= since(CPU_QUOTA_PERIOD) {
            w.props
                .insert(CPU_QUOTA_PERIOD.into(), PropValue::U64(m.period_us));
        } else if m.period_us != 100_000 {
            w.fallback(
                path,
                "cpu.max",
                &format!("{} {}", m.quota_us, m.period_us),
                &format!("{} 100000", m.quota_us * 100_000 / m.period_us.max(1)),
                format!(
                    "systemd {} has no {CPU_QUOTA_PERIOD} (systemd {} and later): the same share of each 100 ms period",
                    cx.version,
                    since(CPU_QUOTA_PERIOD)
                ),
            );
        }
    }
    if let Some(b) = s.rt_budget {
        if !s.rt_budget_optional || cx.rt_groups {
            w.fallback(
                path,
                "cpu.rt_runtime_us",
                &b.runtime_us.to_string(),
                "n/a",
                format!(
                    "systemd has no property for RT group budgets: {}'s cgroup gets none from atoll",
                    cx.unit
                ),
            );
        }
    }
    let m = &s.memory;
    for (knob, property, v) in [
        ("memory.min", MEMORY_MIN, m.min),
        ("memory.low", MEMORY_LOW, m.low),
        ("memory.high", MEMORY_HIGH, m.high),
        ("memory.max", MEMORY_MAX, m.max),
    ] {
        if let Some(v) = v {
            w.put(path, cx, knob, property, PropValue::U64(v), &v.to_string());
        }
    }
    if let Some(iw) = s.io_weight {
        w.props
            .insert(IO_WEIGHT.into(), PropValue::U64(u64::from(iw)));
    }
    for l in &s.io_max {
        let dev = device_path(l.device.major, l.device.minor);
        for (property, v) in [
            (IO_READ_BPS, l.rbps),
            (IO_WRITE_BPS, l.wbps),
            (IO_READ_IOPS, l.riops),
            (IO_WRITE_IOPS, l.wiops),
        ] {
            if let Some(v) = v {
                w.props.insert(io_key(property, &dev), PropValue::U64(v));
            }
        }
    }
    if s.frozen {
        if cx.version >= FREEZE_SINCE {
            w.frozen = true;
        } else {
            w.fallback(
                path,
                "cgroup.freeze",
                "1",
                "0",
                format!(
                    "systemd {} cannot freeze units (FreezeUnit came in {FREEZE_SINCE}): {}'s tasks keep running",
                    cx.version, cx.unit
                ),
            );
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use atoll_core::plan::{CpuMax, RtBudget};
    use atoll_core::spec::{DeviceId, IoLimit, MemoryEntitlement};

    use super::*;

    fn cx(version: u32) -> Context<'static> {
        Context {
            unit: "nginx.service",
            version,
            rt_groups: false,
        }
    }

    fn g() -> GroupPath {
        GroupPath::from_relative("web/nginx")
    }

    fn full() -> GroupSettings {
        GroupSettings {
            cpus: Some(CpuSet::parse("0-3").unwrap()),
            mems: Some(CpuSet::parse("0").unwrap()),
            cpu_weight: Some(200),
            cpu_max: Some(CpuMax {
                quota_us: 150_000,
                period_us: 100_000,
            }),
            memory: MemoryEntitlement {
                min: Some(1 << 20),
                low: Some(2 << 20),
                high: Some(3 << 20),
                max: Some(u64::MAX),
            },
            io_weight: Some(300),
            io_max: vec![IoLimit {
                device: DeviceId { major: 8, minor: 0 },
                rbps: Some(1_000_000),
                wbps: None,
                riops: None,
                wiops: Some(50),
            }],
            frozen: true,
            ..Default::default()
        }
    }

    fn u(n: u64) -> PropValue {
        PropValue::U64(n)
    }

    #[test]
    fn every_setting_has_its_property() {
        let w = translate(&g(), &full(), &cx(252));
        assert!(w.fallbacks.is_empty(), "{:?}", w.fallbacks);
        assert!(w.frozen);
        let want: BTreeMap<String, PropValue> = [
            (ALLOWED_CPUS.to_string(), PropValue::Bytes(vec![0x0f])),
            (
                ALLOWED_MEMORY_NODES.to_string(),
                PropValue::Bytes(vec![0x01]),
            ),
            (CPU_WEIGHT.to_string(), u(200)),
            (CPU_QUOTA.to_string(), u(1_500_000)),
            (CPU_QUOTA_PERIOD.to_string(), u(100_000)),
            (MEMORY_MIN.to_string(), u(1 << 20)),
            (MEMORY_LOW.to_string(), u(2 << 20)),
            (MEMORY_HIGH.to_string(), u(3 << 20)),
            (MEMORY_MAX.to_string(), u(u64::MAX)),
            (IO_WEIGHT.to_string(), u(300)),
            (io_key(IO_READ_BPS, "/dev/block/8:0"), u(1_000_000)),
            (io_key(IO_WRITE_IOPS, "/dev/block/8:0"), u(50)),
        ]
        .into_iter()
        .collect();
        assert_eq!(w.props, want);
    }

    #[test]
    fn nothing_asked_is_nothing_set() {
        let w = translate(&g(), &GroupSettings::default(), &cx(252));
        assert_eq!(w, Wanted::default());
    }

    #[test]
    fn idle_is_weight_zero_from_252_and_weight_one_with_a_fallback_before() {
        let s = GroupSettings {
            cpu_idle: true,
            cpu_weight: Some(500),
            ..Default::default()
        };
        let w = translate(&g(), &s, &cx(252));
        assert_eq!(w.props[CPU_WEIGHT], u(0));
        assert!(w.fallbacks.is_empty());
        let w = translate(&g(), &s, &cx(251));
        assert_eq!(w.props[CPU_WEIGHT], u(1));
        assert_eq!(w.fallbacks.len(), 1);
        assert_eq!(w.fallbacks[0].knob, "cpu.idle");
        assert_eq!(w.fallbacks[0].got, "CPUWeight=1");
    }

    #[test]
    fn partitions_and_rt_budgets_are_fallbacks() {
        let s = GroupSettings {
            partition: Some(Partition::Root),
            rt_budget: Some(RtBudget {
                runtime_us: 50_000,
                period_us: 1_000_000,
            }),
            rt_budget_optional: false,
            ..Default::default()
        };
        let w = translate(&g(), &s, &cx(252));
        let knobs: Vec<&str> = w.fallbacks.iter().map(|f| f.knob.as_str()).collect();
        assert_eq!(knobs, ["cpuset.cpus.partition", "cpu.rt_runtime_us"]);
        assert!(w.fallbacks[0].reason.contains("nginx.service"));
        assert!(w.props.is_empty());
        // An optional budget is no promise: a fallback only where the
        // kernel has RT group scheduling, as for atoll's own groups.
        let opt = GroupSettings {
            rt_budget_optional: true,
            ..s.clone()
        };
        assert_eq!(translate(&g(), &opt, &cx(252)).fallbacks.len(), 1);
        let mut rt = cx(252);
        rt.rt_groups = true;
        assert_eq!(translate(&g(), &opt, &rt).fallbacks.len(), 2);
    }

    #[test]
    fn old_systemd_reports_what_it_lacks() {
        let w = translate(&g(), &full(), &cx(239));
        let knobs: Vec<&str> = w.fallbacks.iter().map(|f| f.knob.as_str()).collect();
        assert_eq!(
            knobs,
            ["cpuset.cpus", "cpuset.mems", "memory.min", "cgroup.freeze"]
        );
        assert!(!w.frozen);
        assert!(!w.props.contains_key(ALLOWED_CPUS) && !w.props.contains_key(CPU_QUOTA_PERIOD));
        assert!(w.props.contains_key(MEMORY_LOW));
        // No period property: a period other than 100 ms is a fallback.
        let s = GroupSettings {
            cpu_max: Some(CpuMax {
                quota_us: 25_000,
                period_us: 50_000,
            }),
            ..Default::default()
        };
        let w = translate(&g(), &s, &cx(241));
        assert_eq!(w.props[CPU_QUOTA], u(500_000));
        assert_eq!(w.fallbacks[0].got, "50000 100000");
    }

    #[test]
    fn quotas_per_second() {
        assert_eq!(quota_per_sec(400_000, 100_000), 4_000_000);
        assert_eq!(quota_per_sec(1_000, 100_000), 10_000);
        assert_eq!(quota_per_sec(1, 1_000_000), 1);
        assert_eq!(quota_per_sec(0, 100_000), 1, "systemd refuses 0");
        assert_eq!(quota_per_sec(u64::MAX, 1), u64::MAX - 1);
    }

    #[test]
    fn an_empty_cpu_set_is_not_every_cpu() {
        let s = GroupSettings {
            cpus: Some(CpuSet::new()),
            ..Default::default()
        };
        let w = translate(&g(), &s, &cx(252));
        assert!(w.props.is_empty());
        assert_eq!(w.fallbacks[0].knob, "cpuset.cpus");
    }
}
