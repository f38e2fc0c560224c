//! Every kind of error points at the right line, column and key.

mod common;

use common::*;

/// (what, config, expected "LINE:COL KEY" list, a word the first message
/// must contain). All run on the 8-CPU, 2-node VM shape.
const CASES: &[(&str, &str, &[&str], &str)] = &[
    (
        "unknown key in an island",
        r#"# web tier
[host]
cpus = "0"

[island.web]
cpus = "1-3"
colour = "blue"
"#,
        &["7:1 island.web.colour"],
        "unknown field `colour`",
    ),
    (
        "unknown top-level key and table",
        r#"epoch = 30
[host]
cpus = "0"
[island.web]
cpus = "1-3"
[islands.x]
cpus = "4"
"#,
        &["1:1 epoch", "6:2 islands"],
        "unknown key `epoch`",
    ),
    (
        "unknown key in host, auto, unit",
        r#"[host]
cpu = "0"
[auto]
layot = "per_node"
[unit.u]
  memory = "1G"
"#,
        &["2:1 host.cpu", "4:1 auto.layot", "6:3 unit.u.memory"],
        "unknown field `cpu`",
    ),
    (
        "unknown key inside an adopt rule and an io limit",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit.a]
adopt = [{ comm = "x" }, { name = "nginx" }]
[unit.b]
io_limits = [{ device = "8:0", rbps = "1M", speed = 3 }]
[unit.c]
[[unit.c.io_limits]]
device = "8:0"
wbps = 1
burst = 2
"#,
        &[
            "6:28 unit.a.adopt[1].name",
            "8:45 unit.b.io_limits[0].speed",
            "13:1 unit.c.io_limits[0].burst",
        ],
        "unknown field `name`, expected one of `comm`, `exe`, `uid`, `cgroup`, `pid`",
    ),
    (
        "adopt rules with two keys, no key, or not a table",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit.a]
adopt = [{ comm = "x", uid = 3 }]
[unit.b]
adopt = [{}]
[unit.c]
adopt = ["nginx"]
"#,
        &[
            "6:10 unit.a.adopt[0]",
            "8:10 unit.b.adopt[0]",
            "10:10 unit.c.adopt[0]",
        ],
        "exactly one key",
    ),
    (
        "adopt rules that can never match",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit.a]
adopt = [{ comm = "a-very-long-task-name" }, { exe = "bin/x" }, { cgroup = "system.slice" }, { pid = 0 }]
"#,
        &[
            "6:12 unit.a.adopt[0].comm",
            "6:48 unit.a.adopt[1].exe",
            "6:67 unit.a.adopt[2].cgroup",
            "6:96 unit.a.adopt[3].pid",
        ],
        "1 to 15 bytes",
    ),
    (
        "systemd unit names that are not units",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit.a]
adopt = [{ systemd_unit = "nginx" }, { systemd_unit = "x.timer" }]
"#,
        &[
            "6:12 unit.a.adopt[0].systemd_unit",
            "6:40 unit.a.adopt[1].systemd_unit",
        ],
        "has no type",
    ),
    (
        "systemd units where atoll cannot take them",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[island.part]
cpus = "4-5"
exclusive = true
[unit.a]
island = "part"
adopt = [{ systemd_unit = "pg.service" }, { comm = "x" }]
[unit.b]
island = "web"
adopt = [{ systemd_unit = "a.service" }, { systemd_unit = "pg.service" }]
"#,
        &[
            "9:1 unit.a.island",
            "10:1 unit.a.adopt",
            "13:44 unit.b.adopt[1].systemd_unit",
        ],
        "is exclusive (a partition)",
    ),
    (
        "wrong types",
        r#"epoch_ms = "30"
[host]
cpus = 0
adopt_all = "yes"
[island.web]
cpus = "1-3"
[unit.a]
cpus = "2"
[unit.b]
weight = 1.5
"#,
        &[
            "1:12 epoch_ms",
            "3:8 host.cpus",
            "8:8 unit.a.cpus",
            "10:10 unit.b.weight",
        ],
        "invalid type: string \"30\", expected u64",
    ),
    (
        "bad sizes",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit.a]
memory_max = "1.5G"
[unit.b]
memory_low = -4096
[unit.c]
io_limits = [{ device = "8:0", rbps = "fast" }]
"#,
        &[
            "6:14 unit.a.memory_max",
            "8:14 unit.b.memory_low",
            "10:39 unit.c.io_limits[0].rbps",
        ],
        "\"1.5G\" is not a size",
    ),
    (
        "bad cpu lists, node lists and devices",
        r#"[host]
cpus = "0"
mems = "zero"
[island.web]
cpus = "3-1"
[island.db]
cpus = "4-7"
[unit.a]
io_limits = [{ device = "sda", wbps = 1 }]
"#,
        &[
            "3:8 host.mems",
            "5:8 island.web.cpus",
            "9:25 unit.a.io_limits[0].device",
        ],
        "\"zero\" is not a number or a range",
    ),
    (
        "invalid and reserved names",
        r#"[host]
cpus = "0"
[island.-web]
cpus = "1-3"
[island.host]
cpus = "4-7"
[unit."my.app"]
island = "host"
"#,
        &["3:1 island.-web", "5:1 island.host", "7:1 unit.my.app"],
        "'-' is not allowed",
    ),
    (
        "island CPU outside the machine and memory node outside it",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-9"
mems = "0,4"
"#,
        &["4:1 island.web.cpus", "5:1 island.web.mems"],
        "8-9 are not among the machine's online CPUs",
    ),
    (
        "overlap with the host and between islands",
        r#"[host]
cpus = "0-1"
[island.web]
cpus = "1-3"
[island.batch]
cpus = "3-7"
"#,
        &["4:1 island.web.cpus", "6:1 island.batch.cpus"],
        "CPUs 1 are already in the host partition",
    ),
    (
        "unit in a missing island, default island missing",
        r#"default_island = "api"
[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit.a]
island = "webb"
"#,
        &["1:1 default_island", "7:1 unit.a.island"],
        "no island named",
    ),
    (
        "realtime fields on a fair island",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
priority = [1, 10]
[island.batch]
cpus = "4-7"
policy = "batch"
rt_class = "rr"
rt_runtime_us = 1000
rt_period_us = 10000
"#,
        &[
            "5:1 island.web.priority",
            "9:1 island.batch.rt_class",
            "10:1 island.batch.rt_runtime_us",
            "11:1 island.batch.rt_period_us",
        ],
        "`priority` applies only to policy \"realtime\" (this is \"fair\")",
    ),
    (
        "realtime budgets, priorities and unit rt_priority",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[island.rt]
cpus = "4-7"
policy = "realtime"
priority = [50, 0]
rt_runtime_us = 1000000
[unit.a]
island = "web"
rt_priority = 10
[unit.b]
island = "rt"
"#,
        &[
            "8:1 island.rt.priority",
            "8:1 island.rt.priority",
            "9:1 island.rt.rt_runtime_us",
            "12:1 unit.a.rt_priority",
        ],
        "priorities must be within 1..=99",
    ),
    (
        "bad policy and rt class names",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
policy = "deadline"
[island.rt]
cpus = "4-7"
policy = "realtime"
rt_class = "edf"
"#,
        &["5:10 island.web.policy", "9:12 island.rt.rt_class"],
        "unknown variant `deadline`",
    ),
    (
        "entitlement checks",
        r#"epoch_ms = 0
[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit.a]
cpus = 4
cpu_cap = 0.001
weight = 0
io_weight = 20000
[unit.b]
cpus = 2
cpu_cap = 1
memory_min = "32G"
memory_low = "1G"
memory_max = "512M"
[unit.c]
io_limits = [{ device = "8:0" }]
"#,
        &[
            "1:1 epoch_ms",
            "7:1 unit.a.cpus",
            "8:1 unit.a.cpu_cap",
            "8:1 unit.a.cpu_cap",
            "9:1 unit.a.weight",
            "10:1 unit.a.io_weight",
            "13:1 unit.b.cpu_cap",
            "14:1 unit.b.memory_min",
            "15:1 unit.b.memory_low",
            "16:1 unit.b.memory_max",
            "18:14 unit.c.io_limits[0]",
        ],
        "0 ms is outside 1..=60000",
    ),
    (
        "syntax error",
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3
"#,
        &["4:12 -"],
        "",
    ),
    (
        "duplicate keys are a syntax error",
        r#"[island.web]
cpus = "1"
cpus = "2"
"#,
        &["3:1 -"],
        "duplicate key",
    ),
    (
        "not a table",
        r#"host = "0"
island = 3
[unit.a]
"#,
        &["1:8 host", "2:1 island"],
        "a [host] table",
    ),
    (
        "missing island cpus points at the table",
        r#"[host]
cpus = "0"

[island.web]
policy = "fair"
"#,
        &["4:1 island.web"],
        "missing field `cpus`",
    ),
    (
        "no islands at all",
        "[host]\ncpus = \"0\"\n",
        &["1:1 -"],
        "no islands",
    ),
    (
        "layout errors",
        r#"[host]
cpus = "0"
[auto]
layout = { split = 9 }
"#,
        &["4:1 auto.layout"],
        "cannot split 7 cores into 9 islands",
    ),
    (
        "unknown layout",
        r#"[auto]
layout = "per_socket"
"#,
        &["2:10 auto.layout"],
        "unknown layout \"per_socket\"",
    ),
    (
        "auto left with nothing",
        r#"[host]
cpus = "0"
[island.all]
cpus = "1-7"
[auto]
"#,
        &["5:1 auto.layout"],
        "no CPUs are left for [auto] islands",
    ),
    (
        "auto name clash",
        r#"[host]
cpus = "0"
[island.node1]
cpus = "1-3"
[auto]
layout = "per_node"
"#,
        &["3:1 island.node1"],
        "[auto] generates an island named \"node1\" too",
    ),
    (
        "problems of generated islands point at [auto]",
        r#"[host]
cpus = "0"
[auto]
layout = "per_node"
policy = "realtime"
priority = [60, 20]
"#,
        &["6:1 island.node0.priority", "6:1 island.node1.priority"],
        "range 60..=20 runs backwards",
    ),
];

#[test]
fn each_error_kind_has_its_position_and_key() {
    let topo = vm8();
    let mut failures = Vec::new();
    for (what, text, want, word) in CASES {
        let e = err(text, &topo);
        let got = where_(&e);
        if got != *want {
            failures.push(format!("{what}: got {got:?}, want {want:?}\n{e}"));
            continue;
        }
        if !e.diagnostics[0].message.contains(word) {
            failures.push(format!("{what}: first message lacks {word:?}\n{e}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn display_is_file_line_col_key_message() {
    let e = err(CASES[0].1, &vm8());
    assert_eq!(
        e.to_string(),
        "test.toml:7:1: island.web.colour: unknown field `colour`, expected one of `cpus`, \
         `mems`, `policy`, `rt_class`, `priority`, `rt_runtime_us`, `rt_period_us`, `arbitration`, `exclusive`, `user_units`, `user_units_max`, `rt_users`, `frequency`"
    );
    let e = err("[host]\ncpus = \"0\"\n", &vm8());
    assert_eq!(
        e.to_string(),
        "test.toml:1:1: no islands: add [island.NAME] tables or an [auto] section"
    );
}

#[test]
fn problems_in_different_sections_are_all_reported_in_order() {
    let e = err(
        r#"bogus = 1
[host]
cpus = "0"
[island.web]
cpus = "1-3"
policy = "fair"
rt_class = "fifo"
[island.db]
cpus = "4-9"
[unit.a]
island = "db"
memory_max = "lots"
[unit.b]
island = "db"
cpus = 8
"#,
        &vm8(),
    );
    assert_eq!(
        where_(&e),
        [
            "1:1 bogus",
            "7:1 island.web.rt_class",
            "9:1 island.db.cpus",
            "12:14 unit.a.memory_max",
            "15:1 unit.b.cpus",
        ]
    );
    assert_eq!(e.to_string().lines().count(), 5);
}

#[test]
fn no_echo_errors_about_islands_that_were_already_reported() {
    // island.web is broken; units in it are not also "in a missing island".
    let e = err(
        r#"default_island = "web"
[host]
cpus = "0"
[island.web]
cpus = "1-3"
policy = "fast"
[island.db]
cpus = "4-7"
[unit.a]
island = "web"
[unit.b]
island = "nope"
"#,
        &vm8(),
    );
    assert_eq!(where_(&e), ["6:10 island.web.policy", "12:1 unit.b.island"]);
    // A broken [auto] silences references to the islands it would have made.
    let e = err(
        "[auto]\nlayout = \"per_nodes\"\n[unit.a]\nisland = \"node0\"\n",
        &vm8(),
    );
    assert_eq!(where_(&e), ["2:10 auto.layout"]);
}

#[test]
fn a_bad_host_skips_validation_rather_than_guessing() {
    let e = err(
        "[host]\ncpus = \"0-\"\n[island.a]\ncpus = \"0-3\"\n",
        &vm8(),
    );
    assert_eq!(where_(&e), ["2:8 host.cpus"]);
    // Nor does [auto] guess what the host leaves; units are not "homeless".
    let e = err("[host]\ncpus = 0\n[auto]\n[unit.a]\ncpus = 1\n", &vm8());
    assert_eq!(where_(&e), ["2:8 host.cpus"]);
}
