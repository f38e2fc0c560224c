//! `atoll bench netisland --scenario web`: seed 001's second experiment, a
//! web tier whose front end tunes the back end's bandwidth and CPU when a
//! request class needs it (the paper: response times 30-80 % lower).
//!
//! - **Back end**: `web-back` in unit `back` on the island CPUs, on the
//!   host side of the veth, so that its replies leave through the shaped
//!   host end (the network island shapes an interface's egress, and
//!   `net_prio` classifies in the initial namespace only). **Front end**:
//!   `web-front` in unit `front`, in the namespace: `--rate` requests/s,
//!   one in four heavy (`--heavy-bytes` of reply, `--heavy-work` chunks of
//!   CPU) and the others light (1 KiB, one chunk); response time from the
//!   due time to the reply's last byte.
//! - **Competition**: `udp-blast` in unit `bulk` on the same link
//!   direction as the replies, and the `spin` hog in unit `hog` beside the
//!   back end on its island CPU (as in the stream scenario).
//! - **Configurations**: `none`, `cpu` as in the stream scenario; `net`
//!   the network island with static, equal shares (`back` 100, `bulk` 100,
//!   same priority); `both` the same plus overlay `web` over `front` and
//!   `back`, and the front end tunes: when the heavy class's p90 in a
//!   500 ms window is over `--bound-ms` it sends `tune(bandwidth, up, web,
//!   back)` and `tune(cpu_time, up, web, back)` to the daemon, `down` when
//!   under half of it (see `worker::webfront`). `both-bw` and `both-cpu`
//!   are `both` with one of the two tunes ([`Config::tunes`]), the same
//!   daemon config.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::config::{cpu_part, BULK, HOG, LINK};
use super::{Config, NetIslandReport, Settings};
use crate::stats::{ratio, round};
use crate::table::{aligned, machine_line, num};

/// The front end's unit.
pub const FRONT: &str = "front";
/// The back end's unit.
pub const BACK: &str = "back";
/// The overlay of `both`.
pub const OVERLAY: &str = "web";

/// The web scenario's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSettings {
    /// Requests per second, both classes.
    pub rate: f64,
    /// The heavy class's share of the requests.
    pub heavy_share: f64,
    /// Reply bytes of a light request.
    pub light_bytes: u32,
    /// Reply bytes of a heavy request.
    pub heavy_bytes: u32,
    /// CPU chunks (~0.2 ms) of a light request.
    pub light_work: u32,
    /// CPU chunks of a heavy request.
    pub heavy_work: u32,
    /// The front end's connections.
    pub conns: usize,
    /// The bound on the heavy class's p90 in a window, ms (`both` tunes
    /// over it).
    pub bound_ms: f64,
    /// The tuning window, ms.
    pub window_ms: u64,
}

impl Default for WebSettings {
    fn default() -> Self {
        Self {
            rate: 40.0,
            heavy_share: 0.25,
            light_bytes: 1024,
            heavy_bytes: 48 << 10,
            light_work: 1,
            heavy_work: 25,
            conns: 16,
            bound_ms: 50.0,
            window_ms: 500,
        }
    }
}

impl WebSettings {
    /// Why these settings cannot run, if so.
    pub fn check(&self, rate_mbit: u32) -> Result<(), String> {
        if !(self.rate > 0.0 && self.rate.is_finite()) {
            return Err(format!("--rate must be positive, not {}", self.rate));
        }
        if !(0.0..=1.0).contains(&self.heavy_share) {
            return Err(format!("heavy share {} is not in 0..=1", self.heavy_share));
        }
        if !(self.bound_ms > 0.0 && self.bound_ms.is_finite()) {
            return Err(format!(
                "--bound-ms must be positive, not {}",
                self.bound_ms
            ));
        }
        if self.conns == 0 {
            return Err("the front end needs a connection".into());
        }
        if self.reply_mbit() >= f64::from(rate_mbit) {
            return Err(format!(
                "the replies need {:.2} Mbit/s, more than the {rate_mbit} Mbit/s link",
                self.reply_mbit()
            ));
        }
        Ok(())
    }

    /// The replies' bitrate at the set rate, Mbit/s.
    pub fn reply_mbit(&self) -> f64 {
        let per = self.heavy_share * f64::from(self.heavy_bytes)
            + (1.0 - self.heavy_share) * f64::from(self.light_bytes);
        self.rate * per * 8.0 / 1e6
    }

    /// `web-front`'s arguments but the address, seconds and tuning.
    pub fn front_args(&self) -> Vec<String> {
        [
            ("--rate", self.rate.to_string()),
            ("--heavy-share", self.heavy_share.to_string()),
            ("--light-bytes", self.light_bytes.to_string()),
            ("--heavy-bytes", self.heavy_bytes.to_string()),
            ("--light-work", self.light_work.to_string()),
            ("--heavy-work", self.heavy_work.to_string()),
            ("--conns", self.conns.to_string()),
            ("--bound-ms", self.bound_ms.to_string()),
            ("--window-ms", self.window_ms.to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect()
    }
}

/// The daemon's config of `config` in the web scenario (`None` for `none`).
pub fn daemon_config(
    config: Config,
    host: &atoll_core::CpuSet,
    island: &atoll_core::CpuSet,
    iface: &str,
    s: &Settings,
) -> Option<String> {
    if config == Config::None {
        return None;
    }
    let mut t = cpu_part(
        &format!(
            "`atoll bench netisland --scenario web` ({})",
            config.as_str()
        ),
        host,
        island,
        &[(FRONT, 0.1), (BULK, 0.1), (BACK, 0.4), (HOG, 0.4)],
    );
    if config.network_island() {
        let _ = writeln!(
            t,
            "[network.{LINK}]\ninterface = \"{iface}\"\nrate_mbit = {}\nleaf = \"pfifo\"\n\
             default_share = 10\n",
            s.rate_mbit
        );
        // Equal, static shares: what moves bandwidth to the back end is
        // the front end's tune in `both`.
        for unit in [BACK, BULK] {
            let _ = writeln!(t, "[network.{LINK}.units.{unit}]\nshare = 100\nprio = 3\n");
        }
    }
    if config.coordinated() {
        // The front end tunes for this overlay; nothing reports to its
        // floor, so the overlay's own policy never acts.
        let _ = writeln!(
            t,
            "[overlay.{OVERLAY}]\nunits = [\"{FRONT}\", \"{BACK}\"]\nthroughput_floor = 1"
        );
    }
    Some(t)
}

/// One class's response times in one rep, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassFigures {
    /// Requests completed.
    pub count: u64,
    /// Mean.
    pub mean_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Standard deviation.
    pub sd_ms: f64,
}

/// One configuration in one rep of the web scenario.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WebSample {
    /// The light class.
    pub light: ClassFigures,
    /// The heavy class.
    pub heavy: ClassFigures,
    /// Requests sent.
    pub sent: u64,
    /// Requests that failed (timeout, reset).
    pub errors: u64,
    /// Completed requests per second.
    pub throughput_per_s: f64,
    /// Tunes sent to the daemon, and acknowledged.
    pub tunes_sent: u64,
    /// See `tunes_sent`.
    pub tunes_acked: u64,
    /// Bytes received by the bulk sink.
    pub bulk_bytes: u64,
    /// The hog's work chunks per second.
    pub hog_chunks_per_s: f64,
}

/// Reads `web-front`'s report (the bulk and the hog are filled in after).
pub fn parse_front(v: &serde_json::Value) -> Result<WebSample, String> {
    if v["kind"] != "web-front" {
        return Err(format!("not a web-front report: {v}"));
    }
    let class = |c: &serde_json::Value| ClassFigures {
        count: c["count"].as_u64().unwrap_or(0),
        mean_ms: c["mean_ms"].as_f64().unwrap_or(0.0),
        p99_ms: c["p99_ms"].as_f64().unwrap_or(0.0),
        sd_ms: c["sd_ms"].as_f64().unwrap_or(0.0),
    };
    Ok(WebSample {
        light: class(&v["light"]),
        heavy: class(&v["heavy"]),
        sent: v["sent"].as_u64().unwrap_or(0),
        errors: v["errors"].as_u64().unwrap_or(0),
        throughput_per_s: v["throughput_per_s"].as_f64().unwrap_or(0.0),
        tunes_sent: v["tunes"]["sent"].as_u64().unwrap_or(0),
        tunes_acked: v["tunes"]["acked"].as_u64().unwrap_or(0),
        bulk_bytes: 0,
        hog_chunks_per_s: 0.0,
    })
}

/// Ratios of one row's response times to another's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    /// Light class, mean.
    pub light_mean: Option<f64>,
    /// Light class, p99.
    pub light_p99: Option<f64>,
    /// Heavy class, mean.
    pub heavy_mean: Option<f64>,
    /// Heavy class, p99.
    pub heavy_p99: Option<f64>,
}

/// One configuration of the web scenario over its reps: each figure the
/// mean of the reps' (counts summed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WebRow {
    /// The configuration.
    pub config: Option<Config>,
    /// The light class.
    pub light: ClassFigures,
    /// The heavy class.
    pub heavy: ClassFigures,
    /// Completed requests per second.
    pub throughput_per_s: f64,
    /// Failed requests per rep.
    pub errors: f64,
    /// Tunes sent per rep.
    pub tunes_sent: f64,
    /// Tunes acknowledged per rep.
    pub tunes_acked: f64,
    /// Bulk throughput at the sink, Mbit/s.
    pub bulk_mbit: f64,
    /// The hog's chunks per second.
    pub hog_chunks_per_s: f64,
    /// Response times as ratios to `none`'s.
    pub to_none: Ratios,
    /// Response times as ratios to `net`'s (the paper's comparison:
    /// coordinated against not).
    pub to_net: Ratios,
    /// Each rep's sample.
    pub samples: Vec<WebSample>,
}

/// A configuration's row from its samples (ratios by [`web_ratios`]); a
/// class's response times are the mean over the reps in which it
/// completed a request (0 when none did: see [`ClassFigures::count`]).
pub fn web_row(config: Config, samples: Vec<WebSample>, seconds: f64) -> WebRow {
    let n = samples.len().max(1) as f64;
    let mean = |f: &dyn Fn(&WebSample) -> f64| samples.iter().map(f).sum::<f64>() / n;
    let class = |c: &dyn Fn(&WebSample) -> ClassFigures| {
        let done: Vec<ClassFigures> = samples.iter().map(c).filter(|x| x.count > 0).collect();
        let k = done.len().max(1) as f64;
        let m = |f: fn(&ClassFigures) -> f64| round(done.iter().map(f).sum::<f64>() / k, 3);
        ClassFigures {
            count: done.iter().map(|x| x.count).sum(),
            mean_ms: m(|x| x.mean_ms),
            p99_ms: m(|x| x.p99_ms),
            sd_ms: m(|x| x.sd_ms),
        }
    };
    WebRow {
        config: Some(config),
        light: class(&|s| s.light),
        heavy: class(&|s| s.heavy),
        throughput_per_s: round(mean(&|s| s.throughput_per_s), 2),
        errors: mean(&|s| s.errors as f64),
        tunes_sent: mean(&|s| s.tunes_sent as f64),
        tunes_acked: mean(&|s| s.tunes_acked as f64),
        bulk_mbit: round(mean(&|s| s.bulk_bytes as f64) * 8.0 / 1e6 / seconds, 2),
        hog_chunks_per_s: round(mean(&|s| s.hog_chunks_per_s), 1),
        to_none: Ratios::default(),
        to_net: Ratios::default(),
        samples,
    }
}

/// `a`'s figures over `b`'s; none for a class that completed no request
/// in either (its 0 is no response time).
fn ratios(a: &WebRow, b: &WebRow) -> Ratios {
    let r = |x: &ClassFigures, y: &ClassFigures, f: fn(&ClassFigures) -> f64| {
        if x.count == 0 || y.count == 0 {
            return None;
        }
        ratio(Some(f(x)), Some(f(y))).map(|v| round(v, 3))
    };
    Ratios {
        light_mean: r(&a.light, &b.light, |c| c.mean_ms),
        light_p99: r(&a.light, &b.light, |c| c.p99_ms),
        heavy_mean: r(&a.heavy, &b.heavy, |c| c.mean_ms),
        heavy_p99: r(&a.heavy, &b.heavy, |c| c.p99_ms),
    }
}

/// Fills every row's ratios to `none` and to `net` (left empty for a
/// configuration that did not run).
pub fn web_ratios(rows: &mut [WebRow]) {
    let find = |c| rows.iter().find(|r| r.config == Some(c)).cloned();
    let (none, net) = (find(Config::None), find(Config::Net));
    for row in rows.iter_mut() {
        row.to_none = none.as_ref().map(|b| ratios(row, b)).unwrap_or_default();
        row.to_net = net.as_ref().map(|b| ratios(row, b)).unwrap_or_default();
    }
}

/// What the single-tune configurations among `configs` tune, for the
/// table's head (empty without them).
fn single_tunes(configs: &[Config]) -> String {
    let mut t = String::new();
    for (c, what) in [
        (Config::BothBw, "the bandwidth tune alone"),
        (Config::BothCpu, "the CPU-time tune alone"),
    ] {
        if configs.contains(&c) {
            let _ = write!(t, ", {} {what}", c.as_str());
        }
    }
    t
}

/// The web scenario's report as text.
pub fn render_web(r: &NetIslandReport) -> String {
    let s = &r.settings;
    let w = &s.web;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "atoll bench netisland --scenario web: {} requests/s ({:.0} % heavy: {} B reply, {} \
         CPU chunks; light: {} B, {} chunk(s); {:.2} Mbit/s of replies) from a front end to a \
         back end on island CPUs {} across a {} Mbit/s veth link, beside a UDP bulk transfer \
         and a CPU hog; both tunes over a heavy p90 of {} ms{}; {} s x {} rep(s) per configuration",
        w.rate,
        w.heavy_share * 100.0,
        w.heavy_bytes,
        w.heavy_work,
        w.light_bytes,
        w.light_work,
        w.reply_mbit(),
        s.island_cpus,
        s.rate_mbit,
        w.bound_ms,
        single_tunes(&s.configs),
        s.seconds,
        s.reps
    );
    let _ = writeln!(t, "{}", machine_line(&r.machine, &r.loadavg));
    let head = [
        "config",
        "light avg",
        "light p99",
        "light sd",
        "heavy avg",
        "heavy p99",
        "heavy sd",
        "req/s",
        "errors",
        "tunes",
        "acked",
        "bulk Mbit/s",
        "hog chunks/s",
    ];
    // A class that completed no request has no response time: "-".
    let f = |c: &ClassFigures, v: f64| num((c.count > 0).then_some(v), 1);
    let rows: Vec<Vec<String>> = r
        .web_rows
        .iter()
        .map(|x| {
            let (l, h) = (&x.light, &x.heavy);
            vec![
                x.config.map_or("-", |c| c.as_str()).to_string(),
                f(l, l.mean_ms),
                f(l, l.p99_ms),
                f(l, l.sd_ms),
                f(h, h.mean_ms),
                f(h, h.p99_ms),
                f(h, h.sd_ms),
                format!("{:.2}", x.throughput_per_s),
                format!("{:.0}", x.errors),
                format!("{:.0}", x.tunes_sent),
                format!("{:.0}", x.tunes_acked),
                format!("{:.2}", x.bulk_mbit),
                format!("{:.0}", x.hog_chunks_per_s),
            ]
        })
        .collect();
    let _ = writeln!(t, "response times in ms:");
    t.push_str(&aligned(&head, &rows, 1));
    let head = [
        "config",
        "light avg/none",
        "light p99/none",
        "heavy avg/none",
        "heavy p99/none",
        "light avg/net",
        "light p99/net",
        "heavy avg/net",
        "heavy p99/net",
    ];
    let rows: Vec<Vec<String>> = r
        .web_rows
        .iter()
        .map(|x| {
            let (a, b) = (x.to_none, x.to_net);
            vec![
                x.config.map_or("-", |c| c.as_str()).to_string(),
                num(a.light_mean, 3),
                num(a.light_p99, 3),
                num(a.heavy_mean, 3),
                num(a.heavy_p99, 3),
                num(b.light_mean, 3),
                num(b.light_p99, 3),
                num(b.heavy_mean, 3),
                num(b.heavy_p99, 3),
            ]
        })
        .collect();
    let _ = writeln!(t, "ratios (below 1: faster):");
    t.push_str(&aligned(&head, &rows, 1));
    for (c, why) in &r.unavailable {
        let _ = writeln!(t, "{c}: unavailable: {why}");
    }
    let _ = writeln!(t, "command: {}", r.command);
    t
}

#[cfg(test)]
#[path = "web_tests.rs"]
mod tests;
