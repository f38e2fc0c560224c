//! Service-level objectives measured without changing the application, and
//! latency-critical work beside best-effort work (Heracles).
//!
//! - [`window`]: a sliding window of latency samples and its percentiles;
//! - [`source`]: where an overlay's latency comes from (`report`, `probe`,
//!   `access_log`) as the platform description says, and how an access
//!   log's line carries a request's time;
//! - [`lcbe`]: the pure controller that grows or cuts what an overlay's
//!   best-effort units get from the slack of its latency SLO.
//!
//! Nothing here does I/O: the daemon runs the probes and tails the logs,
//! and hands the samples in.

pub mod lcbe;
pub mod source;
pub mod window;

pub use lcbe::{BeConfig, BeKnobs, BeMove, BeStep};
pub use source::{
    AccessLogSpec, LatencySource, LogFormat, ProbeSpec, ProbeTarget, SloConfig, TimeUnit,
};
pub use window::LatencyWindow;

/// The slack of a latency SLO: `(slo - measured) / slo`. 1 when nothing
/// is measured to take; below 0 when the SLO is missed.
pub fn slack(slo_us: u64, measured_us: u64) -> f64 {
    if slo_us == 0 {
        return -1.0;
    }
    let slo = slo_us as f64;
    (slo - measured_us as f64) / slo
}

#[cfg(test)]
mod tests {
    use super::slack;

    #[test]
    fn slack_is_the_share_of_the_slo_left() {
        assert!((slack(1000, 250) - 0.75).abs() < 1e-12);
        assert!(slack(1000, 1000).abs() < 1e-12);
        assert!((slack(1000, 1500) + 0.5).abs() < 1e-12);
        assert!(slack(0, 1) < 0.0);
    }
}
