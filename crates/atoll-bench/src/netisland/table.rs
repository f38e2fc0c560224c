//! The text table of `atoll bench netisland`.

use std::fmt::Write as _;

use super::NetIslandReport;
use crate::table::{aligned, machine_line, num};

/// The report as text.
pub fn render_table(r: &NetIslandReport) -> String {
    if r.settings.scenario == super::Scenario::Web {
        return super::web::render_web(r);
    }
    let s = &r.settings;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "atoll bench netisland: a {} fps stream ({} x {} B packets, {:.2} Mbit/s, {} work \
         unit(s) per frame, on time within {} ms) beside a UDP bulk transfer on a {} Mbit/s \
         veth link; consumer and hog on island CPUs {}; {} s x {} rep(s) per configuration",
        s.fps,
        s.packets,
        s.bytes,
        s.stream_mbit(),
        s.work,
        s.deadline_ms,
        s.rate_mbit,
        s.island_cpus,
        s.seconds,
        s.reps
    );
    let _ = writeln!(t, "{}", machine_line(&r.machine, &r.loadavg));
    let head = [
        "config",
        "fps",
        "min fps",
        "loss",
        "bulk Mbit/s",
        "triggers",
        "hog chunks/s",
        "fps/none",
        "loss/none",
        "bulk/none",
        "hog/none",
    ];
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            vec![
                row.config.map_or("-", |c| c.as_str()).to_string(),
                format!("{:.2}", row.fps_mean),
                row.fps_min.to_string(),
                format!("{:.1}%", row.loss * 100.0),
                format!("{:.2}", row.bulk_mbit),
                num(row.triggers, 1),
                format!("{:.0}", row.hog_chunks_per_s),
                num(row.fps_ratio, 3),
                num(row.loss_ratio, 3),
                num(row.bulk_ratio, 3),
                num(row.hog_ratio, 3),
            ]
        })
        .collect();
    t.push_str(&aligned(&head, &rows, 1));
    for (c, why) in &r.unavailable {
        let _ = writeln!(t, "{c}: unavailable: {why}");
    }
    let _ = writeln!(t, "command: {}", r.command);
    t
}

#[cfg(test)]
mod tests {
    use super::super::{row, with_ratios, Config, Sample, Settings};
    use super::*;

    #[test]
    fn one_line_per_configuration_with_ratios_to_none() {
        let s = Settings::new(true);
        let sample = |fps: u64, trig| Sample {
            frames_sent: 120,
            on_time_per_s: vec![fps; 4],
            late: 0,
            bulk_bytes: 8_000_000,
            triggers: trig,
            hog_chunks_per_s: 50.0,
            loadavg: String::new(),
        };
        let mut rows = vec![
            row(Config::None, vec![sample(20, None)], &s),
            row(Config::Both, vec![sample(22, Some(7))], &s),
        ];
        with_ratios(&mut rows);
        let r = NetIslandReport {
            rows,
            web_rows: vec![],
            unavailable: vec![("cpu".into(), "refused".into())],
            settings: s,
            machine: crate::machine::Machine::default(),
            command: "atoll bench netisland --quick".into(),
            loadavg: "0.5 0.4 0.3 1/100 5".into(),
        };
        let text = render_table(&r);
        let lines: Vec<&str> = text.lines().collect();
        let cols = |l: &str| l.split_whitespace().count();
        // "min fps", "bulk Mbit/s", "hog chunks/s" are two words each.
        assert_eq!(cols(lines[2]) - 3, cols(lines[3]), "{text}");
        assert!(lines[2].starts_with("config"), "{text}");
        assert!(
            lines[3].starts_with("none") && lines[3].contains("1.000"),
            "{text}"
        );
        assert!(
            lines[4].starts_with("both") && lines[4].contains("1.100"),
            "{text}"
        );
        assert!(lines[4].contains("7.0"), "{text}");
        assert!(text.contains("cpu: unavailable: refused"), "{text}");
        assert!(text.contains("at end 0.5 0.4 0.3"), "{text}");
    }
}
