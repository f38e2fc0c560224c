//! A human-readable account of a spec, for `atoll check-config`.

use std::fmt::Write as _;

use atoll_core::spec::{AdoptRule, PlatformSpec, RtClass, SchedPolicy, UnitSpec};

use crate::size::format_size;

/// Describes `spec`: the host partition, every island with its CPUs, memory
/// nodes and policy, and every unit with its island, entitlement and adopt
/// rules. One item per line; the default island is marked.
pub fn summary(spec: &PlatformSpec) -> String {
    let mut out = String::new();
    let width = spec
        .islands
        .iter()
        .map(|i| i.name.as_str().len())
        .chain(spec.units.iter().map(|u| u.name.as_str().len()))
        .max()
        .unwrap_or(0);
    let h = &spec.host;
    let _ = writeln!(
        out,
        "host: cpus {} ({}), mems {}, adopt_all {}",
        h.cpus,
        cpu_count(h.cpus.len()),
        h.mems,
        if h.adopt_all { "yes" } else { "no" }
    );
    let _ = writeln!(out, "epoch: {} ms", spec.epoch.as_millis());
    let default = spec.default_island().map(|i| &i.name);
    let _ = writeln!(out, "islands: {}", spec.islands.len());
    for i in &spec.islands {
        let mark = if Some(&i.name) == default {
            " (default)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  {:width$}  cpus {} ({}), mems {}, {}{mark}",
            i.name.as_str(),
            i.cpus,
            cpu_count(i.cpus.len()),
            i.mems,
            policy(&i.policy),
        );
    }
    let _ = writeln!(out, "units: {}", spec.units.len());
    for u in &spec.units {
        let _ = writeln!(out, "  {:width$}  {}", u.name.as_str(), unit(u));
        if !u.adopt.is_empty() {
            let rules: Vec<String> = u.adopt.iter().map(rule).collect();
            let _ = writeln!(out, "  {:width$}  adopt: {}", "", rules.join(", "));
        }
    }
    out
}

fn cpu_count(n: usize) -> String {
    if n == 1 {
        "1 CPU".into()
    } else {
        format!("{n} CPUs")
    }
}

fn policy(p: &SchedPolicy) -> String {
    match p {
        SchedPolicy::Fair => "fair".into(),
        SchedPolicy::Batch => "batch".into(),
        SchedPolicy::Idle => "idle".into(),
        SchedPolicy::Realtime(rt) => format!(
            "realtime {}, priority {}-{}, rt budget {}/{} us",
            match rt.class {
                RtClass::Fifo => "fifo",
                RtClass::Rr => "rr",
            },
            rt.priority_min,
            rt.priority_max,
            rt.runtime_us,
            rt.period_us
        ),
    }
}

fn unit(u: &UnitSpec) -> String {
    let e = &u.entitlement;
    let mut parts = vec![format!("island {}", u.island)];
    if let Some(c) = e.cpus {
        parts.push(format!("cpus {c}"));
    }
    if let Some(w) = e.weight {
        parts.push(format!("weight {w}"));
    }
    if let Some(c) = e.cpu_cap {
        parts.push(format!("cap {c}"));
    }
    let m = &e.memory;
    let mem: Vec<String> = [
        ("min", m.min),
        ("low", m.low),
        ("high", m.high),
        ("max", m.max),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k} {}", format_size(v))))
    .collect();
    if !mem.is_empty() {
        parts.push(format!("memory {}", mem.join(" ")));
    }
    if let Some(w) = e.io.weight {
        parts.push(format!("io weight {w}"));
    }
    for l in &e.io.limits {
        let mut s = format!("io {}:{}", l.device.major, l.device.minor);
        for (k, v, size) in [
            ("rbps", l.rbps, true),
            ("wbps", l.wbps, true),
            ("riops", l.riops, false),
            ("wiops", l.wiops, false),
        ] {
            if let Some(v) = v {
                let v = if size { format_size(v) } else { v.to_string() };
                let _ = write!(s, " {k} {v}");
            }
        }
        parts.push(s);
    }
    if let Some(p) = u.rt_priority {
        parts.push(format!("rt priority {p}"));
    }
    parts.join(", ")
}

fn rule(r: &AdoptRule) -> String {
    match r {
        AdoptRule::Comm(c) => format!("comm={c}"),
        AdoptRule::Exe(p) => format!("exe={}", p.display()),
        AdoptRule::Uid(u) => format!("uid={u}"),
        AdoptRule::Cgroup(c) => format!("cgroup={c}"),
        AdoptRule::Pid(p) => format!("pid={p}"),
    }
}
