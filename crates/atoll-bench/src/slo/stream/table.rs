//! The text table of `atoll bench slo --scenario stream`, in `bench slo`'s
//! style: a header, one aligned row per configuration with its ratios to
//! the trigger off and the load averages it ran under, and the trigger's
//! effect beside seed 001's.

use std::fmt::Write as _;

use super::{trigger_effect, trigger_line, StreamReport, StreamRow, TRIGGER_OFF};
use crate::table::{aligned, machine_line, num};

/// `v` (a fraction) as a signed percentage, `-` for none.
fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{:+.1} %", v * 100.0))
}

/// The 1-minute load average after each rep, `a/b`.
fn loads(row: &StreamRow) -> String {
    let v: Vec<&str> = row
        .figures
        .samples
        .iter()
        .map(|s| s.loadavg.split_whitespace().next().unwrap_or("-"))
        .collect();
    v.join("/")
}

/// The report as text.
pub fn render_table(r: &StreamReport) -> String {
    let s = &r.settings.rig;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "atoll bench slo --scenario stream: a {} fps stream ({} x {} B packets, {:.2} Mbit/s, \
         {} work unit(s) of ~10 ms per frame, on time within {} ms) beside a UDP bulk transfer \
         on a {} Mbit/s veth link; consumer and hog on island CPUs {}; trigger {}; {} s x {} \
         rep(s) per configuration",
        s.fps,
        s.packets,
        s.bytes,
        s.stream_mbit(),
        s.work,
        s.deadline_ms,
        s.rate_mbit,
        s.island_cpus,
        trigger_line(s),
        s.seconds,
        s.reps
    );
    let _ = writeln!(t, "{}", machine_line(&r.machine, &r.loadavg));
    let _ = writeln!(
        t,
        "\nStream beside bulk and hog (x: ratio to {}, the trigger off; loadavg: 1-min load \
         after each rep):",
        TRIGGER_OFF.as_str()
    );
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            let f = &row.figures;
            vec![
                row.config.as_str().to_string(),
                format!("{:.2}", f.fps_mean),
                f.fps_min.to_string(),
                format!("{:.1}%", f.loss * 100.0),
                format!("{:.2}", f.bulk_mbit),
                format!("{:.0}", f.hog_chunks_per_s),
                num(f.triggers, 1),
                num(f.fps_ratio, 3),
                num(f.loss_ratio, 3),
                num(f.bulk_ratio, 3),
                num(f.hog_ratio, 3),
                loads(row),
            ]
        })
        .collect();
    t += &aligned(
        &[
            "config",
            "fps",
            "min fps",
            "loss",
            "bulk Mbit/s",
            "hog chunks/s",
            "triggers",
            "fps x",
            "loss x",
            "bulk x",
            "hog x",
            "loadavg",
        ],
        &rows,
        1,
    );
    let (fps, hog) = trigger_effect(&r.rows);
    if r.rows.iter().any(|x| x.config == TRIGGER_OFF)
        && r.rows.iter().any(|x| x.config == super::Config::Slo)
    {
        let _ = writeln!(
            t,
            "trigger on (slo) against off ({}): frames/s on time {}, the hog's chunks/s {} \
             (seed 001, Table 3: +9.77 %, 24.0 -> 26.6 frames/s; the other VM -6.25 %)",
            TRIGGER_OFF.as_str(),
            pct(fps),
            pct(hog)
        );
    }
    for (c, why) in &r.unavailable {
        let _ = writeln!(t, "{c}: unavailable: {why}");
    }
    let _ = writeln!(t, "command: {}", r.command);
    t
}

#[cfg(test)]
mod tests {
    use super::super::{rows, Config, StreamSettings};
    use super::*;
    use crate::netisland::Sample;

    fn sample(fps: u64, hog: f64, trig: Option<u64>, load: &str) -> Sample {
        Sample {
            frames_sent: 120,
            on_time_per_s: vec![fps; 4],
            late: 0,
            bulk_bytes: 8_000_000,
            triggers: trig,
            hog_chunks_per_s: hog,
            loadavg: format!("{load} 0.40 0.30 2/100 9"),
        }
    }

    fn report(configs: &[Config], samples: Vec<Vec<Sample>>) -> StreamReport {
        let settings = StreamSettings::new(true);
        StreamReport {
            rows: rows(configs, samples, &settings.rig),
            unavailable: vec![("isolate".into(), "refused".into())],
            settings,
            machine: crate::machine::Machine::default(),
            command: "atoll bench slo --scenario stream --quick".into(),
            loadavg: "0.5 0.4 0.3 1/100 5".into(),
        }
    }

    #[test]
    fn one_line_per_configuration_with_ratios_to_the_trigger_off() {
        let r = report(
            &[Config::Linux, Config::Static, Config::Slo],
            vec![
                vec![sample(0, 120.0, None, "1.10")],
                vec![sample(20, 100.0, Some(0), "1.20")],
                vec![
                    sample(22, 94.0, Some(7), "1.30"),
                    sample(22, 94.0, Some(7), "1.40"),
                ],
            ],
        );
        let text = render_table(&r);
        let lines: Vec<&str> = text.lines().collect();
        let head = lines.iter().position(|l| l.starts_with("config")).unwrap();
        let cols = |l: &str| l.split_whitespace().count();
        // "min fps", "bulk Mbit/s", "hog chunks/s", and the x columns'
        // names are two words each.
        assert_eq!(cols(lines[head]) - 7, cols(lines[head + 1]), "{text}");
        assert!(lines[head + 1].starts_with("linux"), "{text}");
        let off = lines[head + 2];
        assert!(off.starts_with("static") && off.contains("1.000"), "{text}");
        let on = lines[head + 3];
        assert!(on.starts_with("slo") && on.contains("1.100"), "{text}");
        assert!(on.contains("0.940") && on.contains("7.0"), "{text}");
        assert!(on.ends_with("1.30/1.40"), "{text}");
        assert!(
            text.contains("frames/s on time +10.0 %, the hog's chunks/s -6.0 %"),
            "{text}"
        );
        assert!(text.contains("(seed 001, Table 3: +9.77 %"), "{text}");
        assert!(text.contains("trigger socket_backlog_bytes = 65536 in [network.link]"));
        assert!(text.contains("isolate: unavailable: refused"), "{text}");
        assert!(text.contains("at end 0.5 0.4 0.3"), "{text}");
        assert!(text.contains("3 work unit(s)"), "{text}");
    }

    #[test]
    fn without_both_sides_of_the_trigger_there_is_no_effect_line() {
        let r = report(
            &[Config::Linux, Config::Slo],
            vec![
                vec![sample(0, 120.0, None, "1.10")],
                vec![sample(22, 94.0, Some(7), "1.30")],
            ],
        );
        let text = render_table(&r);
        assert!(!text.contains("trigger on (slo)"), "{text}");
        assert!(!text.contains("1.100"), "no ratios without static: {text}");
    }
}
