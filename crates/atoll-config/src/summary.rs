//! A human-readable account of a spec, for `atoll check-config`.

use std::fmt::Write as _;

use atoll_core::coord::{ArbitrationPolicy, CoordConfig, Property};
use atoll_core::spec::{AdoptRule, Entitlement, OverlayConfig, PlatformSpec, UnitSpec};

use crate::size::format_size;

/// Describes `spec`: the host partition, every island with its CPUs, memory
/// nodes and policy, and every unit with its island, entitlement and adopt
/// rules, then every overlay with its priority, property, units and
/// reactive policy. One item per line; the default island is marked.
pub fn summary(spec: &PlatformSpec) -> String {
    let mut out = String::new();
    let width = spec
        .islands
        .iter()
        .map(|i| i.name.as_str().len())
        .chain(spec.units.iter().map(|u| u.name.as_str().len()))
        .chain(spec.overlays.iter().map(|o| o.name.as_str().len()))
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
        let arbitration = match i.arbitration {
            ArbitrationPolicy::RoundRobin => "",
            ArbitrationPolicy::Priority => ", arbitration by priority",
        };
        let _ = writeln!(
            out,
            "  {:width$}  cpus {} ({}), mems {}, {}{arbitration}{mark}",
            i.name.as_str(),
            i.cpus,
            cpu_count(i.cpus.len()),
            i.mems,
            i.policy,
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
    if !spec.overlays.is_empty() {
        let _ = writeln!(out, "overlays: {}", spec.overlays.len());
        for o in &spec.overlays {
            let _ = writeln!(out, "  {:width$}  {}", o.name.as_str(), overlay(o, spec));
        }
    }
    if let Some(c) = &spec.comm {
        let _ = writeln!(out, "comm: {}", comm(c));
    }
    crate::apps::summary(&spec.apps, &mut out);
    out
}

fn comm(c: &atoll_core::comm::CommSpec) -> String {
    let mut features = Vec::new();
    if c.recipient {
        features.push("recipient".to_string());
    }
    if c.anticipate {
        features.push("anticipate".to_string());
    }
    if !c.netpath.is_empty() {
        let units: Vec<&str> = c.netpath.iter().map(|u| u.as_str()).collect();
        features.push(format!("netpath {}", units.join(" ")));
    }
    if features.is_empty() {
        features.push("no feature on (nothing is boosted)".into());
    }
    let how = match c.mechanism {
        atoll_core::comm::Mechanism::Slice => format!("slice {}us", c.boost_slice.as_micros()),
        atoll_core::comm::Mechanism::Weight => format!("weight x{}", c.boost_weight),
        atoll_core::comm::Mechanism::IdleOthers => "others idle".into(),
    };
    let units = match &c.units {
        Some(u) => u.iter().map(|u| u.as_str()).collect::<Vec<_>>().join(" "),
        None => "all".into(),
    };
    format!(
        "{}; boost by {how}, at most {} at once; period {} ms; units {units}",
        features.join(", "),
        c.max_boosted,
        c.period.as_millis()
    )
}

fn overlay(o: &OverlayConfig, spec: &PlatformSpec) -> String {
    let mut parts = vec![format!("priority {}", o.priority), o.property.to_string()];
    if matches!(o.property, Property::PlatformCpuCap { .. }) {
        // The timing in force, set or default.
        let c = o.cap_timing.apply(CoordConfig::default());
        parts.push(format!(
            "cap period {} ms, window {} ms",
            c.cap_period.as_millis(),
            c.cap_interval.as_millis()
        ));
    }
    if !o.units.is_empty() {
        let units: Vec<String> = o
            .units
            .iter()
            .map(|u| match spec.units.iter().find(|s| &s.name == u) {
                Some(s) => format!("{u} ({})", s.island),
                None => u.to_string(),
            })
            .collect();
        parts.push(format!("units {}", units.join(" ")));
    }
    let r = &o.react;
    let mut react = Vec::new();
    if let Some(p) = r.pressure {
        react.push(format!("CPU pressure > {p}%"));
    }
    if let Some(u) = r.utilization {
        react.push(format!("island utilization > {u}"));
    }
    if let Some(q) = r.recv_queue {
        react.push(format!("receive queue > {}", format_size(q)));
    }
    if !react.is_empty() {
        parts.push(format!("reacts to {}", react.join(", ")));
    }
    parts.join(", ")
}

fn cpu_count(n: usize) -> String {
    if n == 1 {
        "1 CPU".into()
    } else {
        format!("{n} CPUs")
    }
}

/// An entitlement as short phrases (`cpus 1.5`, `cap 2`, `memory max 2G`,
/// ...), for summaries and status.
pub fn entitlement_parts(e: &Entitlement) -> Vec<String> {
    let mut parts = Vec::new();
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
    parts
}

fn unit(u: &UnitSpec) -> String {
    let mut parts = vec![format!("island {}", u.island)];
    parts.extend(entitlement_parts(&u.entitlement));
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
        AdoptRule::SystemdUnit(n) => format!("systemd_unit={n}"),
    }
}
