//! Processes as the kernel shows them.
//!
//! - [`ProcFs`] implements [`ProcessTable`](atoll_core::process::ProcessTable)
//!   by reading a `/proc` tree under an injected root (the real `/proc` in the
//!   daemon, a [`FakeProc`](fake::FakeProc) tree in tests). A process that
//!   vanishes between two reads is reported as
//!   [`ProcessError::Gone`](atoll_core::process::ProcessError::Gone), never as
//!   an I/O error.
//! - [`LinuxTaskControl`] implements
//!   [`TaskControl`](atoll_core::process::TaskControl) with
//!   `sched_setscheduler(2)` and friends.
//! - [`set_slice`] / [`slice()`] wrap `sched_setattr(2)` / `sched_getattr(2)`
//!   to set and read the EEVDF custom slice of a fair-class thread.
//! - [`connector::ProcConnector`] implements
//!   [`ProcEventSource`](atoll_core::events::ProcEventSource) with the
//!   kernel's proc connector: forks, execs, renames, id changes and exits as
//!   they happen, instead of listing `/proc` to find them.
//! - [`psi::PsiWatch`] waits on PSI triggers: the kernel says when a
//!   resource's pressure crosses a threshold.
//!   [`psi_watch::PsiGroupWatch`] implements
//!   [`PressureWatch`](atoll_core::pressure::PressureWatch) with them, one
//!   trigger per group's `cpu.pressure` (and
//!   [`FakePressureWatch`](psi_watch::FakePressureWatch) for tests).
//!
//! Nothing here reads a global: every path starts at the root a [`ProcFs`]
//! was given, and every system call names its thread explicitly (thread id 0,
//! "the caller", is refused).

pub mod accounts;
pub mod connector;
#[cfg(any(test, feature = "testutils"))]
pub mod fake;
pub mod psi;
pub mod psi_watch;
mod sched;
mod slice;
mod stat;
mod table;

pub use sched::LinuxTaskControl;
pub use slice::{set_slice, slice, MAX_SLICE, MIN_SLICE};
pub use stat::{parse_stat, Stat, PF_KTHREAD};
pub use table::{parse_schedstat, parse_uid, ProcFs};

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
