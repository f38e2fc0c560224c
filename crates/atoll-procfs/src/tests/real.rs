//! Tests against the running kernel. They touch only this test process and
//! `sleep` children they start (killed on drop, even when a test fails).

use std::process::{Child, Command};
use std::time::Duration;

use atoll_core::plan::TaskPolicy;
use atoll_core::process::{ProcessError, ProcessTable, TaskControl};

use super::is_root;
use crate::{set_slice, slice, LinuxTaskControl, ProcFs};

/// A `sleep 30` child, killed and reaped on drop.
struct Sleeper(Child);

impl Sleeper {
    fn spawn() -> Self {
        Self(
            Command::new("sleep")
                .arg("30")
                .spawn()
                .expect("spawn sleep"),
        )
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `e` is the kernel saying no (not supported / not allowed).
fn refused(e: &ProcessError) -> bool {
    matches!(e, ProcessError::Sys { source, .. }
        if matches!(source.raw_os_error(), Some(libc::EINVAL) | Some(libc::EPERM)))
}

#[test]
fn reads_our_own_process() {
    let t = ProcFs::system();
    let pid = std::process::id();
    assert!(t.pids().unwrap().contains(&pid));
    let info = t.info(pid).unwrap();
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_name().unwrap().to_str().unwrap();
    // comm is the executable's name cut to 15 bytes.
    assert!(!info.comm.is_empty());
    assert!(name.starts_with(&info.comm), "{name} vs {}", info.comm);
    assert_eq!(info.comm.len(), name.len().min(15));
    // SAFETY: getuid takes no arguments, cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    assert_eq!(info.uid, uid);
    assert_eq!(info.ppid, std::os::unix::process::parent_id());
    assert_eq!(info.exe.as_deref(), Some(exe.as_path()));
    assert!(!info.kernel_thread);
    assert!(info.start_ticks > 0);
    assert_eq!(t.read_start_ticks(pid).unwrap(), info.start_ticks);
    assert!(!info.cgroups.entries.is_empty());
    assert!(t.threads(pid).unwrap().contains(&pid));
}

#[test]
fn kthreadd_is_a_kernel_thread_when_visible() {
    let t = ProcFs::system();
    match t.stat(2) {
        Ok(s) if s.comm == "kthreadd" => {
            let info = t.info(2).unwrap();
            assert!(info.kernel_thread);
        }
        _ => eprintln!("note: pid 2 is not kthreadd here (pid namespace?); skipped"),
    }
}

#[test]
fn thread_id_zero_is_refused() {
    let mut c = LinuxTaskControl::new();
    let e = c.set_policy(0, TaskPolicy::Idle).unwrap_err();
    assert!(matches!(e, ProcessError::Sys { tid: 0, .. }), "{e:?}");
    assert!(c.policy(0).is_err());
    assert!(set_slice(0, Duration::from_millis(1)).is_err());
}

#[test]
fn sets_and_reads_back_policies_of_a_child() {
    let child = Sleeper::spawn();
    let pid = child.pid();
    let mut c = LinuxTaskControl::new();
    assert_eq!(c.policy(pid).unwrap(), TaskPolicy::Other);
    for p in [TaskPolicy::Batch, TaskPolicy::Idle, TaskPolicy::Other] {
        c.set_policy(pid, p).unwrap();
        assert_eq!(c.policy(pid).unwrap(), p);
    }
    if !is_root() {
        eprintln!("note: not root; SCHED_FIFO/SCHED_RR not tried");
        return;
    }
    match c.set_policy(pid, TaskPolicy::Fifo(10)) {
        Ok(()) => {
            assert_eq!(c.policy(pid).unwrap(), TaskPolicy::Fifo(10));
            c.set_policy(pid, TaskPolicy::Rr(3)).unwrap();
            assert_eq!(c.policy(pid).unwrap(), TaskPolicy::Rr(3));
            c.set_policy(pid, TaskPolicy::Other).unwrap();
            assert_eq!(c.policy(pid).unwrap(), TaskPolicy::Other);
        }
        Err(e) if refused(&e) => {
            eprintln!("note: kernel refused SCHED_FIFO here ({e}); RT part skipped")
        }
        Err(e) => panic!("{e}"),
    }
    // Out-of-range RT priorities are the kernel's to refuse, with the value.
    let e = c.set_policy(pid, TaskPolicy::Fifo(0)).unwrap_err();
    assert!(e.to_string().contains("SCHED_FIFO priority 0"), "{e}");
}

#[test]
fn an_exited_child_is_gone() {
    let mut child = Sleeper::spawn();
    let pid = child.pid();
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let mut c = LinuxTaskControl::new();
    assert!(matches!(c.set_policy(pid, TaskPolicy::Batch), Err(ProcessError::Gone(p)) if p == pid));
    assert!(matches!(c.policy(pid), Err(ProcessError::Gone(p)) if p == pid));
    assert!(matches!(slice(pid), Err(ProcessError::Gone(p)) if p == pid));
    assert!(matches!(ProcFs::system().info(pid), Err(ProcessError::Gone(p)) if p == pid));
}

#[test]
fn sets_a_custom_slice_keeping_policy_and_nice() {
    let child = Sleeper::spawn();
    let pid = child.pid();
    let mut c = LinuxTaskControl::new();
    c.set_policy(pid, TaskPolicy::Batch).unwrap();
    // SAFETY: plain integer arguments; `pid` is our own child.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, 5) };
    assert_eq!(rc, 0);
    let want = Duration::from_micros(2_500);
    match set_slice(pid, want) {
        Ok(()) => {}
        Err(e) if refused(&e) => {
            eprintln!("note: kernel refused sched_setattr ({e}); slice test skipped");
            return;
        }
        Err(e) => panic!("{e}"),
    }
    assert_eq!(c.policy(pid).unwrap(), TaskPolicy::Batch);
    // SAFETY: plain integer arguments; getpriority cannot return -1 here
    // because the nice value is 5.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t) };
    assert_eq!(nice, 5);
    match slice(pid).unwrap() {
        Some(got) => {
            assert_eq!(got, want);
            set_slice(pid, Duration::ZERO).unwrap();
            let default = slice(pid).unwrap();
            assert!(default.is_some() && default != Some(want), "{default:?}");
        }
        None => eprintln!("note: kernel does not report slices (< 6.12?); readback skipped"),
    }
    // Requests the kernel would clamp are refused up front.
    assert!(set_slice(pid, Duration::from_micros(50)).is_err());
    assert!(set_slice(pid, Duration::from_millis(101)).is_err());
    // Idle-class threads have no custom slice.
    c.set_policy(pid, TaskPolicy::Idle).unwrap();
    let e = set_slice(pid, want).unwrap_err();
    assert!(e.to_string().contains("SCHED_OTHER/SCHED_BATCH"), "{e}");
}
