//! What `overlay_show` answers: an overlay's latency as atoll measures it,
//! its SLO and slack, and its best-effort units' level.

use serde::{Deserialize, Serialize};

impl SloStatus {
    /// The share of one CPU the source's thread has used since it started
    /// (0 when it has not run, or for `report`).
    pub fn source_cpu_share(&self) -> f64 {
        if self.source_running_us == 0 {
            0.0
        } else {
            self.probe_cpu_us as f64 / self.source_running_us as f64
        }
    }
}

/// One latency overlay's measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SloStatus {
    /// The overlay.
    pub overlay: String,
    /// Where its latency comes from: `report`, `probe` or `access_log`.
    pub source: String,
    /// The percentile of the SLO.
    pub percentile: f64,
    /// The SLO, µs.
    pub slo_us: u64,
    /// The percentile measured over the window (or the value last
    /// reported, for `report`), µs; `None` before the first sample and
    /// while the window is stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_us: Option<f64>,
    /// `(slo - measured) / slo`; below 0 when the SLO is missed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<f64>,
    /// Samples in the window now.
    pub samples: u64,
    /// Samples taken since the source started.
    pub samples_total: u64,
    /// Probes that timed out (each a sample at the timeout).
    pub timeouts: u64,
    /// CPU time the source's thread has used, µs.
    pub probe_cpu_us: u64,
    /// How long the source's thread has run, µs (0 for `report`): with
    /// `probe_cpu_us`, the share of a CPU that measuring costs.
    #[serde(default)]
    pub source_running_us: u64,
    /// What went wrong at the source's last try, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether the window is stale: its newest sample is older than
    /// `stale_after_ms`, so it gives no percentile (`measured_us` and
    /// `slack` are absent) and the latency counts as unknown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    /// How old the newest sample is, ms (`probe`, `access_log`; none before
    /// the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_age_ms: Option<u64>,
    /// The age past which the window is stale, ms (`probe`, `access_log`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_after_ms: Option<u64>,
    /// Its best-effort units.
    #[serde(default)]
    pub best_effort: Vec<String>,
    /// Their level, 0 (the floor) to `be_steps` (as configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub be_level: Option<u32>,
    /// Levels above the floor.
    pub be_steps: u32,
}
