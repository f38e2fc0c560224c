use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::CpuSet;

use super::*;

fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

fn parse(text: &str) -> atoll_core::spec::PlatformSpec {
    let topo = Topology::synthetic(SyntheticShape {
        packages: 1,
        nodes_per_package: 1,
        llcs_per_node: 1,
        cores_per_llc: 4,
        threads_per_core: 1,
        memory_per_node: 1 << 30,
    });
    atoll_config::parse(text, "bench.toml", &topo).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn fig(mean: f64, p99: f64) -> ClassFigures {
    ClassFigures {
        count: 10,
        mean_ms: mean,
        p99_ms: p99,
        sd_ms: 1.0,
    }
}

fn sample(light: f64, heavy: f64, tunes: u64) -> WebSample {
    WebSample {
        light: fig(light, light * 2.0),
        heavy: fig(heavy, heavy * 2.0),
        sent: 20,
        errors: 0,
        throughput_per_s: 40.0,
        tunes_sent: tunes,
        tunes_acked: tunes,
        bulk_bytes: 10_000_000,
        hog_chunks_per_s: 100.0,
    }
}

#[test]
fn the_default_web_settings_fit_the_link_and_bad_ones_are_named() {
    let w = WebSettings::default();
    assert!(w.check(20).is_ok());
    // 40/s x (0.25 x 48 KiB + 0.75 x 1 KiB) x 8 bits.
    assert!((w.reply_mbit() - 40.0 * (12_288.0 + 768.0) * 8.0 / 1e6).abs() < 1e-9);
    assert!(w
        .check(4)
        .unwrap_err()
        .contains("more than the 4 Mbit/s link"));
    for (bad, what) in [
        (
            WebSettings {
                rate: 0.0,
                ..WebSettings::default()
            },
            "--rate",
        ),
        (
            WebSettings {
                heavy_share: 2.0,
                ..WebSettings::default()
            },
            "heavy share",
        ),
        (
            WebSettings {
                bound_ms: -1.0,
                ..WebSettings::default()
            },
            "--bound-ms",
        ),
        (
            WebSettings {
                conns: 0,
                ..WebSettings::default()
            },
            "connection",
        ),
    ] {
        assert!(bad.check(20).unwrap_err().contains(what), "{bad:?}");
    }
    let args = w.front_args();
    assert_eq!(args.len(), 18);
    assert!(args.windows(2).any(|p| p == ["--heavy-bytes", "49152"]));
}

#[test]
fn web_configurations_parse_and_only_both_has_the_overlay() {
    let s = Settings::new(false);
    let (host, island) = super::super::config::layout(&set("0-3")).unwrap();
    let cfg = |c| daemon_config(c, &host, &island, "atlb1h", &s);
    assert_eq!(cfg(Config::None), None);
    let cpu = parse(&cfg(Config::Cpu).unwrap());
    assert!(cpu.network.is_empty() && cpu.overlays.is_empty());
    let net_text = cfg(Config::Net).unwrap();
    let net = parse(&net_text);
    assert_eq!(net.network.len(), 1);
    assert!(net.overlays.is_empty());
    // Static, equal shares for the back end and the bulk.
    assert_eq!(net_text.matches("share = 100\nprio = 3").count(), 2);
    let both = parse(&cfg(Config::Both).unwrap());
    assert_eq!(both.overlays.len(), 1);
    assert_eq!(both.network.len(), 1);
    assert!(cfg(Config::Both)
        .unwrap()
        .contains("units = [\"front\", \"back\"]"));
    // The single-tune configurations have `both`'s daemon: only what the
    // front end tunes differs (the first line names the configuration).
    let body = |c| {
        let t = cfg(c).unwrap();
        assert!(t.lines().next().unwrap().contains(c.as_str()), "{t}");
        t.lines().skip(1).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(body(Config::BothBw), body(Config::Both));
    assert_eq!(body(Config::BothCpu), body(Config::Both));
    assert_ne!(body(Config::Net), body(Config::Both));
}

#[test]
fn front_reports_are_read_and_strangers_refused() {
    let v = serde_json::json!({
        "kind": "web-front", "sent": 80, "errors": 1, "throughput_per_s": 39.5,
        "light": {"count": 60, "mean_ms": 2.5, "sd_ms": 1.0, "p99_ms": 9.0},
        "heavy": {"count": 19, "mean_ms": 40.0, "sd_ms": 12.0, "p99_ms": 80.0},
        "tunes": {"sent": 6, "acked": 4},
    });
    let s = parse_front(&v).unwrap();
    assert_eq!(s.light.count, 60);
    assert_eq!(s.heavy.p99_ms, 80.0);
    assert_eq!((s.tunes_sent, s.tunes_acked, s.errors), (6, 4, 1));
    assert!(parse_front(&serde_json::json!({"kind": "spin"})).is_err());
}

#[test]
fn rows_average_the_reps_and_ratios_go_to_none_and_to_net() {
    let mut rows = vec![
        web_row(Config::None, vec![sample(4.0, 100.0, 0)], 4.0),
        web_row(Config::Net, vec![sample(2.0, 50.0, 0)], 4.0),
        web_row(
            Config::Both,
            vec![sample(2.0, 20.0, 4), sample(2.0, 30.0, 6)],
            4.0,
        ),
    ];
    web_ratios(&mut rows);
    let both = &rows[2];
    assert_eq!(both.heavy.mean_ms, 25.0);
    assert_eq!(both.heavy.count, 20);
    assert_eq!(both.tunes_sent, 5.0);
    assert_eq!(both.bulk_mbit, 20.0);
    assert_eq!(both.to_none.heavy_mean, Some(0.25));
    assert_eq!(both.to_net.heavy_mean, Some(0.5));
    assert_eq!(both.to_net.heavy_p99, Some(0.5));
    assert_eq!(rows[1].to_net.light_mean, Some(1.0));
    // Without `net` there is no ratio to it.
    let mut alone = vec![web_row(Config::Both, vec![sample(1.0, 1.0, 0)], 4.0)];
    web_ratios(&mut alone);
    assert_eq!(alone[0].to_net, Ratios::default());
}

#[test]
fn the_web_table_has_a_line_per_configuration_and_both_ratios() {
    let mut s = Settings::new(true);
    s.scenario = super::super::Scenario::Web;
    let mut rows = vec![
        web_row(Config::None, vec![sample(4.0, 100.0, 0)], 4.0),
        web_row(Config::Net, vec![sample(2.0, 50.0, 0)], 4.0),
        web_row(Config::Both, vec![sample(2.0, 35.0, 8)], 4.0),
    ];
    web_ratios(&mut rows);
    let r = NetIslandReport {
        rows: vec![],
        web_rows: rows,
        unavailable: vec![],
        settings: s,
        machine: crate::machine::Machine::default(),
        command: "atoll bench netisland --scenario web --quick".into(),
        loadavg: "1.5 1.0 0.5 1/100 5".into(),
    };
    // Through the bench's one entry point: the scenario picks the table.
    let text = super::super::render_table(&r);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("--scenario web"), "{text}");
    assert!(lines[3].starts_with("config") && lines[3].contains("heavy p99"));
    assert!(lines[6].starts_with("both") && lines[6].contains("35.0"));
    assert!(lines[6].contains(" 8 "), "{text}");
    assert!(lines[7].starts_with("ratios"), "{text}");
    let both = lines[11];
    assert!(both.starts_with("both"), "{text}");
    // Heavy mean 35 against none's 100 and net's 50.
    assert!(both.contains("0.350") && both.contains("0.700"), "{text}");
    assert!(text.contains("at end 1.5 1.0 0.5"), "{text}");
    // A saved report reads back with its scenario.
    let back: NetIslandReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(super::super::render_table(&back), text);
}

#[test]
fn the_single_tune_rows_are_reported_like_the_others() {
    let mut s = Settings::new(true);
    s.scenario = super::super::Scenario::Web;
    s.configs = vec![Config::Net, Config::Both, Config::BothBw, Config::BothCpu];
    let mut rows = vec![
        web_row(Config::Net, vec![sample(2.0, 50.0, 0)], 4.0),
        web_row(Config::Both, vec![sample(2.0, 25.0, 8)], 4.0),
        web_row(Config::BothBw, vec![sample(2.0, 30.0, 5)], 4.0),
        web_row(Config::BothCpu, vec![sample(2.0, 45.0, 3)], 4.0),
    ];
    web_ratios(&mut rows);
    // Heavy mean against net's 50: 0.6 and 0.9; no `none`, no ratio to it.
    assert_eq!(rows[2].to_net.heavy_mean, Some(0.6));
    assert_eq!(rows[3].to_net.heavy_mean, Some(0.9));
    assert_eq!(rows[3].to_none, Ratios::default());
    let r = NetIslandReport {
        rows: vec![],
        web_rows: rows,
        unavailable: vec![],
        settings: s,
        machine: crate::machine::Machine::default(),
        command: "atoll bench netisland --scenario web --configs net,both,both-bw,both-cpu".into(),
        loadavg: "0.1 0.1 0.1 1/100 5".into(),
    };
    let text = super::super::render_table(&r);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains("both-bw the bandwidth tune alone"),
        "{text}"
    );
    let line = |name: &str, nth: usize| {
        text.lines()
            .filter(|l| l.split_whitespace().next() == Some(name))
            .nth(nth)
            .unwrap_or_else(|| panic!("no {name} line {nth}:\n{text}"))
            .to_string()
    };
    // The figures: heavy mean and tunes sent.
    assert!(line("both-bw", 0).contains("30.0") && line("both-bw", 0).contains(" 5 "));
    assert!(line("both-cpu", 0).contains("45.0") && line("both-cpu", 0).contains(" 3 "));
    // The ratios: to none empty, heavy mean to net.
    let bw = line("both-bw", 1);
    assert!(bw.contains("0.600") && bw.contains(" - "), "{text}");
    assert!(line("both-cpu", 1).contains("0.900"), "{text}");
    let back: NetIslandReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back.web_rows[2].config, Some(Config::BothBw));
    assert_eq!(super::super::render_table(&back), text);
}

#[test]
fn a_class_with_no_completed_request_has_no_time_and_no_ratio() {
    let mut none_done = sample(1.0, 1.0, 0);
    none_done.light = ClassFigures::default();
    none_done.heavy = ClassFigures::default();
    let mut rows = vec![
        web_row(Config::Net, vec![sample(2.0, 50.0, 0)], 4.0),
        // One rep completed nothing: the other rep's times, not halved.
        web_row(
            Config::Cpu,
            vec![none_done.clone(), sample(2.0, 40.0, 0)],
            4.0,
        ),
        web_row(Config::None, vec![none_done], 4.0),
    ];
    web_ratios(&mut rows);
    assert_eq!(rows[1].heavy.mean_ms, 40.0);
    assert_eq!(rows[1].to_net.heavy_mean, Some(0.8));
    assert_eq!(rows[2].heavy.count, 0);
    assert_eq!(rows[2].to_net, Ratios::default());
    assert_eq!(rows[0].to_none, Ratios::default());
    let mut s = Settings::new(true);
    s.scenario = super::super::Scenario::Web;
    let r = NetIslandReport {
        rows: vec![],
        web_rows: rows,
        unavailable: vec![],
        settings: s,
        machine: crate::machine::Machine::default(),
        command: "c".into(),
        loadavg: String::new(),
    };
    let text = super::super::render_table(&r);
    let none = text
        .lines()
        .find(|l| l.starts_with("none"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(!none.contains("0.0 ") && none.contains(" - "), "{text}");
}
