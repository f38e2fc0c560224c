//! The `sim` backend: a simulated platform behind the same traits as the
//! kernel backends.
//!
//! [`SimPlatform`] is a cheaply cloneable handle to one simulated machine. It
//! implements [`Actuator`](atoll_core::backend::Actuator) and
//! [`Monitor`](atoll_core::backend::Monitor) (backend kind `sim`),
//! [`ProcessTable`](atoll_core::process::ProcessTable) and
//! [`TaskControl`](atoll_core::process::TaskControl), so the daemon and its
//! policies run against it unchanged. Tests drive the machine through the
//! handle's own methods: spawn and exit processes, mark them busy, set their
//! memory, and [`advance`](SimPlatform::advance) time.
//!
//! The rules are the kernel's where a policy could get them wrong:
//! - groups form a tree under atoll's root; a group's parent must exist;
//! - `cpuset.cpus` must be online and within the parent's effective CPUs;
//! - a partition is granted only to CPUs exclusive among siblings, else it
//!   falls back like the kernel's "root invalid";
//! - only leaves hold processes (cgroup v2's no-internal-process rule), and a
//!   group with processes or children cannot be removed (`EBUSY`);
//! - RT group scheduling (cgroup v1 with `CONFIG_RT_GROUP_SCHED`): budgets
//!   must fit in the parent's, and RT threads need a group with a budget;
//! - the freezer stops a group's tasks (and its descendants') until thawed.
//!
//! Time comes from an injected [`ManualClock`](atoll_core::clock::ManualClock).
//! Every call first brings the CPU model (`model`) up to the clock's time:
//! rates change only at events (a thread wakes or blocks, a group, policy
//! or placement changes) and the accounting is exact between them. The
//! model shares CPUs by hierarchical weighted max-min fairness with
//! cpusets and caps, serves RT threads first within their budgets, weighs
//! idle ones at 3, and estimates wakeup delays from contention and slices;
//! its module docs say what is exact and what is approximated.
//!
//! On top, the [`engine`] runs a [`workload`] (parallel apps with barriers,
//! request chains across units, streams, memory footprints, disk streams)
//! as a discrete-event simulation on the same clock, so the daemon's
//! control loop can run between its steps on a machine of any size.
//! [`SimPlatform`] also implements
//! [`NetMonitor`](atoll_core::comm::NetMonitor) over the engine's simulated
//! sockets, for communication-aware scheduling.
//!
//! Layout: `state` holds the machine, `groups` the cgroup rules, `procs`
//! the processes, `model` the CPU sharing, `platform` the handle and trait
//! implementations, [`workload`] the specs, [`engine`] the event loop.

pub mod engine;
mod groups;
mod model;
mod platform;
pub mod power;
mod procs;
mod state;
pub mod workload;

pub use engine::Engine;
pub use model::ModelStats;
pub use platform::SimPlatform;
pub use state::{
    Location, IDLE_LOAD, NICE_0_LOAD, OUTSIDE_WEIGHT, PID_MAX, SIM_CAPABILITIES, USER_HZ,
};
pub use workload::{WorkloadError, WorkloadSpec};
