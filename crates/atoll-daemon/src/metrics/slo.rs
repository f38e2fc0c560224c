//! Latency overlays' figures: what atoll measures for them, their slack,
//! their best-effort level, and what measuring costs (the CPU time of the
//! probe or log-tail thread). One sample per latency overlay (label
//! `overlay`); the cost only for overlays whose source is a thread.

use atoll_proto::slo::SloStatus;

use super::text::{labels, Out};
use super::{COUNTER, GAUGE};

/// Reads one figure of an overlay's measurement as `(labels, value)`
/// (`None`: not known, or not measured by a thread).
pub(super) type SloGet = fn(&SloStatus) -> Option<(String, String)>;

/// `(name, kind, help, get)` of each family.
pub(super) const SLO: &[(&str, &str, &str, SloGet)] = &[
    (
        "atoll_slo_source_cpu_seconds_total",
        COUNTER,
        "CPU time the overlay's latency source thread (probe or access-log tail) has used.",
        |s| {
            (s.source != "report").then(|| {
                (
                    labels(&[("overlay", &s.overlay), ("source", &s.source)]),
                    format!("{}", s.probe_cpu_us as f64 / 1e6),
                )
            })
        },
    ),
    (
        "atoll_slo_latency_us",
        GAUGE,
        "The overlay's latency at its SLO percentile, as measured (or last reported), microseconds.",
        |s| {
            s.measured_us.map(|v| {
                (
                    labels(&[
                        ("overlay", &s.overlay),
                        ("percentile", &format!("{}", s.percentile)),
                    ]),
                    format!("{v}"),
                )
            })
        },
    ),
    (
        "atoll_slo_slack",
        GAUGE,
        "(SLO - measured) / SLO of the overlay's latency; below 0 when the SLO is missed.",
        |s| {
            s.slack
                .map(|k| (labels(&[("overlay", &s.overlay)]), format!("{k}")))
        },
    ),
    (
        "atoll_slo_stale",
        GAUGE,
        "1 while the overlay's measured window is stale (its newest sample too old): its latency is unknown.",
        |s| {
            (s.source != "report").then(|| {
                (
                    labels(&[("overlay", &s.overlay)]),
                    u8::from(s.stale).to_string(),
                )
            })
        },
    ),
    (
        "atoll_slo_best_effort_level",
        GAUGE,
        "The level of the overlay's best-effort units, 0 (the floor) to their steps (as configured).",
        |s| {
            s.be_level
                .map(|l| (labels(&[("overlay", &s.overlay)]), l.to_string()))
        },
    ),
];

/// Renders the latency overlays' families.
pub(super) fn render(out: &mut Out, slo: &[SloStatus]) {
    for (name, kind, help, get) in SLO {
        let samples = slo.iter().filter_map(get).collect();
        out.family(name, kind, help, samples);
    }
}
