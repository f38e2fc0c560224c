//! Protocol lines: `atoll_proto::decode_request` and `decode_response`.
//!
//! Properties: no panic; a decoded request or reply encodes to one line that
//! decodes again to the same message (floats within the last bit, see
//! `atoll_fuzz::json_close`).
#![no_main]

use atoll_proto::{decode_request, decode_response, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The daemon and clients read lines as UTF-8 text.
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(req) = decode_request(line) {
        let again = encode(&req);
        assert!(again.ends_with('\n') && !again[..again.len() - 1].contains('\n'));
        let back = decode_request(&again)
            .unwrap_or_else(|e| panic!("re-encoded request {again:?} does not decode: {e}"));
        let (a, b) = (
            serde_json::to_value(&req).expect("request to JSON"),
            serde_json::to_value(&back).expect("request to JSON"),
        );
        assert!(atoll_fuzz::json_close(&a, &b), "{a} != {b}");
    }
    if let Ok(resp) = decode_response(line) {
        let again = encode(&resp);
        let back = decode_response(&again)
            .unwrap_or_else(|e| panic!("re-encoded reply {again:?} does not decode: {e}"));
        let (a, b) = (
            serde_json::to_value(&resp).expect("reply to JSON"),
            serde_json::to_value(&back).expect("reply to JSON"),
        );
        assert!(atoll_fuzz::json_close(&a, &b), "{a} != {b}");
    }
});
