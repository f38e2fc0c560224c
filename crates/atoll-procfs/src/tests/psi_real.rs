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
