//! The daemon's own figures (see [`crate::telemetry`]): what epochs and
//! their steps cost, API replies, decisions, and the standard `process_*`
//! metrics of the daemon process.

use super::text::{labels, Out};
use super::{COUNTER, GAUGE};
use crate::telemetry::Telemetry;

pub(super) const HISTOGRAM: &str = "histogram";

/// `(name, kind, help)` of each family.
pub(super) const OWN: &[(&str, &str, &str)] = &[
    (
        "atoll_epoch_duration_seconds",
        HISTOGRAM,
        "Time each epoch took on the loop (what it costs; the period is atoll_epoch_seconds).",
    ),
    (
        "atoll_epoch_step_duration_seconds",
        HISTOGRAM,
        "Time each step of an epoch took.",
    ),
    (
        "atoll_api_requests_total",
        COUNTER,
        "API requests answered, by operation and result.",
    ),
    (
        "atoll_decisions_total",
        COUNTER,
        "Decisions made, by action and reason.",
    ),
    (
        "process_cpu_seconds_total",
        COUNTER,
        "User and system CPU time the daemon used.",
    ),
    (
        "process_resident_memory_bytes",
        GAUGE,
        "Resident memory of the daemon.",
    ),
    (
        "process_open_fds",
        GAUGE,
        "File descriptors the daemon has open.",
    ),
    (
        "process_start_time_seconds",
        GAUGE,
        "When the daemon started, in seconds since the Unix epoch.",
    ),
];

fn help(name: &str) -> &'static str {
    OWN.iter()
        .find(|(n, ..)| *n == name)
        .map(|(_, _, h)| *h)
        .unwrap_or("")
}

fn counter(out: &mut Out, name: &str, keys: [&str; 2], rows: &[(&str, &str, u64)]) {
    let samples = rows
        .iter()
        .map(|(a, b, n)| (labels(&[(keys[0], a), (keys[1], b)]), n.to_string()))
        .collect();
    out.family(name, COUNTER, help(name), samples);
}

/// Renders every family of `t` that has a value.
pub(super) fn render(out: &mut Out, t: &Telemetry) {
    if let Some(e) = &t.epochs {
        let name = "atoll_epoch_duration_seconds";
        out.histogram(name, help(name), &[(String::new(), &e.epoch)]);
        let name = "atoll_epoch_step_duration_seconds";
        let series: Vec<_> = e
            .steps()
            .map(|(step, h)| (labels(&[("step", step.name())]), h))
            .collect();
        out.histogram(name, help(name), &series);
    }
    counter(
        out,
        "atoll_api_requests_total",
        ["op", "result"],
        &t.requests,
    );
    counter(
        out,
        "atoll_decisions_total",
        ["action", "reason"],
        &t.decisions,
    );
    if let Some(p) = &t.process {
        let one = |v: String| vec![(String::new(), v)];
        for (name, kind, value) in [
            (
                "process_cpu_seconds_total",
                COUNTER,
                p.cpu_seconds.to_string(),
            ),
            (
                "process_resident_memory_bytes",
                GAUGE,
                p.resident_bytes.to_string(),
            ),
            ("process_open_fds", GAUGE, p.open_fds.to_string()),
            (
                "process_start_time_seconds",
                GAUGE,
                p.start_time_seconds.to_string(),
            ),
        ] {
            out.family(name, kind, help(name), one(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::telemetry::epoch::EpochStats;
    use crate::telemetry::histogram::Histogram;

    fn rendered(t: &Telemetry) -> String {
        let mut out = Out {
            text: String::new(),
        };
        render(&mut out, t);
        out.text
    }

    #[test]
    fn a_histogram_has_cumulative_buckets_in_seconds_sum_and_count() {
        let mut h = Histogram::new(&[100, 2_500]);
        h.observe(Duration::from_micros(40));
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_micros(900));
        h.observe(Duration::from_millis(7));
        let mut out = Out {
            text: String::new(),
        };
        out.histogram("x_seconds", "X.", &[(String::new(), &h)]);
        out.histogram("y_seconds", "Y.", &[(labels(&[("step", "a\"b")]), &h)]);
        assert_eq!(
            out.text,
            "\
# HELP x_seconds X.
# TYPE x_seconds histogram
x_seconds_bucket{le=\"0.0001\"} 2
x_seconds_bucket{le=\"0.0025\"} 3
x_seconds_bucket{le=\"+Inf\"} 4
x_seconds_sum 0.00804
x_seconds_count 4
# HELP y_seconds Y.
# TYPE y_seconds histogram
y_seconds_bucket{step=\"a\\\"b\",le=\"0.0001\"} 2
y_seconds_bucket{step=\"a\\\"b\",le=\"0.0025\"} 3
y_seconds_bucket{step=\"a\\\"b\",le=\"+Inf\"} 4
y_seconds_sum{step=\"a\\\"b\"} 0.00804
y_seconds_count{step=\"a\\\"b\"} 4
"
        );
    }

    #[test]
    fn own_families_carry_their_labels() {
        let mut epochs = EpochStats::default();
        epochs.epoch.observe(Duration::from_millis(2));
        epochs.steps[7].observe(Duration::from_millis(1));
        let t = Telemetry {
            epochs: Some(epochs),
            decisions: vec![("apply_group", "config", 3), ("move_process", "rule", 1)],
            requests: vec![("status", "ok", 2), ("adopt", "permission_denied", 1)],
            process: Some(crate::telemetry::process::ProcessStats {
                cpu_seconds: 1.25,
                resident_bytes: 8192,
                open_fds: 9,
                start_time_seconds: 1_700_000_000.5,
            }),
        };
        let text = rendered(&t);
        for line in [
            "atoll_epoch_duration_seconds_bucket{le=\"0.001\"} 0",
            "atoll_epoch_duration_seconds_bucket{le=\"0.0025\"} 1",
            "atoll_epoch_duration_seconds_bucket{le=\"+Inf\"} 1",
            "atoll_epoch_duration_seconds_sum 0.002",
            "atoll_epoch_duration_seconds_count 1",
            "atoll_epoch_step_duration_seconds_bucket{step=\"compose\",le=\"0.001\"} 1",
            "atoll_epoch_step_duration_seconds_bucket{step=\"adoption\",le=\"0.00001\"} 0",
            "atoll_epoch_step_duration_seconds_count{step=\"state\"} 0",
            "atoll_api_requests_total{op=\"status\",result=\"ok\"} 2",
            "atoll_api_requests_total{op=\"adopt\",result=\"permission_denied\"} 1",
            "atoll_decisions_total{action=\"apply_group\",reason=\"config\"} 3",
            "atoll_decisions_total{action=\"move_process\",reason=\"rule\"} 1",
            "# TYPE process_cpu_seconds_total counter",
            "process_cpu_seconds_total 1.25",
            "# TYPE process_resident_memory_bytes gauge",
            "process_resident_memory_bytes 8192",
            "process_open_fds 9",
            "process_start_time_seconds 1700000000.5",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
        // Every step has a series, in order.
        let steps: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("atoll_epoch_step_duration_seconds_count{step=\""))
            .map(|l| l.split('"').next().unwrap())
            .collect();
        assert_eq!(
            steps,
            [
                "adoption",
                "rt_guard",
                "load",
                "coordination",
                "isolation",
                "comm",
                "apps",
                "compose",
                "state"
            ]
        );
    }

    #[test]
    fn nothing_measured_renders_nothing() {
        assert_eq!(rendered(&Telemetry::default()), "");
    }
}
