//! An overlay's latency source (`report`, `probe`, `access_log`) and its
//! best-effort units: every key read, keys of another source refused at
//! their line, and the checks of the platform description.

mod common;

use std::time::Duration;

use atoll_core::slo::{
    AccessLogSpec, BeConfig, LatencySource, LogFormat, ProbeSpec, ProbeTarget, SloConfig, TimeUnit,
};
use common::*;

const BASE: &str = r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit.api]
island = "web"
[unit.batch]
island = "web"
[overlay.shop]
units = ["api"]
latency_us = 2000
"#;

fn with(extra: &str) -> String {
    format!("{BASE}{extra}")
}

#[test]
fn the_default_is_reported_latency_and_nothing_beside() {
    let spec = ok(BASE, &vm8());
    assert_eq!(spec.overlays[0].slo, SloConfig::default());
}

#[test]
fn a_probe_and_its_keys() {
    let spec = ok(
        &with(
            "latency_source = \"probe\"\nprobe = \"http://127.0.0.1:8080/health\"\nprobe_every_ms = 250\nprobe_timeout_ms = 50\nwindow_ms = 5000\nbest_effort = [\"batch\"]\n",
        ),
        &vm8(),
    );
    assert_eq!(
        spec.overlays[0].slo,
        SloConfig {
            source: LatencySource::Probe(ProbeSpec {
                target: ProbeTarget::Http {
                    addr: "127.0.0.1:8080".into(),
                    path: "/health".into()
                },
                every: Duration::from_millis(250),
                timeout: Duration::from_millis(50),
            }),
            window: Duration::from_secs(5),
            best_effort: vec![n("batch")],
            stale_after: None,
            be: BeConfig::default(),
        }
    );
}

#[test]
fn staleness_and_best_effort_thresholds() {
    let spec = ok(
        &with(
            "latency_source = \"probe\"\nprobe = \"tcp://127.0.0.1:6379\"\nstale_after_ms = 1500\nbest_effort = [\"batch\"]\nbe_steps = 4\nbe_grow_above = 0.5\nbe_cut_below = 0.2\n",
        ),
        &vm8(),
    );
    let slo = &spec.overlays[0].slo;
    assert_eq!(slo.stale_after, Some(Duration::from_millis(1500)));
    assert_eq!(
        slo.be,
        BeConfig {
            steps: 4,
            grow_above: 0.5,
            cut_below: 0.2,
            ..BeConfig::default()
        }
    );
}

#[test]
fn an_access_log_and_its_formats() {
    let spec = ok(
        &with("latency_source = \"access_log\"\naccess_log = \"/var/log/nginx/access.log\"\nlog_field = 5\nlog_unit = \"ms\"\n"),
        &vm8(),
    );
    assert_eq!(
        spec.overlays[0].slo.source,
        LatencySource::AccessLog(AccessLogSpec {
            path: "/var/log/nginx/access.log".into(),
            format: LogFormat::Field {
                index: 5,
                unit: TimeUnit::Ms
            },
        })
    );
    let spec = ok(
        &with("latency_source = \"access_log\"\naccess_log = \"/l\"\nlog_format = \"haproxy\"\n"),
        &vm8(),
    );
    let LatencySource::AccessLog(l) = &spec.overlays[0].slo.source else {
        panic!("{:?}", spec.overlays[0].slo);
    };
    assert_eq!(l.format, LogFormat::Haproxy);
}

#[test]
fn wrong_keys_are_refused_at_their_line() {
    for (extra, key, line) in [
        ("latency_source = \"guess\"\n", "overlay.shop.latency_source", "12:"),
        ("probe = \"http://a:1/\"\n", "overlay.shop.probe", "12:"),
        ("latency_source = \"probe\"\nprobe = \"http://a\"\n", "overlay.shop.probe", "13:"),
        ("latency_source = \"access_log\"\naccess_log = \"/l\"\nlog_format = \"haproxy\"\nlog_unit = \"ms\"\n", "overlay.shop.log_unit", "15:"),
        ("latency_source = \"access_log\"\n", "overlay.shop.access_log", ""),
        ("best_effort = [\"api\"]\n", "overlay.shop.best_effort[0]", ""),
        ("best_effort = [\"nobody\"]\n", "overlay.shop.best_effort[0]", ""),
        ("probe_timeout = 5\n", "probe_timeout", "12:"),
        ("stale_after_ms = 500\n", "overlay.shop.stale_after_ms", "12:"),
        ("latency_source = \"probe\"\nprobe = \"tcp://a:1\"\nstale_after_ms = 0\n", "overlay.shop.stale_after_ms", "14:"),
        ("be_steps = 4\n", "overlay.shop.be_steps", "12:"),
        ("best_effort = [\"batch\"]\nbe_cut_below = 0.5\n", "overlay.shop.be_grow_above", ""),
        ("best_effort = [\"batch\"]\nbe_steps = 0\n", "overlay.shop.be_steps", "13:"),
    ] {
        let e = err(&with(extra), &vm8());
        let text = e.to_string();
        assert!(text.contains(key), "{extra}: {text}");
        assert!(
            where_(&e).iter().any(|w| w.starts_with(line)),
            "{extra}: {:?}",
            where_(&e)
        );
    }
}
