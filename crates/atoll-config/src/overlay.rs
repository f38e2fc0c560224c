//! `[overlay.NAME]`: from the table as written to an
//! [`OverlayConfig`](atoll_core::spec::OverlayConfig).
//!
//! The table has exactly one property key (`latency_us`, with an optional
//! `percentile`; `throughput_floor`; `cpu_cap`; or `power_cap_watts`),
//! checked here so that a
//! second one is reported at its own key. `cap_period_ms` and
//! `cap_interval_ms` time a `cpu_cap` (checked with the rest). Ranges, units and the one-cap rule
//! are checked by [`PlatformSpec::validate`](atoll_core::spec::PlatformSpec::validate).

use std::time::Duration;

use atoll_core::coord::Property;
use atoll_core::spec::{CapTiming, OverlayConfig, ReactPolicy};
use atoll_core::Name;

use crate::error::Problem;
use crate::raw::RawOverlay;
use crate::spans::join;

/// Default percentile of a latency overlay.
pub const DEFAULT_PERCENTILE: f64 = 99.0;

/// The property keys, in the order they are looked at.
const PROPERTY_KEYS: &str = "`latency_us`, `throughput_floor`, `cpu_cap` or `power_cap_watts`";

/// Resolves one overlay table; problems go to `problems`.
pub(crate) fn resolve(
    name: &Name,
    raw: &RawOverlay,
    problems: &mut Vec<Problem>,
) -> Option<OverlayConfig> {
    let path = join("overlay", name.as_str());
    let mut found: Vec<(&str, Property)> = Vec::new();
    if let Some(bound_us) = raw.latency_us {
        found.push((
            "latency_us",
            Property::LatencyPercentile {
                percentile: raw.percentile.unwrap_or(DEFAULT_PERCENTILE),
                bound_us,
            },
        ));
    } else if raw.percentile.is_some() {
        problems.push(Problem::at_key(
            join(&path, "percentile"),
            "`percentile` qualifies `latency_us`, which is not set",
        ));
    }
    if let Some(per_s) = raw.throughput_floor {
        found.push(("throughput_floor", Property::ThroughputFloor { per_s }));
    }
    if let Some(cpus) = raw.cpu_cap {
        found.push(("cpu_cap", Property::PlatformCpuCap { cpus }));
    }
    if let Some(watts) = raw.power_cap_watts {
        found.push(("power_cap_watts", Property::PlatformPowerCap { watts }));
    }
    let property = match found.as_slice() {
        [] => {
            problems.push(Problem::at_key(
                &path,
                format!("an overlay needs one property: {PROPERTY_KEYS}"),
            ));
            return None;
        }
        [(_, p)] => *p,
        [(first, _), rest @ ..] => {
            for (key, _) in rest {
                problems.push(Problem::at_key(
                    join(&path, key),
                    format!(
                        "`{key}` is a second property next to `{first}`; an overlay has exactly one ({PROPERTY_KEYS})"
                    ),
                ));
            }
            return None;
        }
    };
    let slo = crate::slo::resolve(&path, raw, problems)?;
    Some(OverlayConfig {
        name: name.clone(),
        priority: raw.priority.unwrap_or(0),
        units: raw.units.clone(),
        property,
        react: ReactPolicy {
            pressure: raw.react_pressure,
            utilization: raw.react_utilization,
            recv_queue: raw.react_recv_queue.map(|s| s.0),
        },
        slo,
        cap_timing: CapTiming {
            period: raw.cap_period_ms.map(Duration::from_millis),
            interval: raw.cap_interval_ms.map(Duration::from_millis),
        },
    })
}
