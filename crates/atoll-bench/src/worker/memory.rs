//! `memhog`: allocates M MiB and keeps writing one byte in every page, so
//! the whole set stays resident and recently used (memory pressure that
//! reclaim cannot satisfy by dropping cold pages).

use std::time::{Duration, Instant};

use serde_json::json;

use super::stopping;

/// Bytes between two writes: one per (4 KiB) page.
const STRIDE: usize = 4096;

/// Touches `mib` MiB until stopped (or for `limit`); reports passes and
/// MiB touched per second.
pub(crate) fn memhog(mib: usize, limit: Option<Duration>) -> std::io::Result<serde_json::Value> {
    let bytes = mib.checked_mul(1 << 20).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{mib} MiB is too much"),
        )
    })?;
    let mut mem: Vec<u8> = Vec::new();
    mem.try_reserve_exact(bytes).map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::OutOfMemory, format!("{mib} MiB: {e}"))
    })?;
    mem.resize(bytes, 0);
    let t0 = Instant::now();
    let mut touched_mib = 0u64;
    let mut passes = 0u64;
    let mut value = 0u8;
    'outer: loop {
        value = value.wrapping_add(1);
        for chunk in mem.chunks_mut(1 << 20) {
            if stopping() || limit.is_some_and(|l| t0.elapsed() >= l) {
                break 'outer;
            }
            for page in chunk.chunks_mut(STRIDE) {
                page[0] = value;
            }
            touched_mib += 1;
        }
        passes += 1;
    }
    std::hint::black_box(&mem);
    let elapsed = t0.elapsed().as_secs_f64();
    Ok(json!({
        "kind": "memhog",
        "mib": mib,
        "passes": passes,
        "elapsed_s": elapsed,
        "mib_per_s": touched_mib as f64 / elapsed.max(1e-9),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touches_its_memory_and_stops_by_itself() {
        let r = memhog(2, Some(Duration::from_millis(20))).unwrap();
        assert_eq!(r["mib"], 2);
        assert!(r["mib_per_s"].as_f64().unwrap() > 0.0);
    }
}
