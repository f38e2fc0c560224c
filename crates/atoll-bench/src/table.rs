//! What the text tables of the benchmark reports share: numbers with a
//! dash for none, the load average's three figures, the machine's line,
//! and aligned columns.

use std::fmt::Write as _;

/// `v` with `digits` decimals, `-` when there is none.
pub(crate) fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The first three figures of a `/proc/loadavg` line.
pub(crate) fn load3(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// The `machine:` line of a report measured on `m`, which ended at load
/// average `end` (a `/proc/loadavg` line).
pub(crate) fn machine_line(m: &crate::machine::Machine, end: &str) -> String {
    format!(
        "machine: {} CPUs, {} backend, kernel {}, load average at start {}, at end {}",
        m.cpus,
        m.backend,
        m.kernel,
        load3(&m.loadavg),
        load3(end)
    )
}

/// `head` and `rows` in columns as wide as their widest cell (in
/// characters), two spaces apart: the first `left` columns aligned left,
/// the others right.
pub(crate) fn aligned(head: &[&str], rows: &[Vec<String>], left: usize) -> String {
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i < left {
                let _ = write!(l, "{c:<w$}  ");
            } else {
                let _ = write!(l, "{c:>w$}  ");
            }
        }
        l.trim_end().to_string()
    };
    let mut t = String::new();
    let _ = writeln!(t, "{}", line(head.to_vec()));
    for row in rows {
        let _ = writeln!(t, "{}", line(row.iter().map(String::as_str).collect()));
    }
    t
}
