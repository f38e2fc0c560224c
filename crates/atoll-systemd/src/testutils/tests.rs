use atoll_cgroup::CgroupFs as _;

use super::*;
use crate::value::{CPU_WEIGHT, IO_READ_BPS, MEMORY_MAX};

fn u(n: u64) -> PropValue {
    PropValue::U64(n)
}

fn nginx() -> FakeSystemd {
    FakeSystemd::v2_machine().with_service(
        "nginx.service",
        "/system.slice/nginx.service",
        &[10, 11],
    )
}

#[test]
fn services_have_cgroups_with_their_processes() {
    let sd = nginx();
    let dir = sd.cgroup_dir("nginx.service").unwrap();
    assert_eq!(dir, sd.mount().join("system.slice/nginx.service"));
    assert_eq!(sd.fs().get(&dir.join("cgroup.procs")), "10\n11\n");
    assert!(
        sd.fs().exists(&dir.join("cpu.weight")),
        "slices enable the controllers"
    );
    let info = sd.unit("nginx.service").unwrap();
    assert_eq!(info.control_group, "/system.slice/nginx.service");
    assert!(info.is_loaded() && info.is_active());
    assert_eq!(sd.unit("nope.service").unwrap().load_state, "not-found");
    sd.stop("nginx.service");
    assert!(!sd.fs().exists(&dir));
    assert_eq!(sd.unit("nginx.service").unwrap().control_group, "");
    sd.start("nginx.service", &[12]);
    assert_eq!(sd.fs().get(&dir.join("cgroup.procs")), "12\n");
}

#[test]
fn properties_are_checked_together_and_written_to_the_cgroup() {
    let sd = nginx();
    let dir = sd.cgroup_dir("nginx.service").unwrap();
    sd.refuse(MEMORY_MAX, "no");
    let props = vec![
        (CPU_WEIGHT.to_string(), u(300)),
        (MEMORY_MAX.to_string(), u(1 << 30)),
    ];
    let e = sd.set_properties("nginx.service", &props).unwrap_err();
    assert_eq!(e.to_string(), "no (org.freedesktop.DBus.Error.InvalidArgs)");
    assert_eq!(
        sd.property("nginx.service", CPU_WEIGHT),
        Some(u(u64::MAX)),
        "nothing applied"
    );
    sd.clear_refusals();
    sd.set_properties("nginx.service", &props).unwrap();
    assert_eq!(sd.fs().get(&dir.join("cpu.weight")).trim(), "300");
    assert_eq!(
        sd.fs().get(&dir.join("memory.max")).trim(),
        (1u64 << 30).to_string()
    );
    let limits = PropValue::DeviceLimits(vec![("/dev/block/8:0".into(), 1000)]);
    sd.set_properties("nginx.service", &[(IO_READ_BPS.to_string(), limits)])
        .unwrap();
    assert_eq!(
        sd.fs().get(&dir.join("io.max")).trim(),
        "8:0 rbps=1000 wbps=max riops=max wiops=max"
    );
    sd.set_properties(
        "nginx.service",
        &[(IO_READ_BPS.to_string(), PropValue::DeviceLimits(vec![]))],
    )
    .unwrap();
    assert_eq!(sd.fs().get(&dir.join("io.max")).trim(), "");
    assert_eq!(
        sd.calls_of("SetUnitProperties").len(),
        4,
        "{:?}",
        sd.calls()
    );
}

#[test]
fn old_versions_refuse_new_properties_and_methods() {
    let sd = nginx().with_version(243);
    let e = sd
        .set_properties(
            "nginx.service",
            &[("AllowedCPUs".into(), PropValue::Bytes(vec![1]))],
        )
        .unwrap_err();
    assert_eq!(
        e.name(),
        Some("org.freedesktop.DBus.Error.PropertyReadOnly")
    );
    assert!(sd.freeze("nginx.service").is_err());
    let sd = nginx().with_version(252);
    sd.freeze("nginx.service").unwrap();
    assert!(sd.is_frozen("nginx.service"));
    sd.thaw("nginx.service").unwrap();
    assert!(!sd.is_frozen("nginx.service"));
}

#[test]
fn scopes_start_attach_only_when_delegated_and_end_with_their_processes() {
    let sd = nginx();
    let props = |delegate: bool, pid: u32| {
        vec![
            ("PIDs".to_string(), PropValue::Pids(vec![pid])),
            ("Slice".into(), PropValue::Str("atoll.slice".into())),
            ("Delegate".into(), PropValue::Bool(delegate)),
            (CPU_WEIGHT.into(), u(50)),
        ]
    };
    sd.start_scope("a.scope", &props(false, 20)).unwrap();
    let dir = sd.cgroup_dir("a.scope").unwrap();
    assert_eq!(dir, sd.mount().join("atoll.slice/a.scope"));
    assert_eq!(sd.fs().get(&dir.join("cpu.weight")).trim(), "50");
    let e = sd.attach("a.scope", "", &[21]).unwrap_err();
    assert!(e.to_string().contains("non-delegated"), "{e}");
    assert_eq!(
        sd.start_scope("a.scope", &props(true, 21))
            .unwrap_err()
            .name(),
        Some(UNIT_EXISTS)
    );
    sd.fs().kill(20);
    assert!(
        !sd.unit("a.scope").unwrap().is_loaded(),
        "an empty scope ends"
    );
    assert!(sd
        .start_scope("a.scope", &props(true, 20))
        .unwrap_err()
        .is_no_process());
    sd.start_scope("a.scope", &props(true, 22)).unwrap();
    sd.attach("a.scope", "", &[21]).unwrap();
    sd.fs().kill(99);
    assert!(sd.attach("a.scope", "", &[99]).unwrap_err().is_no_process());
    let procs = sd
        .fs()
        .get(&sd.cgroup_dir("a.scope").unwrap().join("cgroup.procs"));
    assert_eq!(procs, "22\n21\n");
}

#[test]
fn a_broken_bus_fails_every_call() {
    let sd = nginx();
    sd.set_bus_down(true);
    assert!(matches!(sd.version(), Err(ManagerError::Bus(_))));
    sd.set_bus_down(false);
    assert!(sd.version().unwrap().starts_with("252"));
}
