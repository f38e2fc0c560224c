//! The value parsers of `atoll bench`'s flags: each checks one flag's text
//! and names the flag in its error.

use atoll_bench::api;
use atoll_bench::awm;
use atoll_bench::comm;
use atoll_bench::netisland;
use atoll_bench::overhead;
use atoll_bench::revocation::Mechanism;
use atoll_bench::slo;

pub(super) fn parse_scenario(s: &str) -> Result<awm::Scenario, String> {
    s.parse()
}

pub(super) fn parse_weight(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("--balance-weight must be a number >= 0, not {s:?}")),
    }
}

/// `--loads` as shares of the LC's maximum.
#[derive(Clone, Debug)]
pub(super) struct Loads(pub(super) Vec<f64>);

pub(super) fn parse_loads(s: &str) -> Result<Loads, String> {
    slo::parse_loads(s).map(Loads)
}

pub(super) fn parse_slo_config(s: &str) -> Result<slo::Config, String> {
    s.parse()
}

pub(super) fn parse_net_config(s: &str) -> Result<netisland::Config, String> {
    s.parse()
}

pub(super) fn parse_net_scenario(s: &str) -> Result<netisland::Scenario, String> {
    s.parse()
}

pub(super) fn parse_trigger(s: &str) -> Result<netisland::TriggerKey, String> {
    s.parse()
}

pub(super) fn parse_req_rate(s: &str) -> Result<f64, String> {
    parse_positive(s, "--req-rate")
}

pub(super) fn parse_bound_ms(s: &str) -> Result<f64, String> {
    parse_positive(s, "--bound-ms")
}

pub(super) fn parse_comm_mechanism(s: &str) -> Result<comm::Mechanism, String> {
    s.parse()
}

pub(super) fn parse_positive(s: &str, what: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{what} must be a positive number, not {s:?}")),
    }
}

pub(super) fn parse_seconds(s: &str) -> Result<f64, String> {
    parse_positive(s, "--seconds")
}

pub(super) fn parse_warmup(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("--warmup must be a number >= 0, not {s:?}")),
    }
}

/// `--be-grow-above` and `--be-cut-below`: a slack in [0, 1).
pub(super) fn parse_slack(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(format!("a slack must be a number in [0, 1), not {s:?}")),
    }
}

pub(super) fn parse_idle_seconds(s: &str) -> Result<f64, String> {
    parse_positive(s, "--idle-seconds")
}

pub(super) fn parse_mix(s: &str) -> Result<api::Mix, String> {
    s.parse()
}

pub(super) fn parse_users(s: &str) -> Result<api::Users, String> {
    s.parse()
}

pub(super) fn parse_features(s: &str) -> Result<overhead::Features, String> {
    s.parse()
}

pub(super) fn parse_overhead_backend(s: &str) -> Result<overhead::Backend, String> {
    s.parse()
}

pub(super) fn parse_rate(s: &str) -> Result<f64, String> {
    parse_positive(s, "--rate")
}

pub(super) fn parse_mechanism(s: &str) -> Result<Mechanism, String> {
    s.parse()
}
