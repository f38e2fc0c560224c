//! Strict decoding of whole lines: duplicate keys and field limits (see
//! [`crate::strict`]), as the daemon sees them.

use super::*;

fn refused(line: &str) -> String {
    match decode_request(line) {
        Ok(r) => panic!("accepted {line}: {r:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_reviews_line_does_not_stop_the_daemon() {
    let line = r#"{"v":1,"id":1,"op":"status","op":"stop"}"#;
    let e = decode_request(line).unwrap_err();
    assert!(
        matches!(
            &e,
            DecodeError::Strict {
                violation: strict::Violation::DuplicateKey { key, object },
                ..
            } if key == "op" && object.is_empty()
        ),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(text.contains("duplicate key \"op\""), "{text}");
    // The other order, and duplicates of the envelope's own keys.
    assert!(refused(r#"{"v":1,"id":1,"op":"stop","op":"status"}"#).contains("\"op\""));
    assert!(refused(r#"{"v":1,"id":1,"id":2,"op":"status"}"#).contains("\"id\""));
    assert!(refused(r#"{"v":1,"v":1,"id":1,"op":"status"}"#).contains("\"v\""));
}

#[test]
fn duplicate_keys_are_refused_inside_requests_too() {
    let t = refused(r#"{"v":1,"id":1,"op":"adopt","unit":"a","pid":7,"unit":"b"}"#);
    assert!(t.contains("duplicate key \"unit\""), "{t}");
    let t = refused(
        r#"{"v":1,"id":2,"op":"coordinate","message":{"msg":"tune","resource":"cpu_time","dir":"up","dir":"down","overlay":"shop","unit":"api"}}"#,
    );
    assert!(t.contains("duplicate key \"dir\" in field message"), "{t}");
    let t = refused(
        r#"{"v":1,"id":3,"op":"app_register","recipe":{"inline":{"name":"r","modes":[{"id":0,"value":1,"value":0.5,"needs":{"cpu_quota":1}}]}}}"#,
    );
    assert!(
        t.contains("duplicate key \"value\" in field recipe.inline.modes[0]"),
        "{t}"
    );
}

#[test]
fn replies_with_a_key_twice_are_refused() {
    let e = decode_response(r#"{"v":1,"id":3,"ok":{"kind":"stopping"},"id":4}"#).unwrap_err();
    assert!(e.to_string().contains("duplicate key \"id\""), "{e}");
    let e = decode_response(
        r#"{"v":1,"id":3,"err":{"code":"not_found","code":"backend","message":"m"}}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("in field err"), "{e}");
}

#[test]
fn over_long_fields_are_bad_requests_naming_the_field_and_the_limit() {
    let unit = "u".repeat(MAX_NAME + 1);
    let t = refused(&format!(
        r#"{{"v":1,"id":1,"op":"adopt","unit":"{unit}","pid":7}}"#
    ));
    assert!(t.contains("field unit is 256 bytes long"), "{t}");
    assert!(t.contains("limit of 255 bytes"), "{t}");
    assert!(t.len() < 200, "the message does not echo the field: {t}");
    let t = refused(&format!(
        r#"{{"v":1,"id":1,"op":"why","subject":"{}"}}"#,
        "s".repeat(5000)
    ));
    assert!(t.contains("field subject is 5000 bytes long"), "{t}");
    let t = refused(&format!(
        r#"{{"v":1,"id":1,"op":"app_register","recipe":{{"named":"{}"}}}}"#,
        "r".repeat(300)
    ));
    assert!(t.contains("field recipe.named is 300 bytes"), "{t}");
    // A mode's label may be longer than a name, up to the free-text limit.
    let mode = |label: &str| {
        format!(
            r#"{{"v":1,"id":1,"op":"app_register","recipe":{{"inline":{{"name":"r","modes":[{{"id":0,"name":"{label}","value":1,"needs":{{"cpu_quota":1}}}}]}}}}}}"#
        )
    };
    decode_request(&mode(&"l".repeat(1000))).unwrap();
    let t = refused(&mode(&"l".repeat(MAX_TEXT + 1)));
    assert!(
        t.contains("field recipe.inline.modes[0].name is 4097 bytes long, over the limit of 4096"),
        "{t}"
    );
}

#[test]
fn over_long_arrays_are_bad_requests() {
    let modes: Vec<String> = (0..MAX_ITEMS + 1)
        .map(|i| {
            format!(
                r#"{{"id":{},"value":1,"needs":{{"cpu_quota":1}}}}"#,
                i % 256
            )
        })
        .collect();
    let line = format!(
        r#"{{"v":1,"id":1,"op":"app_register","recipe":{{"inline":{{"name":"r","modes":[{}]}}}}}}"#,
        modes.join(",")
    );
    assert!(
        line.len() <= MAX_LINE,
        "within the line limit: {}",
        line.len()
    );
    let t = refused(&line);
    assert!(
        t.contains("field recipe.inline.modes has more than 1024 items"),
        "{t}"
    );
    let units: Vec<&str> = vec![r#"["a","b"]"#; MAX_ITEMS + 1];
    let line = format!(
        r#"{{"v":1,"id":1,"op":"coordinate","message":{{"msg":"register","overlay":{{"name":"o","priority":1,"units":[{}],"property":{{"kind":"throughput_floor","per_s":1}}}}}}}}"#,
        units.join(",")
    );
    let t = refused(&line);
    assert!(
        t.contains("field message.overlay.units has more than 1024 items"),
        "{t}"
    );
}

#[test]
fn what_a_real_client_sends_is_within_the_limits() {
    let name = "n".repeat(64);
    decode_request(&format!(
        r#"{{"v":1,"id":1,"op":"adopt","unit":"{name}","pid":7,"island":"{name}"}}"#
    ))
    .unwrap();
    decode_request(&format!(
        r#"{{"v":1,"id":1,"op":"why","subject":"{name}/{name}"}}"#
    ))
    .unwrap();
}

#[test]
fn run_time_changes_decode_strictly() {
    let r = decode_request(
        r#"{"v":1,"id":1,"op":"unit_add","unit":"b","island":"web","settings":{"cpus":1.5,"memory_max":1024}}"#,
    )
    .unwrap();
    assert_eq!(
        r.request,
        Request::UnitAdd {
            unit: "b".into(),
            island: Some("web".into()),
            settings: runtime::UnitSettings {
                cpus: Some(1.5),
                memory_max: Some(1024),
                ..Default::default()
            },
        }
    );
    let t = refused(r#"{"v":1,"id":2,"op":"unit_set","unit":"b","settings":{"cpus":1,"cpus":2}}"#);
    assert!(
        t.contains("duplicate key \"cpus\" in field settings"),
        "{t}"
    );
    let t = refused(r#"{"v":1,"id":3,"op":"unit_set","unit":"b","settings":{"rt_priority":5}}"#);
    assert!(t.contains("unknown field `rt_priority`"), "{t}");
    let t = refused(r#"{"v":1,"id":4,"op":"unit_rm","unit":"b","pid":3}"#);
    assert!(t.contains("unknown field `pid`"), "{t}");
    let t = refused(
        r#"{"v":1,"id":5,"op":"overlay_add","overlay":"o","settings":{"units":["a"],"latency":5}}"#,
    );
    assert!(t.contains("unknown field `latency`"), "{t}");
    let r = decode_request(
        r#"{"v":1,"id":5,"op":"overlay_add","overlay":"b","settings":{"power_cap_watts":95.5}}"#,
    )
    .unwrap();
    match r.request {
        Request::OverlayAdd { settings, .. } => {
            assert_eq!(settings.power_cap_watts, Some(95.5));
            assert!(settings.has_property());
        }
        other => panic!("{other:?}"),
    }
    let r = decode_request(r#"{"v":1,"id":6,"op":"config_dump"}"#).unwrap();
    assert_eq!(r.request, Request::ConfigDump {});
}

#[test]
fn a_request_is_one_object_with_v_and_id_and_nothing_after_it() {
    let t = refused(r#"{"v":1,"id":1,"op":"status"} {}"#);
    assert!(t.contains("trailing characters"), "{t}");
    assert!(refused(r#"{"id":1,"op":"status"}"#).contains("missing field `v`"));
    assert!(refused(r#"{"v":1,"op":"status"}"#).contains("missing field `id`"));
    assert!(refused("[1,2]").contains("invalid type"));
    assert!(refused(r#"{"v":-1,"id":1,"op":"status"}"#).contains("expected u32"));
    assert!(refused(r#"{"v":1,"id":1,"op":"status","x":1}"#).contains("unknown field"));
    assert!(refused("hello").contains("expected value at line 1 column 1"));
    let r = decode_request("{\"v\":1,\"id\":1,\"op\":\"status\"}\r\n").unwrap();
    assert_eq!((r.v, r.id, r.request), (1, 1, Request::Status {}));
}
