//! A progress bar on stderr, hand-rolled.
//!
//! [`render`] is pure: given the step, the total, the mode and phase and
//! the elapsed time it returns one line such as
//! `[#######.............] 4/10 isolate  heavy alone          0:12`.
//! [`Progress`] owns the state; on a terminal a thread redraws the line
//! every 200 ms (carriage return, no newline), elsewhere each phase is
//! printed once as a plain line, so logs stay readable.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Width of the bar between the brackets.
pub const BAR: usize = 20;

/// One progress line: `[####....] step/total mode  phase  m:ss`.
pub fn render(step: usize, total: usize, mode: &str, phase: &str, elapsed: Duration) -> String {
    let total = total.max(1);
    let step = step.min(total);
    let filled = step * BAR / total;
    let secs = elapsed.as_secs();
    format!(
        "[{}{}] {step}/{total} {mode:<8} {phase:<22} {}:{:02}",
        "#".repeat(filled),
        ".".repeat(BAR - filled),
        secs / 60,
        secs % 60
    )
}

#[derive(Debug, Default)]
struct State {
    step: usize,
    mode: String,
    phase: String,
}

/// The progress of one benchmark run.
#[derive(Debug)]
pub struct Progress {
    total: usize,
    started: Instant,
    state: Arc<Mutex<State>>,
    live: bool,
    stop: Arc<AtomicBool>,
    drawer: Option<JoinHandle<()>>,
}

impl Progress {
    /// A run of `total` steps. `enabled = false` prints nothing.
    pub fn new(total: usize, enabled: bool) -> Self {
        let live = enabled && std::io::stderr().is_terminal();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let drawer = live.then(|| {
            let (state, stop) = (state.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(s) = state.lock() {
                        let line = render(s.step, total, &s.mode, &s.phase, started.elapsed());
                        eprint!("\r{line}");
                        let _ = std::io::stderr().flush();
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        });
        Self {
            total: if enabled { total } else { 0 },
            started,
            state,
            live,
            stop,
            drawer,
        }
    }

    /// Starts a new step: `phase` of `mode`.
    pub fn phase(&self, mode: &str, phase: &str) {
        let Ok(mut s) = self.state.lock() else { return };
        if !s.phase.is_empty() {
            s.step += 1;
        }
        s.mode = mode.to_string();
        s.phase = phase.to_string();
        if self.total > 0 && !self.live {
            eprintln!(
                "{}",
                render(s.step, self.total, mode, phase, self.started.elapsed())
            );
        }
    }

    /// Prints a note on its own line (above the bar).
    pub fn note(&self, text: &str) {
        if self.total == 0 {
            return;
        }
        if self.live {
            eprint!("\r\x1b[2K");
        }
        eprintln!("{text}");
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.drawer.take() {
            let _ = h.join();
        }
        if self.live {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_bar_counts_names_and_time() {
        let l = render(5, 10, "isolate", "heavy alone", Duration::from_secs(73));
        assert!(
            l.starts_with("[##########..........] 5/10 isolate  heavy alone"),
            "{l}"
        );
        assert!(l.ends_with(" 1:13"), "{l}");
        let l = render(0, 4, "smp", "light alone", Duration::ZERO);
        assert!(l.starts_with(&format!("[{}] 0/4", ".".repeat(BAR))), "{l}");
        assert!(l.ends_with("0:00"));
        // Out-of-range steps are clamped, a zero total does not divide by 0.
        assert!(
            render(9, 3, "", "", Duration::ZERO).contains(&format!("[{}] 3/3", "#".repeat(BAR)))
        );
        assert!(render(0, 0, "", "", Duration::ZERO).contains("0/1"));
    }

    #[test]
    fn a_disabled_bar_is_silent_and_counts_nothing() {
        let p = Progress::new(3, false);
        p.phase("smp", "light alone");
        p.note("x");
        assert_eq!(p.total, 0);
        assert!(p.drawer.is_none());
    }
}
