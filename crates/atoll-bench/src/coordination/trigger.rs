//! From a `trigger` request to the boost written (`trigger_to_effect_us`).
//!
//! On the daemon of [`api`](super::api), `trigger` for `front`: each call
//! is timed from the request sent to the reply. The daemon serves a
//! trigger when it handles the request and writes the unit's weight
//! before it replies, so the time bounds the daemon's own (request
//! received to cgroup write done) from above: it adds the client and the
//! socket. After each reply the weight file is read back and must hold
//! the boost. Between calls the benchmark waits, untimed, until the boost
//! has ended and the unit's cooldown is over (refusals while it lasts,
//! and the backoff they bring, are retried, not counted).

use std::time::{Duration, Instant};

use atoll_client::coord::NackReason;

use super::api::{connect, front_weight, io, ApiActuation};
use crate::error::BenchError;
use crate::isolation::daemon::Daemon;
use crate::stats::Summary;

/// Longest wait for one boost to be accepted.
const PATIENCE: Duration = Duration::from_secs(5);
/// Acknowledged boosts in a row the knob may not show (each is sent again)
/// before the benchmark gives up.
const MAX_UNSEEN: usize = 5;

pub(super) fn time_triggers(daemon: &Daemon, calls: usize) -> Result<ApiActuation, BenchError> {
    let knob = front_weight(daemon)?;
    let mut client = connect(daemon)?;
    let read = || std::fs::read_to_string(&knob).map(|s| s.trim().to_string());
    let steady = read().map_err(io(&knob))?;
    let mut us = Vec::with_capacity(calls);
    // Acknowledged boosts not seen in the knob, in a row: on a loaded
    // machine an epoch may end a short boost before the knob is read.
    let mut unseen = 0;
    while us.len() < calls.max(2) {
        crate::interrupt::check()?;
        let began = Instant::now();
        // Untimed: the last boost over and written back.
        loop {
            let now = read().map_err(io(&knob))?;
            if now == steady {
                break;
            }
            if began.elapsed() > PATIENCE {
                return Err(BenchError::Setup {
                    what: "trigger".into(),
                    reason: format!("the boost did not end: {} is {now}", knob.display()),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // The end of a boost is written by an epoch: sending at once would
        // always meet the rest of that epoch. Spread the sends over the
        // epoch instead, as requests arrive (untimed).
        let offset = u64::try_from(us.len() * 7 % 31).unwrap_or(0);
        std::thread::sleep(Duration::from_millis(offset));
        let t = Instant::now();
        let answer = client
            .trigger("bench", "front")
            .map_err(|e| BenchError::Setup {
                what: "trigger".into(),
                reason: e.to_string(),
            })?;
        let dt = t.elapsed();
        match answer.reason() {
            None => {}
            Some(
                NackReason::CoolingDown { .. }
                | NackReason::AlreadyBoosted { .. }
                | NackReason::BackingOff { .. },
            ) if began.elapsed() < PATIENCE => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Some(r) => {
                return Err(BenchError::Setup {
                    what: "trigger".into(),
                    reason: format!("refused: {r}"),
                })
            }
        }
        let after = read().map_err(io(&knob))?;
        if after == steady {
            unseen += 1;
            if unseen < MAX_UNSEEN {
                continue;
            }
            return Err(BenchError::Setup {
                what: "trigger".into(),
                reason: format!(
                    "acknowledged {MAX_UNSEEN} times in a row but {} stayed {after}",
                    knob.display()
                ),
            });
        }
        unseen = 0;
        us.push(dt.as_secs_f64() * 1e6);
    }
    let us = Summary::of(&us).ok_or_else(|| BenchError::Setup {
        what: "trigger timings".into(),
        reason: "no samples".into(),
    })?;
    Ok(ApiActuation {
        us,
        knob: knob.display().to_string(),
    })
}
