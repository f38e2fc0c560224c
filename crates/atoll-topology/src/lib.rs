//! Discovery of the machine from sysfs.
//!
//! [`read_topology`] reads CPUs, SMT siblings, last-level caches, packages,
//! NUMA nodes, CPU capacities and hybrid core kinds from a sysfs tree under an
//! injected root (normally `/sys`) and returns an immutable
//! [`Topology`](atoll_core::topology::Topology) snapshot. There is no mutation
//! API: on hotplug the caller reads a fresh snapshot. [`render_text`] prints
//! the summary shown by `atoll topology`; the JSON form is `serde_json` of the
//! snapshot and is documented, field by field, in `docs/topology.md`.
//!
//! With the `testutils` feature (and always in this crate's own tests),
//! [`testutils`] offers `FakeSysfs`, a builder that writes realistic sysfs
//! trees into a directory, and ready machines in `testutils::fixtures`.

mod error;
mod read;
mod render;
mod sysfs;

#[cfg(any(test, feature = "testutils"))]
pub mod testutils;

#[cfg(test)]
mod tests;

pub use error::TopologyError;
pub use read::{read_topology, DEFAULT_SYSFS_ROOT};
pub use render::render_text;
