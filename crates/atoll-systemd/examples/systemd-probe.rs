//! The systemd driver against a real systemd (run as root on a cgroup v2
//! host with systemd as PID 1; the systemd VM rig's `driver` test runs it):
//!
//! ```text
//! systemd-probe UNIT [SCOPE]
//! ```
//!
//! UNIT is a running service made for the probe (`systemd-run
//! --unit=atoll-probe.service sleep 1000`); SCOPE (default
//! `atoll-probe-job.scope`) is the transient scope it starts. The probe
//! binds a group to UNIT, sets every property the driver knows and checks
//! `systemctl show` and the unit's cgroup files, checks the monitor, idle,
//! freezing, a refusal that must leave everything as it was, the crash
//! records (a second driver ends the binding the first made) and that every
//! original is back (a cgroup file the unit did not have shows the
//! kernel's default afterwards: systemd keeps the controller enabled);
//! then it starts SCOPE with two processes of its own, gives one back to a
//! delegated service (`atoll-probe-origin.service`, which systemd moves
//! it into) and fails to give the other back to the probe's own service
//! (not delegated: it stays), and leaves the scope to end with it. One
//! line per check (`ok:` or
//! `FAIL:`), the last one `probe: N checks, M failed`; the exit status is 0
//! only if none failed. Nothing but UNIT, SCOPE, `atoll-probe-origin.service`,
//! `atoll.slice` and `/sys/fs/cgroup/atoll-probe` is touched.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use atoll_cgroup::{Cgroup2Backend, RealFs};
use atoll_core::backend::{Actuator, BackendError, External, FreezeState, Monitor};
use atoll_core::plan::{CpuMax, GroupPath, GroupSettings};
use atoll_core::process::CgroupMembership;
use atoll_core::spec::{DeviceId, IoLimit, MemoryEntitlement};
use atoll_core::CpuSet;
use atoll_systemd::dbus::SYSTEM_BUS;
use atoll_systemd::{BusAddress, DbusManager, Manager, Options, SystemdDriver};

const MOUNT: &str = "/sys/fs/cgroup";
const ROOT: &str = "atoll-probe";
const PROPS: [&str; 14] = [
    "CPUWeight",
    "AllowedCPUs",
    "AllowedMemoryNodes",
    "CPUQuotaPerSecUSec",
    "CPUQuotaPeriodUSec",
    "MemoryMin",
    "MemoryLow",
    "MemoryHigh",
    "MemoryMax",
    "IOWeight",
    "IOReadBandwidthMax",
    "IOWriteBandwidthMax",
    "IOReadIOPSMax",
    "IOWriteIOPSMax",
];

type Driver = SystemdDriver<Cgroup2Backend<RealFs>>;

#[derive(Default)]
struct Probe {
    checks: usize,
    failed: usize,
}

impl Probe {
    fn check(&mut self, ok: bool, what: &str, detail: impl std::fmt::Display) {
        self.checks += 1;
        if ok {
            println!("ok: {what}");
        } else {
            self.failed += 1;
            println!("FAIL: {what}: {detail}");
        }
    }

    fn eq(&mut self, what: &str, got: &str, want: &str) {
        self.check(got == want, what, format!("got {got:?}, want {want:?}"));
    }
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn show(unit: &str, prop: &str) -> String {
    run("systemctl", &["show", "--value", "-p", prop, unit]).unwrap_or_else(|e| format!("<{e}>"))
}

fn cg_file(cg: &str, file: &str) -> String {
    std::fs::read_to_string(format!("{MOUNT}{cg}/{file}"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("<{e}>"))
}

fn g(p: &str) -> GroupPath {
    GroupPath::from_relative(p)
}

fn set(s: &str) -> Result<Option<CpuSet>, String> {
    CpuSet::parse(s)
        .map(Some)
        .map_err(|e| format!("{s}: {e:?}"))
}

/// A disk (`vda` in the guest).
fn disk() -> Result<DeviceId, String> {
    let names = std::fs::read_dir("/sys/block").map_err(|e| format!("/sys/block: {e}"))?;
    let mut names: Vec<String> = names
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| ["vd", "sd", "nvme", "xvd"].iter().any(|p| n.starts_with(p)))
        .collect();
    names.sort();
    let name = names.first().ok_or("no block device")?;
    let dev =
        std::fs::read_to_string(format!("/sys/block/{name}/dev")).map_err(|e| e.to_string())?;
    let (ma, mi) = dev.trim().split_once(':').ok_or("bad dev")?;
    Ok(DeviceId {
        major: ma.parse().map_err(|_| "bad major")?,
        minor: mi.parse().map_err(|_| "bad minor")?,
    })
}

fn connect() -> Result<Driver, String> {
    let inner = Cgroup2Backend::new(MOUNT, ROOT, RealFs).map_err(|e| e.to_string())?;
    SystemdDriver::connect(inner, Options::default()).map_err(|e| e.to_string())
}

fn settings(dev: DeviceId) -> GroupSettings {
    GroupSettings {
        cpu_weight: Some(250),
        cpu_max: Some(CpuMax {
            quota_us: 50_000,
            period_us: 100_000,
        }),
        memory: MemoryEntitlement {
            min: Some(16 << 20),
            low: Some(32 << 20),
            high: Some(256 << 20),
            max: Some(512 << 20),
        },
        io_weight: Some(300),
        io_max: vec![IoLimit {
            device: dev,
            rbps: Some(10 << 20),
            wbps: None,
            riops: None,
            wiops: Some(100),
        }],
        ..Default::default()
    }
}

fn unit_checks(p: &mut Probe, d: &mut Driver, unit: &str, dev: DeviceId) -> Result<(), String> {
    let cg = show(unit, "ControlGroup");
    let group = g("probe/unit");
    // atoll's own groups (the inner backend): the island the unit inherits
    // its CPUs and nodes from.
    let root = GroupSettings {
        cpus: set("0-7")?,
        mems: set("0-1")?,
        ..Default::default()
    };
    d.apply(&GroupPath::root(), &root)
        .map_err(|e| e.to_string())?;
    let island = GroupSettings {
        cpus: set("0-1")?,
        mems: set("0")?,
        ..Default::default()
    };
    d.apply(&g("probe"), &island).map_err(|e| e.to_string())?;
    p.eq(
        "inner backend made atoll's island",
        &cg_file(&format!("/{ROOT}/probe"), "cpuset.cpus"),
        "0-1",
    );

    d.bind(&group, &External::SystemdUnit(unit.into()))
        .map_err(|e| e.to_string())?;
    let f = d.apply(&group, &settings(dev)).map_err(|e| e.to_string())?;
    p.check(
        f.is_empty(),
        "every property set without a fallback",
        format!("{f:?}"),
    );
    let devpath = format!("/dev/block/{}:{}", dev.major, dev.minor);
    let devid = format!("{}:{}", dev.major, dev.minor);
    for (prop, want) in [
        ("CPUWeight", "250".to_string()),
        ("AllowedCPUs", "0-1".into()),
        ("AllowedMemoryNodes", "0".into()),
        ("CPUQuotaPerSecUSec", "500ms".into()),
        ("CPUQuotaPeriodUSec", "100ms".into()),
        ("MemoryMin", (16u64 << 20).to_string()),
        ("MemoryLow", (32u64 << 20).to_string()),
        ("MemoryHigh", (256u64 << 20).to_string()),
        ("MemoryMax", (512u64 << 20).to_string()),
        ("IOWeight", "300".into()),
        ("IOReadBandwidthMax", format!("{devpath} {}", 10u64 << 20)),
        ("IOWriteIOPSMax", format!("{devpath} 100")),
    ] {
        p.eq(&format!("systemctl show {prop}"), &show(unit, prop), &want);
    }
    for (file, want) in [
        ("cpu.weight", "250".to_string()),
        ("cpuset.cpus", "0-1".into()),
        ("cpuset.mems", "0".into()),
        ("cpu.max", "50000 100000".into()),
        ("memory.min", (16u64 << 20).to_string()),
        ("memory.low", (32u64 << 20).to_string()),
        ("memory.high", (256u64 << 20).to_string()),
        ("memory.max", (512u64 << 20).to_string()),
        ("io.weight", "default 300".into()),
        (
            "io.max",
            format!("{devid} rbps={} wbps=max riops=max wiops=100", 10u64 << 20),
        ),
    ] {
        p.eq(&format!("{cg}/{file}"), &cg_file(&cg, file), &want);
    }
    let calls_before = show(unit, "CPUWeight");
    d.apply(&group, &settings(dev)).map_err(|e| e.to_string())?;
    p.eq(
        "an unchanged apply changes nothing",
        &show(unit, "CPUWeight"),
        &calls_before,
    );

    // The monitor reads the unit's cgroup.
    let main_pid: u32 = show(unit, "MainPID").parse().map_err(|_| "MainPID")?;
    p.check(d.exists(&group), "the bound group exists", "");
    let procs = d.processes(&group).map_err(|e| e.to_string())?;
    p.check(
        procs.contains(&main_pid),
        "processes has the unit's main pid",
        format!("{procs:?} vs {main_pid}"),
    );
    let s = d.stats(&group).map_err(|e| e.to_string())?;
    p.check(
        s.cpu_usage_us.is_some() && s.memory_current.is_some() && s.cpu_pressure.is_some(),
        "stats of the unit's cgroup",
        format!("{s:?}"),
    );
    let children = d.children(&g("probe")).map_err(|e| e.to_string())?;
    p.check(
        !children.iter().any(|c| c == "unit") && d.bindings().iter().any(|(b, _)| b == &group),
        "the bound group is a binding, not a child of its island",
        format!("{children:?}"),
    );

    // Idle: CPUWeight=idle (systemd 252 and later), cpu.idle 1.
    let idle = GroupSettings {
        cpu_idle: true,
        ..settings(dev)
    };
    let f = d.apply(&group, &idle).map_err(|e| e.to_string())?;
    if d.version() >= 252 {
        p.check(f.is_empty(), "idle without a fallback", format!("{f:?}"));
        p.eq(
            "systemctl show CPUWeight (idle)",
            &show(unit, "CPUWeight"),
            "idle",
        );
        p.eq("cpu.idle", &cg_file(&cg, "cpu.idle"), "1");
    } else {
        p.check(
            f.len() == 1,
            "idle is a fallback before 252",
            format!("{f:?}"),
        );
    }

    // Freezing.
    let frozen = GroupSettings {
        frozen: true,
        ..idle.clone()
    };
    let f = d.apply(&group, &frozen).map_err(|e| e.to_string())?;
    p.check(f.is_empty(), "frozen without a fallback", format!("{f:?}"));
    p.eq(
        "systemctl show FreezerState",
        &show(unit, "FreezerState"),
        "frozen",
    );
    p.eq("cgroup.freeze", &cg_file(&cg, "cgroup.freeze"), "1");
    p.check(
        d.freeze_state(&group).map_err(|e| e.to_string())? == Some(FreezeState::Frozen),
        "freeze_state is Frozen",
        "",
    );

    // A refusal: CPUWeight 20000 is out of range; the MemoryMax in the same
    // call must not be applied either.
    let record = d.binding(&group).cloned();
    let bad = GroupSettings {
        cpu_idle: false,
        cpu_weight: Some(20_000),
        memory: MemoryEntitlement {
            max: Some(600 << 20),
            ..frozen.memory.clone()
        },
        ..frozen.clone()
    };
    match d.apply(&group, &bad) {
        Err(e @ BackendError::Refused(_)) => {
            println!("  refusal: {e}");
            p.check(
                e.to_string().contains("out of range"),
                "systemd's words in the refusal",
                &e,
            );
        }
        other => p.check(false, "CPUWeight=20000 refused", format!("{other:?}")),
    }
    p.eq(
        "refused call: MemoryMax as before",
        &show(unit, "MemoryMax"),
        &(512u64 << 20).to_string(),
    );
    p.eq(
        "refused call: memory.max as before",
        &cg_file(&cg, "memory.max"),
        &(512u64 << 20).to_string(),
    );
    p.check(
        d.binding(&group).cloned() == record,
        "refused call: the record is unchanged",
        "",
    );
    Ok(())
}

fn crash_and_restore(
    p: &mut Probe,
    d: Driver,
    unit: &str,
    originals: &[(String, String)],
    files: &[(String, String)],
) -> Result<(), String> {
    let cg = show(unit, "ControlGroup");
    let lines = d.outside_changes();
    println!("  state file lines: {lines:?}");
    drop(d); // the daemon dies without ending anything
    let mut d = connect()?;
    d.set_outside_changes(lines);
    let group = g("probe/unit");
    p.check(
        d.bindings() == [(group.clone(), External::SystemdUnit(unit.into()))],
        "a restarted driver has the binding back",
        format!("{:?}", d.bindings()),
    );
    let orig = d
        .binding(&group)
        .and_then(|b| b.originals.get("CPUWeight").cloned());
    p.check(
        orig == Some(atoll_systemd::PropValue::U64(u64::MAX)),
        "the original CPUWeight is the unit's, not atoll's",
        format!("{orig:?}"),
    );
    let lines = d.unbind(&group).map_err(|e| e.to_string())?;
    for l in &lines {
        println!("  {l}");
    }
    for (prop, want) in originals {
        p.eq(&format!("{prop} is back"), &show(unit, prop), want);
    }
    for (file, want) in files {
        // A file the unit's cgroup did not have (its controller was not
        // enabled): systemd keeps the controller once a property of it was
        // set, so the file shows the kernel's default.
        let got = cg_file(&cg, file);
        let default = match file.as_str() {
            "io.weight" => "default 100",
            "cpu.weight" => "100",
            "cpu.max" => "max 100000",
            "memory.min" | "memory.low" | "cpu.idle" => "0",
            "memory.high" | "memory.max" => "max",
            _ => "",
        };
        if want.starts_with('<') && !got.starts_with('<') {
            p.eq(&format!("{file} is back (the default)"), &got, default);
        } else {
            p.eq(&format!("{file} is back"), &got, want);
        }
    }
    p.eq("thawed", &show(unit, "FreezerState"), "running");
    d.remove(&g("probe")).map_err(|e| e.to_string())?;
    d.remove(&GroupPath::root()).map_err(|e| e.to_string())?;
    d.release().map_err(|e| e.to_string())?;
    p.check(
        !Path::new(MOUNT).join(ROOT).exists(),
        "atoll's own groups removed",
        "",
    );
    Ok(())
}

fn cgroup_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map(|s| s.trim().trim_start_matches("0::").to_string())
        .unwrap_or_default()
}

fn origin_of_path(path: &str) -> CgroupMembership {
    CgroupMembership::parse(&format!("0::{path}\n")).unwrap_or_default()
}

fn origin_of(pid: u32) -> CgroupMembership {
    origin_of_path(&cgroup_of(pid))
}

fn scope_checks(p: &mut Probe, scope: &str) -> Result<(), String> {
    let mut d = connect()?;
    let group = g("probe/job");
    d.bind(&group, &External::Scope(scope.into()))
        .map_err(|e| e.to_string())?;
    let s = GroupSettings {
        cpus: set("2-3")?,
        cpu_weight: Some(40),
        ..Default::default()
    };
    d.apply(&group, &s).map_err(|e| e.to_string())?;
    let spawn = || {
        Command::new("sleep")
            .arg("300")
            .spawn()
            .map_err(|e| e.to_string())
    };
    let mut kids: Vec<Child> = vec![spawn()?, spawn()?];
    let pids: Vec<u32> = kids.iter().map(Child::id).collect();
    let origin = origin_of(pids[0]);
    let started = Instant::now();
    d.move_process(pids[0], &group).map_err(|e| e.to_string())?;
    println!("  scope started in {:?}", started.elapsed());
    let cg = format!("/atoll.slice/{scope}");
    p.eq(
        "the first process is in the scope",
        &cgroup_of(pids[0]),
        &cg,
    );
    p.eq("scope ControlGroup", &show(scope, "ControlGroup"), &cg);
    p.eq("scope born with CPUWeight", &show(scope, "CPUWeight"), "40");
    p.eq(
        "scope born with AllowedCPUs",
        &show(scope, "AllowedCPUs"),
        "2-3",
    );
    p.eq("scope cpu.weight", &cg_file(&cg, "cpu.weight"), "40");
    p.eq("scope Delegate", &show(scope, "Delegate"), "yes");
    d.move_process(pids[1], &group).map_err(|e| e.to_string())?;
    p.eq("the second process is attached", &cgroup_of(pids[1]), &cg);
    let mut procs = d.processes(&group).map_err(|e| e.to_string())?;
    procs.sort_unstable();
    let mut want = pids.clone();
    want.sort_unstable();
    p.check(
        procs == want,
        "processes of the scope",
        format!("{procs:?}"),
    );
    d.apply(
        &group,
        &GroupSettings {
            cpu_weight: Some(60),
            ..s.clone()
        },
    )
    .map_err(|e| e.to_string())?;
    p.eq(
        "later settings reach the scope",
        &show(scope, "CPUWeight"),
        "60",
    );
    p.check(
        d.group_of(&origin_of(pids[0])) == Some(group.clone()),
        "group_of a process in the scope",
        format!("{:?}", d.group_of(&origin_of(pids[0]))),
    );
    // Back to where it came from: the test's own service is not delegated,
    // systemd would not move it there, so it stays in the scope.
    match d.restore_process(pids[0], &origin) {
        Err(e) => {
            println!("  {e}");
            p.check(
                e.to_string().contains("stays in scope"),
                "a process from a non-delegated unit stays, and says so",
                &e,
            );
        }
        Ok(()) => p.check(
            false,
            "restore into a non-delegated unit refused",
            "it said Ok",
        ),
    }
    p.eq(
        "a process from a non-delegated unit stays in the scope",
        &cgroup_of(pids[0]),
        &cg,
    );
    // A delegated unit: systemd moves it back.
    let helper = "atoll-probe-origin.service";
    run(
        "systemd-run",
        &[
            "--quiet",
            &format!("--unit={helper}"),
            "-p",
            "Delegate=yes",
            "sleep",
            "1000",
        ],
    )?;
    let helper_cg = show(helper, "ControlGroup");
    let back = d.restore_process(pids[1], &origin_of_path(&helper_cg));
    p.check(
        back.is_ok(),
        "restore into a delegated unit",
        format!("{back:?}"),
    );
    p.eq("systemd moved it back", &cgroup_of(pids[1]), &helper_cg);
    let procs = d.processes(&group).map_err(|e| e.to_string())?;
    p.check(
        procs == [pids[0]],
        "the scope keeps the other",
        format!("{procs:?}"),
    );
    let _ = run("systemctl", &["stop", helper]);
    d.release().map_err(|e| e.to_string())?;
    p.eq(
        "release leaves the scope running",
        &show(scope, "ActiveState"),
        "active",
    );
    for k in &mut kids {
        let _ = k.kill();
        let _ = k.wait();
    }
    let t = Instant::now();
    let mut state = show(scope, "LoadState");
    while state != "not-found" && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
        state = show(scope, "LoadState");
    }
    p.eq("the scope ends with its processes", &state, "not-found");
    Ok(())
}

fn bus_checks(p: &mut Probe) {
    for (what, addr) in [
        ("the system bus", BusAddress::System),
        (SYSTEM_BUS, BusAddress::Address(SYSTEM_BUS.into())),
    ] {
        let v = DbusManager::connect(addr, Duration::from_secs(10))
            .and_then(|m| m.version().map_err(|e| e.to_string()));
        if let Ok(v) = &v {
            println!("  {what}: systemd {v}");
        }
        p.check(v.is_ok(), &format!("Version over {what}"), format!("{v:?}"));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(unit) = args.next() else {
        eprintln!("usage: systemd-probe UNIT [SCOPE]");
        std::process::exit(2);
    };
    let scope = args
        .next()
        .unwrap_or_else(|| "atoll-probe-job.scope".into());
    let mut p = Probe::default();
    p.check(
        atoll_systemd::detect(),
        "detect(): systemd runs this machine",
        "",
    );
    bus_checks(&mut p);
    let result = (|| -> Result<(), String> {
        let dev = disk()?;
        let originals: Vec<(String, String)> = PROPS
            .iter()
            .map(|pr| (pr.to_string(), show(&unit, pr)))
            .collect();
        let cg = show(&unit, "ControlGroup");
        let files: Vec<(String, String)> = [
            "cpu.weight",
            "cpuset.cpus",
            "cpu.max",
            "memory.min",
            "memory.low",
            "memory.high",
            "memory.max",
            "io.weight",
            "io.max",
            "cpu.idle",
        ]
        .iter()
        .map(|f| (f.to_string(), cg_file(&cg, f)))
        .collect();
        println!("  unit {unit}: {cg}, originals {originals:?}");
        let mut d = connect()?;
        println!("  connected: {}", d.manager_name());
        unit_checks(&mut p, &mut d, &unit, dev)?;
        crash_and_restore(&mut p, d, &unit, &originals, &files)?;
        scope_checks(&mut p, &scope)
    })();
    if let Err(e) = result {
        p.check(false, "probe ran to the end", e);
    }
    println!("probe: {} checks, {} failed", p.checks, p.failed);
    std::process::exit(i32::from(p.failed > 0));
}
