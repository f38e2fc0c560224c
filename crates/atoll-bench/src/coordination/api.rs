//! From an API call to the cgroup change applied (`api_to_actuation_us`).
//!
//! The real daemon runs with one island of every online CPU, two units
//! (`front`, `back`) and an overlay `bench` over them. The benchmark sends
//! `tune CPU time` for `front` over the socket, alternately up and down,
//! with the Rust client library, and times each call from the request to
//! the reply. The daemon writes the kernel before it replies, so the time
//! covers the client, the socket, the control loop picking the request up,
//! the platform manager and the cgroup write. After each reply the unit's
//! weight file (`cpu.weight` on cgroup2, `cpu.shares` on cgroup1) is read
//! back: a call whose change is not in the kernel is an error, not a
//! sample.

use std::path::{Path, PathBuf};
use std::time::Instant;

use atoll_client::coord::{Direction, Resource};
use atoll_client::Client;
use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::isolation::daemon::Daemon;
use crate::stats::Summary;

/// What the API benchmark measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiActuation {
    /// Request to reply, the change verified in the kernel, µs.
    pub us: Summary,
    /// The file read back.
    pub knob: String,
}

/// The daemon's config: one island, two units, one overlay.
pub fn config(cpus: &str) -> String {
    format!(
        "[host]\ncpus = \"\"\nadopt_all = false\n\n\
         [island.bench]\ncpus = \"{cpus}\"\n\n\
         [unit.front]\nisland = \"bench\"\n\n\
         [unit.back]\nisland = \"bench\"\n\n\
         [overlay.bench]\nunits = [\"front\", \"back\"]\nlatency_us = 1000\n"
    )
}

/// Starts the daemon in `dir` and times `calls` tunes, then `calls`
/// triggers (see [`trigger`](super::trigger)).
pub fn measure(
    exe: &Path,
    dir: &Path,
    cpus: &str,
    calls: usize,
) -> Result<(ApiActuation, ApiActuation), BenchError> {
    let daemon = Daemon::start(exe, "coordination", &config(cpus), dir)?;
    let result = time_tunes(&daemon, calls)
        .and_then(|t| Ok((t, super::trigger::time_triggers(&daemon, calls)?)));
    daemon.stop()?;
    result
}

fn time_tunes(daemon: &Daemon, calls: usize) -> Result<ApiActuation, BenchError> {
    let knob = front_weight(daemon)?;
    let mut client = connect(daemon)?;
    let read = || std::fs::read_to_string(&knob).map(|s| s.trim().to_string());
    let mut us = Vec::with_capacity(calls);
    for i in 0..calls.max(2) {
        crate::interrupt::check()?;
        // Up then down: the weight stays within its range.
        let dir = if i % 2 == 0 {
            Direction::Up
        } else {
            Direction::Down
        };
        let before = read().map_err(io(&knob))?;
        let t = Instant::now();
        let answer = client
            .tune("bench", "front", Resource::CpuTime, dir)
            .map_err(|e| BenchError::Setup {
                what: "tune".into(),
                reason: e.to_string(),
            })?;
        let dt = t.elapsed();
        if !answer.is_ack() {
            return Err(BenchError::Setup {
                what: "tune".into(),
                reason: format!("refused: {answer}"),
            });
        }
        let after = read().map_err(io(&knob))?;
        if after == before {
            return Err(BenchError::Setup {
                what: "tune".into(),
                reason: format!("acknowledged but {} is still {after}", knob.display()),
            });
        }
        us.push(dt.as_secs_f64() * 1e6);
    }
    let us = Summary::of(&us).ok_or_else(|| BenchError::Setup {
        what: "api timings".into(),
        reason: "no samples".into(),
    })?;
    Ok(ApiActuation {
        us,
        knob: knob.display().to_string(),
    })
}

/// `front`'s weight file, or why there is none.
pub(super) fn front_weight(daemon: &Daemon) -> Result<PathBuf, BenchError> {
    weight_file(daemon.root()).ok_or_else(|| BenchError::Setup {
        what: "the unit's weight file".into(),
        reason: format!(
            "no cpu.weight or cpu.shares for {}/bench/front",
            daemon.root()
        ),
    })
}

/// A client of the daemon.
pub(super) fn connect(daemon: &Daemon) -> Result<Client, BenchError> {
    Client::connect(daemon.socket()).map_err(|e| BenchError::Setup {
        what: "connecting to the daemon".into(),
        reason: e.to_string(),
    })
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::Io {
        op: "read",
        path: path.to_path_buf(),
        source,
    }
}

/// `front`'s weight file under the daemon's root, on either hierarchy.
fn weight_file(root: &str) -> Option<PathBuf> {
    let unit = format!("{root}/bench/front");
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .map(|m| Path::new(m).join(&unit).join("cpu.weight"))
        .chain(
            ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
                .iter()
                .map(|m| Path::new(m).join(&unit).join("cpu.shares")),
        )
        .find(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_one_that_atoll_accepts() {
        let text = config("0-1");
        let topo =
            atoll_core::topology::Topology::synthetic(atoll_core::topology::SyntheticShape {
                packages: 1,
                nodes_per_package: 1,
                llcs_per_node: 1,
                cores_per_llc: 2,
                threads_per_core: 1,
                memory_per_node: 1 << 30,
            });
        let spec = atoll_config::parse(&text, "bench.toml", &topo);
        assert!(spec.is_ok(), "{text}\n{spec:?}");
    }
}
