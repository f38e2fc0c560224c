use atoll_core::topology::{SyntheticShape, Topology};
use atoll_core::CpuSet;

use super::*;
use crate::netisland::config::{layout, setup_config};
use crate::stats::round;

fn sample(per: &[u64], sent: u64, bulk: u64, trig: Option<u64>, hog: f64) -> Sample {
    Sample {
        frames_sent: sent,
        on_time_per_s: per.to_vec(),
        late: 0,
        bulk_bytes: bulk,
        triggers: trig,
        hog_chunks_per_s: hog,
        loadavg: "0.50 0.40 0.30 2/100 9".into(),
    }
}

fn text(config: Config, s: &netisland::Settings) -> Option<String> {
    let (host, island) = layout(&CpuSet::parse("0-3").unwrap()).unwrap();
    setup_config(setup(config), &host, &island, "atlb1h", s)
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
    atoll_config::parse(text, "stream.toml", &topo).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The lines of `a` not in `b`, comments left out.
fn added<'a>(a: &'a str, b: &str) -> Vec<&'a str> {
    a.lines()
        .filter(|l| !l.starts_with('#') && !b.lines().any(|m| m == *l))
        .collect()
}

#[test]
fn each_configuration_runs_what_the_table_says() {
    assert_eq!(setup(Config::Linux), Setup::from(RigConfig::None));
    assert_eq!(setup(Config::Static), Setup::from(RigConfig::Net));
    assert_eq!(
        setup(Config::Isolate),
        Setup {
            config: RigConfig::Net,
            isolate: true
        }
    );
    assert_eq!(setup(Config::Slo), Setup::from(RigConfig::Both));
    assert_eq!(TRIGGER_OFF, Config::Static);
    let s = StreamSettings::new(false);
    assert_eq!(s.configs, Config::ALL.to_vec());
    assert_eq!(
        s.rig.configs,
        [
            RigConfig::None,
            RigConfig::Net,
            RigConfig::Net,
            RigConfig::Both
        ]
    );
    assert_eq!((s.rig.work, s.rig.reps, s.rig.seconds), (3, 2, 20.0));
    assert_eq!(s.rig.scenario, Scenario::Stream);
}

/// The trigger on/off comparison is the same setup but the trigger: `slo`'s
/// daemon config is `static`'s plus the overlay the trigger goes to and
/// the trigger's key, for either key; `isolate` is `static` in mode
/// `isolate`; `linux` has no daemon.
#[test]
fn the_trigger_on_differs_from_off_by_the_trigger_alone() {
    for (trigger, key_line, overlay_has_it) in [
        (
            TriggerKey::SocketBacklog,
            "socket_backlog_bytes = 65536",
            false,
        ),
        (TriggerKey::RecvQueue, "react_recv_queue = 65536", true),
    ] {
        let mut s = StreamSettings::new(false).rig;
        s.trigger = trigger;
        let off = text(Config::Static, &s).unwrap();
        let on = text(Config::Slo, &s).unwrap();
        let mut want = vec![
            "[overlay.stream]",
            "units = [\"stream\", \"consumer\"]",
            "throughput_floor = 1",
        ];
        if overlay_has_it {
            want.push(key_line);
        } else {
            want.insert(0, key_line);
        }
        assert_eq!(added(&on, &off), want, "{trigger:?}:\n{on}");
        assert!(added(&off, &on).is_empty(), "{off}");
        let (off, on) = (parse(&off), parse(&on));
        assert!(off.overlays.is_empty() && on.overlays.len() == 1);
        assert_eq!(off.network.len(), 1);
        assert_eq!(
            on.overlays[0].react.recv_queue.is_some(),
            overlay_has_it,
            "{trigger:?}"
        );
        // The overlay does nothing but receive the trigger: no other
        // reactive key, and a property nothing reports to.
        let react = &on.overlays[0].react;
        assert_eq!((react.pressure, react.utilization), (None, None));
        assert!(on.overlays[0].slo.best_effort.is_empty());
    }
    let s = StreamSettings::new(false).rig;
    let (st, iso) = (
        text(Config::Static, &s).unwrap(),
        text(Config::Isolate, &s).unwrap(),
    );
    assert_eq!(added(&iso, &st), ["[isolation]", "mode = \"isolate\""]);
    assert!(added(&st, &iso).is_empty());
    assert_eq!(text(Config::Linux, &s), None);
}

#[test]
fn picked_flags_apply_and_the_redis_ones_are_refused() {
    let mut s = StreamSettings::new(true);
    assert_eq!((s.rig.seconds, s.rig.reps), (4.0, 1));
    s.pick(Picked {
        configs: vec![Config::Static, Config::Slo],
        seconds: Some(15.0),
        warmup_s: None,
        work: Some(4),
        slo_us: None,
    })
    .unwrap();
    assert_eq!(s.configs, [Config::Static, Config::Slo]);
    assert_eq!(s.rig.configs, [RigConfig::Net, RigConfig::Both]);
    assert_eq!((s.rig.seconds, s.rig.work), (15.0, 4));
    assert_eq!(s.steps(), 2 + 2);
    let before = s.clone();
    for bad in [
        Picked {
            warmup_s: Some(1.0),
            ..Picked::default()
        },
        Picked {
            slo_us: Some(1000),
            ..Picked::default()
        },
    ] {
        let e = s.pick(bad).unwrap_err();
        assert!(e.contains("--warmup and --slo-us"), "{e}");
    }
    let e = s
        .pick(Picked {
            work: Some(2000),
            ..Picked::default()
        })
        .unwrap_err();
    assert!(
        e.contains("--work 2000") && e.contains("at most 100"),
        "{e}"
    );
    assert_eq!(s, before, "a refused pick changes nothing");
    // Nothing picked: the defaults stay.
    let mut d = StreamSettings::new(false);
    d.pick(Picked::default()).unwrap();
    assert_eq!(d, StreamSettings::new(false));
}

#[test]
fn ratios_are_to_the_trigger_off() {
    let s = StreamSettings::new(true).rig;
    // Seconds 1 and 2 count: off 20 fps, on 22 (+10 %); the hog 100 -> 94.
    let rows = rows(
        &Config::ALL,
        vec![
            vec![sample(&[0, 0, 0, 0], 120, 8_000_000, None, 120.0)],
            vec![sample(&[9, 20, 20, 9], 120, 6_000_000, Some(0), 100.0)],
            vec![],
            vec![sample(&[9, 22, 22, 9], 120, 6_000_000, Some(7), 94.0)],
        ],
        &s,
    );
    let names: Vec<Config> = rows.iter().map(|r| r.config).collect();
    assert_eq!(names, [Config::Linux, Config::Static, Config::Slo]);
    let (linux, off, on) = (&rows[0].figures, &rows[1].figures, &rows[2].figures);
    assert_eq!(off.fps_ratio, Some(1.0));
    assert_eq!((on.fps_mean, on.fps_ratio), (22.0, Some(1.1)));
    assert_eq!(on.hog_ratio, Some(0.94));
    assert_eq!(on.triggers, Some(7.0));
    assert_eq!(linux.triggers, None, "no network island, no trigger figure");
    assert_eq!(linux.fps_ratio, Some(0.0));
    assert_eq!(linux.bulk_ratio, Some(round(8.0 / 6.0, 3)));
    let (fps, hog) = trigger_effect(&rows);
    assert!((fps.unwrap() - 0.1).abs() < 1e-9, "{fps:?}");
    assert!((hog.unwrap() + 0.06).abs() < 1e-9, "{hog:?}");
}

#[test]
fn without_the_trigger_off_there_are_no_ratios_and_no_effect() {
    let s = StreamSettings::new(true).rig;
    let rows = rows(
        &[Config::Linux, Config::Slo],
        vec![
            vec![sample(&[0, 5, 5, 0], 120, 1, None, 1.0)],
            vec![sample(&[0, 9, 9, 0], 120, 1, Some(1), 1.0)],
        ],
        &s,
    );
    assert!(rows.iter().all(|r| r.figures.fps_ratio.is_none()));
    assert_eq!(trigger_effect(&rows), (None, None));
    // The trigger off delivered nothing: no frame ratio, the hog's still.
    let rows = super::rows(
        &[Config::Static, Config::Slo],
        vec![
            vec![sample(&[0, 0, 0, 0], 120, 1, Some(0), 50.0)],
            vec![sample(&[0, 28, 28, 0], 120, 1, Some(80), 40.0)],
        ],
        &s,
    );
    let (fps, hog) = trigger_effect(&rows);
    assert_eq!(fps, None);
    assert!((hog.unwrap() + 0.2).abs() < 1e-9, "{hog:?}");
}

#[test]
fn settings_and_reports_round_trip_as_json() {
    let mut s = StreamSettings::new(false);
    s.rig.trigger = TriggerKey::RecvQueue;
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(
        v["configs"],
        serde_json::json!(["linux", "static", "isolate", "slo"])
    );
    assert_eq!(v["rig"]["trigger"], "recv-queue");
    assert_eq!(
        v["rig"]["configs"],
        serde_json::json!(["none", "net", "net", "both"])
    );
    let back: StreamSettings = serde_json::from_value(v).unwrap();
    assert_eq!(back, s);
    // A netisland report saved before the trigger key existed reads as
    // the network island's.
    let mut old = serde_json::to_value(netisland::Settings::new(true)).unwrap();
    old.as_object_mut().unwrap().remove("trigger");
    let old: netisland::Settings = serde_json::from_value(old).unwrap();
    assert_eq!(old.trigger, TriggerKey::SocketBacklog);
    assert_eq!(
        trigger_line(&old),
        "socket_backlog_bytes = 65536 in [network.link]"
    );
    assert_eq!(
        trigger_line(&s.rig),
        "react_recv_queue = 65536 in [overlay.stream]"
    );
    for t in [TriggerKey::SocketBacklog, TriggerKey::RecvQueue] {
        assert_eq!(t.as_str().parse::<TriggerKey>(), Ok(t));
    }
    assert!("react_recv_queue".parse::<TriggerKey>().is_err());
}
