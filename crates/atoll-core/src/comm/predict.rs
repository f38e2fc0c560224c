//! The last-value sender predictor (paper §3.3).
//!
//! Sending can only be anticipated. The paper takes the number of packets of
//! a domain's last transmission as the size of its next one, and the time
//! Δ between its last two transmissions as the time until the next. atoll
//! sees a unit's sockets once per epoch, so:
//!
//! - a **burst** is an epoch in which the unit's `bytes_sent` grew; it is
//!   dated at the sample that saw it (the end of that epoch) and its size is
//!   the growth;
//! - with the last two bursts at `T₋₁ < T`, Δ = `T − T₋₁`, the **next
//!   burst** is predicted at `T + Δ` with the last burst's size;
//! - the **predicted window** is `[T + Δ − h, T + Δ + h]`, where `h` is the
//!   epoch length (the time between the policy's last two steps, taken as
//!   the length of the coming epoch). A burst is seen up to one epoch after
//!   it happens, at both ends of Δ, so the seen Δ is within `±h` of the true
//!   one: the window absorbs that quantization;
//! - a unit is **anticipated** at `now` when `now + h`, the sample that will
//!   see what the unit sends during the coming epoch, falls in the window:
//!   `T + Δ − 2h ≤ now ≤ T + Δ`.
//!
//! Consequences: a unit that has sent only once is never anticipated (no Δ);
//! a unit that sends every epoch (Δ = h) stays anticipated, and when it stops
//! it keeps the anticipation for one more epoch (a miss), then loses it
//! until it sends again; a late burst simply becomes the new `T`, with the
//! long gap as the new Δ (last value, no smoothing).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One observed send burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Burst {
    /// When the sample that saw it was taken.
    pub at: Duration,
    /// Bytes sent in the epoch.
    pub bytes: u64,
}

/// The predictor's guess of the next burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prediction {
    /// When the next burst should be seen (`T + Δ`).
    pub at: Duration,
    /// Its size: the last burst's.
    pub bytes: u64,
    /// Δ, the time between the last two bursts.
    pub delta: Duration,
}

/// Why a unit is anticipated for the coming epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anticipation {
    /// Bytes it is expected to send (the last burst's size).
    pub predicted_bytes: u64,
    /// Time from now to the predicted burst (0 if it is due or overdue).
    pub due_in: Duration,
}

/// Last-value prediction of one unit's next send burst.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SenderPredictor {
    last: Option<Burst>,
    prev_at: Option<Duration>,
    bursts: u64,
}

impl SenderPredictor {
    /// A predictor that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records what the unit sent in the epoch ending at `now` (`sent`
    /// bytes, the growth of its counter; 0 when it did not grow or the
    /// counter was reset). Returns the burst if there was one. Samples must
    /// come in time order; one at the time of the last burst is ignored.
    pub fn observe(&mut self, now: Duration, sent: u64) -> Option<Burst> {
        if sent == 0 || self.last.is_some_and(|l| now <= l.at) {
            return None;
        }
        let burst = Burst {
            at: now,
            bytes: sent,
        };
        self.prev_at = self.last.map(|l| l.at);
        self.last = Some(burst);
        self.bursts += 1;
        Some(burst)
    }

    /// The last burst seen.
    pub fn last_burst(&self) -> Option<Burst> {
        self.last
    }

    /// Bursts seen so far.
    pub fn bursts(&self) -> u64 {
        self.bursts
    }

    /// The next burst, once two have been seen.
    pub fn prediction(&self) -> Option<Prediction> {
        let last = self.last?;
        let delta = last.at.checked_sub(self.prev_at?)?;
        Some(Prediction {
            at: last.at + delta,
            bytes: last.bytes,
            delta,
        })
    }

    /// Whether the unit is anticipated to send during the epoch `[now, now +
    /// epoch]`: `now + epoch` lies in `[next − epoch, next + epoch]` (see the
    /// [module docs](self)).
    pub fn anticipated(&self, now: Duration, epoch: Duration) -> Option<Anticipation> {
        let p = self.prediction()?;
        let seen_at = now + epoch;
        let early = p.at.saturating_sub(epoch);
        let late = p.at + epoch;
        (early <= seen_at && seen_at <= late).then(|| Anticipation {
            predicted_bytes: p.bytes,
            due_in: p.at.saturating_sub(now),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// Feeds sends (ms, bytes) into a predictor sampled every `epoch` ms from
    /// 0 to `until` and returns the sample times at which it was
    /// anticipated.
    fn run(epoch: u64, until: u64, sends: &[(u64, u64)]) -> (SenderPredictor, Vec<u64>) {
        let mut p = SenderPredictor::new();
        let mut boosted = Vec::new();
        let mut t = 0;
        while t <= until {
            let sent: u64 = sends
                .iter()
                .filter(|(at, _)| *at + epoch > t && *at <= t)
                .map(|(_, b)| b)
                .sum();
            p.observe(ms(t), sent);
            if p.anticipated(ms(t), ms(epoch)).is_some() {
                boosted.push(t);
            }
            t += epoch;
        }
        (p, boosted)
    }

    #[test]
    fn first_burst_predicts_nothing() {
        let mut p = SenderPredictor::new();
        assert_eq!(p.observe(ms(10), 0), None);
        assert_eq!(p.prediction(), None);
        let b = p.observe(ms(30), 500).unwrap();
        assert_eq!(
            b,
            Burst {
                at: ms(30),
                bytes: 500
            }
        );
        assert_eq!(p.prediction(), None);
        for t in 30..200 {
            assert_eq!(p.anticipated(ms(t), ms(10)), None);
        }
    }

    #[test]
    fn steady_bursts_are_anticipated_in_the_window() {
        // Sends of 1000 bytes every 100 ms, sampled every 10 ms: seen at the
        // sample of the send itself.
        let sends: Vec<(u64, u64)> = (1..=5).map(|k| (k * 100, 1000)).collect();
        let (p, boosted) = run(10, 520, &sends);
        let pred = p.prediction().unwrap();
        assert_eq!(
            pred,
            Prediction {
                at: ms(600),
                bytes: 1000,
                delta: ms(100)
            }
        );
        // After the second burst (200) the window for the burst at 300 is
        // now + 10 in [290, 310], i.e. now in [280, 300]; the burst at 300
        // moves the prediction on, so 300 itself is judged against 400.
        assert_eq!(boosted, vec![280, 290, 380, 390, 480, 490]);
        // Every actual burst fell in an anticipated epoch.
        for (at, _) in &sends[2..] {
            assert!(
                boosted.contains(&(at - 10)),
                "burst at {at} not anticipated"
            );
        }
    }

    #[test]
    fn window_boundaries_are_inclusive_and_due_in_counts_down() {
        let mut p = SenderPredictor::new();
        p.observe(ms(100), 10);
        p.observe(ms(200), 20);
        let h = ms(30);
        // next = 300, window for now + h is [270, 330]: now in [240, 300].
        assert_eq!(p.anticipated(ms(239), h), None);
        assert_eq!(
            p.anticipated(ms(240), h),
            Some(Anticipation {
                predicted_bytes: 20,
                due_in: ms(60)
            })
        );
        assert_eq!(p.anticipated(ms(300), h).unwrap().due_in, Duration::ZERO);
        assert_eq!(p.anticipated(ms(301), h), None);
    }

    #[test]
    fn irregular_bursts_use_the_last_gap_and_size() {
        let mut p = SenderPredictor::new();
        p.observe(ms(0), 100);
        p.observe(ms(100), 200);
        assert_eq!(p.prediction().unwrap().at, ms(200));
        // Late: the long gap becomes Δ.
        p.observe(ms(350), 50);
        assert_eq!(
            p.prediction(),
            Some(Prediction {
                at: ms(600),
                bytes: 50,
                delta: ms(250)
            })
        );
        // Early: a short gap.
        p.observe(ms(370), 7);
        assert_eq!(
            p.prediction(),
            Some(Prediction {
                at: ms(390),
                bytes: 7,
                delta: ms(20)
            })
        );
        assert_eq!(p.bursts(), 4);
        // A missed prediction stops anticipating after the window.
        assert!(p.anticipated(ms(380), ms(10)).is_some());
        assert!(p.anticipated(ms(391), ms(10)).is_none());
    }

    #[test]
    fn a_steady_stream_stays_anticipated_and_stops_one_epoch_late() {
        // Sends every epoch from 100 to 300.
        let sends: Vec<(u64, u64)> = (10..=30).map(|k| (k * 10, 64)).collect();
        let (_, boosted) = run(10, 400, &sends);
        let want: Vec<u64> = (110..=310).step_by(10).collect();
        assert_eq!(boosted, want);
    }

    #[test]
    fn repeated_or_zero_samples_are_not_bursts() {
        let mut p = SenderPredictor::new();
        p.observe(ms(100), 10);
        assert_eq!(p.observe(ms(100), 10), None);
        assert_eq!(p.observe(ms(90), 10), None);
        assert_eq!(p.observe(ms(150), 0), None);
        assert_eq!(p.bursts(), 1);
        assert_eq!(
            p.last_burst(),
            Some(Burst {
                at: ms(100),
                bytes: 10
            })
        );
    }
}
