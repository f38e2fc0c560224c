//! Human-readable overlays and coordination answers.

use std::fmt::Write;

use atoll_client::coord::{Coordinated, OverlayStatus, Reported, Resource};
use atoll_core::CpuSet;

/// A resource as the command line spells it.
pub fn resource_word(r: Resource) -> &'static str {
    match r {
        Resource::Cores => "cores",
        Resource::CpuTime => "cpu-time",
        Resource::Memory => "memory",
        Resource::Bandwidth => "bandwidth",
    }
}

/// Left-aligned columns, two spaces apart; the last column is not padded.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut o = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        o.push_str(line.trim_end());
        o.push('\n');
    }
    o
}

fn value(o: &OverlayStatus) -> String {
    o.value.map_or_else(|| "-".into(), |v| v.to_string())
}

fn holds(o: &OverlayStatus) -> &'static str {
    match o.holds {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

/// The CPUs an overlay borrows, in the kernel's list format (`-`: none).
fn loan_cpus(o: &OverlayStatus) -> String {
    if o.loans.is_empty() {
        return "-".into();
    }
    o.loans
        .iter()
        .map(|l| l.cpu)
        .collect::<CpuSet>()
        .to_string()
}

/// Non-zero successive refusals, as `cpu-time 2, cores 1` (`-`: none).
fn nacks(o: &OverlayStatus) -> String {
    let parts: Vec<String> = o
        .nacks
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{} {n}", resource_word(*r)))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// `atoll overlay ls`: one line per overlay.
pub fn overlay_table(overlays: &[OverlayStatus]) -> String {
    if overlays.is_empty() {
        return "no overlays\n".into();
    }
    let rows: Vec<Vec<String>> = overlays
        .iter()
        .map(|o| {
            vec![
                o.name.clone(),
                o.priority.to_string(),
                o.property.to_string(),
                value(o),
                holds(o).into(),
                loan_cpus(o),
                nacks(o),
            ]
        })
        .collect();
    table(
        &[
            "NAME", "PRIORITY", "PROPERTY", "VALUE", "HOLDS", "LOANS", "NACKS",
        ],
        &rows,
    )
}

/// `atoll overlay show NAME`: everything about one overlay.
pub fn overlay_detail(o: &OverlayStatus) -> String {
    let mut lines: Vec<(&str, String)> = vec![
        ("priority", o.priority.to_string()),
        ("origin", format!("{:?}", o.origin).to_lowercase()),
        ("property", o.property.to_string()),
        (
            "units",
            if o.units.is_empty() {
                "none (platform-wide)".into()
            } else {
                o.units.join(", ")
            },
        ),
        (
            "value",
            match (o.value, o.holds) {
                (None, _) => "none reported yet".into(),
                (Some(v), Some(true)) => format!("{v} (holds)"),
                (Some(v), Some(false)) => format!("{v} (does not hold)"),
                (Some(v), None) => v.to_string(),
            },
        ),
    ];
    if o.loans.is_empty() {
        lines.push(("loans", "none".into()));
    }
    for l in &o.loans {
        let via = if l.lender == l.owner {
            String::new()
        } else {
            format!(", lent on by {}", l.lender)
        };
        lines.push((
            "loans",
            format!(
                "CPU {} of island {}{via}, now on {}",
                l.cpu, l.owner, l.borrower
            ),
        ));
    }
    lines.push(("nacks", {
        let n = nacks(o);
        if n == "-" {
            "none in a row".into()
        } else {
            format!("{n} in a row")
        }
    }));
    lines.push((
        "messages",
        format!("{} acknowledged, {} refused", o.acked, o.nacked),
    ));
    let mut out = format!("overlay {}\n", o.name);
    let mut last = "";
    for (key, text) in lines {
        let key = if key == last { "" } else { key };
        let _ = writeln!(out, "  {key:<9} {text}");
        if !key.is_empty() {
            last = key;
        }
    }
    out
}

/// The measurement lines of `overlay show` for a latency overlay, in the
/// same columns as [`overlay_detail`].
pub fn slo_detail(s: &atoll_proto::slo::SloStatus) -> String {
    let mut out = String::new();
    let mut line = |key: &str, text: String| {
        let _ = writeln!(out, "  {key:<9} {text}");
    };
    let measured = match (s.measured_us, s.slack) {
        (Some(m), Some(k)) => format!(
            "p{} {m:.0} us, SLO {} us, slack {k:.2}{}",
            s.percentile,
            s.slo_us,
            if k < 0.0 { " (missed)" } else { "" }
        ),
        _ if s.stale => format!(
            "unknown: stale, newest sample {:.1} s old (stale after {:.1} s), SLO {} us",
            s.sample_age_ms.unwrap_or(0) as f64 / 1e3,
            s.stale_after_ms.unwrap_or(0) as f64 / 1e3,
            s.slo_us
        ),
        _ => format!("nothing yet, SLO {} us", s.slo_us),
    };
    line("measured", measured);
    let mut source = format!(
        "{}, {} samples in the window, {} in all",
        s.source, s.samples, s.samples_total
    );
    if s.source != "report" {
        let _ = write!(
            source,
            ", {} timed out, {:.3} s of CPU time ({:.2}% of a CPU)",
            s.timeouts,
            s.probe_cpu_us as f64 / 1e6,
            s.source_cpu_share() * 100.0
        );
    }
    line("source", source);
    if let Some(e) = &s.error {
        line("error", e.clone());
    }
    if let Some(level) = s.be_level {
        line(
            "beside",
            format!(
                "{} as best effort, level {level}/{}",
                s.best_effort.join(", "),
                s.be_steps
            ),
        );
    }
    out
}

/// A coordination answer: the daemon's words.
pub fn coordinated(c: &Coordinated) -> String {
    format!("{c}\n")
}

/// A report's answer.
pub fn reported(r: &Reported) -> String {
    let mut o = format!(
        "overlay {}: the property {}\n",
        r.overlay,
        if r.holds { "holds" } else { "does not hold" }
    );
    if let Some(a) = &r.action {
        let _ = writeln!(o, "action: {a}");
    }
    o
}

/// The same as JSON, for `--json`.
pub fn coordinated_json(c: &Coordinated) -> serde_json::Value {
    serde_json::json!({ "reply": c.reply, "text": c.text })
}

/// A report's answer as JSON, for `--json`.
pub fn reported_json(r: &Reported) -> serde_json::Value {
    serde_json::json!({ "overlay": r.overlay, "holds": r.holds, "action": r.action })
}

#[cfg(test)]
mod tests {
    use atoll_client::coord::{CoordReply, LoanStatus, NackReason, OverlayOrigin, Property};

    use super::*;

    fn shop() -> OverlayStatus {
        OverlayStatus {
            name: "shop".into(),
            priority: 5,
            units: vec!["web/api".into(), "db/pg".into()],
            property: Property::LatencyPercentile {
                percentile: 99.0,
                bound_us: 5000,
            },
            origin: OverlayOrigin::Config,
            value: Some(7300.5),
            holds: Some(false),
            loans: vec![
                LoanStatus {
                    cpu: 3,
                    owner: "batch".into(),
                    lender: "batch".into(),
                    borrower: "web".into(),
                },
                LoanStatus {
                    cpu: 2,
                    owner: "db".into(),
                    lender: "batch".into(),
                    borrower: "web".into(),
                },
            ],
            nacks: vec![(Resource::Cores, 0), (Resource::CpuTime, 2)],
            acked: 14,
            nacked: 3,
        }
    }

    fn cap() -> OverlayStatus {
        OverlayStatus {
            name: "power".into(),
            priority: 200,
            units: vec![],
            property: Property::PlatformCpuCap { cpus: 1.5 },
            origin: OverlayOrigin::Api,
            value: None,
            holds: None,
            loans: vec![],
            nacks: vec![],
            acked: 0,
            nacked: 0,
        }
    }

    #[test]
    fn the_table_aligns_columns_and_marks_what_is_missing() {
        let t = overlay_table(&[cap(), shop()]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert_eq!(
            lines[0],
            "NAME   PRIORITY  PROPERTY                      VALUE   HOLDS  LOANS  NACKS"
        );
        assert_eq!(
            lines[1],
            "power  200       platform CPU cap of 1.5 CPUs  -       -      -      -"
        );
        assert_eq!(
            lines[2],
            "shop   5         p99 latency within 5000 us    7300.5  no     2-3    cpu-time 2"
        );
        assert_eq!(overlay_table(&[]), "no overlays\n");
    }

    #[test]
    fn the_detail_lists_every_loan_and_the_refusals() {
        assert_eq!(
            overlay_detail(&shop()),
            "overlay shop\n\
             \x20 priority  5\n\
             \x20 origin    config\n\
             \x20 property  p99 latency within 5000 us\n\
             \x20 units     web/api, db/pg\n\
             \x20 value     7300.5 (does not hold)\n\
             \x20 loans     CPU 3 of island batch, now on web\n\
             \x20           CPU 2 of island db, lent on by batch, now on web\n\
             \x20 nacks     cpu-time 2 in a row\n\
             \x20 messages  14 acknowledged, 3 refused\n"
        );
        let d = overlay_detail(&cap());
        assert!(d.contains("  units     none (platform-wide)\n"), "{d}");
        assert!(d.contains("  value     none reported yet\n"), "{d}");
        assert!(d.contains("  loans     none\n"), "{d}");
        assert!(d.contains("  nacks     none in a row\n"), "{d}");
        assert!(d.contains("  origin    api\n"), "{d}");
    }

    #[test]
    fn answers_print_the_daemons_words_or_the_replies_own() {
        let nack = Coordinated {
            reply: CoordReply::nack(NackReason::ZeroAmount),
            text: "refused: zero".into(),
        };
        assert_eq!(coordinated(&nack), "refused: zero\n");
        let silent = Coordinated {
            text: String::new(),
            ..nack.clone()
        };
        assert_eq!(
            coordinated(&silent),
            "nack: a borrow must ask for at least one CPU\n"
        );
        let j = coordinated_json(&nack);
        assert_eq!(j["reply"]["reason"]["nack"], "zero_amount");
        assert_eq!(j["text"], "refused: zero");
        let r = Reported {
            overlay: "shop".into(),
            holds: false,
            action: Some("tune up: ack".into()),
        };
        assert_eq!(
            reported(&r),
            "overlay shop: the property does not hold\naction: tune up: ack\n"
        );
        let r = Reported {
            holds: true,
            action: None,
            ..r
        };
        assert_eq!(reported(&r), "overlay shop: the property holds\n");
        assert_eq!(reported_json(&r)["action"], serde_json::Value::Null);
    }

    #[test]
    fn slo_detail_says_the_measurement_its_cost_and_the_best_effort_level() {
        let mut s = atoll_proto::slo::SloStatus {
            overlay: "shop".into(),
            source: "probe".into(),
            percentile: 99.0,
            slo_us: 1000,
            measured_us: Some(1250.0),
            slack: Some(-0.25),
            samples: 40,
            samples_total: 900,
            timeouts: 2,
            probe_cpu_us: 12_500,
            source_running_us: 2_500_000,
            error: Some("tcp://127.0.0.1:1: refused".into()),
            stale: false,
            sample_age_ms: Some(40),
            stale_after_ms: Some(6000),
            best_effort: vec!["batch".into()],
            be_level: Some(0),
            be_steps: 8,
        };
        assert_eq!(
            slo_detail(&s),
            "  measured  p99 1250 us, SLO 1000 us, slack -0.25 (missed)\n  \
             source    probe, 40 samples in the window, 900 in all, 2 timed out, 0.013 s of CPU time (0.50% of a CPU)\n  \
             error     tcp://127.0.0.1:1: refused\n  \
             beside    batch as best effort, level 0/8\n"
        );
        let mut stale = s.clone();
        stale.measured_us = None;
        stale.slack = None;
        stale.stale = true;
        stale.sample_age_ms = Some(7250);
        assert!(
            slo_detail(&stale).starts_with(
                "  measured  unknown: stale, newest sample 7.2 s old (stale after 6.0 s), SLO 1000 us\n"
            ),
            "{}",
            slo_detail(&stale)
        );
        s.source = "report".into();
        s.measured_us = None;
        s.error = None;
        s.be_level = None;
        assert_eq!(
            slo_detail(&s),
            "  measured  nothing yet, SLO 1000 us\n  source    report, 40 samples in the window, 900 in all\n"
        );
    }
}
