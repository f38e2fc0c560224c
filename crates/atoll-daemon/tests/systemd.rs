//! The daemon with the systemd driver, over a fake systemd (no bus, no
//! real cgroup): a unit of the config that names a systemd unit is set
//! through systemd's properties, never by moving its processes; stopping
//! puts the unit's own values back; what systemd refuses is in the status
//! and none of it is made; a restart after a crash takes the bindings over
//! from the state file and still puts back the unit's own values.
//!
//! The machine is `FakeSystemd::v2_machine()` (CPUs 0-3, node 0) with
//! `nginx.service` holding pids 100 and 101; `/proc` is a fake tree with
//! those two; time is a manual clock.

use std::path::Path;
use std::sync::Arc;

use atoll_cgroup::testutils::FakeCgroupFs;
use atoll_cgroup::Cgroup2Backend;
use atoll_core::clock::ManualClock;
use atoll_core::plan::TaskPolicy;
use atoll_core::process::{CgroupMembership, ProcessError, TaskControl};
use atoll_core::topology::{SyntheticShape, Topology};
use atoll_daemon::controller::{Controller, Env, Options};
use atoll_procfs::fake::{FakeProc, FakeProcess};
use atoll_proto::{StatusReport, UnitService};
use atoll_systemd::testutils::FakeSystemd;
use atoll_systemd::value::{ALLOWED_CPUS, CPU_QUOTA, CPU_WEIGHT, MEMORY_HIGH, MEMORY_MAX};
use atoll_systemd::{PropValue, SystemdDriver};

const NGINX: &str = "nginx.service";
const NGINX_CGROUP: &str = "/system.slice/nginx.service";
const GIB: u64 = 1 << 30;

/// Island `web` on CPUs 1-3 (shared), unit `nginx` naming nginx.service.
const CONFIG: &str = r#"
[host]
cpus = "0"

[island.web]
cpus = "1-3"
policy = "fair"

[unit.nginx]
island = "web"
cpus = 1.5
cpu_cap = 2
memory_high = "512M"
memory_max = "1G"
adopt = [{ systemd_unit = "nginx.service" }]
"#;

/// The same platform without the unit.
const WITHOUT_NGINX: &str = r#"
[host]
cpus = "0"

[island.web]
cpus = "1-3"
policy = "fair"
"#;

fn topo() -> Topology {
    Topology::synthetic(SyntheticShape {
        packages: 1,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: 4,
        threads_per_core: 1,
        memory_per_node: 4 << 30,
    })
}

fn u(n: u64) -> PropValue {
    PropValue::U64(n)
}

/// Scheduling policies of nobody: the fake processes have no threads.
struct NoTasks;

impl TaskControl for NoTasks {
    fn set_policy(&mut self, _tid: u32, _policy: TaskPolicy) -> Result<(), ProcessError> {
        Ok(())
    }
    fn policy(&self, _tid: u32) -> Result<TaskPolicy, ProcessError> {
        Ok(TaskPolicy::Other)
    }
}

/// systemd 252 running nginx.service (pids 100 and 101) with a weight of
/// 50 and a 4 GiB limit of its own, and the fake /proc that shows them.
fn machine() -> (FakeSystemd, FakeProc) {
    let sd = FakeSystemd::v2_machine()
        .with_service(NGINX, NGINX_CGROUP, &[100, 101])
        .with_property(NGINX, CPU_WEIGHT, u(50))
        .with_property(NGINX, MEMORY_MAX, u(4 * GIB));
    let proc = FakeProc::new().unwrap();
    for pid in [100, 101] {
        proc.add(
            &FakeProcess::new(pid, "nginx")
                .uid(33)
                .cgroup(&format!("0::{NGINX_CGROUP}\n")),
        )
        .unwrap();
    }
    (sd, proc)
}

/// A daemon over `sd` with the config `text`, its state file in `state`,
/// started (a second call on the same `sd` and `state` is a restart).
fn daemon(
    sd: &FakeSystemd,
    proc: &FakeProc,
    text: &str,
    state: &Path,
) -> (Controller, ManualClock) {
    let topo = topo();
    let spec = atoll_config::parse(text, "test.toml", &topo).unwrap();
    let inner = Cgroup2Backend::new(sd.mount(), "atoll", sd.fs().clone()).unwrap();
    let driver: SystemdDriver<Cgroup2Backend<FakeCgroupFs>> = sd.driver(inner);
    let clock = ManualClock::new();
    let env = Env {
        backend: Box::new(driver),
        procs: Box::new(proc.proc_fs()),
        tasks: Box::new(NoTasks),
        system: Box::new(proc.proc_fs()),
        clock: Arc::new(clock.clone()),
    };
    let opts = Options {
        state_dir: Some(state.to_path_buf()),
        self_origin: CgroupMembership::parse("0::/system.slice/atoll.service\n").unwrap(),
        self_pid: 1,
        topology: topo,
    };
    let mut c = Controller::new(env, spec, opts);
    c.start().unwrap();
    (c, clock)
}

fn epochs(c: &mut Controller, clock: &ManualClock, k: usize) {
    for _ in 0..k {
        clock.advance(c.epoch_len());
        c.epoch();
    }
}

fn nginx_service(s: &StatusReport) -> UnitService {
    let u = s.units.iter().find(|u| u.name == "nginx").unwrap();
    u.service.clone().expect("nginx is a unit of systemd's")
}

fn nginx_pids(sd: &FakeSystemd) -> String {
    sd.fs()
        .get(&sd.cgroup_dir(NGINX).unwrap().join("cgroup.procs"))
}

/// CPUs 1-3 as systemd's bitmask.
fn web_cpus() -> PropValue {
    PropValue::Bytes(vec![0b1110])
}

/// nginx's own values, as before atoll came.
fn assert_own_values(sd: &FakeSystemd) {
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(50)));
    assert_eq!(sd.property(NGINX, MEMORY_MAX), Some(u(4 * GIB)));
    assert_eq!(sd.property(NGINX, MEMORY_HIGH), Some(u(u64::MAX)));
    assert_eq!(sd.property(NGINX, CPU_QUOTA), Some(u(u64::MAX)));
    let cpus = sd.property(NGINX, ALLOWED_CPUS);
    assert!(
        cpus.is_none() || cpus == Some(PropValue::Bytes(Vec::new())),
        "{cpus:?}"
    );
}

/// atoll's values for unit nginx.
fn assert_atolls_values(sd: &FakeSystemd) {
    assert_eq!(sd.property(NGINX, ALLOWED_CPUS), Some(web_cpus()));
    assert_eq!(sd.property(NGINX, MEMORY_HIGH), Some(u(GIB / 2)));
    assert_eq!(sd.property(NGINX, MEMORY_MAX), Some(u(GIB)));
    assert_eq!(
        sd.property(NGINX, CPU_QUOTA),
        Some(u(2_000_000)),
        "cpu_cap = 2: two CPUs' time per second"
    );
    let weight = sd.property(NGINX, CPU_WEIGHT);
    assert!(
        matches!(weight, Some(PropValue::U64(w)) if (1..=10_000).contains(&w) && w != 50),
        "{weight:?}"
    );
}

#[test]
fn a_systemd_unit_is_set_through_systemd_and_its_own_values_come_back_at_stop() {
    let (sd, proc) = machine();
    let state = tempfile::tempdir().unwrap();
    let (mut c, clock) = daemon(&sd, &proc, CONFIG, state.path());
    assert_atolls_values(&sd);
    let calls = sd.calls_of("SetUnitProperties");
    assert_eq!(calls.len(), 1, "all of it in one call: {calls:?}");
    assert!(calls[0].starts_with("SetUnitProperties nginx.service "));
    // The cgroup files are systemd's writing (the fake's), not atoll's.
    let dir = sd.cgroup_dir(NGINX).unwrap();
    assert_eq!(sd.fs().get(&dir.join("cpuset.cpus")).trim(), "1-3");
    assert_eq!(sd.fs().get(&dir.join("cpu.max")).trim(), "200000 100000");

    epochs(&mut c, &clock, 20);
    let s = c.status();
    assert_eq!(s.backend, "cgroup2");
    assert_eq!(s.service_manager.as_deref(), Some("systemd 252"));
    let service = nginx_service(&s);
    assert!(service.bound && service.problem.is_none(), "{service:?}");
    let unit = s.units.iter().find(|u| u.name == "nginx").unwrap();
    assert_eq!(unit.pids, [100, 101], "read from the unit's cgroup");
    // Nothing of nginx's moved, nothing of it is atoll's to give back, and
    // atoll's tree has no group for it.
    assert_eq!(nginx_pids(&sd), "100\n101\n");
    assert!(c.registry().managed(100).is_none() && c.registry().managed(101).is_none());
    assert!(!sd.mount().join("atoll/web/nginx").exists());

    sd.take_calls();
    c.teardown().unwrap();
    assert_own_values(&sd);
    assert_eq!(
        sd.calls_of("SetUnitProperties").len(),
        1,
        "put back in one call"
    );
    assert_eq!(nginx_pids(&sd), "100\n101\n", "nginx keeps its processes");
    assert!(!sd.mount().join("atoll").exists());
    assert!(
        !state.path().join("state.json").exists(),
        "nothing left to put back: {:?}",
        std::fs::read_dir(state.path()).unwrap().collect::<Vec<_>>()
    );
}

#[test]
fn a_refusal_is_in_the_status_and_nothing_of_it_is_made() {
    let (sd, proc) = machine();
    sd.refuse(MEMORY_MAX, "Value out of range");
    let state = tempfile::tempdir().unwrap();
    // The daemon starts: a refusal of systemd's is not bad input.
    let (mut c, clock) = daemon(&sd, &proc, CONFIG, state.path());
    let service = nginx_service(&c.status());
    assert!(service.bound, "{service:?}");
    let problem = service.problem.expect("the refusal is shown");
    assert!(
        problem.contains("systemd 252 refused")
            && problem.contains("MemoryMax")
            && problem.contains("Value out of range"),
        "{problem}"
    );
    // All or nothing: the other properties of that change were not made.
    assert_own_values(&sd);
    assert!(c.decisions().query(None, 10_000).iter().any(|d| matches!(
        &d.why,
        atoll_core::decision::Reason::KernelRefused { error } if error.contains("MemoryMax")
    )));

    // systemd takes it now: the write is tried again and the problem ends.
    sd.clear_refusals();
    let mut k = 0;
    while nginx_service(&c.status()).problem.is_some() {
        assert!(k < 2_000, "never tried again");
        epochs(&mut c, &clock, 1);
        k += 1;
    }
    assert_atolls_values(&sd);
    c.teardown().unwrap();
    assert_own_values(&sd);
}

#[test]
fn a_restart_after_a_crash_takes_the_binding_over_and_still_puts_back() {
    let (sd, proc) = machine();
    let state = tempfile::tempdir().unwrap();
    let (mut c, clock) = daemon(&sd, &proc, CONFIG, state.path());
    epochs(&mut c, &clock, 5);
    assert_atolls_values(&sd);
    // SIGKILL: no teardown; the state file stays, nginx keeps atoll's
    // values.
    drop(c);
    assert_atolls_values(&sd);
    sd.take_calls();

    let (mut c, clock) = daemon(&sd, &proc, CONFIG, state.path());
    epochs(&mut c, &clock, 5);
    assert_atolls_values(&sd);
    assert!(
        sd.calls_of("SetUnitProperties").is_empty(),
        "the same values again need no call: {:?}",
        sd.calls()
    );
    let s = c.status();
    assert!(nginx_service(&s).bound);
    assert!(
        s.warnings.iter().all(|w| !w.contains("without a record")),
        "nginx's processes are not taken for atoll's: {:?}",
        s.warnings
    );
    assert!(c.registry().managed(100).is_none());
    // Another crash, then a start with a config that no longer names
    // nginx: its own values come back at once (the originals of the first
    // run, not atoll's values).
    drop(c);
    let (mut c, _clock) = daemon(&sd, &proc, WITHOUT_NGINX, state.path());
    assert_own_values(&sd);
    assert!(c.status().units.is_empty());
    c.teardown().unwrap();
    assert_own_values(&sd);
    assert_eq!(nginx_pids(&sd), "100\n101\n");
}

#[test]
fn a_reload_that_drops_the_unit_puts_back_and_one_that_brings_it_binds_again() {
    let (sd, proc) = machine();
    let state = tempfile::tempdir().unwrap();
    let (mut c, clock) = daemon(&sd, &proc, CONFIG, state.path());
    assert_atolls_values(&sd);
    let topo = topo();
    c.reload(atoll_config::parse(WITHOUT_NGINX, "test.toml", &topo).unwrap())
        .unwrap();
    assert_own_values(&sd);
    assert!(c.status().units.is_empty());
    assert_eq!(nginx_pids(&sd), "100\n101\n", "nginx keeps its processes");
    epochs(&mut c, &clock, 5);
    assert_own_values(&sd);

    // Back, with a refusal: the reload stands, the refusal is shown, and
    // none of it is made.
    sd.refuse(CPU_QUOTA, "Invalid quota");
    let changes = c
        .reload(atoll_config::parse(CONFIG, "test.toml", &topo).unwrap())
        .unwrap();
    assert!(!changes.is_empty());
    let service = nginx_service(&c.status());
    assert!(
        service.bound
            && service
                .problem
                .as_deref()
                .is_some_and(|p| p.contains("Invalid quota")),
        "{service:?}"
    );
    assert_own_values(&sd);
    sd.clear_refusals();
    let mut k = 0;
    while nginx_service(&c.status()).problem.is_some() {
        assert!(k < 2_000, "never tried again");
        epochs(&mut c, &clock, 1);
        k += 1;
    }
    assert_atolls_values(&sd);
    c.teardown().unwrap();
    assert_own_values(&sd);
}
