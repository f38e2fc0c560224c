//! The fake systemd's property rules and what it writes to a unit's
//! cgroup files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use atoll_cgroup::testutils::FakeCgroupFs;
use atoll_cgroup::CgroupFs;

use crate::manager::ManagerError;
use crate::value::{
    from_mask, since, PropValue, ALL, ALLOWED_CPUS, ALLOWED_MEMORY_NODES, CPU_QUOTA,
    CPU_QUOTA_PERIOD, CPU_WEIGHT, IDLE_WEIGHT_SINCE, IO_LIMITS, IO_WEIGHT, MEMORY_HIGH, MEMORY_LOW,
    MEMORY_MAX, MEMORY_MIN,
};

/// The controllers slices enable for their children.
pub(super) const CONTROLLERS: [&str; 4] = ["cpuset", "cpu", "io", "memory"];

/// A resource property (not a scope's `PIDs`, `Slice`, ...).
pub(super) fn is_resource(name: &str) -> bool {
    ALL.contains(&name)
}

/// The resource properties a unit of systemd `version` has, unset.
pub(super) fn defaults(version: u32) -> BTreeMap<String, PropValue> {
    ALL.iter()
        .filter(|p| since(p) <= version)
        .map(|p| {
            let v = match *p {
                ALLOWED_CPUS | ALLOWED_MEMORY_NODES => PropValue::Bytes(Vec::new()),
                MEMORY_MIN | MEMORY_LOW => PropValue::U64(0),
                p if IO_LIMITS.contains(&p) => PropValue::DeviceLimits(Vec::new()),
                _ => PropValue::U64(u64::MAX),
            };
            (p.to_string(), v)
        })
        .collect()
}

fn invalid(msg: String) -> ManagerError {
    ManagerError::method("org.freedesktop.DBus.Error.InvalidArgs", msg)
}

/// systemd's checks of one property (of a scope being started when
/// `scope`).
pub(super) fn check(
    version: u32,
    name: &str,
    v: &PropValue,
    scope: bool,
) -> Result<(), ManagerError> {
    let scope_only = ["PIDs", "Slice", "Delegate", "CollectMode", "Description"];
    let known =
        (is_resource(name) && since(name) <= version) || (scope && scope_only.contains(&name));
    if !known {
        return Err(ManagerError::method(
            "org.freedesktop.DBus.Error.PropertyReadOnly",
            format!("Cannot set property {name}, or unknown property."),
        ));
    }
    let type_ok = match name {
        ALLOWED_CPUS | ALLOWED_MEMORY_NODES => matches!(v, PropValue::Bytes(_)),
        n if IO_LIMITS.contains(&n) => matches!(v, PropValue::DeviceLimits(_)),
        "PIDs" => matches!(v, PropValue::Pids(_)),
        "Slice" | "CollectMode" | "Description" => matches!(v, PropValue::Str(_)),
        "Delegate" => matches!(v, PropValue::Bool(_)),
        _ => matches!(v, PropValue::U64(_)),
    };
    if !type_ok {
        return Err(invalid(format!("Invalid type for {name}")));
    }
    match (name, v) {
        (CPU_WEIGHT | IO_WEIGHT, PropValue::U64(n)) => {
            let idle = name == CPU_WEIGHT && *n == 0 && version >= IDLE_WEIGHT_SINCE;
            if !(idle || *n == u64::MAX || (1..=10_000).contains(n)) {
                return Err(invalid(format!(
                    "Value specified in {name} is out of range"
                )));
            }
        }
        (CPU_QUOTA, PropValue::U64(0)) => {
            return Err(invalid(format!("{name}= value out of range")));
        }
        (_, PropValue::DeviceLimits(l)) => {
            if let Some((d, _)) = l
                .iter()
                .find(|(d, _)| !d.starts_with('/') || d.contains("/../"))
            {
                return Err(invalid(format!(
                    "Path '{d}' specified in {name}= is not normalized."
                )));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Sets a property as systemd does: per-device limits replace the entry of
/// their device (an empty list lifts every limit of that property).
pub(super) fn merge(props: &mut BTreeMap<String, PropValue>, name: &str, v: PropValue) {
    match (props.get_mut(name), v) {
        (Some(PropValue::DeviceLimits(have)), PropValue::DeviceLimits(new)) => {
            if new.is_empty() {
                have.clear();
            }
            for (dev, n) in new {
                match have.iter_mut().find(|(d, _)| *d == dev) {
                    Some(slot) => slot.1 = n,
                    None => have.push((dev, n)),
                }
            }
        }
        (_, v) => {
            props.insert(name.to_string(), v);
        }
    }
}

/// The cgroup of a slice: `a-b.slice` is `/a.slice/a-b.slice`.
pub(super) fn slice_cgroup(slice: &str) -> String {
    let stem = slice.trim_end_matches(".slice");
    let mut path = String::new();
    let mut prefix = String::new();
    for part in stem.split('-') {
        if !prefix.is_empty() {
            prefix.push('-');
        }
        prefix.push_str(part);
        path.push_str(&format!("/{prefix}.slice"));
    }
    path
}

/// Makes `cgroup` below `top` and its parents, each parent enabling the
/// controllers it offers for its children when `enable` (as slices do; not
/// inside a delegated unit, which is its owner's).
pub(super) fn ensure_cgroup(fs: &FakeCgroupFs, top: &Path, cgroup: &str, enable: bool) -> PathBuf {
    let mut dir = top.to_path_buf();
    for part in cgroup
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
    {
        let next = dir.join(part);
        if !fs.exists(&next) {
            for c in CONTROLLERS.iter().filter(|_| enable) {
                let _ = fs.write(&dir.join("cgroup.subtree_control"), &format!("+{c}"));
            }
            let _ = fs.mkdir(&next);
        }
        dir = next;
    }
    dir
}

/// Removes a cgroup and everything below it (empty groups only, as the
/// kernel allows).
pub(super) fn remove_tree(fs: &FakeCgroupFs, dir: &Path) {
    for c in fs.child_dirs(dir).unwrap_or_default() {
        remove_tree(fs, &dir.join(c));
    }
    let _ = fs.rmdir(dir);
}

fn num(props: &BTreeMap<String, PropValue>, name: &str) -> u64 {
    match props.get(name) {
        Some(PropValue::U64(n)) => *n,
        _ => u64::MAX,
    }
}

fn write(fs: &FakeCgroupFs, dir: &Path, file: &str, v: &str) {
    let path = dir.join(file);
    if fs.exists(&path) {
        let _ = fs.write(&path, v);
    }
}

fn limit(n: u64) -> String {
    if n == u64::MAX {
        "max".into()
    } else {
        n.to_string()
    }
}

/// Writes a unit's cgroup files from its properties, as systemd realises
/// a unit's cgroup context.
pub(super) fn write_all(fs: &FakeCgroupFs, dir: &Path, props: &BTreeMap<String, PropValue>) {
    for (name, file) in [
        (ALLOWED_CPUS, "cpuset.cpus"),
        (ALLOWED_MEMORY_NODES, "cpuset.mems"),
    ] {
        if let Some(PropValue::Bytes(b)) = props.get(name) {
            write(fs, dir, file, &from_mask(b).to_string());
        }
    }
    match num(props, CPU_WEIGHT) {
        0 => write(fs, dir, "cpu.idle", "1"),
        w => {
            write(fs, dir, "cpu.idle", "0");
            write(
                fs,
                dir,
                "cpu.weight",
                &(if w == u64::MAX { 100 } else { w }).to_string(),
            );
        }
    }
    let period = match num(props, CPU_QUOTA_PERIOD) {
        u64::MAX => 100_000,
        p => p.clamp(1_000, 1_000_000),
    };
    let cpu_max = match num(props, CPU_QUOTA) {
        u64::MAX => format!("max {period}"),
        q => format!(
            "{} {period}",
            (u128::from(q) * u128::from(period) / 1_000_000).max(1_000)
        ),
    };
    write(fs, dir, "cpu.max", &cpu_max);
    for (name, file) in [
        (MEMORY_MIN, "memory.min"),
        (MEMORY_LOW, "memory.low"),
        (MEMORY_HIGH, "memory.high"),
        (MEMORY_MAX, "memory.max"),
    ] {
        if props.contains_key(name) {
            write(fs, dir, file, &limit(num(props, name)));
        }
    }
    let iw = num(props, IO_WEIGHT);
    write(
        fs,
        dir,
        "io.weight",
        &format!("default {}", if iw == u64::MAX { 100 } else { iw }),
    );
    let mut devices: BTreeMap<String, [u64; 4]> = BTreeMap::new();
    for (i, name) in IO_LIMITS.iter().enumerate() {
        if let Some(PropValue::DeviceLimits(l)) = props.get(*name) {
            for (dev, n) in l {
                let id = dev.trim_start_matches("/dev/block/").to_string();
                devices.entry(id).or_insert([u64::MAX; 4])[i] = *n;
            }
        }
    }
    // Devices limited before and no more are written as unlimited.
    let shown = fs.get(&dir.join("io.max"));
    for line in shown.lines() {
        if let Some(dev) = line.split_whitespace().next() {
            devices.entry(dev.to_string()).or_insert([u64::MAX; 4]);
        }
    }
    for (dev, [rb, wb, ri, wi]) in devices {
        let v = format!(
            "{dev} rbps={} wbps={} riops={} wiops={}",
            limit(rb),
            limit(wb),
            limit(ri),
            limit(wi)
        );
        write(fs, dir, "io.max", &v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::IO_READ_BPS;

    #[test]
    fn slices_nest_by_dash() {
        assert_eq!(slice_cgroup("atoll.slice"), "/atoll.slice");
        assert_eq!(
            slice_cgroup("a-b-c.slice"),
            "/a.slice/a-b.slice/a-b-c.slice"
        );
    }

    #[test]
    fn limits_merge_per_device_and_an_empty_list_lifts_them() {
        let mut p = defaults(252);
        let l = |v: Vec<(&str, u64)>| {
            PropValue::DeviceLimits(v.into_iter().map(|(d, n)| (d.to_string(), n)).collect())
        };
        merge(&mut p, IO_READ_BPS, l(vec![("/dev/block/8:0", 5)]));
        merge(
            &mut p,
            IO_READ_BPS,
            l(vec![("/dev/block/8:16", 6), ("/dev/block/8:0", 7)]),
        );
        assert_eq!(
            p[IO_READ_BPS],
            l(vec![("/dev/block/8:0", 7), ("/dev/block/8:16", 6)])
        );
        merge(&mut p, IO_READ_BPS, l(vec![]));
        assert_eq!(p[IO_READ_BPS], l(vec![]));
    }

    #[test]
    fn versions_refuse_what_they_lack() {
        assert!(check(243, ALLOWED_CPUS, &PropValue::Bytes(vec![1]), false).is_err());
        assert!(check(244, ALLOWED_CPUS, &PropValue::Bytes(vec![1]), false).is_ok());
        assert!(check(251, CPU_WEIGHT, &PropValue::U64(0), false).is_err());
        assert!(check(252, CPU_WEIGHT, &PropValue::U64(0), false).is_ok());
        assert!(check(252, IO_WEIGHT, &PropValue::U64(0), false).is_err());
        assert!(check(252, "PIDs", &PropValue::Pids(vec![1]), false).is_err());
        assert!(check(252, "PIDs", &PropValue::Pids(vec![1]), true).is_ok());
        assert!(check(252, CPU_WEIGHT, &PropValue::Str("x".into()), false).is_err());
    }
}
