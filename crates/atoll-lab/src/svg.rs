//! SVG plots of a run, written by hand: one file per run with three
//! stacked line charts over simulated time — island utilization (used /
//! allowed), island sizes (CPUs allowed), and window p99 latency per app
//! that has one. Each chart has labelled axes and a legend.

use crate::run::RunResult;

const W: f64 = 760.0;
const H: f64 = 220.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 36.0;
const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// One named line of (x, y) points (y `None`: a gap).
struct Line {
    name: String,
    pts: Vec<(f64, Option<f64>)>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A round axis top at or above `v`.
fn nice(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let e = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * e >= v {
            return m * e;
        }
    }
    10.0 * e
}

fn chart(out: &mut String, y0: f64, title: &str, ylabel: &str, t_end: f64, lines: &[Line]) {
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let ymax = nice(
        lines
            .iter()
            .flat_map(|l| l.pts.iter().filter_map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let xmax = nice(t_end);
    let x = |t: f64| LEFT + pw * t / xmax;
    let y = |v: f64| y0 + TOP + ph * (1.0 - v / ymax);
    out.push_str(&format!(
        "<text x=\"{LEFT}\" y=\"{:.1}\" font-weight=\"bold\">{}</text>\n",
        y0 + 18.0,
        esc(title)
    ));
    for k in 0..=5 {
        let v = ymax * f64::from(k) / 5.0;
        let yy = y(v);
        out.push_str(&format!(
            "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            LEFT + pw,
            LEFT - 4.0,
            yy + 4.0,
            trim(v)
        ));
        let t = xmax * f64::from(k) / 5.0;
        out.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            x(t),
            y0 + H - BOTTOM + 16.0,
            trim(t)
        ));
    }
    out.push_str(&format!(
        "<rect x=\"{LEFT}\" y=\"{:.1}\" width=\"{pw:.1}\" height=\"{ph:.1}\" fill=\"none\" stroke=\"#333\"/>\n\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">simulated time, s</text>\n\
         <text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        y0 + TOP,
        LEFT + pw / 2.0,
        y0 + H - 4.0,
        y0 + TOP + ph / 2.0,
        esc(ylabel)
    ));
    if lines.is_empty() {
        out.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#888\">no data</text>\n",
            LEFT + pw / 2.0,
            y0 + TOP + ph / 2.0
        ));
    }
    for (i, l) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut d = String::new();
        let mut pen = false;
        for &(t, v) in &l.pts {
            match v {
                Some(v) => {
                    d.push_str(&format!(
                        "{}{:.1},{:.1} ",
                        if pen { "L" } else { "M" },
                        x(t),
                        y(v)
                    ));
                    pen = true;
                }
                None => pen = false,
            }
        }
        out.push_str(&format!(
            "<path d=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"/>\n",
            d.trim_end()
        ));
        let ly = y0 + TOP + 8.0 + 16.0 * i as f64;
        out.push_str(&format!(
            "<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{color}\" stroke-width=\"3\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            LEFT + pw + 10.0,
            LEFT + pw + 30.0,
            LEFT + pw + 36.0,
            ly + 4.0,
            esc(&l.name)
        ));
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The SVG document for `r`.
pub fn plot(r: &RunResult) -> String {
    let t_end = r.series.last().map_or(1.0, |p| p.t_s);
    let names: Vec<String> = r
        .series
        .first()
        .map(|p| p.islands.iter().map(|i| i.name.clone()).collect())
        .unwrap_or_default();
    let island = |f: &dyn Fn(&crate::run::IslandPoint) -> Option<f64>| -> Vec<Line> {
        names
            .iter()
            .enumerate()
            .map(|(k, n)| Line {
                name: n.clone(),
                pts: r
                    .series
                    .iter()
                    .skip(1)
                    .map(|p| (p.t_s, p.islands.get(k).and_then(f)))
                    .collect(),
            })
            .collect()
    };
    let util = island(&|i| (i.cpus > 0.0).then(|| i.used / i.cpus));
    let sizes = island(&|i| Some(i.cpus));
    let lat: Vec<Line> = r
        .report
        .apps
        .iter()
        .enumerate()
        .filter(|(_, a)| a.kind == "client")
        .map(|(k, a)| Line {
            name: a.name.clone(),
            pts: r
                .series
                .iter()
                .map(|p| (p.t_s, p.apps.get(k).and_then(|x| x.latency_p99_ms)))
                .collect(),
        })
        .collect();
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{:.0}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{LEFT}\" y=\"16\" font-size=\"14\">{} / {} ({} CPUs, {} threads)</text>\n",
        3.0 * H + 20.0,
        esc(&r.scenario),
        esc(&r.variant),
        r.cpus,
        r.threads
    );
    chart(
        &mut out,
        20.0,
        "Island utilization (CPUs used / CPUs allowed)",
        "utilization",
        t_end,
        &util,
    );
    chart(
        &mut out,
        20.0 + H,
        "Island size (CPUs allowed: cpuset or cpu.max)",
        "CPUs",
        t_end,
        &sizes,
    );
    chart(
        &mut out,
        20.0 + 2.0 * H,
        "Client latency (p99 of each window)",
        "p99, ms",
        t_end,
        &lat,
    );
    out.push_str("</svg>\n");
    out
}
