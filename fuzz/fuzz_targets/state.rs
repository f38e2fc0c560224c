//! The daemon's state file: `atoll_daemon::state::decode`.
//!
//! Each input is decoded twice: as a whole state file (envelope, checksum
//! and all), and as the state JSON wrapped in an envelope with the right
//! checksum, so that the fuzzer gets past the CRC-32 to the typed state and
//! the unknown-field check.
//!
//! Properties: no panic (also when the coordination part is opened); a
//! decoded state written back the way `save` writes it decodes to the same
//! state (floats within the last bit).
#![no_main]

use std::path::Path;

use atoll_daemon::state::{decode, SavedState};
use libfuzzer_sys::fuzz_target;

fn check(text: &str) {
    let path = Path::new("/var/lib/atoll/state.json");
    let state = match decode(text, path) {
        Ok(state) => state,
        Err(e) => {
            if atoll_fuzz::verbose() {
                eprintln!("refused: {e}");
            }
            return;
        }
    };
    if atoll_fuzz::verbose() {
        eprintln!(
            "accepted: {} units, {} processes",
            state.units.len(),
            state.processes.len()
        );
    }
    // The coordination part is checked when a restart opens it: an answer,
    // never a panic.
    if let Some(c) = &state.coordination {
        let opened = c.open();
        if atoll_fuzz::verbose() {
            eprintln!("coordination: {:?}", opened.map(|s| s.loans.len()));
        }
    }
    let json = serde_json::to_string_pretty(&state).expect("a decoded state serializes");
    let back: SavedState = decode(&atoll_fuzz::state_envelope(&json), path)
        .unwrap_or_else(|e| panic!("re-encoded state does not decode: {e}\n{json}"));
    let (a, b) = (
        serde_json::to_value(&state).expect("state to JSON"),
        serde_json::to_value(&back).expect("state to JSON"),
    );
    assert!(atoll_fuzz::json_close(&a, &b), "{a} != {b}");
}

fuzz_target!(|data: &[u8]| {
    // `load` reads the file with `read_to_string`.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    check(text);
    // `save` writes the state with no white space around it, and the
    // checksum covers exactly the value's bytes.
    check(&atoll_fuzz::state_envelope(
        text.trim_matches(&[' ', '\t', '\n', '\r'][..]),
    ));
});
