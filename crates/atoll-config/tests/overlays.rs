//! `[overlay.NAME]` and the island `arbitration` key: parsing, defaults,
//! the one-property rule, validation with positions, and the summary.

mod common;

use std::time::Duration;

use atoll_config::summary;
use atoll_core::coord::{ArbitrationPolicy, Property};
use common::*;

const BASE: &str = r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
arbitration = "priority"
[island.batch]
cpus = "4-7"
[unit.api]
island = "web"
[unit.db]
island = "batch"
[unit.crunch]
island = "batch"
"#;

fn with(extra: &str) -> String {
    format!("{BASE}{extra}")
}

#[test]
fn overlays_parse_with_their_defaults_and_islands_keep_their_arbitration() {
    let spec = ok(
        &with(
            r#"[overlay.shop]
priority = 5
units = ["api", "db"]
latency_us = 1000
react_pressure = 20
react_utilization = 0.8
react_recv_queue = "128K"
[overlay.batchwork]
units = ["crunch"]
throughput_floor = 250
[overlay.power]
units = []
cpu_cap = 4.5
"#,
        ),
        &vm8(),
    );
    assert_eq!(spec.islands[0].arbitration, ArbitrationPolicy::Priority);
    assert_eq!(spec.islands[1].arbitration, ArbitrationPolicy::RoundRobin);
    assert_eq!(spec.overlays.len(), 3);
    let shop = &spec.overlays[0];
    assert_eq!(shop.priority, 5);
    assert_eq!(shop.units, vec![n("api"), n("db")]);
    assert_eq!(
        shop.property,
        Property::LatencyPercentile {
            percentile: 99.0,
            bound_us: 1000
        }
    );
    assert_eq!(shop.react.pressure, Some(20.0));
    assert_eq!(shop.react.utilization, Some(0.8));
    assert_eq!(shop.react.recv_queue, Some(128 << 10));
    let b = &spec.overlays[1];
    assert_eq!(b.priority, 0);
    assert_eq!(b.property, Property::ThroughputFloor { per_s: 250.0 });
    assert!(b.react.is_empty());
    let p = &spec.overlays[2];
    assert!(p.units.is_empty());
    assert_eq!(p.property, Property::PlatformCpuCap { cpus: 4.5 });
    assert_eq!(
        shop.to_overlay_spec(&spec).units,
        vec![(n("web"), n("api")), (n("batch"), n("db"))]
    );
}

#[test]
fn a_percentile_qualifies_the_latency() {
    let spec = ok(
        &with("[overlay.shop]\nunits = [\"api\"]\nlatency_us = 500\npercentile = 99.9\n"),
        &vm8(),
    );
    assert_eq!(
        spec.overlays[0].property,
        Property::LatencyPercentile {
            percentile: 99.9,
            bound_us: 500
        }
    );
}

#[test]
fn every_overlay_problem_is_reported_at_its_key() {
    // BASE has 13 lines; the overlays start at line 14.
    let e = err(
        &with(
            r#"[overlay.two]
units = ["api"]
latency_us = 1000
throughput_floor = 5
[overlay.none]
units = ["db"]
[overlay.stray]
units = ["crunch"]
percentile = 90
throughput_floor = 1
colour = "red"
[overlay.ghost]
units = ["api", "nobody"]
cpu_cap = 99
react_pressure = 0
react_utilization = 1.5
[overlay.shape]
units = "api"
priority = 300
arbitration = "fifo"
"#,
        ),
        &vm8(),
    );
    assert_eq!(
        where_(&e),
        [
            "17:1 overlay.two.throughput_floor",
            "18:1 overlay.none",
            "24:1 overlay.stray.colour",
            "26:17 overlay.ghost.units[1]",
            "27:1 overlay.ghost.cpu_cap",
            "28:1 overlay.ghost.react_pressure",
            "29:1 overlay.ghost.react_utilization",
            "31:9 overlay.shape.units",
        ],
        "{e}"
    );
    let text = e.to_string();
    assert!(
        text.contains("second property next to `latency_us`"),
        "{text}"
    );
    assert!(text.contains("an overlay needs one property"), "{text}");
    assert!(text.contains("unknown field `colour`"), "{text}");
    assert!(text.contains("no unit named \"nobody\""), "{text}");
    assert!(text.contains("the islands have 7 CPUs"), "{text}");
}

#[test]
fn a_percentile_without_latency_and_a_shared_unit_are_refused() {
    let e = err(
        &with(
            r#"[overlay.a]
units = ["api"]
percentile = 90
throughput_floor = 1
[overlay.b]
units = ["api"]
latency_us = 10
[overlay.c]
cpu_cap = 2
[overlay.d]
cpu_cap = 3
"#,
        ),
        &vm8(),
    );
    assert_eq!(
        where_(&e),
        [
            "16:1 overlay.a.percentile",
            "19:10 overlay.b.units[0]",
            "24:1 overlay.d.cpu_cap",
        ],
        "{e}"
    );
    assert!(
        e.to_string().contains("already belongs to overlay a"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("overlay c sets the platform CPU cap"),
        "{e}"
    );
}

#[test]
fn an_overlay_on_a_broken_unit_is_not_reported_twice() {
    let e = err(
        &with("[unit.web2]\nisland = \"web\"\nspeed = 3\n[overlay.a]\nunits = [\"web2\"]\nlatency_us = 5\n"),
        &vm8(),
    );
    assert_eq!(where_(&e), ["16:1 unit.web2.speed"]);
}

#[test]
fn arbitration_values_are_checked() {
    let e = err(
        "[host]\ncpus = \"0\"\n[island.a]\ncpus = \"1-3\"\narbitration = \"fifo\"\n[auto]\narbitration = 3\n",
        &vm8(),
    );
    assert_eq!(where_(&e)[0], "5:15 island.a.arbitration");
    assert!(e.to_string().contains("unknown variant `fifo`"), "{e}");
    let spec = ok(
        "[host]\ncpus = \"0\"\n[auto]\nlayout = \"per_node\"\narbitration = \"priority\"\n",
        &vm8(),
    );
    assert!(spec
        .islands
        .iter()
        .all(|i| i.arbitration == ArbitrationPolicy::Priority));
}

#[test]
fn the_summary_lists_overlays_and_priority_arbitration() {
    let spec = ok(
        &with(
            r#"[overlay.shop]
priority = 5
units = ["api", "db"]
latency_us = 1000
react_pressure = 20
react_recv_queue = "128K"
[overlay.power]
cpu_cap = 4.5
"#,
        ),
        &vm8(),
    );
    let text = summary(&spec);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.contains(
            &"  web     cpus 1-3 (3 CPUs), mems 0, fair, arbitration by priority (default)"
        ),
        "{text}"
    );
    let at = lines.iter().position(|l| *l == "overlays: 2").expect(&text);
    assert_eq!(
        lines[at + 1],
        "  shop    priority 5, p99 latency within 1000 us, units api (web) db (batch), \
         reacts to CPU pressure > 20%, receive queue > 128K"
    );
    assert_eq!(
        lines[at + 2],
        "  power   priority 0, platform CPU cap of 4.5 CPUs, cap period 20 ms, window 200 ms"
    );
}

/// The `[overlay.NAME]` example of `docs/config.md` parses (over islands and
/// units of those names), and the documented summary lines are its own.
#[test]
fn the_documented_overlays_and_their_summary_are_real() {
    let doc = std::fs::read_to_string(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md"),
    )
    .unwrap();
    // The first fenced block opened by `opening` whose first line starts
    // with `first`.
    let block = |opening: &str, first: &str| -> String {
        let mut it = doc.lines().peekable();
        while let Some(l) = it.next() {
            if l == opening && it.peek().is_some_and(|n| n.starts_with(first)) {
                return it
                    .take_while(|l| *l != "```")
                    .map(|l| format!("{l}\n"))
                    .collect();
            }
        }
        panic!("no {opening} block starting with {first}");
    };
    let toml = block("```toml", "[overlay.shop]");
    let spec = ok(&format!("{BASE}{toml}"), &vm8());
    assert_eq!(spec.overlays.len(), 4);
    let summary = summary(&spec);
    let from = summary.find("overlays:").expect("overlays listed");
    assert_eq!(block("```", "overlays:"), summary[from..]);
}

#[test]
fn a_power_cap_overlay_parses_and_bad_ones_are_refused_at_their_key() {
    let spec = ok(
        &with(
            r#"[overlay.budget]
power_cap_watts = 95.5
"#,
        ),
        &vm8(),
    );
    assert_eq!(
        spec.overlays[0].property,
        Property::PlatformPowerCap { watts: 95.5 }
    );
    let dumped = atoll_config::to_toml(&spec).unwrap();
    assert!(dumped.contains("power_cap_watts = 95.5"), "{dumped}");
    let e = err(
        &with(
            r#"[overlay.zero]
power_cap_watts = 0
[overlay.two]
power_cap_watts = 50
cpu_cap = 2
[overlay.second]
power_cap_watts = 60
[overlay.named]
units = ["api"]
power_cap_watts = 70
"#,
        ),
        &vm8(),
    );
    assert_eq!(
        where_(&e),
        [
            "15:1 overlay.zero.power_cap_watts",
            "17:1 overlay.two.power_cap_watts",
            "20:1 overlay.second.power_cap_watts",
            "22:1 overlay.named.units",
            "23:1 overlay.named.power_cap_watts",
        ],
        "{e}"
    );
    let text = e.to_string();
    assert!(text.contains("0 is not a number of watts"), "{text}");
    assert!(
        text.contains("sets the platform power cap already"),
        "{text}"
    );
    assert!(text.contains("it names no unit"), "{text}");
}

#[test]
fn the_platform_caps_timing_is_set_beside_the_cap_and_dumped() {
    let spec = ok(
        &with("[overlay.power]\ncpu_cap = 4\ncap_period_ms = 50\ncap_interval_ms = 400\n"),
        &vm8(),
    );
    let t = spec.overlays[0].cap_timing;
    assert_eq!(t.period, Some(Duration::from_millis(50)));
    assert_eq!(t.interval, Some(Duration::from_millis(400)));
    let c = spec.coord_config();
    assert_eq!(c.cap_period, Duration::from_millis(50));
    assert_eq!(c.cap_interval, Duration::from_millis(400));
    let text = summary(&spec);
    assert!(
        text.contains("platform CPU cap of 4 CPUs, cap period 50 ms, window 400 ms"),
        "{text}"
    );
    // The dump writes them and loads back to the same spec.
    let dumped = atoll_config::to_toml(&spec).unwrap();
    assert!(dumped.contains("cap_period_ms = 50"), "{dumped}");
    assert!(dumped.contains("cap_interval_ms = 400"), "{dumped}");
    assert_eq!(ok(&dumped, &vm8()), spec);
    // One alone: the other keeps its default.
    let spec = ok(
        &with("[overlay.power]\ncpu_cap = 4\ncap_period_ms = 100\n"),
        &vm8(),
    );
    let c = spec.coord_config();
    assert_eq!(c.cap_period, Duration::from_millis(100));
    assert_eq!(c.cap_interval, Duration::from_millis(200));
    assert!(!atoll_config::to_toml(&spec)
        .unwrap()
        .contains("cap_interval_ms"));
    // No cap overlay: the defaults.
    let spec = ok(&with(""), &vm8());
    assert_eq!(
        spec.coord_config(),
        atoll_core::coord::CoordConfig::default()
    );
}

#[test]
fn bad_cap_timings_are_refused_at_their_key() {
    // BASE has 13 lines; the overlay's keys start at line 16.
    let cases: [(&str, &str, &str); 8] = [
        (
            "cap_period_ms = 5",
            "16:1 overlay.power.cap_period_ms",
            "5 ms is outside 10..=1000 ms",
        ),
        (
            "cap_period_ms = 1001",
            "16:1 overlay.power.cap_period_ms",
            "the kernel takes CFS periods of 1 ms to 1 s",
        ),
        (
            "cap_period_ms = 0",
            "16:1 overlay.power.cap_period_ms",
            "0 ms is outside",
        ),
        (
            "cap_period_ms = 150",
            "16:1 overlay.power.cap_period_ms",
            "the window (the default 200 ms) is outside 300..=60000 ms",
        ),
        (
            "cap_period_ms = 40\ncap_interval_ms = 79",
            "17:1 overlay.power.cap_interval_ms",
            "79 ms) is outside 80..=60000 ms: it spans at least two cap periods",
        ),
        (
            "cap_interval_ms = 60001",
            "16:1 overlay.power.cap_interval_ms",
            "outside 40..=60000 ms",
        ),
        (
            "cap_period_ms = -20",
            "16:17 overlay.power.cap_period_ms",
            "invalid value",
        ),
        (
            "cap_period = 20",
            "16:1 overlay.power.cap_period",
            "unknown field `cap_period`",
        ),
    ];
    for (keys, at, problem) in cases {
        let e = err(
            &with(&format!("[overlay.power]\ncpu_cap = 4\n{keys}\n")),
            &vm8(),
        );
        assert_eq!(where_(&e), [at], "{keys}: {e}");
        assert!(e.to_string().contains(problem), "{keys}: {e}");
    }
    // Timing belongs to a cap.
    let e = err(
        &with("[overlay.shop]\nunits = [\"api\"]\nlatency_us = 100\ncap_interval_ms = 400\n"),
        &vm8(),
    );
    assert_eq!(where_(&e), ["17:1 overlay.shop.cap_interval_ms"], "{e}");
    assert!(
        e.to_string()
            .contains("this overlay's property is not `cpu_cap`"),
        "{e}"
    );
}
