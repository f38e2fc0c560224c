//! `[auto]` layouts on synthetic machines, alone and mixed with islands.

mod common;

use atoll_core::spec::{RealtimePolicy, RtClass, SchedPolicy};
use atoll_core::topology::Topology;
use common::*;

fn auto(
    host: &str,
    layout: &str,
    topo: &atoll_core::topology::Topology,
) -> Vec<(String, String, String)> {
    let text = format!("[host]\ncpus = \"{host}\"\n[auto]\nlayout = {layout}\n");
    islands(&ok(&text, topo))
}

/// (what, machine, host cpus, layout, expected (name, cpus, mems)).
type Case<'a> = (
    &'a str,
    &'a Topology,
    &'a str,
    &'a str,
    &'a [(&'a str, &'a str, &'a str)],
);

#[test]
fn layouts_name_and_carve_islands() {
    let four = four_node(); // nodes of 8 CPUs, LLCs of 4, no SMT
    let one_node_two_llc = shape(1, 1, 2, 4, 1);
    let one_llc_smt = shape(1, 1, 1, 4, 2); // CPUs 0-3 + siblings 4-7
    let two = two_socket();
    let cases: &[Case] = &[
        (
            "per_node",
            &four,
            "0",
            "\"per_node\"",
            &[
                ("node0", "1-7", "0"),
                ("node1", "8-15", "1"),
                ("node2", "16-23", "2"),
                ("node3", "24-31", "3"),
            ],
        ),
        (
            "per_node keeps node ids when the host takes a node",
            &four,
            "0-7",
            "\"per_node\"",
            &[
                ("node1", "8-15", "1"),
                ("node2", "16-23", "2"),
                ("node3", "24-31", "3"),
            ],
        ),
        (
            "per_llc",
            &one_node_two_llc,
            "0",
            "\"per_llc\"",
            &[("llc0", "1-3", "0"), ("llc1", "4-7", "0")],
        ),
        (
            "per_llc keeps LLC indexes",
            &four,
            "0-19",
            "\"per_llc\"",
            &[
                ("llc5", "20-23", "2"),
                ("llc6", "24-27", "3"),
                ("llc7", "28-31", "3"),
            ],
        ),
        (
            "split keeps SMT siblings together",
            &two,
            "0,16",
            "{ split = 3 }",
            &[
                ("part0", "1-5,17-21", "0"),
                ("part1", "6-10,22-26", "0-1"),
                ("part2", "11-15,27-31", "1"),
            ],
        ),
        (
            "topology: several nodes -> per node",
            &two,
            "auto",
            "\"topology\"",
            &[("node0", "1-7,17-23", "0"), ("node1", "8-15,24-31", "1")],
        ),
        (
            "topology: one node, several LLCs -> per LLC",
            &one_node_two_llc,
            "auto",
            "\"topology\"",
            &[("llc0", "1-3", "0"), ("llc1", "4-7", "0")],
        ),
        (
            "topology: one LLC -> main",
            &one_llc_smt,
            "auto",
            "\"topology\"",
            &[("main", "1-3,5-7", "0")],
        ),
        (
            "topology counts the CPUs left, not the machine",
            &four,
            "0-23",
            "\"topology\"",
            &[("llc6", "24-27", "3"), ("llc7", "28-31", "3")],
        ),
        (
            "topology on this machine",
            &smt2(),
            "auto",
            "\"topology\"",
            &[("main", "1", "0")],
        ),
    ];
    for (what, topo, host, layout, want) in cases {
        assert_eq!(auto(host, layout, topo), triples(want), "{what}");
    }
}

#[test]
fn auto_without_layout_means_topology() {
    let spec = ok("[auto]\n", &two_socket());
    assert_eq!(
        islands(&spec),
        triples(&[("node0", "1-7,17-23", "0"), ("node1", "8-15,24-31", "1")])
    );
}

#[test]
fn auto_takes_what_the_host_and_explicit_islands_leave() {
    let spec = ok(
        r#"
[host]
cpus = "0"
[auto]
layout = "per_node"
[island.db]
cpus = "8-15"
policy = "batch"
[unit.a]
island = "node2"
cpus = 4
"#,
        &four_node(),
    );
    assert_eq!(
        islands(&spec),
        triples(&[
            ("db", "8-15", "1"),
            ("node0", "1-7", "0"),
            ("node2", "16-23", "2"),
            ("node3", "24-31", "3"),
        ])
    );
    assert_eq!(spec.islands[0].policy, SchedPolicy::Batch);
    assert_eq!(
        spec.default_island().unwrap().name,
        n("db"),
        "explicit first"
    );
    assert_eq!(spec.units[0].island, n("node2"));
}

#[test]
fn auto_policy_applies_to_every_generated_island() {
    let spec = ok(
        r#"
[auto]
layout = { split = 2 }
policy = "realtime"
rt_class = "rr"
priority = [5, 15]
rt_runtime_us = 200000
rt_period_us = 500000
"#,
        &two_socket(),
    );
    let want = SchedPolicy::Realtime(RealtimePolicy {
        class: RtClass::Rr,
        priority_min: 5,
        priority_max: 15,
        runtime_us: 200_000,
        period_us: 500_000,
    });
    assert_eq!(spec.islands.len(), 2);
    assert!(spec.islands.iter().all(|i| i.policy == want));
    let spec = ok("[auto]\npolicy = \"idle\"\n", &two_socket());
    assert!(spec.islands.iter().all(|i| i.policy == SchedPolicy::Idle));
}

#[test]
fn auto_refuses_realtime_keys_on_other_policies() {
    let e = err(
        "[auto]\npolicy = \"batch\"\nrt_period_us = 1000\n",
        &two_socket(),
    );
    assert_eq!(where_(&e), ["3:1 auto.rt_period_us"]);
}
