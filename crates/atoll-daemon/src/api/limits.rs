//! Fair shares of the API for everyone: connections per user (with a
//! reserve only root may use) and a rate of changing requests per user.
//!
//! Connections are admitted when accepted, by the peer's uid (Unix socket)
//! or address (the metrics endpoint): at most `max_per_key` each, and at
//! most `max_total - reserve` for all of them together, so the last
//! `reserve` slots are always there for root (`atoll stop` gets through a
//! flood). Requests that change something are paced per uid by a token
//! bucket; root is not paced.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Why a connection was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    /// This key has as many connections as it may.
    #[error("{key} has {open} connections open already, the most one peer may")]
    PerKey {
        /// The peer, in words.
        key: String,
        /// Its open connections.
        open: usize,
    },
    /// Every slot but root's reserve is taken.
    #[error("the daemon is serving {open} connections already; try again")]
    Full {
        /// Open connections.
        open: usize,
    },
}

#[derive(Debug)]
struct Counts<K> {
    total: usize,
    per: HashMap<K, usize>,
}

/// Open connections per key, with ceilings.
#[derive(Debug)]
pub(crate) struct Admission<K> {
    counts: Arc<Mutex<Counts<K>>>,
    max_total: usize,
    max_per_key: usize,
    reserve: usize,
}

impl<K> Clone for Admission<K> {
    fn clone(&self) -> Self {
        Self {
            counts: Arc::clone(&self.counts),
            max_total: self.max_total,
            max_per_key: self.max_per_key,
            reserve: self.reserve,
        }
    }
}

/// An admitted connection; dropping it frees its slot.
#[derive(Debug)]
pub(crate) struct Admitted<K: Eq + Hash> {
    counts: Arc<Mutex<Counts<K>>>,
    key: K,
}

impl<K: Eq + Hash> Drop for Admitted<K> {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.per.remove(&self.key);
            }
        }
    }
}

impl<K: Eq + Hash + Clone + std::fmt::Display> Admission<K> {
    /// At most `max_total` connections, `max_per_key` per key, the last
    /// `reserve` for privileged peers only.
    pub(crate) fn new(max_total: usize, max_per_key: usize, reserve: usize) -> Self {
        Self {
            counts: Arc::new(Mutex::new(Counts {
                total: 0,
                per: HashMap::new(),
            })),
            max_total,
            max_per_key,
            reserve: reserve.min(max_total),
        }
    }

    /// Admits a connection of `key`; a `privileged` one is held to no
    /// per-key ceiling and may use the reserve.
    pub(crate) fn admit(&self, key: K, privileged: bool) -> Result<Admitted<K>, Refused> {
        let mut c = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let open = c.per.get(&key).copied().unwrap_or(0);
        if !privileged && open >= self.max_per_key {
            return Err(Refused::PerKey {
                key: key.to_string(),
                open,
            });
        }
        let ceiling = if privileged {
            self.max_total
        } else {
            self.max_total - self.reserve
        };
        if c.total >= ceiling {
            return Err(Refused::Full { open: c.total });
        }
        c.total += 1;
        *c.per.entry(key.clone()).or_insert(0) += 1;
        Ok(Admitted {
            counts: Arc::clone(&self.counts),
            key,
        })
    }
}

/// One uid's bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Requests per second per uid, with a burst.
#[derive(Debug, Clone)]
pub(crate) struct RateLimiter {
    buckets: Arc<Mutex<HashMap<u32, Bucket>>>,
    rate: f64,
    burst: f64,
}

impl RateLimiter {
    /// `rate` requests a second on average, `burst` at once.
    pub(crate) fn new(rate: f64, burst: f64) -> Self {
        Self {
            buckets: Arc::default(),
            rate: rate.max(f64::MIN_POSITIVE),
            burst: burst.max(1.0),
        }
    }

    /// Takes a token for `uid` at `now`, or says how long until one.
    pub(crate) fn take(&self, uid: u32, now: Instant) -> Result<(), Duration> {
        let mut b = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if b.len() > 4096 {
            // Full buckets hold nothing worth keeping.
            let (rate, burst) = (self.rate, self.burst);
            b.retain(|_, k| {
                k.tokens + now.saturating_duration_since(k.at).as_secs_f64() * rate < burst
            });
        }
        let k = b.entry(uid).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(k.at).as_secs_f64();
        k.tokens = (k.tokens + elapsed * self.rate).min(self.burst);
        k.at = now;
        if k.tokens >= 1.0 {
            k.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - k.tokens) / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_has_a_ceiling_and_root_keeps_a_reserve() {
        let a: Admission<u32> = Admission::new(4, 2, 1);
        let x1 = a.admit(1000, false).unwrap();
        let _x2 = a.admit(1000, false).unwrap();
        assert!(matches!(
            a.admit(1000, false),
            Err(Refused::PerKey { open: 2, .. })
        ));
        let _y = a.admit(1001, false).unwrap();
        // Three of four taken: the last is root's.
        assert!(matches!(
            a.admit(1002, false),
            Err(Refused::Full { open: 3 })
        ));
        let r = a.admit(0, true).unwrap();
        assert!(a.admit(0, true).is_err(), "the total holds for root too");
        drop(x1);
        assert!(a.admit(1002, false).is_err(), "root's slot is still taken");
        drop(r);
        assert!(a.admit(1002, false).is_ok());
    }

    #[test]
    fn the_rate_is_kept_per_uid_after_a_burst() {
        let r = RateLimiter::new(10.0, 3.0);
        let t0 = Instant::now();
        for _ in 0..3 {
            r.take(7, t0).unwrap();
        }
        let wait = r.take(7, t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        // Another uid has its own bucket.
        r.take(8, t0).unwrap();
        // A tenth of a second later there is one more token.
        r.take(7, t0 + Duration::from_millis(100)).unwrap();
        assert!(r.take(7, t0 + Duration::from_millis(100)).is_err());
    }
}
