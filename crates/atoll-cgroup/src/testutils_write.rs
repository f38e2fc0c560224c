//! How the fake kernel takes a write to each kind of interface file.

use std::io;
use std::path::Path;

use atoll_core::CpuSet;

use super::{
    cpuset_of, errno, get, parse_num, put, remove_pid, remove_v2_controller_files, subdirs,
    v2_controller_files, FakeCgroupFs, FakeMount, ORDER, V1_UNLIMITED,
};

const PAGE: i64 = 4096;

pub(super) fn kernel_write(fake: &FakeCgroupFs, path: &Path, v: &str) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path.parent().ok_or_else(|| errno(libc::EINVAL))?;
    let Some(m) = fake.mount_of(path) else {
        put(path, v);
        return Ok(());
    };
    let is_root = dir == m.path;
    match name.as_str() {
        "cgroup.procs" | "tasks" => procs(fake, &m, dir, v),
        "cgroup.subtree_control" if m.v2 => subtree_control(fake, dir, v),
        "cpuset.cpus" | "cpuset.mems" | "cpuset.cpus.exclusive" => {
            let set = CpuSet::parse(v).map_err(|_| errno(libc::EINVAL))?;
            if !m.v2 && !is_root {
                v1_cpuset_check(dir, &name, &set)?;
            }
            put(path, &set.to_string());
            Ok(())
        }
        "cpuset.cpu_exclusive" if !m.v2 => v1_exclusive(dir, path, v),
        "cgroup.freeze" if m.v2 => {
            if v != "0" && v != "1" {
                return Err(errno(libc::EINVAL));
            }
            put(path, v);
            v2_refreeze(dir, ancestor_frozen(dir, &m.path, "cgroup.freeze"));
            Ok(())
        }
        "freezer.state" if !m.v2 => {
            let own = match v {
                "FROZEN" => "1",
                "THAWED" => "0",
                _ => return Err(errno(libc::EINVAL)),
            };
            put(&dir.join("freezer.self_freezing"), own);
            v1_refreeze(dir, ancestor_frozen(dir, &m.path, "freezer.self_freezing"));
            Ok(())
        }
        "cpuset.cpus.partition" => match v {
            "root" | "member" | "isolated" => {
                put(path, v);
                Ok(())
            }
            _ => Err(errno(libc::EINVAL)),
        },
        "cpu.weight" => {
            let n = parse_num(v)?;
            if !(1..=10_000).contains(&n) {
                return Err(errno(libc::ERANGE));
            }
            put(path, &n.to_string());
            Ok(())
        }
        "cpu.shares" => {
            let n = parse_num(v)?.clamp(2, 262_144);
            put(path, &n.to_string());
            Ok(())
        }
        "cpu.idle" => match v {
            "0" | "1" => {
                put(path, v);
                Ok(())
            }
            _ => Err(errno(libc::EINVAL)),
        },
        "cpu.max" => cpu_max(path, v),
        "cpu.cfs_quota_us" => {
            let n = parse_num(v)?;
            if n != -1 && n < 1000 {
                return Err(errno(libc::EINVAL));
            }
            put(path, &n.to_string());
            Ok(())
        }
        "cpu.cfs_period_us" => {
            let n = parse_num(v)?;
            if !(1000..=1_000_000).contains(&n) {
                return Err(errno(libc::EINVAL));
            }
            put(path, &n.to_string());
            Ok(())
        }
        "cpu.rt_runtime_us" | "cpu.rt_period_us" if !m.v2 => v1_rt(dir, path, &name, v),
        "memory.min" | "memory.low" | "memory.high" | "memory.max" => {
            if v == "max" {
                put(path, "max");
            } else {
                let n = parse_num(v)?;
                put(path, &(n - n % PAGE).to_string());
            }
            Ok(())
        }
        "memory.limit_in_bytes" | "memory.soft_limit_in_bytes" => {
            let n = parse_num(v)?;
            // Negative (-1): unlimited.
            let shown = match u64::try_from(n) {
                Ok(n) => n - n % PAGE.unsigned_abs(),
                Err(_) => V1_UNLIMITED,
            };
            put(path, &shown.to_string());
            Ok(())
        }
        "io.weight" => {
            let n = v.strip_prefix("default ").unwrap_or(v);
            let n = parse_num(n)?;
            if !(1..=10_000).contains(&n) {
                return Err(errno(libc::ERANGE));
            }
            put(path, &format!("default {n}"));
            Ok(())
        }
        "io.max" => io_max(path, v),
        n if n.starts_with("blkio.throttle.") && n.ends_with("_device") => blkio_device(path, v),
        _ => {
            put(path, v);
            Ok(())
        }
    }
}

fn procs(fake: &FakeCgroupFs, m: &FakeMount, dir: &Path, v: &str) -> io::Result<()> {
    let pid: u32 = v.parse().map_err(|_| errno(libc::EINVAL))?;
    if pid == 0 || fake.lock().dead.contains(&pid) {
        return Err(errno(libc::ESRCH));
    }
    if m.v2 && dir != m.path && !get(&dir.join("cgroup.subtree_control")).trim().is_empty() {
        // No internal processes.
        return Err(errno(libc::EBUSY));
    }
    if !m.v2 && m.controllers.iter().any(|c| c == "cpuset") {
        let empty = |f: &str| get(&dir.join(f)).trim().is_empty();
        if empty("cpuset.cpus") || empty("cpuset.mems") {
            return Err(errno(libc::ENOSPC));
        }
    }
    remove_pid(&m.path, pid);
    let f = dir.join("cgroup.procs");
    put(&f, &format!("{}{pid}\n", get(&f)));
    if m.v2 {
        let t = dir.join("cgroup.threads");
        put(&t, &format!("{}{pid}\n", get(&t)));
    }
    Ok(())
}

fn subtree_control(fake: &FakeCgroupFs, dir: &Path, v: &str) -> io::Result<()> {
    let available = get(&dir.join("cgroup.controllers"));
    let mut enabled: Vec<String> = get(&dir.join("cgroup.subtree_control"))
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let (mut add, mut del) = (Vec::new(), Vec::new());
    for tok in v.split_whitespace() {
        let (sign, c) = tok.split_at(1);
        if !available.split_whitespace().any(|a| a == c) {
            return Err(errno(libc::ENOENT));
        }
        match sign {
            "+" => add.push(c.to_string()),
            "-" => del.push(c.to_string()),
            _ => return Err(errno(libc::EINVAL)),
        }
    }
    let is_root = fake.lock().mounts.iter().any(|m| m.path == dir);
    if !add.is_empty() && !is_root && !get(&dir.join("cgroup.procs")).trim().is_empty() {
        return Err(errno(libc::EBUSY));
    }
    let children = subdirs(dir);
    for c in &del {
        let busy = children.iter().any(|ch| {
            get(&ch.join("cgroup.subtree_control"))
                .split_whitespace()
                .any(|x| x == c)
        });
        if busy {
            return Err(errno(libc::EBUSY));
        }
    }
    let k = fake.lock().kernel.clone();
    for c in &add {
        if !enabled.contains(c) {
            enabled.push(c.clone());
            for ch in &children {
                v2_controller_files(c, ch, &k, dir);
            }
        }
    }
    for c in &del {
        if enabled.contains(c) {
            enabled.retain(|x| x != c);
            for ch in &children {
                remove_v2_controller_files(c, ch);
            }
        }
    }
    let shown: Vec<&str> = ORDER
        .iter()
        .copied()
        .filter(|c| enabled.iter().any(|e| e == c))
        .collect();
    let before = get(&dir.join("cgroup.subtree_control"));
    put(&dir.join("cgroup.subtree_control"), &shown.join(" "));
    let had = before.split_whitespace().any(|c| c == "cpuset");
    if k.resets_affinity && had != shown.contains(&"cpuset") {
        fake.reset_affinity_below(dir);
    }
    for ch in &children {
        put(&ch.join("cgroup.controllers"), &shown.join(" "));
    }
    Ok(())
}

/// Whether a group strictly above `dir` (below the mount root) has `1` in
/// `flag`.
fn ancestor_frozen(dir: &Path, mount: &Path, flag: &str) -> bool {
    dir.ancestors()
        .skip(1)
        .take_while(|a| *a != mount && a.starts_with(mount))
        .any(|a| get(&a.join(flag)).trim() == "1")
}

/// Recomputes the `frozen` line of `cgroup.events` in `dir`'s subtree.
fn v2_refreeze(dir: &Path, above: bool) {
    let frozen = above || get(&dir.join("cgroup.freeze")).trim() == "1";
    let events = dir.join("cgroup.events");
    let text: String = get(&events)
        .lines()
        .map(|l| {
            if l.starts_with("frozen ") {
                format!("frozen {}\n", u8::from(frozen))
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    put(&events, &text);
    for c in subdirs(dir) {
        v2_refreeze(&c, frozen);
    }
}

/// Recomputes `freezer.parent_freezing` and `freezer.state` in `dir`'s
/// subtree.
fn v1_refreeze(dir: &Path, above: bool) {
    let own = get(&dir.join("freezer.self_freezing")).trim() == "1";
    put(
        &dir.join("freezer.parent_freezing"),
        if above { "1" } else { "0" },
    );
    let state = if own || above { "FROZEN" } else { "THAWED" };
    put(&dir.join("freezer.state"), state);
    for c in subdirs(dir) {
        v1_refreeze(&c, own || above);
    }
}

fn is_excl(dir: &Path) -> bool {
    get(&dir.join("cpuset.cpu_exclusive")).trim() == "1"
}

fn siblings(dir: &Path) -> Vec<std::path::PathBuf> {
    let parent = dir.parent().unwrap_or(dir);
    subdirs(parent).into_iter().filter(|s| s != dir).collect()
}

/// v1 legacy rules: a subset of the parent, a superset of the children, and
/// no overlap where either sibling is exclusive.
fn v1_cpuset_check(dir: &Path, name: &str, set: &CpuSet) -> io::Result<()> {
    let parent = dir.parent().unwrap_or(dir);
    if !set.is_subset(&cpuset_of(&parent.join(name))) {
        return Err(errno(libc::EACCES));
    }
    if subdirs(dir)
        .iter()
        .any(|c| !cpuset_of(&c.join(name)).is_subset(set))
    {
        return Err(errno(libc::EBUSY));
    }
    if name == "cpuset.cpus" {
        let me_excl = is_excl(dir);
        for s in siblings(dir) {
            if (me_excl || is_excl(&s)) && !cpuset_of(&s.join(name)).is_disjoint(set) {
                return Err(errno(libc::EINVAL));
            }
        }
    }
    Ok(())
}

fn v1_exclusive(dir: &Path, path: &Path, v: &str) -> io::Result<()> {
    match v {
        "1" => {
            if !is_excl(dir.parent().unwrap_or(dir)) {
                return Err(errno(libc::EACCES));
            }
            let mine = cpuset_of(&dir.join("cpuset.cpus"));
            if siblings(dir)
                .iter()
                .any(|s| !cpuset_of(&s.join("cpuset.cpus")).is_disjoint(&mine))
            {
                return Err(errno(libc::EINVAL));
            }
        }
        "0" => {
            if subdirs(dir).iter().any(|c| is_excl(c)) {
                return Err(errno(libc::EBUSY));
            }
        }
        _ => return Err(errno(libc::EINVAL)),
    }
    put(path, v);
    Ok(())
}

fn rt_ratio(dir: &Path) -> f64 {
    let rt = parse_num(&get(&dir.join("cpu.rt_runtime_us"))).unwrap_or(0) as f64;
    let p = parse_num(&get(&dir.join("cpu.rt_period_us"))).unwrap_or(1_000_000) as f64;
    rt / p
}

/// v1 RT group rule: children's runtime/period ratios sum to at most the
/// parent's; runtime never exceeds the period.
fn v1_rt(dir: &Path, path: &Path, name: &str, v: &str) -> io::Result<()> {
    let n = parse_num(v)?;
    let old = get(path);
    let (rt, period) = if name == "cpu.rt_runtime_us" {
        (n, parse_num(&get(&dir.join("cpu.rt_period_us")))?)
    } else {
        (parse_num(&get(&dir.join("cpu.rt_runtime_us")))?, n)
    };
    if period <= 0 || rt > period || rt < -1 {
        return Err(errno(libc::EINVAL));
    }
    put(path, &n.to_string());
    let parent = dir.parent().unwrap_or(dir);
    let sib_sum: f64 = subdirs(parent).iter().map(|s| rt_ratio(s)).sum();
    let kids: f64 = subdirs(dir).iter().map(|c| rt_ratio(c)).sum();
    if sib_sum > rt_ratio(parent) + 1e-9 || kids > rt_ratio(dir) + 1e-9 {
        put(path, &old);
        return Err(errno(libc::EINVAL));
    }
    Ok(())
}

fn cpu_max(path: &Path, v: &str) -> io::Result<()> {
    let cur = get(path);
    let cur_period = cur
        .split_whitespace()
        .nth(1)
        .unwrap_or("100000")
        .to_string();
    let mut it = v.split_whitespace();
    let q = it.next().ok_or_else(|| errno(libc::EINVAL))?;
    let p = it.next().map(str::to_string).unwrap_or(cur_period);
    if it.next().is_some() || (q != "max" && parse_num(q)? < 1000) || parse_num(&p)? < 1000 {
        return Err(errno(libc::EINVAL));
    }
    put(path, &format!("{q} {p}"));
    Ok(())
}

fn io_max(path: &Path, v: &str) -> io::Result<()> {
    let mut it = v.split_whitespace();
    let dev = it.next().ok_or_else(|| errno(libc::EINVAL))?.to_string();
    let mut keys = [
        ("rbps", "max".to_string()),
        ("wbps", "max".into()),
        ("riops", "max".into()),
        ("wiops", "max".into()),
    ];
    let text = get(path);
    if let Some(line) = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&dev))
    {
        for tok in line.split_whitespace().skip(1) {
            if let Some((k, val)) = tok.split_once('=') {
                if let Some(slot) = keys.iter_mut().find(|(n, _)| *n == k) {
                    slot.1 = val.to_string();
                }
            }
        }
    }
    for tok in it {
        let (k, val) = tok.split_once('=').ok_or_else(|| errno(libc::EINVAL))?;
        if val != "max" {
            parse_num(val)?;
        }
        let slot = keys
            .iter_mut()
            .find(|(n, _)| *n == k)
            .ok_or_else(|| errno(libc::EINVAL))?;
        slot.1 = val.to_string();
    }
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && l.split_whitespace().next() != Some(&dev))
        .map(str::to_string)
        .collect();
    if keys.iter().any(|(_, v)| v != "max") {
        let kv: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
        lines.push(format!("{dev} {}", kv.join(" ")));
    }
    lines.sort();
    put(
        path,
        &lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    );
    Ok(())
}

fn blkio_device(path: &Path, v: &str) -> io::Result<()> {
    let mut it = v.split_whitespace();
    let (Some(dev), Some(n), None) = (it.next(), it.next(), it.next()) else {
        return Err(errno(libc::EINVAL));
    };
    let n = parse_num(n)?;
    let text = get(path);
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && l.split_whitespace().next() != Some(dev))
        .map(str::to_string)
        .collect();
    if n > 0 {
        lines.push(format!("{dev} {n}"));
    }
    lines.sort();
    put(
        path,
        &lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    );
    Ok(())
}
