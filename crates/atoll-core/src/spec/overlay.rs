//! Management overlays in the platform description (inTune, seeds 000 and
//! 001): a property that spans units of several islands, the priority it
//! is arbitrated with, and an optional *reactive* policy the daemon runs
//! every epoch.
//!
//! [`OverlayConfig`] names its units only; their islands come from the
//! units, and [`OverlayConfig::to_overlay_spec`] gives the coordination
//! core's [`OverlaySpec`]. [`validate_overlays`] is called by
//! [`PlatformSpec::validate`] and reports every problem with its key path
//! (`overlay.shop.units[1]`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{PlatformSpec, SpecError};
use crate::coord::{CoordConfig, OverlaySpec, Property};
use crate::slo::{LatencySource, SloConfig};
use crate::Name;

/// An overlay declared in the platform description.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverlayConfig {
    /// Its name, unique on the platform.
    pub name: Name,
    /// Arbitration and escalation priority; higher wins.
    pub priority: u8,
    /// Its units (each in one island). Empty only for a platform CPU cap.
    pub units: Vec<Name>,
    /// What it maintains.
    pub property: Property,
    /// What the daemon watches for it every epoch.
    #[serde(default)]
    pub react: ReactPolicy,
    /// Where its latency comes from and which units run beside it as best
    /// effort ([`crate::slo`]).
    #[serde(default, skip_serializing_if = "SloConfig::is_default")]
    pub slo: SloConfig,
    /// The platform CPU cap's timing (`cpu_cap` overlays only; unset
    /// fields take [`CoordConfig`]'s defaults).
    #[serde(default, skip_serializing_if = "CapTiming::is_default")]
    pub cap_timing: CapTiming,
}

/// The timing of the platform CPU cap (rule 10 of
/// [`crate::coord`]): `cap_period_ms` and `cap_interval_ms` of a `cpu_cap`
/// overlay. `None`: [`CoordConfig`]'s default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapTiming {
    /// CFS period of the islands' caps ([`CoordConfig::cap_period`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<Duration>,
    /// Window over which the split is decided
    /// ([`CoordConfig::cap_interval`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
}

/// Least `cap_period_ms`: the kernel's least quota (1 ms) is the least cap
/// an island keeps (`cap_min`, 0.1 CPU) over this period, so a shorter one
/// would hand an island at its minimum more than its share.
pub const CAP_PERIOD_MIN: Duration = Duration::from_millis(10);
/// Longest `cap_period_ms`: the kernel's longest CFS period.
pub const CAP_PERIOD_MAX: Duration = Duration::from_secs(1);
/// Longest `cap_interval_ms`.
pub const CAP_INTERVAL_MAX: Duration = Duration::from_secs(60);

impl CapTiming {
    /// Whether neither is set.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// `base` with the fields set here.
    pub fn apply(&self, base: CoordConfig) -> CoordConfig {
        CoordConfig {
            cap_period: self.period.unwrap_or(base.cap_period),
            cap_interval: self.interval.unwrap_or(base.cap_interval),
            ..base
        }
    }

    /// What is wrong with it, as `(key, problem)`; `cpu_cap`: whether the
    /// overlay's property is the platform CPU cap.
    pub fn problems(&self, cpu_cap: bool) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !cpu_cap {
            for (k, set) in [
                ("cap_period_ms", self.period.is_some()),
                ("cap_interval_ms", self.interval.is_some()),
            ] {
                if set {
                    out.push((
                        k,
                        format!("`{k}` times the platform CPU cap, and this overlay's property is not `cpu_cap`"),
                    ));
                }
            }
            return out;
        }
        let cfg = self.apply(CoordConfig::default());
        let ms = |d: Duration| d.as_millis();
        if let Some(p) = self.period {
            if !(CAP_PERIOD_MIN..=CAP_PERIOD_MAX).contains(&p) {
                out.push((
                    "cap_period_ms",
                    format!(
                        "{} ms is outside {}..={} ms: the kernel takes CFS periods of 1 ms to 1 s, and an island's least cap ({} CPU) needs a quota of at least the kernel's 1 ms",
                        ms(p),
                        ms(CAP_PERIOD_MIN),
                        ms(CAP_PERIOD_MAX),
                        cfg.cap_min
                    ),
                ));
                return out;
            }
        }
        let least = 2 * cfg.cap_period;
        if cfg.cap_interval < least || cfg.cap_interval > CAP_INTERVAL_MAX {
            let why = if self.interval.is_some() {
                format!("{} ms", ms(cfg.cap_interval))
            } else {
                format!("the default {} ms", ms(cfg.cap_interval))
            };
            out.push((
                if self.interval.is_some() {
                    "cap_interval_ms"
                } else {
                    "cap_period_ms"
                },
                format!(
                    "the window ({why}) is outside {}..={} ms: it spans at least two cap periods ({} ms each), so that a group throttled early in a period is not read as idle later in it",
                    ms(least),
                    ms(CAP_INTERVAL_MAX),
                    ms(cfg.cap_period)
                ),
            ));
        }
        out
    }
}

/// The reactive policy of an overlay: monitored thresholds that make the
/// daemon send coordination messages on the overlay's behalf. Every field
/// is optional; an empty policy watches nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReactPolicy {
    /// CPU pressure (PSI `some`, %) of one of its units above which that
    /// unit's CPU time is tuned up (and below half of which it is tuned back
    /// down toward its configured value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure: Option<f64>,
    /// Utilization (used ÷ held CPUs, 0..1) of one of its units' islands
    /// above which the island borrows a CPU for the overlay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<f64>,
    /// Bytes waiting in the receive queues of a unit's sockets above which
    /// the unit is triggered (seed 001's buffer monitoring).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_queue: Option<u64>,
}

impl ReactPolicy {
    /// Whether it watches anything.
    pub fn is_empty(&self) -> bool {
        self.pressure.is_none() && self.utilization.is_none() && self.recv_queue.is_none()
    }
}

impl PlatformSpec {
    /// The coordination constants: [`CoordConfig`]'s defaults with the
    /// timing of the `cpu_cap` overlay, if there is one.
    pub fn coord_config(&self) -> CoordConfig {
        self.overlays
            .iter()
            .find(|o| matches!(o.property, Property::PlatformCpuCap { .. }))
            .map_or_else(CoordConfig::default, |o| {
                o.cap_timing.apply(CoordConfig::default())
            })
    }
}

impl OverlayConfig {
    /// The coordination core's view: units with their islands (units not in
    /// `spec` are left out; validation reports them).
    pub fn to_overlay_spec(&self, spec: &PlatformSpec) -> OverlaySpec {
        OverlaySpec {
            name: self.name.clone(),
            priority: self.priority,
            units: self
                .units
                .iter()
                .filter_map(|u| {
                    let unit = spec.units.iter().find(|s| &s.name == u)?;
                    Some((unit.island.clone(), unit.name.clone()))
                })
                .collect(),
            property: self.property,
        }
    }
}

/// Checks every overlay of `spec`; appends what is wrong to `errs`.
pub(super) fn validate_overlays(spec: &PlatformSpec, errs: &mut Vec<SpecError>) {
    let mut names: Vec<&Name> = Vec::new();
    let mut owner: Vec<(&Name, &Name)> = Vec::new();
    let mut cap_overlay: Option<&Name> = None;
    let mut power_overlay: Option<&Name> = None;
    let island_cpus: usize = spec.islands.iter().map(|i| i.cpus.len()).sum();
    let cap_min = CoordConfig::default().cap_min;
    for o in &spec.overlays {
        let key = format!("overlay.{}", o.name);
        if names.contains(&&o.name) {
            errs.push(SpecError::new(&key, "overlay defined twice"));
        }
        names.push(&o.name);
        for (i, u) in o.units.iter().enumerate() {
            let ukey = format!("{key}.units[{i}]");
            if !spec.units.iter().any(|s| &s.name == u) {
                errs.push(SpecError::new(
                    ukey,
                    format!("no unit named {:?} in the platform description", u.as_str()),
                ));
                continue;
            }
            if o.units[..i].contains(u) {
                errs.push(SpecError::new(ukey, format!("unit {u} is listed twice")));
                continue;
            }
            if let Some((_, other)) = owner.iter().find(|(unit, _)| *unit == u) {
                errs.push(SpecError::new(
                    ukey,
                    format!("unit {u} already belongs to overlay {other}; a unit has at most one overlay"),
                ));
                continue;
            }
            owner.push((u, &o.name));
        }
        match o.property {
            Property::LatencyPercentile {
                percentile,
                bound_us,
            } => {
                if !(percentile > 0.0 && percentile <= 100.0) {
                    errs.push(SpecError::new(
                        format!("{key}.percentile"),
                        format!("{percentile} is outside (0, 100]"),
                    ));
                }
                if bound_us == 0 {
                    errs.push(SpecError::new(
                        format!("{key}.latency_us"),
                        "a latency bound must be above 0",
                    ));
                }
            }
            Property::ThroughputFloor { per_s } => {
                if !(per_s.is_finite() && per_s > 0.0) {
                    errs.push(SpecError::new(
                        format!("{key}.throughput_floor"),
                        format!("{per_s} is not a number of operations per second above 0"),
                    ));
                }
            }
            Property::PlatformCpuCap { cpus } => {
                let least = cap_min * spec.islands.len() as f64;
                if !(cpus.is_finite() && cpus >= least && cpus <= island_cpus as f64) {
                    errs.push(SpecError::new(
                        format!("{key}.cpu_cap"),
                        format!(
                            "{cpus} is outside [{least}, {island_cpus}]: the islands have {island_cpus} CPUs, and each of the {} islands keeps at least {cap_min}",
                            spec.islands.len()
                        ),
                    ));
                }
                if let Some(other) = cap_overlay {
                    errs.push(SpecError::new(
                        format!("{key}.cpu_cap"),
                        format!("overlay {other} sets the platform CPU cap already; there is one"),
                    ));
                }
                cap_overlay = Some(&o.name);
            }
            Property::PlatformPowerCap { watts } => {
                let cap = crate::power::PowerCap {
                    budget_watts: watts,
                    hysteresis: crate::power::cap::DEFAULT_HYSTERESIS,
                };
                if !(cap.validate().is_ok() && watts <= crate::power::cap::MAX_BUDGET_WATTS) {
                    errs.push(SpecError::new(
                        format!("{key}.power_cap_watts"),
                        format!(
                            "{watts} is not a number of watts in (0, {}]",
                            crate::power::cap::MAX_BUDGET_WATTS
                        ),
                    ));
                }
                if let Some(other) = power_overlay {
                    errs.push(SpecError::new(
                        format!("{key}.power_cap_watts"),
                        format!(
                            "overlay {other} sets the platform power cap already; there is one"
                        ),
                    ));
                }
                power_overlay = Some(&o.name);
                if !o.units.is_empty() {
                    errs.push(SpecError::new(
                        format!("{key}.units"),
                        "a power_cap_watts overlay holds the whole machine; it names no unit",
                    ));
                }
            }
        }
        let is_cap = matches!(
            o.property,
            Property::PlatformCpuCap { .. } | Property::PlatformPowerCap { .. }
        );
        if o.units.is_empty() && !is_cap {
            errs.push(SpecError::new(
                format!("{key}.units"),
                "this property needs at least one unit (only a cpu_cap or power_cap_watts overlay may have none)",
            ));
        }
        let r = &o.react;
        if o.units.is_empty() && !r.is_empty() {
            errs.push(SpecError::new(
                &key,
                "a reactive policy (react_*) watches the overlay's units, and it has none",
            ));
        }
        if let Some(p) = r.pressure {
            if !(p > 0.0 && p <= 100.0) {
                errs.push(SpecError::new(
                    format!("{key}.react_pressure"),
                    format!("{p} is outside (0, 100] (percent)"),
                ));
            }
        }
        if let Some(u) = r.utilization {
            if !(u > 0.0 && u <= 1.0) {
                errs.push(SpecError::new(
                    format!("{key}.react_utilization"),
                    format!("{u} is outside (0, 1]"),
                ));
            }
        }
        if r.recv_queue == Some(0) {
            errs.push(SpecError::new(
                format!("{key}.react_recv_queue"),
                "a queue threshold must be above 0 bytes",
            ));
        }
        let cpu_cap = matches!(o.property, Property::PlatformCpuCap { .. });
        for (k, problem) in o.cap_timing.problems(cpu_cap) {
            errs.push(SpecError::new(format!("{key}.{k}"), problem));
        }
        validate_slo(spec, o, &key, errs);
    }
    validate_best_effort_owners(spec, errs);
}

/// Checks an overlay's latency source and best-effort units.
fn validate_slo(spec: &PlatformSpec, o: &OverlayConfig, key: &str, errs: &mut Vec<SpecError>) {
    let is_latency = matches!(o.property, Property::LatencyPercentile { .. });
    let slo = &o.slo;
    if !is_latency && slo.source != LatencySource::Report {
        errs.push(SpecError::new(
            format!("{key}.latency_source"),
            format!(
                "a {} source measures latency, and this overlay's property is not `latency_us`",
                slo.source.kind()
            ),
        ));
    }
    if slo.window.is_zero() {
        errs.push(SpecError::new(
            format!("{key}.window_ms"),
            "a percentile window must be longer than 0 ms",
        ));
    }
    if let LatencySource::Probe(p) = &slo.source {
        if p.every.is_zero() {
            errs.push(SpecError::new(
                format!("{key}.probe_every_ms"),
                "probes need a time between them above 0 ms",
            ));
        }
        if p.timeout.is_zero() {
            errs.push(SpecError::new(
                format!("{key}.probe_timeout_ms"),
                "a probe's timeout must be above 0 ms",
            ));
        }
    }
    if let LatencySource::AccessLog(l) = &slo.source {
        if !l.path.is_absolute() {
            errs.push(SpecError::new(
                format!("{key}.access_log"),
                format!("{} is not an absolute path", l.path.display()),
            ));
        }
        if matches!(l.format, crate::slo::LogFormat::Field { index: 0, .. }) {
            errs.push(SpecError::new(
                format!("{key}.log_field"),
                "fields count from 1 (or from -1, the last)",
            ));
        }
    }
    match slo.stale_after {
        Some(d) if d.is_zero() => errs.push(SpecError::new(
            format!("{key}.stale_after_ms"),
            "a window goes stale after more than 0 ms",
        )),
        Some(_) if slo.source == LatencySource::Report => errs.push(SpecError::new(
            format!("{key}.stale_after_ms"),
            "`stale_after_ms` is for a measured latency (latency_source = \"probe\" or \"access_log\"), and this overlay's is \"report\"",
        )),
        _ => {}
    }
    if slo.best_effort.is_empty() {
        let d = crate::slo::BeConfig::default();
        for (k, set) in [
            ("be_steps", slo.be.steps != d.steps),
            ("be_grow_above", slo.be.grow_above != d.grow_above),
            ("be_cut_below", slo.be.cut_below != d.cut_below),
        ] {
            if set {
                errs.push(SpecError::new(
                    format!("{key}.{k}"),
                    format!(
                        "`{k}` moves best-effort units, and this overlay names none (best_effort)"
                    ),
                ));
            }
        }
    }
    for (k, problem) in slo.be.problems() {
        errs.push(SpecError::new(format!("{key}.{k}"), problem));
    }
    if !slo.best_effort.is_empty() && !is_latency {
        errs.push(SpecError::new(
            format!("{key}.best_effort"),
            "best-effort units are run beside a latency SLO, and this overlay's property is not `latency_us`",
        ));
    }
    for (i, u) in slo.best_effort.iter().enumerate() {
        let ukey = format!("{key}.best_effort[{i}]");
        if !spec.units.iter().any(|s| &s.name == u) {
            errs.push(SpecError::new(
                ukey,
                format!("no unit named {:?} in the platform description", u.as_str()),
            ));
        } else if slo.best_effort[..i].contains(u) {
            errs.push(SpecError::new(ukey, format!("unit {u} is listed twice")));
        } else if o.units.contains(u) {
            errs.push(SpecError::new(
                ukey,
                format!("unit {u} is one of the overlay's latency-critical units"),
            ));
        }
    }
}

/// A best-effort unit belongs to one overlay's `best_effort` at most.
fn validate_best_effort_owners(spec: &PlatformSpec, errs: &mut Vec<SpecError>) {
    let mut owner: Vec<(&Name, &Name)> = Vec::new();
    for o in &spec.overlays {
        for (i, u) in o.slo.best_effort.iter().enumerate() {
            if o.slo.best_effort[..i].contains(u) {
                continue;
            }
            if let Some((_, other)) = owner.iter().find(|(unit, _)| *unit == u) {
                errs.push(SpecError::new(
                    format!("overlay.{}.best_effort[{i}]", o.name),
                    format!("unit {u} is best effort for overlay {other} already"),
                ));
            } else {
                owner.push((u, &o.name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::{n, spec16, topo16};
    use crate::spec::{Entitlement, UnitSpec};

    fn overlay(name: &str, units: &[&str], property: Property) -> OverlayConfig {
        OverlayConfig {
            name: n(name),
            priority: 0,
            units: units.iter().map(|u| n(u)).collect(),
            property,
            slo: Default::default(),
            cap_timing: Default::default(),
            react: ReactPolicy::default(),
        }
    }

    fn latency() -> Property {
        Property::LatencyPercentile {
            percentile: 99.0,
            bound_us: 1000,
        }
    }

    fn spec() -> PlatformSpec {
        let mut s = spec16();
        s.units.push(UnitSpec {
            name: n("db"),
            island: n("rt"),
            entitlement: Entitlement::default(),
            adopt: vec![],
            rt_priority: None,
        });
        s
    }

    #[test]
    fn a_good_overlay_resolves_its_islands() {
        let mut s = spec();
        s.overlays.push(overlay("shop", &["api", "db"], latency()));
        s.overlays
            .push(overlay("cap", &[], Property::PlatformCpuCap { cpus: 4.0 }));
        s.validate(&topo16()).unwrap();
        let o = s.overlays[0].to_overlay_spec(&s);
        assert_eq!(
            o.units,
            vec![(n("web"), n("api")), (n("rt"), n("db"))],
            "islands come from the units"
        );
    }

    #[test]
    fn the_cap_timing_is_checked_and_sets_the_coordination_constants() {
        let ms = Duration::from_millis;
        let timing = |p: Option<u64>, i: Option<u64>| CapTiming {
            period: p.map(ms),
            interval: i.map(ms),
        };
        let keys = |t: CapTiming, cap: bool| -> Vec<&'static str> {
            t.problems(cap).into_iter().map(|(k, _)| k).collect()
        };
        assert!(keys(timing(None, None), true).is_empty());
        assert!(keys(timing(None, None), false).is_empty());
        assert!(keys(timing(Some(10), Some(20)), true).is_empty());
        assert!(keys(timing(Some(1000), Some(2000)), true).is_empty());
        assert!(keys(timing(None, Some(60_000)), true).is_empty());
        assert_eq!(keys(timing(Some(9), None), true), ["cap_period_ms"]);
        assert_eq!(keys(timing(Some(1001), None), true), ["cap_period_ms"]);
        // 150 ms against the default window of 200 ms: named at the period.
        assert_eq!(keys(timing(Some(150), None), true), ["cap_period_ms"]);
        assert_eq!(keys(timing(Some(40), Some(79)), true), ["cap_interval_ms"]);
        assert_eq!(keys(timing(None, Some(60_001)), true), ["cap_interval_ms"]);
        assert_eq!(
            keys(timing(Some(20), Some(200)), false),
            ["cap_period_ms", "cap_interval_ms"]
        );
        // The spec's constants take the cap overlay's timing.
        let mut s = spec();
        assert_eq!(s.coord_config(), CoordConfig::default());
        let mut cap = overlay("cap", &[], Property::PlatformCpuCap { cpus: 4.0 });
        cap.cap_timing = timing(Some(50), None);
        s.overlays.push(overlay("shop", &["api"], latency()));
        s.overlays.push(cap);
        s.validate(&topo16()).unwrap();
        let c = s.coord_config();
        assert_eq!((c.cap_period, c.cap_interval), (ms(50), ms(200)));
        assert_eq!(c.cap_min, CoordConfig::default().cap_min);
        c.validate().unwrap();
        s.overlays[1].cap_timing = timing(Some(5), None);
        let errs = s.validate(&topo16()).unwrap_err();
        assert_eq!(errs[0].key, "overlay.cap.cap_period_ms", "{errs:#?}");
    }

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let mut s = spec();
        let mut a = overlay("a", &["api", "nope", "api"], latency());
        a.react.pressure = Some(120.0);
        s.overlays.push(a);
        s.overlays.push(overlay(
            "b",
            &["api"],
            Property::ThroughputFloor { per_s: 0.0 },
        ));
        s.overlays
            .push(overlay("c", &[], Property::PlatformCpuCap { cpus: 15.0 }));
        let mut d = overlay("d", &[], Property::PlatformCpuCap { cpus: 1.0 });
        d.react.utilization = Some(0.5);
        s.overlays.push(d);
        s.overlays.push(overlay("e", &[], latency()));
        let errs = s.validate(&topo16()).unwrap_err();
        let keys: Vec<_> = errs.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "overlay.a.units[1]",
                "overlay.a.units[2]",
                "overlay.a.react_pressure",
                "overlay.b.units[0]",
                "overlay.b.throughput_floor",
                "overlay.c.cpu_cap",
                "overlay.d.cpu_cap",
                "overlay.d",
                "overlay.e.units",
            ],
            "{errs:#?}"
        );
        assert!(errs[3].problem.contains("overlay a"), "{}", errs[3]);
        assert!(errs[5].problem.contains("14 CPUs"), "{}", errs[5]);
        assert!(errs[6].problem.contains("overlay c"), "{}", errs[6]);
    }

    #[test]
    fn latency_sources_and_best_effort_units_are_checked() {
        use std::time::Duration;

        use crate::slo::{AccessLogSpec, LogFormat, ProbeSpec, ProbeTarget};
        let mut s = spec();
        s.units.push(UnitSpec {
            name: n("batch"),
            island: n("web"),
            entitlement: Entitlement::default(),
            adopt: vec![],
            rt_priority: None,
        });
        let mut a = overlay("a", &["api"], latency());
        a.slo.best_effort = vec![n("batch"), n("api"), n("nope")];
        a.slo.source = LatencySource::Probe(ProbeSpec {
            target: ProbeTarget::parse("http://127.0.0.1:1/", None).unwrap(),
            every: Duration::ZERO,
            timeout: Duration::from_secs(1),
        });
        s.overlays.push(a);
        let mut b = overlay("b", &["db"], Property::ThroughputFloor { per_s: 5.0 });
        b.slo.source = LatencySource::AccessLog(AccessLogSpec {
            path: "relative.log".into(),
            format: LogFormat::NGINX,
        });
        b.slo.best_effort = vec![n("batch")];
        s.overlays.push(b);
        let errs = s.validate(&topo16()).unwrap_err();
        let keys: Vec<_> = errs.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "overlay.a.probe_every_ms",
                "overlay.a.best_effort[1]",
                "overlay.a.best_effort[2]",
                "overlay.b.latency_source",
                "overlay.b.access_log",
                "overlay.b.best_effort",
                "overlay.b.best_effort[0]",
            ],
            "{errs:#?}"
        );
        assert!(errs[1].problem.contains("latency-critical"), "{}", errs[1]);
        assert!(errs[6].problem.contains("overlay a"), "{}", errs[6]);
    }

    #[test]
    fn staleness_and_best_effort_thresholds_are_checked() {
        use std::time::Duration;

        use crate::slo::{BeConfig, ProbeSpec, ProbeTarget};
        let mut s = spec();
        let mut a = overlay("a", &["api"], latency());
        a.slo.stale_after = Some(Duration::from_secs(1));
        a.slo.be = BeConfig {
            steps: 4,
            ..BeConfig::default()
        };
        s.overlays.push(a);
        let mut b = overlay("b", &["db"], latency());
        b.slo.source = LatencySource::Probe(ProbeSpec {
            target: ProbeTarget::parse("tcp://127.0.0.1:1", None).unwrap(),
            every: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
        });
        b.slo.stale_after = Some(Duration::ZERO);
        b.slo.best_effort = vec![n("api")];
        b.slo.be = BeConfig {
            steps: 0,
            grow_above: 0.05,
            cut_below: 0.1,
            ..BeConfig::default()
        };
        s.overlays.push(b);
        let errs = s.validate(&topo16()).unwrap_err();
        let keys: Vec<_> = errs.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "overlay.a.stale_after_ms",
                "overlay.a.be_steps",
                "overlay.b.stale_after_ms",
                "overlay.b.be_steps",
                "overlay.b.be_grow_above",
            ],
            "{errs:#?}"
        );
        assert!(errs[0].problem.contains("\"report\""), "{}", errs[0]);
        assert!(errs[1].problem.contains("names none"), "{}", errs[1]);
    }
}
