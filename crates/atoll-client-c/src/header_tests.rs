//! Keeps `include/atoll.h` and this crate in step: the same `atoll_*`
//! functions (each exported with `#[no_mangle]`, from `lib.rs` or
//! `apps.rs`), the same `ATOLL_*` constants with the same values, the same
//! default socket and "no generation".

use std::collections::BTreeMap;

const HEADER: &str = include_str!("../include/atoll.h");
const LIB: &str = include_str!("lib.rs");
/// Every file with `extern "C"` functions.
const SOURCES: [&str; 2] = [LIB, include_str!("apps.rs")];

/// The header without its comments.
fn strip_c_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        match rest[i + 2..].find("*/") {
            Some(j) => rest = &rest[i + 2 + j + 2..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &str, start: usize) -> &str {
    let end = s[start..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(s.len(), |n| start + n);
    &s[start..end]
}

/// Names of the functions the header declares: `atoll_x` followed by `(`.
fn header_functions() -> Vec<String> {
    let code = strip_c_comments(HEADER);
    let mut names = Vec::new();
    for (i, _) in code.match_indices("atoll_") {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let name = ident_at(&code, i);
        if code[i + name.len()..].trim_start().starts_with('(') {
            names.push(name.to_string());
        }
    }
    names.sort();
    names
}

/// `ATOLL_X = value` entries of the header's enums.
fn header_constants() -> BTreeMap<String, i64> {
    let code = strip_c_comments(HEADER);
    let mut out = BTreeMap::new();
    for line in code.lines() {
        let line = line.trim().trim_end_matches(',');
        if let Some((name, value)) = line.split_once('=') {
            let name = name.trim();
            if name.starts_with("ATOLL_") {
                let v = value.trim().parse().expect("an integer value");
                assert!(out.insert(name.to_string(), v).is_none(), "{name} twice");
            }
        }
    }
    out
}

/// Functions of lib.rs declared `extern "C"`, each checked to be
/// `#[no_mangle]`.
fn rust_functions() -> Vec<String> {
    let mut names = Vec::new();
    for source in SOURCES {
        let lines: Vec<&str> = source.lines().collect();
        names.extend(extern_functions(&lines));
    }
    names.sort();
    names
}

fn extern_functions(lines: &[&str]) -> Vec<String> {
    let mut names = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        if let Some(i) = line.find("extern \"C\" fn ") {
            let name = ident_at(line, i + "extern \"C\" fn ".len());
            assert!(
                n > 0 && lines[n - 1].trim() == "#[no_mangle]",
                "{name} is extern \"C\" but not #[no_mangle]"
            );
            assert!(line.trim_start().starts_with("pub "), "{name} is not pub");
            names.push(name.to_string());
        }
    }
    names
}

/// `pub const ATOLL_X: c_int = value;` of lib.rs.
fn rust_constants() -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in LIB.lines() {
        if let Some(rest) = line.strip_prefix("pub const ATOLL_") {
            let (name, value) = rest.split_once(": c_int =").expect("a c_int constant");
            let v = value.trim().trim_end_matches(';').parse().expect("a value");
            out.insert(format!("ATOLL_{name}"), v);
        }
    }
    out
}

#[test]
fn the_header_declares_exactly_the_exported_functions() {
    let header = header_functions();
    let rust = rust_functions();
    assert!(header.len() >= 25, "too few functions found: {header:?}");
    assert!(header.contains(&"atoll_app_poll".to_string()), "{header:?}");
    assert_eq!(header, rust, "header (left) and src/lib.rs (right) differ");
}

#[test]
fn the_header_constants_match_the_rust_ones() {
    let header = header_constants();
    let rust = rust_constants();
    assert!(header.contains_key("ATOLL_ENOT_FOUND"), "{header:?}");
    assert_eq!(header, rust, "header (left) and src/lib.rs (right) differ");
    // The parsed text is the compiled value.
    assert_eq!(rust["ATOLL_ENOT_FOUND"], i64::from(crate::ATOLL_ENOT_FOUND));
    assert_eq!(rust["ATOLL_MEMORY"], i64::from(crate::ATOLL_MEMORY));
    assert_eq!(rust["ATOLL_CHANGED"], i64::from(crate::ATOLL_CHANGED));
    assert_eq!(
        rust["ATOLL_APP_RUNNING"],
        i64::from(crate::ATOLL_APP_RUNNING)
    );
}

#[test]
fn the_header_default_socket_is_the_protocol_default() {
    let want = format!(
        "#define ATOLL_DEFAULT_SOCKET \"{}\"",
        atoll_proto::DEFAULT_SOCKET
    );
    assert!(HEADER.lines().any(|l| l.trim() == want), "missing: {want}");
    let want = "#define ATOLL_NO_GENERATION UINT64_MAX";
    assert!(HEADER.lines().any(|l| l.trim() == want), "missing: {want}");
    assert_eq!(crate::apps::ATOLL_NO_GENERATION, u64::MAX);
}

#[test]
fn the_parsers_see_what_they_should() {
    // Guards the guards: comments are not declarations.
    let c = strip_c_comments("/* atoll_fake(x) */ int atoll_real(void); // atoll_no()\n");
    assert!(!c.contains("atoll_fake") && !c.contains("atoll_no"));
    assert!(c.contains("atoll_real"));
}

/// The value of `#define NAME VALUE` in the header.
fn header_define(name: &str) -> String {
    let prefix = format!("#define {name} ");
    let mut found = HEADER
        .lines()
        .filter_map(|l| l.trim().strip_prefix(&prefix));
    let value = found.next().unwrap_or_else(|| panic!("no {prefix}"));
    assert!(found.next().is_none(), "{name} twice");
    value.trim().to_string()
}

#[test]
fn the_header_version_is_the_crate_version() {
    assert_eq!(
        header_define("ATOLL_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MAJOR")
    );
    assert_eq!(
        header_define("ATOLL_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_MINOR")
    );
    assert_eq!(
        header_define("ATOLL_VERSION_PATCH"),
        env!("CARGO_PKG_VERSION_PATCH")
    );
    assert_eq!(
        header_define("ATOLL_VERSION_STRING"),
        format!("\"{}\"", env!("CARGO_PKG_VERSION"))
    );
    // SAFETY: atoll_version returns a static NUL-terminated string.
    let loaded = unsafe { std::ffi::CStr::from_ptr(crate::atoll_version()) };
    assert_eq!(loaded.to_str(), Ok(env!("CARGO_PKG_VERSION")));
}

#[test]
fn the_python_package_has_the_crate_version() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../clients/python");
    let pyproject = std::fs::read_to_string(format!("{root}/pyproject.toml")).unwrap();
    let want = format!("version = \"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(
        pyproject.lines().any(|l| l == want),
        "pyproject.toml: no {want}"
    );
    let init = std::fs::read_to_string(format!("{root}/src/atoll_client/__init__.py")).unwrap();
    let want = format!("__version__ = \"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(init.lines().any(|l| l == want), "__init__.py: no {want}");
}
