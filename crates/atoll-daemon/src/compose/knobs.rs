//! A change of settings in words: the knobs that differ, as the kernel
//! names them.

use atoll_core::plan::{GroupSettings, Partition};

/// The knobs of `new` that differ from `old`, as `file=value` strings in
/// cgroup v2 names (the backend translates for v1).
pub fn knob_diff(old: Option<&GroupSettings>, new: &GroupSettings) -> Vec<String> {
    let d = GroupSettings::default();
    let old = old.unwrap_or(&d);
    let mut out = Vec::new();
    let mut push = |changed: bool, k: &str, v: String| {
        if changed {
            out.push(format!("{k}={v}"));
        }
    };
    let opt = |v: Option<String>| v.unwrap_or_else(|| "default".into());
    push(
        old.cpus != new.cpus,
        "cpuset.cpus",
        opt(new.cpus.as_ref().map(|c| c.to_string())),
    );
    push(
        old.mems != new.mems,
        "cpuset.mems",
        opt(new.mems.as_ref().map(|c| c.to_string())),
    );
    push(
        old.partition != new.partition,
        "cpuset.cpus.partition",
        match new.partition {
            Some(Partition::Root) => "root".into(),
            _ => "member".into(),
        },
    );
    push(
        old.cpu_weight != new.cpu_weight,
        "cpu.weight",
        opt(new.cpu_weight.map(|w| w.to_string())),
    );
    push(
        old.cpu_max != new.cpu_max,
        "cpu.max",
        match new.cpu_max {
            Some(m) => format!("{} {}", m.quota_us, m.period_us),
            None => "max".into(),
        },
    );
    push(
        old.cpu_idle != new.cpu_idle,
        "cpu.idle",
        u8::from(new.cpu_idle).to_string(),
    );
    push(
        old.rt_budget != new.rt_budget,
        "cpu.rt_runtime_us",
        opt(new
            .rt_budget
            .map(|b| format!("{}/{}", b.runtime_us, b.period_us))),
    );
    let bytes = |v: Option<u64>| v.map(|b| b.to_string()).unwrap_or_else(|| "default".into());
    let (om, nm) = (&old.memory, &new.memory);
    push(om.min != nm.min, "memory.min", bytes(nm.min));
    push(om.low != nm.low, "memory.low", bytes(nm.low));
    push(om.high != nm.high, "memory.high", bytes(nm.high));
    push(om.max != nm.max, "memory.max", bytes(nm.max));
    push(
        old.io_weight != new.io_weight,
        "io.weight",
        opt(new.io_weight.map(|w| w.to_string())),
    );
    push(
        old.io_max != new.io_max,
        "io.max",
        format!("{} devices", new.io_max.len()),
    );
    push(
        old.frozen != new.frozen,
        "cgroup.freeze",
        if new.frozen { "frozen" } else { "thawed" }.into(),
    );
    out
}

#[cfg(test)]
mod tests {
    use atoll_core::plan::CpuMax;
    use atoll_core::CpuSet;

    use super::*;

    #[test]
    fn diff_names_only_changed_knobs() {
        let a = GroupSettings {
            cpus: Some(CpuSet::parse("1-3").unwrap()),
            cpu_weight: Some(150),
            ..Default::default()
        };
        let mut b = a.clone();
        b.cpu_weight = Some(200);
        b.cpu_max = Some(CpuMax {
            quota_us: 50_000,
            period_us: 100_000,
        });
        assert_eq!(
            knob_diff(Some(&a), &b),
            ["cpu.weight=200", "cpu.max=50000 100000"]
        );
        assert_eq!(knob_diff(Some(&a), &a), Vec::<String>::new());
        assert_eq!(knob_diff(None, &a), ["cpuset.cpus=1-3", "cpu.weight=150"]);
    }
}
