//! `web-front`: seed 001's web front end. It sends requests of two classes
//! ([`super::web`]'s protocol) to one back end, open loop, and (with
//! `--overlay`) tunes the back end's bandwidth and CPU when the heavy class
//! needs it.
//!
//! **Open loop.** Request `k` is due at `start + k / rate`; it is heavy
//! when `floor((k + 1) f) > floor(k f)` for the heavy share `f` (so one in
//! four for 0.25, evenly spread). `--conns` threads, each with its own
//! connection, take the next request number, sleep until it is due and
//! send it; the response time runs from the due time to the last byte of
//! the reply, so a busy back end shows as response time, not as fewer
//! requests. Nothing due after `--seconds` is sent.
//!
//! **Tuning.** Every `--window-ms` the main thread takes the heavy
//! requests completed in that window and their `--percentile` (nearest
//! rank). [`Tuner`] (pure) decides: above `--bound-ms`, one step up; below
//! half of it with steps taken, one step down. A step sends
//! `tune(bandwidth, dir, overlay, unit)` and `tune(cpu_time, dir, overlay,
//! unit)` to the daemon (`atoll_client`), or only the one of them named by
//! `--tune bandwidth` or `--tune cpu_time` (default `bandwidth,cpu_time`);
//! the report counts what was sent, acknowledged and refused.

use std::io::{self};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use atoll_core::coord::{Direction, Resource};
use serde_json::json;

use super::web::{call, Class, Request};
use super::{stopping, tight_timer_slack, ArgError, Opts};
use crate::stats::percentile;

/// The options of `web-front`.
pub(super) const OPTIONS: &[&str] = &[
    "--addr",
    "--seconds",
    "--rate",
    "--heavy-share",
    "--light-bytes",
    "--heavy-bytes",
    "--light-work",
    "--heavy-work",
    "--conns",
    "--window-ms",
    "--percentile",
    "--bound-ms",
    "--socket",
    "--overlay",
    "--unit",
    "--timeout-ms",
    "--tune",
];

/// The name of a tunable resource in `--tune`.
pub fn tune_name(r: Resource) -> &'static str {
    match r {
        Resource::Bandwidth => "bandwidth",
        Resource::CpuTime => "cpu_time",
        Resource::Cores => "cores",
        Resource::Memory => "memory",
    }
}

/// `--tune`'s value: the resources a step tunes, in order, no repeats;
/// the front end tunes the bandwidth and the CPU time only.
pub fn parse_tunes(v: &str) -> Result<Vec<Resource>, String> {
    let mut out = Vec::new();
    for name in v.split(',').map(str::trim) {
        let r = [Resource::Bandwidth, Resource::CpuTime]
            .into_iter()
            .find(|r| tune_name(*r) == name)
            .ok_or_else(|| format!("{name:?} is not bandwidth or cpu_time"))?;
        if out.contains(&r) {
            return Err(format!("{name} named twice"));
        }
        out.push(r);
    }
    Ok(out)
}

/// The most steps up the tuner takes from where it started.
pub const MAX_STEPS: u32 = 10;

/// `web-front`'s arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct WebFrontArgs {
    /// The back end, `IP:PORT`.
    pub addr: String,
    /// How long it sends.
    pub seconds: f64,
    /// Requests per second, both classes.
    pub rate: f64,
    /// The heavy class's share of the requests.
    pub heavy_share: f64,
    /// Reply bytes of a light request.
    pub light_bytes: u32,
    /// Reply bytes of a heavy request.
    pub heavy_bytes: u32,
    /// CPU work of a light request (chunks of ~0.2 ms).
    pub light_work: u32,
    /// CPU work of a heavy request.
    pub heavy_work: u32,
    /// Connections (threads).
    pub conns: usize,
    /// The tuning window, ms.
    pub window_ms: u64,
    /// The heavy class's percentile compared with the bound.
    pub percentile: f64,
    /// The bound on that percentile, ms.
    pub bound_ms: f64,
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The overlay it tunes for (no tuning without).
    pub overlay: Option<String>,
    /// The unit it tunes (the back end's).
    pub unit: String,
    /// How long a request may take before it is an error, ms.
    pub timeout_ms: u64,
    /// What a step tunes, in order.
    pub tunes: Vec<Resource>,
}

impl WebFrontArgs {
    pub(super) fn from_opts(o: &Opts) -> Result<Self, ArgError> {
        let heavy_share: f64 = o.num("--heavy-share")?.unwrap_or(0.25);
        if !(0.0..=1.0).contains(&heavy_share) {
            return Err(o.bad(
                "--heavy-share",
                &heavy_share.to_string(),
                "must be in 0..=1",
            ));
        }
        let percentile: f64 = o.positive("--percentile")?.unwrap_or(90.0);
        if percentile > 100.0 {
            return Err(o.bad("--percentile", &percentile.to_string(), "must be <= 100"));
        }
        let bytes = |opt: &'static str, d: u32| -> Result<u32, ArgError> {
            let v: u32 = o.num(opt)?.unwrap_or(d);
            if v > super::web::MAX_REPLY {
                return Err(o.bad(opt, &v.to_string(), "over 16 MiB"));
            }
            Ok(v)
        };
        let work = |opt: &'static str, d: u32| -> Result<u32, ArgError> {
            let v: u32 = o.num(opt)?.unwrap_or(d);
            if v > super::web::MAX_WORK {
                return Err(o.bad(opt, &v.to_string(), "over 100000 chunks"));
            }
            Ok(v)
        };
        Ok(Self {
            addr: o.required("--addr", o.values.get("--addr").cloned())?,
            seconds: o.required("--seconds", o.positive("--seconds")?)?,
            rate: o.required("--rate", o.positive("--rate")?)?,
            heavy_share,
            light_bytes: bytes("--light-bytes", 1024)?,
            heavy_bytes: bytes("--heavy-bytes", 48 << 10)?,
            light_work: work("--light-work", 1)?,
            heavy_work: work("--heavy-work", 10)?,
            conns: o.positive("--conns")?.unwrap_or(8),
            window_ms: o.positive("--window-ms")?.unwrap_or(500),
            percentile,
            bound_ms: o.positive("--bound-ms")?.unwrap_or(100.0),
            socket: o.values.get("--socket").map_or_else(
                || PathBuf::from(atoll_client::atoll_proto::DEFAULT_SOCKET),
                PathBuf::from,
            ),
            overlay: o.values.get("--overlay").cloned(),
            unit: o
                .values
                .get("--unit")
                .cloned()
                .unwrap_or_else(|| "back".into()),
            timeout_ms: o.positive("--timeout-ms")?.unwrap_or(5000),
            tunes: match o.values.get("--tune") {
                None => vec![Resource::Bandwidth, Resource::CpuTime],
                Some(v) => parse_tunes(v).map_err(|why| o.bad("--tune", v, &why))?,
            },
        })
    }

    /// Request `k`'s class.
    pub fn class_of(&self, k: u64) -> Class {
        let f = self.heavy_share;
        if ((k + 1) as f64 * f).floor() > (k as f64 * f).floor() {
            Class::Heavy
        } else {
            Class::Light
        }
    }

    fn request(&self, class: Class) -> Request {
        match class {
            Class::Light => Request {
                class,
                work: self.light_work,
                reply_bytes: self.light_bytes,
            },
            Class::Heavy => Request {
                class,
                work: self.heavy_work,
                reply_bytes: self.heavy_bytes,
            },
        }
    }
}

/// The tune decision (pure): steps up while the heavy class's percentile
/// is over the bound, back down while it is under half of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuner {
    /// Steps up taken and not yet taken back.
    pub steps: u32,
}

impl Tuner {
    /// The step for a window whose heavy percentile was `value_ms` (`None`:
    /// no heavy request completed, nothing to go by).
    pub fn decide(&mut self, value_ms: Option<f64>, bound_ms: f64) -> Option<Direction> {
        let v = value_ms?;
        if v > bound_ms && self.steps < MAX_STEPS {
            self.steps += 1;
            Some(Direction::Up)
        } else if v < bound_ms / 2.0 && self.steps > 0 {
            self.steps -= 1;
            Some(Direction::Down)
        } else {
            None
        }
    }
}

/// Mean, standard deviation and p99 (ms) of latencies in ms.
pub fn class_summary(v: &mut [f64]) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return json!({"count": 0});
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    let r = |x: f64| (x * 1000.0).round() / 1000.0;
    json!({
        "count": n,
        "mean_ms": r(mean),
        "sd_ms": r(var.sqrt()),
        "p99_ms": percentile(v, 99.0).map(r),
        "max_ms": r(v[n - 1]),
    })
}

#[derive(Default)]
struct Lat {
    light: Vec<f64>,
    heavy: Vec<f64>,
    /// Heavy latencies of the current window.
    window: Vec<f64>,
}

struct Shared {
    start: Instant,
    end: Instant,
    next: AtomicU64,
    sent: AtomicU64,
    errors: AtomicU64,
    lat: Mutex<Lat>,
}

fn sleep_until(t: Instant) {
    loop {
        let now = Instant::now();
        if now >= t || stopping() {
            return;
        }
        std::thread::sleep((t - now).min(Duration::from_millis(50)));
    }
}

fn client_thread(a: &WebFrontArgs, sh: &Shared) {
    tight_timer_slack();
    let timeout = Duration::from_millis(a.timeout_ms);
    let mut conn: Option<TcpStream> = None;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let k = sh.next.fetch_add(1, Ordering::Relaxed);
        let due = sh.start + Duration::from_secs_f64(k as f64 / a.rate);
        if stopping() || due >= sh.end || Instant::now() >= sh.end {
            return;
        }
        sleep_until(due);
        let class = a.class_of(k);
        sh.sent.fetch_add(1, Ordering::Relaxed);
        let r = (|| -> io::Result<u32> {
            if conn.is_none() {
                let c = TcpStream::connect(&a.addr)?;
                c.set_nodelay(true)?;
                c.set_read_timeout(Some(timeout))?;
                c.set_write_timeout(Some(timeout))?;
                conn = Some(c);
            }
            call(
                conn.as_mut().expect("connected above"),
                &a.request(class),
                &mut buf,
            )
        })();
        let ms = due.elapsed().as_secs_f64() * 1000.0;
        match r {
            Ok(_) => {
                let mut l = sh.lat.lock().unwrap_or_else(|e| e.into_inner());
                match class {
                    Class::Light => l.light.push(ms),
                    Class::Heavy => {
                        l.heavy.push(ms);
                        l.window.push(ms);
                    }
                }
            }
            Err(_) => {
                sh.errors.fetch_add(1, Ordering::Relaxed);
                conn = None;
            }
        }
    }
}

/// Sends the tunes; counts what came of them.
struct Tunes {
    client: Option<atoll_client::Client>,
    sent: u64,
    acked: u64,
    nacked: u64,
    failed: u64,
    last: Option<String>,
}

impl Tunes {
    fn send(&mut self, a: &WebFrontArgs, overlay: &str, dir: Direction) {
        for &resource in &a.tunes {
            self.sent += 1;
            let r = (|| {
                if self.client.is_none() {
                    let mut c = atoll_client::Client::connect(&a.socket)?;
                    c.set_timeout(Some(Duration::from_secs(5)))?;
                    self.client = Some(c);
                }
                let c = self.client.as_mut().expect("connected above");
                c.tune(overlay, &a.unit, resource, dir)
            })();
            match r {
                Ok(c) if c.is_ack() => self.acked += 1,
                Ok(c) => {
                    self.nacked += 1;
                    self.last = Some(c.text);
                }
                Err(e) => {
                    self.failed += 1;
                    self.last = Some(e.to_string());
                    self.client = None;
                }
            }
        }
    }
}

/// Runs the front end; returns its report.
pub(super) fn web_front(a: &WebFrontArgs) -> io::Result<serde_json::Value> {
    let start = Instant::now();
    let sh = Shared {
        start,
        end: start + Duration::from_secs_f64(a.seconds),
        next: AtomicU64::new(0),
        sent: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        lat: Mutex::new(Lat::default()),
    };
    let mut tuner = Tuner::default();
    let mut tunes = Tunes {
        client: None,
        sent: 0,
        acked: 0,
        nacked: 0,
        failed: 0,
        last: None,
    };
    let mut windows = Vec::new();
    let window = Duration::from_millis(a.window_ms);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..a.conns.max(1))
            .map(|_| {
                let sh = &sh;
                s.spawn(move || client_thread(a, sh))
            })
            .collect();
        let mut w = 1u32;
        while !stopping() && !threads.iter().all(|t| t.is_finished()) {
            sleep_until(start + window * w);
            w += 1;
            let mut v =
                std::mem::take(&mut sh.lat.lock().unwrap_or_else(|e| e.into_inner()).window);
            v.sort_by(f64::total_cmp);
            let p = percentile(&v, a.percentile);
            let Some(overlay) = &a.overlay else {
                continue;
            };
            let dir = tuner.decide(p, a.bound_ms);
            if let Some(d) = dir {
                tunes.send(a, overlay, d);
            }
            windows.push(json!({
                "t_s": (start.elapsed().as_secs_f64() * 100.0).round() / 100.0,
                "n": v.len(),
                "p_ms": p.map(|x| (x * 10.0).round() / 10.0),
                "tune": dir.map(|d| d.to_string()),
                "steps": tuner.steps,
            }));
        }
    });
    let sending = start.elapsed().as_secs_f64().min(a.seconds);
    let mut l = sh.lat.into_inner().unwrap_or_else(|e| e.into_inner());
    let done = l.light.len() + l.heavy.len();
    Ok(json!({
        "kind": "web-front",
        "sent": sh.sent.load(Ordering::Relaxed),
        "errors": sh.errors.load(Ordering::Relaxed),
        "throughput_per_s": (done as f64 / sending * 100.0).round() / 100.0,
        "light": class_summary(&mut l.light),
        "heavy": class_summary(&mut l.heavy),
        "overlay": a.overlay,
        "tuned": a.tunes.iter().map(|r| tune_name(*r)).collect::<Vec<_>>(),
        "tunes": {
            "sent": tunes.sent, "acked": tunes.acked, "nacked": tunes.nacked,
            "failed": tunes.failed, "last_refusal": tunes.last, "steps_at_end": tuner.steps,
        },
        "windows": windows,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(share: f64) -> WebFrontArgs {
        WebFrontArgs {
            addr: "127.0.0.1:1".into(),
            seconds: 1.0,
            rate: 10.0,
            heavy_share: share,
            light_bytes: 1,
            heavy_bytes: 2,
            light_work: 0,
            heavy_work: 0,
            conns: 1,
            window_ms: 100,
            percentile: 90.0,
            bound_ms: 50.0,
            socket: PathBuf::new(),
            overlay: None,
            unit: "back".into(),
            timeout_ms: 100,
            tunes: vec![Resource::CpuTime],
        }
    }

    fn parse(s: &str) -> Result<super::super::Worker, ArgError> {
        super::super::Worker::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn options_parse_with_defaults_and_bad_values_are_named() {
        let w = parse("web-front --addr 10.0.0.2:9 --seconds 3 --rate 40 --overlay web").unwrap();
        let super::super::Worker::WebFront(a) = w else {
            panic!("{w:?}");
        };
        assert_eq!(
            (a.heavy_share, a.heavy_bytes, a.heavy_work),
            (0.25, 48 << 10, 10)
        );
        assert_eq!(
            (a.unit.as_str(), a.overlay.as_deref()),
            ("back", Some("web"))
        );
        assert_eq!(a.tunes, [Resource::Bandwidth, Resource::CpuTime]);
        let one = |t: &str| match parse(&format!(
            "web-front --addr a:1 --seconds 1 --rate 1 --tune {t}"
        )) {
            Ok(super::super::Worker::WebFront(a)) => a.tunes,
            other => panic!("{other:?}"),
        };
        assert_eq!(one("bandwidth"), [Resource::Bandwidth]);
        assert_eq!(one("cpu_time"), [Resource::CpuTime]);
        assert_eq!(
            one("cpu_time,bandwidth"),
            [Resource::CpuTime, Resource::Bandwidth]
        );
        for (bad, opt) in [
            ("--heavy-share 1.5", "--heavy-share"),
            ("--percentile 101", "--percentile"),
            ("--heavy-bytes 99999999", "--heavy-bytes"),
            ("--rate 0", "--rate"),
            ("--tune memory", "--tune"),
            ("--tune bandwidth,bandwidth", "--tune"),
            ("--tune cpu", "--tune"),
        ] {
            let e = parse(&format!("web-front --addr a:1 --seconds 1 --rate 1 {bad}"));
            assert!(e.unwrap_err().to_string().contains(opt), "{bad}");
        }
        assert!(parse("web-front --addr a:1 --seconds 1").is_err());
        assert!(matches!(
            parse("web-back --port 9 --seconds 2"),
            Ok(super::super::Worker::WebBack(_))
        ));
    }

    #[test]
    fn tune_names_round_trip() {
        for r in [Resource::Bandwidth, Resource::CpuTime] {
            assert_eq!(parse_tunes(tune_name(r)), Ok(vec![r]));
        }
        assert!(parse_tunes("").is_err());
        assert!(parse_tunes("cores").unwrap_err().contains("cores"));
    }

    #[test]
    fn the_heavy_share_is_spread_evenly() {
        let a = args(0.25);
        let heavy: Vec<u64> = (0..12).filter(|&k| a.class_of(k) == Class::Heavy).collect();
        assert_eq!(heavy, vec![3, 7, 11]);
        assert!((0..100).all(|k| args(0.0).class_of(k) == Class::Light));
        assert!((0..100).all(|k| args(1.0).class_of(k) == Class::Heavy));
    }

    #[test]
    fn the_tuner_steps_up_over_the_bound_and_back_down_with_slack() {
        let mut t = Tuner::default();
        // Nothing completed: nothing to go by.
        assert_eq!(t.decide(None, 50.0), None);
        // Under the bound with nothing taken: no step down below the start.
        assert_eq!(t.decide(10.0.into(), 50.0), None);
        assert_eq!(t.decide(80.0.into(), 50.0), Some(Direction::Up));
        assert_eq!(t.decide(60.0.into(), 50.0), Some(Direction::Up));
        assert_eq!(t.steps, 2);
        // Between half the bound and the bound: hold.
        assert_eq!(t.decide(30.0.into(), 50.0), None);
        assert_eq!(t.decide(20.0.into(), 50.0), Some(Direction::Down));
        assert_eq!(t.decide(20.0.into(), 50.0), Some(Direction::Down));
        assert_eq!(t.decide(20.0.into(), 50.0), None);
        // At most MAX_STEPS up.
        for _ in 0..MAX_STEPS + 3 {
            t.decide(1e6.into(), 50.0);
        }
        assert_eq!(t.steps, MAX_STEPS);
    }

    #[test]
    fn class_summaries_give_mean_sd_and_p99() {
        let mut v = vec![3.0, 1.0, 2.0, 2.0];
        let s = class_summary(&mut v);
        assert_eq!(s["count"], 4);
        assert_eq!(s["mean_ms"], 2.0);
        assert_eq!(s["sd_ms"], 0.707);
        assert_eq!(s["p99_ms"], 3.0);
        assert_eq!(class_summary(&mut []), json!({"count": 0}));
    }
}
