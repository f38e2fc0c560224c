//! Stepping N, the number of streaming clients, to the largest that still
//! passes (at most one under-run per client).
//!
//! Doubling from `start` until a run fails (or `max` passes), then halving
//! the gap between the largest pass below the smallest failure and that
//! failure, until the gap is at most `resolution × pass` (and at least 1).
//! A noisy pass above a failure is ignored: the answer is the largest pass
//! below the smallest failure. Pure: the caller runs the probes.

use serde::{Deserialize, Serialize};

/// How N is stepped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchSettings {
    /// The first N tried.
    pub start: usize,
    /// The largest N tried.
    pub max: usize,
    /// Stop when the gap is at most this fraction of the pass.
    pub resolution: f64,
}

impl SearchSettings {
    /// The defaults, or coarse ones with `quick`.
    pub fn new(quick: bool) -> Self {
        if quick {
            Self {
                start: 4,
                max: 64,
                resolution: 0.5,
            }
        } else {
            Self {
                start: 8,
                max: 256,
                resolution: 0.125,
            }
        }
    }

    /// The most probes a search can take (over every possible answer).
    pub fn max_probes(&self) -> usize {
        (0..=self.max)
            .map(|capacity| {
                let mut probes = Vec::new();
                while let Some(n) = next_probe(self, &probes) {
                    probes.push((n, n <= capacity));
                }
                probes.len()
            })
            .max()
            .unwrap_or(0)
    }
}

/// The largest pass below the smallest failure (0 if none), and that
/// failure.
pub fn bounds(probes: &[(usize, bool)]) -> (usize, Option<usize>) {
    let fail = probes.iter().filter(|p| !p.1).map(|p| p.0).min();
    let pass = probes
        .iter()
        .filter(|p| p.1 && fail.is_none_or(|f| p.0 < f))
        .map(|p| p.0)
        .max()
        .unwrap_or(0);
    (pass, fail)
}

/// The next N to run after `probes` (N, passed), or `None` when done.
pub fn next_probe(s: &SearchSettings, probes: &[(usize, bool)]) -> Option<usize> {
    if probes.is_empty() {
        return Some(s.start.clamp(1, s.max.max(1)));
    }
    let (pass, fail) = bounds(probes);
    let next = match fail {
        None if pass >= s.max => return None,
        None => (pass * 2).clamp(1, s.max),
        Some(f) => {
            let gap = f.saturating_sub(pass);
            let tolerance = atoll_core::num::saturating_usize(pass as f64 * s.resolution).max(1);
            if gap <= tolerance {
                return None;
            }
            pass + gap / 2
        }
    };
    (!probes.iter().any(|p| p.0 == next)).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a server that passes up to `capacity`.
    fn search(s: &SearchSettings, capacity: usize) -> (Vec<usize>, usize, Option<usize>) {
        let mut probes = Vec::new();
        while let Some(n) = next_probe(s, &probes) {
            assert!(probes.len() < 100, "does not end: {probes:?}");
            probes.push((n, n <= capacity));
        }
        let (pass, fail) = bounds(&probes);
        (probes.iter().map(|p| p.0).collect(), pass, fail)
    }

    #[test]
    fn doubles_then_bisects_to_the_resolution() {
        let s = SearchSettings::new(false);
        let (ns, pass, fail) = search(&s, 45);
        assert_eq!(ns, [8, 16, 32, 64, 48, 40, 44]);
        assert_eq!((pass, fail), (44, Some(48)));
        let (ns, pass, fail) = search(&s, 100);
        assert_eq!(&ns[..6], [8, 16, 32, 64, 128, 96]);
        assert!(pass <= 100 && fail.unwrap() > 100);
        assert!(fail.unwrap() - pass <= pass / 8, "{pass} {fail:?}");
    }

    #[test]
    fn stops_at_the_top_and_at_zero() {
        let s = SearchSettings::new(true);
        let (ns, pass, fail) = search(&s, 1000);
        assert_eq!(ns, [4, 8, 16, 32, 64]);
        assert_eq!((pass, fail), (64, None));
        let (ns, pass, fail) = search(&s, 0);
        assert_eq!(ns, [4, 2, 1]);
        assert_eq!((pass, fail), (0, Some(1)));
        let (_, pass, _) = search(&s, 2);
        assert_eq!(pass, 2);
    }

    #[test]
    fn a_noisy_pass_above_a_failure_is_ignored() {
        let probes = [(8, true), (16, false), (12, true), (32, true)];
        assert_eq!(bounds(&probes), (12, Some(16)));
        let s = SearchSettings::new(false);
        assert_eq!(next_probe(&s, &probes), Some(14));
    }

    #[test]
    fn the_worst_case_bounds_every_search() {
        for s in [SearchSettings::new(true), SearchSettings::new(false)] {
            let worst = s.max_probes();
            for c in 0..=s.max + 3 {
                assert!(search(&s, c).0.len() <= worst, "{c}");
            }
            assert!((5..20).contains(&worst), "{worst}");
        }
    }
}
