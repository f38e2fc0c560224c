//! What the operator asked for: the host partition, islands and units.
//!
//! A [`PlatformSpec`] is the validated, resolved form of a config file (or the
//! embedded default): `auto` layouts have already been expanded into CPU and
//! node sets. [`PlatformSpec::validate`] checks it against a [`Topology`] and
//! returns every problem at once, each with the key path that caused it, so
//! the config parser can point at a line and column.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::coord::ArbitrationPolicy;
use crate::topology::Topology;
use crate::{CpuSet, Name, NodeSet};

mod apps;
mod frequency;
mod network;
mod overlay;
mod runtime;
mod service;
pub use apps::{is_app_unit_name, AppsSpec, APP_UNIT_PREFIX};
pub use overlay::{
    CapTiming, OverlayConfig, ReactPolicy, CAP_INTERVAL_MAX, CAP_PERIOD_MAX, CAP_PERIOD_MIN,
};
pub use service::{check_unit_name, CGROUP_UNIT_TYPES};

/// Default control-loop period.
pub const DEFAULT_EPOCH: Duration = Duration::from_millis(30);
/// Default `cpu.max` / `cfs_period_us` period, µs.
pub const DEFAULT_CPU_PERIOD_US: u64 = 100_000;

/// The whole platform: host partition, islands, units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlatformSpec {
    /// CPUs and memory left to tasks atoll does not manage.
    pub host: HostSpec,
    /// Islands, in config order.
    pub islands: Vec<IslandSpec>,
    /// Units declared in the config (more may be created at run time).
    pub units: Vec<UnitSpec>,
    /// Island that receives units created without one (`atoll run` without
    /// `--island`). Defaults to the first island.
    pub default_island: Option<Name>,
    /// Control-loop period.
    pub epoch: Duration,
    /// How units share what they do not use.
    #[serde(default)]
    pub isolation: IsolationSpec,
    /// Management overlays (`[overlay.NAME]`), in config order.
    #[serde(default)]
    pub overlays: Vec<OverlayConfig>,
    /// Communication-aware scheduling (`[comm]`); `None`: off.
    #[serde(default)]
    pub comm: Option<crate::comm::CommSpec>,
    /// Reconfigurable applications (`[recipe.NAME]`, `[apps]`).
    #[serde(default)]
    pub apps: AppsSpec,
    /// Network islands (`[network.NAME]`), in config order.
    #[serde(default)]
    pub network: Vec<crate::netisland::NetIslandSetup>,
    /// Per-island cpufreq policies (`[island.NAME.frequency]`), by island
    /// name; an island not here keeps the machine's settings.
    #[serde(default)]
    pub frequency: std::collections::BTreeMap<Name, crate::power::FreqPolicy>,
}

/// The machine-wide isolation model (seed 004), so users can compare:
/// plain Linux sharing, fixed quotas, or isolation with lending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IsolationMode {
    /// No isolation between units: weights only, no per-unit CPU sets or
    /// limits beyond what a unit's entitlement caps explicitly.
    #[default]
    Smp,
    /// Fixed quotas: each unit keeps its share, nothing is lent.
    Quota,
    /// Performance isolation: each unit keeps its share and lends what it
    /// leaves idle, taking it back when it needs it.
    Isolate,
}

/// Parameters of the isolation model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IsolationSpec {
    /// The model.
    pub mode: IsolationMode,
    /// Share of memory kept free, never lent (the paper's reserve
    /// threshold; 0.08 by default).
    pub memory_reserve: f64,
    /// How far above the average a unit's decayed disk traffic may go before
    /// it is held back, bytes (0 = round robin).
    pub io_threshold_bytes: u64,
    /// Half-life of the decayed disk traffic count.
    pub io_decay: Duration,
}

impl Default for IsolationSpec {
    fn default() -> Self {
        Self {
            mode: IsolationMode::default(),
            memory_reserve: 0.08,
            io_threshold_bytes: 4 << 20,
            io_decay: Duration::from_millis(500),
        }
    }
}

/// Whether a unit lends a resource it leaves idle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SharePolicy {
    /// Fixed quota: never lent.
    None,
    /// Idle capacity may be used by others and is taken back when needed.
    #[default]
    Lend,
}

/// A unit's sharing policy per resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sharing {
    /// CPUs.
    pub cpu: SharePolicy,
    /// Memory.
    pub memory: SharePolicy,
    /// Disk bandwidth.
    pub io: SharePolicy,
}

/// The host partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSpec {
    /// CPUs of the host partition. Empty is allowed without `adopt_all`:
    /// then atoll makes no host group and islands may take every CPU.
    pub cpus: CpuSet,
    /// Memory nodes of the host partition.
    pub mems: NodeSet,
    /// Move every task not in a unit into the host partition. Off by default:
    /// it touches every process on the machine.
    pub adopt_all: bool,
}

/// A resource island: CPUs, memory nodes and a scheduler policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IslandSpec {
    /// Island name (a cgroup directory under atoll's root).
    pub name: Name,
    /// Its CPUs.
    pub cpus: CpuSet,
    /// Its memory nodes.
    pub mems: NodeSet,
    /// Its scheduler policy.
    pub policy: SchedPolicy,
    /// How its coordinator orders competing coordination requests.
    #[serde(default)]
    pub arbitration: ArbitrationPolicy,
    /// Whether its CPUs are its own (a cpuset partition: v2 `root`, v1
    /// `cpu_exclusive`): no task outside the island runs on them. Off by
    /// default: an island's CPUs are shared with every task atoll does not
    /// manage, which keeps running where it ran.
    #[serde(default)]
    pub exclusive: bool,
    /// What users other than root may do with the island through the API.
    #[serde(default)]
    pub access: IslandAccess,
}

/// What users other than root may do with an island through the API (see
/// `docs/security.md`). Root may do anything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IslandAccess {
    /// Users may create units here (`atoll run`, `atoll adopt` into a new
    /// unit). Their units never take home CPUs or memory from the
    /// configured units.
    #[serde(default)]
    pub user_units: bool,
    /// Most units one user may have here at once.
    #[serde(default = "default_user_units_max")]
    pub user_units_max: u32,
    /// Users other than root who may place tasks here when the island is
    /// realtime (its tasks get SCHED_FIFO/RR).
    #[serde(default)]
    pub rt_users: Vec<u32>,
}

/// By default, a user may have this many units in an island that allows
/// them.
pub const DEFAULT_USER_UNITS_MAX: u32 = 4;

fn default_user_units_max() -> u32 {
    DEFAULT_USER_UNITS_MAX
}

impl Default for IslandAccess {
    fn default() -> Self {
        Self {
            user_units: false,
            user_units_max: DEFAULT_USER_UNITS_MAX,
            rt_users: Vec::new(),
        }
    }
}

/// The scheduler policy of an island, applied to every task atoll places there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SchedPolicy {
    /// SCHED_OTHER (EEVDF/CFS) with cgroup weights.
    Fair,
    /// SCHED_FIFO or SCHED_RR within a priority range and an RT budget.
    Realtime(RealtimePolicy),
    /// SCHED_BATCH.
    Batch,
    /// SCHED_IDLE, and `cpu.idle` on the island's groups.
    Idle,
}

impl std::fmt::Display for SchedPolicy {
    /// `fair`, `batch`, `idle`, or `realtime fifo, priority 10-40, rt budget
    /// 300000/1000000 us`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fair => f.write_str("fair"),
            Self::Batch => f.write_str("batch"),
            Self::Idle => f.write_str("idle"),
            Self::Realtime(rt) => write!(
                f,
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
}

/// Parameters of a realtime island.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealtimePolicy {
    /// FIFO or round-robin.
    pub class: RtClass,
    /// Lowest priority a unit may get (1..=99).
    pub priority_min: u8,
    /// Highest priority a unit may get (1..=99, >= `priority_min`).
    pub priority_max: u8,
    /// CPU time the island's RT tasks may use per period.
    pub runtime_us: u64,
    /// The budget's period.
    pub period_us: u64,
}

/// Realtime scheduling class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RtClass {
    /// SCHED_FIFO.
    Fifo,
    /// SCHED_RR.
    Rr,
}

/// A unit: a group of processes with an entitlement, in one island.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitSpec {
    /// Unit name, unique across the platform.
    pub name: Name,
    /// The island it lives in.
    pub island: Name,
    /// What it is entitled to.
    pub entitlement: Entitlement,
    /// Which processes join it.
    pub adopt: Vec<AdoptRule>,
    /// Realtime priority for its tasks on a realtime island (defaults to the
    /// island's `priority_min`).
    pub rt_priority: Option<u8>,
}

impl UnitSpec {
    /// The systemd unit it names (`adopt = [{ systemd_unit = ... }]`), whose
    /// properties enforce it: its processes stay in systemd's cgroup.
    pub fn systemd_unit(&self) -> Option<&str> {
        self.adopt.iter().find_map(|r| match r {
            AdoptRule::SystemdUnit(n) => Some(n.as_str()),
            _ => None,
        })
    }
}

/// A unit's share of the machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Entitlement {
    /// CPUs' worth of guaranteed time; sets the weight when `weight` is unset.
    pub cpus: Option<f64>,
    /// Explicit CPU weight (1..=10000).
    pub weight: Option<u32>,
    /// Hard cap in CPUs (`cpu.max`).
    pub cpu_cap: Option<f64>,
    /// Memory protection and limits.
    pub memory: MemoryEntitlement,
    /// IO weight and limits.
    pub io: IoEntitlement,
    /// What the unit lends when idle (used in `isolate` mode). Absent in
    /// state files of atoll 0.1.0: defaults to lending everything.
    #[serde(default)]
    pub sharing: Sharing,
}

/// Memory protection and limits, bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryEntitlement {
    /// `memory.min`: hard protection.
    pub min: Option<u64>,
    /// `memory.low`: best-effort protection.
    pub low: Option<u64>,
    /// `memory.high`: throttle above.
    pub high: Option<u64>,
    /// `memory.max`: hard limit.
    pub max: Option<u64>,
}

/// IO weight and per-device limits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoEntitlement {
    /// `io.weight` (1..=10000).
    pub weight: Option<u32>,
    /// Per-device bandwidth limits.
    pub limits: Vec<IoLimit>,
}

/// A block device by major:minor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceId {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

/// Bandwidth limits on one device. `None` means unlimited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoLimit {
    /// The device.
    pub device: DeviceId,
    /// Read bytes per second.
    pub rbps: Option<u64>,
    /// Write bytes per second.
    pub wbps: Option<u64>,
    /// Read operations per second.
    pub riops: Option<u64>,
    /// Write operations per second.
    pub wiops: Option<u64>,
}

/// A rule that adopts matching processes into a unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdoptRule {
    /// `comm` (the 15-byte task name) equals this.
    Comm(String),
    /// The executable path equals this.
    Exe(PathBuf),
    /// The real uid equals this.
    Uid(u32),
    /// The process sits in this cgroup (v2 path, or the v1 `cpu` hierarchy
    /// path), e.g. `/system.slice/nginx.service`.
    Cgroup(String),
    /// This pid.
    Pid(u32),
    /// The processes of this systemd unit (`nginx.service`, `web.slice`),
    /// left where systemd keeps them: the unit is enforced through the
    /// systemd unit's properties (see [`UnitSpec::systemd_unit`]). No process
    /// matches it.
    SystemdUnit(String),
}

/// One problem found by [`PlatformSpec::validate`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct SpecError {
    /// Dotted key path of the offending value, as in the config file:
    /// `host.cpus`, `island.web.cpus`, `unit.api.island`.
    pub key: String,
    /// What is wrong, with the values involved.
    pub problem: String,
}

impl SpecError {
    fn new(key: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            problem: problem.into(),
        }
    }
}

impl PlatformSpec {
    /// The island named `name`.
    pub fn island(&self, name: &Name) -> Option<&IslandSpec> {
        self.islands.iter().find(|i| &i.name == name)
    }

    /// The island that takes units created without one.
    pub fn default_island(&self) -> Option<&IslandSpec> {
        match &self.default_island {
            Some(n) => self.island(n),
            None => self.islands.first(),
        }
    }

    /// Checks the spec against the machine; returns every problem found.
    pub fn validate(&self, topo: &Topology) -> Result<(), Vec<SpecError>> {
        let mut errs = Vec::new();
        let online = topo.online();
        let all_nodes = topo.all_nodes();
        if self.host.cpus.is_empty() && self.host.adopt_all {
            errs.push(SpecError::new(
                "host.cpus",
                "with adopt_all the host partition needs at least one CPU",
            ));
        }
        check_set(
            &mut errs,
            "host.cpus",
            &self.host.cpus,
            &online,
            "online CPUs",
        );
        check_set(
            &mut errs,
            "host.mems",
            &self.host.mems,
            &all_nodes,
            "NUMA nodes",
        );
        if self.epoch < Duration::from_millis(1) || self.epoch > Duration::from_secs(60) {
            errs.push(SpecError::new(
                "epoch_ms",
                format!("{} ms is outside 1..=60000", self.epoch.as_millis()),
            ));
        }
        let mut claimed = self.host.cpus.clone();
        let mut seen = Vec::<&Name>::new();
        for island in &self.islands {
            let key = format!("island.{}", island.name);
            if island.name.is_reserved() {
                errs.push(SpecError::new(
                    &key,
                    format!("{:?} is reserved", island.name.as_str()),
                ));
            }
            if seen.contains(&&island.name) {
                errs.push(SpecError::new(&key, "island defined twice"));
            }
            seen.push(&island.name);
            if island.cpus.is_empty() {
                errs.push(SpecError::new(
                    format!("{key}.cpus"),
                    "an island needs at least one CPU",
                ));
            }
            check_set(
                &mut errs,
                &format!("{key}.cpus"),
                &island.cpus,
                &online,
                "online CPUs",
            );
            if island.mems.is_empty() {
                errs.push(SpecError::new(
                    format!("{key}.mems"),
                    "an island needs at least one memory node",
                ));
            }
            check_set(
                &mut errs,
                &format!("{key}.mems"),
                &island.mems,
                &all_nodes,
                "NUMA nodes",
            );
            let overlap = island.cpus.intersection(&claimed);
            if !overlap.is_empty() {
                errs.push(SpecError::new(
                    format!("{key}.cpus"),
                    format!("CPUs {overlap} are already in the host partition or another island"),
                ));
            }
            claimed = claimed.union(&island.cpus);
            if let SchedPolicy::Realtime(rt) = &island.policy {
                validate_rt(&mut errs, &key, rt);
            }
        }
        if let Some(d) = &self.default_island {
            if self.island(d).is_none() {
                errs.push(SpecError::new(
                    "default_island",
                    format!("no island named {:?}", d.as_str()),
                ));
            }
        }
        let mut unit_names = Vec::<&Name>::new();
        for unit in &self.units {
            let key = format!("unit.{}", unit.name);
            if unit_names.contains(&&unit.name) {
                errs.push(SpecError::new(&key, "unit defined twice"));
            }
            unit_names.push(&unit.name);
            if unit.name.is_reserved() {
                errs.push(SpecError::new(
                    &key,
                    format!("{:?} is reserved", unit.name.as_str()),
                ));
            }
            match self.island(&unit.island) {
                None => errs.push(SpecError::new(
                    format!("{key}.island"),
                    format!("no island named {:?}", unit.island.as_str()),
                )),
                Some(island) => {
                    validate_entitlement(&mut errs, &key, &unit.entitlement, island, topo);
                    match (&island.policy, unit.rt_priority) {
                        (SchedPolicy::Realtime(rt), Some(p))
                            if p < rt.priority_min || p > rt.priority_max =>
                        {
                            errs.push(SpecError::new(
                                format!("{key}.rt_priority"),
                                format!(
                                    "{p} is outside island {}'s range {}..={}",
                                    island.name, rt.priority_min, rt.priority_max
                                ),
                            ))
                        }
                        (SchedPolicy::Realtime(_), _) | (_, None) => {}
                        (_, Some(_)) => errs.push(SpecError::new(
                            format!("{key}.rt_priority"),
                            format!("island {} is not a realtime island", island.name),
                        )),
                    }
                }
            }
        }
        overlay::validate_overlays(self, &mut errs);
        service::validate_services(self, &mut errs);
        self.validate_comm(&mut errs);
        apps::validate_apps(self, topo, &mut errs);
        network::validate_network(self, topo, &mut errs);
        frequency::validate_frequency(self, &mut errs);
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}

impl PlatformSpec {
    /// `[comm]`: its ranges, and units it names that the platform declares.
    fn validate_comm(&self, errs: &mut Vec<SpecError>) {
        let Some(comm) = &self.comm else {
            return;
        };
        if let Err(e) = comm.validate() {
            errs.push(SpecError::new(
                format!("comm.{}", config_key(e.field())),
                e.to_string(),
            ));
        }
        let lists = [
            ("netpath", Some(&comm.netpath)),
            ("units", comm.units.as_ref()),
        ];
        for (field, list) in lists {
            for unit in list.into_iter().flatten() {
                if !self.units.iter().any(|u| &u.name == unit) {
                    errs.push(SpecError::new(
                        format!("comm.{field}"),
                        format!("unit {unit} is not declared ([unit.{unit}])"),
                    ));
                }
            }
        }
    }
}

/// The config file's spelling of a [`crate::comm::CommSpec`] field.
fn config_key(field: &str) -> &str {
    match field {
        "period" => "period_ms",
        "boost_slice" => "boost_slice_us",
        other => other,
    }
}

fn check_set(errs: &mut Vec<SpecError>, key: &str, set: &CpuSet, within: &CpuSet, what: &str) {
    let outside = set.difference(within);
    if !outside.is_empty() {
        errs.push(SpecError::new(
            key,
            format!("{outside} are not among the machine's {what} ({within})"),
        ));
    }
}

fn validate_rt(errs: &mut Vec<SpecError>, key: &str, rt: &RealtimePolicy) {
    if !(1..=99).contains(&rt.priority_min) || !(1..=99).contains(&rt.priority_max) {
        errs.push(SpecError::new(
            format!("{key}.priority"),
            format!(
                "priorities must be within 1..=99, got {}..={}",
                rt.priority_min, rt.priority_max
            ),
        ));
    }
    if rt.priority_min > rt.priority_max {
        errs.push(SpecError::new(
            format!("{key}.priority"),
            format!(
                "range {}..={} runs backwards",
                rt.priority_min, rt.priority_max
            ),
        ));
    }
    if rt.period_us == 0 || rt.period_us > 1_000_000 {
        errs.push(SpecError::new(
            format!("{key}.rt_period_us"),
            format!("{} is outside 1..=1000000", rt.period_us),
        ));
    }
    if rt.runtime_us == 0 || rt.runtime_us >= rt.period_us {
        errs.push(SpecError::new(
            format!("{key}.rt_runtime_us"),
            format!(
                "{} must be above 0 and below the period {} (a budget of the whole period could starve the island)",
                rt.runtime_us, rt.period_us
            ),
        ));
    }
}

fn validate_entitlement(
    errs: &mut Vec<SpecError>,
    key: &str,
    e: &Entitlement,
    island: &IslandSpec,
    topo: &Topology,
) {
    let ncpus = island.cpus.len() as f64;
    if let Some(c) = e.cpus {
        if !(c > 0.0 && c <= ncpus) {
            errs.push(SpecError::new(
                format!("{key}.cpus"),
                format!(
                    "{c} is outside (0, {ncpus}] (island {} has {ncpus} CPUs)",
                    island.name
                ),
            ));
        }
    }
    if let Some(cap) = e.cpu_cap {
        if !(cap >= 0.01 && cap <= ncpus) {
            errs.push(SpecError::new(
                format!("{key}.cpu_cap"),
                format!(
                    "{cap} is outside [0.01, {ncpus}] (island {} has {ncpus} CPUs)",
                    island.name
                ),
            ));
        }
        if let Some(c) = e.cpus {
            if c > cap {
                errs.push(SpecError::new(
                    format!("{key}.cpu_cap"),
                    format!("cap {cap} is below the entitlement of {c} CPUs"),
                ));
            }
        }
    }
    for (k, w) in [("weight", e.weight), ("io_weight", e.io.weight)] {
        if let Some(w) = w {
            if !(1..=10_000).contains(&w) {
                errs.push(SpecError::new(
                    format!("{key}.{k}"),
                    format!("{w} is outside 1..=10000"),
                ));
            }
        }
    }
    let m = &e.memory;
    let total = topo.memory_of(&island.mems);
    let order = [
        ("memory_min", m.min),
        ("memory_low", m.low),
        ("memory_high", m.high),
        ("memory_max", m.max),
    ];
    let mut last: Option<(&str, u64)> = None;
    for (k, v) in order {
        let Some(v) = v else { continue };
        if total > 0 && v > total && k != "memory_high" && k != "memory_max" {
            errs.push(SpecError::new(
                format!("{key}.{k}"),
                format!(
                    "{v} bytes is more than island {}'s memory ({total} bytes)",
                    island.name
                ),
            ));
        }
        if let Some((lk, lv)) = last {
            if v < lv {
                errs.push(SpecError::new(
                    format!("{key}.{k}"),
                    format!("{v} is below {lk} ({lv}); expected min <= low <= high <= max"),
                ));
            }
        }
        last = Some((k, v));
    }
    for (i, l) in e.io.limits.iter().enumerate() {
        if l.rbps.is_none() && l.wbps.is_none() && l.riops.is_none() && l.wiops.is_none() {
            errs.push(SpecError::new(
                format!("{key}.io_limits[{i}]"),
                format!(
                    "device {}:{} has no limit set",
                    l.device.major, l.device.minor
                ),
            ));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
