//! PSI triggers: the kernel wakes the daemon when a resource's pressure
//! crosses a threshold, instead of the daemon reading pressure files every
//! epoch.
//!
//! **What the kernel offers.** Pressure stall information (PSI) accounts
//! the time tasks stall waiting for CPU, memory or I/O: `some` (at least one
//! task stalled) and `full` (all non-idle tasks stalled at once). It is
//! shown machine-wide in `/proc/pressure/{cpu,memory,io,irq}` and per
//! cgroup v2 group in `{cpu,memory,io,irq}.pressure` (v1 groups have them
//! only with the `cgroup1 psi` boot option). Writing
//! `some|full <threshold µs> <window µs>` to such a file, opened read-write,
//! sets a trigger on that open file: when the stall time within any window
//! reaches the threshold, `poll(2)` reports `POLLPRI` on the descriptor, at
//! most once per window. One trigger per open file; closing it removes the
//! trigger. See the kernel's `Documentation/accounting/psi.rst`.
//!
//! **Limits.** The window is 500 ms to 10 s and the threshold at most the
//! window; both are checked here before anything is written
//! ([`TriggerSpec::check`]). Without `CAP_SYS_RESOURCE` (which root may
//! lack in a container: see [`privileged`]) the kernel also wants the
//! window to be a multiple of 2 s ([`TriggerSpec::check_unprivileged`],
//! [`unprivileged_window`]), and checks such triggers only every 2 s; its
//! error then says so. The system-wide `cpu` file's `full` line is always
//! zero outside cgroups.
//!
//! **Gone.** When the group of a per-cgroup file is removed, the kernel
//! tears the trigger down and `poll` reports `POLLERR`: [`PsiWatch::wait`]
//! returns its key in [`PsiWake::gone`] (never in `fired`) and stops
//! watching it.
//!
//! **When it cannot be used.** A kernel without PSI, or booted with `psi=0`,
//! has no pressure files ([`PsiError::Open`] with `NotFound`;
//! [`PsiError::is_unsupported`]); a group with `cgroup.pressure` set to 0
//! refuses triggers (`EOPNOTSUPP`). The daemon then reads the pressure
//! averages every epoch as before.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::connector::poll_ms;

/// The shortest window the kernel accepts.
pub const MIN_WINDOW: Duration = Duration::from_millis(500);
/// The longest window the kernel accepts.
pub const MAX_WINDOW: Duration = Duration::from_secs(10);
/// Without `CAP_SYS_RESOURCE`, windows must be a multiple of this.
pub const UNPRIVILEGED_WINDOW_STEP: Duration = Duration::from_secs(2);
/// `CAP_SYS_RESOURCE`'s bit in the capability sets.
pub const CAP_SYS_RESOURCE: u32 = 24;

/// Whether this process may set triggers with any window: whether
/// `<proc_root>/self/status` shows `CAP_SYS_RESOURCE` in the effective set
/// (`None`: unreadable). Being root is not enough: a container or sandbox
/// may run root without it.
pub fn privileged(proc_root: &Path) -> Option<bool> {
    let status = std::fs::read_to_string(proc_root.join("self/status")).ok()?;
    crate::connector::has_capability(&status, CAP_SYS_RESOURCE)
}

/// `window` rounded up to what a process without `CAP_SYS_RESOURCE` may
/// use: a multiple of 2 s, at most 10 s.
pub fn unprivileged_window(window: Duration) -> Duration {
    let step = UNPRIVILEGED_WINDOW_STEP.as_micros();
    let us = window.as_micros().div_ceil(step).max(1) * step;
    Duration::from_micros(u64::try_from(us).unwrap_or(u64::MAX)).min(MAX_WINDOW)
}

/// Which stall a trigger counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stall {
    /// At least one task stalled.
    Some,
    /// All non-idle tasks stalled at once.
    Full,
}

impl Stall {
    /// `some` or `full`, as the kernel spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Stall::Some => "some",
            Stall::Full => "full",
        }
    }
}

/// A resource with pressure files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resource {
    /// CPU.
    Cpu,
    /// Memory.
    Memory,
    /// Block I/O.
    Io,
    /// Interrupt handling (kernels with `CONFIG_IRQ_TIME_ACCOUNTING`;
    /// `full` only).
    Irq,
}

impl Resource {
    /// `cpu`, `memory`, `io` or `irq`.
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
            Resource::Io => "io",
            Resource::Irq => "irq",
        }
    }

    /// The machine-wide file: `<proc_root>/pressure/<resource>`.
    pub fn system_path(self, proc_root: &Path) -> PathBuf {
        proc_root.join("pressure").join(self.as_str())
    }

    /// A group's file: `<group_dir>/<resource>.pressure`.
    pub fn cgroup_path(self, group_dir: &Path) -> PathBuf {
        group_dir.join(format!("{}.pressure", self.as_str()))
    }
}

/// What a trigger asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TriggerSpec {
    /// `some` or `full`.
    pub stall: Stall,
    /// Stall time within a window that fires the trigger (whole µs).
    pub threshold: Duration,
    /// The window (whole µs).
    pub window: Duration,
}

impl TriggerSpec {
    /// The text written to the pressure file, without the terminating NUL:
    /// `some 150000 1000000`.
    pub fn text(&self) -> String {
        format!(
            "{} {} {}",
            self.stall.as_str(),
            self.threshold.as_micros(),
            self.window.as_micros()
        )
    }

    /// Why the kernel would refuse this from a process without
    /// `CAP_SYS_RESOURCE`, if it would ([`check`](Self::check), and the
    /// window a multiple of 2 s).
    pub fn check_unprivileged(&self) -> Result<(), String> {
        self.check()?;
        let (w, step) = (
            self.window.as_micros(),
            UNPRIVILEGED_WINDOW_STEP.as_micros(),
        );
        if !whole_steps(w) {
            return Err(format!(
                "window {w} us is not a multiple of {step} us (needed without CAP_SYS_RESOURCE)"
            ));
        }
        Ok(())
    }

    /// Why the kernel would refuse this whatever the caller's privileges,
    /// if it would.
    pub fn check(&self) -> Result<(), String> {
        let (t, w) = (self.threshold.as_micros(), self.window.as_micros());
        if w < MIN_WINDOW.as_micros() || w > MAX_WINDOW.as_micros() {
            return Err(format!(
                "window {w} us is outside {} us..{} us",
                MIN_WINDOW.as_micros(),
                MAX_WINDOW.as_micros()
            ));
        }
        if t == 0 {
            return Err("threshold is zero (whole microseconds count)".into());
        }
        if t > w {
            return Err(format!("threshold {t} us is longer than the window {w} us"));
        }
        Ok(())
    }
}

/// Why a trigger could not be set or watched.
#[derive(Debug, thiserror::Error)]
pub enum PsiError {
    /// The values are outside what the kernel accepts; nothing was written.
    #[error("PSI trigger {value:?} for {path}: {reason}")]
    Invalid {
        /// The pressure file.
        path: PathBuf,
        /// The trigger text.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// The pressure file could not be opened read-write.
    #[error("open {path} read-write for a PSI trigger: {source}")]
    Open {
        /// The pressure file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The kernel refused the trigger.
    #[error("write PSI trigger {value:?} to {path}: {source}{hint}")]
    Write {
        /// The pressure file.
        path: PathBuf,
        /// The trigger text written.
        value: String,
        /// The OS error.
        #[source]
        source: io::Error,
        /// What the error usually means here (may be empty).
        hint: &'static str,
    },
    /// `poll(2)` failed.
    #[error("poll {count} PSI trigger(s): {source}")]
    Poll {
        /// How many descriptors were polled.
        count: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl PsiError {
    /// Whether the error says PSI is missing or off here (no pressure file,
    /// or triggers not supported), rather than something being wrong.
    pub fn is_unsupported(&self) -> bool {
        match self {
            PsiError::Open { source, .. } => source.kind() == io::ErrorKind::NotFound,
            PsiError::Write { source, .. } => source.raw_os_error() == Some(libc::EOPNOTSUPP),
            _ => false,
        }
    }
}

/// One trigger on one open pressure file.
#[derive(Debug)]
pub struct PsiTrigger {
    file: File,
    path: PathBuf,
    spec: TriggerSpec,
}

impl PsiTrigger {
    /// Opens `path` (a pressure file) and sets a trigger that fires when
    /// `stall` time reaches `threshold` within `window`.
    pub fn open(
        path: impl Into<PathBuf>,
        stall: Stall,
        threshold: Duration,
        window: Duration,
    ) -> Result<Self, PsiError> {
        let path = path.into();
        let spec = TriggerSpec {
            stall,
            threshold,
            window,
        };
        let value = spec.text();
        if let Err(reason) = spec.check() {
            return Err(PsiError::Invalid {
                path,
                value,
                reason,
            });
        }
        let mut file = match OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => f,
            Err(source) => return Err(PsiError::Open { path, source }),
        };
        // The kernel reads one write and overwrites its last byte with a
        // NUL: send the NUL so that the window's last digit survives.
        let mut bytes = value.clone().into_bytes();
        bytes.push(0);
        let written = loop {
            match file.write(&bytes) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match written {
            Ok(n) if n == bytes.len() => Ok(Self { file, path, spec }),
            Ok(n) => Err(PsiError::Write {
                path,
                value,
                source: io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("{n} of {} bytes written", bytes.len()),
                ),
                hint: "",
            }),
            Err(source) => {
                let hint = write_hint(&source, &spec);
                Err(PsiError::Write {
                    path,
                    value,
                    source,
                    hint,
                })
            }
        }
    }

    /// The pressure file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the trigger asks for.
    pub fn spec(&self) -> TriggerSpec {
        self.spec
    }
}

impl AsFd for PsiTrigger {
    /// The descriptor to poll for `POLLPRI`.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// Whether `us` is a whole number of [`UNPRIVILEGED_WINDOW_STEP`]s.
fn whole_steps(us: u128) -> bool {
    let step = UNPRIVILEGED_WINDOW_STEP.as_micros();
    us / step * step == us
}

/// What the kernel's error to a trigger write usually means.
fn write_hint(e: &io::Error, spec: &TriggerSpec) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EINVAL) if !whole_steps(spec.window.as_micros()) => {
            " (without CAP_SYS_RESOURCE the window must be a multiple of 2 s)"
        }
        Some(libc::EINVAL) => " (irq pressure counts `full` stalls only)",
        Some(libc::EBUSY) => " (this open file already has a trigger)",
        Some(libc::EOPNOTSUPP) => " (PSI is off here: psi=0, or cgroup.pressure is 0)",
        _ => "",
    }
}

/// What one [`PsiWatch::wait`] saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PsiWake<K> {
    /// Keys whose trigger fired.
    pub fired: Vec<K>,
    /// Keys whose file went away (the group was removed): no longer
    /// watched.
    pub gone: Vec<K>,
}

impl<K> Default for PsiWake<K> {
    fn default() -> Self {
        Self {
            fired: Vec::new(),
            gone: Vec::new(),
        }
    }
}

impl<K> PsiWake<K> {
    /// Whether nothing happened (the wait timed out).
    pub fn is_empty(&self) -> bool {
        self.fired.is_empty() && self.gone.is_empty()
    }
}

/// Several triggers, each under a key of the caller's choosing, waited on
/// together.
#[derive(Debug)]
pub struct PsiWatch<K> {
    entries: Vec<(K, PsiTrigger)>,
}

impl<K> Default for PsiWatch<K> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<K: Clone + PartialEq> PsiWatch<K> {
    /// An empty watch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Watches `trigger` under `key`, replacing any trigger under the same
    /// key (which is returned, still open).
    pub fn insert(&mut self, key: K, trigger: PsiTrigger) -> Option<PsiTrigger> {
        let old = self.remove(&key);
        self.entries.push((key, trigger));
        old
    }

    /// Stops watching `key`; returns its trigger (dropping it removes the
    /// trigger from the kernel).
    pub fn remove(&mut self, key: &K) -> Option<PsiTrigger> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(i).1)
    }

    /// The trigger under `key`.
    pub fn get(&self, key: &K) -> Option<&PsiTrigger> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, t)| t)
    }

    /// The keys watched, in insertion order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// How many triggers are watched.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Waits up to `timeout` for triggers to fire or go away; returns as
    /// soon as one does, with every one that did. With no trigger, sleeps
    /// for `timeout`. `Duration::ZERO` does not wait.
    pub fn wait(&mut self, timeout: Duration) -> Result<PsiWake<K>, PsiError> {
        let mut fds: Vec<libc::pollfd> = self
            .entries
            .iter()
            .map(|(_, t)| libc::pollfd {
                fd: t.file.as_raw_fd(),
                events: libc::POLLPRI,
                revents: 0,
            })
            .collect();
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // SAFETY: the pointer and count describe `fds`, which lives for
            // the call (a null pointer is never passed: an empty Vec's
            // pointer is dangling but non-null, and nfds is then 0).
            let rc =
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, poll_ms(left)) };
            if rc >= 0 {
                break;
            }
            let source = io::Error::last_os_error();
            if source.kind() != io::ErrorKind::Interrupted {
                return Err(PsiError::Poll {
                    count: fds.len(),
                    source,
                });
            }
        }
        let mut wake = PsiWake::default();
        let mut i = 0;
        for pfd in &fds {
            let key = self.entries[i].0.clone();
            if pfd.revents & (libc::POLLERR | libc::POLLNVAL | libc::POLLHUP) != 0 {
                // A removed group's file reports POLLERR and POLLPRI: gone,
                // not fired.
                self.entries.remove(i);
                wake.gone.push(key);
                continue;
            }
            if pfd.revents & libc::POLLPRI != 0 {
                wake.fired.push(key);
            }
            i += 1;
        }
        Ok(wake)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(stall: Stall, t_ms: u64, w_ms: u64) -> TriggerSpec {
        TriggerSpec {
            stall,
            threshold: Duration::from_millis(t_ms),
            window: Duration::from_millis(w_ms),
        }
    }

    #[test]
    fn trigger_text_is_in_microseconds() {
        assert_eq!(spec(Stall::Some, 150, 1000).text(), "some 150000 1000000");
        assert_eq!(spec(Stall::Full, 1, 10_000).text(), "full 1000 10000000");
        let odd = TriggerSpec {
            stall: Stall::Some,
            threshold: Duration::from_nanos(1_999),
            window: MIN_WINDOW,
        };
        assert_eq!(odd.text(), "some 1 500000");
    }

    #[test]
    fn windows_and_thresholds_are_checked() {
        assert!(spec(Stall::Some, 100, 500).check().is_ok());
        assert!(spec(Stall::Some, 10_000, 10_000).check().is_ok());
        let e = spec(Stall::Some, 100, 499).check().unwrap_err();
        assert_eq!(e, "window 499000 us is outside 500000 us..10000000 us");
        assert!(spec(Stall::Some, 100, 10_001).check().is_err());
        let e = spec(Stall::Full, 0, 1000).check().unwrap_err();
        assert!(e.contains("zero"), "{e}");
        let sub_us = TriggerSpec {
            threshold: Duration::from_nanos(999),
            ..spec(Stall::Some, 0, 1000)
        };
        assert!(sub_us.check().is_err());
        let e = spec(Stall::Some, 1001, 1000).check().unwrap_err();
        assert_eq!(
            e,
            "threshold 1001000 us is longer than the window 1000000 us"
        );
    }

    #[test]
    fn unprivileged_windows_are_multiples_of_two_seconds() {
        assert!(spec(Stall::Some, 100, 2000).check_unprivileged().is_ok());
        let e = spec(Stall::Some, 100, 1000)
            .check_unprivileged()
            .unwrap_err();
        assert!(e.contains("not a multiple of 2000000 us"), "{e}");
        assert!(spec(Stall::Some, 100, 12_000).check_unprivileged().is_err());
        let w = |ms| unprivileged_window(Duration::from_millis(ms));
        assert_eq!(w(0), Duration::from_secs(2));
        assert_eq!(w(500), Duration::from_secs(2));
        assert_eq!(w(2000), Duration::from_secs(2));
        assert_eq!(w(2001), Duration::from_secs(4));
        assert_eq!(w(60_000), Duration::from_secs(10));
    }

    #[test]
    fn privilege_comes_from_the_effective_capabilities() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(privileged(dir.path()), None);
        std::fs::create_dir(dir.path().join("self")).unwrap();
        let status = dir.path().join("self/status");
        std::fs::write(&status, "CapEff:\t000001fffeffffff\n").unwrap();
        assert_eq!(privileged(dir.path()), Some(false));
        std::fs::write(&status, "CapEff:\t0000000001000000\n").unwrap();
        assert_eq!(privileged(dir.path()), Some(true));
    }

    #[test]
    fn invalid_values_are_refused_before_opening_anything() {
        let e = PsiTrigger::open(
            "/nonexistent/cpu.pressure",
            Stall::Some,
            Duration::from_millis(100),
            Duration::from_secs(11),
        )
        .unwrap_err();
        assert!(matches!(e, PsiError::Invalid { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("/nonexistent/cpu.pressure"), "{msg}");
        assert!(msg.contains("\"some 100000 11000000\""), "{msg}");
        assert!(!e.is_unsupported());
    }

    #[test]
    fn a_missing_file_is_an_open_error_that_means_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let path = Resource::Memory.cgroup_path(dir.path());
        let e = PsiTrigger::open(
            &path,
            Stall::Full,
            Duration::from_millis(100),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(e, PsiError::Open { .. }), "{e}");
        assert!(e.is_unsupported());
        assert!(e.to_string().contains("memory.pressure"), "{e}");
    }

    #[test]
    fn a_refused_write_names_the_file_and_the_value() {
        // /dev/full opens read-write and fails every write with ENOSPC.
        let e = PsiTrigger::open(
            "/dev/full",
            Stall::Some,
            Duration::from_millis(100),
            Duration::from_secs(1),
        )
        .unwrap_err();
        let PsiError::Write {
            path,
            value,
            source,
            ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(path, Path::new("/dev/full"));
        assert_eq!(value, "some 100000 1000000");
        assert_eq!(source.raw_os_error(), Some(libc::ENOSPC));
        assert!(
            e.to_string()
                .starts_with("write PSI trigger \"some 100000 1000000\" to /dev/full: "),
            "{e}"
        );
    }

    #[test]
    fn hints_explain_the_usual_refusals() {
        let einval = io::Error::from_raw_os_error(libc::EINVAL);
        assert!(write_hint(&einval, &spec(Stall::Some, 100, 1000)).contains("multiple of 2 s"));
        assert!(write_hint(&einval, &spec(Stall::Some, 100, 2000)).contains("irq"));
        let busy = io::Error::from_raw_os_error(libc::EBUSY);
        assert!(write_hint(&busy, &spec(Stall::Some, 100, 1000)).contains("already"));
        let off = io::Error::from_raw_os_error(libc::EOPNOTSUPP);
        assert!(write_hint(&off, &spec(Stall::Some, 100, 1000)).contains("psi=0"));
    }

    #[test]
    fn paths_of_system_and_group_files() {
        assert_eq!(
            Resource::Cpu.system_path(Path::new("/proc")),
            Path::new("/proc/pressure/cpu")
        );
        assert_eq!(
            Resource::Io.cgroup_path(Path::new("/sys/fs/cgroup/atoll/web")),
            Path::new("/sys/fs/cgroup/atoll/web/io.pressure")
        );
        assert_eq!(Resource::Irq.as_str(), "irq");
    }

    #[test]
    fn an_empty_watch_just_times_out() {
        let mut w: PsiWatch<u32> = PsiWatch::new();
        assert!(w.is_empty());
        assert!(w.wait(Duration::from_millis(1)).unwrap().is_empty());
    }
}
