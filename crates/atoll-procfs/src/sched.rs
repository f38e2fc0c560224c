//! [`LinuxTaskControl`]: per-thread scheduling policies through
//! `sched_setscheduler(2)`, `sched_getscheduler(2)` and `sched_getparam(2)`.
//!
//! `ESRCH` (the thread exited) becomes
//! [`ProcessError::Gone`]; every other failure becomes [`ProcessError::Sys`]
//! naming the call, the thread and the value. Thread id 0 ("the calling
//! thread" to the kernel) is refused so that a zero read from somewhere can
//! never reschedule the daemon itself.

use std::io;

use atoll_core::plan::TaskPolicy;
use atoll_core::process::{ProcessError, TaskControl};

/// Sets scheduling policies of real threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinuxTaskControl;

impl LinuxTaskControl {
    /// The real kernel's task control.
    pub fn new() -> Self {
        Self
    }
}

/// The kernel's policy number and static priority for `policy`.
fn raw(policy: TaskPolicy) -> (libc::c_int, libc::c_int) {
    match policy {
        TaskPolicy::Other => (libc::SCHED_OTHER, 0),
        TaskPolicy::Batch => (libc::SCHED_BATCH, 0),
        TaskPolicy::Idle => (libc::SCHED_IDLE, 0),
        TaskPolicy::Fifo(p) => (libc::SCHED_FIFO, libc::c_int::from(p)),
        TaskPolicy::Rr(p) => (libc::SCHED_RR, libc::c_int::from(p)),
    }
}

/// How `policy` is shown in errors: `SCHED_FIFO priority 10`.
pub(crate) fn describe(policy: TaskPolicy) -> String {
    match policy {
        TaskPolicy::Other => "SCHED_OTHER".into(),
        TaskPolicy::Batch => "SCHED_BATCH".into(),
        TaskPolicy::Idle => "SCHED_IDLE".into(),
        TaskPolicy::Fifo(p) => format!("SCHED_FIFO priority {p}"),
        TaskPolicy::Rr(p) => format!("SCHED_RR priority {p}"),
    }
}

/// `tid` as the kernel's `pid_t`, refusing 0 (the caller) and ids that do not
/// fit.
pub(crate) fn kernel_tid(
    call: &'static str,
    tid: u32,
    value: &str,
) -> Result<libc::pid_t, ProcessError> {
    match libc::pid_t::try_from(tid) {
        Ok(t) if t > 0 => Ok(t),
        _ => Err(ProcessError::Sys {
            call,
            tid,
            value: value.to_string(),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                "thread id must be positive (0 would mean the calling thread)",
            ),
        }),
    }
}

/// The error for a failed call, from `errno`.
pub(crate) fn sys_error(call: &'static str, tid: u32, value: String) -> ProcessError {
    let source = io::Error::last_os_error();
    if source.raw_os_error() == Some(libc::ESRCH) {
        ProcessError::Gone(tid)
    } else {
        ProcessError::Sys {
            call,
            tid,
            value,
            source,
        }
    }
}

impl TaskControl for LinuxTaskControl {
    fn set_policy(&mut self, tid: u32, policy: TaskPolicy) -> Result<(), ProcessError> {
        let value = describe(policy);
        let t = kernel_tid("sched_setscheduler", tid, &value)?;
        let (pol, priority) = raw(policy);
        let param = libc::sched_param {
            sched_priority: priority,
        };
        // SAFETY: `param` is a fully initialised `sched_param` that outlives
        // the call; the kernel only reads it. `t` is a positive thread id, so
        // the call cannot target the caller by accident.
        let rc = unsafe { libc::sched_setscheduler(t, pol, &param) };
        if rc != 0 {
            return Err(sys_error("sched_setscheduler", tid, value));
        }
        Ok(())
    }

    fn set_slice(&mut self, tid: u32, slice: std::time::Duration) -> Result<(), ProcessError> {
        crate::slice::set_slice(tid, slice)
    }

    fn policy(&self, tid: u32) -> Result<TaskPolicy, ProcessError> {
        let t = kernel_tid("sched_getscheduler", tid, "")?;
        // SAFETY: takes a plain integer and touches no memory of ours.
        let rc = unsafe { libc::sched_getscheduler(t) };
        if rc < 0 {
            return Err(sys_error("sched_getscheduler", tid, String::new()));
        }
        let pol = rc & !libc::SCHED_RESET_ON_FORK;
        let rt_priority = || -> Result<u8, ProcessError> {
            let mut param = libc::sched_param { sched_priority: 0 };
            // SAFETY: `param` is a valid, writable `sched_param` that outlives
            // the call; the kernel writes exactly one such struct.
            let rc = unsafe { libc::sched_getparam(t, &mut param) };
            if rc != 0 {
                return Err(sys_error("sched_getparam", tid, String::new()));
            }
            u8::try_from(param.sched_priority).map_err(|_| ProcessError::Sys {
                call: "sched_getparam",
                tid,
                value: param.sched_priority.to_string(),
                source: io::Error::new(io::ErrorKind::InvalidData, "priority out of range"),
            })
        };
        match pol {
            libc::SCHED_OTHER => Ok(TaskPolicy::Other),
            libc::SCHED_BATCH => Ok(TaskPolicy::Batch),
            libc::SCHED_IDLE => Ok(TaskPolicy::Idle),
            libc::SCHED_FIFO => Ok(TaskPolicy::Fifo(rt_priority()?)),
            libc::SCHED_RR => Ok(TaskPolicy::Rr(rt_priority()?)),
            other => Err(ProcessError::Sys {
                call: "sched_getscheduler",
                tid,
                value: format!("policy {other}"),
                source: io::Error::new(
                    io::ErrorKind::Unsupported,
                    "a policy atoll does not manage (e.g. SCHED_DEADLINE)",
                ),
            }),
        }
    }
}
