//! atoll's pure core.
//!
//! Everything here is a value or a pure function: the machine's
//! [`topology`](topology::Topology), the [`spec`](spec::PlatformSpec) of
//! islands and units, the [`plan`](plan::plan) that turns a spec into a cgroup
//! hierarchy, and the traits through which the kernel ([`backend`]), the
//! process table ([`process`]), process events ([`events`]), pressure
//! triggers ([`pressure`]) and time ([`clock`]) come in. No module reads a file, a global or the system
//! clock, so the same code runs against real cgroups, fake trees in a temp
//! dir, and the simulator.
//!
//! Dependencies point one way: this crate depends on nothing of atoll's;
//! backends, monitors, the daemon and the CLI depend on it.

pub mod awm;
pub mod backend;
pub mod clock;
pub mod comm;
pub mod coord;
pub mod decision;
pub mod effects;
pub mod events;
pub mod idset;
pub mod isolation;
pub mod layout;
pub mod name;
pub mod netisland;
pub mod num;
pub mod plan;
pub mod power;
pub mod pressure;
pub mod process;
pub mod slo;
pub mod spec;
pub mod topology;
pub mod weight;

pub use idset::{CpuSet, IdSet, NodeSet};
pub use name::Name;
