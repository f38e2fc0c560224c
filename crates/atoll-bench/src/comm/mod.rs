//! `atoll bench comm`: the evidence for communication-aware CPU scheduling
//! (seed 003, "Xen and Co."), policy off and on, side by side in one run.
//!
//! Every run starts the real daemon on a unique cgroup root with a generated
//! config ([`config`]): one island of one CPU holding the servers' units and
//! five CPU-bound units (`spin`, the paper's CPU-intensive domains), and a
//! `[comm]` section when the policy is on. Two workloads, each a set of real
//! processes in their units:
//!
//! - **Two-tier**: nginx as a reverse proxy (`front`) before nginx gzipping
//!   every response (`back`), driven at a fixed rate by `http-load` from the
//!   host CPUs. Per run: response time average, p95 and max, throughput,
//!   errors; the hogs' work rate and CPU; the servers' and hogs' context
//!   switches; the daemon's comm accounting when it reports one.
//! - **Streaming**: `stream-server` (unit `stream`) behind the same proxy
//!   sends N clients a constant-rate stream; `stream-client` plays them
//!   through playback buffers and counts under-runs. The largest N with at
//!   most one under-run per client is searched by stepping N ([`search`]).
//!
//! Variants ([`Variant`]): `off`, every feature on with each mechanism of
//! `--mechanisms`, and each feature alone (the paper's Table 2) with the
//! first mechanism. Reps interleave the variants (the order reverses every
//! other rep, so a drift of the machine does not favour one side);
//! [`report`] turns the samples into means, per-rep values and
//! `improvement = 1 - on/off` against the paper's figures.

pub mod config;
pub mod procstat;
pub mod report;
mod run;
mod scenarios;
pub mod search;
mod table;

use std::path::PathBuf;
use std::str::FromStr;

pub use report::*;
pub(crate) use run::pin;
pub use run::{find_program, run, search_dirs, MAX_OUTSIDE_CPU, NOISY_RETRIES};
pub use search::SearchSettings;
use serde::{Deserialize, Serialize};
pub use table::render_table;

/// How the daemon applies a boost (`[comm] mechanism`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    /// A short custom EEVDF slice for the boosted units' threads.
    Slice,
    /// A weight multiplier while boosted.
    Weight,
    /// The others idle-class while someone is boosted.
    IdleOthers,
}

impl Mechanism {
    /// Every mechanism, in the default order.
    pub const ALL: [Self; 3] = [Self::Slice, Self::Weight, Self::IdleOthers];

    /// The name in the config, on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Slice => "slice",
            Self::Weight => "weight",
            Self::IdleOthers => "idle_others",
        }
    }
}

impl FromStr for Mechanism {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s.trim())
            .ok_or_else(|| format!("unknown mechanism {s:?} (one of slice, weight, idle_others)"))
    }
}

/// One daemon configuration under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// No `[comm]` section: the policy is off.
    Off,
    /// `[comm]` with these features and this mechanism.
    On {
        /// Prefer units with received data waiting.
        recipient: bool,
        /// Last-value prediction of the next send.
        anticipate: bool,
        /// Boost the proxy on the others' network path.
        netpath: bool,
        /// How boosts are applied.
        mechanism: Mechanism,
    },
}

impl Variant {
    /// Every feature, with `m`.
    pub fn all(m: Mechanism) -> Self {
        Self::On {
            recipient: true,
            anticipate: true,
            netpath: true,
            mechanism: m,
        }
    }

    /// The paper's Table 2: each feature alone, with `m`.
    pub fn alone(m: Mechanism) -> [Self; 3] {
        let on = |r, a, n| Self::On {
            recipient: r,
            anticipate: a,
            netpath: n,
            mechanism: m,
        };
        [
            on(true, false, false),
            on(false, true, false),
            on(false, false, true),
        ]
    }

    /// Whether the policy is on.
    pub fn is_on(&self) -> bool {
        matches!(self, Self::On { .. })
    }

    /// The features on (`recipient`, `anticipate`, `netpath`).
    pub fn features(&self) -> Vec<&'static str> {
        match *self {
            Self::Off => Vec::new(),
            Self::On {
                recipient,
                anticipate,
                netpath,
                ..
            } => [
                (recipient, "recipient"),
                (anticipate, "anticipate"),
                (netpath, "netpath"),
            ]
            .into_iter()
            .filter_map(|(on, n)| on.then_some(n))
            .collect(),
        }
    }

    /// `off`, `all` (every feature), `none`, or the features joined by `+`.
    pub fn features_name(&self) -> String {
        match self {
            Self::Off => "off".into(),
            _ => match self.features().as_slice() {
                [] => "none".into(),
                [_, _, _] => "all".into(),
                f => f.join("+"),
            },
        }
    }

    /// Its mechanism, when on.
    pub fn mechanism(&self) -> Option<Mechanism> {
        match self {
            Self::Off => None,
            Self::On { mechanism, .. } => Some(*mechanism),
        }
    }

    /// `off` or `FEATURES/MECHANISM` (`all/slice`, `netpath/weight`).
    pub fn name(&self) -> String {
        match self.mechanism() {
            None => "off".into(),
            Some(m) => format!("{}/{}", self.features_name(), m.as_str()),
        }
    }
}

/// The two-tier variants of a run: `off`, everything with the first
/// mechanism, each feature alone with it, then everything with each other
/// mechanism (a mechanism named twice runs once).
pub fn two_tier_variants(mechanisms: &[Mechanism]) -> Vec<Variant> {
    let Some(&first) = mechanisms.first() else {
        return vec![Variant::Off];
    };
    let mut v = vec![Variant::Off, Variant::all(first)];
    v.extend(Variant::alone(first));
    for &m in &mechanisms[1..] {
        if !v.contains(&Variant::all(m)) {
            v.push(Variant::all(m));
        }
    }
    v
}

/// The streaming per-feature variants: `off`, each feature alone, all.
pub fn stream_feature_variants(first: Mechanism) -> Vec<Variant> {
    let mut v = vec![Variant::Off];
    v.extend(Variant::alone(first));
    v.push(Variant::all(first));
    v
}

/// The order of `items` in rep `rep`: as given on even reps, reversed on
/// odd ones.
pub fn rep_order<T: Clone>(items: &[T], rep: usize) -> Vec<T> {
    let mut v = items.to_vec();
    if rep % 2 == 1 {
        v.reverse();
    }
    v
}

/// What `atoll bench comm` runs.
#[derive(Clone, Debug)]
pub struct CommOptions {
    /// The `atoll` binary (daemon, `run`, `__worker`).
    pub exe: PathBuf,
    /// The sizes and durations.
    pub settings: Settings,
    /// Skip the streaming workload.
    pub skip_stream: bool,
    /// Mechanisms compared; the first is the one the features are broken
    /// down with and the headline uses.
    pub mechanisms: Vec<Mechanism>,
    /// The command line, for the report.
    pub command: String,
}

impl CommOptions {
    /// Progress steps: one per run (the N searches counted at their
    /// longest).
    pub fn steps(&self) -> usize {
        let s = &self.settings;
        let two_tier = s.reps * two_tier_variants(&self.mechanisms).len();
        let stream = if self.skip_stream {
            0
        } else {
            s.reps * (2 * s.search.max_probes() + stream_feature_variants(Mechanism::Slice).len())
        };
        1 + two_tier + stream
    }
}

/// Sizes and durations of the workloads, and the `[comm]` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Short runs (smoke test).
    pub quick: bool,
    /// Repetitions of every variant.
    pub reps: usize,
    /// Measured window of a run, s.
    pub seconds: f64,
    /// Load before the window (not measured), s.
    pub warmup_s: f64,
    /// Two-tier: requests per second (fixed rate).
    pub rate: f64,
    /// Two-tier: the load generator's connections.
    pub connections: usize,
    /// Two-tier: the page the back end gzips, KiB.
    pub page_kib: usize,
    /// Two-tier: the back end's gzip level.
    pub gzip_level: u32,
    /// CPU-bound units.
    pub hogs: usize,
    /// `spin` threads per hog (the island's CPUs).
    pub hog_threads: usize,
    /// Streaming: each client's rate, bytes/s.
    pub stream_bytes_per_s: u64,
    /// Streaming: the server sends every this many ms.
    pub stream_interval_ms: u64,
    /// Streaming: each client's playback buffer, ms of stream.
    pub buffer_ms: u64,
    /// Streaming: how N is stepped.
    pub search: SearchSettings,
    /// `[comm] period_ms`.
    pub period_ms: u64,
    /// `[comm] boost_slice_us`.
    pub boost_slice_us: u64,
    /// `[comm] boost_weight`.
    pub boost_weight: u64,
    /// `[comm] max_boosted`.
    pub max_boosted: u64,
    /// The island's CPUs (set when the run starts).
    pub island_cpus: String,
    /// Where the load generators run (set when the run starts).
    pub load_cpus: String,
}

/// Requests per second when `--rate` is not given.
pub const DEFAULT_RATE: f64 = 100.0;

impl Settings {
    /// The defaults, or the short ones with `quick`; `reps`, `seconds` and
    /// `rate` override them.
    pub fn new(quick: bool, reps: Option<usize>, seconds: Option<f64>, rate: Option<f64>) -> Self {
        Self {
            quick,
            reps: reps.unwrap_or(if quick { 1 } else { 3 }).max(1),
            seconds: seconds.unwrap_or(if quick { 3.0 } else { 15.0 }),
            warmup_s: if quick { 0.5 } else { 1.0 },
            rate: rate.unwrap_or(DEFAULT_RATE),
            connections: 64,
            page_kib: 64,
            gzip_level: 6,
            hogs: 5,
            hog_threads: 1,
            stream_bytes_per_s: 1 << 20,
            stream_interval_ms: 20,
            buffer_ms: 500,
            search: SearchSettings::new(quick),
            period_ms: 100,
            boost_slice_us: 100,
            boost_weight: 8,
            max_boosted: 2,
            island_cpus: String::new(),
            load_cpus: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names() {
        assert_eq!(Variant::Off.name(), "off");
        assert_eq!(Variant::all(Mechanism::Weight).name(), "all/weight");
        let [r, a, n] = Variant::alone(Mechanism::Slice);
        assert_eq!(
            [r.name(), a.name(), n.name()],
            ["recipient/slice", "anticipate/slice", "netpath/slice"]
        );
        let two = Variant::On {
            recipient: true,
            anticipate: false,
            netpath: true,
            mechanism: Mechanism::IdleOthers,
        };
        assert_eq!(two.name(), "recipient+netpath/idle_others");
        assert_eq!(two.features(), ["recipient", "netpath"]);
        let none = Variant::On {
            recipient: false,
            anticipate: false,
            netpath: false,
            mechanism: Mechanism::Slice,
        };
        assert_eq!(none.name(), "none/slice");
        assert!(none.is_on() && !Variant::Off.is_on());
    }

    #[test]
    fn mechanisms_parse_by_name() {
        for m in Mechanism::ALL {
            assert_eq!(m.as_str().parse::<Mechanism>(), Ok(m));
        }
        assert!("fast"
            .parse::<Mechanism>()
            .unwrap_err()
            .contains("idle_others"));
    }

    #[test]
    fn variants_put_off_and_the_headline_first() {
        let names: Vec<String> = two_tier_variants(&[Mechanism::Weight, Mechanism::Slice])
            .iter()
            .map(Variant::name)
            .collect();
        assert_eq!(
            names,
            [
                "off",
                "all/weight",
                "recipient/weight",
                "anticipate/weight",
                "netpath/weight",
                "all/slice"
            ]
        );
        assert_eq!(two_tier_variants(&[]), [Variant::Off]);
        let twice = two_tier_variants(&[Mechanism::Slice, Mechanism::Weight, Mechanism::Slice]);
        assert_eq!(twice.len(), 6);
        let s: Vec<String> = stream_feature_variants(Mechanism::Slice)
            .iter()
            .map(Variant::name)
            .collect();
        assert_eq!(
            s,
            [
                "off",
                "recipient/slice",
                "anticipate/slice",
                "netpath/slice",
                "all/slice"
            ]
        );
    }

    #[test]
    fn odd_reps_run_in_reverse() {
        assert_eq!(rep_order(&[1, 2, 3], 0), [1, 2, 3]);
        assert_eq!(rep_order(&[1, 2, 3], 1), [3, 2, 1]);
        assert_eq!(rep_order(&[1, 2, 3], 2), [1, 2, 3]);
    }

    #[test]
    fn settings_and_steps() {
        let q = Settings::new(true, None, None, None);
        let f = Settings::new(false, None, Some(20.0), Some(50.0));
        assert!(q.seconds < f.seconds && q.reps < f.reps);
        assert_eq!((f.seconds, f.rate, f.reps), (20.0, 50.0, 3));
        assert_eq!(Settings::new(false, Some(0), None, None).reps, 1);
        let mut o = CommOptions {
            exe: "atoll".into(),
            settings: q,
            skip_stream: true,
            mechanisms: Mechanism::ALL.to_vec(),
            command: String::new(),
        };
        assert_eq!(o.steps(), 1 + 7);
        o.skip_stream = false;
        assert_eq!(o.steps(), 1 + 7 + 2 * o.settings.search.max_probes() + 5);
    }
}
