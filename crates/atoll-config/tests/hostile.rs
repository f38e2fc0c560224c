//! Input written to hurt: names the kernel could not take, text that is not
//! UTF-8, and values of any length. Every problem is still reported at its
//! place, and no message grows with the input.

mod common;

use atoll_config::{load, KEY_MAX, MESSAGE_MAX, QUOTE_MAX};
use common::*;

#[test]
fn a_lone_island_with_a_bad_name_is_an_error_at_its_key() {
    for (name, why) in [
        ("a/b", "'/' is not allowed"),
        ("a b", "' ' is not allowed"),
        ("é", "'é' is not allowed"),
        ("", "must be 1 to 64 characters"),
    ] {
        let text = format!("[host]\ncpus = \"0\"\n\n[island.\"{name}\"]\ncpus = \"1-3\"\n");
        let e = err(&text, &vm8());
        assert_eq!(where_(&e), [format!("4:1 island.{name}")], "{name:?}:\n{e}");
        assert!(e.diagnostics[0].message.contains(why), "{e}");
        let line = e.to_string();
        assert!(
            line.starts_with(&format!("test.toml:4:1: island.{name}: name ")),
            "{line}"
        );
    }
    // Written as a dotted key or an inline table, the place is the key's.
    let e = err("island.\"a/b\".cpus = \"1-3\"\n", &vm8());
    assert_eq!(where_(&e), ["1:8 island.a/b"], "{e}");
    let e = err("[island]\n\"a b\" = { cpus = \"1-3\" }\n", &vm8());
    assert_eq!(where_(&e), ["2:1 island.a b"], "{e}");
    // A unit with no island to go to only follows from it.
    let e = err(
        "[island.\"a b\"]\ncpus = \"1-3\"\n[unit.u]\ncpus = 1\n",
        &vm8(),
    );
    assert_eq!(where_(&e), ["1:1 island.a b"], "{e}");
}

#[test]
fn bad_unit_overlay_and_recipe_names_are_errors_at_their_keys() {
    let e = err(
        r#"[host]
cpus = "0"
[island.web]
cpus = "1-3"
[unit."a b"]
cpus = 1
[overlay."x/y"]
cpu_cap = 1.0
[recipe."r.r"]
[[recipe."r.r".mode]]
id = 0
value = 1.0
cpu_quota = 1.0
"#,
        &vm8(),
    );
    assert_eq!(
        where_(&e),
        ["5:1 unit.a b", "7:1 overlay.x/y", "9:1 recipe.r.r"],
        "{e}"
    );
}

#[test]
fn text_that_is_not_utf8_is_an_error_at_the_first_bad_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    let mut bytes =
        b"[host]\ncpus = \"0\"\n[island.web]\n# caf\xc3\xa9 ok\ncpus = \"1-3\" # ".to_vec();
    let offset = bytes.len();
    bytes.extend_from_slice(b"\xff\xfe here\n");
    std::fs::write(&path, &bytes).unwrap();
    let e = load(&path, &vm8()).unwrap_err();
    assert_eq!(e.diagnostics.len(), 1, "{e}");
    let d = &e.diagnostics[0];
    assert_eq!((d.line, d.column), (5, 16), "{e}");
    assert_eq!(d.source, path.display().to_string());
    assert!(d.message.contains(&format!("offset {offset}")), "{e}");
    assert!(d.message.contains("0xff"), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{}:5:16: not UTF-8", path.display())),
        "{e}"
    );
    // A multi-byte character cut short at the very start.
    std::fs::write(&path, b"\xc3").unwrap();
    let e = load(&path, &vm8()).unwrap_err();
    assert_eq!(e.positions(), ["1:1"], "{e}");
    assert!(e.diagnostics[0].message.contains("offset 0"), "{e}");
    // What cannot be read at all still says so, without a position.
    let e = load(&dir.path().join("missing.toml"), &vm8()).unwrap_err();
    assert_eq!(e.positions(), ["0:0"]);
}

/// The longest line a diagnostic may print here: the file name, position,
/// key and message, each bounded.
const LINE_MAX: usize = "test.toml:99:9999: ".len() + KEY_MAX + MESSAGE_MAX + 16;

fn assert_short(what: &str, text: &str) {
    let e = match atoll_config::parse(text, "test.toml", &vm8()) {
        Ok(_) => panic!("{what}: accepted"),
        Err(e) => e,
    };
    for d in &e.diagnostics {
        let line = d.to_string();
        assert!(
            line.len() <= LINE_MAX,
            "{what}: {} bytes: {line}",
            line.len()
        );
        assert!(
            !line.contains(&"x".repeat(QUOTE_MAX + 1)),
            "{what}: quotes more than {QUOTE_MAX} characters: {line}"
        );
    }
}

#[test]
fn no_message_grows_with_the_input() {
    let long = "x".repeat(100_000);
    let cases = [
        ("island name", format!("[host]\ncpus = \"0\"\n[island.{long}]\ncpus = \"1-3\"\n")),
        ("unit name", format!("[island.web]\ncpus = \"1-3\"\n[unit.{long}]\n")),
        ("unknown key", format!("[island.web]\ncpus = \"1-3\"\n{long} = 1\n")),
        ("unknown top key", format!("{long} = 1\n[island.web]\ncpus = \"1-3\"\n")),
        ("deep unknown key", format!("[island.web]\ncpus = \"1-3\"\n{} = 1\n", [long.as_str(); 3].join("."))),
        ("cpu list", format!("[island.web]\ncpus = \"{long}\"\n")),
        ("wrong type", format!("epoch_ms = \"{long}\"\n[island.web]\ncpus = \"1-3\"\n")),
        ("policy", format!("[island.web]\ncpus = \"1-3\"\npolicy = \"{long}\"\n")),
        ("size", format!("[island.web]\ncpus = \"1-3\"\n[unit.a]\nmemory_max = \"{long}\"\n")),
        ("comm", format!("[island.web]\ncpus = \"1-3\"\n[unit.a]\nadopt = [{{ comm = \"{long}\" }}]\n")),
        ("exe", format!("[island.web]\ncpus = \"1-3\"\n[unit.a]\nadopt = [{{ exe = \"{long}\" }}]\n")),
        ("cgroup", format!("[island.web]\ncpus = \"1-3\"\n[unit.a]\nadopt = [{{ cgroup = \"{long}\" }}]\n")),
        ("unit island", format!("[island.web]\ncpus = \"1-3\"\n[unit.a]\nisland = \"{long}\"\n")),
        ("default island", format!("default_island = \"{long}\"\n[island.web]\ncpus = \"1-3\"\n")),
        ("syntax", format!("[island.web]\ncpus = \"1-3\n{long}\n")),
        ("bare syntax", format!("{long}\n")),
        ("overlay unit", format!("[island.web]\ncpus = \"1-3\"\n[overlay.o]\nunits = [\"{long}\"]\ncpu_cap = 1.0\n")),
        ("mode label", format!("[island.web]\ncpus = \"1-3\"\n[recipe.r]\n[[recipe.r.mode]]\nid = 0\nname = \"{long}\"\nvalue = 9.0\ncpu_quota = 1.0\n")),
    ];
    for (what, text) in &cases {
        assert_short(what, text);
    }
}
