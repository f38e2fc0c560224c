//! A latency source's thread: it probes an endpoint or tails a log, and
//! sends what it measured to the loop by channel, with the CPU time the
//! thread has used so far (the cost of measuring).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use atoll_core::slo::LatencySource;
use atoll_core::Name;

use super::probe;
use super::tail::LogTail;

/// How often a log is looked at for new lines.
pub const TAIL_EVERY: Duration = Duration::from_millis(50);

/// What a source's thread measured since it last sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Feed {
    /// The overlay it measures for.
    pub overlay: Name,
    /// Latencies, µs, oldest first; a probe that timed out is one sample
    /// at the timeout.
    pub samples: Vec<u64>,
    /// How many of `samples` are timeouts.
    pub timeouts: u64,
    /// CPU time the thread has used in all, µs.
    pub cpu_us: u64,
    /// What went wrong last, if the last try failed (a refused connection,
    /// a log that is not there yet).
    pub error: Option<String>,
}

/// A running source thread; stopped and joined when dropped.
#[derive(Debug)]
pub struct SourceHandle {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for SourceHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts the thread of `source` for `overlay` (nothing for `report`).
pub fn spawn(overlay: &Name, source: &LatencySource, tx: Sender<Feed>) -> Option<SourceHandle> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let overlay = overlay.clone();
    let body: Box<dyn FnOnce() + Send> = match source.clone() {
        LatencySource::Report => return None,
        LatencySource::Probe(p) => Box::new(move || {
            while !flag.load(Ordering::Relaxed) {
                let m = probe::once(&p.target, p.timeout);
                let feed = Feed {
                    overlay: overlay.clone(),
                    samples: vec![m.latency_us],
                    timeouts: u64::from(m.timed_out),
                    cpu_us: thread_cpu_us(),
                    error: m.error,
                };
                if tx.send(feed).is_err() {
                    return;
                }
                sleep_unless(&flag, p.every);
            }
        }),
        LatencySource::AccessLog(l) => {
            // Where the log ends now is where reading starts.
            let mut tail = LogTail::new(&l.path);
            Box::new(move || {
                while !flag.load(Ordering::Relaxed) {
                    let (lines, error) = match tail.poll() {
                        Ok(lines) => (lines, None),
                        Err(e) => (Vec::new(), Some(e.to_string())),
                    };
                    let samples: Vec<u64> = lines
                        .iter()
                        .filter_map(|line| l.format.request_time_us(line))
                        .collect();
                    let feed = Feed {
                        overlay: overlay.clone(),
                        samples,
                        timeouts: 0,
                        cpu_us: thread_cpu_us(),
                        error,
                    };
                    if tx.send(feed).is_err() {
                        return;
                    }
                    sleep_unless(&flag, TAIL_EVERY);
                }
            })
        }
    };
    let thread = std::thread::Builder::new()
        .name("atoll-slo".into())
        .spawn(body)
        .ok()?;
    Some(SourceHandle {
        stop,
        thread: Some(thread),
    })
}

/// Sleeps `d` in short naps, waking early when `stop` is set.
fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let nap = Duration::from_millis(20);
    let mut left = d;
    while !left.is_zero() && !stop.load(Ordering::Relaxed) {
        let step = left.min(nap);
        std::thread::sleep(step);
        left -= step;
    }
}

/// CPU time of the calling thread, µs.
pub fn thread_cpu_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill in.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000).saturating_add(nanos / 1000)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::mpsc::channel;

    use atoll_core::slo::{AccessLogSpec, LogFormat, ProbeSpec, ProbeTarget};

    use super::*;

    /// Fails a test whose thread went silent instead of hanging it.
    const GUARD: Duration = Duration::from_secs(60);

    #[test]
    fn a_probe_thread_sends_samples_and_its_cpu_time() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            for _ in 0..3 {
                let (mut s, _) = l.accept().unwrap();
                let mut b = [0u8; 64];
                let _ = s.read(&mut b).unwrap();
                s.write_all(b"pong\n").unwrap();
            }
        });
        let (tx, rx) = channel();
        let src = LatencySource::Probe(ProbeSpec {
            target: ProbeTarget::parse(&format!("tcp://{addr}"), None).unwrap(),
            every: Duration::from_millis(1),
            timeout: Duration::from_secs(30),
        });
        let handle = spawn(&Name::new("shop").unwrap(), &src, tx).expect("a thread");
        let feeds: Vec<Feed> = (0..3)
            .map(|_| rx.recv_timeout(GUARD).expect("a feed"))
            .collect();
        drop(handle);
        server.join().unwrap();
        for f in &feeds {
            assert_eq!(f.overlay.as_str(), "shop");
            assert_eq!(
                (f.samples.len(), f.timeouts, &f.error),
                (1, 0, &None),
                "{f:?}"
            );
        }
        assert!(feeds[2].cpu_us >= feeds[0].cpu_us);
        assert!(
            feeds[2].cpu_us > 0,
            "connecting three times costs some CPU time"
        );
    }

    #[test]
    fn a_log_thread_sends_each_request_time_once() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("access.log");
        std::fs::write(&log, "").unwrap();
        let (tx, rx) = channel();
        let src = LatencySource::AccessLog(AccessLogSpec {
            path: log.clone(),
            format: LogFormat::NGINX,
        });
        let handle = spawn(&Name::new("shop").unwrap(), &src, tx).expect("a thread");
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        for i in 1..=50 {
            writeln!(f, "GET /x 200 0.{i:03}").unwrap();
        }
        let mut got = Vec::new();
        while got.len() < 50 {
            got.extend(rx.recv_timeout(GUARD).expect("a feed").samples);
        }
        drop(handle);
        got.extend(rx.try_iter().flat_map(|f| f.samples));
        assert_eq!(got, (1..=50).map(|i| i * 1000).collect::<Vec<u64>>());
    }
}
