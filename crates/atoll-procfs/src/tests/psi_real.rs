//! PSI triggers against the running kernel. The tests skip (with a printed
//! reason) when not root or when PSI is missing. That a trigger does not
//! fire without pressure is not tested: other work on the machine may
//! cause pressure at any time.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::is_root;
use crate::psi::{privileged, unprivileged_window, PsiTrigger, PsiWatch, Resource, Stall};

/// `window`, or the shortest window this process may use if it lacks
/// `CAP_SYS_RESOURCE` (root here may).
fn allowed(window: Duration) -> Duration {
    if privileged(Path::new("/proc")) == Some(true) {
        window
    } else {
        unprivileged_window(window)
    }
}

#[test]
fn cpu_trigger_fires_under_cpu_hogs() {
    if !is_root() {
        eprintln!("skipped: not root");
        return;
    }
    let path = Resource::Cpu.system_path(Path::new("/proc"));
    if !path.exists() {
        eprintln!(
            "skipped: no {} (kernel without PSI, or psi=0)",
            path.display()
        );
        return;
    }
    let window = allowed(Duration::from_millis(500));
    let trigger = PsiTrigger::open(&path, Stall::Some, Duration::from_millis(50), window)
        .expect("set a trigger on /proc/pressure/cpu");
    let mut watch = PsiWatch::new();
    watch.insert("cpu", trigger);
    // Twice as many busy threads as CPUs: half of them wait at any time.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..2 * cpus.max(2))
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) && start.elapsed() < 3 * window {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        })
        .collect();
    let deadline = Instant::now() + 4 * window;
    let mut fired = false;
    while !fired && Instant::now() < deadline {
        let wake = watch.wait(Duration::from_millis(500)).expect("wait");
        assert!(wake.gone.is_empty(), "{wake:?}");
        fired = wake.fired.contains(&"cpu");
    }
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
    assert!(
        fired,
        "no POLLPRI while {} threads spun on {cpus} CPUs (window {window:?})",
        2 * cpus.max(2)
    );
}

/// The first cgroup2 mount in this process's mountinfo.
fn cgroup2_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mount = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next()? == "cgroup2").then(|| PathBuf::from(mount))
    })
}

/// An empty cgroup2 group, removed on drop if the test did not.
struct Group(PathBuf);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_removed_group_is_gone_not_fired() {
    if !is_root() {
        eprintln!("skipped: not root");
        return;
    }
    let Some(mount) = cgroup2_mount() else {
        eprintln!("skipped: no cgroup2 mount");
        return;
    };
    // An empty group: nothing is moved into it.
    let group = Group(mount.join(format!("atoll-psi-test-{}", std::process::id())));
    if let Err(e) = std::fs::create_dir(&group.0) {
        eprintln!("skipped: mkdir {}: {e}", group.0.display());
        return;
    }
    let cpu = Resource::Cpu.cgroup_path(&group.0);
    if !cpu.exists() {
        eprintln!("skipped: no {} (PSI off for cgroups)", cpu.display());
        return;
    }
    let (t, w) = (Duration::from_millis(100), allowed(Duration::from_secs(1)));
    let mut watch = PsiWatch::new();
    watch.insert("cg-cpu", PsiTrigger::open(&cpu, Stall::Some, t, w).unwrap());
    let mem = Resource::Memory.cgroup_path(&group.0);
    watch.insert("cg-mem", PsiTrigger::open(&mem, Stall::Full, t, w).unwrap());
    // One that stays: the machine-wide file.
    let system = Resource::Memory.system_path(Path::new("/proc"));
    watch.insert(
        "system",
        PsiTrigger::open(&system, Stall::Full, t, w).unwrap(),
    );
    // The group goes away while the watch waits.
    let dir = group.0.clone();
    let remover = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        std::fs::remove_dir(&dir)
    });
    let mut gone = Vec::new();
    let mut waits = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while gone.len() < 2 && Instant::now() < deadline {
        let wake = watch.wait(Duration::from_secs(2)).unwrap();
        waits += 1;
        for k in &wake.fired {
            assert!(!wake.gone.contains(k), "{k} both fired and gone");
        }
        gone.extend(wake.gone);
    }
    remover.join().unwrap().expect("rmdir the empty group");
    eprintln!("gone after {waits} wait(s)");
    gone.sort_unstable();
    assert_eq!(gone, ["cg-cpu", "cg-mem"]);
    assert_eq!(watch.keys().copied().collect::<Vec<_>>(), ["system"]);
}

/// A busy shell loop, killed and reaped on drop.
struct Spinner(std::process::Child);

impl Spinner {
    /// A spinner pinned to `cpu`.
    fn pinned(cpu: usize) -> Self {
        let child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("spawn sh");
        // SAFETY: `set` is a zeroed cpu_set_t we own; CPU_SET writes within
        // it; sched_setaffinity reads `size_of` bytes of it.
        let rc = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(
                child.id() as libc::pid_t,
                std::mem::size_of::<libc::cpu_set_t>(),
                &set,
            )
        };
        let s = Self(child);
        assert_eq!(
            rc,
            0,
            "pin the spinner: {}",
            std::io::Error::last_os_error()
        );
        s
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_group_watch_fires_for_a_group_waiting_for_its_cpu() {
    use atoll_core::plan::GroupPath;
    use atoll_core::pressure::{PressureWatch, StallTrigger};

    use crate::psi_watch::PsiGroupWatch;

    if !is_root() {
        eprintln!("skipped: not root");
        return;
    }
    let Some(mut watch) = PsiGroupWatch::open(Path::new("/proc")) else {
        eprintln!("skipped: no /proc/pressure/cpu");
        return;
    };
    let Some(mount) = cgroup2_mount() else {
        eprintln!("skipped: no cgroup2 mount");
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let group = Group(mount.join(format!(
        "atoll-psi-watch-test-{}-{nanos}",
        std::process::id()
    )));
    if let Err(e) = std::fs::create_dir(&group.0) {
        eprintln!("skipped: mkdir {}: {e}", group.0.display());
        return;
    }
    let file = Resource::Cpu.cgroup_path(&group.0);
    if !file.exists() {
        eprintln!("skipped: no {} (PSI off for cgroups)", file.display());
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = cpus - 1;
    {
        // One spinner in the group and one outside it, on the same CPU: the
        // group's task waits for it about half the time.
        let inside = Spinner::pinned(cpu);
        let _outside = Spinner::pinned(cpu);
        std::fs::write(group.0.join("cgroup.procs"), inside.0.id().to_string())
            .expect("move the spinner into the group");
        let key = GroupPath::from_relative("web/api");
        let window = watch.min_window();
        let trigger = StallTrigger::percent_of(10.0, window);
        watch.arm(&key, &file, trigger).expect("arm");
        let deadline = Instant::now() + 3 * window + Duration::from_secs(2);
        let mut fired = false;
        while !fired && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            let wake = watch.poll().expect("poll");
            assert!(wake.gone.is_empty(), "{wake:?}");
            fired = wake.fired.contains(&key);
        }
        assert!(
            fired,
            "no trigger {trigger:?} on {} while two spinners shared CPU {cpu}",
            file.display()
        );
        watch.disarm(&key);
        assert_eq!(watch.armed(), 0);
    }
    // The spinners are reaped: the group is empty and goes on drop.
}
