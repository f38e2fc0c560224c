//! The `status` reply: the daemon's view of the platform, its islands and
//! units, where its root is and how it finds processes.

use atoll_core::backend::GroupStats;
use atoll_core::plan::TaskPolicy;
use atoll_core::spec::{Entitlement, SchedPolicy};
use atoll_core::{CpuSet, NodeSet};
use serde::{Deserialize, Serialize};

use crate::coord;

/// The daemon's view of the platform.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// Daemon version.
    pub version: String,
    /// `cgroup2`, `cgroup1` or `sim`.
    pub backend: String,
    /// The service manager the backend sets bound units' resources
    /// through (`systemd 252`: "cgroup2 via systemd 252"), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_manager: Option<String>,
    /// atoll's root group: its name under the cgroup mount, or its path
    /// below it (`system.slice/atoll.service/managed` under systemd).
    pub root: String,
    /// Where the root is and what atoll takes from the rest of the machine.
    #[serde(default)]
    pub root_info: Option<RootInfo>,
    /// Control-loop period, ms.
    pub epoch_ms: u64,
    /// Time since start, ms.
    pub uptime_ms: u64,
    /// Control-loop iterations so far.
    pub epochs: u64,
    /// The host partition.
    pub host: HostStatus,
    /// Islands in config order.
    pub islands: Vec<IslandStatus>,
    /// Units, by island then name.
    pub units: Vec<UnitStatus>,
    /// Knobs the kernel refused, with what is in force instead.
    pub fallbacks: Vec<atoll_core::backend::Fallback>,
    /// The isolation mode in force (`smp`, `quota`, `isolate`).
    #[serde(default)]
    pub isolation_mode: Option<atoll_core::spec::IsolationMode>,
    /// What belongs to no unit: the `kernel` and `shared` accounts.
    #[serde(default)]
    pub accounts: Option<atoll_core::process::SystemAccounts>,
    /// Communication-aware scheduling, when `[comm]` is configured.
    #[serde(default)]
    pub comm: Option<CommStatus>,
    /// How the daemon finds new processes.
    #[serde(default)]
    pub discovery: Option<Discovery>,
    /// How the daemon follows the CPU pressure of watched units.
    #[serde(default)]
    pub pressure: Option<coord::PressureSource>,
    /// The control loop's pace: how long it waits between epochs now, and
    /// why it woke early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<LoopPace>,
    /// The coordination state the daemon restored at its last start or
    /// reload, in words (`restored from state: 2 loans, escalation level
    /// 1`), and what of it was dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coord_restored: Option<String>,
    /// RAPL energy and cpufreq, when the daemon runs on a real machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::energy::EnergyStatus>,
    /// The network islands the daemon manages (`docs/netisland.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<crate::net::NetIslandStatus>,
    /// Each latency overlay's measurement and what its source costs, in
    /// overlay order (as `overlay_show` answers it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<crate::slo::SloStatus>,
    /// What the daemon could not do or know, in words (a damaged state file
    /// it recovered from, processes whose origin it lost, ...).
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// Where atoll's root is and what atoll takes from tasks it does not manage.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootInfo {
    /// The root's directory (v1: one per hierarchy) and, when systemd
    /// delegated it, the unit and the daemon's own leaf.
    pub location: String,
    /// One line per setting that takes CPUs or processes from tasks atoll
    /// does not manage (exclusive islands, `adopt_all`, a v1 exclusive
    /// root); empty when nothing does.
    #[serde(default)]
    pub effects: Vec<String>,
}

/// The control loop's pace (see `docs/architecture.md`, "Quiescent
/// epochs"): while no step has anything to act on, the wait between epochs
/// doubles up to `max_epochs` epochs, and any input brings it back to one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopPace {
    /// The wait before the next epoch, ms.
    pub interval_ms: u64,
    /// The longest wait, in epochs (1: the loop never stretches).
    pub max_epochs: u32,
    /// Uptime (ms) since which every epoch found nothing to act on, while
    /// that is so.
    #[serde(default)]
    pub quiescent_since_ms: Option<u64>,
    /// Epochs that ran after a wait longer than one epoch.
    #[serde(default)]
    pub stretched_epochs: u64,
    /// Waits cut short, by what cut them: `command` (an API request or a
    /// reload), `proc_event` (the proc connector), `pressure` (the PSI
    /// trigger), `busy` (an epoch after a long wait found work).
    #[serde(default)]
    pub wakes: std::collections::BTreeMap<String, u64>,
    /// Whether a CPU pressure (PSI) trigger wakes the loop, or why not.
    #[serde(default)]
    pub pressure_wake: Option<String>,
    /// The component that needed the next tick after the last epoch
    /// (`adoption`, `coordination`, `isolation`, `comm`, ...), if one did.
    #[serde(default)]
    pub held_by: Option<String>,
}

/// How the daemon finds new, changed and exited processes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovery {
    /// `proc-connector` (the kernel reports them as they happen) or `scan`
    /// (`/proc` is listed every epoch).
    pub source: String,
    /// Why it scans, when it does (no permission, no `CONFIG_PROC_EVENTS`,
    /// the event source failed, the simulator).
    #[serde(default)]
    pub reason: Option<String>,
    /// Events received so far.
    #[serde(default)]
    pub events: u64,
    /// Full `/proc` listings so far (at start, and after events were lost).
    #[serde(default)]
    pub rescans: u64,
}

/// The host partition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostStatus {
    /// CPUs.
    pub cpus: CpuSet,
    /// Memory nodes.
    pub mems: NodeSet,
    /// Whether unmanaged tasks are adopted into it.
    pub adopt_all: bool,
    /// Processes in it.
    pub processes: usize,
    /// Usage.
    pub stats: GroupStats,
}

/// One island.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IslandStatus {
    /// Name.
    pub name: String,
    /// CPUs.
    pub cpus: CpuSet,
    /// Memory nodes.
    pub mems: NodeSet,
    /// Scheduler policy.
    pub policy: SchedPolicy,
    /// Units in it.
    pub units: Vec<String>,
    /// Usage of the whole island.
    pub stats: GroupStats,
}

/// One unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitStatus {
    /// Name.
    pub name: String,
    /// Island.
    pub island: String,
    /// From the config, or created at run time.
    pub origin: UnitOrigin,
    /// What it is entitled to.
    pub entitlement: Entitlement,
    /// Policy applied to its tasks.
    pub task_policy: TaskPolicy,
    /// Its processes.
    pub pids: Vec<u32>,
    /// Usage.
    pub stats: GroupStats,
    /// What it has, lends and borrows under `quota`/`isolate`.
    #[serde(default)]
    pub isolation: Option<UnitIsolation>,
    /// Its network figures and boosts, when `[comm]` watches it.
    #[serde(default)]
    pub comm: Option<UnitComm>,
    /// The systemd unit or scope it is enforced through, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<UnitService>,
}

/// A unit enforced through a service manager: the properties of a systemd
/// unit, or a scope atoll started for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitService {
    /// What it is (to be) bound to.
    pub external: atoll_core::backend::External,
    /// Whether it is bound now.
    pub bound: bool,
    /// What is wrong: why it is not bound (`bound` false), or what the
    /// service manager refused of the last change of its settings, none
    /// of which was made (`bound` true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Communication-aware scheduling as a whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommStatus {
    /// The mechanism boosts use (`slice`, `weight`, `idle_others`).
    pub mechanism: String,
    /// Features on: `recipient`, `anticipate`, `netpath`.
    pub features: Vec<String>,
    /// Where the socket figures come from (`sock_diag`, `procfs`, `sim`,
    /// or `none` when no monitor could be opened).
    pub source: String,
    /// Units boosted now.
    pub boosted: Vec<String>,
    /// Cost of the last epoch's sampling and decision, µs.
    pub last_cost_us: u64,
    /// Epochs sampled.
    pub epochs: u64,
    /// Samples that failed (the epoch then boosts nothing).
    pub sample_errors: u64,
}

/// One unit under communication-aware scheduling.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UnitComm {
    /// Boosted now.
    pub boosted: bool,
    /// Its reservation, CPUs (a slice of this share per period).
    pub reservation_cpus: f64,
    /// Bytes waiting in its receive queues at the last sample.
    pub recv_queued: u64,
    /// Bytes it received and sent since atoll watches it (sockets alive).
    pub bytes_received: u64,
    /// Bytes it sent (sockets alive).
    pub bytes_sent: u64,
    /// Boosts started.
    pub boosts: u64,
    /// Time spent boosted, µs.
    pub boosted_us: u64,
    /// Boosts refused because it had used its slice of the period.
    pub over_reservation: u64,
    /// Boosts started as a recipient (data waiting).
    pub recipient: u64,
    /// Boosts started as an anticipated sender.
    pub sender: u64,
    /// Boosts started as a unit on others' network path.
    pub netpath: u64,
}

/// A unit's resources under the isolation model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UnitIsolation {
    /// Its home CPUs.
    pub home_cpus: CpuSet,
    /// The CPUs it may run on now (home, pool, borrowed).
    pub allowed_cpus: CpuSet,
    /// Home CPUs lent to others now.
    pub lent_cpus: CpuSet,
    /// Other units' CPUs it borrows now.
    pub borrowed_cpus: CpuSet,
    /// Times it took back CPUs it had lent.
    pub cpu_revocations: u64,
    /// Times CPUs it borrowed were taken back by their owner.
    #[serde(default)]
    pub cpu_lost: u64,
    /// Its memory limit now (`memory.high`), bytes.
    pub memory_limit: Option<u64>,
    /// Memory it lends, bytes.
    pub memory_lent: u64,
    /// Memory it borrows, bytes.
    pub memory_borrowed: u64,
    /// Times borrowed memory was taken back.
    pub memory_revocations: u64,
    /// Held back on disk now.
    pub io_held: bool,
}

/// Where a unit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitOrigin {
    /// Declared in the platform description.
    Config,
    /// Created by `adopt`/`run`.
    Runtime,
}
