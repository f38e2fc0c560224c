//! `atoll top`: a live view of islands, units, overlays, applications and
//! the latest decisions, refreshed from the daemon's read-only requests
//! (`status`, `overlays`, `apps`, `why`), so any user may run it.
//!
//! [`model`] holds what is shown and how keys change it, [`view`] draws a
//! model with ratatui, [`run`] is the terminal and the socket around them.

pub mod model;
pub mod run;
pub mod view;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod view_tests;

use std::path::PathBuf;
use std::time::Duration;

fn parse_interval(s: &str) -> Result<Duration, String> {
    let t = s.strip_suffix('s').unwrap_or(s);
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.1..=3600.0).contains(&v) => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!(
            "--interval {s:?}: expected seconds between 0.1 and 3600"
        )),
    }
}

/// Flags of `atoll top`.
#[derive(Debug, Clone, clap::Args)]
pub struct TopArgs {
    /// The daemon's API socket (the flag wins over $ATOLL_SOCKET).
    #[arg(long, env = "ATOLL_SOCKET", default_value = atoll_proto::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Seconds between refreshes (0.1 to 3600; `2` or `2s`).
    #[arg(long, default_value = "1", value_parser = parse_interval)]
    pub interval: Duration,
    /// How many of the latest decisions to ask for.
    #[arg(long, default_value_t = 100)]
    pub decisions: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_seconds_within_bounds() {
        assert_eq!(parse_interval("1"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_interval("0.25"), Ok(Duration::from_millis(250)));
        for bad in ["0", "0.01", "3601", "-1", "NaN", "inf", "1m", ""] {
            assert!(parse_interval(bad).is_err(), "{bad:?}");
        }
    }
}
