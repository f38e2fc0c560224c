//! The driver over the fake systemd: applying, diffing, originals,
//! refusals, crash records.

use atoll_cgroup::testutils::FakeCgroupFs;
use atoll_cgroup::{Cgroup2Backend, CgroupFs as _};
use atoll_core::backend::{Actuator, BackendError, External, Monitor};
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings, Partition};
use atoll_core::spec::{DeviceId, IoLimit, MemoryEntitlement};
use atoll_core::CpuSet;

use crate::testutils::FakeSystemd;
use crate::value::*;
use crate::{PropValue, SystemdDriver, SystemdError};

pub(crate) type Driver = SystemdDriver<Cgroup2Backend<FakeCgroupFs>>;

pub(crate) const NGINX: &str = "nginx.service";

pub(crate) fn g(p: &str) -> GroupPath {
    GroupPath::from_relative(p)
}

pub(crate) fn u(n: u64) -> PropValue {
    PropValue::U64(n)
}

pub(crate) fn cpus(s: &str) -> Option<CpuSet> {
    Some(CpuSet::parse(s).unwrap())
}

/// nginx with two processes, atoll's root and island `web` (CPUs 0-1) made
/// by the inner backend, and `web/nginx` bound to nginx.service.
pub(crate) fn setup() -> (FakeSystemd, Driver) {
    let sd =
        FakeSystemd::v2_machine().with_service(NGINX, "/system.slice/nginx.service", &[100, 101]);
    let mut d = driver(&sd);
    let root = GroupSettings {
        cpus: cpus("0-3"),
        mems: cpus("0"),
        ..Default::default()
    };
    d.apply(&GroupPath::root(), &root).unwrap();
    let web = GroupSettings {
        cpus: cpus("0-1"),
        mems: cpus("0"),
        ..Default::default()
    };
    d.apply(&g("web"), &web).unwrap();
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    sd.take_calls();
    (sd, d)
}

pub(crate) fn driver(sd: &FakeSystemd) -> Driver {
    let inner = Cgroup2Backend::new(sd.mount(), "atoll", sd.fs().clone()).unwrap();
    sd.driver(inner)
}

fn full() -> GroupSettings {
    GroupSettings {
        cpu_weight: Some(200),
        cpu_max: Some(CpuMax {
            quota_us: 150_000,
            period_us: 100_000,
        }),
        memory: MemoryEntitlement {
            min: None,
            low: Some(64 << 20),
            high: Some(512 << 20),
            max: Some(1 << 30),
        },
        io_weight: Some(300),
        io_max: vec![IoLimit {
            device: DeviceId { major: 8, minor: 0 },
            rbps: Some(1 << 20),
            wbps: None,
            riops: None,
            wiops: Some(100),
        }],
        ..Default::default()
    }
}

fn file(sd: &FakeSystemd, name: &str) -> String {
    let dir = sd.cgroup_dir(NGINX).unwrap();
    sd.fs().get(&dir.join(name)).trim().to_string()
}

#[test]
fn a_bound_unit_gets_every_property_in_one_call() {
    let (sd, mut d) = setup();
    let fallbacks = d.apply(&g("web/nginx"), &full()).unwrap();
    assert!(fallbacks.is_empty(), "{fallbacks:?}");
    let sets = sd.calls_of("SetUnitProperties");
    assert_eq!(sets.len(), 1, "{:?}", sd.calls());
    // The island's CPUs and nodes, since nginx's cgroup is not below it.
    assert_eq!(
        sd.property(NGINX, ALLOWED_CPUS),
        Some(PropValue::Bytes(vec![0x03]))
    );
    assert_eq!(file(&sd, "cpuset.cpus"), "0-1");
    assert_eq!(file(&sd, "cpuset.mems"), "0");
    assert_eq!(file(&sd, "cpu.weight"), "200");
    assert_eq!(file(&sd, "cpu.max"), "150000 100000");
    assert_eq!(file(&sd, "memory.low"), (64u64 << 20).to_string());
    assert_eq!(file(&sd, "memory.high"), (512u64 << 20).to_string());
    assert_eq!(file(&sd, "memory.max"), (1u64 << 30).to_string());
    assert_eq!(file(&sd, "memory.min"), "0", "not asked for: left alone");
    assert_eq!(file(&sd, "io.weight"), "default 300");
    assert_eq!(
        file(&sd, "io.max"),
        "8:0 rbps=1048576 wbps=max riops=max wiops=100"
    );
    assert_eq!(sd.property(NGINX, CPU_QUOTA), Some(u(1_500_000)));
    // Nothing was written in atoll's tree for the bound group.
    assert!(!sd.fs().exists(&sd.mount().join("atoll/web/nginx")));
    assert_eq!(d.kind().as_str(), "cgroup2");
    assert!(d.capabilities().service_manager);
}

#[test]
fn only_what_changed_is_set_and_an_unchanged_apply_makes_no_call() {
    let (sd, mut d) = setup();
    d.apply(&g("web/nginx"), &full()).unwrap();
    sd.take_calls();
    d.apply(&g("web/nginx"), &full()).unwrap();
    assert!(
        sd.calls_of("SetUnitProperties").is_empty(),
        "{:?}",
        sd.calls()
    );
    let more = GroupSettings {
        cpu_weight: Some(400),
        ..full()
    };
    d.apply(&g("web/nginx"), &more).unwrap();
    assert_eq!(
        sd.calls_of("SetUnitProperties"),
        ["SetUnitProperties nginx.service CPUWeight=400"]
    );
    assert!(
        sd.calls_of("Get").is_empty(),
        "the original was read before the first change"
    );
}

#[test]
fn originals_are_read_before_the_first_change_and_put_back_on_unbind() {
    let sd = FakeSystemd::v2_machine()
        .with_service(NGINX, "/system.slice/nginx.service", &[100])
        .with_property(NGINX, CPU_WEIGHT, u(50))
        .with_property(NGINX, MEMORY_MAX, u(2 << 30));
    let mut d = driver(&sd);
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    let s = GroupSettings {
        frozen: true,
        ..full()
    };
    d.apply(&g("web/nginx"), &s).unwrap();
    assert!(sd.is_frozen(NGINX));
    let b = d.binding(&g("web/nginx")).unwrap();
    assert_eq!(b.originals[CPU_WEIGHT], u(50));
    assert_eq!(b.originals[MEMORY_MAX], u(2 << 30));
    assert_eq!(
        b.originals[&io_key(IO_READ_BPS, "/dev/block/8:0")],
        u(u64::MAX)
    );
    assert_eq!(b.set[CPU_WEIGHT], u(200));
    d.apply(
        &g("web/nginx"),
        &GroupSettings {
            cpu_weight: Some(300),
            ..s.clone()
        },
    )
    .unwrap();
    assert_eq!(
        d.binding(&g("web/nginx")).unwrap().originals[CPU_WEIGHT],
        u(50)
    );
    sd.take_calls();
    let lines = d.unbind(&g("web/nginx")).unwrap();
    assert_eq!(
        sd.calls_of("SetUnitProperties").len(),
        1,
        "one call puts everything back"
    );
    assert!(
        lines.contains(&"nginx.service: CPUWeight put back to 50".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"nginx.service: thawed".to_string()),
        "{lines:?}"
    );
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(50)));
    assert_eq!(sd.property(NGINX, MEMORY_MAX), Some(u(2 << 30)));
    assert_eq!(sd.property(NGINX, MEMORY_HIGH), Some(u(u64::MAX)));
    assert_eq!(
        sd.property(NGINX, IO_READ_BPS),
        Some(PropValue::DeviceLimits(vec![(
            "/dev/block/8:0".into(),
            u64::MAX
        )]))
    );
    assert_eq!(file(&sd, "io.max"), "");
    assert!(!sd.is_frozen(NGINX));
    assert!(d.bindings().is_empty());
    assert!(
        d.unbind(&g("web/nginx")).unwrap().is_empty(),
        "unbinding again does nothing"
    );
}

#[test]
fn a_setting_no_longer_asked_for_goes_back_to_its_original() {
    let (sd, mut d) = setup();
    d.apply(&g("web/nginx"), &full()).unwrap();
    sd.take_calls();
    let less = GroupSettings {
        memory: MemoryEntitlement::default(),
        ..full()
    };
    d.apply(&g("web/nginx"), &less).unwrap();
    assert_eq!(
        sd.calls_of("SetUnitProperties"),
        ["SetUnitProperties nginx.service MemoryHigh=infinity MemoryLow=0 MemoryMax=infinity"]
    );
    let b = d.binding(&g("web/nginx")).unwrap();
    assert!(!b.set.contains_key(MEMORY_MAX) && !b.originals.contains_key(MEMORY_MAX));
    assert_eq!(file(&sd, "memory.max"), "max");
}

#[test]
fn a_refusal_leaves_the_unit_and_the_record_as_they_were() {
    let (sd, mut d) = setup();
    d.apply(
        &g("web/nginx"),
        &GroupSettings {
            cpu_weight: Some(150),
            ..Default::default()
        },
    )
    .unwrap();
    let before = d.binding(&g("web/nginx")).unwrap().clone();
    sd.refuse(MEMORY_MAX, "Value specified in MemoryMax is out of range");
    let e = d.apply(&g("web/nginx"), &full()).unwrap_err();
    let BackendError::Refused(r) = &e else {
        panic!("{e:?}");
    };
    let atoll_core::backend::Refusal {
        manager,
        group,
        unit,
        properties,
        reason,
    } = &**r;
    assert_eq!(manager, "systemd 252");
    assert_eq!(group, &g("web/nginx"));
    assert_eq!(unit, NGINX);
    assert!(
        properties.contains("CPUWeight=200") && properties.contains("MemoryMax=1073741824"),
        "{properties}"
    );
    assert!(
        reason.contains("out of range") && reason.contains("InvalidArgs"),
        "{reason}"
    );
    assert!(e.to_string().starts_with("systemd 252 refused"), "{e}");
    assert_eq!(
        d.binding(&g("web/nginx")),
        Some(&before),
        "record unchanged"
    );
    assert_eq!(
        sd.property(NGINX, CPU_WEIGHT),
        Some(u(150)),
        "nothing half-applied"
    );
    assert_eq!(sd.property(NGINX, MEMORY_HIGH), Some(u(u64::MAX)));
    assert_eq!(file(&sd, "cpu.weight"), "150");
    sd.clear_refusals();
    d.apply(&g("web/nginx"), &full()).unwrap();
    assert_eq!(sd.property(NGINX, MEMORY_MAX), Some(u(1 << 30)));
    assert_eq!(
        d.binding(&g("web/nginx")).unwrap().originals[CPU_WEIGHT],
        u(u64::MAX)
    );
}

#[test]
fn a_broken_bus_changes_nothing_and_says_so() {
    let (sd, mut d) = setup();
    sd.set_bus_down(true);
    let e = d.apply(&g("web/nginx"), &full()).unwrap_err();
    assert!(matches!(e, BackendError::Unavailable { .. }), "{e:?}");
    sd.set_bus_down(false);
    assert!(d.binding(&g("web/nginx")).unwrap().set.is_empty());
    d.apply(&g("web/nginx"), &full()).unwrap();
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(200)));
}

#[test]
fn idle_is_weight_zero_on_252_and_a_fallback_before() {
    let (sd, mut d) = setup();
    let idle = GroupSettings {
        cpu_idle: true,
        cpu_weight: Some(100),
        ..Default::default()
    };
    assert!(d.apply(&g("web/nginx"), &idle).unwrap().is_empty());
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(0)));
    assert_eq!(file(&sd, "cpu.idle"), "1");

    let old = FakeSystemd::v2_machine().with_version(251).with_service(
        NGINX,
        "/system.slice/nginx.service",
        &[100],
    );
    let mut d = driver(&old);
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    let f = d.apply(&g("web/nginx"), &idle).unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].knob.as_str(), f[0].got.as_str()),
        ("cpu.idle", "CPUWeight=1")
    );
    assert_eq!(old.property(NGINX, CPU_WEIGHT), Some(u(1)));
}

#[test]
fn what_systemd_cannot_do_is_a_fallback_and_the_rest_is_set() {
    let sd = FakeSystemd::v2_machine().with_version(245).with_service(
        NGINX,
        "/system.slice/nginx.service",
        &[100],
    );
    let mut d = driver(&sd);
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    let s = GroupSettings {
        partition: Some(Partition::Root),
        frozen: true,
        ..full()
    };
    let f = d.apply(&g("web/nginx"), &s).unwrap();
    let knobs: Vec<&str> = f.iter().map(|f| f.knob.as_str()).collect();
    assert_eq!(knobs, ["cpuset.cpus.partition", "cgroup.freeze"]);
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(200)));
    assert!(sd.calls_of("FreezeUnit").is_empty());
}

#[test]
fn too_old_a_systemd_is_refused_at_setup() {
    let sd = FakeSystemd::v2_machine().with_version(237);
    let inner = Cgroup2Backend::new(sd.mount(), "atoll", sd.fs().clone()).unwrap();
    let e = SystemdDriver::with_manager(
        inner,
        sd.manager(),
        std::sync::Arc::new(sd.fs().clone()),
        sd.options(),
    )
    .unwrap_err();
    assert!(matches!(e, SystemdError::TooOld { needs: 238, .. }), "{e}");
    let inner = Cgroup2Backend::new(sd.mount(), "atoll", sd.fs().clone()).unwrap();
    let bad = crate::Options {
        slice: "atoll.service".into(),
        ..sd.options()
    };
    let sd = sd.with_version(252);
    let e = SystemdDriver::with_manager(
        inner,
        sd.manager(),
        std::sync::Arc::new(sd.fs().clone()),
        bad,
    )
    .unwrap_err();
    assert!(matches!(e, SystemdError::BadSlice { .. }), "{e}");
}

#[test]
fn binding_checks_the_target() {
    let (sd, mut d) = setup();
    let unit = |n: &str| External::SystemdUnit(n.into());
    let scope = |n: &str| External::Scope(n.into());
    // The same binding again is nothing; another target needs an unbind.
    d.bind(&g("web/nginx"), &unit(NGINX)).unwrap();
    let e = d.bind(&g("web/nginx"), &unit("other.service")).unwrap_err();
    assert!(e.to_string().contains("unbind it first"), "{e}");
    let e = d.bind(&g("web/copy"), &unit(NGINX)).unwrap_err();
    assert!(e.to_string().contains("bound to group web/nginx"), "{e}");
    let e = d.bind(&g("web/x"), &unit("missing.service")).unwrap_err();
    assert!(e.to_string().contains("LoadState=not-found"), "{e}");
    assert!(d.bind(&g("web/x"), &unit("bad name.service")).is_err());
    assert!(d.bind(&g("web/x"), &scope("job.service")).is_err());
    assert!(d.bind(&GroupPath::root(), &scope("job.scope")).is_err());
    d.bind(&g("web/job"), &scope("atoll-web-job.scope"))
        .unwrap();
    assert!(
        sd.calls_of("StartTransientUnit").is_empty(),
        "a scope starts with its first process"
    );
    let mut b = d.bindings();
    b.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        b,
        [
            (g("web/job"), scope("atoll-web-job.scope")),
            (g("web/nginx"), unit(NGINX))
        ]
    );
}

#[test]
fn crash_records_bring_back_the_bindings_and_their_true_originals() {
    let sd = FakeSystemd::v2_machine()
        .with_service(NGINX, "/system.slice/nginx.service", &[100])
        .with_property(NGINX, CPU_WEIGHT, u(50));
    let mut d = driver(&sd);
    d.apply(&GroupPath::root(), &GroupSettings::default())
        .unwrap();
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    d.apply(
        &g("web/nginx"),
        &GroupSettings {
            frozen: true,
            ..full()
        },
    )
    .unwrap();
    let saved = d.outside_changes();
    let inner_lines = d.inner().outside_changes();
    assert_eq!(saved.len(), inner_lines.len() + 1, "{saved:?}");
    assert!(saved
        .iter()
        .any(|l| l.starts_with("systemd:{\"group\":\"web/nginx\"")));
    // The daemon dies; a new one starts with the state file's lines.
    drop(d);
    let mut d = driver(&sd);
    let mut given = saved.clone();
    given.push("systemd:{not json".into());
    d.set_outside_changes(given);
    assert_eq!(
        d.bindings(),
        [(g("web/nginx"), External::SystemdUnit(NGINX.into()))]
    );
    assert_eq!(
        d.inner().outside_changes(),
        inner_lines,
        "the rest went to the inner backend"
    );
    assert_eq!(d.unreadable_records(), ["systemd:{not json"]);
    assert!(
        d.outside_changes()
            .contains(&"systemd:{not json".to_string()),
        "kept, not lost"
    );
    // The daemon still wants it: binding again keeps the recorded originals,
    // and the same settings need no call.
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    sd.take_calls();
    d.apply(
        &g("web/nginx"),
        &GroupSettings {
            frozen: true,
            ..full()
        },
    )
    .unwrap();
    assert!(sd.calls_of("SetUnitProperties").is_empty() && sd.calls_of("FreezeUnit").is_empty());
    assert_eq!(
        d.binding(&g("web/nginx")).unwrap().originals[CPU_WEIGHT],
        u(50)
    );
    assert!(d.exists(&g("web/nginx")));
    // The configuration dropped it: unbinding puts back the true originals.
    d.unbind(&g("web/nginx")).unwrap();
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(50)));
    assert!(!sd.is_frozen(NGINX));
}

#[test]
fn originals_are_known_from_the_binding_on_before_any_change() {
    let sd = FakeSystemd::v2_machine()
        .with_service(NGINX, "/system.slice/nginx.service", &[100])
        .with_property(NGINX, CPU_WEIGHT, u(50))
        .with_property(
            NGINX,
            IO_READ_BPS,
            PropValue::DeviceLimits(vec![("/dev/block/8:0".into(), 7_000_000)]),
        );
    let mut d = driver(&sd);
    d.apply(&GroupPath::root(), &GroupSettings::default())
        .unwrap();
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    // What the daemon saves right after binding, before any change.
    let at_bind = d.outside_changes();
    let found = &d.binding(&g("web/nginx")).unwrap().found;
    assert_eq!(found[CPU_WEIGHT], u(50));
    assert_eq!(found[MEMORY_MAX], u(u64::MAX));
    d.apply(&g("web/nginx"), &full()).unwrap();
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(200)));
    // The daemon dies before it saves again; the next run has only the
    // lines saved at binding, and reads atoll's values from the unit.
    drop(d);
    let mut d = driver(&sd);
    d.set_outside_changes(at_bind);
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    d.apply(&g("web/nginx"), &full()).unwrap();
    d.release().unwrap();
    assert_eq!(
        sd.property(NGINX, CPU_WEIGHT),
        Some(u(50)),
        "not atoll's 200"
    );
    assert_eq!(
        sd.property(NGINX, IO_READ_BPS),
        Some(PropValue::DeviceLimits(vec![(
            "/dev/block/8:0".into(),
            7_000_000
        )]))
    );
    assert_eq!(sd.property(NGINX, MEMORY_MAX), Some(u(u64::MAX)));
}

#[test]
fn a_change_the_record_missed_is_put_back_after_a_restart() {
    let sd = FakeSystemd::v2_machine()
        .with_service(NGINX, "/system.slice/nginx.service", &[100])
        .with_property(NGINX, CPU_WEIGHT, u(50))
        .with_property(NGINX, MEMORY_HIGH, u(3 << 30));
    let mut d = driver(&sd);
    d.apply(&GroupPath::root(), &GroupSettings::default())
        .unwrap();
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    let at_bind = d.outside_changes();
    d.apply(&g("web/nginx"), &full()).unwrap();
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(200)));
    // The daemon dies before it saves again; the next run no longer names
    // the unit: it ends the binding it only knows from the lines saved at
    // binding, whose record of what is set is empty.
    drop(d);
    let mut d = driver(&sd);
    d.set_outside_changes(at_bind.clone());
    let lines = d.unbind(&g("web/nginx")).unwrap();
    assert!(
        lines.contains(&"nginx.service: CPUWeight put back to 50".to_string()),
        "{lines:?}"
    );
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(50)));
    assert_eq!(sd.property(NGINX, MEMORY_HIGH), Some(u(3 << 30)));
    assert_eq!(sd.property(NGINX, MEMORY_MAX), Some(u(u64::MAX)));
    assert_eq!(sd.property(NGINX, CPU_QUOTA), Some(u(u64::MAX)));
    assert_eq!(
        sd.property(NGINX, IO_READ_BPS),
        Some(PropValue::DeviceLimits(vec![(
            "/dev/block/8:0".into(),
            u64::MAX
        )]))
    );
    assert_eq!(file(&sd, "io.max"), "");
    // A binding made in this run puts back only what it set.
    let mut d = driver(&sd);
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    sd.set_property(NGINX, MEMORY_MAX, u(5 << 30));
    assert!(d.unbind(&g("web/nginx")).unwrap().is_empty());
    assert_eq!(sd.property(NGINX, MEMORY_MAX), Some(u(5 << 30)));
}

#[test]
fn release_and_remove_end_bindings() {
    let (sd, mut d) = setup();
    d.apply(&g("web/nginx"), &full()).unwrap();
    d.remove(&g("web/nginx")).unwrap();
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(u64::MAX)));
    assert!(d.bindings().is_empty());
    d.bind(&g("web/nginx"), &External::SystemdUnit(NGINX.into()))
        .unwrap();
    d.apply(&g("web/nginx"), &full()).unwrap();
    let lines = d.release().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l == "nginx.service: CPUWeight put back to [not set]"),
        "{lines:?}"
    );
    assert_eq!(sd.property(NGINX, MEMORY_MAX), Some(u(u64::MAX)));
    assert!(d.bindings().is_empty());
}

#[test]
fn a_refused_restore_keeps_the_binding_for_later() {
    let (sd, mut d) = setup();
    d.apply(&g("web/nginx"), &full()).unwrap();
    sd.refuse(CPU_WEIGHT, "busy");
    let e = d.release().unwrap_err();
    assert!(matches!(e, BackendError::Refused(_)), "{e:?}");
    assert_eq!(d.bindings().len(), 1);
    assert!(d
        .outside_changes()
        .iter()
        .any(|l| l.starts_with("systemd:")));
    sd.clear_refusals();
    d.release().unwrap();
    assert_eq!(sd.property(NGINX, CPU_WEIGHT), Some(u(u64::MAX)));
}

#[test]
fn a_unit_that_is_gone_has_nothing_to_put_back() {
    let (sd, mut d) = setup();
    d.apply(&g("web/nginx"), &full()).unwrap();
    sd.remove_unit(NGINX);
    let lines = d.unbind(&g("web/nginx")).unwrap();
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with("nginx.service no longer exists"),
        "{lines:?}"
    );
    assert!(d.bindings().is_empty());
}
