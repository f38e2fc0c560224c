//! The EEVDF custom slice of a fair-class thread, through the raw
//! `sched_setattr(2)` / `sched_getattr(2)` system calls (glibc has no
//! wrappers).
//!
//! Since Linux 6.12 (the EEVDF scheduler itself arrived in 6.6),
//! `sched_attr::sched_runtime` of a `SCHED_OTHER` or `SCHED_BATCH` thread is
//! the slice it asks for: a shorter slice gets it scheduled sooner after a
//! wakeup, a longer one lets it run longer before preemption. The kernel
//! clamps the request to [`MIN_SLICE`]..=[`MAX_SLICE`], and a zero request
//! restores the default (`base_slice_ns`). Kernels before 6.12 accept the call
//! and ignore the value; [`slice()`] then reads back `None`.
//!
//! `sched_setattr` replaces the whole policy, so [`set_slice`] first reads the
//! thread's attributes and writes them back unchanged apart from the slice
//! (policy, nice value and reset-on-fork survive).

use std::io;
use std::mem::size_of;
use std::time::Duration;

use atoll_core::process::ProcessError;

use crate::sched::{kernel_tid, sys_error};

/// Shortest slice the kernel accepts (it clamps shorter requests).
pub const MIN_SLICE: Duration = Duration::from_micros(100);
/// Longest slice the kernel accepts (it clamps longer requests).
pub const MAX_SLICE: Duration = Duration::from_millis(100);

fn empty_attr() -> libc::sched_attr {
    libc::sched_attr {
        size: u32::try_from(size_of::<libc::sched_attr>()).expect("sched_attr is 56 bytes"),
        sched_policy: 0,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: 0,
        sched_deadline: 0,
        sched_period: 0,
    }
}

fn get_attr(call: &'static str, tid: u32) -> Result<libc::sched_attr, ProcessError> {
    let t = kernel_tid(call, tid, "")?;
    let mut attr = empty_attr();
    // SAFETY: `attr` is a valid, writable `sched_attr` of the size passed as
    // the third argument, and it outlives the call; the kernel writes at most
    // that many bytes. The flags argument must be 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            libc::c_long::from(t),
            &mut attr as *mut libc::sched_attr,
            size_of::<libc::sched_attr>() as libc::c_long,
            0 as libc::c_long,
        )
    };
    if rc != 0 {
        return Err(sys_error("sched_getattr", tid, String::new()));
    }
    Ok(attr)
}

fn is_fair(policy: u32) -> bool {
    [libc::SCHED_OTHER, libc::SCHED_BATCH]
        .iter()
        .any(|&p| u32::try_from(p) == Ok(policy))
}

/// Asks the kernel to give thread `tid` a custom slice (`Duration::ZERO`
/// restores the default). Only for `SCHED_OTHER` and `SCHED_BATCH` threads;
/// other policies and slices outside [`MIN_SLICE`]..=[`MAX_SLICE`] are
/// refused with [`ProcessError::Sys`] before any call is made.
pub fn set_slice(tid: u32, slice: Duration) -> Result<(), ProcessError> {
    let value = format!("slice {}us", slice.as_micros());
    let invalid = |why: &str| ProcessError::Sys {
        call: "sched_setattr",
        tid,
        value: value.clone(),
        source: io::Error::new(io::ErrorKind::InvalidInput, why.to_string()),
    };
    if !slice.is_zero() && !(MIN_SLICE..=MAX_SLICE).contains(&slice) {
        return Err(invalid("slice must be 0 (default) or 100us..=100ms"));
    }
    let t = kernel_tid("sched_setattr", tid, &value)?;
    let current = get_attr("sched_getattr", tid)?;
    if !is_fair(current.sched_policy) {
        return Err(invalid(&format!(
            "custom slices apply to SCHED_OTHER/SCHED_BATCH only, thread has policy {}",
            current.sched_policy
        )));
    }
    let attr = libc::sched_attr {
        sched_policy: current.sched_policy,
        sched_flags: current.sched_flags & libc::SCHED_FLAG_RESET_ON_FORK as u64,
        sched_nice: current.sched_nice,
        sched_runtime: u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX),
        ..empty_attr()
    };
    // SAFETY: `attr` is a fully initialised `sched_attr` whose `size` field
    // matches its type and that outlives the call; the kernel only reads it.
    // `t` is a positive thread id. The flags argument must be 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            libc::c_long::from(t),
            &attr as *const libc::sched_attr,
            0 as libc::c_long,
        )
    };
    if rc != 0 {
        return Err(sys_error("sched_setattr", tid, value));
    }
    Ok(())
}

/// The slice of thread `tid` as the kernel reports it: `None` for threads
/// outside the fair class and on kernels that do not report slices.
pub fn slice(tid: u32) -> Result<Option<Duration>, ProcessError> {
    let attr = get_attr("sched_getattr", tid)?;
    Ok((is_fair(attr.sched_policy) && attr.sched_runtime > 0)
        .then(|| Duration::from_nanos(attr.sched_runtime)))
}
