//! The daemon's epochs, as its own `status` tells them.
//!
//! A [`Sampler`] thread asks for `status` every 100 ms over a connection
//! of its own (as root) and keeps `epochs` and `uptime_ms` of each reply.
//! Both come from the same snapshot, taken on the control loop's clock, so
//! a reply that is late, or a status that the daemon built a while before
//! (it serves one for up to 250 ms to readers), still pairs a count with
//! the time it was counted at.
//!
//! Over a window ([`window`]), from the first snapshot asked for in it to
//! the last one answered in it: the rate is epochs ÷ loop time. The loop
//! keeps a fixed schedule (epoch *k* is due at *k* × `epoch_ms`) and, when
//! an epoch starts more than one period late, drops the periods it missed
//! and starts a new schedule from there; so `missed` = loop time ÷
//! `epoch_ms` − epochs counts the periods lost, and an epoch that starts
//! *L* late loses about *L* ÷ `epoch_ms` of them (at least one when *L* is
//! more than a period). The share of epochs late by more than one period
//! is therefore at most `missed` ÷ expected epochs, which is what
//! `late_share` reports. Where the two snapshots fall between epochs makes
//! `missed` uncertain by ±1 (0.2 % of a 15 s window at 30 ms).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::stats::round;

/// One snapshot of the daemon's counters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When it was asked for, s since the sampler started.
    pub sent_s: f64,
    /// When the reply came, s since the sampler started.
    pub got_s: f64,
    /// `epochs`.
    pub epochs: u64,
    /// `uptime_ms`: when the daemon counted them, on its loop's clock.
    pub uptime_ms: u64,
}

/// The epochs of one window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochWindow {
    /// Snapshots in the window.
    pub snapshots: usize,
    /// Loop time between the first and the last, ms.
    pub span_ms: u64,
    /// Epochs between them.
    pub epochs: u64,
    /// Those per second of loop time.
    pub per_s: f64,
    /// Epochs a loop on time runs in `span_ms`.
    pub expected: f64,
    /// `expected − epochs`: periods the loop lost (±1).
    pub missed: f64,
    /// `max(missed, 0) ÷ expected`: at most this share of epochs started
    /// more than one period late.
    pub late_share: f64,
    /// The most periods lost between two snapshots in a row (±1): the
    /// longest stall.
    pub worst_stall: f64,
}

/// The window from `from_s` to `to_s` (sampler time) of `snaps`, for a loop
/// of `epoch_ms`; `None` with fewer than two snapshots of different loop
/// times in it.
pub fn window(snaps: &[Snapshot], from_s: f64, to_s: f64, epoch_ms: u64) -> Option<EpochWindow> {
    let inside: Vec<&Snapshot> = snaps
        .iter()
        .filter(|s| s.sent_s >= from_s && s.got_s <= to_s)
        .collect();
    let (first, last) = (inside.first()?, inside.last()?);
    let span_ms = last.uptime_ms.checked_sub(first.uptime_ms)?;
    if span_ms == 0 || epoch_ms == 0 {
        return None;
    }
    let epochs = last.epochs.saturating_sub(first.epochs);
    let e = epoch_ms as f64;
    let expected = span_ms as f64 / e;
    let missed = expected - epochs as f64;
    let worst_stall = inside
        .windows(2)
        .map(|w| {
            w[1].uptime_ms.saturating_sub(w[0].uptime_ms) as f64 / e
                - w[1].epochs.saturating_sub(w[0].epochs) as f64
        })
        .fold(0.0, f64::max);
    Some(EpochWindow {
        snapshots: inside.len(),
        span_ms,
        epochs,
        per_s: round(epochs as f64 * 1000.0 / span_ms as f64, 2),
        expected: round(expected, 1),
        missed: round(missed, 1),
        late_share: round(missed.max(0.0) / expected, 5),
        worst_stall: round(worst_stall, 1),
    })
}

/// `epochs` and `uptime_ms` of a reply line to `status`.
pub fn parse_status(line: &[u8]) -> Option<(u64, u64)> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    let ok = v.get("ok")?;
    Some((ok.get("epochs")?.as_u64()?, ok.get("uptime_ms")?.as_u64()?))
}

/// A thread asking the daemon for its status every period.
#[derive(Debug)]
pub struct Sampler {
    t0: Instant,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<(Vec<Snapshot>, Vec<String>)>>,
}

impl Sampler {
    /// Starts sampling the daemon on `socket` every `period`.
    pub fn start(socket: &Path, period: Duration) -> Result<Self, BenchError> {
        let t0 = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let socket = socket.to_path_buf();
        let handle = std::thread::Builder::new()
            .name("api-epochs".into())
            .spawn(move || sample(&socket, period, t0, &flag))
            .map_err(|e| BenchError::Setup {
                what: "the epoch sampler".into(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            t0,
            stop,
            handle: Some(handle),
        })
    }

    /// Seconds since it started (the clock of its snapshots).
    pub fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Stops it; its snapshots, and what went wrong on the way.
    pub fn finish(mut self) -> (Vec<Snapshot>, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn sample(
    socket: &Path,
    period: Duration,
    t0: Instant,
    stop: &AtomicBool,
) -> (Vec<Snapshot>, Vec<String>) {
    let mut snaps = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    let mut note = |p: String| {
        if problems.len() < 8 {
            problems.push(p);
        }
    };
    let mut conn: Option<(UnixStream, BufReader<UnixStream>)> = None;
    let mut id = 0u64;
    let mut next = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
            continue;
        }
        next += period;
        if next < now {
            next = now + period;
        }
        if conn.is_none() {
            let opened = UnixStream::connect(socket).and_then(|s| {
                s.set_read_timeout(Some(Duration::from_millis(200)))?;
                s.set_write_timeout(Some(Duration::from_secs(5)))?;
                let r = BufReader::with_capacity(1 << 16, s.try_clone()?);
                Ok((s, r))
            });
            match opened {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    note(format!("connect: {e}"));
                    continue;
                }
            }
        }
        let Some((out, lines)) = &mut conn else {
            continue;
        };
        id += 1;
        let sent_s = t0.elapsed().as_secs_f64();
        let line = format!("{{\"v\":1,\"id\":{id},\"op\":\"status\"}}\n");
        if let Err(e) = out.write_all(line.as_bytes()) {
            note(format!("send: {e}"));
            conn = None;
            continue;
        }
        let mut buf = Vec::new();
        let got = loop {
            match lines.read_until(b'\n', &mut buf) {
                Ok(0) => break Err("the daemon closed the connection".to_string()),
                Ok(_) if buf.ends_with(b"\n") => break Ok(()),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    // A slow reply (a daemon whose loop is busy): wait on
                    // unless stopped.
                    if stop.load(Ordering::SeqCst) {
                        break Err("stopped while waiting for a reply".to_string());
                    }
                }
                Err(e) => break Err(e.to_string()),
            }
        };
        let got_s = t0.elapsed().as_secs_f64();
        match got {
            Ok(()) => match parse_status(&buf) {
                Some((epochs, uptime_ms)) => snaps.push(Snapshot {
                    sent_s,
                    got_s,
                    epochs,
                    uptime_ms,
                }),
                None => note(format!(
                    "not a status: {}",
                    String::from_utf8_lossy(&buf[..buf.len().min(160)]).trim()
                )),
            },
            Err(e) => {
                if !stop.load(Ordering::SeqCst) {
                    note(e);
                }
                conn = None;
            }
        }
    }
    (snaps, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(t: f64, epochs: u64, uptime_ms: u64) -> Snapshot {
        Snapshot {
            sent_s: t,
            got_s: t + 0.001,
            epochs,
            uptime_ms,
        }
    }

    #[test]
    fn an_on_time_loop_misses_nothing() {
        // 30 ms epochs, snapshots every 100 ms at arbitrary phases.
        let snaps: Vec<Snapshot> = (0..=100)
            .map(|i| {
                let u = 1000 + i * 100 + (i * 7) % 29;
                snap(i as f64 * 0.1, u / 30, u)
            })
            .collect();
        let w = window(&snaps, 0.0, 10.0, 30).unwrap();
        assert_eq!(w.snapshots, 100);
        assert!((w.per_s - 33.3).abs() < 0.2, "{w:?}");
        assert!(w.missed.abs() <= 1.0 && w.late_share < 0.003, "{w:?}");
        assert!(w.worst_stall <= 1.0, "{w:?}");
    }

    #[test]
    fn a_stalled_loop_shows_its_lost_periods() {
        // On time for 1 s, then stalled 600 ms (20 periods), then on time.
        let mut snaps = Vec::new();
        for i in 0..=30u64 {
            let u = i * 100;
            let epochs = if u < 1000 {
                u / 30
            } else if u < 1600 {
                1000 / 30
            } else {
                1000 / 30 + (u - 1600) / 30
            };
            snaps.push(snap(i as f64 * 0.1, epochs, u));
        }
        let w = window(&snaps, 0.0, 3.1, 30).unwrap();
        assert!((w.missed - 20.0).abs() <= 1.0, "{w:?}");
        assert!((w.late_share - 0.2).abs() < 0.02, "{w:?}");
        assert!(w.worst_stall >= 3.0, "{w:?}");
        // Too few snapshots: nothing to say.
        assert!(window(&snaps, 0.0, 0.05, 30).is_none());
        assert!(window(&snaps[..1], 0.0, 9.0, 30).is_none());
    }

    #[test]
    fn status_replies_give_epochs_and_uptime() {
        let line = br#"{"v":1,"id":3,"ok":{"kind":"status","uptime_ms":61500,"epochs":2050}}"#;
        assert_eq!(parse_status(line), Some((2050, 61500)));
        assert_eq!(
            parse_status(br#"{"v":1,"id":3,"err":{"code":"busy"}}"#),
            None
        );
        assert_eq!(parse_status(b"x"), None);
    }

    #[test]
    fn the_sampler_reads_a_fake_daemon() {
        use std::os::unix::net::UnixListener;
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s");
        let listener = UnixListener::bind(&socket).unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            let mut n = 0;
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                line.clear();
                n += 1;
                let reply = format!(
                    "{{\"v\":1,\"id\":{n},\"ok\":{{\"kind\":\"status\",\"epochs\":{n},\"uptime_ms\":{}}}}}\n",
                    n * 30
                );
                if s.write_all(reply.as_bytes()).is_err() {
                    return;
                }
            }
        });
        let s = Sampler::start(&socket, Duration::from_millis(10)).unwrap();
        while s.now() < 0.2 {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (snaps, problems) = s.finish();
        assert!(snaps.len() >= 5, "{snaps:?} {problems:?}");
        assert!(snaps.windows(2).all(|w| w[1].epochs == w[0].epochs + 1));
        let w = window(&snaps, 0.0, 10.0, 30).unwrap();
        assert!(w.missed.abs() < 1e-9 && w.per_s > 33.0, "{w:?}");
    }
}
