//! SLOs measured without changing the application, and best-effort units
//! beside an overlay's latency-critical ones (Heracles).
//!
//! The component owns, per overlay with a latency property:
//!
//! - its **latency source** (`[overlay.NAME] latency_source`): `report`
//!   (the application reports through the API, as before), or a thread
//!   ([`feed`]) that probes an endpoint ([`probe`]) or tails an access log
//!   ([`tail`]) and sends what it measured by channel; the loop puts the
//!   samples in a sliding window (`atoll_core::slo::LatencyWindow`, stamped
//!   with the loop's clock) and reports the window's percentile to the
//!   overlay's coordination once a second, as an application would. A
//!   window whose newest sample is older than the overlay's `stale_after`
//!   is **stale**: it gives no percentile, so nothing is reported and the
//!   best-effort units hold (the latency is unknown, not met);
//! - its **best-effort units** (`best_effort`): a level from the floor to
//!   their configured settings, moved by `atoll_core::slo::BeConfig` from
//!   the slack of the SLO each epoch (growing at most a step a second,
//!   cutting at once; thresholds per overlay, its `be_*` keys). The levels are the `slo` layer of the composer
//!   ([`Slo`] is a [`Layer`]): a best-effort unit below the top gets a lower
//!   `cpu.weight`, a CPU quota and a tighter `memory.high`; at the top, or
//!   once the overlay is gone, the layer leaves it as configured. Each move
//!   touches the units' groups with the slack that caused it
//!   ([`Reason::Slo`]).

pub mod feed;
pub mod probe;
pub mod tail;

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

use atoll_core::coord::Property;
use atoll_core::decision::Reason;
use atoll_core::plan::{CpuMax, GroupSettings};
use atoll_core::slo::{slack, BeConfig, BeKnobs, BeMove, LatencySource, LatencyWindow};
use atoll_core::spec::OverlayConfig;
use atoll_core::Name;
use atoll_proto::slo::SloStatus;
pub use feed::{Feed, SourceHandle};

use crate::compose::{At, Composer, Layer};
use crate::registry::Registry;

/// How often a measured percentile is reported to coordination.
pub const REPORT_EVERY: Duration = Duration::from_secs(1);
/// Best-effort units grow at most one step in this long.
pub const GROW_EVERY: Duration = Duration::from_secs(1);
/// Samples a window holds at most.
pub const WINDOW_MAX: usize = 20_000;
/// Period of the CPU quota written for a best-effort unit, µs.
const QUOTA_PERIOD_US: u64 = 100_000;

/// Why `overlay_show` has nothing to show.
#[derive(Debug, thiserror::Error)]
pub enum SloError {
    /// No such overlay.
    #[error("no overlay {0}")]
    NoOverlay(String),
    /// The overlay's property is not a latency.
    #[error("overlay {0} has no latency property (latency_us): nothing is measured for it")]
    NotLatency(String),
}

/// What is measured for one overlay.
#[derive(Debug)]
struct Measured {
    source: LatencySource,
    window: LatencyWindow,
    /// The source's thread (none for `report`).
    _handle: Option<SourceHandle>,
    cpu_us: u64,
    timeouts: u64,
    error: Option<String>,
    last_report: Option<Duration>,
    /// When the source started (the loop's clock).
    started: Duration,
    /// The newest sample may be this old before the window is stale.
    stale_after: Option<Duration>,
    /// Whether it was stale at the last epoch (to log the change once).
    was_stale: bool,
}

impl Measured {
    /// Whether the window is stale at `now`: a thread measures it, it has
    /// had samples, and the newest is older than `stale_after`. Before the
    /// first sample it is not stale, only empty.
    fn stale(&self, now: Duration) -> bool {
        match (self.stale_after, self.window.age(now)) {
            (Some(limit), Some(age)) => age > limit,
            _ => false,
        }
    }

    /// The window's `p`th percentile, `None` while it is empty or stale.
    fn percentile(&self, now: Duration, p: f64) -> Option<u64> {
        if self.stale(now) {
            None
        } else {
            self.window.percentile(p)
        }
    }
}

/// An overlay's best-effort units and their level.
#[derive(Clone, Debug, PartialEq)]
struct BeState {
    units: Vec<Name>,
    /// The overlay's thresholds.
    cfg: BeConfig,
    level: u32,
    last_grow: Duration,
    slack: Option<f64>,
}

/// The component (see the module docs).
#[derive(Debug)]
pub struct Slo {
    tx: Sender<Feed>,
    rx: Receiver<Feed>,
    measured: BTreeMap<Name, Measured>,
    be: BTreeMap<Name, BeState>,
}

impl Default for Slo {
    fn default() -> Self {
        let (tx, rx) = channel();
        Self {
            tx,
            rx,
            measured: BTreeMap::new(),
            be: BTreeMap::new(),
        }
    }
}

/// The latency bound and percentile of a latency overlay.
fn latency(o: &OverlayConfig) -> Option<(f64, u64)> {
    match o.property {
        Property::LatencyPercentile {
            percentile,
            bound_us,
        } => Some((percentile, bound_us)),
        _ => None,
    }
}

impl Slo {
    /// Starts and stops the sources to match `overlays`; drops the state of
    /// overlays gone (their best-effort units are touched back to their
    /// configured settings).
    fn sync(
        &mut self,
        now: Duration,
        overlays: &[&OverlayConfig],
        reg: &Registry,
        compose: &mut Composer,
    ) {
        self.measured.retain(|name, m| {
            overlays.iter().any(|o| {
                &o.name == name
                    && latency(o).is_some()
                    && o.slo.source == m.source
                    && o.slo.window == m.window.span()
                    && o.slo.stale_after() == m.stale_after
            })
        });
        for o in overlays {
            if latency(o).is_none() || self.measured.contains_key(&o.name) {
                continue;
            }
            let handle = feed::spawn(&o.name, &o.slo.source, self.tx.clone());
            self.measured.insert(
                o.name.clone(),
                Measured {
                    source: o.slo.source.clone(),
                    window: LatencyWindow::new(o.slo.window, WINDOW_MAX),
                    _handle: handle,
                    cpu_us: 0,
                    timeouts: 0,
                    error: None,
                    last_report: None,
                    started: now,
                    stale_after: o.slo.stale_after(),
                    was_stale: false,
                },
            );
        }
        let gone: Vec<(Name, BeState)> = self
            .be
            .iter()
            .filter(|(name, st)| {
                !overlays.iter().any(|o| {
                    &o.name == *name
                        && latency(o).is_some()
                        && o.slo.best_effort == st.units
                        && o.slo.be == st.cfg
                })
            })
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect();
        for (name, st) in gone {
            self.be.remove(&name);
            let why = be_reason(&name, None, None, 0, "best-effort units back to their configured settings (the overlay, its best_effort or its be_* keys changed)".into());
            touch(reg, compose, &st.units, &why);
        }
        for o in overlays {
            if o.slo.best_effort.is_empty() || latency(o).is_none() || self.be.contains_key(&o.name)
            {
                continue;
            }
            self.be.insert(
                o.name.clone(),
                BeState {
                    units: o.slo.best_effort.clone(),
                    cfg: o.slo.be,
                    level: 0,
                    last_grow: now,
                    slack: None,
                },
            );
            let slo_us = latency(o).map_or(0, |(_, b)| b);
            let why = be_reason(
                &o.name,
                None,
                None,
                slo_us,
                format!(
                    "best effort starts at the floor (level 0/{}) until the SLO shows slack",
                    o.slo.be.steps
                ),
            );
            touch(reg, compose, &o.slo.best_effort, &why);
        }
    }

    /// Whether a step has nothing to do: no overlay at all (so none with a
    /// latency SLO), nothing measured and no best-effort level to put back.
    /// Whether the step has nothing to do: no overlay, nothing measured,
    /// no best-effort level.
    pub(crate) fn idle(&self, reg: &Registry) -> bool {
        self.measured.is_empty()
            && self.be.is_empty()
            && reg.spec().overlays.is_empty()
            && reg.runtime_overlays().is_empty()
    }

    /// Takes what the sources sent into the windows.
    fn drain(&mut self, now: Duration) {
        while let Ok(f) = self.rx.try_recv() {
            let Some(m) = self.measured.get_mut(&f.overlay) else {
                continue;
            };
            for s in &f.samples {
                m.window.push(now, *s);
            }
            m.timeouts += f.timeouts;
            m.cpu_us = m.cpu_us.max(f.cpu_us);
            m.error = f.error;
        }
        for (name, m) in &mut self.measured {
            m.window.expire(now);
            let stale = m.stale(now);
            if stale != m.was_stale {
                m.was_stale = stale;
                if stale {
                    tracing::info!(
                        "slo: overlay {name}'s {} window is stale (newest sample {:.1} s old, more than {:.1} s): its latency is unknown until samples come again",
                        m.source.kind(),
                        m.window.age(now).unwrap_or_default().as_secs_f64(),
                        m.stale_after.unwrap_or_default().as_secs_f64()
                    );
                } else {
                    tracing::info!(
                        "slo: overlay {name}'s {} window has samples again",
                        m.source.kind()
                    );
                }
            }
        }
    }

    /// One epoch: sources in step with the overlays, samples in, and the
    /// best-effort levels moved. Returns the measured percentiles due to be
    /// reported to coordination, `(overlay, µs)`.
    pub fn step(
        &mut self,
        now: Duration,
        reg: &Registry,
        reported: &dyn Fn(&Name) -> Option<f64>,
        compose: &mut Composer,
    ) -> Vec<(Name, f64)> {
        if self.idle(reg) {
            // Whatever a source stopped since may still have sent is
            // dropped, as `drain` drops it for an overlay it no longer
            // measures.
            while self.rx.try_recv().is_ok() {}
            return Vec::new();
        }
        let overlays: Vec<&OverlayConfig> = reg
            .spec()
            .overlays
            .iter()
            .chain(reg.runtime_overlays())
            .collect();
        self.sync(now, &overlays, reg, compose);
        self.drain(now);
        let mut due = Vec::new();
        for o in &overlays {
            let Some((percentile, bound_us)) = latency(o) else {
                continue;
            };
            let measured = self.measured_value(now, o, percentile, reported);
            if let Some(m) = self.measured.get_mut(&o.name) {
                let is_due = m
                    .last_report
                    .is_none_or(|t| now.saturating_sub(t) >= REPORT_EVERY);
                if m.source != LatencySource::Report && is_due {
                    if let Some(v) = m.percentile(now, percentile) {
                        m.last_report = Some(now);
                        due.push((o.name.clone(), v as f64));
                    }
                }
            }
            self.move_best_effort(now, o, percentile, bound_us, measured, reg, compose);
        }
        due
    }

    /// The overlay's latency now: the window's percentile (none while it
    /// is empty or stale), or what the application reported last.
    fn measured_value(
        &self,
        now: Duration,
        o: &OverlayConfig,
        percentile: f64,
        reported: &dyn Fn(&Name) -> Option<f64>,
    ) -> Option<f64> {
        match self.measured.get(&o.name) {
            Some(m) if m.source != LatencySource::Report => {
                m.percentile(now, percentile).map(|v| v as f64)
            }
            _ => reported(&o.name),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn move_best_effort(
        &mut self,
        now: Duration,
        o: &OverlayConfig,
        percentile: f64,
        bound_us: u64,
        measured: Option<f64>,
        reg: &Registry,
        compose: &mut Composer,
    ) {
        let Some(st) = self.be.get_mut(&o.name) else {
            return;
        };
        let cfg = st.cfg;
        let s = measured.map(|v| slack(bound_us, atoll_core::num::saturating_u64(v)));
        st.slack = s;
        let step = cfg.decide(st.level, s);
        if step.movement == BeMove::Grow && now.saturating_sub(st.last_grow) < GROW_EVERY {
            return;
        }
        if step.movement == BeMove::Hold {
            return;
        }
        if step.movement == BeMove::Grow {
            st.last_grow = now;
        }
        let from = st.level;
        st.level = step.level;
        let (word, why) = match step.movement {
            BeMove::Grow => ("grow", format!("> {}", cfg.grow_above)),
            BeMove::Cut => ("cut", format!("< {}", cfg.cut_below)),
            BeMove::Floor => ("floor", "< 0, the SLO is missed".to_string()),
            BeMove::Hold => ("hold", String::new()),
        };
        let detail = format!(
            "best effort {word} {from} -> {}/{}: slack {:.2} {why} (p{percentile} {} us, SLO {bound_us} us)",
            step.level,
            cfg.steps,
            s.unwrap_or(f64::NAN),
            measured.map_or(0, atoll_core::num::saturating_u64),
        );
        let why = be_reason(
            &o.name,
            s,
            measured.map(atoll_core::num::saturating_u64),
            bound_us,
            detail,
        );
        let units = st.units.clone();
        touch(reg, compose, &units, &why);
    }

    /// The state of a best-effort unit's overlay, if it is one.
    fn be_of(&self, unit: &Name) -> Option<&BeState> {
        self.be.values().find(|st| st.units.contains(unit))
    }

    /// What `overlay show` says of an overlay's measurement at `now`.
    pub fn status(
        &self,
        now: Duration,
        o: &OverlayConfig,
        reported: Option<f64>,
    ) -> Option<SloStatus> {
        let (percentile, bound_us) = latency(o)?;
        let m = self.measured.get(&o.name);
        let value = self.measured_value(now, o, percentile, &|_| reported);
        let be = self.be.get(&o.name);
        Some(SloStatus {
            overlay: o.name.to_string(),
            source: o.slo.source.kind().to_string(),
            percentile,
            slo_us: bound_us,
            measured_us: value,
            slack: value.map(|v| slack(bound_us, atoll_core::num::saturating_u64(v))),
            samples: m.map_or(0, |m| m.window.len() as u64),
            samples_total: m.map_or(0, |m| m.window.total()),
            timeouts: m.map_or(0, |m| m.timeouts),
            probe_cpu_us: m.map_or(0, |m| m.cpu_us),
            source_running_us: m
                .filter(|m| m.source != LatencySource::Report)
                .map_or(0, |m| {
                    u64::try_from(now.saturating_sub(m.started).as_micros()).unwrap_or(u64::MAX)
                }),
            error: m.and_then(|m| m.error.clone()),
            stale: m.is_some_and(|m| m.stale(now)),
            sample_age_ms: m
                .filter(|m| m.source != LatencySource::Report)
                .and_then(|m| m.window.age(now))
                .map(|a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX)),
            stale_after_ms: m
                .and_then(|m| m.stale_after)
                .map(|a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX)),
            best_effort: be
                .map(|b| b.units.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
            be_level: be.map(|b| b.level),
            be_steps: be.map_or(o.slo.be.steps, |b| b.cfg.steps),
        })
    }
}

/// The reason of a best-effort move of `overlay`'s units.
fn be_reason(
    overlay: &Name,
    slack: Option<f64>,
    measured_us: Option<u64>,
    slo_us: u64,
    detail: String,
) -> Reason {
    Reason::Slo {
        overlay: overlay.to_string(),
        slack,
        measured_us,
        slo_us,
        detail,
    }
}

/// Touches the groups of `units`, for `why`.
fn touch(reg: &Registry, compose: &mut Composer, units: &[Name], why: &Reason) {
    for u in units {
        if let Some(g) = reg.unit_group(u.as_str()) {
            compose.touch(g, why.clone());
        }
    }
}

impl Layer for Slo {
    fn name(&self) -> &'static str {
        "slo"
    }

    fn lay(&self, at: &At<'_>, s: &mut GroupSettings) {
        let Some(unit) = at.unit else {
            return;
        };
        let Some(st) = self.be_of(&unit.name) else {
            return;
        };
        let (level, cfg) = (st.level, st.cfg);
        if level >= cfg.steps {
            return;
        }
        let island_cpus = at.island.map_or(1, |i| i.cpus.len()).max(1);
        let top = BeKnobs {
            weight: s.cpu_weight.unwrap_or(atoll_core::weight::DEFAULT_WEIGHT),
            cpus: s.cpu_max.map_or(island_cpus as f64, |m| {
                m.quota_us as f64 / m.period_us.max(1) as f64
            }),
            memory_high: s.memory.high.or(s.memory.max),
        };
        let k = cfg.knobs(level, &top);
        s.cpu_weight = Some(k.weight);
        s.cpu_max = Some(CpuMax {
            quota_us: atoll_core::num::saturating_u64(k.cpus * QUOTA_PERIOD_US as f64).max(1000),
            period_us: QUOTA_PERIOD_US,
        });
        if let Some(m) = k.memory_high {
            s.memory.high = Some(m);
        }
    }
}
