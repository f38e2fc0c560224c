//! The text exposition format (version 0.0.4): families with HELP and
//! TYPE lines, escaped label values, exact decimals, histograms as
//! cumulative `_bucket` series with `le` (ending at `+Inf`), `_sum` and
//! `_count`.

use std::fmt::Write as _;

use crate::telemetry::histogram::Histogram;

/// Escapes a label value: backslash, double quote and newline.
pub(super) fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `n` thousandths (or millionths) as an exact decimal, without trailing
/// zeros: `1500, 3` -> `1.5`.
pub(super) fn decimal(n: u64, digits: u32) -> String {
    let scale = 10u64.pow(digits);
    let (int, frac) = (n / scale, n % scale);
    if frac == 0 {
        return int.to_string();
    }
    let frac = format!("{frac:0width$}", width = digits as usize);
    format!("{int}.{}", frac.trim_end_matches('0'))
}

/// Builds the exposition text one family at a time.
pub(super) struct Out {
    pub(super) text: String,
}

impl Out {
    /// Writes a family: HELP and TYPE, then its samples; nothing at all when
    /// there are no samples.
    pub(super) fn family(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: Vec<(String, String)>,
    ) {
        if samples.is_empty() {
            return;
        }
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            if labels.is_empty() {
                let _ = writeln!(self.text, "{name} {value}");
            } else {
                let _ = writeln!(self.text, "{name}{{{labels}}} {value}");
            }
        }
    }
}

pub(super) fn labels(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect::<Vec<_>>()
        .join(",")
}

impl Out {
    /// Writes a histogram family: for each series (its labels, maybe
    /// empty), the cumulative buckets with `le` in seconds, then `_sum` and
    /// `_count`; nothing at all when there is no series.
    pub(super) fn histogram(&mut self, name: &str, help: &str, series: &[(String, &Histogram)]) {
        if series.is_empty() {
            return;
        }
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} histogram");
        for (labels, h) in series {
            let sep = if labels.is_empty() { "" } else { "," };
            for (bound, n) in h.cumulative() {
                let le = bound.map_or_else(|| "+Inf".to_string(), |us| decimal(us, 6));
                let _ = writeln!(self.text, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {n}");
            }
            let braces = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{labels}}}")
            };
            let sum_ns = u64::try_from(h.sum().as_nanos()).unwrap_or(u64::MAX);
            let _ = writeln!(self.text, "{name}_sum{braces} {}", decimal(sum_ns, 9));
            let _ = writeln!(self.text, "{name}_count{braces} {}", h.count());
        }
    }
}
