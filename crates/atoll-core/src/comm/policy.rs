//! The per-epoch communication-aware boost policy (paper §3.2–3.5).
//!
//! [`CommPolicy::step`] is called once per epoch with the units sampled
//! on the island. It turns their cumulative counters into per-epoch
//! figures, computes each watched unit's *intensity*, and boosts the
//! `max_boosted` most intense units that have not yet used their slice of
//! the current period. See the [parent module](super) for the mapping from
//! the paper and the guarantees.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::predict::{Anticipation, Prediction, SenderPredictor};
use super::spec::{CommSpec, CommSpecError};
use super::UnitNetSample;
use crate::num::saturating_u64;
use crate::Name;

/// What the daemon measured of one unit at the start of an epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitInput {
    /// The unit.
    pub unit: Name,
    /// Its sockets now (cumulative counters, queues).
    pub net: UnitNetSample,
    /// Its cumulative CPU time, µs (`cpu.stat usage_usec` or
    /// `cpuacct.usage / 1000`).
    pub cpu_usage_us: u64,
    /// Its reservation, CPUs (finite, >= 0): it is owed `reservation ×
    /// period` of CPU time per period. See [`reservations`](super::reservations).
    pub reservation_cpus: f64,
}

/// Why a unit is boosted, with the figures that made it so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum BoostReason {
    /// Received data is waiting or just arrived (paper §3.2).
    Recipient {
        /// Bytes in its receive queues now.
        queued_bytes: u64,
        /// Bytes it read since the last sample.
        received_bytes: u64,
    },
    /// It is anticipated to send during the coming epoch (paper §3.3).
    Sender {
        /// The size of its last send burst.
        predicted_bytes: u64,
        /// Time until the predicted burst.
        due_in: Duration,
    },
    /// It is on the other units' network path (paper §3.4, Domain0).
    NetPath {
        /// Its intensity: `received_bytes + others_sent_bytes`.
        intensity: u64,
        /// Bytes queued for it and read by it since the last sample.
        received_bytes: u64,
        /// Bytes the other watched units sent since the last sample.
        others_sent_bytes: u64,
    },
}

impl BoostReason {
    /// The feature this reason comes from.
    pub fn kind(&self) -> ReasonKind {
        match self {
            Self::Recipient { .. } => ReasonKind::Recipient,
            Self::Sender { .. } => ReasonKind::Sender,
            Self::NetPath { .. } => ReasonKind::NetPath,
        }
    }

    /// Its contribution to the unit's intensity, bytes.
    pub fn bytes(&self) -> u64 {
        match *self {
            Self::Recipient {
                queued_bytes,
                received_bytes,
            } => queued_bytes.saturating_add(received_bytes),
            Self::Sender {
                predicted_bytes, ..
            } => predicted_bytes,
            Self::NetPath { intensity, .. } => intensity,
        }
    }
}

impl fmt::Display for BoostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Recipient {
                queued_bytes,
                received_bytes,
            } => write!(
                f,
                "{queued_bytes} bytes wait in its receive queues and it read {received_bytes} in the last epoch"
            ),
            Self::Sender {
                predicted_bytes,
                due_in,
            } => write!(
                f,
                "it is expected to send {predicted_bytes} bytes in {} µs (last-value prediction)",
                due_in.as_micros()
            ),
            Self::NetPath {
                intensity,
                received_bytes,
                others_sent_bytes,
            } => write!(
                f,
                "it is on the network path: {intensity} bytes ({received_bytes} received, {others_sent_bytes} sent by the others)"
            ),
        }
    }
}

/// The three features, for counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    /// [`BoostReason::Recipient`].
    Recipient,
    /// [`BoostReason::Sender`].
    Sender,
    /// [`BoostReason::NetPath`].
    NetPath,
}

/// A unit boosted for the coming epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Boost {
    /// The unit.
    pub unit: Name,
    /// Its intensity, bytes (the sum of its reasons' contributions).
    pub intensity: u64,
    /// Why, largest contribution first (never empty).
    pub reasons: Vec<BoostReason>,
}

impl Boost {
    /// The main reason (largest contribution).
    pub fn reason(&self) -> &BoostReason {
        &self.reasons[0]
    }
}

impl fmt::Display for Boost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "boost unit {} (intensity {} bytes): ",
            self.unit, self.intensity
        )?;
        for (i, r) in self.reasons.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// A reservation limit that stops a boost: the paper's rule, the only gate
/// (see [Bounded unfairness](super#bounded-unfairness)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "limit", rename_all = "snake_case")]
pub enum Limit {
    /// It used its slice of the current period already (paper: preferred
    /// only while it has received less than its slice).
    OverReservation {
        /// CPU used in the current period, µs.
        used_us: u64,
        /// Its slice, µs.
        slice_us: u64,
    },
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OverReservation { used_us, slice_us } => write!(
                f,
                "it used {used_us} µs of CPU this period, its slice is {slice_us} µs"
            ),
        }
    }
}

/// A unit that would have been boosted but for a limit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The unit.
    pub unit: Name,
    /// Its intensity, bytes.
    pub intensity: u64,
    /// The limit it hit.
    pub limit: Limit,
}

/// Why a boost ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum EndReason {
    /// Its intensity fell to 0 (or its features are off).
    Quiet,
    /// `max_boosted` more intense units took the places.
    Outranked {
        /// Its intensity, bytes.
        intensity: u64,
        /// The lowest intensity boosted.
        cutoff: u64,
    },
    /// A reservation limit.
    Limit(Limit),
    /// It was missing from this step's inputs.
    NotSampled,
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Quiet => f.write_str("it has no network activity to favour"),
            Self::Outranked { intensity, cutoff } => write!(
                f,
                "its intensity {intensity} bytes is below the {cutoff} bytes of the units boosted"
            ),
            Self::Limit(l) => write!(f, "{l}"),
            Self::NotSampled => f.write_str("it was not sampled this epoch"),
        }
    }
}

/// What to do for the coming epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommDecision {
    /// The step's time.
    pub at: Duration,
    /// Every unit boosted for the coming epoch, most intense first.
    pub boosted: Vec<Boost>,
    /// The boosts that start now (a subset of `boosted`).
    pub started: Vec<Boost>,
    /// The boosts that end now, and why.
    pub ended: Vec<(Name, EndReason)>,
    /// Units that ranked among the `max_boosted` most intense but were over
    /// a limit.
    pub refused: Vec<Refusal>,
}

/// Boosts started, by main reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonCounts {
    /// Started as recipient.
    pub recipient: u64,
    /// Started as anticipated sender.
    pub sender: u64,
    /// Started as network-path unit.
    pub netpath: u64,
}

impl ReasonCounts {
    /// Sum of the three.
    pub fn total(&self) -> u64 {
        self.recipient + self.sender + self.netpath
    }

    fn count(&mut self, kind: ReasonKind) {
        match kind {
            ReasonKind::Recipient => self.recipient += 1,
            ReasonKind::Sender => self.sender += 1,
            ReasonKind::NetPath => self.netpath += 1,
        }
    }
}

/// One watched unit's accounting, for status and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommAccount {
    /// Boosts started.
    pub boosts: u64,
    /// Wall time spent boosted, µs.
    pub boosted_us: u64,
    /// Epochs in which it ranked for a boost but had used its slice.
    pub over_reservation: u64,
    /// Boosts started, by main reason (adds up to `boosts`).
    pub reasons: ReasonCounts,
    /// When the current boost started, if boosted.
    pub boosted_since: Option<Duration>,
    /// Intensity at the last step, bytes.
    pub intensity: u64,
    /// CPU used in the current period, µs.
    pub period_use_us: u64,
    /// Its slice (reservation × period), µs.
    pub slice_us: u64,
    /// Wall time boosted in the current period, µs (at most the period).
    /// Information only: it does not gate boosts.
    pub period_boosted_us: u64,
    /// The sender predictor's guess, once it has one.
    pub prediction: Option<Prediction>,
}

/// Why a step was refused. Nothing changes when a step fails.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CommError {
    /// Time ran backwards.
    #[error("time went back from {last:?} to {now:?}")]
    TimeWentBack {
        /// The previous step's time.
        last: Duration,
        /// This step's time.
        now: Duration,
    },
    /// A unit appears twice in one step.
    #[error("unit {unit} is listed twice")]
    DuplicateUnit {
        /// The unit.
        unit: Name,
    },
    /// A reservation that is negative or not finite.
    #[error("unit {unit}: reservation_cpus = {cpus} is not a finite number >= 0")]
    BadReservation {
        /// The unit.
        unit: Name,
        /// The value.
        cpus: f64,
    },
}

/// Per-unit memory between steps.
#[derive(Clone, Debug, Default)]
struct Track {
    /// Last sample (the baseline of the next deltas).
    net: Option<UnitNetSample>,
    /// Last cumulative CPU, µs.
    cpu: Option<u64>,
    /// Index of the period the counters below belong to.
    period: u64,
    period_use_us: u64,
    period_boosted: Duration,
    boosted_total: Duration,
    predictor: SenderPredictor,
}

impl Track {
    /// Takes in input `i`'s sample at `now` (period `k`); with `anticipate`
    /// (the epoch length) also asks the predictor. Returns the figures and
    /// the bytes sent since the last sample.
    fn sample(
        &mut self,
        k: u64,
        now: Duration,
        i: usize,
        inp: &UnitInput,
        anticipate: Option<Duration>,
    ) -> (Figures, u64) {
        self.roll(k);
        let (recv, sent) = match self.net {
            Some(p) => (
                inp.net.bytes_received.saturating_sub(p.bytes_received),
                inp.net.bytes_sent.saturating_sub(p.bytes_sent),
            ),
            None => (0, 0),
        };
        // A CPU counter that dropped restarted: all of it is new.
        let cpu = self.cpu.map_or(0, |p| {
            inp.cpu_usage_us.checked_sub(p).unwrap_or(inp.cpu_usage_us)
        });
        self.period_use_us = self.period_use_us.saturating_add(cpu);
        self.net = Some(inp.net);
        self.cpu = Some(inp.cpu_usage_us);
        self.predictor.observe(now, sent);
        let f = Figures {
            input: i,
            on_path: false,
            recv,
            anticipated: anticipate.and_then(|h| self.predictor.anticipated(now, h)),
            prediction: self.predictor.prediction(),
            period_use_us: self.period_use_us,
            period_boosted_us: as_us(self.period_boosted),
        };
        (f, sent)
    }

    /// Starts period `k` if the counters belong to an earlier one.
    fn roll(&mut self, k: u64) {
        if self.period != k {
            self.period = k;
            self.period_use_us = 0;
            self.period_boosted = Duration::ZERO;
        }
    }
}

/// The policy: per-unit tracks, accounts and the current boosts.
#[derive(Clone, Debug)]
pub struct CommPolicy {
    spec: CommSpec,
    /// `spec.units` as a set (`None`: every unit).
    watched: Option<BTreeSet<Name>>,
    /// `spec.netpath` as a set.
    netpath: BTreeSet<Name>,
    tracks: BTreeMap<Name, Track>,
    accounts: BTreeMap<Name, CommAccount>,
    boosted: Vec<Boost>,
    last: Option<Duration>,
}

/// What step 2 learnt of one watched, sampled unit.
struct Figures {
    input: usize,
    on_path: bool,
    /// Bytes read since the last sample.
    recv: u64,
    anticipated: Option<Anticipation>,
    prediction: Option<Prediction>,
    period_use_us: u64,
    period_boosted_us: u64,
}

/// One watched, sampled unit during a step.
struct Row {
    input: usize,
    intensity: u64,
    reasons: Vec<BoostReason>,
    limit: Option<Limit>,
    was_boosted: bool,
}

impl CommPolicy {
    /// A policy for a valid `spec`.
    pub fn new(spec: CommSpec) -> Result<Self, CommSpecError> {
        spec.validate()?;
        Ok(Self {
            watched: spec.units.as_ref().map(|u| u.iter().cloned().collect()),
            netpath: spec.netpath.iter().cloned().collect(),
            spec,
            tracks: BTreeMap::new(),
            accounts: BTreeMap::new(),
            boosted: Vec::new(),
            last: None,
        })
    }

    /// The spec in force.
    pub fn spec(&self) -> &CommSpec {
        &self.spec
    }

    /// The units boosted by the last step.
    pub fn boosted(&self) -> &[Boost] {
        &self.boosted
    }

    /// Every watched unit's account.
    pub fn accounts(&self) -> &BTreeMap<Name, CommAccount> {
        &self.accounts
    }

    /// Forgets a removed unit; returns its final account. It leaves the
    /// boosted set without an end event (the daemon removed it).
    pub fn forget(&mut self, unit: &Name) -> Option<CommAccount> {
        self.tracks.remove(unit);
        self.boosted.retain(|b| &b.unit != unit);
        self.accounts.remove(unit)
    }

    /// Period index of `t`.
    fn period_of(&self, t: Duration) -> u64 {
        let k = t.as_nanos() / self.spec.period.as_nanos().max(1);
        u64::try_from(k).unwrap_or(u64::MAX)
    }

    /// Decides the boosts for the epoch starting at `now`.
    ///
    /// `inputs` holds the units sampled this epoch. It may include units
    /// the spec does not watch (neither in [`CommSpec::units`] nor in
    /// [`CommSpec::netpath`]): they are checked like the others (no
    /// duplicates, valid reservations) and otherwise skipped — never
    /// tracked, boosted nor counted in a network-path unit's intensity. A
    /// watched unit missing from `inputs` cannot be boosted and keeps its
    /// state. Fails, changing nothing, if time runs back, a unit is listed
    /// twice, or a reservation is not a finite number >= 0.
    pub fn step(&mut self, now: Duration, inputs: &[UnitInput]) -> Result<CommDecision, CommError> {
        self.check(now, inputs)?;
        let period = self.spec.period;
        let period_us = period.as_micros() as f64;
        let k = self.period_of(now);
        let period_start = Duration::from_nanos(
            u64::try_from(u128::from(k) * period.as_nanos()).unwrap_or(u64::MAX),
        );
        let epoch = self.last.map(|l| now - l).filter(|h| !h.is_zero());

        // 1. Charge the boost that just ran to the boosted units, sampled or not.
        if let Some(last) = self.last {
            for b in &self.boosted {
                if let Some(t) = self.tracks.get_mut(&b.unit) {
                    t.roll(k);
                    t.boosted_total += now - last;
                    t.period_boosted += now - last.max(period_start);
                    if let Some(a) = self.accounts.get_mut(&b.unit) {
                        a.boosted_us = as_us(t.boosted_total);
                    }
                }
            }
        }

        // 2. Per-epoch figures of the watched units.
        let mut figures: Vec<Figures> = Vec::new();
        let mut others_sent: u64 = 0;
        for (i, inp) in inputs.iter().enumerate() {
            let on_path = self.netpath.contains(&inp.unit);
            if !on_path && !self.watched.as_ref().is_none_or(|w| w.contains(&inp.unit)) {
                continue;
            }
            let h = epoch.filter(|_| self.spec.anticipate && !on_path);
            let (f, sent) = match self.tracks.get_mut(&inp.unit) {
                Some(t) => t.sample(k, now, i, inp, h),
                None => {
                    let mut t = Track {
                        period: k,
                        ..Track::default()
                    };
                    let out = t.sample(k, now, i, inp, h);
                    self.tracks.insert(inp.unit.clone(), t);
                    out
                }
            };
            if !on_path {
                others_sent = others_sent.saturating_add(sent);
            }
            figures.push(Figures { on_path, ..f });
        }

        // 3. Intensities and the slice gate.
        let mut rows: Vec<Row> = Vec::with_capacity(figures.len());
        for f in &figures {
            let inp = &inputs[f.input];
            let received = inp.net.recv_queued.saturating_add(f.recv);
            let mut reasons = Vec::new();
            if f.on_path {
                let intensity = received.saturating_add(others_sent);
                if intensity > 0 {
                    reasons.push(BoostReason::NetPath {
                        intensity,
                        received_bytes: received,
                        others_sent_bytes: others_sent,
                    });
                }
            } else {
                if self.spec.recipient && received > 0 {
                    reasons.push(BoostReason::Recipient {
                        queued_bytes: inp.net.recv_queued,
                        received_bytes: f.recv,
                    });
                }
                if let Some(a) = f.anticipated.filter(|a| a.predicted_bytes > 0) {
                    reasons.push(BoostReason::Sender {
                        predicted_bytes: a.predicted_bytes,
                        due_in: a.due_in,
                    });
                }
            }
            // Largest contribution first; ties keep the order above.
            reasons.sort_by_key(|r| std::cmp::Reverse(r.bytes()));
            let intensity = reasons
                .iter()
                .fold(0u64, |s, r| s.saturating_add(r.bytes()));

            let slice_us = saturating_u64((inp.reservation_cpus * period_us).round());
            let limit = (f.period_use_us >= slice_us).then_some(Limit::OverReservation {
                used_us: f.period_use_us,
                slice_us,
            });
            let fill = |a: &mut CommAccount| {
                a.intensity = intensity;
                a.period_use_us = f.period_use_us;
                a.slice_us = slice_us;
                a.period_boosted_us = f.period_boosted_us;
                a.prediction = f.prediction;
            };
            match self.accounts.get_mut(&inp.unit) {
                Some(a) => fill(a),
                None => {
                    let mut a = CommAccount::default();
                    fill(&mut a);
                    self.accounts.insert(inp.unit.clone(), a);
                }
            }
            rows.push(Row {
                input: f.input,
                intensity,
                reasons,
                limit,
                was_boosted: self.boosted.iter().any(|b| b.unit == inp.unit),
            });
        }

        // 4. Select: most intense first, current boosts win ties, then name.
        let mut order: Vec<usize> = (0..rows.len()).filter(|&r| rows[r].intensity > 0).collect();
        order.sort_by(|&a, &b| {
            let (ra, rb) = (&rows[a], &rows[b]);
            rb.intensity
                .cmp(&ra.intensity)
                .then(rb.was_boosted.cmp(&ra.was_boosted))
                .then(inputs[ra.input].unit.cmp(&inputs[rb.input].unit))
        });
        let mut boosted: Vec<Boost> = Vec::new();
        let mut refused: Vec<Refusal> = Vec::new();
        for &r in &order {
            if boosted.len() == self.spec.max_boosted {
                break;
            }
            let row = &mut rows[r];
            let unit = inputs[row.input].unit.clone();
            match row.limit {
                Some(limit) => refused.push(Refusal {
                    unit,
                    intensity: row.intensity,
                    limit,
                }),
                None => boosted.push(Boost {
                    unit,
                    intensity: row.intensity,
                    reasons: std::mem::take(&mut row.reasons),
                }),
            }
        }

        // 5. Starts, ends and accounting.
        let cutoff = boosted.last().map_or(0, |b| b.intensity);
        let mut decision = CommDecision {
            at: now,
            ..CommDecision::default()
        };
        for old in &self.boosted {
            if boosted.iter().any(|b| b.unit == old.unit) {
                continue;
            }
            let row = rows.iter().find(|r| inputs[r.input].unit == old.unit);
            let why = match (row, refused.iter().find(|f| f.unit == old.unit)) {
                (None, _) => EndReason::NotSampled,
                (Some(_), Some(f)) => EndReason::Limit(f.limit),
                (Some(r), None) if r.intensity == 0 => EndReason::Quiet,
                (Some(r), None) => EndReason::Outranked {
                    intensity: r.intensity,
                    cutoff,
                },
            };
            if let Some(a) = self.accounts.get_mut(&old.unit) {
                a.boosted_since = None;
            }
            decision.ended.push((old.unit.clone(), why));
        }
        for f in &refused {
            if let Some(a) = self.accounts.get_mut(&f.unit) {
                match f.limit {
                    Limit::OverReservation { .. } => a.over_reservation += 1,
                }
            }
        }
        for b in &boosted {
            if self.boosted.iter().all(|o| o.unit != b.unit) {
                if let Some(a) = self.accounts.get_mut(&b.unit) {
                    a.boosts += 1;
                    a.reasons.count(b.reason().kind());
                    a.boosted_since = Some(now);
                }
                decision.started.push(b.clone());
            }
        }
        decision.boosted.clone_from(&boosted);
        decision.refused = refused;
        self.boosted = boosted;
        self.last = Some(now);
        Ok(decision)
    }

    fn check(&self, now: Duration, inputs: &[UnitInput]) -> Result<(), CommError> {
        if let Some(last) = self.last {
            if now < last {
                return Err(CommError::TimeWentBack { last, now });
            }
        }
        let mut seen = HashSet::with_capacity(inputs.len());
        for i in inputs {
            if !seen.insert(&i.unit) {
                return Err(CommError::DuplicateUnit {
                    unit: i.unit.clone(),
                });
            }
            if !(i.reservation_cpus.is_finite() && i.reservation_cpus >= 0.0) {
                return Err(CommError::BadReservation {
                    unit: i.unit.clone(),
                    cpus: i.reservation_cpus,
                });
            }
        }
        Ok(())
    }
}

fn as_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
