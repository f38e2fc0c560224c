//! Property tests: the config is outside input, so arbitrary text, TOML-like
//! text and valid configs with arbitrary edits never panic; an accepted
//! config validates against the machine, a refused one names a line and
//! column inside the text. The fuzz target `config` runs the same parser
//! coverage-guided (on the same machine, `vm8`).

mod common;

use atoll_config::{parse, summary};
use common::*;
use proptest::prelude::*;

/// Every section the format has, valid on vm8.
const ALL_SECTIONS: &str = r#"epoch_ms = 20
default_island = "web"
[host]
cpus = "0"
[isolation]
mode = "isolate"
memory_reserve = 0.1
[island.web]
cpus = "1-3"
arbitration = "priority"
[island.batch]
cpus = "4-7"
policy = "batch"
[unit.api]
island = "web"
cpus = 1.5
memory_max = "2G"
io_limits = [{ device = "8:0", rbps = "100M" }]
adopt = [{ comm = "nginx" }, { uid = 33 }]
[unit.db]
island = "batch"
weight = 50
[overlay.shop]
units = ["api", "db"]
latency_us = 1000
[comm]
recipient = true
units = ["api"]
[recipe.enc]
priority = 1
[[recipe.enc.mode]]
id = 0
name = "low"
value = 0.5
cpu_quota = 1.0
[apps]
islands = ["batch"]
"#;

fn check(text: &str) -> Result<(), TestCaseError> {
    let topo = vm8();
    match parse(text, "prop.toml", &topo) {
        Ok(spec) => {
            prop_assert!(spec.validate(&topo).is_ok());
            let _ = summary(&spec);
        }
        Err(e) => {
            let lines = text.lines().count().max(1);
            for d in &e.diagnostics {
                prop_assert!(d.line >= 1 && d.line <= lines + 1, "{d:?} in {lines} lines");
                prop_assert!(d.column >= 1);
            }
            prop_assert!(!e.to_string().is_empty());
        }
    }
    Ok(())
}

#[test]
fn the_base_config_is_valid() {
    ok(ALL_SECTIONS, &vm8());
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        check(&text)?;
    }

    #[test]
    fn toml_like_text_never_panics(
        text in r#"(\[{1,2}[a-z._]{0,12}\]{1,2}\n|[a-z_.]{1,12} = ("[0-9a-z,-]{0,8}"|[0-9.e-]{1,6}|true|\[[0-9", ]{0,10}\]|\{ [a-z]{1,6} = [0-9]{1,3} \})\n){0,12}"#,
    ) {
        check(&text)?;
    }

    #[test]
    fn edited_configs_never_panic(
        at in any::<prop::sample::Index>(),
        cut in 0usize..20,
        insert in r#"[a-z0-9 ."=\[\]{},\n-]{0,12}"#,
    ) {
        // Replace up to `cut` bytes at a char boundary with `insert`.
        let text = ALL_SECTIONS;
        let mut start = at.index(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (start + cut).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let edited = format!("{}{}{}", &text[..start], insert, &text[end..]);
        check(&edited)?;
    }
}
