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
//!   must fit in the parent's, and RT threads need a group with a budget.
//!
//! Time comes from an injected [`ManualClock`](atoll_core::clock::ManualClock).
//! Every call first brings the CPU model (`cpu_model`) up to the clock's
//! time at the rates in force since the last call, so rates change only at
//! events and the accounting is exact between them.
//!
//! Layout: `state` holds the machine, `groups` the cgroup
//! rules, `procs` the processes, `cpu_model` the CPU sharing, `platform`
//! the handle and trait implementations.

mod cpu_model;
mod groups;
mod platform;
mod procs;
mod state;

pub use platform::SimPlatform;
pub use state::{
    Location, IDLE_LOAD, NICE_0_LOAD, OUTSIDE_WEIGHT, PID_MAX, SIM_CAPABILITIES, USER_HZ,
};
