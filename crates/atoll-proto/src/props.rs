//! Property tests of the line decoders: arbitrary text never panics, and
//! requests and replies built from arbitrary fields encode to one line that
//! decodes back to them. The fuzz target `proto` runs the decoders
//! coverage-guided.

use proptest::prelude::*;

use crate::*;

/// Floats with a short exact decimal form, so that a print/parse round
/// trip is exact whatever float parser serde_json uses.
fn quarter() -> impl Strategy<Value = f64> {
    (-4_000_000i64..4_000_000).prop_map(|n| n as f64 / 4.0)
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z][a-z0-9_-]{0,12}", any::<String>()]
}

fn requests() -> impl Strategy<Value = Request> {
    prop_oneof![
        Just(Request::Status {}),
        Just(Request::Stop { wait: false }),
        Just(Request::Stop { wait: true }),
        Just(Request::Overlays {}),
        Just(Request::Apps {}),
        (
            text(),
            any::<u32>(),
            proptest::option::of(text()),
            proptest::option::of((text(), proptest::option::of(any::<u32>())))
        )
            .prop_map(|(unit, pid, island, network)| Request::Adopt {
                unit,
                pid,
                island,
                network: network.map(|(island, share)| runtime::NetClassSettings {
                    island,
                    share,
                    ..Default::default()
                }),
            }),
        (
            proptest::option::of(text()),
            proptest::option::of(any::<usize>())
        )
            .prop_map(|(subject, limit)| Request::Why { subject, limit }),
        (proptest::option::of(text())).prop_map(|from| Request::Coordinate {
            from,
            message: coord::Message::Null,
        }),
        (text(), quarter()).prop_map(|(overlay, value)| Request::Report { overlay, value }),
        (text(), proptest::option::of(any::<u32>())).prop_map(|(name, pid)| {
            Request::AppRegister {
                recipe: apps::RecipeRef::Named(name),
                pid,
            }
        }),
        (any::<u64>(), proptest::option::of(any::<u64>()))
            .prop_map(|(app, after)| Request::AppPoll { app, after }),
        (any::<u64>(), any::<u64>(), proptest::option::of(quarter())).prop_map(
            |(app, cycles, goal_cps)| Request::AppReport {
                app,
                cycles,
                goal_cps
            }
        ),
        any::<u64>().prop_map(|app| Request::AppDone { app }),
        (
            text(),
            proptest::option::of(text()),
            proptest::option::of(quarter()),
            proptest::option::of(any::<u64>())
        )
            .prop_map(|(unit, island, cpus, memory_max)| Request::UnitAdd {
                unit,
                island,
                settings: runtime::UnitSettings {
                    cpus,
                    memory_max,
                    ..Default::default()
                },
            }),
        (text(), proptest::option::of(any::<u32>())).prop_map(|(unit, weight)| {
            Request::UnitSet {
                unit,
                settings: runtime::UnitSettings {
                    weight,
                    clear_network: weight.is_some_and(|w| w % 2 == 0),
                    ..Default::default()
                },
            }
        }),
        text().prop_map(|unit| Request::UnitRm { unit }),
        (
            text(),
            proptest::collection::vec(text(), 0..4),
            any::<u64>()
        )
            .prop_map(|(overlay, units, latency_us)| Request::OverlayAdd {
                overlay,
                settings: runtime::OverlaySettings {
                    units: Some(units),
                    latency_us: Some(latency_us),
                    ..Default::default()
                },
            }),
        (text(), proptest::option::of(any::<u8>())).prop_map(|(overlay, priority)| {
            Request::OverlaySet {
                overlay,
                settings: runtime::OverlaySettings {
                    priority,
                    ..Default::default()
                },
            }
        }),
        text().prop_map(|overlay| Request::OverlayRm { overlay }),
        text().prop_map(|overlay| Request::OverlayShow { overlay }),
        Just(Request::ConfigDump {}),
    ]
}

proptest! {
    #[test]
    fn arbitrary_lines_never_panic(
        line in any::<String>(),
        json in r#"[{}\[\]":,0-9a-z_ .e-]{0,80}"#,
    ) {
        for l in [&line, &json, &format!("{{\"v\":1,\"id\":1,{json}")] {
            let _ = decode_request(l);
            let _ = decode_response(l);
        }
    }

    #[test]
    fn requests_roundtrip(v in any::<u32>(), id in any::<u64>(), request in requests()) {
        let env = RequestEnvelope { v, id, request };
        let line = encode(&env);
        prop_assert!(line.ends_with('\n'));
        prop_assert_eq!(line.matches('\n').count(), 1, "{}", line);
        let back = decode_request(&line).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, env);
    }

    #[test]
    fn error_replies_roundtrip(id in any::<u64>(), message in any::<String>()) {
        let r = ResponseEnvelope::err(id, ErrorCode::NotFound, message.clone());
        let back = decode_response(&encode(&r)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back.id, id);
        let e = back.into_result().expect_err("an error reply");
        prop_assert_eq!((e.code, e.message), (ErrorCode::NotFound, message));
    }
}
