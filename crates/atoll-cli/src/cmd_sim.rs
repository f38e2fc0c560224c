//! `atoll sim SCENARIO` and `atoll bench sim`: scenarios run on the
//! simulated machine with the daemon's control loop (`atoll-lab`).
//!
//! A progress line goes to stderr when a run takes more than a second of
//! wall time (and stderr is a terminal); the summary table or one JSON
//! object goes to stdout; one SVG per variant goes to `--out`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use atoll_lab::{bench, run, summary, svg, Scenario, Summary};

/// Flags of `atoll sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// The scenario file (see docs/sim.md; examples in scenarios/).
    scenario: PathBuf,
    /// Print one JSON object (summaries and full results) instead of a table.
    #[arg(long)]
    json: bool,
    /// Directory for the plots (one SVG per variant).
    #[arg(long, default_value = "sim-out")]
    out: PathBuf,
    /// Run only this variant (default: all).
    #[arg(long)]
    variant: Option<String>,
}

/// A progress bar on stderr, shown only once a run has lasted a second.
struct Bar {
    start: Instant,
    enabled: bool,
    shown: bool,
}

impl Bar {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            enabled: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn update(&mut self, label: &str, t: f64, end: f64) {
        let el = self.start.elapsed().as_secs_f64();
        if !self.enabled || el < 1.0 {
            return;
        }
        let frac = (t / end.max(1e-9)).clamp(0.0, 1.0);
        let n = atoll_core::num::saturating_usize(frac * 30.0);
        let _ = write!(
            std::io::stderr(),
            "\r{label:<14} [{}{}] {t:7.1}/{end:.0} sim s  {el:6.1} s",
            "#".repeat(n),
            " ".repeat(30 - n)
        );
        self.shown = true;
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if self.shown {
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// `atoll sim SCENARIO [--json] [--out DIR] [--variant NAME]`.
pub fn sim(a: SimArgs) -> anyhow::Result<ExitCode> {
    let s = Scenario::load(&a.scenario)?;
    let variants = match a.variant {
        Some(v) => vec![v],
        None => s.variant_names(),
    };
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut summaries = Vec::new();
    let mut results = Vec::new();
    let mut plots = Vec::new();
    for v in &variants {
        let r = {
            let mut bar = Bar::new();
            run(&s, v, &mut |t, end| bar.update(v, t, end))?
        };
        let path = a.out.join(format!("{}-{v}.svg", s.name));
        std::fs::write(&path, svg::plot(&r))
            .with_context(|| format!("writing {}", path.display()))?;
        plots.push(path.display().to_string());
        summaries.push(Summary::of(&r));
        results.push(r);
    }
    if a.json {
        let out = serde_json::json!({
            "scenario": s.name,
            "description": s.description,
            "summaries": summaries,
            "plots": plots,
            "runs": results,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        if !s.description.is_empty() {
            println!("{}: {}\n", s.name, s.description);
        }
        print!("{}", summary::render(&summaries));
        println!("\nplots: {}", plots.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// `atoll bench sim [--json] [--quick]`.
pub fn bench_sim(json: bool, quick: bool) -> anyhow::Result<ExitCode> {
    let (sizes, seconds): (&[u32], f64) = if quick {
        (&[64, 256, 1024], 3.0)
    } else {
        (&[64, 256, 1024], 60.0)
    };
    let report = {
        let mut bar = Bar::new();
        bench::bench(sizes, seconds, &mut |i, t, end| {
            bar.update(&format!("{} CPUs", sizes[i]), t, end);
        })?
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", bench::render(&report));
    }
    Ok(ExitCode::SUCCESS)
}
