//! `atoll bench slo --scenario stream`: seed 001's buffer trigger (section
//! 3.2) as issue 16's evidence, with the baselines.
//!
//! The experiment is `atoll bench netisland`'s stream scenario, run through
//! its one path ([`netisland::run_setups`]): a `--fps` stream of UDP frames
//! from unit `stream` to a consumer (unit `consumer`, in the rig's network
//! namespace) doing `--work` units of ~10 ms of CPU per frame, beside a UDP
//! bulk transfer (unit `bulk`) on the same shaped veth link and a spinning
//! hog (unit `hog`, two threads per island CPU) on the consumer's CPUs.
//! What this module adds is the mapping of `atoll bench slo`'s
//! configurations onto the rig's ([`setup`]), the rows with their ratios
//! to the trigger off, and the table in `bench slo`'s style.
//!
//! | config | the rig runs | what |
//! |---|---|---|
//! | `linux` | `none` | no daemon: everything pinned to the island CPUs, the link one FIFO |
//! | `static` | `net` | the daemon's static settings: the network island's classes (`stream` share 800 prio 0, `bulk` 100 prio 7) and the CPU island's weights (consumer and hog equal); **the trigger off** |
//! | `isolate` | `net` in isolation mode `isolate` | the same entitlements as home CPUs, idle ones lent |
//! | `slo` | `both` | `static` plus the receive-queue trigger: **the trigger on** |
//!
//! The fair "trigger off" is `static`, not `linux`: without the network
//! island the bulk's queue holds every frame past its deadline (the
//! netisland runs: 0 frames/s under `none` and `cpu` whatever the CPU
//! does), so against `linux` the trigger's row would measure the network
//! island. `slo`'s daemon config is `static`'s plus the trigger's key and
//! the overlay the trigger is addressed to (a trigger goes only to a unit
//! of a registered overlay), whose property (`throughput_floor = 1`) nothing
//! reports to, so it does nothing else (a test checks the difference line
//! by line). Ratios (`x`) are to `static`.
//!
//! The trigger is the network island's `socket_backlog_bytes` by default
//! (the network island sees the backlog and triggers the CPU island, as
//! seed 001's IXP did) or, with `--trigger recv-queue`, the overlay's
//! `react_recv_queue` (the CPU side watching the same backlog); both at
//! `--backlog-bytes`.

mod table;

use std::path::Path;

use serde::{Deserialize, Serialize};
pub use table::render_table;

use super::{Config, Picked};
use crate::error::BenchError;
use crate::machine::Machine;
use crate::netisland::{
    self, Config as RigConfig, NetIslandOptions, Row, Sample, Scenario, Setup, TriggerKey,
};
use crate::progress::Progress;

/// The configuration with the trigger off, the base of the ratios.
pub const TRIGGER_OFF: Config = Config::Static;

/// The most work per frame `frame-recv` is given (units of ~10 ms).
pub const MAX_WORK: u64 = 100;

/// What the rig runs for `config` (see the module docs).
pub fn setup(config: Config) -> Setup {
    match config {
        Config::Linux => Setup::from(RigConfig::None),
        Config::Static => Setup::from(RigConfig::Net),
        Config::Isolate => Setup {
            config: RigConfig::Net,
            isolate: true,
        },
        Config::Slo => Setup::from(RigConfig::Both),
    }
}

/// How a run is set up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamSettings {
    /// The configurations, in order (every rep runs them all).
    pub configs: Vec<Config>,
    /// The rig's settings (seconds, reps, link, stream, work per frame,
    /// the trigger's key and threshold); its `configs` are what the rig
    /// ran for [`configs`](Self::configs) ([`setup`]).
    pub rig: netisland::Settings,
}

impl StreamSettings {
    /// The defaults (4 configurations × 2 reps × 20 s, about four minutes),
    /// shortened with `quick`. The work per frame is 3 (~30 ms, 90 % of a
    /// CPU at 30 frames/s): on a quiet machine the consumer is then short
    /// of CPU beside the hog, which is when a trigger can matter
    /// (docs/netisland.md: at 2 it kept up with or without).
    pub fn new(quick: bool) -> Self {
        let mut rig = netisland::Settings::new(quick);
        rig.work = 3;
        let mut s = Self {
            configs: Config::ALL.to_vec(),
            rig,
        };
        s.sync_rig_configs();
        s
    }

    /// Sets the rig's `configs` to what [`configs`](Self::configs) run.
    fn sync_rig_configs(&mut self) {
        self.rig.configs = self.configs.iter().map(|c| setup(*c).config).collect();
        self.rig.scenario = Scenario::Stream;
    }

    /// Takes what the user picked of `bench slo`'s shared flags:
    /// `--configs`, `--seconds` and `--work` (units of ~10 ms per frame,
    /// at most [`MAX_WORK`]); `--warmup` and `--slo-us` have no meaning
    /// here (the first and last second of every run are left out instead
    /// of a warm-up; the property is frames on time) and are refused.
    pub fn pick(&mut self, picked: Picked) -> Result<(), String> {
        if picked.warmup_s.is_some() || picked.slo_us.is_some() {
            return Err(
                "--warmup and --slo-us are not for --scenario stream (it leaves out \
                        each run's first and last second, and counts frames on time)"
                    .into(),
            );
        }
        if let Some(w) = picked.work {
            if w > MAX_WORK {
                return Err(format!(
                    "--work {w}: with --scenario stream it is units of ~10 ms of CPU per \
                     frame, at most {MAX_WORK}"
                ));
            }
            self.rig.work = w;
        }
        if !picked.configs.is_empty() {
            self.configs = picked.configs;
        }
        if let Some(s) = picked.seconds {
            self.rig.seconds = s;
        }
        self.sync_rig_configs();
        Ok(())
    }

    /// Progress steps: every configuration in every rep, the checks and
    /// the rig.
    pub fn steps(&self) -> usize {
        self.configs.len() * self.rig.reps + 2
    }
}

/// One configuration over its reps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamRow {
    /// The configuration.
    pub config: Config,
    /// What the rig ran for it.
    pub setup: Setup,
    /// The figures, as `atoll bench netisland` makes them (frames/s on
    /// time, least second, loss, bulk, triggers, the hog's rate, each
    /// rep's sample); their ratios are to [`TRIGGER_OFF`]'s row.
    pub figures: Row,
}

/// The result of `atoll bench slo --scenario stream`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// One row per configuration that ran.
    pub rows: Vec<StreamRow>,
    /// Configurations whose daemon would not start, with why.
    pub unavailable: Vec<(String, String)>,
    /// The settings (the island's CPUs filled in).
    pub settings: StreamSettings,
    /// The machine.
    pub machine: Machine,
    /// The command line.
    pub command: String,
    /// `/proc/loadavg` at the end.
    pub loadavg: String,
}

/// The rows of `configs` from their samples (one list per configuration,
/// in the same order; a configuration with none is left out), with their
/// ratios to [`TRIGGER_OFF`] when it ran.
pub fn rows(
    configs: &[Config],
    samples: Vec<Vec<Sample>>,
    s: &netisland::Settings,
) -> Vec<StreamRow> {
    let mut rows: Vec<StreamRow> = configs
        .iter()
        .zip(samples)
        .filter(|(_, v)| !v.is_empty())
        .map(|(c, v)| {
            let setup = setup(*c);
            StreamRow {
                config: *c,
                setup,
                figures: netisland::row(setup.config, v, s),
            }
        })
        .collect();
    if let Some(base) = rows
        .iter()
        .find(|r| r.config == TRIGGER_OFF)
        .map(|r| r.figures.clone())
    {
        netisland::ratios_to(rows.iter_mut().map(|r| &mut r.figures), &base);
    }
    rows
}

/// The trigger's effect as seed 001's Table 3 gives it: the change of the
/// frames/s on time and of the other work's rate (the hog's chunks/s),
/// `slo` against [`TRIGGER_OFF`], as fractions (`0.0977` for +9.77 %);
/// each `None` when not measurable (a configuration missing, or the trigger
/// off delivering no frame).
pub fn trigger_effect(rows: &[StreamRow]) -> (Option<f64>, Option<f64>) {
    let on = rows.iter().find(|r| r.config == Config::Slo);
    let off = rows.iter().any(|r| r.config == TRIGGER_OFF);
    match on {
        Some(r) if off => (
            r.figures.fps_ratio.map(|x| x - 1.0),
            r.figures.hog_ratio.map(|x| x - 1.0),
        ),
        _ => (None, None),
    }
}

/// Runs every configuration `rig.reps` times on one rig; see the module
/// docs.
pub fn run(
    exe: &Path,
    settings: &StreamSettings,
    command: String,
    progress: &Progress,
) -> Result<StreamReport, BenchError> {
    let mut settings = settings.clone();
    settings.sync_rig_configs();
    let setups: Vec<(String, Setup)> = settings
        .configs
        .iter()
        .map(|c| (c.as_str().to_string(), setup(*c)))
        .collect();
    let opts = NetIslandOptions {
        exe: exe.to_path_buf(),
        settings: settings.rig.clone(),
        command: command.clone(),
    };
    let m = netisland::run_setups(&opts, &setups, progress)?;
    let rows = rows(&settings.configs, m.samples, &m.settings);
    settings.rig = m.settings;
    Ok(StreamReport {
        rows,
        unavailable: m.unavailable,
        settings,
        machine: m.machine,
        command,
        loadavg: m.loadavg,
    })
}

/// The trigger's key and threshold as the daemon's config has them.
pub fn trigger_line(s: &netisland::Settings) -> String {
    let table = match s.trigger {
        TriggerKey::SocketBacklog => "[network.link]",
        TriggerKey::RecvQueue => "[overlay.stream]",
    };
    format!("{} = {} in {table}", s.trigger.key(), s.backlog_bytes)
}

#[cfg(test)]
mod tests;
