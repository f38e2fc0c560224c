//! `probe`: a wakeup-latency probe.
//!
//! Each sample sleeps until an absolute deadline (`clock_nanosleep` on
//! `CLOCK_MONOTONIC` with `TIMER_ABSTIME`, timer slack 1 ns) and records how
//! late it got to run: the time from the deadline to the first instruction
//! after the sleep. That is how long a task that becomes runnable waits for
//! a CPU, so on a CPU lent to someone else it is the revocation latency.
//!
//! With `--burst-us B` the probe then burns B µs of its own CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) and records the burst's stretch, wall time ÷
//! CPU time: 1.0 means it had the CPU to itself, 2.0 that it got half.
//! `--jitter-us J` adds a pseudo-random 0..=J µs to each period so the
//! samples do not lock onto the phase of a periodic poller.

use std::time::Duration;

use serde_json::json;

use super::tight_timer_slack;
use crate::stats::Summary;

/// Arguments of the probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeArgs {
    /// Sleep per sample, µs.
    pub period_us: u64,
    /// Samples.
    pub samples: usize,
    /// CPU burst after each wakeup, µs (0: none).
    pub burst_us: u64,
    /// Up to this much extra sleep per sample, µs.
    pub jitter_us: u64,
    /// Wait this long before the first sample, ms.
    pub start_delay_ms: u64,
    /// Print every lateness sample too.
    pub raw: bool,
}

fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid clock id and a valid out-pointer.
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    // Both fields are never negative for the clocks read here.
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// Sleeps until `deadline_ns` on CLOCK_MONOTONIC (retrying on signals).
fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: a valid timespec; the remaining-time pointer may be null
        // with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// A small xorshift generator for the jitter (seeded by the pid).
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Burns `us` µs of this thread's CPU time; returns the wall time it took,
/// µs.
fn burst(us: u64) -> f64 {
    let wall0 = now_ns(libc::CLOCK_MONOTONIC);
    let cpu0 = now_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let mut x = wall0 | 1;
    while now_ns(libc::CLOCK_THREAD_CPUTIME_ID) - cpu0 < us * 1000 {
        for _ in 0..256 {
            next(&mut x);
        }
        std::hint::black_box(x);
    }
    (now_ns(libc::CLOCK_MONOTONIC) - wall0) as f64 / 1000.0
}

/// Runs the probe; reports lateness (and burst stretch) summaries.
pub(crate) fn probe(a: &ProbeArgs) -> serde_json::Value {
    tight_timer_slack();
    std::thread::sleep(Duration::from_millis(a.start_delay_ms));
    let mut rng = u64::from(std::process::id()) | 0x5DEE_CE66_D000_0000;
    let mut late = Vec::with_capacity(a.samples);
    let mut stretch = Vec::new();
    for _ in 0..a.samples {
        let jitter = if a.jitter_us > 0 {
            next(&mut rng) % (a.jitter_us + 1)
        } else {
            0
        };
        let deadline = now_ns(libc::CLOCK_MONOTONIC) + (a.period_us + jitter) * 1000;
        sleep_until(deadline);
        let woke = now_ns(libc::CLOCK_MONOTONIC);
        late.push(woke.saturating_sub(deadline) as f64 / 1000.0);
        if a.burst_us > 0 {
            stretch.push(burst(a.burst_us) / a.burst_us as f64);
        }
    }
    let mut report = json!({
        "kind": "probe",
        "samples": late.len(),
        "period_us": a.period_us,
        "jitter_us": a.jitter_us,
        "burst_us": a.burst_us,
        "lateness_us": Summary::of(&late),
        "burst_stretch": Summary::of(&stretch),
    });
    if a.raw {
        report["raw_lateness_us"] = json!(late);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_one_lateness_per_sample() {
        let r = probe(&ProbeArgs {
            period_us: 200,
            samples: 5,
            burst_us: 100,
            jitter_us: 50,
            start_delay_ms: 0,
            raw: true,
        });
        assert_eq!(r["samples"], 5);
        assert_eq!(r["raw_lateness_us"].as_array().unwrap().len(), 5);
        assert_eq!(r["lateness_us"]["count"], 5);
        assert_eq!(r["burst_stretch"]["count"], 5);
        // Wall time can never be shorter than the CPU time it contains.
        assert!(r["burst_stretch"]["min"].as_f64().unwrap() >= 0.99);
    }
}
