//! The way back: a [`PlatformSpec`] as a config file that [`crate::parse`]
//! reads to the same spec (`atoll config dump`).
//!
//! Everything the parser would fill in from the machine is written out:
//! `"auto"` host CPUs and `[auto]` islands become explicit lists and
//! `[island.NAME]` tables (in the spec's order, which is the order the
//! parser gives them back in), memory nodes are always written, and a
//! unit's island is always named. Defaults that do not depend on the
//! machine (an island's access, `[apps]` settings, a mode's name) are left
//! out where the spec holds the default, so a dump of a short file stays
//! short. Sizes are written with the largest exact suffix (`"512M"`),
//! times in the unit of their key (`epoch_ms`, `boost_slice_us`).

use std::time::Duration;

use atoll_core::awm::Recipe;
use atoll_core::coord::{ArbitrationPolicy, Property};
use atoll_core::slo::{LatencySource, LogFormat, ProbeTarget, SloConfig};
use atoll_core::spec::{
    AdoptRule, AppsSpec, IslandSpec, OverlayConfig, PlatformSpec, RtClass, SchedPolicy,
    SharePolicy, UnitSpec,
};
use atoll_core::Name;
use serde::Serialize;
use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

use crate::size::format_size;

/// What the first lines of a dump say.
const HEADER: &str = "# atoll's effective platform description (atoll config dump): the\n\
# configuration file as the daemon resolved it, with the units and overlays\n\
# added at run time. `atoll check-config` reads it back to the same platform.\n";

/// Why a spec could not be written (a value TOML cannot hold).
#[derive(Debug, thiserror::Error)]
#[error("{key}: cannot be written as TOML: {problem}")]
pub struct DumpError {
    /// The dotted key of the value.
    pub key: String,
    /// Why.
    pub problem: String,
}

/// `spec` as a config file (see the module docs).
pub fn to_toml(spec: &PlatformSpec) -> Result<String, DumpError> {
    let mut doc = DocumentMut::new();
    let root = doc.as_table_mut();
    root.insert("epoch_ms", value(millis(spec.epoch, "epoch_ms")?));
    if let Some(d) = &spec.default_island {
        root.insert("default_island", value(d.as_str()));
    }
    root.insert("isolation", Item::Table(isolation(spec)?));
    let mut host = Table::new();
    host.insert("cpus", value(spec.host.cpus.to_string()));
    host.insert("mems", value(spec.host.mems.to_string()));
    host.insert("adopt_all", value(spec.host.adopt_all));
    root.insert("host", Item::Table(host));
    let islands: Vec<(&Name, Table)> = spec
        .islands
        .iter()
        .map(|i| Ok((&i.name, island(i, spec.frequency.get(&i.name))?)))
        .collect::<Result<_, DumpError>>()?;
    root.insert("island", sections(islands));
    let units: Vec<(&Name, Table)> = spec
        .units
        .iter()
        .map(|u| Ok((&u.name, unit(u)?)))
        .collect::<Result<_, DumpError>>()?;
    root.insert("unit", sections(units));
    let overlays: Vec<(&Name, Table)> = spec
        .overlays
        .iter()
        .map(|o| Ok((&o.name, overlay(o)?)))
        .collect::<Result<_, DumpError>>()?;
    root.insert("overlay", sections(overlays));
    if let Some(c) = &spec.comm {
        root.insert("comm", Item::Table(comm(c)?));
    }
    if let Some(apps) = apps(&spec.apps)? {
        root.insert("apps", Item::Table(apps));
    }
    let recipes: Vec<(&Name, Table)> = spec
        .apps
        .recipes
        .iter()
        .map(|r| Ok((&r.name, recipe(r)?)))
        .collect::<Result<_, DumpError>>()?;
    root.insert("recipe", sections(recipes));
    let networks: Vec<(&Name, Table)> = spec
        .network
        .iter()
        .map(|n| Ok((&n.name, network(n)?)))
        .collect::<Result<_, DumpError>>()?;
    root.insert("network", sections(networks));
    Ok(format!("{HEADER}\n{doc}"))
}

/// `[KIND.NAME]` tables under an implicit `[KIND]`; nothing when empty.
fn sections<'a>(items: impl IntoIterator<Item = (&'a Name, Table)>) -> Item {
    let mut parent = Table::new();
    parent.set_implicit(true);
    for (name, t) in items {
        parent.insert(name.as_str(), Item::Table(t));
    }
    if parent.is_empty() {
        Item::None
    } else {
        Item::Table(parent)
    }
}

fn int(v: u64, key: &str) -> Result<i64, DumpError> {
    i64::try_from(v).map_err(|_| DumpError {
        key: key.to_string(),
        problem: format!("{v} is above TOML's largest integer"),
    })
}

fn millis(d: Duration, key: &str) -> Result<i64, DumpError> {
    exact(d.as_nanos(), 1_000_000, key)
}

fn micros(d: Duration, key: &str) -> Result<i64, DumpError> {
    exact(d.as_nanos(), 1_000, key)
}

/// `nanos` in units of `per` nanoseconds, when it is a whole number of them.
fn exact(nanos: u128, per: u128, key: &str) -> Result<i64, DumpError> {
    if nanos % per != 0 {
        return Err(DumpError {
            key: key.to_string(),
            problem: format!("{nanos} ns is not a whole number of the key's unit"),
        });
    }
    i64::try_from(nanos / per).map_err(|_| DumpError {
        key: key.to_string(),
        problem: format!("{nanos} ns is too long"),
    })
}

/// A value through its serde form (enum tags, the policy's tables).
fn serde_value<T: Serialize>(v: &T, key: &str) -> Result<Value, DumpError> {
    v.serialize(toml_edit::ser::ValueSerializer::new())
        .map_err(|e| DumpError {
            key: key.to_string(),
            problem: e.to_string(),
        })
}

fn names<'a>(list: impl IntoIterator<Item = &'a Name>) -> Array {
    list.into_iter().map(|n| n.as_str()).collect()
}

fn isolation(spec: &PlatformSpec) -> Result<Table, DumpError> {
    let i = &spec.isolation;
    let mut t = Table::new();
    t.insert("mode", value(serde_value(&i.mode, "isolation.mode")?));
    t.insert("memory_reserve", value(i.memory_reserve));
    t.insert("io_threshold", value(format_size(i.io_threshold_bytes)));
    t.insert(
        "io_decay_ms",
        value(millis(i.io_decay, "isolation.io_decay_ms")?),
    );
    Ok(t)
}

fn island(
    i: &IslandSpec,
    frequency: Option<&atoll_core::power::FreqPolicy>,
) -> Result<Table, DumpError> {
    let mut t = Table::new();
    t.insert("cpus", value(i.cpus.to_string()));
    t.insert("mems", value(i.mems.to_string()));
    let policy = match &i.policy {
        SchedPolicy::Fair => "fair",
        SchedPolicy::Batch => "batch",
        SchedPolicy::Idle => "idle",
        SchedPolicy::Realtime(_) => "realtime",
    };
    t.insert("policy", value(policy));
    if let SchedPolicy::Realtime(rt) = &i.policy {
        let class = match rt.class {
            RtClass::Fifo => "fifo",
            RtClass::Rr => "rr",
        };
        t.insert("rt_class", value(class));
        let priority: Array = [i64::from(rt.priority_min), i64::from(rt.priority_max)]
            .into_iter()
            .collect();
        t.insert("priority", value(priority));
        let key = format!("island.{}", i.name);
        t.insert(
            "rt_runtime_us",
            value(int(rt.runtime_us, &format!("{key}.rt_runtime_us"))?),
        );
        t.insert(
            "rt_period_us",
            value(int(rt.period_us, &format!("{key}.rt_period_us"))?),
        );
    }
    if i.arbitration != ArbitrationPolicy::default() {
        let a = match i.arbitration {
            ArbitrationPolicy::RoundRobin => "round_robin",
            ArbitrationPolicy::Priority => "priority",
        };
        t.insert("arbitration", value(a));
    }
    if i.exclusive {
        t.insert("exclusive", value(true));
    }
    let a = &i.access;
    if a.user_units {
        t.insert("user_units", value(true));
    }
    if a.user_units_max != atoll_core::spec::DEFAULT_USER_UNITS_MAX {
        t.insert("user_units_max", value(i64::from(a.user_units_max)));
    }
    if !a.rt_users.is_empty() {
        let users: Array = a.rt_users.iter().map(|u| i64::from(*u)).collect();
        t.insert("rt_users", value(users));
    }
    if let Some(f) = frequency {
        let key = format!("island.{}.frequency", i.name);
        let mut ft = Table::new();
        if let Some(g) = &f.governor {
            ft.insert("governor", value(g.as_str()));
        }
        if let Some(v) = f.min_khz {
            ft.insert("min_khz", value(int(v, &format!("{key}.min_khz"))?));
        }
        if let Some(v) = f.max_khz {
            ft.insert("max_khz", value(int(v, &format!("{key}.max_khz"))?));
        }
        t.insert("frequency", Item::Table(ft));
    }
    Ok(t)
}

fn unit(u: &UnitSpec) -> Result<Table, DumpError> {
    let key = format!("unit.{}", u.name);
    let e = &u.entitlement;
    let mut t = Table::new();
    t.insert("island", value(u.island.as_str()));
    if let Some(c) = e.cpus {
        t.insert("cpus", value(c));
    }
    if let Some(w) = e.weight {
        t.insert("weight", value(i64::from(w)));
    }
    if let Some(c) = e.cpu_cap {
        t.insert("cpu_cap", value(c));
    }
    let m = &e.memory;
    for (k, v) in [
        ("memory_min", m.min),
        ("memory_low", m.low),
        ("memory_high", m.high),
        ("memory_max", m.max),
    ] {
        if let Some(v) = v {
            t.insert(k, value(format_size(v)));
        }
    }
    if let Some(w) = e.io.weight {
        t.insert("io_weight", value(i64::from(w)));
    }
    if !e.io.limits.is_empty() {
        let mut limits = Array::new();
        for (i, l) in e.io.limits.iter().enumerate() {
            let mut it = InlineTable::new();
            it.insert(
                "device",
                format!("{}:{}", l.device.major, l.device.minor).into(),
            );
            for (k, v) in [("rbps", l.rbps), ("wbps", l.wbps)] {
                if let Some(v) = v {
                    it.insert(k, format_size(v).into());
                }
            }
            for (k, v) in [("riops", l.riops), ("wiops", l.wiops)] {
                if let Some(v) = v {
                    it.insert(k, int(v, &format!("{key}.io_limits[{i}].{k}"))?.into());
                }
            }
            limits.push(it);
        }
        t.insert("io_limits", value(limits));
    }
    if let Some(p) = u.rt_priority {
        t.insert("rt_priority", value(i64::from(p)));
    }
    let s = &e.sharing;
    for (k, p) in [
        ("share_cpu", s.cpu),
        ("share_memory", s.memory),
        ("share_io", s.io),
    ] {
        if p != SharePolicy::default() {
            t.insert(k, value(serde_value(&p, &format!("{key}.{k}"))?));
        }
    }
    if !u.adopt.is_empty() {
        let mut rules = Array::new();
        for r in &u.adopt {
            let mut it = InlineTable::new();
            let (k, v): (&str, Value) = match r {
                AdoptRule::Comm(c) => ("comm", c.as_str().into()),
                AdoptRule::Exe(p) => (
                    "exe",
                    p.to_str()
                        .ok_or_else(|| DumpError {
                            key: format!("{key}.adopt"),
                            problem: format!("{} is not UTF-8", p.display()),
                        })?
                        .into(),
                ),
                AdoptRule::Uid(u) => ("uid", i64::from(*u).into()),
                AdoptRule::Cgroup(c) => ("cgroup", c.as_str().into()),
                AdoptRule::Pid(p) => ("pid", i64::from(*p).into()),
                AdoptRule::SystemdUnit(n) => ("systemd_unit", n.as_str().into()),
            };
            it.insert(k, v);
            rules.push(it);
        }
        t.insert("adopt", value(rules));
    }
    Ok(t)
}

fn overlay(o: &OverlayConfig) -> Result<Table, DumpError> {
    let key = format!("overlay.{}", o.name);
    let mut t = Table::new();
    t.insert("priority", value(i64::from(o.priority)));
    t.insert("units", value(names(&o.units)));
    match o.property {
        Property::LatencyPercentile {
            percentile,
            bound_us,
        } => {
            t.insert(
                "latency_us",
                value(int(bound_us, &format!("{key}.latency_us"))?),
            );
            t.insert("percentile", value(percentile));
        }
        Property::ThroughputFloor { per_s } => {
            t.insert("throughput_floor", value(per_s));
        }
        Property::PlatformCpuCap { cpus } => {
            t.insert("cpu_cap", value(cpus));
        }
        Property::PlatformPowerCap { watts } => {
            t.insert("power_cap_watts", value(watts));
        }
    }
    // Written wherever set (validation refuses them beside another
    // property), so the dump loads back to the same spec.
    if let Some(p) = o.cap_timing.period {
        t.insert(
            "cap_period_ms",
            value(millis(p, &format!("{key}.cap_period_ms"))?),
        );
    }
    if let Some(i) = o.cap_timing.interval {
        t.insert(
            "cap_interval_ms",
            value(millis(i, &format!("{key}.cap_interval_ms"))?),
        );
    }
    if let Some(p) = o.react.pressure {
        t.insert("react_pressure", value(p));
    }
    if let Some(u) = o.react.utilization {
        t.insert("react_utilization", value(u));
    }
    if let Some(q) = o.react.recv_queue {
        t.insert("react_recv_queue", value(format_size(q)));
    }
    slo(&mut t, &o.slo, &key)?;
    Ok(t)
}

/// The overlay keys of its latency source and best-effort units (none for
/// the default: app-reported latency, nothing beside).
fn slo(t: &mut Table, s: &SloConfig, key: &str) -> Result<(), DumpError> {
    if s.is_default() {
        return Ok(());
    }
    t.insert("latency_source", value(s.source.kind()));
    t.insert(
        "window_ms",
        value(millis(s.window, &format!("{key}.window_ms"))?),
    );
    match &s.source {
        LatencySource::Report => {}
        LatencySource::Probe(p) => {
            t.insert("probe", value(p.target.url()));
            if let ProbeTarget::Tcp { send, .. } = &p.target {
                t.insert("probe_send", value(send.as_str()));
            }
            t.insert(
                "probe_every_ms",
                value(millis(p.every, &format!("{key}.probe_every_ms"))?),
            );
            t.insert(
                "probe_timeout_ms",
                value(millis(p.timeout, &format!("{key}.probe_timeout_ms"))?),
            );
        }
        LatencySource::AccessLog(l) => {
            let path = l.path.to_str().ok_or_else(|| DumpError {
                key: format!("{key}.access_log"),
                problem: "the path is not UTF-8".into(),
            })?;
            t.insert("access_log", value(path));
            match l.format {
                LogFormat::Field { index, unit } => {
                    t.insert("log_format", value("nginx"));
                    t.insert("log_field", value(i64::from(index)));
                    t.insert("log_unit", value(unit.as_str()));
                }
                LogFormat::Haproxy => {
                    t.insert("log_format", value("haproxy"));
                }
            }
        }
    }
    if let Some(d) = s.stale_after {
        t.insert(
            "stale_after_ms",
            value(millis(d, &format!("{key}.stale_after_ms"))?),
        );
    }
    if !s.best_effort.is_empty() {
        t.insert("best_effort", value(names(&s.best_effort)));
    }
    if !s.be.is_default() {
        t.insert("be_steps", value(i64::from(s.be.steps)));
        t.insert("be_grow_above", value(s.be.grow_above));
        t.insert("be_cut_below", value(s.be.cut_below));
    }
    Ok(())
}

fn comm(c: &atoll_core::comm::CommSpec) -> Result<Table, DumpError> {
    let mut t = Table::new();
    t.insert("recipient", value(c.recipient));
    t.insert("anticipate", value(c.anticipate));
    t.insert("netpath", value(names(&c.netpath)));
    t.insert(
        "mechanism",
        value(serde_value(&c.mechanism, "comm.mechanism")?),
    );
    t.insert("period_ms", value(millis(c.period, "comm.period_ms")?));
    t.insert(
        "boost_slice_us",
        value(micros(c.boost_slice, "comm.boost_slice_us")?),
    );
    t.insert("boost_weight", value(i64::from(c.boost_weight)));
    t.insert(
        "max_boosted",
        value(int(
            u64::try_from(c.max_boosted).unwrap_or(u64::MAX),
            "comm.max_boosted",
        )?),
    );
    if let Some(units) = &c.units {
        t.insert("units", value(names(units)));
    }
    Ok(t)
}

/// `[network.NAME]`, every key written (units as sub-tables).
fn network(n: &atoll_core::netisland::NetIslandSetup) -> Result<Table, DumpError> {
    let key = format!("network.{}", n.name);
    let mbit = |bps: u64, field: &str| -> Result<i64, DumpError> {
        let k = format!("{key}.{field}");
        if bps % crate::network::MBIT != 0 {
            return Err(DumpError {
                key: k,
                problem: format!("{bps} bit/s is not a whole number of megabits"),
            });
        }
        int(bps / crate::network::MBIT, &k)
    };
    let mut t = Table::new();
    t.insert("interface", value(n.interface.as_str()));
    t.insert("rate_mbit", value(mbit(n.rate_bps, "rate_mbit")?));
    t.insert("default_share", value(i64::from(n.default_share)));
    t.insert("leaf", value(serde_value(&n.leaf, &format!("{key}.leaf"))?));
    if let Some(c) = &n.rx_cpus {
        t.insert("rx_cpus", value(c.to_string()));
    }
    if let Some(c) = &n.tx_cpus {
        t.insert("tx_cpus", value(c.to_string()));
    }
    if let Some(b) = n.triggers.socket_backlog_bytes {
        t.insert(
            "socket_backlog_bytes",
            value(int(b, &format!("{key}.socket_backlog_bytes"))?),
        );
    }
    if let Some(b) = n.triggers.class_backlog_bytes {
        t.insert(
            "class_backlog_bytes",
            value(int(b, &format!("{key}.class_backlog_bytes"))?),
        );
    }
    t.insert(
        "trigger_cooldown_ms",
        value(millis(
            n.triggers.cooldown,
            &format!("{key}.trigger_cooldown_ms"),
        )?),
    );
    let mut units = Table::new();
    units.set_implicit(true);
    for u in &n.units {
        let mut ut = Table::new();
        ut.insert("share", value(i64::from(u.share)));
        if let Some(c) = u.ceil_bps {
            ut.insert(
                "ceil_mbit",
                value(mbit(c, &format!("units.{}.ceil_mbit", u.name))?),
            );
        }
        ut.insert("prio", value(i64::from(u.prio)));
        units.insert(u.name.as_str(), Item::Table(ut));
    }
    if !n.units.is_empty() {
        t.insert("units", Item::Table(units));
    }
    Ok(t)
}

/// `[apps]`, with only the keys whose value is not the default; `None`
/// when every one is.
fn apps(a: &AppsSpec) -> Result<Option<Table>, DumpError> {
    let d = AppsSpec::default();
    let mut t = Table::new();
    if let Some(islands) = &a.islands {
        t.insert("islands", value(names(islands)));
    }
    if a.weights != d.weights {
        t.insert("weights", value(serde_value(&a.weights, "apps.weights")?));
    }
    if a.params != d.params {
        t.insert("params", value(serde_value(&a.params, "apps.params")?));
    }
    if a.batch_quiet != d.batch_quiet {
        t.insert(
            "batch_quiet_ms",
            value(millis(a.batch_quiet, "apps.batch_quiet_ms")?),
        );
    }
    if a.batch_max != d.batch_max {
        t.insert(
            "batch_max_ms",
            value(millis(a.batch_max, "apps.batch_max_ms")?),
        );
    }
    if a.gap_deadband != d.gap_deadband {
        t.insert("gap_deadband", value(a.gap_deadband));
    }
    Ok((!t.is_empty()).then_some(t))
}

fn recipe(r: &Recipe) -> Result<Table, DumpError> {
    let mut t = Table::new();
    t.insert("priority", value(i64::from(r.priority)));
    let mut modes = ArrayOfTables::new();
    for m in &r.modes {
        let mut mt = Table::new();
        mt.insert("id", value(i64::from(m.id)));
        if !m.name.is_empty() {
            mt.insert("name", value(m.name.as_str()));
        }
        mt.insert("value", value(m.value));
        let n = &m.needs;
        mt.insert("cpu_quota", value(n.cpu_quota));
        if let Some(th) = n.threads {
            mt.insert("threads", value(i64::from(th)));
        }
        if n.exclusive_cpus {
            mt.insert("exclusive_cpus", value(true));
        }
        if n.memory_bytes > 0 {
            mt.insert("memory", value(format_size(n.memory_bytes)));
        }
        if let Some(islands) = &n.islands {
            mt.insert("islands", value(names(islands)));
        }
        if let Some(w) = m.power_watts {
            mt.insert("power_watts", value(w));
        }
        modes.push(mt);
    }
    if !modes.is_empty() {
        t.insert("mode", Item::ArrayOfTables(modes));
    }
    Ok(t)
}
