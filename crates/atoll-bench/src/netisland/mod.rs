//! `atoll bench netisland`: seed 001's first experiment (a stream consumer
//! beside a bulk transfer on one shaped link) on a veth pair and a network
//! namespace of the bench's own, under four configurations side by side.
//!
//! - **Rig** ([`rig`]): namespace `atlb<pid>n`, veth `atlb<pid>h` (host,
//!   `10.213.<k>.1/30`) and its peer in the namespace (`.2/30`). The link is
//!   the host end shaped to `--rate-mbit`: by the network island's HTB tree
//!   under `net` and `both`, by a one-class HTB of the bench's own
//!   otherwise (the same rate, one FIFO for everyone). Both are removed on
//!   drop, and so on an error or Ctrl-C.
//! - **Stream**: `frame-send` in unit `stream` (host side) sends `--fps`
//!   frames of `--packets` UDP datagrams; `frame-recv` in unit `consumer`
//!   (in the namespace, through `ip netns exec`) reassembles them and does
//!   `--work` units of CPU work per frame; a frame counts when complete and
//!   done within `--deadline-ms`. **Bulk**: `udp-blast` in unit `bulk` to a
//!   `udp-sink` in the namespace. **Hog**: `spin` in unit `hog`, two
//!   threads per island CPU, on the consumer's CPU island.
//! - **Configurations** ([`Config`]): `none` (no daemon, all pinned to the
//!   island CPUs), `cpu` (the daemon's CPU island, equal entitlements),
//!   `net` (the same plus the network island: `stream` and `consumer`
//!   with a large share, `bulk` a small one), `both` (`net` plus the
//!   socket-backlog trigger: overlay `stream` over `stream` and `consumer`,
//!   `socket_backlog_bytes`, so the consumer's CPU island boosts it when
//!   its socket holds unread data).
//!
//! Reported per configuration (mean over `--reps`): frames/s on time
//! (mean, least second), frame loss (frames sent not delivered on time),
//! bulk throughput at the sink, triggers sent (the daemon's decisions),
//! the hog's throughput (seed 001's Table 3: what the trigger costs the
//! other work on the CPU island), each also as a ratio to `none`.
//!
//! `--scenario web` ([`Scenario::Web`], [`web`]) is seed 001's second
//! experiment on the same rig: a front end tuning its back end's bandwidth
//! and CPU over the API when the heavy request class needs it. Two more
//! configurations are its own, to tell the two tunes apart: `both-bw`
//! (`both` with the bandwidth tune alone) and `both-cpu` (the CPU-time
//! tune alone); the stream scenario refuses them.
//!
//! The stream scenario is also issue 16's evidence for seed 001's buffer
//! trigger, `atoll bench slo --scenario stream` ([`crate::slo::stream`]),
//! which runs it through the same path ([`run_setups`]) with `bench slo`'s
//! configurations mapped onto these ([`Setup`]: `net` also in isolation
//! mode `isolate`). `both`'s trigger is the network island's
//! `socket_backlog_bytes`, or the overlay's `react_recv_queue`
//! ([`TriggerKey`]).

pub mod config;
pub mod rig;
mod run;
mod table;
pub mod web;

use std::path::PathBuf;
use std::str::FromStr;

use atoll_core::coord::Resource;
pub use run::{run, run_setups, Measured};
use serde::{Deserialize, Serialize};
pub use table::render_table;
pub use web::WebSettings;

use crate::machine::Machine;
use crate::stats::{ratio, round};

/// One way of running the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Config {
    /// No daemon: plain Linux, the link shaped by one FIFO class.
    None,
    /// The daemon's CPU island alone.
    Cpu,
    /// The network island (classes per unit), no trigger.
    Net,
    /// Network and CPU islands coordinated: the backlog trigger on (the
    /// stream scenario); the front end's bandwidth and CPU tunes (web).
    Both,
    /// Web only: `both` with the bandwidth tune alone.
    #[serde(rename = "both-bw")]
    BothBw,
    /// Web only: `both` with the CPU-time tune alone.
    #[serde(rename = "both-cpu")]
    BothCpu,
}

impl Config {
    /// Every configuration, in the order of the names.
    pub const ALL: [Self; 6] = [
        Self::None,
        Self::Cpu,
        Self::Net,
        Self::Both,
        Self::BothBw,
        Self::BothCpu,
    ];

    /// The configurations run when none are named.
    pub const DEFAULT: [Self; 4] = [Self::None, Self::Cpu, Self::Net, Self::Both];

    /// The name on the command line and in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Cpu => "cpu",
            Self::Net => "net",
            Self::Both => "both",
            Self::BothBw => "both-bw",
            Self::BothCpu => "both-cpu",
        }
    }

    /// Whether the network island shapes the link.
    pub fn network_island(self) -> bool {
        matches!(self, Self::Net | Self::Both | Self::BothBw | Self::BothCpu)
    }

    /// Whether the islands are coordinated (the overlay is configured).
    pub fn coordinated(self) -> bool {
        !self.tunes().is_empty()
    }

    /// What the web front end tunes in this configuration (nothing
    /// outside the coordinated ones).
    pub fn tunes(self) -> &'static [Resource] {
        match self {
            Self::None | Self::Cpu | Self::Net => &[],
            Self::Both => &[Resource::Bandwidth, Resource::CpuTime],
            Self::BothBw => &[Resource::Bandwidth],
            Self::BothCpu => &[Resource::CpuTime],
        }
    }

    /// Whether `scenario` has this configuration (the single-tune ones
    /// are the web tier's: the stream scenario sends no tune).
    pub fn runs_in(self, scenario: Scenario) -> bool {
        scenario == Scenario::Web || !matches!(self, Self::BothBw | Self::BothCpu)
    }
}

impl FromStr for Config {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s.trim())
            .ok_or_else(|| {
                format!(
                    "unknown configuration {s:?} (one of none, cpu, net, both, both-bw, both-cpu)"
                )
            })
    }
}

/// Which of seed 001's experiments a run builds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// The stream consumer beside a bulk transfer (the first).
    #[default]
    Stream,
    /// The web tier whose front end tunes its back end (the second,
    /// [`web`]).
    Web,
}

impl Scenario {
    /// The name on the command line and in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stream => "stream",
            Self::Web => "web",
        }
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [Self::Stream, Self::Web]
            .into_iter()
            .find(|c| c.as_str() == s.trim())
            .ok_or_else(|| format!("unknown scenario {s:?} (one of stream, web)"))
    }
}

/// Which of the daemon's receive-queue triggers `both` configures (both
/// read the same socket backlogs, `ProcRecvQueues`, and send the same
/// `trigger(cpu time)` for the consumer; they differ in who sends it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TriggerKey {
    /// The network island's `socket_backlog_bytes`: the network island
    /// notices the backlog and triggers the CPU island (seed 001's IXP).
    #[default]
    SocketBacklog,
    /// The overlay's `react_recv_queue`: the overlay's reactive policy on
    /// the CPU side watches the backlog.
    RecvQueue,
}

impl TriggerKey {
    /// The name on the command line and in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SocketBacklog => "socket-backlog",
            Self::RecvQueue => "recv-queue",
        }
    }

    /// The config key it sets.
    pub fn key(self) -> &'static str {
        match self {
            Self::SocketBacklog => "socket_backlog_bytes",
            Self::RecvQueue => "react_recv_queue",
        }
    }
}

impl FromStr for TriggerKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [Self::SocketBacklog, Self::RecvQueue]
            .into_iter()
            .find(|t| t.as_str() == s.trim())
            .ok_or_else(|| format!("unknown trigger {s:?} (one of socket-backlog, recv-queue)"))
    }
}

/// One configuration as the rig runs it: a [`Config`], and whether the
/// daemon's CPU island is in isolation mode `isolate` (the stream scenario
/// of `atoll bench slo` runs `net` so; `atoll bench netisland` never does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setup {
    /// The configuration.
    pub config: Config,
    /// `[isolation] mode = "isolate"` (else the default, `smp`).
    pub isolate: bool,
}

impl From<Config> for Setup {
    fn from(config: Config) -> Self {
        Self {
            config,
            isolate: false,
        }
    }
}

/// How a run is set up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The configurations, in order (each rep runs them all).
    pub configs: Vec<Config>,
    /// Measured seconds per configuration and rep.
    pub seconds: f64,
    /// Repetitions.
    pub reps: usize,
    /// The link rate, Mbit/s.
    pub rate_mbit: u32,
    /// Frames per second.
    pub fps: u64,
    /// Packets per frame.
    pub packets: u16,
    /// Bytes per packet.
    pub bytes: usize,
    /// CPU work per frame (units of ~10 ms).
    pub work: u64,
    /// On-time deadline, ms.
    pub deadline_ms: u64,
    /// The `both` trigger's socket backlog, bytes.
    pub backlog_bytes: u64,
    /// Which key sets the `both` trigger (reports saved before it existed
    /// are `socket-backlog`).
    #[serde(default)]
    pub trigger: TriggerKey,
    /// The island's CPUs (filled in by the run).
    pub island_cpus: String,
    /// Which experiment (reports saved before it existed are `stream`).
    #[serde(default)]
    pub scenario: Scenario,
    /// The web scenario's settings.
    #[serde(default)]
    pub web: WebSettings,
}

impl Settings {
    /// The defaults (a full run of 4 configurations × 2 reps × 20 s is
    /// about three minutes), shortened with `quick`.
    pub fn new(quick: bool) -> Self {
        Self {
            configs: Config::DEFAULT.to_vec(),
            seconds: if quick { 4.0 } else { 20.0 },
            reps: if quick { 1 } else { 2 },
            rate_mbit: 20,
            fps: 30,
            packets: 20,
            bytes: 1200,
            work: 2,
            deadline_ms: 100,
            backlog_bytes: 65_536,
            trigger: TriggerKey::SocketBacklog,
            island_cpus: String::new(),
            scenario: Scenario::Stream,
            web: WebSettings::default(),
        }
    }

    /// Why the configurations cannot run in the scenario, if so.
    pub fn check_configs(&self) -> Result<(), String> {
        match self.configs.iter().find(|c| !c.runs_in(self.scenario)) {
            Some(c) => Err(format!(
                "configuration {} is the web tier's (--scenario web): the {} scenario sends no \
                 tune",
                c.as_str(),
                self.scenario.as_str()
            )),
            None => Ok(()),
        }
    }

    /// The stream's bitrate, Mbit/s (UDP payload).
    pub fn stream_mbit(&self) -> f64 {
        (self.fps * u64::from(self.packets) * self.bytes as u64 * 8) as f64 / 1e6
    }
}

/// What `atoll bench netisland` is asked to do.
#[derive(Clone, Debug)]
pub struct NetIslandOptions {
    /// The atoll binary (daemon and workers).
    pub exe: PathBuf,
    /// The run's settings.
    pub settings: Settings,
    /// The command line, for the report.
    pub command: String,
}

/// One configuration in one rep: what the workers reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Frames sent.
    pub frames_sent: u64,
    /// Frames delivered on time in each whole second of the stream.
    pub on_time_per_s: Vec<u64>,
    /// Frames completed late.
    pub late: u64,
    /// Bytes received by the bulk sink.
    pub bulk_bytes: u64,
    /// Triggers the network island sent (decisions), `None` without one.
    pub triggers: Option<u64>,
    /// The hog's work chunks per second (seed 001's other VM, Table 3).
    #[serde(default)]
    pub hog_chunks_per_s: f64,
    /// `/proc/loadavg` when the workers had reported (the machine's other
    /// load besides the bench's own; empty in reports saved before).
    #[serde(default)]
    pub loadavg: String,
}

/// The figures of one configuration, over its reps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The configuration.
    pub config: Option<Config>,
    /// Mean frames/s on time.
    pub fps_mean: f64,
    /// The least frames on time in any second.
    pub fps_min: u64,
    /// Share of the frames sent not delivered on time.
    pub loss: f64,
    /// Bulk throughput at the sink, Mbit/s.
    pub bulk_mbit: f64,
    /// Triggers per rep (mean), `None` without a network island.
    pub triggers: Option<f64>,
    /// The hog's chunks per second (mean over the reps).
    #[serde(default)]
    pub hog_chunks_per_s: f64,
    /// The hog's throughput as a ratio to `none`'s.
    #[serde(default)]
    pub hog_ratio: Option<f64>,
    /// The ratios to `none` (`None` when it did not run or is 0).
    pub fps_ratio: Option<f64>,
    /// See `fps_ratio`.
    pub loss_ratio: Option<f64>,
    /// See `fps_ratio`.
    pub bulk_ratio: Option<f64>,
    /// Each rep's sample.
    pub samples: Vec<Sample>,
}

/// The report of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NetIslandReport {
    /// One row per configuration (the stream scenario).
    pub rows: Vec<Row>,
    /// One row per configuration (the web scenario).
    #[serde(default)]
    pub web_rows: Vec<web::WebRow>,
    /// Configurations that could not run, with why.
    pub unavailable: Vec<(String, String)>,
    /// The settings.
    pub settings: Settings,
    /// The machine.
    pub machine: Machine,
    /// The command line.
    pub command: String,
    /// `/proc/loadavg` at the end.
    pub loadavg: String,
}

/// A configuration's row from its samples (ratios filled by
/// [`with_ratios`]). The first second and the last are left out of the
/// per-second figures (the stream starts and ends inside them).
pub fn row(config: Config, samples: Vec<Sample>, s: &Settings) -> Row {
    let inner = |v: &[u64]| -> Vec<u64> {
        if v.len() > 2 {
            v[1..v.len() - 1].to_vec()
        } else {
            v.to_vec()
        }
    };
    let secs: Vec<u64> = samples
        .iter()
        .flat_map(|x| inner(&x.on_time_per_s))
        .collect();
    let fps_mean = if secs.is_empty() {
        0.0
    } else {
        secs.iter().sum::<u64>() as f64 / secs.len() as f64
    };
    let sent: u64 = samples.iter().map(|x| x.frames_sent).sum();
    let on_time: u64 = samples
        .iter()
        .map(|x| x.on_time_per_s.iter().sum::<u64>())
        .sum();
    let loss = if sent == 0 {
        0.0
    } else {
        1.0 - (on_time.min(sent) as f64 / sent as f64)
    };
    let n = samples.len().max(1) as f64;
    let bulk_mbit =
        samples.iter().map(|x| x.bulk_bytes).sum::<u64>() as f64 * 8.0 / 1e6 / (s.seconds * n);
    let triggers = samples
        .iter()
        .map(|x| x.triggers)
        .collect::<Option<Vec<u64>>>()
        .filter(|_| config.network_island())
        .map(|t| t.iter().sum::<u64>() as f64 / n);
    Row {
        config: Some(config),
        fps_mean: round(fps_mean, 2),
        fps_min: secs.iter().copied().min().unwrap_or(0),
        loss: round(loss, 4),
        bulk_mbit: round(bulk_mbit, 2),
        triggers,
        hog_chunks_per_s: round(
            samples.iter().map(|x| x.hog_chunks_per_s).sum::<f64>() / n,
            1,
        ),
        hog_ratio: None,
        fps_ratio: None,
        loss_ratio: None,
        bulk_ratio: None,
        samples,
    }
}

/// Fills every row's ratios to the `none` row.
pub fn with_ratios(rows: &mut [Row]) {
    if let Some(base) = rows
        .iter()
        .find(|r| r.config == Some(Config::None))
        .cloned()
    {
        ratios_to(rows.iter_mut(), &base);
    }
}

/// Fills the ratios of `rows` to `base` (`None` where `base`'s figure is 0).
pub fn ratios_to<'a>(rows: impl IntoIterator<Item = &'a mut Row>, base: &Row) {
    let r = |a: f64, b: f64| ratio(Some(a), Some(b)).map(|v| round(v, 3));
    for row in rows {
        row.fps_ratio = r(row.fps_mean, base.fps_mean);
        row.loss_ratio = r(row.loss, base.loss);
        row.bulk_ratio = r(row.bulk_mbit, base.bulk_mbit);
        row.hog_ratio = r(row.hog_chunks_per_s, base.hog_chunks_per_s);
    }
}

/// Reads `frame-recv`'s report: frames on time in each second `0..secs`,
/// and the late ones.
pub fn parse_recv(v: &serde_json::Value, secs: u64) -> Result<(Vec<u64>, u64), String> {
    if v["kind"] != "frame-recv" {
        return Err(format!("not a frame-recv report: {v}"));
    }
    let per = v["per_second"]
        .as_object()
        .ok_or_else(|| format!("frame-recv report without per_second: {v}"))?;
    let mut out = vec![0; usize::try_from(secs).unwrap_or(0)];
    for (k, e) in per {
        let s: usize = k.parse().map_err(|_| format!("second {k:?}"))?;
        if let Some(slot) = out.get_mut(s) {
            *slot = e[0].as_u64().unwrap_or(0);
        }
    }
    Ok((out, v["late"].as_u64().unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(per: &[u64], sent: u64, bulk: u64, trig: Option<u64>) -> Sample {
        Sample {
            frames_sent: sent,
            on_time_per_s: per.to_vec(),
            late: 0,
            bulk_bytes: bulk,
            triggers: trig,
            hog_chunks_per_s: 100.0,
            loadavg: String::new(),
        }
    }

    #[test]
    fn configs_parse_by_name_only() {
        for c in Config::ALL {
            assert_eq!(c.as_str().parse::<Config>(), Ok(c));
            // The report's JSON names them as the command line does.
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::json!(c.as_str())
            );
        }
        assert_eq!("both-bw".parse::<Config>(), Ok(Config::BothBw));
        assert_eq!(" both-cpu".parse::<Config>(), Ok(Config::BothCpu));
        let e = "both_bw".parse::<Config>().unwrap_err();
        assert!(e.contains("both-bw, both-cpu"), "{e}");
        assert!("slo".parse::<Config>().unwrap_err().contains("none, cpu"));
        assert!(Config::Both.network_island() && !Config::Cpu.network_island());
        assert!(Config::BothBw.network_island() && Config::BothCpu.network_island());
        assert_eq!(Settings::new(false).configs, Config::DEFAULT.to_vec());
    }

    #[test]
    fn each_configuration_tunes_what_its_name_says() {
        let t = |c: Config| c.tunes().to_vec();
        assert_eq!(t(Config::Both), [Resource::Bandwidth, Resource::CpuTime]);
        assert_eq!(t(Config::BothBw), [Resource::Bandwidth]);
        assert_eq!(t(Config::BothCpu), [Resource::CpuTime]);
        for c in [Config::None, Config::Cpu, Config::Net] {
            assert!(t(c).is_empty() && !c.coordinated(), "{c:?}");
        }
        assert!(Config::BothBw.coordinated() && Config::BothCpu.coordinated());
    }

    #[test]
    fn the_single_tune_configurations_run_in_the_web_scenario_only() {
        let mut s = Settings::new(true);
        s.configs = Config::ALL.to_vec();
        let e = s.check_configs().unwrap_err();
        assert!(e.contains("both-bw") && e.contains("stream"), "{e}");
        s.configs = vec![Config::Net, Config::BothCpu];
        assert!(s.check_configs().unwrap_err().contains("both-cpu"));
        s.configs = Config::DEFAULT.to_vec();
        assert_eq!(s.check_configs(), Ok(()));
        s.scenario = Scenario::Web;
        s.configs = Config::ALL.to_vec();
        assert_eq!(s.check_configs(), Ok(()));
    }

    #[test]
    fn rows_leave_out_the_edge_seconds_and_count_loss_over_all() {
        let mut s = Settings::new(true);
        s.seconds = 4.0;
        // Seconds 1 and 2 count for the per-second figures.
        let r = row(
            Config::Net,
            vec![sample(&[10, 30, 24, 5], 120, 4_000_000, Some(3))],
            &s,
        );
        assert_eq!(r.fps_mean, 27.0);
        assert_eq!(r.fps_min, 24);
        assert_eq!(r.loss, round(1.0 - 69.0 / 120.0, 4));
        assert_eq!(r.bulk_mbit, 8.0);
        assert_eq!(r.triggers, Some(3.0));
        // No network island: no trigger figure even if one was read.
        let r = row(Config::Cpu, vec![sample(&[1, 2, 3], 9, 0, Some(0))], &s);
        assert_eq!(r.triggers, None);
    }

    #[test]
    fn ratios_are_to_none_and_absent_without_it() {
        let s = Settings::new(true);
        let mut rows = vec![
            row(
                Config::None,
                vec![sample(&[0, 20, 20, 0], 120, 8_000_000, None)],
                &s,
            ),
            row(
                Config::Both,
                vec![sample(&[0, 22, 22, 0], 120, 4_000_000, Some(1))],
                &s,
            ),
        ];
        with_ratios(&mut rows);
        assert_eq!(rows[1].fps_ratio, Some(1.1));
        assert_eq!(rows[1].bulk_ratio, Some(0.5));
        assert_eq!(rows[0].fps_ratio, Some(1.0));
        let mut alone = vec![rows[1].clone()];
        alone[0].fps_ratio = None;
        with_ratios(&mut alone);
        assert_eq!(alone[0].fps_ratio, None);
    }

    #[test]
    fn receiver_reports_are_read_by_second() {
        let v = serde_json::json!({
            "kind": "frame-recv", "late": 2,
            "per_second": {"0": [5, 1], "2": [30, 0], "9": [1, 0]}
        });
        assert_eq!(parse_recv(&v, 3), Ok((vec![5, 0, 30], 2)));
        assert!(parse_recv(&serde_json::json!({"kind": "spin"}), 3).is_err());
    }

    #[test]
    fn the_default_stream_fits_the_link_and_the_bulk_does_not() {
        let s = Settings::new(false);
        assert!(s.stream_mbit() < f64::from(s.rate_mbit) / 2.0);
        assert!(s.stream_mbit() > 1.0);
    }
}
