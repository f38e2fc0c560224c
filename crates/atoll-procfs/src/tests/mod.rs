//! Tests over fake trees and, where the kernel allows, the real one.

mod connector_real;
mod fake_proc;
mod psi_real;
mod real;
mod unprivileged;

fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments, cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}
