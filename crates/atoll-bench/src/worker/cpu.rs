//! CPU workers: `spin` (a hog that counts the work it got done) and `cpujob`
//! (a fixed amount of work, timed).
//!
//! Both run the same kernel, [`cpu_chunk`]: a xorshift/multiply loop whose
//! result is passed through `black_box`, so the compiler can neither drop
//! nor vectorize it away. Work is counted in chunks, so a hog's chunk rate
//! is its CPU throughput and comparable across runs on the same machine.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::json;

use super::stopping;

/// Iterations of the inner loop per chunk (~0.2 ms on a current core in a
/// release build).
const CHUNK_ITERATIONS: u64 = 1 << 16;
/// Chunks per unit of `cpujob --work`.
const UNIT_CHUNKS: u64 = 64;

/// One chunk of CPU work starting from `seed`; returns the new state.
fn cpu_chunk(seed: u64) -> u64 {
    let mut x = seed | 1;
    let mut acc = 0u64;
    for _ in 0..CHUNK_ITERATIONS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc = acc.wrapping_mul(6364136223846793005).wrapping_add(x);
    }
    black_box(acc ^ x)
}

/// `units` units of CPU work (64 chunks each, ~10 ms); returns a
/// checksum so that the work is observable.
pub fn cpu_work(units: u64) -> u64 {
    let mut s = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..units * UNIT_CHUNKS {
        s = cpu_chunk(s);
    }
    s
}

/// `n` chunks of CPU work from `seed` (~0.2 ms each); the new state.
pub(crate) fn cpu_chunks(n: u64, seed: u64) -> u64 {
    let mut s = seed;
    for _ in 0..n {
        s = cpu_chunk(s);
    }
    s
}

/// Spins on `threads` threads until stopped (or for `limit`); reports chunks
/// done and chunks per second.
pub(crate) fn spin(threads: usize, limit: Option<Duration>) -> serde_json::Value {
    let t0 = Instant::now();
    let done = |t0: Instant| stopping() || limit.is_some_and(|l| t0.elapsed() >= l);
    let chunks: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                s.spawn(move || {
                    let mut n = 0u64;
                    let mut x = i as u64 + 1;
                    while !done(t0) {
                        x = cpu_chunk(x);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    let elapsed = t0.elapsed().as_secs_f64();
    json!({
        "kind": "spin",
        "threads": threads,
        "chunks": chunks,
        "elapsed_s": elapsed,
        "chunks_per_s": chunks as f64 / elapsed.max(1e-9),
    })
}

/// Does `work` units and reports how long they took.
pub(crate) fn cpujob(work: u64) -> serde_json::Value {
    let t0 = Instant::now();
    let sum = cpu_work(work);
    let elapsed = t0.elapsed();
    json!({
        "kind": "cpujob",
        "work": work,
        "elapsed_ms": elapsed.as_secs_f64() * 1000.0,
        "checksum": sum,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_deterministic_and_depends_on_the_amount() {
        assert_eq!(cpu_work(1), cpu_work(1));
        assert_ne!(cpu_work(1), cpu_work(2));
        assert_ne!(cpu_chunk(1), cpu_chunk(2));
    }

    #[test]
    fn spin_stops_by_itself_and_counts_chunks() {
        let r = spin(2, Some(Duration::from_millis(30)));
        assert_eq!(r["kind"], "spin");
        assert_eq!(r["threads"], 2);
        assert!(r["chunks"].as_u64().unwrap() > 0);
        let r = cpujob(1);
        assert_eq!(r["work"], 1);
        assert!(r["elapsed_ms"].as_f64().unwrap() > 0.0);
    }
}
