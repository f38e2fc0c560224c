//! The config file: TOML text to a validated `PlatformSpec`, on a fixed
//! 8-CPU, 2-node machine (see `atoll_fuzz::vm8`).
//!
//! Properties: no panic; an accepted config validates against the machine
//! and has a summary; a refused one renders its diagnostics (file, line,
//! column, key), which index the text by byte offsets.
#![no_main]

use std::sync::OnceLock;

use atoll_core::topology::Topology;
use libfuzzer_sys::fuzz_target;

fn topology() -> &'static Topology {
    static TOPO: OnceLock<Topology> = OnceLock::new();
    TOPO.get_or_init(atoll_fuzz::vm8)
}

fuzz_target!(|data: &[u8]| {
    // `atoll_config::load` reads the file with `read_to_string`: text that
    // is not UTF-8 never reaches the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let topo = topology();
    let result = atoll_config::parse(text, "fuzz.toml", topo);
    if atoll_fuzz::verbose() {
        match &result {
            Ok(spec) => eprintln!(
                "accepted: {} islands, {} units",
                spec.islands.len(),
                spec.units.len()
            ),
            Err(e) => eprintln!("refused:\n{e}"),
        }
    }
    match result {
        Ok(spec) => {
            assert!(
                spec.validate(topo).is_ok(),
                "accepted spec does not validate"
            );
            let _ = atoll_config::summary(&spec);
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
        }
    }
});
