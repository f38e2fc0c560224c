//! Scopes, processes, monitoring bound groups, and unbound groups being
//! the inner backend's.

use atoll_cgroup::testutils::FakeCgroupFs;
use atoll_cgroup::{Cgroup2Backend, CgroupFs as _};
use atoll_core::backend::{Actuator, BackendError, External, FreezeState, Monitor, StatSelect};
use atoll_core::plan::{GroupPath, GroupSettings};
use atoll_core::process::CgroupMembership;

use crate::driver::tests::{cpus, driver, g, setup, u, NGINX};
use crate::testutils::FakeSystemd;
use crate::value::{ALLOWED_CPUS, CPU_WEIGHT};
use crate::PropValue;

const SCOPE: &str = "atoll-web-job.scope";

fn job() -> GroupPath {
    g("web/job")
}

fn scope_setup() -> (FakeSystemd, crate::driver::tests::Driver) {
    let (sd, mut d) = setup();
    d.bind(&job(), &External::Scope(SCOPE.into())).unwrap();
    (sd, d)
}

fn origin(path: &str) -> CgroupMembership {
    CgroupMembership::parse(&format!("0::{path}\n")).unwrap()
}

#[test]
fn a_scope_is_born_confined_with_its_first_process_and_later_ones_attach() {
    let (sd, mut d) = scope_setup();
    let s = GroupSettings {
        cpu_weight: Some(30),
        ..Default::default()
    };
    assert!(d.apply(&job(), &s).unwrap().is_empty());
    assert!(sd.calls().is_empty(), "nothing to start before a process");
    assert!(d.exists(&job()), "ready for its first process");
    assert!(d.processes(&job()).unwrap().is_empty());
    assert_eq!(d.stats(&job()).unwrap(), Default::default());

    d.move_process(500, &job()).unwrap();
    let starts = sd.calls_of("StartTransientUnit");
    assert_eq!(starts.len(), 1);
    for part in [
        "AllowedCPUs=0-1",
        "CPUWeight=30",
        "PIDs=500",
        "Slice=atoll.slice",
        "Delegate=yes",
    ] {
        assert!(starts[0].contains(part), "{part} in {}", starts[0]);
    }
    let dir = sd.cgroup_dir(SCOPE).unwrap();
    assert_eq!(dir, sd.mount().join("atoll.slice").join(SCOPE));
    assert_eq!(sd.fs().get(&dir.join("cpu.weight")).trim(), "30");
    assert_eq!(sd.fs().get(&dir.join("cpuset.cpus")).trim(), "0-1");

    d.move_process(501, &job()).unwrap();
    assert_eq!(
        sd.calls_of("AttachProcessesToUnit"),
        ["AttachProcessesToUnit atoll-web-job.scope 501"]
    );
    assert_eq!(d.processes(&job()).unwrap(), [500, 501]);

    // Later settings go to the running scope, only what changed.
    sd.take_calls();
    d.apply(
        &job(),
        &GroupSettings {
            cpu_weight: Some(60),
            ..s.clone()
        },
    )
    .unwrap();
    assert_eq!(
        sd.calls_of("SetUnitProperties"),
        ["SetUnitProperties atoll-web-job.scope CPUWeight=60"]
    );

    // It ends with its last process; the next process starts it again,
    // with the settings last applied.
    sd.fs().kill(500);
    sd.fs().kill(501);
    sd.fs().kill(503);
    assert!(matches!(
        d.move_process(503, &job()),
        Err(BackendError::NoProcess(503))
    ));
    d.move_process(502, &job()).unwrap();
    let starts = sd.calls_of("StartTransientUnit");
    assert_eq!(starts.len(), 2, "{:?}", sd.calls());
    assert!(starts[1].contains("CPUWeight=60"), "{}", starts[1]);
    assert_eq!(d.processes(&job()).unwrap(), [502]);
}

#[test]
fn scopes_are_left_to_their_processes_when_the_binding_ends() {
    let (sd, mut d) = scope_setup();
    d.apply(
        &job(),
        &GroupSettings {
            cpu_weight: Some(30),
            ..Default::default()
        },
    )
    .unwrap();
    d.move_process(500, &job()).unwrap();
    let lines = d.release().unwrap();
    assert!(lines.iter().all(|l| !l.contains(SCOPE)), "{lines:?}");
    assert!(sd.calls_of("StopUnit").is_empty());
    assert!(
        sd.has_unit(SCOPE),
        "atoll never stops a scope: that would kill"
    );
    assert_eq!(sd.property(SCOPE, CPU_WEIGHT), Some(u(30)));
    assert!(d.bindings().is_empty());
}

#[test]
fn a_scope_of_the_name_already_running_is_joined() {
    let (sd, mut d) = scope_setup();
    sd.add_scope(SCOPE, "atoll.slice", &[600]);
    d.apply(
        &job(),
        &GroupSettings {
            cpu_weight: Some(70),
            ..Default::default()
        },
    )
    .unwrap();
    d.move_process(601, &job()).unwrap();
    assert!(sd
        .calls_of("StartTransientUnit")
        .iter()
        .all(|c| !c.contains("601")));
    assert_eq!(d.processes(&job()).unwrap(), [600, 601]);
    assert_eq!(sd.property(SCOPE, CPU_WEIGHT), Some(u(70)));
    assert!(d.binding(&job()).unwrap().started);
}

#[test]
fn processes_of_a_unit_are_systemds() {
    let (sd, mut d) = setup();
    let e = d.move_process(100, &g("web/nginx")).unwrap_err();
    assert!(e.to_string().contains("systemd places"), "{e}");
    // Giving back a process of nginx leaves it there, and says so.
    sd.take_calls();
    let e = d.restore_process(100, &origin("/user.slice")).unwrap_err();
    assert!(e.to_string().contains("atoll never moves it"), "{e}");
    assert!(sd.calls_of("AttachProcessesToUnit").is_empty());
    let dir = sd.cgroup_dir(NGINX).unwrap();
    assert!(sd.fs().get(&dir.join("cgroup.procs")).contains("100"));
}

#[test]
fn restoring_a_process_of_a_scope_asks_systemd_or_leaves_it() {
    let (sd, mut d) = scope_setup();
    sd.add_service(
        "session-1.scope",
        "/user.slice/user-1000.slice/session-1.scope",
        &[900],
    );
    sd.add_service(
        "user@1000.service",
        "/user.slice/user-1000.slice/user@1000.service",
        &[901],
    );
    let sd = sd.with_delegate("user@1000.service");
    d.apply(&g("web/api"), &GroupSettings::default()).unwrap();
    for pid in [500, 501, 502, 503] {
        d.move_process(pid, &job()).unwrap();
    }
    // A session scope is not delegated: systemd refuses, the process stays.
    let e = d
        .restore_process(500, &origin("/user.slice/user-1000.slice/session-1.scope"))
        .unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("stays in scope atoll-web-job.scope") && s.contains("non-delegated"),
        "{s}"
    );
    // The root or a slice is no unit's cgroup at all.
    assert!(d.restore_process(503, &origin("/")).is_err());
    // A delegated unit: systemd moves it, below the unit where it was.
    d.restore_process(
        501,
        &origin("/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope"),
    )
    .unwrap();
    assert_eq!(
        sd.calls_of("AttachProcessesToUnit")
            .last()
            .map(String::as_str),
        Some("AttachProcessesToUnit user@1000.service/app.slice/term.scope 501")
    );
    let user = sd.cgroup_dir("user@1000.service").unwrap();
    assert_eq!(
        sd.fs().get(&user.join("app.slice/term.scope/cgroup.procs")),
        "501\n"
    );
    // From atoll's own tree: atoll moves it itself.
    d.restore_process(502, &origin("/atoll/web/api")).unwrap();
    assert_eq!(d.processes(&g("web/api")).unwrap(), [502]);
    assert_eq!(d.processes(&job()).unwrap(), [500, 503]);
    // Which group a process is in: the scope's, at any depth, or the inner
    // backend's answer.
    assert_eq!(
        d.group_of(&origin(&format!("/atoll.slice/{SCOPE}"))),
        Some(job())
    );
    assert_eq!(
        d.group_of(&origin(&format!("/atoll.slice/{SCOPE}/sub"))),
        Some(job())
    );
    assert_eq!(d.group_of(&origin(&format!("/atoll.slice/{SCOPE}x"))), None);
    assert_eq!(d.group_of(&origin("/atoll/web/api")), Some(g("web/api")));
    assert_eq!(
        d.group_of(&origin("/system.slice/nginx.service/worker")),
        Some(g("web/nginx"))
    );
    assert_eq!(d.group_of(&origin("/user.slice")), None);
}

#[test]
fn the_monitor_reads_the_units_cgroup_at_any_depth() {
    let (sd, mut d) = setup();
    let dir = sd.cgroup_dir(NGINX).unwrap();
    // A sub-cgroup of the unit's own (nginx delegating to a worker).
    sd.fs().mkdir(&dir.join("worker")).unwrap();
    sd.fs().set(&dir.join("worker/cgroup.procs"), "102\n");
    sd.fs().set(
        &dir.join("cpu.stat"),
        "usage_usec 900\nnr_periods 4\nnr_throttled 1\nthrottled_usec 20\n",
    );
    sd.fs().set(&dir.join("memory.current"), "8192");
    assert!(d.exists(&g("web/nginx")));
    assert_eq!(d.processes(&g("web/nginx")).unwrap(), [100, 101, 102]);
    assert_eq!(
        d.processes_anywhere(&g("web/nginx")).unwrap(),
        [100, 101, 102]
    );
    let s = d.stats(&g("web/nginx")).unwrap();
    assert_eq!(
        (s.cpu_usage_us, s.nr_throttled, s.memory_current),
        (Some(900), Some(1), Some(8192))
    );
    let cpu = d.stats_of(&g("web/nginx"), StatSelect::CPU).unwrap();
    assert_eq!(cpu.memory_current, None);
    assert_eq!(
        d.freeze_state(&g("web/nginx")).unwrap(),
        Some(FreezeState::Thawed)
    );
    d.apply(
        &g("web/nginx"),
        &GroupSettings {
            frozen: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        d.freeze_state(&g("web/nginx")).unwrap(),
        Some(FreezeState::Frozen)
    );
    // Not a group of atoll's tree: its island does not list it.
    assert!(d.children(&g("web/nginx")).unwrap().is_empty());
    assert!(d.exists(&g("web")));
    assert!(d.children(&g("web")).unwrap().is_empty());

    // Stopped: no cgroup, so nothing to read, and no error.
    sd.stop(NGINX);
    assert!(!d.exists(&g("web/nginx")));
    assert!(d.processes(&g("web/nginx")).unwrap().is_empty());
    assert_eq!(d.stats(&g("web/nginx")).unwrap(), Default::default());
    assert_eq!(d.freeze_state(&g("web/nginx")).unwrap(), None);
    // Started again: found again, with atoll's settings still on it.
    sd.start(NGINX, &[110]);
    assert!(d.exists(&g("web/nginx")));
    assert_eq!(d.processes(&g("web/nginx")).unwrap(), [110]);
    assert_eq!(
        sd.property(NGINX, ALLOWED_CPUS),
        Some(PropValue::Bytes(vec![3]))
    );
}

#[test]
fn a_stopped_units_cgroup_is_asked_for_at_most_once_per_refresh() {
    let sd = FakeSystemd::v2_machine().with_service(NGINX, "/system.slice/nginx.service", &[100]);
    let inner = Cgroup2Backend::new(sd.mount(), "atoll", sd.fs().clone()).unwrap();
    let opts = crate::Options {
        refresh: std::time::Duration::from_secs(3600),
        ..sd.options()
    };
    let mut d = sd.driver_with(inner, opts);
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    assert!(d.exists(&g("web/nginx")));
    sd.stop(NGINX);
    sd.take_calls();
    for _ in 0..5 {
        assert!(!d.exists(&g("web/nginx")));
        assert!(d.processes(&g("web/nginx")).unwrap().is_empty());
    }
    assert_eq!(sd.calls_of("LoadUnit").len(), 1, "{:?}", sd.calls());
    // The same cgroup comes back when it restarts: no call needed.
    sd.start(NGINX, &[101]);
    assert_eq!(d.processes(&g("web/nginx")).unwrap(), [101]);
}

/// Runs the same calls on a plain cgroup2 backend and on the driver (with
/// a bound group beside them) over two fresh fakes: the files written and
/// the answers are the same.
#[test]
fn unbound_groups_are_exactly_the_inner_backends() {
    fn run(with_driver: bool) -> (Vec<(String, String)>, Vec<String>) {
        let sd =
            FakeSystemd::v2_machine().with_service(NGINX, "/system.slice/nginx.service", &[100]);
        let inner = Cgroup2Backend::new(sd.mount(), "atoll", sd.fs().clone()).unwrap();
        let mut b: Box<dyn atoll_core::backend::Backend> = if with_driver {
            let mut d = sd.driver(inner);
            d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
                .unwrap();
            Box::new(d)
        } else {
            Box::new(inner)
        };
        sd.fs().take_writes();
        let mut answers = Vec::new();
        let root = GroupSettings {
            cpus: cpus("0-3"),
            mems: cpus("0"),
            ..Default::default()
        };
        answers.push(format!("{:?}", b.apply(&GroupPath::root(), &root)));
        let api = GroupSettings {
            cpu_weight: Some(300),
            cpu_idle: true,
            frozen: true,
            ..Default::default()
        };
        answers.push(format!("{:?}", b.apply(&g("web"), &root)));
        answers.push(format!("{:?}", b.apply(&g("web/api"), &api)));
        answers.push(format!("{:?}", b.move_process(100, &g("web/api"))));
        answers.push(format!("{:?}", b.processes(&g("web/api"))));
        answers.push(format!("{:?}", b.stats(&g("web/api"))));
        answers.push(format!("{:?}", b.freeze_state(&g("web/api"))));
        answers.push(format!(
            "{:?}",
            b.restore_process(100, &origin("/system.slice/nginx.service"))
        ));
        answers.push(format!("{:?}", b.remove(&g("web/api"))));
        answers.push(format!("{:?}", b.exists(&g("web/api"))));
        let writes = sd
            .fs()
            .take_writes()
            .into_iter()
            .map(|(p, v)| (p.strip_prefix(sd.mount()).unwrap().display().to_string(), v))
            .collect();
        (writes, answers)
    }
    let plain = run(false);
    let driven = run(true);
    assert!(!plain.0.is_empty());
    assert_eq!(plain, driven);
}

#[test]
fn fake_filesystem_is_shared_by_the_fake_and_the_driver() {
    // The daemon's tests build both from one FakeCgroupFs.
    let (fs, mount) = FakeCgroupFs::v2_machine(&["cpuset", "cpu", "io", "memory"]);
    let sd = FakeSystemd::new(fs.clone(), &mount).with_service(
        "db.service",
        "/system.slice/db.service",
        &[7],
    );
    let mut d = driver(&sd);
    d.bind(&g("x/db"), &External::SystemdUnit("db.service".into()))
        .unwrap();
    assert_eq!(d.processes(&g("x/db")).unwrap(), [7]);
    assert!(fs.exists(&mount.join("system.slice/db.service/cgroup.procs")));
}
