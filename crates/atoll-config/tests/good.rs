//! Valid configs parse to exactly the expected spec.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use atoll_config::{embedded_default, load, parse, summary, DEFAULT_CONFIG};
use atoll_core::spec::{
    AdoptRule, DeviceId, Entitlement, HostSpec, IoEntitlement, IoLimit, IslandSpec, IsolationMode,
    IsolationSpec, MemoryEntitlement, PlatformSpec, RealtimePolicy, RtClass, SchedPolicy,
    SharePolicy, Sharing, UnitSpec, DEFAULT_EPOCH,
};
use common::*;

const FULL: &str = r#"
epoch_ms = 20
default_island = "web"

[host]
cpus = "0"
mems = "0"
adopt_all = false

[isolation]
mode = "isolate"
memory_reserve = 0.1
io_threshold = "8M"
io_decay_ms = 250

[island.web]
cpus = "1-3"
mems = "0"
policy = "fair"

[island.rt]
cpus = "4-7"
policy = "realtime"
rt_class = "rr"
priority = [10, 50]
rt_runtime_us = 500000
rt_period_us = 1000000

[unit.api]
island = "web"
cpus = 2.0
weight = 200
cpu_cap = 2.5
memory_min = "512M"
memory_low = "1G"
memory_high = "2G"
memory_max = 3221225472
io_weight = 100
io_limits = [{ device = "8:0", rbps = "100M", wbps = "50M", riops = 1000, wiops = 500 }]
share_cpu = "lend"
share_memory = "none"
adopt = [{ comm = "nginx" }, { exe = "/usr/sbin/nginx" }, { uid = 33 }, { cgroup = "/system.slice/nginx.service" }, { pid = 1234 }]

[unit.ctl]
island = "rt"
rt_priority = 20
"#;

fn full_spec() -> PlatformSpec {
    PlatformSpec {
        host: HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all: false,
        },
        islands: vec![
            IslandSpec {
                name: n("web"),
                cpus: set("1-3"),
                mems: set("0"),
                policy: SchedPolicy::Fair,
                arbitration: Default::default(),
                exclusive: false,
                access: Default::default(),
            },
            IslandSpec {
                name: n("rt"),
                cpus: set("4-7"),
                mems: set("1"),
                policy: SchedPolicy::Realtime(RealtimePolicy {
                    class: RtClass::Rr,
                    priority_min: 10,
                    priority_max: 50,
                    runtime_us: 500_000,
                    period_us: 1_000_000,
                }),
                arbitration: Default::default(),
                exclusive: false,
                access: Default::default(),
            },
        ],
        units: vec![
            UnitSpec {
                name: n("api"),
                island: n("web"),
                entitlement: Entitlement {
                    cpus: Some(2.0),
                    weight: Some(200),
                    cpu_cap: Some(2.5),
                    memory: MemoryEntitlement {
                        min: Some(512 << 20),
                        low: Some(GIB),
                        high: Some(2 * GIB),
                        max: Some(3 * GIB),
                    },
                    io: IoEntitlement {
                        weight: Some(100),
                        limits: vec![IoLimit {
                            device: DeviceId { major: 8, minor: 0 },
                            rbps: Some(100 << 20),
                            wbps: Some(50 << 20),
                            riops: Some(1000),
                            wiops: Some(500),
                        }],
                    },
                    sharing: Sharing {
                        cpu: SharePolicy::Lend,
                        memory: SharePolicy::None,
                        io: SharePolicy::Lend,
                    },
                },
                adopt: vec![
                    AdoptRule::Comm("nginx".into()),
                    AdoptRule::Exe(PathBuf::from("/usr/sbin/nginx")),
                    AdoptRule::Uid(33),
                    AdoptRule::Cgroup("/system.slice/nginx.service".into()),
                    AdoptRule::Pid(1234),
                ],
                rt_priority: None,
            },
            UnitSpec {
                name: n("ctl"),
                island: n("rt"),
                entitlement: Entitlement::default(),
                adopt: vec![],
                rt_priority: Some(20),
            },
        ],
        default_island: Some(n("web")),
        epoch: Duration::from_millis(20),
        isolation: IsolationSpec {
            mode: IsolationMode::Isolate,
            memory_reserve: 0.1,
            io_threshold_bytes: 8 << 20,
            io_decay: Duration::from_millis(250),
        },
        overlays: Vec::new(),
        comm: None,
        apps: Default::default(),
        network: Vec::new(),
        frequency: Default::default(),
    }
}

#[test]
fn the_full_format_parses_to_the_exact_spec() {
    assert_eq!(ok(FULL, &vm8()), full_spec());
}

#[test]
fn same_config_in_other_toml_spellings() {
    // Dotted keys, arrays of tables and inline tables mean the same thing.
    let text = r#"
epoch_ms = 20
default_island = "web"
host = { cpus = "0", mems = "0" }
isolation = { mode = "isolate", memory_reserve = 0.1, io_threshold = 8388608, io_decay_ms = 250 }
island.web = { cpus = "1-3", mems = "0" }

[island.rt]
cpus = "4-7"
policy = "realtime"
rt_class = "rr"
priority = [10, 50]

[unit.api]
island = "web"
cpus = 2
weight = 200
cpu_cap = 2.5
memory_min = 536870912
memory_low = "1024M"
memory_high = "2GiB"
memory_max = "3g"
io_weight = 100
share_memory = "none"

[[unit.api.io_limits]]
device = "8:0"
rbps = "100M"
wbps = "51200K"
riops = 1000
wiops = 500

[[unit.api.adopt]]
comm = "nginx"
[[unit.api.adopt]]
exe = "/usr/sbin/nginx"
[[unit.api.adopt]]
uid = 33
[[unit.api.adopt]]
cgroup = "/system.slice/nginx.service"
[[unit.api.adopt]]
pid = 1234

[unit.ctl]
island = "rt"
rt_priority = 20
"#;
    assert_eq!(ok(text, &vm8()), full_spec());
}

#[test]
fn defaults_fill_in_from_the_topology() {
    let spec = ok(
        r#"
[island.a]
cpus = "1-3"
[island.b]
cpus = "4-7"
policy = "realtime"
"#,
        &vm8(),
    );
    // No [host]: the first core; its memory node.
    assert_eq!(
        spec.host,
        HostSpec {
            cpus: set("0"),
            mems: set("0"),
            adopt_all: false
        }
    );
    assert_eq!(spec.epoch, DEFAULT_EPOCH);
    assert_eq!(spec.default_island, None);
    assert_eq!(spec.islands[0].mems, set("0"));
    assert_eq!(spec.islands[0].policy, SchedPolicy::Fair);
    assert_eq!(spec.islands[1].mems, set("1"));
    assert_eq!(
        spec.islands[1].policy,
        SchedPolicy::Realtime(RealtimePolicy {
            class: RtClass::Fifo,
            priority_min: atoll_config::DEFAULT_RT_PRIORITY[0],
            priority_max: atoll_config::DEFAULT_RT_PRIORITY[1],
            runtime_us: atoll_config::DEFAULT_RT_RUNTIME_US,
            period_us: atoll_config::DEFAULT_RT_PERIOD_US,
        })
    );
}

#[test]
fn host_auto_and_mems_default_follow_the_layout_helpers() {
    let t = two_socket();
    for (host, cpus, mems) in [
        ("cpus = \"auto\"", "0,16", "0"),
        ("", "0,16", "0"),
        ("cpus = \"8\"", "8", "1"),
        ("cpus = \"0,8\"", "0,8", "0-1"),
        ("cpus = \"8\"\nmems = \"0\"", "8", "0"),
    ] {
        let text = format!("[host]\n{host}\nadopt_all = true\n[island.x]\ncpus = \"1-7\"\n");
        let spec = ok(&text, &t);
        assert_eq!(spec.host.cpus.to_string(), cpus, "{host}");
        assert_eq!(spec.host.mems.to_string(), mems, "{host}");
        assert!(spec.host.adopt_all);
    }
}

#[test]
fn units_without_an_island_go_to_the_default_island() {
    let base = "[host]\ncpus = \"0\"\n[island.a]\ncpus = \"1-3\"\n[island.b]\ncpus = \"4-7\"\n[unit.u]\ncpus = 1\n";
    let spec = ok(base, &vm8());
    assert_eq!(spec.units[0].island, n("a"), "first island");
    let spec = ok(&format!("default_island = \"b\"\n{base}"), &vm8());
    assert_eq!(spec.units[0].island, n("b"), "default_island");
    assert_eq!(spec.default_island().map(|i| i.name.clone()), Some(n("b")));
}

#[test]
fn memory_sizes() {
    for (written, bytes) in [
        ("\"1G\"", GIB),
        ("\"512M\"", 512 << 20),
        ("4096", 4096),
        ("\"4096\"", 4096),
        ("\"64K\"", 64 << 10),
        ("\"2GiB\"", 2 * GIB),
        ("\"1T\"", 1 << 40),
    ] {
        let text = format!(
            "[host]\ncpus = \"0\"\n[island.a]\ncpus = \"1\"\n[unit.u]\nmemory_max = {written}\n"
        );
        let spec = ok(&text, &smt2());
        assert_eq!(
            spec.units[0].entitlement.memory.max,
            Some(bytes),
            "{written}"
        );
    }
}

#[test]
fn the_embedded_default_on_this_machine_and_bigger_ones() {
    assert!(DEFAULT_CONFIG.contains("layout = \"topology\""));
    for (name, topo, host, want) in [
        ("1 core, 2 threads", smt2(), "0", vec![("main", "1", "0")]),
        (
            "2 sockets",
            two_socket(),
            "0,16",
            vec![("node0", "1-7,17-23", "0"), ("node1", "8-15,24-31", "1")],
        ),
        (
            "4 nodes",
            four_node(),
            "0",
            vec![
                ("node0", "1-7", "0"),
                ("node1", "8-15", "1"),
                ("node2", "16-23", "2"),
                ("node3", "24-31", "3"),
            ],
        ),
        (
            "1 node, 2 LLCs",
            shape(1, 1, 2, 4, 1),
            "0",
            vec![("llc0", "1-3", "0"), ("llc1", "4-7", "0")],
        ),
    ] {
        let spec = embedded_default(&topo).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(spec.host.cpus.to_string(), host, "{name}");
        assert_eq!(spec.host.mems.to_string(), "0", "{name}");
        assert!(!spec.host.adopt_all, "{name}");
        assert_eq!(islands(&spec), triples(&want), "{name}");
        assert!(
            spec.islands.iter().all(|i| i.policy == SchedPolicy::Fair),
            "{name}"
        );
        assert!(spec.units.is_empty(), "{name}");
        assert_eq!(spec.default_island, None, "{name}");
        assert_eq!(spec.epoch, DEFAULT_EPOCH, "{name}");
    }
}

#[test]
fn load_reads_a_file_and_names_it_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("atoll.toml");
    std::fs::write(&path, FULL).unwrap();
    assert_eq!(load(&path, &vm8()).unwrap(), full_spec());

    std::fs::write(&path, "[host]\ncpus = \"0\"\n[island.a]\ncpus = \"1-9\"\n").unwrap();
    let e = load(&path, &vm8()).unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("{}:4:1: island.a.cpus: ", path.display())),
        "{shown}"
    );

    let missing = dir.path().join("nope.toml");
    let e = load(&missing, &vm8()).unwrap_err();
    assert_eq!(e.diagnostics[0].source, missing.display().to_string());
    assert_eq!((e.diagnostics[0].line, e.diagnostics[0].column), (0, 0));
    assert_eq!(
        e.io.as_ref().map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound)
    );
    assert!(e
        .to_string()
        .starts_with(&format!("{}: cannot read", missing.display())));
}

#[test]
fn parsing_is_pure() {
    let topo = vm8();
    let before = topo.clone();
    let a = parse(FULL, "a.toml", &topo).unwrap();
    let _ = parse("[island.x]\ncpus = \"99\"\n", "b.toml", &topo).unwrap_err();
    let b = parse(FULL, "a.toml", &topo).unwrap();
    assert_eq!(a, b);
    assert_eq!(topo, before);
}

#[test]
fn summary_lists_host_islands_and_units() {
    let text = summary(&full_spec());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "host: cpus 0 (1 CPU), mems 0, adopt_all no");
    assert_eq!(lines[1], "epoch: 20 ms");
    assert_eq!(lines[2], "islands: 2");
    assert_eq!(lines[3], "  web  cpus 1-3 (3 CPUs), mems 0, fair (default)");
    assert_eq!(
        lines[4],
        "  rt   cpus 4-7 (4 CPUs), mems 1, realtime rr, priority 10-50, rt budget 500000/1000000 us"
    );
    assert_eq!(lines[5], "units: 2");
    assert_eq!(
        lines[6],
        "  api  island web, cpus 2, weight 200, cap 2.5, memory min 512M low 1G high 2G max 3G, \
         io weight 100, io 8:0 rbps 100M wbps 50M riops 1000 wiops 500"
    );
    assert_eq!(
        lines[7],
        "       adopt: comm=nginx, exe=/usr/sbin/nginx, uid=33, \
         cgroup=/system.slice/nginx.service, pid=1234"
    );
    assert_eq!(lines[8], "  ctl  island rt, rt priority 20");
    assert_eq!(lines.len(), 9);
}
